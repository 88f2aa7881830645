"""Runs Hypothesis over one target on one backend and collects minimal failures.

:func:`hunt` is the one loop every front end shares (pytest, ``python -m fuzz run``, the mutant
scoreboard): it draws cases from the target's strategy, checks every property, lets Hypothesis
shrink each failure class separately, and returns the minimal example of each class with its
reproducer. :func:`check` turns a hunt into a pytest-style assertion.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import itertools
import time
import unittest
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hypothesis import Phase, event, given, reject, settings
from hypothesis import strategies as st
from hypothesis.database import ExampleDatabase, InMemoryExampleDatabase

from fuzz import isolated, known_crashes, reproducer, timing
from fuzz.backends import Backend, get_backend, release_device_memory
from fuzz.case import Case
from fuzz.duplicates import Duplicates, bug_of, check_as
from fuzz.failures import CRASH, NONDETERMINISM, Finding, KernelFailure, Unsupported, raise_for
from fuzz.hypothesis_internals import (
    add_digest,
    choices_to_bytes,
    current_choices,
    data_of,
    exhausted,
    in_shrink_phase,
    is_final_replay,
    keep_database,
    reports_to,
    set_database_key,
    shrink_budget,
    statistics,
    track_phases,
    without_pareto_front,
)
from fuzz.narrowing import (
    AUTOTUNE,
    run_narrowing,  # also imported from here (fuzz.campaign)
    strategy_keywords,
)
from fuzz.profiles import HuntOptions, Profile
from fuzz.properties import Context, check_case, properties_of
from fuzz.results import Found, HuntResult, decode_choices, trace_of
from fuzz.shrink import (
    SHRINK_PHASES,
    Stage,
    hands_off,
    run_stage,
    shrink_again,
    shrink_compiled,
    shrink_in_own_space,
    what_it_said,
)
from fuzz.signatures import (
    Bug,
    Resume,
    bug_key,
    conditions,
    covering,
    declared,
    same_bug,
    signature,
)
from fuzz.stops import is_fault
from fuzz.target import Target
from fuzz.timing import NewCompile, no_new_compiles
from strategies.reuse import StructureMemo

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


class OutOfTime(BaseException):
    """Ends a hunt whose time is up (a BaseException: Hypothesis does not shrink it); a hook
    (``Hooks.before_example``) raises it to end the hunt as its time limit would."""


class _ContextLost(BaseException):
    """Ends a hunt whose example lost the process's CUDA context (a sticky error such as an
    illegal address): every later launch fails the same way, so shrinking would only walk down to
    the simplest example and report it in place of the one that did the damage."""


class _DeviceMemory(BaseException):
    """Ends a hunt whose example ran the GPU out of memory (``reproducer.device_out_of_memory``):
    the harness's resources (a campaign runs a dozen processes on one GPU), not the kernel's
    bug; later launches of the process would fail alike. The hunt stops with ``stopped`` =
    ``"device-memory"`` and an error that says so; a campaign worker exits for a fresh one."""


# What lost this process's CUDA context, once something has: later hunts that need the GPU refuse
# to run (their failures would be this one's) and say so.
_context_lost: list[str] = []


def _exceptions(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for e in exc.exceptions:
            out.extend(_exceptions(e))
        return out
    return [exc]


def _is_flaky(exc: BaseException) -> bool:
    """Hypothesis's verdict that a failure did not replay (``Flaky``, ``FlakyFailure`` -- an
    exception group around the failures -- at any depth)."""
    if "Flaky" in type(exc).__name__:
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_is_flaky(e) for e in exc.exceptions)
    return False


def database_key(target: str, backend: str) -> bytes:
    """The example-database key of one target on one backend.

    Stable across harness versions (Hypothesis would otherwise hash the test function's source),
    so a database keeps serving after an upgrade and is shared by every front end.
    """
    return f"kernel-fuzz:{target}|{backend}".encode()


def derandomized_seed(target: str, backend: str) -> int:
    """The seed of a derandomized hunt (the ``ci`` profile): stable across harness versions."""
    return int.from_bytes(hashlib.sha256(database_key(target, backend)).digest()[:8], "big")


# Re-shrinks of a failure whose replay was flaky (see hunt).
FLAKY_RESHRINKS = 3
# Examples declined as the GPU's memory ran out (at least so many, and half of a hunt's) that
# end the hunt for a fresh process (``_Hunt._memory_ran_out``).
OUT_OF_MEMORY_LEAST = 3
# A flaky kernel (its result on given inputs differs between runs): a bug's first example is
# checked this many more times, and the runs that differ make it the one flaky bug of the
# target, a ``nondeterminism`` of property FLAKY_PROPERTY (whatever each run failed: a NaN, two
# runs that differ, an error). Once a hunt has met one, each example Hypothesis replays or tries
# while shrinking runs up to FLAKY_RUNS times in all.
CONFIRM_REPLAYS = 2
FLAKY_RUNS = 4
FLAKY_PROPERTY = "replays"
# Seconds past a hunt's hard limit given to settle the bugs it left unshrunk (shrink them once
# more, tell whether they are bugs found before): a campaign kills a slice 30 s past its hard
# limit (compiling not counted), and what it streamed before arrives unshrunk.
SETTLE_SECONDS = 15.0
# Seconds past that to tell whether the hunt's new bugs are known ones seen another way (the
# duplicate check, ``fuzz.duplicates``); the rest of the campaign's 30 s is the summary's.
DUPLICATE_SECONDS = 20.0
# The share of a pair's time that compiles of structures admitted past its compile share may
# take, where each brings a hazard (by name) that none of its checked examples had: a pot of
# their own. The share's own goes to a pair's first structures, the simplest (one head, one
# key): a Pallas-interpret pair whose planted bug needs grouped heads spent it on 20 of them,
# refused 125 structures and never checked one with grouped heads (seed 1, 80 examples), where
# fresh draws have them 3 times in 4. A family names about 20 hazards: each admission checks a
# new one, so few are admitted.
NOVEL_SHARE = 0.05


def _hazard_names(hazards: Iterable[str]) -> list[str]:
    """The names of ``hazards`` (``"name: detail"`` strings, ``Target.hazards_of``), sorted:
    what a checked example records in its memo and what a new structure is compared with."""
    return sorted(h.split(":", 1)[0] for h in hazards)


def _said(verdict: Finding | None) -> str:
    """One run's result, as runs are compared: its bug key, or "passes"."""
    return "passes" if verdict is None else bug_key(verdict)


def duplicate_deadline(settle_at: float | None, hard_at: float | None) -> float | None:
    """When a hunt's duplicate check stops gathering evidence: ``DUPLICATE_SECONDS`` past the
    end of the time given to settle its bugs (``settle_at``, else ``SETTLE_SECONDS`` past its
    hard limit ``hard_at``); None without a hard limit."""
    if settle_at is not None:
        return settle_at + DUPLICATE_SECONDS
    if hard_at is not None:
        return hard_at + SETTLE_SECONDS + DUPLICATE_SECONDS
    return None


def flaky_finding(
    verdicts: list[Finding | None], hazards: list[str], tally: tuple[int, int]
) -> Finding:
    """The finding of an example whose runs differ (``verdicts``: each run's finding, None for
    a pass, one failure at least): how often it failed and how; ``tally``: (failed, runs) over
    every flaky example of the hunt so far."""
    failed = [v for v in verdicts if v is not None]
    words = [_said(v) if v is None else v.summary() for v in verdicts]
    sticky = next((v for v in failed if reproducer.kills_context(v)), None)
    first = failed[0].summary() if failed else "-"
    message = (
        f"flaky: the same example failed {len(failed)} of {len(verdicts)} runs ({first}; "
        f"then {'; '.join(_said(v) for v in verdicts[1:])[:300]}); its examples failed "
        f"{tally[0]} of {tally[1]} runs in all"
    )
    return Finding(
        NONDETERMINISM,
        FLAKY_PROPERTY,
        message[:1000],
        details={
            "runs": len(verdicts),
            "failed": len(failed),
            "results": [w[:300] for w in words],
            # How its runs failed: a row of one of these keys is the bug that makes it flaky
            # (``fuzz.ledger``; a race's runs fail as its masking or accuracy rows do).
            "run_keys": sorted({bug_key(v) for v in failed}),
            "failed_in_all": tally[0],
            "runs_in_all": tally[1],
            # (a run that lost the process's CUDA context: ``reproducer.kills_context``)
            **({"lost_context": sticky.summary()[:500]} if sticky is not None else {}),
        },
        hazards=list(hazards),
    )


@dataclass
class Hooks:
    """Callbacks a campaign worker attaches to a hunt (all optional).

    Attributes:
        before_example: ``(case)``, before the first launch of an example (persist it: a launch
            may kill the process).
        on_draw: ``(property, value)``, whenever a property parameter is drawn, and whenever its
            recorded value is settled later (the autotune configs, as each launch chooses one);
            before the launch that uses it.
        after_example: ``(result)``, after every example (progress).
        on_found: ``(result, found)``, when a failure class first appears and when its minimal
            example is final (nothing found is lost if the process dies while shrinking).
        on_feature: ``(feature)``, a coverage feature seen for the first time in this hunt.
        error_maps: ``(context) -> plots``, the pictures of a failing example's errors attached
            to its finding (``Found.plots``; ``fuzz.campaign.plots.error_maps``) when it first appears and
            when it is minimal.
        progress: ``(examples, compile seconds)`` of the hunt so far, its running shrink stage's
            compiles counted, after each example of a shrink stage: a stage is a hunt of its own
            (:func:`hunt` with a :class:`fuzz.shrink.Stage`), which also calls the outer hunt's
            ``before_example`` before each of its examples. Without them a campaign saw no
            example in flight and no compile while a slice shrank, and killed slices of JAX's
            ``mha`` on an H200 whose shrink stages compiled past the hard limit it knew of.
    """

    before_example: Callable[[Case], None] | None = None
    on_draw: Callable[[str, Any], None] | None = None
    after_example: Callable[[HuntResult], None] | None = None
    on_found: Callable[[HuntResult, Found], None] | None = None
    on_feature: Callable[[str], None] | None = None
    error_maps: Callable[[Context], list[dict[str, Any]]] | None = None
    progress: Callable[[int, float], None] | None = None

    def watches(self) -> bool:
        """Whether a campaign watches the hunt's examples (its shrink stages' too)."""
        return self.before_example is not None or self.progress is not None


# The draws of an example that select compiled code as its structure does, though the case's
# strategy does not make them: kept with the structure and replayed when it is reused
# (``strategies.reuse.StructureMemo.draw_attached``).
WITH_STRUCTURE = frozenset({AUTOTUNE})


class _HandOff(BaseException):
    """Ends a compiled backend's search at a new failure, unshrunk: it is shrunk where that is
    cheap (:mod:`fuzz.shrink`), not by Hypothesis on the compiled backend."""


class _GoalReached(BaseException):
    """Ends a shrink stage whose best failing example meets the stage's goal."""


class _Hunter:
    """One target on one backend under one set of options: the Hypothesis test body, its
    settings, and the bookkeeping of what was found. :func:`hunt` drives it."""

    def __init__(
        self,
        target: Target,
        backend: Backend,
        options: HuntOptions,
        *,
        result: HuntResult,
        hooks: Hooks,
        known: Collection[str | Bug],
        time_limit: float | None,
        hard_limit: float | None,
        min_examples: int,
        on_example: Callable[[HuntResult], None] | None,
        stage: Stage,
        memo: StructureMemo | None = None,
        compile_spent: tuple[float, float, float] = (0.0, 0.0, 0.0),
    ) -> None:
        self.target, self.b, self.options = target, backend, options
        # (compile seconds, seconds) the pair spent before this hunt (a campaign's earlier
        # slices): the compile share holds over them all, not afresh in every slice; and what
        # one compile of it is expected to cost (0: not known).
        self.compile_spent = compile_spent
        self.result, self.hooks = result, hooks
        # Classes known as a whole (a shrink stage's other classes), and bugs found before.
        self.known_classes = frozenset(k for k in known if isinstance(k, str))
        self.known_bugs: list[Bug] = [k for k in known if isinstance(k, Bug)]
        self.declared = tuple(target.library.known_failures)
        self.labels: dict[str, str] = {}  # bug key -> its key in HuntResult.found
        self.min_examples, self.on_example = min_examples, on_example
        self.t0 = time.perf_counter()
        self.stop_at = None if time_limit is None else self.t0 + time_limit
        self.hard_at = None if hard_limit is None else self.t0 + hard_limit
        self.longest = 0.0  # the longest example so far, its compiles left out (_check_time)
        self.out_of_memory = 0  # examples declined as the GPU's memory ran out (_memory_ran_out)
        self.narrowing: dict[str, tuple[Any, ...]] = {}
        self.strategy: Any = None
        self.last_seen: dict[str, Found] = {}
        self.minimal: dict[str, Found] = {}
        self.first: dict[str, tuple[int, float]] = {}
        self.handed_off: list[str] = []
        # Extra determinism runs once a race has shown (see fuzz.properties._determinism): the
        # examples Hypothesis then tries while shrinking fail reliably, not one run in a few.
        self.race_repeats = 0
        self.stage = self.search_stage = stage
        self.round = 0  # Hypothesis runs of the hunt so far (see hunt: it goes on after bugs)
        self.exhausted = False  # the last run tried every distinct example (Hypothesis said)
        # The first exception of an example that was no finding (the harness failed there):
        # Hypothesis shrinks it as it does a failure, and the time limit must not end that
        # shrinking and lose it (see _note_error).
        self.harness_error: str | None = None
        self.harness_trace: str | None = None
        self.memo = memo  # the structures this (target, backend) reuses (strategies.reuse)
        self._mark = 0  # fuzz.timing.compile_mark() when the example now running began
        # Hypothesis's shrinking of the run in progress: the bug of its latest shrink step, the
        # bugs it has stepped on, and the bugs whose shrinking its time cap cut (see
        # _reported), with that cap's seconds.
        self.shrinking: str | None = None
        self.shrink_stepped: set[str] = set()
        self.shrink_cut: set[str] = set()
        self.shrink_cap = 0.0
        # How the running example is checked (only compiled kernels, derived launches spared):
        # its replays are checked alike.
        self._checked_as = (False, False)
        self._novel = False  # the running example admitted past the share (_novel_admitted)
        # Examples whose runs differed (the flaky bug's, by their choices), and over those runs
        # (failed, runs): once there is one, shrink steps and final replays run several times;
        # and what each example that failed failed as (by its choices).
        self.flaky_seen: dict[tuple[Any, ...], Finding] = {}
        self.flaky_tally = (0, 0)
        self.failed_as: dict[tuple[Any, ...], Finding] = {}
        # When the time given past the hard limit to settle the hunt's bugs ends (once set).
        self.settle_at: float | None = None
        # The duplicate check, kept over the hunt's rounds: what it learned of an example (its
        # failures other ways, its influence anomalies) is not computed again.
        self.duplicates: Duplicates | None = None
        # The hunt a shrink stage runs for (its hooks watch the stage's examples; Hooks.progress).
        self.outer: _Hunter | None = None

    # The test body -----------------------------------------------------------------------------

    def feature(self, name: str) -> None:
        if name not in self.result.features:
            self.result.features.add(name)
            if self.hooks.on_feature is not None:
                self.hooks.on_feature(name)

    def _check_time(self, final: bool) -> None:
        # A hunt's time limits count fuzzing: compiling a kernel is a setup cost, and a slice
        # that compiled for a minute still fuzzes for its seconds.
        now = time.perf_counter() - self.result.stats.compile_seconds
        if self.hard_at is not None and now > self.hard_at and not final:
            self.result.stopped = "hard-limit"
            raise OutOfTime
        if (
            self.hard_at is not None
            and not final
            and in_shrink_phase()
            and now + self.longest > self.hard_at
        ):
            # A shrink step as long as the longest example so far would end past the hard
            # limit: stopped before it starts, with what was shrunk so far. One step of a
            # 63,600-element interpreted Pallas case ran past it on an H200, and the campaign
            # killed the worker with the shrinking it had done.
            self.result.stopped = "hard-limit"
            raise OutOfTime
        if (
            self.stop_at is not None
            and not self.first
            and self.harness_error is None
            and not final
            and self.result.examples >= self.min_examples
            and now > self.stop_at
        ):
            self.result.stopped = "time"
            raise OutOfTime

    def narrow(self, narrowing: dict[str, tuple[Any, ...]]) -> None:
        """Draws this hunt's cases from the target's strategy narrowed to ``narrowing``; a
        strategy whose cases depend on the backend's kind (a plugin's rules per kind) is given
        the kind, kept with the narrowing so that a shrink stage on the twin replays alike."""
        if getattr(self.target.strategy, "per_kind", False) and "kind" not in narrowing:
            narrowing = {**narrowing, "kind": ("interpreted" if self.b.interpret else "compiled",)}
        self.narrowing = narrowing
        self.result.variants = {k: list(v) for k, v in narrowing.items()}
        self.strategy = self.target.strategy(self.options.scale, **strategy_keywords(narrowing))

    def _novel_admitted(self, case: Case) -> bool:
        """Whether ``case``, over the compile share, is admitted all the same: it has a hazard
        (by name) that no example checked with this hunt's memo had, and the compiles so
        admitted for the pair's memo stay within :data:`NOVEL_SHARE` of its time (a pot of
        their own: the share's is spent on the first structures, the simplest)."""
        memo, share = self.memo, self.options.compile_share
        if memo is None or share is None or self.stage.only_compiled:
            return False
        if set(_hazard_names(self.target.hazards_of(case))) <= memo.hazards_checked:
            return False
        pot = NOVEL_SHARE * (self.compile_spent[1] + time.perf_counter() - self.t0)
        return pot > 0 and memo.novel_compile_seconds + self._compile_cost() <= pot

    def _compile_cost(self) -> float:
        """What one more compile costs: the campaign's estimate, else this run's compiles so far
        (a launch that only loaded a kernel compiled elsewhere is no measure of it); 0 where
        neither is known."""
        cost = self.compile_spent[2]
        stats = self.result.stats
        n = stats.compiles - stats.cache_loads
        if not cost and n > 0:
            cost = (stats.compile_seconds - stats.cache_load_seconds) / n
        return cost

    def _over_compile_budget(self) -> bool:
        """Whether compiling now would take the pair's compile time past its share: this run's
        and what ``compile_spent`` says earlier runs spent (a campaign's slices). The first
        compile is not refused where the cost of one is not known, or the run knows no
        structure it could fuzz instead (a cold pair is fuzzed, not left waiting). Where it is
        known and the memo holds structures (a compile worker's), it is refused as any other:
        each first slice of a GLA backward pair on an H200 explored (its memo, new in that
        process, explores every example until it measures a compile) and compiled 50-69 s on
        the fuzzing path, where the warm-up's structures were there to fuzz."""
        share = self.options.compile_share
        stats = self.result.stats
        before, before_seconds, cost = self.compile_spent
        compiled = before + stats.compile_seconds
        if share is None:
            return False
        if compiled == 0 and not (cost and self.memo is not None and self.memo.structures()):
            return False
        # A compile is refused where it would take the share past its bound, not only once it
        # has: one backward GLA compile took 43 s on an H200 in a slice of 7 s.
        seconds = before_seconds + time.perf_counter() - self.t0
        return compiled + self._compile_cost() > share * seconds

    def _on_outer_backend(self) -> bool:
        """Whether this hunt is a shrink stage of a watched hunt on the same backend: its
        examples are persisted as that hunt's are (a stage on the interpreter twin's are not: a
        worker dying there would leave its case under the compiled backend's name)."""
        return self.outer is not None and self.outer.b.name == self.b.name

    def _on_draw(self) -> Callable[[str, Any], None] | None:
        """The hook told of each drawn parameter: this hunt's, or the watched hunt's it is a
        shrink stage of on its backend (a worker dying in a stage's example leaves them too)."""
        if self.hooks.on_draw is None and self._on_outer_backend():
            return self.outer.hooks.on_draw  # type: ignore[union-attr]
        return self.hooks.on_draw

    def _check(self, case: Case, data: st.DataObject) -> Any:
        on_draw = self._on_draw()

        memo = self.memo
        conjecture = data_of(data)

        def draw(s: SearchStrategy[Any], label: str) -> Any:
            if label in WITH_STRUCTURE and memo is not None and conjecture is not None:
                value = memo.draw_attached(conjecture, lambda: data.draw(s, label=label), label)
            else:
                value = data.draw(s, label=label)
            if on_draw is not None:
                on_draw(label, value)
            return value

        # Hypothesis's final replay of a failing example reproduces it whatever it compiles: a
        # rejection there is no shrink step refused but a failure lost (it ended the compiled
        # shrink stages of several GPU findings with "UnsatisfiedAssumption", unshrunk).
        final = is_final_replay()
        # Over the share, an example whose structure is new is refused where it would compile;
        # one whose structure launched before (here, or in the compile worker that warmed the
        # pair up) at most loads what is compiled already, where such loads have been cheap.
        # Shrinking a failure compiles what its steps need, within Hypothesis's shrink time:
        # the share refused every step of a CPU campaign's Pallas interpreter (an XLA program
        # per shape) and left its reproducers 5x the size the same kernel's Triton twin reached.
        over_budget = not in_shrink_phase() and self._over_compile_budget()
        novel = over_budget and not final and self._novel_admitted(case)
        over = (
            over_budget
            and not novel
            and not (
                self.memo is not None and self.memo.drawn_known() and self.memo.known_is_cheap()
            )
        )
        if self.memo is not None:
            self.memo.over_budget = over_budget  # the next examples explore less
        if novel:
            self.result.events["admitted past the share: a new hazard"] += 1
        self._novel = novel
        only_compiled = (self.stage.only_compiled or over) and not final

        def admit() -> None:  # (once the example's parameters are drawn: see check_case)
            if (
                only_compiled
                and self.memo is not None
                and not self.memo.drawn_launched()
                and self.memo.new_would_compile()
            ):
                # A structure no process here launched, where new ones mostly compile: refused
                # before its launch. At the compile it would have paid JAX's tracing and
                # lowering first (0.3-1 s for a Pallas attention kernel, the refused examples
                # of a GPU campaign's Pallas pairs outnumbering the checked ones 5 to 1).
                self.result.events["rejected: would compile"] += 1
                self.memo.refused(measured=False)
                reject()

        # A launch a property derives has shapes of its own (one sequence of a packed batch, a
        # truncated batch element), which a kernel compiled per shape compiles even where the
        # case's structure is known: over the share that property is skipped, not the example.
        spare = (over_budget or self.stage.only_compiled) and not final
        self._checked_as = (only_compiled, spare)  # (its replays check it alike: _recheck)
        try:
            outcome = self._check_once(case, draw=draw, admit=admit)
        except NewCompile:
            self.result.events["rejected: would compile"] += 1
            if self.memo is not None and self.memo.refused():
                self._lengths_compiled("refused")
            reject()
        except Unsupported as e:  # the kernel declined the example: never a finding
            self._declined([e.reason])
            reject()
        self._declined(outcome.declined)  # properties skipped: a launch they derive was declined
        for prop in outcome.spared:  # ... or would have compiled past the share
            self.result.events[f"spared: {prop} (would compile)"] += 1
        return outcome

    def _check_once(
        self,
        case: Case,
        *,
        draw: Callable[[SearchStrategy[Any], str], Any] | None = None,
        params: dict[str, Any] | None = None,
        admit: Callable[[], None] | None = None,
    ) -> Any:
        """``check_case`` of ``case`` as the running example is checked (``_checked_as``):
        its parameters drawn (``draw``) or given (``params``: a replay of it)."""
        only_compiled, spare = self._checked_as
        with no_new_compiles() if only_compiled else contextlib.nullcontext():
            return check_case(
                self.target,
                self.b,
                case,
                draw=draw,
                params=params,
                **self.options.check_kwargs(),
                differential_every=self.options.differential_every,
                stats=self.result.stats,
                race_repeats=self.race_repeats,
                note=self._on_draw() if draw is not None else None,
                spare_derived=spare,
                prefer=self.stage.only if self.stage.past_first else None,
                admit=admit,
                autotune=self.narrowing.get(AUTOTUNE),
                unchecked=self._past_shrunk() if in_shrink_phase() else (),
            )

    def _past_shrunk(self) -> tuple[str, ...]:
        """While Hypothesis shrinks, the properties after the last one a bug of this hunt failed
        (checked in order, a case stops at its first failure): a shrink step that fails none of
        those is none of its bugs, and what it would have failed past them is not checked (its
        parameters are still drawn: the choices are a full check's). Most shrink steps fail
        nothing, and paid every property's launches: the suite's mutant proofs spent most of
        their time shrinking. None left out while a bug's property is not one of them (a
        flaky kernel's), or past the first failure (``Stage.past_first``)."""
        keys = set(self.first) | ({self.stage.only} if self.stage.only else set())
        if not keys or self.stage.past_first:
            return ()
        names = [p.name for p in properties_of(self.target)]
        props = {k.split("|")[1] if k.count("|") >= 1 else "" for k in keys}
        if not props <= set(names):
            return ()
        last = max(names.index(p) for p in props)
        return tuple(names[last + 1 :])

    def _recheck(self, case: Case, params: dict[str, Any]) -> Finding | str | None:
        """One more check of the running example (``params``: its parameters): what it failed
        (a finding), None where it passed, or "unchecked" (a compile refused, the kernel
        declined it: that tells nothing of its results)."""
        try:
            return self._check_once(case, params=params).finding  # type: ignore[no-any-return]
        except (NewCompile, Unsupported):
            return "unchecked"

    def _replayed(self, case: Case, outcome: Any, runs: int) -> Finding | None:
        """Checks the running example again, up to ``runs`` runs in all (the one done
        included), stopping at the first whose result differs: the flaky finding
        (:func:`flaky_finding`) where one did, else None (every run said the same). A kernel
        that failed only on its second call with the same inputs gave a campaign 14 "new" bugs
        of two classes, none shrunk (each step of their shrinking passed or failed otherwise
        when Hypothesis replayed it)."""
        verdicts: list[Finding | None] = [outcome.finding]
        while len(verdicts) < runs:
            verdict = self._recheck(case, outcome.params)
            if isinstance(verdict, str):
                return None
            verdicts.append(verdict)
            if _said(verdict) != _said(verdicts[0]):
                break
        if len({_said(v) for v in verdicts}) == 1:
            return None
        failed = sum(isinstance(v, Finding) for v in verdicts)
        self.flaky_tally = (self.flaky_tally[0] + failed, self.flaky_tally[1] + len(verdicts))
        self.result.events["flaky example"] += 1
        flaky = flaky_finding(verdicts, outcome.context.hazards, self.flaky_tally)
        self.flaky_seen[current_choices()] = flaky
        return flaky

    def _flaky_step(self, case: Case, outcome: Any, final: bool) -> Any:
        """``outcome``, or the flaky finding of the running example, where the hunt has met a
        flaky bug and Hypothesis shrinks or replays a failure: each such example is checked up
        to ``FLAKY_RUNS`` times (a run of a flaky kernel that passes or fails otherwise no longer
        decides a shrink step). A final replay of an example found flaky fails as it did, even
        where its runs now pass (a kernel that fails on its second call with given inputs only
        passes every later call with them). An example Hypothesis saw fail fails as it did:
        Hypothesis replays it to start shrinking it, and a verdict decided again there (a
        consistent "masking" that was flaky over more runs) had it give up ("Inconsistent results
        from replaying a test case")."""
        before = self.failed_as.get(current_choices())
        if before is not None:  # an example it saw fail (its shrinking's start, its final replay)
            return dataclasses.replace(outcome, finding=before)
        flaky = self._replayed(case, outcome, FLAKY_RUNS)
        return outcome if flaky is None else dataclasses.replace(outcome, finding=flaky)

    def _lengths_compiled(self, how: str) -> None:
        """Counts an example that reused a launched variant with new lengths and compiled (or
        was refused at the compiler), by what it compiled: the report's events say which
        kernels a length selects where the memo turned fresh lengths off."""
        names = sorted(set(timing.compiled_since(self._mark))) or ["?"]
        self.result.events[f"lengths {how}: {', '.join(names)[:120]}"] += 1

    def _declined(self, reasons: list[str]) -> None:
        for reason in reasons:
            self.result.events[f"unsupported: {reason}"] += 1
            event("unsupported", reason)

    def run_one(self, case: Case, data: st.DataObject) -> None:
        final = is_final_replay()
        self._check_time(final)
        before = self.hooks.before_example
        if before is None and self._on_outer_backend():
            before = self.outer.hooks.before_example  # type: ignore[union-attr]
        if before is not None:
            before(case)
        t0, compiled = time.perf_counter(), self.result.stats.compile_seconds
        self._mark = timing.compile_mark()
        ran_out = None  # what said the GPU's memory ran out
        try:
            outcome = self._check(case, data)
        except Exception as e:
            if not reproducer.device_out_of_memory(f"{type(e).__name__}: {e}"):
                raise
            outcome = None  # (the references' memory, outside a launch: declined as well)
            ran_out = f"{type(e).__name__}: {e}"
        finally:  # (checked, refused before its launch, or failed: no longer in flight)
            self._stage_progress()
            spent = time.perf_counter() - t0 - (self.result.stats.compile_seconds - compiled)
            self.longest = max(self.longest, spent)
        if outcome is not None and outcome.finding is not None:
            f = outcome.finding
            if reproducer.out_of_device_memory(f):  # (a launch's: a crash of those words)
                outcome, ran_out = None, f"{f.prop}: {f.message}"
        if ran_out is not None:
            # (here, past the exception: its frames, which may hold the example's tensors, gone)
            self._memory_ran_out(case, ran_out)
        if outcome is None:
            return
        # Counted once checked: an example refused before its launch (it would compile past the
        # share) or declined by the kernel is an event, not an example (one pair reported 285
        # examples of which 258 were refused).
        self.result.examples += 1
        if self.memo is not None:
            compiled = self.result.stats.compile_seconds - compiled
            offer = outcome.finding is None  # a failing structure would only hit its bug again
            own = min(compiled, outcome.context.own_compile_seconds)
            measured = self.memo.observe(
                compiled, time.perf_counter() - t0, offer=offer, own_compile=own
            )
            if measured and own > 0:
                self._lengths_compiled("compiled")
        names = _hazard_names(outcome.context.hazards)
        if self.memo is not None:
            self.memo.hazards_checked.update(names)
            if self._novel:
                self.memo.novel_compile_seconds += compiled
        for name in names:
            self.result.events[f"hazard {name}"] += 1
            event("hazard", name)
        self.feature("hazards: " + (" + ".join(names) or "none"))
        if self.on_example is not None:
            self.on_example(self.result)
        if self.hooks.after_example is not None:
            self.hooks.after_example(self.result)
        replayed = self._flaky() and (final or in_shrink_phase())
        if replayed:
            outcome = self._flaky_step(case, outcome, final)
        if outcome.finding is not None:
            self._failed(case, outcome, final, replayed=replayed)

    def _stage_progress(self) -> None:
        """A shrink stage's example has ended: the hunt it runs for hears of it (its numbers
        with the stage's so far; they join its result when the stage ends)."""
        if self.outer is None or self.outer.hooks.progress is None:
            return
        outer = self.outer.result
        compiled = outer.stats.compile_seconds + self.result.stats.compile_seconds
        self.outer.hooks.progress(outer.examples, compiled)

    def _flaky(self) -> bool:
        """Whether the hunt has met a flaky bug, or knows one (an earlier slice's)."""
        return bool(self.flaky_seen) or any(
            b.key.split("|")[1:2] == [FLAKY_PROPERTY] for b in self.known_bugs
        )

    def _failed(self, case: Case, outcome: Any, final: bool, *, replayed: bool = False) -> None:
        f = outcome.finding
        result, target = self.result, self.target
        elapsed = time.perf_counter() - self.t0
        if f.cls == NONDETERMINISM:
            self.race_repeats = reproducer.RACE_REPEATS
        result.events[f"failure {f.cls}"] += 1
        event("failure", f.cls)
        self.feature(f"failure: {f.cls} in {f.prop}")
        # A sticky CUDA error: nothing more runs in this process, so this example is kept as it
        # is, unshrunk (its reproducer replays in a fresh process), even of a known class.
        # (A child shrinking such a crash replays its known example without launching it: its
        # context is intact, fuzz.isolated.)
        context_lost = reproducer.kills_context(f) and not known_crashes.replays_known(case)
        dtype = case.params.get("dtype")
        key = bug_key(f)
        holds = conditions(target, case, outcome.context.hazards)
        if not context_lost:
            accepted = declared(self.declared, f, dtype, holds)
            if accepted is not None:  # the library says it knows: count it, look for others
                result.declared_hits[accepted.describe()] += 1
                return
            if self._known(f, key, holds):  # found and shrunk before: look for something new
                return
            if key not in self.first and not replayed:
                # A bug seen for the first time: does its example fail alike on every run?
                flaky = self._replayed(case, outcome, 1 + CONFIRM_REPLAYS)
                if flaky is not None:  # one flaky bug, however its runs failed (no triggers)
                    outcome = dataclasses.replace(outcome, finding=flaky)
                    example_holds, f, key, holds = holds, flaky, bug_key(flaky), frozenset()
                    # A run of it may have lost the context (a wrong dv, then an illegal
                    # address: fla's backward on an H200): nothing more runs here then.
                    context_lost = reproducer.kills_context(f)
                    if not context_lost and self._known_runs(flaky, example_holds):
                        return
                    if not context_lost and self._known(f, key, holds):
                        return
            if self.stage.only is not None and key != self.stage.only and not context_lost:
                self._met_another(f, key, holds, case, outcome.params, elapsed)
                return
        if f.prop == FLAKY_PROPERTY:
            holds = frozenset()  # one flaky bug, whatever each run failed and on what
        self._describe(f, key, holds, dtype)
        self.failed_as[current_choices()] = f
        is_new = key not in self.first
        if is_new:
            self.first[key] = (result.examples, elapsed)
        if in_shrink_phase():
            self.shrinking = key
            self.shrink_stepped.add(key)
        found = Found(
            f,
            case,
            outcome.params,
            *self.first[key],
            minimal_seconds=elapsed,
            final=final,
            choices=current_choices(),
            key=key,
        )
        if final and key in self.shrink_cut:
            found.shrink_notes.append(
                f"shrinking cut after {self.shrink_cap:g} s (the hunt's shrink time): the best "
                "example so far is the reproducer"
            )
        isolate = 0.0
        if context_lost:
            found.lost_context = True
            isolate = self._isolated_seconds(found)
            found.isolating = isolate > 0
            if not found.isolating:
                why = (
                    "a flaky failure is not shrunk in child processes"
                    if f.cls != CRASH
                    else "no time was left to shrink it in child processes"
                )
                found.shrink_notes.append(
                    "not shrunk: a sticky CUDA error lost the process's context (every later "
                    f"launch there fails) and {why}; the example that did it is the "
                    "reproducer, replayed in a child process"
                )
        plot = self.hooks.error_maps
        if final and plot is not None:
            found.plots = plot(outcome.context)
        (self.minimal if final else self.last_seen)[key] = found
        if (is_new or final or context_lost) and self.hooks.on_found is not None:
            if final:
                self.name(found)  # (before the campaign records it)
            if is_new and plot is not None and not found.plots:
                found.plots = plot(outcome.context)
            self.hooks.on_found(result, found)
        if context_lost:
            _context_lost.append(f"{target.name} on {self.b.name}: {f.message[:160]}")
            if found.isolating:  # nothing more launches here: its shrinking goes on in children
                found = self._shrink_isolated(found, isolate)
                self.minimal[key] = found
                self.last_seen.pop(key, None)
                if self.hooks.on_found is not None:
                    self.hooks.on_found(result, found)
            result.stopped = "context-lost"
            raise _ContextLost
        if self.stage.goal is not None and not final and self.stage.goal(case):
            result.stopped = "goal"
            raise _GoalReached
        if self.stage.hand_off and is_new and not final and found.choices:
            self.handed_off.append(key)
            raise _HandOff
        raise_for(f, key)

    def _known(self, f: Finding, key: str, holds: Collection[str]) -> bool:
        """Counts ``f`` (of bug ``key``, under conditions ``holds``) as a hit where it is of a
        known class or an example of a known bug; returns whether it was."""
        if f.cls in self.known_classes:
            self.result.known_hits[f.cls] += 1
            return True
        known = covering(self.known_bugs, key, holds)
        if known is not None:
            self.result.known_hits[known.signature] += 1
            return True
        return False

    def _known_runs(self, flaky: Finding, holds: Collection[str]) -> bool:
        """Counts the flaky example ``flaky`` (under the example's conditions ``holds``) as a
        hit of the known bug one of its runs failed as, where one did (a race's example fails
        as the race's rows do, one run or another); returns whether one did."""
        for key in flaky.details.get("run_keys") or ():
            known = covering(self.known_bugs, key, holds)
            if known is not None:
                self.result.known_hits[known.signature] += 1
                return True
        return False

    def _met_another(
        self,
        f: Finding,
        key: str,
        holds: Collection[str],
        case: Case,
        params: dict[str, Any],
        elapsed: float,
    ) -> None:
        """Keeps bug ``key``, which a shrink stage of another met, as first seen (unshrunk), for
        the hunt that runs the stage to report: dropped, it was lost (a GPU campaign's mutant met
        its expected masking bug only while shrinking an accuracy bug, and ended "wrong
        class")."""
        result = self.result
        result.known_hits[key] += 1
        if key in result.met_while_shrinking:
            return
        self._describe(f, key, holds, case.params.get("dtype"))
        f.details["met_on"] = self.b.name
        met = result.met_while_shrinking[key] = Found(
            f,
            case,
            params,
            result.examples,
            elapsed,
            minimal_seconds=elapsed,
            final=False,
            choices=current_choices(),
            key=key,
        )
        listener = _MET.get()
        if listener is not None and listener[0] == self.b.name:
            listener[1](met)  # streamed now: the stage may not end in time

    def _describe(self, f: Any, key: str, triggers: Collection[str], dtype: Any) -> None:
        """Writes a finding's bug into its details: key, round, triggers, signature."""
        f.details["dtype"] = dtype
        f.details["bug_key"] = key
        f.details["round"] = self.round  # a key is one bug per round: later rounds find others
        f.details["triggers"] = sorted(triggers)
        f.details["signature"] = signature(self.target.name, key, triggers)

    def _note_out_of_memory(self, what: str) -> None:
        """Records that the GPU ran out of memory (``what`` raised it): the hunt ends, with an
        error saying whose resources ran out."""
        result = self.result
        result.events["device out of memory"] += 1
        result.stopped = "device-memory"
        result.error = (
            f"the GPU ran out of memory ({what[:300]}): the harness's resources, not a kernel "
            "finding; nothing more runs in this process"
        )

    def _out_of_memory(self, what: str) -> None:
        self._note_out_of_memory(what)
        raise _DeviceMemory

    def _memory_ran_out(self, case: Case, what: str) -> None:
        """An example that ran the GPU out of memory (its launch, or its references) is declined:
        too large for this process's share of the GPU (a campaign splits it between a dozen
        processes), not a finding and not an example; its memory is handed back and the hunt
        goes on. On an H200, fla's chunked GLA drew cases its process's share could not hold, and
        each ended the process's hunt; twice retired the pair as a harness error. The hunt ends
        as before (``"device-memory"``: a fresh process takes over) only once at least
        :data:`OUT_OF_MEMORY_LEAST` examples have run out and they are half or more of its
        examples: the process's memory itself may be what is short."""
        self.out_of_memory += 1
        result = self.result
        result.events["device out of memory: example declined"] += 1
        event("device out of memory", "example declined")
        release_device_memory()
        # (half or more of its examples, the declined ones counted: as many as those checked)
        if self.out_of_memory >= max(OUT_OF_MEMORY_LEAST, result.examples):
            self._out_of_memory(what)

    # Hypothesis --------------------------------------------------------------------------------

    def build(self, *, max_examples: int, database: Any, seed: int | None, phases: Any) -> Any:
        target, b = self.target, self.b
        o: dict[str, Any] = {"max_examples": max_examples, "database": database}
        if phases is not None:
            o["phases"] = phases
        if seed is not None:
            o["derandomize"] = False

        def run_one(case: Case, data: st.DataObject) -> None:  # a function: Hypothesis tags it
            try:
                self.run_one(case, data)
            except BaseException as e:
                self._note_error(e)
                raise

        test = settings(self.options.settings, **o)(
            given(case=self.strategy, data=st.data())(run_one)
        )
        add_digest(test, f"{target.name}|{b.name}".encode())
        set_database_key(test, database_key(target.name, b.name))
        if seed is not None:
            from hypothesis import seed as hypothesis_seed

            test = hypothesis_seed(seed)(test)
            # @seed turns the database off (a seeded run is meant to be reproducible); a campaign
            # slice is seeded only to vary between slices, and must still replay and save.
            keep_database(test, database)
        return test

    def _note_error(self, exc: BaseException) -> None:
        """Keeps the first exception of an example that is neither a finding nor the harness's
        control flow (an error of the harness: a property, a reference, a hook failed): a slice
        timer never swallows a failure (``_check_time``, ``run_test``)."""
        from hypothesis.errors import UnsatisfiedAssumption

        control = (KernelFailure, UnsatisfiedAssumption)
        if self.harness_error is None and is_fault(exc, []) and not isinstance(exc, control):
            if not isinstance(exc, KeyboardInterrupt):
                self.harness_error = f"{type(exc).__name__}: {exc}"[:2000]
                self.harness_trace = trace_of(exc)

    def _reported(self, text: str) -> None:
        """What Hypothesis reports during a run, in the harness's words where it applies: its
        shrink time cap cut the shrinking of the bug it was shrinking and of those it had not
        begun (noted on their minimal examples, ``Found.shrink_notes``). The rest (falsifying
        examples, ``@seed`` hints for a test function the harness builds) is the harness's to
        say, not Hypothesis's: printed, it flooded a campaign's console (nine "PLEASE REPORT
        THIS" warnings in a 480 s GPU campaign)."""
        if "working to shrink" in text:
            cut = {k for k in self.first if k not in self.shrink_stepped}
            self.shrink_cut |= cut | ({self.shrinking} if self.shrinking else set())

    def run_test(self, test: Any, shrink_seconds: float) -> bool:
        """Runs one Hypothesis test; returns whether it ended on a flaky failure (a race)."""
        result = self.result
        stats: list[dict[str, Any]] = []
        track_phases()
        self.shrink_cap = shrink_seconds
        self.shrinking, self.shrink_stepped, self.shrink_cut = None, set(), set()
        try:
            memo = self.memo.active() if self.memo is not None else contextlib.nullcontext()
            with (
                without_pareto_front(),
                shrink_budget(shrink_seconds),
                statistics(stats.append),
                reports_to(self._reported),
                memo,
            ):
                test()
            self.exhausted = exhausted(stats, bool(self.first))
        except _DeviceMemory:
            pass
        except (OutOfTime, _ContextLost, _HandOff, _GoalReached):
            if self.harness_error is not None and result.error is None:
                result.error = self.harness_error  # cut while shrinking it: still an error
                result.error_trace = self.harness_trace
        except unittest.SkipTest as exc:
            phases = self.stage.phases
            if phases is None or Phase.generate in phases:
                result.error = f"{type(exc).__name__}: {exc}"
                result.error_trace = trace_of(exc)
            # else a replay-and-shrink run found nothing in its database that still fails
        except BaseException as exc:
            for e in _exceptions(exc):
                if isinstance(e, KeyboardInterrupt):
                    raise e from exc
                if isinstance(
                    e,
                    (KernelFailure, OutOfTime, _ContextLost, _DeviceMemory, _HandOff, _GoalReached),
                ):
                    continue
                if _is_flaky(e):
                    continue
                if self._refused_out(e):
                    result.stopped = "refused"
                    continue
                what = f"{type(e).__name__}: {e}"
                if reproducer.device_out_of_memory(what):
                    # the references' or the twin's: the same exhaustion, outside a launch
                    self._note_out_of_memory(what)
                    continue
                if result.error is None:
                    result.error = f"{type(e).__name__}: {e}"[:2000]
                    result.error_trace = trace_of(e)
            return _is_flaky(exc)
        return False

    def _refused_out(self, e: BaseException) -> bool:
        """Whether ``e`` is Hypothesis giving up because the harness refused its examples (each
        would have compiled past the share): the run ends, with no error. A campaign slice whose
        every example would compile was reported as a harness error, and its pair retired."""
        from hypothesis.errors import Unsatisfiable

        return isinstance(e, Unsatisfiable) and self.result.events["rejected: would compile"] > 0

    def search(self, *, max_examples: int, database: Any, seed: int | None, phases: Any) -> None:
        """Runs the search (or the shrink stage). A failure whose replay was flaky (a race: a GPU
        kernel whose result depends on scheduling fails on some runs only, and Hypothesis gives
        up shrinking when a failing example passes on replay) is shrunk on from the smallest
        failing examples the database holds, up to ``FLAKY_RESHRINKS`` times."""
        result = self.result
        shrink_seconds = self.stage.shrink_seconds or self.options.shrink_seconds
        test = self.build(max_examples=max_examples, database=database, seed=seed, phases=phases)
        for attempt in range(1 + FLAKY_RESHRINKS):
            flaky = self.run_test(test, shrink_seconds)
            if (
                not flaky
                or not self.first  # no failure seen: nothing to shrink on (a time-limited verdict)
                or attempt == FLAKY_RESHRINKS
                or result.stopped in ("hard-limit", "context-lost", "goal")
                or result.error is not None
            ):
                break
            result.reshrinks = attempt + 1
            self.race_repeats = reproducer.RACE_REPEATS
            self.stage = dataclasses.replace(
                self.stage, start=(), phases=SHRINK_PHASES, hand_off=False
            )
            test = self.build(
                max_examples=max_examples, database=database, seed=seed, phases=SHRINK_PHASES
            )

    def conclude(self, database: ExampleDatabase | None) -> None:
        """Shrinks the failures the search handed over (``fuzz.shrink``), saves each minimal
        example to ``database`` and hands it to ``on_found``; then settles the round's bugs into
        the result (each a known bug of the rounds that follow)."""
        result, found = self.result, self.found()
        if result.stopped == "device-memory":
            self.handed_off = []  # nothing more runs here: they were streamed unshrunk
        # Bugs its shrink stages met while shrinking others: reported (first seen there) and
        # shrunk as if the search had handed them off, unless already found or known.
        queue = list(self.handed_off)
        main = self.search_stage.only is None  # (a stage's own run leaves them to its hunt)
        streamed: set[str] = set()

        def stream(met: Found) -> None:  # first seen, as the search streams a new bug
            if met.key not in streamed and self._new_met(met, found):
                streamed.add(met.key or "")
                if self.hooks.on_found is not None:
                    self.hooks.on_found(result, met)

        while result.stopped != "device-memory":
            if not queue:
                new = self._met(found) if main else []
                if not new:
                    break
                hard_at = self.shrink_hard_at()
                if hard_at is not None and time.perf_counter() > hard_at:
                    # Confirming a bug the twin met is a launch here, a compile of its
                    # example's variant: past the hard limit it would run into the campaign's
                    # kill (an H200 slice of JAX's mha was killed tracing one). Left to the
                    # pair's next slices, whose search meets it on this backend or not.
                    result.events["met while shrinking, not confirmed: past the hard limit"] += len(
                        new
                    )
                    break
                key, seen = new[0]
                del result.met_while_shrinking[key]
                met = self._confirmed(seen)
                if met is None:
                    continue
                stream(met)
                found[key] = met
                queue.append(key)
            key = queue.pop(0)
            shrinking = self._shrinking()
            token = _MET.set((self.b.name, stream) if main else _MET.get())
            try:
                found[key] = self._shrink(key, found)
            finally:
                _MET.reset(token)
            shrinking()
            db_key = database_key(self.target.name, self.b.name)
            if database is not None and found[key].choices:
                database.save(db_key, choices_to_bytes(found[key].choices))
            if self.hooks.on_found is not None and found[key].final:
                self.name(found[key])  # (before the campaign records it)
                self.hooks.on_found(result, found[key])
        if main and self.b.interpret:
            self._in_own_space(found)
        if main:
            result.met_while_shrinking.clear()
        if not result.stopped:
            result.stopped = "examples"
        if result.stopped == "hard-limit" and main and not self.stage.start:
            for key, f in list(found.items()):
                if not f.final and f.choices:
                    found[key] = self._shrunk_past_the_limit(f)
        for f in found.values():
            dup = self.duplicate_of(f)
            if dup is None:
                self.settle(f)
                continue
            twin, how = dup
            result.known_hits[twin.signature] += 1
            mine = next((o for o in result.found.values() if o.signature == twin.signature), None)
            if mine is not None and twin.key != f.key:  # this hunt's bug, seen another way
                mine.seen_as.append(f)
            if how in ("influence", "dtype", "explained"):  # later examples the way f came: hits
                self.known_bugs.append(Bug(f.key, frozenset(f.triggers), twin.signature))
            result.duplicates.append(
                {
                    "round": self.round,
                    "bug_key": f.key,
                    "signature": bug_of(f).signature,
                    "twin": twin.signature,
                    "triggers": sorted(f.triggers),
                    "how": how,
                    "also": self.bridges(f, dup),
                }
            )
        result.seconds = time.perf_counter() - self.t0

    def _shrink(self, key: str, found: dict[str, Found]) -> Found:
        """Shrinks the round's bug ``key`` in the compiled shrink stages (``fuzz.shrink``)."""
        return self._shrink_by(shrink_compiled, key, found)

    def _shrink_by(self, how: Callable[..., Found], key: str, found: dict[str, Found]) -> Found:
        """``how`` (a shrink of ``fuzz.shrink``) of the round's bug ``key``, knowing the hunt's
        bugs and the round's others."""
        return how(
            self.target,
            self.b,
            self.options,
            found[key],
            hunt=hunt,
            into=self.result,
            hard_at=self.shrink_hard_at(),
            narrowing=self.narrowing,
            known_keys={b.key for b in self.known_bugs} | {k for k in found if k != key},
            known_bugs=self.known_bugs,
        )

    def _in_own_space(self, found: dict[str, Found]) -> None:
        """Each minimal example of this round, an interpreter's under a narrowing (a GPU host's
        interpreter pair), searched for again over the interpreter's whole variant space
        (:func:`fuzz.shrink.shrink_in_own_space`); a smaller one takes its place and is
        streamed again (the campaign's ledger keeps it in place of the first); not saved to the
        database, whose examples replay under the narrowing."""
        for key, f in list(found.items()):
            if not (f.final and f.key and self.narrowing):
                continue
            shrinking = self._shrinking()
            try:
                got = self._shrink_by(shrink_in_own_space, key, found)
            finally:
                shrinking()
            found[key] = self.minimal[key] = got
            if got.case.size >= f.case.size:
                continue
            if self.hooks.on_found is not None:
                self.hooks.on_found(self.result, got)

    def _met(self, found: dict[str, Found]) -> list[tuple[str, Found]]:
        """The bugs the shrink stages met that are new: not found by this round, not of a known
        class, not covered by a known bug."""
        return [
            (k, f) for k, f in self.result.met_while_shrinking.items() if self._new_met(f, found)
        ]

    def _confirmed(self, met: Found) -> Found | None:
        """A bug a shrink stage met, as this hunt's backend fails it: as it is where the stage
        ran here, else (a stage on the interpreter twin) its example checked here, None where
        that does not fail with its key (the twin's finding, not this backend's)."""
        if met.finding.details.get("met_on", self.b.name) == self.b.name:
            return met
        outcome = check_as(self.target, self.b, self.options, met, met.key)
        f = None if outcome is None else outcome.finding
        if outcome is None or f is None or bug_key(f) != met.key:
            return None
        holds = conditions(self.target, met.case, outcome.context.hazards)
        self._describe(f, met.key, holds, met.case.params.get("dtype"))
        f.details["met_on"] = met.finding.details.get("met_on")
        return dataclasses.replace(met, finding=f, params=outcome.params)

    def _new_met(self, f: Found, found: dict[str, Found]) -> bool:
        key = f.key or f.finding.cls
        return (
            key not in found
            and f.finding.cls not in self.known_classes
            and covering(self.known_bugs, key, set(f.triggers)) is None
        )

    def _shrinking(self) -> Callable[[], None]:
        """Starts timing a shrink stage; the function returned adds its seconds, compiling not
        counted, to the result's ``shrink_seconds`` (a campaign's floors count fuzzing, not
        shrinking: a GPU pair met its 30 s floor with 42 examples, most of it shrinking)."""
        t0, c0 = time.perf_counter(), self.result.stats.compile_seconds

        def done() -> None:
            spent = time.perf_counter() - t0 - (self.result.stats.compile_seconds - c0)
            self.result.shrink_seconds += max(0.0, spent)

        return done

    def resume(self, entry: Resume) -> bool:
        """Replays and shrinks ``entry`` (:class:`fuzz.signatures.Resume`), an unshrunk bug of a
        lost campaign slice, as the search shrinks what it finds, within the hunt's hard limit;
        hands the result to ``hooks.on_found`` (``Found.resumes``: the record it replaces).
        An entry of the compile ladder (``Resume.ladder``, a compile worker's slice) is shrunk
        on this backend through any variant, compiling what its steps need. Returns whether
        there was time to."""
        hard_at = self.shrink_hard_at()
        if hard_at is not None and time.perf_counter() >= hard_at:
            return False
        try:
            choices = decode_choices(entry.choices)
        except ValueError:
            self.result.events["resumed: choices unreadable"] += 1
            return True
        narrowing = dict(entry.narrowing) if entry.narrowing is not None else {}
        # The other bugs the slice knows: their examples are hits in this shrink (it must not
        # walk into one of the same key); the resumed bug's own record is among the known.
        others = [b for b in self.known_bugs if b.signature != entry.signature]
        seconds = float(self.options.shrink_seconds)
        if hard_at is not None:
            seconds = max(1.0, min(seconds, hard_at - time.perf_counter()))

        def staged(phases: tuple[Phase, ...]) -> HuntResult:
            return run_stage(
                hunt,
                self.target,
                self.b,
                self.options,
                start=choices,
                key=entry.key,
                seconds=seconds,
                narrowing=narrowing,
                into=self.result,
                phases=phases,
                known=tuple(others),
            )

        if entry.check:
            return self._check_resumed(entry, staged, others)
        shrinking = self._shrinking()
        try:
            # As the search's hand-off (replayed, then staged), but an entry of the compile
            # ladder, a compile worker's: shrunk here through new variants, each a compile.
            staged_here = entry.ladder or not hands_off(self.b, self.options)
            run = staged(SHRINK_PHASES if staged_here else (Phase.reuse,))
            got = run.of_key(entry.key)
            if got is not None and entry.ladder:
                # Its time ran out before its shrinking ended: another compile worker goes on
                # from this example (JAX's ``mha`` kept a row of 98,304 elements on an H200
                # after one compile worker's 21 examples and 32 compiles).
                cut = run.stopped in ("hard-limit", "time") or any(
                    n.startswith("shrinking cut") for n in got.shrink_notes
                )
                got = dataclasses.replace(
                    got,
                    shrink_path="compiled",
                    ladder=cut,
                    shrink_notes=[
                        *entry.notes,
                        f"{self.b.name}, any variant, on a compile worker: {run.examples} "
                        f"examples, {run.stats.compiles} compiles, {got.case.size} elements"
                        + (" (its time ran out: another goes on)" if cut else ""),
                    ],
                )
            elif got is not None and not staged_here:
                got = shrink_compiled(
                    self.target,
                    self.b,
                    self.options,
                    got,
                    hunt=hunt,
                    into=self.result,
                    hard_at=self.shrink_hard_at(),
                    narrowing=narrowing,
                    known_keys={b.key for b in self.known_bugs} - {entry.key},
                    known_bugs=others,
                )
        finally:
            shrinking()
        if got is None:
            self.result.events["resumed: did not fail so again"] += 1
            if not self._replay_twin(entry, run, others):
                self._resume_note(entry, run)
            return True
        self.result.events["resumed: shrunk"] += 1
        got = dataclasses.replace(got, resumes=entry.sighting)
        if self.hooks.on_found is not None:
            self.hooks.on_found(self.result, got)
        return True

    def _resume_note(self, entry: Resume, run: HuntResult | None) -> None:
        """Tells the campaign why the row ``entry`` stands for is left as it is: its example,
        replayed by this slice, did not fail so again (a GPU NaN of reads past the keys came
        and went between runs, and its row of 393,216 elements said only that its slice had
        ended)."""
        said = "passes" if run is None else what_it_said(run, entry.key.split("|", 1)[0], entry.key)
        why = (
            "passed: a failure that comes and goes between runs here"
            if said == "passes"
            else f"gave {said}"
        )
        self.result.resume_notes.append(
            {
                "resumes": entry.sighting,
                "note": f"not shrunk: a later slice replayed its example on {self.b.name} and it "
                f"{why}",
            }
        )

    def _replay_twin(self, entry: Resume, run: HuntResult, others: list[Bug]) -> bool:
        """Where ``entry``'s example, replayed, failed as a known bug (``others``) and not its own
        way, its row is that bug seen another way (its example fails so: the evidence there is
        that it is that bug, and none that it is another): a duplicate the campaign takes into
        that bug's row, its reproducer kept beside it. A GPU campaign's planted jagged kernel
        kept an accuracy row of 3,239 elements beside its out-of-bounds row: each replay of its
        example was a hit of the out-of-bounds bug (the kernel's race). Returns whether it
        did."""
        known = {b.signature for b in others}
        hits = [(n, s) for s, n in run.known_hits.items() if s in known]
        if not hits:
            return False
        twin = max(hits)[1]
        self.result.known_hits[twin] += 1
        self.result.duplicates.append(
            {
                "round": self.round,
                "bug_key": entry.key,
                "signature": entry.signature or "",
                "twin": twin,
                "triggers": [],
                "how": "replay",
                "resumes": entry.sighting,
            }
        )
        return True

    def _check_resumed(
        self,
        entry: Resume,
        staged: Callable[[tuple[Phase, ...]], HuntResult],
        others: list[Bug],
    ) -> bool:
        """Checks ``entry``, a bug's minimal example whose check against the bugs found before
        its slice's hard limit cut (``Resume.check``), against the bugs this slice knows but
        its own (``others``): its replay is a known bug seen another way (a duplicate of the
        sighting, which the campaign takes into that bug) or streamed again, checked. (A
        planted GLA kernel's one bug stayed two rows on an H200, the second's check cut.)"""
        shrinking = self._shrinking()
        run = None
        try:
            if entry.example:  # a row checked again: its minimal example read back
                got = self._read_back(entry)
            else:
                run = staged((Phase.reuse,))
                got = run.of_key(entry.key)
            twin = None
            if got is not None:
                got = dataclasses.replace(got, final=True, shrink_notes=list(entry.notes))
                twin = self.duplicate_of(got, known=others)
        finally:
            shrinking()
        if entry.example and (got is None or twin is None):
            said = "did not fail so again" if got is None else "a bug of its own"
            self.result.events[f"checked again: {said}"] += 1
            return True
        if got is None:
            assert run is not None  # (a row checked again has returned above)
            self.result.events["resumed check: did not fail so again"] += 1
            if not self._replay_twin(entry, run, others):
                self._resume_note(entry, run)
            return True
        if got.finding.details.get("unchecked"):  # (cut again: left as it is)
            self.result.events["resumed check: cut again"] += 1
            return True
        if twin is None:
            self.result.events["resumed check: a bug of its own"] += 1
            got.shrink_notes = [
                n for n in got.shrink_notes if not n.startswith("not checked against the bugs")
            ] + ["checked against the bugs found before by a later slice: a bug of its own"]
            if self.hooks.on_found is not None:
                self.hooks.on_found(self.result, dataclasses.replace(got, resumes=entry.sighting))
            return True
        bug, how = twin
        self.result.events["resumed check: a known bug seen another way"] += 1
        self.result.known_hits[bug.signature] += 1
        self.result.duplicates.append(
            {
                "round": self.round,
                "bug_key": got.key,
                "signature": bug_of(got).signature,
                "twin": bug.signature,
                "triggers": sorted(got.triggers),
                "how": how,
                "resumes": entry.sighting,
                "recheck": bool(entry.example),
                "also": self.bridges(got, twin),
            }
        )
        return True

    def _read_back(self, entry: Resume) -> Found | None:
        """The minimal example of the row ``entry`` checks again, read back from its reproducer
        and checked on this backend: its finding, where it fails its row's way (None: it does
        not, or cannot be read or run here)."""
        try:
            meta, data = reproducer.load(entry.example)
            case = reproducer.recorded_case(meta, data)
            params = reproducer.recorded_params(meta)
            outcome = check_case(
                self.target,
                self.b,
                case,
                params=params,
                **self.options.check_kwargs(),
                prefer=entry.key,
            )
        except Exception:  # (evidence: never the hunt's error)
            return None
        f = outcome.finding
        if f is None or bug_key(f) != entry.key:
            return None
        holds = conditions(self.target, case, outcome.context.hazards)
        self._describe(f, entry.key, holds, case.params.get("dtype"))
        f.details["signature"] = entry.signature or f.details["signature"]
        return Found(f, case, dict(outcome.params), 0, 0.0, final=True, choices=(1,), key=entry.key)

    def _isolated_seconds(self, found: Found) -> float:
        """Seconds to shrink ``found``, a crash that lost the process's context, in child
        processes (``fuzz.isolated``): the shrink time of one failure, within the hard limit;
        0 where it cannot be (a child itself, too little time, no choices to start from)."""
        if known_crashes.active() or not found.choices or self.stage.only is not None:
            return 0.0
        if found.finding.cls != CRASH:  # (a flaky one: its known replay would not be flaky)
            return 0.0
        seconds = float(self.options.shrink_seconds)
        hard_at = self.shrink_hard_at()
        if hard_at is not None:
            seconds = min(seconds, hard_at - time.perf_counter() - isolated.MIN_SECONDS)
        return seconds if seconds >= 2 * isolated.MIN_SECONDS else 0.0

    def _shrink_isolated(self, found: Found, seconds: float) -> Found:
        """``found`` shrunk in child processes for at most ``seconds`` (``fuzz.isolated``), with
        a note of what it took."""
        start = found.case.size
        got = isolated.shrink(
            self.target, self.b, self.options, found, narrowing=self.narrowing, seconds=seconds
        )
        said = [n for n in (got.alone_note(str(found.key)), got.twin_note()) if n]
        best = dataclasses.replace(
            got.found,
            first_example=found.first_example,
            first_seconds=found.first_seconds,
            minimal_seconds=time.perf_counter() - self.t0,
            final=True,
            isolating=False,
            shrink_notes=[*found.shrink_notes, got.note(start), *said],
            shrink_path="isolated" if got.found is not found else found.shrink_path,
        )
        if got.twin is not None:
            best.finding.details["twin"] = got.twin
        if got.alone is not None:
            details = best.finding.details
            details["alone"] = got.alone
            if got.alone and found.key not in got.alone:
                # Alone it failed another way: an example whose runs differ (a crash here, that
                # way there), joined to that way's row where there is one (``fuzz.ledger``).
                details["run_keys"] = sorted({str(found.key), *got.alone})
        self.result.shrink_examples += got.examples
        self.result.events["shrink: child processes"] += got.children
        return best

    def shrink_hard_at(self) -> float | None:
        """``time.perf_counter()`` at which the hard limit ends a shrink stage run now (the
        limit counts fuzzing: the compiling so far moves it on)."""
        return None if self.hard_at is None else self.hard_at + self.result.stats.compile_seconds

    def duplicate_of(self, f: Found, known: list[Bug] | None = None) -> tuple[Bug, str] | None:
        """The known bug that new bug ``f`` is after all, and how that was told, or None
        (:meth:`fuzz.duplicates.Duplicates.of`); None for a shrink stage's own result.
        ``known``: the bugs to check it against (default: those the hunt knows). A check cut
        at the hard limit marks ``f`` unchecked (``details["unchecked"]``): a later slice of a
        campaign checks it (:meth:`resume`)."""
        if self.stage.only is not None or self.stage.start:
            return None
        duplicates = self._duplicates(known)
        cut = duplicates.cut
        twin = duplicates.of(f)
        if duplicates.cut > cut:
            self.result.events["duplicate check cut at the hard limit"] += 1
            f.finding.details["unchecked"] = True
            f.shrink_notes.append(
                "not checked against the bugs found before past the hunt's hard limit: it may "
                "be one of them seen another way"
            )
        return twin

    def bridges(self, f: Found, twin: tuple[Bug, str]) -> list[str]:
        """The signatures of the other rows that ``f``, a duplicate of ``twin`` by
        :meth:`duplicate_of`'s check (run just before, against the same bugs), is as well
        (:meth:`fuzz.duplicates.Duplicates.bridges`): the campaign joins them into one row."""
        if self.duplicates is None:
            return []
        return sorted({b.signature for b in self.duplicates.bridges(f, twin)})

    def name(self, f: Found) -> None:
        """What ``f``'s kernel computed instead, on its finding where a hypothesis of
        :mod:`fuzz.explain` holds (:meth:`fuzz.duplicates.Duplicates.name`), before a campaign
        records it: a hunt's first bug, never checked against another, was reported unnamed.
        Nothing for a shrink stage's own result."""
        if self.stage.only is None and not self.stage.start:
            self._duplicates(None).name(f)

    def _duplicates(self, known: list[Bug] | None) -> Duplicates:
        """The hunt's duplicate check, told the bugs found so far (``known``: those to check
        against; default: those the hunt knows) and its deadline."""
        if self.duplicates is None:
            self.duplicates = Duplicates(self.target, self.b, self.options, found={}, known_bugs=[])
        self.duplicates.found = self.result.found
        self.duplicates.known_bugs = self.known_bugs if known is None else known
        # Past the time given to settle the hunt's bugs, DUPLICATE_SECONDS of the 30 s the
        # campaign gives a slice before it kills it (``pool.overran``), the rest its summary's.
        self.duplicates.clock = time.perf_counter
        self.duplicates.deadline = duplicate_deadline(self.settle_at, self.shrink_hard_at())
        return self.duplicates

    def _shrink_again(self, f: Found) -> Found | None:
        """``f`` shrunk once more on its own key (:func:`fuzz.shrink.shrink_again`), its seconds
        counted as shrinking; past the hunt's
        hard limit, within the time given to settle its bugs (``settle_at``)."""
        shrinking = self._shrinking()
        shrunk = shrink_again(
            self.target,
            self.b,
            self.options,
            f,
            hunt=hunt,
            into=self.result,
            hard_at=self.shrink_hard_at() if self.settle_at is None else self.settle_at,
            narrowing=self.narrowing,
            known_bugs=self.known_bugs,
        )
        shrinking()
        return shrunk

    def _shrunk_past_the_limit(self, f: Found) -> Found:
        """``f``, a bug whose shrinking the hunt's hard limit cut, shrunk once more in the time
        given past the limit to settle the hunt's bugs (``SETTLE_SECONDS`` for them all, then
        the duplicate check's own shrinking has what is left): a record that reaches the
        campaign unshrunk, of a key a shrunk bug has, stays undecided there ("not shrunk; maybe
        a bug found before": 2 of 52 rows of a GPU campaign). Noted on the finding either way."""
        if self.settle_at is None:
            limit = self.shrink_hard_at() or 0.0
            self.settle_at = max(time.perf_counter(), limit) + SETTLE_SECONDS
        shrunk = self._shrink_again(f)
        if shrunk is None or not shrunk.final or shrunk.key != f.key:
            f.shrink_notes.append(
                "not shrunk: the slice's hard limit cut its shrinking, and shrinking it again in "
                f"the {SETTLE_SECONDS:g} s given past the limit did not end"
            )
            return f
        shrunk.finding.details["round"] = self.round  # still the bug the search saw
        return dataclasses.replace(
            shrunk,
            first_example=f.first_example,
            first_seconds=f.first_seconds,
            minimal_seconds=time.perf_counter() - self.t0,
            shrink_notes=[
                *f.shrink_notes,
                "the slice's hard limit cut its shrinking; shrunk again in the time given past "
                "the limit to settle it",
            ],
        )

    def settle(self, f: Found) -> None:
        """Adds bug ``f`` to the result, or in place of an earlier one it is the same bug as
        (``fuzz.signatures.same_bug``: the one with fewer triggers is kept)."""
        result = self.result
        bug = bug_of(f)
        for label, old in list(result.found.items()):
            if same_bug(bug, bug_of(old)):
                if len(bug.triggers) < len(old.triggers):
                    result.found[label] = f
                    self.known_bugs = [b for b in self.known_bugs if b != bug_of(old)]
                    self.known_bugs.append(bug)
                return
        mine = self.labels.get(f.key)
        if mine is not None and mine not in result.found:
            label = mine
        else:
            n = len(result.of_class(f.finding.cls))
            label = f.finding.cls if n == 0 else f"{f.finding.cls}@{n + 1}"
            while label in result.found:
                n += 1
                label = f"{f.finding.cls}@{n + 1}"
            self.labels[f.key] = label
        result.found[label] = f
        self.known_bugs.append(bug)

    def next_round(self) -> None:
        """Forgets the round's own bookkeeping; what it found is known from now on."""
        self.first.clear()
        self.last_seen.clear()
        self.minimal.clear()
        self.handed_off.clear()
        self.exhausted = False
        self.stage = self.search_stage
        self.round += 1
        if self.result.stopped == "examples":
            self.result.stopped = ""

    def found(self) -> dict[str, Found]:
        return {**self.last_seen, **self.minimal}


# The watched hunt (Hooks.watches) running in this context: the shrink stages it runs as hunts of
# their own report their examples to its hooks.
_OUTER: contextvars.ContextVar[_Hunter | None] = contextvars.ContextVar("outer_hunt", default=None)
_IN_STAGE: contextvars.ContextVar[bool] = contextvars.ContextVar("in_stage", default=False)

# While a hunt shrinks one of its bugs: its backend, and what a shrink stage's run on that
# backend calls with another bug it meets (the hunt streams it as first seen: the stage may be
# cut before it ends). A stage on the interpreter twin is another backend's finding, and its
# own-space search another strategy's: what it meets is not the hunt's.
_MET: contextvars.ContextVar[tuple[str, Callable[[Found], None]] | None] = contextvars.ContextVar(
    "kernel_fuzz_met_while_shrinking", default=None
)


def _settle_seed(
    target: Target,
    b: Backend,
    options: HuntOptions,
    seed: int | None,
    max_examples: int,
    database: Any,
) -> int | None:
    """The seed of a hunt: ``seed``, or for a derandomized profile one stable across harness
    versions (Hypothesis derives it from the test function's source, which here is the harness's
    own run_one: every edit of it would change what every CI run tries)."""
    if seed is not None:
        return seed
    o: dict[str, Any] = {"max_examples": max_examples}
    if database != "profile":
        o["database"] = database
    if settings(options.settings, **o).derandomize:
        return derandomized_seed(target.name, b.name)
    return None


def _check_spent(spent: Any) -> tuple[float, float, float]:
    ok = (
        isinstance(spent, (tuple, list))
        and len(spent) in (2, 3)
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in spent)
    )
    if not ok:
        raise ValueError(
            f"compile_spent={spent!r} must be (compile seconds, seconds[, seconds per compile]): "
            "numbers >= 0"
        )
    return float(spent[0]), float(spent[1]), float(spent[2]) if len(spent) == 3 else 0.0


def context_lost() -> str | None:
    """What lost this process's CUDA context (a sticky CUDA error an example met), or None. A
    campaign's worker that finds it lost after a slice takes no other (``fuzz.campaign.worker``):
    where no streamed finding of the slice ended it (a replay while shrinking, a compile
    worker's warm-up), an H200 compile worker warmed up two more pairs, each a harness error."""
    return _context_lost[0] if _context_lost else None


def _refusal(target: Target, b: Backend, options: HuntOptions) -> str | None:
    """Why a hunt of ``target`` on ``b`` cannot run here (None if it can)."""
    reason = b.unavailable_reason()
    if reason is not None:
        return f"backend {b.name} is not available: {reason}"
    unsupported = target.unsupported(b)
    if unsupported is not None:
        return f"target {target.name} does not run on {b.name}: {unsupported}"
    if _context_lost and (not b.interpret or options.ref_device == "cuda"):
        return (
            f"this process lost its CUDA context earlier ({_context_lost[0]}): nothing can run "
            "on the GPU here any more; run this hunt in a fresh process"
        )
    return None


def hunt(
    target: Target,
    backend: Backend | str,
    profile: Profile | HuntOptions,
    *,
    max_examples: int | None = None,
    seed: int | None = None,
    database: ExampleDatabase | str | None = "profile",
    repro_dir: str | Path | None = None,
    time_limit: float | None = None,
    hard_limit: float | None = None,
    min_examples: int = 1,
    known: Collection[str | Bug] = (),
    reuse: bool = True,
    on_example: Callable[[HuntResult], None] | None = None,
    hooks: Hooks | None = None,
    stage: Stage | None = None,
    narrowing: dict[str, tuple[Any, ...]] | None = None,
    stop_when: Callable[[HuntResult], bool] | None = None,
    memo: StructureMemo | None = None,
    compile_spent: tuple[float, ...] = (0.0, 0.0),
    resume: Sequence[Resume] = (),
) -> HuntResult:
    """Fuzzes ``target`` on ``backend`` under ``profile``; returns the minimal example of each
    distinct bug (failure signature, ``fuzz.signatures``) it found.

    Args:
        profile: a :class:`fuzz.profiles.Profile`, or :class:`fuzz.profiles.HuntOptions` (a
            profile with a front end's overrides).
        max_examples: overrides the profile's example count (0: only ``resume``, no search).
        seed: a fixed seed (the run is then not derandomized by the profile).
        database: a Hypothesis example database, None for none (nothing persists; failures are
            kept in memory for the hunt's own use), ``'profile'`` for the profile's. Failing
            examples are saved under :func:`database_key`; the hunt starts by replaying what the
            database holds for this target and backend (unless ``reuse`` is False). A failure
            that does not replay (a race) stops Hypothesis's shrinking; the hunt then shrinks
            on from the smallest failing example saved, up to ``FLAKY_RESHRINKS`` times.
        repro_dir: where to write reproducer scripts (None: do not write them).
        time_limit: seconds after which no new examples are generated (shrinking of a failure
            already found still completes), once ``min_examples`` have run. Until then the hunt
            goes on after a finding: Hypothesis stops generating soon after it finds a bug, so
            the hunt starts it again (a new seed, the bugs found so far known) until the time or
            ``max_examples`` are spent or Hypothesis says the search space is exhausted.
        hard_limit: seconds after which the hunt stops whatever it is doing, shrinking included;
            a failure being shrunk is kept as the best example so far.
        known: bugs already found and shrunk (``fuzz.signatures.Bug``, by an earlier slice of a
            campaign), or whole failure classes: an example failing as one of them counts as a hit
            (``HuntResult.known_hits``) and is not shrunk again, so the hunt goes on looking for
            new bugs. A failure the target's library declares (``Library.known_failures``) is
            counted (``HuntResult.declared_hits``) and never reported as a bug.
        reuse: replay the database first (a campaign's later slices skip it).
        on_example: called after every example (progress display); hooks: a campaign's (Hooks).
        stage: a shrink stage (:class:`Stage`; ``fuzz.shrink`` runs them). None: the search.
        narrowing: the compile-time choices to draw from (strategy keywords, e.g.
            ``{"dtypes": ("float32",)}``); None: picked for this run by the profile
            (:func:`run_narrowing`). A shrink stage replays with its search's.
        stop_when: ends a hunt with a time limit after the round in which it holds (the
            scoreboard stops at its mutant's class; a campaign hunts on for more bugs).
        memo: the case structures to reuse (``strategies.reuse.StructureMemo``), where the
            profile reuses them (``Profile.reuse_share``); None: a new one for this hunt. Pass
            the same memo to the hunts of one target and backend that a process runs: it keeps
            the structures they launched and what compiling them cost.
        resume: bugs earlier campaign slices left unshrunk, shrunk first (``_Hunter.resume``).
        compile_spent: (compile seconds, seconds) of earlier hunts of the same target and backend
            (a campaign's slices), and optionally the seconds one compile of its kernels is
            expected to take (else measured by this hunt): ``Profile.compile_share`` bounds the
            compile time of them and this hunt together, refusing a compile past that bound.

    On a compiled backend whose profile shrinks in the interpreter (``Profile.interpreter_shrink``)
    a new failure ends the search unshrunk and is shrunk by :func:`fuzz.shrink.shrink_compiled`:
    in the interpreter of the same kernel source where it reproduces there, else on the compiled
    backend stepping through compiled kernel variants first.
    """
    options = HuntOptions.of(profile)
    memo = _structure_memo(options, memo)
    b = get_backend(backend) if isinstance(backend, str) else backend
    result = HuntResult(target.name, b.name, target.mutant_of, target.expected_class)
    result.error = _refusal(target, b, options)
    if result.error is not None:
        return result
    hunter = _Hunter(
        target,
        b,
        options,
        result=result,
        hooks=hooks or Hooks(),
        known=frozenset(known),
        time_limit=time_limit,
        hard_limit=hard_limit,
        min_examples=min_examples,
        on_example=on_example,
        stage=stage or Stage(hand_off=hands_off(b, options)),
        memo=memo,
        compile_spent=_check_spent(compile_spent),
    )
    with _stages_heard(hunter, hooks, stage):
        all(hunter.resume(entry) for entry in resume)  # (until the hard limit)
        _search(
            hunter,
            max_examples=options.max_examples if max_examples is None else max_examples,
            seed=seed,
            database=database,
            narrowing=narrowing,
            reuse=reuse,
            rounds=time_limit is not None and stage is None,
            stop_when=stop_when,
        )
    if repro_dir is not None:
        _write_reproducers(result, repro_dir, target, b.name, options)
    return result


@contextlib.contextmanager
def _stages_heard(hunter: _Hunter, hooks: Hooks | None, stage: Stage | None) -> Iterator[None]:
    """Inside it, ``hunter``'s examples reach the hooks of the watched hunt it is a shrink stage
    of (``Hooks.progress``), or, where it is watched itself, the stages it runs reach its own."""
    outer = _OUTER.get()
    staged = None
    if hooks is None and stage is not None and outer is not None:
        hunter.outer = outer
        staged = _IN_STAGE.set(True)
    token = _OUTER.set(hunter) if hooks is not None and hooks.watches() else None
    try:
        yield
    finally:
        if token is not None:
            _OUTER.reset(token)
        if staged is not None:
            _IN_STAGE.reset(staged)


def in_stage() -> bool:
    """Whether the example about to run is a shrink stage's of a watched hunt (its hooks'
    ``before_example`` runs for it): a warm-up slice that has compiled enough ends its search,
    not the shrinking of what it found."""
    return _IN_STAGE.get()


def _write_reproducers(
    result: HuntResult, repro_dir: str | Path, target: Target, backend: str, options: HuntOptions
) -> None:
    """A reproducer for each bug of ``result``, and for each way it was also seen (its own
    minimal example)."""
    for f in result.found.values():
        f.reproducer = write_reproducer(repro_dir, target, backend, f, options)
        for seen in f.seen_as:
            seen.reproducer = write_reproducer(repro_dir, target, backend, seen, options)


def _structure_memo(options: HuntOptions, memo: StructureMemo | None) -> StructureMemo | None:
    """The case structures a hunt reuses (see :func:`hunt`): ``memo``, or a new one where the
    profile reuses structures; a memo for a profile that does not is refused."""
    if memo is not None and options.reuse_share is None:
        raise ValueError(
            "memo= needs a profile that reuses case structures (Profile.reuse_share set): "
            "with a memo, a choice sequence draws another case than without one"
        )
    if memo is None and options.reuse_share is not None:
        memo = StructureMemo(target_share=options.reuse_share)
    return memo


def _search(
    hunter: _Hunter,
    *,
    max_examples: int,
    seed: int | None,
    database: ExampleDatabase | str | None,
    narrowing: dict[str, tuple[Any, ...]] | None,
    reuse: bool,
    rounds: bool,
    stop_when: Callable[[HuntResult], bool] | None,
) -> None:
    """Runs the hunt set up in ``hunter`` (the arguments are :func:`hunt`'s): settles its seed
    (:func:`_settle_seed`), its narrowing (:func:`run_narrowing`, unless given) and its example
    database (:func:`_example_database`), runs its rounds (:func:`_run_rounds`), and counts in
    its result's events how its case structures were drawn."""
    target, b, options, memo = hunter.target, hunter.b, hunter.options, hunter.memo
    if max_examples == 0:  # (only what it resumed)
        hunter.result.stopped = "resumed"
        return
    seed = _settle_seed(target, b, options, seed, max_examples, database)
    hunter.narrow(run_narrowing(target, options, seed) if narrowing is None else narrowing)
    db = _example_database(target, b, options, database, hunter.stage)
    drawn_before = dict(memo.counts) if memo is not None else {}
    _run_rounds(
        hunter,
        max_examples=max_examples,
        database=db,
        seed=seed,
        reuse=reuse,
        rounds=rounds,
        stop_when=stop_when,
    )
    if memo is not None:
        _count_structures(hunter.result, memo, drawn_before)


def _run_rounds(
    hunter: _Hunter,
    *,
    max_examples: int,
    database: ExampleDatabase | None,
    seed: int | None,
    reuse: bool,
    rounds: bool,
    stop_when: Callable[[HuntResult], bool] | None,
) -> None:
    """Runs a hunt's search and concludes it. With ``rounds`` (a hunt with a time limit, not a
    shrink stage), a round that ended at a bug is followed by another (a new seed, the bugs
    found so far known) until the ``max_examples`` are spent, a round runs none, ``stop_when``
    holds or a round ends otherwise (its time, the search space exhausted, an error)."""
    result = hunter.result
    for round_ in itertools.count():
        before = result.examples
        hunter.search(
            max_examples=max_examples - result.examples,
            database=database,
            seed=None if seed is None else seed + 7919 * round_,
            phases=_phases(hunter.options, hunter.stage, reuse and round_ == 0),
        )
        hunter.conclude(database)
        if hunter.exhausted:
            result.stopped = "exhausted"
        if not rounds or result.stopped != "examples" or result.error is not None:
            break
        if result.examples >= max_examples or result.examples == before:
            break  # its examples are spent, or the round could run none
        if stop_when is not None and stop_when(result):
            break
        hunter.next_round()


def _count_structures(result: HuntResult, memo: StructureMemo, before: dict[str, int]) -> None:
    """Adds to ``result``'s events how the hunt's structures were drawn (reuse at work, or not):
    ``memo``'s counts since ``before``."""
    for k in ("explored", "reused", "fresh", "replayed", "stale", "unextended"):
        n = memo.counts.get(k, 0) - before.get(k, 0)
        if n:
            result.events[f"structures {k}"] += n


def _example_database(
    target: Target, b: Backend, options: HuntOptions, database: Any, stage: Stage
) -> ExampleDatabase | None:
    """The example database of a hunt (see :func:`hunt`): a shrink stage's examples come from an
    in-memory database holding its ``start`` (Hypothesis's secondary corpus: an example replayed
    exactly from the primary one is taken as shrunk already, and not shrunk again); without a
    database, failures are kept in memory, for re-shrinking a flaky one."""
    if stage.start:
        db = InMemoryExampleDatabase()
        for choices in stage.start:
            db.save(database_key(target.name, b.name) + b".secondary", choices_to_bytes(choices))
        return db
    if database is None:
        return InMemoryExampleDatabase()
    return options.settings.database if isinstance(database, str) else database


def _phases(options: HuntOptions, stage: Stage, reuse: bool) -> tuple[Phase, ...] | None:
    """The Hypothesis phases of a hunt: the stage's; else the profile's, without replaying the
    database unless ``reuse`` (None: the profile's own)."""
    if stage.phases is None and not reuse:
        return tuple(p for p in options.settings.phases if p is not Phase.reuse)
    return stage.phases


def write_reproducer(
    repro_dir: str | Path, target: Target, backend: str, found: Found, options: HuntOptions
) -> Path:
    """Writes the reproducer script of ``found`` (atomically) and returns its path; and that of
    its smaller example in the twin interpreter, where it has one (``Found.interpreted``), into
    ``found.interpreted.reproducer``."""
    small = found.interpreted
    if small is not None and found.interpreted_on:
        small.reproducer = reproducer.write(
            repro_dir,
            target=target,
            backend=found.interpreted_on,
            case=small.case,
            params=small.params,
            finding=small.finding,
            **dataclasses.replace(options, differential=False).check_kwargs(),
        )
    return reproducer.write(
        repro_dir,
        target=target,
        backend=backend,
        case=found.case,
        params=found.params,
        finding=found.finding,
        **options.check_kwargs(),
    )


def check(
    target: Target,
    backend: Backend | str,
    profile: Profile,
    *,
    repro_dir: str | Path | None = None,
    **kw: Any,
) -> HuntResult:
    """Like :func:`hunt`, but raises ``AssertionError`` with a readable summary on any failure."""
    result = hunt(target, backend, profile, repro_dir=repro_dir, **kw)
    if result.error is not None:
        raise AssertionError(f"{target.name} on {result.backend}: harness error: {result.error}")
    if result.found:
        lines = [f"{target.name} on {result.backend}: {len(result.found)} failure class(es)"]
        for f in result.found.values():
            lines.append(f"  {f.finding.summary()}")
            lines.append(f"    minimal case: {f.case!r}"[:600])
            if f.finding.hazards:
                lines.append(f"    hazards: {'; '.join(f.finding.hazards)}")
            if f.reproducer:
                lines.append(f"    reproducer: {f.reproducer}")
        raise AssertionError("\n".join(lines))
    return result
