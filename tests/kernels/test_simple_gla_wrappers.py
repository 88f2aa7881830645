"""The simple GLA wrappers: bad input gets a clear error naming the argument (both languages, before
any launch), the ALiBi helper, and the call shapes the harness's strategies do not draw (T = 0,
non-contiguous inputs, default arguments); the reformulations (recurrent, split) on the same
calls; padding past cu_seqlens[-1] is never read and its outputs are 0."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
import torch

from kernels.alibi import alibi_slopes
from kernels.simple_gla import alibi_g_gamma
from kernels.simple_gla import pallas as kpallas
from kernels.simple_gla import recurrent as krecurrent
from kernels.simple_gla import split as ksplit
from kernels.simple_gla import triton as ktriton
from oracles.simple_gla import simple_gla_reference, simple_gla_reference_grads


def _torch(a):
    return torch.from_numpy(a) if isinstance(a, np.ndarray) else a


def _jax(a):
    return jnp.asarray(a) if isinstance(a, np.ndarray) else a


MODULES = {"triton": ktriton, "pallas": kpallas, "recurrent": krecurrent, "split": ksplit}
ALL = tuple(MODULES)  # the two languages' kernels and the two Triton reformulations


def call(lang, fn, *args, **kw):
    conv = _jax if lang == "pallas" else _torch
    mod = MODULES[lang]
    args = [conv(a) for a in args]
    kw = {k: conv(v) for k, v in kw.items()}
    return getattr(mod, fn)(*args, interpret=True, **kw)


Q = np.zeros((1, 5, 2, 4), np.float32)
V = np.zeros((1, 5, 2, 3), np.float32)
GAMMA = np.array([-0.5, -0.25], np.float32)
G = np.zeros((1, 5, 2), np.float32)
CU = np.array([0, 2, 5], np.int32)
BAD = [
    (
        dict(g_gamma=GAMMA, chunk_size=48),
        ValueError,
        "chunk_size=48 must be one of (16, 32, 64, 128, 256)",
    ),
    (dict(g_gamma=GAMMA, chunk_size=16.0), TypeError, "chunk_size must be an int"),
    (dict(), ValueError, "pass exactly one decay"),
    (dict(g=G, g_gamma=GAMMA), ValueError, "pass exactly one decay"),
    (dict(g_gamma=GAMMA[:1]), ValueError, "g_gamma.shape=(1,) must be [H]=(2,)"),
    (dict(g_gamma=GAMMA.astype(np.float16)), ValueError, "g_gamma.dtype=float16 is not supported"),
    (dict(g=G[:, :4]), ValueError, "g.shape=(1, 4, 2) must be [B, T, H]=(1, 5, 2)"),
    (dict(g_gamma=GAMMA, scale=0.0), ValueError, "scale=0.0 must be finite and > 0"),
    (dict(g_gamma=GAMMA, scale=math.nan), ValueError, "scale=nan must be finite and > 0"),
    (dict(g_gamma=GAMMA, scale="1"), TypeError, "scale must be a float or None"),
    (
        dict(g_gamma=GAMMA, cu_seqlens=np.array([0, 2, 6], np.int32)),
        ValueError,
        "cu_seqlens[-1]=6 must be <= T=5",
    ),
    (
        dict(g_gamma=GAMMA, cu_seqlens=np.array([1, 5], np.int32)),
        ValueError,
        "cu_seqlens[0]=1 must be 0",
    ),
    (
        dict(g_gamma=GAMMA, cu_seqlens=np.array([0, 3, 2, 5], np.int32)),
        ValueError,
        "cu_seqlens must be non-decreasing; cu_seqlens[2]=2 < cu_seqlens[1]=3",
    ),
    (
        dict(g_gamma=GAMMA, cu_seqlens=np.array([0], np.int32)),
        ValueError,
        "must have at least 2 entries",
    ),
    (
        dict(g_gamma=GAMMA, cu_seqlens=np.array([0.0, 5.0], np.float32)),
        ValueError,
        "cu_seqlens.dtype=float32 must be int32 or int64",
    ),
    (
        dict(g_gamma=GAMMA, initial_state=np.zeros((1, 2, 4, 4), np.float32)),
        ValueError,
        "initial_state.shape=(1, 2, 4, 4) must be [N, H, K, V]=(1, 2, 4, 3)",
    ),
    (
        dict(g_gamma=GAMMA, cu_seqlens=CU, initial_state=np.zeros((1, 2, 4, 3), np.float32)),
        ValueError,
        "initial_state.shape=(1, 2, 4, 3) must be [N, H, K, V]=(2, 2, 4, 3)",
    ),
    (
        dict(g_gamma=GAMMA, initial_state=np.zeros((1, 2, 4, 3), np.float16)),
        ValueError,
        "initial_state.dtype=float16 is not supported",
    ),
]


@pytest.mark.parametrize("lang", ["triton", "pallas"])
@pytest.mark.parametrize("kwargs, exc, message", BAD)
def test_bad_input_is_named(lang, kwargs, exc, message):
    with pytest.raises(exc) as info:
        call(lang, "chunk_simple_gla_fwd", Q, Q, V, **kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize("lang", ["triton", "pallas"])
@pytest.mark.parametrize(
    "args, kwargs, exc, message",
    [
        ((Q[0], Q[0], V[0]), {}, ValueError, "q.shape=(5, 2, 4) must be [B, T, H, K]"),
        ((Q, Q[:, :4], V), {}, ValueError, "k.shape=(1, 4, 2, 4) must be q.shape"),
        ((Q, Q, V[:, :4]), {}, ValueError, "v.shape=(1, 4, 2, 3) must be [B, T, H, V]"),
        (
            (Q, Q.astype(np.float16), V),
            {},
            ValueError,
            "k.dtype=float16 must equal q.dtype=float32",
        ),
        (
            (Q.astype(np.int32),) * 2 + (V.astype(np.int32),),
            {},
            ValueError,
            "q.dtype=int32 is not supported",
        ),
        (
            (np.zeros((1, 5, 2, 129), np.float32),) * 2 + (V,),
            {},
            ValueError,
            "K=129 must be in [1, 128]",
        ),
        (
            (np.zeros((2, 5, 2, 4), np.float32),) * 2 + (np.zeros((2, 5, 2, 3), np.float32),),
            {"cu_seqlens": np.array([0, 5], np.int32)},
            ValueError,
            "with cu_seqlens the batch must be 1",
        ),
    ],
)
def test_bad_shapes_are_named(lang, args, kwargs, exc, message):
    with pytest.raises(exc) as info:
        call(lang, "chunk_simple_gla_fwd", *args, g_gamma=GAMMA, **kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize("lang", ["triton", "pallas"])
def test_backward_checks_do_and_dht(lang):
    with pytest.raises(
        ValueError, match=r"do is float32\[1, 5, 2, 4\]; expected float32\[1, 5, 2, 3\]"
    ):
        call(lang, "chunk_simple_gla_bwd", Q, Q, V, Q, g_gamma=GAMMA)
    with pytest.raises(
        ValueError, match=r"dht is float32\[1, 2, 4, 4\]; expected float32\[1, 2, 4, 3\]"
    ):
        call(
            lang,
            "chunk_simple_gla_bwd",
            Q,
            Q,
            V,
            V,
            g_gamma=GAMMA,
            dht=np.zeros((1, 2, 4, 4), np.float32),
        )
    with pytest.raises(TypeError, match="do must be a"):
        (ktriton if lang == "triton" else kpallas).chunk_simple_gla_bwd(
            _torch(Q) if lang == "triton" else _jax(Q),
            _torch(Q) if lang == "triton" else _jax(Q),
            _torch(V) if lang == "triton" else _jax(V),
            None,
            g_gamma=_torch(GAMMA) if lang == "triton" else _jax(GAMMA),
            interpret=True,
        )


@pytest.mark.parametrize("lang", ["triton", "pallas"])
def test_wrong_array_type_is_named(lang):
    mod = ktriton if lang == "triton" else kpallas
    with pytest.raises(TypeError, match="q must be a"):
        mod.chunk_simple_gla_fwd(Q, Q, V, g_gamma=GAMMA, interpret=True)


@pytest.mark.parametrize("n", [1, 2, 3, 8, 12, 16, 20, 64])
def test_alibi_g_gamma_is_minus_the_standard_slopes(n):
    assert alibi_g_gamma(n) == [-s for s in alibi_slopes(n)]
    assert alibi_g_gamma(n, 0.5) == [-0.5 * s for s in alibi_slopes(n)]
    assert all(x < 0 for x in alibi_g_gamma(n))


@pytest.mark.parametrize(
    "scale, exc", [(0.0, ValueError), (-1.0, ValueError), (math.inf, ValueError), ("2", TypeError)]
)
def test_alibi_g_gamma_rejects_bad_scales(scale, exc):
    with pytest.raises(exc, match="scale"):
        alibi_g_gamma(4, scale)


def _np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().float().numpy()
    return np.asarray(x.astype(jnp.float32))


@pytest.mark.parametrize("lang", ALL)
def test_empty_batch_and_empty_sequences_pass_the_state_through(lang):
    rng = np.random.default_rng(0)
    h0 = rng.standard_normal((3, 2, 4, 3)).astype(np.float32)
    dht = rng.standard_normal((3, 2, 4, 3)).astype(np.float32)
    empty_q, empty_v = np.zeros((3, 0, 2, 4), np.float32), np.zeros((3, 0, 2, 3), np.float32)
    o, ht = call(
        lang,
        "chunk_simple_gla_fwd",
        empty_q,
        empty_q,
        empty_v,
        g_gamma=GAMMA,
        initial_state=h0,
        output_final_state=True,
    )
    assert tuple(o.shape) == (3, 0, 2, 3)
    assert np.array_equal(_np(ht), h0)
    *_, dh0 = call(
        lang,
        "chunk_simple_gla_bwd",
        empty_q,
        empty_q,
        empty_v,
        empty_v,
        g_gamma=GAMMA,
        initial_state=h0,
        dht=dht,
    )
    assert np.array_equal(_np(dh0), dht)
    # empty sequences between, before and after live ones
    q = rng.standard_normal((1, 5, 2, 4)).astype(np.float32)
    v = rng.standard_normal((1, 5, 2, 3)).astype(np.float32)
    h04 = rng.standard_normal((4, 2, 4, 3)).astype(np.float32)
    cu = np.array([0, 0, 5, 5, 5], np.int32)
    o, ht = call(
        lang,
        "chunk_simple_gla_fwd",
        q,
        q,
        v,
        g_gamma=GAMMA,
        initial_state=h04,
        output_final_state=True,
        cu_seqlens=cu,
    )
    for i in (0, 2, 3):
        assert np.array_equal(_np(ht)[i], h04[i])
    ro, rh = simple_gla_reference(
        *(torch.from_numpy(a) for a in (q, q, v)),
        g_gamma=torch.from_numpy(GAMMA),
        initial_state=torch.from_numpy(h04),
        cu_seqlens=cu.tolist(),
    )
    assert np.allclose(_np(o), ro.numpy(), atol=1e-5)
    assert np.allclose(_np(ht), rh.numpy(), atol=1e-5)


def test_triton_honours_non_contiguous_inputs_and_outputs():
    rng = np.random.default_rng(1)
    base = torch.from_numpy(rng.standard_normal((1, 2, 19, 8)).astype(np.float32))
    q = base.transpose(1, 2)  # [1, 19, 2, 8], strided
    k = torch.from_numpy(rng.standard_normal((1, 19, 2, 16)).astype(np.float32))[..., ::2]
    v = torch.from_numpy(rng.standard_normal((1, 19, 2, 5)).astype(np.float32))
    g = torch.from_numpy(-rng.random((1, 2, 19)).astype(np.float32)).transpose(1, 2)
    out = torch.full((1, 19, 2, 10), float("nan"))[..., ::2]
    o, _ = ktriton.chunk_simple_gla_fwd(q, k, v, g=g, chunk_size=16, out=out, interpret=True)
    assert o.data_ptr() == out.data_ptr()
    ro, _ = simple_gla_reference(q, k, v, g=g)
    assert torch.allclose(o.double(), ro, atol=1e-5)
    do = torch.from_numpy(rng.standard_normal((1, 19, 2, 5)).astype(np.float32))
    dq, dk, dv, dg, dh0 = ktriton.chunk_simple_gla_bwd(
        q, k, v, do, g=g, chunk_size=16, interpret=True
    )
    ref = simple_gla_reference_grads(q, k, v, do, g=g)
    for name, got in (("dq", dq), ("dk", dk), ("dv", dv), ("dg", dg)):
        assert torch.allclose(got.double(), getattr(ref, name), atol=1e-4), name
    assert dh0 is None


@pytest.mark.parametrize("lang", ALL)
def test_defaults_scale_and_no_final_state(lang):
    rng = np.random.default_rng(2)
    q = rng.standard_normal((2, 7, 1, 9)).astype(np.float32)
    v = rng.standard_normal((2, 7, 1, 4)).astype(np.float32)
    gamma = np.array([-0.1], np.float32)
    o, ht = call(lang, "chunk_simple_gla_fwd", q, q, v, g_gamma=gamma)
    assert ht is None
    ro, _ = simple_gla_reference(
        torch.from_numpy(q),
        torch.from_numpy(q),
        torch.from_numpy(v),
        g_gamma=torch.from_numpy(gamma),
        scale=9**-0.5,
    )
    assert np.allclose(_np(o), ro.numpy(), atol=1e-5)
    *_, dg, dh0 = call(lang, "chunk_simple_gla_bwd", q, q, v, v, g_gamma=gamma)
    assert dg is None and dh0 is None


@pytest.mark.parametrize("lang", ALL)
@pytest.mark.parametrize("chunk, per_token", [(128, True), (256, False)])
def test_long_chunks_are_tiled_and_exact(lang, chunk, per_token):
    """Chunks longer than 64 run as 64 x 64 tiles (off-diagonal tiles below the diagonal, dg's
    suffix sums across tiles): forward and backward against the fp64 oracle."""
    rng = np.random.default_rng(3)
    t = chunk + 70
    q, k = (rng.standard_normal((1, t, 1, 16)).astype(np.float32) for _ in range(2))
    v, do = (rng.standard_normal((1, t, 1, 8)).astype(np.float32) for _ in range(2))
    h0 = rng.standard_normal((1, 1, 16, 8)).astype(np.float32)
    decay = (
        {"g": (-np.logaddexp(0.0, -rng.standard_normal((1, t, 1)))).astype(np.float32)}
        if per_token
        else {"g_gamma": np.array([-0.3], np.float32)}
    )
    o, ht = call(
        lang,
        "chunk_simple_gla_fwd",
        q,
        k,
        v,
        initial_state=h0,
        output_final_state=True,
        chunk_size=chunk,
        **decay,
    )
    grads = call(
        lang,
        "chunk_simple_gla_bwd",
        q,
        k,
        v,
        do,
        initial_state=h0,
        chunk_size=chunk,
        dht=h0,
        **decay,
    )
    tt = {n: torch.from_numpy(a) for n, a in dict(q=q, k=k, v=v, do=do, h0=h0, **decay).items()}
    ro, rh = simple_gla_reference(
        tt["q"], tt["k"], tt["v"], tt.get("g"), tt.get("g_gamma"), initial_state=tt["h0"]
    )
    ref = simple_gla_reference_grads(
        tt["q"],
        tt["k"],
        tt["v"],
        tt["do"],
        tt.get("g"),
        tt.get("g_gamma"),
        initial_state=tt["h0"],
        dht=tt["h0"],
    )
    assert np.allclose(_np(o), ro.numpy(), atol=2e-4)
    assert np.allclose(_np(ht), rh.numpy(), atol=2e-4)
    for name, got in zip(("dq", "dk", "dv", "dg", "dh0"), grads, strict=True):
        want = getattr(ref, name)
        if want is None:
            assert got is None
            continue
        assert np.allclose(_np(got), want.numpy(), atol=5e-4 * (1 + float(want.abs().max()))), name


@pytest.mark.parametrize("lang", ALL)
def test_padding_past_cu_seqlens_is_not_read_and_its_outputs_are_zero(lang):
    """Tokens past cu_seqlens[-1] (a packed batch padded to a size): NaN there changes nothing
    and their outputs are 0, also in poisoned (NaN) output buffers."""
    rng = np.random.default_rng(5)
    t, end = 20, 13
    q, k = (rng.standard_normal((1, t, 2, 4)).astype(np.float32) for _ in range(2))
    v, do = (rng.standard_normal((1, t, 2, 3)).astype(np.float32) for _ in range(2))
    g = -np.abs(rng.standard_normal((1, t, 2))).astype(np.float32)
    cu = np.array([0, 6, end], np.int32)
    for a in (q, k, v, do, g):
        a[:, end:] = np.nan
    nan = lambda *shape: np.full(shape, np.nan, np.float32)  # noqa: E731
    o, ht = call(
        lang,
        "chunk_simple_gla_fwd",
        q,
        k,
        v,
        g=g,
        cu_seqlens=cu,
        output_final_state=True,
        out=nan(1, t, 2, 3),
    )
    grads = call(
        lang,
        "chunk_simple_gla_bwd",
        q,
        k,
        v,
        do,
        g=g,
        cu_seqlens=cu,
        out_dq=nan(1, t, 2, 4),
        out_dk=nan(1, t, 2, 4),
        out_dv=nan(1, t, 2, 3),
        out_dg=nan(1, t, 2),
    )
    tt = {n: torch.from_numpy(a) for n, a in dict(q=q, k=k, v=v, do=do, g=g).items()}
    ro, rh = simple_gla_reference(tt["q"], tt["k"], tt["v"], tt["g"], cu_seqlens=cu.tolist())
    ref = simple_gla_reference_grads(
        tt["q"], tt["k"], tt["v"], tt["do"], tt["g"], cu_seqlens=cu.tolist()
    )
    assert (_np(o)[:, end:] == 0).all() and np.allclose(
        _np(o)[:, :end], ro.numpy()[:, :end], atol=1e-5
    )
    assert np.allclose(_np(ht), rh.numpy(), atol=1e-5)
    for name, got in zip(("dq", "dk", "dv", "dg"), grads[:4], strict=True):
        got = _np(got)
        assert (got[:, end:] == 0).all(), name
        want = getattr(ref, name).numpy()
        assert np.allclose(got[:, :end], want[:, :end], atol=1e-4 * (1 + np.abs(want).max())), name
