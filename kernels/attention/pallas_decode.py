"""Split-KV decode attention in JAX Pallas (flash-decoding), compiled for GPU or interpreted.

Same semantics and structure as ``kernels.attention.triton_decode`` (see its docstring): a split
kernel, one program per (batch element, kv head, split), whose rows are the query heads sharing
the kv head, writes normalized partial outputs and their log-sum-exps; a combine kernel merges the
splits. The wrapper lays the query heads out as ``[B, Hkv, G_pad, D_pad]`` and the cache as
``[B, Hkv, T_pad, D_pad]`` (powers of two, zeros in the padding, as the GPU lowering needs) and
passes each sequence's cache length as data.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from kernels._validate import next_pow2
from kernels.attention._common import (
    check_blocks,
    check_dtypes,
    check_lengths,
    check_num_splits,
    check_options,
    check_shapes,
    padded_head_dim,
)
from kernels.attention.pallas import (
    _HIGHEST,
    DTYPES,
    MIN_HEAD_BUCKET,
    _check_array,
    _check_out,
    _index_array,
    _pad_to,
    _put,
    _slopes,
    _tanh,
    bucket,
    gpu_compiler_params,
    jit_twins,
)


@dataclass(frozen=True)
class _Static:
    block_k: int
    num_splits: int


def _split_kernel(
    len_ref, fparams_ref, iparams_ref, slopes_ref, q_ref, k_ref, v_ref, o_ref, lse_ref, *, static
):
    block_k, num_splits = static.block_k, static.num_splits
    k_len = len_ref[0]
    scale = fparams_ref[0]
    softcap = fparams_ref[1]
    # Masks and modifiers are data, not compile-time flags: one compiled kernel per shape bucket.
    window_left = iparams_ref[0]  # -1: unbounded
    has_softcap = iparams_ref[1] != 0
    split = pl.program_id(2)
    q = q_ref[...].astype(jnp.float32)
    slope = slopes_ref[...]  # 0 without ALiBi: s - 0 * distance == s exactly
    pos = k_len - 1  # the query is the newest position

    # The visible key tiles [first, last) are cut into num_splits contiguous ranges.
    lo = jnp.where(window_left >= 0, jnp.maximum(0, pos - window_left), 0)
    first = lo // block_k
    last = (k_len + block_k - 1) // block_k
    per_split = (jnp.maximum(last - first, 0) + num_splits - 1) // num_splits
    start_blk = first + split * per_split
    end_blk = jnp.maximum(start_blk, jnp.minimum(last, start_blk + per_split))

    def body(blk, carry):
        m_i, l_i, acc = carry
        start = pl.multiple_of(blk * block_k, block_k)
        k = k_ref[pl.ds(start, block_k), :].astype(jnp.float32)
        v = v_ref[pl.ds(start, block_k), :].astype(jnp.float32)
        cols = start + jax.lax.broadcasted_iota(jnp.int32, (block_k,), 0)
        # Rows past the cache length, or before the window's reach, are never used.
        col_ok = (cols < k_len) & (cols >= lo)
        v = jnp.where(col_ok[:, None], v, 0.0)
        valid = jnp.broadcast_to(col_ok[None, :], (q.shape[0], block_k))
        valid = valid & ((window_left < 0) | (cols[None, :] >= pos - window_left))
        s = jnp.dot(q, k.T, precision=_HIGHEST, preferred_element_type=jnp.float32)
        s = s * scale
        s = jnp.where(has_softcap, softcap * _tanh(s / softcap), s)
        s = s - slope[:, None] * (pos - cols[None, :]).astype(jnp.float32)
        s = jnp.where(valid, s, -jnp.inf)
        m_new = jnp.maximum(m_i, s.max(axis=1))
        m_shift = jnp.where(m_new == -jnp.inf, 0.0, m_new)
        alpha = jnp.exp(m_i - m_shift)
        p = jnp.exp(s - m_shift[:, None])
        l_i = l_i * alpha + p.sum(axis=1)
        acc = acc * alpha[:, None] + jnp.dot(
            p, v, precision=_HIGHEST, preferred_element_type=jnp.float32
        )
        return m_new, l_i, acc

    rows, dp = q_ref.shape
    init = (
        jnp.full((rows,), -jnp.inf, jnp.float32),
        jnp.zeros((rows,), jnp.float32),
        jnp.zeros((rows, dp), jnp.float32),
    )
    m_i, l_i, acc = jax.lax.fori_loop(start_blk, end_blk, body, init)
    l_safe = jnp.where(l_i > 0.0, l_i, 1.0)
    o_ref[...] = acc / l_safe[:, None]
    lse_ref[...] = jnp.where(l_i > 0.0, m_i + jnp.log(l_safe), -jnp.inf)


def _combine_kernel(o_part_ref, lse_part_ref, o_init_ref, lse_init_ref, o_ref, lse_ref, *, static):
    del o_init_ref, lse_init_ref  # the aliased initial contents of the outputs: never read
    lse_s = [lse_part_ref[s, :] for s in range(static.num_splits)]
    m = lse_s[0]
    for x in lse_s[1:]:
        m = jnp.maximum(m, x)
    # Every split empty: shift by 0, so that exp(-inf - -inf) never happens; the weights are 0.
    m_shift = jnp.where(m == -jnp.inf, 0.0, m)
    total = jnp.zeros_like(m)
    acc = jnp.zeros(o_ref.shape, jnp.float32)
    for s in range(static.num_splits):
        w = jnp.exp(lse_s[s] - m_shift)
        total = total + w
        acc = acc + w[:, None] * o_part_ref[s, :, :]
    total_safe = jnp.where(total > 0.0, total, 1.0)
    o_ref[...] = (acc / total_safe[:, None]).astype(o_ref.dtype)
    lse_ref[...] = jnp.where(total > 0.0, m_shift + jnp.log(total_safe), -jnp.inf)


def _decode_padded(lens, fparams, iparams, slopes, q, k, v, o_init, lse_init, *, static, interpret):
    batch, hkv, g_p, dp = q.shape
    tk = k.shape[2]
    ns = static.num_splits
    per_seq = pl.BlockSpec((1,), lambda b, h, s: (b,))
    pair = pl.BlockSpec((2,), lambda b, h, s: (0,))
    part_o, part_lse = pl.pallas_call(
        functools.partial(_split_kernel, static=static),
        grid=(batch, hkv, ns),
        in_specs=[
            per_seq,
            pair,
            pair,
            pl.BlockSpec((None, g_p), lambda b, h, s: (h, 0)),
            pl.BlockSpec((None, None, g_p, dp), lambda b, h, s: (b, h, 0, 0)),
            pl.BlockSpec((None, None, tk, dp), lambda b, h, s: (b, h, 0, 0)),
            pl.BlockSpec((None, None, tk, dp), lambda b, h, s: (b, h, 0, 0)),
        ],
        out_specs=[
            pl.BlockSpec((None, None, None, g_p, dp), lambda b, h, s: (b, h, s, 0, 0)),
            pl.BlockSpec((None, None, None, g_p), lambda b, h, s: (b, h, s, 0)),
        ],
        out_shape=[
            jax.ShapeDtypeStruct((batch, hkv, ns, g_p, dp), jnp.float32),
            jax.ShapeDtypeStruct((batch, hkv, ns, g_p), jnp.float32),
        ],
        interpret=interpret,
        compiler_params=None
        if interpret
        else gpu_compiler_params(g_p, static.block_k, dp, q.dtype.itemsize),
    )(lens, fparams, iparams, slopes, q, k, v)
    o_block = pl.BlockSpec((None, None, g_p, dp), lambda b, h: (b, h, 0, 0))
    lse_block = pl.BlockSpec((None, None, g_p), lambda b, h: (b, h, 0))
    return pl.pallas_call(
        functools.partial(_combine_kernel, static=static),
        grid=(batch, hkv),
        in_specs=[
            pl.BlockSpec((None, None, ns, g_p, dp), lambda b, h: (b, h, 0, 0, 0)),
            pl.BlockSpec((None, None, ns, g_p), lambda b, h: (b, h, 0, 0)),
            o_block,
            lse_block,
        ],
        out_specs=[o_block, lse_block],
        out_shape=[
            jax.ShapeDtypeStruct((batch, hkv, g_p, dp), q.dtype),
            jax.ShapeDtypeStruct((batch, hkv, g_p), jnp.float32),
        ],
        input_output_aliases={2: 0, 3: 1},
        interpret=interpret,
        # The Triton lowering, named as for the split kernel (a JAX without a GPU jaxlib can then
        # lower it too: tests/kernels/test_attention_gpu_lowering.py).
        compiler_params=None if interpret else gpu_compiler_params(g_p, ns, dp, 4),
    )(part_o, part_lse, o_init, lse_init)


_decode_padded = jit_twins(_decode_padded, ("static", "interpret"))


def attention_decode(
    q: jax.Array,
    k_cache: jax.Array,
    v_cache: jax.Array,
    cache_len: jax.Array,
    *,
    scale: float | None = None,
    window: tuple[int, int] | None = None,
    alibi_slopes: jax.Array | str | None = None,
    softcap: float | None = None,
    num_splits: int = 1,
    block_k: int = 64,
    out: jax.Array | None = None,
    lse_out: jax.Array | None = None,
    interpret: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """One decode step; arguments and results as ``kernels.attention.triton_decode``
    (JAX arrays), with ``out``/``lse_out`` the initial contents of the outputs (aliased)."""
    for name, a in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        _check_array(name, a)
    batch, hq, hkv, tq, tmax, d = check_shapes(q.shape, k_cache.shape, v_cache.shape)
    if tq != 1:
        raise ValueError(f"q.shape[2]={tq} must be 1: one new query per sequence")
    check_dtypes(q.dtype, k_cache.dtype, v_cache.dtype, DTYPES)
    opts = check_options(
        head_dim=d,
        scale=scale,
        causal=False,
        window=window,
        softcap=softcap,
        has_alibi=alibi_slopes is not None,
    )
    _, block_k = check_blocks(16, block_k)
    num_splits = check_num_splits(num_splits)
    lens = check_lengths("cache_len", _index_array("cache_len", cache_len), batch, tmax)
    slopes = _slopes(alibi_slopes, hq)
    out = _check_out("out", out, (batch, hq, 1, d), q.dtype)
    lse_out = _check_out("lse_out", lse_out, (batch, hq, 1), jnp.dtype(jnp.float32))
    if batch == 0:
        return (out if out is not None else q), (
            lse_out if lse_out is not None else jnp.zeros((0, hq, 1), jnp.float32)
        )
    group = hq // hkv
    g_p = max(16, next_pow2(group))
    dp = padded_head_dim(d, MIN_HEAD_BUCKET)
    tk_p = bucket(tmax, block_k, interpret)

    def heads_layout(a) -> np.ndarray:  # [B, Hq, 1, D'] -> [B, Hkv, G_pad, D_pad]
        a = a.reshape(batch, hkv, group, a.shape[-1])
        return _pad_to(a, (batch, hkv, g_p, dp))

    slope_rows = np.zeros(hq, np.float32) if slopes is None else np.asarray(slopes)
    o_init = np.zeros(q.shape, q.dtype) if out is None else np.asarray(out)
    lse_init = np.zeros((batch, hq, 1), jnp.float32) if lse_out is None else np.asarray(lse_out)
    iparams = [opts.window_left, int(opts.softcap is not None)]
    o, lse = _decode_padded(
        *(
            _put(a, q)
            for a in (
                np.asarray(lens, np.int32),
                np.array([opts.scale, opts.softcap or 1.0], np.float32),
                np.array(iparams, np.int32),
                _pad_to(np.asarray(slope_rows).reshape(hkv, group), (hkv, g_p)),
                heads_layout(np.asarray(q)),
                _pad_to(np.asarray(k_cache), (batch, hkv, tk_p, dp)),
                _pad_to(np.asarray(v_cache), (batch, hkv, tk_p, dp)),
                heads_layout(o_init),
                _pad_to(lse_init.reshape(batch, hkv, group), (batch, hkv, g_p)),
            )
        ),
        static=_Static(block_k, num_splits),
        interpret=interpret,
    )
    o, lse = np.asarray(o), np.asarray(lse)
    o = o[:, :, :group, :d].reshape(batch, hq, 1, d)
    lse = lse[:, :, :group].reshape(batch, hq, 1)
    return _put(o, q), _put(lse, q)
