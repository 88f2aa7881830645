"""Planted one-bug Triton kernels, round 6: kernels the harness was not tuned on, each with one
bug of a pattern that neither the earlier planted rounds (``planted.py``, ``planted_pallas.py``,
``planted3.py``, ``planted3_pallas.py``, ``planted4.py``, ``planted5.py``,
``planted5_pallas.py``), nor the project's mutants (``kernels/*/mutants.py``), nor the other
test plugins plant, registered through the public plugin API only (``fuzz.fuzz_kernel``). The
Pallas kernels of the round are in ``planted6_pallas.py``, the records of both in
``_planted6_bugs.py``; ``.ci/planted_rows.py --round 6`` measures how many report rows each bug
becomes.

Four kernels written as a user would (a row-block softmax, a jagged softmax, a flash-attention
forward for dense and packed batches whose causal key loop stops at the query tile's last
position, a chunked simple GLA forward), each with a ``BUG`` switch that plants exactly one bug;
each ``planted6_*`` target runs one of them, each ``control6_*`` target the same kernel with no
bug (what a campaign finds there is not a planted bug's). Each bug, its trigger (the smallest
input that shows it) and the failure class expected:

- ``planted6_softmax_max_of_unscaled_triton``: the row max is taken over the inputs ``x``
  instead of the logits ``scale * x + bias`` it shifts. A softmax does not depend on its shift,
  so this is exact in real arithmetic; but ``exp(s - max x)`` overflows (Inf / Inf = NaN) or
  underflows (a sum of 0, or a subnormal one whose reciprocal is Inf) once the logits stray 88.7
  from ``max x``. Trigger: scale 2 and one key of ``x = 100`` (``exp(200 - 100)`` overflows).
  Expected: nan (inf at ``x = -100``; accuracy or masking where a row's sum underflows to 0).
- ``planted6_jagged_shift_of_last_tile_triton``: the writing pass shifts by the last row tile's
  max (the loop's tile variable, read after the loop) instead of the running max the sums were
  taken with: right where each column's max lies in its segment's last tile. Trigger: one
  segment of block_n + 1 rows, one column, its max in the first tile. Expected: accuracy (inf
  where the last tile lies 88.7 below the max).
- ``planted6_attention_causal_tile_only_triton``: causal masking only as the key loop's bound
  (the key tiles after the query tile's last position are skipped), with no per-element mask on
  the tiles it visits: a query sees the later keys of its diagonal tile. Trigger: causal,
  Tq = 2 and Tk = 1 (query 0 sits before key 0 and must see no key; the bug shows it key 0).
  Expected: masking (accuracy where Tq <= Tk: Tq = Tk = 2, query 0 sees key 1).
- ``planted6_varlen_window_unbounded_left_triton``: packed sequences: a window's left side of
  -1 (unbounded) is not special-cased, so the bound ``j >= p - left`` becomes ``j >= p + 1``
  and every key up to the query's own position is hidden (the right side's -1 is handled).
  Trigger: a window (-1, -1), one sequence of one query and one key (o 0, lse -inf). Expected:
  accuracy (inf where the key's value is 0: only lse is wrong, -inf where finite).
- ``planted6_gla_ht_store_unmasked_v_triton``: the final state is stored with the key-row mask
  only, not the value-column one: with V below its power-of-two tile, the padded columns of the
  state's last row land past the head's state, in the next head's (rewritten when its program
  runs after it) and, for the last head, past the end of ``ht``. Trigger: V = 8 (a tile of 16),
  one head, one token. Expected: out-of-bounds-write.

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
    """``_planted6_bugs.py`` beside this file (a plugin is loaded by path, not as a package)."""
    return fuzz.load_beside(__file__, "_planted6_bugs.py", "kernel_fuzz_planted6_bugs")


PATTERNS = _load_bugs().PATTERNS

# Which bug a kernel plants (0: none). Kernels read them as constexpr ints.
NONE = tl.constexpr(0)
MAX_OF_UNSCALED = tl.constexpr(1)
SHIFT_OF_LAST_TILE = tl.constexpr(2)
CAUSAL_TILE_ONLY = tl.constexpr(3)
WINDOW_UNBOUNDED_LEFT = tl.constexpr(4)
HT_STORE_UNMASKED_V = tl.constexpr(5)

BUG_IDS = {
    "softmax_max_of_unscaled": MAX_OF_UNSCALED,
    "jagged_shift_of_last_tile": SHIFT_OF_LAST_TILE,
    "attention_causal_tile_only": CAUSAL_TILE_ONLY,
    "varlen_window_unbounded_left": WINDOW_UNBOUNDED_LEFT,
    "gla_ht_store_unmasked_v": HT_STORE_UNMASKED_V,
}

LOG2E = tl.constexpr(math.log2(math.e))
LN2 = tl.constexpr(math.log(2.0))


def _pow2(n: int, least: int = 16) -> int:
    return max(least, triton.next_power_of_2(max(int(n), 1)))


# Softmax ------------------------------------------------------------------------------------------
# One program per BLOCK_M rows: a pass over the column tiles for each row's running max and sum,
# then a pass that writes exp(s - max) / sum.


@triton.jit
def _softmax_tile(
    x_ptr, bias_ptr, mask_ptr, rows, cols, inb, sx, sb, sm, scale,
    HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr,
):  # fmt: skip
    """``(s, x)`` of a tile in fp32: the logits ``scale * x + bias`` and the inputs, each -inf
    outside the array and at masked keys."""
    x = tl.load(x_ptr + rows[:, None] * sx + cols[None, :], mask=inb, other=0.0).to(tl.float32)
    s = x * scale
    if HAS_BIAS:
        s += tl.load(bias_ptr + rows[:, None] * sb + cols[None, :], mask=inb, other=0.0).to(
            tl.float32
        )
    keep = inb
    if HAS_MASK:
        keep = keep & (
            tl.load(mask_ptr + rows[:, None] * sm + cols[None, :], mask=inb, other=0) != 0
        )
    return tl.where(keep, s, float("-inf")), tl.where(keep, x, float("-inf"))


@triton.jit
def _softmax_kernel(
    x_ptr, bias_ptr, mask_ptr, y_ptr, n_rows, n_cols, sx, sb, sm, sy, scale,
    HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr, BUG: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < n_rows
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    ell = tl.zeros([BLOCK_M], tl.float32)
    for c0 in range(0, n_cols, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        inb = row_ok[:, None] & (cols[None, :] < n_cols)
        s, x = _softmax_tile(
            x_ptr, bias_ptr, mask_ptr, rows, cols, inb, sx, sb, sm, scale, HAS_BIAS, HAS_MASK
        )
        if BUG == MAX_OF_UNSCALED:  # planted: the inputs' max, not the logits'
            m_new = tl.maximum(m, tl.max(x, 1))
        else:
            m_new = tl.maximum(m, tl.max(s, 1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        ell = ell * tl.exp(m - shift) + tl.sum(tl.exp(s - shift[:, None]), 1)
        m = m_new
    shift = tl.where(m == float("-inf"), 0.0, m)
    inv = tl.where(ell > 0.0, 1.0 / tl.where(ell > 0.0, ell, 1.0), 0.0)
    for c0 in range(0, n_cols, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        inb = row_ok[:, None] & (cols[None, :] < n_cols)
        s, x = _softmax_tile(
            x_ptr, bias_ptr, mask_ptr, rows, cols, inb, sx, sb, sm, scale, HAS_BIAS, HAS_MASK
        )
        y = tl.exp(s - shift[:, None]) * inv[:, None]
        tl.store(y_ptr + rows[:, None] * sy + cols[None, :], y, mask=inb)


def softmax(x, *, mask=None, bias=None, scale=1.0, block_m=2, block_n=16, bug=NONE):
    """Row softmax of ``scale * x + bias`` over ``x [R, C]``'s last axis, masked keys (``mask``
    False) removed; a row with no valid key gives zeros. Output in x's dtype, statistics fp32."""
    n_rows, n_cols = x.shape
    for name, t in (("x", x), ("mask", mask), ("bias", bias)):
        if t is not None and t.stride(-1) != 1:
            raise ValueError(f"{name} must have unit column stride, got {t.stride()}")
    y = torch.empty((n_rows, n_cols), dtype=torch.float32, device=x.device)
    b = bias if bias is not None else x
    m = mask.to(torch.int8) if mask is not None else x
    if n_rows and n_cols:
        _softmax_kernel[(triton.cdiv(n_rows, block_m),)](
            x, b, m, y, n_rows, n_cols, x.stride(0), b.stride(0), m.stride(0), y.stride(0),
            float(scale), HAS_BIAS=bias is not None, HAS_MASK=mask is not None, BUG=bug,
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
    features={"mask", "bias", "scale"}, tiles={"block_m": (2, 4), "block_n": (16, 32)}
)


# Jagged softmax -----------------------------------------------------------------------------------
# One program per (segment, column block): a pass over the segment's row tiles for each column's
# running max and sum, then a pass that writes. ``values`` may be any row-strided view.


@triton.jit
def _jagged_kernel(
    v_ptr, offsets_ptr, y_ptr, n_cols, stride_vn, stride_vm, stride_yn,
    BUG: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
):  # fmt: skip
    seg = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    col_ok = cols < n_cols
    start = tl.load(offsets_ptr + seg)
    end = tl.load(offsets_ptr + seg + 1)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    m_tile = tl.full([BLOCK_M], float("-inf"), tl.float32)
    ell = tl.zeros([BLOCK_M], tl.float32)
    for r0 in range(start, end, BLOCK_N):
        rows = r0 + tl.arange(0, BLOCK_N)
        ok = (rows[:, None] < end) & col_ok[None, :]
        x = tl.load(
            v_ptr + rows[:, None] * stride_vn + cols[None, :] * stride_vm, mask=ok,
            other=float("-inf"),
        ).to(tl.float32)  # fmt: skip
        m_tile = tl.max(x, 0)
        m_new = tl.maximum(m, m_tile)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        ell = ell * tl.exp(m - shift) + tl.sum(tl.exp(x - shift[None, :]), 0)
        m = m_new
    if BUG == SHIFT_OF_LAST_TILE:  # planted: the last tile's max, not the running one
        shift = tl.where(m_tile == float("-inf"), 0.0, m_tile)
    else:
        shift = tl.where(m == float("-inf"), 0.0, m)
    inv = tl.where(ell > 0.0, 1.0 / tl.where(ell > 0.0, ell, 1.0), 0.0)
    for r0 in range(start, end, BLOCK_N):
        rows = r0 + tl.arange(0, BLOCK_N)
        ok = (rows[:, None] < end) & col_ok[None, :]
        x = tl.load(
            v_ptr + rows[:, None] * stride_vn + cols[None, :] * stride_vm, mask=ok,
            other=float("-inf"),
        ).to(tl.float32)  # fmt: skip
        y = tl.exp(x - shift[None, :]) * inv[None, :]
        tl.store(y_ptr + rows[:, None] * stride_yn + cols[None, :], y, mask=ok)


def jagged_softmax(values, *, offsets, block_n=4, block_m=4, bug=NONE):
    """Softmax over each segment's rows (``offsets [B + 1]``: segment starts, then N), per column
    of ``values [N, M]``; output (contiguous) in values' dtype."""
    n_rows, n_cols = values.shape
    y = torch.empty((n_rows, n_cols), dtype=torch.float32, device=values.device)
    n_seg = offsets.shape[0] - 1
    if n_seg > 0 and n_cols > 0:
        _jagged_kernel[(n_seg, triton.cdiv(n_cols, block_m))](
            values, offsets, y, n_cols, values.stride(0), values.stride(1), y.stride(0),
            BUG=bug, BLOCK_N=block_n, BLOCK_M=block_m,
        )  # fmt: skip
    return y.to(values.dtype)


def _jagged_kernel_of(bug):
    def kernel(values, *, offsets, block_n, block_m):
        return jagged_softmax(values, offsets=offsets, block_n=block_n, block_m=block_m, bug=bug)

    return kernel


JAGGED_CAPS = fuzz.Capabilities(tiles={"block_n": (4, 8), "block_m": (4,)})


# Attention ----------------------------------------------------------------------------------------
# Flash-attention forward, one program per (query tile, batch element or packed sequence, query
# head): an online softmax over the key tiles in log2 units (exp2), the log-sum-exp turned back
# into natural units at the end. Each query's key position is p = i + Lk - Lq (bottom-right); the
# causal mask, the window [p - left, p + right] (a side of -1: unbounded) and the ALiBi distance
# |p - j| are measured from it. Causal: the key loop stops after the query tile's last position.


@triton.jit
def _attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, key_len_ptr, slopes_ptr, cu_q_ptr, cu_k_ptr,
    Hq, Hkv, Tq, Tk, D, scale, w_left, w_right,
    CAUSAL: tl.constexpr, WINDOW: tl.constexpr, KEY_PADDING: tl.constexpr,
    ALIBI: tl.constexpr, VARLEN: tl.constexpr, BUG: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    pid_q = tl.program_id(0)
    seq = tl.program_id(1) // Hq
    h = tl.program_id(1) % Hq
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
    offset = k_len - q_len
    offs_q = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    q_ok = offs_q < q_len
    d_ok = offs_d < D
    q_rows = (b * Hq + h) * Tq + q_start + offs_q
    q = tl.load(
        q_ptr + q_rows[:, None] * D + offs_d[None, :], mask=q_ok[:, None] & d_ok[None, :], other=0.0
    ).to(tl.float32)
    pos = offs_q + offset
    qk_scale = scale * LOG2E  # logits in log2 units
    slope = 0.0
    if ALIBI:
        slope = tl.load(slopes_ptr + h) * LOG2E
    hi = k_len
    if CAUSAL:  # no key after the tile's last position is visible to the tile
        hi = tl.minimum(hi, (pid_q + 1) * BLOCK_Q + offset)
    m = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    ell = tl.zeros([BLOCK_Q], tl.float32)
    acc = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)
    kv_base = (b * Hkv + hk) * Tk + k_start
    for k0 in range(0, hi, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_ok = offs_k < k_len
        kv = (kv_base + offs_k)[:, None] * D + offs_d[None, :]
        kv_mask = k_ok[:, None] & d_ok[None, :]
        k = tl.load(k_ptr + kv, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + kv, mask=kv_mask, other=0.0).to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        if ALIBI:
            s = s - slope * tl.abs(pos[:, None] - offs_k[None, :]).to(tl.float32)
        keep = q_ok[:, None] & k_ok[None, :]
        if CAUSAL:
            if BUG != CAUSAL_TILE_ONLY:  # planted (when it is): the loop bound alone
                keep = keep & (offs_k[None, :] <= pos[:, None])
        if WINDOW:
            # both sides without a runtime branch (a side of -1 is unbounded)
            if BUG == WINDOW_UNBOUNDED_LEFT:  # planted: -1 taken as a distance
                keep = keep & (offs_k[None, :] >= pos[:, None] - w_left)
            else:
                keep = keep & ((offs_k[None, :] >= pos[:, None] - w_left) | (w_left < 0))
            keep = keep & ((offs_k[None, :] <= pos[:, None] + w_right) | (w_right < 0))
        s = tl.where(keep, s, float("-inf"))
        # a key no query of the tile sees adds nothing, not 0 * its value (a NaN there)
        seen = tl.max(keep.to(tl.int32), 0) > 0
        v = tl.where(seen[:, None], v, 0.0)
        m_new = tl.maximum(m, tl.max(s, 1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m - shift)
        p = tl.exp2(s - shift[:, None])
        ell = ell * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m = m_new
    live = ell > 0.0
    o = acc / tl.where(live, ell, 1.0)[:, None]
    lse = tl.where(live, (m + tl.log2(tl.where(live, ell, 1.0))) * LN2, float("-inf"))
    tl.store(o_ptr + q_rows[:, None] * D + offs_d[None, :], o, mask=q_ok[:, None] & d_ok[None, :])
    tl.store(lse_ptr + q_rows, lse, mask=q_ok)


def attention(
    q, k, v, *, scale, causal=False, window=None, key_lengths=None, alibi_slopes=None,
    cu_seqlens_q=None, cu_seqlens_k=None, block_q=16, block_k=16, bug=NONE,
):  # fmt: skip
    """Attention of ``q [B, Hq, Tq, D]`` on ``k, v [B, Hkv, Tk, D]``: ``(o, lse)``, o in q's
    dtype, lse fp32 natural (a query with no visible key: o = 0, lse = -inf). Packed sequences:
    ``cu_seqlens_q/k [N + 1]`` with ``B == 1`` (keys may have rows after the last sequence)."""
    batch, hq, tq, d = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"q heads {hq} must be a multiple of kv heads {hkv}")
    q, k, v = (t.contiguous() for t in (q, k, v))
    o = torch.zeros((batch, hq, tq, d), dtype=torch.float32, device=q.device)
    lse = torch.full((batch, hq, tq), float("-inf"), dtype=torch.float32, device=q.device)
    varlen = cu_seqlens_q is not None
    if varlen:
        n_seqs = cu_seqlens_q.shape[0] - 1
        longest = int((cu_seqlens_q[1:] - cu_seqlens_q[:-1]).max()) if n_seqs else 0
    else:
        n_seqs, longest = batch, tq
    dummy = torch.zeros(1, dtype=torch.int32, device=q.device)
    left, right = window if window is not None else (-1, -1)
    if longest and tk and n_seqs * hq:
        _attention_kernel[(triton.cdiv(longest, block_q), n_seqs * hq)](
            q, k, v, o, lse,
            key_lengths if key_lengths is not None else dummy,
            alibi_slopes if alibi_slopes is not None else q,
            cu_seqlens_q if varlen else dummy, cu_seqlens_k if varlen else dummy,
            hq, hkv, tq, tk, d, float(scale), int(left), int(right),
            CAUSAL=bool(causal), WINDOW=window is not None, KEY_PADDING=key_lengths is not None,
            ALIBI=alibi_slopes is not None, VARLEN=varlen, BUG=bug,
            BLOCK_Q=block_q, BLOCK_K=block_k, BLOCK_D=_pow2(d),
        )  # fmt: skip
    return o.to(q.dtype), lse


ATTENTION_KEYWORDS = {
    "causal", "window", "key_lengths", "alibi_slopes", "cu_seqlens_q", "cu_seqlens_k",
}  # fmt: skip


def _attention_kernel_of(bug, features):
    """The family's call (only the declared features' keywords) around :func:`attention`."""

    def kernel(q, k, v, *, scale, block_q, block_k, **kw):
        unknown = set(kw) - ATTENTION_KEYWORDS
        if unknown:
            raise TypeError(f"unexpected keyword(s) {sorted(unknown)}")
        return attention(q, k, v, scale=scale, block_q=block_q, block_k=block_k, bug=bug, **kw)

    kernel.__name__ = f"attention_{'_'.join(sorted(features))}"
    return kernel


HEAD_DIMS = (1, 2, 3, 8, 16, 32)  # one BLOCK_D tile of up to 32 lanes
ATTENTION_FEATURES = {"causal", "window", "key_padding", "alibi", "gqa", "scale"}
VARLEN_FEATURES = {"causal", "window", "alibi", "gqa", "scale"}


def attention_caps(features):
    return fuzz.Capabilities(
        tiles={"block_q": (16, 32), "block_k": (16, 32)}, head_dims=HEAD_DIMS, features=features
    )


# Chunked simple GLA forward -----------------------------------------------------------------------
# One program per (batch element, head), chunk by chunk, with b the gates' running sum inside the
# chunk: o = scale * ((q exp(b)) h + (causal(q k^T) * exp(b_i - b_j)) v), then the state
# h = exp(b_last) h + (k exp(b_last - b))^T v. States are [K, V], row-major, in power-of-two
# tiles [BLOCK_K, BLOCK_V] masked to [K, V].


@triton.jit
def _gla_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, gamma_ptr, h0_ptr, o_ptr, ht_ptr, T, H, K, V, scale,
    PER_TOKEN: tl.constexpr, HAS_H0: tl.constexpr, BUG: tl.constexpr,
    C: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(0) // H
    h = tl.program_id(0) % H
    offs_c = tl.arange(0, C)
    offs_k = tl.arange(0, BLOCK_K)
    offs_v = tl.arange(0, BLOCK_V)
    kv_ok = (offs_k[:, None] < K) & (offs_v[None, :] < V)
    head = (b * H + h) * K * V
    state_at = head + offs_k[:, None] * V + offs_v[None, :]
    state = tl.zeros([BLOCK_K, BLOCK_V], tl.float32)
    if HAS_H0:
        state = tl.load(h0_ptr + state_at, mask=kv_ok, other=0.0)
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
    if BUG == HT_STORE_UNMASKED_V:  # planted: the key rows masked, the value columns not
        tl.store(ht_ptr + state_at, state, mask=offs_k[:, None] < K)
    else:
        tl.store(ht_ptr + state_at, state, mask=kv_ok)


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
            PER_TOKEN=g is not None, HAS_H0=h0 is not None, BUG=bug,
            C=chunk_size, BLOCK_K=_pow2(kd), BLOCK_V=_pow2(vd),
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
        return _attention_kernel_of(bug, ATTENTION_FEATURES), attention_caps(ATTENTION_FEATURES)
    if family == "attention_varlen":
        return _attention_kernel_of(bug, VARLEN_FEATURES), attention_caps(VARLEN_FEATURES)
    if family == "simple_gla_fwd":
        return _gla_kernel_of(bug), GLA_CAPS
    raise ValueError(f"no round-6 Triton kernel of family {family!r}")


def _register(name: str, family: str, bug, description: str):
    kernel, caps = _kernel_and_caps(family, bug)
    return fuzz.fuzz_kernel(
        name, family=family, kernel=kernel, capabilities=caps, description=description[:200]
    )


def target_name(pattern: str) -> str:
    return f"planted6_{pattern}_triton"


FAMILIES = ("softmax", "jagged_softmax", "attention", "attention_varlen", "simple_gla_fwd")

# The kernels with no bug planted: what a campaign finds on them is not a planted bug's.
CONTROLS = {}
for _family in FAMILIES:
    _name = f"control6_{_family}_triton"
    CONTROLS[_name] = _register(
        _name, _family, NONE, f"the round-6 {_family} Triton kernel with no bug planted"
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
