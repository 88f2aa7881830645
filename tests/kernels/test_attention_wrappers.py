"""The attention kernels' public wrappers: bad input gets a clear error naming the argument before
any launch; call shapes the strategies draw rarely work (odd head dims, empty lengths, strided
outputs); and the structural equivalences the family properties check hold bit for bit here."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.alibi import alibi_slopes
from kernels.attention import pallas as kpallas
from kernels.attention import pallas_decode as kpallas_decode
from kernels.attention import triton as ktriton
from kernels.attention import triton_decode as ktriton_decode
from oracles.attention import attention_reference, visible


def _conv_torch(a):
    return torch.from_numpy(a) if isinstance(a, np.ndarray) else a


def _conv_jax(a):
    return jnp.asarray(a) if isinstance(a, np.ndarray) else a


def call_triton(q, k, v, **kw):
    kw = {n: _conv_torch(a) for n, a in kw.items()}
    return ktriton.attention(_conv_torch(q), _conv_torch(k), _conv_torch(v), interpret=True, **kw)


def call_pallas(q, k, v, **kw):
    kw = {n: _conv_jax(a) for n, a in kw.items()}
    o, lse = kpallas.attention(_conv_jax(q), _conv_jax(k), _conv_jax(v), interpret=True, **kw)
    return torch.from_numpy(np.array(o)), torch.from_numpy(np.array(lse))


def decode_triton(q, k, v, cache_len, **kw):
    kw = {n: _conv_torch(a) for n, a in kw.items()}
    return ktriton_decode.attention_decode(
        *(_conv_torch(a) for a in (q, k, v, cache_len)), interpret=True, **kw
    )


def decode_pallas(q, k, v, cache_len, **kw):
    kw = {n: _conv_jax(a) for n, a in kw.items()}
    o, lse = kpallas_decode.attention_decode(
        *(_conv_jax(a) for a in (q, k, v, cache_len)), interpret=True, **kw
    )
    return torch.from_numpy(np.array(o)), torch.from_numpy(np.array(lse))


CALLS = [call_triton, call_pallas]
DECODES = [decode_triton, decode_pallas]
IDS = ["triton", "pallas"]

rng = np.random.default_rng(0)
Q = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
K = rng.standard_normal((1, 1, 7, 8)).astype(np.float32)
I32 = np.int32

BAD = [
    (dict(q=Q[0]), ValueError, "q.shape=(2, 5, 8) must have 4 axes [B, H, T, D]"),
    (
        dict(v=K[:, :, :6]),
        ValueError,
        "k.shape=(1, 1, 7, 8) and v.shape=(1, 1, 6, 8) must be equal",
    ),
    (dict(q=np.concatenate([Q, Q])), ValueError, "k.shape[0]=1 must equal the batch q.shape[0]=2"),
    (dict(q=Q[..., :4]), ValueError, "k.shape[3]=8 must equal the head dim q.shape[3]=4"),
    (
        dict(
            q=np.zeros((1, 2, 5, 300), np.float32),
            k=np.zeros((1, 1, 7, 300), np.float32),
            v=np.zeros((1, 1, 7, 300), np.float32),
        ),
        ValueError,
        "head dim q.shape[3]=300 must be in [1, 256]",
    ),
    (
        dict(
            q=np.zeros((1, 3, 5, 8), np.float32),
            k=np.zeros((1, 2, 7, 8), np.float32),
            v=np.zeros((1, 2, 7, 8), np.float32),
        ),
        ValueError,
        "Hq=3 must be a multiple of Hkv=2",
    ),
    (dict(q=Q.astype(np.int32)), ValueError, "q.dtype="),
    (dict(k=K.astype(np.float16)), ValueError, "must equal q.dtype="),
    (dict(scale=0.0), ValueError, "scale=0.0 must be finite and > 0"),
    (dict(scale=math.nan), ValueError, "scale=nan must be finite and > 0"),
    (dict(scale="1"), TypeError, "scale must be a float or None"),
    (dict(causal="yes"), TypeError, "causal must be a bool"),
    (dict(window=(1,)), ValueError, "window=(1,) must be None or a pair (left, right)"),
    (dict(window=(-2, 0)), ValueError, "window[0] (left)=-2 must be >= 0, or -1 for unbounded"),
    (dict(window=(0, 1.5)), TypeError, "window[1] (right)=1.5 must be an int"),
    (dict(softcap=0.0), ValueError, "softcap=0.0 must be finite and > 0"),
    (dict(softcap=math.inf), ValueError, "softcap=inf must be finite and > 0"),
    (dict(softcap=True), TypeError, "softcap must be a float or None"),
    (dict(block_q=8), ValueError, "block_q=8 must be a power of two in [16, 256]"),
    (dict(block_k=48), ValueError, "block_k=48 must be a power of two in [16, 256]"),
    (dict(block_k=512), ValueError, "block_k=512 must be a power of two in [16, 256]"),
    (dict(key_lengths=np.array([3, 4], I32)), ValueError, "key_lengths.shape=(2,) must be (1,)"),
    (dict(key_lengths=np.array([8], I32)), ValueError, "key_lengths[0]=8 must be in [0, 7]"),
    (dict(key_lengths=np.array([-1], I32)), ValueError, "key_lengths[0]=-1 must be in [0, 7]"),
    (dict(key_lengths=np.array([3.0], np.float32)), ValueError, "key_lengths.dtype="),
    (dict(cu_seqlens_q=np.array([0, 5], I32)), ValueError, "must be given together"),
    (
        dict(
            cu_seqlens_q=np.array([0, 5], I32),
            cu_seqlens_k=np.array([0, 7], I32),
            key_lengths=np.array([3], I32),
        ),
        ValueError,
        "key_lengths cannot be combined",
    ),
    (
        dict(cu_seqlens_q=np.array([1, 5], I32), cu_seqlens_k=np.array([0, 7], I32)),
        ValueError,
        "cu_seqlens_q[0]=1 must be 0",
    ),
    (
        dict(cu_seqlens_q=np.array([0, 3, 2, 5], I32), cu_seqlens_k=np.array([0, 1, 2, 7], I32)),
        ValueError,
        "cu_seqlens_q must be non-decreasing, but cu_seqlens_q[2]=2 < cu_seqlens_q[1]=3",
    ),
    (
        dict(cu_seqlens_q=np.array([0, 4], I32), cu_seqlens_k=np.array([0, 7], I32)),
        ValueError,
        "cu_seqlens_q[-1]=4 must be == the packed length 5",
    ),
    (
        dict(cu_seqlens_q=np.array([0, 5], I32), cu_seqlens_k=np.array([0, 8], I32)),
        ValueError,
        "cu_seqlens_k[-1]=8 must be <= the packed length 7",
    ),
    (
        dict(cu_seqlens_q=np.array([0, 2, 5], I32), cu_seqlens_k=np.array([0, 7], I32)),
        ValueError,
        "must be equal (one entry per sequence, plus one)",
    ),
    (dict(alibi_slopes="geometric"), ValueError, "alibi_slopes='geometric' must be 'standard'"),
    (dict(alibi_slopes=np.ones(3, np.float32)), ValueError, "alibi_slopes.shape=(3,) must be (2,)"),
    (
        dict(alibi_slopes=np.array([1.0, np.inf], np.float32)),
        ValueError,
        "alibi_slopes must be finite",
    ),
]


def _full_call(call, kw):
    q, k, v = kw.pop("q", Q), kw.pop("k", K), kw.pop("v", None)
    if v is None:
        v = k
    return call(q, k, v, **kw)


@pytest.mark.parametrize("call", CALLS, ids=IDS)
@pytest.mark.parametrize("kwargs, exc, message", BAD)
def test_bad_input_is_named(call, kwargs, exc, message):
    with pytest.raises(exc) as info:
        _full_call(call, dict(kwargs))
    assert message in str(info.value)


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_varlen_needs_a_batch_of_one(call):
    q2, k2 = np.concatenate([Q, Q]), np.concatenate([K, K])
    with pytest.raises(ValueError, match=r"with cu_seqlens the batch q.shape\[0\]=2 must be 1"):
        call(q2, k2, k2, cu_seqlens_q=np.array([0, 5], I32), cu_seqlens_k=np.array([0, 7], I32))


DQ = rng.standard_normal((2, 4, 1, 8)).astype(np.float32)
DK = rng.standard_normal((2, 2, 9, 8)).astype(np.float32)
BAD_DECODE = [
    (dict(q=np.concatenate([DQ, DQ], axis=2)), ValueError, "q.shape[2]=2 must be 1"),
    (dict(cache_len=np.array([1], I32)), ValueError, "cache_len.shape=(1,) must be (2,)"),
    (dict(cache_len=np.array([1, 10], I32)), ValueError, "cache_len[1]=10 must be in [0, 9]"),
    (dict(num_splits=3), ValueError, "num_splits=3 must be a power of two in [1, 64]"),
    (dict(num_splits=128), ValueError, "num_splits=128 must be a power of two in [1, 64]"),
    (dict(block_k=8), ValueError, "block_k=8 must be a power of two in [16, 256]"),
    (dict(softcap=-1.0), ValueError, "softcap=-1.0 must be finite and > 0"),
]


@pytest.mark.parametrize("call", DECODES, ids=IDS)
@pytest.mark.parametrize("kwargs, exc, message", BAD_DECODE)
def test_bad_decode_input_is_named(call, kwargs, exc, message):
    kw = dict(kwargs)
    q, cache_len = kw.pop("q", DQ), kw.pop("cache_len", np.array([3, 9], I32))
    with pytest.raises(exc) as info:
        call(q, DK, DK, cache_len, **kw)
    assert message in str(info.value)


def test_wrong_array_types_are_named():
    with pytest.raises(TypeError, match=r"q must be a torch\.Tensor"):
        ktriton.attention(Q, torch.from_numpy(K), torch.from_numpy(K))
    with pytest.raises(TypeError, match=r"k must be a jax\.Array"):
        kpallas.attention(jnp.asarray(Q), K, jnp.asarray(K))


def _reference(q, k, v, **kw):
    t = {n: torch.from_numpy(a) if isinstance(a, np.ndarray) else a for n, a in kw.items()}
    return attention_reference(*(torch.from_numpy(a) for a in (q, k, v)), **t)


def _close(got, want, atol=2e-6):
    o, lse = (x.double() for x in got)
    ro, rl = want
    assert torch.equal(torch.isneginf(lse), torch.isneginf(rl))
    fin = torch.isfinite(rl)
    assert torch.allclose(lse[fin], rl[fin], atol=atol * 10, rtol=0)
    assert torch.allclose(o, ro, atol=atol, rtol=0)


@pytest.mark.parametrize("call", CALLS, ids=IDS)
@pytest.mark.parametrize("d", [1, 3, 24, 80])
def test_head_dims_that_are_not_powers_of_two(call, d):
    q = rng.standard_normal((1, 2, 9, d)).astype(np.float32)
    k = rng.standard_normal((1, 2, 11, d)).astype(np.float32)
    _close(call(q, k, k, causal=True, block_q=16, block_k=16), _reference(q, k, k, causal=True))


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_empty_lengths(call):
    q = rng.standard_normal((1, 1, 3, 4)).astype(np.float32)
    k0 = np.zeros((1, 1, 0, 4), np.float32)
    o, lse = call(q, k0, k0)
    assert torch.all(o == 0) and torch.isneginf(lse).all()
    o, lse = call(q[:, :, :0], k0, k0)
    assert o.shape == (1, 1, 0, 4) and lse.shape == (1, 1, 0)
    # Packed sequences with no key row at all (found by the fuzzer: the Pallas wrapper's gather
    # of an empty key array used to raise IndexError).
    o, lse = call(
        q, k0, k0, cu_seqlens_q=np.array([0, 1, 3], I32), cu_seqlens_k=np.array([0, 0, 0], I32)
    )
    assert torch.all(o == 0) and torch.isneginf(lse).all()


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_every_mask_and_modifier_at_once(call):
    q = rng.standard_normal((2, 4, 19, 16)).astype(np.float32)
    k = rng.standard_normal((2, 2, 23, 16)).astype(np.float32)
    v = rng.standard_normal((2, 2, 23, 16)).astype(np.float32)
    kw = dict(
        causal=True,
        window=(5, 2),
        key_lengths=np.array([23, 9], I32),
        alibi_slopes=np.array(alibi_slopes(4), np.float32),
        softcap=3.0,
        scale=0.3,
    )
    _close(call(q, k, v, block_q=32, block_k=16, **kw), _reference(q, k, v, **kw))


def test_triton_writes_into_strided_outputs_and_nothing_else():
    q = torch.randn(1, 2, 5, 8)
    k = torch.randn(1, 2, 7, 8)
    big = torch.full((1, 2, 5, 12), float("nan"))
    out = big[..., 2:10]
    lse_big = torch.full((1, 2, 9), float("nan"))
    lse_out = lse_big[..., 1:6]
    o, lse = ktriton.attention(
        q, k, k, out=out, lse_out=lse_out, interpret=True, block_q=16, block_k=16
    )
    assert o is out and lse is lse_out
    assert torch.isnan(big[..., :2]).all() and torch.isnan(big[..., 10:]).all()
    assert torch.isnan(lse_big[..., :1]).all() and torch.isnan(lse_big[..., 6:]).all()
    ro, rl = attention_reference(q, k, k)
    assert torch.allclose(o.double(), ro, atol=2e-6) and torch.allclose(lse.double(), rl, atol=2e-6)


def test_pallas_out_is_the_initial_buffer():
    q = jnp.asarray(rng.standard_normal((1, 1, 3, 8)), jnp.float32)
    init_o = jnp.full(q.shape, jnp.nan, jnp.float32)
    init_l = jnp.full((1, 1, 3), jnp.nan, jnp.float32)
    o, lse = kpallas.attention(q, q, q, out=init_o, lse_out=init_l, interpret=True)
    assert not np.isnan(np.asarray(o)).any() and not np.isnan(np.asarray(lse)).any()


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_standard_slopes_by_name_equal_the_explicit_slopes(call):
    q = rng.standard_normal((1, 3, 6, 8)).astype(np.float32)
    k = rng.standard_normal((1, 3, 6, 8)).astype(np.float32)
    by_name = call(q, k, k, alibi_slopes="standard", causal=True)
    explicit = call(q, k, k, alibi_slopes=np.array(alibi_slopes(3), np.float32), causal=True)
    assert all(torch.equal(a, b) for a, b in zip(by_name, explicit, strict=True))


# The structural equivalences the family properties check (with a tolerance, for any kernel)
# hold bit for bit for these kernels: same tiles, same operations, same order.


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_gqa_equals_mha_bit_for_bit(call):
    q = rng.standard_normal((1, 6, 10, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 12, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 12, 8)).astype(np.float32)
    gqa = call(q, k, v, causal=True, alibi_slopes="standard")
    mha = call(
        q, np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1), causal=True, alibi_slopes="standard"
    )
    assert all(torch.equal(a, b) for a, b in zip(gqa, mha, strict=True))


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_key_padding_equals_truncation_bit_for_bit(call):
    q = rng.standard_normal((2, 2, 7, 8)).astype(np.float32)
    k = rng.standard_normal((2, 2, 20, 8)).astype(np.float32)
    k[1, :, 6:] = np.nan  # past batch 1's length: never read
    o, lse = call(q, k, k, key_lengths=np.array([20, 6], I32), causal=True, window=(3, -1))
    o1, lse1 = call(q[1:], k[1:, :, :6], k[1:, :, :6], causal=True, window=(3, -1))
    assert torch.equal(o[1:], o1) and torch.equal(lse[1:], lse1)


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_varlen_equals_each_sequence_alone_bit_for_bit(call):
    lens_q, lens_k = [3, 0, 17, 1], [5, 2, 17, 0]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(I32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(I32)
    q = rng.standard_normal((1, 2, int(cu_q[-1]), 8)).astype(np.float32)
    k = rng.standard_normal((1, 1, int(cu_k[-1]) + 3, 8)).astype(np.float32)
    k[:, :, int(cu_k[-1]) :] = np.nan  # guard rows after the last sequence: never read
    o, lse = call(
        q, k, k, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True, block_q=16, block_k=16
    )
    assert not torch.isnan(o).any()
    for n in range(4):
        a, b, c, d = cu_q[n], cu_q[n + 1], cu_k[n], cu_k[n + 1]
        alone, alone_lse = call(
            q[:, :, a:b], k[:, :, c:d], k[:, :, c:d], causal=True, block_q=16, block_k=16
        )
        assert torch.equal(o[:, :, a:b], alone) and torch.equal(lse[:, :, a:b], alone_lse), n


@pytest.mark.parametrize("call, decode", list(zip(CALLS, DECODES, strict=True)), ids=IDS)
def test_decode_equals_the_last_causal_row(call, decode):
    q = rng.standard_normal((3, 4, 1, 8)).astype(np.float32)
    k = rng.standard_normal((3, 2, 40, 8)).astype(np.float32)
    v = rng.standard_normal((3, 2, 40, 8)).astype(np.float32)
    lens = np.array([40, 1, 0], I32)
    k[1, :, 1:] = np.nan  # past the cache length: never read
    kw = dict(alibi_slopes="standard", softcap=4.0, window=(20, -1))
    o, lse = decode(q, k, v, lens, num_splits=4, block_k=16, **kw)
    assert torch.all(o[2] == 0) and torch.isneginf(lse[2]).all()
    for b in (0, 1):
        n = int(lens[b])
        full, full_lse = call(
            np.repeat(q[b : b + 1], n, axis=2),
            k[b : b + 1, :, :n],
            v[b : b + 1, :, :n],
            causal=True,
            block_q=16,
            block_k=16,
            **kw,
        )
        assert torch.allclose(o[b], full[0, :, -1:], atol=1e-6, rtol=0), b
        assert torch.allclose(lse[b], full_lse[0, :, -1:], atol=1e-5, rtol=0), b
    one, one_lse = decode(q, k, v, lens, num_splits=1, block_k=16, **kw)
    assert torch.allclose(o, one, atol=1e-6) and torch.allclose(lse, one_lse, atol=1e-5)


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_scale_once_bit_for_bit(call):
    q = rng.standard_normal((1, 2, 9, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 9, 8)).astype(np.float32)
    a = call(q, k, k, causal=True, softcap=2.0)
    b = call(q * 4, k, k, causal=True, softcap=2.0, scale=float(np.float32(1 / math.sqrt(8)) / 4))
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(
    block_q=st.sampled_from([16, 32, 64, 128]),
    block_k=st.sampled_from([16, 32, 64, 128]),
    q_len=st.integers(0, 300),
    k_len=st.integers(0, 300),
    causal=st.booleans(),
    window_left=st.integers(-1, 80),
    window_right=st.integers(-1, 80),
    q_pad=st.integers(0, 4),
)
def test_pallas_key_tiles_stay_within_the_keys_and_cover_every_visible_one(
    block_q, block_k, q_len, k_len, causal, window_left, window_right, q_pad
):
    """Every query block of a padded bucket, those past the sequence's end included, reads key
    tiles within the sequence's keys only (the interpreter clamps an overhanging slice; a GPU
    reads out of bounds: the illegal address an H100 run hit), and each visible key is read."""
    tiles_k = -(-k_len // block_k)
    keep = visible(q_len, k_len, causal=causal, window=(window_left, window_right)).numpy()
    for pid_q in range(-(-q_len // block_q) + q_pad):
        first, last = (
            int(x)
            for x in kpallas.key_tiles(
                jnp.int32(pid_q),
                jnp.int32(q_len),
                jnp.int32(k_len),
                jnp.bool_(causal),
                jnp.int32(window_left),
                jnp.int32(window_right),
                block_q=block_q,
                block_k=block_k,
            )
        )
        assert 0 <= first <= last <= tiles_k, (pid_q, first, last)
        for i in range(pid_q * block_q, min((pid_q + 1) * block_q, q_len)):
            for j in np.flatnonzero(keep[i]):
                assert first <= j // block_k < last, (i, j, first, last)
