"""Where a NaN or Inf is born: the kernel line of the first overflow, invalid operation or
division by zero, found by replaying a case in an interpreter with floating-point traps.

Triton
    Triton's interpreter evaluates every ``tl.*`` operation with NumPy, so running the launch
    under ``numpy.errstate(over='raise', invalid='raise', divide='raise')`` turns the first
    overflow (``exp(100)``), invalid operation (``0 * Inf``, ``Inf - Inf``, ``0 / 0``) or
    division by zero into a ``FloatingPointError`` (wrapped in the interpreter's
    ``InterpreterError``); the innermost traceback frame in kernel code is the line, and its
    column range the expression.
Pallas
    JAX's own ``jax_debug_nans``/``jax_debug_infs`` cannot be used on interpreted Pallas kernels:
    interpret mode fills fresh buffers with NaN and kernels legitimately build ``-inf`` masks, and
    an overflow that later turns into NaN (``Inf / Inf``) is reported where the NaN appears, not
    where the Inf was born. Instead the launch runs with jit disabled and the ``pallas_call``
    primitive is intercepted: its interpreted form (the grid loop around the discharged kernel
    jaxpr) is evaluated one primitive at a time, recursing into loops and conditionals. A
    primitive whose output holds an Inf where its operands are finite (overflow, division by
    zero) or a NaN where they hold none (invalid operation) is a birth, with the kernel source
    line JAX recorded for it when the kernel was traced; every value carries, per element, the
    earliest birth it was computed from, and the origin is the earliest birth a non-finite output
    element carries. Kernels compute values they discard (``jnp.where`` evaluates both sides: the
    attention kernels' soft-cap polynomial overflows for scores beyond about 1600 with the cap
    off), so the first birth is not always the one in the output.

Mutant kernels are executed from sources registered with ``linecache`` (``kernels/_mutate.py``),
so the origin points at the mutated line. The Triton tracer stops at the first trap: a birth in
a ``tl.where`` branch the kernel discards is reported there.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Mapping

    from fuzz.case import Case
    from fuzz.target import Target

_KIND_OF_NUMPY = {
    "overflow": "overflow",
    "invalid value": "invalid operation",
    "divide by zero": "division by zero",
}


# ``time.perf_counter()`` past which a trace stops (``of_finding``'s ``seconds``), innermost last.
_DEADLINES: list[float] = []
# Seconds a finding's trace is given at most (within what its caller has left).
TRACE_SECONDS = 30.0


class TraceCut(BaseException):
    """A trace ran past its time (``of_finding``'s ``seconds``). Not an ``Exception``: raised
    inside a kernel's interpreted launch, it is the harness's control flow, never the kernel's
    crash (``fuzz.stops.is_fault``) nor an interpreter error a replay reports."""


def _in_time() -> None:
    if _DEADLINES and time.perf_counter() > _DEADLINES[-1]:
        raise TraceCut


@contextlib.contextmanager
def _interpreter_clock() -> Any:
    """Triton's interpreter checks the trace's time (:func:`_in_time`) at every program of a
    launch's grid and every load and store: a trace of a large GPU case ran on in the
    interpreter past its slice's hard limit, and the campaign killed the worker with what its
    slice was shrinking (two H200 campaigns, a jagged kernel's store past its output)."""
    import triton.runtime.interpreter as ti

    builder = ti.interpreter_builder
    names = ("set_grid_idx", "create_masked_load", "create_masked_store")
    real = {n: getattr(builder, n) for n in names}

    def timed(f: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            _in_time()
            return f(*args, **kwargs)

        return run

    for n in names:
        setattr(builder, n, timed(real[n]))
    try:
        yield
    finally:
        for n in names:
            setattr(builder, n, real[n])


def trace(target: Target, backend: str, case: Case) -> dict[str, Any]:
    """The origin of the first non-finite value the kernel of ``backend`` computes for ``case``.

    Returns a dict with ``found`` (bool); when found: ``kind`` (``overflow``, ``invalid
    operation``, ``division by zero``), ``file``, ``line``, ``function``, ``source`` (the line),
    ``expression`` (the sub-expression, when the column range is known), ``interpreter`` and
    ``detail``; else a ``note`` saying why nothing was found.
    """
    from fuzz.backends import get_backend

    impl = get_backend(backend).impl
    if impl not in target.kernels:
        return {"found": False, "note": f"target {target.name} has no {impl} kernel"}
    if impl == "triton":
        return _trace_triton(target, case)
    if impl == "pallas":
        return _trace_pallas(target, case)
    return {"found": False, "note": f"no NaN/Inf origin tracer for {impl} kernels"}


def trace_finding(
    target: Target, backend: str, case: Case, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Like :func:`trace`, for a finding: the non-finite value may come from a launch on inputs a
    property derived from ``case`` (masked keys poisoned, a constant added). The case is checked
    again with the recorded property ``params`` while every launched input set is recorded, and
    each is traced in launch order until one shows an origin.

    That check is a diagnosis of an example already checked, not an example: it reports no
    ``error / tolerance`` to Hypothesis (``Search.targeting`` off). A campaign traces a finding
    as it streams it, inside the Hypothesis test that found it, where the example's own check
    has reported that score and a second report of one label is refused (``InvalidArgument:
    Calling target(..., label='y: error / tolerance') would overwrite ...``).
    """
    import dataclasses

    from fuzz.backends import get_backend
    from fuzz.properties import Context, check_case

    launched: list[Case] = []
    original = Context.launch

    def spy(self: Context, c: Case | None = None, **kw: Any) -> Any:
        if kw.get("backend") in (None, self.backend):
            launched.append(self.case if c is None else c)
        return original(self, c, **kw)

    Context.launch = spy  # type: ignore[method-assign,assignment]
    try:
        quiet = dataclasses.replace(target.search, targeting=False)
        check_case(
            dataclasses.replace(target, search=quiet),
            get_backend(backend),
            case,
            params=params or {},
        )
    finally:
        Context.launch = original  # type: ignore[method-assign]
    distinct: list[Case] = []
    for c in launched:
        if not any(c is d or _same(c, d) for d in distinct):
            distinct.append(c)
    first: dict[str, Any] | None = None
    for c in distinct or [case]:
        _in_time()
        o = trace(target, backend, c)
        if o.get("found"):
            if c is not case and not _same(c, case):
                changed = [k for k in c.inputs if not _same_array(c.inputs[k], case.inputs.get(k))]
                o["launch"] = (
                    f"launch on inputs a property derived from the example ({', '.join(changed)} changed)"
                )
                o["launch_hazards"] = target.hazards_of(c)
            return o
        first = first or o
    return first or trace(target, backend, case)


# Stores and loads past a buffer's end ----------------------------------------------------------

# The failure class whose site is a store's (``trace_stores``), the ones a NaN or Inf birth's (or,
# where none is born in the interpreter, a load's), and those a load past a buffer may explain
# (``trace_loads``: garbage read on a GPU is wrong values, a NaN, an Inf, or runs that differ).
STORE_CLASSES = ("out-of-bounds-write",)
BIRTH_CLASSES = ("nan", "inf")
LOAD_CLASSES = ("accuracy", "masking", "nondeterminism", "backend-divergence", "out-of-bounds-read")
TRACED_CLASSES = BIRTH_CLASSES + STORE_CLASSES + LOAD_CLASSES


def worth_showing(cls: str | None, origin: Any) -> bool:
    """Whether a finding of class ``cls`` shows its traced ``origin`` (reports, the replay, the
    issue text): not a row of wrong values whose trace found no wrong access (a load or store
    past a buffer, a store racing another program's: one cause among many, ruled out; saying
    so on every accuracy row is noise)."""
    return cls not in LOAD_CLASSES or (isinstance(origin, dict) and bool(origin.get("found")))


def tracer_of(cls: str | None) -> Any:
    """The trace of a finding of class ``cls`` (:func:`trace_stores`, :func:`trace_finding` or
    :func:`trace_loads`), or None: not traced."""
    if cls in STORE_CLASSES:
        return trace_stores
    if cls in BIRTH_CLASSES:
        return trace_finding_or_access
    if cls in LOAD_CLASSES:
        return trace_accesses
    return None


def _or_poison_loads(tracer: Any) -> Any:
    """``tracer``, then where it finds nothing, :func:`trace_poison_loads` (a ``masked-poison``
    failure: its masked-out elements lie inside the buffers)."""

    def both(
        target: Target, backend: str, case: Case, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        o = tracer(target, backend, case, params)
        if o.get("found") or "error" in o:
            return o
        loads = trace_poison_loads(target, backend, case, params)
        return loads if loads.get("found") else o

    return both


def trace_finding_or_access(
    target: Target, backend: str, case: Case, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """:func:`trace_finding` (where the NaN or Inf is born), and where nothing is born in the
    interpreted replay, :func:`trace_accesses`: a NaN read past a buffer's end (its guard band, or
    garbage on a GPU) is born nowhere. A planted varlen kernel reading its keys from the query's
    offset gave four GPU rows (NaN, Inf, wrong values, runs that differ) of one load."""
    o = trace_finding(target, backend, case, params)
    if o.get("found") or "error" in o:
        return o
    loads = trace_accesses(target, backend, case, params)
    return loads if loads.get("found") else o


def trace_stores(
    target: Target, backend: str, case: Case, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Where a kernel stores past the end of the buffers it was given: the case is checked again
    in Triton's interpreter (``triton-interpret``, whatever ``backend`` found it) with every
    launch's tensor arguments and every store spied on; the first store that writes an element
    outside all of its launch's tensors (inputs, outputs, what the kernel allocated: their
    views, not the guard bands around them) names the kernel line (innermost frame outside the
    libraries). Two out-of-bounds rows of one kernel with one store site are one bug
    (``fuzz.signatures.site``), as two NaN rows born at one ``exp`` are.

    Returns the shape of :func:`trace`'s answer: ``found``, and ``kind`` ("store past a
    buffer"), ``file``, ``line``, ``function``, ``source``, ``expression``, ``detail``; or a
    ``note`` saying why nothing was found (a Pallas kernel: not traced)."""
    return _trace_outside(target, backend, case, params, "store")


def trace_loads(
    target: Target, backend: str, case: Case, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Where a kernel loads past the end of the buffers it was given, as :func:`trace_stores`
    finds a store (``kind`` "load past a buffer"): on a GPU such a load reads whatever lies
    there, and one bug shows as wrong values, a NaN, an Inf or runs that differ, each a row of
    its own class; one load site makes them one bug (``fuzz.signatures.site``)."""
    return _trace_outside(target, backend, case, params, "load")


def trace_accesses(
    target: Target, backend: str, case: Case, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Where a kernel's memory accesses go wrong, in one interpreted replay as
    :func:`trace_stores`: the first load or store past the buffers of its launch, or store to
    an element another program of the launch stored too (``kind`` "store racing another
    program's"): on a GPU which program's value stays is up to the schedule, so one such store
    shows as wrong values, masked elements overwritten or runs that differ, a row of each class
    (a planted jagged kernel's store one past each row's end, into the next row's first
    element: an out-of-bounds row and two masking rows on an H200; the interpreter, running
    programs one after another, passes). Rows of wrong values are traced so."""
    return _trace_outside(target, backend, case, params, "access")


_NOUN = {"store": "store", "load": "load", "access": "load or store"}
_NOUNS = {"store": "stores", "load": "loads", "access": "loads and stores"}


def _trace_outside(
    target: Target, backend: str, case: Case, params: dict[str, Any] | None, access: str
) -> dict[str, Any]:
    """:func:`trace_stores` (``access`` "store"), :func:`trace_loads` ("load") or
    :func:`trace_accesses` ("access")."""
    import dataclasses

    if not (backend.startswith("triton") or "triton" in target.kernels):
        return {
            "found": False,
            "note": f"{_NOUNS[access]} are traced in Triton's interpreter only ({backend})",
        }
    from fuzz.backends import get_backend
    from fuzz.properties import check_case

    interp = get_backend("triton-interpret")
    reason = interp.unavailable_reason()
    if reason:
        return {"found": False, "note": f"the Triton interpreter cannot run here: {reason}"}
    import triton.runtime.interpreter as ti

    from fuzz import store_fence

    store_fence.install()  # (under the spies below: they see a wild store before it is dropped)
    with _interpreter_clock():
        spy = _Accesses(access, ti)  # (over the clock's timed builder)
        with spy.spying():
            quiet = dataclasses.replace(target.search, targeting=False)
            check_case(dataclasses.replace(target, search=quiet), interp, case, params=params or {})
    if not spy.first and spy.overlap:
        # No wrong access but stores of one element by two programs with the same values (a
        # one-row segment's columns, each 1): what leaves the elements of a missing offset
        # unwritten. A planted jagged kernel that stored every column block at block 0 came as
        # two rows of unwritten elements on an H200: the one whose blocks stored other values
        # was traced to that store, the other (one row: every value 1) to nothing.
        spy.first = spy.overlap
    if not spy.first:
        said = "outside its launch's buffers" + (
            ", nor a store racing another program's," if access == "access" else ""
        )
        return {"found": False, "note": f"no {_NOUN[access]} {said} in the interpreted replay"}
    return {"found": True, "interpreter": "Triton interpreter", **spy.first}


class _Accesses:
    """The spies of :func:`_trace_outside` on Triton's interpreter: each launch's buffers (their
    views' extents), the program of the grid running, the elements stored and by which program
    with which value, and the first wrong access (``first``: its kernel line, ``detail`` and
    ``kind``)."""

    def __init__(self, access: str, ti: Any) -> None:
        from fuzz import store_fence

        self.access, self.ti, self.extent = access, ti, store_fence.view_extent
        self.ranges: list[tuple[int, int]] = []
        self.owner: dict[int, tuple[Any, Any]] = {}  # address -> (the program, the value) stored
        self.program: tuple[int, int, int] = (0, 0, 0)
        self.first: dict[str, Any] = {}
        # The first store of an element another program stored with the same value (``race``).
        self.overlap: dict[str, Any] = {}
        self.libs = _library_dirs()
        builder = ti.interpreter_builder
        self.real_store, self.real_load = builder.create_masked_store, builder.create_masked_load
        self.real_grid, self.init = builder.set_grid_idx, ti.GridExecutor._init_args_hst

    @contextlib.contextmanager
    def spying(self) -> Any:
        """The spies in the interpreter's place while the block runs (loads, stores or both,
        as ``access`` asks; the grid and each launch's buffers always)."""
        builder, executor = self.ti.interpreter_builder, self.ti.GridExecutor
        if self.access in ("store", "access"):
            builder.create_masked_store = self.store
        if self.access in ("load", "access"):
            builder.create_masked_load = self.load
        builder.set_grid_idx = self.grid
        executor._init_args_hst = lambda ex, a, kw: self.launch(ex, a, kw)
        try:
            yield
        finally:
            builder.create_masked_store, builder.create_masked_load = (
                self.real_store,
                self.real_load,
            )
            builder.set_grid_idx = self.real_grid
            executor._init_args_hst = self.init

    def launch(self, executor: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = self.init(executor, args_dev, kwargs)
        self.ranges.clear()
        self.owner.clear()
        for a in [*args_hst, *kwargs_hst.values()]:
            extent = self.extent(a)
            if extent is not None:
                self.ranges.append(extent)
        return args_hst, kwargs_hst

    def grid(self, x: int, y: int, z: int) -> Any:
        self.program = (int(x), int(y), int(z))
        return self.real_grid(x, y, z)

    def store(self, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
        if not self.first:
            at = _addresses(ptrs, mask)
            self.check(at, np.dtype(value.data.dtype).itemsize, "store")
            if self.access == "access" and not self.first:
                keep = np.asarray(mask.data, bool)
                self.race(at, np.broadcast_to(np.asarray(value.data), keep.shape)[keep])
        return self.real_store(ptrs, value, mask, *rest)

    def load(self, ptrs: Any, mask: Any, *rest: Any) -> Any:
        if not self.first:
            size = np.dtype(self.ti._get_np_dtype(ptrs.get_element_ty())).itemsize
            self.check(_addresses(ptrs, mask), size, "load")
        return self.real_load(ptrs, mask, *rest)

    def here(self, detail: str, kind: str, into: dict[str, Any] | None = None) -> None:
        """Keeps the kernel line running now (the innermost frame outside the libraries and
        these spies) as the first wrong access (``into``: another record)."""
        into = self.first if into is None else into
        stack = traceback.extract_stack()[:-3]  # (here, check or race, store or load)
        frames = [f for f in stack if not f.filename.startswith(self.libs)]
        if frames:
            f = frames[-1]
            into.update(
                _frame_record(f.filename, f.lineno or 0, f.name, f.colno, f.end_lineno, f.end_colno)
            )
            into["detail"], into["kind"] = detail, kind

    def check(self, at: np.ndarray, size: int, what: str) -> None:
        inside = np.zeros(at.shape, bool)
        for lo, hi in self.ranges:
            inside |= (at >= lo) & (at + size <= hi)
        if at.size and not inside.all():
            self.here(
                f"{int((~inside).sum())} of {at.size} element(s) of one {what} outside every "
                "buffer of its launch",
                f"{what} past a buffer",
            )

    def race(self, at: np.ndarray, values: np.ndarray) -> None:
        """Notes a store of another value to an element another program of the launch stored
        (the same value from two programs is no race in effect: noted apart, the first such
        store as :attr:`overlap`, what leaves other elements unwritten where no wrong access
        is found)."""
        me, others, n = self.program, set(), 0
        alike: set[Any] = set()  # (programs that stored the same values there)
        for a, v in zip(at.tolist(), values.tolist(), strict=True):
            prev = self.owner.get(a)
            if prev is None:
                self.owner[a] = (me, v)
            elif prev[0] != me and not (prev[1] == v or (prev[1] != prev[1] and v != v)):
                others.add(prev[0])
                n += 1
            elif prev[0] != me:
                alike.add(prev[0])
        if others:
            self.here(
                f"{n} of {at.size} element(s) of one store also stored, with other values, by "
                f"program(s) {sorted(others)[:2]} of its launch, this one {me}: on a GPU which "
                "value stays is up to the schedule",
                "store racing another program's",
            )
        elif alike and not self.overlap:
            self.here(
                f"elements of one store also stored, with the same values, by program(s) "
                f"{sorted(alike)[:2]} of its launch, this one {me}: two programs storing one "
                "element where each should store its own leaves others unwritten",
                "store overlapping another program's",
                into=self.overlap,
            )


def trace_poison_loads(
    target: Target, backend: str, case: Case, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Where the poison of a ``masked-poison`` failure enters the kernel's outputs (``kind``
    "load of masked-out elements"): each input whose masked-out elements, poisoned as the
    failure drew (``params["masked-poison"]``, ``Target.poison``) with the others clean, move an
    output is run in Triton's interpreter beside the clean case, each load's values recorded in
    launch order; each kernel line whose loads differ between the two is put back to its clean
    values in a third run, and the first line that so gives the clean outputs bit for bit is the
    site. A kernel may load masked-out elements and discard them (a key's scores masked after
    the load): only the load whose values reach the outputs is named, and only where one input
    of several moves the outputs (where every input does, or there is one, the poison enters
    where any masking bug lets it: no site). A planted attention
    kernel that loaded its value tile without the key mask came as an ``out-of-bounds-read``
    row (past the buffer) and two ``masked-poison`` rows (keys padded, keys outside a window),
    one load (``fuzz.signatures.site``)."""
    if not (backend.startswith("triton") or "triton" in target.kernels):
        return {
            "found": False,
            "note": f"loads are traced in Triton's interpreter only ({backend})",
        }
    kind = (params or {}).get("masked-poison")
    poisoned = None if kind is None or target.poison is None else target.poison(case, str(kind))
    if poisoned is None:
        return {"found": False, "note": "no masked-out elements to poison in this case"}
    from fuzz.backends import get_backend
    from fuzz.properties import Context, compare_runs

    interp = get_backend("triton-interpret")
    reason = interp.unavailable_reason()
    if reason:
        return {"found": False, "note": f"the Triton interpreter cannot run here: {reason}"}
    import triton.runtime.interpreter as ti

    from fuzz import store_fence

    def run(c: Case, replace: Mapping[int, Any] | None = None) -> tuple[Any, _Loads]:
        spy = _Loads(ti, replace)
        with spy.spying():
            launch = Context(target, interp, c).launch()
        return launch, spy

    def same(a: Any, b: Any) -> bool:
        return a.error is None and all(
            k in a.outputs and compare_runs(a.outputs[k], v) is None for k, v in b.outputs.items()
        )

    store_fence.install()
    with _interpreter_clock():
        base, clean = run(case)
        if base.error is not None or base.declined is not None:
            return {"found": False, "note": "the clean case does not run in the interpreter"}
        names = [
            n
            for n, a in sorted(poisoned.inputs.items())
            if n in case.inputs and not np.array_equal(a, case.inputs[n], equal_nan=True)
        ]
        moving = []
        for name in names:
            _in_time()
            one = case.replace(inputs={name: poisoned.inputs[name]})
            moved, spy = run(one)
            if moved.error is None and moved.declined is None and not same(moved, base):
                moving.append((name, one, spy))
        if len(names) < 2 or len(moving) != 1:
            # Poisoned through every input that masks apply to (a key's scores and values), or
            # through the one input there is: where the poison enters says nothing of a fault
            # (two bugs of one mask enter through one load); one input of several moving the
            # outputs, the masks holding for the others, is a load that lacks its mask.
            said = "the one input poisoned" if len(names) < 2 else f"{len(moving)} inputs of "
            said += "" if len(names) < 2 else f"{len(names)} poisoned"
            return {"found": False, "note": f"no load told apart: {said} move the outputs"}
        name, one, spy = moving[0]
        for line in spy.differing(clean):
            back = {i: v for i, (at, v) in enumerate(clean.seen) if at == line}
            fixed, _ = run(one, back)
            if same(fixed, base):
                return {
                    "found": True,
                    "interpreter": "Triton interpreter",
                    **spy.where[line],
                    "kind": "load of masked-out elements",
                    "detail": f"of the inputs poisoned where masked out ({kind}), only {name} "
                    "moves the outputs, through this load: with its values clean, every output "
                    "is the clean run's (the masks hold for the others: the load lacks its own)",
                }
    return {"found": False, "note": "no one load carries the poison to the outputs"}


class _Loads:
    """The spy of :func:`trace_poison_loads` on Triton's interpreter: each load's kernel line
    and values in launch order (:attr:`seen`), a line's record once (:attr:`where`); with
    ``replace`` (the index of a load in that order -> values), those loads' values are
    replaced."""

    def __init__(self, ti: Any, replace: Mapping[int, Any] | None = None) -> None:
        self.ti, self.replace = ti, dict(replace or {})
        self.real = ti.interpreter_builder.create_masked_load
        self.seen: list[tuple[tuple[str, int], Any]] = []
        self.where: dict[tuple[str, int], dict[str, Any]] = {}
        self.libs = _library_dirs()

    @contextlib.contextmanager
    def spying(self) -> Any:
        builder = self.ti.interpreter_builder
        builder.create_masked_load = self.load
        try:
            yield
        finally:
            builder.create_masked_load = self.real

    def load(self, ptrs: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
        got = self.real(ptrs, mask, *rest, **kw)
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(self.libs):
            frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return got
        line = (frame.f_code.co_filename, frame.f_lineno)
        if line not in self.where:
            f = traceback.extract_stack(frame, limit=1)[-1]
            self.where[line] = _frame_record(
                f.filename, f.lineno or 0, f.name, f.colno, f.end_lineno, f.end_colno
            )
        i = len(self.seen)
        if i in self.replace:
            got.data = np.array(self.replace[i], copy=True)
        self.seen.append((line, np.array(got.data, copy=True)))
        return got

    def differing(self, clean: _Loads) -> list[tuple[str, int]]:
        """The kernel lines whose loads here differ, bit for bit, from ``clean``'s, in the order
        of their first difference."""
        out: list[tuple[str, int]] = []
        for (line, a), (other, b) in zip(self.seen, clean.seen, strict=False):
            if line != other:
                break  # (the two runs went other ways: nothing more to compare)
            if line not in out and (a.shape != b.shape or a.tobytes() != b.tobytes()):
                out.append(line)
        return out


def _addresses(ptrs: Any, mask: Any) -> np.ndarray:
    return np.asarray(ptrs.data, np.uint64)[np.asarray(mask.data, bool)].astype(np.int64)


# A trace is one interpreted check of the case where shrinking runs hundreds: a Triton kernel's
# case is traced up to this many times ``Profile.interpreter_max_cost`` (within the trace's
# seconds). At 1x, four GPU rows of one wild load (188 to 22,704 elements, costs 25 to 192) went
# untraced, and nothing joined them.
TRACE_COST_FACTOR = 16.0


def too_costly(target: Target, backend: str, case: Case, max_cost: float | None) -> str | None:
    """Why a finding of compiled ``backend`` is not traced in the interpreter, or None: its case
    costs more than ``max_cost`` (``Profile.interpreter_max_cost``, in Triton-interpreter units,
    scaled by the interpreter's speed; times :data:`TRACE_COST_FACTOR` for a Triton kernel)
    where the interpreter has not run it yet. A trace steps the interpreter through every launch
    of the case: an unshrunk GPU case (98,304 elements) took longer than the slice had past its
    hard limit, and its worker was killed with the slice's findings (a Pallas trace evaluates
    one primitive at a time: 1x)."""
    from fuzz.backends import get_backend

    b = get_backend(backend)
    if max_cost is None or b.interpret:
        return None  # an interpreter's own finding: the trace costs a few of its examples
    speedup = 1.0
    if b.twin is not None:
        try:
            speedup = get_backend(b.twin).cost_speedup
        except ValueError:
            pass
    if backend.startswith("triton"):
        max_cost *= TRACE_COST_FACTOR
    cost = target.search.cost(case)
    if cost <= max_cost * speedup:
        return None
    return (
        f"not traced here: the case costs {cost:.0f} interpreter units, over the "
        f"{max_cost * speedup:.0f} a trace is given (its reproducer's replay traces it)"
    )


def of_finding(
    found: Any,
    target: Target,
    backend: str,
    max_cost: float | None = None,
    *,
    seconds: float = TRACE_SECONDS,
) -> dict[str, Any] | None:
    """The origin of a finding's NaN or Inf (``found``: a ``fuzz.results.Found``), traced once
    (:func:`trace_finding`) and kept in its details; a trace that raised is kept as ``{"error":
    ...}`` (a diagnosis: the finding is never lost over it). None where the kept value is not a
    dict. A compiled backend's case over ``max_cost`` is not traced (:func:`too_costly`), nor
    the rest of a trace past ``seconds`` (a Pallas trace evaluates the kernel one primitive at a
    time: a GPU campaign's worker was killed past its slice's hard limit in one, of a case of
    196,608 elements): not found, with why, and not kept (a smaller example may be traced)."""
    details = found.finding.details
    if "origin" not in details and (why := too_costly(target, backend, found.case, max_cost)):
        return {"found": False, "note": why}  # (not kept: a smaller example of it may be traced)
    if "origin" not in details:
        tracer = tracer_of(getattr(found.finding, "cls", None)) or trace_finding
        if getattr(found.finding, "prop", None) == "masked-poison":
            tracer = _or_poison_loads(tracer)
        _DEADLINES.append(time.perf_counter() + max(0.0, seconds))
        try:
            details["origin"] = tracer(target, backend, found.case, found.params)
        except TraceCut:
            return {"found": False, "note": f"not traced: the trace ran past its {seconds:.0f} s"}
        except Exception as e:
            details["origin"] = {"error": f"{type(e).__name__}: {e}"}
        finally:
            _DEADLINES.pop()
    o = details["origin"]
    return o if isinstance(o, dict) else None


def _same_array(a: Any, b: Any) -> bool:
    return (
        b is not None and a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    )


def _same(a: Case, b: Case) -> bool:
    """One kernel call: the same inputs and parameters (a property's call of the same inputs
    under another chunk size or tile is another call, its own trace: ``finite-every-chunk``'s
    NaN of a planted GLA kernel was born only under the chunk size it asked for)."""
    return (
        a.inputs.keys() == b.inputs.keys()
        and all(_same_array(a.inputs[k], b.inputs[k]) for k in a.inputs)
        and a.params_json() == b.params_json()
    )


def describe(origin: dict[str, Any] | None) -> list[str]:
    """Human lines for reports and reproducer output."""
    if not origin:
        return []
    if "error" in origin:
        return [f"origin: not traced ({origin['error']})"]
    if not origin.get("found"):
        return [f"origin: {origin.get('note', 'not found')}"]
    expr = origin.get("expression")
    what = f"{origin['kind']} in `{expr}`" if expr else origin["kind"]
    lines = [
        f"origin: {what} at {origin['file']}:{origin['line']} ({origin['function']}), "
        f"{origin['interpreter']}",
        f"        {origin['source'].strip()}",
    ]
    if origin.get("detail"):
        lines.append(f"        {origin['detail']}")
    root = origin.get("root")
    if isinstance(root, dict) and root.get("line"):
        lines.append(
            f"        of the value of `{root.get('expression')}` at line {root['line']}: an "
            "exponential's overflow (the bug's site)"
        )
    caller = origin.get("caller")
    if caller:
        lines.append(
            f"        called from {caller['function']} at {caller['file']}:{caller['line']}:"
        )
        lines.append(f"        {caller['source'].strip()}")
    if origin.get("launch"):
        lines.append(f"        in the {origin['launch']}")
        lines.extend(f"        hazard there: {h}" for h in origin.get("launch_hazards", []))
    return lines


def _frame_record(
    filename: str,
    line: int,
    function: str,
    col: int | None,
    end_line: int | None,
    end_col: int | None,
) -> dict[str, Any]:
    import linecache

    source = linecache.getline(filename, line).rstrip("\n")
    expression = None
    if col is not None and end_col is not None and end_line == line and 0 <= col < end_col:
        expression = source.encode()[col:end_col].decode(errors="replace") or None
    return {
        "file": filename,
        "line": line,
        "function": function,
        "source": source,
        "expression": expression,
    }


# Triton -------------------------------------------------------------------------------------------------


def _library_dirs() -> tuple[str, ...]:
    import numpy

    dirs = [os.path.dirname(numpy.__file__) + os.sep, os.path.dirname(__file__) + os.sep]
    for mod in ("triton", "torch"):
        try:
            dirs.append(os.path.dirname(str(__import__(mod).__file__)) + os.sep)
        except Exception:
            pass
    try:  # the interpreter shim that routes calls of jit helpers (tl.sum...) to their twins
        import kernels._triton_interp as shim

        dirs.append(str(shim.__file__))
    except Exception:
        pass
    return tuple(dirs)


def _fp_error(e: BaseException) -> FloatingPointError | None:
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, FloatingPointError):
            return e
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return None


def _trace_triton(target: Target, case: Case) -> dict[str, Any]:
    from fuzz.backends import adapter_for, get_backend

    backend = get_backend("triton-interpret")
    reason = backend.unavailable_reason()
    if reason:
        return {"found": False, "note": f"the Triton interpreter cannot run here: {reason}"}
    adapter = adapter_for(backend)
    naive = target.naive(case, "cpu")
    inputs = {k: adapter.put(v) for k, v in case.inputs.items()}
    out = (
        {k: adapter.alloc(v.shape, _dtype(v), 0.0).array for k, v in naive.items()}
        if target.library.writes_out
        else None
    )
    try:
        with (
            _interpreter_clock(),
            np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"),
        ):
            target.kernels["triton"](inputs, dict(case.params), out=out, interpret=True)
    except Exception as e:
        fpe = _fp_error(e)
        if fpe is None:
            return {
                "found": False,
                "note": f"the interpreted replay raised {type(e).__name__}: {e}"[:300],
            }
        libs = _library_dirs()
        frames = [
            f for f in traceback.extract_tb(fpe.__traceback__) if not f.filename.startswith(libs)
        ]
        if not frames:
            return {"found": False, "note": f"{fpe} outside kernel code"}
        f = frames[-1]
        message = str(fpe)
        kind = next((k for s, k in _KIND_OF_NUMPY.items() if s in message), "floating-point error")
        rec = _frame_record(f.filename, f.lineno or 0, f.name, f.colno, f.end_lineno, f.end_colno)
        if len(frames) > 1:  # a jit helper (a library's exp2): the kernel line that called it
            c = frames[-2]
            rec["caller"] = _frame_record(
                c.filename, c.lineno or 0, c.name, c.colno, c.end_lineno, c.end_colno
            )
        return {
            "found": True,
            "kind": kind,
            "interpreter": "Triton interpreter, NumPy traps",
            "detail": f"NumPy: {message}",
            **rec,
            **_exp_root(kind, rec),
        }
    return {
        "found": False,
        "note": "no overflow, invalid operation or division by zero in the "
        "interpreted replay (the non-finite value may be compiled-only behaviour)",
    }


def _dtype(a: np.ndarray) -> str:
    from fuzz.arrays import dtype_name

    return dtype_name(a.dtype)


# Pallas -------------------------------------------------------------------------------------------------


class _Flow:
    """The births of one interpreted replay and where their values went.

    Each birth (a primitive turning finite operands into Inf or NaN) gets an id, in order, and
    every value carries a taint: per element, the earliest birth it was computed from (0: none).
    Elementwise primitives take the earliest taint of their operands' elements, moves (reshape,
    slices, broadcasts, ``select_n``, ...) move the taints as they move the values (``select_n``
    keeps the chosen side's, and its predicate's), other primitives (reductions, dots) give each
    output element the earliest taint of all their operands. A birth inside ``jnp.where``'s
    discarded side thus never reaches an output.
    """

    def __init__(self) -> None:
        self.births: list[dict[str, Any]] = []
        self.reached: int = 0  # the earliest birth a non-finite output element carries


_FLOWS: list[_Flow] = []


def _floating(x: Any) -> bool:
    dt = getattr(x, "dtype", None)
    try:
        return dt is not None and np.issubdtype(np.dtype(dt), np.floating)
    except TypeError:
        return str(dt) == "bfloat16"


def _np(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


# Primitives that move elements without combining them: the taints move the same way.
_MOVES = {
    "reshape",
    "broadcast_in_dim",
    "transpose",
    "squeeze",
    "expand_dims",
    "slice",
    "dynamic_slice",
    "dynamic_update_slice",
    "concatenate",
    "pad",
    "gather",
    "scatter",
    "rev",
    "copy",
    "copy_p",
    "select_n",
}
# Primitives whose output elements combine operand elements elsewhere (never elementwise, even
# where the shapes agree).
_MIXERS = {"dot_general", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp", "sort"}


def _births(eqn: Any, invals: list[Any], outs: list[Any]) -> list[tuple[np.ndarray, int] | None]:
    """Per output: where it holds an Inf its operands did not (overflow, division by zero) or a
    NaN they did not (invalid operation), and the id of that birth in the replay's flow; None if
    nowhere."""
    flow = _FLOWS[-1]
    fins = [_np(x) for x in invals if _floating(x)]
    masks: list[tuple[np.ndarray, int] | None] = []
    for out in outs:
        masks.append(None)
        if not _floating(out):
            continue
        o = _np(out)
        bad_inf, bad_nan = np.isinf(o), np.isnan(o)
        if not (bad_inf.any() or bad_nan.any()):
            continue
        if fins and all(x.shape == o.shape for x in fins):
            in_nonfinite = np.logical_or.reduce([~np.isfinite(x) for x in fins])
            in_nan = np.logical_or.reduce([np.isnan(x) for x in fins])
            overflow, invalid = bad_inf & ~in_nonfinite, bad_nan & ~in_nan
        else:
            finite = all(np.isfinite(x).all() for x in fins)
            no_nan = not any(np.isnan(x).any() for x in fins)
            overflow = bad_inf if finite else np.zeros_like(bad_inf)
            invalid = bad_nan if no_nan else np.zeros_like(bad_nan)
        if not (overflow.any() or invalid.any()):
            continue
        flow.births.append(_birth_record(eqn, fins, o, overflow, invalid))
        masks[-1] = (overflow | invalid, len(flow.births))
    return masks


def _birth_record(
    eqn: Any, fins: list[np.ndarray], o: np.ndarray, overflow: np.ndarray, invalid: np.ndarray
) -> dict[str, Any]:
    """What a birth reports: kind, primitive, operands and the kernel line JAX recorded."""
    from jax._src import source_info_util

    name = eqn.primitive.name
    bad = overflow if overflow.any() else invalid
    idx = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    if name == "div" and len(fins) == 2 and fins[1].shape == o.shape and fins[1][idx] == 0:
        kind = "division by zero"
    else:
        kind = "overflow" if overflow.any() else "invalid operation"
    operands = ", ".join(
        f"{x[idx]:.6g}"
        if x.shape == o.shape
        else (f"{x.reshape(-1)[0]:.6g}" if x.size == 1 else f"[{x.size} values]")
        for x in fins
    )
    detail = f"{name}({operands}) = {o[idx]} at element {list(idx)} of a {list(o.shape)} block"
    frame = source_info_util.user_frame(eqn.source_info.traceback)
    if frame is None:
        rec = {"file": "?", "line": 0, "function": "?", "source": "", "expression": None}
    else:
        rec = _frame_record(
            frame.file_name,
            frame.start_line,
            frame.function_name,
            frame.start_column,
            frame.end_line,
            frame.end_column,
        )
    return {
        "found": True,
        "kind": kind,
        "primitive": name,
        "detail": detail,
        "interpreter": "Pallas interpret mode, checked primitive by primitive",
        **rec,
        **_exp_root(kind, rec),
    }


_EXPONENTIALS = ("exp", "exp2")


def _exp_root(kind: str, rec: Mapping[str, Any]) -> dict[str, Any]:
    """For an overflow born in an expression with a factor its function assigned, earlier, from
    an exponential (``alpha = tl.exp(m - shift)``, then ``ell * alpha``): that exponential, as
    ``root`` (its line and expression), the overflow's own cause (``fuzz.signatures.site``). A
    planted kernel that rescaled by the tile's max instead of the running one came as three
    GPU rows, each born at another line of one rescale: ``tl.exp(m - shift)`` where the
    exponential itself overflowed, ``ell * alpha`` and ``acc * alpha[:, None]`` where its huge
    value did in a product. Nothing where the expression names no such factor, or more than one."""
    if kind != "overflow" or not rec.get("expression") or not rec.get("line"):
        return {}
    try:
        roots = _exponential_assignments(str(rec["file"]), int(rec["line"]), str(rec["expression"]))
    except (OSError, SyntaxError, ValueError):
        return {}
    if len(roots) != 1:
        return {}
    line, expression = roots.pop()
    return {"root": {"line": line, "expression": expression}}


def _exponential_assignments(file: str, line: int, expression: str) -> set[tuple[int, str]]:
    """The (line, exponential's source) of each name ``expression`` (the born expression, at
    ``line`` of ``file``) reads whose last assignment before that line in the same function is
    an exponential's result."""
    import ast
    import linecache

    source = "".join(linecache.getlines(file))
    tree = ast.parse(source)
    names = {
        n.id
        for n in ast.walk(ast.parse(expression.strip(), mode="eval"))
        if isinstance(n, ast.Name)
    }
    scopes = [
        f
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        and f.lineno <= line <= (f.end_lineno or f.lineno)
    ]
    if not scopes or not names:
        return set()
    scope = min(scopes, key=lambda f: (f.end_lineno or f.lineno) - f.lineno)
    last: dict[str, ast.AST] = {}
    for node in sorted(
        (n for n in ast.walk(scope) if isinstance(n, ast.Assign) and n.lineno < line),
        key=lambda n: n.lineno,
    ):
        for target in node.targets:
            if isinstance(target, ast.Name):
                last[target.id] = node.value
    roots = set()
    for name in names & set(last):
        value = last[name]
        if isinstance(value, ast.Call) and _callee(value.func) in _EXPONENTIALS:
            segment = ast.get_source_segment(source, value) or ""
            roots.add((value.lineno, segment))
    return roots


def _callee(func: Any) -> str:
    """The last name of a call's function (``tl.exp`` -> ``exp``)."""
    import ast

    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _earliest(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise the earlier of two taints (0 is none)."""
    big = np.iinfo(np.int64).max
    low = np.minimum(np.where(a > 0, a, big), np.where(b > 0, b, big))
    return np.where(low == big, 0, low)


def _taints(
    eqn: Any, invals: list[Any], taints: list[np.ndarray | None], outs: list[Any]
) -> list[np.ndarray | None]:
    """The taints of ``eqn``'s outputs from its operands' (see :class:`_Flow`)."""
    if all(t is None for t in taints):
        return [None] * len(outs)
    name, p = eqn.primitive.name, eqn.params
    shapes = [np.shape(o) for o in outs]
    if name in _MOVES:
        import jax.numpy as jnp

        # The same primitive on the taints (as float32: exact below 2^24) in place of the
        # floating operands; other operands (indices, predicates) as they are.
        moved_in = [
            jnp.asarray(t if t is not None else np.zeros(np.shape(v)), jnp.float32)
            if _floating(v)
            else v
            for v, t in zip(invals, taints, strict=True)
        ]
        moved = eqn.primitive.bind(*moved_in, **p)
        moved = list(moved) if eqn.primitive.multiple_results else [moved]
        got = [
            np.asarray(m).astype(np.int64) if _floating(o) else None
            for m, o in zip(moved, outs, strict=True)
        ]
        if name == "select_n" and taints[0] is not None and got[0] is not None:
            got[0] = _earliest(got[0], np.broadcast_to(taints[0], shapes[0]))
        return got
    present = [t for t in taints if t is not None]
    out: list[np.ndarray | None] = []
    for shape in shapes:
        if name not in _MIXERS and all(t.shape == shape or t.size == 1 for t in present):
            acc = np.zeros(shape, np.int64)
            for t in present:
                acc = _earliest(acc, np.broadcast_to(t, shape))
        else:
            first = 0
            for t in present:
                nz = t[t > 0]
                if nz.size:
                    first = int(nz.min()) if first == 0 else min(first, int(nz.min()))
            acc = np.full(shape, first, np.int64)
        out.append(acc if acc.any() else None)
    return out


# The device an interpreted Pallas replay runs on (the pallas-interpret backend's CPU device). On a
# GPU host JAX's default device is a GPU: arrays made while the replay runs eagerly (jit disabled)
# land there, committed ones too, and a primitive mixing them with the CPU inputs fails
# ("Received incompatible devices for jitted computation").
_TRACE_DEVICE: list[Any] = []


def _on_trace_device(values: list[Any]) -> list[Any]:
    """``values`` with every JAX array not on the replay's device moved there."""
    if not _TRACE_DEVICE:
        return values
    import jax

    dev = _TRACE_DEVICE[-1]
    return [
        jax.device_put(v, dev) if isinstance(v, jax.Array) and v.devices() != {dev} else v
        for v in values
    ]


Tainted = list[np.ndarray | None]


def _eval(
    jaxpr: Any, consts: list[Any], args: list[Any], taints: Tainted | None = None
) -> tuple[list[Any], Tainted]:
    """``jaxpr`` evaluated one primitive at a time: its outputs and their taints."""
    from jax._src import core

    env: dict[Any, Any] = {}
    tenv: dict[Any, np.ndarray | None] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, core.Literal) else env[v]

    def taint(v: Any) -> np.ndarray | None:
        return None if isinstance(v, core.Literal) else tenv.get(v)

    for v, c in zip(jaxpr.constvars, consts, strict=True):
        env[v] = c
    for v, a, t in zip(jaxpr.invars, args, taints or [None] * len(args), strict=True):
        env[v], tenv[v] = a, t
    for eqn in jaxpr.eqns:
        _in_time()  # (a Pallas kernel's grid, one primitive at a time: slow on large cases)
        invals = _on_trace_device([read(v) for v in eqn.invars])
        outs, outtaints = _eval_eqn(eqn, invals, [taint(v) for v in eqn.invars])
        for v, o, t in zip(eqn.outvars, outs, outtaints, strict=True):
            if not isinstance(v, core.DropVar):
                env[v], tenv[v] = o, t
    return [read(v) for v in jaxpr.outvars], [taint(v) for v in jaxpr.outvars]


def _closed(c: Any) -> tuple[Any, list[Any]]:
    return (c.jaxpr, list(c.consts)) if hasattr(c, "consts") else (c, [])


_CALLS = (
    "pjit",
    "jit",
    "closed_call",
    "core_call",
    "remat",
    "checkpoint",
    "custom_jvp_call",
    "custom_vjp_call",
    "custom_vjp_call_jaxpr",
)


def _eval_eqn(eqn: Any, invals: list[Any], taints: Tainted) -> tuple[list[Any], Tainted]:
    name, p = eqn.primitive.name, eqn.params
    if name == "while":
        nc, nb = p["cond_nconsts"], p["body_nconsts"]
        cc, bc, carry = invals[:nc], invals[nc : nc + nb], invals[nc + nb :]
        bt, ct = taints[nc : nc + nb], taints[nc + nb :]
        cj, cconsts = _closed(p["cond_jaxpr"])
        bj, bconsts = _closed(p["body_jaxpr"])
        while bool(np.asarray(_eval(cj, cconsts, [*cc, *carry])[0][0])):
            carry, ct = _eval(bj, bconsts, [*bc, *carry], [*bt, *ct])
        return carry, ct
    if name == "cond":
        index, ops = invals[0], invals[1:]
        j, consts = _closed(
            p["branches"][int(np.clip(np.asarray(index), 0, len(p["branches"]) - 1))]
        )
        return _eval(j, consts, ops, taints[1:])
    if name == "scan":
        return _eval_scan(eqn, invals, taints)
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        sub = p.get(key)
        if sub is not None and name in _CALLS:
            j, consts = _closed(sub)
            return _eval(j, consts, invals, taints)
    outs = eqn.primitive.bind(*invals, **p)
    outs = list(outs) if eqn.primitive.multiple_results else [outs]
    outtaints = _taints(eqn, invals, taints, outs)
    for k, born in enumerate(_births(eqn, invals, outs)):
        if born is not None:
            mask, birth = born
            fresh = np.where(mask, birth, 0).astype(np.int64)
            t = outtaints[k]
            outtaints[k] = fresh if t is None else _earliest(t, fresh)
    return outs, outtaints


def _eval_scan(eqn: Any, invals: list[Any], taints: Tainted) -> tuple[list[Any], Tainted]:
    import jax.numpy as jnp

    p = eqn.params
    j, consts = _closed(p["jaxpr"])
    n_c, n_carry = p["num_consts"], p["num_carry"]
    cs, carry, xs = invals[:n_c], invals[n_c : n_c + n_carry], invals[n_c + n_carry :]
    cst, ct, xst = taints[:n_c], taints[n_c : n_c + n_carry], taints[n_c + n_carry :]
    order = range(p["length"] - 1, -1, -1) if p["reverse"] else range(p["length"])
    ys: list[list[Any]] = []
    yts: list[Tainted] = []
    for i in order:
        xi = [x[i] for x in xs]
        xti = [None if t is None else t[i] for t in xst]
        out, outt = _eval(j, consts, [*cs, *carry, *xi], [*cst, *ct, *xti])
        carry, y = out[:n_carry], out[n_carry:]
        ct, yt = outt[:n_carry], outt[n_carry:]
        ys.append(y)
        yts.append(yt)
    if p["reverse"]:
        ys.reverse()
        yts.reverse()
    stacked = [
        jnp.stack([y[k] for y in ys]) if ys else jnp.zeros(v.aval.shape, v.aval.dtype)
        for k, v in enumerate(eqn.outvars[n_carry:])
    ]
    stacked_t: Tainted = []
    for k in range(len(stacked)):
        parts = [yt[k] for yt in yts]
        if all(t is None for t in parts):
            stacked_t.append(None)
        else:
            shape = np.shape(ys[0][k])
            stacked_t.append(
                np.stack([np.zeros(shape, np.int64) if t is None else t for t in parts])
            )
    return [*carry, *stacked], [*ct, *stacked_t]


@contextlib.contextmanager
def _intercept_pallas_call() -> Any:
    import jax
    from jax._src.pallas import hlo_interpreter
    from jax._src.pallas.pallas_call import pallas_call_p

    def impl(*args: Any, **params: Any) -> Any:
        params = dict(params)
        params.pop("interpret", None)
        params.pop("backend", None)
        fn = lambda *a: hlo_interpreter.pallas_call_hlo_interpret(*a, **params)  # noqa: E731
        closed = jax.make_jaxpr(fn)(*args)
        outs, taints = _eval(closed.jaxpr, list(closed.consts), list(args))
        flow = _FLOWS[-1]
        for o, t in zip(outs, taints, strict=True):
            if t is None or not _floating(o):
                continue
            carried = t[~np.isfinite(_np(o)) & (t > 0)]
            if carried.size and not flow.reached:
                flow.reached = int(carried.min())
        return outs

    saved = pallas_call_p.impl
    pallas_call_p.impl = impl  # type: ignore[method-assign]
    try:
        with jax.disable_jit():
            yield
    finally:
        pallas_call_p.impl = saved  # type: ignore[method-assign]


def _trace_pallas(target: Target, case: Case) -> dict[str, Any]:
    """The earliest birth a non-finite output element of the kernel carries (see :class:`_Flow`);
    not found, with a note naming the first birth, where none reaches an output (the non-finite
    value came with the kernel's inputs, or is compiled-only behaviour); the first birth where
    the replay raised before its outputs."""
    from fuzz.backends import adapter_for, get_backend

    backend = get_backend("pallas-interpret")
    reason = backend.unavailable_reason()
    if reason:
        return {"found": False, "note": f"Pallas interpret mode cannot run here: {reason}"}
    import jax

    adapter = adapter_for(backend)
    inputs = {k: adapter.put(v) for k, v in case.inputs.items()}
    device = adapter.device  # type: ignore[attr-defined]
    flow = _Flow()
    _TRACE_DEVICE.append(device)
    _FLOWS.append(flow)
    try:
        with jax.default_device(device), _intercept_pallas_call(), np.errstate(all="ignore"):
            target.kernels["pallas"](inputs, dict(case.params), out=None, interpret=True)
    except TraceCut:
        raise
    except Exception as e:
        raised = f"the interpreted replay raised {type(e).__name__}: {e}"[:300]
        if not flow.births:
            return {"found": False, "note": raised}
        if not flow.reached:  # no outputs to follow the births to: the first, as it is
            return {**flow.births[0], "note": f"the first birth; {raised}"}
    finally:
        _FLOWS.pop()
        _TRACE_DEVICE.pop()
    if flow.reached:
        return flow.births[flow.reached - 1]
    if flow.births:
        first = flow.births[0]
        return {
            "found": False,
            "note": "no birth reached a non-finite output element (the first, discarded: "
            f"{first['kind']} in `{first['expression'] or first['primitive']}` at "
            f"{first['file']}:{first['line']})",
        }
    return {
        "found": False,
        "note": "no primitive of the interpreted kernel turned finite "
        "operands into Inf or NaN (the non-finite value may be compiled-only behaviour)",
    }
