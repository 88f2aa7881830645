"""Shrinking a compiled backend's finding where shrinking is cheap.

On a GPU every kernel variant a shrink step tries (a dtype, a tile size, a head dim, a shape
bucket) is a compile of seconds, and Hypothesis's shrinker tries hundreds: shrinking in place left
GPU reproducers of millions of elements, cut at the time limit. So a compiled backend's search
hands a new failure over unshrunk (:attr:`Stage.hand_off`), and :func:`shrink_compiled`
shrinks it in stages, each a Hypothesis run that replays the failing example and shrinks it::

    cut          the case is costly for an interpreter (``Search.cost`` above
                 ``Profile.interpreter_max_cost``): shrink on the compiled backend through kernel
                 variants compiled already until it is not; then through new variants while
                 the twin still would not take it (a faster twin takes costlier cases:
                 ``Backend.cost_speedup``)
    interpreter  the same kernel source in its interpreter (the backend's twin, on the GPU host
                 too): if the case fails there with the same class, shrink it there, where a new
                 variant costs no compile
    confirm      the interpreter's minimal case on the compiled backend, same class: the
                 reproducer is written for the backend that found it
    own space    where the search was narrowed (a GPU pair's few tiles and head dims) and the
                 confirmed case is still over ``SMALL_ENOUGH`` elements: the twin searches its
                 whole variant space for the same bug afresh, as the CPU profile does; a
                 smaller example confirmed on the compiled backend replaces the case, one it
                 does not run is kept beside it with the interpreter's reproducer
    compiled     otherwise (races, TF32 or fast exp, compiled-only divergence, illegal addresses,
                 or the minimal case did not confirm): shrink on the compiled backend, through
                 compiled variants first, then any, within what is left of the time; in a
                 campaign with compile workers the second step is theirs (the compile ladder:
                 ``Found.ladder``, resumed by a compile worker's slice with compiles allowed,
                 off the fuzzing path)

The finding records the path taken and what each stage said (``Found.shrink_path``,
``Found.shrink_notes``). Each stage is a run of :func:`fuzz.engine.hunt` with a :class:`Stage`;
the engine hands its ``hunt`` to :func:`shrink_compiled`, which runs them.
"""

from __future__ import annotations

import dataclasses
import time
import zlib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hypothesis import Phase

from fuzz.backends import Backend, get_backend
from fuzz.case import Case
from fuzz.failures import CLASSES, Unsupported
from fuzz.profiles import HuntOptions
from fuzz.properties import TF32_HINT, check_case
from fuzz.results import Found, HuntResult

if TYPE_CHECKING:
    from fuzz.signatures import Bug
    from fuzz.target import Target


@dataclass(frozen=True)
class Stage:
    """What one Hypothesis run of a hunt does: the search (the default), or a shrink stage that
    replays given examples and shrinks them.

    Attributes:
        start: choice sequences (``Found.choices``) replayed first; with ``phases`` limited to
            reuse and shrink, the run shrinks them and generates nothing.
        phases: Hypothesis phases (None: the profile's).
        only_compiled: examples whose launch would compile a kernel variant not compiled yet are
            rejected before the compiler runs (``fuzz.timing.no_new_compiles``).
        goal: the stage ends once a failing example meets ``goal(case)``, kept as it is.
        hand_off: a new failure class ends the run unshrunk (``_HandOff``).
        shrink_seconds: Hypothesis's cap on shrinking one failure (None: the profile's).
        only: the bug key (``fuzz.signatures.bug_key``) a shrink stage shrinks; failures of other
            keys count as hits (None: every key).
        past_first: with ``only``, an example's check goes on past a failure of another key
            (an earlier property's) for a failure of ``only`` (a fresh search for one bug, where
            a small case fails the oracle before the metamorphic property a large one failed
            alone); the finding says what the case failed first (``fails_first``).
    """

    start: tuple[tuple[Any, ...], ...] = ()
    phases: tuple[Phase, ...] | None = None
    only_compiled: bool = False
    goal: Callable[[Case], bool] | None = None
    hand_off: bool = False
    shrink_seconds: float | None = None
    only: str | None = None
    past_first: bool = False


SHRINK_PHASES = (Phase.reuse, Phase.shrink)
# A minimal case of at most this many elements (one row at the smallest GPU head dim) is small
# enough: no further search for a smaller one in the twin's own space (``_Shrinker.in_own_space``).
SMALL_ENOUGH = 64
# Further searches of the twin's own space, each of a seed of its own, after a first that did not
# meet the bug (as the test suite's mutant proofs hunt again).
OWN_SPACE_RETRIES = 2


def hands_off(backend: Backend, options: HuntOptions) -> bool:
    """Whether a search on ``backend`` hands its failures to :func:`shrink_compiled`."""
    return options.interpreter_shrink and not backend.interpret


def _twin(backend: Backend) -> Backend | None:
    """The interpreter of the backend's kernel source, if it runs here."""
    if backend.twin is None:
        return None
    try:
        twin = get_backend(backend.twin)
    except ValueError:
        return None
    return twin if twin.interpret and twin.available else None


def tf32_ruled_out(found: Found, twin: str) -> Found:
    """``found`` without its TF32 hint (``fuzz.properties.TF32_HINT``), where its failure
    reproduced on ``twin``, an interpreter whose fp32 dot products are exact: TF32 operands are
    not its cause, and the message says so. A planted GLA kernel's key decay, off by one gate
    (0.4% for a gate of -1/256), was within the TF32 bound on an H200 and its row told the
    maintainer to declare TF32, though Triton's interpreter failed it alike."""
    f = found.finding
    if f.details.get("likely_cause") != "tf32":
        return found
    details = {k: v for k, v in f.details.items() if k != "likely_cause"}
    details["tf32_ruled_out"] = twin
    message = (
        f.message.replace(TF32_HINT, "")
        + f"; within the bound of TF32 dot operands, but it fails alike on {twin}, whose fp32 "
        "dot products are exact: TF32 is not its cause"
    )
    return dataclasses.replace(
        found, finding=dataclasses.replace(f, message=message, details=details)
    )


def what_it_said(run: HuntResult, cls: str, key: str = "") -> str:
    """What a stage's backend said about the example (for the notes)."""
    if run.error is not None:
        return f"error: {run.error[:200]}"
    if run.of_key(key) is not None or (not key and cls in run.classes):
        return f"{cls} (reproduced)"
    other = sorted(run.known_hits)
    return f"{', '.join(other)} instead of {cls}" if other else "passes"


def _confirm(target: Target, backend: Backend, options: HuntOptions, small: Found) -> Found | None:
    """``small`` (shrunk elsewhere) checked on ``backend``: the finding there if its class is the
    same, else None (also where the backend's kernel declines the case: a tile or head dim the
    compiled kernel does not take)."""
    try:
        outcome = check_case(
            target,
            backend,
            small.case,
            params=small.params,
            **options.check_kwargs(),
            prefer=small.key or small.finding.cls,  # its bug's property, where it fails too
        )
    except Unsupported:
        return None
    f = outcome.finding
    if f is None or f.cls != small.finding.cls:
        return None
    for k in ("signature", "bug_key", "triggers", "dtype"):
        if k in small.finding.details:
            f.details[k] = small.finding.details[k]
    return dataclasses.replace(small, finding=f, params=outcome.params, final=True)


def shrink_compiled(
    target: Target,
    backend: Backend,
    options: HuntOptions,
    found: Found,
    *,
    hunt: Callable[..., HuntResult],
    into: HuntResult,
    hard_at: float | None,
    narrowing: dict[str, Any],
    known_keys: Collection[str] = (),
    known_bugs: Collection[Bug] = (),
) -> Found:
    """Shrinks ``found`` (a failure ``backend``, a compiled backend, found and handed over
    unshrunk) in the stages of the module docstring, within ``options.shrink_seconds``.

    Args:
        hunt: runs one stage (:func:`fuzz.engine.hunt`).
        into: the search's result, which counts the stages' examples, launches and events.
        hard_at: ``time.perf_counter()`` at which the search's hard limit ends shrinking too.
        narrowing: the search's compile-time choices: its examples replay under no other.
        known_keys: the keys of the bugs the search knows: a small case of the own-space
            search that fails one of them first is that bug's example, not this one's.
        known_bugs: the bugs the search knows (``fuzz.signatures.Bug``): in every stage an
            example of one is its hit, not a failure of ``found``'s key, so that shrinking
            cannot walk from ``found`` into a known bug of the same key (two bugs of one class
            and output, independent triggers, became one row on an H200).
    """
    s = _Shrinker(
        target,
        backend,
        options,
        found,
        hunt=hunt,
        into=into,
        hard_at=hard_at,
        narrowing=narrowing,
        known_bugs=known_bugs,
        known_keys=known_keys,
    )
    s.cut()
    own_space = s.own_space_differs()
    confirmed = s.in_interpreter(share=0.5 if own_space else 1.0)
    if confirmed is not None:
        if own_space:
            confirmed = s.in_own_space(confirmed)
        return s.finish(confirmed, "interpreter")
    # (a GPU campaign's NaN row of JAX's attention stayed at 1,572,864 elements, its twin's
    # 6,144-element case, which the GPU ran without a NaN, dropped from the report)
    interpreted = s.unconfirmed
    if own_space and s.too_costly:
        # The compiled cut left the case too costly for the interpreter, but the bug may show
        # there all the same, small (a GLA backward mutant stayed at 4,224 elements on an H100,
        # its cost 720 against the interpreter's 512).
        got = s.in_own_space(s.current, share=0.5)
        if got is not s.current and got.interpreted is None:
            return s.finish(got, "interpreter")
        interpreted = got.interpreted
    s.on_compiled()
    best = s.current
    if interpreted is not None and interpreted.case.size < best.case.size:
        best = dataclasses.replace(best, interpreted=interpreted, interpreted_on=s.twin.name)  # type: ignore[union-attr]
    return s.finish(best, "compiled")


def shrink_in_own_space(
    target: Target,
    backend: Backend,
    options: HuntOptions,
    found: Found,
    *,
    hunt: Callable[..., HuntResult],
    into: HuntResult,
    hard_at: float | None,
    narrowing: dict[str, Any],
    known_keys: Collection[str] = (),
    known_bugs: Collection[Bug] = (),
) -> Found:
    """``found``, the minimal example of an interpreter's narrowed search (a GPU host's
    ``pallas-interpret`` or ``triton-interpret`` pair under the gpu profile: its few tiles and
    head dims), searched for again over the interpreter's whole variant space
    (``_Shrinker.in_own_space``) where it is over ``SMALL_ENOUGH`` elements, within half the
    shrink time left, as a compiled pair's twin searches it: the project's mutant needing two
    key tiles stays over twice its CPU size under a GPU narrowing of its head dims and tiles
    (``tests/fuzz/test_shrink_own_space.py``). A smaller example that fails with the same key
    on the same backend replaces ``found``; otherwise it stands, noted."""
    s = _Shrinker(
        target,
        backend,
        options,
        found,
        hunt=hunt,
        into=into,
        hard_at=hard_at,
        narrowing=narrowing,
        known_bugs=known_bugs,
        known_keys=known_keys,
    )
    s.twin = backend if backend.interpret else None
    if not s.own_space_differs() or found.case.size <= SMALL_ENOUGH:
        return found
    got = s.in_own_space(found, share=0.5)
    if got is found or got.interpreted is not None:  # (the latter: it did not fail so again)
        return dataclasses.replace(found, shrink_notes=[*found.shrink_notes, *s.notes])
    return dataclasses.replace(
        got,
        first_example=found.first_example,
        first_seconds=found.first_seconds,
        minimal_seconds=found.minimal_seconds + (time.perf_counter() - s.t0),
        final=True,
        shrink_notes=[*found.shrink_notes, *s.notes],
    )


def shrink_again(
    target: Target,
    backend: Backend,
    options: HuntOptions,
    found: Found,
    *,
    hunt: Callable[..., HuntResult],
    into: HuntResult,
    hard_at: float | None,
    narrowing: dict[str, Any],
    known_bugs: Collection[Bug] = (),
) -> Found | None:
    """``found``, a bug whose shrinking was cut, shrunk once more on ``backend`` (its own key
    only, the known bugs' examples hits: it cannot walk into another bug; on a compiled backend
    through compiled variants only), within ``options.shrink_seconds`` and ``hard_at``; None if
    it did not fail so or there is no time left. Arguments as for :func:`shrink_compiled`."""
    s = _Shrinker(
        target,
        backend,
        options,
        found,
        hunt=hunt,
        into=into,
        hard_at=hard_at,
        narrowing=narrowing,
        known_bugs=known_bugs,
    )
    if s.left() <= 0:
        return None
    shrunk, _ = s.stage(backend, options, seconds=s.left(), only_compiled=not backend.interpret)
    return shrunk


def run_stage(
    hunt: Callable[..., HuntResult],
    target: Target,
    backend: Backend,
    options: HuntOptions,
    *,
    start: tuple[Any, ...],
    key: str,
    seconds: float,
    narrowing: dict[str, Any],
    into: HuntResult,
    known: Collection[str | Bug] = (),
    phases: tuple[Phase, ...] = SHRINK_PHASES,
    only_compiled: bool = False,
    goal: Callable[[Case], bool] | None = None,
) -> HuntResult:
    """One run (``hunt``, :func:`fuzz.engine.hunt`) of a stage that replays the example of
    choices ``start`` and, with ``phases`` (default: replay and shrink), shrinks it as bug
    ``key`` (every key where ""), for at most ``seconds``; its numbers are taken into
    ``into``'s as shrinking. ``known``: classes and bugs (``fuzz.signatures.Bug``) whose
    examples are hits of theirs, not failures to shrink."""
    if not only_compiled:
        # The stage's compiles are the price of shrinking there (Pallas's interpreter has
        # XLA compile a program per shape, and every shrink step is a new shape): the
        # search's compile share refused them all and left a GPU finding of 458,752
        # elements unshrunk. The stage's time bounds them.
        options = dataclasses.replace(options, compile_share=None)
    stage = Stage(
        start=(start,),
        phases=phases,
        only_compiled=only_compiled,
        goal=goal,
        shrink_seconds=seconds,
        only=key or None,
    )
    run = hunt(
        target,
        backend,
        options,
        database=None,
        known=known,
        hard_limit=max(1.0, seconds),
        stage=stage,
        narrowing=narrowing,
    )
    into.stats.merge(run.stats)
    into.shrink_examples += run.examples
    for name, count in run.events.items():
        into.events[f"shrink: {name}"] += count
    return run


class _Shrinker:
    """One handed-over finding on its way through the stages; ``current`` is the smallest
    failing example so far, ``notes`` what each stage said."""

    def __init__(
        self,
        target: Target,
        backend: Backend,
        options: HuntOptions,
        found: Found,
        *,
        hunt: Callable[..., HuntResult],
        into: HuntResult,
        hard_at: float | None,
        narrowing: dict[str, Any],
        known_bugs: Collection[Bug] = (),
        known_keys: Collection[str] = (),
    ) -> None:
        self.target, self.backend, self.options = target, backend, options
        self.found = self.current = found
        self.cls = found.finding.cls
        self.key = found.key
        self.hunt, self.into, self.narrowing = hunt, into, narrowing
        self.t0 = time.perf_counter()
        self.deadline = self.t0 + options.shrink_seconds
        if hard_at is not None:
            self.deadline = min(self.deadline, hard_at)
        self.notes: list[str] = []
        self.cost = target.search.cost
        self.twin = _twin(backend)
        # The profile's bound is in Triton-interpreter units; a faster interpreter takes more
        # (``max_cost``), but what compiled variants can cut for nothing is cut first: the
        # interpreter of a compiled language (Pallas's) pays a compile per shape it shrinks
        # through, so the fewer steps left to it the better.
        speedup = self.twin.cost_speedup if self.twin is not None else 1.0
        self.cut_cost = options.interpreter_max_cost
        self.max_cost = options.interpreter_max_cost * speedup
        self.too_costly = False  # the interpreter stage was not tried: the case cost too much
        # The twin's minimal example of the bug that the compiled backend did not confirm (kept
        # beside the compiled one, with its reproducer: :attr:`Found.interpreted`).
        self.unconfirmed: Found | None = None
        self.known_keys = frozenset(known_keys)  # the bugs the search knows
        self.known_bugs = tuple(known_bugs)  # (their examples are hits in every stage)
        self.ladder = False  # its shrinking through new variants is left to a compile worker

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def stage(
        self,
        backend: Backend,
        options: HuntOptions,
        *,
        seconds: float,
        only_compiled: bool = False,
        goal: Callable[[Case], bool] | None = None,
    ) -> tuple[Found | None, HuntResult]:
        """Replays ``current`` on ``backend`` and shrinks it (its class only) for at most
        ``seconds``; returns the smallest failing example of the class (None if it did not fail
        so) and the run, whose numbers the search's result takes in."""
        run = run_stage(
            self.hunt,
            self.target,
            backend,
            options,
            start=self.current.choices,
            key=self.key,
            known=(*(() if self.key else set(CLASSES) - {self.cls}), *self.known_bugs),
            seconds=seconds,
            narrowing=self.narrowing,
            into=self.into,
            only_compiled=only_compiled,
            goal=goal,
        )
        for key, met in run.met_while_shrinking.items():  # the hunt that runs the stage reports
            self.into.met_while_shrinking.setdefault(key, met)
        return (run.of_key(self.key) if self.key else run.found.get(self.cls)), run

    def cut(self) -> None:
        """Shrinks on the compiled backend through compiled variants until the case is cheap in
        any interpreter (``cut_cost``); then through new variants, if the interpreter still
        would not take it (``max_cost``)."""
        cost = self.cost

        def within(bound: float) -> Callable[[Case], bool]:
            return lambda c: cost(c) <= bound

        # Where the twin can search its own space, the cut through new variants (each a
        # compile) leaves it more time: that search finds small cases the narrowing keeps out.
        share = 1 / 3 if self.own_space_differs() else 1 / 2
        for only_compiled, bound in ((True, self.cut_cost), (False, self.max_cost)):
            if self.twin is None or cost(self.current.case) <= bound or self.left() <= 0:
                continue
            cut, run = self.stage(
                self.backend,
                self.options,
                seconds=self.left() * (1 / 2 if only_compiled else share),
                only_compiled=only_compiled,
                goal=within(bound),
            )
            if cut is not None:
                self.current = cut
            which = "compiled variants" if only_compiled else "any variant"
            self.notes.append(
                f"cut on {self.backend.name} through {which}: {run.examples} "
                f"examples, {run.stats.compiles} compiles, "
                f"{self.current.case.size} elements, interpreter cost "
                f"{cost(self.current.case):.3g}"
            )

    def own_space_differs(self) -> bool:
        """Whether the twin could search a space the search's narrowing left out (its compile-time
        choices: a GPU pair's two or three tile pairs and head dims)."""
        return self.twin is not None and bool(self.key) and any(k != "kind" for k in self.narrowing)

    def in_own_space(self, best: Found, share: float = 1.0) -> Found:
        """Looks for a smaller example of the same bug in the twin interpreter over its whole
        variant space, where the search's narrowing held the replayed stages to the tiles and
        head dims it drew: a GPU pair of a mutant that needs two key tiles shrank to 1,056 and
        2,080 elements with 16-key tiles and a head dim of 16, against 50 on the CPU with a
        head dim of 1. Replaying cannot get there (a narrowed choice is an index into the
        narrowed values), so this stage searches afresh for the bug's key, as the CPU
        interpreters' profile (``ci``) searches: derandomized, at its scale, with its examples,
        then up to ``OWN_SPACE_RETRIES`` more searches of seeds of their own (the test suite
        proves every planted bug is found so). A smaller example confirmed on the compiled
        backend replaces ``best``; one that is not (a case the compiled kernel does not run) is
        kept beside it, with a reproducer for the interpreter (:attr:`Found.interpreted`).
        Cases of at most ``SMALL_ENOUGH`` elements are left as they are. It takes ``share`` of
        the time left."""
        from fuzz.profiles import get_profile

        twin, backend = self.twin, self.backend
        if twin is None or best.case.size <= SMALL_ENOUGH:
            return best
        if self.left() * share <= 1.0:
            self.notes.append(f"{twin.name} over its own variant space: no time left")
            return best
        options = dataclasses.replace(
            HuntOptions.of(get_profile("ci"), differential=False), compile_share=None
        )
        small, examples, said = None, 0, "passes"
        until = time.perf_counter() + self.left() * share
        for attempt in range(1 + OWN_SPACE_RETRIES):
            seconds = min(self.left(), until - time.perf_counter())
            if seconds <= 1.0:
                break
            # The first search draws what the CPU profile's does (derandomized); the others a
            # seed of their own, the same in every run.
            seed = None if attempt == 0 else zlib.crc32(f"{self.target.name}|{twin.name}".encode())
            run = self.hunt(
                self.target,
                twin,
                options,
                database=None,
                known=self.known_bugs,
                hard_limit=seconds,
                stage=Stage(shrink_seconds=seconds, only=self.key, past_first=True),
                narrowing={},
                seed=None if seed is None else seed + attempt,
            )
            main = self.into
            main.stats.merge(run.stats)
            main.shrink_examples += run.examples
            for key, count in run.events.items():
                main.events[f"shrink: own space: {key}"] += count
            examples += run.examples
            small = run.of_key(self.key)
            said = what_it_said(run, self.cls, self.key)
            if small is not None:
                break
        self.notes.append(
            f"{twin.name} over its own variant space: {examples} examples, "
            + (f"{small.case.size} elements" if small is not None else said)
        )
        first = small.finding.details.get("fails_first") if small is not None else None
        if first is not None and first in self.known_keys:
            # The small case fails a known bug's property first (a bug of two properties, found
            # as each where the other held): it is that bug's example, not a smaller one of this.
            self.notes.append(f"its small case fails {first} first: a known bug's example")
            return best
        if small is None or small.case.size >= best.case.size:
            return best
        confirmed = self.confirmed(small)
        if confirmed is not None:
            return confirmed
        self.notes.append(
            f"not confirmed on {backend.name}: the {small.case.size}-element case is kept as "
            f"{twin.name}'s reproducer beside the {best.case.size}-element one"
        )
        return dataclasses.replace(best, interpreted=small, interpreted_on=twin.name)

    def in_interpreter(self, share: float = 1.0) -> Found | None:
        """Shrinks ``current`` in the twin interpreter, within ``share`` of the time left; returns
        the minimal case confirmed on the compiled backend with the same class (None: no twin, too
        costly, or not confirmed)."""
        twin, backend, cls = self.twin, self.backend, self.cls
        if twin is None:
            self.notes.append(f"no interpreter of {backend.name}'s kernel source runs here")
            return None
        if self.cost(self.current.case) > self.max_cost:
            self.too_costly = True
            self.notes.append(
                f"interpreter not tried: cost {self.cost(self.current.case):.3g} "
                f"> {self.max_cost:g}"
            )
            return None
        plain = HuntOptions.of(self.options, differential=False)  # no twin to run there
        small, run = self.stage(twin, plain, seconds=self.left() * share)
        self.notes.append(f"{twin.name} said: {what_it_said(run, cls, self.key)}")
        if small is None:
            return None
        if small.case.size > self.current.case.size:
            # Hypothesis's order is its choices', not the elements': a case it calls simpler
            # can be larger (a GPU cut of 10,374 elements came back as 122,880). Keep the cut.
            self.notes.append(
                f"{twin.name}'s minimal case ({small.case.size} elements) is larger than the "
                f"one it started from ({self.current.case.size}): not taken"
            )
            return None
        confirmed = self.confirmed(small)
        if confirmed is not None:
            return confirmed
        self.notes.append(
            f"{twin.name}'s minimal case ({small.case.size} elements) does not "
            f"fail with {cls} on {backend.name}: kept as {twin.name}'s reproducer where the row "
            "stays larger"
        )
        self.unconfirmed = small
        return None

    def confirmed(self, small: Found) -> Found | None:
        """``small`` (the twin's) confirmed on the compiled backend (:func:`_confirm`), noted."""
        confirmed = _confirm(self.target, self.backend, self.options, small)
        if confirmed is not None:
            self.notes.append(f"confirmed on {self.backend.name}: {small.case.size} elements")
        return confirmed

    def on_compiled(self) -> None:
        """Shrinks ``current`` on the compiled backend within what is left of the time: through
        compiled variants first (its values, and its shapes where they compile nothing new),
        then any. In a campaign with compile workers (``HuntOptions.compile_ladder``) the
        second step, a compile per smaller variant, is not taken here, on the fuzzing path: a
        case still over ``SMALL_ENOUGH`` elements is marked for a compile worker to shrink on
        (``Found.ladder``; ``fuzz.engine``'s resume of it)."""
        for only_compiled in (True, False):
            if self.left() <= 0:
                break
            if not only_compiled and self.options.compile_ladder:
                if self.current.case.size > SMALL_ENOUGH:
                    self.ladder = True
                    self.notes.append(
                        f"smaller variants left to a compile worker: "
                        f"{self.current.case.size} elements through compiled variants"
                    )
                break
            best, run = self.stage(
                self.backend, self.options, seconds=self.left(), only_compiled=only_compiled
            )
            if best is not None:
                self.current = best
            which = "compiled variants only" if only_compiled else "any variant"
            self.notes.append(
                f"{self.backend.name}, {which}: {run.examples} examples, "
                f"{run.stats.compiles} compiles, {self.current.case.size} elements "
                f"({what_it_said(run, self.cls, self.key)})"
            )

    def finish(self, best: Found, path: str) -> Found:
        """``best`` as the minimal example of the finding first seen as ``found``. In a campaign
        with compile workers, one still over ``SMALL_ENOUGH`` elements when the shrink time ran
        out is left to them too, whatever its path (JAX's ``mha_varlen`` kept a row of 65,536
        elements on an H200 whose cut stages took the time)."""
        if (
            self.options.compile_ladder
            and not self.ladder
            and best.case.size > SMALL_ENOUGH
            and self.left() <= 0
        ):
            self.ladder = True
            self.notes.append(
                f"left to a compile worker: {best.case.size} elements when the shrink time here "
                "ran out"
            )
        found = self.found
        if "round" in found.finding.details:  # still the bug the search saw (fuzz.engine)
            best.finding.details["round"] = found.finding.details["round"]
        if path == "interpreter" and self.twin is not None and self.twin.exact_dots:
            best = tf32_ruled_out(best, self.twin.name)
        return dataclasses.replace(
            best,
            first_example=found.first_example,
            first_seconds=found.first_seconds,
            minimal_seconds=found.minimal_seconds + (time.perf_counter() - self.t0),
            final=best.final or path == "interpreter",
            shrink_path=path,
            shrink_notes=self.notes,
            ladder=self.ladder,
        )
