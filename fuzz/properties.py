"""Properties: written once, checked for every target on every example.

A :class:`Context` runs one case on one backend and caches what several properties share (the
oracle, the naive reference, the clean launches, and through :meth:`Context.memo` whatever a family
property shares with the others). :func:`check_case` evaluates the properties in a fixed order
and returns the first failure, so the class of a failing example is decided by the most specific
property that sees it::

    crash                 the kernel raised anything (SystemExit, its own KeyboardInterrupt...)
                          or returned the wrong outputs (missing, misshapen, not floats)
    guard-bands           memory around the outputs untouched            -> out-of-bounds-write
    inputs-unchanged      every run gets its own copy of the inputs; none written -> input-write
    poisoned-output       every output element written (poison NaN, then -7.75) -> nan
    determinism           the two clean runs agree bit for bit           -> nondeterminism
    oracle                within tolerance of the fp64 oracle            -> nan / inf / masking / accuracy
    masked-poison         NaN/Inf/huge in masked-out inputs change nothing -> masking
    <target properties>   e.g. softmax rows sum to 1, shift invariance
    backend-agreement     compiled and interpreted twins agree           -> backend-divergence

What a family's properties share:

* :meth:`Context.derived`: a launch derived from the case (a transformed case, another backend
  or entry point) under the one crash policy (a launch that raises is a ``crash`` finding of the
  property), optionally shared by several properties of one example (``share=``);
* :func:`compare_runs`: where one output of two runs differs, bit for bit or within a
  per-element tolerance (it measures; the property decides), and :func:`runs_agree`, the finding
  of a derived run that does not agree with the clean one;
* :meth:`Context.memo`: anything else computed once per example and shared. Data that depends on
  the case alone is cached per case (``fuzz.kit.per_case``).

A kernel may decline a case (``fuzz.Unsupported``): declined in its clean run, the example is
not checked (:func:`check_case` raises; the hunt counts it and draws another); declined in a
launch a property derives, that property is skipped for the example (``Outcome.declined``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import time
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from hypothesis import strategies as st

from fuzz import failures as F
from fuzz import known_crashes, store_fence
from fuzz.arrays import POISON_KINDS, bits, dtype_name, finfo, is_float, to_float64
from fuzz.backends import POISON_FINITE, POISON_NAN, ROW_GAP, Backend, adapter_for, get_backend
from fuzz.compare import Metrics, measure, measure_naive
from fuzz.failures import Finding, Unsupported
from fuzz.stops import is_fault, noting_stops
from fuzz.timing import LaunchTimer, NewCompile, no_new_compiles, refusal_mark, refused_in

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from fuzz.case import Case
    from fuzz.target import Target

T = TypeVar("T")


@dataclass(frozen=True)
class Property:
    """A checkable fact about a kernel.

    ``check(ctx, params)`` returns a :class:`Finding` when the fact is violated, else None.
    ``params`` is drawn from ``params_strategy`` (if any) by Hypothesis, recorded in reproducers.
    ``applies(ctx)`` says whether the property means anything for this backend/case.
    """

    name: str
    check: Callable[[Context, Any], Finding | None]
    params_strategy: SearchStrategy[Any] | None = None
    applies: Callable[[Context], bool] = lambda ctx: True
    description: str = ""
    # Its parameter's values, where they are few: the duplicate check tries each on an
    # example that did not fail the property under the one it drew (``fuzz.duplicates``).
    values: tuple[Any, ...] = ()


# The key under which an entry point that allocates its outputs itself (``Library.allocates``: a
# plugin's) reports, beside its outputs, what it found written outside the buffers it allocated
# with guard regions: ``{buffer label: [where, ...]}`` (empty or absent: nothing).
GUARD_REPORTS = "__guard_reports__"

# The poison a launch fills its outputs with (NaN for the clean run, POISON_FINITE for the
# repeat), for an entry point that allocates its outputs itself (read through launch_fill()).
_LAUNCH_FILL: contextvars.ContextVar[float] = contextvars.ContextVar(
    "launch_fill", default=POISON_NAN
)


def launch_fill() -> float:
    """The poison of the launch running now (:meth:`Context.launch`'s ``fill``): what an entry
    point that allocates its own outputs fills them with, as the harness fills the outputs it
    allocates."""
    return _LAUNCH_FILL.get()


@dataclass
class Launch:
    """One kernel launch: outputs on the host, guard violations, timing, or the exception (or
    the kernel's refusal: ``declined``, never a finding)."""

    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    guards: dict[str, np.ndarray] = field(default_factory=dict)
    guard_notes: dict[str, list[str]] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    error: BaseException | None = None
    declined: Unsupported | None = None
    seconds: float = 0.0
    compiled: bool = False
    loaded: bool = False  # every compile it made was a persistent-cache hit
    input_writes: dict[str, str] = field(default_factory=dict)  # input -> what changed in it
    # input -> the kinds of value it wrote over the kinds it held (``write_kinds``)
    write_kinds: dict[str, list[str]] = field(default_factory=dict)
    # Stores Triton's interpreter dropped, and loads it read as their other value: outside every
    # buffer of the launch (fuzz.store_fence).
    fenced: list[str] = field(default_factory=list)
    wild_loads: list[str] = field(default_factory=list)


class PropertySpared(Exception):
    """A launch a property derived from the case would compile a kernel variant not compiled yet
    while the pair's compile share is spent (:attr:`Context.spare_derived`): the property is
    skipped for this example (``Outcome.spared``), the example itself still checked."""

    def __init__(self, prop: str) -> None:
        super().__init__(f"{prop}: would compile")
        self.prop = prop


class PropertyDeclined(Exception):
    """A launch a property derived from the case was declined by the kernel (``Unsupported``):
    the property is skipped for this example (:func:`check_case` counts it in
    ``Outcome.declined``)."""

    def __init__(self, prop: str, reason: str) -> None:
        super().__init__(f"{prop}: {reason}")
        self.prop, self.reason = prop, reason


@dataclass
class Stats:
    """Accumulated over the examples of one run."""

    launches: int = 0
    launch_seconds: float = 0.0
    compiles: int = 0  # launches during which a kernel was compiled
    compile_seconds: float = 0.0
    # Of those, launches whose every compile was answered from a persistent cache (a kernel
    # compiled by another process, loaded into this one) and their seconds.
    cache_loads: int = 0
    cache_load_seconds: float = 0.0
    twin_launches: int = 0  # launches on the twin backend (the differential)
    twin_seconds: float = 0.0
    reference_seconds: float = 0.0  # the fp64 oracle and the naive reference
    property_seconds: dict[str, float] = field(default_factory=dict)  # launches included

    def merge(self, other: Stats) -> None:
        """Adds ``other``'s counts and times to these."""
        for f in (
            "launches",
            "launch_seconds",
            "compiles",
            "compile_seconds",
            "cache_loads",
            "cache_load_seconds",
            "twin_launches",
            "twin_seconds",
            "reference_seconds",
        ):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        for name, seconds in other.property_seconds.items():
            self.property_seconds[name] = self.property_seconds.get(name, 0.0) + seconds

    def add(self, launch: Launch, *, twin: bool = False) -> None:
        self.launches += 1
        self.launch_seconds += launch.seconds
        if launch.compiled:
            self.compiles += 1
            self.compile_seconds += launch.seconds
            if launch.loaded:
                self.cache_loads += 1
                self.cache_load_seconds += launch.seconds
        if twin:
            self.twin_launches += 1
            self.twin_seconds += launch.seconds


@dataclass(frozen=True)
class RunsCompared:
    """Two runs of one output that a property compared and found apart: ``got``, of a launch
    it derived (``what``: "the run with 64 added to x"), against ``want``, the clean run's,
    within ``tolerance`` per element (None: bit for bit). What a picture of the finding shows
    (``fuzz.campaign.plots.error_maps``): the oracle's view of the clean run is not the failure
    of a metamorphic property."""

    prop: str
    what: str
    output: str
    got: np.ndarray
    want: np.ndarray
    tolerance: np.ndarray | float | None


class Context:
    """One case on one backend, with everything properties share."""

    def __init__(
        self,
        target: Target,
        backend: Backend,
        case: Case,
        *,
        ref_device: str = "cpu",
        differential: bool = False,
        differential_max_cost: float = float("inf"),
        differential_every: int = 1,
        stats: Stats | None = None,
        race_repeats: int = 0,
        spare_derived: bool = False,
    ) -> None:
        self.target = target
        # Launches derived from the case (a truncated sequence, one sequence alone, repeated
        # heads: shapes of their own, each a compile where a kernel compiles per shape) run only
        # where nothing new compiles (``PropertySpared`` otherwise): a known structure is let
        # through a spent compile share because its own launches only load, not its properties'.
        self.spare_derived = spare_derived
        self.race_repeats = max(0, int(race_repeats))
        self.differential_every = max(1, int(differential_every))
        self.differential_max_cost = differential_max_cost
        self.backend = backend
        self.case = case
        self.ref_device = ref_device
        self.differential = differential
        self.stats = stats if stats is not None else Stats()
        self.adapter = adapter_for(backend)
        self._memo: dict[Hashable, Any] = {}
        self._runs: dict[str, Launch] = {}  # the clean and the repeated run, once launched
        # Compile seconds of the launches of the case itself on its own backend (the clean run,
        # its repeats), not of those its properties derive: what its structure costs to compile.
        self.own_compile_seconds = 0.0
        # The runs each property found apart (:func:`runs_agree`), and the failure the check of
        # this case returned (``Outcome.finding``): together, what its picture shows.
        self.compared: dict[str, RunsCompared] = {}
        self.failure: Finding | None = None
        # Whether its errors are scores for Hypothesis's ``target()``: the example Hypothesis
        # draws, not a replay of it (a hunt checks a flaky kernel's examples again, and an
        # example gives each label one score).
        self.scores = True
        # The output a check looks at first where a property compares several (``check_case``'s
        # ``prefer``, a bug key naming one).
        self.prefer_output: str | None = None
        # The kernel calls its properties derived from the case (a shorter sequence, a state
        # carried on, poisoned masked inputs), run on its own backend through the target's own
        # entry point, in launch order, each with the property that launched it: a call of the
        # kernel on inputs of its own, which the duplicate check may check again as an example
        # (``fuzz.duplicates.fails_as``).
        self.derived_cases: list[tuple[str, Case]] = []
        self.only: frozenset[str] | None = None  # the properties checked (``check_case``'s)
        # Drawn but not checked (``check_case``'s ``unchecked``): a shrink step's properties past
        # those of the bugs it shrinks.
        self.unchecked: frozenset[str] = frozenset()

    def failed_comparison(self) -> RunsCompared | None:
        """The two runs whose difference is the failure this case's check returned, where it
        is a comparison of runs (a metamorphic property); None where it is not (the oracle's)."""
        return None if self.failure is None else self.compared.get(self.failure.prop)

    def memo(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, computed once per context (one case on one backend) and kept with it: what
        the properties of one example share beyond the oracle and the clean runs (a launch several
        compare with: :meth:`derived` with ``share=``; data derived from this context's runs).
        ``key`` names the value; a family starts its keys with its name (``("attention", ...)``).
        Data that depends on the case alone is cached per case instead (``fuzz.kit.per_case``)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    # References -------------------------------------------------------------------------------

    @functools.cached_property
    def oracle(self) -> dict[str, np.ndarray]:
        t0 = time.perf_counter()
        out = {
            k: np.asarray(v, np.float64)
            for k, v in self.target.oracle(self.case, self.ref_device).items()
        }
        self.stats.reference_seconds += time.perf_counter() - t0
        return out

    @functools.cached_property
    def naive(self) -> dict[str, np.ndarray]:
        t0 = time.perf_counter()
        out = {k: np.asarray(v) for k, v in self.target.naive(self.case, self.ref_device).items()}
        self.stats.reference_seconds += time.perf_counter() - t0
        return out

    @functools.cached_property
    def out_dtypes(self) -> dict[str, str]:
        return {k: dtype_name(v.dtype) for k, v in self.naive.items()}

    @functools.cached_property
    def hazards(self) -> list[str]:
        return self.target.hazards_of(self.case)

    @functools.cached_property
    def fixed(self) -> dict[str, np.ndarray]:
        if self.target.fixed_outputs is None:
            return {}
        return {k: np.asarray(v, bool) for k, v in self.target.fixed_outputs(self.case).items()}

    # Launches ---------------------------------------------------------------------------------

    def launch(
        self,
        case: Case | None = None,
        *,
        fill: float = POISON_NAN,
        backend: Backend | None = None,
        outputs: Mapping[str, tuple[tuple[int, ...], str]] | None = None,
        entry: Callable[..., Mapping[str, Any]] | None = None,
    ) -> Launch:
        """Runs the kernel with outputs pre-filled with ``fill``; never raises.

        ``outputs`` (name -> (shape, dtype name)) describes the outputs of a ``case`` whose
        outputs differ from this context's (a shorter sequence, one sequence of a batch);
        default: the oracle's shapes and the naive reference's dtypes. ``entry``: another entry
        point of the same kernel library to run instead of the target's own (a property that
        compares the kernel with a sibling computation, such as decode with a causal prefill).
        """
        case = self.case if case is None else case
        backend = self.backend if backend is None else backend
        adapter = adapter_for(backend)
        if entry is None:
            entry = self.target.kernels[backend.impl]
        result = Launch()
        refusals = refusal_mark()
        with noting_stops() as stops:
            try:
                if outputs is None:
                    outputs = self.output_spec(case)
                inputs = self._device_inputs(case, backend)
                bufs = {
                    name: adapter.alloc(tuple(shape), dtype, fill)
                    for name, (shape, dtype) in outputs.items()
                }
                writes_out = self.target.library.writes_out
                out = {k: b.array for k, b in bufs.items()} if writes_out else None
                token = _LAUNCH_FILL.set(fill)
                if backend.interpret:
                    store_fence.install()
                store_fence.reset()
                try:
                    known_crashes.before_launch(case)  # (a child of fuzz.isolated)
                    with LaunchTimer() as timer, np.errstate(all="ignore"):
                        got = entry(inputs, dict(case.params), out=out, interpret=backend.interpret)
                        adapter.synchronize()
                finally:
                    _LAUNCH_FILL.reset(token)
                    result.fenced, result.wild_loads = store_fence.take(), store_fence.take_loads()
                result.seconds, result.compiled = timer.seconds, timer.compiled
                result.loaded = timer.loaded
                result.input_writes = input_writes(adapter, inputs, case, result.write_kinds)
                result.guard_notes = dict(got.get(GUARD_REPORTS) or {})
                missing = set(outputs) - set(got)
                if missing:
                    raise RuntimeError(
                        f"kernel returned {sorted(k for k in got if k != GUARD_REPORTS)}; "
                        f"expected outputs {sorted(outputs)}"
                    )
                for name, (_, dtype) in outputs.items():
                    # Of another kind of number than the family's (a kernel's own dtype, one
                    # NumPy may not hold): the kernel's fault, said before the harness reads it.
                    _check_output_dtype(name, getattr(got[name], "dtype", None), dtype)
                    result.outputs[name] = adapter.get(got[name])
                    result.shapes[name] = tuple(result.outputs[name].shape)
                    result.dtypes[name] = dtype_name(result.outputs[name].dtype)
                    if adapter.guards and out is not None:
                        result.guards[name] = adapter.guard_violations(bufs[name])
            except Unsupported as e:  # the kernel declines the case: never a finding
                result.declined = e
            except BaseException as e:
                # A crash: whatever the kernel raised, SystemExit, GeneratorExit and a
                # KeyboardInterrupt of its own included; a stop from outside (Ctrl-C, SIGTERM)
                # and the harness's own control flow go on up (fuzz.stops). The harness's
                # refusal of a compile goes on up however it came back (a host callback's
                # error): the example is refused, not the kernel's crash.
                if not isinstance(e, NewCompile) and refused_in(e, refusals):
                    raise NewCompile from e
                if not is_fault(e, stops):
                    raise
                result.error = e
        self.stats.add(result, twin=backend is not self.backend)
        if result.compiled and case is self.case and backend is self.backend:
            self.own_compile_seconds += result.seconds
        return result

    def output_spec(self, case: Case) -> Mapping[str, tuple[tuple[int, ...], str]]:
        """The outputs a launch of ``case`` (this context's) allocates: the target's own
        description, or the oracle's shapes and the naive reference's dtypes."""
        if self.target.outputs is not None:
            return self.target.outputs(case)
        return {n: (self.oracle[n].shape, self.out_dtypes[n]) for n in self.oracle}

    def _device_inputs(self, case: Case, backend: Backend) -> dict[str, Any]:
        """The case's inputs on the backend's device, a copy of their own for every launch (a
        CPU tensor would share the case's memory): a kernel that writes into its inputs changes
        neither the case nor another run, and the launch finds the write (``input_writes``)."""
        adapter = adapter_for(backend)
        return {k: adapter.put(np.array(v, copy=True)) for k, v in case.inputs.items()}

    @property
    def clean(self) -> Launch:
        """The first run (outputs poisoned with NaN), launched once; raises ``Unsupported`` where
        the kernel declined the case (the whole example is declined)."""
        launch = self._runs.get("clean")
        if launch is None:
            launch = self._runs["clean"] = self.launch(fill=POISON_NAN)
        if launch.declined is not None:
            raise launch.declined
        return launch

    @property
    def repeat(self) -> Launch:
        """The second run (outputs poisoned with ``POISON_FINITE``), launched once; raises
        ``Unsupported`` as :attr:`clean` does."""
        launch = self._runs.get("repeat")
        if launch is None:
            launch = self._runs["repeat"] = self.launch(fill=POISON_FINITE)
        if launch.declined is not None:
            raise launch.declined
        return launch

    def metrics(self, name: str) -> Metrics:
        return self._metrics[name]

    @functools.cached_property
    def _metrics(self) -> dict[str, Metrics]:
        return {
            name: measure(self.clean.outputs[name], self.oracle[name], self.naive.get(name))
            for name in self.oracle
        }

    @functools.cached_property
    def analytic(self) -> dict[str, np.ndarray]:
        """The target's per-element error bound of each output (``Target.error_bound``),
        broadcast to the output's shape (read-only)."""
        if self.target.error_bound is None:
            return {}
        got = self.target.error_bound(self.case, self.ref_device)
        return {
            k: np.broadcast_to(np.asarray(v, np.float64), self.oracle[k].shape)
            for k, v in got.items()
            if k in self.oracle  # an output the kernel does not have (a plugin's convention)
        }

    def bound(self, name: str) -> np.ndarray:
        """The allowed error of each element of output ``name`` against the oracle, an array of
        the output's shape (read-only; any run of this case: it depends on the oracle, the naive
        reference and the target's analysis only).

        With an analytic bound (``Target.error_bound``): that bound plus ``Tolerance.atol``, or
        the smaller of it and the ratio rule where the family declares the rule justified
        (``Tolerance.ratio_caps_analysis``). Without: the ratio rule."""
        return self.memo(("bound", name), lambda: self._bound(name))

    def _bound(self, name: str) -> np.ndarray:
        """:meth:`bound`, computed."""
        tol = self.target.tolerance_for(name)
        analytic = self.analytic.get(name)
        ratio: float | None = None
        if analytic is None or tol.ratio_caps_analysis:
            naive = self.naive.get(name)
            naive_max = None if naive is None else measure_naive(naive, self.oracle[name])
            ratio = tol.bound(self.oracle[name], naive_max, self.out_dtypes[name])
        shape = self.oracle[name].shape
        if analytic is None:
            assert ratio is not None
            b = np.broadcast_to(np.float64(ratio), shape)
        elif ratio is None:
            b = analytic + tol.atol
        else:
            b = np.minimum(analytic + tol.atol, ratio)
        b = np.asarray(b, np.float64)
        b.setflags(write=False)
        return b

    def finding(self, cls: str, prop: str, message: str, **kw: Any) -> Finding:
        return Finding(cls, prop, message, hazards=list(self.hazards), **kw)

    def spared_launch(self, prop: str, case: Case | None = None, **kw: Any) -> Launch:
        """:meth:`launch` for property ``prop``, which is skipped (``PropertySpared``) where
        the launch would compile while launches a property adds are spared
        (:attr:`spare_derived`): a derived case, or the case on the twin backend (an XLA
        program per new shape in Pallas interpret mode), whose compile would otherwise have
        refused the whole example."""
        if not self.spare_derived:
            return self.launch(case, **kw)
        try:
            with no_new_compiles():
                return self.launch(case, **kw)
        except NewCompile:
            raise PropertySpared(prop) from None

    def derived(
        self,
        case: Case | None,
        *,
        prop: str,
        what: str,
        backend: Backend | None = None,
        outputs: Mapping[str, tuple[tuple[int, ...], str]] | None = None,
        entry: Callable[..., Mapping[str, Any]] | None = None,
        fill: float = POISON_NAN,
        share: Hashable | None = None,
    ) -> Launch | Finding:
        """A launch a property derives from the case (a transformed case, another backend or
        entry point), under the one crash policy of every family: a launch that raises is a
        ``crash`` finding of that property, naming what was run (``what``); never silence.
        Arguments as for :meth:`launch`. ``share``: a key (a family starts it with its name) under
        which the launch is kept for the other properties of this example that derive the same
        one (:meth:`memo`); each gets the crash finding of its own property."""

        def run() -> Launch:
            return self.spared_launch(
                prop, case, fill=fill, backend=backend, outputs=outputs, entry=entry
            )

        if case is not None and case is not self.case and backend in (None, self.backend):
            if entry is None:  # (a launch shared by several properties: each one's)
                self.derived_cases.append((prop, case))
        launch = run() if share is None else self.memo(("derived", share), run)
        if launch.declined is not None:
            raise PropertyDeclined(prop, launch.declined.reason)
        if launch.error is None:
            wrote = input_write_finding(self, launch, prop, what)
            return launch if wrote is None else wrote
        e = launch.error
        return self.finding(
            F.CRASH,
            prop,
            f"{what}: {exception_summary(e)}",
            details={"exception": type(e).__name__, "text": str(e)[:4000], "derived": what},
        )


def input_writes(
    adapter: Any,
    inputs: Mapping[str, Any],
    case: Case,
    kinds: dict[str, list[str]] | None = None,
) -> dict[str, str]:
    """What a launch changed in its own copy of the inputs (``inputs``, on the device) against
    the case's: input name -> how many elements changed and the first one (bit for bit: NaN
    payloads count); an input the launch consumed (a donated buffer) says so. Into ``kinds``,
    per float input changed, what kinds of value it wrote over what kinds (:func:`write_kinds`)."""
    changed: dict[str, str] = {}
    for name, want in case.inputs.items():
        try:
            got = adapter.get(inputs[name])
        except Exception as e:  # a buffer the kernel donated or freed
            changed[name] = f"cannot be read after the call ({exception_summary(e)})"
            continue
        if got.shape != want.shape or got.dtype != want.dtype:
            changed[name] = (
                f"became {got.dtype}{list(got.shape)} (was {want.dtype}{list(want.shape)})"
            )
            continue
        differ = bits(got) != bits(want) if is_float(dtype_name(want.dtype)) else got != want
        if not differ.any():
            continue
        idx = _first_index(differ)
        at = f"{name}[{', '.join(map(str, idx))}]"
        was, now = want[idx], got[idx]
        changed[name] = f"{int(differ.sum())} element(s) changed, first {at}: {was} -> {now}"
        if kinds is not None and is_float(dtype_name(want.dtype)):
            kinds[name] = write_kinds(want[differ], got[differ])
    return changed


def write_kinds(was: np.ndarray, now: np.ndarray) -> list[str]:
    """The kinds of value written over the kinds held, one ``"was -> now"`` each (NaN, +-inf,
    0, the largest and lowest finite, finite), at most 8: what a kernel does to its inputs, the
    same whatever the example (a wrapper sanitizing its values in place, ``nan_to_num_``, turns
    -inf into the lowest finite in every example that holds one)."""
    big = finfo(dtype_name(was.dtype)).max  # (bfloat16's too: NumPy's finfo knows it not)

    def kind(x: np.ndarray) -> np.ndarray:
        out = np.full(x.shape, "finite", dtype=object)
        for label, hit in (
            ("0", x == 0),
            ("largest finite", x == big),
            ("lowest finite", x == -big),
            ("+inf", np.isposinf(x)),
            ("-inf", np.isneginf(x)),
            ("nan", np.isnan(x)),
        ):
            out[np.asarray(hit, bool)] = label
        return out

    pairs = {f"{a} -> {b}" for a, b in zip(kind(was).ravel(), kind(now).ravel(), strict=True)}
    return sorted(pairs)[:8]


def _check_output_dtype(name: str, got: Any, want: str) -> None:
    """Raises where output ``name``, of dtype ``got`` (a NumPy, torch or JAX dtype; None:
    unknown, left to the launch), is of another kind of number than its expected dtype ``want``
    (integers, booleans or an 8-bit float for a float output): no comparison could measure it."""
    from fuzz.arrays import FLOAT_DTYPES

    if got is None:
        return
    have = dtype_name(got)
    floats = (*FLOAT_DTYPES, "float64")
    if want in floats and have not in floats:
        raise TypeError(f"the kernel returned output {name} as {have}; expected {want}")


def exception_summary(e: BaseException) -> str:
    """``Type: first line ... last line [<- Cause: ...]`` (compilers put the cause on the last line,
    or, like Triton's ``CompilationError``, in the chained exception)."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip(" ^\t")]
    text = "" if not lines else lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1]}"
    summary = f"{type(e).__name__}: {text}"
    cause = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    if cause is not None and cause is not e:
        summary += f" <- {exception_summary(cause)}"
    return summary[:500]


def _fmt(v: float | None) -> str:
    return "None" if v is None else f"{v:.6g}"


# Generic properties -------------------------------------------------------------------------------


def _crash(ctx: Context, _: Any) -> Finding | None:
    for launch in (ctx.clean, ctx.repeat):
        if launch.error is not None:
            e = launch.error
            return ctx.finding(
                F.CRASH,
                "crash",
                exception_summary(e),
                details={
                    "exception": type(e).__name__,
                    "text": str(e)[:4000],
                    "raised_at": F.raised_at(e),
                },
            )
    for name, shape in ctx.clean.shapes.items():
        if shape != ctx.oracle[name].shape:
            return ctx.finding(
                F.CRASH,
                "crash",
                f"output {name} has shape {shape}, expected {ctx.oracle[name].shape}",
                output=name,
            )
    spec = ctx.output_spec(ctx.case)
    for name, got in ctx.clean.dtypes.items():
        want = spec[name][1] if name in spec else None
        if want is not None and got != want:
            return ctx.finding(
                F.CRASH,
                "crash",
                f"output {name} has dtype {got}, expected {want} (the family's output dtype for "
                f"{ctx.case.params.get('dtype', 'these')} inputs)",
                output=name,
            )
    return None


def describe_offset(off: int, shape: tuple[int, ...]) -> str:
    """Where a guard element at ``off`` (elements from the output's start) lies."""
    n = shape[-1] if shape else 1
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    pitch = n + ROW_GAP
    if off < 0:
        return f"{-off} element(s) before the output"
    if off >= rows * pitch - ROW_GAP:
        return f"{off - (rows * pitch - ROW_GAP) + 1} element(s) past the output's end"
    row, col = divmod(off, pitch)
    return f"past the end of row {row} (column {col} of {n})"


def _guard_bands(ctx: Context, _: Any) -> Finding | None:
    for launch in (ctx.clean, ctx.repeat):
        if launch.fenced:
            return ctx.finding(
                F.OOB_WRITE,
                "guard-bands",
                f"stored outside every buffer of the launch: {launch.fenced[0]}"
                + (
                    f" (and {len(launch.fenced) - 1} more store(s))"
                    if len(launch.fenced) > 1
                    else ""
                ),
                details={"where": list(launch.fenced[:64])},
            )
        for label, where in launch.guard_notes.items():
            if where:
                return ctx.finding(
                    F.OOB_WRITE,
                    "guard-bands",
                    f"written outside {label}: " + "; ".join(where[:4]),
                    details={"buffer": label, "where": list(where[:64])},
                )
        for name, offsets in launch.guards.items():
            if offsets.size:
                shape = ctx.oracle[name].shape
                where = [describe_offset(int(o), shape) for o in offsets[:4]]
                return ctx.finding(
                    F.OOB_WRITE,
                    "guard-bands",
                    f"{offsets.size} element(s) written outside {name}: " + "; ".join(where),
                    output=name,
                    details={"offsets": [int(o) for o in offsets[:64]]},
                )
    for launch in (ctx.clean, ctx.repeat):
        if launch.wild_loads:
            more = len(launch.wild_loads) - 1
            return ctx.finding(
                F.OOB_READ,
                "guard-bands",
                f"loaded outside every buffer of the launch: {launch.wild_loads[0]}"
                + (f" (and {more} more load(s))" if more else ""),
                details={"where": list(launch.wild_loads[:64])},
            )
    return None


def _first_index(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(mask)[0]), mask.shape))


def input_write_finding(ctx: Context, launch: Launch, prop: str, what: str) -> Finding | None:
    """The ``input-write`` finding of a launch (``what``: which run) that wrote into its
    inputs, else None."""
    if not launch.input_writes:
        return None
    name, change = next(iter(launch.input_writes.items()))
    more = len(launch.input_writes) - 1
    details: dict[str, Any] = {"inputs": dict(launch.input_writes)}
    if launch.write_kinds:
        details["writes"] = dict(launch.write_kinds)
    return ctx.finding(
        F.INPUT_WRITE,
        prop,
        f"{what} wrote into its input {name}: {change}"
        + (f" (and into {more} other input(s))" if more else ""),
        details=details,
    )


def _inputs_unchanged(ctx: Context, _: Any) -> Finding | None:
    for launch, what in ((ctx.clean, "the kernel"), (ctx.repeat, "the kernel's second run")):
        f = input_write_finding(ctx, launch, "inputs-unchanged", what)
        if f is not None:
            return f
    return None


def _poisoned_output(ctx: Context, _: Any) -> Finding | None:
    first = FirstOutput(ctx, "poisoned-output")
    for name in ctx.oracle:
        a, b = ctx.clean.outputs[name], ctx.repeat.outputs[name]
        fa, fb = to_float64(a), to_float64(b)
        unwritten = np.isnan(fa) & (fb == POISON_FINITE)
        if unwritten.any():
            idx = _first_index(unwritten)
            which = unwritten_kind(unwritten, ctx.fixed.get(name))
            first.add(
                ctx.finding(
                    F.NAN,
                    "poisoned-output",
                    f"{int(unwritten.sum())} element(s) of {name} never written (they keep the poison), "
                    f"first at {name}[{', '.join(map(str, idx))}]",
                    output=name,
                    index=idx,
                    kernel_value=float("nan"),
                    oracle_value=float(ctx.oracle[name][idx]),
                    **({"details": {"unwritten": which}} if which else {}),
                )
            )
    return first.finding


def unwritten_kind(unwritten: np.ndarray, fixed: np.ndarray | None) -> str | None:
    """Which of an output's elements a launch left unwritten, against those the family decides
    without arithmetic (``Target.fixed_outputs``: masked-out keys, rows with none): "every
    fixed element and no other", "fixed only", or None (others among them, or no
    such elements). What a kernel leaves unwritten is one store's doing whatever else its
    examples hold: a planted softmax that stored its kept keys only came as two rows, a row
    whose one key was masked and a row of a kept and a masked key."""
    if fixed is None or fixed.shape != unwritten.shape or not fixed.any():
        return None
    if (unwritten & ~fixed).any():
        return None
    return "every fixed element and no other" if (unwritten == fixed).all() else "fixed only"


def _differing_run(ctx: Context, other: Launch, runs: int) -> Finding | None:
    first = FirstOutput(ctx, "determinism")
    for name in ctx.oracle:
        d = compare_runs(other.outputs[name], ctx.clean.outputs[name])
        if d is not None:
            what = f"run {runs} of the same inputs"
            ctx.compared["determinism"] = RunsCompared(
                "determinism", what, name, other.outputs[name], ctx.clean.outputs[name], None
            )
            first.add(
                ctx.finding(
                    F.NONDETERMINISM,
                    "determinism",
                    f"{runs} runs differ in {d.count} element(s) of {name}, at {d.where(name)}: "
                    f"{_fmt(d.want)} then {_fmt(d.got)}",
                    output=name,
                    index=d.index,
                    kernel_value=d.want,
                    details={"second_value": d.got, "runs": runs},
                )
            )
    return first.finding


def _determinism(ctx: Context, _: Any) -> Finding | None:
    """The clean and the repeated run agree bit for bit. With ``ctx.race_repeats`` (a hunt that
    has met a race, and its replays) the kernel runs that many more times: a race that shows on
    one run in a few then fails every replay of a shrinking step, not some of them."""
    f = _differing_run(ctx, ctx.repeat, 2)
    for i in range(ctx.race_repeats if f is None else 0):
        again = ctx.derived(
            None,
            prop="determinism",
            what=f"run {i + 3} of the same inputs",
            fill=POISON_NAN if i % 2 else POISON_FINITE,
        )
        if isinstance(again, Finding):
            return again
        f = _differing_run(ctx, again, i + 3)
        if f is not None:
            break
    return f


def _record_target(ctx: Context, name: str, ratio: float) -> None:
    from hypothesis.control import currently_in_test_context

    if ctx.target.search.targeting and ctx.scores and currently_in_test_context():
        from hypothesis import target

        target(float(min(ratio, 1e12)), label=f"{name}: error / tolerance")


def excess(err: np.ndarray, tol: np.ndarray) -> np.ndarray:
    """``err / tol`` elementwise (``inf`` where an error meets a zero bound, 0 where both are 0):
    above 1 where the error exceeds its bound."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(tol > 0, err / np.where(tol > 0, tol, 1.0), np.where(err > 0, np.inf, 0.0))
    return r


def _argmax_index(a: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(a)), a.shape)) if a.ndim else ()


# Comparing two runs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunDifference:
    """Where one output of two runs differs (:func:`compare_runs`), at the element reported.

    Attributes:
        index: the element (of the compared arrays).
        got, want: its value in the run checked and in the run it is compared with.
        difference: ``|got - want|``; infinite where NaN or Inf meets another value.
        tolerance: its tolerance (0 for a comparison bit for bit).
        count: how many elements differ beyond their tolerance.
        appeared: ``got`` is NaN or Inf where ``want`` is finite.
    """

    index: tuple[int, ...]
    got: float
    want: float
    difference: float
    tolerance: float
    count: int
    appeared: bool

    def where(self, name: str, index: tuple[int, ...] | None = None) -> str:
        """``name[i, j]`` of the element (or of ``index``, where it lies in another array)."""
        return f"{name}[{', '.join(map(str, self.index if index is None else index))}]"


def compare_runs(
    got: np.ndarray, want: np.ndarray, tol: np.ndarray | float | None = None
) -> RunDifference | None:
    """Where output ``got`` of one run differs from the same output ``want`` of another (both of
    one shape): bit for bit (``tol`` None: only NaN equals NaN whatever its payload), or by more
    than ``tol`` per element (an array broadcastable to theirs, or one number), where NaN equals
    NaN, an infinity equals itself and any other difference involving NaN or Inf is infinite (an
    infinite difference within an infinite tolerance agrees). NaN or Inf in ``got`` where ``want``
    is finite never agrees. It measures and never decides: the caller's property classes it.

    Returns None when the runs agree, else the element to report: the first where NaN or Inf
    appeared, else the one of the largest difference / tolerance (bit for bit: the first that
    differs)."""
    with np.errstate(invalid="ignore", over="ignore"):
        if got.shape == want.shape and got.dtype == want.dtype:
            if tol is None:
                if np.array_equal(bits(got), bits(want)):  # the usual case: one cheap pass
                    return None
            elif np.array_equal(got, want, equal_nan=True):
                return None
        g, w = to_float64(got), to_float64(want)
        both_nan = np.isnan(g) & np.isnan(w)
        if tol is None:
            differ = (bits(got) != bits(want)) & ~both_nan
            diff = np.where(differ, np.abs(g - w), 0.0)
            tol_a = np.zeros(diff.shape)
            ratio = np.where(differ, np.inf, 0.0)
        else:
            diff = np.where((g == w) | both_nan, 0.0, np.abs(g - w))
            tol_a = np.broadcast_to(np.asarray(tol, np.float64), diff.shape)
            ratio = excess(np.where(np.isnan(diff), np.inf, diff), tol_a)
            ratio = np.where(np.isnan(ratio), 0.0, ratio)  # inf within an infinite tolerance
        diff = np.where(np.isnan(diff), np.inf, diff)
        appeared = ~np.isfinite(g) & np.isfinite(w)
        ratio = np.where(appeared, np.inf, ratio)
        bad = ratio > 1.0
        if not bad.any():
            return None
        idx = _first_index(appeared) if appeared.any() else _argmax_index(ratio)
    return RunDifference(
        index=idx,
        got=float(g[idx]),
        want=float(w[idx]),
        difference=float(diff[idx]),
        tolerance=float(tol_a[idx]),
        count=int(bad.sum()),
        appeared=bool(appeared[idx]),
    )


class FirstOutput:
    """The finding of a property that checks a call's outputs in turn: the first output's, with
    the classes the later outputs of the same runs failed with (``details["also_outputs"]``).
    A call failing on ``o`` and on ``lse`` is evidence that a row of ``lse`` is the bug of the
    row of ``o`` seen on another output (``fuzz.ledger.also_keys``): a planted window bug was a
    masking row of each, shrunk to the same 2-element case. The comparison a report shows
    (``Context.compared``) stays the first output's."""

    def __init__(self, ctx: Context, prop: str) -> None:
        self.ctx, self.prop = ctx, prop
        self.finding: Finding | None = None
        self._compared: RunsCompared | None = None

    def add(self, f: Finding | None) -> None:
        if f is None:
            return
        if self.finding is None:
            self.finding, self._compared = f, self.ctx.compared.get(self.prop)
            return
        if f.output is None or f.output == self.finding.output:
            return
        classes = {f.cls, *((f.details or {}).get("also_fails") or {})}
        outputs = dict((self.finding.details or {}).get("also_outputs") or {})
        outputs[f.output] = sorted(classes | set(outputs.get(f.output, ())))
        self.finding.details = {**(self.finding.details or {}), "also_outputs": outputs}
        if self._compared is not None:
            self.ctx.compared[self.prop] = self._compared


def runs_agree(
    ctx: Context,
    prop: str,
    what: str,
    name: str,
    got: np.ndarray,
    want: np.ndarray,
    tol: np.ndarray | float | None,
    cls: str,
    *,
    where: Callable[[tuple[int, ...]], tuple[int, ...]] | None = None,
    against: str = "clean run",
    **details: Any,
) -> Finding | None:
    """None when output ``name`` of a run derived from the case (``got``, described by ``what``)
    agrees with the clean run's ``want`` (:func:`compare_runs` within ``tol``), else the finding
    of ``prop``: ``nan``/``inf`` where NaN or Inf appeared, ``cls`` for any other difference.
    ``where`` maps an index of ``got`` to the clean output's (for the report); ``against`` names
    ``want`` in the message (another reference than the clean run: the oracle); ``details`` are
    added to the finding's."""
    d = compare_runs(got, want, tol)
    if d is None:
        return None
    ctx.compared[prop] = RunsCompared(prop, f"the run {what}", name, got, want, tol)
    at = d.index if where is None else where(d.index)
    oracle = ctx.oracle.get(name)
    details = {**details, "clean_value": d.want, "differing": d.count}
    common: dict[str, Any] = dict(
        output=name,
        index=at,
        kernel_value=d.got,
        oracle_value=None if oracle is None else float(oracle[at]),
        details=details,
    )
    if d.appeared:
        return ctx.finding(
            F.NAN if np.isnan(d.got) else F.INF,
            prop,
            f"{what}: {d.where(name, at)} becomes {d.got} ({against} {_fmt(d.want)})",
            **common,
        )
    return ctx.finding(
        cls,
        prop,
        f"{what}: {d.where(name, at)} = {_fmt(d.got)}, {against} {_fmt(d.want)}: difference "
        f"{d.difference:.3g} > tolerance {d.tolerance:.3g}",
        error=d.difference,
        tolerance=d.tolerance,
        **common,
    )


def compare_to_oracle(ctx: Context, name: str, got: np.ndarray, prop: str) -> Finding | None:
    """Classifies ``got`` (one output) against the oracle, element by element against
    ``ctx.bound(name)``: nan/inf/masking/accuracy, or None."""
    o = ctx.oracle[name]
    clean = ctx.clean.outputs.get(name) if ctx.clean.error is None else None
    m = ctx.metrics(name) if got is clean else measure(got, o, ctx.naive.get(name))
    tol = ctx.bound(name)  # depends on the oracle, the naive reference and the analysis only
    if not (m.nonfinite_where_finite or m.special_mismatch):
        ratio = excess(m.errors, tol)
        top = float(ratio.max()) if ratio.size else 0.0
        _record_target(ctx, name, top)
        if top <= 1.0:
            return None
    details: dict[str, Any] = {
        "metrics": m.as_dict(),
        "tolerance_rule": ctx.target.tolerance_for(name).describe()
        if name not in ctx.analytic
        else "per-element error bound (Target.error_bound)",
    }
    fixed = ctx.fixed.get(name)
    also = _also_fails(m, tol, fixed)
    if m.nonfinite_where_finite:
        w = m.first_nonfinite
        assert w is not None
        cls = F.NAN if np.isnan(w.kernel) else F.INF
        count = m.nonfinite_where_finite
        return ctx.finding(
            cls,
            prop,
            f"{count} non-finite element(s) in {name} where the oracle is finite; "
            f"{w.where(name)} = {_fmt(w.kernel)}, oracle {_fmt(w.oracle)}",
            output=name,
            index=w.index,
            kernel_value=w.kernel,
            oracle_value=w.oracle,
            error=float("inf"),
            tolerance=float(tol[w.index]),
            details=_with_also(details, also, cls),
        )
    if m.special_mismatch:
        w = m.first_nonfinite
        assert w is not None
        cls = F.MASKING if fixed is not None and fixed[w.index] else F.ACCURACY
        return ctx.finding(
            cls,
            prop,
            f"{w.where(name)} = {_fmt(w.kernel)} but the oracle is {_fmt(w.oracle)}",
            output=name,
            index=w.index,
            kernel_value=w.kernel,
            oracle_value=w.oracle,
            error=float("inf"),
            tolerance=float(tol[w.index]),
            details=_with_also(details, also, cls),
        )
    k = to_float64(got)
    err = m.errors
    ratio = excess(err, tol)
    cls = F.ACCURACY
    idx = _argmax_index(ratio)
    if fixed is not None and (fixed & (ratio > 1.0)).any():
        cls = F.MASKING
        idx = _argmax_index(np.where(fixed, ratio, -1.0))
    details = _with_also(details, also, cls)
    kv, ov, ev, tv = float(k[idx]), float(o[idx]), float(err[idx]), float(tol[idx])
    where = f"{name}[{', '.join(map(str, idx))}]"
    what = "masked/fixed element" if cls == F.MASKING else "worst element"
    naive = f", naive max error {_fmt(m.naive_max_abs)}" if m.naive_max_abs is not None else ""
    hint = _tf32_hint(ctx, name, err) if cls == F.ACCURACY else ""
    if hint:
        details["likely_cause"] = "tf32"
    return ctx.finding(
        cls,
        prop,
        f"{what} {where} = {_fmt(kv)}, oracle {_fmt(ov)}: error {_fmt(ev)} > tolerance {_fmt(tv)} "
        f"({_fmt(float(ratio[idx]))}x){naive}{hint}",
        output=name,
        index=idx,
        kernel_value=kv,
        oracle_value=ov,
        error=ev,
        tolerance=tv,
        details={**details, "excess": float(ratio[idx])},
    )


def _also_fails(m: Any, tol: np.ndarray, fixed: np.ndarray | None) -> dict[str, int]:
    """The classes of an output's failing elements: ``masking`` (fixed or masked elements over
    their bound, or not finite: a masked key written as exp(s - max) / sum is Inf where s is
    large, a wrong finite value elsewhere) and ``accuracy`` (the others, non-finite ones left
    out: those are the finding's nan or inf), each with its element count. A finding names one
    class; its record keeps the others (``details["also_fails"]``): the same kernel call
    failing another way, evidence that a row of that class is this bug seen another way
    (``fuzz.ledger``)."""
    over = excess(m.errors, tol) > 1.0
    out = {}
    if fixed is not None:
        wrong_fixed = fixed & (over | m.nonfinite)
        if wrong_fixed.any():
            out[F.MASKING] = int(wrong_fixed.sum())
        over = over & ~fixed
    if over.any():
        out[F.ACCURACY] = int(over.sum())
    return out


def _with_also(details: dict[str, Any], also: dict[str, int], cls: str) -> dict[str, Any]:
    """``details`` with ``also_fails``: the classes of ``also`` but the finding's own."""
    rest = {c: n for c, n in also.items() if c != cls}
    return {**details, "also_fails": rest} if rest else details


# The case parameter under which a family's error bound lets fp32 dot products round their
# operands to TF32 (``fuzz.Conventions(fp32_dots=...)``; the attention and simple GLA bounds).
FP32_DOTS = "fp32_dots"


def _tf32_hint(ctx: Context, name: str, err: np.ndarray) -> str:
    """For an accuracy failure of fp32 inputs in a kernel whose library did not declare TF32 dot
    products (a plugin's: ``Conventions(fp32_dots=...)``): a sentence saying that every error of
    ``name`` is within the bound of the same computation with TF32 dot operands, when it is (the
    GPU's default for fp32 dots in Triton and JAX; on an interpreter, whose dots are exact, only
    a kernel's own rounding: :data:`TF32_HINT_INTERPRETED`); else ''."""
    conventions = ctx.target.library.conventions
    if (
        FP32_DOTS not in conventions
        or ctx.case.params.get("dtype") != "float32"
        or ctx.case.params.get(FP32_DOTS, "ieee") != "ieee"
        or ctx.target.error_bound is None
    ):
        return ""
    try:
        alt = ctx.target.error_bound(ctx.case.replace(fp32_dots="tf32"), ctx.ref_device)
    except Exception:  # a hint must never fail an example
        return ""
    if name not in alt:
        return ""
    bound = np.broadcast_to(np.asarray(alt[name], np.float64), err.shape)
    bound = bound + ctx.target.tolerance_for(name).atol
    if not np.all(np.isfinite(err)) or excess(err, bound).max(initial=0.0) > 1.0:
        return ""
    return TF32_HINT_INTERPRETED if ctx.backend.interpret else TF32_HINT


# What an accuracy finding's message adds where TF32 dot operands may explain it (``_tf32_hint``;
# ``fuzz.shrink`` takes it back where the failure reproduces with exact fp32 dots).
TF32_HINT = (
    "; every error is within the bound of fp32 dot products with TF32 operands: TF32 (the "
    "GPU's default for fp32 dots in Triton and JAX) is the likely cause; if the library "
    "computes them so, declare fuzz.Conventions(fp32_dots='tf32')"
)
# The same on an interpreter, whose fp32 dot products are exact (Triton's interpreter multiplies
# in NumPy, Pallas's interpret mode on the CPU's XLA): TF32 there is the kernel's own rounding.
# (A planted ALiBi bug of round 7, within the TF32 bound on the interpreter, was blamed on TF32.)
TF32_HINT_INTERPRETED = (
    "; every error is within the bound of fp32 dot products with TF32 operands, but this "
    "backend computes fp32 dot products exactly: TF32 is the likely cause only where the kernel "
    "rounds its operands to TF32 itself (then declare fuzz.Conventions(fp32_dots='tf32'))"
)


def _oracle(ctx: Context, _: Any) -> Finding | None:
    """The first output off its oracle; the output a check prefers first (``prefer``'s bug key:
    whether a known bug's example fails another bug's way, ``lse`` where ``o`` fails too)."""
    first = FirstOutput(ctx, "oracle")
    for name in sorted(ctx.oracle, key=lambda n: n != ctx.prefer_output):
        first.add(compare_to_oracle(ctx, name, ctx.clean.outputs[name], "oracle"))
    return first.finding


def masked_change(got: np.ndarray, want: np.ndarray) -> RunDifference | None:
    """Where the run with masked inputs poisoned (``got``) differs from the clean run: any
    difference of value, NaN equal to NaN, and a zero equal to a zero of the other sign (a masked
    key's probability 0 times its value is -0 or 0 as the value's sign goes: 0 * v, which a
    kernel may compute, moves no output; a plugin kernel of exactly that came as a masking row
    of "-0 -> 0" in 260 elements)."""
    return compare_runs(got, want, tol=0.0)


def _masked_poison(ctx: Context, value: Any) -> Finding | None:
    assert ctx.target.poison is not None
    poisoned = ctx.target.poison(ctx.case, str(value))
    if poisoned is None:
        return None
    launch = ctx.derived(poisoned, prop="masked-poison", what=f"with masked inputs = {value}")
    if isinstance(launch, Finding):
        return launch
    first = FirstOutput(ctx, "masked-poison")
    for name in ctx.oracle:
        d = masked_change(launch.outputs[name], ctx.clean.outputs[name])
        if d is not None:
            what = f"the run with masked inputs = {value}"
            ctx.compared["masked-poison"] = RunsCompared(
                "masked-poison", what, name, launch.outputs[name], ctx.clean.outputs[name], None
            )
            first.add(
                ctx.finding(
                    F.MASKING,
                    "masked-poison",
                    f"setting masked-out inputs to {value} changed {d.count} element(s) of {name}; "
                    f"{d.where(name)}: {_fmt(d.want)} -> {_fmt(d.got)}",
                    output=name,
                    index=d.index,
                    kernel_value=d.got,
                    oracle_value=float(ctx.oracle[name][d.index]),
                    details={"poison": value, "clean_value": d.want},
                )
            )
    return first.finding


def _twin(ctx: Context) -> Backend | None:
    if not ctx.differential or ctx.backend.twin is None:
        return None
    if ctx.target.search.cost(ctx.case) > ctx.differential_max_cost:
        return None
    try:
        twin = get_backend(ctx.backend.twin)
    except ValueError:
        return None
    # A kernel declared for some backends only (a plugin written for TPUs, interpreted here) is
    # never run on another as a twin: its pallas-interpret pairs on a GPU host compared it with
    # pallas-gpu and reported Pallas's missing GPU lowering of ``reduce_or`` as its divergence.
    if ctx.target.unsupported(twin) is not None:
        return None
    return twin if twin.available else None


def _backend_agreement(ctx: Context, draw: Any) -> Finding | None:
    # The twin is an interpreter, orders of magnitude slower than the compiled kernel: a profile
    # runs it on one example in ``differential_every``. Which ones is a drawn number, so that a
    # replay repeats the choice; 0 (where shrinking goes) skips it unless every example runs it,
    # so shrinking another failure does not pay for the twin, while a differential failure
    # shrinks to the smallest number that still runs it.
    every = ctx.differential_every
    if int(draw or 0) % every != every - 1:
        return None
    twin = _twin(ctx)
    assert twin is not None
    other = ctx.spared_launch("backend-agreement", backend=twin)
    if other.declined is not None:
        # The kernel declines the case on its twin (a compiled Pallas kernel's block limits, say):
        # nothing to compare; the property is skipped for this example, as for a derived launch.
        raise PropertyDeclined("backend-agreement", other.declined.reason)
    if other.error is not None:
        # The same source raising on one backend only is the divergence this property looks for.
        e = other.error
        return ctx.finding(
            F.DIVERGENCE,
            "backend-agreement",
            f"{twin.name} raised where {ctx.backend.name} did not: {exception_summary(e)}",
        )
    for name in ctx.oracle:
        tol = ctx.bound(name) * ctx.target.tolerance_for(name).divergence_factor
        d = compare_runs(other.outputs[name], ctx.clean.outputs[name], tol)
        if d is not None:
            ctx.compared["backend-agreement"] = RunsCompared(
                "backend-agreement",
                f"the run on {twin.name}",
                name,
                other.outputs[name],
                ctx.clean.outputs[name],
                tol,
            )
            idx, oracle = d.index, float(ctx.oracle[name][d.index])
            return ctx.finding(
                F.DIVERGENCE,
                "backend-agreement",
                f"{ctx.backend.name} and {twin.name} differ at {d.where(name)}: "
                f"{_fmt(d.want)} vs {_fmt(d.got)} (oracle {_fmt(oracle)}), tolerance {_fmt(d.tolerance)}",
                output=name,
                index=idx,
                kernel_value=d.want,
                oracle_value=oracle,
                error=d.difference,
                tolerance=d.tolerance,
                details={"twin": twin.name, "twin_value": d.got},
            )
    return None


GENERIC: tuple[Property, ...] = (
    Property(
        "crash",
        _crash,
        description="the kernel runs and returns every output with the oracle's shape",
    ),
    Property(
        "guard-bands",
        _guard_bands,
        applies=lambda ctx: (
            (ctx.adapter.guards and ctx.target.library.writes_out)
            or ctx.target.library.allocates
            or ctx.backend.interpret  # (stores the interpreter's fence dropped)
        ),
        description="memory before, between the rows of, and after each output keeps its bits, "
        "and no store or load lands outside every buffer of the launch",
    ),
    Property(
        "inputs-unchanged",
        _inputs_unchanged,
        description="the kernel leaves its inputs as they were, bit for bit",
    ),
    Property(
        "poisoned-output",
        _poisoned_output,
        applies=lambda ctx: ctx.target.library.writes_out or ctx.target.library.allocates,
        description="every output element is written",
    ),
    Property(
        "determinism", _determinism, description="two runs on the same inputs give the same bits"
    ),
    Property(
        "oracle",
        _oracle,
        description="within tolerance of the fp64 oracle; no NaN/Inf where it is finite",
    ),
    Property(
        "masked-poison",
        _masked_poison,
        st.sampled_from(POISON_KINDS),
        applies=lambda ctx: ctx.target.poison is not None,
        description="NaN, Inf or huge values in masked-out inputs change no output bit",
        values=POISON_KINDS,
    ),
)
DIFFERENTIAL = Property(
    "backend-agreement",
    _backend_agreement,
    st.integers(0, 255),
    applies=lambda ctx: _twin(ctx) is not None,
    description="the compiled and interpreted runs of one kernel source agree within tolerance",
)


def properties_of(target: Target) -> tuple[Property, ...]:
    """Every property checked for ``target``, in order: the generic ones, the family's and its
    own, the differential; those the target switched off (``Library.disabled``) left out, and a
    property of the target's own replacing a generic one of the same name."""
    own = {p.name: p for p in target.properties}
    generic = tuple(own.pop(p.name, p) for p in GENERIC)
    props = (*generic, *own.values(), DIFFERENTIAL)
    return tuple(p for p in props if p.name not in target.library.disabled)


@dataclass
class Outcome:
    """The result of checking one case: the first finding (if any), the parameters drawn, the
    properties skipped because the kernel declined a launch they derive (``property: reason``),
    and those skipped because a launch they derive would have compiled (``spared``)."""

    finding: Finding | None
    params: dict[str, Any]
    context: Context
    declined: list[str] = field(default_factory=list)
    spared: list[str] = field(default_factory=list)


def check_case(
    target: Target,
    backend: Backend,
    case: Case,
    *,
    draw: Callable[[SearchStrategy[Any], str], Any] | None = None,
    params: Mapping[str, Any] | None = None,
    ref_device: str = "cpu",
    differential: bool = False,
    differential_max_cost: float = float("inf"),
    differential_every: int = 1,
    stats: Stats | None = None,
    race_repeats: int = 0,
    prefer: str | None = None,
    note: Callable[[str, Any], None] | None = None,
    spare_derived: bool = False,
    admit: Callable[[], None] | None = None,
    only: Collection[str] | None = None,
    autotune: Sequence[int] | None = None,
    unchecked: Collection[str] = (),
) -> Outcome:
    """Checks every property in order and stops at the first failure.

    Property parameters come from ``draw`` (Hypothesis) or from ``params`` (a replay), all of
    them before the first launch (see :func:`_drawn`); ``admit()`` is called then, before the
    first launch (it may refuse the example: a hunt's ``reject()``).
    ``note(name, value)``: called whenever a parameter's recorded value is settled after its draw
    (the autotuned kernels' configs, as each launch chooses one: what a replay takes), before the
    launch that uses it.
    ``race_repeats``: extra runs for the determinism property (see :func:`_determinism`).
    ``spare_derived``: a property whose derived launch would compile is skipped
    (``Outcome.spared``; see :class:`Context`).
    ``prefer``: a failure class (a replay's recorded one), or a bug key
    (``fuzz.signatures.bug_key``: a shrink stage's one bug): when the first failure is of
    another class or key (a racy kernel may show its race before the accuracy bug it was saved
    for; a small case fails the oracle before the metamorphic property a large one failed
    alone), the remaining properties are still checked and a failure of the preferred class or
    key is returned if one shows. A crash ends the check at once.
    ``only``: the names of the properties to check (None: all of them).
    ``unchecked``: properties whose parameters are drawn (the example's choices are those of a
    full check) but which are not checked.
    ``autotune``: the run's narrowing of the autotuned kernels' drawn configs
    (``fuzz.narrowing.AUTOTUNE``; None: every config).

    Raises:
        Unsupported: the kernel declined the case itself (its clean run): the example is not
            checked. A launch a property derives that the kernel declines skips that property
            (``Outcome.declined``).
    """
    ctx = Context(
        target,
        backend,
        case,
        ref_device=ref_device,
        differential=differential,
        differential_max_cost=differential_max_cost,
        differential_every=differential_every,
        stats=stats,
        race_repeats=race_repeats,
        spare_derived=spare_derived,
    )
    ctx.scores = draw is not None
    ctx.only = None if only is None else frozenset(only)
    ctx.unchecked = frozenset(unchecked)
    if prefer is not None and prefer.count("|") >= 2:
        ctx.prefer_output = prefer.split("|")[2]
    used: dict[str, Any] = {}
    with _pinned_configs(target, draw, params, note, autotune) as choices:
        outcome = _check_properties(ctx, draw, params, used, prefer, admit)
    if choices:
        used["autotune"] = [c.record() for c in choices]
    return outcome


def _preferred(finding: Finding, prefer: str) -> bool:
    """Whether ``finding`` is of class ``prefer`` or, where ``prefer`` is a bug key, has it."""
    return finding.cls == prefer if "|" not in prefer else F.bug_key(finding) == prefer


def _drawn(
    ctx: Context,
    draw: Callable[[SearchStrategy[Any], str], Any] | None,
    params: Mapping[str, Any] | None,
    used: dict[str, Any],
) -> list[tuple[Property, Any]]:
    """The properties that apply to ``ctx``'s case, each with its parameter: given (``params``),
    else drawn (``draw``), every one of them before anything is launched, into ``used``. What
    an example draws is then a function of what it drew before, never of what its launches did:
    a check that ended at an earlier property on one run (a flaky kernel, a compile refused
    inside a host callback) and went on to draw more on a replay had Hypothesis raise
    ``FlakyStrategyDefinition`` ("the second run drew more data than the first run"), and a
    refusal after the draws is a rejection at the same point on every run. A replay that did
    not record a property's parameter skips that property."""
    out = []
    for prop in properties_of(ctx.target):
        if (ctx.only is not None and prop.name not in ctx.only) or not prop.applies(ctx):
            continue
        value = None
        if prop.params_strategy is not None:
            if params is not None and prop.name in params:
                value = params[prop.name]
            elif draw is None:
                continue
            else:
                value = draw(prop.params_strategy, prop.name)
            used[prop.name] = value
        out.append((prop, value))
    return out


def _check_properties(
    ctx: Context,
    draw: Callable[[SearchStrategy[Any], str], Any] | None,
    params: Mapping[str, Any] | None,
    used: dict[str, Any],
    prefer: str | None,
    admit: Callable[[], None] | None = None,
) -> Outcome:
    first: Finding | None = None
    declined: list[str] = []
    spared: list[str] = []
    checks = _drawn(ctx, draw, params, used)
    if admit is not None:
        admit()
    for prop, value in checks:
        if prop.name in ctx.unchecked:
            continue
        t0 = time.perf_counter()
        try:
            if first is None:
                finding = prop.check(ctx, value)
            else:
                try:  # past the first failure, only looking for the preferred class
                    finding = prop.check(ctx, value)
                except (PropertyDeclined, PropertySpared, Unsupported):
                    raise
                except Exception:
                    finding = None
        except PropertyDeclined as e:  # a launch the property derives was declined: skipped
            declined.append(f"{e.reason} ({e.prop})")
            finding = None
        except PropertySpared as e:  # ... or would compile past the share: skipped
            spared.append(e.prop)
            finding = None
        spent = ctx.stats.property_seconds
        spent[prop.name] = spent.get(prop.name, 0.0) + time.perf_counter() - t0
        if finding is None:
            continue
        if (
            prefer is None
            or _preferred(finding, prefer)
            or (first is None and finding.cls == F.CRASH)
        ):
            if first is not None:  # what the case failed first: it is an example of that too
                finding.details["fails_first"] = F.bug_key(first)
            ctx.failure = finding
            return Outcome(finding, used, ctx, declined, spared)
        if first is None:
            first = finding
    ctx.failure = first
    return Outcome(first, used, ctx, declined, spared)


# Picks of the autotuned kernels' configs: integers drawn with the example, each answering one
# kernel's launch in order (fuzz.triton_runtime.positions: it shrinks toward each kernel's first
# config). Under a run's narrowing of the configs (a compiled backend's), each of eight kernels'
# launches draws one (AUTOTUNE_PICKS_EACH): a list of Hypothesis's own length left the fourth
# kernel of fla's backward, its dq kernel, without a pick of its own (its first config) in 29%
# of examples, and at a num_warps=2 config in 64% (2,000 draws; 50% with a pick each). Without
# a narrowing the list keeps its own length: eight more choices in every example of every
# Triton plugin (each declared autotuned) changed what the CPU's searches drew.
AUTOTUNE_PICKS = st.lists(st.integers(0, 2**16 - 1), max_size=8)
AUTOTUNE_PICKS_EACH = st.lists(st.integers(0, 2**16 - 1), min_size=8, max_size=8)


@contextlib.contextmanager
def _pinned_configs(
    target: Target,
    draw: Callable[[SearchStrategy[Any], str], Any] | None,
    params: Mapping[str, Any] | None,
    note: Callable[[str, Any], None] | None = None,
    among: Sequence[int] | None = None,
) -> Iterator[list[Any]]:
    """For a target whose kernels are autotuned (``Library.autotune``), every launch of the
    example runs one config per kernel, never benchmarked: drawn (``draw``), replayed from a
    reproducer's ``params["autotune"]``, or the first. Yields the choices made (empty
    otherwise). ``note("autotune", records)``: the choices so far as a replay reads them
    (``Choice.record``), said before any launch and again as each launch chooses, so that a
    process that dies in the launch leaves the configs it ran, never the raw draw. ``among``:
    the run's narrowing of the drawn configs (``fuzz.narrowing.AUTOTUNE``)."""
    if not target.library.autotune:
        yield []
        return
    from fuzz import triton_runtime as tr

    recorded = None if params is None else params.get("autotune")
    if recorded is not None:
        chooser = tr.replay(recorded)
    elif draw is not None:
        # A run that narrows the configs (a compiled backend's) draws a pick for each kernel;
        # one that does not keeps the shorter draw (the CPU's searches draw as they did).
        picks = AUTOTUNE_PICKS if among is None else AUTOTUNE_PICKS_EACH
        chooser = tr.positions(draw(picks, "autotune"), among)
        if note is not None:
            chooser = _noting_choices(chooser, note)
    else:
        chooser = tr.first
    with tr.pinned_configs(chooser) as choices:
        yield choices


def _noting_choices(chooser: Any, note: Callable[[str, Any], None]) -> Any:
    """``chooser``, telling ``note`` every choice it makes as ``("autotune", records so far)``
    (each ``[kernel, index, config text]``, as ``fuzz.triton_runtime.Choice.record`` writes it);
    the empty list first, before any launch."""
    from fuzz import triton_runtime as tr

    records: list[list[Any]] = []
    note("autotune", [])

    def noting(kernel: str, candidates: Any) -> int:
        position = chooser(kernel, candidates)
        if isinstance(position, int) and 0 <= position < len(candidates):
            chosen = candidates[position]
            records.append(tr.Choice(kernel, chosen.index, chosen.config).record())
            note("autotune", [list(r) for r in records])
        return position

    return noting
