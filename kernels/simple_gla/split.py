"""Chunked simple GLA split into passes, forward and backward, in Triton: a reformulation of the
fused chunked kernels (``kernels.simple_gla.triton``) with another tile split and loop order.

It exists to check the harness's error bound from the other side: the same chunked algorithm
(``kernels/simple_gla/README.md``) with every reduction grouped differently must pass every
property the real kernels pass (targets ``simple_gla_fwd_split``, ``simple_gla_bwd_split``):

* passes as fla splits them: the state entering every chunk first (one program per sequence and
  head), then the outputs of every chunk in parallel (one program per sequence, head and chunk);
  the backward adds a pass carrying ``dS`` from the last chunk to the first;
* tiles of 16 rows (32 for chunks of 128 and more) instead of 64;
* prefix sums of the log decays as masked row sums (the fused Triton kernel scans);
* column tiles walked right to left, the state's contribution added last, the state update's
  tiles last to first.

Same arguments and outputs as the fused kernels, whose wrapper checks and buffers it reuses.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._triton_jit import jit_any_size, placeholders
from kernels.simple_gla._common import Problem
from kernels.simple_gla.triton import (
    _index,
    _kernel,
    _load_rows,
    _out,
    _problem,
    _seq_bounds,
    _strides,
    backward_outputs,
    zero_padding,
)


def split_tile(chunk: int) -> int:
    """Rows per tile: 16, or 32 for chunks of 128 and more (fewer tile pairs to interpret)."""
    return 16 if chunk < 128 else 32


@triton.jit
def _decay_rows(
    g_base, s_gt, gamma, tok0, n_valid, per_token, r, BT: tl.constexpr, BS: tl.constexpr
):
    """Chunk-local cumulative log decay of tile ``r``'s rows: the sum of the chunk's gates before
    the tile plus a masked row sum within it (``gamma (i + 1)`` for a per-head decay)."""
    chunk_idx = tl.arange(0, BT)
    rows = r * BS + tl.arange(0, BS)
    on = per_token != 0
    g_chunk = tl.load(
        g_base + (tok0 + chunk_idx) * s_gt, mask=(chunk_idx < n_valid) & on, other=0.0
    ).to(tl.float32)
    g = tl.load(g_base + (tok0 + rows) * s_gt, mask=(rows < n_valid) & on, other=0.0)
    g = g.to(tl.float32)
    before = tl.sum(tl.where(chunk_idx < r * BS, g_chunk, 0.0), axis=0)
    lower = rows[:, None] >= rows[None, :]
    within = tl.sum(tl.where(lower, g[None, :], 0.0), axis=1)
    return tl.where(on, before + within, gamma * (rows + 1).to(tl.float32))


@triton.jit
def _chunk_total(g_base, s_gt, gamma, tok0, n_valid, per_token, BT: tl.constexpr):
    chunk_idx = tl.arange(0, BT)
    on = per_token != 0
    g_chunk = tl.load(
        g_base + (tok0 + chunk_idx) * s_gt, mask=(chunk_idx < n_valid) & on, other=0.0
    ).to(tl.float32)
    return tl.where(on, tl.sum(g_chunk, axis=0), gamma * n_valid.to(tl.float32))


@triton.jit
def _weights(b_rows, b_cols, rows, cols):
    """``exp(b_i - b_j)`` for ``j <= i``, exactly 0 above the diagonal (selected before exp)."""
    return tl.exp(
        tl.where(rows[:, None] >= cols[None, :], b_rows[:, None] - b_cols[None, :], float("-inf"))
    )


@jit_any_size(specialize=("s_kk", "s_vv", "s_h0v"))
def _states_kernel(
    k_ptr,
    v_ptr,
    g_ptr,
    gamma_ptr,
    h0_ptr,
    cu_ptr,
    states_ptr,
    T,
    H,
    K,
    V,
    NTS,
    per_token,
    has_h0,
    is_varlen,
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
    BT: tl.constexpr,
    BS: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    """The state entering every chunk and the final one: ``states[c]``, ``c = 0 .. n_chunks``."""
    pid = tl.program_id(0)
    i_n = pid // H
    i_h = pid % H
    i_b, bos, eos = _seq_bounds(cu_ptr, i_n, T, is_varlen)
    ks = tl.arange(0, BK)
    vs = tl.arange(0, BV)
    k_ok = ks[None, :] < K
    v_ok = vs[None, :] < V
    k_cols = k_ptr + i_b * s_kb + i_h * s_kh + ks[None, :] * s_kk
    v_cols = v_ptr + i_b * s_vb + i_h * s_vh + vs[None, :] * s_vv
    g_base = g_ptr + i_b * s_gb + i_h * s_gh
    st_base = states_ptr + pid.to(tl.int64) * NTS * BK * BV
    offs = ks[:, None] * BV + vs[None, :]
    h0_offs = i_n.to(tl.int64) * s_h0n + i_h * s_h0h + ks[:, None] * s_h0k + vs[None, :] * s_h0v
    state = tl.load(h0_ptr + h0_offs, mask=(ks[:, None] < K) & v_ok & (has_h0 != 0), other=0.0)
    state = state.to(tl.float32)
    gamma = tl.load(gamma_ptr + i_h, mask=per_token == 0, other=0.0).to(tl.float32)
    n_chunks = tl.cdiv(eos - bos, BT).to(tl.int32)
    for c in range(0, n_chunks):
        tl.store(st_base + c * BK * BV + offs, state)
        tok0 = bos + c * BT
        n_valid = tl.minimum(eos - tok0, BT)
        b_last = _chunk_total(g_base, s_gt, gamma, tok0, n_valid, per_token, BT)
        kv = tl.zeros([BK, BV], dtype=tl.float32)
        n_tiles = tl.cdiv(n_valid, BS).to(tl.int32)
        for rr in range(0, n_tiles):  # last tile first
            r = n_tiles - 1 - rr
            rows = r * BS + tl.arange(0, BS)
            valid = rows < n_valid
            k = _load_rows(k_cols, tok0 + rows, s_kt, valid[:, None] & k_ok)
            v = _load_rows(v_cols, tok0 + rows, s_vt, valid[:, None] & v_ok)
            b = _decay_rows(g_base, s_gt, gamma, tok0, n_valid, per_token, r, BT, BS)
            w = tl.exp(tl.where(valid, b_last - b, float("-inf")))
            kv += tl.dot(tl.trans(k * w[:, None]), v, input_precision="ieee")
        state = state * tl.exp(b_last) + kv
    tl.store(st_base + n_chunks * BK * BV + offs, state)


@jit_any_size(specialize=("s_qk", "s_kk", "s_vv", "s_ov"))
def _out_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    gamma_ptr,
    cu_ptr,
    states_ptr,
    o_ptr,
    T,
    H,
    K,
    V,
    NTS,
    scale,
    per_token,
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
    s_ob,
    s_ot,
    s_oh,
    s_ov,
    BT: tl.constexpr,
    BS: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    """``o`` of one chunk (program axis 1) from the state entering it."""
    pid = tl.program_id(0)
    c = tl.program_id(1)
    i_n = pid // H
    i_h = pid % H
    i_b, bos, eos = _seq_bounds(cu_ptr, i_n, T, is_varlen)
    tok0 = bos + c * BT
    if tok0 < eos:
        n_valid = tl.minimum(eos - tok0, BT)
        ks = tl.arange(0, BK)
        vs = tl.arange(0, BV)
        k_ok = ks[None, :] < K
        v_ok = vs[None, :] < V
        q_cols = q_ptr + i_b * s_qb + i_h * s_qh + ks[None, :] * s_qk
        k_cols = k_ptr + i_b * s_kb + i_h * s_kh + ks[None, :] * s_kk
        v_cols = v_ptr + i_b * s_vb + i_h * s_vh + vs[None, :] * s_vv
        o_cols = o_ptr + i_b * s_ob + i_h * s_oh + vs[None, :] * s_ov
        g_base = g_ptr + i_b * s_gb + i_h * s_gh
        offs = ks[:, None] * BV + vs[None, :]
        state = tl.load(states_ptr + (pid.to(tl.int64) * NTS + c) * BK * BV + offs)
        gamma = tl.load(gamma_ptr + i_h, mask=per_token == 0, other=0.0).to(tl.float32)
        n_tiles = tl.cdiv(n_valid, BS).to(tl.int32)
        for r in range(0, n_tiles):
            rows = r * BS + tl.arange(0, BS)
            row_ok = (rows < n_valid)[:, None]
            q = _load_rows(q_cols, tok0 + rows, s_qt, row_ok & k_ok)
            b = _decay_rows(g_base, s_gt, gamma, tok0, n_valid, per_token, r, BT, BS)
            o = tl.zeros([BS, BV], dtype=tl.float32)
            for ss in range(0, r + 1):  # the diagonal tile first, then leftwards
                s = r - ss
                cols = s * BS + tl.arange(0, BS)
                col_ok = (cols < n_valid)[:, None]
                k_s = _load_rows(k_cols, tok0 + cols, s_kt, col_ok & k_ok)
                v_s = _load_rows(v_cols, tok0 + cols, s_vt, col_ok & v_ok)
                b_s = _decay_rows(g_base, s_gt, gamma, tok0, n_valid, per_token, s, BT, BS)
                a = tl.dot(q, tl.trans(k_s), input_precision="ieee") * _weights(b, b_s, rows, cols)
                o += tl.dot(a, v_s, input_precision="ieee")
            o += tl.dot(q * tl.exp(b)[:, None], state, input_precision="ieee")
            tl.store(
                o_cols + (tok0 + rows)[:, None] * s_ot,
                (o * scale).to(o_ptr.dtype.element_ty),
                mask=row_ok & v_ok,
            )


@jit_any_size(specialize=("s_qk", "s_dov", "s_dhtv", "s_dh0v"))
def _dstates_kernel(
    q_ptr,
    g_ptr,
    gamma_ptr,
    do_ptr,
    dht_ptr,
    cu_ptr,
    dstates_ptr,
    dh0_ptr,
    T,
    H,
    K,
    V,
    NTS,
    scale,
    per_token,
    has_dht,
    store_dh0,
    is_varlen,
    s_qb,
    s_qt,
    s_qh,
    s_qk,
    s_gb,
    s_gt,
    s_gh,
    s_dob,
    s_dot,
    s_doh,
    s_dov,
    s_dhtn,
    s_dhth,
    s_dhtk,
    s_dhtv,
    s_dh0n,
    s_dh0h,
    s_dh0k,
    s_dh0v,
    BT: tl.constexpr,
    BS: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    """``dstates[c] = dL/dH`` of the state leaving chunk ``c``, from the last chunk to the first;
    ``dh0`` is the gradient of the state entering chunk 0."""
    pid = tl.program_id(0)
    i_n = pid // H
    i_h = pid % H
    i_b, bos, eos = _seq_bounds(cu_ptr, i_n, T, is_varlen)
    ks = tl.arange(0, BK)
    vs = tl.arange(0, BV)
    k_ok = ks[None, :] < K
    v_ok = vs[None, :] < V
    state_ok = (ks[:, None] < K) & v_ok
    q_cols = q_ptr + i_b * s_qb + i_h * s_qh + ks[None, :] * s_qk
    do_cols = do_ptr + i_b * s_dob + i_h * s_doh + vs[None, :] * s_dov
    g_base = g_ptr + i_b * s_gb + i_h * s_gh
    st_base = dstates_ptr + pid.to(tl.int64) * NTS * BK * BV
    offs = ks[:, None] * BV + vs[None, :]
    dht_offs = (
        i_n.to(tl.int64) * s_dhtn + i_h * s_dhth + ks[:, None] * s_dhtk + vs[None, :] * s_dhtv
    )
    d_state = tl.load(dht_ptr + dht_offs, mask=state_ok & (has_dht != 0), other=0.0)
    d_state = d_state.to(tl.float32)
    gamma = tl.load(gamma_ptr + i_h, mask=per_token == 0, other=0.0).to(tl.float32)
    n_chunks = tl.cdiv(eos - bos, BT).to(tl.int32)
    for cc in range(0, n_chunks):
        c = n_chunks - 1 - cc
        tl.store(st_base + c * BK * BV + offs, d_state)
        tok0 = bos + c * BT
        n_valid = tl.minimum(eos - tok0, BT)
        b_last = _chunk_total(g_base, s_gt, gamma, tok0, n_valid, per_token, BT)
        acc = tl.zeros([BK, BV], dtype=tl.float32)
        n_tiles = tl.cdiv(n_valid, BS).to(tl.int32)
        for r in range(0, n_tiles):
            rows = r * BS + tl.arange(0, BS)
            row_ok = (rows < n_valid)[:, None]
            q = _load_rows(q_cols, tok0 + rows, s_qt, row_ok & k_ok)
            do = _load_rows(do_cols, tok0 + rows, s_dot, row_ok & v_ok)
            b = _decay_rows(g_base, s_gt, gamma, tok0, n_valid, per_token, r, BT, BS)
            acc += tl.dot(tl.trans(q * (tl.exp(b) * scale)[:, None]), do, input_precision="ieee")
        d_state = d_state * tl.exp(b_last) + acc
    dh0_offs = (
        i_n.to(tl.int64) * s_dh0n + i_h * s_dh0h + ks[:, None] * s_dh0k + vs[None, :] * s_dh0v
    )
    tl.store(dh0_ptr + dh0_offs, d_state, mask=state_ok & (store_dh0 != 0))


_GRAD_UNIT = ("s_qk", "s_kk", "s_vv", "s_dov", "s_dqk", "s_dkk", "s_dvv")


@jit_any_size(specialize=_GRAD_UNIT)
def _grad_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    gamma_ptr,
    do_ptr,
    cu_ptr,
    states_ptr,
    dstates_ptr,
    dq_ptr,
    dk_ptr,
    dv_ptr,
    dg_ptr,
    T,
    H,
    K,
    V,
    NTS,
    scale,
    per_token,
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
    s_dob,
    s_dot,
    s_doh,
    s_dov,
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
    BT: tl.constexpr,
    BS: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    """``dq, dk, dv, dg`` of one chunk (program axis 1) from the state entering it, the state
    leaving it and the gradient of the latter."""
    pid = tl.program_id(0)
    c = tl.program_id(1)
    i_n = pid // H
    i_h = pid % H
    i_b, bos, eos = _seq_bounds(cu_ptr, i_n, T, is_varlen)
    tok0 = bos + c * BT
    if tok0 < eos:
        n_valid = tl.minimum(eos - tok0, BT)
        ks = tl.arange(0, BK)
        vs = tl.arange(0, BV)
        k_ok = ks[None, :] < K
        v_ok = vs[None, :] < V
        q_cols = q_ptr + i_b * s_qb + i_h * s_qh + ks[None, :] * s_qk
        k_cols = k_ptr + i_b * s_kb + i_h * s_kh + ks[None, :] * s_kk
        v_cols = v_ptr + i_b * s_vb + i_h * s_vh + vs[None, :] * s_vv
        do_cols = do_ptr + i_b * s_dob + i_h * s_doh + vs[None, :] * s_dov
        dq_cols = dq_ptr + i_b * s_dqb + i_h * s_dqh + ks[None, :] * s_dqk
        dk_cols = dk_ptr + i_b * s_dkb + i_h * s_dkh + ks[None, :] * s_dkk
        dv_cols = dv_ptr + i_b * s_dvb + i_h * s_dvh + vs[None, :] * s_dvv
        g_base = g_ptr + i_b * s_gb + i_h * s_gh
        dg_base = dg_ptr + i_b * s_dgb + i_h * s_dgh
        offs = ks[:, None] * BV + vs[None, :]
        base = (pid.to(tl.int64) * NTS + c) * BK * BV
        h_in = tl.load(states_ptr + base + offs)
        h_out = tl.load(states_ptr + base + BK * BV + offs)
        d_out = tl.load(dstates_ptr + base + offs)
        boundary = tl.sum(tl.sum(d_out * h_out, axis=1), axis=0)
        gamma = tl.load(gamma_ptr + i_h, mask=per_token == 0, other=0.0).to(tl.float32)
        b_last = _chunk_total(g_base, s_gt, gamma, tok0, n_valid, per_token, BT)
        n_tiles = tl.cdiv(n_valid, BS).to(tl.int32)
        carry = tl.sum(tl.zeros([BS], dtype=tl.float32), axis=0)
        for rr in range(0, n_tiles):  # last tile first: dg is a suffix sum
            r = n_tiles - 1 - rr
            rows = r * BS + tl.arange(0, BS)
            valid = rows < n_valid
            tok = tok0 + rows
            mask_k = valid[:, None] & k_ok
            mask_v = valid[:, None] & v_ok
            q = _load_rows(q_cols, tok, s_qt, mask_k)
            k = _load_rows(k_cols, tok, s_kt, mask_k)
            v = _load_rows(v_cols, tok, s_vt, mask_v)
            do = _load_rows(do_cols, tok, s_dot, mask_v)
            b = _decay_rows(g_base, s_gt, gamma, tok0, n_valid, per_token, r, BT, BS)
            dq = tl.zeros([BS, BK], dtype=tl.float32)
            for ss in range(0, r + 1):  # column tiles, the diagonal first
                s = r - ss
                cols = s * BS + tl.arange(0, BS)
                col_ok = (cols < n_valid)[:, None]
                k_s = _load_rows(k_cols, tok0 + cols, s_kt, col_ok & k_ok)
                v_s = _load_rows(v_cols, tok0 + cols, s_vt, col_ok & v_ok)
                b_s = _decay_rows(g_base, s_gt, gamma, tok0, n_valid, per_token, s, BT, BS)
                da = tl.dot(do, tl.trans(v_s), input_precision="ieee") * _weights(
                    b, b_s, rows, cols
                )
                dq += tl.dot(da, k_s, input_precision="ieee")
            dq = (
                dq * scale
                + tl.dot(do, tl.trans(h_in), input_precision="ieee") * (tl.exp(b) * scale)[:, None]
            )
            dk = tl.zeros([BS, BK], dtype=tl.float32)
            dv = tl.zeros([BS, BV], dtype=tl.float32)
            for ii in range(0, n_tiles - r):  # row tiles, the last first
                i = n_tiles - 1 - ii
                rows_i = i * BS + tl.arange(0, BS)
                row_ok = (rows_i < n_valid)[:, None]
                q_i = _load_rows(q_cols, tok0 + rows_i, s_qt, row_ok & k_ok)
                do_i = _load_rows(do_cols, tok0 + rows_i, s_dot, row_ok & v_ok)
                b_i = _decay_rows(g_base, s_gt, gamma, tok0, n_valid, per_token, i, BT, BS)
                w = _weights(b_i, b, rows_i, rows)
                a_t = tl.dot(q_i, tl.trans(k), input_precision="ieee") * w
                da_t = tl.dot(do_i, tl.trans(v), input_precision="ieee") * w
                dk += tl.dot(tl.trans(da_t), q_i, input_precision="ieee")
                dv += tl.dot(tl.trans(a_t), do_i, input_precision="ieee")
            w_state = tl.exp(tl.where(valid, b_last - b, float("-inf")))
            dk = dk * scale + tl.dot(v, tl.trans(d_out), input_precision="ieee") * w_state[:, None]
            dv = dv * scale + tl.dot(k, d_out, input_precision="ieee") * w_state[:, None]
            tl.store(dq_cols + tok[:, None] * s_dqt, dq.to(dq_ptr.dtype.element_ty), mask=mask_k)
            tl.store(dk_cols + tok[:, None] * s_dkt, dk.to(dk_ptr.dtype.element_ty), mask=mask_k)
            tl.store(dv_cols + tok[:, None] * s_dvt, dv.to(dv_ptr.dtype.element_ty), mask=mask_v)
            db = tl.sum(q * dq, axis=1) - tl.sum(k * dk, axis=1)
            db += tl.where(rows == n_valid - 1, boundary, 0.0)
            suffix = tl.sum(tl.where(rows[None, :] >= rows[:, None], db[None, :], 0.0), axis=1)
            tl.store(dg_base + tok * s_dgt, suffix + carry, mask=valid & (per_token != 0))
            carry += tl.sum(db, axis=0)


def _args(p: Problem, dev) -> tuple[tuple[int, int], dict[str, int]]:
    """The per-chunk grid and the tile options."""
    return (p.n_seqs * p.heads, max(1, p.max_chunks)), {
        "BT": p.chunk_size,
        "BS": split_tile(p.chunk_size),
        "BK": p.block_k,
        "BV": p.block_v,
        "num_warps": 4,
        "num_stages": 1,
    }


def _states(k, v, g, g_gamma, initial_state, cu, p: Problem, interpret: bool) -> torch.Tensor:
    dev = k.device
    f32, _ = placeholders(dev)
    nts = p.max_chunks + 1
    states = torch.empty(
        (p.n_seqs * p.heads, nts, p.block_k, p.block_v), dtype=torch.float32, device=dev
    )
    _, opts = _args(p, dev)
    _kernel(_states_kernel, interpret)[(p.n_seqs * p.heads,)](
        k,
        v,
        g if g is not None else f32,
        g_gamma if g_gamma is not None else f32,
        initial_state if initial_state is not None else f32,
        _index(cu, dev),
        states,
        p.length,
        p.heads,
        p.k_dim,
        p.v_dim,
        nts,
        int(p.per_token),
        int(initial_state is not None),
        int(p.varlen),
        *k.stride(),
        *v.stride(),
        *_strides(g, 3),
        *_strides(initial_state, 4),
        **opts,
    )
    return states


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
    """Arguments and results as ``kernels.simple_gla.triton``'s ``chunk_simple_gla_fwd``."""
    p, cu = _problem(q, k, v, g, g_gamma, scale, initial_state, cu_seqlens, chunk_size)
    dev = q.device
    o = _out("out", out, (p.batch, p.length, p.heads, p.v_dim), q.dtype, dev)
    ht = None
    if output_final_state:
        ht = _out("out_ht", out_ht, (p.n_seqs, p.heads, p.k_dim, p.v_dim), torch.float32, dev)
    if p.n_seqs * p.heads == 0:  # pragma: no cover - H >= 1 and N >= 1 are checked
        return o, ht
    states = _states(k, v, g, g_gamma, initial_state, cu, p, interpret)
    f32, _ = placeholders(dev)
    grid, opts = _args(p, dev)
    _kernel(_out_kernel, interpret)[grid](
        q,
        k,
        v,
        g if g is not None else f32,
        g_gamma if g_gamma is not None else f32,
        _index(cu, dev),
        states,
        o,
        p.length,
        p.heads,
        p.k_dim,
        p.v_dim,
        states.shape[1],
        p.scale,
        int(p.per_token),
        int(p.varlen),
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *_strides(g, 3),
        *o.stride(),
        **opts,
    )
    zero_padding(p, o)
    if ht is not None:
        last = torch.tensor([-(-(e - s) // p.chunk_size) for _, s, e in p.seqs], device=dev)
        final = states.view(p.n_seqs, p.heads, *states.shape[1:])
        final = final[torch.arange(p.n_seqs, device=dev), :, last]
        ht.copy_(final[:, :, : p.k_dim, : p.v_dim])
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
    """Arguments and results as ``kernels.simple_gla.triton``'s ``chunk_simple_gla_bwd``."""
    p, cu = _problem(q, k, v, g, g_gamma, scale, initial_state, cu_seqlens, chunk_size)
    dev = q.device
    dq, dk, dv, dg, dh0 = backward_outputs(
        p, q, k, v, do, dht, initial_state, out_dq, out_dk, out_dv, out_dg, out_dh0
    )
    if p.n_seqs * p.heads == 0:  # pragma: no cover - H >= 1 and N >= 1 are checked
        return dq, dk, dv, dg, dh0
    states = _states(k, v, g, g_gamma, initial_state, cu, p, interpret)
    dstates = torch.empty_like(states)
    f32, _ = placeholders(dev)
    grid, opts = _args(p, dev)
    nts = states.shape[1]
    _kernel(_dstates_kernel, interpret)[(grid[0],)](
        q,
        g if g is not None else f32,
        g_gamma if g_gamma is not None else f32,
        do,
        dht if dht is not None else f32,
        _index(cu, dev),
        dstates,
        dh0 if dh0 is not None else f32,
        p.length,
        p.heads,
        p.k_dim,
        p.v_dim,
        nts,
        p.scale,
        int(p.per_token),
        int(dht is not None),
        int(dh0 is not None),
        int(p.varlen),
        *q.stride(),
        *_strides(g, 3),
        *do.stride(),
        *_strides(dht, 4),
        *_strides(dh0, 4),
        **opts,
    )
    _kernel(_grad_kernel, interpret)[grid](
        q,
        k,
        v,
        g if g is not None else f32,
        g_gamma if g_gamma is not None else f32,
        do,
        _index(cu, dev),
        states,
        dstates,
        dq,
        dk,
        dv,
        dg if dg is not None else f32,
        p.length,
        p.heads,
        p.k_dim,
        p.v_dim,
        nts,
        p.scale,
        int(p.per_token),
        int(p.varlen),
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *_strides(g, 3),
        *do.stride(),
        *dq.stride(),
        *dk.stride(),
        *dv.stride(),
        *_strides(dg, 3),
        **opts,
    )
    zero_padding(p, dq, dk, dv, dg)
    return dq, dk, dv, dg, dh0
