"""A run's compile-time choices: the kernel variants a hunt draws its cases from.

A compiled backend compiles a kernel per variant (tile sizes, head dimensions, chunk sizes...):
a profile that narrows the variant space (``Profile.variant_choices``) has each run draw from a
few values per dimension, the simplest first and others picked with the run's seed
(:func:`run_narrowing`; tile pairs of each relation between their parts first, sizes spread
over magnitudes), so that a run compiles few kernels and runs with other seeds cover others.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any

from fuzz.families import variant_space
from fuzz.profiles import HuntOptions, Profile
from fuzz.target import Target


def run_narrowing(
    target: Target, profile: Profile | HuntOptions, seed: int | None, *, widen: int = 0
) -> dict[str, tuple[Any, ...]]:
    """This run's compile-time choices (``Profile.variant_choices``): per dimension of the
    target's variant space with more values than that, the simplest value first, then others
    drawn with ``seed``. Empty where the profile draws from everything or the family is not
    built in. For a target whose library autotunes its kernels (``Library.autotune``), the
    configs too (:data:`AUTOTUNE`): each kernel's first config and others picked by keys drawn
    with ``seed`` (``fuzz.triton_runtime.positions``), as many as a dimension's values.

    ``widen`` adds that many more values per dimension (while the space has them), after the
    choices of a smaller ``widen`` with the same seed: a campaign pair that has had its floor
    with its choices grows them (``fuzz.campaign``), and what it recorded still means what it
    meant (strategies draw a choice by its place: a reused structure, a saved example)."""
    k = profile.variant_choices
    if k is None:
        return {}
    if not isinstance(widen, int) or isinstance(widen, bool) or widen < 0:
        raise ValueError(f"widen={widen!r} must be an integer >= 0")
    # A seeded run (derandomized, or a campaign's slice) picks the same values again; an unseeded
    # one (Hypothesis's own randomness) other values each time.
    rng = random.Random(f"{target.name}|{seed}") if seed is not None else random.Random()
    narrowing = {}
    for dim, choices in variant_space(target, profile.scale).items():
        # Distinct values after the simplest (a space lists a value twice to weight its draws),
        # in an order of the seed's: the first k - 1 + widen of them are taken.
        rest = [c for i, c in enumerate(choices) if c != choices[0] and c not in choices[:i]]
        if len(rest) + 1 <= k:
            continue
        rng.shuffle(rest)
        spread = random.Random(f"{target.name}|{seed}|{dim}" if seed is not None else None)
        rest = _spread_in_octaves(choices[0], rest, spread)
        narrowing[dim] = (choices[0], *_relations_first(choices[0], rest)[: k - 1 + widen])
    if getattr(target.library, "autotune", False):
        # Every config of every autotuned kernel is a compile: fla's backward launches five
        # autotuned kernels of 3 to 48 configs each, and its GPU campaigns refused 744-1,901
        # new structures under the compile share. Keys drawn after the dimensions' shuffles
        # (those stay as they were), the same prefix whatever ``widen``.
        keys = [rng.randrange(1, 2**31) for _ in range(AUTOTUNE_KEYS)]
        narrowing[AUTOTUNE] = (0, *keys[: k - 1 + widen])
    return narrowing


# The narrowing's entry for autotuned configs: (0, key, ...), 0 for each kernel's first config,
# each key one more config of each kernel (``fuzz.triton_runtime.positions``); not a keyword of
# the target's strategy (``strategy_keywords``). At most AUTOTUNE_KEYS keys: widening stops there.
AUTOTUNE = "autotune"
AUTOTUNE_KEYS = 7


def said_added(dim: str, added: list[Any]) -> str:
    """One dimension's values a widening added, as a console says them: the autotuned configs'
    keys are no values to read, but how many more configs each kernel may run."""
    if dim == AUTOTUNE:
        return f"configs of each autotuned kernel + {len(added)}"
    return f"{dim} + {', '.join(map(str, added))}"


def strategy_keywords(narrowing: dict[str, tuple[Any, ...]]) -> dict[str, tuple[Any, ...]]:
    """``narrowing`` as the target's strategy takes it: the autotuned configs' entry left out
    (the launch's chooser reads it)."""
    return {k: v for k, v in narrowing.items() if k != AUTOTUNE}


def _relation(value: Any) -> tuple[int, ...] | None:
    """How the parts of a tuple of numbers compare, in order (-1, 0, 1 each: a tile pair's
    ``block_q`` below, at or above its ``block_k``); None for anything else."""
    if not isinstance(value, tuple) or len(value) < 2:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return None
    return tuple((a > b) - (a < b) for a, b in itertools.pairwise(value))


def _spread_in_octaves(simplest: Any, rest: list[Any], rng: random.Random) -> list[Any]:
    """``rest`` (in the seed's order) reordered so that the values a run takes spread over
    magnitudes: each next value drawn with a probability proportional to its distance in
    octaves (``|log2(v / t)|``) from the nearest value already taken, the simplest first
    (seeding as k-means++ does, with the distance itself as weight). A tile-based kernel
    branches on a dimension against its block constants (one partial tile, several tiles, a
    loop over the head dimension's blocks). fla's head dims are 16 (the simplest) and 8 to 256:
    a uniform draw of one more took 8 or 32 in 2 runs of 5, all three within one tile of the
    usual blocks; weighed by octaves, 64, 128 or 256 come in 9 of 11. Values that are not all
    positive numbers keep the seed's order; the draw uses ``rng`` alone, so a seeded run takes
    the same values."""
    numbers = [simplest, *rest]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in numbers):
        return rest
    taken, pool, out = [simplest], list(rest), list[Any]()
    while pool:
        far = [min(abs(math.log2(v / t)) for t in taken) for v in pool]
        if not sum(far):
            return [*out, *pool]
        at, pick = rng.random() * sum(far), 0
        while pick < len(pool) - 1 and at >= far[pick]:
            at -= far[pick]
            pick += 1
        out.append(pool.pop(pick))
        taken.append(out[-1])
    return out


def _relations_first(simplest: Any, rest: list[Any]) -> list[Any]:
    """``rest`` (in the seed's order) reordered so that each relation between a value's parts
    (:func:`_relation`) comes in once before any comes twice, those unlike the simplest's
    first: the few values a run takes then hold a tile pair with ``block_q > block_k`` and one
    with ``block_q < block_k``, where a bug of the loop bounds at the causal diagonal needs the
    former (a campaign's pairs met one only once widened, if at all). Values without parts to
    compare keep the seed's order."""
    if _relation(simplest) is None or any(_relation(v) is None for v in rest):
        return rest
    groups: dict[tuple[int, ...], list[Any]] = {}
    for v in rest:
        groups.setdefault(_relation(v), []).append(v)  # type: ignore[arg-type]
    taken = dict.fromkeys(groups, 0)
    taken[_relation(simplest)] = 1  # type: ignore[index]
    order = list(groups)  # the seed's order among relations taken as often
    out: list[Any] = []
    while any(groups.values()):
        r = min((r for r in order if groups[r]), key=lambda r: taken[r])
        out.append(groups[r].pop(0))
        taken[r] += 1
    return out
