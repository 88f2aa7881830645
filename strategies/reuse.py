"""Shapes that reuse compiled kernel variants: values are cheap to vary, shapes are not.

A compiled backend builds one kernel per *structure* of a case (dtype, tiles, head dims, flags;
for a kernel without shape buckets, every length too): on a GPU, or in Pallas interpret mode
(which compiles an XLA program per new shape), a fresh structure per example spends most of a run
compiling. Every family strategy draws its structure first, through :func:`reusing`, and then
its values. While a :class:`StructureMemo` is active (``with memo.active():`` around a hunt),
most examples *reuse* a structure an earlier example of the run launched, with fresh values, and
a fraction explores fresh structures; the fraction follows the measured costs so that compiling
stays near the memo's share of the run's time (:attr:`StructureMemo.explore_rate`).

How a structure is reused, and why shrinking does not notice: the memo keeps the *choices*
Hypothesis made for each structure it was shown (the choice sequence of the structure's draws),
and a reusing example has the generator make those same choices again (its primitive provider
answers the structure's draws from the record). The example's choice sequence is then exactly
what a fresh draw of that structure makes: replaying it (the database, shrinking) needs no memo,
and the shrinker walks structures down as it would without one, to the same minimal example.
(Choosing among remembered structures through a drawn index instead would make a reused
structure a short choice sequence that a fresh one, longer, can never replace: shrinking would
stop at the simplest structure the memo happened to hold.)

The one trace of the memo in a choice sequence is a *ticket*: two integers drawn before the
structure, nothing else. Hypothesis generates each example from a prefix that is new to its
choice tree, placing that novelty at the first choice it can vary; without a ticket that would
be a choice of the structure, and most "reused" structures would come out new. Its integer
draws favour a few values (0, 1, the bounds, constants), so a one-integer ticket repeated in
about one example of 14, and its first examples zero-extend a prefix and then vary the choice
after it: the second integer takes both (in a toy run of 1000 examples, 1 structure came out
of Hypothesis's prefixes instead of 120 with one integer). With no memo active nothing is drawn
besides the structure's own choices: derandomized runs and every existing test draw the same
cases as before.

Lengths are free: a strategy draws its lengths (sequence lengths, rows, columns) inside
:func:`free_lengths`, and a reused structure replays every choice but those, which are drawn
fresh. A structure's *variant* is its choices less its lengths: what a kernel compiles where
lengths compile nothing (the project's Triton kernels are declared with ``jit_any_size``; a Pallas
kernel padded to shape buckets compiles once per bucket). Reusing a variant with fresh lengths
costs no compile there, and the lengths, where bugs hide (a second key tile, a partial last
tile), vary from example to example: with lengths replayed, a GPU campaign's real attention pairs
ran 215 of 219 examples on one key per query row, the lengths of their first warm-up. Where
fresh lengths do compile (a kernel compiled per exact shape, a Pallas bucket not compiled yet),
the memo measures it: on examples that reused a variant this process launched, with lengths it
had not launched, most compiling turns fresh lengths off (:attr:`StructureMemo.lengths_free`)
but for a share ``min_explore`` of reuses, which keep measuring.

Options are free alike: a strategy draws a case's optional inputs, masks and runtime scalars (a
bias, a scale, a causal flag, a window) inside :func:`free_options`, and a reused structure draws
them fresh while that compiles nothing here (:attr:`StructureMemo.options_free`, measured on the
reuses that drew them fresh). Some kernels compile for them (a
Triton ``constexpr``), others take them as arguments (a Pallas kernel that always passes its
bias); replayed with the structure, a pair over its compile share met only the options of its
first few structures.

Hypothesis also runs variations of earlier examples (mutations, hill climbing on ``target()``
scores); while a memo is active they vary values and leave structures alone but at the explore
rate (:func:`_spare_structures`). Early in each run Hypothesis tries each novel prefix with
the simplest rest (its zero-extensions): while a memo holds structures for the strategy, those
are refused, and five in a row end that phase (a campaign's slices, each a run, were half
zero-extensions: the simplest structure, one key, again and again). What the memo does not
choose: the first example (the simplest structure) and shrinking.

Relying on Hypothesis internals (the ConjectureData a draw runs on, its provider and choice
nodes, reached through ``fuzz.hypothesis_internals``), every step checks what it uses and, where
something is missing, draws fresh: reuse is an optimisation, never a change of what can be drawn.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import math
import random
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from fuzz.hypothesis_internals import (
    choice_count,
    choice_data,
    draw_aside,
    end_invalid,
    generating,
    provider_of,
    providing,
    recorded_choices,
    recorded_count,
    spare_spans,
    zero_extending,
)

# Share of a run's time that compiling may take, unless a memo is told otherwise (the goal
# for a GPU campaign), and the least share of examples that draw a fresh structure. At 3% a pair on
# an H100 (examples of 15 ms, a first compile of 0.5 s) reused its first few structures for 97% of
# 400 examples: one dtype, no bias, and two planted bugs needing another were never drawn. The
# profile's compile share bound (``Profile.compile_share``) still refuses explorations that would
# compile past it.
DEFAULT_TARGET_SHARE = 0.25
DEFAULT_MIN_EXPLORE = 0.15

# What launching a known structure may cost on average and still count as a load of kernels
# compiled already (0.06-0.16 s a launch on an H100 in a second process, from the caches on disk).
LOAD_SECONDS = 0.25

_TICKET = st.integers(0, 2**64 - 1)
# The span label of a structure drawn through a memo (Hypothesis's mutator spares such spans).
_STRUCTURE_LABEL = "kernel-fuzz structure"
_ACTIVE: contextvars.ContextVar[StructureMemo | None] = contextvars.ContextVar(
    "kernel_fuzz_structure_memo", default=None
)


def _check_fraction(name: str, value: Any, *, lo_open: bool = True) -> float:
    interval = "(0, 1]" if lo_open else "[0, 1]"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise InvalidArgument(f"{name}={value!r} must be a number in {interval}")
    if not ((value > 0 if lo_open else value >= 0) and value <= 1):
        raise InvalidArgument(f"{name}={value!r} must be in {interval}")
    return float(value)


def _check_seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise InvalidArgument(f"{name}={value!r} must be a number of seconds >= 0")
    return float(value)


Nodes = tuple[tuple[str, Any, dict[str, Any]], ...]
Ranges = tuple[tuple[int, int], ...]


@dataclass
class _Entry:
    """One structure the memo may offer: the choices its draws made (type, value, constraints),
    and the index ranges of those that were lengths (:func:`free_lengths`)."""

    nodes: Nodes
    reuses: int = 0
    free: Ranges = ()
    unfree: bool = False  # its lengths cannot be drawn fresh: replayed whole
    options: Ranges = ()  # the index ranges of its options (:func:`free_options`)
    fixed_options: bool = False  # its options cannot be drawn fresh: replayed
    # Its example failed: reused only with fresh lengths (replayed whole, it would only hit its
    # bug again).
    failing: bool = False
    variant: tuple[Any, ...] = ()  # ``_variant`` of its nodes and lengths
    # The choices of draws its example made beside the structure (``draw_attached``), by label.
    attached: dict[str, Nodes] = field(default_factory=dict)


@dataclass
class _Drawn:
    """A structure drawn in the example now running (until :meth:`StructureMemo.observe`)."""

    data: Any
    key: Hashable
    nodes: Nodes
    mode: str  # "explore", "reuse": the memo chose; "fresh", "replay": Hypothesis chose
    free: Ranges = ()
    relengthed: bool = False  # a reuse whose lengths the memo had drawn fresh
    options: Ranges = ()
    reoptioned: bool = False  # a reuse whose options the memo had drawn fresh
    entry: _Entry | None = None  # the record it reused (mode "reuse")
    attached: dict[str, Nodes] = field(default_factory=dict)  # ``draw_attached``'s choices


@dataclass
class _Open:
    """The structure being drawn through the memo now: where its choices start in ``data``'s,
    the ranges of its lengths so far, and the replay that answers its draws (None: drawn
    fresh)."""

    data: Any
    start: int
    replay: _Replay | None
    free: list[tuple[int, int]] = field(default_factory=list)
    options: list[tuple[int, int]] = field(default_factory=list)
    inside: bool = False  # within free_lengths or free_options (they do not nest)

    def count(self) -> int:
        """The structure's recorded choices so far (as ``StructureMemo._draw`` records them)."""
        return recorded_count(self.data, self.start)


class _Replay:
    """A primitive provider that answers a structure's draws from a record, and passes any draw
    that does not match the record (or comes after it) to the provider it stands in for.
    ``widened``: an integer draw whose bounds differ from the record's (and nothing else of its
    constraints) matches where the recorded value lies within them (a record of a narrower
    strategy: see :meth:`StructureMemo._borrowable`). ``free`` and ``options``: the recorded
    lengths' and options' ranges, drawn fresh (None: those choices replayed)."""

    def __init__(
        self,
        inner: Any,
        nodes: Nodes,
        widened: bool = False,
        free: Ranges | None = None,
        options: Ranges | None = None,
    ) -> None:
        self.inner, self.nodes, self.served, self.matched = inner, nodes, 0, True
        self.widened = widened
        self.free, self.options = free, options
        # How many ranges of each kind were drawn fresh so far; the kind passing now.
        self.done = {"lengths": 0, "options": 0}
        self.passing: str | None = None

    @property
    def lengths(self) -> int:
        return self.done["lengths"]

    def _ranges(self, kind: str) -> Ranges | None:
        return self.free if kind == "lengths" else self.options

    def enter(self, kind: str) -> None:
        """The strategy starts drawing choices of ``kind`` ("lengths" or "options"): where
        those are fresh, the recorded ones are skipped and the draws pass to the inner
        provider until :meth:`leave`."""
        ranges = self._ranges(kind)
        if ranges is None or not self.matched:
            return
        n = self.done[kind]
        if n >= len(ranges) or ranges[n][0] != self.served:
            self.matched = False  # the strategy's draws are not where the record has them
            return
        self.passing = kind

    def leave(self) -> None:
        kind = self.passing
        if kind is not None:
            self.served = self._ranges(kind)[self.done[kind]][1]  # type: ignore[index]
            self.done[kind] += 1
            self.passing = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _fits(self, kind: str, value: Any, recorded: dict[str, Any], now: dict[str, Any]) -> bool:
        if recorded == now:
            return True
        if not self.widened or kind != "integer" or recorded.keys() != now.keys():
            return False
        bounds = ("min_value", "max_value")
        if any(recorded[k] != now[k] for k in now if k not in bounds):
            return False
        lo, hi = now.get("min_value"), now.get("max_value")
        return (lo is None or value >= lo) and (hi is None or value <= hi)

    def _serve(self, kind: str, args: tuple[Any, ...], constraints: dict[str, Any]) -> Any:
        if self.passing is not None:
            return getattr(self.inner, f"draw_{kind}")(*args, **constraints)
        if self.matched and not args and self.served < len(self.nodes):
            recorded_kind, value, recorded = self.nodes[self.served]
            if recorded_kind == kind and self._fits(kind, value, recorded, constraints):
                self.served += 1
                return value
        self.matched = False
        return getattr(self.inner, f"draw_{kind}")(*args, **constraints)

    def draw_integer(self, *args: Any, **constraints: Any) -> Any:
        return self._serve("integer", args, constraints)

    def draw_boolean(self, *args: Any, **constraints: Any) -> Any:
        return self._serve("boolean", args, constraints)

    def draw_float(self, *args: Any, **constraints: Any) -> Any:
        return self._serve("float", args, constraints)

    def draw_string(self, *args: Any, **constraints: Any) -> Any:
        return self._serve("string", args, constraints)

    def draw_bytes(self, *args: Any, **constraints: Any) -> Any:
        return self._serve("bytes", args, constraints)

    @property
    def complete(self) -> bool:
        fresh_done = all(
            r is None or self.done[k] == len(r)
            for k, r in (("lengths", self.free), ("options", self.options))
        )
        return self.matched and self.served == len(self.nodes) and fresh_done


def _identity(nodes: Nodes) -> tuple[Any, ...]:
    """A recorded structure's identity: its choices' kinds and values."""
    return tuple((kind, value) for kind, value, _ in nodes)


def _variant(nodes: Nodes, free: Ranges) -> tuple[Any, ...]:
    """A recorded structure's variant: its identity less its lengths (``free``), and how many
    runs of lengths it drew."""
    inside = {i for a, b in free for i in range(a, b)}
    kept = tuple((kind, value) for i, (kind, value, _) in enumerate(nodes) if i not in inside)
    return (kept, len(free))


@dataclass
class _Costs:
    """What the memo has measured, summed over the examples that drew a structure through it.

    Attributes:
        new, new_compile: examples whose structure launched for the first time, and their
            compile seconds (a fresh structure that lands on a variant compiled already, in a
            shape bucket, counts with its 0 s: that is what exploring costs);
        known, known_compile: the same for structures launched before;
        chosen: examples whose structure the memo chose (explored or reused);
        other_compile: compile seconds of the others (Hypothesis chose the structure: its first
            example, its mutations, hill climbing, shrinking, the database);
        run_seconds: every example's seconds besides compiling;
        new_compiling: examples of new structures that compiled (or loaded) something, and
        new_refused: examples of new structures refused because they would have compiled
            (``refused``): how often a new structure needs a compile (``new_would_compile``);
        relength, relength_compiling, relength_refused: the same for examples that reused a
            variant this process launched with lengths it had not (``lengths_free``);
        reoption, reoption_compiling, reoption_refused: the same for examples that reused a
            structure with fresh options (``options_free``); one whose options made a variant
            not launched here counts as no new structure.
    """

    new: int = 0
    new_compile: float = 0.0
    known: int = 0
    known_compile: float = 0.0
    known_compiling: int = 0  # examples of known structures that compiled (loaded) something
    chosen: int = 0
    other_compile: float = 0.0
    new_compiling: int = 0
    new_refused: int = 0
    run_seconds: float = 0.0
    relength: int = 0
    relength_compiling: int = 0
    relength_refused: int = 0
    reoption: int = 0
    reoption_compiling: int = 0
    reoption_refused: int = 0


# The examples of new structures a memo must have seen before it judges whether a new one will
# need a compile (``StructureMemo.new_would_compile``), and whether fresh lengths do
# (``StructureMemo.lengths_free``).
NEW_SEEN = 4
# How fast the memo's judgement of fresh lengths follows its latest examples (the weight of each
# in a moving average of what they compiled): a Pallas kernel compiles its first examples'
# buckets and then few, and the judgement must not stay with its first examples.
LENGTHS_WEIGHT = 0.2
# The share of a compile worker's warm-up examples that reuse a launched variant with fresh
# lengths, where lengths compile (``StructureMemo.warming``): a third, so that most of its time
# still goes to the variants it has not compiled.
WARM_RELENGTH = 1 / 3
WARM_RELENGTH_QUIET = 0.1
# How many candidate structures an exploration draws aside, of which it launches the one that
# brings the most combinations of choices no launched structure had (``StructureMemo.diverse``).
DIVERSE_CANDIDATES = 8


@dataclass
class _Judgement:
    """Whether fresh draws of one kind (lengths, options) compile here: a moving average of
    their examples' scores (``StructureMemo._score``), weighted toward the latest
    (``LENGTHS_WEIGHT``), and how many examples it has seen."""

    score: float = 0.0
    seen: int = 0

    def add(self, score: float) -> None:
        self.seen += 1
        self.score += LENGTHS_WEIGHT * (score - self.score)

    @property
    def free(self) -> bool:
        """Whether they are drawn fresh: until ``NEW_SEEN`` examples are seen, then unless
        most compiled."""
        return self.seen < NEW_SEEN or self.score <= 0.5


@dataclass
class StructureMemo:
    """The structures a run has launched, reused by the family strategies (:func:`reusing`).

    Attributes:
        target_share: the share of a run's time compiling may take; the explore rate is set to
            keep it there (:attr:`explore_rate`).
        min_explore: the least explore rate: new structures are always explored.
        explore: a fixed explore rate (tests, benchmarks); None: from the measured costs.
        fresh_lengths: whether reused structures draw their lengths fresh: True always, False
            never (a structure is replayed whole), None as measured (:attr:`lengths_free`).
        fresh_options: the same for their options (:func:`free_options`, :attr:`options_free`).
        seed: seeds the memo's own choices (explore or reuse, and which structure).
        diverse: how many candidate structures an exploration draws (0 or 1: Hypothesis's
            generator draws the one it launches). Where a pair can afford a few dozen compiles,
            random structures repeat the common combinations of their choices and leave most
            pairs of choices never launched together (a GPU campaign's fla backward pair
            launched 103 structures without meeting its dq bug, which needs a key head dim of
            16 with a value head dim of 64 or more in a half type). Each exploration draws
            ``diverse`` candidates aside (:func:`fuzz.hypothesis_internals.draw_aside`, the
            same generator) and launches the one with the most pairs of choices (position,
            value: lengths left out) that no structure launched under its strategy had: greedy
            pairwise coverage, as adaptive random testing and covering-array generators do.
            The candidate is made through a replaying provider, so its example's choices are
            those of a fresh draw of it: shrinking and the database never see the memo. Only
            where structures are rationed: in a warm-up, or at an explore rate below 1.
        costs: what it has measured (examples and compile seconds by how their structure was
            drawn, and the seconds besides compiling).
        counts: structures drawn ``explored`` (the memo chose a fresh one, or had none to
            offer), ``reused``, ``fresh`` (Hypothesis's generator chose the structure's first
            choices), ``replayed`` (all its choices given: mutations, hill climbing, shrinking,
            the database); ``offered`` for reuse, ``stale`` (records dropped: the strategy no
            longer draws them), examples ``observed``; ``borrowed``: reused structures
            recorded under another strategy (:meth:`_borrowable`); ``relengthed``: reused
            with fresh lengths; ``unfree``: records whose lengths could not be drawn fresh
            (the strategy's other choices depend on them), replayed whole from then on;
            ``reoptioned`` and ``fixed options``: the same for options; ``unextended``:
            Hypothesis's zero-extensions refused (:meth:`_draw`); ``attached replayed``: draws
            beside a reused structure replayed with it (:meth:`draw_attached`).

    Use one memo per (target, backend), across the runs (hunts) of it that one process makes:
    ``with memo.active():`` around the run, ``memo.observe(...)`` after each example. Structures
    are remembered per strategy (:func:`reusing`'s ``key``); a strategy reuses its own and
    those of the memo's other strategies that replay under it (:meth:`_borrowable`: a run whose
    compile-time choices were widened).
    """

    target_share: float = DEFAULT_TARGET_SHARE
    min_explore: float = DEFAULT_MIN_EXPLORE
    explore: float | None = None
    fresh_lengths: bool | None = None
    fresh_options: bool | None = None
    seed: int = 0
    diverse: int = DIVERSE_CANDIDATES
    # Set by the hunt while its compile time is over its share (``Profile.compile_share``):
    # examples of new structures that would compile are refused then, so exploring more than
    # ``min_explore`` would only draw examples to throw away.
    over_budget: bool = field(default=False, init=False)
    costs: _Costs = field(default_factory=_Costs, init=False)
    counts: dict[str, int] = field(default_factory=dict, init=False)
    _pools: dict[Hashable, list[_Entry]] = field(default_factory=dict, init=False, repr=False)
    _known: dict[Hashable, set[tuple[Any, ...]]] = field(
        default_factory=dict, init=False, repr=False
    )
    _drawn: list[_Drawn] = field(default_factory=list, init=False, repr=False)
    # Per strategy key, the other strategies' structures it does not draw (``_borrowable``).
    _unborrowable: dict[Hashable, set[tuple[Any, ...]]] = field(
        default_factory=dict, init=False, repr=False
    )
    # Every structure an example launched here, offered or not (one that failed is not).
    _launched: set[tuple[Hashable, tuple[Any, ...]]] = field(
        default_factory=set, init=False, repr=False
    )
    # Per strategy key, the variants of the structures it offers (``_variant``); the variants
    # an example launched here.
    _variants: dict[Hashable, dict[tuple[Any, ...], list[_Entry]]] = field(
        default_factory=dict, init=False, repr=False
    )
    _launched_variants: set[tuple[Hashable, tuple[Any, ...]]] = field(
        default_factory=set, init=False, repr=False
    )
    _open: _Open | None = field(default=None, init=False, repr=False)
    # Per strategy key, the pairs of choices (position, kind, value; lengths left out) of the
    # structures offered under it (``diverse``).
    _covered: dict[Hashable, set[tuple[Any, ...]]] = field(
        default_factory=dict, init=False, repr=False
    )
    # Whether fresh lengths compiled, and whether fresh options did (``_Judgement``).
    _lengths: _Judgement = field(default_factory=_Judgement, init=False, repr=False)
    _options: _Judgement = field(default_factory=_Judgement, init=False, repr=False)
    _rng: random.Random = field(init=False, repr=False)
    # The candidates' own generator (``diverse``): drawing them leaves the memo's choices
    # (explore or reuse, which structure) as they would be without them.
    _aside: random.Random = field(init=False, repr=False)
    _warming: bool = field(default=False, init=False, repr=False)
    # The hazard names (a family's, ``Target.hazards_of``) of the examples checked with this
    # memo, and the compile seconds of the examples admitted past the compile share for
    # bringing one not among them (``fuzz.engine.NOVEL_SHARE``).
    hazards_checked: set[str] = field(default_factory=set, init=False, repr=False)
    novel_compile_seconds: float = field(default=0.0, init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.target_share, bool) or not isinstance(self.target_share, (int, float)):
            raise InvalidArgument(f"target_share={self.target_share!r} must be a number in (0, 1)")
        if not 0 < self.target_share < 1:
            raise InvalidArgument(f"target_share={self.target_share!r} must be in (0, 1)")
        self.min_explore = _check_fraction("min_explore", self.min_explore)
        if self.explore is not None:
            self.explore = _check_fraction("explore", self.explore, lo_open=False)
        for name in ("fresh_lengths", "fresh_options"):
            value = getattr(self, name)
            if not (value is None or isinstance(value, bool)):
                raise InvalidArgument(f"{name}={value!r} must be None, True or False")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise InvalidArgument(f"seed={self.seed!r} must be an int")
        if isinstance(self.diverse, bool) or not isinstance(self.diverse, int) or self.diverse < 0:
            raise InvalidArgument(f"diverse={self.diverse!r} must be an int >= 0")
        self._rng = random.Random(self.seed)
        self._aside = random.Random(f"diverse {self.seed}")
        for k in (
            "explored",
            "reused",
            "fresh",
            "replayed",
            "offered",
            "stale",
            "observed",
            "borrowed",
            "relengthed",
            "unfree",
            "reoptioned",
            "fixed options",
            "diversified",
            "unextended",
            "attached replayed",
        ):
            self.counts[k] = 0

    # The hunt's side ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def warming(self) -> Iterator[StructureMemo]:
        """Inside it, the memo serves a compile worker's warm-up, which is there to compile what
        the pair's fuzzing will launch: every example draws a fresh structure (a new variant to
        compile), but for a share ``WARM_RELENGTH`` that reuse a launched variant with fresh
        lengths (a shape bucket of it to compile), while fresh lengths compile here or have not
        been measured yet (:meth:`warm_relength`). A warm-up that explored only compiled each
        Pallas variant at its first example's lengths: the fuzzing workers' reuses with fresh
        lengths then compiled or were refused, and an H100 campaign's Pallas attention pairs
        ran 3% of their examples with a second key tile."""
        before = self._warming
        self._warming = True
        try:
            yield self
        finally:
            self._warming = before

    def warm_relength(self) -> float:
        """The share of a warm-up's examples that reuse a launched variant with fresh lengths:
        ``WARM_RELENGTH``, or 0 where such reuses (at least ``NEW_SEEN``) have hardly ever
        compiled, at most ``WARM_RELENGTH_QUIET`` of them (a Triton kernel declared with
        ``jit_any_size``). Not the moving judgement of :attr:`lengths_free`: that turns free
        once the buckets of the variants launched so far are compiled, while each variant
        explored later has buckets of its own."""
        c = self.costs
        if c.relength >= NEW_SEEN and c.relength_compiling <= WARM_RELENGTH_QUIET * c.relength:
            return 0.0
        return WARM_RELENGTH

    @contextlib.contextmanager
    def active(self) -> Iterator[StructureMemo]:
        """Inside it, :func:`reusing` strategies draw through this memo (in this thread and
        context)."""
        _spare_structures()
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    def observe(
        self,
        compile_seconds: float,
        example_seconds: float,
        *,
        offer: bool = True,
        own_compile: float | None = None,
    ) -> bool:
        """Tells the memo how the example now running went: ``compile_seconds`` of its
        ``example_seconds`` went into compiling (``fuzz.timing``'s measure: launches that
        compiled), and whether to ``offer`` its structure for reuse (it launched; a structure
        whose example failed may be left out, so as not to hit a known bug again and again: then
        it is kept for reuses with fresh lengths only, where it has lengths).
        ``own_compile``: of ``compile_seconds``, those of the launches of the case itself (None:
        all of them), which alone tell whether its lengths compile: a launch a property derives
        at another compile-time choice (GLA's run at every other chunk size) compiles once per
        variant whatever the lengths, and counted with them it turned the fresh lengths of an
        H100 campaign's Triton GLA pairs off, kernels that compile nothing per length.
        An example whose structure the memo did not draw (no :func:`reusing` strategy) is only
        counted. Returns whether the example measured whether fresh lengths compile (it
        launched a variant launched here with new lengths)."""
        compile_seconds = _check_seconds("compile_seconds", compile_seconds)
        example_seconds = _check_seconds("example_seconds", example_seconds)
        own = compile_seconds if own_compile is None else _check_seconds("own_compile", own_compile)
        drawn, self._drawn = self._drawn, []
        self.counts["observed"] += 1
        if not drawn:
            return False
        c = self.costs
        first = drawn[0]
        reoption = self._reoption(drawn)
        if self._is_known(first):
            c.known += 1
            c.known_compile += compile_seconds
            c.known_compiling += compile_seconds > 0
        elif not reoption:  # (a reuse with fresh options is measured as such, below)
            c.new += 1
            c.new_compile += compile_seconds
            c.new_compiling += compile_seconds > 0
        if first.mode in ("explore", "reuse"):
            c.chosen += 1
        else:
            c.other_compile += compile_seconds
        c.run_seconds += max(0.0, example_seconds - compile_seconds)
        measured = not reoption and self._relength(drawn)
        if reoption:
            c.reoption += 1
            c.reoption_compiling += own > 0
            self._judge_options(min(own, compile_seconds))
        elif measured:
            c.relength += 1
            c.relength_compiling += own > 0
            self._judge_lengths(min(own, compile_seconds))
        self._launched.update((d.key, _identity(d.nodes)) for d in drawn)
        self._launched_variants.update((d.key, _variant(d.nodes, d.free)) for d in drawn)
        for d in drawn:
            if offer:
                self._offer(d.key, d.nodes, d.free, d.options, attached=d.attached)
            elif d.free:
                # Its variant, with other lengths and values, is no repeat of the failure: kept
                # for reuses with fresh lengths. Where nearly every example failed (a mutant
                # whose bug most cases reach), none was offered, and over its compile share
                # every example explored a new structure and was refused: an H200 campaign's
                # GLA mutant ran 17 examples and refused 5,235.
                self._offer(d.key, d.nodes, d.free, d.options, failing=True, attached=d.attached)
        return measured

    def _is_known(self, d: _Drawn) -> bool:
        """Whether structure ``d`` is one the memo knows: offered (launched here, or taken in),
        or, while lengths are free, a known variant's with other lengths."""
        if _identity(d.nodes) in self._known.get(d.key, ()):
            return True
        return self.lengths_free and _variant(d.nodes, d.free) in self._variants.get(d.key, {})

    def _relength(self, drawn: list[_Drawn]) -> bool:
        """Whether an example's structures include a variant launched in this process with
        lengths it had not launched: whether such an example compiles tells whether lengths
        compile here (its kernels are loaded, not only compiled on disk)."""
        return any(
            (d.key, _variant(d.nodes, d.free)) in self._launched_variants
            and (d.key, _identity(d.nodes)) not in self._launched
            for d in drawn
        )

    @staticmethod
    def _reoption(drawn: list[_Drawn]) -> bool:
        """Whether an example's structures include a reuse with fresh options: whether such
        examples compile tells what drawing options fresh costs here (once a Triton kernel's
        few flag variants are compiled, nothing)."""
        return any(d.reoptioned for d in drawn)

    def _cheap(self) -> float:
        """What a launch of a structure the memo knows may compile and still count as a load:
        ``LOAD_SECONDS``, or a tenth of a new structure's mean compile where that is more."""
        c = self.costs
        return max(LOAD_SECONDS, 0.1 * (c.new_compile / c.new if c.new else 0.0))

    def _score(self, compile_seconds: float | None) -> float:
        """An example's compile seconds against what a load may cost (``_cheap``), as a score
        in [0, 1] (a load at most 1/2, a compile of twice a load's bound or more 1); None:
        refused because it would have compiled (1)."""
        return 1.0 if compile_seconds is None else min(compile_seconds / self._cheap(), 2.0) / 2

    def _judge_lengths(self, compile_seconds: float | None) -> None:
        """Adds an example that launched a variant with new lengths to the judgement
        (``_score``)."""
        self._lengths.add(self._score(compile_seconds))

    def _judge_options(self, compile_seconds: float | None) -> None:
        """Adds an example that reused a structure with fresh options to their judgement."""
        self._options.add(self._score(compile_seconds))

    @property
    def lengths_free(self) -> bool:
        """Whether a reused structure draws its lengths fresh (:func:`free_lengths`): unless, of
        the last examples that launched a variant this process had launched with new lengths
        (at least ``NEW_SEEN``, weighted toward the latest, ``LENGTHS_WEIGHT``), most compiled
        more than a load (a one-off compile among loads does not count as most) or were refused
        because they would have. While not free, a share ``min_explore`` of reuses still draws
        fresh lengths and keeps measuring. ``fresh_lengths`` set: that."""
        if self.fresh_lengths is not None:
            return self.fresh_lengths
        return self._lengths.free

    @property
    def options_free(self) -> bool:
        """Whether a reused structure draws its options fresh (:func:`free_options`), judged
        as :attr:`lengths_free` is, on the reuses that drew them fresh; ``fresh_options`` set:
        that. Options that compile nothing (a Pallas
        kernel's runtime scalars and always-passed inputs) vary from example to example; while
        they compile, a share ``min_explore`` of reuses keeps measuring."""
        if self.fresh_options is not None:
            return self.fresh_options
        return self._options.free

    @property
    def explore_rate(self) -> float:
        """The share of the examples the memo chooses for that draw a fresh structure.

        With ``c`` the mean compile seconds of an example whose structure launched for the first
        time (a fresh structure may land on a variant compiled already: that is in the mean),
        ``r`` that of one whose structure launched before, ``n`` the examples the memo chose
        the structure of, ``p`` the compile seconds of the others (Hypothesis's own choices)
        and ``E`` the seconds of all of them besides compiling, exploring a share ``f`` spends
        about ``p + n (f c + (1 - f) r)`` seconds compiling; ``f`` is the largest share that
        keeps that within ``target_share`` of the run, ``s / (1 - s) E``, clamped to
        ``[min_explore, 1]``. 1 until a new structure has been measured, and where it costs no
        more to compile than a known one (Triton's interpreter compiles nothing);
        ``min_explore`` while the hunt says its compile time is over its share
        (:attr:`over_budget`).
        """
        if self.explore is not None:
            return self.explore
        if self.over_budget:
            return self.min_explore
        c = self.costs
        if not c.new:
            return 1.0
        new_cost = c.new_compile / c.new
        known_cost = c.known_compile / c.known if c.known else 0.0
        if new_cost <= known_cost:
            return 1.0
        budget = self.target_share / (1 - self.target_share) * c.run_seconds
        f = ((budget - c.other_compile) / max(c.chosen, 1) - known_cost) / (new_cost - known_cost)
        return min(1.0, max(self.min_explore, f))

    def refused(self, *, measured: bool = True) -> bool:
        """Tells the memo that the example now running was refused because it would have
        compiled: where it drew a structure never launched here, that counts toward how often
        a new structure needs a compile. ``measured``: its launch found the compile (a refusal
        at the compiler's cache miss); False: refused before its launch, on the memo's own
        prediction (:meth:`new_would_compile`), which is no measure of whether its lengths
        compile. (Judged as one, the explorations of a Pallas pair over its share that landed
        on a launched variant kept its fresh lengths off for good: 3% of an H100 campaign's
        Pallas attention examples had a second key tile, 29% on Triton.) Returns whether the
        refusal was judged as fresh lengths that compile."""
        drawn = self._current_draws()
        judged = False
        if drawn and self._reoption(drawn):
            self.costs.reoption_refused += 1
            if measured:
                self._judge_options(None)
        elif drawn and self._relength(drawn):
            self.costs.relength_refused += 1
            if measured:
                self._judge_lengths(None)
                judged = True
        elif drawn and not self.drawn_launched():
            self.costs.new_refused += 1
        self._drawn = []
        return judged

    def drawn_launched(self) -> bool:
        """Whether every structure the example now running drew through the memo was launched
        before: one it knows (:meth:`drawn_known`), or one an example launched here that was not
        offered for reuse (it failed). A replay of a failing example (Hypothesis's, while it
        shrinks) draws the latter. False where the example drew none through it. A variant
        launched here counts with any lengths while they are free, and also where the memo
        reused it with fresh lengths while they are not: those are its samples that measure
        whether they still compile, which only a launch tells (refused before it, they would
        never turn lengths on again). A reuse with fresh options counts alike: its structure was
        launched, and whether its options compile is what its launch measures."""
        drawn = self._current_draws()
        free = self.lengths_free
        return bool(drawn) and all(
            self._is_known(d)
            or d.reoptioned
            or (d.key, _identity(d.nodes)) in self._launched
            or (
                (free or d.relengthed)
                and (d.key, _variant(d.nodes, d.free)) in self._launched_variants
            )
            for d in drawn
        )

    def new_would_compile(self) -> bool:
        """Whether a structure the memo does not know will most likely need a compile here: of
        the examples of new structures (at least ``NEW_SEEN``), most compiled or were refused
        for it. True of a kernel compiled per shape bucket (a Pallas kernel on a GPU), false of
        one compiled per variant (a Triton kernel declared with ``jit_any_size``), whose new
        structures mostly land on variants compiled already."""
        c = self.costs
        n = c.new + c.new_refused
        return n >= NEW_SEEN and c.new_compiling + c.new_refused > n / 2

    def known_is_cheap(self) -> bool:
        """Whether launching a structure this memo knows has cost little to compile here, where
        it compiled (or loaded) anything: at most ``LOAD_SECONDS`` or a tenth of a new
        structure's compile on average (none measured yet: assumed so). A kernel compiled once
        per variant (Triton's, declared with ``jit_any_size``) only loads a known structure that
        another process compiled; one that compiles per length (a Pallas kernel on a GPU)
        compiles a known structure with new lengths again, and then a known structure is no
        cheaper than a new one."""
        c = self.costs
        if not c.known_compiling:
            return True
        known = c.known_compile / c.known_compiling  # per launch that compiled or loaded
        return known <= self._cheap()

    def drawn_known(self) -> bool:
        """Whether every structure the example now running drew through the memo is one it knows
        (launched before in this process, or taken in from a compile worker that compiled it):
        launching it compiles nothing new, at most loads a kernel from the caches on disk.
        False where the example drew none through it."""
        drawn = self._current_draws()
        return bool(drawn) and all(self._is_known(d) for d in drawn)

    def drawn_variant(self) -> str | None:
        """The variants (structures less their lengths) the example now running drew through
        the memo, as a short name, the same for the same variants within this process (None:
        it drew none): what a kernel compiled per variant compiles once
        (``fuzz.triton_keys.reused_keys``)."""
        drawn = self._current_draws()
        if not drawn:
            return None
        text = repr(tuple((repr(d.key), _variant(d.nodes, d.free)) for d in drawn))
        return f"variant {hashlib.sha1(text.encode()).hexdigest()[:10]}"

    def _current_draws(self) -> list[_Drawn]:
        """The structures the example now running drew through the memo (empty: none)."""
        if not self._drawn:
            return []
        data = self._drawn[-1].data
        return [d for d in self._drawn if d.data is data]

    def structures(self, key: Hashable | None = None) -> int:
        """How many structures the memo offers (for one strategy ``key``; None: all)."""
        if key is None:
            return sum(len(p) for p in self._pools.values())
        return len(self._pools.get(key, ()))

    def variants(self, key: Hashable | None = None) -> int:
        """How many variants (structures less their lengths) the memo offers (for one strategy
        ``key``; None: all)."""
        if key is None:
            return sum(len(v) for v in self._variants.values())
        return len(self._variants.get(key, ()))

    def draw_attached(self, data: Any, draw: Callable[[], Any], label: str) -> Any:
        """``draw()``, a draw of ``data`` (Hypothesis's ConjectureData) that selects compiled
        code as the structure does
        but that the case's strategy does not make: an autotuned kernel's configs, drawn as its
        launches ask (``fuzz.properties``). Its choices are kept with the example's structure
        when that is offered, and replayed when the structure is reused: a reuse then launches
        the configs its structure was launched with, compiled already, not fresh ones, each a
        compile (a GPU campaign's fla backward pair checked 109 examples and refused 4,454 that
        would have compiled, most of them reuses). An example that drew no structure through
        the memo draws as usual."""
        drawn = [d for d in self._drawn if d.data is data]
        if not drawn:
            return draw()
        d = drawn[-1]
        recorded = None if d.entry is None else d.entry.attached.get(label)
        start = choice_count(data)
        if recorded is not None:
            with providing(data, _Replay(provider_of(data), recorded)):
                value = draw()
            self.counts["attached replayed"] += 1
        else:
            value = draw()
        d.attached[label] = recorded_choices(data, start)
        return value

    def export(self) -> list[tuple[Any, ...]]:
        """The structures the memo offers, as (strategy key, recorded choices, ranges of its
        lengths, whether its example failed, ranges of its options, the choices of its draws
        beside it by label): what another process's memo of the same target takes in with
        :meth:`take_in` (a campaign's compile worker hands the structures it compiled, and the
        autotuned configs it compiled them with, to the workers that fuzz)."""
        return [
            (key, e.nodes, e.free, e.failing, e.options, tuple(sorted(e.attached.items())))
            for key, pool in self._pools.items()
            for e in pool
        ]

    def take_in(self, structures: Iterable[tuple[Any, ...]]) -> int:
        """Offers ``structures`` (from :meth:`export`; a record without its lengths' or options'
        ranges has none, one without its failing flag passed) for reuse; returns how many were
        new. They are offered as launched: their kernels compiled, in another process of the
        host, into the caches on disk."""
        before = self.counts["offered"]
        for key, nodes, *rest in structures:
            free = tuple((int(a), int(b)) for a, b in rest[0]) if rest else ()
            failing = bool(rest[1]) if len(rest) > 1 else False
            options = tuple((int(a), int(b)) for a, b in rest[2]) if len(rest) > 2 else ()
            attached = {str(label): tuple(n) for label, n in rest[3]} if len(rest) > 3 else {}
            self._offer(key, tuple(nodes), free, options, failing=failing, attached=attached)
        return self.counts["offered"] - before

    # The strategies' side -----------------------------------------------------------------------

    def _offer(
        self,
        key: Hashable,
        nodes: Nodes,
        free: Ranges = (),
        options: Ranges = (),
        *,
        failing: bool = False,
        attached: dict[str, Nodes] | None = None,
    ) -> None:
        ident = _identity(nodes)
        known = self._known.setdefault(key, set())
        if ident in known:
            return
        known.add(ident)
        entry = _Entry(
            nodes,
            free=free,
            failing=failing,
            variant=_variant(nodes, free),
            options=options,
            attached=dict(attached or {}),
        )
        self._covered.setdefault(key, set()).update(_pairs(entry.variant))
        self._pools.setdefault(key, []).append(entry)
        self._variants.setdefault(key, {}).setdefault(entry.variant, []).append(entry)
        self.counts["offered"] += 1

    def _drop(self, key: Hashable, entry: _Entry) -> None:
        """Forgets a record the strategy no longer draws."""
        self._pools[key] = [e for e in self._pools[key] if e is not entry]
        variants = self._variants.get(key, {})
        left = [e for e in variants.get(entry.variant, []) if e is not entry]
        if left:
            variants[entry.variant] = left
        else:
            variants.pop(entry.variant, None)

    def _choose(
        self, own: list[_Entry], pool: list[_Entry], relength: bool
    ) -> tuple[_Entry | None, bool]:
        """A structure of ``pool`` (``own``, the strategy's, and those it may borrow) to reuse,
        and whether it is another strategy's: any record, or with fresh lengths (``relength``)
        any variant (its records differ only in lengths, which are drawn again), so that a
        variant launched with many lengths is not favoured. A failing structure is reused
        whole (its lengths replayed, values fresh) only over the compile share, where nothing
        else is known: there each exploration would be refused (a GPU campaign's Pallas pair
        whose planted bug most cases reach refused 7,056 examples to check 114), and a reuse
        at least runs, at the cost of a launch."""
        if not relength:
            sound = [e for e in pool if not e.failing]
            pool = sound or (pool if self.over_budget else [])
        if not pool:
            return None, False
        if relength:
            groups: dict[tuple[Any, ...], list[_Entry]] = {}
            for e in pool:
                groups.setdefault(e.variant, []).append(e)
            pool = [g[0] for g in groups.values()]
        entry = pool[self._rng.randrange(len(pool))]
        return entry, not any(e is entry for e in own)

    def _draw(
        self, draw: Callable[..., Any], strategy: st.SearchStrategy[Any], key: Hashable
    ) -> Any:
        # Two labels: spans of one label would be a group for Hypothesis's mutator, which would
        # copy one ticket over the other and run the same case again.
        draw(_TICKET, label="structure ticket")
        draw(_TICKET, label="structure ticket, second")
        data = choice_data(draw)
        if data is None:
            return draw(strategy)
        if zero_extending(data) and (self._pools.get(key) or self._borrowable(key)):
            # Early in each run Hypothesis tries every novel prefix with the simplest rest: past
            # the tickets, that is one case, the simplest (56 of 120 examples of three 40-example
            # runs of the attention strategy were that one case). A campaign's slice is a run
            # of its own, often of fewer examples than that phase: on an H200, slices of a
            # Pallas attention pair ran one key in 91 of 93 examples. Refused (five in a row end
            # the phase), the run's examples are the memo's: structures reused with fresh
            # lengths, options and values. (Its first example, all simplest choices, still runs.)
            self.counts["unextended"] += 1
            end_invalid(data, "kernel-fuzz: a zero-extension, the simplest case again")
        # Structures drawn by an example that never reached observe (rejected) are forgotten.
        self._drawn = [d for d in self._drawn if d.data is data]
        entry = None
        generated = generating(data)
        borrowed = relength = reoption = False
        if generated and self._warming:
            own = self._pools.get(key, [])
            pool = [e for e in own + self._borrowable(key) if e.free and not e.unfree]
            if pool and self._rng.random() < self.warm_relength():
                relength = True
                entry, borrowed = self._choose(own, pool, relength)
        elif generated:
            own = self._pools.get(key, [])
            pool = own + self._borrowable(key)
            if pool and self._rng.random() >= self.explore_rate:
                relength = self.lengths_free or (
                    self.fresh_lengths is None and self._rng.random() < self.min_explore
                )
                entry, borrowed = self._choose(own, pool, relength)
                reoption = entry is not None and self._fresh_options_for(entry)
        start = choice_count(data)
        replay = None
        if entry is not None:
            free = entry.free if relength and not entry.unfree else None
            options = entry.options if reoption else None
            replay = _Replay(
                provider_of(data), entry.nodes, widened=borrowed, free=free, options=options
            )
        elif generated and self._covered.get(key) and (self._warming or self.explore_rate < 1):
            # Only where structures are rationed (a compile worker's warm-up, a pair whose
            # compiles cost): elsewhere (the Triton interpreter) every example explores anyway,
            # and novel structures are the larger ones, slower to check.
            chosen = self._diverse(strategy, key)
            if chosen is not None:  # an exploration, of the most novel candidate
                replay = _Replay(provider_of(data), chosen)
        outer, self._open = self._open, _Open(data, start, replay)
        opened = self._open
        try:
            if replay is None:
                value = draw(strategy, label=_STRUCTURE_LABEL)
            else:
                with providing(data, replay):
                    value = draw(strategy, label=_STRUCTURE_LABEL)
        finally:
            self._open = outer
        if entry is None and replay is not None:
            mode = "explore"
            self.counts["diversified"] += 1
        elif entry is None or replay is None:
            # Choices given for the whole structure: a replay (shrinking, the database, a
            # mutation of an earlier example); for its beginning only: Hypothesis's generator
            # chose a prefix reaching into it, the rest is fresh.
            mode = "explore" if generated else "fresh" if generating(data) else "replay"
        elif replay.complete:
            mode, entry.reuses = "reuse", entry.reuses + 1
        elif replay.options is not None and replay.done["options"]:
            # A choice after fresh options no longer matched its record: it depends on them.
            # The record stays, its options replayed from now on.
            mode = "explore"
            entry.fixed_options = True
            self.counts["fixed options"] += 1
        elif replay.free is not None and replay.lengths:
            # A choice after fresh lengths no longer matched its record: it depends on them.
            # The record stays, replayed whole from now on.
            mode = "explore"
            entry.unfree = True
            self.counts["unfree"] += 1
        elif borrowed:  # another strategy's structure this one does not draw
            mode = "explore"
            self.counts["stale"] += 1
            self._unborrowable.setdefault(key, set()).add(_identity(entry.nodes))
        else:  # the strategy no longer draws this structure: drop it
            mode = "explore"
            self.counts["stale"] += 1
            self._drop(key, entry)
        names = {"explore": "explored", "reuse": "reused", "fresh": "fresh", "replay": "replayed"}
        self.counts[names[mode]] += 1
        relengthed = mode == "reuse" and replay is not None and bool(replay.free)
        reoptioned = mode == "reuse" and replay is not None and bool(replay.options)
        self.counts["relengthed"] += relengthed
        self.counts["reoptioned"] += reoptioned
        nodes = recorded_choices(data, start)
        free, options = tuple(opened.free), tuple(opened.options)
        if borrowed and mode == "reuse":
            self.counts["borrowed"] += 1
            # known from now on under this strategy's key too
            self._offer(key, nodes, free, options)
        self._drawn.append(
            _Drawn(
                data,
                key,
                nodes,
                mode,
                free,
                relengthed,
                options,
                reoptioned,
                entry=entry if mode == "reuse" else None,
            )
        )
        return value

    def _fresh_options_for(self, entry: _Entry) -> bool:
        """Whether a reuse of ``entry`` draws its options fresh: where it has options that
        can be, while options are free (:attr:`options_free`), or for a share ``min_explore``
        of reuses that keeps measuring (drawn from the memo's generator only then)."""
        if not entry.options or entry.fixed_options:
            return False
        return self.options_free or (
            self.fresh_options is None and self._rng.random() < self.min_explore
        )

    def _diverse(self, strategy: st.SearchStrategy[Any], key: Hashable) -> Nodes | None:
        """Of ``diverse`` candidate structures drawn aside, the choices of the one with the most
        pairs of choices that no structure offered under ``key`` had (ties: the first drawn);
        None where fewer than two candidates could be drawn (Hypothesis's generator draws the
        exploration then)."""
        if self.diverse < 2:
            return None
        covered = self._covered.get(key, set())
        best: int | None = None
        chosen: Nodes | None = None
        outer = self._open
        drawn = 0

        def opening(data: Any) -> None:  # records the candidate's lengths (free_lengths)
            self._open = _Open(data, 0, None)

        try:
            for _ in range(self.diverse):
                rng = random.Random(self._aside.getrandbits(64))
                try:
                    data, _value = draw_aside(strategy, rng, before=opening)
                except Exception:
                    continue
                drawn += 1
                nodes = recorded_choices(data, 0)
                free = tuple(self._open.free) if self._open is not None else ()
                score = len(_pairs(_variant(nodes, free)) - covered)
                if best is None or score > best:
                    best, chosen = score, nodes
        finally:
            self._open = outer
        return chosen if drawn >= 2 else None

    def _borrowable(self, key: Hashable) -> list[_Entry]:
        """The structures of the memo's other strategies that strategy ``key`` may reuse too: a
        campaign widens a pair's compile-time choices (another tile pair, head dim, dtype)
        keeping the earlier ones first, so a structure recorded under the narrower strategy,
        replayed with its integer draws' bounds widened, is the same structure, its kernels
        compiled. Without them every example of a widened pair drew a fresh structure, and where
        its compile share was spent nearly all were refused (1,398 examples of a GLA pair on an
        H100, 58 s). Left out: those ``key`` knows already (a borrowed one is offered under it)
        and those it did not draw (``stale``: another scale's, say)."""
        known = self._known.get(key, set())
        skip = self._unborrowable.get(key, set())
        return [
            e
            for k, pool in self._pools.items()
            if k != key
            for e in pool
            if _identity(e.nodes) not in known and _identity(e.nodes) not in skip
        ]


def _pairs(variant: tuple[Any, ...]) -> set[tuple[Any, ...]]:
    """The pairs of choices of a structure's ``_variant`` (lengths left out), each choice as
    (position, kind, value): what :attr:`StructureMemo.diverse` counts as covered."""
    kept, _runs = variant
    items = [(i, kind, value) for i, (kind, value) in enumerate(kept)]
    return {(a, b) for n, a in enumerate(items) for b in items[n + 1 :]} | {(a,) for a in items}


def structure_key(*parts: Any) -> tuple[Any, ...]:
    """A :func:`reusing` key from a strategy factory's name and arguments: lists and tuples as
    tuples, sets as frozensets, mappings as sorted item tuples (recursively), anything else as
    it is."""

    def frozen(x: Any) -> Any:
        if isinstance(x, (list, tuple)):
            return tuple(frozen(v) for v in x)
        if isinstance(x, (set, frozenset)):
            return frozenset(frozen(v) for v in x)
        if isinstance(x, dict):
            return tuple(sorted((k, frozen(v)) for k, v in x.items()))
        return x

    return tuple(frozen(p) for p in parts)


def _spare_structures() -> None:
    """Has Hypothesis's own variations of an example leave its structure alone, but at the
    active memo's explore rate.

    Besides the examples it generates, Hypothesis runs variations of earlier ones: mutations
    (after each generated example, a few copies of one span's choices over another span with the
    same label: the same value at two places) and hill climbing on ``target()`` scores (one
    choice at a time, up and down). Applied to a structure, each makes a new one (rows copied
    over columns, a length one longer: a new shape) on examples the memo never chose to
    explore; with a memo most examples of a run were such variations, and an exact-shape fake
    kernel compiled three times what the memo allowed. While a memo is active, mutations leave
    out the spans that overlap a structure and the hill climber's steps into a structure are
    refused, but on a share ``explore_rate`` of them: values are varied as before
    (``fuzz.hypothesis_internals.spare_spans``). Installed once, guarded (a Hypothesis without
    these keeps its own); without an active memo they are Hypothesis's own.
    """
    spare_spans(_STRUCTURE_LABEL, _sparing)


def _sparing() -> Callable[[], bool] | None:
    """Whether Hypothesis's variations spare structures now: None without an active memo, else
    whether to spare one at each variation (all but a share ``explore_rate``, drawn with the
    memo's generator)."""
    memo = _ACTIVE.get()
    if memo is None:
        return None
    return lambda: memo._rng.random() >= memo.explore_rate


@contextlib.contextmanager
def free_lengths(draw: Callable[..., Any]) -> Iterator[None]:
    """Inside it, the structure a :func:`reusing` strategy draws (``draw``: its composite's)
    draws lengths: a reused structure draws them fresh while the memo says lengths are free
    (:attr:`StructureMemo.lengths_free`). Put around the draws of sizes that compile nothing
    where the kernel's variants are compiled per variant or shape bucket, and nothing else:
    the choices after them must not depend on them (a record whose later choices do is
    replayed whole). With no memo active (or outside a structure), nothing: the same draws."""
    with _fresh(draw, "lengths"):
        yield


@contextlib.contextmanager
def free_options(draw: Callable[..., Any]) -> Iterator[None]:
    """Inside it, the structure a :func:`reusing` strategy draws draws options: optional
    inputs, masks and runtime scalars (a bias, a scale, a causal flag, a window) that some
    kernels compile for (a Triton ``constexpr``, a static argument) and others take as
    arguments. A reused structure draws them fresh while the memo says they compile nothing
    (:attr:`StructureMemo.options_free`, measured as lengths are), so that reusing a few
    compiled structures does not fix them: an interpreted Pallas softmax over its compile share
    reused its first structures, none with a bias and a scale, for 2,365 examples and never
    met its bug, which needs both. The choices after them must not depend on them. With no
    memo active (or outside a structure), nothing: the same draws."""
    with _fresh(draw, "options"):
        yield


@contextlib.contextmanager
def _fresh(draw: Callable[..., Any], kind: str) -> Iterator[None]:
    """``free_lengths`` (``kind`` "lengths") or ``free_options`` ("options")."""
    memo = _ACTIVE.get()
    opened = memo._open if memo is not None else None
    if opened is None or opened.inside or opened.data is not choice_data(draw):
        yield
        return
    begin = opened.count()
    opened.inside = True
    if opened.replay is not None:
        opened.replay.enter(kind)
    try:
        yield
    finally:
        opened.inside = False
        if opened.replay is not None:
            opened.replay.leave()
        (opened.free if kind == "lengths" else opened.options).append((begin, opened.count()))


def current_memo() -> StructureMemo | None:
    """The memo active in this context (None: structures are drawn fresh)."""
    return _ACTIVE.get()


def reusing(strategy: st.SearchStrategy[Any], *, key: Hashable) -> st.SearchStrategy[Any]:
    """``strategy`` (a case's structure), drawn through the active :class:`StructureMemo`.

    With no memo active, exactly ``strategy``: the same choices, nothing drawn besides. With one,
    a ticket (two integers) and then either a fresh draw of ``strategy`` (explore) or a structure
    the memo has seen launched, drawn by making its choices again (reuse): see the module's
    docstring. ``key`` names ``strategy`` among the memo's pools (hashable, stable across
    rebuilds of the same strategy: its factory's name and arguments); structures recorded under
    a key are only offered to the same key.

    Shrinks as ``strategy`` does (the ticket toward 0 first, which changes nothing).
    """
    if not isinstance(strategy, st.SearchStrategy):
        raise InvalidArgument(f"strategy={strategy!r} must be a SearchStrategy")
    try:
        hash(key)
    except TypeError:
        raise InvalidArgument(f"key={key!r} must be hashable") from None
    return _reusing(strategy, key)


@st.composite
def _reusing(draw: st.DrawFn, strategy: st.SearchStrategy[Any], key: Hashable) -> Any:
    memo = _ACTIVE.get()
    if memo is None:
        return draw(strategy)
    return memo._draw(draw, strategy, key)
