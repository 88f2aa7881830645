"""The attention family's own properties, poison, fixed outputs, error floor and hazards.

Each property must be able to fail: a small broken kernel (one planted bug, as a text edit of the
real kernel like the mutants, or a thin wrapper) makes that property report on a case where the
real kernel passes it. The properties are called directly, so each one is shown to fail on its
own, not merely after another property has already caught the bug.
"""

import dataclasses
import math

import numpy as np
import pytest

from fuzz import failures as F
from fuzz.backends import get_backend
from fuzz.case import Case
from fuzz.properties import GENERIC, Context
from fuzz.targets import attention as A
from kernels._mutate import Edit, mutate
from kernels.attention import triton as ktriton
from kernels.attention import triton_decode as ktriton_decode
from strategies.attention import attention_cases, decode_cases, varlen_cases

BACKEND = get_backend("triton-interpret")
rng = np.random.default_rng(0)


def target(kernel, strategy=attention_cases):
    """The attention family's contract around ``kernel`` (an entry point), cases from
    ``strategy``."""
    return dataclasses.replace(
        A.ATTENTION, name="attention_test", kernels={"triton": kernel}, strategy=strategy
    )


REAL = target(A.DENSE_ENTRIES["triton"])
REAL_DECODE = target(A.decode_entry(ktriton_decode), decode_cases)


def dense_case(b=1, hq=1, hkv=1, tq=5, tk=7, d=4, *, dtype="float32", **params):
    p = {
        "dtype": dtype,
        "causal": False,
        "window": None,
        "scale": None,
        "softcap": None,
        "alibi": None,
        "block_q": 16,
        "block_k": 16,
    }
    extra = {k: params.pop(k) for k in ("key_lengths", "alibi_slopes") if k in params}
    p.update(params)
    inputs = {
        "q": rng.standard_normal((b, hq, tq, d)).astype(dtype),
        "k": rng.standard_normal((b, hkv, tk, d)).astype(dtype),
        "v": rng.standard_normal((b, hkv, tk, d)).astype(dtype),
        **extra,
    }
    return Case(inputs, p)


def check(prop, tgt, case, param=None):
    return prop.check(Context(tgt, BACKEND, case), param)


def test_rows_sum_to_one_catches_a_sum_that_misses_the_rescale():
    # The running sum is not rescaled when the max grows (the accumulator is): rows whose max
    # moves to a later key tile sum to more than 1.
    broken = mutate(
        ktriton,
        "test_l_not_rescaled",
        [Edit("l_i = l_i * alpha + tl.sum(p, 1)", "l_i = l_i + tl.sum(p, 1)")],
    )
    case = dense_case(tq=2, tk=40, d=2)
    case.inputs["k"][0, 0, 39] = 5.0  # the max is in the last tile for both queries
    case.inputs["q"][...] = 1.0
    f = check(A.ROWS_SUM_TO_ONE, target(A.dense_entry(broken)), case)
    assert f is not None and f.cls == F.ACCURACY and f.prop == "rows-sum-to-one"
    assert check(A.ROWS_SUM_TO_ONE, REAL, case) is None


def test_scale_applied_once_catches_an_ignored_explicit_scale():
    # A kernel that always uses 1/sqrt(D): right for the default scale, so the oracle passes it.
    def ignore_scale(inputs, params, *, out, interpret):
        return A.DENSE_ENTRIES["triton"](
            inputs, {**params, "scale": None}, out=out, interpret=interpret
        )

    case = dense_case(d=4)
    f = check(A.SCALE_APPLIED_ONCE, target(ignore_scale), case)
    assert f is not None and f.cls == F.ACCURACY and f.prop == "scale-applied-once"
    assert check(A.SCALE_APPLIED_ONCE, REAL, case) is None


def test_scale_applied_once_catches_the_scale_twice_mutant_where_the_oracle_cannot():
    from kernels.attention.mutants import MUTANTS

    twice = next(m for m in MUTANTS if m.name == "scale_twice")
    case = dense_case(d=1)  # default scale 1: applying it twice changes nothing the oracle sees
    tgt = target(A.dense_entry(twice.module("triton")))
    ctx = Context(tgt, BACKEND, case)
    assert all((ctx.metrics(n).errors <= ctx.bound(n)).all() for n in ("o", "lse"))
    f = check(A.SCALE_APPLIED_ONCE, tgt, case)
    assert f is not None and f.prop == "scale-applied-once"


def test_gqa_equals_mha_catches_interleaved_head_groups():
    # Query head h reads kv head h % Hkv instead of h // (Hq / Hkv).
    broken = mutate(
        ktriton, "test_interleaved_groups", [Edit("hk = h // group", "hk = h % (n_heads // group)")]
    )
    case = dense_case(hq=4, hkv=2)
    f = check(A.GQA_EQUALS_MHA, target(A.dense_entry(broken)), case)
    assert f is not None and f.cls == F.ACCURACY and f.prop == "gqa-equals-mha"
    assert check(A.GQA_EQUALS_MHA, REAL, case) is None
    assert not A.GQA_EQUALS_MHA.applies(Context(REAL, BACKEND, dense_case(hq=2, hkv=2)))


# Causal alignment taken from the padded/packed key count instead of the sequence's own one.
MISALIGNED = mutate(
    ktriton, "test_misaligned", [Edit("diag = k_len - q_len", "diag = seq_k - q_len")]
)


def test_key_padding_equals_truncation_catches_alignment_to_the_padded_length():
    case = dense_case(b=2, tq=4, tk=9, causal=True, key_lengths=np.array([9, 5], np.int32))
    f = check(A.KEY_PADDING_EQUALS_TRUNCATION, target(A.dense_entry(MISALIGNED)), case, 1)
    assert f is not None and f.cls == F.MASKING and f.prop == "key-padding-equals-truncation"
    assert f.index[0] == 1  # reported at the padded batch element's rows
    assert check(A.KEY_PADDING_EQUALS_TRUNCATION, REAL, case, 1) is None


def test_varlen_equals_alone_catches_alignment_to_the_packed_length():
    cu_q, cu_k = np.array([0, 3, 5], np.int32), np.array([0, 4, 9], np.int32)
    case = dense_case(tq=5, tk=9, causal=True)
    case = case.replace(inputs={"cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k})
    tgt = target(A.dense_entry(MISALIGNED), varlen_cases)
    f = check(A.VARLEN_EQUALS_ALONE, tgt, case, 0)
    assert f is not None and f.cls == F.MASKING and f.prop == "varlen-equals-alone"
    assert (
        check(A.VARLEN_EQUALS_ALONE, target(A.DENSE_ENTRIES["triton"], varlen_cases), case, 0)
        is None
    )


def decode_case(lens=(6, 3), hq=2, hkv=1, tmax=8, d=4, **params):
    p = {
        "dtype": "float32",
        "window": None,
        "scale": None,
        "softcap": None,
        "alibi": None,
        "block_k": 16,
        "num_splits": 2,
    }
    p.update(params)
    b = len(lens)
    inputs = {
        "q": rng.standard_normal((b, hq, 1, d)).astype(np.float32),
        "k": rng.standard_normal((b, hkv, tmax, d)).astype(np.float32),
        "v": rng.standard_normal((b, hkv, tmax, d)).astype(np.float32),
        "cache_len": np.array(lens, np.int32),
    }
    return Case(inputs, p)


def test_decode_equals_last_causal_row_catches_a_cache_that_drops_the_newest_key():
    def drop_newest(inputs, params, *, out, interpret):
        lens = inputs["cache_len"]
        fewer = {**inputs, "cache_len": (lens - 1).clamp(min=0)}
        return A.decode_entry(ktriton_decode)(fewer, params, out=out, interpret=interpret)

    case = decode_case()
    f = check(A.DECODE_EQUALS_LAST_ROW, target(drop_newest, decode_cases), case, 0)
    assert f is not None and f.cls == F.ACCURACY and f.prop == "decode-equals-last-causal-row"
    assert check(A.DECODE_EQUALS_LAST_ROW, REAL_DECODE, case, 0) is None
    # An empty cache is skipped in favour of the next sequence with keys; all empty: nothing to do.
    assert check(A.DECODE_EQUALS_LAST_ROW, REAL_DECODE, decode_case(lens=(0, 0)), 0) is None


def test_poison_covers_exactly_the_keys_outside_the_data():
    case = dense_case(b=2, tk=6, key_lengths=np.array([6, 2], np.int32))
    p = A.poison(case, "nan")
    assert np.isnan(p.inputs["k"][1, :, 2:]).all() and np.isnan(p.inputs["v"][1, :, 2:]).all()
    assert not np.isnan(p.inputs["k"][0]).any() and not np.isnan(p.inputs["k"][1, :, :2]).any()
    assert A.poison(dense_case(), "nan") is None  # every key row is data
    varlen = dense_case(tq=3, tk=6).replace(
        inputs={
            "cu_seqlens_q": np.array([0, 3], np.int32),
            "cu_seqlens_k": np.array([0, 4], np.int32),
        }
    )
    p = A.poison(varlen, "inf")
    assert np.isinf(p.inputs["k"][0, :, 4:]).all() and np.isfinite(p.inputs["k"][0, :, :4]).all()
    p = A.poison(decode_case(lens=(8, 0)), "max")
    assert (p.inputs["v"][1] == np.finfo(np.float32).max).all()


def test_poison_covers_every_key_no_query_sees_and_every_query_that_sees_none():
    # A window (2, 1) over 8 queries and 30 keys: query 0 sits at key 22, so keys 0-19 are seen
    # by no query. Causal with more queries than keys: the top rows see no key at all.
    case = dense_case(tq=8, tk=30, window=[2, 1])
    p = A.poison(case, "nan")
    assert np.isnan(p.inputs["k"][0, 0, :20]).all() and np.isnan(p.inputs["v"][0, 0, :20]).all()
    assert np.isfinite(p.inputs["k"][0, 0, 20:]).all() and np.isfinite(p.inputs["q"]).all()
    case = dense_case(tq=6, tk=2, causal=True)  # rows 0-3 before the first key
    p = A.poison(case, "inf")
    assert np.isinf(p.inputs["q"][0, 0, :4]).all() and np.isfinite(p.inputs["q"][0, 0, 4:]).all()
    assert np.isfinite(p.inputs["k"]).all()
    varlen = dense_case(tq=3, tk=6).replace(
        inputs={  # sequence 1 has keys and no query
            "cu_seqlens_q": np.array([0, 3, 3], np.int32),
            "cu_seqlens_k": np.array([0, 4, 6], np.int32),
        }
    )
    assert np.isnan(A.poison(varlen, "nan").inputs["v"][0, 0, 4:]).all()
    window = decode_case(lens=(8, 3), window=[2, -1])  # the newest position 7 reaches back to 5
    p = A.poison(window, "nan")
    assert np.isnan(p.inputs["k"][0, :, :5]).all() and np.isfinite(p.inputs["k"][0, :, 5:8]).all()
    assert np.isfinite(p.inputs["k"][1, :, :1]).all()  # position 2 reaches back to 0


MASKED_POISON = next(p for p in GENERIC if p.name == "masked-poison")
# A kernel that loads every key of a tile it visits up to the key count, including keys no query
# of the block sees: 0 * NaN in P . V.
READS_UNSEEN = mutate(
    ktriton,
    "test_reads_unseen",
    [Edit("col_ok = (cols >= seen_lo) & (cols < hi)", "col_ok = cols < k_len")],
)


@pytest.mark.parametrize("kind", ["nan", "inf"])
def test_masked_poison_catches_a_kernel_that_reads_keys_no_query_sees(kind):
    from fuzz.target import get

    case = dense_case(tq=8, tk=30, window=[2, 1])
    f = check(MASKED_POISON, target(A.dense_entry(READS_UNSEEN)), case, kind)
    assert f is not None and f.cls == F.MASKING and f.prop == "masked-poison"
    for name in ("attention", "attention_exp2", "attention_two_pass", "attention_reverse_kv"):
        for backend in ("triton-interpret", "pallas-interpret"):
            ctx = Context(get(name), get_backend(backend), case)
            assert MASKED_POISON.check(ctx, kind) is None, (name, backend)


def test_masked_poison_catches_a_decode_kernel_that_reads_before_the_window():
    from fuzz.target import get

    broken = mutate(
        ktriton_decode,
        "test_reads_before_window",
        [Edit("col_ok = (cols < k_len) & (cols >= lo)", "col_ok = cols < k_len")],
    )
    case = decode_case(lens=(20, 3), tmax=20, window=[2, -1])
    f = check(MASKED_POISON, target(A.decode_entry(broken), decode_cases), case, "nan")
    assert f is not None and f.cls == F.MASKING
    for name in ("attention_decode", "attention_decode_lse_merge"):
        for backend in ("triton-interpret", "pallas-interpret"):
            ctx = Context(get(name), get_backend(backend), case)
            assert MASKED_POISON.check(ctx, "nan") is None, (name, backend)


@pytest.mark.parametrize("causal", [False, True])
def test_visible_count_is_the_row_sum_of_the_oracles_mask(causal):
    from oracles.attention import visible

    sizes = [0, 1, 2, 3, 7, 16, 17]
    sides = [-1, 0, 1, 2, 5, 20]
    for lq in sizes:
        for lk in sizes:
            for window in [None] + [(left, right) for left in sides for right in sides]:
                want = visible(lq, lk, causal=causal, window=window).numpy().sum(axis=1)
                got = A.visible_count(lq, lk, causal=causal, window=window)
                assert np.array_equal(got, want), (lq, lk, causal, window)


def test_fixed_outputs_are_the_rows_without_keys():
    case = dense_case(hq=2, tq=4, tk=2, causal=True)  # rows 0, 1 sit before the first key
    fixed = A.fixed_outputs(case)
    assert fixed["lse"][0, :, :2].all() and not fixed["lse"][0, :, 2:].any()
    assert fixed["o"].shape == case.inputs["q"].shape and fixed["o"][0, 1, 1].all()


def test_error_bound_grows_with_each_rows_logits_and_covers_fp32_dot_errors():
    small = dense_case(tq=2, tk=1, d=64)
    q = small.inputs["q"].copy()
    # The second query's logit is 30x the first's, whatever the values drawn (the module's
    # generator is shared, so they depend on which tests ran before in the process).
    q[0, 0, 1] = 30 * q[0, 0, 0]
    big = small.replace(inputs={"q": q, "k": small.inputs["k"] * 30})
    b_small, b_big = A.analysis(small), A.analysis(big)
    assert 0 < b_small.lse[0, 0, 0] < b_big.lse[0, 0, 0] < b_big.lse[0, 0, 1]
    # per row: the second query's bound grows with its own logit, the first's does not
    assert b_big.lse[0, 0, 1] > 20 * b_big.lse[0, 0, 0]
    # One key: lse is the logit itself, and its fp32 error is within the bound.
    qq, kk = (big.inputs[n][0, 0].astype(np.float64) for n in ("q", "k"))
    exact = qq @ kk.T / 8
    fp32 = (big.inputs["q"][0, 0] @ big.inputs["k"][0, 0].T) * np.float32(1 / 8)
    assert (np.abs(fp32 - exact)[:, 0] <= b_big.lse[0, 0]).all()


def test_hazards_describe_the_boundaries():
    case = dense_case(
        tq=20, tk=17, causal=True, block_q=32, block_k=16, key_lengths=np.array([0], np.int32)
    )
    names = {h.split(":")[0] for h in REAL.hazards_of(case)}
    assert {"row-without-visible-key", "keys-outside-data", "sequence-without-keys"} <= names
    case = dense_case(tq=20, tk=17, causal=True, block_q=32, block_k=16)
    names = {h.split(":")[0] for h in REAL.hazards_of(case)}
    assert {"causal-block-q-over-block-k", "partial-kv-tile", "multi-kv-tile"} <= names
    hot = dense_case(tq=1, tk=2, d=1, scale=1.0)
    hot.inputs["q"][...] = 10.0
    hot.inputs["k"][...] = 10.0
    assert any(h.startswith("lse-above-exp-range") for h in REAL.hazards_of(hot))
    splits = decode_case(lens=(1, 1), num_splits=4)
    assert any(h.startswith("splits-without-keys") for h in REAL_DECODE.hazards_of(splits))


@pytest.mark.parametrize("name", ["attention", "attention_varlen", "attention_decode"])
def test_baselines_are_valid_cases_the_real_kernels_pass(name):
    from fuzz.properties import compare_to_oracle
    from fuzz.target import get

    t = get(name)
    for case in (t.baselines.randn(1, "small"), t.baselines.grid("small")[0]):
        ctx = Context(t, BACKEND, case)
        assert ctx.clean.error is None, ctx.clean.error
        for out in ("o", "lse"):
            assert compare_to_oracle(ctx, out, ctx.clean.outputs[out], "oracle") is None
    assert len(t.baselines.grid("small")) >= 4 and len(t.baselines.grid("large")) >= 4
    assert t.baselines.randn(0, "small").params != t.baselines.randn(
        1, "small"
    ).params or name.endswith("decode")
    big = t.baselines.randn(0, "large")
    assert big.size >= 1 << 18 and math.isfinite(float(big.inputs["q"].astype(np.float64).sum()))


def test_the_issue_subnormal_key_case_passes_on_pallas_interpret():
    """q = 6.32, k = 1.06e-38 (an fp32 subnormal), one key, D = 1: XLA on the CPU flushes k and
    returns lse 0 against an oracle of 6.7e-38, beyond the old allowance (4 fp32 tiny); the bound
    scales the flushed operand by the q that multiplies it."""
    from fuzz.properties import check_case
    from fuzz.target import get

    case = dense_case(tq=1, tk=1, d=1)
    case = case.replace(
        inputs={
            "q": np.full((1, 1, 1, 1), 6.32, np.float32),
            "k": np.full((1, 1, 1, 1), 1.06e-38, np.float32),
        }
    )
    backend = get_backend("pallas-interpret")
    ctx = Context(get("attention"), backend, case)
    err = float(ctx.metrics("lse").errors.max())
    assert err > 4 * np.finfo(np.float32).tiny  # the flush happened: more than the old allowance
    out = check_case(get("attention"), backend, case, params={"masked-poison": "nan"})
    assert out.finding is None, out.finding
