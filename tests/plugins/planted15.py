"""Planted one-bug Triton kernels, round 15: kernels the harness was not tuned on, each with one
bug of a pattern that neither the earlier planted rounds (``planted.py``, ``planted_pallas.py``,
``planted3.py`` to ``planted14.py`` and their ``_pallas`` siblings), nor the project's mutants
(``kernels/*/mutants.py``), nor the other test plugins plant, registered through the public
plugin API only (``fuzz.fuzz_kernel``). The Pallas kernels of the round are in
``planted15_pallas.py``, the records of both in ``_planted15_bugs.py``; ``.ci/planted_rows.py
--round 15`` measures how many report rows each bug becomes.

Five kernels written as a user would (a row-block softmax with an online max and sum over column
tiles, a jagged softmax of one program per (segment, column block) over row tiles from the
segment's start, a flash-attention forward with an online softmax over key tiles and a soft cap,
a two-kernel split-KV decode merged through the splits' log-sum-exps, a chunked simple GLA
forward), each with a ``BUG`` switch that plants exactly one bug; each ``planted15_*`` target runs
one of them, each ``control15_*`` target the same kernel with no bug (what a campaign finds there
is not a planted bug's). Each bug, its trigger (the smallest input that shows it) and the failure
class expected:

- ``planted15_softmax_store_masked_by_keep_triton``: the writes are masked by the kept keys
  (the mask's, inside the row) where every lane inside the row belongs: a masked key's output,
  0, is never written and keeps what the output was allocated with (torch.empty: uninitialized);
  right without a mask. Trigger: one row of two keys, the second masked. Expected: nan.
- ``planted15_jagged_grid_axes_swapped_triton``: the launch grid is (column blocks, segments)
  where the kernel reads its axes as (segment, column block): the segments past the column block
  count are never written (zeros), and with more column blocks than segments the programs past
  the segments read offsets past their end. Trigger: two segments of two rows, one column.
  Expected: accuracy.
- ``planted15_attention_kv_rows_strided_by_key_length_triton``: the first key row of a (batch
  element, kv head) is taken as (b * Hkv + hk) * k_len, the key length in use, where the rows
  allocated, Tk, belong: with key padding every (batch element, kv head) but the first reads
  another's keys and values; right without key padding. Trigger: two kv heads of two keys, a key
  length of one. Expected: accuracy.
- ``planted15_decode_partials_read_split_major_triton``: the merge reads the splits' partial
  outputs and log-sum-exps split-major (slot s * B * Hq + bh) where the split kernel writes them
  (batch, head)-major (slot bh * num_splits + s): each (batch, head) merges other heads' splits;
  right with one split or one (batch, head). Trigger: two query heads, two splits, a cache of two
  keys. Expected: accuracy.
- ``planted15_gla_state_update_of_queries_triton``: the state's update is (q exp(b_last - b))^T v
  where the keys, (k exp(b_last - b))^T v, belong (a copy of the line above's operand): the
  carried state, and the final state, are built from the queries; the intra-chunk term is right.
  Trigger: one token with its final state. Expected: accuracy.

``PLANTED`` maps each planted target to its ``_planted3_bugs.Pattern`` record (family, bug, what
the CPU campaigns found); ``CONTROLS`` the bug-free targets.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import fuzz


def _load_bugs():
    """``_planted15_bugs.py`` beside this file (a plugin is loaded by path, not as a package)."""
    return fuzz.load_beside(__file__, "_planted15_bugs.py", "kernel_fuzz_planted15_bugs")


PATTERNS = _load_bugs().PATTERNS

# Which bug a kernel plants (0: none). Kernels read them as constexpr ints.
NONE = tl.constexpr(0)
STORE_MASKED_BY_KEEP = tl.constexpr(1)
GRID_AXES_SWAPPED = tl.constexpr(2)
KV_ROWS_OF_KEY_LENGTH = tl.constexpr(3)
PARTIALS_SPLIT_MAJOR = tl.constexpr(4)
STATE_OF_QUERIES = tl.constexpr(5)

BUG_IDS = {
    "softmax_store_masked_by_keep": STORE_MASKED_BY_KEEP,
    "jagged_grid_axes_swapped": GRID_AXES_SWAPPED,
    "attention_kv_rows_strided_by_key_length": KV_ROWS_OF_KEY_LENGTH,
    "decode_partials_read_split_major": PARTIALS_SPLIT_MAJOR,
    "gla_state_update_of_queries": STATE_OF_QUERIES,
}


def _pow2(n: int, least: int = 16) -> int:
    return max(least, triton.next_power_of_2(max(int(n), 1)))


# Softmax ------------------------------------------------------------------------------------------
# One program per block of BLOCK_M rows, two passes over the row's BLOCK_N-column tiles: an online
# max and sum of the logits scale * x + bias (fp32; masked keys and lanes past the row -inf), then
# the writes. The shift of the exponentials is the running max, guarded to 0 while it is -inf (a
# row with no valid key so far); a row with no valid key has a sum of 0 and is written as zeros.


@triton.jit
def _softmax_logits(
    x_ptr, mask_ptr, bias_ptr, rows, cols, ok, sx, sm, sb, scale, HAS_MASK: tl.constexpr,
    HAS_BIAS: tl.constexpr,
):  # fmt: skip
    """The logits of one [BLOCK_M, BLOCK_N] tile, -inf where no valid key is, and which keys the
    mask keeps (inside the row)."""
    x = tl.load(x_ptr + rows[:, None] * sx + cols[None, :], mask=ok, other=0.0).to(tl.float32)
    keep = ok
    if HAS_MASK:
        keep = keep & (
            tl.load(mask_ptr + rows[:, None] * sm + cols[None, :], mask=ok, other=0) != 0
        )
    s = x * scale
    if HAS_BIAS:
        b = tl.load(bias_ptr + rows[:, None] * sb + cols[None, :], mask=ok, other=0.0)
        s = s + b.to(tl.float32)
    return tl.where(keep, s, float("-inf")), keep


@triton.jit
def _softmax_shift(m):
    """The shift of a row's exponentials: its running max, 0 while the row has no valid key."""
    return tl.where(m == float("-inf"), 0.0, m)


@triton.jit
def _softmax_kernel(
    x_ptr, mask_ptr, bias_ptr, y_ptr, n_rows, n_cols, sx, sm, sb, sy, scale,
    HAS_MASK: tl.constexpr, HAS_BIAS: tl.constexpr, BUG: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < n_rows
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    ell = tl.zeros([BLOCK_M], tl.float32)
    for c0 in range(0, n_cols, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        ok = row_ok[:, None] & (cols < n_cols)[None, :]
        s, _ = _softmax_logits(
            x_ptr, mask_ptr, bias_ptr, rows, cols, ok, sx, sm, sb, scale, HAS_MASK, HAS_BIAS
        )
        m_new = tl.maximum(m, tl.max(s, 1))
        shift = _softmax_shift(m_new)
        ell = ell * tl.exp(m - shift) + tl.sum(tl.exp(s - shift[:, None]), 1)
        m = m_new
    shift = _softmax_shift(m)
    inv = tl.where(ell > 0.0, 1.0 / tl.where(ell > 0.0, ell, 1.0), 0.0)
    for c0 in range(0, n_cols, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        ok = row_ok[:, None] & (cols < n_cols)[None, :]
        s, keep = _softmax_logits(
            x_ptr, mask_ptr, bias_ptr, rows, cols, ok, sx, sm, sb, scale, HAS_MASK, HAS_BIAS
        )
        y = tl.exp(s - shift[:, None]) * inv[:, None]
        if BUG == STORE_MASKED_BY_KEEP:  # planted: the kept keys' lanes only
            tl.store(y_ptr + rows[:, None] * sy + cols[None, :], y, mask=keep)
        else:
            tl.store(y_ptr + rows[:, None] * sy + cols[None, :], y, mask=ok)


def softmax(x, *, mask=None, bias=None, scale=1.0, block_m=4, block_n=16, bug=NONE):
    """Row softmax of ``scale * x + bias`` over ``x [R, C]``'s last axis, masked keys (``mask``
    False) removed; a row with no valid key gives zeros. Logits and statistics in fp32, output
    in x's dtype."""
    n_rows, n_cols = x.shape
    x = x.contiguous()
    y = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)
    keep = mask.to(torch.int8).contiguous() if mask is not None else x
    b = bias.contiguous() if bias is not None else x
    if n_rows and n_cols:
        _softmax_kernel[(triton.cdiv(n_rows, block_m),)](
            x, keep, b, y, n_rows, n_cols, x.stride(0), keep.stride(0), b.stride(0), y.stride(0),
            float(scale), HAS_MASK=mask is not None, HAS_BIAS=bias is not None, BUG=bug,
            BLOCK_M=block_m, BLOCK_N=block_n,
        )  # fmt: skip
    return y.to(x.dtype)


def _softmax_kernel_of(bug):
    def kernel(x, *, mask, bias, scale, block_m, block_n):
        return softmax(
            x, mask=mask, bias=bias, scale=scale, block_m=block_m, block_n=block_n, bug=bug
        )

    return kernel


SOFTMAX_CAPS = fuzz.Capabilities(
    features={"mask", "bias", "scale"}, tiles={"block_m": (4, 8), "block_n": (16, 32)}
)


# Jagged softmax -----------------------------------------------------------------------------------
# One program per (segment, column block), three passes over the segment's row tiles (each
# column's max, its sum of exp(x - max), the writes), from the segment's first row on, each tile
# masked at the segment's end. (The tiles start at the segment's start, not at the array's tile
# boundaries: the sums' rounding is then the same wherever the segment lies.)


@triton.jit
def _jagged_rows(r0, stop, col_ok, BLOCK_N: tl.constexpr):
    """The rows of the tile at ``r0`` and which (row, column) pairs of it are the segment's."""
    rows = r0 + tl.arange(0, BLOCK_N)
    return rows, (rows < stop)[:, None] & col_ok[None, :]


@triton.jit
def _jagged_kernel(
    v_ptr, offsets_ptr, y_ptr, n_cols, stride_vn, stride_vm, stride_yn, BUG: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    seg = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    col_ok = cols < n_cols
    start = tl.load(offsets_ptr + seg)
    stop = tl.load(offsets_ptr + seg + 1)
    first = start
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    for r0 in range(first, stop, BLOCK_N):
        rows, ok = _jagged_rows(r0, stop, col_ok, BLOCK_N)
        at = v_ptr + rows[:, None] * stride_vn + cols[None, :] * stride_vm
        x = tl.where(ok, tl.load(at, mask=ok, other=0.0).to(tl.float32), float("-inf"))
        m = tl.maximum(m, tl.max(x, 0))
    shift = tl.where(m == float("-inf"), 0.0, m)
    ell = tl.zeros([BLOCK_M], tl.float32)
    for r0 in range(first, stop, BLOCK_N):
        rows, ok = _jagged_rows(r0, stop, col_ok, BLOCK_N)
        at = v_ptr + rows[:, None] * stride_vn + cols[None, :] * stride_vm
        x = tl.where(ok, tl.load(at, mask=ok, other=0.0).to(tl.float32), float("-inf"))
        ell += tl.sum(tl.exp(x - shift[None, :]), 0)
    inv = tl.where(ell > 0.0, 1.0 / tl.where(ell > 0.0, ell, 1.0), 0.0)
    for r0 in range(first, stop, BLOCK_N):
        rows, ok = _jagged_rows(r0, stop, col_ok, BLOCK_N)
        at = v_ptr + rows[:, None] * stride_vn + cols[None, :] * stride_vm
        x = tl.where(ok, tl.load(at, mask=ok, other=0.0).to(tl.float32), float("-inf"))
        y = tl.exp(x - shift[None, :]) * inv[None, :]
        tl.store(y_ptr + rows[:, None] * stride_yn + cols[None, :], y, mask=ok)


def jagged_softmax(values, *, offsets, block_n=4, block_m=4, bug=NONE):
    """Softmax over each segment's rows (``offsets [B + 1]``: segment starts, then N), per column
    of ``values [N, M]`` (any strided view); output (contiguous) in values' dtype."""
    n_rows, n_cols = values.shape
    y = torch.zeros((n_rows, n_cols), dtype=torch.float32, device=values.device)
    n_seg = offsets.shape[0] - 1
    grid = (n_seg, triton.cdiv(n_cols, block_m))
    if (
        getattr(bug, "value", bug) == GRID_AXES_SWAPPED.value
    ):  # planted: (column blocks, segments), the kernel's axes swapped
        grid = (triton.cdiv(n_cols, block_m), n_seg)
    if n_seg > 0 and n_cols > 0:
        _jagged_kernel[grid](
            values, offsets, y, n_cols, values.stride(0), values.stride(1), y.stride(0), BUG=bug,
            BLOCK_N=block_n, BLOCK_M=block_m,
        )  # fmt: skip
    return y.to(values.dtype)


def _jagged_kernel_of(bug):
    def kernel(values, *, offsets, block_n, block_m):
        return jagged_softmax(values, offsets=offsets, block_n=block_n, block_m=block_m, bug=bug)

    return kernel


JAGGED_CAPS = fuzz.Capabilities(tiles={"block_n": (4, 8), "block_m": (4,)})


# Attention ----------------------------------------------------------------------------------------
# Flash-attention forward, one program per (query tile, batch element and query head), an online
# softmax in natural units over the key tiles: each tile's logits raise the running max m, the
# sum and the accumulator are rescaled by exp(m_old - m_new). Each query's key position is
# p = i + Lk - Lq (bottom-right); the causal mask, the window [p - left, p + right] (a side of -1:
# unbounded) and the ALiBi distance |p - j| are measured from it. Under the causal mask the key
# loop stops after the tile's last position.


@triton.jit
def _tanh(x):
    """tanh in fp32 from exp (a series near 0, else 1 - 2 / (exp(2|x|) + 1); -1 at -inf), the
    same on every backend, whatever tanh each lowers to."""
    a = tl.abs(x)
    x2 = x * x
    series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (
        62.0 / 2835.0 + x2 * (-1382.0 / 155925.0 + x2 * (21844.0 / 6081075.0)))))))  # fmt: skip
    far = 1.0 - 2.0 / (tl.exp(2.0 * a) + 1.0)
    return tl.where(a < 0.25, series, tl.where(x < 0, -far, far))


@triton.jit
def _attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, key_len_ptr, slopes_ptr, Hq, Hkv, Tq, Tk, D, scale,
    softcap, w_left, w_right, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
    KEY_PADDING: tl.constexpr, ALIBI: tl.constexpr, SOFTCAP: tl.constexpr, BUG: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
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
    offset = k_len - Tq
    pos = offs_q + offset
    first_pos = q0 + offset  # the tile's first query's key position
    slope = 0.0
    if ALIBI:
        slope = tl.load(slopes_ptr + h)
    hi = k_len
    if CAUSAL:  # no key after the tile's last position is visible
        hi = tl.minimum(k_len, tl.maximum(first_pos + BLOCK_Q, 0))
    m = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    ell = tl.zeros([BLOCK_Q], tl.float32)
    acc = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)
    kv_base = (b * Hkv + hk) * Tk
    if BUG == KV_ROWS_OF_KEY_LENGTH:  # planted: the rows of a (batch, kv head) strided by k_len
        kv_base = (b * Hkv + hk) * k_len
    for k0 in range(0, hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        keep = q_ok[:, None] & (offs_k < k_len)[None, :]
        if WINDOW:
            keep = keep & ((offs_k[None, :] >= pos[:, None] - w_left) | (w_left < 0))
            keep = keep & ((offs_k[None, :] <= pos[:, None] + w_right) | (w_right < 0))
        if CAUSAL:
            keep = keep & (offs_k[None, :] <= pos[:, None])
        # a key no query of the tile sees is not loaded (a masked key's value may be anything)
        seen = tl.max(keep.to(tl.int32), 0) > 0
        kv = (kv_base + offs_k)[:, None] * D + offs_d[None, :]
        kv_mask = seen[:, None] & d_ok[None, :]
        k = tl.load(k_ptr + kv, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + kv, mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        if SOFTCAP:
            s = softcap * _tanh(s / softcap)
        if ALIBI:
            s = s - slope * tl.abs(pos[:, None] - offs_k[None, :]).to(tl.float32)
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - shift)
        p = tl.exp(s - shift[:, None])
        ell = ell * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m = m_new
    live = ell > 0.0
    o = acc / tl.where(live, ell, 1.0)[:, None]
    lse = tl.where(live, m + tl.log(tl.where(live, ell, 1.0)), float("-inf"))
    tl.store(o_ptr + q_rows[:, None] * D + offs_d[None, :], o, mask=q_ok[:, None] & d_ok[None, :])
    tl.store(lse_ptr + q_rows, lse, mask=q_ok)


def attention(
    q, k, v, *, scale, causal=False, window=None, key_lengths=None, alibi_slopes=None,
    softcap=None, block_q=16, block_k=16, bug=NONE,
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
            float(softcap or 1.0), int(left), int(right), CAUSAL=bool(causal),
            WINDOW=window is not None, KEY_PADDING=key_lengths is not None,
            ALIBI=alibi_slopes is not None, SOFTCAP=softcap is not None, BUG=bug,
            BLOCK_Q=block_q, BLOCK_K=block_k, BLOCK_D=_pow2(d),
        )  # fmt: skip
    return o.to(q.dtype), lse


def _attention_kernel_of(bug):
    def kernel(
        q, k, v, *, scale, causal, window, key_lengths, alibi_slopes, softcap, block_q, block_k
    ):  # fmt: skip
        return attention(
            q, k, v, scale=scale, causal=causal, window=window, key_lengths=key_lengths,
            alibi_slopes=alibi_slopes, softcap=softcap, block_q=block_q, block_k=block_k,
            bug=bug,
        )  # fmt: skip

    return kernel


HEAD_DIMS = (1, 2, 3, 8, 16, 32)  # one BLOCK_D tile of up to 32 lanes
ATTENTION_CAPS = fuzz.Capabilities(
    tiles={"block_q": (16, 32), "block_k": (16, 32)},
    head_dims=HEAD_DIMS,
    features={"causal", "window", "key_padding", "alibi", "softcap", "gqa", "scale"},
)


# Split-KV decode ----------------------------------------------------------------------------------
# Two kernels. The first runs one program per (batch element and query head, split): the cache's
# cache_len keys in num_splits shares of per = ceil(cache_len / num_splits) keys, each reduced on
# its own to a normalized output (its accumulator divided by its sum) and its log-sum-exp in a
# scratch buffer; a share with no key stores o = 0 and lse = -inf (its sum is 0). The second
# merges each (batch element, query head)'s splits through their log-sum-exps, weighing each
# split's normalized output by exp(lse_split - lse). The query sits at key position
# p = cache_len - 1: the window [p - left, p + right] and the ALiBi distance |p - j| are
# measured from it.


@triton.jit
def _decode_split_kernel(
    q_ptr, k_ptr, v_ptr, len_ptr, slopes_ptr, part_o_ptr, part_lse_ptr, Hq, Hkv, Tmax, D,
    n_splits, scale, w_left, w_right, WINDOW: tl.constexpr, ALIBI: tl.constexpr,
    BUG: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0)
    sp = tl.program_id(1)
    b = bh // Hq
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
    shift = tl.where(m == float("-inf"), 0.0, m)
    lse = tl.where(live, shift + tl.log(tl.where(live, ell, 1.0)), float("-inf"))
    slot = bh * n_splits + sp
    tl.store(part_o_ptr + slot * D + offs_d, o, mask=d_ok)
    tl.store(part_lse_ptr + slot + tl.arange(0, 1), lse)


@triton.jit
def _decode_merge_kernel(
    part_o_ptr, part_lse_ptr, o_ptr, lse_ptr, n_splits, D, BUG: tl.constexpr,
    BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    bh = tl.program_id(0)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_ok = offs_s < n_splits
    d_ok = offs_d < D
    slots = bh * n_splits + offs_s
    if BUG == PARTIALS_SPLIT_MAJOR:  # planted: split-major, [n_splits, B * Hq]
        slots = offs_s * tl.num_programs(0) + bh
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
            part_o, part_lse, o, lse, num_splits, d, BUG=bug, BLOCK_S=_pow2(num_splits, 2),
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
# chunk (restarting at each chunk's start; a per-head decay gamma: gamma * (i + 1)) and b_last the
# chunk's total (gamma times the chunk's token count): o = scale * ((q exp(b)) h
# + (causal(q k^T) * exp(b_i - b_j)) v), then h = exp(b_last) h + (k exp(b_last - b))^T v; the
# final state stored after the last chunk. States in power-of-two tiles [BLOCK_K, BLOCK_V].


@triton.jit
def _gla_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, gamma_ptr, h0_ptr, o_ptr, ht_ptr, T, H, K, V, scale,
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
        w = tl.exp(tl.where(t_ok, b_last - bsum, 0.0))[:, None]
        k_w = k * w
        if BUG == STATE_OF_QUERIES:  # planted: the state's update built from the queries
            k_w = q * w
        state = tl.exp(b_last) * state + tl.dot(tl.trans(k_w), v, input_precision="ieee")
    tl.store(ht_ptr + kv_at, state, mask=kv_ok)


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
            h0 if h0 is not None else q, o, ht, t_len, heads, kd, vd, float(scale),
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
    raise ValueError(f"no round-15 Triton kernel of family {family!r}")


def _register(name: str, family: str, bug, description: str):
    kernel, caps = _kernel_and_caps(family, bug)
    # decode's "a decode step is the last row of a causal prefill" compares with the library's
    # prefill: the bug-free dense kernel
    siblings = {"attention": CONTROLS["control15_attention_triton"]} if "decode" in family else None
    return fuzz.fuzz_kernel(
        name,
        family=family,
        kernel=kernel,
        capabilities=caps,
        siblings=siblings,
        description=description[:200],
    )


def target_name(pattern: str) -> str:
    return f"planted15_{pattern}_triton"


FAMILIES = ("attention", "softmax", "jagged_softmax", "attention_decode", "simple_gla_fwd")

# The kernels with no bug planted: what a campaign finds on them is not a planted bug's.
CONTROLS = {}
for _family in FAMILIES:
    _name = f"control15_{_family}_triton"
    CONTROLS[_name] = _register(
        _name, _family, NONE, f"the round-15 {_family} Triton kernel with no bug planted"
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
