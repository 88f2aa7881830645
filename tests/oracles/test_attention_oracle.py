"""The attention oracle: against mpmath at 50 digits on tiny cases, its two routes (per sequence,
and one packed score matrix with a document mask) against each other, the mask and ALiBi
alignment against hand-written tables, and the naive reference's dtype behaviour."""

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.attention import (
    alibi_bias,
    attention_naive,
    attention_reference,
    attention_reference_packed,
    visible,
)
from strategies.attention import attention_cases, decode_cases, varlen_cases

mpmath.mp.dps = 50
U64 = 2.0**-53


def mp_attend(q, k, v, *, scale, causal, window, slopes, softcap):
    """One sequence ``q [H, Lq, D]``, ``k, v [H, Lk, D]`` (kv heads already repeated) in mpmath."""
    h_n, lq, d = q.shape
    lk = k.shape[1]
    o = np.zeros((h_n, lq, d), dtype=object)
    lse = np.full((h_n, lq), mpmath.mpf("-inf"), dtype=object)
    for h in range(h_n):
        for i in range(lq):
            pos = i + lk - lq
            logits = []
            for j in range(lk):
                if causal and j > pos:
                    continue
                if window is not None:
                    left, right = window
                    if (left >= 0 and j < pos - left) or (right >= 0 and j > pos + right):
                        continue
                s = mpmath.fsum(
                    mpmath.mpf(float(q[h, i, t])) * mpmath.mpf(float(k[h, j, t])) for t in range(d)
                ) * mpmath.mpf(scale)
                if softcap is not None:
                    s = mpmath.mpf(softcap) * mpmath.tanh(s / mpmath.mpf(softcap))
                if slopes is not None:
                    s -= mpmath.mpf(float(slopes[h])) * abs(pos - j)
                logits.append((j, s))
            if not logits:
                continue
            m = max(s for _, s in logits)
            total = mpmath.fsum(mpmath.exp(s - m) for _, s in logits)
            lse[h, i] = m + mpmath.log(total)
            for t in range(d):
                o[h, i, t] = mpmath.fsum(
                    mpmath.exp(s - lse[h, i]) * mpmath.mpf(float(v[h, j, t])) for j, s in logits
                )
    return o, lse


VALUES = st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.5, -3.0, 10.0, -10.0, 0.1])


@st.composite
def tiny(draw):
    b = draw(st.integers(1, 2))
    hkv = draw(st.integers(1, 2))
    group = draw(st.integers(1, 2))
    tq, tk, d = draw(st.integers(1, 4)), draw(st.integers(0, 4)), draw(st.integers(1, 3))
    arr = lambda shape: np.array(  # noqa: E731
        draw(st.lists(VALUES, min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))),
        np.float64,
    ).reshape(shape)
    q, k, v = arr((b, hkv * group, tq, d)), arr((b, hkv, tk, d)), arr((b, hkv, tk, d))
    kw = {
        "scale": draw(st.sampled_from([None, 0.5, 2.0])),
        "causal": draw(st.booleans()),
        "window": draw(st.one_of(st.none(), st.tuples(st.integers(-1, 2), st.integers(-1, 2)))),
        "softcap": draw(st.sampled_from([None, 1.0, 5.0])),
        "alibi_slopes": draw(st.sampled_from([None, [0.5, 0.25, 0.125, 2.0][: hkv * group]])),
        "key_lengths": draw(
            st.one_of(st.none(), st.lists(st.integers(0, tk), min_size=b, max_size=b))
        ),
    }
    return q, k, v, kw


def _torch_kw(kw):
    out = dict(kw)
    for name in ("alibi_slopes", "key_lengths"):
        if out[name] is not None:
            out[name] = torch.tensor(out[name])
    return out


@settings(max_examples=60, deadline=None)
@given(tiny())
def test_both_routes_match_mpmath(args):
    q, k, v, kw = args
    b, hq, tq, d = q.shape
    group = hq // k.shape[1]
    scale = 1 / math.sqrt(d) if kw["scale"] is None else kw["scale"]
    tkw = _torch_kw(kw)
    t = lambda a: torch.from_numpy(a)  # noqa: E731
    got = [fn(t(q), t(k), t(v), **tkw) for fn in (attention_reference, attention_reference_packed)]
    for bi in range(b):
        lk = k.shape[2] if kw["key_lengths"] is None else kw["key_lengths"][bi]
        kk = np.repeat(k[bi, :, :lk], group, axis=0)
        vv = np.repeat(v[bi, :, :lk], group, axis=0)
        o_mp, lse_mp = mp_attend(
            q[bi],
            kk,
            vv,
            scale=scale,
            causal=kw["causal"],
            window=kw["window"],
            slopes=kw["alibi_slopes"],
            softcap=kw["softcap"],
        )
        # float64 rounds each logit by ~u|s|, which moves exp(s - lse) by that much relatively.
        big = float(np.abs(q[bi]).sum(-1).max() * np.abs(k[bi]).max(initial=0) * scale) + 10
        tol = 16 * U64 * (1 + big)
        for o, lse in got:
            for h in range(hq):
                for i in range(tq):
                    want = lse_mp[h, i]
                    if want == mpmath.mpf("-inf"):
                        assert lse[bi, h, i] == -math.inf
                        assert torch.all(o[bi, h, i] == 0)
                        continue
                    assert abs(lse[bi, h, i].item() - float(want)) <= tol * (1 + abs(float(want)))
                    for j in range(d):
                        w = float(o_mp[h, i, j])
                        scale_v = float(np.abs(vv[h]).max(initial=0.0)) + 1e-300
                        assert abs(o[bi, h, i, j].item() - w) <= tol * scale_v


@pytest.mark.parametrize(
    "make", [attention_cases, varlen_cases, decode_cases], ids=["dense", "varlen", "decode"]
)
def test_packed_route_matches_per_sequence_route(make):
    @settings(max_examples=30, deadline=None, database=None)
    @given(make("small"))
    def check(case):
        t = {
            n: torch.from_numpy(a if a.dtype.kind in "iu" else a.astype(np.float64))
            for n, a in case.inputs.items()
        }
        p = case.params
        kw = {
            "scale": p.get("scale"),
            "causal": p.get("causal", False),
            "window": p.get("window"),
            "key_lengths": t.get("key_lengths", t.get("cache_len")),
            "cu_seqlens_q": t.get("cu_seqlens_q"),
            "cu_seqlens_k": t.get("cu_seqlens_k"),
            "alibi_slopes": t.get("alibi_slopes"),
            "softcap": p.get("softcap"),
        }
        o1, l1 = attention_reference(t["q"], t["k"], t["v"], **kw)
        o2, l2 = attention_reference_packed(t["q"], t["k"], t["v"], **kw)
        assert torch.equal(torch.isneginf(l1), torch.isneginf(l2))
        fin = torch.isfinite(l1)
        scale = 1 + l1[fin].abs().max().item() if fin.any() else 1
        assert torch.allclose(l1[fin], l2[fin], rtol=0, atol=1e-9 * scale)
        vmax = t["v"].abs().max().item() if t["v"].numel() else 0
        assert torch.allclose(o1, o2, rtol=0, atol=1e-9 * scale * (1 + vmax))

    check()


def test_visible_is_bottom_right_aligned():
    def rows(m):
        return ["".join("x" if x else "." for x in r) for r in m.tolist()]

    assert rows(visible(2, 3, causal=True)) == ["xx.", "xxx"]
    assert rows(visible(3, 2, causal=True)) == ["..", "x.", "xx"]
    assert rows(visible(3, 3, window=(1, 0))) == ["x..", "xx.", ".xx"]
    assert rows(visible(3, 3, window=(0, 0))) == ["x..", ".x.", "..x"]
    assert rows(visible(2, 4, window=(1, 1))) == [".xxx", "..xx"]
    assert rows(visible(3, 1, window=(0, -1))) == ["x", "x", "x"]
    assert rows(visible(3, 1, window=(0, 0))) == [".", ".", "x"]
    assert rows(visible(1, 4, causal=True, window=(1, -1))) == ["..xx"]
    assert rows(visible(2, 0, causal=True)) == ["", ""]


def test_alibi_bias_uses_the_aligned_distance():
    b = alibi_bias(torch.tensor([0.5]), 1, 3)
    assert b.tolist() == [[[-1.0, -0.5, -0.0]]]
    b = alibi_bias(torch.tensor([1.0]), 3, 2)  # query i at position i - 1
    assert b.tolist() == [[[-1.0, -2.0], [-0.0, -1.0], [-1.0, -0.0]]]


def test_rows_without_keys_are_zero_and_neg_inf():
    q = torch.randn(1, 2, 3, 4, dtype=torch.float64)
    k = torch.randn(1, 1, 2, 4, dtype=torch.float64)
    o, lse = attention_reference(q, k, k, causal=True)  # row 0 sits at position -1
    assert torch.all(o[0, :, 0] == 0) and torch.all(torch.isneginf(lse[0, :, 0]))
    assert torch.isfinite(lse[0, :, 1:]).all()
    o, lse = attention_reference(q, k, k, key_lengths=torch.tensor([0]))
    assert torch.all(o == 0) and torch.isneginf(lse).all()


def test_no_overflow_with_huge_logits():
    q = torch.full((1, 1, 1, 1), 64.0, dtype=torch.float64)
    k = torch.tensor([[[[64.0], [63.875]]]], dtype=torch.float64)  # logits 4096 and 4088, exact
    v = torch.tensor([[[[1.0], [0.0]]]], dtype=torch.float64)
    o, lse = attention_reference(q, k, v, scale=1.0)
    assert abs(lse.item() - (4096 + math.log1p(math.exp(-8.0)))) <= 4 * U64 * 4096
    # The log-sum-exp's own rounding (u * 4096) is the reference's error bound here.
    assert abs(o.item() - 1 / (1 + math.exp(-8.0))) <= 8 * U64 * 4096


def test_varlen_with_empty_sequences():
    cu_q = torch.tensor([0, 0, 2, 2, 3])
    cu_k = torch.tensor([0, 1, 1, 4, 4])
    q = torch.randn(1, 1, 3, 2, dtype=torch.float64)
    k = torch.randn(1, 1, 6, 2, dtype=torch.float64)  # two guard rows after the last sequence
    o, lse = attention_reference(q, k, k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    # Sequence 1 (rows 0, 1) has no key; sequence 3 (row 2) has none either.
    assert torch.isneginf(lse).all() and torch.all(o == 0)
    o, lse = attention_reference(
        q, k, k, cu_seqlens_q=torch.tensor([0, 2, 3]), cu_seqlens_k=torch.tensor([0, 1, 4])
    )
    alone, alone_lse = attention_reference(q[:, :, 2:], k[:, :, 1:4], k[:, :, 1:4])
    assert torch.equal(o[:, :, 2:], alone) and torch.equal(lse[:, :, 2:], alone_lse)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_naive_keeps_the_dtype_and_is_close(dtype):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 8).to(dtype) for _ in range(3))
    o, lse = attention_naive(q, k, v, causal=True)
    assert o.dtype == dtype and lse.dtype == torch.float32
    ref_o, ref_lse = attention_reference(q, k, v, causal=True)
    eps = torch.finfo(dtype).eps
    assert (o.double() - ref_o).abs().max().item() <= 8 * eps * 3
    assert (lse.double() - ref_lse).abs().max().item() <= 8 * eps * 10


def test_naive_rows_without_keys_are_zero():
    q = torch.randn(1, 1, 3, 4).half()
    k = torch.randn(1, 1, 1, 4).half()
    o, lse = attention_naive(q, k, k, causal=True)
    assert torch.all(o[0, 0, :2] == 0) and torch.isneginf(lse[0, 0, :2]).all()
    assert not torch.isnan(o).any()


@pytest.mark.parametrize("seed", range(4))
def test_top_left_alignment_agrees_between_the_two_references_and_with_torch(seed):
    """Top-left alignment (query i at key i, as torch's is_causal): the per-sequence and the
    packed references agree, and causal top-left equals torch's scaled_dot_product_attention."""
    import torch.nn.functional as tf

    from oracles.attention import attention_reference, attention_reference_packed

    g = torch.Generator().manual_seed(seed)
    tq, tk = (3, 7) if seed % 2 else (7, 3)
    q = torch.randn(1, 2, tq, 4, generator=g, dtype=torch.float64)
    k = torch.randn(1, 2, tk, 4, generator=g, dtype=torch.float64)
    v = torch.randn(1, 2, tk, 4, generator=g, dtype=torch.float64)
    slopes = torch.tensor([0.5, 0.25], dtype=torch.float64)
    kw = {"causal": True, "window": (2, -1), "alibi_slopes": slopes, "align": "top-left"}
    o1, lse1 = attention_reference(q, k, v, **kw)
    o2, lse2 = attention_reference_packed(q, k, v, **kw)
    assert torch.allclose(o1, o2) and torch.allclose(lse1, lse2, equal_nan=True)
    o, _ = attention_reference(q, k, v, causal=True, align="top-left")
    want = tf.scaled_dot_product_attention(q, k, v, is_causal=True)
    rows = torch.arange(tq) < tk  # torch gives NaN for a query without keys; the oracle zeros
    assert torch.allclose(o[:, :, rows], want[:, :, rows])
