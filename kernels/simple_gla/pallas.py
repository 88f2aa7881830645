"""Chunked simple GLA, forward and backward, in JAX Pallas (GPU through the Triton lowering, or
``interpret=True``).

Same semantics and the same chunked algorithm as ``kernels.simple_gla.triton`` (see its docstring
and ``kernels/simple_gla/README.md``): one program per (sequence, head) walks its chunks carrying
the fp32 state; every exponent is selected before ``exp`` (``jnp.where(mask, x, -inf)``); chunks
longer than 64 are processed as 64 x 64 tiles, those above the diagonal skipped; the backward
reruns the forward for the state entering each chunk, then walks the chunks backwards. Every loop
is a runtime loop (``fori_loop``): with the tiles unrolled in Python, compiling for the GPU set
off XLA's slow-compile alarm, and six examples of a GPU hunt (which compiles a kernel for every
chunk size) did not finish in nine minutes.

GPU lowering constraints shape the wrapper: every array inside the kernel has power-of-two sizes
and no block overhangs its array. The wrapper therefore gathers every sequence (a batch row, or
a ``cu_seqlens`` segment) into a zero-padded, head-major layout ``[N, H, Lp, Kp]`` with ``Lp`` and
``Kp``/``Vp`` powers of two (``Lp`` a multiple of the chunk, head dims >= 16 for ``jnp.dot``), so
each program owns one ``[Lp, Kp]`` block and no two programs touch the same rows. True lengths are
data (an int32 per sequence): one compiled kernel serves every length in a bucket. Outputs are
gathered back to ``[B, T, H, *]``; an ``out`` array is scattered into the padded layout and passed
as the output's initial contents (aliased), so an element the kernel never writes keeps its value.

Prefix sums are written as masked row sums (``sum_j [j <= i] g_j``) rather than ``cumsum``, which
the Triton lowering does not provide.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

try:  # the Triton lowering's options (absent from a JAX without GPU Pallas)
    from jax.experimental.pallas import triton as _pl_triton
except ImportError:  # pragma: no cover
    _pl_triton = None  # type: ignore[assignment]

from kernels._programs import compiled_programs
from kernels._validate import next_pow2
from kernels.simple_gla._common import Problem, check_like, check_problem

F32 = jnp.float32
DTYPES = (jnp.dtype(jnp.float32), jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))


@dataclass(frozen=True)
class _Static:
    """What a compiled kernel is specialised on (besides the array shapes and dtypes)."""

    per_token: bool  # per-token gates g (else a per-head g_gamma)
    chunk: int  # BT
    tile: int  # BS
    states: bool = False  # the backward's first pass: the state entering every chunk, no o


# Shared memory the Triton lowering may use per program (an H100 has 227 KiB). The lowering stages
# dot operands in shared memory, about GPU_SMEM_PER_ELEMENT bytes per element of a
# (tile x (Kp + Vp)) fp32 slab with one pipeline stage (measured on an H100 with the tiles
# unrolled; an upper bound since they are loops).
GPU_SMEM_BUDGET = 160 * 1024
GPU_SMEM_PER_ELEMENT = 48


def gpu_tile(tile: int, kp: int, vp: int) -> int:
    """The tile the compiled kernel uses: ``tile`` halved (not below 16) until its dot operands fit
    in shared memory. The result does not depend on it (tiles only split the chunk's matrix)."""
    while tile > 16 and tile * (kp + vp) * GPU_SMEM_PER_ELEMENT > GPU_SMEM_BUDGET:
        tile //= 2
    return tile


def _tile_for(p: Problem, interpret: bool) -> int:
    return p.tile if interpret else gpu_tile(p.tile, p.block_k, p.block_v)


def _compiler_params(interpret: bool):
    """One pipeline stage on the GPU: the chunk loop carries the state, so prefetching the next
    chunk's rows buys little and its buffers would double the shared memory."""
    if interpret or _pl_triton is None:
        return None
    return _pl_triton.CompilerParams(num_stages=1)


def _dot(a, b, *, ta: bool = False, tb: bool = False):
    """``a @ b`` (optionally transposed operands), fp32 operands, exact products, fp32 result."""
    dims = (((0,) if ta else (1,), (1,) if tb else (0,)), ((), ()))
    return jax.lax.dot_general(
        a, b, dims, precision=jax.lax.Precision.HIGHEST, preferred_element_type=F32
    )


def _intra_weights(b_rows, b_cols, rows, cols):
    """``exp(b_i - b_j)`` for ``j <= i`` and exactly 0 above the diagonal.

    The exponent is selected before exp: above the diagonal ``b_i - b_j > 0`` and, with large
    decays, ``exp`` of it overflows (then ``0 * Inf = NaN`` if the mask were applied after).
    """
    causal = rows[:, None] >= cols[None, :]
    return jnp.exp(jnp.where(causal, b_rows[:, None] - b_cols[None, :], -jnp.inf))


def _state_weights(b, b_last, valid):
    """``exp(b_last - b_j)`` for a chunk's live rows, 0 for padded rows.

    In the g_gamma form the padded rows of a partial chunk have ``b_j = gamma (j + 1)`` past the
    last live token, so ``b_last - b_j > 0``: selected away before exp.
    """
    return jnp.exp(jnp.where(valid, b_last - b, -jnp.inf))


def _tile_decay(g_ref, g_chunk, gamma, t0, n_valid, r, bs, bt, per_token):
    """Cumulative log decay ``b`` of the chunk's rows ``[r * bs, (r + 1) * bs)``."""
    rows = r * bs + jax.lax.broadcasted_iota(jnp.int32, (bs,), 0)
    if per_token:
        g = jnp.where(rows < n_valid, g_ref[pl.ds(t0 + r * bs, bs)].astype(F32), 0.0)
        chunk_idx = jax.lax.broadcasted_iota(jnp.int32, (bt,), 0)
        prefix = jnp.sum(jnp.where(chunk_idx < r * bs, g_chunk, 0.0))
        lower = rows[:, None] >= rows[None, :]
        return prefix + jnp.sum(jnp.where(lower, g[None, :], 0.0), axis=1)
    return gamma * (rows + 1).astype(F32)


def _rows(ref, start, bs, valid):
    """``bs`` rows of a ``[Lp, D]`` block as fp32, rows past the sequence end zeroed."""
    return jnp.where(valid[:, None], ref[pl.ds(start, bs), :].astype(F32), 0.0)


def _chunk_head(g_ref, gamma, seq_len, c, bt, per_token):
    t0 = pl.multiple_of(c * bt, bt)
    n_valid = jnp.minimum(seq_len - c * bt, bt)
    chunk_idx = jax.lax.broadcasted_iota(jnp.int32, (bt,), 0)
    if per_token:
        g_chunk = jnp.where(chunk_idx < n_valid, g_ref[pl.ds(t0, bt)].astype(F32), 0.0)
        b_last = jnp.sum(g_chunk)
    else:
        g_chunk = None
        b_last = gamma * n_valid.astype(F32)
    return t0, n_valid, g_chunk, b_last


def _iota(n: int):
    return jax.lax.broadcasted_iota(jnp.int32, (n,), 0)


def _fwd_kernel(
    len_ref, scale_ref, gamma_ref, q_ref, k_ref, v_ref, g_ref, h0_ref, *refs, static: _Static
):
    """One (sequence, head): ``o`` and ``ht``, or (``static.states``) the state entering every
    chunk and the final one. Trailing refs: the aliased initial contents, then the outputs.

    Chunks, tiles and the column tiles left of the diagonal are runtime loops (``fori_loop``):
    the program does not grow with the chunk, and tiles past a partial chunk's end are skipped."""
    if static.states:
        (states_ref,) = refs
    else:
        _, _, o_ref, ht_ref = refs  # the first two: aliased initial contents, never read
    bt, bs = static.chunk, static.tile
    seq_len = len_ref[0]
    scale = scale_ref[0]
    gamma = gamma_ref[0]
    kp, vp = q_ref.shape[-1], v_ref.shape[-1]
    n_chunks = (seq_len + bt - 1) // bt

    def body(c, state):
        t0, n_valid, g_chunk, b_last = _chunk_head(g_ref, gamma, seq_len, c, bt, static.per_token)
        if static.states:
            states_ref[pl.ds(c, 1), :, :] = state[None]
        n_tiles = (n_valid + bs - 1) // bs  # the tiles holding live tokens

        def tile(i, kv):
            rows = i * bs + _iota(bs)
            valid = rows < n_valid
            start = pl.multiple_of(t0 + i * bs, bs)
            q = _rows(q_ref, start, bs, valid)
            k = _rows(k_ref, start, bs, valid)
            v = _rows(v_ref, start, bs, valid)
            b = _tile_decay(g_ref, g_chunk, gamma, t0, n_valid, i, bs, bt, static.per_token)
            if not static.states:

                def column(s, o):  # the column tiles at or left of the diagonal
                    cols = s * bs + _iota(bs)
                    col_start = pl.multiple_of(t0 + s * bs, bs)
                    k_s = _rows(k_ref, col_start, bs, cols < n_valid)
                    v_s = _rows(v_ref, col_start, bs, cols < n_valid)
                    b_s = _tile_decay(
                        g_ref, g_chunk, gamma, t0, n_valid, s, bs, bt, static.per_token
                    )
                    w_intra = _intra_weights(b, b_s, rows, cols)
                    a = _dot(q, k_s, tb=True) * w_intra
                    return o + _dot(a, v_s)

                o = jax.lax.fori_loop(0, i + 1, column, _dot(q, state) * jnp.exp(b)[:, None])
                o_ref[pl.ds(start, bs), :] = (o * scale).astype(o_ref.dtype)
            w_state = _state_weights(b, b_last, valid)
            return kv + _dot(k * w_state[:, None], v, ta=True)

        kv = jax.lax.fori_loop(0, n_tiles, tile, jnp.zeros((kp, vp), F32))
        decay_last = jnp.exp(b_last)
        return state * decay_last + kv

    state = jax.lax.fori_loop(0, n_chunks, body, h0_ref[...].astype(F32))
    if static.states:
        states_ref[pl.ds(n_chunks, 1), :, :] = state[None]
    else:
        ht_ref[...] = state


def _bwd_kernel(
    len_ref,
    scale_ref,
    gamma_ref,
    q_ref,
    k_ref,
    v_ref,
    do_ref,
    g_ref,
    dht_ref,
    st_ref,
    *refs,
    static: _Static,
):
    """One (sequence, head): ``dq, dk, dv, dg, dh0``. Trailing refs: the five aliased initial
    contents (never read), then the five outputs. Runtime loops as in the forward."""
    dq_ref, dk_ref, dv_ref, dg_ref, dh0_ref = refs[5:]
    bt, bs = static.chunk, static.tile
    seq_len = len_ref[0]
    scale = scale_ref[0]
    gamma = gamma_ref[0]
    kp, vp = q_ref.shape[-1], v_ref.shape[-1]
    n_chunks = (seq_len + bt - 1) // bt

    def body(cc, d_state):
        c = n_chunks - 1 - cc
        t0, n_valid, g_chunk, b_last = _chunk_head(g_ref, gamma, seq_len, c, bt, static.per_token)
        h_prev = st_ref[pl.ds(c, 1), :, :][0]
        if static.per_token:
            h_end = st_ref[pl.ds(c + 1, 1), :, :][0]
            boundary = jnp.sum(d_state * h_end)  # <dS, H_c>
        n_tiles = (n_valid + bs - 1) // bs  # the tiles holding live tokens

        def tile(rr, acc):  # tiles last to first: dg is a suffix sum
            d_acc, carry = acc  # carry: the sum of db over the tiles after this one
            i = n_tiles - 1 - rr
            rows = i * bs + _iota(bs)
            valid = rows < n_valid
            start = pl.multiple_of(t0 + i * bs, bs)
            q = _rows(q_ref, start, bs, valid)
            k = _rows(k_ref, start, bs, valid)
            v = _rows(v_ref, start, bs, valid)
            do = _rows(do_ref, start, bs, valid)
            b = _tile_decay(g_ref, g_chunk, gamma, t0, n_valid, i, bs, bt, static.per_token)
            e_q = jnp.exp(b) * scale

            def column(s, dq):  # dq: the column tiles at or left of the diagonal
                cols = s * bs + _iota(bs)
                col_start = pl.multiple_of(t0 + s * bs, bs)
                k_s = _rows(k_ref, col_start, bs, cols < n_valid)
                v_s = _rows(v_ref, col_start, bs, cols < n_valid)
                b_s = _tile_decay(g_ref, g_chunk, gamma, t0, n_valid, s, bs, bt, static.per_token)
                w_rec = _intra_weights(b, b_s, rows, cols)  # the forward's weights, recomputed
                da = _dot(do, v_s, tb=True) * w_rec * scale
                return dq + _dot(da, k_s)

            def row(j, dkv):  # dk, dv: the row tiles at or below the diagonal
                dk, dv = dkv
                rows_j = j * bs + _iota(bs)
                row_start = pl.multiple_of(t0 + j * bs, bs)
                q_j = _rows(q_ref, row_start, bs, rows_j < n_valid)
                do_j = _rows(do_ref, row_start, bs, rows_j < n_valid)
                b_j = _tile_decay(g_ref, g_chunk, gamma, t0, n_valid, j, bs, bt, static.per_token)
                w_col = _intra_weights(b_j, b, rows_j, rows) * scale
                a_t = _dot(q_j, k, tb=True) * w_col
                da_t = _dot(do_j, v, tb=True) * w_col
                return dk + _dot(da_t, q_j, ta=True), dv + _dot(a_t, do_j, ta=True)

            dq = jax.lax.fori_loop(0, i + 1, column, _dot(do, h_prev, tb=True) * e_q[:, None])
            w_state = _state_weights(b, b_last, valid)
            dk0 = _dot(v, d_state, tb=True) * w_state[:, None]
            dv0 = _dot(k, d_state) * w_state[:, None]
            dk, dv = jax.lax.fori_loop(i, n_tiles, row, (dk0, dv0))
            dq_ref[pl.ds(start, bs), :] = dq.astype(dq_ref.dtype)
            dk_ref[pl.ds(start, bs), :] = dk.astype(dk_ref.dtype)
            dv_ref[pl.ds(start, bs), :] = dv.astype(dv_ref.dtype)
            if static.per_token:
                db = jnp.sum(q * dq, axis=1) - jnp.sum(k * dk, axis=1)
                db = db + jnp.where(rows == n_valid - 1, boundary, 0.0)
                upper = rows[None, :] >= rows[:, None]
                suffix = jnp.sum(jnp.where(upper, db[None, :], 0.0), axis=1)
                dg_ref[pl.ds(start, bs)] = suffix + carry
                carry = carry + jnp.sum(db)
            return d_acc + _dot(q * e_q[:, None], do, ta=True), carry

        zeros = (jnp.zeros((kp, vp), F32), jnp.zeros((), F32))
        d_acc, _ = jax.lax.fori_loop(0, n_tiles, tile, zeros)
        return d_state * jnp.exp(b_last) + d_acc

    dh0_ref[...] = jax.lax.fori_loop(0, n_chunks, body, dht_ref[...].astype(F32))


# Layout: [B, T, H, D] <-> [N, H, Lp, Dp] -------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """Host index arrays moving tokens between the packed and the padded layouts.

    The padded layout is bucketed so that one compiled kernel serves many problems: ``Lp`` a
    power of two >= max(chunk, 128), ``Np`` >= 4 and ``Hp`` >= 2 powers of two; padded
    sequences and heads have length 0 (their programs do nothing).
    """

    lengths: np.ndarray  # [Np, Hp] int32 (0 for padded sequences and heads)
    gather: np.ndarray  # [N, Lp] flat token index (0 where padding)
    live: np.ndarray  # [N, Lp] bool
    seq_of: np.ndarray  # [B*T] sequence of each flat token
    pos_of: np.ndarray  # [B*T] position of each flat token in its sequence
    used: np.ndarray  # [B*T] bool: the token belongs to a sequence (not past cu_seqlens[-1])
    lp: int
    np_: int
    hp: int


LP_MIN = 128


def _layout(p: Problem) -> _Layout:
    lp = max(p.chunk_size, LP_MIN, next_pow2(p.max_len))
    n = p.n_seqs
    np_, hp = max(4, next_pow2(n)), max(2, next_pow2(p.heads))
    gather = np.zeros((n, lp), np.int32)
    live = np.zeros((n, lp), bool)
    seq_of = np.zeros(p.batch * p.length, np.int32)
    pos_of = np.zeros(p.batch * p.length, np.int32)
    used = np.zeros(p.batch * p.length, bool)
    lengths = np.zeros((np_, hp), np.int32)
    for i, (b, bos, eos) in enumerate(p.seqs):
        flat = b * p.length + np.arange(bos, eos)
        gather[i, : eos - bos] = flat
        live[i, : eos - bos] = True
        seq_of[flat] = i
        pos_of[flat] = np.arange(eos - bos)
        used[flat] = True
        lengths[i, : p.heads] = eos - bos
    return _Layout(lengths, gather, live, seq_of, pos_of, used, lp, np_, hp)


# The layout (gathering sequences, padding to buckets, scattering back) is done with NumPy
# wherever the arrays live, and arrays go to the device with ``jax.device_put``: jnp ops (and
# ``jnp.asarray``) compile an XLA program per exact input shape (on a GPU, tens of ms each,
# loaded again in every process), while the kernels compile once per bucket
# (tests/kernels/test_pallas_buckets.py). On a GPU that costs a copy of the inputs to the host
# and of the padded arrays back.


def _to_padded(x, lay: _Layout, dp: int | None, host: bool):
    """``[B, T, H, D]`` (or ``[B, T, H]``) -> ``[Np, Hp, Lp, Dp]`` (``[Np, Hp, Lp]``), zeros in
    every padded position.

    On the host (interpret mode on the CPU) the arrays are also widened to fp32: the kernel
    converts every load to fp32 anyway and rounds only its stores, which the wrapper then does
    instead (the same round-to-nearest-even), so the numbers are identical and one compiled
    interpreter serves all three input dtypes.
    """
    x = np.asarray(x).astype(np.float32) if host else np.asarray(x)
    flat = x.reshape((-1, *x.shape[2:]))
    y = np.take(flat, lay.gather, axis=0)  # [N, Lp, H, ...]
    mask = lay.live.reshape(lay.live.shape + (1,) * (y.ndim - 2))
    y = np.where(mask, y, np.zeros((), y.dtype))
    y = np.moveaxis(y, 2, 1)  # [N, H, Lp, ...]
    pads = [(0, lay.np_ - y.shape[0]), (0, lay.hp - y.shape[1])] + [(0, 0)] * (y.ndim - 2)
    if dp is not None:
        pads[-1] = (0, dp - y.shape[-1])
    return jax.device_put(np.pad(y, pads))


def _from_padded(y, lay: _Layout, shape, dtype):
    """``[Np, Hp, Lp, Dp]`` (or ``[Np, Hp, Lp]``) -> ``shape`` (``[B, T, H, D]`` / ``[B, T, H]``)
    in ``dtype``; tokens of no sequence (past ``cu_seqlens[-1]``) are 0."""
    y = np.moveaxis(np.asarray(y)[:, : shape[2]], 1, 2)  # [Np, Lp, H, ...]
    flat = y[lay.seq_of, lay.pos_of]  # [B*T, H, ...]
    if not lay.used.all():
        used = lay.used.reshape((-1,) + (1,) * (flat.ndim - 1))
        flat = np.where(used, flat, np.zeros((), flat.dtype))
    if len(shape) == 4:
        flat = flat[..., : shape[-1]]
    # The host's fp32 results are rounded here (round to nearest even, as the kernel's stores
    # would round); a compiled kernel's are in their dtype already.
    return jax.device_put(flat.reshape(shape).astype(dtype, copy=False))


def _state_to_padded(x, lay: _Layout, kp: int, vp: int):
    """``[N, H, K, V]`` -> ``[Np, Hp, Kp, Vp]`` (zeros for None)."""
    if x is None:
        return jnp.zeros((lay.np_, lay.hp, kp, vp), F32)
    x = np.asarray(x)
    n, h, k, v = x.shape
    return jax.device_put(np.pad(x, ((0, lay.np_ - n), (0, lay.hp - h), (0, kp - k), (0, vp - v))))


def _state_from_padded(x, p: Problem):
    """``[Np, Hp, Kp, Vp]`` -> ``[N, H, K, V]``."""
    return jax.device_put(np.asarray(x)[: p.n_seqs, : p.heads, : p.k_dim, : p.v_dim])


# XLA's CPU backend spends most of an interpreted kernel's first call optimising the host loop that
# runs the grid; the kernels are small, so interpret mode compiles without backend optimisation.
_INTERPRET_OPTIONS = {"xla_backend_optimization_level": 0}


def _jit(fn):
    compiled = compiled_programs(fn, ("static", "interpret"))
    interpreted = compiled_programs(
        fn, ("static", "interpret"), compiler_options=_INTERPRET_OPTIONS
    )

    @functools.wraps(fn)
    def call(*args, static: _Static, interpret: bool):
        return (interpreted if interpret else compiled)(*args, static=static, interpret=interpret)

    return call


def _scalar_specs():
    return [
        pl.BlockSpec((None, 1), lambda i, j: (i, j)),  # length of (sequence, head)
        pl.BlockSpec((1,), lambda i, j: (0,)),  # scale
        pl.BlockSpec((1,), lambda i, j: (j,)),  # g_gamma of the head
    ]


@_jit
def _fwd_padded(
    lengths, scale, gamma, q, k, v, g, h0, o_init, ht_init, *, static: _Static, interpret: bool
):
    n, h, lp, kp = q.shape
    vp = v.shape[-1]
    row = lambda d: pl.BlockSpec((None, None, lp, d), lambda i, j: (i, j, 0, 0))  # noqa: E731
    state_spec = pl.BlockSpec((None, None, kp, vp), lambda i, j: (i, j, 0, 0))
    operands = [lengths, scale, gamma, q, k, v, g, h0]
    specs = [
        *_scalar_specs(),
        row(kp),
        row(kp),
        row(vp),
        pl.BlockSpec((None, None, lp), lambda i, j: (i, j, 0)),
        state_spec,
    ]
    if static.states:
        nts = next_pow2(lp // static.chunk + 1)
        out_specs = [pl.BlockSpec((None, None, nts, kp, vp), lambda i, j: (i, j, 0, 0, 0))]
        out_shape = [jax.ShapeDtypeStruct((n, h, nts, kp, vp), F32)]
        aliases = {}
    else:
        out_specs = [row(vp), state_spec]
        out_shape = [
            jax.ShapeDtypeStruct((n, h, lp, vp), q.dtype),
            jax.ShapeDtypeStruct((n, h, kp, vp), F32),
        ]
        aliases = {len(operands): 0, len(operands) + 1: 1}
        operands += [o_init, ht_init]
        specs += out_specs
    return pl.pallas_call(
        functools.partial(_fwd_kernel, static=static),
        grid=(n, h),
        in_specs=specs,
        out_specs=out_specs,
        out_shape=out_shape,
        input_output_aliases=aliases,
        interpret=interpret,
        compiler_params=_compiler_params(interpret),
    )(*operands)


@_jit
def _bwd_padded(
    lengths, scale, gamma, q, k, v, do, g, dht, states, inits, *, static: _Static, interpret: bool
):
    n, h, lp, kp = q.shape
    vp = v.shape[-1]
    nts = states.shape[2]
    row = lambda d: pl.BlockSpec((None, None, lp, d), lambda i, j: (i, j, 0, 0))  # noqa: E731
    tok_spec = pl.BlockSpec((None, None, lp), lambda i, j: (i, j, 0))
    state_spec = pl.BlockSpec((None, None, kp, vp), lambda i, j: (i, j, 0, 0))
    operands = [lengths, scale, gamma, q, k, v, do, g, dht, states]
    specs = [
        *_scalar_specs(),
        row(kp),
        row(kp),
        row(vp),
        row(vp),
        tok_spec,
        state_spec,
        pl.BlockSpec((None, None, nts, kp, vp), lambda i, j: (i, j, 0, 0, 0)),
    ]
    out_specs = [row(kp), row(kp), row(vp), tok_spec, state_spec]
    out_shape = [
        jax.ShapeDtypeStruct((n, h, lp, kp), q.dtype),
        jax.ShapeDtypeStruct((n, h, lp, kp), q.dtype),
        jax.ShapeDtypeStruct((n, h, lp, vp), q.dtype),
        jax.ShapeDtypeStruct((n, h, lp), F32),
        jax.ShapeDtypeStruct((n, h, kp, vp), F32),
    ]
    aliases = {len(operands) + i: i for i in range(5)}
    operands += list(inits)
    specs += out_specs
    return pl.pallas_call(
        functools.partial(_bwd_kernel, static=static),
        grid=(n, h),
        in_specs=specs,
        out_specs=out_specs,
        out_shape=out_shape,
        input_output_aliases=aliases,
        interpret=interpret,
        compiler_params=_compiler_params(interpret),
    )(*operands)


# Wrappers -------------------------------------------------------------------------------------


def _spec(name: str, a: Any) -> tuple[tuple[int, ...], str] | None:
    if a is None:
        return None
    if not isinstance(a, jax.Array):
        raise TypeError(f"{name} must be a jax.Array, got {type(a).__name__}")
    return tuple(a.shape), str(a.dtype)


def _problem(q, k, v, g, g_gamma, scale, initial_state, cu_seqlens, chunk_size) -> Problem:
    specs = {
        n: _spec(n, a)
        for n, a in (
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
        if not isinstance(cu_seqlens, (jax.Array, np.ndarray)):
            raise TypeError(f"cu_seqlens must be a jax.Array, got {type(cu_seqlens).__name__}")
        if cu_seqlens.ndim != 1:
            raise ValueError(f"cu_seqlens.shape={tuple(cu_seqlens.shape)} must be [N + 1]")
        cu_dtype = str(cu_seqlens.dtype)
        cu_host = np.asarray(cu_seqlens).tolist()  # concrete values: the layout depends on them
    return check_problem(
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


def _check_out(name: str, out: Any, shape, dtype: str) -> None:
    if out is None:
        return
    if not isinstance(out, jax.Array):
        raise TypeError(f"{name} must be a jax.Array or None, got {type(out).__name__}")
    check_like(name, tuple(out.shape), str(out.dtype), shape, dtype)


def _on_host(*arrays) -> bool:
    """Whether every array lives on the CPU (then the layout is done with NumPy, no XLA)."""
    return all(d.platform == "cpu" for a in arrays if a is not None for d in a.devices())


def _operands(p: Problem, lay: _Layout, host: bool, q, k, v, g, g_gamma):
    kp, vp = p.block_k, p.block_v
    lengths = jax.device_put(lay.lengths)
    scale = jnp.array([p.scale], F32)
    gamma = np.zeros(lay.hp, np.float32)
    if g_gamma is not None:
        gamma[: p.heads] = np.asarray(g_gamma, np.float32)
    if g is None:
        gp = jnp.zeros((lay.np_, lay.hp, lay.lp), F32)
    else:
        gp = _to_padded(g, lay, None, host)
    return (
        lengths,
        scale,
        jax.device_put(gamma),
        _to_padded(q, lay, kp, host),
        _to_padded(k, lay, kp, host),
        _to_padded(v, lay, vp, host),
        gp,
    )


def chunk_simple_gla_fwd(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    g: jax.Array | None = None,
    g_gamma: jax.Array | None = None,
    scale: float | None = None,
    initial_state: jax.Array | None = None,
    output_final_state: bool = False,
    cu_seqlens: jax.Array | None = None,
    chunk_size: int = 64,
    out: jax.Array | None = None,
    out_ht: jax.Array | None = None,
    interpret: bool = False,
) -> tuple[jax.Array, jax.Array | None]:
    """Simple GLA forward: ``h_t = exp(g_t) h_{t-1} + k_t^T v_t``, ``o_t = scale * q_t h_t``.

    Args are those of ``kernels.simple_gla.triton.chunk_simple_gla_fwd`` with JAX arrays
    (``cu_seqlens`` must be concrete: the padded layout is built from its values); ``out`` and
    ``out_ht`` are the initial contents of the outputs (aliased): an element the kernel never
    writes keeps its value there.

    Returns:
        ``o [B, T, H, V]`` in q's dtype, and ``ht [N, H, K, V]`` float32 (or None).
    """
    p = _problem(q, k, v, g, g_gamma, scale, initial_state, cu_seqlens, chunk_size)
    o_shape = (p.batch, p.length, p.heads, p.v_dim)
    ht_shape = (p.n_seqs, p.heads, p.k_dim, p.v_dim)
    _check_out("out", out, o_shape, p.dtype)
    _check_out("out_ht", out_ht, ht_shape, "float32")
    if p.max_len == 0:  # no token at all: the state passes through
        o = jnp.zeros(o_shape, q.dtype) if out is None else out
        ht = None
        if output_final_state:
            ht = initial_state if initial_state is not None else jnp.zeros(ht_shape, F32)
        return o, ht
    lay = _layout(p)
    host = _on_host(q, k, v, g, g_gamma, initial_state, out, out_ht)
    kp, vp = p.block_k, p.block_v
    lengths, sc, gamma, qp, kpad, vpad, gp = _operands(p, lay, host, q, k, v, g, g_gamma)
    h0 = _state_to_padded(initial_state, lay, kp, vp)
    o_init = (
        _to_padded(out, lay, vp, host)
        if out is not None
        else jnp.zeros((lay.np_, lay.hp, lay.lp, vp), qp.dtype)
    )
    ht_init = _state_to_padded(out_ht if output_final_state else None, lay, kp, vp)
    static = _Static(per_token=p.per_token, chunk=p.chunk_size, tile=_tile_for(p, interpret))
    o_p, ht_p = _fwd_padded(
        lengths,
        sc,
        gamma,
        qp,
        kpad,
        vpad,
        gp,
        h0,
        o_init,
        ht_init,
        static=static,
        interpret=interpret,
    )
    o = _from_padded(o_p, lay, o_shape, q.dtype)
    ht = None
    if output_final_state:
        ht = _state_from_padded(ht_p, p)
    return o, ht


def chunk_simple_gla_bwd(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    do: jax.Array,
    *,
    g: jax.Array | None = None,
    g_gamma: jax.Array | None = None,
    scale: float | None = None,
    initial_state: jax.Array | None = None,
    dht: jax.Array | None = None,
    cu_seqlens: jax.Array | None = None,
    chunk_size: int = 64,
    out_dq: jax.Array | None = None,
    out_dk: jax.Array | None = None,
    out_dv: jax.Array | None = None,
    out_dg: jax.Array | None = None,
    out_dh0: jax.Array | None = None,
    interpret: bool = False,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array | None, jax.Array | None]:
    """Simple GLA backward: gradients of ``sum(o * do) + sum(ht * dht)``.

    Args and returns as ``kernels.simple_gla.triton.chunk_simple_gla_bwd`` (JAX arrays; the
    ``out_*`` arrays are the outputs' initial contents, aliased). ``dg`` is None for the g_gamma
    form (no gradient for a constant decay), ``dh0`` None without an initial state.
    """
    p = _problem(q, k, v, g, g_gamma, scale, initial_state, cu_seqlens, chunk_size)
    x_shape = (p.batch, p.length, p.heads)
    st_shape = (p.n_seqs, p.heads, p.k_dim, p.v_dim)
    for name, a, shape, dt in (
        ("do", do, (*x_shape, p.v_dim), p.dtype),
        ("dht", dht, st_shape, "float32"),
    ):
        if a is None and name == "dht":
            continue
        if not isinstance(a, jax.Array):
            raise TypeError(f"{name} must be a jax.Array, got {type(a).__name__}")
        check_like(name, tuple(a.shape), str(a.dtype), shape, dt)
    shapes = {
        "dq": ((*x_shape, p.k_dim), p.dtype),
        "dk": ((*x_shape, p.k_dim), p.dtype),
        "dv": ((*x_shape, p.v_dim), p.dtype),
        "dg": (x_shape, "float32"),
        "dh0": (st_shape, "float32"),
    }
    outs = {"dq": out_dq, "dk": out_dk, "dv": out_dv, "dg": out_dg, "dh0": out_dh0}
    for name, a in outs.items():
        _check_out(f"out_{name}", a, *shapes[name])
    want_dg, want_dh0 = p.per_token, initial_state is not None
    if p.max_len == 0:  # no token at all
        res = {n: outs[n] if outs[n] is not None else jnp.zeros(*shapes[n]) for n in outs}
        res["dh0"] = dht if dht is not None else jnp.zeros(st_shape, F32)
        return (
            res["dq"],
            res["dk"],
            res["dv"],
            res["dg"] if want_dg else None,  # type: ignore[return-value]
            res["dh0"] if want_dh0 else None,
        )
    lay = _layout(p)
    host = _on_host(q, k, v, do, g, g_gamma, initial_state, dht, *outs.values())
    kp, vp = p.block_k, p.block_v
    lengths, sc, gamma, qp, kpad, vpad, gp = _operands(p, lay, host, q, k, v, g, g_gamma)
    h0 = _state_to_padded(initial_state, lay, kp, vp)
    fwd_static = _Static(
        per_token=p.per_token, chunk=p.chunk_size, tile=_tile_for(p, interpret), states=True
    )
    (states,) = _fwd_padded(
        lengths,
        sc,
        gamma,
        qp,
        kpad,
        vpad,
        gp,
        h0,
        None,
        None,
        static=fwd_static,
        interpret=interpret,
    )
    dop = _to_padded(do, lay, vp, host)
    dhtp = _state_to_padded(dht, lay, kp, vp)
    dims = {"dq": kp, "dk": kp, "dv": vp, "dg": None}
    inits = []
    for name in ("dq", "dk", "dv", "dg"):
        a = outs[name] if name != "dg" or want_dg else None
        if a is not None:
            inits.append(_to_padded(a, lay, dims[name], host))
        else:
            d = () if dims[name] is None else (dims[name],)
            dt = qp.dtype if name != "dg" else F32
            inits.append(jnp.zeros((lay.np_, lay.hp, lay.lp, *d), dt))
    inits.append(_state_to_padded(outs["dh0"] if want_dh0 else None, lay, kp, vp))
    static = _Static(per_token=p.per_token, chunk=p.chunk_size, tile=_tile_for(p, interpret))
    dq_p, dk_p, dv_p, dg_p, dh0_p = _bwd_padded(
        lengths,
        sc,
        gamma,
        qp,
        kpad,
        vpad,
        dop,
        gp,
        dhtp,
        states,
        tuple(inits),
        static=static,
        interpret=interpret,
    )
    dq = _from_padded(dq_p, lay, (*x_shape, p.k_dim), q.dtype)
    dk = _from_padded(dk_p, lay, (*x_shape, p.k_dim), q.dtype)
    dv = _from_padded(dv_p, lay, (*x_shape, p.v_dim), q.dtype)
    dg = _from_padded(dg_p, lay, x_shape, F32) if want_dg else None
    dh0 = None
    if want_dh0:
        dh0 = _state_from_padded(dh0_p, p)
    return dq, dk, dv, dg, dh0
