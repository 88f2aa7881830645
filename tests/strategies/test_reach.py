"""Reach: the inputs the softmax and attention families must occasionally draw on the CPU.

Logits below the finite sentinels kernels mask with (-5e4, -6e4, -1e9) and around -1e5; values
whose unnormalized partial sums overflow fp16; decode caches of thousands of keys; and every
tile, head dim and split count the compiled scale draws, reachable at the small scale too. Each
is found (``hypothesis.find``), reported by its family's hazard where it has one, and still
shrinks to the plainest case when nothing asks for it.
"""

import numpy as np
import pytest
from hypothesis import find, settings

from fuzz.arrays import to_float64
from fuzz.target import get
from fuzz.targets import attention as A
from fuzz.targets import softmax as S
from strategies import attention as SA
from strategies import jagged_softmax as SJ
from strategies import softmax as SS
from strategies.attention import attention_cases, decode_cases
from strategies.jagged_softmax import jagged_softmax_cases
from strategies.softmax import softmax_cases

FIND = settings(max_examples=2000, database=None, deadline=None)


def _names(target, case):
    return {h.split(":")[0] for h in target.hazards_of(case)}


@pytest.mark.parametrize("sentinel", [-5e4, -6e4])
def test_softmax_reaches_valid_logits_at_or_below_each_sentinel(sentinel):
    case = find(
        softmax_cases("small"),
        lambda c: S.logits64(c)[np.isfinite(S.logits64(c))].min(initial=0) <= sentinel,
        settings=FIND,
    )
    assert "below-finite-sentinel" in _names(get("softmax"), case)
    assert f"{sentinel:g}" in next(
        h for h in get("softmax").hazards_of(case) if h.startswith("below")
    )


def test_softmax_reaches_inputs_at_a_minus_1e9_sentinel():
    case = find(
        softmax_cases("small"), lambda c: to_float64(c.inputs["x"]).min() <= -1e9, settings=FIND
    )
    assert case.params["dtype"] != "float16"  # fp16 clips it to -65504


def test_jagged_softmax_reaches_values_below_the_sentinels():
    case = find(
        jagged_softmax_cases("small"),
        lambda c: (
            to_float64(c.inputs["values"])[np.isfinite(to_float64(c.inputs["values"]))].min(
                initial=0
            )
            < -5e4
        ),
        settings=FIND,
    )
    assert case.inputs["values"].size >= 1


def test_attention_reaches_rows_whose_every_logit_is_below_the_sentinels():
    def deep(c):
        lse = A.oracle(c, "cpu")["lse"]
        return lse[np.isfinite(lse)].min(initial=0) < -5e4

    case = find(attention_cases("small"), deep, settings=FIND)
    assert "below-finite-sentinel" in _names(get("attention"), case)


def test_attention_reaches_values_whose_unnormalized_sums_overflow_fp16():
    # Two keys' worth of such values passes 65504 before the division by the row sum.
    def big(c):
        v = to_float64(c.inputs["v"])
        return (
            c.params["dtype"] == "float16"
            and c.inputs["k"].shape[2] >= 2
            and np.abs(v).max() > 3.3e4
        )

    case = find(attention_cases("small"), big, settings=FIND)
    assert np.isfinite(to_float64(case.inputs["v"])).all()


def test_decode_reaches_caches_of_thousands_of_keys():
    case = find(
        decode_cases("small"), lambda c: int(c.inputs["cache_len"].max()) >= 1024, settings=FIND
    )
    assert case.inputs["k"].shape[2] >= 1024


def test_every_compiled_tile_head_dim_and_split_count_is_reachable_at_the_small_scale():
    small, large = SA.LIMITS["small"], SA.LIMITS["large"]
    assert set(large.block_pairs) <= set(small.block_pairs + small.rare_block_pairs)
    assert set(large.blocks_k) <= set(small.blocks_k + small.rare_blocks_k)
    assert set(large.head_dims) <= set(small.head_dims + small.rare_head_dims)
    splits = {s for s in (1, 2, 4, 8, 16) if s <= small.max_splits} | set(small.rare_splits)
    assert {s for s in (1, 2, 4, 8, 16) if s <= large.max_splits} <= splits
    s_small, s_large = SS.LIMITS["small"], SS.LIMITS["large"]
    assert set(s_large.block_n) <= set(s_small.block_n + s_small.rare_block_n)
    assert set(s_large.block_m) <= set(s_small.block_m + s_small.rare_block_m)
    j_small, j_large = SJ.LIMITS["small"], SJ.LIMITS["large"]
    assert set(j_large.block_n) <= set(j_small.block_n + j_small.rare_block_n)
    assert set(j_large.block_m) <= set(j_small.block_m + j_small.rare_block_m)


def test_the_rare_choices_are_drawn_with_few_rows():
    case = find(attention_cases("small"), lambda c: c.params["block_q"] == 128, settings=FIND)
    assert case.inputs["q"].shape[2] <= 256
    case = find(softmax_cases("small"), lambda c: c.params["block_n"] == 1024, settings=FIND)
    assert case.inputs["x"].size <= SS.LIMITS["small"].max_elements


@pytest.mark.parametrize(
    "factory", [softmax_cases, jagged_softmax_cases, attention_cases, decode_cases]
)
def test_shrinking_still_goes_to_the_plainest_case(factory):
    case = find(factory("small"), lambda c: True)
    assert case.params["dtype"] == "float32"
    assert case.size <= 2


def test_occasionally_keeps_the_common_choices_first_and_names_bad_arguments():
    from hypothesis.errors import InvalidArgument

    from strategies.values import occasionally

    assert find(occasionally((3, 4), (99,), one_in=8), lambda x: True) == 3
    assert find(occasionally((3, 4), (99,), one_in=8), lambda x: x > 4) == 99
    assert find(occasionally((3, 4), ()), lambda x: x > 3) == 4
    with pytest.raises(InvalidArgument, match="one_in=2 must be >= 3"):
        occasionally((3, 4), (99,), one_in=2).example()
    with pytest.raises(InvalidArgument, match="common must not be empty"):
        occasionally((), (99,)).example()
