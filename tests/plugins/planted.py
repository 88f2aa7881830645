"""Planted one-bug Triton kernels, registered through the public plugin API only: a set the
harness was not tuned on, to measure how many report rows one bug becomes and how large they are
(``.ci/planted_rows.py``; ``tests/plugins/test_planted.py``).

One correct kernel per family (softmax, jagged softmax, attention dense and packed, split-KV
decode, chunked simple GLA forward), written as a user would, with a ``BUG`` switch that plants
exactly one bug; each ``planted_*`` target runs one of them. ``control_*_triton`` targets run the
same kernels with no bug planted: what a campaign finds on them is the harness's (or the
helper's), not a planted bug's. Each bug, its trigger (the smallest input that shows it) and the
failure class expected (the full records: ``_planted_bugs.py``, shared with the Pallas twins of
``planted_pallas.py``):

- ``planted_softmax_bias_row0_triton``: every row gets row 0's bias (the bias's row stride taken
  as 0). Trigger: a bias of two rows that differ. Expected: accuracy.
- ``planted_softmax_frozen_max_triton``: the online max taken from the first column tile and never
  updated, so exp overflows once a later logit is 88.7 above it. Trigger: a row of two tiles whose
  first tile is masked (or far below) and a later logit > 88.7. Expected: nan.
- ``planted_two_bugs_softmax``: two bugs: float16 outputs times 1.01 (trigger: any float16 row),
  and bfloat16 rows of odd length >= 3 times 0.97 (trigger: one bfloat16 row of 3). Expected:
  accuracy, twice.
- ``planted_jagged_read_next_segment_triton``: row tiles load-masked against the total row count
  instead of the segment's end, so a segment takes the next one's first rows into its max and sum.
  Trigger: a segment of 1 row (block_n 4) followed by a non-empty one. Expected: masking (a
  one-row segment's output is fixed at 1; longer segments: accuracy).
- ``planted_attention_causal_clamp_triton``: the bottom-right offset Tk - Tq (the queries' key
  positions, for the causal mask, the window and ALiBi) clamped at 0: top-left when Tq > Tk.
  Trigger: causal, Tq = 2, Tk = 1 (query 0 sees key 0). Expected: masking (a row that must be
  empty is not).
- ``planted_attention_window_left_triton``: the window's left bound one key too wide
  (j >= p - left - 1). Trigger: window (0, -1), Tq = Tk = 2. Expected: accuracy.
- ``planted_attention_alibi_kv_head_triton``: under GQA the ALiBi slope of the kv head h // group,
  not of the query head h. Trigger: ALiBi, two query heads on one kv head, Tk >= 2. Expected:
  accuracy.
- ``planted_attention_softcap_unscaled_triton``: the soft cap as cap * tanh(s), not
  cap * tanh(s / cap). Trigger: a soft cap other than 1, two keys. Expected: accuracy.
- ``planted_attention_lse_no_max_triton``: the log-sum-exp stored as log(l), without the running
  max. Trigger: one query, one key, a logit other than 0. Expected: accuracy.
- ``planted_varlen_next_key_triton``: a packed sequence's key tiles load-masked against the last
  sequence's end, so it attends to the next sequence's first keys. Trigger: two sequences, the
  first of 1 key, no causal mask. Expected: accuracy.
- ``planted_decode_merge_no_rescale_triton``: the split-KV merge adds the splits' outputs and sums
  without rescaling each by exp(m_split - m). Trigger: 2 splits of different maxima. Expected:
  accuracy.
- ``planted_gla_h0_one_chunk_triton``: a sequence of one chunk (T <= chunk_size) starts from a
  zero state, dropping the initial state. Trigger: an initial state, T = 1. Expected: accuracy.
- ``planted_gla_prev_chunk_decay_triton`` (per-token gates only): the state carried into chunk
  c + 1 decayed by chunk c - 1's total gate. Trigger: two chunks and the final state. Expected:
  accuracy.

``PLANTED`` maps each planted target to its ``_planted_bugs.Pattern`` (family, bugs, what the CPU
campaigns found); ``CONTROLS`` the bug-free targets.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import fuzz


def _load_bugs():
    """``_planted_bugs.py`` beside this file (a plugin is loaded by path, not as a package)."""
    return fuzz.load_beside(__file__, "_planted_bugs.py", "kernel_fuzz_planted_bugs")


_bugs = _load_bugs()
PATTERNS = _bugs.PATTERNS

# Which bug a kernel plants (0: none). Kernels read them as constexpr ints.
NONE = tl.constexpr(0)
BIAS_ROW0 = tl.constexpr(1)
FROZEN_MAX = tl.constexpr(2)
TWO_BUGS = tl.constexpr(3)
READ_NEXT_SEGMENT = tl.constexpr(4)
CAUSAL_CLAMP = tl.constexpr(5)
WINDOW_LEFT = tl.constexpr(6)
ALIBI_KV_HEAD = tl.constexpr(7)
SOFTCAP_UNSCALED = tl.constexpr(8)
LSE_NO_MAX = tl.constexpr(9)
VARLEN_NEXT_KEY = tl.constexpr(10)
MERGE_NO_RESCALE = tl.constexpr(11)
H0_ONE_CHUNK = tl.constexpr(12)
PREV_CHUNK_DECAY = tl.constexpr(13)

BUG_IDS = {
    "softmax_bias_row0": BIAS_ROW0,
    "softmax_frozen_max": FROZEN_MAX,
    "two_bugs_softmax": TWO_BUGS,
    "jagged_read_next_segment": READ_NEXT_SEGMENT,
    "attention_causal_clamp": CAUSAL_CLAMP,
    "attention_window_left": WINDOW_LEFT,
    "attention_alibi_kv_head": ALIBI_KV_HEAD,
    "attention_softcap_unscaled": SOFTCAP_UNSCALED,
    "attention_lse_no_max": LSE_NO_MAX,
    "varlen_next_key": VARLEN_NEXT_KEY,
    "decode_merge_no_rescale": MERGE_NO_RESCALE,
    "gla_h0_one_chunk": H0_ONE_CHUNK,
    "gla_prev_chunk_decay": PREV_CHUNK_DECAY,
}


def _pow2(n: int, least: int = 16) -> int:
    return max(least, triton.next_power_of_2(max(int(n), 1)))


# Softmax ------------------------------------------------------------------------------------------
# One program per row: an online max and sum over BLOCK-column tiles, then a pass that writes.


@triton.jit
def _row_logits(
    x_ptr, bias_ptr, mask_ptr, row, cols, n_cols, stride_x, stride_b, stride_m, scale,
    HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr, BUG: tl.constexpr,
):  # fmt: skip
    inb = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=inb, other=float("-inf")).to(tl.float32)
    s = scale * x
    if HAS_BIAS:
        if BUG == BIAS_ROW0:  # planted: the bias read as one row broadcast to every row
            b = tl.load(bias_ptr + cols, mask=inb, other=0.0)
        else:
            b = tl.load(bias_ptr + row * stride_b + cols, mask=inb, other=0.0)
        s = s + b.to(tl.float32)
    if HAS_MASK:
        keep = tl.load(mask_ptr + row * stride_m + cols, mask=inb, other=0) != 0
        s = tl.where(keep, s, float("-inf"))
    return s


@triton.jit
def _softmax_kernel(
    x_ptr, bias_ptr, mask_ptr, y_ptr, n_cols, stride_x, stride_b, stride_m, stride_y, scale,
    HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr, BUG: tl.constexpr, OUT_F16: tl.constexpr,
    OUT_BF16: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    row = tl.program_id(0)
    m_run = float("-inf")
    l_run = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        s = _row_logits(
            x_ptr, bias_ptr, mask_ptr, row, cols, n_cols, stride_x, stride_b, stride_m, scale,
            HAS_BIAS, HAS_MASK, BUG,
        )  # fmt: skip
        if BUG == FROZEN_MAX:  # planted: the first tile's max, never updated
            m_new = tl.where(start == 0, tl.max(s, axis=0), m_run)
        else:
            m_new = tl.maximum(m_run, tl.max(s, axis=0))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # never exp(-inf - -inf)
        alpha = tl.where(m_run == float("-inf"), 0.0, tl.exp(m_run - shift))
        l_run = l_run * alpha + tl.sum(tl.exp(s - shift), axis=0)
        m_run = m_new
    shift = tl.where(m_run == float("-inf"), 0.0, m_run)
    inv_l = tl.where(l_run == 0.0, 0.0, 1.0 / tl.where(l_run == 0.0, 1.0, l_run))
    factor = 1.0
    if BUG == TWO_BUGS:  # planted: two independent wrong factors
        if OUT_F16:
            factor = 1.01
        if OUT_BF16:
            factor = tl.where((n_cols % 2 == 1) & (n_cols >= 3), 0.97, 1.0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        s = _row_logits(
            x_ptr, bias_ptr, mask_ptr, row, cols, n_cols, stride_x, stride_b, stride_m, scale,
            HAS_BIAS, HAS_MASK, BUG,
        )  # fmt: skip
        y = tl.exp(s - shift) * inv_l * factor
        tl.store(y_ptr + row * stride_y + cols, y, mask=cols < n_cols)


def softmax(x, *, mask=None, bias=None, scale=1.0, block_n=32, bug=NONE):
    """Row softmax of ``scale * x + bias`` over the last axis, masked keys removed; a row with
    no valid key gives zeros. ``x [R, C]``; output in x's dtype, statistics in fp32."""
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=torch.float32, device=x.device)
    b = bias if bias is not None else x
    m = mask.to(torch.int8) if mask is not None else x
    if rows and cols:
        _softmax_kernel[(rows,)](
            x, b, m, y, cols, x.stride(0), b.stride(0), m.stride(0), y.stride(0), float(scale),
            HAS_BIAS=bias is not None, HAS_MASK=mask is not None, BUG=bug,
            OUT_F16=x.dtype == torch.float16, OUT_BF16=x.dtype == torch.bfloat16, BLOCK=block_n,
        )  # fmt: skip
    return y.to(x.dtype)


def _softmax_kernel_of(bug):
    def kernel(x, *, mask, bias, scale, block_n):
        for name, t in (("x", x), ("mask", mask), ("bias", bias)):
            if t is not None and t.stride(-1) != 1:
                raise ValueError(f"{name} must have unit column stride, got {t.stride()}")
        return softmax(x, mask=mask, bias=bias, scale=scale, block_n=block_n, bug=bug)

    return kernel


SOFTMAX_CAPS = fuzz.Capabilities(features={"mask", "bias", "scale"}, tiles={"block_n": (16, 32)})


# Jagged softmax -----------------------------------------------------------------------------------
# One program per (segment, column block): an online max and sum over the segment's row tiles.


@triton.jit
def _jagged_kernel(
    v_ptr, offsets_ptr, y_ptr, n_rows, n_cols, stride_vn, stride_vm, stride_yn,
    BUG: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    seg = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    col_ok = cols[None, :] < n_cols
    start = tl.load(offsets_ptr + seg)
    end = tl.load(offsets_ptr + seg + 1)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    for row0 in range(start, end, BLOCK_N):
        rows = row0 + tl.arange(0, BLOCK_N)[:, None]
        if BUG == READ_NEXT_SEGMENT:  # planted: bounded by the whole array, not the segment
            ok = (rows < n_rows) & col_ok
        else:
            ok = (rows < end) & col_ok
        x = tl.load(
            v_ptr + rows * stride_vn + cols[None, :] * stride_vm, mask=ok, other=-float("inf")
        )
        x = x.to(tl.float32)
        m_new = tl.maximum(m_i, tl.max(x, 0))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        l_i = l_i * tl.exp(m_i - shift) + tl.sum(tl.exp(x - shift[None, :]), 0)
        m_i = m_new
    shift = tl.where(m_i == float("-inf"), 0.0, m_i)
    inv_l = tl.where(l_i == 0.0, 0.0, 1.0 / tl.where(l_i == 0.0, 1.0, l_i))
    for row0 in range(start, end, BLOCK_N):
        rows = row0 + tl.arange(0, BLOCK_N)[:, None]
        ok = (rows < end) & col_ok
        x = tl.load(
            v_ptr + rows * stride_vn + cols[None, :] * stride_vm, mask=ok, other=-float("inf")
        )
        y = tl.exp(x.to(tl.float32) - shift[None, :]) * inv_l[None, :]
        tl.store(y_ptr + rows * stride_yn + cols[None, :], y, mask=ok)


def jagged_softmax(values, *, offsets, block_n=4, block_m=4, bug=NONE):
    """Softmax over each segment's rows (``offsets [B + 1]``), per column; ``values [N, M]``."""
    n_rows, n_cols = values.shape
    y = torch.empty((n_rows, n_cols), dtype=torch.float32, device=values.device)
    n_seg = offsets.shape[0] - 1
    if n_seg > 0 and n_cols > 0:
        grid = (n_seg, triton.cdiv(n_cols, block_m))
        _jagged_kernel[grid](
            values, offsets, y, n_rows, n_cols, values.stride(0), values.stride(1), y.stride(0),
            BUG=bug, BLOCK_N=block_n, BLOCK_M=block_m,
        )  # fmt: skip
    return y.to(values.dtype)


def _jagged_kernel_of(bug):
    def kernel(values, *, offsets, block_n, block_m):
        return jagged_softmax(values, offsets=offsets, block_n=block_n, block_m=block_m, bug=bug)

    return kernel


JAGGED_CAPS = fuzz.Capabilities(tiles={"block_n": (4, 8), "block_m": (4,)})


# Attention ----------------------------------------------------------------------------------------
# Flash-attention forward, one program per (query tile, batch element or sequence, query head):
# an online softmax over key tiles; causal masks, windows and ALiBi distances measured from each
# query's key position p = i + Lk - Lq (bottom-right).


@triton.jit
def _tanh(x):
    """tanh in fp32 (neither tl nor the interpreter has one): a series near 0, else
    1 - 2 / (exp(2|x|) + 1)."""
    a = tl.abs(x)
    x2 = x * x
    series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (
        62.0 / 2835.0 + x2 * (-1382.0 / 155925.0 + x2 * (21844.0 / 6081075.0)))))))  # fmt: skip
    far = 1.0 - 2.0 / (tl.exp(2.0 * a) + 1.0)
    far = tl.where(x < 0, -far, far)
    return tl.where(a < 0.25, series, far)


@triton.jit
def _attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, key_len_ptr, slopes_ptr, cu_q_ptr, cu_k_ptr,
    Hq, Hkv, Tq, Tk, D, n_seqs, scale, softcap, w_left, w_right,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, KEY_PADDING: tl.constexpr, ALIBI: tl.constexpr,
    SOFTCAP: tl.constexpr, VARLEN: tl.constexpr, BUG: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    pid_q = tl.program_id(0)
    pid = tl.program_id(1)
    seq = pid // Hq
    h = pid % Hq
    hk = h // (Hq // Hkv)
    if VARLEN:
        b = 0
        q_start = tl.load(cu_q_ptr + seq)
        q_len = tl.load(cu_q_ptr + seq + 1) - q_start
        k_start = tl.load(cu_k_ptr + seq)
        k_len = tl.load(cu_k_ptr + seq + 1) - k_start
    else:
        b = seq
        q_start = 0
        q_len = Tq
        k_start = 0
        k_len = Tk
        if KEY_PADDING:
            k_len = tl.load(key_len_ptr + b)
    k_bound = k_len
    if VARLEN:
        if BUG == VARLEN_NEXT_KEY:  # planted: bounded by the end of the last sequence
            k_bound = tl.load(cu_k_ptr + n_seqs) - k_start
    offs_q = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    q_ok = offs_q < q_len
    d_ok = offs_d < D
    q_rows = (b * Hq + h) * Tq + q_start + offs_q
    q = tl.load(
        q_ptr + q_rows[:, None] * D + offs_d[None, :], mask=q_ok[:, None] & d_ok[None, :], other=0.0
    )
    q = q.to(tl.float32)
    offset = k_len - q_len
    if BUG == CAUSAL_CLAMP:  # planted: the bottom-right offset clamped at 0
        offset = tl.maximum(offset, 0)
    pos = offs_q + offset  # the key position of each query
    # Keys below the window's reach of the block's first query are seen by no query here: never
    # loaded (a NaN there times a zero probability would be NaN).
    extra = 0
    if BUG == WINDOW_LEFT:  # planted: one key too many on the left
        extra = 1
    seen_lo = 0
    if WINDOW:
        seen_lo = tl.where(w_left >= 0, pid_q * BLOCK_Q + offset - w_left - extra, 0)
    slope = 0.0
    if ALIBI:
        if BUG == ALIBI_KV_HEAD:  # planted: the kv head's slope
            slope = tl.load(slopes_ptr + hk)
        else:
            slope = tl.load(slopes_ptr + h)
    m_i = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_Q], tl.float32)
    acc = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)
    kv_base = (b * Hkv + hk) * Tk + k_start
    for start in range(0, k_len, BLOCK_K):
        offs_k = start + tl.arange(0, BLOCK_K)
        k_ok = (offs_k < k_bound) & (offs_k >= seen_lo)
        kv = (kv_base + offs_k)[:, None] * D + offs_d[None, :]
        kv_mask = k_ok[:, None] & d_ok[None, :]
        k = tl.load(k_ptr + kv, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + kv, mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        if SOFTCAP:
            if BUG == SOFTCAP_UNSCALED:  # planted: tanh of the logit, not of logit / cap
                s = softcap * _tanh(s)
            else:
                s = softcap * _tanh(s / softcap)
        if ALIBI:
            s = s - slope * tl.abs(pos[:, None] - offs_k[None, :]).to(tl.float32)
        keep = k_ok[None, :] & q_ok[:, None]
        if CAUSAL:
            keep = keep & (offs_k[None, :] <= pos[:, None])
        if WINDOW:
            if w_left >= 0:
                keep = keep & (offs_k[None, :] >= pos[:, None] - w_left - extra)
            if w_right >= 0:
                keep = keep & (offs_k[None, :] <= pos[:, None] + w_right)
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - shift)
        p = tl.exp(s - shift[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    live = l_i > 0.0
    o = acc / tl.where(live, l_i, 1.0)[:, None]
    if BUG == LSE_NO_MAX:  # planted: the running max left out
        lse = tl.where(live, tl.log(tl.where(live, l_i, 1.0)), float("-inf"))
    else:
        lse = tl.where(live, m_i + tl.log(tl.where(live, l_i, 1.0)), float("-inf"))
    tl.store(o_ptr + q_rows[:, None] * D + offs_d[None, :], o, mask=q_ok[:, None] & d_ok[None, :])
    tl.store(lse_ptr + q_rows, lse, mask=q_ok)


def attention(
    q, k, v, *, scale, causal=False, window=None, key_lengths=None, alibi_slopes=None,
    softcap=None, cu_seqlens_q=None, cu_seqlens_k=None, block_q=16, block_k=16, bug=NONE,
):  # fmt: skip
    """Attention of ``q [B, Hq, Tq, D]`` on ``k, v [B, Hkv, Tk, D]``: ``(o, lse)``, o in q's
    dtype, lse fp32 (``-inf`` and o = 0 for a query with no visible key). Packed sequences:
    ``cu_seqlens_q/k [N + 1]`` with ``B == 1``."""
    batch, hq, tq, d = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"q heads {hq} must be a multiple of kv heads {hkv}")
    q, k, v = (t.contiguous() for t in (q, k, v))
    o = torch.empty((batch, hq, tq, d), dtype=torch.float32, device=q.device)
    lse = torch.empty((batch, hq, tq), dtype=torch.float32, device=q.device)
    varlen = cu_seqlens_q is not None
    if varlen:
        n_seqs = cu_seqlens_q.shape[0] - 1
        lengths = (cu_seqlens_q[1:] - cu_seqlens_q[:-1]).tolist()
        longest, programs = max(lengths, default=0), n_seqs * hq
        o.zero_()  # rows of no sequence (none when cu_seqlens_q covers Tq)
        lse.fill_(float("-inf"))
    else:
        n_seqs, longest, programs = batch, tq, batch * hq
    dummy = torch.zeros(1, dtype=torch.int32, device=q.device)
    left, right = window if window is not None else (-1, -1)
    if longest and tk and programs:
        grid = (triton.cdiv(longest, block_q), programs)
        _attention_kernel[grid](
            q, k, v, o, lse,
            key_lengths if key_lengths is not None else dummy,
            alibi_slopes if alibi_slopes is not None else q,
            cu_seqlens_q if varlen else dummy, cu_seqlens_k if varlen else dummy,
            hq, hkv, tq, tk, d, n_seqs, float(scale), float(softcap or 1.0), int(left), int(right),
            CAUSAL=bool(causal), WINDOW=window is not None, KEY_PADDING=key_lengths is not None,
            ALIBI=alibi_slopes is not None, SOFTCAP=softcap is not None, VARLEN=varlen, BUG=bug,
            BLOCK_Q=block_q, BLOCK_K=block_k, BLOCK_D=_pow2(d),
        )  # fmt: skip
    elif not varlen:  # no keys (Tk = 0): every query sees none
        o.zero_()
        lse.fill_(float("-inf"))
    return o.to(q.dtype), lse


def _attention_kernel_of(bug, features):
    """The family's call (only the declared features' keywords) around :func:`attention`."""

    def kernel(q, k, v, *, scale, block_q, block_k, **kw):
        unknown = set(kw) - ATTENTION_KEYWORDS
        if unknown:
            raise TypeError(f"unexpected keyword(s) {sorted(unknown)}")
        return attention(q, k, v, scale=scale, block_q=block_q, block_k=block_k, bug=bug, **kw)

    kernel.__name__ = f"attention_{'_'.join(sorted(features))}"
    return kernel


ATTENTION_KEYWORDS = {
    "causal", "window", "key_lengths", "alibi_slopes", "softcap", "cu_seqlens_q", "cu_seqlens_k",
}  # fmt: skip
ATTENTION_TILES = {"block_q": (16, 32), "block_k": (16, 32)}
HEAD_DIMS = (1, 2, 3, 8, 16, 24, 32, 64)  # one BLOCK_D tile of up to 64 lanes
ATTENTION_FEATURES = {"causal", "window", "key_padding", "alibi", "softcap", "gqa", "scale"}
VARLEN_FEATURES = {"causal", "window", "alibi", "softcap", "gqa", "scale"}


def attention_caps(features):
    return fuzz.Capabilities(tiles=ATTENTION_TILES, head_dims=HEAD_DIMS, features=features)


# Split-KV decode ----------------------------------------------------------------------------------
# One program per (split, batch element, query head) reduces its part of the cache into (m, l, acc);
# a second kernel merges the splits through their maxima.


@triton.jit
def _decode_split_kernel(
    q_ptr, k_ptr, v_ptr, cache_len_ptr, m_ptr, l_ptr, acc_ptr, Hq, Hkv, Tmax, D, n_splits, scale,
    BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    split = tl.program_id(0)
    pid = tl.program_id(1)
    b = pid // Hq
    h = pid % Hq
    hk = h // (Hq // Hkv)
    length = tl.load(cache_len_ptr + b)
    per = (length + n_splits - 1) // n_splits
    per = (per + BLOCK_K - 1) // BLOCK_K * BLOCK_K  # whole key tiles per split
    lo = split * per
    hi = tl.minimum(lo + per, length)
    offs_d = tl.arange(0, BLOCK_D)
    d_ok = offs_d < D
    q = tl.load(q_ptr + pid * D + offs_d, mask=d_ok, other=0.0).to(tl.float32)
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros([BLOCK_D], tl.float32)
    for start in range(lo, hi, BLOCK_K):
        offs_k = start + tl.arange(0, BLOCK_K)
        k_ok = offs_k < hi
        kv = ((b * Hkv + hk) * Tmax + offs_k)[:, None] * D + offs_d[None, :]
        kv_mask = k_ok[:, None] & d_ok[None, :]
        k = tl.load(k_ptr + kv, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + kv, mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.sum(q[None, :] * k, 1) * scale
        s = tl.where(k_ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - shift)
        p = tl.exp(s - shift)
        l_i = l_i * alpha + tl.sum(p, 0)
        acc = acc * alpha + tl.sum(p[:, None] * v, 0)
        m_i = m_new
    slot = pid * n_splits + split
    tl.store(m_ptr + slot, m_i)
    tl.store(l_ptr + slot, l_i)
    tl.store(acc_ptr + slot * D + offs_d, acc, mask=d_ok)


@triton.jit
def _decode_merge_kernel(
    m_ptr, l_ptr, acc_ptr, o_ptr, lse_ptr, D, n_splits,
    BUG: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_ok = offs_s < n_splits
    d_ok = offs_d < D
    slots = pid * n_splits + offs_s
    m = tl.load(m_ptr + slots, mask=s_ok, other=float("-inf"))
    ell = tl.load(l_ptr + slots, mask=s_ok, other=0.0)
    acc = tl.load(
        acc_ptr + slots[:, None] * D + offs_d[None, :],
        mask=s_ok[:, None] & d_ok[None, :],
        other=0.0,
    )
    m_max = tl.max(m, 0)
    shift = tl.where(m_max == float("-inf"), 0.0, m_max)
    w = tl.where(m == float("-inf"), 0.0, tl.exp(m - shift))
    l_total = tl.sum(w * ell, 0)
    if BUG == MERGE_NO_RESCALE:  # planted: the splits added as they are
        w_o = tl.where(m == float("-inf"), 0.0, 1.0)
        o = tl.sum(w_o[:, None] * acc, 0) / tl.where(l_total > 0.0, tl.sum(w_o * ell, 0), 1.0)
    else:
        o = tl.sum(w[:, None] * acc, 0) / tl.where(l_total > 0.0, l_total, 1.0)
    live = l_total > 0.0
    lse = tl.where(live, m_max + tl.log(tl.where(live, l_total, 1.0)), float("-inf"))
    tl.store(o_ptr + pid * D + offs_d, o, mask=d_ok)
    tl.store(lse_ptr + pid, lse)


def decode(q, k, v, *, scale, cache_len, block_k=16, num_splits=1, bug=NONE):
    """One query per sequence (``q [B, Hq, 1, D]``) against a cache ``k, v [B, Hkv, Tmax, D]`` of
    ``cache_len [B]`` valid keys, in ``num_splits`` parts merged through their maxima."""
    batch, hq, _, d = q.shape
    hkv, tmax = k.shape[1], k.shape[2]
    q, k, v = (t.contiguous() for t in (q, k, v))
    rows = batch * hq
    m = torch.empty(rows * num_splits, dtype=torch.float32, device=q.device)
    ell = torch.empty_like(m)
    acc = torch.empty((rows * num_splits, d), dtype=torch.float32, device=q.device)
    o = torch.empty((batch, hq, 1, d), dtype=torch.float32, device=q.device)
    lse = torch.empty((batch, hq, 1), dtype=torch.float32, device=q.device)
    if rows:
        _decode_split_kernel[(num_splits, rows)](
            q, k, v, cache_len, m, ell, acc, hq, hkv, tmax, d, num_splits, float(scale),
            BLOCK_K=block_k, BLOCK_D=_pow2(d),
        )  # fmt: skip
        _decode_merge_kernel[(rows,)](
            m, ell, acc, o, lse, d, num_splits,
            BUG=bug, BLOCK_S=_pow2(num_splits, 2), BLOCK_D=_pow2(d),
        )  # fmt: skip
    return o.to(q.dtype), lse


def _decode_kernel_of(bug):
    def kernel(q, k, v, *, scale, cache_len, block_k, num_splits):
        return decode(
            q, k, v, scale=scale, cache_len=cache_len, block_k=block_k, num_splits=num_splits,
            bug=bug,
        )  # fmt: skip

    return kernel


DECODE_CAPS = fuzz.Capabilities(
    tiles={"block_k": (16, 32), "num_splits": (1, 2, 4)},
    head_dims=HEAD_DIMS,
    features={"gqa", "scale", "splits"},
)


# Chunked simple GLA forward -----------------------------------------------------------------------
# One program per (batch element, head): chunk by chunk, o = scale (q exp(b) h + (causal A) v) with
# b the gates' cumulative sum within the chunk, then h = exp(b_last) h + (k exp(b_last - b))^T v.


@triton.jit
def _gla_fwd_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, gamma_ptr, h0_ptr, o_ptr, ht_ptr, T, H, K, V, scale,
    PER_TOKEN: tl.constexpr, HAS_H0: tl.constexpr, BUG: tl.constexpr,
    C: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    b = pid // H
    h = pid % H
    offs_c = tl.arange(0, C)
    offs_k = tl.arange(0, BLOCK_K)
    offs_v = tl.arange(0, BLOCK_V)
    k_ok = offs_k < K
    v_ok = offs_v < V
    state = (b * H + h) * K * V
    hv = offs_k[:, None] * V + offs_v[None, :]
    hv_ok = k_ok[:, None] & v_ok[None, :]
    n_chunks = tl.cdiv(T, C)
    state_h = tl.zeros([BLOCK_K, BLOCK_V], tl.float32)
    if HAS_H0:
        state_h = tl.load(h0_ptr + state + hv, mask=hv_ok, other=0.0)
        if BUG == H0_ONE_CHUNK:  # planted: a one-chunk sequence starts from zeros
            state_h = tl.where(n_chunks == 1, 0.0, state_h)
    gamma = 0.0
    if not PER_TOKEN:
        gamma = tl.load(gamma_ptr + h)
    prev_last = 0.0
    for c in range(0, n_chunks):
        t = c * C + offs_c
        t_ok = t < T
        row = (b * T + t) * H + h
        q = tl.load(
            q_ptr + row[:, None] * K + offs_k[None, :],
            mask=t_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        k = tl.load(
            k_ptr + row[:, None] * K + offs_k[None, :],
            mask=t_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        v = tl.load(
            v_ptr + row[:, None] * V + offs_v[None, :],
            mask=t_ok[:, None] & v_ok[None, :],
            other=0.0,
        )
        q = q.to(tl.float32)
        k = k.to(tl.float32)
        v = v.to(tl.float32)
        if PER_TOKEN:
            gate = tl.load(g_ptr + row, mask=t_ok, other=0.0)
            bcum = tl.cumsum(gate, 0)
            last = tl.sum(gate, 0)
        else:
            bcum = gamma * (offs_c + 1).to(tl.float32)
            last = gamma * tl.minimum(T - c * C, C).to(tl.float32)
        inter = tl.dot(q * tl.exp(bcum)[:, None], state_h, input_precision="ieee")
        causal = (offs_c[:, None] >= offs_c[None, :]) & t_ok[None, :]
        decay = tl.exp(tl.where(causal, bcum[:, None] - bcum[None, :], 0.0))
        a = tl.where(causal, tl.dot(q, tl.trans(k), input_precision="ieee") * decay, 0.0)
        o = scale * (inter + tl.dot(a, v, input_precision="ieee"))
        tl.store(o_ptr + row[:, None] * V + offs_v[None, :], o, mask=t_ok[:, None] & v_ok[None, :])
        k_w = k * tl.exp(tl.where(t_ok, last - bcum, 0.0))[:, None]
        carry = last
        if BUG == PREV_CHUNK_DECAY:  # planted: the previous chunk's total gate
            carry = tl.where(c == 0, last, prev_last)
        state_h = tl.exp(carry) * state_h + tl.dot(tl.trans(k_w), v, input_precision="ieee")
        prev_last = last
    tl.store(ht_ptr + state + hv, state_h, mask=hv_ok)


def gla_forward(
    q, k, v, *, scale, g=None, g_gamma=None, initial_state=None, output_final_state=False,
    chunk_size=16, bug=NONE,
):  # fmt: skip
    """Chunked simple GLA: ``q, k [B, T, H, K]``, ``v [B, T, H, V]``, per-token log decays
    ``g [B, T, H]`` or per-head ``g_gamma [H]``, ``initial_state [B, H, K, V]``. Returns ``o``
    (q's dtype) and the final state ``ht [B, H, K, V]`` (fp32) or None."""
    batch, t_len, heads, kd = q.shape
    vd = v.shape[-1]
    if (g is None) == (g_gamma is None):
        raise ValueError("give exactly one of g (per token) and g_gamma (per head)")
    q, k, v = (x.contiguous() for x in (q, k, v))
    o = torch.empty((batch, t_len, heads, vd), dtype=torch.float32, device=q.device)
    ht = torch.empty((batch, heads, kd, vd), dtype=torch.float32, device=q.device)
    if initial_state is not None:
        initial_state = initial_state.float().contiguous()
    if batch * heads:
        _gla_fwd_kernel[(batch * heads,)](
            q, k, v, g.float().contiguous() if g is not None else q,
            g_gamma.float().contiguous() if g_gamma is not None else q,
            initial_state if initial_state is not None else q, o, ht,
            t_len, heads, kd, vd, float(scale),
            PER_TOKEN=g is not None, HAS_H0=initial_state is not None, BUG=bug,
            C=chunk_size, BLOCK_K=_pow2(kd), BLOCK_V=_pow2(vd),
        )  # fmt: skip
    return o.to(q.dtype), (ht if output_final_state else None)


def _gla_kernel_of(bug, per_token_only=False):
    if per_token_only:

        def kernel(q, k, v, *, g, scale, initial_state, output_final_state, chunk_size):
            return gla_forward(
                q, k, v, g=g, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state, chunk_size=chunk_size, bug=bug,
            )  # fmt: skip

        return kernel

    def kernel(q, k, v, *, g, g_gamma, scale, initial_state, output_final_state, chunk_size):
        return gla_forward(
            q, k, v, g=g, g_gamma=g_gamma, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state, chunk_size=chunk_size, bug=bug,
        )  # fmt: skip

    return kernel


GLA_FEATURES = {"g", "g_gamma", "initial_state", "final_state", "scale"}
GLA_TILES = {"chunk_size": (16, 32)}


def gla_caps(features=GLA_FEATURES):
    return fuzz.Capabilities(tiles=GLA_TILES, features=features)


# Registration -------------------------------------------------------------------------------------


def _kernel_and_caps(family: str, bug, per_token_only: bool = False) -> tuple:
    """The kernel function and capabilities of ``family``'s helper with ``bug`` planted."""
    if family == "softmax":
        return _softmax_kernel_of(bug), SOFTMAX_CAPS
    if family == "jagged_softmax":
        return _jagged_kernel_of(bug), JAGGED_CAPS
    if family == "attention":
        return _attention_kernel_of(bug, ATTENTION_FEATURES), attention_caps(ATTENTION_FEATURES)
    if family == "attention_varlen":
        return _attention_kernel_of(bug, VARLEN_FEATURES), attention_caps(VARLEN_FEATURES)
    if family == "attention_decode":
        return _decode_kernel_of(bug), DECODE_CAPS
    if per_token_only:
        return _gla_kernel_of(bug, per_token_only=True), gla_caps(GLA_FEATURES - {"g_gamma"})
    return _gla_kernel_of(bug), gla_caps()


def _register(name: str, family: str, bug, description: str, per_token_only: bool = False):
    kernel, caps = _kernel_and_caps(family, bug, per_token_only)
    # decode's "a decode step is the last row of a causal prefill" compares with the library's
    # prefill: the bug-free dense kernel
    siblings = {"attention": CONTROLS["control_attention_triton"]} if "decode" in family else None
    return fuzz.fuzz_kernel(
        name,
        family=family,
        kernel=kernel,
        capabilities=caps,
        siblings=siblings,
        description=description[:200],
    )


def target_name(pattern: str) -> str:
    if pattern == "two_bugs_softmax":
        return "planted_two_bugs_softmax"
    return f"planted_{pattern}_triton"


# The kernels with no bug planted: what a campaign finds on them is not a planted bug's.
CONTROLS = {}
for _family in (
    "attention", "softmax", "jagged_softmax", "attention_varlen", "attention_decode",
    "simple_gla_fwd",
):  # fmt: skip
    _name = f"control_{_family}_triton"
    CONTROLS[_name] = _register(
        _name, _family, NONE, f"the planted {_family} Triton kernel with no bug planted"
    )

PLANTED = {}
for _pattern, _record in PATTERNS.items():
    if "triton" in _record.not_in:
        continue
    _name = target_name(_pattern)
    _register(
        _name,
        _record.family,
        BUG_IDS[_pattern],
        f"planted ({_record.family}, Triton): {_record.bugs[0].what}",
        per_token_only=_pattern == "gla_prev_chunk_decay",  # a kernel of per-token gates only
    )
    PLANTED[_name] = _record
