"""The campaign's scheduling policy: which pair each worker fuzzes next, and what a slice's end
means for its pair. Pure: no processes, no clock, no files, no console (``tests/fuzz/
test_layers.py`` holds it to that). Whoever runs the workers -- processes on one host
(:mod:`fuzz.campaign.pool`) or actors on a cluster -- tells it what happens, one small method per
event, in the style of pytest-xdist's ``Scheduling`` protocol:

=====================  =====================================================================
``add_worker``         a worker (a fresh process or actor) is ready to take slices
``remove_worker``      a worker is gone for good
``next_slice``         an idle worker asks: a :class:`SlicePlan`, or None (nothing to give it)
``progress``           a slice's examples and compile seconds so far
``feature``            a slice met a coverage feature
``found``              a slice streamed a finding record (its first sight of a bug, or a
                       minimal example): :class:`fuzz.ledger.Recorded` says what it was
``ended``              a slice's summary came: :class:`Ended` says what it decided
``lost``               a slice ended without its summary (its worker died, hung, overran)
``died``               ... and what the death was (a finding, a suspected hang, a stop)
``stopped``            a slice cut short by the campaign's end
=====================  =====================================================================

What it decides:

* every pair once, compiled ahead first where compile workers exist (real targets before
  mutants), then every pair to its floor (``floor_examples`` examples or ``floor_seconds`` of
  fuzzing, a real target ``real_floor_seconds``; compiling and shrinking count toward neither),
  then the pairs that met it by seconds short of its examples, then toward the full floors
  where they were scaled, then a bandit (new bugs or coverage features per fuzzing second, with
  an exploration bonus: UCB); a slice of a pair under its floor ends at it;
* the floors, where fitted to the budget: lowered where what the slices cost past fuzzing
  (compiling, shrinking what they find, measured as the campaign goes) would leave the budget
  short of them (``estimates.refit``);
* which pair a compile worker warms up next (:meth:`SchedulingPolicy.next_warm_up`);
* when a pair is finished (retired): a harness error, a search space Hypothesis reports
  exhausted, a mutant found with its class and shrunk, deaths that only repeat known bugs, or
  the harness's resources running out twice;
* when a pair's compile-time choices widen (``widen``, given by whoever builds the policy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fuzz.campaign import booking, estimates, picks
from fuzz.campaign.messages import SlicePlan, WarmUp
from fuzz.campaign.pairs import PairState, Warmth
from fuzz.campaign.tunables import Tunables
from fuzz.ledger import Recorded, sighting


@dataclass
class Ended:
    """What the end of a slice (its summary) decided.

    Attributes:
        pair: its pair.
        found: each finding record of the summary, with what the ledger made of it.
        withdrawn: bugs its duplicate check found to be known ones.
        retired: why its pair was retired now ("" if not).
        widened: the values its pair's choices grew by (dimension -> values), or None.
        seconds: its seconds, as booked.
        floors: what the floors were lowered to at its end (``estimates.refit``), or None.
    """

    pair: PairState
    plan: SlicePlan
    found: list[tuple[dict[str, Any], Recorded]] = field(default_factory=list)
    withdrawn: list[Recorded] = field(default_factory=list)
    retired: str = ""
    widened: dict[str, list[Any]] | None = None
    seconds: float = 0.0
    floors: str | None = None


@dataclass
class Lost:
    """A slice booked without its summary: its plan, its pair, and whether it streamed a new
    bug before it ended (a death on a bug found before tells nothing new)."""

    plan: SlicePlan
    pair: PairState
    found_new: bool
    retired: str = ""


@dataclass
class _Seat:
    """A worker as the policy sees it: its role, and the pairs its process has fuzzed (their
    kernels are loaded in it: a slice of one of them costs no compile, where another worker
    would load or trace them again)."""

    role: str
    loaded: set[str] = field(default_factory=set)


@dataclass
class _Running:
    plan: SlicePlan
    pair: PairState
    found_new: bool = False


# How many unshrunk bugs of earlier slices one fuzzing slice shrinks first (``BugLedger.resume``).
RESUME_PER_SLICE = 2

# Losses (``SchedulingPolicy.died``): how a slice's worker ended.
STOPPED = "stopped"  # asked to stop from outside: its example was interrupted, not faulty
OVERRAN = "overran"  # killed past its hard limit
CONTEXT_LOST = "context-lost"  # exited after a CUDA error that poisons its context
SUSPECTED_HANG = "suspected-hang"  # its example outlived the timeout once (replayed to confirm)
DEATH = "death"  # a crash, or a hang of the compiler: a finding


class SchedulingPolicy:
    """The pairs of a campaign and how they are scheduled (see the module's docstring).

    Args:
        pairs: the campaign's pairs, in the first round's order (``pairs.interleave``).
        tunables: the numbers it decides by.
        widen: ``widen(pair, level)`` -> the pair's compile-time choices widened ``level`` times
            (``fuzz.engine.run_narrowing``): equal to its choices where nothing is left to add.
        floors: what the campaign says of its floors (``estimates.fitted_floors``), updated in
            place when they are lowered; None: never lowered.
    """

    def __init__(
        self,
        pairs: list[PairState],
        tunables: Tunables,
        *,
        widen: Callable[[PairState, int], dict[str, Any]] | None = None,
        floors: dict[str, Any] | None = None,
    ) -> None:
        self.pairs = pairs
        self.t = self.fitted = tunables
        self.floors = floors
        self.overheads = estimates.Overheads()
        self._widened = widen
        self._seats: dict[int, _Seat] = {}
        self._running: dict[int, _Running] = {}
        self._by_key = {p.key: p for p in pairs}

    # Workers ---------------------------------------------------------------------------------

    def add_worker(self, wid: int, role: str = "fuzz") -> None:
        """A worker ready to take slices (a fresh process has loaded nothing)."""
        if role not in ("fuzz", "compile"):
            raise ValueError(f"role={role!r} must be 'fuzz' or 'compile'")
        self._seats[wid] = _Seat(role)

    def remove_worker(self, wid: int) -> None:
        """A worker gone for good (the campaign is ending, or it cannot start)."""
        self._seats.pop(wid, None)

    def pair(self, key: str) -> PairState:
        return self._by_key[key]

    def _compile_workers(self) -> int:
        return sum(1 for s in self._seats.values() if s.role == "compile")

    # Picking ---------------------------------------------------------------------------------

    def next_slice(self, wid: int, *, slice_id: int, now: float, left: float) -> SlicePlan | None:
        """The slice worker ``wid`` runs next (``slice_id`` its id, ``left`` the budget's seconds
        left), or None: nothing for it now."""
        seat = self._seats[wid]
        if left < 0.5:  # past the budget, within its end grace: only rows left unshrunk
            done, of_ladder = picks.next_finishing(self.pairs, seat.role)
            if done is None:
                return None
            return self.begin_ladder(done, slice_id=slice_id, now=now, left=left, ladder=of_ladder)
        if seat.role == "compile":
            ladder = picks.next_ladder(self.pairs)
            if ladder is not None:
                return self.begin_ladder(ladder, slice_id=slice_id, now=now, left=left)
        pair = self.next_warm_up() if seat.role == "compile" else self.pick(seat.loaded)
        if pair is None:
            return None
        return self.begin(pair, wid, slice_id=slice_id, now=now, left=left)

    def begin_ladder(
        self, pair: PairState, *, slice_id: int, now: float, left: float, ladder: bool = True
    ) -> SlicePlan | None:
        """Starts slice ``slice_id`` on a compile worker: it shrinks ``pair``'s bugs of the
        compile ladder (``BugLedger.take_resumes(ladder=True)``) and nothing else, within the
        shrink time a slice of the pair has, and ends before the campaign does. The pair goes
        on being fuzzed meanwhile (the slice is not one of its ``live`` ones). ``ladder``
        False: past the budget, its rows left unshrunk (``SlicePlan.finishing``)."""
        t = self.t
        seconds = estimates.shrink_seconds(t, self.compile_cost(pair), left, fuzzing=False)
        if seconds < 5.0:
            return None
        plan = SlicePlan(
            id=slice_id,
            target=pair.target.name,
            backend=pair.backend,
            started=now,
            time_limit=0.0,
            hard_limit=seconds,
            seed=(t.seed * 1_000_003 + slice_id) % 2**32,
            max_examples=None,
            known=tuple(pair.bugs()),
            reuse=False,
            narrowing=pair.narrowing,
            warm_up=None,
            structures=(),
            compile_spent=(0.0, 0.0, 0.0),
            resume=pair.ledger.take_resumes(RESUME_PER_SLICE, ladder=ladder),
            ladder=ladder,
            finishing=not ladder,
        )
        self._running[slice_id] = _Running(plan, pair)
        return plan

    def begin(
        self, pair: PairState, wid: int, *, slice_id: int, now: float, left: float
    ) -> SlicePlan:
        """Starts slice ``slice_id`` of ``pair`` on worker ``wid`` (a warm-up on a compile
        worker): its plan. :meth:`next_slice` begins the slice of the pair it picks."""
        warm = self._seats[wid].role == "compile"
        if not warm:
            self._seats[wid].loaded.add(pair.key)
        t = self.t
        limit = min(t.slice_seconds, left)
        if t.floor_slices and not warm and self.floor_progress(pair) < 1.0:
            limit = min(limit, estimates.floor_left(pair, t))  # its floor is its share
        shrink = estimates.shrink_seconds(t, self.compile_cost(pair), left - limit)
        if warm:
            pair.warmth = Warmth.WARMING
        if not pair.running:  # (a pair shared by several workers: their gains together)
            pair.slice_new = 0.0
            pair.new_sightings = set()
        pair.live[slice_id] = [0, 0.0]
        # A warm-up of widened choices is a first warm-up of them; each draws longer.
        level = 0 if warm and pair.pending is not None else pair.warm_count
        plan = SlicePlan(
            id=slice_id,
            target=pair.target.name,
            backend=pair.backend,
            started=now,
            time_limit=limit,
            hard_limit=limit + shrink,
            seed=(t.seed * 1_000_003 + slice_id) % 2**32,
            max_examples=None if t.examples is None else t.examples - pair.examples,
            known=tuple(pair.bugs()),
            reuse=pair.slices == 0 and not warm,
            narrowing=pair.pending if warm and pair.pending is not None else pair.narrowing,
            warm_up=WarmUp(t.warm_quiet * 2**level, t.warm_seconds * 2**level) if warm else None,
            structures=() if warm else tuple(pair.structures),
            compile_spent=(0.0, 0.0, 0.0)
            if warm
            else (pair.stats["compile_seconds"], pair.seconds, self.compile_cost(pair)),
            resume=() if warm else pair.ledger.take_resumes(RESUME_PER_SLICE),
        )
        self._running[slice_id] = _Running(plan, pair)
        return plan

    def pick(self, loaded: set[str] | frozenset[str] = frozenset()) -> PairState | None:
        """The pair the next fuzzing slice fuzzes, for a worker that has ``loaded`` these pairs
        (:func:`fuzz.campaign.picks.pick`)."""
        full = estimates.full_floors(self.t, self.floors)
        return picks.pick(self.pairs, self.t, loaded, self._compile_workers(), full)

    def floor_progress(self, pair: PairState) -> float:
        """How much of its floor ``pair`` has had (1: met; ``estimates.floor_progress``)."""
        return estimates.floor_progress(pair, self.t)

    def done(self, pair: PairState) -> bool:
        """Whether ``pair`` has run the examples the campaign asked of each pair (a quota)."""
        return picks.done(pair, self.t)

    def schedulable(self) -> bool:
        """Whether any pair is left to fuzz, or a bug to shrink on a compile worker (the compile
        ladder: ``picks.next_ladder``)."""
        ladder = self._compile_workers() > 0 and picks.next_ladder(self.pairs) is not None
        return ladder or any(not p.retired and not self.done(p) for p in self.pairs)

    # Compiling ahead -------------------------------------------------------------------------

    def next_warm_up(self) -> PairState | None:
        """The pair a compile worker warms up next (:func:`fuzz.campaign.picks.next_warm_up`)."""
        return picks.next_warm_up(self.pairs, self.t)

    def cold_queue(self) -> list[PairState]:
        """The pairs not warmed up yet, in the order the compile workers take them
        (:func:`fuzz.campaign.picks.cold_queue`)."""
        return picks.cold_queue(self.pairs)

    def compile_cost(self, pair: PairState, unknown: float = 0.0) -> float:
        """The seconds one compile of ``pair``'s kernels is expected to take
        (``estimates.compile_cost``)."""
        return estimates.compile_cost(pair, self.pairs, unknown)

    # What slices report ----------------------------------------------------------------------

    def running(self, sid: int) -> PairState | None:
        """The pair of slice ``sid`` while it runs (None: not a slice of the policy's)."""
        r = self._running.get(sid)
        return None if r is None else r.pair

    def progress(self, sid: int, examples: int, compile_seconds: float | None = None) -> None:
        r = self._running.get(sid)
        if r is not None and sid in r.pair.live:
            live = r.pair.live[sid]
            live[0] = examples
            if compile_seconds is not None:
                live[1] = compile_seconds

    def feature(self, sid: int, name: str) -> None:
        r = self._running.get(sid)
        if r is not None:
            self._feature(r.pair, name)

    @staticmethod
    def _feature(pair: PairState, name: str) -> None:
        if name not in pair.features:
            pair.features.add(name)
            pair.slice_new += 1.0

    def found(self, sid: int, rec: dict[str, Any]) -> Recorded | None:
        """A finding record slice ``sid`` streamed (None: not a running slice's)."""
        r = self._running.get(sid)
        if r is None:
            return None
        seen = rec.get("resumes") or sighting(sid, rec)  # (a lost slice's bug, shrunk now)
        out = self.record(r.pair, rec, sighting=seen)
        r.found_new = r.found_new or out.new
        return out

    def record(
        self, pair: PairState, rec: dict[str, Any], *, sighting: str | None = None
    ) -> Recorded:
        """Keeps finding ``rec`` of ``pair`` in its ledger (a slice's, or a death's): a new bug
        counts toward its slice's gain, a bug streamed as new that is a known one no longer
        does (a pair that found one bug again in every slice, each time first as new, was
        favoured as productive)."""
        rec = {**rec, "target": pair.target.name, "backend": pair.backend}
        out = pair.ledger.record(rec, sighting=sighting)
        self._gains(pair, out, sighting)
        return out

    def withdraw(self, pair: PairState, sighting: str, dup: Mapping[str, Any]) -> Recorded:
        """A bug ``sighting`` streamed as new is known bug ``dup["twin"]`` after all (its
        hunt's duplicate check, ``dup``): taken back into it (``fuzz.ledger.BugLedger.withdraw``),
        and no gain of its slice."""
        out = pair.ledger.withdraw(sighting, dup)
        self._gains(pair, out, sighting)
        return out

    def _gains(self, pair: PairState, out: Recorded, sighting: str | None) -> None:
        if out.unnew and sighting is not None and sighting in pair.new_sightings:
            pair.new_sightings.discard(sighting)
            pair.slice_new = max(0.0, pair.slice_new - self.t.new_class_weight)
        if out.new:
            pair.slice_new += self.t.new_class_weight
            if sighting is not None:
                pair.new_sightings.add(sighting)

    def ended(
        self, sid: int, summary: Mapping[str, Any], now: float, *, left: float | None = None
    ) -> Ended:
        """Books slice ``sid``'s ``summary`` (``fuzz.results.HuntResult.as_dict`` and the
        worker's additions) into its pair; says what it decided (``left``: the budget's seconds
        left, where the floors may be lowered to fit them)."""
        r = self._running.pop(sid)
        plan, pair = r.plan, r.pair
        mark = self.overheads.mark(pair)
        secs, summary = booking.book_time(pair, plan, summary, now)
        out = Ended(pair, plan, seconds=secs)
        for rec in summary.get("found", []):
            out.found.append((rec, self.record(pair, rec, sighting=sighting(sid, rec))))
        for dup in summary.get("duplicates", []):
            sight = dup.get("resumes") or sighting(sid, {"details": dup, "bug_key": dup["bug_key"]})
            out.withdrawn.append(self.withdraw(pair, sight, dup))
        booking.book_counters(pair, summary)
        for feat in summary.get("features", []):
            self._feature(pair, feat)
        pair.ledger.queue_resumes(plan.id, plan.narrowing)  # (what its hard limit cut, unsettled)
        pair.ledger.requeue(plan.resume)  # (what it took to shrink and did not get to)
        out.retired = self._retire(pair, summary)
        if plan.warm_up is None and not plan.shrink_only:
            out.widened = self._widen(pair, now)
            fuzz = max(secs - summary.get("compile_seconds", 0.0), 0.1)
            pair.rate = 0.5 * pair.rate + 0.5 * pair.slice_new / fuzz
            self.overheads.slice_ended(pair, plan, now, mark)
            out.floors = self.refit(left)
        return out

    def refit(self, left: float | None) -> str | None:
        """Lowers the floors where the budget's ``left`` seconds no longer give them
        (``estimates.refit``): what to say of it, or None."""
        fuzz = sum(1 for s in self._seats.values() if s.role == "fuzz")
        fit = (self.pairs, self.fitted, self.t, self.overheads, self.floors)
        self.t, said = estimates.refit(*fit, left=left, workers=fuzz)
        return said

    def _retire(self, pair: PairState, summary: Mapping[str, Any]) -> str:
        """Retires ``pair`` when it is finished, and only then: a harness error, a search space
        Hypothesis says is exhausted, or (a mutant) its expected class found and shrunk. A pair
        is never retired for running fast or for finding something: it keeps hunting for more
        bugs, the ones found counting as hits. Returns why it was retired now ("" if not)."""
        if pair.retired:
            return ""
        if summary.get("error"):
            source = pair.target.source
            where = "" if source == "builtin" else f" (target from plugin {source})"
            pair.error = f"{summary['error']}{where}"
            pair.error_trace = summary.get("error_trace")
            pair.retired = "harness error"
        elif summary.get("stopped") == "exhausted":
            pair.retired = "search space exhausted"
        elif pair.mutant_done():
            pair.retired = "mutant found and shrunk"
        return pair.retired

    def _widen(self, pair: PairState, now: float) -> dict[str, list[Any]] | None:
        """Adds one more value per compile-time dimension to ``pair``'s choices once it has had
        another floor's worth of fuzzing (examples or seconds) with the ones it has: a bug that
        needs a variant the first choices lack (a causal loop bound wrong only where block_q >
        block_k) was otherwise never met, campaign after campaign with the same seed. The
        choices it had stay first among them (a recorded choice keeps its meaning; the kernels
        compiled for them stay in the caches, and the structure memos reuse the structures
        launched before: ``strategies.reuse.StructureMemo``). Where compiling goes ahead, a
        compile worker warms the pair up again for the new variants, after the first warm-ups
        of every pair (:meth:`next_warm_up`), and its fuzzing goes on with the variants compiled
        till then (``pending``): in a GPU campaign that stopped fuzzing a widened pair until its
        new variants were compiled, and put those warm-ups first, the widened real targets took
        1,164 s of the compile workers' 2,200, the first warm-ups of 25 of 73 mutant pairs never
        came, and those pairs compiled on the fuzzing path (a compile share of 27%). Returns
        the values added (dimension -> values), or None."""
        t = self.t
        if pair.retired or not pair.narrowing or pair.pending is not None or self._widened is None:
            return None
        examples, seconds = pair.widened_at
        if (
            pair.examples - examples < t.floor_examples
            and pair.fuzz_seconds - seconds < t.floor_seconds
        ):
            return None
        wider = self._widened(pair, pair.widened + 1)
        if wider == pair.narrowing:
            return None  # every value of every dimension already
        added = {dim: list(values[len(pair.narrowing[dim]) :]) for dim, values in wider.items()}
        pair.widened += 1
        pair.widened_at = (pair.examples, pair.fuzz_seconds)
        if pair.warmth is Warmth.READY and t.compile_ahead and pair.warm_count:
            pair.pending = wider  # a compile worker compiles the new variants ahead
            pair.pending_since = now
        else:
            pair.narrowing = wider
        return added

    # Slices that ended otherwise -------------------------------------------------------------

    def lost(self, sid: int, now: float) -> Lost:
        """Books the examples and time of slice ``sid``, which ended without its summary (its
        worker died, hung or overran). What it streamed stays: a mutant whose expected bug came
        shrunk is finished (an H100 campaign left such a pair unretired, and unfuzzed, after the
        kill)."""
        r = self._running.pop(sid)
        mark = self.overheads.mark(r.pair)
        booking.book_lost(r.pair, r.plan, now, max_warms=self.t.max_warms)
        if r.plan.warm_up is None and not r.plan.shrink_only:
            self.overheads.slice_ended(r.pair, r.plan, now, mark)
        r.pair.ledger.queue_resumes(r.plan.id, r.plan.narrowing)
        r.pair.ledger.requeue(r.plan.resume)
        return Lost(r.plan, r.pair, r.found_new, self._retire(r.pair, {}))

    def died(self, lost: Lost, how: str, record: dict[str, Any] | None = None) -> Recorded | None:
        """What the end of ``lost``'s worker was (``how``: :data:`DEATH` with its finding
        ``record``, :data:`SUSPECTED_HANG`, :data:`CONTEXT_LOST`, :data:`OVERRAN`,
        :data:`STOPPED`): a death of its pair unless it overran or was stopped; a pair whose
        worker died ``max_deaths`` times on bugs found before is retired (each such death costs
        a worker's restart and tells nothing new)."""
        pair = lost.pair
        out = None
        if how == DEATH and record is not None:
            out = self.death_record(pair, record)
        elif how == CONTEXT_LOST and not lost.found_new:
            # The finding came over the pipe before the worker exited; a bug found before,
            # again, is a death that tells nothing new.
            pair.repeat_deaths += 1
        pair.deaths += how not in (OVERRAN, STOPPED)
        self._check_deaths(pair)
        return out

    def death_record(self, pair: PairState, rec: dict[str, Any]) -> Recorded:
        """Keeps the finding of a death (a crash, a confirmed hang): one that only hits a bug
        found before counts toward retiring the pair."""
        out = self.record(pair, rec)
        if not out.new:
            pair.repeat_deaths += 1
            self._check_deaths(pair)
        return out

    def _check_deaths(self, pair: PairState) -> None:
        if pair.repeat_deaths >= self.t.max_deaths and not pair.retired:
            pair.retired = f"killed its worker {pair.repeat_deaths} more times on bugs found before"

    def out_of_resources(self, pair: PairState, why: str) -> str:
        """Books a worker that died of the harness's resources running out: no finding; a pair
        whose worker dies so twice is a harness error (its examples cannot run here). Returns
        why it was retired now ("" if not)."""
        pair.out_of_resources += 1
        retired = self._retire(pair, {})  # what it streamed before may have finished it
        if pair.out_of_resources >= 2 and not pair.retired:
            pair.error = (
                f"its worker ran out of resources {pair.out_of_resources} times (last: {why})"
            )
            pair.retired = retired = "resource exhaustion"
        return retired

    def stopped(self, sid: int, now: float, *, sent: bool = True) -> PairState | None:
        """Books slice ``sid`` cut short by the campaign's end (``sent`` False: ``unsent``)."""
        r = self._running.pop(sid, None)
        if r is None:
            return None
        (booking.book_stopped if sent else booking.unsent)(r.pair, r.plan, now)
        return r.pair
