"""Planted one-bug Pallas kernels (``interpret=True`` on the CPU), registered through the public
plugin API only: the twins of ``tests/plugins/planted.py``'s Triton kernels, the same bug
patterns (``_planted_bugs.py``) written the way a Pallas user writes them.

One correct kernel per family with a ``bug`` switch (a static argument: each bug is its own
compiled program); each ``planted_*`` target plants one bug (the two-bug softmax two), and
``control_*_pallas`` targets none. The wrappers pad every array on the host (NumPy) to
power-of-two buckets and pass the true lengths as data, so that one compiled program serves many
lengths (Pallas interpret mode compiles an XLA program per shape); kernels mask the padding with
iotas against those lengths. Each bug, its trigger and the failure class expected:

- ``planted_softmax_bias_row0_pallas``: every row gets row 0's bias (the bias's block spec maps
  every row block to row 0, as for a [1, C] bias). Trigger: a bias of two rows that differ.
  Expected: accuracy.
- ``planted_softmax_frozen_max_pallas``: the online max taken from the first column tile and never
  updated, so exp overflows once a later logit is 88.7 above it. Trigger: a row of two tiles whose
  first tile is masked (or far below) and a later logit > 88.7. Expected: nan.
- ``planted_two_bugs_softmax_pallas``: two bugs: float16 outputs times 1.01 (trigger: any float16
  row), and bfloat16 rows of odd length >= 3 times 0.97 (trigger: one bfloat16 row of 3). Expected:
  accuracy, twice.
- ``planted_jagged_read_next_segment_pallas``: row tiles load-masked against the total row count
  instead of the segment's end, so a segment takes the next one's first rows into its max and sum.
  Trigger: a segment of 1 row (block_n 4) followed by a non-empty one. Expected: masking (a
  one-row segment's output is fixed at 1; longer segments: accuracy).
- ``planted_attention_causal_clamp_pallas``: the bottom-right offset Tk - Tq (the queries' key
  positions, for the causal mask, the window and ALiBi) clamped at 0: top-left when Tq > Tk.
  Trigger: causal, Tq = 2, Tk = 1 (query 0 sees key 0). Expected: masking (a row that must be
  empty is not).
- ``planted_attention_window_left_pallas``: the window's left bound one key too wide
  (j >= p - left - 1). Trigger: window (0, -1), Tq = Tk = 2. Expected: accuracy.
- ``planted_attention_alibi_kv_head_pallas``: under GQA the ALiBi slope of the kv head h // group,
  not of the query head h. Trigger: ALiBi, two query heads on one kv head, Tk >= 2. Expected:
  accuracy.
- ``planted_attention_softcap_unscaled_pallas``: the soft cap as cap * tanh(s), not
  cap * tanh(s / cap). Trigger: a soft cap other than 1, two keys. Expected: accuracy.
- ``planted_attention_lse_no_max_pallas``: the log-sum-exp stored as log(l), without the running
  max. Trigger: one query, one key, a logit other than 0. Expected: accuracy.
- ``planted_varlen_next_key_pallas``: a packed sequence's key tiles load-masked against the last
  sequence's end, so it attends to the next sequence's first keys. Trigger: two sequences, the
  first of 1 key, no causal mask. Expected: accuracy.
- ``planted_decode_merge_no_rescale_pallas``: the split-KV merge adds the splits' outputs and sums
  without rescaling each by exp(m_split - m). Trigger: 2 splits of different maxima. Expected:
  accuracy.
- ``planted_gla_h0_one_chunk_pallas``: a sequence of one chunk (T <= chunk_size) starts from a
  zero state, dropping the initial state. Trigger: an initial state, T = 1. Expected: accuracy.
- ``planted_gla_prev_chunk_decay_pallas`` (per-token gates only): the state carried into chunk
  c + 1 decayed by chunk c - 1's total gate. Trigger: two chunks and the final state. Expected:
  accuracy.

``PLANTED`` maps each planted target to its ``_planted_bugs.Pattern``; ``CONTROLS`` the bug-free
targets.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import fuzz


def _load_bugs():
    """``_planted_bugs.py`` beside this file (a plugin is loaded by path, not as a package)."""
    return fuzz.load_beside(__file__, "_planted_bugs.py", "kernel_fuzz_planted_bugs")


PATTERNS = _load_bugs().PATTERNS
F32 = jnp.float32
NEG_INF = -jnp.inf


def _bucket(n: int, start: int) -> int:
    """``start * 2**k``, the smallest that holds ``n``."""
    size = start
    while size < n:
        size *= 2
    return size


def _pad(a: np.ndarray, shape: tuple[int, ...], value=0) -> np.ndarray:
    widths = [(0, s - n) for s, n in zip(shape, a.shape, strict=True)]
    return np.pad(a, widths, constant_values=value) if any(w for _, w in widths) else a


def _whole(shape: tuple[int, ...]) -> pl.BlockSpec:
    """The whole array as the block of every program."""
    return pl.BlockSpec(shape, lambda *_: (0,) * len(shape))


def _host(x) -> np.ndarray:
    return np.asarray(x)


def _device(a: np.ndarray) -> jax.Array:
    """A host array as a JAX array. Outputs are cut back to their lengths on the host: a jnp
    slice compiles an XLA program per exact shape, where the kernel compiles once per bucket."""
    return jax.device_put(np.ascontiguousarray(a))


def _iota(shape, axis):
    return jax.lax.broadcasted_iota(jnp.int32, shape, axis)


# Softmax ------------------------------------------------------------------------------------------
# Row blocks of ROWS rows; an online max and sum over block_n-column tiles, then a writing pass.

ROWS = 8


def _softmax_kernel(ints_ref, scale_ref, x_ref, mask_ref, bias_ref, y_ref, *, block_n, bug):
    n_cols = ints_ref[0]
    scale = scale_ref[0]
    n_tiles = (n_cols + block_n - 1) // block_n

    def logits(j):
        cols = pl.ds(j * block_n, block_n)
        s = x_ref[:, cols].astype(F32) * scale + bias_ref[:, cols]  # bias [ROWS or 1, block_n]
        col = j * block_n + _iota(s.shape, 1)
        s = jnp.where(col < n_cols, s, NEG_INF)
        return jnp.where(mask_ref[:, cols] != 0, s, NEG_INF)

    def stats(j, carry):
        m_run, l_run = carry
        s = logits(j)
        if bug == "softmax_frozen_max":  # planted: the first tile's max, never updated
            m_new = jnp.where(j == 0, s.max(axis=1), m_run)
        else:
            m_new = jnp.maximum(m_run, s.max(axis=1))
        shift = jnp.where(m_new == NEG_INF, 0.0, m_new)  # never exp(-inf - -inf)
        alpha = jnp.where(m_run == NEG_INF, 0.0, jnp.exp(m_run - shift))
        return m_new, l_run * alpha + jnp.exp(s - shift[:, None]).sum(axis=1)

    rows = x_ref.shape[0]
    init = (jnp.full((rows,), NEG_INF, F32), jnp.zeros((rows,), F32))
    m_run, l_run = jax.lax.fori_loop(0, n_tiles, stats, init)
    shift = jnp.where(m_run == NEG_INF, 0.0, m_run)
    inv_l = jnp.where(l_run == 0.0, 0.0, 1.0 / jnp.where(l_run == 0.0, 1.0, l_run))
    factor = jnp.float32(1.0)
    if bug == "two_bugs_softmax":  # planted: two independent wrong factors
        if y_ref.dtype == jnp.float16:
            factor = jnp.float32(1.01)
        if y_ref.dtype == jnp.bfloat16:
            factor = jnp.where((n_cols % 2 == 1) & (n_cols >= 3), 0.97, 1.0).astype(F32)

    def write(j, carry):
        y = jnp.exp(logits(j) - shift[:, None]) * (inv_l * factor)[:, None]
        y_ref[:, pl.ds(j * block_n, block_n)] = y.astype(y_ref.dtype)
        return carry

    jax.lax.fori_loop(0, n_tiles, write, 0)


@functools.partial(jax.jit, static_argnames=("block_n", "bug", "interpret"))
def _softmax_call(ints, scale, x, mask, bias, *, block_n, bug, interpret):
    rows, cols = x.shape
    row_block = pl.BlockSpec((ROWS, cols), lambda i: (i, 0))
    if bug == "softmax_bias_row0":  # planted: the bias's block is row 0's, for every row block
        bias_spec = pl.BlockSpec((1, cols), lambda i: (0, 0))
    else:
        bias_spec = row_block
    return pl.pallas_call(
        functools.partial(_softmax_kernel, block_n=block_n, bug=bug),
        grid=(rows // ROWS,),
        in_specs=[_whole((1,)), _whole((1,)), row_block, row_block, bias_spec],
        out_specs=row_block,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=interpret,
    )(ints, scale, x, mask, bias)


def softmax(x, *, mask=None, bias=None, scale=1.0, block_n=32, bug="", interpret=True):
    """Row softmax of ``scale * x + bias``, masked keys removed (a row with no valid key gives
    zeros); ``x [R, C]``, output in x's dtype, statistics in fp32."""
    rows, cols = x.shape
    if not rows or not cols:
        return x
    shape = (_bucket(rows, ROWS), _bucket(cols, block_n))
    xp = _pad(_host(x), shape)
    mp = _pad(
        np.ones((rows, cols), np.int8) if mask is None else _host(mask).astype(np.int8), shape
    )
    bp = _pad(
        np.zeros((rows, cols), np.float32) if bias is None else _host(bias).astype(np.float32),
        shape,
    )
    ints = np.array([cols], np.int32)
    y = _softmax_call(
        ints, np.array([scale], np.float32), xp, mp, bp, block_n=block_n, bug=bug,
        interpret=interpret,
    )  # fmt: skip
    return _device(_host(y)[:rows, :cols])


def _softmax_kernel_of(bug):
    def kernel(x, *, mask, bias, scale, block_n, interpret):
        return softmax(
            x, mask=mask, bias=bias, scale=scale, block_n=block_n, bug=bug, interpret=interpret
        )

    return kernel


SOFTMAX_CAPS = fuzz.Capabilities(features={"mask", "bias", "scale"}, tiles={"block_n": (16, 32)})


# Jagged softmax -----------------------------------------------------------------------------------
# One program per column block walks the segments in order: an online max and sum over each
# segment's row tiles, then a pass that writes its rows (a masked read-modify-write of the tile).


def _jagged_kernel(ints_ref, offsets_ref, v_ref, y_ref, *, block_n, bug):
    n_rows, n_segments = ints_ref[0], ints_ref[1]
    block_m = v_ref.shape[1]

    def segment(seg, carry):
        start, end = offsets_ref[seg], offsets_ref[seg + 1]
        n_tiles = (end - start + block_n - 1) // block_n

        def tile(j):
            row0 = start + j * block_n
            rows = row0 + _iota((block_n, block_m), 0)
            return row0, rows, v_ref[pl.ds(row0, block_n), :].astype(F32)

        def stats(j, mc):
            m_i, l_i = mc
            _, rows, x = tile(j)
            if bug == "jagged_read_next_segment":  # planted: bounded by N, not the segment
                x = jnp.where(rows < n_rows, x, NEG_INF)
            else:
                x = jnp.where(rows < end, x, NEG_INF)
            m_new = jnp.maximum(m_i, x.max(axis=0))
            shift = jnp.where(m_new == NEG_INF, 0.0, m_new)
            return m_new, l_i * jnp.exp(m_i - shift) + jnp.exp(x - shift[None, :]).sum(axis=0)

        init = (jnp.full((block_m,), NEG_INF, F32), jnp.zeros((block_m,), F32))
        m_i, l_i = jax.lax.fori_loop(0, n_tiles, stats, init)
        shift = jnp.where(m_i == NEG_INF, 0.0, m_i)
        inv_l = jnp.where(l_i == 0.0, 0.0, 1.0 / jnp.where(l_i == 0.0, 1.0, l_i))

        def write(j, c):
            row0, rows, x = tile(j)
            y = (jnp.exp(x - shift[None, :]) * inv_l[None, :]).astype(y_ref.dtype)
            old = y_ref[pl.ds(row0, block_n), :]
            y_ref[pl.ds(row0, block_n), :] = jnp.where(rows < end, y, old)
            return c

        jax.lax.fori_loop(0, n_tiles, write, 0)
        return carry

    jax.lax.fori_loop(0, n_segments, segment, 0)


@functools.partial(jax.jit, static_argnames=("block_n", "block_m", "bug", "interpret"))
def _jagged_call(ints, offsets, values, *, block_n, block_m, bug, interpret):
    rows, cols = values.shape
    col_block = pl.BlockSpec((rows, block_m), lambda i: (0, i))
    return pl.pallas_call(
        functools.partial(_jagged_kernel, block_n=block_n, bug=bug),
        grid=(cols // block_m,),
        in_specs=[_whole(ints.shape), _whole(offsets.shape), col_block],
        out_specs=col_block,
        out_shape=jax.ShapeDtypeStruct(values.shape, values.dtype),
        interpret=interpret,
    )(ints, offsets, values)


def jagged_softmax(values, *, offsets, block_n=4, block_m=4, bug="", interpret=True):
    """Softmax over each segment's rows (``offsets [B + 1]``), per column; ``values [N, M]``."""
    n_rows, n_cols = values.shape
    offs = _host(offsets).astype(np.int32)
    n_seg = offs.shape[0] - 1
    if n_seg <= 0 or not n_rows or not n_cols:
        return values
    # Rows: a bucket, and a tile more so that a segment's last tile never reads past the array.
    shape = (_bucket(n_rows, 16) + block_n, _bucket(n_cols, block_m))
    vp = _pad(_host(values), shape)
    offs_p = _pad(offs, (_bucket(n_seg + 1, 4),), value=int(offs[-1]))
    ints = np.array([n_rows, n_seg], np.int32)
    y = _jagged_call(
        ints, offs_p, vp, block_n=block_n, block_m=block_m, bug=bug, interpret=interpret
    )
    return _device(_host(y)[:n_rows, :n_cols])


def _jagged_kernel_of(bug):
    def kernel(values, *, offsets, block_n, block_m, interpret):
        return jagged_softmax(
            values, offsets=offsets, block_n=block_n, block_m=block_m, bug=bug,
            interpret=interpret,
        )  # fmt: skip

    return kernel


JAGGED_CAPS = fuzz.Capabilities(tiles={"block_n": (4, 8), "block_m": (4,)})


# Attention ----------------------------------------------------------------------------------------
# One program per (query tile, sequence, query head): an online softmax over key tiles. A dense
# batch element is a sequence whose queries and keys start at row 0 of its own batch row; packed
# sequences start at their offsets in a batch of one. Options are data, not compile-time
# choices: INTS holds the flags and sizes, FLOATS the scale and the soft cap, SEQS per sequence
# the query start and length and the key start and length.

I_CAUSAL, I_WINDOW, I_LEFT, I_RIGHT, I_ALIBI, I_SOFTCAP, I_HQ, I_HKV, I_KEY_END = range(9)


def _tanh(x):
    """tanh in fp32 (as the Triton twin computes it): a series near 0, else
    1 - 2 / (exp(2|x|) + 1)."""
    a = jnp.abs(x)
    x2 = x * x
    series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (
        62.0 / 2835.0 + x2 * (-1382.0 / 155925.0 + x2 * (21844.0 / 6081075.0)))))))  # fmt: skip
    far = 1.0 - 2.0 / (jnp.exp(2.0 * a) + 1.0)
    return jnp.where(a < 0.25, series, jnp.where(x < 0, -far, far))


def _dot(a, b):
    return jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST, preferred_element_type=F32)


def _attention_kernel(
    ints_ref, floats_ref, seqs_ref, slopes_ref, q_ref, k_ref, v_ref, o_ref, lse_ref, *,
    block_q, block_k, bug,
):  # fmt: skip
    iq, pid = pl.program_id(0), pl.program_id(1)
    hq, hkv = ints_ref[I_HQ], ints_ref[I_HKV]
    seq, h = pid // hq, pid % hq
    hk = h // (hq // hkv)
    b = jnp.where(q_ref.shape[0] == 1, 0, seq)
    q_start, q_len = seqs_ref[0, seq], seqs_ref[1, seq]
    k_start, k_len = seqs_ref[2, seq], seqs_ref[3, seq]
    k_bound = k_len
    if bug == "varlen_next_key":  # planted: bounded by the end of the last sequence
        k_bound = ints_ref[I_KEY_END] - k_start
    scale, softcap = floats_ref[0], floats_ref[1]
    q = q_ref[b, h, pl.ds(q_start + iq * block_q, block_q), :].astype(F32)
    offs_q = iq * block_q + _iota((block_q, block_k), 0)
    offset = k_len - q_len
    if bug == "attention_causal_clamp":  # planted: the bottom-right offset clamped at 0
        offset = jnp.maximum(offset, 0)
    pos = offs_q + offset  # the key position of each query
    if bug == "attention_alibi_kv_head":  # planted: the kv head's slope
        slope = slopes_ref[hk]
    else:
        slope = slopes_ref[h]
    left, right = ints_ref[I_LEFT], ints_ref[I_RIGHT]
    lowest = pos - left
    if bug == "attention_window_left":  # planted: one key too many on the left
        lowest = pos - left - 1
    causal, window = ints_ref[I_CAUSAL] != 0, ints_ref[I_WINDOW] != 0
    # Keys below the window's reach of the block's first query are seen by no query here: never
    # read (a NaN there times a zero probability would be NaN).
    seen_lo = jnp.where(window & (left >= 0), lowest[0, 0], 0)

    def step(j, carry):
        m_i, l_i, acc = carry
        k0 = k_start + j * block_k
        offs_k = j * block_k + _iota((block_q, block_k), 1)
        k_ok = (offs_k < k_bound) & (offs_k >= seen_lo)
        key = j * block_k + _iota((block_k, 1), 0)
        rows_ok = (key < k_bound) & (key >= seen_lo)
        k = jnp.where(rows_ok, k_ref[b, hk, pl.ds(k0, block_k), :].astype(F32), 0.0)
        v = jnp.where(rows_ok, v_ref[b, hk, pl.ds(k0, block_k), :].astype(F32), 0.0)
        s = _dot(q, k.T) * scale
        if bug == "attention_softcap_unscaled":  # planted: tanh of the logit, not logit / cap
            capped = softcap * _tanh(s)
        else:
            capped = softcap * _tanh(s / softcap)
        s = jnp.where(ints_ref[I_SOFTCAP] != 0, capped, s)
        s = jnp.where(ints_ref[I_ALIBI] != 0, s - slope * jnp.abs(pos - offs_k).astype(F32), s)
        keep = k_ok & (offs_q < q_len)
        keep &= ~causal | (offs_k <= pos)
        keep &= ~window | (left < 0) | (offs_k >= lowest)
        keep &= ~window | (right < 0) | (offs_k <= pos + right)
        s = jnp.where(keep, s, NEG_INF)
        m_new = jnp.maximum(m_i, s.max(axis=1))
        shift = jnp.where(m_new == NEG_INF, 0.0, m_new)
        alpha = jnp.exp(m_i - shift)
        p = jnp.exp(s - shift[:, None])
        return m_new, l_i * alpha + p.sum(axis=1), acc * alpha[:, None] + _dot(p, v)

    d = q_ref.shape[-1]
    init = (
        jnp.full((block_q,), NEG_INF, F32),
        jnp.zeros((block_q,), F32),
        jnp.zeros((block_q, d), F32),
    )
    m_i, l_i, acc = jax.lax.fori_loop(0, (k_len + block_k - 1) // block_k, step, init)
    live = l_i > 0.0
    o_ref[0, 0] = (acc / jnp.where(live, l_i, 1.0)[:, None]).astype(o_ref.dtype)
    log_l = jnp.log(jnp.where(live, l_i, 1.0))
    if bug == "attention_lse_no_max":  # planted: the running max left out
        lse_ref[0, 0] = jnp.where(live, log_l, NEG_INF)
    else:
        lse_ref[0, 0] = jnp.where(live, m_i + log_l, NEG_INF)


@functools.partial(jax.jit, static_argnames=("out_rows", "block_q", "block_k", "bug", "interpret"))
def _attention_call(
    ints, floats, seqs, slopes, q, k, v, *, out_rows, block_q, block_k, bug, interpret
):
    hq, d, n_seqs = q.shape[1], q.shape[3], seqs.shape[1]
    o_block = pl.BlockSpec((1, 1, block_q, d), lambda i, p: (p // hq, p % hq, i, 0))
    lse_block = pl.BlockSpec((1, 1, block_q), lambda i, p: (p // hq, p % hq, i))
    return pl.pallas_call(
        functools.partial(_attention_kernel, block_q=block_q, block_k=block_k, bug=bug),
        grid=(out_rows // block_q, n_seqs * hq),
        in_specs=[_whole(x.shape) for x in (ints, floats, seqs, slopes, q, k, v)],
        out_specs=[o_block, lse_block],
        out_shape=[
            jax.ShapeDtypeStruct((n_seqs, hq, out_rows, d), q.dtype),
            jax.ShapeDtypeStruct((n_seqs, hq, out_rows), F32),
        ],
        interpret=interpret,
    )(ints, floats, seqs, slopes, q, k, v)


def attention(
    q, k, v, *, scale, causal=False, window=None, key_lengths=None, alibi_slopes=None,
    softcap=None, cu_seqlens_q=None, cu_seqlens_k=None, block_q=16, block_k=16, bug="",
    interpret=True,
):  # fmt: skip
    """Attention of ``q [B, Hq, Tq, D]`` on ``k, v [B, Hkv, Tk, D]``: ``(o, lse)``, o in q's
    dtype, lse fp32 (``-inf`` and o = 0 for a query with no visible key). Packed sequences:
    ``cu_seqlens_q/k [N + 1]`` with ``B == 1``."""
    batch, hq, tq, d = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"q heads {hq} must be a multiple of kv heads {hkv}")
    packed = cu_seqlens_q is not None
    if packed:
        cq, ck = _host(cu_seqlens_q).astype(np.int32), _host(cu_seqlens_k).astype(np.int32)
        seqs = np.stack([cq[:-1], np.diff(cq), ck[:-1], np.diff(ck)])
        key_end = int(ck[-1])
    else:
        k_lens = np.full(batch, tk) if key_lengths is None else _host(key_lengths)
        seqs = np.stack([np.zeros(batch), np.full(batch, tq), np.zeros(batch), k_lens])
        key_end = tk
    seqs = seqs.astype(np.int32)
    n_seqs = seqs.shape[1]
    longest = int(seqs[1].max(initial=0))
    if not longest or not tk:  # no query, or no key: every query sees none
        o = np.zeros((batch, hq, tq, d), _host(q).dtype)
        return _device(o), _device(np.full((batch, hq, tq), -np.inf, np.float32))
    out_rows = _bucket(longest, block_q)
    d_p = _bucket(d, 8)
    # Room for a tile past the last query or key row; sequences padded to a bucket, as empty.
    rows_q = _bucket(tq + out_rows, 16)
    rows_k = _bucket(tk + block_k, 16)
    qp = _pad(_host(q), (batch, hq, rows_q, d_p))
    kp = _pad(_host(k), (batch, hkv, rows_k, d_p))
    vp = _pad(_host(v), (batch, hkv, rows_k, d_p))
    seqs = _pad(seqs, (4, _bucket(n_seqs, 1)))
    left, right = window if window is not None else (-1, -1)
    ints = np.array(
        [causal, window is not None, left, right, alibi_slopes is not None, softcap is not None,
         hq, hkv, key_end], np.int32,
    )  # fmt: skip
    floats = np.array([scale, softcap or 1.0], np.float32)
    slopes = np.zeros(hq, np.float32) if alibi_slopes is None else _host(alibi_slopes)
    o, lse = _attention_call(
        ints, floats, seqs, slopes.astype(np.float32), qp, kp, vp, out_rows=out_rows,
        block_q=block_q, block_k=block_k, bug=bug, interpret=interpret,
    )  # fmt: skip
    if not packed:
        return _device(_host(o)[:batch, :, :tq, :d]), _device(_host(lse)[:batch, :, :tq])
    return _unpack(o, lse, seqs[:, :n_seqs], tq, d)


def _unpack(o, lse, seqs: np.ndarray, tq: int, d: int):
    """Per-sequence blocks ``[N, H, rows, D]`` back to the packed ``[1, H, Tq, D]``."""
    o_h, lse_h = np.asarray(o), np.asarray(lse)
    hq = o_h.shape[1]
    out = np.zeros((1, hq, tq, d), o_h.dtype)
    out_lse = np.full((1, hq, tq), -np.inf, np.float32)
    for n, (start, length) in enumerate(zip(seqs[0], seqs[1], strict=True)):
        out[0, :, start : start + length] = o_h[n, :, :length, :d]
        out_lse[0, :, start : start + length] = lse_h[n, :, :length]
    return _device(out), _device(out_lse)


ATTENTION_KEYWORDS = {
    "causal", "window", "key_lengths", "alibi_slopes", "softcap", "cu_seqlens_q", "cu_seqlens_k",
}  # fmt: skip


def _attention_kernel_of(bug, features):
    def kernel(q, k, v, *, scale, block_q, block_k, interpret, **kw):
        unknown = set(kw) - ATTENTION_KEYWORDS
        if unknown:
            raise TypeError(f"unexpected keyword(s) {sorted(unknown)}")
        return attention(
            q, k, v, scale=scale, block_q=block_q, block_k=block_k, bug=bug,
            interpret=interpret, **kw,
        )  # fmt: skip

    kernel.__name__ = f"attention_{'_'.join(sorted(features))}"
    return kernel


ATTENTION_TILES = {"block_q": (16, 32), "block_k": (16, 32)}
HEAD_DIMS = (1, 2, 3, 8, 16, 24, 32, 64)
ATTENTION_FEATURES = {"causal", "window", "key_padding", "alibi", "softcap", "gqa", "scale"}
VARLEN_FEATURES = {"causal", "window", "alibi", "softcap", "gqa", "scale"}


def attention_caps(features):
    return fuzz.Capabilities(tiles=ATTENTION_TILES, head_dims=HEAD_DIMS, features=features)


# Split-KV decode ----------------------------------------------------------------------------------
# One program per (batch element and query head, split) reduces its part of the cache into
# (m, l, acc); a second kernel merges the splits through their maxima.


def _decode_split_kernel(
    ints_ref, scale_ref, lens_ref, q_ref, k_ref, v_ref, m_ref, l_ref, acc_ref, *, block_k
):
    pid, split = pl.program_id(0), pl.program_id(1)
    hq, hkv, n_splits = ints_ref[0], ints_ref[1], ints_ref[2]
    b, h = pid // hq, pid % hq
    hk = h // (hq // hkv)
    length = lens_ref[b]
    per = (length + n_splits - 1) // n_splits
    per = (per + block_k - 1) // block_k * block_k  # whole key tiles per split
    lo = split * per
    hi = jnp.minimum(lo + per, length)
    q = q_ref[b, h].astype(F32)  # [1, D]

    def step(j, carry):
        m_i, l_i, acc = carry
        k0 = lo + j * block_k
        ok = (k0 + _iota((block_k, 1), 0)) < hi
        k = jnp.where(ok, k_ref[b, hk, pl.ds(k0, block_k), :].astype(F32), 0.0)
        v = jnp.where(ok, v_ref[b, hk, pl.ds(k0, block_k), :].astype(F32), 0.0)
        s = jnp.where(ok[:, 0], (q * k).sum(axis=1) * scale_ref[0], NEG_INF)
        m_new = jnp.maximum(m_i, s.max())
        shift = jnp.where(m_new == NEG_INF, 0.0, m_new)
        alpha = jnp.exp(m_i - shift)
        p = jnp.exp(s - shift)
        return m_new, l_i * alpha + p.sum(), acc * alpha + (p[:, None] * v).sum(axis=0)

    n_tiles = (jnp.maximum(hi - lo, 0) + block_k - 1) // block_k
    init = (jnp.float32(NEG_INF), jnp.float32(0.0), jnp.zeros((q.shape[-1],), F32))
    m_i, l_i, acc = jax.lax.fori_loop(0, n_tiles, step, init)
    m_ref[0, 0] = m_i
    l_ref[0, 0] = l_i
    acc_ref[0, 0] = acc


def _decode_merge_kernel(m_ref, l_ref, acc_ref, o_ref, lse_ref, *, bug):
    m, ell, acc = m_ref[0], l_ref[0], acc_ref[0]  # [S], [S], [S, D]
    m_max = m.max()
    shift = jnp.where(m_max == NEG_INF, 0.0, m_max)
    w = jnp.where(m == NEG_INF, 0.0, jnp.exp(m - shift))
    l_total = (w * ell).sum()
    if bug == "decode_merge_no_rescale":  # planted: the splits added as they are
        w_o = jnp.where(m == NEG_INF, 0.0, 1.0)
        o = (w_o[:, None] * acc).sum(axis=0) / jnp.where(l_total > 0.0, (w_o * ell).sum(), 1.0)
    else:
        o = (w[:, None] * acc).sum(axis=0) / jnp.where(l_total > 0.0, l_total, 1.0)
    live = l_total > 0.0
    o_ref[0] = o.astype(o_ref.dtype)
    lse_ref[0] = jnp.where(live, m_max + jnp.log(jnp.where(live, l_total, 1.0)), NEG_INF)


@functools.partial(jax.jit, static_argnames=("n_splits", "block_k", "bug", "interpret"))
def _decode_call(ints, scale, lens, q, k, v, *, n_splits, block_k, bug, interpret):
    batch, hq, _, d = q.shape
    rows = batch * hq
    part = pl.BlockSpec((1, 1), lambda p, s: (p, s))
    m, ell, acc = pl.pallas_call(
        functools.partial(_decode_split_kernel, block_k=block_k),
        grid=(rows, n_splits),
        in_specs=[_whole(x.shape) for x in (ints, scale, lens, q, k, v)],
        out_specs=[part, part, pl.BlockSpec((1, 1, d), lambda p, s: (p, s, 0))],
        out_shape=[
            jax.ShapeDtypeStruct((rows, n_splits), F32),
            jax.ShapeDtypeStruct((rows, n_splits), F32),
            jax.ShapeDtypeStruct((rows, n_splits, d), F32),
        ],
        interpret=interpret,
    )(ints, scale, lens, q, k, v)
    return pl.pallas_call(
        functools.partial(_decode_merge_kernel, bug=bug),
        grid=(rows,),
        in_specs=[
            pl.BlockSpec((1, n_splits), lambda p: (p, 0)),
            pl.BlockSpec((1, n_splits), lambda p: (p, 0)),
            pl.BlockSpec((1, n_splits, d), lambda p: (p, 0, 0)),
        ],
        out_specs=[pl.BlockSpec((1, d), lambda p: (p, 0)), pl.BlockSpec((1,), lambda p: (p,))],
        out_shape=[jax.ShapeDtypeStruct((rows, d), q.dtype), jax.ShapeDtypeStruct((rows,), F32)],
        interpret=interpret,
    )(m, ell, acc)


def decode(q, k, v, *, scale, cache_len, block_k=16, num_splits=1, bug="", interpret=True):
    """One query per sequence (``q [B, Hq, 1, D]``) against a cache ``k, v [B, Hkv, Tmax, D]`` of
    ``cache_len [B]`` valid keys, in ``num_splits`` parts merged through their maxima."""
    batch, hq, _, d = q.shape
    hkv, tmax = k.shape[1], k.shape[2]
    d_p = _bucket(d, 8)
    rows_k = _bucket(tmax + block_k, 16)
    qp = _pad(_host(q), (batch, hq, 1, d_p))
    kp = _pad(_host(k), (batch, hkv, rows_k, d_p))
    vp = _pad(_host(v), (batch, hkv, rows_k, d_p))
    ints = np.array([hq, hkv, num_splits], np.int32)
    o, lse = _decode_call(
        ints, np.array([scale], np.float32), _host(cache_len).astype(np.int32), qp, kp, vp,
        n_splits=num_splits, block_k=block_k, bug=bug, interpret=interpret,
    )  # fmt: skip
    return (
        _device(_host(o)[:, :d].reshape(batch, hq, 1, d)),
        _device(_host(lse).reshape(batch, hq, 1)),
    )


def _decode_kernel_of(bug):
    def kernel(q, k, v, *, scale, cache_len, block_k, num_splits, interpret):
        return decode(
            q, k, v, scale=scale, cache_len=cache_len, block_k=block_k, num_splits=num_splits,
            bug=bug, interpret=interpret,
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
# The wrapper lays tensors out as [B, H, T, K] (NumPy), T padded to a bucket of whole chunks.


def _gla_fwd_kernel(
    ints_ref, floats_ref, q_ref, k_ref, v_ref, g_ref, h0_ref, o_ref, ht_ref, *,
    chunk, per_token, bug,
):  # fmt: skip
    t_len, has_h0 = ints_ref[0], ints_ref[1] != 0
    scale = floats_ref[0]
    gamma = floats_ref[1 + pl.program_id(1)]
    n_chunks = (t_len + chunk - 1) // chunk
    offs = _iota((chunk, 1), 0)
    causal = offs >= offs.T
    h0 = jnp.where(has_h0, h0_ref[0, 0], 0.0)
    if bug == "gla_h0_one_chunk":  # planted: a one-chunk sequence starts from zeros
        h0 = jnp.where(n_chunks == 1, 0.0, h0)

    def step(c, carry):
        state, prev_last = carry
        rows = pl.ds(c * chunk, chunk)
        t_ok = (c * chunk + offs) < t_len  # [C, 1]
        q = jnp.where(t_ok, q_ref[0, 0, rows, :].astype(F32), 0.0)
        k = jnp.where(t_ok, k_ref[0, 0, rows, :].astype(F32), 0.0)
        v = jnp.where(t_ok, v_ref[0, 0, rows, :].astype(F32), 0.0)
        if per_token:
            gate = jnp.where(t_ok[:, 0], g_ref[0, 0, rows], 0.0)
            bcum = jnp.cumsum(gate)
            last = gate.sum()
        else:
            bcum = gamma * (offs[:, 0] + 1).astype(F32)
            last = gamma * jnp.minimum(t_len - c * chunk, chunk).astype(F32)
        inter = _dot(q * jnp.exp(bcum)[:, None], state)
        mask = causal & t_ok.T
        decay = jnp.exp(jnp.where(mask, bcum[:, None] - bcum[None, :], 0.0))
        a = jnp.where(mask, _dot(q, k.T) * decay, 0.0)
        o_ref[0, 0, rows, :] = (scale * (inter + _dot(a, v))).astype(o_ref.dtype)
        k_w = k * jnp.exp(jnp.where(t_ok[:, 0], last - bcum, 0.0))[:, None]
        carried = last
        if bug == "gla_prev_chunk_decay":  # planted: the previous chunk's total gate
            carried = jnp.where(c == 0, last, prev_last)
        return jnp.exp(carried) * state + _dot(k_w.T, v), last

    state, _ = jax.lax.fori_loop(0, n_chunks, step, (h0, jnp.float32(0.0)))
    ht_ref[0, 0] = state


@functools.partial(jax.jit, static_argnames=("chunk", "per_token", "bug", "interpret"))
def _gla_call(ints, floats, q, k, v, g, h0, *, chunk, per_token, bug, interpret):
    batch, heads, rows, kd = q.shape
    vd = v.shape[-1]

    def per_head(*block):
        return pl.BlockSpec((1, 1, *block), lambda b, h: (b, h) + (0,) * len(block))

    return pl.pallas_call(
        functools.partial(_gla_fwd_kernel, chunk=chunk, per_token=per_token, bug=bug),
        grid=(batch, heads),
        in_specs=[
            _whole(ints.shape),
            _whole(floats.shape),
            per_head(rows, kd),
            per_head(rows, kd),
            per_head(rows, vd),
            per_head(rows),
            per_head(kd, vd),
        ],
        out_specs=[per_head(rows, vd), per_head(kd, vd)],
        out_shape=[
            jax.ShapeDtypeStruct((batch, heads, rows, vd), q.dtype),
            jax.ShapeDtypeStruct((batch, heads, kd, vd), F32),
        ],
        interpret=interpret,
    )(ints, floats, q, k, v, g, h0)


def gla_forward(
    q, k, v, *, scale, g=None, g_gamma=None, initial_state=None, output_final_state=False,
    chunk_size=16, bug="", interpret=True,
):  # fmt: skip
    """Chunked simple GLA: ``q, k [B, T, H, K]``, ``v [B, T, H, V]``, per-token log decays
    ``g [B, T, H]`` or per-head ``g_gamma [H]``, ``initial_state [B, H, K, V]``. Returns ``o``
    (q's dtype) and the final state ``ht [B, H, K, V]`` (fp32) or None."""
    batch, t_len, heads, kd = q.shape
    vd = v.shape[-1]
    if (g is None) == (g_gamma is None):
        raise ValueError("give exactly one of g (per token) and g_gamma (per head)")
    rows = _bucket(max(t_len, 1), chunk_size)
    k_p, v_p = _bucket(kd, 8), _bucket(vd, 8)

    def heads_first(x, width):  # [B, T, H, X] -> [B, H, rows, width]
        return _pad(np.swapaxes(_host(x), 1, 2), (batch, heads, rows, width))

    gates = np.zeros((batch, heads, rows), np.float32)
    if g is not None:
        gates[:, :, :t_len] = np.swapaxes(_host(g).astype(np.float32), 1, 2)
    h0 = np.zeros((batch, heads, k_p, v_p), np.float32)
    if initial_state is not None:
        h0[:, :, :kd, :vd] = _host(initial_state)
    gammas = np.zeros(heads) if g_gamma is None else _host(g_gamma)
    ints = np.array([t_len, initial_state is not None], np.int32)
    floats = np.concatenate([[scale], gammas]).astype(np.float32)
    o, ht = _gla_call(
        ints, floats, heads_first(q, k_p), heads_first(k, k_p), heads_first(v, v_p), gates, h0,
        chunk=chunk_size, per_token=g is not None, bug=bug, interpret=interpret,
    )  # fmt: skip
    o = _device(np.swapaxes(_host(o)[:, :, :t_len, :vd], 1, 2))
    return o, (_device(_host(ht)[:, :, :kd, :vd]) if output_final_state else None)


def _gla_kernel_of(bug, per_token_only=False):
    if per_token_only:

        def kernel(q, k, v, *, g, scale, initial_state, output_final_state, chunk_size, interpret):
            return gla_forward(
                q, k, v, g=g, scale=scale, initial_state=initial_state,
                output_final_state=output_final_state, chunk_size=chunk_size, bug=bug,
                interpret=interpret,
            )  # fmt: skip

        return kernel

    def kernel(
        q, k, v, *, g, g_gamma, scale, initial_state, output_final_state, chunk_size, interpret
    ):
        return gla_forward(
            q, k, v, g=g, g_gamma=g_gamma, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state, chunk_size=chunk_size, bug=bug,
            interpret=interpret,
        )  # fmt: skip

    return kernel


GLA_FEATURES = {"g", "g_gamma", "initial_state", "final_state", "scale"}
GLA_TILES = {"chunk_size": (16, 32)}


def gla_caps(features=GLA_FEATURES):
    return fuzz.Capabilities(tiles=GLA_TILES, features=features)


# Registration -------------------------------------------------------------------------------------


def _kernel_and_caps(family: str, bug: str, per_token_only: bool = False) -> tuple:
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


INTERPRETED = ("interpreted",)  # written for interpret mode (no GPU lowering rules declared)


def _register(name: str, family: str, bug: str, description: str, per_token_only: bool = False):
    kernel, caps = _kernel_and_caps(family, bug, per_token_only)
    # decode's "a decode step is the last row of a causal prefill" compares with the library's
    # prefill: the bug-free dense kernel
    siblings = {"attention": CONTROLS["control_attention_pallas"]} if "decode" in family else None
    return fuzz.fuzz_kernel(
        name,
        family=family,
        kernel=kernel,
        language="pallas",
        capabilities=dataclasses.replace(caps, backends=INTERPRETED),
        siblings=siblings,
        description=description[:200],
    )


def target_name(pattern: str) -> str:
    return f"planted_{pattern}_pallas"


# The kernels with no bug planted: what a campaign finds on them is not a planted bug's.
CONTROLS = {}
for _family in (
    "attention", "softmax", "jagged_softmax", "attention_varlen", "attention_decode",
    "simple_gla_fwd",
):  # fmt: skip
    _name = f"control_{_family}_pallas"
    CONTROLS[_name] = _register(
        _name, _family, "", f"the planted {_family} Pallas kernel with no bug planted"
    )

PLANTED = {}
for _pattern, _record in PATTERNS.items():
    if "pallas" in _record.not_in:
        continue
    _name = target_name(_pattern)
    _register(
        _name,
        _record.family,
        _pattern,
        f"planted ({_record.family}, Pallas): {_record.bugs[0].what}",
        per_token_only=_pattern == "gla_prev_chunk_decay",  # a kernel of per-token gates only
    )
    PLANTED[_name] = _record
