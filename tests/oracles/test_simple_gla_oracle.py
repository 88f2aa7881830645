"""The simple GLA oracle: the fp64 token recurrence against mpmath on tiny inputs and against the
quadratic parallel form (values and autograd gradients), varlen against sequences alone, and the
naive reference's and the magnitudes' defining behaviour."""

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.simple_gla import (
    simple_gla_blocked,
    simple_gla_blocked_grads,
    simple_gla_magnitudes,
    simple_gla_naive,
    simple_gla_naive_grads,
    simple_gla_parallel,
    simple_gla_parallel_grads,
    simple_gla_reference,
    simple_gla_reference_grads,
)

mpmath.mp.dps = 40
F64 = torch.float64


def mp_recurrence(q, k, v, g, scale, h0):
    """mpmath: one sequence, one head; q, k [T, K], v [T, V], g [T], h0 [K, V] (lists)."""
    t_len, kd, vd = len(q), len(q[0]), len(v[0])
    h = [[mpmath.mpf(h0[a][b]) for b in range(vd)] for a in range(kd)]
    out = []
    for t in range(t_len):
        d = mpmath.exp(mpmath.mpf(g[t]))
        h = [
            [d * h[a][b] + mpmath.mpf(k[t][a]) * mpmath.mpf(v[t][b]) for b in range(vd)]
            for a in range(kd)
        ]
        out.append(
            [
                mpmath.mpf(scale) * mpmath.fsum(mpmath.mpf(q[t][a]) * h[a][b] for a in range(kd))
                for b in range(vd)
            ]
        )
    return out, h


VALS = [0.0, 1.0, -1.0, 0.5, 3.0, -2.5, 1e-3]
GATES = [0.0, -1e-3, -0.5, -5.0, -30.0, -90.0]


@st.composite
def tiny(draw):
    t_len = draw(st.integers(1, 4))
    kd = draw(st.integers(1, 2))
    vd = draw(st.integers(1, 2))
    flat = lambda n: draw(st.lists(st.sampled_from(VALS), min_size=n, max_size=n))  # noqa: E731
    q = np.array(flat(t_len * kd), np.float64).reshape(t_len, kd)
    k = np.array(flat(t_len * kd), np.float64).reshape(t_len, kd)
    v = np.array(flat(t_len * vd), np.float64).reshape(t_len, vd)
    g = np.array(draw(st.lists(st.sampled_from(GATES), min_size=t_len, max_size=t_len)))
    h0 = np.array(flat(kd * vd), np.float64).reshape(kd, vd)
    scale = draw(st.sampled_from([1.0, 0.5, 2.0**-0.5]))
    return q, k, v, g, h0, scale


@settings(max_examples=60, deadline=None)
@given(tiny())
def test_recurrence_and_parallel_match_mpmath(args):
    q, k, v, g, h0, scale = args
    want_o, want_h = mp_recurrence(
        q.tolist(), k.tolist(), v.tolist(), g.tolist(), scale, h0.tolist()
    )
    t = lambda a: torch.from_numpy(a)[None, :, None]  # noqa: E731  [1, T, 1, D]
    for fn in (simple_gla_reference, simple_gla_parallel, _blocked_of_3):
        o, h = fn(
            t(q),
            t(k),
            t(v),
            g=torch.from_numpy(g)[None, :, None],
            scale=scale,
            initial_state=torch.from_numpy(h0)[None, None],
        )
        # float64 rounds each term (and the prefix sums of the parallel form, whose exponents
        # reach |sum g|): the oracle's own error bound.
        mag = 1 + float(np.abs(g).sum())
        for i, row in enumerate(want_o):
            for j, w in enumerate(row):
                tol = 64 * 2.0**-53 * mag * (1 + abs(float(w)) + 10.0)
                assert abs(o[0, i, 0, j].item() - float(w)) <= tol, (fn.__name__, i, j)
        for a, row in enumerate(want_h):
            for b, w in enumerate(row):
                assert abs(h[0, 0, a, b].item() - float(w)) <= 64 * 2.0**-53 * mag * (
                    11 + abs(float(w))
                )


def _blocked_of_3(*args, **kwargs):
    """The blocked form in blocks of 3 tokens (mpmath's cases are a few tokens long)."""
    return simple_gla_blocked(*args, **kwargs, block=3)


def _blocked_of_8(*args, **kwargs):
    return simple_gla_blocked(*args, **kwargs, block=8)


def _blocked_grads_of_8(q, k, v, do, g, gamma, scale, h0, dht, cu):
    from oracles.simple_gla import F64, _grads

    return _grads(_blocked_of_8, q, k, v, do, g, gamma, scale, h0, dht, cu, F64)


def _random(b, t, h, kd, vd, seed, *, per_token=True, h0=True, n=None):
    gen = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=gen, dtype=F64)  # noqa: E731
    q, k, v, do = r(b, t, h, kd), r(b, t, h, kd), r(b, t, h, vd), r(b, t, h, vd)
    n = b if n is None else n
    g = torch.nn.functional.logsigmoid(2 * r(b, t, h)) if per_token else None
    gamma = None if per_token else -torch.linspace(0.05, 2.0, h, dtype=F64)
    state = r(n, h, kd, vd) if h0 else None
    dht = r(n, h, kd, vd)
    return q, k, v, do, g, gamma, state, dht


@pytest.mark.parametrize("per_token", [True, False])
@pytest.mark.parametrize("cu", [None, [0, 3, 3, 11, 20]])
def test_recurrence_matches_parallel_values_and_gradients(per_token, cu):
    b = 2 if cu is None else 1
    n = None if cu is None else len(cu) - 1
    q, k, v, do, g, gamma, h0, dht = _random(b, 20, 3, 5, 4, 1, per_token=per_token, n=n)
    o1, h1 = simple_gla_reference(q, k, v, g, gamma, 0.7, h0, cu)
    for fn, grads in (
        (simple_gla_parallel, simple_gla_parallel_grads),
        (simple_gla_blocked, simple_gla_blocked_grads),  # 20 tokens: one block, then 3 of 8
        (_blocked_of_8, _blocked_grads_of_8),
    ):
        o2, h2 = fn(q, k, v, g, gamma, 0.7, h0, cu)
        assert torch.allclose(o1, o2, rtol=1e-12, atol=1e-12), fn.__name__
        assert torch.allclose(h1, h2, rtol=1e-12, atol=1e-12), fn.__name__
        g1 = simple_gla_reference_grads(q, k, v, do, g, gamma, 0.7, h0, dht, cu).as_dict()
        g2 = grads(q, k, v, do, g, gamma, 0.7, h0, dht, cu).as_dict()
        assert set(g1) == set(g2) == {"dq", "dk", "dv", "dh0"} | ({"dg"} if per_token else set())
        for name in g1:
            assert torch.allclose(g1[name], g2[name], rtol=1e-11, atol=1e-11), (fn.__name__, name)


def test_gradients_match_finite_differences():
    q, k, v, do, g, _, h0, dht = _random(1, 6, 1, 2, 3, 2)
    grads = simple_gla_reference_grads(q, k, v, do, g, None, None, h0, dht)

    def loss(g_):
        o, ht = simple_gla_reference(q, k, v, g_, None, None, h0)
        return float((o * do).sum() + (ht * dht).sum())

    eps = 1e-6
    for t in range(6):
        gp, gm = g.clone(), g.clone()
        gp[0, t, 0] += eps
        gm[0, t, 0] -= eps
        fd = (loss(gp) - loss(gm)) / (2 * eps)
        assert math.isclose(fd, grads.dg[0, t, 0].item(), rel_tol=1e-6, abs_tol=1e-7)


def test_varlen_equals_sequences_alone_and_empty_sequences_pass_the_state():
    cu = [0, 4, 4, 9]
    q, k, v, do, g, _, h0, dht = _random(1, 9, 2, 3, 3, 3, n=3)
    o, ht = simple_gla_reference(q, k, v, g, None, None, h0, cu)
    grads = simple_gla_reference_grads(q, k, v, do, g, None, None, h0, dht, cu)
    for i in range(3):
        s, e = cu[i], cu[i + 1]
        if s == e:
            assert torch.equal(ht[i], h0[i])
            assert torch.equal(grads.dh0[i], dht[i])
            continue
        oi, hi = simple_gla_reference(
            q[:, s:e], k[:, s:e], v[:, s:e], g[:, s:e], None, None, h0[i : i + 1]
        )
        assert torch.allclose(o[:, s:e], oi, rtol=1e-13, atol=1e-13)
        assert torch.allclose(ht[i : i + 1], hi, rtol=1e-13, atol=1e-13)


def test_g_gamma_is_the_constant_per_token_gate():
    q, k, v, _, _, gamma, h0, _ = _random(2, 13, 3, 4, 4, 4, per_token=False)
    g = gamma.reshape(1, 1, 3).expand(2, 13, 3).contiguous()
    o1, h1 = simple_gla_reference(q, k, v, None, gamma, None, h0)
    o2, h2 = simple_gla_reference(q, k, v, g, None, None, h0)
    assert torch.equal(o1, o2) and torch.equal(h1, h2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_naive_rounds_to_the_input_dtype_and_is_close(dtype):
    q, k, v, do, g, _, h0, dht = _random(1, 40, 2, 8, 8, 5)
    o64, _ = simple_gla_reference(q, k, v, g, None, None, h0)
    o, ht = simple_gla_naive(
        q.to(dtype), k.to(dtype), v.to(dtype), g.float(), None, None, h0.float(), chunk_size=16
    )
    assert o.dtype == dtype and ht.dtype == torch.float32
    eps = torch.finfo(dtype).eps
    # a few roundings of the inputs and intermediates in dtype, relative to the outputs' scale
    assert (o.double() - o64).abs().max() <= 64 * eps * o64.abs().max()
    grads = simple_gla_naive_grads(
        q.to(dtype),
        k.to(dtype),
        v.to(dtype),
        do.to(dtype),
        g.float(),
        None,
        None,
        h0.float(),
        dht.float(),
        chunk_size=16,
    )
    assert grads.dq.dtype == dtype and grads.dg.dtype == torch.float32


def test_magnitudes_are_the_sums_of_absolute_terms():
    """With decay_factor 1, the magnitudes are the oracle on absolute inputs; each bounds |x|."""
    cu = [0, 7, 7, 30]
    q, k, v, do, g, _, h0, dht = _random(1, 30, 2, 4, 3, 6, n=3)
    m = simple_gla_magnitudes(q, k, v, g, None, 0.5, h0, cu, chunk_size=16, do=do, dht=dht)
    o_abs, h_abs = simple_gla_reference(q.abs(), k.abs(), v.abs(), g, None, 0.5, h0.abs(), cu)
    assert torch.allclose(m.o, o_abs, rtol=1e-12) and torch.allclose(m.ht, h_abs, rtol=1e-12)
    ga = simple_gla_reference_grads(
        q.abs(), k.abs(), v.abs(), do.abs(), g, None, 0.5, h0.abs(), dht.abs(), cu
    )
    for name in ("dq", "dk", "dv", "dh0"):
        assert torch.allclose(getattr(m, name), getattr(ga, name), rtol=1e-12, atol=1e-14), name
    o, ht = simple_gla_reference(q, k, v, g, None, 0.5, h0, cu)
    grads = simple_gla_reference_grads(q, k, v, do, g, None, 0.5, h0, dht, cu)
    assert (o.abs() <= m.o + 1e-12).all() and (ht.abs() <= m.ht + 1e-12).all()
    assert (grads.dg.abs() <= m.dg + 1e-12).all()
    slower = simple_gla_magnitudes(q, k, v, g, None, 0.5, h0, cu, chunk_size=16, decay_factor=0.49)
    assert (slower.o >= m.o - 1e-12).all()


@pytest.mark.parametrize("block", [0, -3, 2.5, True])
def test_the_blocked_form_names_a_block_that_is_not_a_positive_count(block):
    q, k, v, _, g, _, h0, _ = _random(1, 4, 1, 2, 2, 3)
    with pytest.raises(ValueError, match="block="):
        simple_gla_blocked(q, k, v, g, initial_state=h0, block=block)
