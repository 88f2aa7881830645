"""Fake CPU targets for testing the engine: a masked ``y = 2 * x`` with one planted bug each.

Loaded as a plugin (``load_plugin(__file__)``), like a user's own targets. The kernels are torch
code on CPU tensors run by two fake backends, ``fake`` (interpreted) and ``fake-compiled`` (its
twin), so the compiled-vs-interpreted differential is testable without a GPU.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from hypothesis import strategies as st

from fuzz.arrays import special_value
from fuzz.backends import Backend, TorchAdapter, register_backend
from fuzz.case import Case
from fuzz.compare import Tolerance
from fuzz.target import Hazard, MutantOf, Search, Target, register

register_backend(
    Backend("fake", "fake", True, False, "fake-compiled", lambda: TorchAdapter("cpu"), lambda: None)
)
register_backend(
    Backend(
        "fake-compiled", "fake", False, False, "fake", lambda: TorchAdapter("cpu"), lambda: None
    )
)


def cases(scale: str) -> st.SearchStrategy[Case]:
    @st.composite
    def build(draw):
        rows = draw(st.integers(1, 6))
        cols = draw(st.integers(1, 9))
        seed = draw(st.integers(0, 2**16))
        masked = draw(st.booleans())
        rng = np.random.default_rng(seed)
        inputs = {"x": rng.standard_normal((rows, cols)).astype(np.float32)}
        if masked:
            inputs["mask"] = rng.random((rows, cols)) < 0.6
        return Case(inputs, {"dtype": "float32"}, {"seed": seed})

    return build()


def oracle(case, device):
    x = case.inputs["x"].astype(np.float64) * 2
    if "mask" in case.inputs:
        x = np.where(case.inputs["mask"], x, 0.0)
    return {"y": x}


def naive(case, device):
    return {"y": oracle(case, device)["y"].astype(np.float32)}


def poison(case, kind):
    if "mask" not in case.inputs or case.inputs["mask"].all():
        return None
    x = case.inputs["x"].copy()
    x[~case.inputs["mask"]] = special_value(kind, "float32")
    return case.replace(inputs={"x": x})


def fixed(case):
    m = case.inputs.get("mask")
    return {"y": np.zeros(case.inputs["x"].shape, bool) if m is None else ~m}


def make_kernel(bug):
    poisoned = []  # (bugs "sticky", "flaky_sticky": this process's context is lost)
    seen = []  # (bug "flaky_sticky": the shapes it ran)

    def run(inputs, params, *, out, interpret):
        x, mask, y = inputs["x"], inputs.get("mask"), out["y"]
        val = 2 * x
        if mask is not None:
            val = (
                torch.where(mask, val, torch.zeros((), dtype=x.dtype))
                if bug != "masking"
                else val * mask
            )
        if bug == "crash" and x.shape[1] > 3:
            raise RuntimeError("kernel fault (simulated)")
        if bug == "context" and x.shape[1] > 3:  # on a GPU: the process's CUDA context is lost
            raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")
        if bug == "flaky_sticky" and x.shape[1] > 3:
            # fla's backward on an H200: wrong values on a first check of a case (its two
            # runs), then an illegal address on its replay (the context lost, as for "sticky").
            seen.append(x.shape)
            if poisoned or seen.count(x.shape) > 2:
                poisoned.append(True)
                raise RuntimeError("CUDA error: an illegal memory access was encountered (flaky)")
            val = val * 1.5
        if bug == "sticky" and (poisoned or x.shape[1] > 3):
            # As a real lost context: every later launch in this process fails too.
            poisoned.append(True)
            raise RuntimeError("CUDA error: an illegal memory access was encountered (sticky)")
        if bug == "accuracy" and x.shape[1] >= 2:
            val = val.clone()
            val[:, 1] *= 1.01
        if bug == "nan_accuracy" and x.shape[1] >= 2:  # two bugs: accuracy at two columns...
            val = val.clone()
            val[:, 1] *= 1.01
        if bug == "nan_accuracy" and x.shape[0] >= 2:  # ... a NaN at two rows (reported first)
            val = val.clone()
            val[1, 0] = float("nan")
        if bug == "always":  # every case fails
            val = val * 1.01
        if bug == "nan" and x.shape[0] >= 2:
            val = val.clone()
            val[1, 0] = float("nan")
        if bug == "nondeterminism" and x.shape[1] >= 3:
            # Never below 1e-3: a draw near zero would pass the oracle (about one run in a
            # hundred), and the tests expect this kernel to fail it as well as differ between runs.
            val = val + (1 + torch.rand(())) * 1e-3
        if bug == "divergence" and not interpret and x.shape[0] >= 3:
            val = val * 1.1
        if bug == "unwritten" and x.shape[1] >= 2:
            y[:, :-1].copy_(val[:, :-1])
            return {"y": y}
        y.copy_(val)
        if bug == "oob" and x.shape[0] >= 2:
            # One element past the end of row 0: lands in the row gap (or the next row if dense).
            flat = torch.as_strided(y, (y.shape[1] + 1,), (1,))
            flat[y.shape[1]] = 7.0
        return {"y": y}

    return run


BUGS = {
    "crash": "crash",
    "context": "crash",
    "sticky": "crash",
    "flaky_sticky": "nondeterminism",
    "oob": "out-of-bounds-write",
    "unwritten": "nan",
    "nondeterminism": "nondeterminism",
    "masking": "masking",
    "accuracy": "accuracy",
    "nan": "nan",
    "divergence": "backend-divergence",
}

HAZARDS = (
    Hazard(
        "wide",
        lambda c: f"{c.inputs['x'].shape[1]} columns" if c.inputs["x"].shape[1] > 3 else None,
    ),
)


def target(name, bug=None):
    return Target(
        name=name,
        family="fake",
        kernels={"fake": make_kernel(bug)},
        oracle=oracle,
        naive=naive,
        strategy=cases,
        tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
        hazards=HAZARDS,
        poison=poison,
        fixed_outputs=fixed,
        mutant=None if bug is None else MutantOf("fake_double", BUGS[bug], shrink_bound=9),
        description=f"fake target with planted bug {bug}" if bug else "fake masked doubling",
    )


register(target("fake_double"))
for bug in BUGS:
    register(target(f"fake_double_{bug}", bug))


# A kernel whose launches on rows of >= 3 columns fail as a GPU whose memory ran out does (JAX's
# words on an H100 shared by a campaign's dozen processes): the harness's resources, never a
# finding (``fuzz.reproducer.device_out_of_memory``).
def _oom_kernel():
    base = make_kernel(None)

    def run(inputs, params, *, out, interpret):
        if inputs["x"].shape[1] >= 3:
            raise RuntimeError(
                "RESOURCE_EXHAUSTED: Failed to launch CUDA kernel: _kernel; shared memory size: "
                "49152: CUDA_ERROR_OUT_OF_MEMORY: out of memory"
            )
        return base(inputs, params, out=out, interpret=interpret)

    return run


register(dataclasses.replace(target("fake_device_oom"), kernels={"fake": _oom_kernel()}))
# Two bugs, a NaN (two rows) and an error (two columns): shrinking the NaN of a case that has
# both passes through cases of one row, which fail with the error only.
register(
    dataclasses.replace(
        target("fake_nan_accuracy"),
        kernels={"fake": make_kernel("nan_accuracy")},
        description="fake target with two planted bugs: a NaN at two rows, an error at two columns",
    )
)


# A kernel whose compiled runs pay a (fake) compile per variant, for the tests of shrinking a
# compiled backend's finding (fuzz.shrink): a variant is the column count rounded up to a power of
# two, as a shape bucket of a compiled kernel; ``COMPILES`` counts them.
COMPILES: list[tuple[str, int]] = []
COMPILE_SECONDS = 0.02
_compiled: set[tuple[str, int]] = set()
# Whether the interpreter compiles too, per exact shape (as Pallas's interpret mode has XLA compile
# a program per shape); its compiles go to ``INTERPRETER_COMPILES``.
INTERPRETER_COMPILES: list[tuple[str, tuple[int, ...]]] = []
interpreter_compiles = False


def slow_kernel(bug):
    import time

    from fuzz import timing

    base = make_kernel(None)

    def run(inputs, params, *, out, interpret):
        x = inputs["x"]
        if not interpret:
            key = (bug, 1 << max(x.shape[1] - 1, 0).bit_length())
            if key not in _compiled:
                timing.compile_starting()
                time.sleep(COMPILE_SECONDS)
                COMPILES.append(key)
                _compiled.add(key)
                timing.compile_done()
        elif interpreter_compiles and (bug, tuple(x.shape)) not in INTERPRETER_COMPILES:
            timing.compile_starting()
            time.sleep(COMPILE_SECONDS)
            INTERPRETER_COMPILES.append((bug, tuple(x.shape)))
            timing.compile_done()
        res = base(inputs, params, out=out, interpret=interpret)
        y = res["y"]
        if bug == "nan" and x.shape[1] >= 5:
            y[0, 4] = float("nan")
        if bug == "compiled-only" and not interpret and x.shape[0] >= 2:
            y[1, 0] += 1.0
        return res

    return run


def slow_cases(scale: str) -> st.SearchStrategy[Case]:
    @st.composite
    def build(draw):
        rows = draw(st.integers(1, 40))
        cols = draw(st.integers(1, 60))
        seed = draw(st.integers(0, 2**16))
        rng = np.random.default_rng(seed)
        return Case(
            {"x": rng.standard_normal((rows, cols)).astype(np.float32)},
            {"dtype": "float32"},
            {"seed": seed},
        )

    return build()


for bug in ("nan", "compiled-only"):
    register(
        Target(
            name=f"fake_slow_{bug}",
            family="fake",
            kernels={"fake": slow_kernel(bug)},
            oracle=oracle,
            naive=naive,
            strategy=slow_cases,
            tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
            search=Search(interpret_cost=lambda case: float(case.inputs["x"].size)),
            description=f"fake target with a slow compile per variant and planted bug {bug}",
        )
    )


# A compiled backend whose kernels compile ahead (the campaign's compile workers): ``fake-gpu``
# runs the fake kernels as a GPU backend would, and ``cached_kernel`` compiles a variant per column
# bucket into a cache on disk shared by processes (as Triton's cache and JAX's persistent cache
# are): a variant another process compiled loads at once. ``KERNEL_FUZZ_FAKE_CACHE`` is the
# folder (unset: no disk cache), ``KERNEL_FUZZ_FAKE_COMPILE`` the seconds a compile takes; every
# slow compile appends ``pid key`` to ``slow.log`` there.
register_backend(
    Backend("fake-gpu", "fake", False, True, "fake", lambda: TorchAdapter("cpu"), lambda: None)
)
_loaded: set[tuple[str, int]] = set()


def cached_kernel(bug):
    import os
    import time
    from pathlib import Path

    from fuzz import timing

    base = make_kernel(None)

    def run(inputs, params, *, out, interpret):
        x = inputs["x"]
        if not interpret:
            key = (bug or "ok", 1 << max(x.shape[1] - 1, 0).bit_length())
            if key not in _loaded:
                timing.compile_starting()
                folder = os.environ.get("KERNEL_FUZZ_FAKE_CACHE")
                marker = Path(folder, f"{key[0]}-{key[1]}") if folder else None
                if marker is None or not marker.exists():
                    time.sleep(float(os.environ.get("KERNEL_FUZZ_FAKE_COMPILE", "0.3")))
                    if marker is not None:
                        marker.write_text("compiled")
                        with open(Path(folder, "slow.log"), "a") as log:
                            log.write(f"{os.getpid()} {key[0]}-{key[1]}\n")
                _loaded.add(key)
                timing.compile_done()
        res = base(inputs, params, out=out, interpret=interpret)
        if bug == "nan" and x.shape[1] >= 5:
            res["y"][0, 4] = float("nan")
        return res

    return run


for bug in (None, "nan"):
    register(
        Target(
            name="fake_cached" + (f"_{bug}" if bug else ""),
            family="fake",
            kernels={"fake": cached_kernel(bug)},
            oracle=oracle,
            naive=naive,
            strategy=slow_cases,
            tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
            description="fake target compiled per column bucket into a cache on disk"
            + (f", planted bug {bug}" if bug else ""),
        )
    )


# A kernel compiled per exact shape (no buckets), whose cases draw their shape through
# ``strategies.reuse.reusing``: the tests of reused case structures count its compiles
# (``EXACT_COMPILES``). Its compiles and launches advance ``CLOCK``, a virtual clock those tests
# put in place of ``time.perf_counter``, so that what the memo measures is the same everywhere.
class VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


CLOCK = VirtualClock()
EXACT_COMPILE_SECONDS = 1.0
EXACT_LAUNCH_SECONDS = 0.001
EXACT_COMPILES: list[tuple[int, int]] = []
EXACT_CALLS: list[tuple[int, int]] = []  # every call of the compiled kernel, refused or not
_exact: set[tuple[int, int]] = set()


def _fake_compile(key, compiled: set, log: list, name: str | None = None) -> None:
    """Compiles ``key`` unless it is in ``compiled``: announced to ``fuzz.timing`` (which may
    refuse it), ``EXACT_COMPILE_SECONDS`` on ``CLOCK``, logged in ``log``."""
    from fuzz import timing

    if key in compiled:
        return
    timing.compile_starting(name=name)
    CLOCK.now += EXACT_COMPILE_SECONDS
    log.append(key)
    compiled.add(key)
    timing.compile_done()


def exact_kernel(bug=None):
    base = make_kernel(bug)

    def run(inputs, params, *, out, interpret):
        x = inputs["x"]
        if not interpret:
            EXACT_CALLS.append(tuple(x.shape))
            _fake_compile(tuple(x.shape), _exact, EXACT_COMPILES)
        CLOCK.now += EXACT_LAUNCH_SECONDS
        return base(inputs, params, out=out, interpret=interpret)

    return run


def exact_cases(scale: str) -> st.SearchStrategy[Case]:
    from strategies.reuse import reusing

    shape = reusing(st.tuples(st.integers(1, 40), st.integers(1, 60)), key=("fake_exact", scale))

    @st.composite
    def build(draw):
        rows, cols = draw(shape, label="structure")
        seed = draw(st.integers(0, 2**16), label="seed")
        rng = np.random.default_rng(seed)
        return Case(
            {"x": rng.standard_normal((rows, cols)).astype(np.float32)},
            {"dtype": "float32"},
            {"seed": seed},
        )

    return build()


for bug in (None, "accuracy"):
    register(
        Target(
            name="fake_exact" + (f"_{bug}" if bug else ""),
            family="fake",
            kernels={"fake": exact_kernel(bug)},
            oracle=oracle,
            naive=naive,
            strategy=exact_cases,
            tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
            description="fake target compiled per exact shape, shapes drawn through reusing"
            + (f", planted bug {bug}" if bug else ""),
        )
    )


# The same kernel with a property that derives a launch of a shape of its own (the first k rows,
# k drawn with the example's values, as attention's packed-sequence and key-padding properties
# derive one sequence or a truncated batch element): under a spent compile share such a launch
# is skipped (``fuzz.properties.PropertySpared``), not compiled, even where the case's own
# structure is known.
def _first_rows(ctx, k):
    from fuzz.failures import Finding as _Finding

    x = ctx.case.inputs["x"]
    k = 1 + k % x.shape[0]
    launch = ctx.derived(
        ctx.case.replace(inputs={"x": x[:k]}),
        prop="first-rows",
        what=f"the first {k} rows",
        outputs={"y": ((k, x.shape[1]), "float32")},
    )
    if isinstance(launch, _Finding):
        return launch
    if not np.array_equal(launch.outputs["y"], ctx.clean.outputs["y"][:k]):
        return ctx.finding("accuracy", "first-rows", f"the first {k} rows alone differ")
    return None


def _register_derived():
    from fuzz.properties import Property

    register(
        Target(
            name="fake_exact_derived",
            family="fake",
            kernels={"fake": exact_kernel()},
            oracle=oracle,
            naive=naive,
            strategy=exact_cases,
            tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
            properties=(Property("first-rows", _first_rows, st.integers(0, 2**16)),),
            description="fake target compiled per exact shape, with a property that launches "
            "the first k rows alone",
        )
    )


_register_derived()


# Cases whose structure is a kernel variant (an int, as a tile size would be) and its lengths
# (rows, columns), drawn inside ``strategies.reuse.free_lengths``: a reused structure keeps the
# variant and draws fresh lengths. Two kernels run them: one compiled per variant, whose lengths
# compile nothing (as the project's Triton kernels, declared with ``jit_any_size``), and the
# exact-shape kernel above, whose every new length compiles.
VARIANT_COMPILES: list[int] = []
VARIANT_CALLS: list[tuple[int, tuple[int, int]]] = []  # (variant, shape) of each compiled launch
_variants: set[int] = set()


def variant_kernel(bug=None):
    base = make_kernel(bug)

    def run(inputs, params, *, out, interpret):
        v = params["variant"]
        if not interpret:
            VARIANT_CALLS.append((v, tuple(inputs["x"].shape)))
            _fake_compile(v, _variants, VARIANT_COMPILES)
        CLOCK.now += EXACT_LAUNCH_SECONDS
        return base(inputs, params, out=out, interpret=interpret)

    return run


def variant_cases(scale: str) -> st.SearchStrategy[Case]:
    from strategies.reuse import free_lengths, reusing

    @st.composite
    def structure(draw):
        variant = draw(st.integers(0, 15), label="variant")
        with free_lengths(draw):
            rows = draw(st.integers(1, 40), label="rows")
            cols = draw(st.integers(1, 60), label="cols")
        return variant, rows, cols

    shape = reusing(structure(), key=("fake_variant", scale))

    @st.composite
    def build(draw):
        variant, rows, cols = draw(shape, label="structure")
        seed = draw(st.integers(0, 2**16), label="seed")
        rng = np.random.default_rng(seed)
        return Case(
            {"x": rng.standard_normal((rows, cols)).astype(np.float32)},
            {"dtype": "float32", "variant": variant},
            {"seed": seed},
        )

    return build()


for name, kernel, what in (
    ("fake_variant", variant_kernel(), "compiled per variant (lengths compile nothing)"),
    (
        "fake_variant_always",
        variant_kernel("always"),
        "compiled per variant, failing on every case",
    ),
    ("fake_variant_exact", exact_kernel(), "compiled per exact shape"),
):
    register(
        Target(
            name=name,
            family="fake",
            kernels={"fake": kernel},
            oracle=oracle,
            naive=naive,
            strategy=variant_cases,
            tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
            description=f"fake target {what}, its lengths drawn free of its variant",
        )
    )


# The same cases on a kernel compiled per variant and shape bucket of its rows (powers of two, as
# a Pallas kernel padded to buckets): fresh lengths compile where they land in a bucket not
# compiled yet (``BUCKET_COMPILES``: (variant, bucket) of each compile).
BUCKET_COMPILES: list[tuple[int, int]] = []
_buckets: set[tuple[int, int]] = set()


def row_bucket(rows: int) -> int:
    return 1 << max(0, rows - 1).bit_length()


def bucket_kernel():
    base = make_kernel(None)

    def run(inputs, params, *, out, interpret):
        key = (params["variant"], row_bucket(inputs["x"].shape[0]))
        if not interpret:
            _fake_compile(key, _buckets, BUCKET_COMPILES, name="fake_bucket")
        CLOCK.now += EXACT_LAUNCH_SECONDS
        return base(inputs, params, out=out, interpret=interpret)

    return run


register(
    Target(
        name="fake_variant_bucket",
        family="fake",
        kernels={"fake": bucket_kernel()},
        oracle=oracle,
        naive=naive,
        strategy=variant_cases,
        tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
        description="fake target compiled per variant and power-of-two bucket of its rows",
    )
)


# The per-variant kernel with a property that runs the case at another variant, drawn with the
# example's values (as GLA's runs at every other chunk size): what that launch compiles has
# nothing to do with the case's lengths.
def _other_variant(ctx, k):
    from fuzz.failures import Finding as _Finding

    other = ctx.case.replace(variant=ctx.case.params["variant"] + 16 * (1 + k))
    launch = ctx.derived(other, prop="other-variant", what="at another variant")
    if isinstance(launch, _Finding):
        return launch
    if not np.array_equal(launch.outputs["y"], ctx.clean.outputs["y"]):
        return ctx.finding("accuracy", "other-variant", "another variant differs")
    return None


def _register_other_variant():
    from fuzz.properties import Property

    register(
        Target(
            name="fake_variant_derived",
            family="fake",
            kernels={"fake": variant_kernel()},
            oracle=oracle,
            naive=naive,
            strategy=variant_cases,
            tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
            properties=(Property("other-variant", _other_variant, st.integers(0, 7)),),
            description="fake target compiled per variant, with a property that runs the case "
            "at another variant",
        )
    )


_register_other_variant()


# The exact-shape kernel whose interpreted twin compiles per shape too (as Pallas interpret mode
# compiles an XLA program per new shape): ``TWIN_COMPILES`` counts the twin's.
TWIN_COMPILES: list[tuple[int, int]] = []
_twin_shapes: set[tuple[int, int]] = set()


def twin_compiling_kernel():
    compiled = exact_kernel()

    def run(inputs, params, *, out, interpret):
        if interpret:
            _fake_compile(tuple(inputs["x"].shape), _twin_shapes, TWIN_COMPILES)
        return compiled(inputs, params, out=out, interpret=interpret)

    return run


register(
    Target(
        name="fake_exact_twin_compiles",
        family="fake",
        kernels={"fake": twin_compiling_kernel()},
        oracle=oracle,
        naive=naive,
        strategy=exact_cases,
        tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
        description="fake target compiled per exact shape, its interpreted twin too",
    )
)


# The exact-shape kernel that declines every case on the compiled fake (as a compiled Pallas
# kernel declines block shapes its interpreted twin runs): the differential has nothing to compare.
def declined_when_compiled_kernel():
    from fuzz.failures import Unsupported

    compiled = exact_kernel()

    def run(inputs, params, *, out, interpret):
        if not interpret:
            raise Unsupported("no compiled kernel for this shape")
        return compiled(inputs, params, out=out, interpret=interpret)

    return run


register(
    Target(
        name="fake_twin_declines",
        family="fake",
        kernels={"fake": declined_when_compiled_kernel()},
        oracle=oracle,
        naive=naive,
        strategy=exact_cases,
        tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
        description="fake target its compiled twin declines",
    )
)


# Two bugs of one key (accuracy of y) with independent triggers, as a tiled softmax's wrong
# rescale across tiles and its scaled bias: ``multi-tile`` (more columns than its ``block``) scales
# y[0, 0]; ``tall`` (two rows or more) scales y[1, 0]. The block is drawn first, its simplest
# value the smallest: shrinking an example of one bug toward a smaller block makes it an example
# of both, from which it can walk into the other.
def two_bugs_kernel():
    base = make_kernel(None)

    def run(inputs, params, *, out, interpret):
        x = inputs["x"]
        res = base(inputs, params, out=out, interpret=interpret)
        y = res["y"]
        if x.shape[1] > params["block"]:
            y[0, 0] *= 1.5
        if x.shape[0] >= 2:
            y[1, 0] *= 1.5
        return res

    return run


def two_bug_cases(scale: str) -> st.SearchStrategy[Case]:
    @st.composite
    def build(draw):
        block = draw(st.sampled_from([2, 8]))
        rows = draw(st.integers(1, 6))
        cols = draw(st.integers(1, 8))
        seed = draw(st.integers(0, 2**16))
        rng = np.random.default_rng(seed)
        x = rng.uniform(1.0, 2.0, (rows, cols)).astype(np.float32)
        return Case({"x": x}, {"dtype": "float32", "block": block}, {"seed": seed})

    return build()


register(
    Target(
        name="fake_two_bugs_one_key",
        family="fake",
        kernels={"fake": two_bugs_kernel()},
        oracle=oracle,
        naive=naive,
        strategy=two_bug_cases,
        tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
        hazards=(
            Hazard(
                "multi-tile",
                lambda c: "cols > block" if c.inputs["x"].shape[1] > c.params["block"] else None,
            ),
            Hazard("tall", lambda c: "2+ rows" if c.inputs["x"].shape[0] >= 2 else None),
        ),
        description="fake target with two bugs of one key and independent triggers",
    )
)
