"""Planted one-bug Triton kernels, round 10: kernels the harness was not tuned on, each with one
bug of a pattern that neither the earlier planted rounds (``planted.py``, ``planted_pallas.py``,
``planted3.py`` to ``planted8.py`` and their ``_pallas`` siblings), nor the project's mutants
(``kernels/*/mutants.py``), nor the other test plugins plant, registered through the public
plugin API only (``fuzz.fuzz_kernel``). The Pallas kernels of the round are in
``planted10_pallas.py``, the records of both in ``_planted10_bugs.py``; ``.ci/planted_rows.py
--round 10`` measures how many report rows each bug becomes.

Five kernels written as a user would (a one-tile row softmax in exp2 normalized through its
log-sum-exp, a jagged softmax of one program per (segment, column block), a flash-attention
forward in log2 units, a two-kernel split-KV decode whose splits leave their outputs in a scratch
buffer, a chunked simple GLA forward), each with a ``BUG`` switch that plants exactly one bug;
each ``planted10_*`` target runs one of them, each ``control10_*`` target the same kernel with
no bug (what a campaign finds there is not a planted bug's). Each bug, its trigger (the smallest
input that shows it) and the failure class expected:

- ``planted10_softmax_lse_of_natural_log_triton``: the row is written as exp2(s - lse2) with
  its log-sum-exp in log2 units taken as max + log(sum), the sum's natural log where log2
  belongs: every lane is sum^(1 - ln 2) times too large (right for a row whose sum is 1: one
  valid key). Trigger: one row of two keys. Expected: accuracy.
- ``planted10_jagged_column_grid_of_row_tile_triton``: the launch grid's column axis is
  cdiv(M, block_n) where block_m belongs: with block_n 8 and block_m 4 the columns past the
  covered blocks are never written (left 0). Trigger: one segment of two rows and 5 columns,
  block_n 8. Expected: accuracy.
- ``planted10_attention_acc_rescaled_twice_triton``: when a key tile raises a query's running
  max, the correction exp2(m_old - m_new) is applied to the output accumulator twice (the sum
  once): the earlier tiles' share of o is too small. Trigger: one query on 17 keys, block_k 16,
  key 16 the largest logit. Expected: accuracy.
- ``planted10_decode_gqa_head_modulo_triton``: under GQA the kv head of query head h is
  h % Hkv where the grouped layout's h // (Hq / Hkv) belongs (right with one kv head or none
  shared). Trigger: four query heads on two kv heads. Expected: accuracy.
- ``planted10_gla_ht_head_major_triton``: the final state of (b, h) is stored at slot h * B + b
  (head-major) where the output's b * H + h belongs: the states permuted (right with one batch
  element or one head). Trigger: two batch elements of two heads and the final state. Expected:
  accuracy.

``PLANTED`` maps each planted target to its ``_planted3_bugs.Pattern`` record (family, bug, what
the CPU campaigns found); ``CONTROLS`` the bug-free targets.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

import fuzz


def _load_bugs():
    """``_planted10_bugs.py`` beside this file (a plugin is loaded by path, not as a package)."""
    return fuzz.load_beside(__file__, "_planted10_bugs.py", "kernel_fuzz_planted10_bugs")


PATTERNS = _load_bugs().PATTERNS

# Which bug a kernel plants (0: none). Kernels read them as constexpr ints.
NONE = tl.constexpr(0)
LSE_OF_NATURAL_LOG = tl.constexpr(1)
COLUMN_GRID_OF_ROW_TILE = tl.constexpr(2)
ACC_RESCALED_TWICE = tl.constexpr(3)
GQA_HEAD_MODULO = tl.constexpr(4)
HT_HEAD_MAJOR = tl.constexpr(5)

BUG_IDS = {
    "softmax_lse_of_natural_log": LSE_OF_NATURAL_LOG,
    "jagged_column_grid_of_row_tile": COLUMN_GRID_OF_ROW_TILE,
    "attention_acc_rescaled_twice": ACC_RESCALED_TWICE,
    "decode_gqa_head_modulo": GQA_HEAD_MODULO,
    "gla_ht_head_major": HT_HEAD_MAJOR,
}

LOG2E = tl.constexpr(math.log2(math.e))
LN2 = tl.constexpr(math.log(2.0))


def _pow2(n: int, least: int = 16) -> int:
    return max(least, triton.next_power_of_2(max(int(n), 1)))


# Softmax ------------------------------------------------------------------------------------------
# One program per row, the whole row in one tile of BLOCK_N lanes (the row's power of two, at
# least block_n): the logits scale * x + bias formed in fp32 and taken to log2 units (times
# log2(e)) for exp2, masked keys and the lanes past the row -inf, then the max, the sum, the
# row's log-sum-exp in log2 units, and each lane written as exp2 of its logit minus it.


@triton.jit
def _softmax_kernel(
    x_ptr, mask_ptr, bias_ptr, y_ptr, n_cols, sx, sm, sb, sy, scale, HAS_MASK: tl.constexpr,
    HAS_BIAS: tl.constexpr, BUG: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    ok = cols < n_cols
    s = tl.load(x_ptr + row * sx + cols, mask=ok, other=0.0).to(tl.float32) * scale
    if HAS_BIAS:
        s += tl.load(bias_ptr + row * sb + cols, mask=ok, other=0.0).to(tl.float32)
    keep = ok
    if HAS_MASK:
        keep = keep & (tl.load(mask_ptr + row * sm + cols, mask=ok, other=0) != 0)
    s = tl.where(keep, s * LOG2E, float("-inf"))
    m = tl.max(s, 0)
    shift = tl.where(m == float("-inf"), 0.0, m)
    e = tl.exp2(s - shift)
    ell = tl.sum(e, 0)
    live = ell > 0.0
    # the log-sum-exp in log2 units is shift + log_sum; each lane exp2(s - lse2), as
    # exp2(s - shift) * exp2(-log_sum)
    if BUG == LSE_OF_NATURAL_LOG:  # planted: the sum's natural log in a log2-unit lse
        log_sum = tl.log(tl.where(live, ell, 1.0))
    else:
        log_sum = tl.log2(tl.where(live, ell, 1.0))
    y = tl.where(live, e * tl.exp2(-log_sum), 0.0)
    tl.store(y_ptr + row * sy + cols, y, mask=ok)


def softmax(x, *, mask=None, bias=None, scale=1.0, block_n=16, bug=NONE):
    """Row softmax of ``scale * x + bias`` over ``x [R, C]``'s last axis, masked keys (``mask``
    False) removed; a row with no valid key gives zeros. Logits and statistics in fp32, output
    in x's dtype."""
    n_rows, n_cols = x.shape
    x = x.contiguous()
    y = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)
    keep = mask.to(torch.int8).contiguous() if mask is not None else x
    b = bias.contiguous() if bias is not None else x
    tile = max(block_n, triton.next_power_of_2(max(n_cols, 1)))
    if n_rows and n_cols:
        _softmax_kernel[(n_rows,)](
            x, keep, b, y, n_cols, x.stride(0), keep.stride(0), b.stride(0), y.stride(0),
            float(scale), HAS_MASK=mask is not None, HAS_BIAS=bias is not None, BUG=bug,
            BLOCK_N=tile,
        )  # fmt: skip
    return y.to(x.dtype)


def _softmax_kernel_of(bug):
    def kernel(x, *, mask, bias, scale, block_n):
        return softmax(x, mask=mask, bias=bias, scale=scale, block_n=block_n, bug=bug)

    return kernel


SOFTMAX_CAPS = fuzz.Capabilities(features={"mask", "bias", "scale"}, tiles={"block_n": (16, 32)})


# Jagged softmax -----------------------------------------------------------------------------------
# One program per (segment, column block), three passes over the segment's row tiles (each
# column's max, its sum of exp(x - max), the writes), each segment cut at max_len rows (the
# longest segment's length: no segment is cut).


@triton.jit
def _jagged_tile(v_ptr, rows, cols, ok, stride_vn, stride_vm):
    x = tl.load(v_ptr + rows[:, None] * stride_vn + cols[None, :] * stride_vm, mask=ok, other=0.0)
    return tl.where(ok, x.to(tl.float32), float("-inf"))


@triton.jit
def _jagged_kernel(
    v_ptr, offsets_ptr, y_ptr, n_cols, max_len, stride_vn, stride_vm, stride_yn,
    BUG: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    seg = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    col_ok = cols < n_cols
    start = tl.load(offsets_ptr + seg)
    stop = tl.minimum(tl.load(offsets_ptr + seg + 1), start + max_len)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    for r0 in range(start, stop, BLOCK_N):
        rows = r0 + tl.arange(0, BLOCK_N)
        ok = (rows[:, None] < stop) & col_ok[None, :]
        m = tl.maximum(m, tl.max(_jagged_tile(v_ptr, rows, cols, ok, stride_vn, stride_vm), 0))
    shift = tl.where(m == float("-inf"), 0.0, m)
    ell = tl.zeros([BLOCK_M], tl.float32)
    for r0 in range(start, stop, BLOCK_N):
        rows = r0 + tl.arange(0, BLOCK_N)
        ok = (rows[:, None] < stop) & col_ok[None, :]
        x = _jagged_tile(v_ptr, rows, cols, ok, stride_vn, stride_vm)
        ell += tl.sum(tl.exp(x - shift[None, :]), 0)
    inv = tl.where(ell > 0.0, 1.0 / tl.where(ell > 0.0, ell, 1.0), 0.0)
    for r0 in range(start, stop, BLOCK_N):
        rows = r0 + tl.arange(0, BLOCK_N)
        ok = (rows[:, None] < stop) & col_ok[None, :]
        x = _jagged_tile(v_ptr, rows, cols, ok, stride_vn, stride_vm)
        y = tl.exp(x - shift[None, :]) * inv[None, :]
        tl.store(y_ptr + rows[:, None] * stride_yn + cols[None, :], y, mask=ok)


def jagged_softmax(values, *, offsets, block_n=4, block_m=4, bug=NONE):
    """Softmax over each segment's rows (``offsets [B + 1]``: segment starts, then N), per column
    of ``values [N, M]`` (any strided view); output (contiguous) in values' dtype."""
    n_rows, n_cols = values.shape
    y = torch.zeros((n_rows, n_cols), dtype=torch.float32, device=values.device)
    n_seg = offsets.shape[0] - 1
    if n_seg > 0 and n_cols > 0:
        max_len = int((offsets[1:] - offsets[:-1]).max())
        # one program per column block of block_m columns
        col_tile = block_n if bug == COLUMN_GRID_OF_ROW_TILE else block_m  # (planted: block_n)
        _jagged_kernel[(n_seg, triton.cdiv(n_cols, col_tile))](
            values, offsets, y, n_cols, max_len, values.stride(0), values.stride(1), y.stride(0),
            BUG=bug, BLOCK_N=block_n, BLOCK_M=block_m,
        )  # fmt: skip
    return y.to(values.dtype)


def _jagged_kernel_of(bug):
    def kernel(values, *, offsets, block_n, block_m):
        return jagged_softmax(values, offsets=offsets, block_n=block_n, block_m=block_m, bug=bug)

    return kernel


JAGGED_CAPS = fuzz.Capabilities(tiles={"block_n": (4, 8), "block_m": (4,)})


# Attention ----------------------------------------------------------------------------------------
# Flash-attention forward, one program per (query tile, batch element and query head): the
# queries pre-scaled by scale * log2(e), so that the logits come out in log2 units for exp2; an
# online softmax over the key tiles, masked per element; the log-sum-exp turned back into natural
# units at the end. Each query's key position is p = i + Lk - Lq (bottom-right); the causal mask,
# the window [p - left, p + right] (a side of -1: unbounded) and the ALiBi distance |p - j| are
# measured from it. With a window's left side, the key loop starts at the tile of the leftmost key
# the tile's first query sees (the tiles before it hold no key any query of the tile sees).


@triton.jit
def _keep_of(
    pos, offs_k, q_ok, k_len, w_left, w_right, CAUSAL: tl.constexpr, WINDOW: tl.constexpr
):  # fmt: skip
    """Which (query, key) pairs of a tile are visible."""
    keep = q_ok[:, None] & (offs_k < k_len)[None, :]
    if CAUSAL:
        keep = keep & (offs_k[None, :] <= pos[:, None])
    if WINDOW:
        keep = keep & ((offs_k[None, :] >= pos[:, None] - w_left) | (w_left < 0))
        keep = keep & ((offs_k[None, :] <= pos[:, None] + w_right) | (w_right < 0))
    return keep


@triton.jit
def _attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, key_len_ptr, slopes_ptr, Hq, Hkv, Tq, Tk, D, scale,
    w_left, w_right, CAUSAL: tl.constexpr, WINDOW: tl.constexpr, KEY_PADDING: tl.constexpr,
    ALIBI: tl.constexpr, BUG: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(1) // Hq
    h = tl.program_id(1) % Hq
    hk = h // (Hq // Hkv)
    k_len = Tk
    if KEY_PADDING:
        k_len = tl.load(key_len_ptr + b)
    q0 = tl.program_id(0) * BLOCK_Q
    offs_q = q0 + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    q_ok = offs_q < Tq
    d_ok = offs_d < D
    q_rows = (b * Hq + h) * Tq + offs_q
    q = tl.load(
        q_ptr + q_rows[:, None] * D + offs_d[None, :], mask=q_ok[:, None] & d_ok[None, :], other=0.0
    ).to(tl.float32)
    q = q * (scale * LOG2E)  # the logits in log2 units
    offset = k_len - Tq
    pos = offs_q + offset
    slope = 0.0
    if ALIBI:
        slope = tl.load(slopes_ptr + h) * LOG2E
    lo = 0
    if WINDOW:
        first = q0 + offset - w_left  # the leftmost key the tile's first query sees
        first_tile = first // BLOCK_K
        lo = tl.where((w_left >= 0) & (first > 0), first_tile * BLOCK_K, 0)
    m = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    ell = tl.zeros([BLOCK_Q], tl.float32)
    acc = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)
    kv_base = (b * Hkv + hk) * Tk
    for k0 in range(lo, k_len, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        keep = _keep_of(pos, offs_k, q_ok, k_len, w_left, w_right, CAUSAL, WINDOW)
        # a key no query of the tile sees is not loaded (a masked key's value may be anything)
        seen = tl.max(keep.to(tl.int32), 0) > 0
        kv = (kv_base + offs_k)[:, None] * D + offs_d[None, :]
        kv_mask = seen[:, None] & d_ok[None, :]
        k = tl.load(k_ptr + kv, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + kv, mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        if ALIBI:
            s = s - slope * tl.abs(pos[:, None] - offs_k[None, :]).to(tl.float32)
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m - shift)
        p = tl.exp2(s - shift[:, None])
        ell = ell * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if BUG == ACC_RESCALED_TWICE:  # planted: the correction applied again
            acc = acc * alpha[:, None]
        acc += tl.dot(p, v, input_precision="ieee")
        m = m_new
    live = ell > 0.0
    o = acc / tl.where(live, ell, 1.0)[:, None]
    lse = tl.where(live, (m + tl.log2(tl.where(live, ell, 1.0))) * LN2, float("-inf"))
    tl.store(o_ptr + q_rows[:, None] * D + offs_d[None, :], o, mask=q_ok[:, None] & d_ok[None, :])
    tl.store(lse_ptr + q_rows, lse, mask=q_ok)


def attention(
    q, k, v, *, scale, causal=False, window=None, key_lengths=None, alibi_slopes=None,
    block_q=16, block_k=16, bug=NONE,
):  # fmt: skip
    """Attention of ``q [B, Hq, Tq, D]`` on ``k, v [B, Hkv, Tk, D]`` (``key_lengths [B]``: the
    keys in use): ``(o, lse)``, o in q's dtype, lse fp32 natural (a query with no visible key:
    o = 0, lse = -inf)."""
    batch, hq, tq, d = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"q heads {hq} must be a multiple of kv heads {hkv}")
    q, k, v = (t.contiguous() for t in (q, k, v))
    o = torch.empty((batch, hq, tq, d), dtype=torch.float32, device=q.device)
    lse = torch.empty((batch, hq, tq), dtype=torch.float32, device=q.device)
    left, right = window if window is not None else (-1, -1)
    if batch * hq * tq:
        _attention_kernel[(triton.cdiv(tq, block_q), batch * hq)](
            q, k, v, o, lse, key_lengths if key_lengths is not None else q,
            alibi_slopes if alibi_slopes is not None else q, hq, hkv, tq, tk, d, float(scale),
            int(left), int(right), CAUSAL=bool(causal), WINDOW=window is not None,
            KEY_PADDING=key_lengths is not None, ALIBI=alibi_slopes is not None, BUG=bug,
            BLOCK_Q=block_q, BLOCK_K=block_k, BLOCK_D=_pow2(d),
        )  # fmt: skip
    return o.to(q.dtype), lse


def _attention_kernel_of(bug):
    def kernel(
        q, k, v, *, scale, causal, window, key_lengths, alibi_slopes, block_q, block_k
    ):  # fmt: skip
        return attention(
            q, k, v, scale=scale, causal=causal, window=window, key_lengths=key_lengths,
            alibi_slopes=alibi_slopes, block_q=block_q, block_k=block_k, bug=bug,
        )  # fmt: skip

    return kernel


HEAD_DIMS = (1, 2, 3, 8, 16, 32)  # one BLOCK_D tile of up to 32 lanes
ATTENTION_CAPS = fuzz.Capabilities(
    tiles={"block_q": (16, 32), "block_k": (16, 32)},
    head_dims=HEAD_DIMS,
    features={"causal", "window", "key_padding", "alibi", "gqa", "scale"},
)


# Split-KV decode ----------------------------------------------------------------------------------
# Two kernels. The first runs one program per (batch element and query head, split): the cache's
# cache_len keys in num_splits shares of per = ceil(cache_len / num_splits) keys, each reduced on
# its own to a normalized output and its log-sum-exp, stored in a scratch buffer
# [B, Hq, splits, D] (and [B, Hq, splits]). The second runs one program per (batch element and
# query head) and merges its splits through their log-sum-exps. The query sits at key position
# p = cache_len - 1: the window [p - left, p + right] and the ALiBi distance |p - j| are measured
# from it. Head dims are handled in one power-of-two tile of BLOCK_D lanes masked to D.


@triton.jit
def _decode_split_kernel(
    q_ptr, k_ptr, v_ptr, len_ptr, slopes_ptr, part_o_ptr, part_lse_ptr, Hq, Hkv, Tmax, D,
    n_splits, scale, w_left, w_right, WINDOW: tl.constexpr, ALIBI: tl.constexpr,
    BUG: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0)
    sp = tl.program_id(1)
    b = bh // Hq
    if BUG == GQA_HEAD_MODULO:  # planted: the query heads dealt round the kv heads
        hk = (bh % Hq) % Hkv
    else:
        hk = (bh % Hq) // (Hq // Hkv)
    length = tl.load(len_ptr + b)
    per = tl.maximum((length + n_splits - 1) // n_splits, 1)
    lo = sp * per
    hi = tl.minimum(lo + per, length)
    pos = length - 1
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    q = tl.load(q_ptr + bh * D + offs_d, mask=d_ok, other=0.0).to(tl.float32)
    slope = 0.0
    if ALIBI:
        slope = tl.load(slopes_ptr + bh % Hq)
    m = tl.full([1], float("-inf"), tl.float32)
    ell = tl.zeros([1], tl.float32)
    acc = tl.zeros([BLOCK_D], tl.float32)
    for k0 in range(lo, hi, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        keep = cols < hi
        if WINDOW:
            keep = keep & ((cols >= pos - w_left) | (w_left < 0))
            keep = keep & ((cols <= pos + w_right) | (w_right < 0))
        at = ((b * Hkv + hk) * Tmax + cols)[:, None] * D + offs_d[None, :]
        kv_mask = keep[:, None] & d_ok[None, :]
        k = tl.load(k_ptr + at, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + at, mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.sum(k * q[None, :], 1) * scale
        if ALIBI:
            s = s - slope * tl.abs(pos - cols).to(tl.float32)
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 0))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - shift)
        p = tl.exp(s - shift)
        ell = ell * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * v, 0)
        m = m_new
    live = ell > 0.0
    o = acc / tl.where(live, ell, 1.0)
    lse = tl.where(live, m + tl.log(tl.where(live, ell, 1.0)), float("-inf"))
    slot = bh * n_splits + sp
    tl.store(part_o_ptr + slot * D + offs_d, o, mask=d_ok)
    tl.store(part_lse_ptr + slot + tl.arange(0, 1), lse)


@triton.jit
def _decode_merge_kernel(
    part_o_ptr, part_lse_ptr, o_ptr, lse_ptr, n_splits, D, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_ok = offs_s < n_splits
    d_ok = offs_d < D
    slots = bh * n_splits + offs_s
    lse_s = tl.load(part_lse_ptr + slots, mask=s_ok, other=float("-inf"))
    top = tl.max(lse_s, 0)
    shift = tl.where(top == float("-inf"), 0.0, top)
    w = tl.exp(lse_s - shift)
    total = tl.sum(w, 0)
    o_s = tl.load(
        part_o_ptr + slots[:, None] * D + offs_d[None, :],
        mask=s_ok[:, None] & d_ok[None, :], other=0.0,
    )  # fmt: skip
    live = total > 0.0
    o = tl.sum(w[:, None] * o_s, 0) / tl.where(live, total, 1.0)
    tl.store(o_ptr + bh * D + offs_d, o, mask=d_ok)
    lse = tl.where(live, shift + tl.log(tl.where(live, total, 1.0)), float("-inf"))
    tl.store(lse_ptr + bh, lse)


def decode(
    q, k, v, *, scale, cache_len, window=None, alibi_slopes=None, block_k=16, num_splits=1,
    bug=NONE,
):  # fmt: skip
    """One query per sequence (``q [B, Hq, 1, D]``) against a cache ``k, v [B, Hkv, Tmax, D]`` of
    ``cache_len [B]`` keys in use, in ``num_splits`` shares merged through their log-sum-exps:
    ``(o, lse)``, o in q's dtype, lse fp32."""
    batch, hq, _, d = q.shape
    hkv, tmax = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"q heads {hq} must be a multiple of kv heads {hkv}")
    q, k, v = (t.contiguous() for t in (q, k, v))
    # the splits' partial outputs and log-sum-exps, one slot per (batch element, head, split)
    part_o = torch.empty((batch, hq, num_splits, d), dtype=torch.float32, device=q.device)
    part_lse = torch.empty((batch, hq, num_splits), dtype=torch.float32, device=q.device)
    o = torch.empty((batch, hq, 1, d), dtype=torch.float32, device=q.device)
    lse = torch.empty((batch, hq, 1), dtype=torch.float32, device=q.device)
    left, right = window if window is not None else (-1, -1)
    if batch * hq:
        _decode_split_kernel[(batch * hq, num_splits)](
            q, k, v, cache_len, alibi_slopes if alibi_slopes is not None else q, part_o,
            part_lse, hq, hkv, tmax, d, num_splits, float(scale), int(left), int(right),
            WINDOW=window is not None, ALIBI=alibi_slopes is not None, BUG=bug,
            BLOCK_K=block_k, BLOCK_D=_pow2(d),
        )  # fmt: skip
        _decode_merge_kernel[(batch * hq,)](
            part_o, part_lse, o, lse, num_splits, d, BLOCK_S=_pow2(num_splits, 2),
            BLOCK_D=_pow2(d),
        )  # fmt: skip
    return o.to(q.dtype), lse


def _decode_kernel_of(bug):
    def kernel(q, k, v, *, scale, cache_len, window, alibi_slopes, block_k, num_splits):
        return decode(
            q, k, v, scale=scale, cache_len=cache_len, window=window, alibi_slopes=alibi_slopes,
            block_k=block_k, num_splits=num_splits, bug=bug,
        )  # fmt: skip

    return kernel


DECODE_CAPS = fuzz.Capabilities(
    tiles={"block_k": (16, 32), "num_splits": (1, 2, 4)},
    head_dims=HEAD_DIMS,
    features={"window", "alibi", "gqa", "scale", "splits"},
)


# Chunked simple GLA forward -----------------------------------------------------------------------
# One program per (batch element, head), chunk by chunk, with b the gates' running sum inside the
# chunk and b_last the chunk's total: o = scale * ((q exp(b)) h + (causal(q k^T) * exp(b_i - b_j))
# v), then the state h = exp(b_last) h + (k exp(b_last - b))^T v; the final state stored after the
# last chunk. States in power-of-two tiles [BLOCK_K, BLOCK_V] masked to [K, V].


@triton.jit
def _gla_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, gamma_ptr, h0_ptr, o_ptr, ht_ptr, B, T, H, K, V, scale,
    PER_TOKEN: tl.constexpr, HAS_H0: tl.constexpr, BUG: tl.constexpr, C: tl.constexpr,
    BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0) // H
    h = tl.program_id(0) % H
    offs_c = tl.arange(0, C)
    offs_k = tl.arange(0, BLOCK_K)
    offs_v = tl.arange(0, BLOCK_V)
    kv_ok = (offs_k[:, None] < K) & (offs_v[None, :] < V)
    kv_at = (b * H + h) * K * V + offs_k[:, None] * V + offs_v[None, :]
    state = tl.zeros([BLOCK_K, BLOCK_V], tl.float32)
    if HAS_H0:
        state = tl.load(h0_ptr + kv_at, mask=kv_ok, other=0.0)
    gamma = 0.0
    if not PER_TOKEN:
        gamma = tl.load(gamma_ptr + h)
    for c0 in range(0, T, C):
        t = c0 + offs_c
        t_ok = t < T
        row = (b * T + t) * H + h
        qk_mask = t_ok[:, None] & (offs_k[None, :] < K)
        q = tl.load(q_ptr + row[:, None] * K + offs_k[None, :], mask=qk_mask, other=0.0)
        k = tl.load(k_ptr + row[:, None] * K + offs_k[None, :], mask=qk_mask, other=0.0)
        v_mask = t_ok[:, None] & (offs_v[None, :] < V)
        v = tl.load(v_ptr + row[:, None] * V + offs_v[None, :], mask=v_mask, other=0.0)
        q = q.to(tl.float32)
        k = k.to(tl.float32)
        v = v.to(tl.float32)
        if PER_TOKEN:
            gate = tl.load(g_ptr + row, mask=t_ok, other=0.0)
            bsum = tl.cumsum(gate, 0)
            b_last = tl.sum(gate, 0)
        else:
            bsum = gamma * (offs_c + 1).to(tl.float32)
            b_last = gamma * tl.minimum(T - c0, C).to(tl.float32)
        inter = tl.dot(q * tl.exp(bsum)[:, None], state, input_precision="ieee")
        causal = (offs_c[:, None] >= offs_c[None, :]) & t_ok[None, :]
        decay = tl.exp(tl.where(causal, bsum[:, None] - bsum[None, :], 0.0))
        att = tl.where(causal, tl.dot(q, tl.trans(k), input_precision="ieee") * decay, 0.0)
        o = scale * (inter + tl.dot(att, v, input_precision="ieee"))
        tl.store(o_ptr + row[:, None] * V + offs_v[None, :], o, mask=v_mask)
        k_w = k * tl.exp(tl.where(t_ok, b_last - bsum, 0.0))[:, None]
        state = tl.exp(b_last) * state + tl.dot(tl.trans(k_w), v, input_precision="ieee")
    if BUG == HT_HEAD_MAJOR:  # planted: the final state stored at [H, B]
        ht_at = (h * B + b) * K * V + offs_k[:, None] * V + offs_v[None, :]
    else:
        ht_at = kv_at
    tl.store(ht_ptr + ht_at, state, mask=kv_ok)


def gla_forward(
    q, k, v, *, scale, g=None, g_gamma=None, initial_state=None, output_final_state=False,
    chunk_size=16, bug=NONE,
):  # fmt: skip
    """Chunked simple GLA: ``q, k [B, T, H, K]``, ``v [B, T, H, V]``, per-token log decays
    ``g [B, T, H]`` or per-head ``g_gamma [H]``, ``initial_state [B, H, K, V]``. Returns ``o``
    (q's dtype) and the final state ``ht [B, H, K, V]`` (fp32), or None without
    ``output_final_state``."""
    batch, t_len, heads, kd = q.shape
    vd = v.shape[-1]
    if (g is None) == (g_gamma is None):
        raise ValueError("give exactly one of g (per token) and g_gamma (per head)")
    q, k, v = (x.contiguous() for x in (q, k, v))
    o = torch.empty((batch, t_len, heads, vd), dtype=torch.float32, device=q.device)
    ht = torch.empty((batch, heads, kd, vd), dtype=torch.float32, device=q.device)
    h0 = initial_state.float().contiguous() if initial_state is not None else None
    if batch * heads:
        _gla_kernel[(batch * heads,)](
            q, k, v, g.float().contiguous() if g is not None else q,
            g_gamma.float().contiguous() if g_gamma is not None else q,
            h0 if h0 is not None else q, o, ht, batch, t_len, heads, kd, vd, float(scale),
            PER_TOKEN=g is not None, HAS_H0=h0 is not None, BUG=bug, C=chunk_size,
            BLOCK_K=_pow2(kd), BLOCK_V=_pow2(vd),
        )  # fmt: skip
    return o.to(q.dtype), (ht if output_final_state else None)


def _gla_kernel_of(bug):
    def kernel(q, k, v, *, g, g_gamma, scale, initial_state, output_final_state, chunk_size):
        return gla_forward(
            q, k, v, g=g, g_gamma=g_gamma, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state, chunk_size=chunk_size, bug=bug,
        )  # fmt: skip

    return kernel


GLA_CAPS = fuzz.Capabilities(
    tiles={"chunk_size": (16, 32)},
    features={"g", "g_gamma", "initial_state", "final_state", "scale"},
)


# Registration -------------------------------------------------------------------------------------


def _kernel_and_caps(family: str, bug) -> tuple:
    """The kernel function and capabilities of ``family``'s kernel with ``bug`` planted."""
    if family == "softmax":
        return _softmax_kernel_of(bug), SOFTMAX_CAPS
    if family == "jagged_softmax":
        return _jagged_kernel_of(bug), JAGGED_CAPS
    if family == "attention":
        return _attention_kernel_of(bug), ATTENTION_CAPS
    if family == "attention_decode":
        return _decode_kernel_of(bug), DECODE_CAPS
    if family == "simple_gla_fwd":
        return _gla_kernel_of(bug), GLA_CAPS
    raise ValueError(f"no round-10 Triton kernel of family {family!r}")


def _register(name: str, family: str, bug, description: str):
    kernel, caps = _kernel_and_caps(family, bug)
    # decode's "a decode step is the last row of a causal prefill" compares with the library's
    # prefill: the bug-free dense kernel
    siblings = {"attention": CONTROLS["control10_attention_triton"]} if "decode" in family else None
    return fuzz.fuzz_kernel(
        name,
        family=family,
        kernel=kernel,
        capabilities=caps,
        siblings=siblings,
        description=description[:200],
    )


def target_name(pattern: str) -> str:
    return f"planted10_{pattern}_triton"


FAMILIES = ("attention", "softmax", "jagged_softmax", "attention_decode", "simple_gla_fwd")

# The kernels with no bug planted: what a campaign finds on them is not a planted bug's.
CONTROLS = {}
for _family in FAMILIES:
    _name = f"control10_{_family}_triton"
    CONTROLS[_name] = _register(
        _name, _family, NONE, f"the round-10 {_family} Triton kernel with no bug planted"
    )

PLANTED = {}
for _pattern, _record in PATTERNS.items():
    if "triton" not in _record.languages:
        continue
    _name = target_name(_pattern)
    _register(
        _name, _record.family, BUG_IDS[_pattern], f"planted ({_record.family}, Triton): "
        + _record.bugs[0].what,
    )  # fmt: skip
    PLANTED[_name] = _record
