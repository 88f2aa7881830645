"""Attention strategies: invalid arguments, shrink targets, and the boundaries they must reach."""

import math

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis.errors import InvalidArgument

from fuzz.targets.attention import no_key_rows, oracle, seqs
from strategies.attention import attention_cases, decode_cases, varlen_cases

FACTORIES = [attention_cases, varlen_cases, decode_cases]
IDS = ["dense", "varlen", "decode"]


@pytest.mark.parametrize("factory", FACTORIES, ids=IDS)
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scale": "huge"}, "scale='huge' must be one of ('small', 'large')"),
        ({"dtypes": ("float64",)}, "dtypes contains ['float64']"),
        ({"dtypes": "float32"}, "dtypes='float32' must be a sequence"),
        ({"dtypes": ()}, "dtypes must not be empty"),
    ],
)
def test_invalid_arguments_name_the_argument(factory, kwargs, message):
    with pytest.raises(InvalidArgument) as info:
        factory(**kwargs).example()
    assert message in str(info.value)


def test_dense_shrinks_to_one_float32_element_without_mask():
    case = find(attention_cases("small"), lambda c: True)
    assert case.inputs["q"].shape == (1, 1, 1, 1) and case.inputs["k"].shape == (1, 1, 1, 1)
    assert set(case.inputs) == {"q", "k", "v"}
    p = case.params
    assert p["dtype"] == "float32" and not p["causal"] and p["window"] is None
    assert p["scale"] is None and p["softcap"] is None and p["alibi"] is None
    assert case.recipe["level"] == 0.0


def test_varlen_shrinks_to_one_sequence_of_one():
    case = find(varlen_cases("small"), lambda c: True)
    assert case.inputs["cu_seqlens_q"].tolist() == [0, 1]
    assert case.inputs["cu_seqlens_k"].tolist() == [0, 1]
    assert case.inputs["k"].shape[2] == 1  # no guard rows


def test_decode_shrinks_to_a_cache_of_one():
    case = find(decode_cases("small"), lambda c: True)
    assert case.inputs["q"].shape == (1, 1, 1, 1) and case.inputs["k"].shape == (1, 1, 1, 1)
    assert case.inputs["cache_len"].tolist() == [1] and case.params["num_splits"] == 1


def test_standard_slopes_come_first():
    case = find(attention_cases("small"), lambda c: c.params["alibi"] is not None)
    assert case.params["alibi"] == "standard"
    assert case.inputs["alibi_slopes"].tolist() == [2.0**-8]  # one head: 2 ** (-8 * 1 / 1)


def test_a_row_without_keys_shrinks_to_a_key_length_of_zero():
    def padded(c, first=0):
        return "key_lengths" in c.inputs and 0 in c.inputs["key_lengths"][first:].tolist()

    case = find(attention_cases("small"), lambda c: padded(c) and no_key_rows(c).any())
    assert case.inputs["q"].shape == (1, 1, 1, 1) and case.inputs["key_lengths"].tolist() == [0]
    # Several batch elements, the last without keys: one element without keys.
    case = find(attention_cases("small"), lambda c: padded(c, first=1))
    assert case.inputs["q"].shape == (2, 1, 1, 1) and case.inputs["key_lengths"].tolist() == [0, 0]
    # Without padding: causal with two queries over one key (bottom-right alignment).
    case = find(
        attention_cases("small"), lambda c: no_key_rows(c).any() and "key_lengths" not in c.inputs
    )
    assert case.inputs["q"].shape == (1, 1, 2, 1) and case.inputs["k"].shape[2] == 1
    assert case.params["causal"]


def test_the_causal_loop_bound_condition_shrinks_to_17_rows():
    def cond(c):
        p = c.params
        return p["causal"] and p["block_q"] > p["block_k"] and c.inputs["q"].shape[2] > p["block_k"]

    case = find(attention_cases("small"), cond)
    assert case.inputs["q"].shape[2] == 17 and case.params["block_q"] == 32


def _collect(strategy, n=150):
    seen = []

    @settings(max_examples=n, database=None, deadline=None)
    @given(strategy)
    def run(case):
        seen.append(case)

    run()
    return seen


@pytest.fixture(scope="module")
def dense():
    # 300: a window narrower than the distance, with no causal mask nor padding, is 0-11 cases
    # of 150 (seeds 0-5), the draws before and after key padding became an option alike.
    return _collect(attention_cases("small"), n=300)


def test_dense_reaches_tile_boundaries(dense):
    for axis, block in ((2, "block_q"), (2, "block_k")):
        name = "q" if block == "block_q" else "k"
        rems = {c.inputs[name].shape[axis] % c.params[block] for c in dense}
        assert {0, 1} <= rems and any(r in rems for r in (15, 31)), (block, rems)
    orders = {np.sign(c.params["block_q"] - c.params["block_k"]) for c in dense}
    assert orders == {-1, 0, 1}
    lens = {np.sign(c.inputs["q"].shape[2] - c.inputs["k"].shape[2]) for c in dense}
    assert lens == {-1, 0, 1}


def test_dense_reaches_masks_alone_and_combined(dense):
    def kinds(c):
        return {
            k
            for k, on in (
                ("causal", c.params["causal"]),
                ("window", c.params["window"] is not None),
                ("padding", "key_lengths" in c.inputs),
            )
            if on
        }

    seen = [kinds(c) for c in dense]
    for k in ("causal", "window", "padding"):
        assert {k} in seen, k
    assert any(len(s) >= 2 for s in seen)
    lengths = np.concatenate([c.inputs["key_lengths"] for c in dense if "key_lengths" in c.inputs])
    assert 0 in lengths
    assert any(
        (c.inputs["key_lengths"] == c.inputs["k"].shape[2]).any()
        for c in dense
        if "key_lengths" in c.inputs
    )
    windowed_empty = [
        c
        for c in dense
        if c.params["window"] is not None
        and not c.params["causal"]
        and "key_lengths" not in c.inputs
        and no_key_rows(c).any()
    ]
    assert windowed_empty, "no window narrower than the distance"


def test_dense_reaches_modifiers(dense):
    groups = {c.inputs["q"].shape[1] // c.inputs["k"].shape[1] for c in dense}
    assert {1, 2, 3} <= groups
    kinds = {c.recipe["slopes"]["kind"] for c in dense if c.recipe["slopes"]}
    assert {"standard", "adversarial"} <= kinds
    for want in (lambda x: x == 0, lambda x: 0 < x <= 1e-6, lambda x: x >= 64):
        case = find(
            attention_cases("small"),
            lambda c: "alibi_slopes" in c.inputs and any(want(x) for x in c.inputs["alibi_slopes"]),
        )
        assert case.params["alibi"] == "user"
    caps = {c.params["softcap"] for c in dense}
    assert min(x for x in caps if x) <= 1.0 and max(x for x in caps if x) >= 30.0
    assert {c.params["dtype"] for c in dense} == {"float32", "float16", "bfloat16"}


def test_dense_reaches_log_sum_exps_beyond_fp32_exp_range(dense):
    tops, lows = [], []
    for c in dense:
        lse = oracle(c, "cpu")["lse"]
        fin = lse[np.isfinite(lse)]
        if fin.size:
            tops.append(fin.max())
            lows.append(fin.min())
    assert max(tops) > 88.73 and min(lows) < -88.73


def test_varlen_reaches_empty_and_single_sequences_and_guard_rows():
    cases = _collect(varlen_cases("small"))
    lens_q = [x for c in cases for x in np.diff(c.inputs["cu_seqlens_q"])]
    lens_k = [x for c in cases for x in np.diff(c.inputs["cu_seqlens_k"])]
    assert 0 in lens_q and 1 in lens_q and 0 in lens_k and 1 in lens_k
    assert any(len(c.inputs["cu_seqlens_q"]) > 2 for c in cases)
    assert any(c.inputs["k"].shape[2] > c.inputs["cu_seqlens_k"][-1] for c in cases)


def test_decode_reaches_short_caches_and_empty_splits():
    cases = _collect(decode_cases("small"))
    lens = np.concatenate([c.inputs["cache_len"] for c in cases])
    assert 0 in lens and 1 in lens
    assert any(
        c.params["num_splits"]
        > math.ceil(max(c.inputs["cache_len"].max(), 1) / c.params["block_k"])
        for c in cases
    )
    assert {1, 2, 4} <= {c.params["num_splits"] for c in cases}


@pytest.mark.parametrize("factory", FACTORIES, ids=IDS)
def test_large_bounds(factory):
    @settings(max_examples=25, database=None, deadline=None)
    @given(factory("large"))
    def check(case):
        q = case.inputs["q"]
        assert q.shape[-1] <= 256
        d_pad = max(16, 1 << (q.shape[-1] - 1).bit_length())
        for block in ("block_q", "block_k"):
            if block in case.params:
                assert case.params[block] * d_pad <= 1 << 13 or case.params[block] == 16
        heads = q.shape[1]
        n = len(seqs(case))
        assert n * heads <= 32 or q.shape[0] == 1
        assert max(max(lq, lk) for _, _, lq, _, lk in seqs(case)) <= 33 * 128
        assert sum(lq * lk for _, _, lq, _, lk in seqs(case)) * heads <= (1 << 26) or n == 1

    check()
