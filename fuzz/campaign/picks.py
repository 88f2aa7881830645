"""Which pair the scheduling policy gives a worker next: small pure functions of the pairs and the
tunables, in the order they apply (:func:`pick` for a fuzzing worker, :func:`next_ladder` then
:func:`next_warm_up` for a compile worker). :class:`fuzz.campaign.policy.SchedulingPolicy` asks
them with its pairs, its tunables as fitted so far (the floors may have been lowered) and its
workers; like the policy, they have no processes, clock or I/O (``tests/fuzz/test_layers.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from fuzz.campaign import estimates
from fuzz.campaign.pairs import PairState, Warmth
from fuzz.campaign.tunables import REFUSED, Tunables


def done(pair: PairState, t: Tunables) -> bool:
    """Whether ``pair`` has run the examples the campaign asked of each pair (a quota)."""
    quota = t.examples
    return quota is not None and pair.examples >= quota


def pick(
    pairs: Sequence[PairState],
    t: Tunables,
    loaded: set[str] | frozenset[str],
    compile_workers: int,
    full: Tunables | None = None,
) -> PairState | None:
    """The pair the next fuzzing slice fuzzes, for a worker that has ``loaded`` these pairs:
    every pair compiled ahead once (real targets before mutants), then every pair to its
    floor (real targets first, then those the worker has fuzzed before, the least fuzzed
    first; pairs not compiled ahead last, those that compile cheapest first), then the pairs
    with unshrunk bugs to resume (``BugLedger.resumable``), then those
    that met it by seconds short of its examples (for up to ``examples_floor_factor`` times
    its seconds), then those short of the ``full`` floors where ``t``'s were scaled to the
    budget (:func:`estimates.full_floors`), then the pairs that found new bugs or coverage
    lately, per fuzzing second, with an exploration bonus (:func:`estimates.ucb`; a pair
    another worker has loaded counts at ``affinity``). Compile time is a setup cost: it counts
    neither toward a floor nor against a pair's rate. Where a pair's slices run matters on a compiled backend: a
    process that fuzzed the pair has its kernels loaded, another loads them again from the
    caches on disk (JAX traces and lowers them again), which is compile time on the fuzzing
    path."""
    ahead = compile_workers > 0
    free = [p for p in pairs if not p.retired and not p.running and not done(p, t)]
    active = [p for p in free if p.warmth is Warmth.READY or not ahead]
    if ahead:  # and the cold pairs whose warm-up is far away: none waits for its turn
        far = estimates.far_from_warm(cold_queue(pairs), pairs, compile_workers, t)
        active += [p for p in free if p.key in far]
    if not active:
        return shared(pairs, t, loaded, ahead) if t.share_pairs else None
    under = [p for p in active if estimates.floor_progress(p, t) < 1.0]
    if under:
        return min(under, key=lambda p: under_floor_order(p, pairs, t, loaded))
    # Then a pair with bugs its slices left unshrunk: its next slice shrinks them first, and
    # a row's small reproducer is what its maintainer runs (4 of 16 planted rows on an H200).
    resuming = [p for p in active if p.ledger.resumable(rechecks=False)]  # (not a check again)
    if resuming:
        return min(resuming, key=lambda p: (p.key not in loaded, p.total_examples))
    # Then the pairs that met their floor by seconds, short of its examples (a slow pair:
    # GPU campaign after GPU campaign left a missed GLA mutant pair on Pallas at 130 of 200
    # examples), up to examples_floor_factor times their floor's seconds.
    short = [p for p in active if estimates.short_of_examples(p, t)]
    if short:
        return min(
            short,
            key=lambda p: (
                p.warmth is Warmth.COLD,
                p.target.is_mutant,
                p.key not in loaded,
                p.total_examples,
            ),
        )
    reach = {} if full is None else {p.key: estimates.floor_progress(p, full) for p in active}
    behind = [p for p in active if reach.get(p.key, 1.0) < 1.0]
    if behind:  # the furthest behind first, by tenths: a worker keeps the ones it has loaded
        return min(
            behind,
            key=lambda p: (
                p.warmth is Warmth.COLD,
                math.floor(10 * reach[p.key]),
                p.key not in loaded,
                reach[p.key],
            ),
        )
    total = sum(p.slices for p in pairs) + 1
    return max(
        active,
        key=lambda p: (
            (1.0 if p.key in loaded else t.affinity) * estimates.ucb(p.rate, p.slices, total)
        ),
    )


def shared(
    pairs: Sequence[PairState], t: Tunables, loaded: set[str] | frozenset[str], ahead: bool
) -> PairState | None:
    """A pair another worker is fuzzing, for a worker that would otherwise idle (more
    workers than pairs left: a plugin's few kernels on a host of several GPUs): under its
    floor the least fuzzed, else the most productive (:func:`estimates.ucb`), each shared
    by the fewest workers first. Its slices draw other examples (each slice its own seed;
    the example database is replayed by a pair's first slice only). Never a pair whose
    first slice or warm-up is in flight, nor a cold one where compiling goes ahead."""
    busy = [
        p
        for p in pairs
        if p.running
        and p.slices > 0
        and not p.retired
        and not done(p, t)
        and (p.warmth is Warmth.READY or not ahead)
    ]
    if not busy:
        return None
    total = sum(p.slices for p in pairs) + 1

    def order(p: PairState) -> tuple[Any, ...]:
        progress = estimates.floor_progress(p, t)
        favour = estimates.ucb(p.rate, p.slices, total) * (1.0 if p.key in loaded else 0.9)
        return (len(p.live), progress >= 1.0, progress if progress < 1.0 else -favour)

    return min(busy, key=order)


def under_floor_order(
    p: PairState, pairs: Sequence[PairState], t: Tunables, loaded: Iterable[str]
) -> tuple[Any, ...]:
    """The order of the pairs under their floor. A cold pair compiles as it goes, on the
    fuzzing path: it comes after the first slice of every pair compiled ahead, and among the
    pairs under their floor after the real targets and the warmed-up mutants, the cheapest
    first (on an H100, GLA mutant pairs taken cold while warmed-up pairs were under their
    floor paid a third of the campaign's compiles on the fuzzing path)."""
    cold = p.warmth is Warmth.COLD
    return (
        p.slices > 0 or cold,
        p.target.is_mutant,
        estimates.compile_cost(p, pairs, math.inf) if cold else 0.0,
        p.slices > 0 and p.key not in loaded,
        estimates.floor_progress(p, t),
        p.slices,
    )


def next_warm_up(pairs: Sequence[PairState], t: Tunables) -> PairState | None:
    """The pair a compile worker warms up next: one not compiled yet (:func:`cold_queue`);
    then a pair whose kernel variants were widened, real targets first, the earliest widened
    first; then again the one whose fuzzing paid the most compile seconds since its last
    warm-up, or refused the most examples that would have compiled (its variants are not
    all compiled: the next warm-up draws more of them), up to ``max_warms`` times. A pair
    being fuzzed meanwhile is warmed up too (what a warm-up compiles its fuzzing loads from
    the caches): with as many pairs as fuzzing workers no pair was ever idle, and on an H200
    the six compile workers of the bundled clients' campaign compiled 165 s in 450 s while
    fla's backward refused 3,112 examples of structures not compiled, and its widened
    variants waited up to 88 s for a warm-up."""
    cold = cold_queue(pairs)
    if cold:
        return cold[0]
    idle = [
        p for p in pairs if not p.retired and not done(p, t) and (t.warm_running or not p.running)
    ]
    wider = [p for p in idle if p.pending is not None and p.warmth is Warmth.READY]
    if wider:  # widened choices, compiled ahead before they are fuzzed
        return min(wider, key=lambda p: (p.target.is_mutant, p.pending_since))
    again = [
        p
        for p in idle
        if p.warmth is Warmth.READY
        and 0 < p.warm_count < t.max_warms
        and (
            p.stats["compile_seconds"] - p.compile_at_warm >= t.rewarm_after
            or p.events[REFUSED] - p.refused_at_warm >= t.rewarm_refused
        )
    ]
    return max(
        again,
        key=lambda p: (
            p.stats["compile_seconds"] - p.compile_at_warm,
            p.events[REFUSED] - p.refused_at_warm,
        ),
        default=None,
    )


def next_ladder(pairs: Sequence[PairState]) -> PairState | None:
    """The pair a compile worker shrinks a bug of next, through kernel variants not compiled
    yet (the compile ladder: ``BugLedger.resumable(ladder=True)``), before any warm-up: a row a
    maintainer runs is worth more than another pair's variants compiled ahead (JAX's ``mha``
    on an H200 kept rows of 16,384-98,304 elements, shrunk through compiled variants only).
    Real targets first, then the least fuzzed; a retired pair's too (a mutant retires once its
    bug is shrunk), not a harness error's. A pair may be fuzzed meanwhile: the shrunk example
    replaces its row."""
    waiting = [p for p in pairs if p.error is None and p.ledger.resumable(ladder=True)]
    return min(waiting, key=lambda p: (p.target.is_mutant, p.total_examples), default=None)


def next_unshrunk(pairs: Sequence[PairState]) -> PairState | None:
    """The pair whose row left unshrunk (``BugLedger.resumable``) a slice past the campaign's
    budget shrinks next (``SlicePlan.finishing``; JAX's varlen ``mha`` kept a row of 524,288
    elements on an H200, met 95 s before the end): real targets first, then the least fuzzed;
    not a harness error's."""
    waiting = [p for p in pairs if p.error is None and p.ledger.resumable()]
    return min(waiting, key=lambda p: (p.target.is_mutant, p.total_examples), default=None)


def next_finishing(pairs: Sequence[PairState], role: str) -> tuple[PairState | None, bool]:
    """Past the budget, the pair a worker of ``role`` shrinks a row of, and whether it is the
    compile ladder's (a compile worker takes those first, :func:`next_ladder`), else a row left
    unshrunk (:func:`next_unshrunk`); (None, False) where none is left."""
    ladder = next_ladder(pairs) if role == "compile" else None
    if ladder is not None:
        return ladder, True
    return next_unshrunk(pairs), False


def cold_queue(pairs: Sequence[PairState]) -> list[PairState]:
    """The pairs not warmed up yet, in the order the compile workers take them: real targets
    first, then the costliest to compile (``estimates.compile_cost``: their family's compiles
    on their backend so far; of a family none has compiled yet, first) first, else the first
    round's order. A pair far down the queue may be fuzzed cold (``estimates.far_from_warm``),
    compiling on the fuzzing path, so it is best one whose compiles are cheap: a GPU
    campaign that warmed its pairs in the first round's order left ten GLA mutant pairs
    (20-60 s of compiles each) to fuzzing workers, a third of its compile seconds on the
    fuzzing path."""
    cold = [p for p in pairs if p.warmth is Warmth.COLD and not p.retired and not p.running]
    return sorted(
        cold, key=lambda p: (p.target.is_mutant, -estimates.compile_cost(p, pairs, math.inf))
    )
