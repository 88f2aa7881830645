"""The scheduling policy's estimates: small pure functions of the pairs' counters.

How far a pair is from its floor, what one of its compiles is expected to cost, how far away a
cold pair's warm-up is, how much a pair is favoured once every floor is met (:func:`ucb`), and
the floors a budget can give every pair: fitted up front (:func:`fitted_floors`), then lowered
where what the slices spend past fuzzing (compiling, shrinking what they find: measured as the
campaign goes, :class:`Overheads`) would leave pairs short of them (:func:`refitted_floors`).
:mod:`fuzz.campaign.policy` decides with them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzz.campaign.messages import SlicePlan
from fuzz.campaign.pairs import PairState
from fuzz.campaign.tunables import Tunables


def ucb(rate: float, slices: int, total: int) -> float:
    """A pair's favour once every floor is met: its recent gain per fuzzing second plus an
    exploration bonus that shrinks with its share of the slices."""
    return rate + 0.5 * math.sqrt(math.log(total + 1) / (slices + 1))


def floor_seconds(pair: PairState, t: Tunables) -> float:
    """The fuzzing seconds of ``pair``'s floor: a mutant's, or a real target's (longer)."""
    return t.floor_seconds if pair.target.is_mutant else t.real_floor_seconds


def floor_progress(pair: PairState, t: Tunables) -> float:
    """How much of its floor ``pair`` has had: the larger of its examples over
    ``floor_examples`` and its fuzzing seconds over its floor's seconds (1: met)."""
    return max(
        pair.total_examples / max(1, t.floor_examples),
        pair.fuzz_seconds / max(1e-9, floor_seconds(pair, t)),
    )


def floor_left(pair: PairState, t: Tunables) -> float:
    """The fuzzing seconds ``pair`` lacks of its floor's seconds (0: it has had them)."""
    return max(0.0, floor_seconds(pair, t) - pair.fuzz_seconds)


def short_of_examples(pair: PairState, t: Tunables) -> bool:
    """Whether ``pair`` met its floor by fuzzing seconds with fewer than ``floor_examples``
    examples, and has had less than ``examples_floor_factor`` times the floor's seconds: it is
    fuzzed on to the examples before the productive pairs are favoured."""
    return (
        pair.total_examples < t.floor_examples
        and pair.fuzz_seconds < t.examples_floor_factor * floor_seconds(pair, t)
    )


def floors_need(pairs: Sequence[PairState], t: Tunables, workers: int) -> float:
    """The seconds ``workers`` fuzzing workers need to bring every pair to its floor by its
    seconds (its examples may come sooner), compiling and shrinking not counted (nothing is
    measured before the campaign: :func:`floors_left` counts them as it goes)."""
    return sum(floor_seconds(p, t) for p in pairs) / max(1, workers)


def scaled_floors(t: Tunables, factor: float) -> Tunables:
    """``t`` with its floors (examples and seconds) times ``factor`` (a budget shorter than the
    floors need: every pair still gets its share, said up front), the seconds to the hundredth
    (the floors the policy holds pairs to are the ones the report says)."""
    return t.replace(
        floor_examples=max(1, round(t.floor_examples * factor)),
        floor_seconds=_hundredths(t.floor_seconds * factor),
        real_floor_seconds=_hundredths(t.real_floor_seconds * factor),
    )


def _hundredths(seconds: float) -> float:
    return math.floor(seconds * 100 + 1e-6) / 100


def reached(pair: PairState, t: Tunables) -> float:
    """The share of ``t``'s floor that ``pair`` has had: the floors times this (or less) it
    meets."""
    return max(
        pair.total_examples / max(1, t.floor_examples),
        pair.fuzz_seconds / max(1e-9, floor_seconds(pair, t)),
    )


@dataclass
class Overheads:
    """What the fuzzing workers' slices cost past their fuzzing, measured as the campaign goes:
    a slice's seconds on its worker less those that counted toward its pair's floor (at most its
    search's time limit). Two-minute runs of the softmax kernels and their mutants on a loaded
    2-core CPU spent 12-16 s compiling and 40-57 s past their slices' limits, mostly shrinking,
    of the 120 s, where the floors had been fitted to 80% of the budget: 2-4 of 20 pairs ended
    short of them, and up to 3 unrun. Two parts:

    * compiling on the fuzzing path, per slice: a pair's first slice apart from its later ones
      (it compiles its kernels; later ones in the same worker have them loaded);
    * the rest, per fuzzing second: shrinking what the slice found (on an interpreter
      Hypothesis shrinks in the search, past its time limit), and starting and ending it. A
      slice that fuzzes longer finds more to shrink; one cut to a floor lowered to little
      fuzzing, less (taken per slice, the 6 s past its limit of one mutant's first slice, the
      first measured, was expected of every mutant's, and the floors went to 1 example).

    Each is expected from the slices of the pair's kind, with one more at the kind above's
    (one slice is not taken for all of its kind), from the least specific kind to the most.
    A slice's ``fuzzed`` seconds are the pair's fuzzing seconds it added, at most its search's
    time limit: on an interpreter Hypothesis's shrinking in the search counts as the pair's
    fuzzing, not here.

    Attributes:
        compiles: (family, backend, first slice or not), and (backend, first or not) ->
            [compile seconds, slices]: a backend not measured yet compiles nothing (the first
            slice measures it; one backend's compiles taken for another's, a Pallas pair's 2 s
            had every first slice expected to compile as long, the Triton interpreter's too).
        rest: (family, backend, mutant or not), and less of it down to () -> [seconds,
            fuzzing seconds, slices].
    """

    compiles: dict[tuple[Any, ...], list[float]] = field(default_factory=dict)
    rest: dict[tuple[Any, ...], list[float]] = field(default_factory=dict)

    @staticmethod
    def _kinds(pair: PairState, last: Any) -> list[tuple[Any, ...]]:
        return [(pair.target.family, pair.backend, last), (pair.backend, last)]

    @staticmethod
    def mark(pair: PairState) -> tuple[float, float]:
        """What a slice's end is told of its pair before it (:meth:`slice_ended`)."""
        return pair.fuzz_seconds, pair.stats["compile_seconds"]

    def slice_ended(
        self, pair: PairState, plan: SlicePlan, now: float, mark: tuple[float, float]
    ) -> None:
        """Books fuzzing slice ``plan`` of ``pair``, ended ``now`` and booked into the pair
        (``mark``: the pair's :meth:`mark` before it)."""
        self.book(
            pair,
            first=pair.slices == 1,
            busy=now - plan.started,
            fuzzed=min(plan.time_limit, pair.fuzz_seconds - mark[0]),
            compiled=pair.stats["compile_seconds"] - mark[1],
        )

    def book(
        self, pair: PairState, *, first: bool, busy: float, fuzzed: float, compiled: float = 0.0
    ) -> None:
        """A slice of ``pair`` (its ``first``) that held its worker ``busy`` seconds, of which
        ``fuzzed`` counted toward the pair's floor and ``compiled`` compiled."""
        fuzzed, compiled = max(0.0, fuzzed), max(0.0, compiled)
        for kind in self._kinds(pair, first):
            c = self.compiles.setdefault(kind, [0.0, 0])
            c[0], c[1] = c[0] + compiled, c[1] + 1
        for kind in [*self._kinds(pair, pair.target.is_mutant), (pair.target.is_mutant,), ()]:
            r = self.rest.setdefault(kind, [0.0, 0.0, 0])
            r[0], r[1], r[2] = r[0] + max(0.0, busy - fuzzed - compiled), r[1] + fuzzed, r[2] + 1

    def expected(self, pair: PairState, *, first: bool, fuzzing: float) -> float:
        """The seconds past fuzzing a slice of ``pair`` that fuzzes ``fuzzing`` seconds is
        expected to cost (0 where nothing is measured)."""
        compiling = None
        for kind in reversed(self._kinds(pair, first)):
            if kind in self.compiles:
                secs, n = self.compiles[kind]
                compiling = secs / n if compiling is None else (secs + compiling) / (n + 1)
        rate = None
        mutant = pair.target.is_mutant
        for kind in [(), (mutant,), *reversed(self._kinds(pair, mutant))]:
            secs, fuzzed, n = self.rest.get(kind, (0.0, 0.0, 0))
            if fuzzed > 0:
                one = fuzzed / n  # (one more slice, of its kind's mean fuzzing)
                rate = secs / fuzzed if rate is None else (secs + rate * one) / (fuzzed + one)
        return (compiling or 0.0) + fuzzing * (rate or 0.0)

    def total(self) -> tuple[float, int]:
        """The seconds past fuzzing of every slice so far, and the slices."""
        secs, _, n = self.rest.get((), (0.0, 0.0, 0))
        return secs + sum(c[0] for k, c in self.compiles.items() if len(k) == 2), int(n)


def examples_rate(pair: PairState, pairs: Iterable[PairState]) -> float:
    """Examples per fuzzing second of ``pair``, else of the pairs of its family on its backend
    (0: none has fuzzed yet)."""

    def rate(ps: list[PairState]) -> float:
        secs = sum(p.fuzz_seconds for p in ps)
        return sum(p.total_examples for p in ps) / secs if secs > 0 else 0.0

    own = rate([pair])
    if own > 0:
        return own
    return rate(
        [p for p in pairs if p.backend == pair.backend and p.target.family == pair.target.family]
    )


def _done(pair: PairState, t: Tunables) -> bool:
    return t.examples is not None and pair.examples >= t.examples


def floors_left(
    pairs: Sequence[PairState], t: Tunables, overheads: Overheads
) -> tuple[float, float]:
    """The seconds of fuzzing workers' time the pairs not finished are expected to take to
    reach ``t``'s floors, and how many of them past fuzzing: each pair's fuzzing to its floor
    (its seconds; its examples at its rate where they come sooner, in whole slices: a slice
    under the floor ends at its seconds), and its slices' cost past fuzzing (``overheads``). A
    pair never fuzzed takes one slice however low the floors."""
    fuzzing = past = 0.0
    for p in pairs:
        if p.retired or _done(p, t):
            continue
        first = p.slices == 0
        secs = floor_left(p, t)
        rate = examples_rate(p, pairs)
        if rate > 0 and secs > 0:
            by_examples = max(0, t.floor_examples - p.total_examples) / rate
            secs = min(secs, t.slice_seconds * math.ceil(by_examples / t.slice_seconds))
        slices = max(int(first), math.ceil(secs / t.slice_seconds))
        if slices == 0:
            continue
        fuzzing += secs
        past += overheads.expected(p, first=first, fuzzing=secs) + (
            slices - 1
        ) * overheads.expected(p, first=False, fuzzing=0.0)
    return fuzzing + past, past


def shrink_seconds(t: Tunables, compile_cost: float, left: float, *, fuzzing: bool = True) -> float:
    """The seconds a slice has to shrink what it finds past its fuzzing (``fuzzing`` False: a
    compile ladder's slice, which only shrinks), ``left`` seconds of the budget left after its
    fuzzing. Shrinking a new bug may take a while, and longer where each new shape compiles: a
    GLA pair (5 s a compile on an H100) spent its 30 s in two cut stages on the compiled backend
    and left none for the interpreter's search (665,600 elements, CPU: 272). But it ends, with
    the bugs' settling and 5 s for the summary, before the campaign stops what still runs
    (``end_grace`` past its budget): a slice begun near the end was killed there while it
    settled a bug, and its shrinking was lost."""
    shrink = max(
        30.0,
        2 * t.slice_seconds if fuzzing else 0.0,
        min(t.shrink_max, t.shrink_compiles * compile_cost),
    )
    end = left + t.end_grace - t.settle_seconds - 5.0
    return min(shrink, max(1.0, end) if fuzzing else end)


def compile_cost(pair: PairState, pairs: Iterable[PairState], unknown: float = 0.0) -> float:
    """The seconds one compile of ``pair``'s kernels is expected to take: the mean of its
    compiles so far (warm-ups included; loads of kernels compiled elsewhere not), else of the
    ``pairs`` of its family on its backend (a mutant's kernels are its target's, edited);
    ``unknown`` where nothing is known."""

    def totals(ps: Iterable[PairState]) -> tuple[float, float]:
        secs = n = 0.0
        for p in ps:
            st = p.stats
            secs += st["compile_seconds"] - st["cache_load_seconds"] + st["precompile_seconds"]
            n += st["compiles"] - st["cache_loads"] + st["precompiles"]
        return secs, n

    secs, n = totals([pair])
    if n <= 0:
        secs, n = totals(
            p for p in pairs if p.backend == pair.backend and p.target.family == pair.target.family
        )
    return secs / n if n > 0 else unknown


def warm_compile(pair: PairState, pairs: Iterable[PairState]) -> float:
    """The compile seconds a warm-up of ``pair`` is expected to take: the mean of the first
    warm-ups of its family's pairs on its backend (what fuzzing it cold would compile on the
    fuzzing path); infinite where none has ended (it may be dear: it waits its turn)."""
    firsts = [
        p.first_warm_compile
        for p in pairs
        if p.backend == pair.backend
        and p.target.family == pair.target.family
        and p.first_warm_compile is not None
    ]
    return sum(firsts) / len(firsts) if firsts else math.inf


def far_from_warm(
    queue: Sequence[PairState], pairs: Sequence[PairState], compile_workers: int, t: Tunables
) -> set[str]:
    """The pairs of the compile workers' ``queue`` whose warm-up is more than ``cold_wait``
    seconds away, and more than ``cold_compile_factor`` times the compile seconds of its
    family's warm-ups, by their place in the queue and the warm-ups measured so far (none before
    one has ended): a fuzzing worker may take one and compile what it draws, within the compile
    share, rather than leave it unfuzzed until the compile workers reach it (an H200 campaign
    left 40 mutant pairs unfuzzed so). A pair that compiles dear waits longer: on an H100, GLA
    mutant pairs taken cold paid 20-60 s of compiles each on the fuzzing path, a third of the
    campaign's there. Returns their keys."""
    done = [p.warm_seconds / p.warm_count for p in pairs if p.warm_count]
    if not done or not compile_workers:
        return set()
    mean = sum(done) / len(done)
    return {
        p.key
        for k, p in enumerate(queue)
        if (k // compile_workers + 1) * mean
        > max(t.cold_wait, t.cold_compile_factor * warm_compile(p, pairs))
    }


# Of a budget, what the floors may take when they are scaled to fit it (the rest: slices past
# the floors, shrinking, the last slices that run over).
FLOORS_SHARE = 0.8
# Floors are never lowered below this many examples a pair (or their seconds' share): lowered
# to what they had had, none, 7 of a CPU campaign's 10 planted pairs ran one example each.
MIN_FLOOR_EXAMPLES = 10


def fitted_floors(config: Any, pairs: list[PairState]) -> tuple[Tunables, dict[str, Any]]:
    """A campaign's tunables (``config``: its :class:`CampaignConfig`), and what its report and console say of its floors. Where its
    budget is shorter than every pair's floor needs (``estimates.floors_need``: a newcomer's
    two-minute run of every target and mutant needed over an hour), the floors are scaled to
    fit it, unless asked for: every pair still gets its share, and the run says so and what
    the full floors would need."""
    t = Tunables.of(config, pairs=len(pairs))
    need = floors_need(pairs, t, config.workers)
    said: dict[str, Any] = {
        "examples": t.floor_examples,
        "seconds": t.floor_seconds,
        "real_seconds": t.real_floor_seconds,
        "need_seconds": round(need),
        "full": [t.floor_examples, t.floor_seconds, t.real_floor_seconds],
        "scaled": 1.0,  # up front
        # Lowered as the campaign goes, times this factor, where compiling and shrinking leave
        # too little of the budget for them (:func:`refit`): not floors asked for.
        "fit_to_budget": bool(config.scale_floors),
        "lowered": 1.0,
        "budget": config.budget,
    }
    if config.scale_floors and pairs and config.budget * FLOORS_SHARE < need:
        factor = config.budget * FLOORS_SHARE / need
        t = scaled_floors(t, factor)
        said.update(
            examples=t.floor_examples,
            seconds=round(t.floor_seconds, 2),
            real_seconds=round(t.real_floor_seconds, 2),
            scaled=round(factor, 4),
        )
    return t, said


def full_floors(t: Tunables, floors: dict[str, Any] | None) -> Tunables | None:
    """``t`` with the full floors, where they were scaled or lowered to fit the budget (None:
    they were not). Once every pair has had the floors it holds, the time left brings pairs on
    toward the full ones, the furthest behind first (``picks.pick``): a forecast counts every
    pair's full floor, and most mutants finish in a slice or two (a 450 s H200 campaign scaled
    its floors to 40%, retired 70 of 111 pairs as finished, then gave 930 examples to a
    passing softmax while 25 real pairs stayed at 83-148)."""
    if not floors or "full" not in floors or floors["scaled"] * floors["lowered"] >= 1.0:
        return None
    examples, seconds, real = floors["full"]
    return t.replace(floor_examples=examples, floor_seconds=seconds, real_floor_seconds=real)


def floors_text(floors: dict[str, Any], pairs: int, budget: float) -> str | None:
    """The console's word on scaled floors (None: the full floors fit the budget)."""
    if floors["scaled"] >= 1.0:
        return None
    return (
        f"the budget ({budget:g} s) is short of what {pairs} pair(s) need to reach their full "
        f"floors (about {floors['need_seconds']:,} s of fuzzing; --budget "
        f"{round(floors['need_seconds'] / FLOORS_SHARE)} covers them): floors scaled to "
        f"{100 * floors['scaled']:.2g}%, {floors['examples']} examples or "
        f"{floors['seconds']:g} s of fuzzing a pair ({floors['real_seconds']:g} s a real "
        "target's), then toward the full ones as time is left; lowered, and said, where "
        "compiling and shrinking what is found leave too little of it"
    )


def refitted_floors(
    pairs: Sequence[PairState],
    fitted: Tunables,
    t: Tunables,
    overheads: Overheads,
    *,
    left: float,
    workers: int,
    factor: float = 1.0,
) -> tuple[float, float] | None:
    """Lower floors that the ``left`` seconds of ``workers`` fuzzing workers can still give
    every pair not finished, where its floors now (``t``: those ``fitted`` up front times
    ``factor``) no longer fit: what the slices still to come are expected to take
    (:func:`floors_left`: their fuzzing, and past it, compiling and shrinking as measured so
    far) is more than those seconds. The floors are then lowered (a smaller factor, never below
    what every pair not finished has had nor ``MIN_FLOOR_EXAMPLES``) till they take
    ``FLOORS_SHARE`` of those seconds: the rest is for what the estimates miss and the last
    slices that run over. Returns (that factor, the seconds past fuzzing), or None: they fit."""
    have = max(0.0, left) * max(1, workers)
    if floors_left(pairs, t, overheads)[0] <= have:
        return None
    want = FLOORS_SHARE * have
    unfinished = [p for p in pairs if not p.retired and not _done(p, t)]
    high = factor
    low = min(high, min((reached(p, fitted) for p in unfinished), default=1.0))
    low = max(low, min(high, MIN_FLOOR_EXAMPLES / max(1, fitted.floor_examples)))
    for _ in range(30):  # (the seconds taken grow with the factor)
        mid = (low + high) / 2
        if floors_left(pairs, scaled_floors(fitted, mid), overheads)[0] <= want:
            low = mid
        else:
            high = mid
    return low, floors_left(pairs, scaled_floors(fitted, low), overheads)[1]


def refit(
    pairs: Sequence[PairState],
    fitted: Tunables,
    t: Tunables,
    overheads: Overheads,
    floors: dict[str, Any] | None,
    *,
    left: float | None,
    workers: int,
) -> tuple[Tunables, str | None]:
    """A campaign's tunables ``t`` with its floors lowered where the ``left`` seconds of the
    budget no longer give them (:func:`refitted_floors`), and what to say of it (None: kept).
    Only floors fitted to the budget are (``floors``: what the campaign says of them, from
    :func:`fitted_floors`, updated in place; None, or floors asked for: kept). Never raised
    again: what the first slices measured forecasts the rest badly (floors raised so went
    from 3.3% of the full ones to 0%, 4.8%, 0%, 3.8% in one run)."""
    if left is None or floors is None or not floors.get("fit_to_budget"):
        return t, None
    if left < t.slice_seconds:  # no slice to come: nothing to plan (nor to explain away)
        return t, None
    if left > floors.get("budget", 0.0) / 2 and any(p.slices == 0 for p in pairs):
        # Too early to forecast: the first slices compile and shrink the mutants' bugs, and an
        # H200 campaign that forecast the rest from its first 33 lowered its floors to 9% in
        # 50 s (its real Pallas pairs then ran 25-68 examples of a 450 s budget).
        return t, None
    now = floors["lowered"]
    fit = refitted_floors(pairs, fitted, t, overheads, left=left, workers=workers, factor=now)
    if fit is None or round(fit[0], 4) >= now:
        return t, None
    factor, past = fit
    t = scaled_floors(fitted, factor)
    floors.update(
        examples=t.floor_examples,
        seconds=t.floor_seconds,
        real_seconds=t.real_floor_seconds,
        lowered=round(factor, 4),
    )
    return t, refit_text(floors, past, left, overheads)


def refit_text(floors: dict[str, Any], past: float, left: float, overheads: Overheads) -> str:
    """The console's word on floors lowered as the campaign went (:func:`refit`)."""
    spent, slices = overheads.total()
    return (
        f"floors lowered to {100 * floors['scaled'] * floors['lowered']:.2g}% of the full ones, "
        f"{floors['examples']} examples or {floors['seconds']:g} s of fuzzing a pair "
        f"({floors['real_seconds']:g} s a real target's): of the {left:.0f} s left, the slices to "
        f"come are expected to spend {past:.0f} s compiling and shrinking what they find "
        f"({spent:.0f} s in the {slices} slices so far)"
    )
