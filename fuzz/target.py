"""The target record and its registry.

A target is everything the harness needs to fuzz one kernel: its entry point per kernel language,
the fp64 oracle, a naive same-dtype reference, the input strategy, the tolerance policy, the
input hazards it knows about and any properties beyond the generic ones. Records beside the
contract: what the kernel's library declares (:class:`Library`), scheduling hints
(:class:`Search`), the scoreboard's baselines (:class:`Baselines`). Mutants are targets too, with a
:class:`MutantOf` naming the target they copy and the failure class they must produce.

Targets come from the built-in families (``fuzz.targets``) or from plugins: a Python file or an
importable module that calls :func:`register` (``python -m fuzz run --plugin FILE``, ``pytest
--plugin FILE``).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from fuzz.compare import Tolerance
from fuzz.failures import CLASSES

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from fuzz.case import Case
    from fuzz.properties import Property

KNOWN_FAMILIES = ("softmax", "attention", "jagged_softmax", "simple_gla")


class KernelEntry(Protocol):
    def __call__(
        self,
        inputs: Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        out: Mapping[str, Any] | None,
        interpret: bool,
    ) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Hazard:
    """An input condition known to break kernels of this kind.

    ``check(case)`` returns a sentence describing how the condition holds in ``case``
    (``"masked-region exponent 90.5 > 88.72"``), or None when it does not hold.
    """

    name: str
    check: Callable[[Case], str | None]

    def holds(self, case: Case) -> str | None:
        try:
            return self.check(case)
        except Exception as e:  # a hazard description must never fail an example
            return f"(hazard check {self.name} failed: {type(e).__name__}: {e})"


@dataclass(frozen=True)
class MutantOf:
    """What makes a target a mutant: a copy of a real target with a planted bug, run to prove the
    harness finds, classes and shrinks what it must.

    Attributes:
        real: the real target it copies.
        expected_class: the failure class it must produce (one of ``fuzz.failures.CLASSES``).
        shrink_bound: the largest input size (elements, ``Case.size``) its minimal reproducer may
            have; the test suite asserts it. An int, or ``shrink_bound(case) -> int`` where the
            least failing input depends on geometry the profile draws (tile sizes, head dims: the
            GPU profile's simplest tiles and head dim are larger). None: no bound declared.
    """

    real: str
    expected_class: str
    shrink_bound: int | Callable[[Case], int] | None = None

    def __post_init__(self) -> None:
        if self.expected_class not in CLASSES:
            raise ValueError(
                f"mutant of {self.real!r}: expected_class={self.expected_class!r} is not one of "
                f"{CLASSES}"
            )

    def shrink_limit(self, case: Case) -> int | None:
        """The shrink bound for a minimal ``case`` (None: none declared)."""
        if self.shrink_bound is None or isinstance(self.shrink_bound, int):
            return self.shrink_bound
        return int(self.shrink_bound(case))


@dataclass(frozen=True)
class Search:
    """How a hunt spends its time on a target: scheduling hints, not part of the kernel's contract.

    Attributes:
        targeting: whether the oracle comparison reports ``error / tolerance`` to
            ``hypothesis.target()``. Hypothesis then spends the second half of a run of fewer than
            1000 examples climbing on the best-scoring example; a family whose bugs hide in
            structure (shapes, masks, tiles) rather than in values gets more from fresh examples.
        interpret_cost: ``interpret_cost(case) -> float``: the work an interpreter would do for
            ``case``, in units of one program instance processing one tile; the in-process
            differential runs only where this is within the profile's ``differential_max_cost``
            (the Triton interpreter costs milliseconds per program-tile). Default: the largest
            input's elements / 1024.
    """

    targeting: bool = True
    interpret_cost: Callable[[Case], float] | None = None

    def cost(self, case: Case) -> float:
        if self.interpret_cost is not None:
            return float(self.interpret_cost(case))
        return case.size / 1024


@dataclass(frozen=True)
class Baselines:
    """The fixed tests the mutant scoreboard compares the fuzzer with (``fuzz.scoreboard``).

    Attributes:
        randn: ``randn(seed, scale) -> Case``: the target's default shape with standard-normal
            values, one case per seed (how KernelBench checks a kernel: a few seeded ``randn``
            trials).
        grid: ``grid(scale) -> [Case]``: the fixed grid of shapes, dtypes and options the
            family's upstream tests use (flash-attention, fla, the Triton tutorials), ``randn``
            values.
    """

    randn: Callable[[int, str], Case] | None = None
    grid: Callable[[str], Sequence[Case]] | None = None


@dataclass(frozen=True)
class Library:
    """What a kernel library declares about how its kernel behaves and where it runs. A plugin's
    ``fuzz.fuzz_kernel`` fills it from the user's declarations; the built-in kernels keep the
    defaults (the families' own conventions, every backend of their languages).

    Attributes:
        backends: the backends the kernel supports (None: every backend running one of its
            kernel languages); a target is never paired with another, and ``python -m fuzz
            list`` says why.
        writes_out: whether the entry points honour ``out`` (the guard-band and poisoned-output
            properties need it).
        autotune: the library launches autotuned Triton kernels (``triton.autotune``): each
            example draws one config per autotuned kernel (shrinking toward the first), pins it
            for every launch of the example, never benchmarks, and records it with the example
            (``fuzz.triton_runtime``).
        conventions: how the kernel behaves where libraries differ (``fuzz.plugin.Conventions``
            as a dict); empty for the built-in kernels.
        siblings: other kernels of the same library that properties compare with, by family
            (decode's "last row of a causal prefill" runs the library's ``attention`` kernel);
            a family property whose sibling is absent does not run. Built-in targets use the
            project's own.
        disabled: properties switched off, each with its declared reason (a kernel that is
            order-dependent by design, say).
        known_failures: failures the library knows about and accepts
            (``fuzz.signatures.KnownFailure``): matching examples are counted under their reason,
            never shrunk nor reported as bugs, and never end a hunt.
        allocates: the entry points allocate the outputs themselves (a plugin's kernel, which
            never takes ``out``): they poison what the library allocates with the launch's
            poison and guard it, and report writes outside it with the outputs
            (``fuzz.properties.GUARD_REPORTS``), so the guard-band and poisoned-output
            properties run on them too.
        capabilities: what the kernel supports on each backend kind (``compiled``,
            ``interpreted``): a plugin's ``fuzz.Capabilities`` resolved per kind. Family
            properties that derive launches read it (a state continuation needs the initial and
            final states, a chunk-size comparison the chunk sizes declared). Empty for the
            built-in kernels: everything their family draws.
    """

    backends: tuple[str, ...] | None = None
    writes_out: bool = True
    autotune: bool = False
    conventions: Mapping[str, str] = field(default_factory=dict)
    siblings: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    disabled: Mapping[str, str] = field(default_factory=dict)
    known_failures: Sequence[Any] = ()
    allocates: bool = False
    capabilities: Mapping[str, Any] = field(default_factory=dict)

    def supports(self, feature: str, backend: Any) -> bool:
        """Whether the kernel supports optional ``feature`` on ``backend`` (a
        ``fuzz.backends.Backend``): always for a built-in kernel."""
        caps = self.capabilities.get("interpreted" if backend.interpret else "compiled")
        features = None if caps is None else caps.features
        return features is None or feature in features

    def tiles(self, tile: str, backend: Any) -> tuple[int, ...] | None:
        """The sizes of tile parameter ``tile`` the kernel declares on ``backend`` (None: the
        family's own)."""
        caps = self.capabilities.get("interpreted" if backend.interpret else "compiled")
        if caps is None or not caps.tiles or tile not in caps.tiles:
            return None
        return tuple(caps.tiles[tile])


@dataclass(frozen=True)
class Target:
    """One fuzzable kernel: its contract (``name`` to ``description``), where it came from
    (``source``), and beside the contract the records ``library``, ``search``, ``baselines`` and
    ``mutant``.

    Attributes:
        name: unique; starts with ``family``.
        family: ``softmax``, ``attention``, ``jagged_softmax``, ``simple_gla``, or a plugin's own.
        kernels: entry point per kernel language (``'triton'``, ``'pallas'``), called as
            ``entry(inputs, params, out=..., interpret=...)`` with framework arrays, returning the
            outputs by name. ``out`` holds poisoned outputs to write into (torch: in place;
            JAX: the initial contents of the result) or is None.
        oracle: ``oracle(case, device) -> {output: float64 ndarray}``.
        naive: ``naive(case, device) -> {output: ndarray in the output dtype}``, the reference the
            tolerance is relative to; its dtypes are the outputs' dtypes.
        strategy: ``strategy(scale) -> SearchStrategy[Case]``, ``scale`` is ``'small'``/``'large'``.
            A built-in family's strategy also takes the keywords of its compile-time variant
            space (``fuzz.families``, ``Profile.variant_choices``); a wrapper around it keeps
            them and sets ``__wrapped__`` (``functools.wraps``).
        tolerance: one policy for all outputs, or one per output name.
        error_bound: ``error_bound(case, device) -> {output: float or ndarray}``: the error any
            correct implementation of the computation may have against the fp64 oracle, per
            output element (an array broadcastable to the output's shape, or one number), derived
            from a forward error analysis of the case (condition numbers, working precision,
            reduction lengths). With it, an output is checked element by element against this
            bound (plus ``Tolerance.atol``); its ``Tolerance`` ratio rule is applied too only
            where the family declares it justified (``Tolerance.ratio_caps_analysis``), as the
            smaller of the two. None: the ratio rule alone.
        hazards: input conditions reported with findings (and as coverage events).
        poison: ``poison(case, kind) -> Case | None``: the case with every input that must not
            matter (masked-out keys, padding) set to the poison ``kind`` (``'nan'``, ``'inf'``,
            ``'max'``, ``'-max'``, ``'-inf'``; see ``fuzz.arrays.special_value``); None if nothing
            is masked.
        fixed_outputs: ``fixed_outputs(case) -> {output: bool ndarray}``: elements whose value is
            decided by the mask alone (zeros of masked keys, rows without a valid key); an error
            there is classed ``masking`` rather than ``accuracy``.
        properties: properties beyond the generic ones.
        outputs: ``outputs(case) -> {output: (shape, dtype name)}``, the outputs a launch
            allocates, known from the shapes alone (else the oracle is computed first to learn
            them: a launch that compiles, or is rejected before compiling, then waits for it).
        description: one line for listings.
        source: ``'builtin'`` or the plugin that registered it (set by :func:`register`).
        library: what the kernel's library declares (:class:`Library`).
        search: how a hunt schedules its examples (:class:`Search`).
        baselines: the scoreboard's fixed tests (:class:`Baselines`).
        mutant: for a mutant, what it copies and must produce (:class:`MutantOf`); None for a real
            target.
    """

    name: str
    family: str
    kernels: Mapping[str, KernelEntry]
    oracle: Callable[[Case, str], Mapping[str, np.ndarray]]
    naive: Callable[[Case, str], Mapping[str, np.ndarray]]
    strategy: Callable[[str], SearchStrategy[Case]]
    tolerance: Tolerance | Mapping[str, Tolerance] = field(default_factory=Tolerance)
    error_bound: Callable[[Case, str], Mapping[str, np.ndarray | float]] | None = None
    hazards: Sequence[Hazard] = ()
    poison: Callable[[Case, str], Case | None] | None = None
    fixed_outputs: Callable[[Case], Mapping[str, np.ndarray]] | None = None
    properties: Sequence[Property] = ()
    outputs: Callable[[Case], Mapping[str, tuple[tuple[int, ...], str]]] | None = None
    description: str = ""
    source: str = "builtin"
    library: Library = field(default_factory=Library)
    search: Search = field(default_factory=Search)
    baselines: Baselines = field(default_factory=Baselines)
    mutant: MutantOf | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]+", self.name):
            raise ValueError(f"target name={self.name!r} must be letters, digits, '_', '-', '.'")
        if not self.kernels:
            raise ValueError(
                f"target {self.name!r}: kernels must name at least one kernel language"
            )
        for attr, kind in (
            ("library", Library),
            ("search", Search),
            ("baselines", Baselines),
            ("mutant", MutantOf),
        ):
            value = getattr(self, attr)
            if not isinstance(value, kind) and not (attr == "mutant" and value is None):
                raise TypeError(
                    f"target {self.name!r}: {attr} must be a fuzz.target.{kind.__name__}, got "
                    f"{type(value).__name__}"
                )

    @property
    def is_mutant(self) -> bool:
        return self.mutant is not None

    @property
    def mutant_of(self) -> str | None:
        """The real target a mutant copies; None for a real target."""
        return None if self.mutant is None else self.mutant.real

    @property
    def expected_class(self) -> str | None:
        """The failure class a mutant must produce; None for a real target."""
        return None if self.mutant is None else self.mutant.expected_class

    def unsupported(self, backend: Any) -> str | None:
        """Why this target never runs on ``backend`` (a ``fuzz.backends.Backend``), or None."""
        if backend.impl not in self.kernels:
            return f"no {backend.impl} kernel"
        if self.library.backends is not None and backend.name not in self.library.backends:
            return f"declared to run on {', '.join(self.library.backends)} only"
        return None

    def shrink_limit(self, case: Case) -> int | None:
        """The mutant's shrink bound for a minimal ``case`` (None: a real target, or none
        declared)."""
        return None if self.mutant is None else self.mutant.shrink_limit(case)

    def tolerance_for(self, output: str) -> Tolerance:
        if isinstance(self.tolerance, Tolerance):
            return self.tolerance
        try:
            return self.tolerance[output]
        except KeyError:
            raise KeyError(f"target {self.name!r} has no tolerance for output {output!r}") from None

    def hazards_of(self, case: Case) -> list[str]:
        return [f"{h.name}: {d}" for h in self.hazards if (d := h.holds(case))]


_TARGETS: dict[str, Target] = {}
_LOADED_PLUGINS: dict[str, str] = {}


def register(target: Target) -> Target:
    """Adds ``target`` to the registry (re-registering the same name from a reloaded plugin
    replaces it; the same name twice while one plugin loads is an error); returns it so that it
    can be used as an expression."""
    if not isinstance(target, Target):
        raise TypeError(f"register() takes a Target, got {type(target).__name__}")
    if target.source == "builtin" and _loading:
        target = dataclasses.replace(target, source=_loading[-1])
    old = _TARGETS.get(target.name)
    if old is not None and old.source != target.source:
        raise ValueError(
            f"target {target.name!r} from {target.source} is already registered by {old.source}"
        )
    if _loading:
        names = _loaded_names[-1]
        if target.name in names:
            raise ValueError(
                f"target {target.name!r} is registered twice by plugin {_loading[-1]}: the second "
                "would replace the first; give each kernel its own name"
            )
        names.add(target.name)
    _TARGETS[target.name] = target
    return target


def unregister(name: str) -> None:
    _TARGETS.pop(name, None)


def load_builtin() -> None:
    importlib.import_module("fuzz.targets")


def get(name: str) -> Target:
    load_builtin()
    try:
        return _TARGETS[name]
    except KeyError:
        raise ValueError(
            f"target={name!r} is not registered; known: {', '.join(sorted(_TARGETS))}"
        ) from None


def generate(
    strategy: SearchStrategy[Any], body: Callable[[Any], None], *, examples: int, seed: int
) -> None:
    """``body(value)`` (a Python function) on up to ``examples`` values of ``strategy`` as
    Hypothesis generates them from ``seed`` (generation only: no database, no shrinking, no
    deadline): for tools that study what a search draws."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    test = given(strategy)(body)
    test = settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )(test)
    hypothesis_seed(seed)(test)()


def draw_cases(target: Target, scale: str, examples: int, seed: int) -> list[Any]:
    """Up to ``examples`` cases of ``target``'s strategy at ``scale``, as Hypothesis generates
    them from ``seed`` (:func:`generate`)."""
    out: list[Any] = []

    def keep(case: Any) -> None:  # a function of its own: Hypothesis reads its signature
        out.append(case)

    generate(target.strategy(scale), keep, examples=examples, seed=seed)
    return out


def select(patterns: str | Sequence[str] = "*", *, mutants: bool | None = False) -> list[Target]:
    """Targets whose names match any glob in ``patterns`` (comma-separated or a list).

    ``mutants``: False for real targets only, True for mutants only, None for both.
    """
    load_builtin()
    if isinstance(patterns, str):
        patterns = [p.strip() for p in patterns.split(",") if p.strip()]
    out = []
    for t in sorted(_TARGETS.values(), key=lambda t: t.name):
        if mutants is not None and t.is_mutant != mutants:
            continue
        if any(fnmatch.fnmatchcase(t.name, p) for p in patterns):
            out.append(t)
    return out


def all_targets() -> list[Target]:
    return select("*", mutants=None)


_loading: list[str] = []
_loaded_names: list[set[str]] = []  # the names registered so far by each plugin loading now


def load_file(path: str, name: str, *, again: bool = False) -> Any:
    """The module ``name`` executed from the file at ``path`` and kept in ``sys.modules``: a
    module loaded by path, not as a package (a plugin, or a file beside it that it imports: its
    records, its shared kernels). Once loaded it is returned as it is, unless ``again``; a file
    that raises leaves no module of that name behind."""
    if not again and name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        sys.modules.pop(name, None)
        raise
    return module


def load_beside(file: str, filename: str, name: str) -> Any:
    """:func:`load_file` of ``filename`` in the folder of ``file`` (a plugin's ``__file__``)."""
    return load_file(os.path.join(os.path.dirname(os.path.abspath(file)), filename), name)


def load_plugin(spec: str) -> str:
    """Imports a plugin: a ``.py`` file path or a module name. Returns how it is recorded.

    The plugin registers its targets (and backends) when imported. Loading the same plugin twice
    is a no-op.
    """
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"--plugin={spec!r} must be a .py file or a module name")
    load_builtin()
    is_file = spec.endswith(".py") or os.sep in spec or "/" in spec
    if is_file:
        path = os.path.abspath(spec)
        if os.path.isdir(path):
            raise ValueError(
                f"--plugin={spec!r} is a folder; give the plugin's .py file, or the name of an "
                "importable module"
            )
        if not os.path.isfile(path):
            raise ValueError(f"--plugin={spec!r}: no such file")
        key = spec = path
    else:
        key = spec
    if key in _LOADED_PLUGINS:
        return _LOADED_PLUGINS[key]
    _loading.append(spec)
    _loaded_names.append(set())
    try:
        if is_file:
            digest = hashlib.sha1(path.encode()).hexdigest()[:8]
            mod_name = f"fuzz_plugin_{os.path.splitext(os.path.basename(path))[0]}_{digest}"
            load_file(path, mod_name, again=True)
        else:
            try:
                importlib.import_module(spec)
            except ModuleNotFoundError as e:
                if e.name == spec or spec.startswith(f"{e.name}."):
                    raise ValueError(f"--plugin={spec!r}: no such module ({e})") from None
                raise
    finally:
        _loading.pop()
        _loaded_names.pop()
    _LOADED_PLUGINS[key] = spec
    return spec


def load_plugin_checked(spec: str) -> str:
    """``fuzz.target.load_plugin``, with any failure of the plugin's own code (a syntax error,
    an import it lacks, an exception at import) as a ``ValueError`` naming the plugin."""
    try:
        return load_plugin(spec)
    except ValueError:
        raise  # the loader's own message names the plugin
    except (Exception, SystemExit) as e:
        raise ValueError(f"--plugin={spec!r} failed to import: {type(e).__name__}: {e}") from e


def plugins() -> list[str]:
    return list(_LOADED_PLUGINS.values())


def target_plugin(target: Target) -> str | None:
    """The plugin spec needed to get ``target`` back in another process (None if built in)."""
    return None if target.source == "builtin" else target.source
