"""Planted one-bug Pallas kernels, round 3 (``interpret=True``: interpreted only, declared so;
no GPU lowering was tried): kernels the harness was not tuned on, each with one bug of a pattern
neither the earlier planted rounds nor the project's mutants plant, registered through the public
plugin API only. The Triton kernels of the round are in ``planted3.py``, the records of both in
``_planted3_bugs.py``.

Five kernels written the way a Pallas user writes them (a row-block softmax, a jagged softmax, a
flash-attention forward whose key and value blocks are picked by their block specs, a split-KV
decode with a merge, a chunked simple GLA forward), each with a ``bug`` switch (a static
argument: each bug is its own compiled program). The wrappers pad arrays on the host (NumPy) to
power-of-two buckets and pass the true lengths and options as data, so that one compiled program
serves many cases (interpret mode compiles an XLA program per shape); the kernels mask the padding
with iotas against those lengths. Each ``planted3_*`` target plants one bug, each ``control3_*``
target none. Each bug, its trigger and the failure class expected:

- ``planted3_softmax_bias_scaled_pallas``: the scale is applied after the bias is added,
  ``scale * (x + bias)`` instead of ``scale * x + bias``. Trigger: a bias, a scale other than 1
  and one row of two keys whose biases differ. Expected: accuracy.
- ``planted3_jagged_max_from_zero_pallas``: each column's running max starts at 0 instead of
  -inf, so a segment whose values are all far below 0 is shifted by 0, not by its max: its
  exponentials underflow and the column sums to 0 (or to a few subnormals). Trigger: one segment
  of 1 row holding a value below about -104 (-1e4). Expected: masking (the output of a one-row
  segment is fixed at 1; longer segments: accuracy).
- ``planted3_attention_gqa_v_head_pallas``: under GQA the value block of query head h is picked
  at kv head ``h % Hkv`` (the heads taken as interleaved) instead of ``h // (Hq / Hkv)``; keys are
  picked right. Trigger: 4 query heads on 2 kv heads (query head 1 reads kv head 1's values, not
  0's), one key. Expected: accuracy.
- ``planted3_attention_empty_row_unwritten_pallas``: key padding: a batch element with no key
  (key length 0) skips its whole program body, so its ``o`` and ``lse`` are never written and
  keep whatever the output held (NaN in interpret mode) instead of 0 and -inf. Trigger: key
  padding with a key length of 0 (one query). Expected: nan.
- ``planted3_decode_drop_partial_split_pallas``: split-KV decode: the number of splits holding
  keys is taken as ``cache_len // per`` (rounded down), so a last split with fewer than ``per``
  keys is dropped from the merge. Trigger: 2 splits and a cache of 3 keys (per = 2: key 2 is
  dropped). Expected: accuracy.
- ``planted3_gla_h0_batch0_pallas``: the initial state's block spec picks batch element 0's
  state for every batch element (its index map ``(0, h)`` as for a state shared by the batch).
  Trigger: two batch elements with different initial states, one token. Expected: accuracy.

``PLANTED`` maps each planted target to its ``_planted3_bugs.Pattern``; ``CONTROLS`` the bug-free
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
    """``_planted3_bugs.py`` beside this file (a plugin is loaded by path, not as a package)."""
    return fuzz.load_beside(__file__, "_planted3_bugs.py", "kernel_fuzz_planted3_bugs")


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
    """A host array as a JAX array (outputs are cut back to their lengths on the host: a jnp slice
    would compile a program per exact shape)."""
    return jax.device_put(np.ascontiguousarray(a))


def _iota(shape, axis):
    return jax.lax.broadcasted_iota(jnp.int32, shape, axis)


def _dot(a, b):
    return jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST, preferred_element_type=F32)


# Softmax ------------------------------------------------------------------------------------------
# Blocks of ROWS rows; a pass over block_n-column tiles for the running max and sum, then a pass
# that writes.

ROWS = 4


def _softmax_kernel(n_ref, scale_ref, x_ref, keep_ref, bias_ref, y_ref, *, block_n, bug):
    n_cols, scale = n_ref[0], scale_ref[0]

    def logits(j):
        cols = pl.ds(j * block_n, block_n)
        x, bias = x_ref[:, cols].astype(F32), bias_ref[:, cols]
        if bug == "softmax_bias_scaled":  # planted: the bias scaled with the logits
            s = (x + bias) * scale
        else:
            s = x * scale + bias
        ok = (j * block_n + _iota(s.shape, 1) < n_cols) & (keep_ref[:, cols] != 0)
        return jnp.where(ok, s, NEG_INF)

    def stats(j, carry):
        m, ell = carry
        s = logits(j)
        m_new = jnp.maximum(m, s.max(axis=1))
        shift = jnp.where(m_new == NEG_INF, 0.0, m_new)
        alpha = jnp.where(m == NEG_INF, 0.0, jnp.exp(m - shift))
        return m_new, ell * alpha + jnp.exp(s - shift[:, None]).sum(axis=1)

    n_tiles = (n_cols + block_n - 1) // block_n
    init = (jnp.full((ROWS,), NEG_INF, F32), jnp.zeros((ROWS,), F32))
    m, ell = jax.lax.fori_loop(0, n_tiles, stats, init)
    shift = jnp.where(m == NEG_INF, 0.0, m)
    denom = jnp.where(ell > 0.0, ell, 1.0)

    def write(j, carry):
        y = jnp.where(ell[:, None] > 0.0, jnp.exp(logits(j) - shift[:, None]) / denom[:, None], 0.0)
        y_ref[:, pl.ds(j * block_n, block_n)] = y.astype(y_ref.dtype)
        return carry

    jax.lax.fori_loop(0, n_tiles, write, 0)


@functools.partial(jax.jit, static_argnames=("block_n", "bug", "interpret"))
def _softmax_call(n_cols, scale, x, keep, bias, *, block_n, bug, interpret):
    rows, cols = x.shape
    block = pl.BlockSpec((ROWS, cols), lambda i: (i, 0))
    return pl.pallas_call(
        functools.partial(_softmax_kernel, block_n=block_n, bug=bug),
        grid=(rows // ROWS,),
        in_specs=[_whole((1,)), _whole((1,)), block, block, block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=interpret,
    )(n_cols, scale, x, keep, bias)


def softmax(x, *, mask=None, bias=None, scale=1.0, block_n=16, bug="", interpret=True):
    """Row softmax of ``scale * x + bias`` over ``x [R, C]``'s last axis, masked keys removed (a
    row with no valid key gives zeros); output in x's dtype, statistics in fp32."""
    rows, cols = x.shape
    if not rows or not cols:
        return x
    shape = (_bucket(rows, ROWS), _bucket(cols, block_n))
    keep = np.ones((rows, cols), np.int8) if mask is None else _host(mask).astype(np.int8)
    b = np.zeros((rows, cols), np.float32) if bias is None else _host(bias).astype(np.float32)
    y = _softmax_call(
        np.array([cols], np.int32), np.array([scale], np.float32), _pad(_host(x), shape),
        _pad(keep, shape), _pad(b, shape), block_n=block_n, bug=bug, interpret=interpret,
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
# One program per column block walks the segments: a pass over a segment's row tiles for each
# column's running max and sum, then a pass that writes its rows (a masked read-modify-write).


def _jagged_kernel(n_seg_ref, offsets_ref, v_ref, y_ref, *, block_n, bug):
    block_m = v_ref.shape[1]

    def segment(i, carry):
        start, end = offsets_ref[i], offsets_ref[i + 1]
        n_tiles = (end - start + block_n - 1) // block_n

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
            alpha = jnp.where(m == NEG_INF, 0.0, jnp.exp(m - shift))
            return m_new, ell * alpha + jnp.exp(x - shift[None, :]).sum(axis=0)

        if bug == "jagged_max_from_zero":  # planted: the running max starts at 0
            m0 = jnp.zeros((block_m,), F32)
        else:
            m0 = jnp.full((block_m,), NEG_INF, F32)
        m, ell = jax.lax.fori_loop(0, n_tiles, stats, (m0, jnp.zeros((block_m,), F32)))
        shift = jnp.where(m == NEG_INF, 0.0, m)
        denom = jnp.where(ell > 0.0, ell, 1.0)

        def write(j, c):
            r0, rows, x = tile(j)
            y = jnp.where(ell[None, :] > 0.0, jnp.exp(x - shift[None, :]) / denom[None, :], 0.0)
            old = y_ref[pl.ds(r0, block_n), :]
            y_ref[pl.ds(r0, block_n), :] = jnp.where(rows < end, y.astype(y_ref.dtype), old)
            return c

        jax.lax.fori_loop(0, n_tiles, write, 0)
        return carry

    jax.lax.fori_loop(0, n_seg_ref[0], segment, 0)


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


def jagged_softmax(values, *, offsets, block_n=4, block_m=4, bug="", interpret=True):
    """Softmax over each segment's rows (``offsets [B + 1]``: segment starts, then N), per column
    of ``values [N, M]``; output in values' dtype."""
    n_rows, n_cols = values.shape
    offs = _host(offsets).astype(np.int32)
    n_seg = offs.shape[0] - 1
    if n_seg <= 0 or not n_rows or not n_cols:
        return values
    # a bucket of rows, and a tile more: a segment's last tile never reads past the array
    shape = (_bucket(n_rows, 16) + block_n, _bucket(n_cols, block_m))
    y = _jagged_call(
        np.array([n_seg], np.int32), _pad(offs, (_bucket(n_seg + 1, 4),), value=int(offs[-1])),
        _pad(_host(values), shape), block_n=block_n, block_m=block_m, bug=bug,
        interpret=interpret,
    )  # fmt: skip
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
# One program per (batch element and query head, query tile); the block specs hand it its query
# tile and its kv head's whole (padded) keys and values; an online softmax over key tiles. Each
# query's key position is p = i + Lk - Lq (bottom-right). OPTS holds the options as data: causal,
# window, window left and right, and the query count Tq.

CAUSAL, WINDOW, LEFT, RIGHT, TQ = range(5)


def _attention_kernel(
    opts_ref, lens_ref, scale_ref, q_ref, k_ref, v_ref, o_ref, lse_ref, *, hq, block_k, bug
):
    b = pl.program_id(0) // hq
    i = pl.program_id(1)
    block_q = q_ref.shape[2]
    k_len = lens_ref[b]
    causal, window = opts_ref[CAUSAL] != 0, opts_ref[WINDOW] != 0
    left, right, tq = opts_ref[LEFT], opts_ref[RIGHT], opts_ref[TQ]
    q = q_ref[0, 0].astype(F32)
    rows = i * block_q + _iota((block_q, block_k), 0)
    pos = rows + (k_len - tq)

    def body():
        def step(j, carry):
            m, ell, acc = carry
            cols = j * block_k + _iota((block_q, block_k), 1)
            keep = (rows < tq) & (cols < k_len)
            keep &= ~causal | (cols <= pos)
            keep &= ~window | (left < 0) | (cols >= pos - left)
            keep &= ~window | (right < 0) | (cols <= pos + right)
            k = k_ref[0, 0, pl.ds(j * block_k, block_k), :].astype(F32)
            v = v_ref[0, 0, pl.ds(j * block_k, block_k), :].astype(F32)
            # a key no query of the tile sees adds nothing, not 0 * its value (a NaN there)
            v = jnp.where(keep.any(axis=0)[:, None], v, 0.0)
            s = jnp.where(keep, _dot(q, k.T) * scale_ref[0], NEG_INF)
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

    if bug == "attention_empty_row_unwritten":  # planted: nothing done (nor written) without keys
        pl.when(k_len > 0)(body)
    else:
        body()


@functools.partial(jax.jit, static_argnames=("hkv", "block_q", "block_k", "bug", "interpret"))
def _attention_call(opts, lens, scale, q, k, v, *, hkv, block_q, block_k, bug, interpret):
    batch, hq, rows_q, d = q.shape
    rows_k = k.shape[2]
    group = hq // hkv

    def kv_block(v_head):
        return pl.BlockSpec((1, 1, rows_k, d), lambda p, i: (p // hq, v_head(p % hq), 0, 0))

    if bug == "attention_gqa_v_head":  # planted: the values' kv head as if heads interleaved
        v_spec = kv_block(lambda h: h % hkv)
    else:
        v_spec = kv_block(lambda h: h // group)
    return pl.pallas_call(
        functools.partial(_attention_kernel, hq=hq, block_k=block_k, bug=bug),
        grid=(batch * hq, rows_q // block_q),
        in_specs=[
            _whole(opts.shape),
            _whole(lens.shape),
            _whole((1,)),
            pl.BlockSpec((1, 1, block_q, d), lambda p, i: (p // hq, p % hq, i, 0)),
            kv_block(lambda h: h // group),
            v_spec,
        ],
        out_specs=[
            pl.BlockSpec((1, 1, block_q, d), lambda p, i: (p // hq, p % hq, i, 0)),
            pl.BlockSpec((1, 1, block_q), lambda p, i: (p // hq, p % hq, i)),
        ],
        out_shape=[
            jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct((batch, hq, rows_q), F32),
        ],
        interpret=interpret,
    )(opts, lens, scale, q, k, v)


def attention(
    q, k, v, *, scale, causal=False, window=None, key_lengths=None, block_q=16, block_k=16,
    bug="", interpret=True,
):  # fmt: skip
    """Attention of ``q [B, Hq, Tq, D]`` on ``k, v [B, Hkv, Tk, D]`` (``key_lengths [B]``: the
    keys in use): ``(o, lse)``, o in q's dtype, lse fp32 (a query with no visible key: o = 0,
    lse = -inf)."""
    batch, hq, tq, d = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"q heads {hq} must be a multiple of kv heads {hkv}")
    if not batch * hq * tq:
        return q, _device(np.zeros((batch, hq, tq), np.float32))
    d_p = _bucket(d, 8)
    rows_q, rows_k = _bucket(tq, block_q), _bucket(max(tk, 1), block_k)
    lens = np.full(batch, tk) if key_lengths is None else _host(key_lengths)
    left, right = window if window is not None else (-1, -1)
    opts = np.array([causal, window is not None, left, right, tq], np.int32)
    o, lse = _attention_call(
        opts, lens.astype(np.int32), np.array([scale], np.float32),
        _pad(_host(q), (batch, hq, rows_q, d_p)), _pad(_host(k), (batch, hkv, rows_k, d_p)),
        _pad(_host(v), (batch, hkv, rows_k, d_p)), hkv=hkv, block_q=block_q,
        block_k=block_k, bug=bug, interpret=interpret,
    )  # fmt: skip
    return _device(_host(o)[:, :, :tq, :d]), _device(_host(lse)[:, :, :tq])


def _attention_kernel_of(bug):
    def kernel(q, k, v, *, scale, causal, window, key_lengths, block_q, block_k, interpret):
        return attention(
            q, k, v, scale=scale, causal=causal, window=window, key_lengths=key_lengths,
            block_q=block_q, block_k=block_k, bug=bug, interpret=interpret,
        )  # fmt: skip

    return kernel


HEAD_DIMS = (1, 2, 3, 8, 16, 32)
ATTENTION_CAPS = fuzz.Capabilities(
    tiles={"block_q": (16, 32), "block_k": (16, 32)},
    head_dims=HEAD_DIMS,
    features={"causal", "window", "key_padding", "gqa", "scale"},
)


# Split-KV decode ----------------------------------------------------------------------------------
# One program per (batch element and query head, split) reduces its share of the cache,
# ``per = ceil(cache_len / splits)`` keys, into (m, l, acc); a second call merges the splits.


def _decode_split_kernel(
    hq_ref, scale_ref, lens_ref, q_ref, k_ref, v_ref, m_ref, l_ref, acc_ref, *, n_splits, block_k,
    bug,
):  # fmt: skip
    b = pl.program_id(0) // hq_ref[0]
    split = pl.program_id(1)
    length = lens_ref[b]
    per = jnp.maximum((length + n_splits - 1) // n_splits, 1)
    lo = split * per
    hi = jnp.clip(lo + per, 0, length)
    if bug == "decode_drop_partial_split":  # planted: only the splits that are full
        hi = jnp.where(split < length // per, hi, lo)
    q = q_ref[0, 0].astype(F32)  # [1, D]

    def step(j, carry):
        m, ell, acc = carry
        k0 = lo + j * block_k
        ok = (k0 + _iota((block_k, 1), 0)) < hi
        k = jnp.where(ok, k_ref[0, 0, pl.ds(k0, block_k), :].astype(F32), 0.0)
        v = jnp.where(ok, v_ref[0, 0, pl.ds(k0, block_k), :].astype(F32), 0.0)
        s = jnp.where(ok[:, 0], (q * k).sum(axis=1) * scale_ref[0], NEG_INF)
        m_new = jnp.maximum(m, s.max())
        shift = jnp.where(m_new == NEG_INF, 0.0, m_new)
        alpha = jnp.exp(m - shift)
        p = jnp.exp(s - shift)
        return m_new, ell * alpha + p.sum(), acc * alpha + (p[:, None] * v).sum(axis=0)

    n_tiles = (jnp.maximum(hi - lo, 0) + block_k - 1) // block_k
    init = (jnp.float32(NEG_INF), jnp.float32(0.0), jnp.zeros((q.shape[-1],), F32))
    m, ell, acc = jax.lax.fori_loop(0, n_tiles, step, init)
    m_ref[0, 0] = m
    l_ref[0, 0] = ell
    acc_ref[0, 0] = acc


def _decode_merge_kernel(m_ref, l_ref, acc_ref, o_ref, lse_ref):
    m, ell, acc = m_ref[0], l_ref[0], acc_ref[0]  # [S], [S], [S, D]
    m_max = m.max()
    shift = jnp.where(m_max == NEG_INF, 0.0, m_max)
    w = jnp.where(m == NEG_INF, 0.0, jnp.exp(m - shift))
    total = (w * ell).sum()
    live = total > 0.0
    o_ref[0] = ((w[:, None] * acc).sum(axis=0) / jnp.where(live, total, 1.0)).astype(o_ref.dtype)
    lse_ref[0] = jnp.where(live, m_max + jnp.log(jnp.where(live, total, 1.0)), NEG_INF)


@functools.partial(jax.jit, static_argnames=("hkv", "n_splits", "block_k", "bug", "interpret"))
def _decode_call(hq, scale, lens, q, k, v, *, hkv, n_splits, block_k, bug, interpret):
    batch, heads, _, d = q.shape
    rows_k = k.shape[2]
    group = heads // hkv
    rows = batch * heads
    part = pl.BlockSpec((1, 1), lambda p, s: (p, s))
    kv_block = pl.BlockSpec(
        (1, 1, rows_k, d), lambda p, s: (p // heads, (p % heads) // group, 0, 0)
    )
    m, ell, acc = pl.pallas_call(
        functools.partial(_decode_split_kernel, n_splits=n_splits, block_k=block_k, bug=bug),
        grid=(rows, n_splits),
        in_specs=[
            _whole((1,)),
            _whole((1,)),
            _whole(lens.shape),
            pl.BlockSpec((1, 1, 1, d), lambda p, s: (p // heads, p % heads, 0, 0)),
            kv_block,
            kv_block,
        ],
        out_specs=[part, part, pl.BlockSpec((1, 1, d), lambda p, s: (p, s, 0))],
        out_shape=[
            jax.ShapeDtypeStruct((rows, n_splits), F32),
            jax.ShapeDtypeStruct((rows, n_splits), F32),
            jax.ShapeDtypeStruct((rows, n_splits, d), F32),
        ],
        interpret=interpret,
    )(hq, scale, lens, q, k, v)
    return pl.pallas_call(
        _decode_merge_kernel,
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
    ``cache_len [B]`` keys in use, in ``num_splits`` shares merged through their maxima:
    ``(o, lse)``."""
    batch, hq, _, d = q.shape
    hkv, tmax = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"q heads {hq} must be a multiple of kv heads {hkv}")
    d_p = _bucket(d, 8)
    rows_k = _bucket(tmax + block_k, 16)  # a split's last tile never reads past the array
    o, lse = _decode_call(
        np.array([hq], np.int32), np.array([scale], np.float32),
        _host(cache_len).astype(np.int32), _pad(_host(q), (batch, hq, 1, d_p)),
        _pad(_host(k), (batch, hkv, rows_k, d_p)), _pad(_host(v), (batch, hkv, rows_k, d_p)),
        hkv=hkv, n_splits=num_splits, block_k=block_k, bug=bug, interpret=interpret,
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
    tiles={"block_k": (16, 32), "num_splits": (1, 2, 3, 4)},
    head_dims=HEAD_DIMS,
    features={"gqa", "scale", "splits"},
)


# Chunked simple GLA forward -----------------------------------------------------------------------
# One program per (batch element, head), chunk by chunk: with b the gates' running sum inside the
# chunk, o = scale * ((q exp(b)) h + (causal(q k^T) * exp(b_i - b_j)) v), then
# h = exp(b_last) h + (k exp(b_last - b))^T v. Tensors laid out [B, H, T, K] on the host, T padded
# to a bucket of whole chunks.


def _gla_kernel(
    t_ref, scale_ref, gamma_ref, q_ref, k_ref, v_ref, g_ref, h0_ref, o_ref, ht_ref, *,
    chunk, per_token,
):  # fmt: skip
    t_len, scale = t_ref[0], scale_ref[0]
    gamma = gamma_ref[pl.program_id(1)]
    offs = _iota((chunk, 1), 0)
    lower = offs >= offs.T

    def step(c, state):
        rows = pl.ds(c * chunk, chunk)
        t_ok = (c * chunk + offs) < t_len  # [C, 1]
        q = jnp.where(t_ok, q_ref[0, 0, rows, :].astype(F32), 0.0)
        k = jnp.where(t_ok, k_ref[0, 0, rows, :].astype(F32), 0.0)
        v = jnp.where(t_ok, v_ref[0, 0, rows, :].astype(F32), 0.0)
        if per_token:
            gate = jnp.where(t_ok[:, 0], g_ref[0, 0, rows], 0.0)
            bsum, b_last = jnp.cumsum(gate), gate.sum()
        else:
            bsum = gamma * (offs[:, 0] + 1).astype(F32)
            b_last = gamma * jnp.minimum(t_len - c * chunk, chunk).astype(F32)
        causal = lower & t_ok.T
        decay = jnp.exp(jnp.where(causal, bsum[:, None] - bsum[None, :], 0.0))
        att = jnp.where(causal, _dot(q, k.T) * decay, 0.0)
        o = scale * (_dot(q * jnp.exp(bsum)[:, None], state) + _dot(att, v))
        o_ref[0, 0, rows, :] = o.astype(o_ref.dtype)
        k_w = k * jnp.exp(jnp.where(t_ok[:, 0], b_last - bsum, 0.0))[:, None]
        return jnp.exp(b_last) * state + _dot(k_w.T, v)

    n_chunks = (t_len + chunk - 1) // chunk
    ht_ref[0, 0] = jax.lax.fori_loop(0, n_chunks, step, h0_ref[0, 0])


@functools.partial(jax.jit, static_argnames=("chunk", "per_token", "bug", "interpret"))
def _gla_call(t_len, scale, gammas, q, k, v, g, h0, *, chunk, per_token, bug, interpret):
    batch, heads, rows, kd = q.shape
    vd = v.shape[-1]

    def per_head(*block):
        return pl.BlockSpec((1, 1, *block), lambda b, h: (b, h) + (0,) * len(block))

    if bug == "gla_h0_batch0":  # planted: batch element 0's initial state for every element
        h0_spec = pl.BlockSpec((1, 1, kd, vd), lambda b, h: (0, h, 0, 0))
    else:
        h0_spec = per_head(kd, vd)
    return pl.pallas_call(
        functools.partial(_gla_kernel, chunk=chunk, per_token=per_token),
        grid=(batch, heads),
        in_specs=[
            _whole((1,)),
            _whole((1,)),
            _whole(gammas.shape),
            per_head(rows, kd),
            per_head(rows, kd),
            per_head(rows, vd),
            per_head(rows),
            h0_spec,
        ],
        out_specs=[per_head(rows, vd), per_head(kd, vd)],
        out_shape=[
            jax.ShapeDtypeStruct((batch, heads, rows, vd), q.dtype),
            jax.ShapeDtypeStruct((batch, heads, kd, vd), F32),
        ],
        interpret=interpret,
    )(t_len, scale, gammas, q, k, v, g, h0)


def gla_forward(
    q, k, v, *, scale, g=None, g_gamma=None, initial_state=None, output_final_state=False,
    chunk_size=16, bug="", interpret=True,
):  # fmt: skip
    """Chunked simple GLA: ``q, k [B, T, H, K]``, ``v [B, T, H, V]``, per-token log decays
    ``g [B, T, H]`` or per-head ``g_gamma [H]``, ``initial_state [B, H, K, V]``. Returns ``o``
    (q's dtype) and the final state ``ht [B, H, K, V]`` (fp32), or None without
    ``output_final_state``."""
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
    gammas = np.zeros(heads, np.float32) if g_gamma is None else _host(g_gamma)
    o, ht = _gla_call(
        np.array([t_len], np.int32), np.array([scale], np.float32), gammas.astype(np.float32),
        heads_first(q, k_p), heads_first(k, k_p), heads_first(v, v_p), gates, h0,
        chunk=chunk_size, per_token=g is not None, bug=bug, interpret=interpret,
    )  # fmt: skip
    o = _device(np.swapaxes(_host(o)[:, :, :t_len, :vd], 1, 2))
    return o, (_device(_host(ht)[:, :, :kd, :vd]) if output_final_state else None)


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
    raise ValueError(f"no round-3 Pallas kernel of family {family!r}")


INTERPRETED = ("interpreted",)  # written for interpret mode (no GPU lowering tried)


def _register(name: str, family: str, bug: str, description: str):
    kernel, caps = _kernel_and_caps(family, bug)
    # decode's "a decode step is the last row of a causal prefill" compares with the library's
    # prefill: the bug-free dense kernel
    siblings = {"attention": CONTROLS["control3_attention_pallas"]} if "decode" in family else None
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
    return f"planted3_{pattern}_pallas"


FAMILIES = ("attention", "softmax", "jagged_softmax", "attention_decode", "simple_gla_fwd")

# The kernels with no bug planted: what a campaign finds on them is not a planted bug's.
CONTROLS = {}
for _family in FAMILIES:
    _name = f"control3_{_family}_pallas"
    CONTROLS[_name] = _register(
        _name, _family, "", f"the round-3 {_family} Pallas kernel with no bug planted"
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
