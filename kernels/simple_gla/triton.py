"""Chunked simple GLA, forward and backward, in Triton (compiled on CUDA, or Triton's interpreter).

The recurrence (see ``kernels/simple_gla/README.md`` for the derivation of the chunked form)::

    h_t = exp(g_t) h_{t-1} + k_t^T v_t,     o_t = scale * q_t h_t

One program per (sequence, head) walks its chunks in order, carrying the fp32 state ``H`` in
registers. In a chunk of ``BT`` tokens with cumulative log decays ``b_i = g_0 + ... + g_i``::

    o_i = scale * (exp(b_i) q_i H  +  sum_{j <= i} exp(b_i - b_j) (q_i . k_j) v_j)
    H   <- exp(b_last) H  +  sum_j exp(b_last - b_j) k_j^T v_j

``b_i - b_j`` is positive above the diagonal (and ``b_last - b_j`` on a partial chunk's padded
rows in the g_gamma form): every exponent is selected with ``tl.where(mask, x, -inf)`` *before*
``exp``, so masked entries are exactly 0 and never Inf. A chunk is processed as square tiles of
``BS`` rows (at most 64, see :func:`triton_tile`) in runtime loops; tiles above the diagonal and
tiles past a partial chunk's last token are skipped.

Compile variants: a fuzzer meets every combination of options, so only the dtype, the chunk and
tile sizes and the state block select a binary. Per-token gates, initial and final states, their
gradients, packed sequences and the mode (outputs, or the backward's per-chunk states: the one
forward binary serves both) are runtime flags (absent operands are typed placeholders whose loads
and stores are masked off or behind the flag), and the tile loops are runtime loops: the code does
not grow with the chunk. With tiles unrolled at compile time, the forward at chunk 256 and
K = V = 128 took 609 s to compile for sm_90 and asked for 1.6 MiB of shared memory; now, with
32-row tiles and one stage, 4 s and 96 KiB, the backward 10 s and 216 KiB.

The backward first reruns the forward in "states" mode (the state entering every chunk, into an
fp32 scratch buffer), then walks the chunks backwards carrying ``dS = dL/dH``: per chunk it
recomputes the decay weights and forms ``dq, dk, dv``, the per-token ``dg`` (suffix sums of
``q.dq - k.dk`` plus ``<dS, H>`` on the last token) and finally ``dh0``. No atomics: every output
element has one writer, so two runs are bit-identical.

Every load converts to fp32 right away (the interpreter keeps bf16 as raw bits), and every
``tl.dot`` takes fp32 operands with ``input_precision="ieee"``: exact fp32 products, fp32
accumulation, whatever the input dtype.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from kernels._triton_interp import interpreted
from kernels._triton_jit import jit_any_size, placeholders
from kernels.simple_gla._common import Problem, check_like, check_problem

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _intra_weights(b_rows, b_cols, rows, cols):
    """``exp(b_i - b_j)`` for ``j <= i`` and exactly 0 above the diagonal.

    The exponent is selected before exp: above the diagonal ``b_i - b_j > 0`` and, with large
    decays, ``exp`` of it overflows (then ``0 * Inf = NaN`` if the mask were applied after).
    """
    causal = rows[:, None] >= cols[None, :]
    return tl.exp(tl.where(causal, b_rows[:, None] - b_cols[None, :], float("-inf")))


@triton.jit
def _state_weights(b, b_last, valid):
    """``exp(b_last - b_j)`` for a chunk's live rows, 0 for padded rows.

    In the g_gamma form the padded rows of a partial chunk have ``b_j = gamma (j + 1)`` past the
    last live token, so ``b_last - b_j > 0``: selected away before exp.
    """
    return tl.exp(tl.where(valid, b_last - b, float("-inf")))


@triton.jit
def _tile_decay(
    g_base, g_chunk, chunk_idx, gamma, tok0, n_valid, s_gt, per_token, r, BS: tl.constexpr
):
    """Cumulative log decay ``b`` of the chunk's rows ``[r * BS, (r + 1) * BS)``: the chunk-local
    prefix sums of the per-token gates, or ``gamma (i + 1)`` for a per-head decay."""
    rows = r * BS + tl.arange(0, BS)
    g_mask = (rows < n_valid) & (per_token != 0)
    g = tl.load(g_base + (tok0 + rows) * s_gt, mask=g_mask, other=0.0).to(tl.float32)
    prefix = tl.sum(tl.where(chunk_idx < r * BS, g_chunk, 0.0), axis=0)
    return tl.where(
        per_token != 0, prefix + tl.cumsum(g, axis=0), gamma * (rows + 1).to(tl.float32)
    )


@triton.jit
def _chunk_gates(g_base, gamma, tok0, n_valid, s_gt, per_token, BT: tl.constexpr):
    """The chunk's per-token gates (zeros for a per-head decay) and its total log decay."""
    chunk_idx = tl.arange(0, BT)
    g_mask = (chunk_idx < n_valid) & (per_token != 0)
    g_chunk = tl.load(g_base + (tok0 + chunk_idx) * s_gt, mask=g_mask, other=0.0).to(tl.float32)
    b_last = tl.where(per_token != 0, tl.sum(g_chunk, axis=0), gamma * n_valid.to(tl.float32))
    return g_chunk, b_last


@triton.jit
def _load_rows(col_ptrs, tok, s_t, mask):
    """A ``[rows, cols]`` tile as fp32 from ``col_ptrs [1, cols]`` (the row-0 pointers of each
    column) at token rows ``tok``; masked-out elements (rows past the sequence end, padded
    columns) are 0."""
    return tl.load(col_ptrs + tok[:, None] * s_t, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _seq_bounds(cu_ptr, i_n, T, is_varlen):
    """(batch row, start, end) of sequence ``i_n``: row ``i_n`` of the batch, or the packed
    sequence between ``cu[i_n]`` and ``cu[i_n + 1]``."""
    packed = is_varlen != 0
    bos = tl.load(cu_ptr + i_n, mask=packed, other=0).to(tl.int64)
    eos = tl.where(packed, tl.load(cu_ptr + i_n + 1, mask=packed, other=0).to(tl.int64), bos + T)
    i_b = tl.where(packed, 0, i_n).to(tl.int64)
    return i_b, bos, eos


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
    states_ptr,
    T,
    H,
    K,
    V,
    NT_STATES,
    scale,
    per_token,
    has_h0,
    is_varlen,
    store_ht,
    store_o,
    store_states,
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
    BT: tl.constexpr,
    BS: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    pid = tl.program_id(0)
    i_n = pid // H
    i_h = pid % H
    i_b, bos, eos = _seq_bounds(cu_ptr, i_n, T, is_varlen)
    seq_len = eos - bos
    ks = tl.arange(0, BK)
    vs = tl.arange(0, BV)
    chunk_idx = tl.arange(0, BT)
    k_ok = ks[None, :] < K
    v_ok = vs[None, :] < V
    state_ok = (ks[:, None] < K) & v_ok
    # Loop-invariant pointers to row 0 of each column of this (sequence, head).
    q_cols = q_ptr + i_b * s_qb + i_h * s_qh + ks[None, :] * s_qk
    k_cols = k_ptr + i_b * s_kb + i_h * s_kh + ks[None, :] * s_kk
    v_cols = v_ptr + i_b * s_vb + i_h * s_vh + vs[None, :] * s_vv
    o_cols = o_ptr + i_b * s_ob + i_h * s_oh + vs[None, :] * s_ov
    g_base = g_ptr + i_b * s_gb + i_h * s_gh
    st_base = states_ptr + pid.to(tl.int64) * NT_STATES * BK * BV
    st_offs = ks[:, None] * BV + vs[None, :]
    h0_offs = i_n.to(tl.int64) * s_h0n + i_h * s_h0h + ks[:, None] * s_h0k + vs[None, :] * s_h0v
    state = tl.load(h0_ptr + h0_offs, mask=state_ok & (has_h0 != 0), other=0.0).to(tl.float32)
    gamma = tl.load(gamma_ptr + i_h, mask=per_token == 0, other=0.0).to(tl.float32)
    n_chunks = tl.cdiv(seq_len, BT).to(tl.int32)
    for c in range(0, n_chunks):
        tok0 = bos + c * BT
        n_valid = tl.minimum(seq_len - c * BT, BT)
        g_chunk, b_last = _chunk_gates(g_base, gamma, tok0, n_valid, s_gt, per_token, BT)
        if store_states:
            tl.store(st_base + c * BK * BV + st_offs, state)
        kv = tl.zeros([BK, BV], dtype=tl.float32)
        n_tiles = tl.cdiv(n_valid, BS).to(tl.int32)  # the tiles holding live tokens
        for r in range(0, n_tiles):
            rows = r * BS + tl.arange(0, BS)
            valid = rows < n_valid
            tok = tok0 + rows
            mask_k = valid[:, None] & k_ok
            mask_v = valid[:, None] & v_ok
            q = _load_rows(q_cols, tok, s_qt, mask_k)
            k = _load_rows(k_cols, tok, s_kt, mask_k)
            v = _load_rows(v_cols, tok, s_vt, mask_v)
            b = _tile_decay(
                g_base, g_chunk, chunk_idx, gamma, tok0, n_valid, s_gt, per_token, r, BS
            )
            if store_o:
                o = tl.dot(q, state, input_precision="ieee") * tl.exp(b)[:, None]
                for s in range(0, r + 1):  # the column tiles at or left of the diagonal
                    cols = s * BS + tl.arange(0, BS)
                    col_ok = (cols < n_valid)[:, None]
                    k_s = _load_rows(k_cols, tok0 + cols, s_kt, col_ok & k_ok)
                    v_s = _load_rows(v_cols, tok0 + cols, s_vt, col_ok & v_ok)
                    b_s = _tile_decay(
                        g_base, g_chunk, chunk_idx, gamma, tok0, n_valid, s_gt, per_token, s, BS
                    )
                    w_intra = _intra_weights(b, b_s, rows, cols)
                    a = tl.dot(q, tl.trans(k_s), input_precision="ieee") * w_intra
                    o += tl.dot(a, v_s, input_precision="ieee")
                tl.store(
                    o_cols + tok[:, None] * s_ot,
                    (o * scale).to(o_ptr.dtype.element_ty),
                    mask=mask_v,
                )
            w_state = _state_weights(b, b_last, valid)
            kv += tl.dot(tl.trans(k * w_state[:, None]), v, input_precision="ieee")
        decay_last = tl.exp(b_last)
        state = state * decay_last + kv
    if store_states:
        tl.store(st_base + n_chunks * BK * BV + st_offs, state)
    ht_offs = i_n.to(tl.int64) * s_htn + i_h * s_hth + ks[:, None] * s_htk + vs[None, :] * s_htv
    tl.store(ht_ptr + ht_offs, state, mask=state_ok & (store_ht != 0))


_BWD_UNIT_STRIDES = ("s_qk", "s_kk", "s_vv", "s_dov", "s_dhtv", "s_dqk", "s_dkk", "s_dvv", "s_dh0v")


@jit_any_size(specialize=_BWD_UNIT_STRIDES)
def _bwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    gamma_ptr,
    do_ptr,
    dht_ptr,
    cu_ptr,
    states_ptr,
    dq_ptr,
    dk_ptr,
    dv_ptr,
    dg_ptr,
    dh0_ptr,
    T,
    H,
    K,
    V,
    NT_STATES,
    scale,
    per_token,
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
    BT: tl.constexpr,
    BS: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    pid = tl.program_id(0)
    i_n = pid // H
    i_h = pid % H
    i_b, bos, eos = _seq_bounds(cu_ptr, i_n, T, is_varlen)
    seq_len = eos - bos
    ks = tl.arange(0, BK)
    vs = tl.arange(0, BV)
    chunk_idx = tl.arange(0, BT)
    k_ok = ks[None, :] < K
    v_ok = vs[None, :] < V
    state_ok = (ks[:, None] < K) & v_ok
    # Loop-invariant pointers to row 0 of each column of this (sequence, head).
    q_cols = q_ptr + i_b * s_qb + i_h * s_qh + ks[None, :] * s_qk
    k_cols = k_ptr + i_b * s_kb + i_h * s_kh + ks[None, :] * s_kk
    v_cols = v_ptr + i_b * s_vb + i_h * s_vh + vs[None, :] * s_vv
    do_cols = do_ptr + i_b * s_dob + i_h * s_doh + vs[None, :] * s_dov
    dq_cols = dq_ptr + i_b * s_dqb + i_h * s_dqh + ks[None, :] * s_dqk
    dk_cols = dk_ptr + i_b * s_dkb + i_h * s_dkh + ks[None, :] * s_dkk
    dv_cols = dv_ptr + i_b * s_dvb + i_h * s_dvh + vs[None, :] * s_dvv
    g_base = g_ptr + i_b * s_gb + i_h * s_gh
    dg_base = dg_ptr + i_b * s_dgb + i_h * s_dgh
    st_base = states_ptr + pid.to(tl.int64) * NT_STATES * BK * BV
    st_offs = ks[:, None] * BV + vs[None, :]
    dht_offs = (
        i_n.to(tl.int64) * s_dhtn + i_h * s_dhth + ks[:, None] * s_dhtk + vs[None, :] * s_dhtv
    )
    d_state = tl.load(dht_ptr + dht_offs, mask=state_ok & (has_dht != 0), other=0.0)
    d_state = d_state.to(tl.float32)
    gamma = tl.load(gamma_ptr + i_h, mask=per_token == 0, other=0.0).to(tl.float32)
    n_chunks = tl.cdiv(seq_len, BT).to(tl.int32)
    for cc in range(0, n_chunks):
        c = n_chunks - 1 - cc
        tok0 = bos + c * BT
        n_valid = tl.minimum(seq_len - c * BT, BT)
        g_chunk, b_last = _chunk_gates(g_base, gamma, tok0, n_valid, s_gt, per_token, BT)
        h_prev = tl.load(st_base + c * BK * BV + st_offs)
        # <dS, H_c>: the chunk's total decay multiplies its whole new state (per-token gates only)
        h_end = tl.load(st_base + (c + 1) * BK * BV + st_offs, mask=per_token != 0, other=0.0)
        boundary = tl.sum(tl.sum(d_state * h_end, axis=1), axis=0)
        d_acc = tl.zeros([BK, BV], dtype=tl.float32)
        # the sum of db over the tiles after this one (dg is a suffix sum)
        carry = tl.sum(tl.zeros([BS], dtype=tl.float32), axis=0)
        n_tiles = tl.cdiv(n_valid, BS).to(tl.int32)  # the tiles holding live tokens
        for rr in range(0, n_tiles):  # tiles last to first: dg is a suffix sum
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
            b = _tile_decay(
                g_base, g_chunk, chunk_idx, gamma, tok0, n_valid, s_gt, per_token, r, BS
            )
            e_q = tl.exp(b) * scale
            # dq: this tile's rows against the column tiles at or left of the diagonal.
            dq = tl.dot(do, tl.trans(h_prev), input_precision="ieee") * e_q[:, None]
            for s in range(0, r + 1):
                cols = s * BS + tl.arange(0, BS)
                col_ok = (cols < n_valid)[:, None]
                k_s = _load_rows(k_cols, tok0 + cols, s_kt, col_ok & k_ok)
                v_s = _load_rows(v_cols, tok0 + cols, s_vt, col_ok & v_ok)
                b_s = _tile_decay(
                    g_base, g_chunk, chunk_idx, gamma, tok0, n_valid, s_gt, per_token, s, BS
                )
                w_rec = _intra_weights(b, b_s, rows, cols)  # the forward's weights, recomputed
                da = tl.dot(do, tl.trans(v_s), input_precision="ieee") * w_rec * scale
                dq += tl.dot(da, k_s, input_precision="ieee")
            # dk, dv: this tile's columns against the row tiles at or below the diagonal.
            w_state = _state_weights(b, b_last, valid)
            dk = tl.dot(v, tl.trans(d_state), input_precision="ieee") * w_state[:, None]
            dv = tl.dot(k, d_state, input_precision="ieee") * w_state[:, None]
            for i in range(r, n_tiles):
                rows_i = i * BS + tl.arange(0, BS)
                row_ok = (rows_i < n_valid)[:, None]
                q_i = _load_rows(q_cols, tok0 + rows_i, s_qt, row_ok & k_ok)
                do_i = _load_rows(do_cols, tok0 + rows_i, s_dot, row_ok & v_ok)
                b_i = _tile_decay(
                    g_base, g_chunk, chunk_idx, gamma, tok0, n_valid, s_gt, per_token, i, BS
                )
                w_col = _intra_weights(b_i, b, rows_i, rows) * scale
                a_t = tl.dot(q_i, tl.trans(k), input_precision="ieee") * w_col
                da_t = tl.dot(do_i, tl.trans(v), input_precision="ieee") * w_col
                dk += tl.dot(tl.trans(da_t), q_i, input_precision="ieee")
                dv += tl.dot(tl.trans(a_t), do_i, input_precision="ieee")
            row_t = tok[:, None]
            tl.store(dq_cols + row_t * s_dqt, dq.to(dq_ptr.dtype.element_ty), mask=mask_k)
            tl.store(dk_cols + row_t * s_dkt, dk.to(dk_ptr.dtype.element_ty), mask=mask_k)
            tl.store(dv_cols + row_t * s_dvt, dv.to(dv_ptr.dtype.element_ty), mask=mask_v)
            # dg (per-token gates): suffix sums of q.dq - k.dk (+ the boundary term)
            db = tl.sum(q * dq, axis=1) - tl.sum(k * dk, axis=1)
            db += tl.where(rows == n_valid - 1, boundary, 0.0)
            suffix = tl.sum(tl.where(rows[None, :] >= rows[:, None], db[None, :], 0.0), axis=1)
            tl.store(dg_base + tok * s_dgt, suffix + carry, mask=valid & (per_token != 0))
            carry += tl.sum(db, axis=0)
            d_acc += tl.dot(tl.trans(q * e_q[:, None]), do, input_precision="ieee")
        d_state = d_state * tl.exp(b_last) + d_acc
    dh0_offs = (
        i_n.to(tl.int64) * s_dh0n + i_h * s_dh0h + ks[:, None] * s_dh0k + vs[None, :] * s_dh0v
    )
    tl.store(dh0_ptr + dh0_offs, d_state, mask=state_ok & (store_dh0 != 0))


# Wrappers -------------------------------------------------------------------------------------


def _kernel(kernel, interpret: bool):
    # fast: no int32-overflow checks of index arithmetic (int64 offsets are used where it matters)
    return interpreted(kernel, fast=True) if interpret else kernel


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def _spec(name: str, t: Any) -> tuple[tuple[int, ...], str] | None:
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    return tuple(t.shape), _dtype(t)


def _problem(
    q, k, v, g, g_gamma, scale, initial_state, cu_seqlens, chunk_size
) -> tuple[Problem, Any]:
    specs = {
        n: _spec(n, t)
        for n, t in (
            ("q", q),
            ("k", k),
            ("v", v),
            ("g", g),
            ("g_gamma", g_gamma),
            ("initial_state", initial_state),
        )
    }
    cu_host = cu_dtype = None
    if cu_seqlens is not None:
        if not isinstance(cu_seqlens, torch.Tensor):
            raise TypeError(f"cu_seqlens must be a torch.Tensor, got {type(cu_seqlens).__name__}")
        if cu_seqlens.ndim != 1:
            raise ValueError(f"cu_seqlens.shape={tuple(cu_seqlens.shape)} must be [N + 1]")
        cu_dtype = _dtype(cu_seqlens)
        cu_host = cu_seqlens.tolist()
    p = check_problem(
        q=specs["q"],
        k=specs["k"],
        v=specs["v"],
        g=specs["g"],
        g_gamma=specs["g_gamma"],
        initial_state=specs["initial_state"],
        cu_seqlens=cu_host,
        cu_dtype=cu_dtype,
        scale=scale,
        chunk_size=chunk_size,
    )
    for name, t in (
        ("k", k),
        ("v", v),
        ("g", g),
        ("g_gamma", g_gamma),
        ("initial_state", initial_state),
        ("cu_seqlens", cu_seqlens),
    ):
        if t is not None and t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}")
    if cu_seqlens is not None and cu_seqlens.dtype != torch.int32:
        # one binary for both index dtypes (the values are at most T); converted once per call,
        # the backward launches two kernels with it
        cu_seqlens = cu_seqlens.to(torch.int32)
    return p, cu_seqlens


def _out(name: str, out: torch.Tensor | None, shape, dtype: torch.dtype, device) -> torch.Tensor:
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(out).__name__}")
    check_like(name, tuple(out.shape), _dtype(out), shape, str(dtype).replace("torch.", ""))
    if out.device != device:
        raise ValueError(f"{name} is on {out.device} but q is on {device}")
    return out


def _strides(t: torch.Tensor | None, n: int) -> tuple[int, ...]:
    """``t``'s strides, or an absent operand's: 0 but the innermost, 1 as a present operand's
    (the kernels specialize on that unit stride: with 0 there, an initial state, a final state
    or ``dht`` present or not selected a binary of its own, and each reuse of a variant with
    fresh values compiled it again; never read)."""
    return tuple(t.stride()) if t is not None else (0,) * (n - 1) + (1,)


def zero_padding(p: Problem, *outputs: torch.Tensor | None) -> None:
    """Writes 0 into the token rows past ``cu_seqlens[-1]`` (no program owns them) of each
    ``[B, T, H, ...]`` output."""
    start, end = p.padding
    if start < end:
        for t in outputs:
            if t is not None:
                t[:, start:end].zero_()


def triton_tile(p: Problem) -> int:
    """Rows per tile: the chunk's tile (``Problem.tile``, at most 64), halved to 32 for state
    blocks larger than 128 x 32, so that one program's shared memory (dot operands, layout
    conversions of the fp32 state) stays within a Hopper SM's 227 KiB: compiled for sm_90 at
    one pipeline stage, the backward at K = V = 128 needs 221 KiB with 32-row tiles (393 KiB
    with 64), at K = 128, V = 64 131 KiB (213 KiB). The result does not depend on the tile."""
    return min(p.tile, 32) if p.block_k * p.block_v > 128 * 32 else p.tile


def _launch_options(p: Problem) -> dict[str, int]:
    """One pipeline stage: the chunk loop carries the state and the tile loops are short, so
    prefetching buys little, and every stage would add its operand buffers to shared memory."""
    bs = triton_tile(p)
    return {
        "BS": bs,
        "num_warps": 4 if bs * max(p.block_k, p.block_v) <= 32 * 64 else 8,
        "num_stages": 1,
    }


def _index(cu: torch.Tensor | None, device) -> torch.Tensor:
    """cu_seqlens (int32, see ``_problem``), or the int32 placeholder."""
    return placeholders(device)[1] if cu is None else cu


def _forward_states(
    q, k, v, g, g_gamma, initial_state, cu, p: Problem, *, o, ht, states, interpret: bool
) -> None:
    # Absent operands are typed placeholders and their use a runtime flag: one binary per
    # (dtype, chunk, tile, block sizes), whatever the options and the mode.
    f32, _ = placeholders(q.device)
    grid = (p.n_seqs * p.heads,)
    _kernel(_fwd_kernel, interpret)[grid](
        q,
        k,
        v,
        g if g is not None else f32,
        g_gamma if g_gamma is not None else f32,
        initial_state if initial_state is not None else f32,
        _index(cu, q.device),
        o if o is not None else q,
        ht if ht is not None else f32,
        states if states is not None else f32,
        p.length,
        p.heads,
        p.k_dim,
        p.v_dim,
        p.max_chunks + 1,
        p.scale,
        int(p.per_token),
        int(initial_state is not None),
        int(p.varlen),
        int(ht is not None),
        int(o is not None),
        int(states is not None),
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *_strides(g, 3),
        *_strides(o, 4),
        *_strides(initial_state, 4),
        *_strides(ht, 4),
        BT=p.chunk_size,
        BK=p.block_k,
        BV=p.block_v,
        **_launch_options(p),
    )


def chunk_simple_gla_fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    g: torch.Tensor | None = None,
    g_gamma: torch.Tensor | None = None,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    chunk_size: int = 64,
    out: torch.Tensor | None = None,
    out_ht: torch.Tensor | None = None,
    interpret: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Simple GLA forward: ``h_t = exp(g_t) h_{t-1} + k_t^T v_t``, ``o_t = scale * q_t h_t``.

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, H, V]``; float32/float16/bfloat16 (one dtype);
            ``1 <= K, V <= 128``.
        g: per-token log decay ``[B, T, H]`` float32 (values <= 0, finite); or
        g_gamma: per-head log decay ``[H]`` float32 (<= 0, e.g. ``alibi_g_gamma(H)``).
        scale: multiplies ``q h`` (default ``K ** -0.5``); finite and > 0.
        initial_state: ``[N, H, K, V]`` float32 (``N`` = B, or the number of sequences).
        output_final_state: also return ``ht [N, H, K, V]`` float32.
        cu_seqlens: ``[N + 1]`` int32/int64 boundaries of packed sequences (then ``B == 1``);
            starts at 0, non-decreasing (empty sequences allowed: their ``ht`` is their
            ``h0``), ends at ``T``.
        chunk_size: tokens per chunk, one of 16, 32, 64, 128, 256.
        out, out_ht: optional outputs to write into (any strides).
        interpret: run Triton's interpreter (CPU tensors) instead of the compiled kernel.

    Returns:
        ``o [B, T, H, V]`` in q's dtype, and ``ht`` (or None).
    """
    p, cu = _problem(q, k, v, g, g_gamma, scale, initial_state, cu_seqlens, chunk_size)
    o = _out("out", out, (p.batch, p.length, p.heads, p.v_dim), q.dtype, q.device)
    ht = None
    if output_final_state:
        ht = _out("out_ht", out_ht, (p.n_seqs, p.heads, p.k_dim, p.v_dim), torch.float32, q.device)
    _forward_states(
        q, k, v, g, g_gamma, initial_state, cu, p, o=o, ht=ht, states=None, interpret=interpret
    )
    zero_padding(p, o)
    return o, ht


def backward_outputs(
    p: Problem,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: torch.Tensor,
    dht: torch.Tensor | None,
    initial_state: torch.Tensor | None,
    out_dq: torch.Tensor | None,
    out_dk: torch.Tensor | None,
    out_dv: torch.Tensor | None,
    out_dg: torch.Tensor | None,
    out_dh0: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Checks the backward's extra inputs ``do`` and ``dht`` and returns its outputs ``dq, dk,
    dv, dg, dh0`` (the caller's ``out_*`` buffers, checked, or new ones; ``dg`` for per-token
    gates only, ``dh0`` with an initial state only). Shared by every Triton implementation."""
    for name, t, shape, dt in (
        ("do", do, (p.batch, p.length, p.heads, p.v_dim), p.dtype),
        ("dht", dht, (p.n_seqs, p.heads, p.k_dim, p.v_dim), "float32"),
    ):
        if t is None and name == "dht":
            continue
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        check_like(name, tuple(t.shape), _dtype(t), shape, dt)
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}")
    dev = q.device
    dq = _out("out_dq", out_dq, tuple(q.shape), q.dtype, dev)
    dk = _out("out_dk", out_dk, tuple(k.shape), k.dtype, dev)
    dv = _out("out_dv", out_dv, tuple(v.shape), v.dtype, dev)
    dg = None
    if p.per_token:
        dg = _out("out_dg", out_dg, (p.batch, p.length, p.heads), torch.float32, dev)
    dh0 = None
    if initial_state is not None:
        dh0 = _out("out_dh0", out_dh0, tuple(initial_state.shape), torch.float32, dev)
    return dq, dk, dv, dg, dh0


def chunk_simple_gla_bwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    do: torch.Tensor,
    *,
    g: torch.Tensor | None = None,
    g_gamma: torch.Tensor | None = None,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    dht: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    chunk_size: int = 64,
    out_dq: torch.Tensor | None = None,
    out_dk: torch.Tensor | None = None,
    out_dv: torch.Tensor | None = None,
    out_dg: torch.Tensor | None = None,
    out_dh0: torch.Tensor | None = None,
    interpret: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Simple GLA backward: gradients of ``sum(o * do) + sum(ht * dht)``.

    Args are those of :func:`chunk_simple_gla_fwd`, plus ``do [B, T, H, V]`` (q's dtype) and
    ``dht [N, H, K, V]`` float32 (optional: the final state's gradient).

    Returns:
        ``dq, dk [B, T, H, K]`` and ``dv [B, T, H, V]`` in q's dtype; ``dg [B, T, H]`` float32
        for the per-token form (None for g_gamma: the decay is a constant, no gradient is
        computed); ``dh0 [N, H, K, V]`` float32 when ``initial_state`` is given (else None).
    """
    p, cu = _problem(q, k, v, g, g_gamma, scale, initial_state, cu_seqlens, chunk_size)
    dq, dk, dv, dg, dh0 = backward_outputs(
        p, q, k, v, do, dht, initial_state, out_dq, out_dk, out_dv, out_dg, out_dh0
    )
    dev = q.device
    states = torch.empty(
        (p.n_seqs * p.heads, p.max_chunks + 1, p.block_k, p.block_v),
        dtype=torch.float32,
        device=dev,
    )
    _forward_states(
        q,
        k,
        v,
        g,
        g_gamma,
        initial_state,
        cu,
        p,
        o=None,
        ht=None,
        states=states,
        interpret=interpret,
    )
    f32, _ = placeholders(dev)
    grid = (p.n_seqs * p.heads,)
    _kernel(_bwd_kernel, interpret)[grid](
        q,
        k,
        v,
        g if g is not None else f32,
        g_gamma if g_gamma is not None else f32,
        do,
        dht if dht is not None else f32,
        _index(cu, dev),
        states,
        dq,
        dk,
        dv,
        dg if dg is not None else f32,
        dh0 if dh0 is not None else f32,
        p.length,
        p.heads,
        p.k_dim,
        p.v_dim,
        p.max_chunks + 1,
        p.scale,
        int(p.per_token),
        int(dht is not None),
        int(dh0 is not None),
        int(p.varlen),
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *_strides(g, 3),
        *do.stride(),
        *_strides(dht, 4),
        *dq.stride(),
        *dk.stride(),
        *dv.stride(),
        *_strides(dg, 3),
        *_strides(dh0, 4),
        BT=p.chunk_size,
        BK=p.block_k,
        BV=p.block_v,
        **_launch_options(p),
    )
    zero_padding(p, dq, dk, dv, dg)
    return dq, dk, dv, dg, dh0
