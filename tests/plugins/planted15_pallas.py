"""Planted one-bug Pallas kernels, round 15 (``interpret=True`` on the CPU, compiled for the GPU
through the Triton lowering): kernels the harness was not tuned on, each with one bug of a pattern
neither the earlier planted rounds, nor the project's mutants, nor the other test plugins plant,
registered through the public plugin API only. The Triton kernels of the round are in
``planted15.py``, the records of both in ``_planted15_bugs.py``.

Five kernels written the way a Pallas user writes them (a row-block softmax over column tiles
that takes its mask in additive form, a jagged softmax run on a padded dense batch of the
segments, a flash-attention forward with ALiBi and key padding, a packed-sequence attention
forward with a soft cap and ALiBi over a table of query tiles that visits only the key tiles its
queries can see, a chunked simple GLA forward whose one program per head walks the batch's
sequences, packed or not), each with a ``bug`` switch (a static argument: each bug in a kernel is
its own compiled program; the jagged softmax's is in its wrapper). The wrappers pad every array on
the host (NumPy) to power-of-two sizes (head dims to at least 16, for the GPU's dots), so that no
block overhangs its array and one compiled program serves many cases; true lengths and options are
data, and the kernels mask the padding with iotas against them. Each
``planted15_*`` target plants one bug, each ``control15_*`` target none. Each bug, its trigger
and the failure class expected:

- ``planted15_softmax_tile_exp_of_stale_max_pallas``: the online sum adds each tile's
  exponentials shifted by the running max before the tile, exp(s - m_old), where the new max,
  exp(s - m_new), belongs (the old sum is rescaled to the new max, the tile's terms are not):
  every tile that raises a row's max adds its terms exp(m_new - m_old) too large (the first tile:
  from a shift of 0), and they overflow where it rises by more than 88; right where no tile
  raises the max above the one before it, the first tile's max being 0. Trigger: one row of one
  key, x = 1 (y 1/e where 1). Expected: accuracy.
- ``planted15_jagged_dense_batch_in_half_precision_pallas``: the wrapper builds the padded dense
  batch (and so the kernel's output) in float16, to halve the copy, whatever the values' dtype:
  float32 and bfloat16 values are rounded to 11 bits (past 65504: inf) on the way in and the
  softmax on the way out. Trigger: one segment of two rows of one column, 0 and 0.1. Expected:
  accuracy.
- ``planted15_attention_key_padding_masks_queries_pallas``: the key padding's length is applied
  to the queries too (rows < k_len, as a self-attention padding mask of both axes is), where it
  masks keys only: every query at or past its batch element's key length sees no key (o 0, lse
  -inf); right where every key length is at least the query count. Trigger: two queries on two
  keys, a key length of one. Expected: accuracy.
- ``planted15_varlen_causal_loop_bound_top_left_pallas``: under the causal mask the key loop
  stops after the query tile's last index, i0 + block_q, where its last key position, i0 +
  block_q - 1 + k_len - q_len (bottom-right, as the mask measures it), belongs: a sequence with
  more keys than queries loses the keys near each query's diagonal past the tile's last index;
  right where every sequence's keys fit the tile's indexes. Trigger: causal, one query on 17
  keys, block_q 16. Expected: accuracy.
- ``planted15_gla_gates_unmasked_past_sequence_end_pallas``: per-token gates are read over the
  chunk's every row, the rows past the sequence's end (the next sequence's tokens, packed after
  it) included, where they are zero: a sequence whose last chunk is partial and followed by
  another decays its final state by the next sequence's gates too (its chunk total b_last
  takes them in); o is right. Trigger: two sequences of one token, gates -1, their final states.
  Expected: accuracy.

``PLANTED`` maps each planted target to its ``_planted3_bugs.Pattern``; ``CONTROLS`` the bug-free
targets.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import fuzz


def _load_bugs():
    """``_planted15_bugs.py`` beside this file (a plugin is loaded by path, not as a package)."""
    return fuzz.load_beside(__file__, "_planted15_bugs.py", "kernel_fuzz_planted15_bugs")


PATTERNS = _load_bugs().PATTERNS
F32 = jnp.float32
NEG_INF = -jnp.inf


def _bucket(n: int, start: int) -> int:
    """``start * 2**k``, the smallest that holds ``n`` (a power of two for a power-of-two
    ``start``)."""
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


def _device_of(x):
    """The device holding ``x`` (the backend's: the CPU in interpret mode, else the GPU)."""
    return next(iter(x.devices()))


def _put(device, *arrays):
    """Host arrays onto ``device`` (outputs are cut back to their lengths on the host: a jnp slice
    would compile a program per exact shape)."""
    return [jax.device_put(np.ascontiguousarray(a), device) for a in arrays]


def _iota(shape, axis):
    return jax.lax.broadcasted_iota(jnp.int32, shape, axis)


def _dot(a, b, *, ta=False, tb=False):
    """``a @ b`` (optionally transposed operands) in fp32, exact products."""
    dims = (((0,) if ta else (1,), (1,) if tb else (0,)), ((), ()))
    return jax.lax.dot_general(
        a, b, dims, precision=jax.lax.Precision.HIGHEST, preferred_element_type=F32
    )


# Softmax ------------------------------------------------------------------------------------------
# Blocks of ROWS rows, a pass over block_n-column tiles for the running max and sum (an online
# softmax: each tile's max raises the running max m, and the sum is rescaled by exp(m_old - m_new),
# the shift guarded to 0 while a row has seen no valid key), then a pass that writes each tile.
# The kernel takes its mask in additive form (0: a key to keep, -inf: one to drop; a dropped key's
# logit is -inf whatever its input holds), built by the wrapper from the boolean mask; the wrapper
# pads the row to whole tiles.

ROWS = 8


def _softmax_kernel(n_ref, scale_ref, x_ref, add_ref, bias_ref, y_ref, *, block_n, bug):
    n_cols, scale = n_ref[0], scale_ref[0]

    def tile(j):
        """Tile ``j``'s columns and logits (-inf past the row and at dropped keys)."""
        start = pl.multiple_of(j * block_n, block_n)
        cols = pl.ds(start, block_n)
        s = x_ref[:, cols].astype(F32) * scale + bias_ref[:, cols].astype(F32)
        add = add_ref[:, cols]
        at = start + _iota(s.shape, 1)
        return cols, jnp.where((at < n_cols) & (add != NEG_INF), s + add, NEG_INF)

    def stats(j, carry):
        m, ell = carry
        _, s = tile(j)
        m_new = jnp.maximum(m, s.max(axis=1))
        shift = jnp.where(m_new == NEG_INF, 0.0, m_new)
        alpha = jnp.exp(m - shift)
        if bug == "softmax_tile_exp_of_stale_max":  # planted: the tile shifted by the old max
            shift = jnp.where(m == NEG_INF, 0.0, m)
        return m_new, ell * alpha + jnp.exp(s - shift[:, None]).sum(axis=1)

    n_tiles = (n_cols + block_n - 1) // block_n
    rows = x_ref.shape[0]
    init = (jnp.full((rows,), NEG_INF, F32), jnp.zeros((rows,), F32))
    m, ell = jax.lax.fori_loop(0, n_tiles, stats, init)
    shift = jnp.where(m == NEG_INF, 0.0, m)
    inv = jnp.where(ell > 0.0, 1.0 / jnp.where(ell > 0.0, ell, 1.0), 0.0)

    def write(j, carry):
        cols, s = tile(j)
        y_ref[:, cols] = (jnp.exp(s - shift[:, None]) * inv[:, None]).astype(y_ref.dtype)
        return carry

    jax.lax.fori_loop(0, n_tiles, write, 0)


@functools.partial(jax.jit, static_argnames=("block_n", "bug", "interpret"))
def _softmax_call(n_cols, scale, x, add, bias, *, block_n, bug, interpret):
    rows, cols = x.shape
    block = pl.BlockSpec((ROWS, cols), lambda i: (i, 0))
    return pl.pallas_call(
        functools.partial(_softmax_kernel, block_n=block_n, bug=bug),
        grid=(rows // ROWS,),
        in_specs=[_whole((1,)), _whole((1,)), block, block, block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=interpret,
    )(n_cols, scale, x, add, bias)


def softmax(x, *, mask=None, bias=None, scale=1.0, block_n=16, bug="", interpret=False):
    """Row softmax of ``scale * x + bias`` over ``x [R, C]``'s last axis, masked keys (``mask``
    False) removed (a row with no valid key gives zeros); output in x's dtype, statistics in
    fp32."""
    rows, cols = x.shape
    if not rows or not cols:
        return x
    device = _device_of(x)
    shape = (_bucket(rows, ROWS), _bucket(cols, block_n))
    if mask is None:
        add = np.zeros((rows, cols), np.float32)
    else:
        add = np.where(_host(mask).astype(bool), 0.0, -np.inf).astype(np.float32)
    if bias is None:
        b = np.zeros((rows, cols), np.float32)
    else:
        b = _host(bias).astype(np.float32)
    y = _softmax_call(
        *_put(
            device, np.array([cols], np.int32), np.array([scale], np.float32),
            _pad(_host(x), shape), _pad(add, shape), _pad(b, shape),
        ),
        block_n=block_n, bug=bug, interpret=interpret,
    )  # fmt: skip
    return _put(device, _host(y)[:rows, :cols])[0]


def _softmax_kernel_of(bug):
    def kernel(x, *, mask, bias, scale, block_n, interpret):
        return softmax(
            x, mask=mask, bias=bias, scale=scale, block_n=block_n, bug=bug, interpret=interpret
        )

    return kernel


SOFTMAX_CAPS = fuzz.Capabilities(features={"mask", "bias", "scale"}, tiles={"block_n": (16, 32)})


# Jagged softmax -----------------------------------------------------------------------------------
# Through a padded dense batch: the wrapper copies each segment's rows into its own slab of L rows
# (L: the longest segment's length rounded up to block_n times a power of two), [B, L, M], with its
# length; one program per (segment, column block) runs three passes over the slab's row tiles of
# its segment (each column's max, its sum of exp(x - max), the writes; rows at or past the length
# -inf) and writes every tile of its slab (the rows past the length as 0); the wrapper then takes
# each segment's first length rows of its slab back to the segment's rows of y.


def _jagged_kernel(lengths_ref, v_ref, y_ref, *, block_n):
    length = lengths_ref[pl.program_id(0)]
    slab, block_m = v_ref.shape[1], v_ref.shape[2]
    n_tiles = (length + block_n - 1) // block_n

    def tile(j):
        r0 = pl.multiple_of(j * block_n, block_n)
        rows = r0 + _iota((block_n, block_m), 0)
        x = jnp.where(rows < length, v_ref[0, pl.ds(r0, block_n), :].astype(F32), NEG_INF)
        return r0, x

    def top(j, m):
        return jnp.maximum(m, tile(j)[1].max(axis=0))

    m = jax.lax.fori_loop(0, n_tiles, top, jnp.full((block_m,), NEG_INF, F32))
    shift = jnp.where(m == NEG_INF, 0.0, m)

    def total(j, ell):
        return ell + jnp.exp(tile(j)[1] - shift[None, :]).sum(axis=0)

    ell = jax.lax.fori_loop(0, n_tiles, total, jnp.zeros((block_m,), F32))
    inv = jnp.where(ell > 0.0, 1.0 / jnp.where(ell > 0.0, ell, 1.0), 0.0)

    def write(j, c):
        r0, x = tile(j)
        y_ref[0, pl.ds(r0, block_n), :] = (jnp.exp(x - shift[None, :]) * inv[None, :]).astype(
            y_ref.dtype
        )
        return c

    jax.lax.fori_loop(0, slab // block_n, write, 0)


@functools.partial(jax.jit, static_argnames=("block_n", "block_m", "interpret"))
def _jagged_call(lengths, dense, *, block_n, block_m, interpret):
    n_seg, slab, cols = dense.shape
    block = pl.BlockSpec((1, slab, block_m), lambda b, i: (b, 0, i))
    return pl.pallas_call(
        functools.partial(_jagged_kernel, block_n=block_n),
        grid=(n_seg, cols // block_m),
        in_specs=[_whole(lengths.shape), block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct(dense.shape, dense.dtype),
        interpret=interpret,
    )(lengths, dense)


def jagged_softmax(values, *, offsets, block_n=4, block_m=4, bug="", interpret=False):
    """Softmax over each segment's rows (``offsets [B + 1]``: segment starts, then N), per column
    of ``values [N, M]``; output in values' dtype."""
    n_rows, n_cols = values.shape
    offs = _host(offsets).astype(np.int64)
    n_seg = offs.shape[0] - 1
    if n_seg <= 0 or not n_rows or not n_cols:
        return values
    device = _device_of(values)
    host = _host(values)
    lengths = np.diff(offs)
    slab = _bucket(max(int(lengths.max()), 1), block_n)
    cols = _bucket(n_cols, block_m)
    staging = host.dtype
    if bug == "jagged_dense_batch_in_half_precision":  # planted: a float16 copy, whatever dtype
        staging = np.float16
    dense = np.zeros((_bucket(n_seg, 1), slab, cols), staging)
    for b in range(n_seg):
        dense[b, : lengths[b], :n_cols] = host[offs[b] : offs[b + 1]]
    out = _jagged_call(
        *_put(device, _pad(lengths.astype(np.int32), (dense.shape[0],)), dense),
        block_n=block_n, block_m=block_m, interpret=interpret,
    )  # fmt: skip
    out = _host(out)[:, :, :n_cols]
    y = np.zeros((n_rows, n_cols), host.dtype)
    for b in range(n_seg):
        y[offs[b] : offs[b + 1]] = out[b, : lengths[b]]
    return _put(device, np.ascontiguousarray(y))[0]


def _jagged_kernel_of(bug):
    def kernel(values, *, offsets, block_n, block_m, interpret):
        return jagged_softmax(
            values, offsets=offsets, block_n=block_n, block_m=block_m, bug=bug,
            interpret=interpret,
        )  # fmt: skip

    return kernel


JAGGED_CAPS = fuzz.Capabilities(tiles={"block_n": (4, 8), "block_m": (4,)})


# Attention ----------------------------------------------------------------------------------------
# One program per (batch element and query head, query tile); the block specs hand it its query
# tile and its kv head's whole (padded) keys and values; an online softmax over key tiles of the
# logits scale * q.k - slope * |p - j| (ALiBi, where slopes are given: one per query head). Each
# query's key position is p = i + Lk - Lq (bottom-right); the causal mask and the window
# [p - left, p + right] (a side of -1: unbounded) are one visibility test. OPTS holds the options
# as data.

CAUSAL, WINDOW, LEFT, RIGHT, TQ, ALIBI = range(6)


def _visible(rows, cols, pos, k_len, tq, opts_ref, bug):
    """Which (query, key) pairs of a tile are visible."""
    causal, window = opts_ref[CAUSAL] != 0, opts_ref[WINDOW] != 0
    left, right = opts_ref[LEFT], opts_ref[RIGHT]
    keep = (rows < tq) & (cols < k_len)
    if bug == "attention_key_padding_masks_queries":  # planted: the queries past k_len dropped
        keep = keep & (rows < k_len)
    in_window = ((left < 0) | (cols >= pos - left)) & ((right < 0) | (cols <= pos + right))
    return keep & (~causal | (cols <= pos)) & (~window | in_window)


def _attention_kernel(
    opts_ref, scale_ref, lens_ref, slopes_ref, q_ref, k_ref, v_ref, o_ref, lse_ref, *, hq,
    block_k, bug,
):  # fmt: skip
    b, h = pl.program_id(0) // hq, pl.program_id(0) % hq
    block_q = q_ref.shape[2]
    k_len, tq, scale = lens_ref[b], opts_ref[TQ], scale_ref[0]
    slope = jnp.where(opts_ref[ALIBI] != 0, slopes_ref[h], 0.0)
    q = q_ref[0, 0].astype(F32)
    rows = pl.program_id(1) * block_q + _iota((block_q, block_k), 0)
    pos = rows + (k_len - tq)

    def step(j, carry):
        m, ell, acc = carry
        start = pl.multiple_of(j * block_k, block_k)
        cols = start + _iota((block_q, block_k), 1)
        keep = _visible(rows, cols, pos, k_len, tq, opts_ref, bug)
        k = k_ref[0, 0, pl.ds(start, block_k), :].astype(F32)
        v = v_ref[0, 0, pl.ds(start, block_k), :].astype(F32)
        # a key no query of the tile sees adds nothing, not 0 * its value (a NaN there); a max,
        # not any(): the Triton lowering has no reduce_or
        seen = keep.astype(jnp.int32).max(axis=0) > 0
        v = jnp.where(seen[:, None], v, 0.0)
        s = _dot(q, k, tb=True) * scale - slope * jnp.abs(pos - cols).astype(F32)
        s = jnp.where(keep, s, NEG_INF)
        m_new = jnp.maximum(m, s.max(axis=1))
        shift = jnp.where(m_new == NEG_INF, 0.0, m_new)
        alpha = jnp.exp(m - shift)
        p = jnp.exp(s - shift[:, None])
        return m_new, ell * alpha + p.sum(axis=1), acc * alpha[:, None] + _dot(p, v)

    init = (
        jnp.full((block_q,), NEG_INF, F32),
        jnp.zeros((block_q,), F32),
        jnp.zeros((block_q, q.shape[-1]), F32),
    )
    m, ell, acc = jax.lax.fori_loop(0, (k_len + block_k - 1) // block_k, step, init)
    live = ell > 0.0
    o_ref[0, 0] = (acc / jnp.where(live, ell, 1.0)[:, None]).astype(o_ref.dtype)
    lse_ref[0, 0] = jnp.where(live, m + jnp.log(jnp.where(live, ell, 1.0)), NEG_INF)


@functools.partial(jax.jit, static_argnames=("block_q", "block_k", "bug", "interpret"))
def _attention_call(opts, scale, lens, slopes, q, k, v, *, block_q, block_k, bug, interpret):
    batch, hq, rows_q, d = q.shape
    hkv, rows_k = k.shape[1], k.shape[2]
    group = hq // hkv
    q_block = pl.BlockSpec((1, 1, block_q, d), lambda p, i: (p // hq, p % hq, i, 0))
    kv_block = pl.BlockSpec((1, 1, rows_k, d), lambda p, i: (p // hq, (p % hq) // group, 0, 0))
    return pl.pallas_call(
        functools.partial(_attention_kernel, hq=hq, block_k=block_k, bug=bug),
        grid=(batch * hq, rows_q // block_q),
        in_specs=[
            _whole(opts.shape), _whole(scale.shape), _whole(lens.shape), _whole(slopes.shape),
            q_block, kv_block, kv_block,
        ],
        out_specs=[q_block, pl.BlockSpec((1, 1, block_q), lambda p, i: (p // hq, p % hq, i))],
        out_shape=[
            jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct((batch, hq, rows_q), F32),
        ],
        interpret=interpret,
    )(opts, scale, lens, slopes, q, k, v)  # fmt: skip


def attention(
    q, k, v, *, scale, causal=False, window=None, key_lengths=None, alibi_slopes=None,
    block_q=16, block_k=16, bug="", interpret=False,
):  # fmt: skip
    """Attention of ``q [B, Hq, Tq, D]`` on ``k, v [B, Hkv, Tk, D]`` (``key_lengths [B]``: the
    keys in use; ``alibi_slopes [Hq]``): ``(o, lse)``, o in q's dtype, lse fp32 (a query with no
    visible key: o = 0, lse = -inf)."""
    batch, hq, tq, d = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"q heads {hq} must be a multiple of kv heads {hkv}")
    if not batch * hq * tq:
        return q, jnp.zeros((batch, hq, tq), F32)
    device = _device_of(q)
    d_p = _bucket(d, 16)
    rows_q, rows_k = _bucket(tq, block_q), _bucket(max(tk, 1), block_k)
    lens = np.full(batch, tk) if key_lengths is None else _host(key_lengths)
    left, right = window if window is not None else (-1, -1)
    alibi = alibi_slopes is not None
    opts = np.array([causal, window is not None, left, right, tq, alibi, 0, 0], np.int32)
    slopes = np.zeros(_bucket(hq, 8), np.float32)  # at least 8 lanes
    if alibi:
        slopes[:hq] = _host(alibi_slopes)
    o, lse = _attention_call(
        *_put(
            device, opts, np.array([scale], np.float32),
            _pad(lens.astype(np.int32), (_bucket(batch, 1),)), slopes,
            _pad(_host(q), (batch, hq, rows_q, d_p)), _pad(_host(k), (batch, hkv, rows_k, d_p)),
            _pad(_host(v), (batch, hkv, rows_k, d_p)),
        ),
        block_q=block_q, block_k=block_k, bug=bug, interpret=interpret,
    )  # fmt: skip
    return tuple(_put(device, _host(o)[:, :, :tq, :d], _host(lse)[:, :, :tq]))


def _attention_kernel_of(bug):
    def kernel(
        q, k, v, *, scale, causal, window, key_lengths, alibi_slopes, block_q, block_k, interpret
    ):  # fmt: skip
        return attention(
            q, k, v, scale=scale, causal=causal, window=window, key_lengths=key_lengths,
            alibi_slopes=alibi_slopes, block_q=block_q, block_k=block_k, bug=bug,
            interpret=interpret,
        )  # fmt: skip

    return kernel


HEAD_DIMS = (1, 2, 3, 8, 16, 32)
ATTENTION_CAPS = fuzz.Capabilities(
    tiles={"block_q": (16, 32), "block_k": (16, 32)},
    head_dims=HEAD_DIMS,
    features={"causal", "window", "key_padding", "alibi", "gqa", "scale"},
)


# Packed sequences ---------------------------------------------------------------------------------
# The token-major layout of packed attention: q, o [total, H, D], k, v [total_k, Hkv, D], lse
# [total, H]. The wrapper copies each sequence's queries to rows of their own, starting at a
# multiple of block_q, and builds a table of each query tile's sequence and first query (the
# sequences without keys left out: their queries keep o 0 and lse -inf); one
# program per (query tile, query head) reads its sequence's keys from the packed keys (the rows
# of cu_seqlens_k, padded by a key tile). Each query's key position is p = i + k_len - q_len
# (bottom-right, within its sequence); the causal mask, the window and ALiBi are measured from
# it, and the key loop visits only the tiles some query of the tile can see. The logits are
# scale * q.k, soft-capped (cap * tanh(s / cap)) where a cap is given, then ALiBi's
# -slope * |p - j| added. TILE columns: the tile's sequence, its first query, the sequence's
# q_len, k_start, k_len.


def _tanh(x):
    """tanh in fp32 from exp (a series near 0, else 1 - 2 / (exp(2|x|) + 1)): the same on every
    backend, whatever tanh each lowers to."""
    a = jnp.abs(x)
    x2 = x * x
    series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (
        62.0 / 2835.0 + x2 * (-1382.0 / 155925.0 + x2 * (21844.0 / 6081075.0)))))))  # fmt: skip
    far = 1.0 - 2.0 / (jnp.exp(2.0 * a) + 1.0)
    return jnp.where(a < 0.25, series, jnp.where(x < 0, -far, far))


def _varlen_kernel(
    opts_ref, floats_ref, table_ref, slopes_ref, q_ref, k_ref, v_ref, o_ref, lse_ref, *,
    block_k, bug,
):  # fmt: skip
    t, h = pl.program_id(0), pl.program_id(1)
    block_q = q_ref.shape[0]
    i0, q_len = table_ref[t, 1], table_ref[t, 2]
    k_start, k_len = table_ref[t, 3], table_ref[t, 4]
    causal, window = opts_ref[0] != 0, opts_ref[1] != 0
    left, right, alibi, capped = opts_ref[2], opts_ref[3], opts_ref[4] != 0, opts_ref[5] != 0
    scale, cap, slope = floats_ref[0], floats_ref[1], slopes_ref[h]
    q = q_ref[:, 0, :].astype(F32)
    rows = i0 + _iota((block_q, block_k), 0)
    pos = rows + (k_len - q_len)

    def step(j, carry):
        m, ell, acc = carry
        cols = j * block_k + _iota((block_q, block_k), 1)
        in_window = ((left < 0) | (cols >= pos - left)) & ((right < 0) | (cols <= pos + right))
        keep = (rows < q_len) & (cols < k_len) & (~causal | (cols <= pos)) & (~window | in_window)
        at = pl.ds(k_start + j * block_k, block_k)
        k = k_ref[at, 0, :].astype(F32)
        seen = keep.astype(jnp.int32).max(axis=0) > 0
        v = jnp.where(seen[:, None], v_ref[at, 0, :].astype(F32), 0.0)
        s = _dot(q, k, tb=True) * scale
        s = jnp.where(capped, cap * _tanh(s / cap), s)
        s = jnp.where(alibi, s - slope * jnp.abs(pos - cols).astype(F32), s)
        s = jnp.where(keep, s, NEG_INF)
        m_new = jnp.maximum(m, s.max(axis=1))
        shift = jnp.where(m_new == NEG_INF, 0.0, m_new)
        alpha = jnp.exp(m - shift)
        p = jnp.exp(s - shift[:, None])
        return m_new, ell * alpha + p.sum(axis=1), acc * alpha[:, None] + _dot(p, v)

    init = (
        jnp.full((block_q,), NEG_INF, F32),
        jnp.zeros((block_q,), F32),
        jnp.zeros((block_q, q.shape[-1]), F32),
    )
    # The key tiles some query of the tile sees: from the window's left edge of the tile's first
    # query to the causal or window right edge of its last (rows past q_len only widen it).
    first, last = i0 + (k_len - q_len), i0 + block_q - 1 + (k_len - q_len)
    if bug == "varlen_causal_loop_bound_top_left":  # planted: the last query's index, not its p
        hi = jnp.where(causal, jnp.minimum(k_len, i0 + block_q), k_len)
    else:
        hi = jnp.where(causal, jnp.minimum(k_len, last + 1), k_len)
    hi = jnp.maximum(jnp.where(window & (right >= 0), jnp.minimum(hi, last + right + 1), hi), 0)
    lo = jnp.where(window & (left >= 0), jnp.maximum(first - left, 0), 0)
    m, ell, acc = jax.lax.fori_loop(lo // block_k, (hi + block_k - 1) // block_k, step, init)
    live = ell > 0.0
    o_ref[:, 0, :] = (acc / jnp.where(live, ell, 1.0)[:, None]).astype(o_ref.dtype)
    lse_ref[:, 0] = jnp.where(live, m + jnp.log(jnp.where(live, ell, 1.0)), NEG_INF)


@functools.partial(jax.jit, static_argnames=("block_q", "block_k", "bug", "interpret"))
def _varlen_call(opts, floats, table, slopes, q, k, v, *, block_q, block_k, bug, interpret):
    rows_q, hq, d = q.shape
    rows_k, hkv = k.shape[0], k.shape[1]
    group = hq // hkv
    q_block = pl.BlockSpec((block_q, 1, d), lambda t, h: (t, h, 0))
    kv_block = pl.BlockSpec((rows_k, 1, d), lambda t, h: (0, h // group, 0))
    return pl.pallas_call(
        functools.partial(_varlen_kernel, block_k=block_k, bug=bug),
        grid=(rows_q // block_q, hq),
        in_specs=[
            _whole(opts.shape), _whole(floats.shape), _whole(table.shape), _whole(slopes.shape),
            q_block, kv_block, kv_block,
        ],
        out_specs=[q_block, pl.BlockSpec((block_q, 1), lambda t, h: (t, h))],
        out_shape=[
            jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct((rows_q, hq), F32),
        ],
        interpret=interpret,
    )(opts, floats, table, slopes, q, k, v)  # fmt: skip


def _tiles(cu_q, cu_k, block_q):
    """The tile table and each sequence's first row in the tiled query layout, by sequence, for
    the sequences with keys (the queries of one with none see nothing: o 0, lse -inf, as the
    outputs start)."""
    kept = [s for s in range(len(cu_q) - 1) if cu_k[s + 1] > cu_k[s]]
    firsts, table = {}, []
    for s in kept:
        q_len, k_len = int(cu_q[s + 1] - cu_q[s]), int(cu_k[s + 1] - cu_k[s])
        firsts[s] = len(table) * block_q
        for i0 in range(0, q_len, block_q):
            table.append([s, i0, q_len, int(cu_k[s]), k_len])
    return firsts, table


def _packed(
    device, q, k, v, cu_q, cu_k, *, scale, causal, window, slopes, softcap, block_q, block_k,
    bug, interpret,
):  # fmt: skip
    """Token-major packed attention on the host arrays ``q [Tq, Hq, D]``, ``k, v [Tk, Hkv, D]``:
    ``(o [Tq, Hq, D], lse [Tq, Hq])`` (a query in no sequence: o 0, lse -inf)."""
    (tq, hq, d), (tk, hkv) = q.shape, k.shape[:2]
    firsts, table = _tiles(cu_q, cu_k, block_q)
    o = np.zeros((tq, hq, d), q.dtype)
    lse = np.full((tq, hq), -np.inf, np.float32)
    if not table or not tk:
        return o, lse
    n_tiles, d_p = _bucket(len(table), 1), _bucket(d, 16)
    tiled = np.zeros((n_tiles * block_q, hq, d_p), q.dtype)
    for s, first in firsts.items():
        tiled[first : first + cu_q[s + 1] - cu_q[s], :, :d] = q[cu_q[s] : cu_q[s + 1]]
    rows_k = _bucket(tk + block_k, 16)  # a sequence's last key tile never reads past it
    left, right = window if window is not None else (-1, -1)
    opts = np.array(
        [causal, window is not None, left, right, slopes is not None, softcap is not None, 0, 0]
    )
    heads_slopes = np.zeros(_bucket(hq, 1), np.float32)
    if slopes is not None:
        heads_slopes[:hq] = slopes
    floats = np.array([scale, softcap or 1.0], np.float32)
    out, out_lse = _varlen_call(
        *_put(
            device, opts.astype(np.int32), floats,
            _pad(np.array(table, np.int32), (n_tiles, 8)), heads_slopes, tiled,
            _pad(k, (rows_k, hkv, d_p)), _pad(v, (rows_k, hkv, d_p)),
        ),
        block_q=block_q, block_k=block_k, bug=bug, interpret=interpret,
    )  # fmt: skip
    out, out_lse = _host(out), _host(out_lse)
    for s, first in firsts.items():
        rows = slice(first, first + cu_q[s + 1] - cu_q[s])
        o[cu_q[s] : cu_q[s + 1]], lse[cu_q[s] : cu_q[s + 1]] = out[rows, :, :d], out_lse[rows]
    return o, lse


def varlen_attention(
    q, k, v, *, scale, cu_seqlens_q, cu_seqlens_k, causal=False, window=None,
    alibi_slopes=None, softcap=None, block_q=16, block_k=16, bug="", interpret=False,
):  # fmt: skip
    """Packed sequences: ``q [1, Hq, Tq, D]`` and ``k, v [1, Hkv, Tk, D]`` along
    ``cu_seqlens_q/k [N + 1]`` (None: each batch element of ``q [B, Hq, Tq, D]`` one sequence):
    ``(o, lse)``, o in q's dtype, lse fp32 (a query with no visible key, or in no sequence: o 0,
    lse -inf)."""
    batch, hq, tq, d = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"q heads {hq} must be a multiple of kv heads {hkv}")
    device = _device_of(q)

    def tokens(x):  # [B, H, T, D] -> [B * T, H, D], the batch elements packed
        x = _host(x)
        return np.swapaxes(x, 1, 2).reshape(-1, x.shape[1], x.shape[3])

    if window is not None:
        left, right = window
        window = (int(left), int(right))
    if cu_seqlens_q is None:
        cu_q, cu_k = np.arange(batch + 1) * tq, np.arange(batch + 1) * tk
    else:
        cu_q, cu_k = _host(cu_seqlens_q).astype(np.int64), _host(cu_seqlens_k).astype(np.int64)
    o, lse = _packed(
        device, tokens(q), tokens(k), tokens(v), cu_q, cu_k, scale=scale, causal=causal,
        window=window, slopes=None if alibi_slopes is None else _host(alibi_slopes),
        softcap=None if softcap is None else float(softcap), block_q=block_q, block_k=block_k,
        bug=bug, interpret=interpret,
    )  # fmt: skip
    lse = lse.T.reshape(hq, batch, tq)  # [total, Hq] -> [Hq, B, Tq]
    o = np.swapaxes(o.reshape(batch, tq, hq, d), 1, 2)
    return tuple(_put(device, o, np.swapaxes(lse, 0, 1)))


def _varlen_kernel_of(bug):
    def kernel(
        q, k, v, *, scale, cu_seqlens_q, cu_seqlens_k, causal, window, alibi_slopes, softcap,
        block_q, block_k, interpret,
    ):  # fmt: skip
        return varlen_attention(
            q, k, v, scale=scale, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
            causal=causal, window=window, alibi_slopes=alibi_slopes, softcap=softcap,
            block_q=block_q, block_k=block_k, bug=bug, interpret=interpret,
        )  # fmt: skip

    return kernel


VARLEN_CAPS = fuzz.Capabilities(
    tiles={"block_q": (16, 32), "block_k": (16, 32)},
    head_dims=HEAD_DIMS,
    features={"causal", "window", "alibi", "softcap", "gqa", "scale"},
)


# Chunked simple GLA forward -----------------------------------------------------------------------
# The token-major packed layout: q, k [total, H, K], v, o [total, H, V], per-token gates g
# [total, H] (zeros with a per-head decay gamma), one initial and one final state per sequence
# [N, H, K, V]; a dense batch [B, T, ...] is packed as B sequences of T tokens. One program per
# head walks the sequences in turn, each chunk by chunk from its own first token: with b the
# decays' running sum inside the chunk (per-token gates: a masked row sum, sum_j [j <= i] g_j,
# the Triton lowering having no cumsum; gamma: gamma * (i + 1)),
# o = scale * ((q exp(b)) h + (causal(q k^T) * exp(b_i - b_j)) v), then
# h = exp(b_last) h + (k exp(b_last - b))^T v; a sequence starts from its initial state and its
# state after its last chunk is its final state. A chunk's rows past its sequence's end are the
# next sequence's: read as zeros, written back unchanged. The rows are padded by a chunk.


def _gla_kernel(
    n_ref, starts_ref, lengths_ref, scale_ref, gamma_ref, q_ref, k_ref, v_ref, g_ref, h0_ref,
    o_ref, ht_ref, *, chunk, per_token, bug,
):  # fmt: skip
    scale, gamma = scale_ref[0], gamma_ref[pl.program_id(0)]
    lower = _iota((chunk, chunk), 0) >= _iota((chunk, chunk), 1)
    local = _iota((chunk,), 0)  # each token's place in its chunk

    def sequence(s, carry):
        start, length = starts_ref[s], lengths_ref[s]
        state = h0_ref[s, 0].astype(F32)

        def step(c, state):
            c0 = c * chunk
            rows = pl.ds(start + c0, chunk)
            t_ok = (c0 + local) < length
            q = jnp.where(t_ok[:, None], q_ref[rows, 0, :].astype(F32), 0.0)
            k = jnp.where(t_ok[:, None], k_ref[rows, 0, :].astype(F32), 0.0)
            v = jnp.where(t_ok[:, None], v_ref[rows, 0, :].astype(F32), 0.0)
            if per_token:
                gate = jnp.where(t_ok, g_ref[rows, 0], 0.0)
                if bug == "gla_gates_unmasked_past_sequence_end":  # planted: the chunk's rows
                    gate = g_ref[rows, 0]
                bsum = jnp.where(lower, gate[None, :], 0.0).sum(axis=1)
                b_last = gate.sum()
            else:
                bsum = gamma * (local + 1).astype(F32)
                b_last = gamma * jnp.minimum(length - c0, chunk).astype(F32)
            k_w = k * jnp.exp(jnp.where(t_ok, b_last - bsum, NEG_INF))[:, None]
            causal = lower & t_ok[None, :]
            ratio = bsum[:, None] - bsum[None, :]
            scores = _dot(q, k, tb=True)
            att = scores * jnp.exp(jnp.where(causal, ratio, NEG_INF))
            o = scale * (_dot(q * jnp.exp(bsum)[:, None], state) + _dot(att, v))
            old = o_ref[rows, 0, :]
            o_ref[rows, 0, :] = jnp.where(t_ok[:, None], o.astype(o_ref.dtype), old)
            return jnp.exp(b_last) * state + _dot(k_w, v, ta=True)

        ht_ref[s, 0] = jax.lax.fori_loop(0, (length + chunk - 1) // chunk, step, state)
        return carry

    jax.lax.fori_loop(0, n_ref[0], sequence, 0)


@functools.partial(jax.jit, static_argnames=("chunk", "per_token", "bug", "interpret"))
def _gla_call(
    n_seq, starts, lengths, scale, gamma, q, k, v, g, h0, *, chunk, per_token, bug, interpret
):  # fmt: skip
    rows, heads, kd = q.shape
    vd, n_pad = v.shape[-1], h0.shape[0]

    def tokens(*lanes):  # a head's tokens: [rows, 1, *lanes]
        return pl.BlockSpec((rows, 1, *lanes), lambda h: (0, h) + (0,) * len(lanes))

    states = pl.BlockSpec((n_pad, 1, kd, vd), lambda h: (0, h, 0, 0))
    return pl.pallas_call(
        functools.partial(_gla_kernel, chunk=chunk, per_token=per_token, bug=bug),
        grid=(heads,),
        in_specs=[
            _whole((1,)), _whole(starts.shape), _whole(lengths.shape), _whole((1,)),
            _whole(gamma.shape), tokens(kd), tokens(kd), tokens(vd), tokens(), states,
        ],
        out_specs=[tokens(vd), states],
        out_shape=[
            jax.ShapeDtypeStruct((rows, heads, vd), q.dtype),
            jax.ShapeDtypeStruct((n_pad, heads, kd, vd), F32),
        ],
        interpret=interpret,
    )(n_seq, starts, lengths, scale, gamma, q, k, v, g, h0)  # fmt: skip


def gla_forward(
    q, k, v, *, scale, g=None, g_gamma=None, cu_seqlens=None, initial_state=None,
    output_final_state=False, chunk_size=16, bug="", interpret=False,
):  # fmt: skip
    """Chunked simple GLA: ``q, k [B, T, H, K]``, ``v [B, T, H, V]``, per-token log decays
    ``g [B, T, H]`` or per-head ``g_gamma [H]``; ``cu_seqlens [N + 1]``: packed sequences along
    T (then B = 1; tokens past ``cu_seqlens[-1]`` belong to none: o 0); ``initial_state
    [N, H, K, V]`` (N: B, or the sequences). Returns ``o`` (q's dtype) and the final states
    ``ht [N, H, K, V]`` (fp32), or None without ``output_final_state``."""
    batch, t_len, heads, kd = q.shape
    vd = v.shape[-1]
    if (g is None) == (g_gamma is None):
        raise ValueError("give exactly one of g (per token) and g_gamma (per head)")
    device = _device_of(q)
    total = batch * t_len
    if cu_seqlens is None:
        cu = np.arange(batch + 1, dtype=np.int64) * t_len
    else:
        cu = _host(cu_seqlens).astype(np.int64)
    n_seq = len(cu) - 1
    n_pad = _bucket(max(n_seq, 1), 1)
    rows = _bucket(total + chunk_size, chunk_size)  # a sequence's last chunk never reads past
    k_p, v_p = _bucket(kd, 16), _bucket(vd, 16)

    def packed(x, lanes):  # [B, T, H, lanes] -> [rows, H, lanes_p]
        x = _host(x).reshape(total, heads, -1)
        return _pad(x, (rows, heads, lanes))

    gates = np.zeros((rows, heads), np.float32)
    gamma = np.zeros(_bucket(heads, 8), np.float32)  # at least 8 lanes
    if g is not None:
        gates[:total] = _host(g).reshape(total, heads)
    else:
        gamma[:heads] = _host(g_gamma)
    h0 = np.zeros((n_pad, heads, k_p, v_p), np.float32)
    if initial_state is not None:
        h0[:n_seq, :, :kd, :vd] = _host(initial_state)
    starts = _pad(cu[:-1].astype(np.int32), (n_pad,))
    lengths = _pad(np.diff(cu).astype(np.int32), (n_pad,))
    o, ht = _gla_call(
        *_put(
            device, np.array([n_seq], np.int32), starts, lengths,
            np.array([scale], np.float32), gamma, packed(q, k_p), packed(k, k_p),
            packed(v, v_p), gates, h0,
        ),
        chunk=chunk_size, per_token=g is not None, bug=bug, interpret=interpret,
    )  # fmt: skip
    o = np.array(_host(o)[:total, :, :vd])
    in_none = np.ones(total, bool)  # tokens of no sequence (past cu_seqlens[-1]): 0
    in_none[int(cu[0]) : int(cu[-1])] = False
    o[in_none] = 0
    o = _put(device, o.reshape(batch, t_len, heads, vd))[0]
    return o, (_put(device, _host(ht)[:n_seq, :, :kd, :vd])[0] if output_final_state else None)


def _gla_kernel_of(bug):
    def kernel(
        q, k, v, *, g, g_gamma, scale, cu_seqlens, initial_state, output_final_state,
        chunk_size, interpret,
    ):  # fmt: skip
        return gla_forward(
            q, k, v, g=g, g_gamma=g_gamma, scale=scale, cu_seqlens=cu_seqlens,
            initial_state=initial_state, output_final_state=output_final_state,
            chunk_size=chunk_size, bug=bug, interpret=interpret,
        )  # fmt: skip

    return kernel


GLA_CAPS = fuzz.Capabilities(
    tiles={"chunk_size": (16, 32)},
    features={
        "g", "g_gamma", "varlen", "padding_tokens", "initial_state", "final_state", "scale",
    },
)  # fmt: skip


# Registration -------------------------------------------------------------------------------------


def _kernel_and_caps(family: str, bug: str) -> tuple:
    """The kernel function and capabilities of ``family``'s kernel with ``bug`` planted."""
    if family == "softmax":
        return _softmax_kernel_of(bug), SOFTMAX_CAPS
    if family == "jagged_softmax":
        return _jagged_kernel_of(bug), JAGGED_CAPS
    if family == "attention":
        return _attention_kernel_of(bug), ATTENTION_CAPS
    if family == "attention_varlen":
        return _varlen_kernel_of(bug), VARLEN_CAPS
    if family == "simple_gla_fwd":
        return _gla_kernel_of(bug), GLA_CAPS
    raise ValueError(f"no round-15 Pallas kernel of family {family!r}")


def _register(name: str, family: str, bug: str, description: str):
    kernel, caps = _kernel_and_caps(family, bug)
    return fuzz.fuzz_kernel(
        name,
        family=family,
        kernel=kernel,
        language="pallas",
        capabilities=caps,
        description=description[:200],
    )


def target_name(pattern: str) -> str:
    return f"planted15_{pattern}_pallas"


FAMILIES = ("softmax", "jagged_softmax", "attention", "attention_varlen", "simple_gla_fwd")

# The kernels with no bug planted: what a campaign finds on them is not a planted bug's.
CONTROLS = {}
for _family in FAMILIES:
    _name = f"control15_{_family}_pallas"
    CONTROLS[_name] = _register(
        _name, _family, "", f"the round-15 {_family} Pallas kernel with no bug planted"
    )

PLANTED = {}
for _pattern, _record in PATTERNS.items():
    if "pallas" not in _record.languages:
        continue
    _name = target_name(_pattern)
    _register(
        _name, _record.family, _pattern, f"planted ({_record.family}, Pallas): "
        + _record.bugs[0].what,
    )  # fmt: skip
    PLANTED[_name] = _record
