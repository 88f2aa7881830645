"""The scheduling policy's estimates: small pure functions of the pairs' counters.

How far a pair is from its floor, what one of its compiles is expected to cost, how far away a
cold pair's warm-up is, and how much a pair is favoured once every floor is met
(:func:`ucb`). :mod:`fuzz.campaign.policy` decides with them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

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
    seconds (its examples may come sooner): an upper bound, compiling and shrinking not
    counted."""
    return sum(floor_seconds(p, t) for p in pairs) / max(1, workers)


def scaled_floors(t: Tunables, factor: float) -> Tunables:
    """``t`` with its floors (examples and seconds) times ``factor`` (a budget shorter than the
    floors need: every pair still gets its share, said up front)."""
    return t.replace(
        floor_examples=max(1, round(t.floor_examples * factor)),
        floor_seconds=t.floor_seconds * factor,
        real_floor_seconds=t.real_floor_seconds * factor,
    )


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
        "scaled": 1.0,
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
        "target's)"
    )
