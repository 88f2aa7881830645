"""Which inputs a kernel's wrong outputs read that their reference does not, or ignore that it
reads: evidence, from the kernel's own behaviour, of where a wrong value comes from.

A bug that reads the wrong data (a row stride taken as 0, a load masked against the whole array
instead of its segment, a query aligned to the wrong key) shows itself through several failure
keys: a masked element that should be fixed is not (``masking``), an element whose reference is
free is off (``accuracy``). The minimal examples of two such keys often do not fail each other's
way (a one-column softmax cannot show a wrong bias as ``accuracy``), yet both have one cause: in
both, the wrong elements depend on inputs they should not, or not on inputs they should.

:func:`anomalies` finds that on a small example: each floating input element is changed alone
(an input of more than :data:`PER_INPUT` elements in as many runs of neighbouring elements), the
kernel is launched again and the reference computed again, and for every wrong element (a
finite kernel value off its reference) the two changes are compared against the size of its
error. The element *reads* an input where the kernel's value moves by a tenth of its error or
more while the reference's does not move (by at most a hundredth of it, or within tolerance);
it *ignores* it the other way round. What comes back is a set of ``(input name, "reads" |
"ignores")``: the duplicate check (``fuzz.duplicates.Duplicates.reads_alike``) takes two bugs
whose minimal examples' sets nest, with free choices (features, half dtypes) that nest, for one
bug. Two independent bugs that only scale a value (a softmax wrong by 1.01x for fp16, by 0.97x
for bf16 rows of odd length) read what their references read: no anomaly, no evidence.

A minimal example's values are what its shrink left: zeros where the failure does not need
them, and then a wrong element may depend on no input at all (a query of zeros scores every key
alike). :func:`revalued` draws such inputs again; where that call still fails the same way, its
anomalies are the example's too (``fuzz.duplicates.Duplicates.anomalies``). Two more calls made
of an example serve the duplicate check's ``fails_as``: :func:`finite` (its non-finite inputs
made finite: a NaN made of a special input hides what the bug does to ordinary values) and
:func:`tamed` (its values made smaller: an overflow hides it alike).

A ``masked-poison`` failure is such evidence already: the elements it poisons are those no
output depends on (``Target.poison``), so an output that moves when they do reads an input its
reference does not. :func:`poison_reads` tells which inputs: each input's poisoned elements are
set alone, and an input whose poison changes an output is read (a packed attention kernel that
read the keys of its sequence from the query offset came as an ``accuracy`` row and as a
``masked-poison`` row that failed no oracle: the keys it read past the data were poisoned).

Non-finite kernel values are left out (a NaN depends on nothing: it would ignore every input),
as are integer and boolean inputs (offsets, masks: changing one changes the case's structure).
An example that would take more than :data:`MAX_LAUNCHES` launches, or of more than
:data:`MAX_ELEMENTS` elements, is not analysed: a bug's minimal example is small; an unshrunk
one is not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable

    from fuzz.backends import Backend
    from fuzz.case import Case
    from fuzz.profiles import HuntOptions
    from fuzz.target import Target

PER_INPUT = 16  # changes of one input: each element, or so many runs of neighbouring ones
MAX_LAUNCHES = 96  # an example needing more is not analysed
# Nor one larger than a reproducer a maintainer reads: each launch recomputes the float64
# reference, and an unshrunk GPU case (98,304-262,144 elements) analysed past a slice's hard
# limit would outlast the time the slice has left there.
MAX_ELEMENTS = 4096
READS, IGNORES = "reads", "ignores"
MOVES, STILL = 0.1, 0.01  # of the wrong element's error: a change that explains it, or none
LEAST_PER_INPUT = 2  # changes of each input below which an analysis tells too little to run


def _changed(a: np.ndarray) -> np.ndarray:
    """Other values for some input elements (float64): finite ones moved by one (halved beyond
    1e3), a -inf, Inf or NaN taken to 0 (a key masked by its value made visible)."""
    return np.where(np.isfinite(a), np.where(np.abs(a) < 1e3, a + 1.0, a * 0.5), 0.0)


def _probes(case: Case, per_input: int = PER_INPUT) -> list[tuple[str, np.ndarray]]:
    """The changes to try: (input name, the flat indices of the elements changed together),
    ``per_input`` changes of each input at most."""
    from fuzz.arrays import dtype_name, is_float

    out = []
    for name, a in sorted(case.inputs.items()):
        if a.size and is_float(dtype_name(a.dtype)):
            out += [
                (name, run) for run in np.array_split(np.arange(a.size), min(a.size, per_input))
            ]
    return out


def _fitting(case: Case, launch: float, seconds: float | None) -> int:
    """How many changes of each input fit in ``seconds`` when one launch (with its reference)
    takes ``launch`` seconds: :data:`PER_INPUT`, fewer (coarser runs of elements, each input
    still changed) where the launches are slow, 0 where not even :data:`LEAST_PER_INPUT`
    fit (an interpreted GLA kernel's 80 launches took a GPU slice's whole time on a check that
    was then cut, twice)."""
    if seconds is None:
        return PER_INPUT
    inputs = len({name for name, _ in _probes(case, 1)})
    fit = int(seconds / max(launch, 1e-6) / max(inputs, 1))
    return min(PER_INPUT, fit) if fit >= LEAST_PER_INPUT else 0


def _wrong(ctx: Any) -> dict[str, np.ndarray]:
    """Each output's wrong elements with a finite kernel value: output -> (mask, error, bound)."""
    from fuzz.arrays import to_float64
    from fuzz.properties import excess

    out = {}
    for name, oracle in ctx.oracle.items():
        got = to_float64(ctx.clean.outputs[name])
        both = np.isfinite(got) & np.isfinite(oracle)
        with np.errstate(invalid="ignore", over="ignore"):  # (inf - inf where not both finite)
            err = np.where(both, np.abs(got - oracle), 0.0)
        bound = ctx.bound(name)
        mask = both & (excess(err, bound) > 1.0)
        if mask.any():
            out[name] = np.stack([mask.astype(np.float64), err, np.broadcast_to(bound, err.shape)])
    return out


def anomalies(
    target: Target,
    backend: Backend,
    options: HuntOptions,
    case: Case,
    in_time: Callable[[], None] | None = None,
    seconds: float | None = None,
) -> frozenset[tuple[str, str]] | None:
    """The ``(input, "reads" | "ignores")`` anomalies of ``case``'s wrong elements (see the
    module's docstring); None where nothing can be said (no finite wrong element, more launches
    than :data:`MAX_LAUNCHES`, a clean run that fails, or not enough ``seconds`` for the
    launches: :func:`_fitting`, timed by the first). ``in_time`` is called before each
    launch (and raises once its caller's time is up: a GPU campaign's slice overran its hard
    limit in these launches of an interpreted GLA kernel, and its worker was killed)."""
    import time

    from fuzz.arrays import to_float64
    from fuzz.properties import Context

    def context(c: Case) -> Context:
        return Context(target, backend, c, ref_device=options.ref_device)

    if case.size > MAX_ELEMENTS:
        return None
    if not _probes(case) or len(_probes(case)) > MAX_LAUNCHES:
        return None
    t0 = time.perf_counter()
    base = context(case)
    if base.clean.error is not None:
        return None
    wrong = _wrong(base)
    if not wrong:
        return None
    per_input = _fitting(case, time.perf_counter() - t0, seconds)
    if not per_input:
        return None
    probes = _probes(case, per_input)
    found: set[tuple[str, str]] = set()
    for name, run in probes:
        if in_time is not None:
            in_time()
        a = np.array(case.inputs[name], copy=True)
        flat = a.reshape(-1)
        flat[run] = _changed(to_float64(flat[run])).astype(a.dtype)
        ctx = context(case.replace(inputs={name: a}))
        launch = ctx.launch()
        if launch.error is not None or launch.declined is not None:
            continue  # (the kernel's own business: this change tells nothing)
        try:
            oracle = ctx.oracle
        except Exception:  # a reference that refuses the changed inputs: nothing told
            continue
        for out, (mask, err, bound) in wrong.items():
            if out not in launch.outputs or out not in oracle:
                continue
            on = mask > 0
            with np.errstate(invalid="ignore"):  # inf - inf: a NaN, taken as moved (inf) below
                moved = np.abs(
                    to_float64(launch.outputs[out]) - to_float64(base.clean.outputs[out])
                )
                ref = np.abs(oracle[out] - base.oracle[out])
            moved = np.where(np.isnan(moved), np.inf, moved)[on]
            ref = np.where(np.isnan(ref), np.inf, ref)[on]
            e, still = err[on], np.maximum(bound[on], STILL * err[on])
            if np.any((moved >= MOVES * e) & (moved > bound[on]) & (ref <= still)):
                found.add((name, READS))
            if np.any((ref >= MOVES * e) & (ref > bound[on]) & (moved <= still)):
                found.add((name, IGNORES))
    return frozenset(found)


def revalued(case: Case) -> Case | None:
    """``case`` with each floating input that holds one finite value throughout (what a shrink
    leaves of values its failure does not need: zeros) drawn again from a standard normal
    (seeded by the case, in the input's dtype; its non-finite elements, masks written as
    values, kept), or None where no input holds one value. A wrong element cannot be seen to
    read an input the shrink left at zero (nor anything, where all were): the same call with
    values that vary tells what it reads."""
    rng = np.random.default_rng(int(case.digest()[:8], 16))

    def drawn(a: np.ndarray) -> np.ndarray | None:
        finite = np.isfinite(a)
        if not finite.any() or np.unique(a[finite]).size != 1:
            return None
        return np.where(finite, rng.standard_normal(a.shape), a)

    return _changing(case, drawn)


def finite(case: Case) -> Case | None:
    """``case`` with the non-finite elements of its floating inputs made finite, or None where
    it has none: an Inf becomes the input's largest finite magnitude plus 16, of its sign (the
    most extreme of the input's values, well inside every floating dtype), a NaN 0. A NaN or
    Inf that a bug makes of a special input (``x * scale`` with the scale truncated to 0, an Inf
    key made NaN) hides what the bug does to ordinary values: the same call with ordinary
    values shows it (``fuzz.duplicates.fails_as``)."""

    def made_finite(a: np.ndarray) -> np.ndarray | None:
        special = ~np.isfinite(a)
        if not special.any():
            return None
        wide = a.astype(np.float64)
        finite_part = wide[~special]
        far = (float(np.abs(finite_part).max()) if finite_part.size else 0.0) + 16.0
        return np.where(np.isnan(wide), 0.0, np.where(special, np.sign(wide) * far, wide))

    return _changing(case, made_finite)


# The factors :func:`tamed` scales by, in turn: an exponent of 183 (a GLA decay that grows
# across a tile) is back in fp32's range at a quarter of it.
TAME_FACTORS = (0.5, 0.25, 0.0625)


def tamed(case: Case, factor: float) -> Case | None:
    """``case`` with the finite elements of its floating inputs scaled by ``factor`` (a power of
    two: exact, but where it makes a subnormal), its non-finite ones (masks written as values)
    kept; None where no input has a finite element other than 0. An Inf or NaN that a bug makes
    by overflowing on large values (a decay grown across a tile boundary, ``exp(183)``) hides
    what it does to ordinary ones: the same call on smaller values shows it
    (``fuzz.duplicates.fails_as``)."""

    def scaled(a: np.ndarray) -> np.ndarray | None:
        finite = np.isfinite(a)
        if not (finite & (a != 0)).any():
            return None
        wide = a.astype(np.float64)
        return np.where(finite, wide * factor, wide)

    return _changing(case, scaled)


def _changing(case: Case, change: Callable[[np.ndarray], np.ndarray | None]) -> Case | None:
    """``case`` with each floating input that ``change`` changes (the array it gives, cast to
    the input's dtype; None: the input kept), in the order of their names; None where it changes
    none (the calls :func:`revalued`, :func:`finite` and :func:`tamed` make)."""
    from fuzz.arrays import dtype_name, is_float

    inputs = {}
    for name, a in sorted(case.inputs.items()):
        if a.size and is_float(dtype_name(a.dtype)):
            made = change(a)
            if made is not None:
                inputs[name] = made.astype(a.dtype)
    return case.replace(inputs=inputs) if inputs else None


def poison_reads(
    target: Target,
    backend: Backend,
    options: HuntOptions,
    case: Case,
    kind: str,
    in_time: Callable[[], None] | None = None,
) -> frozenset[tuple[str, str]] | None:
    """The ``(input, "reads")`` anomalies of a ``masked-poison`` failure of ``case``: each input
    whose masked-out elements, set to the poison ``kind`` (``Target.poison``) with the other
    inputs left clean, change an output bit for bit (as the property compares). Its reference
    depends on none of those elements, so the output's moving is a read its reference does not
    make (see the module's docstring). None where nothing can be said (no poison for the case,
    an example over :data:`MAX_ELEMENTS`, a clean run that fails)."""
    from fuzz.properties import Context, compare_runs

    if target.poison is None or case.size > MAX_ELEMENTS:
        return None
    poisoned = target.poison(case, str(kind))
    if poisoned is None:
        return None
    base = Context(target, backend, case, ref_device=options.ref_device)
    if base.clean.error is not None:
        return None
    found: set[tuple[str, str]] = set()
    for name, a in sorted(poisoned.inputs.items()):
        if in_time is not None:
            in_time()
        clean = case.inputs.get(name)
        if clean is None or np.array_equal(a, clean, equal_nan=True):
            continue
        launch = Context(
            target, backend, case.replace(inputs={name: a}), ref_device=options.ref_device
        ).launch()
        if launch.error is not None or launch.declined is not None:
            continue  # (the kernel's own business: this change tells nothing)
        for out, got in base.clean.outputs.items():
            if out in launch.outputs and compare_runs(launch.outputs[out], got) is not None:
                found.add((name, READS))
                break
    return frozenset(found)


__all__ = [
    "IGNORES",
    "MAX_ELEMENTS",
    "MAX_LAUNCHES",
    "PER_INPUT",
    "READS",
    "anomalies",
    "poison_reads",
    "revalued",
]
