"""The jagged softmax oracle against mpmath at 50 digits, against its second route (per-segment
log-sum-exps through scatter operations), and the naive reference's dtype behaviour."""

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.jagged_softmax import (
    jagged_softmax_naive,
    jagged_softmax_reference,
    jagged_softmax_reference_scatter,
)

mpmath.mp.dps = 50

VALUES = [0.0, 1.0, -1.0, 3.5, 88.5, 90.0, -1e4, 1e4, -math.inf, 0.3, 700.0, -745.0]


def mp_jagged_softmax(x, lengths):
    out = [[mpmath.mpf(0)] * x.shape[1] for _ in range(x.shape[0])]
    start = 0
    for n in lengths:
        for c in range(x.shape[1]):
            col = [(r, mpmath.mpf(float(x[r, c]))) for r in range(start, start + n)]
            finite = [(r, v) for r, v in col if mpmath.isfinite(v)]
            if finite:
                m = max(v for _, v in finite)
                total = mpmath.fsum(mpmath.exp(v - m) for _, v in finite)
                for r, v in finite:
                    out[r][c] = mpmath.exp(v - m) / total
        start += n
    return out


tiny = st.lists(st.integers(0, 4), min_size=1, max_size=4).flatmap(
    lambda lengths: st.tuples(
        st.just(lengths),
        st.integers(1, 3).flatmap(
            lambda m: st.lists(
                st.sampled_from(VALUES), min_size=sum(lengths) * m, max_size=sum(lengths) * m
            ).map(lambda v: np.array(v, np.float64).reshape(sum(lengths), m))
        ),
    )
)


def _offsets(lengths):
    return torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int64)


@settings(max_examples=100, deadline=None)
@given(tiny)
def test_both_routes_match_mpmath(args):
    lengths, x = args
    want = mp_jagged_softmax(x, lengths)
    # float64 rounds each value by u|x|, which moves exp(x - m) by that much relatively: the
    # oracle's own error bound grows with the largest |value|.
    finite = np.abs(x[np.isfinite(x)])
    rtol = 8 * 2.0**-53 * (1 + float(finite.max(initial=0.0)))
    for ref in (jagged_softmax_reference, jagged_softmax_reference_scatter):
        got = ref(torch.from_numpy(x), _offsets(lengths)).numpy()
        for r in range(x.shape[0]):
            for c in range(x.shape[1]):
                w = float(want[r][c])
                assert abs(got[r, c] - w) <= rtol * abs(w) + 1e-300, (ref.__name__, lengths, r, c)


@pytest.mark.parametrize("seed", range(5))
def test_routes_agree_on_larger_inputs(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 40, 12)
    lengths[[0, 5, 6, -1]] = 0  # leading, consecutive and trailing empty segments
    n = int(lengths.sum())
    x = rng.standard_normal((n, 7)) * 20
    x[rng.random(x.shape) < 0.2] = -np.inf
    a = jagged_softmax_reference(torch.from_numpy(x), _offsets(lengths))
    b = jagged_softmax_reference_scatter(torch.from_numpy(x), _offsets(lengths))
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-300)
    start = 0
    for n_rows in lengths:  # every live column of every segment sums to 1
        seg = a[start : start + n_rows]
        live = torch.isfinite(torch.from_numpy(x[start : start + n_rows])).any(dim=0)
        if n_rows:
            torch.testing.assert_close(seg.sum(0)[live], torch.ones(int(live.sum()), dtype=a.dtype))
            assert (seg[:, ~live] == 0).all()
        start += n_rows


def test_empty_segments_and_no_rows():
    x = torch.zeros((0, 3), dtype=torch.float64)
    for ref in (jagged_softmax_reference, jagged_softmax_reference_scatter):
        assert ref(x, torch.tensor([0, 0, 0])).shape == (0, 3)
        assert ref(x, torch.tensor([0])).shape == (0, 3)


def test_reference_does_not_overflow_where_naive_exp_would():
    x = torch.tensor([[1000.0], [999.0], [-1000.0]], dtype=torch.float64)
    for ref in (jagged_softmax_reference, jagged_softmax_reference_scatter):
        y = ref(x, torch.tensor([0, 3]))
        assert torch.isfinite(y).all()
        # The log-sum-exp route rounds x - lse at |x| = 1000: its error bound scales with |x|.
        assert abs(y[0, 0].item() - 1 / (1 + math.exp(-1))) < 8 * 2.0**-53 * 1001


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_naive_keeps_the_dtype_and_the_empty_column_convention(dtype):
    x = torch.tensor([[1.0, -math.inf], [2.0, -math.inf], [0.5, 1.0]]).to(dtype)
    offsets = torch.tensor([0, 2, 3])
    y = jagged_softmax_naive(x, offsets)
    assert y.dtype == dtype
    assert (y[:2, 1] == 0).all() and y[2, 0] == 1 and y[2, 1] == 1
    ref = jagged_softmax_reference(x.double(), offsets)
    assert (y.double() - ref).abs().max().item() <= torch.finfo(dtype).eps
