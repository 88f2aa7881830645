"""Strategies draw only what a kernel supports: tiles, head dims, dtypes and optional features
given to a family's strategy narrow its cases, and nothing else changes how they are drawn."""

import pytest
from hypothesis import given, settings
from hypothesis.errors import InvalidArgument

from strategies.attention import attention_cases, decode_cases, varlen_cases
from strategies.jagged_softmax import jagged_softmax_cases
from strategies.simple_gla import simple_gla_bwd_cases, simple_gla_fwd_cases
from strategies.softmax import softmax_cases

FEW = settings(max_examples=40, deadline=None, database=None, derandomize=True)


@FEW
@given(softmax_cases("small", block_n=(64,), block_m=(2,), features=frozenset()))
def test_softmax_without_optional_features(case):
    assert set(case.inputs) == {"x"}
    assert case.params["scale"] is None
    assert (case.params["block_m"], case.params["block_n"]) == (2, 64)


@FEW
@given(
    attention_cases(
        "small",
        dtypes=("float16",),
        block_pairs=((64, 128),),
        head_dims=(8,),
        features=frozenset({"causal"}),
    )
)
def test_attention_with_only_causal(case):
    q, k = case.inputs["q"], case.inputs["k"]
    assert set(case.inputs) == {"q", "k", "v"}
    assert q.dtype.name == "float16" and q.shape[-1] == 8 and q.shape[1] == k.shape[1]
    assert (case.params["block_q"], case.params["block_k"]) == (64, 128)  # a kernel's own tiles
    p = case.params
    assert p["window"] is None and p["softcap"] is None and p["alibi"] is None
    assert p["scale"] is None


@FEW
@given(varlen_cases("small", features=frozenset({"gqa", "scale"})))
def test_varlen_with_gqa_and_scale_only(case):
    assert not case.params["causal"] and case.params["window"] is None
    assert "alibi_slopes" not in case.inputs


@FEW
@given(decode_cases("small", blocks_k=(32,), num_splits=(4,), features=frozenset({"splits"})))
def test_decode_with_splits_only(case):
    assert case.params["block_k"] == 32 and case.params["num_splits"] == 4
    assert case.inputs["q"].shape[1] == case.inputs["k"].shape[1]


@FEW
@given(decode_cases("small", features=frozenset()))
def test_decode_without_splits_has_one(case):
    assert case.params["num_splits"] == 1


@FEW
@given(
    simple_gla_fwd_cases(
        "small", chunk_sizes=(64,), head_dims=(32,), features=frozenset({"g_gamma", "final_state"})
    )
)
def test_gla_forward_with_decay_and_final_state_only(case):
    assert set(case.inputs) == {"q", "k", "v", "g_gamma"}
    assert case.params["chunk_size"] == 64 and case.params["scale"] is None
    assert case.inputs["q"].shape[-1] == 32 and case.inputs["v"].shape[-1] == 32


@FEW
@given(simple_gla_bwd_cases("small", features=frozenset({"g", "varlen", "dht"})))
def test_gla_backward_with_gates_varlen_and_dht(case):
    assert "g" in case.inputs and "g_gamma" not in case.inputs and "h0" not in case.inputs


@FEW
@given(jagged_softmax_cases("small", block_n=(16,), block_m=(8,), num_programs=(2,)))
def test_jagged_with_its_own_tiles(case):
    assert (case.params["block_n"], case.params["block_m"], case.params["num_programs"]) == (
        16,
        8,
        2,
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: attention_cases(features={"causal", "sliding"}), "sliding"),
        (lambda: attention_cases(features="causal"), "features"),
        (lambda: attention_cases(block_pairs=()), "block_pairs"),
        (lambda: attention_cases(head_dims=(0,)), "head_dims"),
        (lambda: decode_cases(num_splits=(0,)), "num_splits"),
        (lambda: softmax_cases(features=frozenset({"bias", "mask", "scale", "x"})), "'x'"),
        (lambda: simple_gla_fwd_cases(features=frozenset({"varlen"})), "decay form"),
        (lambda: simple_gla_fwd_cases(head_dims=(-1,)), "head_dims"),
    ],
)
def test_bad_capabilities_are_errors_naming_them(make, message):
    with pytest.raises(InvalidArgument, match=message):
        make().example()


@FEW
@given(
    attention_cases(
        "large",
        dtypes=("float32",),
        block_pairs=((128, 128), (64, 32)),
        head_dims=(256, 128, 16),
    )
)
def test_given_tiles_are_fitted_to_the_head_dim_among_themselves(case):
    """Tiles given to the strategy (a kernel's own, or a campaign's narrowing of the scale's)
    are cut for a large head dim as the scale's are (fp32 tiles of 128 x 128 with head dim 256
    overflowed an H100's shared memory), to the largest given size within the budget, never to
    a size not given."""
    d = case.inputs["q"].shape[-1]
    bq, bk = case.params["block_q"], case.params["block_k"]
    assert {bq, bk} <= {128, 64, 32}
    if d == 256:  # 8192 / 256 = 32: only 32 fits
        assert (bq, bk) == (32, 32)
    elif d == 128:
        assert bq <= 64 and bk <= 64
    else:
        assert (bq, bk) in ((128, 128), (64, 32))
