"""The numbers a campaign's scheduling policy runs by, in one frozen record.

Each default cites what it was set from; ``Tunables.of(config)`` takes a campaign's own (its
floors, its quota, its number of compile workers) from its :class:`CampaignConfig`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tunables:
    """What the scheduling policy (:mod:`fuzz.campaign.policy`) decides by.

    Attributes:
        floor_examples: every pair is fuzzed this many examples...
        floor_seconds: ... or this many seconds (compiling not counted) first.
        real_floor_seconds: a real target's seconds floor: what the nightly job is for gets
            more before the bandit (a GPU campaign's real Pallas attention pair met a 30 s
            floor at 164 examples).
        examples: a pair is done once it has run this many examples (None: no quota).
        slice_seconds: a slice's fuzzing seconds (compiling not counted).
        seed: the campaign's seed (each slice's seed derives from it and the slice's id).
        compile_ahead: compile workers warm pairs up (their kernels compiled ahead).
        warm_quiet: a warm-up ends after this many examples in a row compiled nothing.
        max_deaths: deaths on bugs found before that retire a pair.
        new_class_weight: a new bug counts as much as this many new coverage features.
        max_warms: warm-ups of one pair at most (each draws twice as long as the one before).
        cold_wait: a fuzzing worker takes a cold pair whose warm-up is further away than this...
        cold_compile_factor: ... and than this many times the compile seconds of its warm-up.
        shrink_compiles: a slice's time to shrink a new bug is at least this many of its
            compiles...
        shrink_max: ... up to this many seconds.
        warm_seconds: a pair's first warm-up ends after this many seconds (the next, twice as
            many).
        examples_floor_factor: a pair short of the floor's examples is fuzzed to this many
            times its floor's seconds.
        end_grace: how long past its budget the campaign waits for running slices
            (:func:`end_grace`); settle_seconds: the time a hunt is given past its hard limit to
            settle its bugs (``fuzz.engine.SETTLE_SECONDS``). A slice's time to shrink ends
            before both are spent.
        affinity: the weight of a pair another worker has loaded, once every floor is met.
        rewarm_after: seconds its fuzzing compiled since its last warm-up that call for another.
        rewarm_refused: or examples of new structures it refused since (its compile share spent:
            they would have compiled on the fuzzing path), which call for another warm-up to
            compile them ahead.
        share_pairs: a worker with no free pair fuzzes one another worker is fuzzing (each slice
            its own seed), rather than idle: on a host of several GPUs a plugin's few kernels
            would leave most workers idle.
        warm_running: a compile worker warms up a pair being fuzzed too (its fuzzing loads what
            the warm-up compiled from the caches), not only an idle one: with as many pairs as
            fuzzing workers none was ever idle, and the compile workers stood by.
        floor_slices: a slice of a pair under its floor ends at its floor's seconds: the floor
            is the pair's share of a short budget (a pair at 3 s of a 3.69 s floor would take
            another whole 3 s slice; and floors lowered below a slice would shorten nothing).
    """

    floor_examples: int = 200
    floor_seconds: float = 30.0
    real_floor_seconds: float = 60.0
    examples: int | None = None
    slice_seconds: float = 3.0
    seed: int = 0
    compile_ahead: bool = False
    warm_quiet: int = 8
    max_deaths: int = 2
    new_class_weight: float = 10.0
    max_warms: int = 4
    cold_wait: float = 30.0
    cold_compile_factor: float = 3.0
    shrink_compiles: float = 12.0
    shrink_max: float = 90.0
    warm_seconds: float = 8.0
    examples_floor_factor: float = 3.0
    affinity: float = 0.8
    rewarm_after: float = 2.0
    rewarm_refused: int = 10
    share_pairs: bool = True
    warm_running: bool = True
    floor_slices: bool = True
    end_grace: float = 15.0
    settle_seconds: float = 15.0

    @classmethod
    def of(cls, config: Any, *, pairs: int) -> Tunables:
        """A campaign's tunables: its :class:`CampaignConfig`'s floors, quota, seed and compile
        workers, and its slice length for ``pairs`` pairs (:func:`slice_seconds`)."""
        return cls(
            floor_examples=config.floor_examples,
            floor_seconds=config.floor_seconds,
            real_floor_seconds=config.real_floor_seconds,
            examples=config.examples,
            slice_seconds=config.slice_seconds or slice_seconds(config.budget, pairs),
            seed=config.seed,
            compile_ahead=bool(config.compile_workers),
            warm_quiet=config.warm_quiet,
            max_deaths=config.max_deaths,
            end_grace=end_grace(config.budget),
        )

    def replace(self, **changes: Any) -> Tunables:
        return dataclasses.replace(self, **changes)


def end_grace(budget: float) -> float:
    """How long past its budget a campaign waits for the slices still running (what they settle,
    their summaries) before it stops them: a tenth of the budget, at least 15 s."""
    return max(15.0, 0.1 * budget)


def slice_seconds(budget: float, pairs: int) -> float:
    """A slice's fuzzing seconds for ``pairs`` pairs sharing ``budget``: a quarter of an even
    split, at least 3 s (less when the budget cannot give every pair one slice of 3 s), at most
    60 s."""
    n = max(pairs, 1)
    low = min(3.0, max(0.5, budget / n))
    return min(60.0, max(low, budget / (4 * n)))


# The event a hunt counts for an example it refused before its launch: it would have compiled
# past the pair's compile share (``fuzz.engine``).
REFUSED = "rejected: would compile"
