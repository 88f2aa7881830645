"""Planted one-bug Pallas kernels, round 6 (``interpret=True`` on the CPU, compiled for the GPU
through the Triton lowering): kernels the harness was not tuned on, each with one bug of a pattern
neither the earlier planted rounds, nor the project's mutants, nor the other test plugins plant,
registered through the public plugin API only. The Triton kernels of the round are in
``planted6.py``, the records of both in ``_planted6_bugs.py``.

Five kernels written the way a Pallas user writes them (a row-block softmax whose scalars ride in
one small array, a jagged softmax whose one program per column block walks the padded offsets, a
flash-attention forward with a soft cap whose key and value blocks are picked by their block
specs, a split-KV decode whose splits are reduced to normalized outputs and log-sum-exps and then
merged, a chunked simple GLA forward with both decay forms in the kernel), each with a ``bug``
switch (a static argument: each bug is its own compiled program). The wrappers pad every array on
the host (NumPy) to power-of-two sizes (head dims to at least 16, for the GPU's dots), so that no
block overhangs its array and one compiled program serves many cases; true lengths and options
are data, and the kernels mask the padding with iotas against them. Each ``planted6_*`` target
plants one bug, each ``control6_*`` target none. Each bug, its trigger and the failure class
expected:

- ``planted6_softmax_scale_truncated_pallas``: the wrapper packs the scale into the kernel's
  scalar array with the column count, an int32 array, so the scale is truncated toward 0 (0.5
  and 0.125 become 0: every valid key of a row weighted alike, and a valid key of ``x = -inf``
  gives ``-inf * 0 = NaN``); right for integer scales. Trigger: scale 0.5 and one row of two keys
  of different logits. Expected: accuracy (nan with an infinite input).
- ``planted6_jagged_stop_at_empty_segment_pallas``: the kernel walks the padded offsets (the
  wrapper repeats N after the last segment) and stops at the first segment with no rows, taken
  for the padding, instead of at the segment count: the segments after an empty one are never
  written (NaN on pallas-interpret, whose outputs start as NaN; on the GPU whatever the memory
  held). Trigger: an empty segment before a segment of one row (offsets [0, 0, 1]). Expected:
  nan.
- ``planted6_attention_tanh_overflow_pallas``: the soft cap's tanh is written as
  ``(exp(2x) - 1) / (exp(2x) + 1)``, which is Inf / Inf = NaN once 2x passes 88.7 (a logit above
  44.4 times the cap) instead of 1. Trigger: a soft cap of 1 and one query on one key of logit
  50. Expected: nan.
- ``planted6_decode_merge_by_split_max_pallas``: the split-KV merge weights each split's
  normalized output by ``exp(m_split - m)`` (its max) instead of ``exp(lse_split - lse)`` (its
  log-sum-exp): right where every split holds the same sum (one key each); lse is merged right.
  Trigger: 2 splits and a cache of 3 keys (splits of 2 keys and 1). Expected: accuracy.
- ``planted6_gla_gamma_position_from_zero_pallas``: the per-head decay's prefix inside a chunk
  is ``gamma * i`` (positions counted from 0) instead of ``gamma * (i + 1)``: the carried state
  reaches each query one decay short, and each key is decayed once too often into the next
  state; the per-token gates' prefix is right. Trigger: g_gamma other than 0, one token and the
  final state (or an initial state). Expected: accuracy.

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
    """``_planted6_bugs.py`` beside this file (a plugin is loaded by path, not as a package)."""
    return fuzz.load_beside(__file__, "_planted6_bugs.py", "kernel_fuzz_planted6_bugs")


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
# Blocks of ROWS rows; a pass over block_n-column tiles for the running max and sum, then a pass
# that writes. The column count and the scale reach the kernel in one scalar array.

ROWS = 8


def _softmax_kernel(scalars_ref, x_ref, keep_ref, bias_ref, y_ref, *, block_n):
    n_cols = scalars_ref[0].astype(jnp.int32)
    scale = scalars_ref[1].astype(F32)
    rows = x_ref.shape[0]

    def logits(j):
        start = pl.multiple_of(j * block_n, block_n)
        cols = pl.ds(start, block_n)
        s = x_ref[:, cols].astype(F32) * scale + bias_ref[:, cols]
        ok = (start + _iota(s.shape, 1) < n_cols) & (keep_ref[:, cols] != 0)
        return jnp.where(ok, s, NEG_INF)

    def stats(j, carry):
        m, ell = carry
        s = logits(j)
        m_new = jnp.maximum(m, s.max(axis=1))
        shift = jnp.where(m_new == NEG_INF, 0.0, m_new)
        return m_new, ell * jnp.exp(m - shift) + jnp.exp(s - shift[:, None]).sum(axis=1)

    n_tiles = (n_cols + block_n - 1) // block_n
    init = (jnp.full((rows,), NEG_INF, F32), jnp.zeros((rows,), F32))
    m, ell = jax.lax.fori_loop(0, n_tiles, stats, init)
    shift = jnp.where(m == NEG_INF, 0.0, m)
    inv = jnp.where(ell > 0.0, 1.0 / jnp.where(ell > 0.0, ell, 1.0), 0.0)

    def write(j, carry):
        y = jnp.exp(logits(j) - shift[:, None]) * inv[:, None]
        y_ref[:, pl.ds(pl.multiple_of(j * block_n, block_n), block_n)] = y.astype(y_ref.dtype)
        return carry

    jax.lax.fori_loop(0, n_tiles, write, 0)


@functools.partial(jax.jit, static_argnames=("block_n", "interpret"))
def _softmax_call(scalars, x, keep, bias, *, block_n, interpret):
    rows, cols = x.shape
    block = pl.BlockSpec((ROWS, cols), lambda i: (i, 0))
    return pl.pallas_call(
        functools.partial(_softmax_kernel, block_n=block_n),
        grid=(rows // ROWS,),
        in_specs=[_whole(scalars.shape), block, block, block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=interpret,
    )(scalars, x, keep, bias)


def softmax(x, *, mask=None, bias=None, scale=1.0, block_n=16, bug="", interpret=False):
    """Row softmax of ``scale * x + bias`` over ``x [R, C]``'s last axis, masked keys removed (a
    row with no valid key gives zeros); output in x's dtype, statistics in fp32."""
    rows, cols = x.shape
    if not rows or not cols:
        return x
    device = _device_of(x)
    shape = (_bucket(rows, ROWS), _bucket(cols, block_n))
    keep = np.ones((rows, cols), np.int8) if mask is None else _host(mask).astype(np.int8)
    b = np.zeros((rows, cols), np.float32) if bias is None else _host(bias).astype(np.float32)
    if bug == "softmax_scale_truncated":  # planted: the column count's dtype for both
        scalars = np.array([cols, scale], np.int32)
    else:
        scalars = np.array([cols, scale], np.float32)
    y = _softmax_call(
        *_put(device, scalars, _pad(_host(x), shape), _pad(keep, shape), _pad(b, shape)),
        block_n=block_n, interpret=interpret,
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
# One program per column block walks the segments of the padded offsets in turn (the wrapper
# repeats N after the last segment, so that offsets of a few lengths share one program): a pass
# over a segment's row tiles for each column's running max and sum, then a pass that writes its
# rows (a masked read-modify-write: the program owns its column block).


def _jagged_kernel(n_seg_ref, offsets_ref, v_ref, y_ref, *, block_n, bug):
    block_m = v_ref.shape[1]
    n_seg = n_seg_ref[0]

    def segment(i, live):
        start, end = offsets_ref[i], offsets_ref[i + 1]
        if bug == "jagged_stop_at_empty_segment":  # planted: an empty segment ends the walk
            live = live & (end > start)
        else:
            live = i < n_seg
        n_tiles = jnp.where(live, (end - start + block_n - 1) // block_n, 0)

        def tile(j):
            r0 = start + j * block_n
            rows = r0 + _iota((block_n, block_m), 0)
            x = jnp.where(rows < end, v_ref[pl.ds(r0, block_n), :].astype(F32), NEG_INF)
            return r0, rows, x

        def stats(j, ml):
            m, ell = ml
            _, _, x = tile(j)
            m_new = jnp.maximum(m, x.max(axis=0))
            shift = jnp.where(m_new == NEG_INF, 0.0, m_new)
            return m_new, ell * jnp.exp(m - shift) + jnp.exp(x - shift[None, :]).sum(axis=0)

        init = (jnp.full((block_m,), NEG_INF, F32), jnp.zeros((block_m,), F32))
        m, ell = jax.lax.fori_loop(0, n_tiles, stats, init)
        shift = jnp.where(m == NEG_INF, 0.0, m)
        inv = jnp.where(ell > 0.0, 1.0 / jnp.where(ell > 0.0, ell, 1.0), 0.0)

        def write(j, c):
            r0, rows, x = tile(j)
            y = (jnp.exp(x - shift[None, :]) * inv[None, :]).astype(y_ref.dtype)
            old = y_ref[pl.ds(r0, block_n), :]
            y_ref[pl.ds(r0, block_n), :] = jnp.where(rows < end, y, old)
            return c

        jax.lax.fori_loop(0, n_tiles, write, 0)
        return live

    jax.lax.fori_loop(0, offsets_ref.shape[0] - 1, segment, jnp.bool_(True))


@functools.partial(jax.jit, static_argnames=("block_n", "block_m", "bug", "interpret"))
def _jagged_call(n_seg, offsets, values, *, block_n, block_m, bug, interpret):
    rows, cols = values.shape
    block = pl.BlockSpec((rows, block_m), lambda i: (0, i))
    return pl.pallas_call(
        functools.partial(_jagged_kernel, block_n=block_n, bug=bug),
        grid=(cols // block_m,),
        in_specs=[_whole((1,)), _whole(offsets.shape), block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct(values.shape, values.dtype),
        interpret=interpret,
    )(n_seg, offsets, values)


def jagged_softmax(values, *, offsets, block_n=4, block_m=4, bug="", interpret=False):
    """Softmax over each segment's rows (``offsets [B + 1]``: segment starts, then N), per column
    of ``values [N, M]``; output in values' dtype."""
    n_rows, n_cols = values.shape
    offs = _host(offsets).astype(np.int32)
    n_seg = offs.shape[0] - 1
    if n_seg <= 0 or not n_rows or not n_cols:
        return values
    device = _device_of(values)
    # rows for a tile more: a segment's last tile never reads past the array
    shape = (_bucket(n_rows + block_n, 16), _bucket(n_cols, block_m))
    y = _jagged_call(
        *_put(
            device, np.array([n_seg], np.int32),
            _pad(offs, (_bucket(n_seg + 1, 4),), value=int(offs[-1])), _pad(_host(values), shape),
        ),
        block_n=block_n, block_m=block_m, bug=bug, interpret=interpret,
    )  # fmt: skip
    return _put(device, _host(y)[:n_rows, :n_cols])[0]


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
# tile and its kv head's whole (padded) keys and values; an online softmax over key tiles. Each
# query's key position is p = i + Lk - Lq (bottom-right). OPTS holds the options as data. The soft
# cap's tanh is written from exp (the same on every backend, whatever tanh each lowers to).

CAUSAL, WINDOW, LEFT, RIGHT, TQ, ALIBI, SOFTCAP = range(7)


def _tanh(x):
    """tanh in fp32 from exp: ``sign(x) (1 - 2 / (exp(2|x|) + 1))``, an odd series near 0 (where
    that form cancels)."""
    a = jnp.abs(x)
    x2 = x * x
    series = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (
        62.0 / 2835.0 + x2 * (-1382.0 / 155925.0 + x2 * (21844.0 / 6081075.0)))))))  # fmt: skip
    far = 1.0 - 2.0 / (jnp.exp(2.0 * a) + 1.0)
    return jnp.where(a < 0.25, series, jnp.where(x < 0, -far, far))


def _tanh_of_exp(x):
    """tanh as the textbook quotient ``(exp(2x) - 1) / (exp(2x) + 1)``."""
    e = jnp.exp(2.0 * x)
    return (e - 1.0) / (e + 1.0)


def _attention_kernel(
    opts_ref, floats_ref, lens_ref, slopes_ref, q_ref, k_ref, v_ref, o_ref, lse_ref, *, hq,
    block_k, bug,
):  # fmt: skip
    b, h = pl.program_id(0) // hq, pl.program_id(0) % hq
    i = pl.program_id(1)
    block_q = q_ref.shape[2]
    k_len = lens_ref[b]
    causal, window = opts_ref[CAUSAL] != 0, opts_ref[WINDOW] != 0
    alibi, capped = opts_ref[ALIBI] != 0, opts_ref[SOFTCAP] != 0
    left, right, tq = opts_ref[LEFT], opts_ref[RIGHT], opts_ref[TQ]
    scale, cap, slope = floats_ref[0], floats_ref[1], slopes_ref[h]
    tanh = _tanh_of_exp if bug == "attention_tanh_overflow" else _tanh  # planted (when it is)
    q = q_ref[0, 0].astype(F32)
    rows = i * block_q + _iota((block_q, block_k), 0)
    pos = rows + (k_len - tq)

    def step(j, carry):
        m, ell, acc = carry
        start = pl.multiple_of(j * block_k, block_k)
        cols = start + _iota((block_q, block_k), 1)
        keep = (rows < tq) & (cols < k_len)
        keep &= ~causal | (cols <= pos)
        keep &= ~window | (left < 0) | (cols >= pos - left)
        keep &= ~window | (right < 0) | (cols <= pos + right)
        k = k_ref[0, 0, pl.ds(start, block_k), :].astype(F32)
        v = v_ref[0, 0, pl.ds(start, block_k), :].astype(F32)
        # a key no query of the tile sees adds nothing, not 0 * its value (a NaN there); a max,
        # not any(): the Triton lowering has no reduce_or
        seen = keep.astype(jnp.int32).max(axis=0) > 0
        v = jnp.where(seen[:, None], v, 0.0)
        s = _dot(q, k, tb=True) * scale
        s = jnp.where(capped, cap * tanh(s / cap), s)
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
    m, ell, acc = jax.lax.fori_loop(0, (k_len + block_k - 1) // block_k, step, init)
    live = ell > 0.0
    o_ref[0, 0] = (acc / jnp.where(live, ell, 1.0)[:, None]).astype(o_ref.dtype)
    lse_ref[0, 0] = jnp.where(live, m + jnp.log(jnp.where(live, ell, 1.0)), NEG_INF)


@functools.partial(jax.jit, static_argnames=("block_q", "block_k", "bug", "interpret"))
def _attention_call(opts, floats, lens, slopes, q, k, v, *, block_q, block_k, bug, interpret):
    batch, hq, rows_q, d = q.shape
    hkv, rows_k = k.shape[1], k.shape[2]
    group = hq // hkv
    q_block = pl.BlockSpec((1, 1, block_q, d), lambda p, i: (p // hq, p % hq, i, 0))
    kv_block = pl.BlockSpec((1, 1, rows_k, d), lambda p, i: (p // hq, (p % hq) // group, 0, 0))
    return pl.pallas_call(
        functools.partial(_attention_kernel, hq=hq, block_k=block_k, bug=bug),
        grid=(batch * hq, rows_q // block_q),
        in_specs=[
            _whole(opts.shape), _whole(floats.shape), _whole(lens.shape), _whole(slopes.shape),
            q_block, kv_block, kv_block,
        ],
        out_specs=[q_block, pl.BlockSpec((1, 1, block_q), lambda p, i: (p // hq, p % hq, i))],
        out_shape=[
            jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct((batch, hq, rows_q), F32),
        ],
        interpret=interpret,
    )(opts, floats, lens, slopes, q, k, v)  # fmt: skip


def attention(
    q, k, v, *, scale, causal=False, window=None, key_lengths=None, alibi_slopes=None,
    softcap=None, block_q=16, block_k=16, bug="", interpret=False,
):  # fmt: skip
    """Attention of ``q [B, Hq, Tq, D]`` on ``k, v [B, Hkv, Tk, D]`` (``key_lengths [B]``: the
    keys in use), logits soft-capped as ``cap * tanh(s / cap)``: ``(o, lse)``, o in q's dtype,
    lse fp32 (a query with no visible key: o = 0, lse = -inf)."""
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
    opts = np.array(
        [causal, window is not None, left, right, tq, alibi_slopes is not None,
         softcap is not None, 0], np.int32,
    )  # fmt: skip
    floats = np.array([scale, softcap or 1.0], np.float32)
    slopes = np.zeros(hq, np.float32) if alibi_slopes is None else _host(alibi_slopes)
    o, lse = _attention_call(
        *_put(
            device, opts, floats, _pad(lens.astype(np.int32), (_bucket(batch, 1),)),
            _pad(slopes.astype(np.float32), (_bucket(hq, 1),)),
            _pad(_host(q), (batch, hq, rows_q, d_p)), _pad(_host(k), (batch, hkv, rows_k, d_p)),
            _pad(_host(v), (batch, hkv, rows_k, d_p)),
        ),
        block_q=block_q, block_k=block_k, bug=bug, interpret=interpret,
    )  # fmt: skip
    return tuple(_put(device, _host(o)[:, :, :tq, :d], _host(lse)[:, :, :tq]))


def _attention_kernel_of(bug):
    def kernel(
        q, k, v, *, scale, causal, window, key_lengths, alibi_slopes, softcap, block_q, block_k,
        interpret,
    ):  # fmt: skip
        return attention(
            q, k, v, scale=scale, causal=causal, window=window, key_lengths=key_lengths,
            alibi_slopes=alibi_slopes, softcap=softcap, block_q=block_q, block_k=block_k,
            bug=bug, interpret=interpret,
        )  # fmt: skip

    return kernel


HEAD_DIMS = (1, 2, 3, 8, 16, 32)
ATTENTION_CAPS = fuzz.Capabilities(
    tiles={"block_q": (16, 32), "block_k": (16, 32)},
    head_dims=HEAD_DIMS,
    features={"causal", "window", "key_padding", "alibi", "softcap", "gqa", "scale"},
)


# Split-KV decode ----------------------------------------------------------------------------------
# One program per (batch element, query head): the cache's cache_len keys in num_splits shares of
# per = ceil(cache_len / num_splits) keys, each reduced on its own to a normalized output o_s and
# its log-sum-exp lse_s (what a split-KV kernel's first pass stores), then merged in turn: the
# output as the average of the o_s weighted by exp(lse_s) (through a running log-weight), lse as
# their log-sum-exp. The query sits at key position p = cache_len - 1: the window
# [p - left, p + right] and the ALiBi distance |p - j| are measured from it.


def _logaddexp(a, b):
    """``log(exp(a) + exp(b))`` with -inf for two -inf."""
    top = jnp.maximum(a, b)
    shift = jnp.where(top == NEG_INF, 0.0, top)
    return shift + jnp.log(jnp.exp(a - shift) + jnp.exp(b - shift))


def _decode_kernel(
    opts_ref, floats_ref, lens_ref, slopes_ref, q_ref, k_ref, v_ref, o_ref, lse_ref, *, hq,
    n_splits, block_k, bug,
):  # fmt: skip
    b, h = pl.program_id(0) // hq, pl.program_id(0) % hq
    length = lens_ref[b]
    window, alibi = opts_ref[0] != 0, opts_ref[3] != 0
    left, right = opts_ref[1], opts_ref[2]
    scale, slope = floats_ref[0], slopes_ref[h]
    pos = length - 1
    q = q_ref[0, 0].astype(F32)  # [1, D]
    d = q.shape[-1]
    per = jnp.maximum((length + n_splits - 1) // n_splits, 1)

    def split(sp):
        """Split ``sp``'s ``(m, o, lse)``: its max logit, normalized output and log-sum-exp."""
        lo = sp * per
        hi = jnp.minimum(lo + per, length)

        def step(j, carry):
            m, ell, acc = carry
            k0 = lo + j * block_k
            cols = k0 + _iota((block_k,), 0)
            keep = (cols < hi) & (~window | (left < 0) | (cols >= pos - left))
            keep &= ~window | (right < 0) | (cols <= pos + right)
            k = k_ref[0, 0, pl.ds(k0, block_k), :].astype(F32)
            v = jnp.where(keep[:, None], v_ref[0, 0, pl.ds(k0, block_k), :].astype(F32), 0.0)
            s = (q * k).sum(axis=1) * scale
            s = jnp.where(alibi, s - slope * jnp.abs(pos - cols).astype(F32), s)
            s = jnp.where(keep, s, NEG_INF)
            m_new = jnp.maximum(m, s.max())
            shift = jnp.where(m_new == NEG_INF, 0.0, m_new)
            alpha = jnp.exp(m - shift)
            p = jnp.exp(s - shift)
            return m_new, ell * alpha + p.sum(), acc * alpha + (p[:, None] * v).sum(axis=0)

        n_tiles = (jnp.maximum(hi - lo, 0) + block_k - 1) // block_k
        init = (jnp.float32(NEG_INF), jnp.float32(0.0), jnp.zeros((d,), F32))
        m, ell, acc = jax.lax.fori_loop(0, n_tiles, step, init)
        live = ell > 0.0
        o = acc / jnp.where(live, ell, 1.0)
        lse = jnp.where(live, m + jnp.log(jnp.where(live, ell, 1.0)), NEG_INF)
        return m, o, lse

    def merge(sp, merged):
        w_run, o_run, lse_run = merged  # the running log-weight, output and log-sum-exp
        m_s, o_s, lse_s = split(sp)
        if bug == "decode_merge_by_split_max":  # planted: weighted by the split's max
            w_s = m_s
        else:
            w_s = lse_s
        w_new = _logaddexp(w_run, w_s)
        shift = jnp.where(w_new == NEG_INF, 0.0, w_new)
        o_new = o_run * jnp.exp(w_run - shift) + o_s * jnp.exp(w_s - shift)
        return w_new, o_new, _logaddexp(lse_run, lse_s)

    init = (jnp.float32(NEG_INF), jnp.zeros((d,), F32), jnp.float32(NEG_INF))
    _, o, lse = jax.lax.fori_loop(0, n_splits, merge, init)
    o_ref[0, 0] = o[None, :].astype(o_ref.dtype)
    lse_ref[0, 0] = jnp.full(lse_ref.shape[2:], lse, F32)


@functools.partial(jax.jit, static_argnames=("n_splits", "block_k", "bug", "interpret"))
def _decode_call(opts, floats, lens, slopes, q, k, v, *, n_splits, block_k, bug, interpret):
    batch, hq, _, d = q.shape
    hkv, rows_k = k.shape[1], k.shape[2]
    group = hq // hkv
    q_block = pl.BlockSpec((1, 1, 1, d), lambda p: (p // hq, p % hq, 0, 0))
    kv_block = pl.BlockSpec((1, 1, rows_k, d), lambda p: (p // hq, (p % hq) // group, 0, 0))
    lanes = 16  # the lse written across a row of 16 lanes (column 0 kept)
    return pl.pallas_call(
        functools.partial(
            _decode_kernel, hq=hq, n_splits=n_splits, block_k=block_k, bug=bug
        ),
        grid=(batch * hq,),
        in_specs=[
            _whole(opts.shape), _whole(floats.shape), _whole(lens.shape), _whole(slopes.shape),
            q_block, kv_block, kv_block,
        ],
        out_specs=[q_block, pl.BlockSpec((1, 1, lanes), lambda p: (p // hq, p % hq, 0))],
        out_shape=[
            jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct((batch, hq, lanes), F32),
        ],
        interpret=interpret,
    )(opts, floats, lens, slopes, q, k, v)  # fmt: skip


def decode(
    q, k, v, *, scale, cache_len, window=None, alibi_slopes=None, block_k=16, num_splits=1,
    bug="", interpret=False,
):  # fmt: skip
    """One query per sequence (``q [B, Hq, 1, D]``) against a cache ``k, v [B, Hkv, Tmax, D]`` of
    ``cache_len [B]`` keys in use, in ``num_splits`` shares merged through their log-sum-exps:
    ``(o, lse)``."""
    batch, hq, _, d = q.shape
    hkv, tmax = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"q heads {hq} must be a multiple of kv heads {hkv}")
    device = _device_of(q)
    d_p = _bucket(d, 16)
    rows_k = _bucket(tmax + block_k, 16)  # a share's last tile never reads past the array
    left, right = window if window is not None else (-1, -1)
    opts = np.array([window is not None, left, right, alibi_slopes is not None], np.int32)
    slopes = np.zeros(hq, np.float32) if alibi_slopes is None else _host(alibi_slopes)
    o, lse = _decode_call(
        *_put(
            device, opts, np.array([scale, 0.0], np.float32),
            _pad(_host(cache_len).astype(np.int32), (_bucket(batch, 1),)),
            _pad(slopes.astype(np.float32), (_bucket(hq, 1),)),
            _pad(_host(q), (batch, hq, 1, d_p)), _pad(_host(k), (batch, hkv, rows_k, d_p)),
            _pad(_host(v), (batch, hkv, rows_k, d_p)),
        ),
        n_splits=num_splits, block_k=block_k, bug=bug, interpret=interpret,
    )  # fmt: skip
    return tuple(_put(device, _host(o)[..., :d], _host(lse)[:, :, :1]))


def _decode_kernel_of(bug):
    def kernel(q, k, v, *, scale, cache_len, window, alibi_slopes, block_k, num_splits, interpret):
        return decode(
            q, k, v, scale=scale, cache_len=cache_len, window=window, alibi_slopes=alibi_slopes,
            block_k=block_k, num_splits=num_splits, bug=bug, interpret=interpret,
        )  # fmt: skip

    return kernel


DECODE_CAPS = fuzz.Capabilities(
    tiles={"block_k": (16, 32), "num_splits": (1, 2, 4)},
    head_dims=HEAD_DIMS,
    features={"window", "alibi", "gqa", "scale", "splits"},
)


# Chunked simple GLA forward -----------------------------------------------------------------------
# One program per (batch element, head), chunk by chunk: with b the decays' running sum inside the
# chunk (per-token gates: a masked row sum, sum_j [j <= i] g_j, the Triton lowering having no
# cumsum; a per-head decay gamma: gamma * (i + 1)), o = scale * ((q exp(b)) h + (causal(q k^T) *
# exp(b_i - b_j)) v), then h = exp(b_last) h + (k exp(b_last - b))^T v. The wrapper lays tensors
# out as [B, H, T, K], T padded to whole chunks.


def _gla_kernel(
    t_ref, scale_ref, gamma_ref, q_ref, k_ref, v_ref, g_ref, h0_ref, o_ref, ht_ref, *, chunk,
    per_token, bug,
):  # fmt: skip
    t_len, scale = t_ref[0], scale_ref[0]
    gamma = gamma_ref[pl.program_id(1)]
    offs = _iota((chunk, chunk), 0)  # the row i of each (i, j)
    lower = offs >= _iota((chunk, chunk), 1)
    local = _iota((chunk,), 0)  # each token's place in its chunk

    def step(c, state):
        start = pl.multiple_of(c * chunk, chunk)
        rows = pl.ds(start, chunk)
        t_ok = (start + local) < t_len
        q = jnp.where(t_ok[:, None], q_ref[0, 0, rows, :].astype(F32), 0.0)
        k = jnp.where(t_ok[:, None], k_ref[0, 0, rows, :].astype(F32), 0.0)
        v = jnp.where(t_ok[:, None], v_ref[0, 0, rows, :].astype(F32), 0.0)
        if per_token:
            gate = jnp.where(t_ok, g_ref[0, 0, rows], 0.0)
            bsum = jnp.where(lower, gate[None, :], 0.0).sum(axis=1)
            b_last = gate.sum()
        else:
            if bug == "gla_gamma_position_from_zero":  # planted: positions from 0
                bsum = gamma * local.astype(F32)
            else:
                bsum = gamma * (local + 1).astype(F32)
            b_last = gamma * jnp.minimum(t_len - start, chunk).astype(F32)
        causal = lower & t_ok[None, :]
        decay = jnp.exp(jnp.where(causal, bsum[:, None] - bsum[None, :], NEG_INF))
        att = _dot(q, k, tb=True) * decay
        o = scale * (_dot(q * jnp.exp(bsum)[:, None], state) + _dot(att, v))
        o_ref[0, 0, rows, :] = o.astype(o_ref.dtype)
        k_w = k * jnp.exp(jnp.where(t_ok, b_last - bsum, NEG_INF))[:, None]
        return jnp.exp(b_last) * state + _dot(k_w, v, ta=True)

    n_chunks = (t_len + chunk - 1) // chunk
    ht_ref[0, 0] = jax.lax.fori_loop(0, n_chunks, step, h0_ref[0, 0].astype(F32))


@functools.partial(jax.jit, static_argnames=("chunk", "per_token", "bug", "interpret"))
def _gla_call(t_len, scale, gamma, q, k, v, g, h0, *, chunk, per_token, bug, interpret):
    batch, heads, rows, kd = q.shape
    vd = v.shape[-1]

    def per_head(*block):
        return pl.BlockSpec((1, 1, *block), lambda b, h: (b, h) + (0,) * len(block))

    return pl.pallas_call(
        functools.partial(_gla_kernel, chunk=chunk, per_token=per_token, bug=bug),
        grid=(batch, heads),
        in_specs=[
            _whole((1,)), _whole((1,)), _whole(gamma.shape), per_head(rows, kd),
            per_head(rows, kd), per_head(rows, vd), per_head(rows), per_head(kd, vd),
        ],
        out_specs=[per_head(rows, vd), per_head(kd, vd)],
        out_shape=[
            jax.ShapeDtypeStruct((batch, heads, rows, vd), q.dtype),
            jax.ShapeDtypeStruct((batch, heads, kd, vd), F32),
        ],
        interpret=interpret,
    )(t_len, scale, gamma, q, k, v, g, h0)  # fmt: skip


def gla_forward(
    q, k, v, *, scale, g=None, g_gamma=None, initial_state=None, output_final_state=False,
    chunk_size=16, bug="", interpret=False,
):  # fmt: skip
    """Chunked simple GLA: ``q, k [B, T, H, K]``, ``v [B, T, H, V]``, per-token log decays
    ``g [B, T, H]`` or per-head ``g_gamma [H]``, ``initial_state [B, H, K, V]``. Returns ``o``
    (q's dtype) and the final state ``ht [B, H, K, V]`` (fp32), or None without
    ``output_final_state``."""
    batch, t_len, heads, kd = q.shape
    vd = v.shape[-1]
    if (g is None) == (g_gamma is None):
        raise ValueError("give exactly one of g (per token) and g_gamma (per head)")
    device = _device_of(q)
    rows = _bucket(max(t_len, 1), chunk_size)
    k_p, v_p = _bucket(kd, 16), _bucket(vd, 16)

    def heads_first(x, width):  # [B, T, H, X] -> [B, H, rows, width]
        return _pad(np.swapaxes(_host(x), 1, 2), (batch, heads, rows, width))

    gates = np.zeros((batch, heads, rows), np.float32)
    gamma = np.zeros(_bucket(heads, 1), np.float32)
    if g is not None:
        gates[:, :, :t_len] = np.swapaxes(_host(g).astype(np.float32), 1, 2)
    else:
        gamma[:heads] = _host(g_gamma).astype(np.float32)
    h0 = np.zeros((batch, heads, k_p, v_p), np.float32)
    if initial_state is not None:
        h0[:, :, :kd, :vd] = _host(initial_state)
    o, ht = _gla_call(
        *_put(
            device, np.array([t_len], np.int32), np.array([scale], np.float32), gamma,
            heads_first(q, k_p), heads_first(k, k_p), heads_first(v, v_p), gates, h0,
        ),
        chunk=chunk_size, per_token=g is not None, bug=bug, interpret=interpret,
    )  # fmt: skip
    o = _put(device, np.swapaxes(_host(o)[:, :, :t_len, :vd], 1, 2))[0]
    return o, (_put(device, _host(ht)[:, :, :kd, :vd])[0] if output_final_state else None)


def _gla_kernel_of(bug):
    def kernel(
        q, k, v, *, g, g_gamma, scale, initial_state, output_final_state, chunk_size, interpret
    ):
        return gla_forward(
            q, k, v, g=g, g_gamma=g_gamma, scale=scale, initial_state=initial_state,
            output_final_state=output_final_state, chunk_size=chunk_size, bug=bug,
            interpret=interpret,
        )  # fmt: skip

    return kernel


GLA_CAPS = fuzz.Capabilities(
    tiles={"chunk_size": (16, 32)},
    features={"g", "g_gamma", "initial_state", "final_state", "scale"},
)


# Registration -------------------------------------------------------------------------------------


def _kernel_and_caps(family: str, bug: str) -> tuple:
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
    raise ValueError(f"no round-6 Pallas kernel of family {family!r}")


def _register(name: str, family: str, bug: str, description: str):
    kernel, caps = _kernel_and_caps(family, bug)
    # decode's "a decode step is the last row of a causal prefill" compares with the library's
    # prefill: the bug-free dense kernel
    siblings = {"attention": CONTROLS["control6_attention_pallas"]} if "decode" in family else None
    return fuzz.fuzz_kernel(
        name,
        family=family,
        kernel=kernel,
        language="pallas",
        capabilities=caps,
        siblings=siblings,
        description=description[:200],
    )


def target_name(pattern: str) -> str:
    return f"planted6_{pattern}_pallas"


FAMILIES = ("attention", "softmax", "jagged_softmax", "attention_decode", "simple_gla_fwd")

# The kernels with no bug planted: what a campaign finds on them is not a planted bug's.
CONTROLS = {}
for _family in FAMILIES:
    _name = f"control6_{_family}_pallas"
    CONTROLS[_name] = _register(
        _name, _family, "", f"the round-6 {_family} Pallas kernel with no bug planted"
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
