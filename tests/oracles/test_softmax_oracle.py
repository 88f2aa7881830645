"""The softmax oracle against mpmath at 50 digits, against its log-sum-exp form, and the naive
reference's dtype behaviour."""

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.softmax import softmax_naive, softmax_reference, softmax_reference_lse

mpmath.mp.dps = 50


def mp_softmax(x, mask, bias, scale):
    rows = []
    for r in range(x.shape[0]):
        logits = []
        for c in range(x.shape[1]):
            if mask is not None and not mask[r, c]:
                continue
            s = mpmath.mpf(float(x[r, c])) * mpmath.mpf(scale) + (
                mpmath.mpf(float(bias[r, c])) if bias is not None else 0
            )
            logits.append((c, s))
        finite = [(c, s) for c, s in logits if mpmath.isfinite(s)]
        out = [mpmath.mpf(0)] * x.shape[1]
        if finite:
            m = max(s for _, s in finite)
            total = mpmath.fsum(mpmath.exp(s - m) for _, s in finite)
            for c, s in finite:
                out[c] = mpmath.exp(s - m) / total
        rows.append(out)
    return rows


tiny_inputs = st.integers(1, 4).flatmap(
    lambda r: st.integers(1, 7).flatmap(
        lambda c: st.tuples(
            st.lists(
                st.sampled_from([0.0, 1.0, -1.0, 3.5, 88.5, 90.0, -1e4, 1e4, -math.inf, 0.3]),
                min_size=r * c,
                max_size=r * c,
            ),
            st.one_of(st.none(), st.lists(st.booleans(), min_size=r * c, max_size=r * c)),
            st.one_of(st.none(), st.lists(st.floats(-5, 5), min_size=r * c, max_size=r * c)),
            st.sampled_from([1.0, 0.5, 0.125, 2.0]),
            st.just((r, c)),
        )
    )
)


@settings(max_examples=100)
@given(tiny_inputs)
def test_reference_matches_mpmath(args):
    xs, ms, bs, scale, shape = args
    x = np.array(xs, np.float64).reshape(shape)
    mask = None if ms is None else np.array(ms).reshape(shape)
    bias = None if bs is None else np.array(bs, np.float64).reshape(shape)
    want = mp_softmax(x, mask, bias, scale)
    t = lambda a: None if a is None else torch.from_numpy(a)  # noqa: E731
    # float64 rounds each logit s (and the log-sum-exp) by u|s|, which moves exp(s - m) by that
    # much relatively: the oracle's own error bound grows with the largest |logit|.
    logits = np.abs(x * scale + (0 if bias is None else bias))
    big = float(np.max(logits[np.isfinite(logits)], initial=0.0))
    rtol = 8 * 2.0**-53 * (1 + big)
    for ref in (softmax_reference, softmax_reference_lse):
        got = ref(t(x), t(mask), t(bias), scale).numpy()
        for r in range(shape[0]):
            for c in range(shape[1]):
                w = want[r][c]
                assert abs(got[r, c] - float(w)) <= rtol * abs(float(w)) + 1e-300, (
                    ref.__name__,
                    r,
                    c,
                )


def test_fully_masked_and_all_neg_inf_rows_are_zero():
    x = torch.tensor([[1.0, 2.0], [-math.inf, -math.inf], [3.0, 4.0]], dtype=torch.float64)
    mask = torch.tensor([[False, False], [True, True], [True, True]])
    y = softmax_reference(x, mask)
    assert torch.equal(y[0], torch.zeros(2, dtype=torch.float64))
    assert torch.equal(y[1], torch.zeros(2, dtype=torch.float64))
    assert abs(y[2].sum().item() - 1) < 1e-15


def test_reference_does_not_overflow_where_naive_exp_would():
    x = torch.tensor([[1000.0, 999.0, -1000.0]], dtype=torch.float64)
    y = softmax_reference(x)
    assert torch.isfinite(y).all()
    assert abs(y[0, 0].item() - 1 / (1 + math.exp(-1))) < 1e-15


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_naive_reference_keeps_the_dtype_and_rounds_logits(dtype):
    x = torch.tensor([[1.0, 2.0, 3.0]]).to(dtype)
    y = softmax_naive(x, scale=0.1)
    assert y.dtype == dtype
    # The logits 0.1 * x are materialised in the input dtype, so the naive result carries that
    # rounding; the fp64 reference does not.
    ref = softmax_reference(x.double(), scale=0.1)
    err = (y.double() - ref).abs().max().item()
    assert err <= 2 * torch.finfo(dtype).eps
