"""Split-KV decode attention in Triton (flash-decoding): one new query per sequence against a cache.

Same scores and masks as ``kernels.attention.triton`` for a sequence of one query and
``Lk = cache_len[b]`` keys: the query sits at position ``Lk - 1`` (it sees every cached key; a
window's left side ``left`` keeps ``j >= Lk - 1 - left``; ALiBi adds ``-slope * (Lk - 1 - j)``).

Two kernels. The split kernel runs one program per (batch element, kv head, split): the visible
key tiles of a sequence are cut into ``num_splits`` contiguous ranges, and each program reduces
its range for all the query heads that share the kv head (GQA packing: those heads are the rows
of the tile, padded to 16 for ``tl.dot``) into a normalized partial output and its log-sum-exp.
The combine kernel merges the splits of each (batch element, query head) through their
log-sum-exps. A split with no key (more splits than key tiles, a short cache) has LSE -inf and
weight 0; a sequence with no key at all (``cache_len`` 0) gets zeros and LSE -inf.
"""

from __future__ import annotations

import torch
import triton.language as tl

from kernels._triton_interp import interpreted
from kernels._triton_jit import jit_any_size
from kernels._validate import next_pow2
from kernels.attention._common import (
    check_blocks,
    check_dtypes,
    check_lengths,
    check_num_splits,
    check_options,
    check_shapes,
    padded_head_dim,
    to_host,
)
from kernels.attention.triton import DTYPES, _check_tensor, _index_tensor, _slopes, _tanh


@jit_any_size(specialize=("stride_qd", "stride_kd", "stride_vd"))
def _decode_split_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    cache_len_ptr,
    slopes_ptr,
    o_part_ptr,
    lse_part_ptr,
    scale,
    softcap,
    window_left,
    head_dim,
    group,
    n_kv_heads,
    num_splits,
    stride_qb,
    stride_qh,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kt,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vt,
    stride_vd,
    stride_pb,
    stride_ph,
    stride_ps,
    stride_lb,
    stride_lh,
    HAS_LEFT: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr,
    HAS_ALIBI: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    split = tl.program_id(0)
    pid = tl.program_id(1)
    b = pid // n_kv_heads
    hk = pid % n_kv_heads
    k_len = tl.load(cache_len_ptr + b)
    g = tl.arange(0, BLOCK_H)
    g_ok = g < group
    heads = hk * group + g
    dims = tl.arange(0, BLOCK_D)
    dim_ok = dims < head_dim
    q = tl.load(
        q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh + dims[None, :] * stride_qd,
        mask=g_ok[:, None] & dim_ok[None, :],
        other=0.0,
    ).to(tl.float32)
    slope = tl.zeros([BLOCK_H], tl.float32)
    if HAS_ALIBI:
        slope = tl.load(slopes_ptr + heads, mask=g_ok, other=0.0).to(tl.float32)
    pos = k_len - 1  # the query is the newest position

    # The visible key tiles [first, last) are cut into num_splits contiguous ranges.
    lo = 0
    if HAS_LEFT:
        lo = tl.maximum(lo, pos - window_left)
    first = lo // BLOCK_K
    last = (k_len + BLOCK_K - 1) // BLOCK_K
    per_split = (tl.maximum(last - first, 0) + num_splits - 1) // num_splits
    start_blk = first + split * per_split
    end_blk = tl.minimum(last, start_blk + per_split)

    k_base = k_ptr + b.to(tl.int64) * stride_kb + hk * stride_kh
    v_base = v_ptr + b.to(tl.int64) * stride_vb + hk * stride_vh
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_D], tl.float32)
    for blk in range(start_blk, end_blk):
        cols = blk * BLOCK_K + tl.arange(0, BLOCK_K)
        # Keys past the cache length, or before the window's reach, are never read.
        col_ok = (cols < k_len) & (cols >= lo)
        k = tl.load(
            k_base + cols[:, None] * stride_kt + dims[None, :] * stride_kd,
            mask=col_ok[:, None] & dim_ok[None, :],
            other=0.0,
        ).to(tl.float32)
        v = tl.load(
            v_base + cols[:, None] * stride_vt + dims[None, :] * stride_vd,
            mask=col_ok[:, None] & dim_ok[None, :],
            other=0.0,
        ).to(tl.float32)
        valid = col_ok[None, :] & g_ok[:, None]
        if HAS_LEFT:
            valid = valid & (cols[None, :] >= pos - window_left)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        s = s * scale
        if HAS_SOFTCAP:
            s = softcap * _tanh(s / softcap)
        if HAS_ALIBI:
            s = s - slope[:, None] * (pos - cols[None, :]).to(tl.float32)
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_shift)
        p = tl.exp(s - m_shift[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new

    l_safe = tl.where(l_i > 0.0, l_i, 1.0)
    o = acc / l_safe[:, None]
    lse = tl.where(l_i > 0.0, m_i + tl.log(l_safe), float("-inf"))
    part = b.to(tl.int64) * stride_pb + heads * stride_ph + split * stride_ps
    tl.store(o_part_ptr + part[:, None] + dims[None, :], o, mask=g_ok[:, None])
    tl.store(lse_part_ptr + b.to(tl.int64) * stride_lb + heads * stride_lh + split, lse, mask=g_ok)


@jit_any_size(specialize=("stride_od",))
def _decode_combine_kernel(
    o_part_ptr,
    lse_part_ptr,
    o_ptr,
    lse_ptr,
    num_splits,
    head_dim,
    n_heads,
    stride_pb,
    stride_ph,
    stride_ps,
    stride_lb,
    stride_lh,
    stride_ob,
    stride_oh,
    stride_od,
    stride_rb,
    stride_rh,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid = tl.program_id(0)
    b = pid // n_heads
    h = pid % n_heads
    s = tl.arange(0, BLOCK_S)
    s_ok = s < num_splits
    dims = tl.arange(0, BLOCK_D)
    lse_s = tl.load(
        lse_part_ptr + b.to(tl.int64) * stride_lb + h * stride_lh + s,
        mask=s_ok,
        other=float("-inf"),
    )
    o_s = tl.load(
        o_part_ptr
        + b.to(tl.int64) * stride_pb
        + h * stride_ph
        + s[:, None] * stride_ps
        + dims[None, :],
        mask=s_ok[:, None],
        other=0.0,
    )
    m = tl.max(lse_s, 0)
    # Every split empty: shift by 0, so that exp(-inf - -inf) never happens; the weights are 0.
    m_shift = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp(lse_s - m_shift)
    total = tl.sum(w, 0)
    total_safe = tl.where(total > 0.0, total, 1.0)
    o = tl.sum(w[:, None] * o_s, 0) / total_safe
    lse = tl.where(total > 0.0, m_shift + tl.log(total_safe), float("-inf"))
    tl.store(
        o_ptr + b.to(tl.int64) * stride_ob + h * stride_oh + dims * stride_od,
        o.to(o_ptr.dtype.element_ty),
        mask=dims < head_dim,
    )
    tl.store(lse_ptr + b.to(tl.int64) * stride_rb + h * stride_rh, lse)


def attention_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cache_len: torch.Tensor,
    *,
    scale: float | None = None,
    window: tuple[int, int] | None = None,
    alibi_slopes: torch.Tensor | str | None = None,
    softcap: float | None = None,
    num_splits: int = 1,
    block_k: int = 64,
    out: torch.Tensor | None = None,
    lse_out: torch.Tensor | None = None,
    interpret: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One decode step: each sequence's newest query against its cached keys and values.

    Args:
        q: ``[B, Hq, 1, D]``, float32/float16/bfloat16, ``1 <= D <= 256``.
        k_cache, v_cache: ``[B, Hkv, Tmax, D]`` of q's dtype, ``Hq % Hkv == 0``.
        cache_len: int ``[B]`` in ``[0, Tmax]``: the valid keys of each sequence (the query is
            at position ``cache_len - 1``; keys past ``cache_len`` are never read).
        scale, alibi_slopes, softcap: as ``kernels.attention.triton.attention``.
        window: ``(left, right)`` as there; only ``left`` can remove keys (none lie to the right
            of the newest position).
        num_splits: split each sequence's key range into this many parts (a power of two in
            [1, 64]), reduced in parallel and combined through their log-sum-exps.
        block_k: key tile, a power of two in [16, 256].
        out: optional ``[B, Hq, 1, D]`` output of q's dtype, any strides; written in place.
        lse_out: optional ``[B, Hq, 1]`` float32 output, any strides; written in place.
        interpret: run Triton's interpreter (CPU tensors) instead of the compiled kernels.

    Returns:
        ``(o [B, Hq, 1, D], lse [B, Hq, 1] float32)``; a sequence with an empty cache gets zeros
        and LSE -inf.
    """
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    batch, hq, hkv, tq, tmax, d = check_shapes(q.shape, k_cache.shape, v_cache.shape)
    if tq != 1:
        raise ValueError(f"q.shape[2]={tq} must be 1: one new query per sequence")
    check_dtypes(q.dtype, k_cache.dtype, v_cache.dtype, DTYPES)
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        _check_tensor(name, t, device=q.device)
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
    lens = _index_tensor("cache_len", cache_len, q.device)
    check_lengths("cache_len", to_host("cache_len", lens), batch, tmax)
    slopes = _slopes(alibi_slopes, hq, q.device)
    if out is None:
        out = torch.empty_like(q)
    else:
        _check_tensor("out", out, device=q.device)
        if tuple(out.shape) != tuple(q.shape) or out.dtype != q.dtype:
            raise ValueError(
                f"out is {out.dtype}{list(out.shape)}; expected q's {q.dtype}{list(q.shape)}"
            )
    if lse_out is None:
        lse_out = torch.empty((batch, hq, 1), dtype=torch.float32, device=q.device)
    else:
        _check_tensor("lse_out", lse_out, device=q.device)
        if tuple(lse_out.shape) != (batch, hq, 1) or lse_out.dtype != torch.float32:
            raise ValueError(
                f"lse_out is {lse_out.dtype}{list(lse_out.shape)}; expected torch.float32"
                f"{[batch, hq, 1]}"
            )
    if batch == 0:
        return out, lse_out
    group = hq // hkv
    dp = padded_head_dim(d)
    o_part = torch.empty((batch, hq, num_splits, dp), dtype=torch.float32, device=q.device)
    lse_part = torch.empty((batch, hq, num_splits), dtype=torch.float32, device=q.device)
    split_kernel = (
        interpreted(_decode_split_kernel, fast=True) if interpret else _decode_split_kernel
    )
    combine_kernel = (
        interpreted(_decode_combine_kernel, fast=True) if interpret else _decode_combine_kernel
    )
    split_kernel[(num_splits, batch * hkv)](
        q,
        k_cache,
        v_cache,
        lens,
        slopes if slopes is not None else q,
        o_part,
        lse_part,
        opts.scale,
        opts.softcap if opts.softcap is not None else 1.0,
        opts.window_left,
        d,
        group,
        hkv,
        num_splits,
        q.stride(0),
        q.stride(1),
        q.stride(3),
        *k_cache.stride(),
        *v_cache.stride(),
        o_part.stride(0),
        o_part.stride(1),
        o_part.stride(2),
        lse_part.stride(0),
        lse_part.stride(1),
        HAS_LEFT=opts.window_left >= 0,
        HAS_SOFTCAP=opts.softcap is not None,
        HAS_ALIBI=slopes is not None,
        BLOCK_H=max(16, next_pow2(group)),
        BLOCK_K=block_k,
        BLOCK_D=dp,
    )
    combine_kernel[(batch * hq,)](
        o_part,
        lse_part,
        out,
        lse_out,
        num_splits,
        d,
        hq,
        o_part.stride(0),
        o_part.stride(1),
        o_part.stride(2),
        lse_part.stride(0),
        lse_part.stride(1),
        out.stride(0),
        out.stride(1),
        out.stride(3),
        lse_out.stride(0),
        lse_out.stride(1),
        BLOCK_S=next_pow2(num_splits),
        BLOCK_D=dp,
    )
    return out, lse_out
