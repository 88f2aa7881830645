"""Simple GLA as the token recurrence, forward and backward, in Triton: a reformulation of the
chunked kernels (``kernels.simple_gla.triton``) that computes the same function in another order.

It exists to check the harness's error bound from the other side: a correct implementation whose
rounding differs from the chunked kernels' in every way that matters (no chunks, no prefix sums of
the log decays, one ``exp(g_t)`` per token, paths of one rounding chain per token) must pass every
property the real kernels pass (targets ``simple_gla_fwd_recurrent``, ``simple_gla_bwd_recurrent``).

One program per (sequence, head) carries the fp32 state ``[K, V]``::

    h_t = exp(g_t) h_{t-1} + k_t^T v_t          o_t = scale q_t h_t

Backward, with ``dh_t = dL/dh_t`` carried from the last token to the first (from ``dht``)::

    dh_t = exp(g_{t+1}) dh_{t+1} + scale q_t^T do_t
    dq_t = scale h_t do_t       dk_t = dh_t v_t       dv_t = k_t dh_t
    dg_t = exp(g_t) <dh_t, h_{t-1}>                     dh0 = exp(g_0) dh_0

The backward first walks the tokens forward (``dq`` and a checkpoint of the state every ``SEG``
tokens), then the segments backward, recomputing each segment's states from its checkpoint into a
``SEG``-state scratch (bit-identical to the forward's: the same operations in the same order).
``chunk_size`` is checked and ignored. Same arguments and outputs as the chunked kernels, whose
wrapper checks and buffers it reuses.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._triton_jit import jit_any_size, placeholders
from kernels.simple_gla.triton import (
    _index,
    _kernel,
    _out,
    _problem,
    _seq_bounds,
    _strides,
    backward_outputs,
    zero_padding,
)

SEG = 16  # tokens per checkpoint segment of the backward


@triton.jit
def _row(cols_ptr, tok, s_t, ok):
    """Row ``tok`` as fp32 from ``cols_ptr`` (row 0's pointer of each lane, hoisted out of the token
    loops: every interpreted operation counts); lanes not ``ok`` are 0."""
    return tl.load(cols_ptr + tok * s_t, mask=ok, other=0.0).to(tl.float32)


@triton.jit
def _decay(g_base, tok, s_gt, gamma, per_token):
    """``exp(g_t)``: the token's gate, or the head's constant ``gamma``."""
    g = tl.load(g_base + tok * s_gt, mask=per_token != 0, other=0.0).to(tl.float32)
    return tl.exp(tl.where(per_token != 0, g, gamma))


@jit_any_size(specialize=("s_qk", "s_kk", "s_vv", "s_ov", "s_h0v", "s_htv"))
def _fwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    gamma_ptr,
    h0_ptr,
    cu_ptr,
    o_ptr,
    ht_ptr,
    T,
    H,
    K,
    V,
    scale,
    per_token,
    has_h0,
    is_varlen,
    store_ht,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    s_gb,
    s_gt,
    s_gh,
    s_ob,
    s_ot,
    s_oh,
    s_ov,
    s_h0n,
    s_h0h,
    s_h0k,
    s_h0v,
    s_htn,
    s_hth,
    s_htk,
    s_htv,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    pid = tl.program_id(0)
    i_n = pid // H
    i_h = pid % H
    i_b, bos, eos = _seq_bounds(cu_ptr, i_n, T, is_varlen)
    ks = tl.arange(0, BK)
    vs = tl.arange(0, BV)
    state_ok = (ks[:, None] < K) & (vs[None, :] < V)
    k_ok = ks < K
    v_ok = vs < V
    q_cols = q_ptr + i_b * s_qb + i_h * s_qh + ks * s_qk
    k_cols = k_ptr + i_b * s_kb + i_h * s_kh + ks * s_kk
    v_cols = v_ptr + i_b * s_vb + i_h * s_vh + vs * s_vv
    o_cols = o_ptr + i_b * s_ob + i_h * s_oh + vs * s_ov
    g_base = g_ptr + i_b * s_gb + i_h * s_gh
    h0_offs = i_n.to(tl.int64) * s_h0n + i_h * s_h0h + ks[:, None] * s_h0k + vs[None, :] * s_h0v
    h = tl.load(h0_ptr + h0_offs, mask=state_ok & (has_h0 != 0), other=0.0).to(tl.float32)
    gamma = tl.load(gamma_ptr + i_h, mask=per_token == 0, other=0.0).to(tl.float32)
    for tok in range(bos, eos):
        q = _row(q_cols, tok, s_qt, k_ok)
        k = _row(k_cols, tok, s_kt, k_ok)
        v = _row(v_cols, tok, s_vt, v_ok)
        h = h * _decay(g_base, tok, s_gt, gamma, per_token) + k[:, None] * v[None, :]
        o = tl.sum(q[:, None] * h, axis=0) * scale
        tl.store(o_cols + tok * s_ot, o.to(o_ptr.dtype.element_ty), mask=v_ok)
    ht_offs = i_n.to(tl.int64) * s_htn + i_h * s_hth + ks[:, None] * s_htk + vs[None, :] * s_htv
    tl.store(ht_ptr + ht_offs, h, mask=state_ok & (store_ht != 0))


_BWD_UNIT = ("s_qk", "s_kk", "s_vv", "s_dov", "s_dhtv", "s_dqk", "s_dkk", "s_dvv", "s_dh0v")


@jit_any_size(specialize=_BWD_UNIT)
def _bwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    gamma_ptr,
    h0_ptr,
    do_ptr,
    dht_ptr,
    cu_ptr,
    ckpt_ptr,
    seg_ptr,
    dq_ptr,
    dk_ptr,
    dv_ptr,
    dg_ptr,
    dh0_ptr,
    T,
    H,
    K,
    V,
    NSEG,
    scale,
    per_token,
    has_h0,
    has_dht,
    store_dh0,
    is_varlen,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_kb,
    s_kt,
    s_kh,
    s_kk,
    s_vb,
    s_vt,
    s_vh,
    s_vv,
    s_gb,
    s_gt,
    s_gh,
    s_h0n,
    s_h0h,
    s_h0k,
    s_h0v,
    s_dob,
    s_dot,
    s_doh,
    s_dov,
    s_dhtn,
    s_dhth,
    s_dhtk,
    s_dhtv,
    s_dqb,
    s_dqt,
    s_dqh,
    s_dqk,
    s_dkb,
    s_dkt,
    s_dkh,
    s_dkk,
    s_dvb,
    s_dvt,
    s_dvh,
    s_dvv,
    s_dgb,
    s_dgt,
    s_dgh,
    s_dh0n,
    s_dh0h,
    s_dh0k,
    s_dh0v,
    BK: tl.constexpr,
    BV: tl.constexpr,
    S: tl.constexpr,
):
    pid = tl.program_id(0)
    i_n = pid // H
    i_h = pid % H
    i_b, bos, eos = _seq_bounds(cu_ptr, i_n, T, is_varlen)
    seq_len = eos - bos
    ks = tl.arange(0, BK)
    vs = tl.arange(0, BV)
    state_ok = (ks[:, None] < K) & (vs[None, :] < V)
    k_ok = ks < K
    v_ok = vs < V
    q_cols = q_ptr + i_b * s_qb + i_h * s_qh + ks * s_qk
    k_cols = k_ptr + i_b * s_kb + i_h * s_kh + ks * s_kk
    v_cols = v_ptr + i_b * s_vb + i_h * s_vh + vs * s_vv
    do_cols = do_ptr + i_b * s_dob + i_h * s_doh + vs * s_dov
    dq_cols = dq_ptr + i_b * s_dqb + i_h * s_dqh + ks * s_dqk
    dk_cols = dk_ptr + i_b * s_dkb + i_h * s_dkh + ks * s_dkk
    dv_cols = dv_ptr + i_b * s_dvb + i_h * s_dvh + vs * s_dvv
    g_base = g_ptr + i_b * s_gb + i_h * s_gh
    dg_base = dg_ptr + i_b * s_dgb + i_h * s_dgh
    offs = ks[:, None] * BV + vs[None, :]
    ckpt_base = ckpt_ptr + pid.to(tl.int64) * NSEG * BK * BV
    seg_tiles = seg_ptr + pid.to(tl.int64) * S * BK * BV + offs
    h0_offs = i_n.to(tl.int64) * s_h0n + i_h * s_h0h + ks[:, None] * s_h0k + vs[None, :] * s_h0v
    h = tl.load(h0_ptr + h0_offs, mask=state_ok & (has_h0 != 0), other=0.0).to(tl.float32)
    gamma = tl.load(gamma_ptr + i_h, mask=per_token == 0, other=0.0).to(tl.float32)
    n_seg = tl.cdiv(seq_len, S).to(tl.int32)
    # Forward: dq_t = scale h_t do_t, and the state entering every segment.
    for s in range(0, n_seg):
        tl.store(ckpt_base + s * BK * BV + offs, h)
        for tok in range(bos + s * S, tl.minimum(bos + (s + 1) * S, eos)):
            k = _row(k_cols, tok, s_kt, k_ok)
            v = _row(v_cols, tok, s_vt, v_ok)
            do = _row(do_cols, tok, s_dot, v_ok)
            h = h * _decay(g_base, tok, s_gt, gamma, per_token) + k[:, None] * v[None, :]
            dq = tl.sum(h * do[None, :], axis=1) * scale
            tl.store(dq_cols + tok * s_dqt, dq.to(dq_ptr.dtype.element_ty), mask=k_ok)
    # Backward, a segment at a time: its states again (into the scratch), then its tokens in
    # reverse order.
    dht_offs = (
        i_n.to(tl.int64) * s_dhtn + i_h * s_dhth + ks[:, None] * s_dhtk + vs[None, :] * s_dhtv
    )
    dh = tl.load(dht_ptr + dht_offs, mask=state_ok & (has_dht != 0), other=0.0).to(tl.float32)
    for ss in range(0, n_seg):
        s = n_seg - 1 - ss
        t0 = bos + s * S
        n = tl.minimum(S, eos - t0).to(tl.int32)
        h = tl.load(ckpt_base + s * BK * BV + offs)
        tl.debug_barrier()  # the scratch's previous segment is read before it is overwritten
        for i in range(0, n):  # the state entering each token of the segment
            tl.store(seg_tiles + i * (BK * BV), h)
            k = _row(k_cols, t0 + i, s_kt, k_ok)
            v = _row(v_cols, t0 + i, s_vt, v_ok)
            h = h * _decay(g_base, t0 + i, s_gt, gamma, per_token) + k[:, None] * v[None, :]
        tl.debug_barrier()
        for ii in range(0, n):
            i = n - 1 - ii
            tok = t0 + i
            q = _row(q_cols, tok, s_qt, k_ok)
            k = _row(k_cols, tok, s_kt, k_ok)
            v = _row(v_cols, tok, s_vt, v_ok)
            do = _row(do_cols, tok, s_dot, v_ok)
            decay = _decay(g_base, tok, s_gt, gamma, per_token)
            dh += (q * scale)[:, None] * do[None, :]
            dk = tl.sum(dh * v[None, :], axis=1)
            dv = tl.sum(dh * k[:, None], axis=0)
            tl.store(dk_cols + tok * s_dkt, dk.to(dk_ptr.dtype.element_ty), mask=k_ok)
            tl.store(dv_cols + tok * s_dvt, dv.to(dv_ptr.dtype.element_ty), mask=v_ok)
            h_prev = tl.load(seg_tiles + i * (BK * BV))
            dg = decay * tl.sum(tl.sum(dh * h_prev, axis=1), axis=0)
            tl.store(dg_base + tok * s_dgt, dg, mask=per_token != 0)
            dh = dh * decay
    dh0_offs = (
        i_n.to(tl.int64) * s_dh0n + i_h * s_dh0h + ks[:, None] * s_dh0k + vs[None, :] * s_dh0v
    )
    tl.store(dh0_ptr + dh0_offs, dh, mask=state_ok & (store_dh0 != 0))


def chunk_simple_gla_fwd(
    q,
    k,
    v,
    *,
    g=None,
    g_gamma=None,
    scale=None,
    initial_state=None,
    output_final_state=False,
    cu_seqlens=None,
    chunk_size=64,
    out=None,
    out_ht=None,
    interpret=False,
):
    """The token recurrence; arguments and results as ``kernels.simple_gla.triton``'s
    ``chunk_simple_gla_fwd`` (``chunk_size`` is checked, not used)."""
    p, cu = _problem(q, k, v, g, g_gamma, scale, initial_state, cu_seqlens, chunk_size)
    o = _out("out", out, (p.batch, p.length, p.heads, p.v_dim), q.dtype, q.device)
    ht = None
    if output_final_state:
        ht = _out("out_ht", out_ht, (p.n_seqs, p.heads, p.k_dim, p.v_dim), torch.float32, q.device)
    f32, _ = placeholders(q.device)
    _kernel(_fwd_kernel, interpret)[(p.n_seqs * p.heads,)](
        q,
        k,
        v,
        g if g is not None else f32,
        g_gamma if g_gamma is not None else f32,
        initial_state if initial_state is not None else f32,
        _index(cu, q.device),
        o,
        ht if ht is not None else f32,
        p.length,
        p.heads,
        p.k_dim,
        p.v_dim,
        p.scale,
        int(p.per_token),
        int(initial_state is not None),
        int(p.varlen),
        int(ht is not None),
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *_strides(g, 3),
        *o.stride(),
        *_strides(initial_state, 4),
        *_strides(ht, 4),
        BK=p.block_k,
        BV=p.block_v,
        num_warps=4,
    )
    zero_padding(p, o)
    return o, ht


def chunk_simple_gla_bwd(
    q,
    k,
    v,
    do,
    *,
    g=None,
    g_gamma=None,
    scale=None,
    initial_state=None,
    dht=None,
    cu_seqlens=None,
    chunk_size=64,
    out_dq=None,
    out_dk=None,
    out_dv=None,
    out_dg=None,
    out_dh0=None,
    interpret=False,
):
    """The token recurrence's gradients; arguments and results as ``kernels.simple_gla.triton``'s
    ``chunk_simple_gla_bwd`` (``chunk_size`` is checked, not used)."""
    p, cu = _problem(q, k, v, g, g_gamma, scale, initial_state, cu_seqlens, chunk_size)
    dev = q.device
    dq, dk, dv, dg, dh0 = backward_outputs(
        p, q, k, v, do, dht, initial_state, out_dq, out_dk, out_dv, out_dg, out_dh0
    )
    n_seg = -(-p.max_len // SEG) + 1
    programs = p.n_seqs * p.heads
    ckpt = torch.empty((programs, n_seg, p.block_k, p.block_v), dtype=torch.float32, device=dev)
    seg = torch.empty((programs, SEG, p.block_k, p.block_v), dtype=torch.float32, device=dev)
    f32, _ = placeholders(dev)
    _kernel(_bwd_kernel, interpret)[(programs,)](
        q,
        k,
        v,
        g if g is not None else f32,
        g_gamma if g_gamma is not None else f32,
        initial_state if initial_state is not None else f32,
        do,
        dht if dht is not None else f32,
        _index(cu, dev),
        ckpt,
        seg,
        dq,
        dk,
        dv,
        dg if dg is not None else f32,
        dh0 if dh0 is not None else f32,
        p.length,
        p.heads,
        p.k_dim,
        p.v_dim,
        n_seg,
        p.scale,
        int(p.per_token),
        int(initial_state is not None),
        int(dht is not None),
        int(dh0 is not None),
        int(p.varlen),
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *_strides(g, 3),
        *_strides(initial_state, 4),
        *do.stride(),
        *_strides(dht, 4),
        *dq.stride(),
        *dk.stride(),
        *dv.stride(),
        *_strides(dg, 3),
        *_strides(dh0, 4),
        BK=p.block_k,
        BV=p.block_v,
        S=SEG,
        num_warps=4,
    )
    zero_padding(p, dq, dk, dv, dg)
    return dq, dk, dv, dg, dh0
