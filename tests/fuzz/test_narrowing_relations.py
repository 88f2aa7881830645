"""A run's compile-time choices (``fuzz.narrowing.run_narrowing``) cover the relations between a
tile pair's parts before repeating one: with two choices, a tile pair unlike the simplest
``(64, 64)``; with one more (a campaign's first widening), both ``block_q > block_k`` and
``block_q < block_k``. A mutant whose loop bound is wrong at the causal diagonal only where
``block_q > block_k`` was missed on both GPU backends of a campaign: its pairs met such a pair
only late, once widened."""

from __future__ import annotations

import pytest

from fuzz.narrowing import _relation, _relations_first, run_narrowing
from fuzz.profiles import get_profile
from fuzz.target import get


def _sign(pair):
    return (pair[0] > pair[1]) - (pair[0] < pair[1])


@pytest.mark.parametrize("name", ["attention", "attention_mutant_causal_loop_bound"])
def test_tile_pairs_cover_each_relation_first(name):
    gpu = get_profile("gpu")
    target = get(name)
    for seed in range(40):
        two = run_narrowing(target, gpu, seed)["block_pairs"]
        three = run_narrowing(target, gpu, seed, widen=1)["block_pairs"]
        assert two[0] == (64, 64) and _sign(two[1]) != 0, (seed, two)
        assert three[:2] == two  # prefix-stable: what a run recorded keeps its meaning
        assert {_sign(p) for p in three[1:]} == {-1, 1}, (seed, three)
    # Still the seed's choice among each relation's pairs.
    seconds = {run_narrowing(target, gpu, s)["block_pairs"][1] for s in range(40)}
    assert len(seconds) >= 4


def test_values_without_parts_keep_the_seeds_order():
    assert _relation(16) is None and _relation((1.0, 2.0)) == (-1,)
    assert _relations_first(16, [64, 8, 32]) == [64, 8, 32]
    assert _relations_first((2, 2), [(4, 2), (8, 2), (2, 4), (1, 1)]) == [
        (4, 2),
        (2, 4),
        (8, 2),
        (1, 1),
    ]


def test_a_decode_run_draws_its_split_counts_from_a_few():
    """The split count is a compile-time choice of a decode kernel built per count (a Pallas
    kernel's ``n_splits``): a planted decode bug that needs two splits went unmet for 300
    examples on an H200, its compile share holding the pair to the one-split variants it
    compiled first. It is a variant dimension now: narrowed, warmed up, widened."""
    from fuzz.families import variant_space
    from fuzz.target import generate

    gpu = get_profile("gpu")
    target = get("attention_decode")
    assert variant_space(target, gpu.scale)["num_splits"] == (1, 2, 4, 8, 16)
    narrowing = run_narrowing(target, gpu, 1)
    splits = narrowing["num_splits"]
    assert splits[0] == 1 and len(splits) == 2
    assert len({run_narrowing(target, gpu, s)["num_splits"][1] for s in range(20)}) >= 3
    drawn = set()

    def keep(case):
        drawn.add(case.params["num_splits"])

    generate(target.strategy(gpu.scale, **narrowing), keep, examples=60, seed=0)
    assert drawn == set(splits)


def test_scalar_values_spread_over_octaves():
    """A run's head dims take values far from the simplest more often than a uniform draw
    would (``_spread_in_octaves``): fla's dq bug needs K = 16 with V >= 64, and a campaign whose
    seed took (16, 32) met V >= 64 only once widened. Attention's dims after 16 (64, 128, 32, 1,
    80, 96, 8, 256) lie 2.49 octaves from it on average; weighed by that distance, the value
    taken second lies 2.97 octaves away on average (the sum of squares over the sum)."""
    import math

    from fuzz.narrowing import _spread_in_octaves

    gpu = get_profile("gpu")
    target = get("attention")
    seconds = [run_narrowing(target, gpu, s)["head_dims"][1] for s in range(300)]
    mean = sum(abs(math.log2(v / 16)) for v in seconds) / len(seconds)
    assert mean > 2.75, mean  # uniformly 2.49 (sd of a 300-run mean: 0.07)
    assert len(set(seconds)) >= 6  # still the seed's choice among them
    for seed in range(20):  # prefix-stable: a widening only appends
        two = run_narrowing(target, gpu, seed)["head_dims"]
        assert run_narrowing(target, gpu, seed, widen=2)["head_dims"][:2] == two
    import random

    # Each value taken is weighed by its distance to the nearest one taken before: after 16 and
    # 256, 64 (two octaves from both) is drawn more often than 32 or 128 (one octave).
    thirds = [_spread_in_octaves(16, [256, 32, 64, 128], random.Random(s)) for s in range(400)]
    after_256 = [o[1] for o in thirds if o[0] == 256]
    assert after_256.count(64) > max(after_256.count(32), after_256.count(128))
    # Anything but positive numbers keeps the seed's order.
    assert _spread_in_octaves("float32", ["float16", "bfloat16"], random.Random(0)) == [
        "float16",
        "bfloat16",
    ]
    assert _spread_in_octaves(0, [3, 1], random.Random(0)) == [3, 1]
