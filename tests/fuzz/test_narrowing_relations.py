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
