"""Jagged softmax in JAX Pallas (compiled for GPU through the Triton lowering, or interpreted).

Same semantics as ``kernels.jagged_softmax.triton`` (see its docstring): a softmax over each
segment's rows, per column; empty segments produce nothing, a one-row segment gives 1.0, a
column of a segment with no finite value gives zeros; statistics in fp32, output in the input
dtype.

The kernel has the Triton kernel's structure: a grid of ``(P, column blocks)``; program ``p``
takes segments ``p, p + P, ...`` and walks each segment's rows in tiles of ``block_n`` with a
``fori_loop`` whose trip count comes from the offsets, which are data (one compiled kernel serves
every set of offsets of a size bucket). The running max and sum cross tiles.

GPU lowering constraints shape the wrapper: every array the kernel sees has power-of-two sizes and
no block may overhang its array, so the wrapper pads on the host. Rows are padded to a power of
two of at least ``N + block_n - 1``, so that the last tile of the last segment lies inside the
array (a dynamic slice that overhangs would be clamped by the interpreter, i.e. read the wrong
rows); the padding rows and columns hold ``pad_value`` (NaN by default: a kernel that let
padding reach a real output would show it). Offsets are padded with ``N`` (empty segments),
with at least one spare entry. The true segment count, column count and program count P are data
(a ``(4,)`` int32 array); the grid has one program per padded offsets entry and only the first P
take segments, the others stay idle. Stores are masked (``jax.experimental.pallas.triton.store``):
programs share the output block, and a tile's rows past its segment's end belong to another
program's segment.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from kernels._offsets import check_offsets_host
from kernels._programs import compiled_programs
from kernels._validate import check_block, next_pow2

DTYPES = (jnp.dtype(jnp.float32), jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))
_MIN_ROWS = 32  # the smallest row bucket: fewer distinct compiled shapes for tiny inputs
_MIN_SEGMENTS = 16  # likewise for the offsets' length
_MIN_COLS = 16  # and for the columns


@dataclass(frozen=True)
class _Static:
    block_n: int
    block_m: int
    aliased_out: bool


def _load_tile(values_ref, row0, end, col_ok, block_n):
    """One ``[block_n, block_m]`` tile in fp32 and its mask; rows at or past ``end`` and columns
    past the last are ``-inf`` (they drop out of the max and add exp(-inf) = 0 to the sum)."""
    rows = row0 + jax.lax.broadcasted_iota(jnp.int32, col_ok.shape, 0)
    ok = (rows < end) & col_ok
    x = values_ref[pl.ds(row0, block_n), :].astype(jnp.float32)
    return jnp.where(ok, x, -jnp.inf), rows, ok


def _jagged_softmax_kernel(meta_ref, offsets_ref, values_ref, *refs, static: _Static):
    if static.aliased_out:
        _, o_ref = refs  # the aliased initial contents of the output: never read
    else:
        (o_ref,) = refs
    block_n, block_m = static.block_n, static.block_m
    n_segments = meta_ref[0]
    n_cols = meta_ref[1]
    n_programs = meta_ref[2]  # P; the grid has at least P programs, the others stay idle
    pid = pl.program_id(0)
    col = pl.program_id(1) * block_m + jax.lax.broadcasted_iota(jnp.int32, (block_n, block_m), 1)
    col_ok = col < n_cols

    def segment(i, carry):
        seg = pid + i * n_programs
        start = offsets_ref[seg]
        end = offsets_ref[seg + 1]
        n_tiles = (end - start + block_n - 1) // block_n

        def stats(t, mc):
            m_i, l_i = mc
            x, _, _ = _load_tile(values_ref, start + t * block_n, end, col_ok, block_n)
            m_new = jnp.maximum(m_i, x.max(axis=0))
            # A column with no finite value so far has max -inf: shift it by 0 instead, so that
            # exp(-inf - -inf) never happens.
            m_shift = jnp.where(m_new == -jnp.inf, 0.0, m_new)
            l_i = l_i * jnp.exp(m_i - m_shift) + jnp.exp(x - m_shift[None, :]).sum(axis=0)
            return m_new, l_i

        init = (jnp.full((block_m,), -jnp.inf, jnp.float32), jnp.zeros((block_m,), jnp.float32))
        m_i, l_i = jax.lax.fori_loop(0, n_tiles, stats, init)
        m_shift = jnp.where(m_i == -jnp.inf, 0.0, m_i)
        # l_i >= 1 for a column with a finite value (its max contributes exp(0)); 0 for a column
        # with none, which then gives zeros instead of 0 * (1 / 0). (A NaN value makes the
        # column's sum NaN and stays NaN, as in jax.nn.softmax.)
        inv_l = jnp.where(l_i == 0.0, 0.0, 1.0 / jnp.where(l_i == 0.0, 1.0, l_i))

        def write(t, c):
            row0 = start + t * block_n
            x, _, ok = _load_tile(values_ref, row0, end, col_ok, block_n)
            y = jnp.exp(x - m_shift[None, :]) * inv_l[None, :]
            # Masked like the load: the tile's rows past `end` belong to the next segment, which
            # another program writes (an unmasked read-modify-write would race with it).
            plt.store(o_ref.at[pl.ds(row0, block_n), :], y.astype(o_ref.dtype), mask=ok)
            return c

        jax.lax.fori_loop(0, n_tiles, write, 0)
        return carry

    n_mine = jnp.where(pid < n_programs, (n_segments - pid + n_programs - 1) // n_programs, 0)
    jax.lax.fori_loop(0, n_mine, segment, 0)


@functools.partial(compiled_programs, static_argnames=("static", "programs", "interpret"))
def _jagged_softmax_padded(
    meta, offsets, values, init, *, static: _Static, programs: int, interpret: bool
):
    """``programs``: the grid's first dimension, at least P (``meta[2]``); the padded segment
    count, so that one compiled kernel serves every P for a bucket of offsets."""
    rows, cols = values.shape
    column_block = pl.BlockSpec((rows, static.block_m), lambda p, j: (0, j))
    whole = lambda a: pl.BlockSpec(a.shape, lambda p, j: (0,))  # noqa: E731
    operands = [meta, offsets, values]
    in_specs = [whole(meta), whole(offsets), column_block]
    if init is not None:
        operands.append(init)
        in_specs.append(column_block)
    return pl.pallas_call(
        functools.partial(_jagged_softmax_kernel, static=static),
        grid=(programs, cols // static.block_m),
        in_specs=in_specs,
        out_specs=column_block,
        out_shape=jax.ShapeDtypeStruct(values.shape, values.dtype),
        input_output_aliases={len(operands) - 1: 0} if init is not None else {},
        interpret=interpret,
    )(*operands)


def _check_num_programs(num_programs, n_segments: int) -> int:
    if num_programs is None:
        return max(n_segments, 1)
    if isinstance(num_programs, bool) or not isinstance(num_programs, int):
        raise TypeError(f"num_programs must be an int or None, got {num_programs!r}")
    if num_programs < 1:
        raise ValueError(f"num_programs={num_programs} must be >= 1 (or None: one per segment)")
    return min(num_programs, max(n_segments, 1))


# The padding and the cut of the result are done with NumPy, arrays go to the device with
# ``jax.device_put``: jnp ops compile an XLA program per exact shape (tens of ms each on a GPU),
# while the kernel compiles once per bucket (tests/kernels/test_pallas_buckets.py).
def _pad2(a: jax.Array, rows: int, cols: int, value) -> np.ndarray:
    host = np.asarray(a)
    r, c = host.shape
    if (r, c) == (rows, cols):
        return host
    return np.pad(host, ((0, rows - r), (0, cols - c)), constant_values=value)


def jagged_softmax(
    values: jax.Array,
    offsets: jax.Array,
    *,
    out: jax.Array | None = None,
    block_n: int = 32,
    block_m: int = 32,
    num_programs: int | None = None,
    pad_value: float = float("nan"),
    interpret: bool = False,
) -> jax.Array:
    """Softmax over the rows of each segment of a jagged tensor, per column.

    Args:
        values: ``[N, M]`` float32/float16/bfloat16.
        offsets: ``[B+1]`` integers: 0, non-decreasing, ending at ``N``. They are copied to the
            host and checked before the launch (one device sync).
        out: optional ``[N, M]`` array of ``values.dtype`` whose contents the kernel's output
            buffer starts from (aliased): an element the kernel never writes keeps its value.
        block_n: rows per tile (the tile size along a segment); a power of two in [2, 1024].
        block_m: columns per program; a power of two in [1, 256].
        num_programs: programs per column block; program ``p`` takes segments ``p, p + P, ...``
            (``None``: one program per segment). The result does not depend on it.
        pad_value: what the host padding (rows past ``N``, columns past ``M``) holds. A correct
            kernel never lets it reach the output; NaN makes a kernel that does loud.
        interpret: run Pallas's interpreter instead of compiling for the GPU.

    Returns:
        ``[N, M]`` in ``values.dtype``.

    Raises:
        TypeError, ValueError: bad arguments, named, before any launch.
    """
    if not isinstance(values, jax.Array):
        raise TypeError(f"values must be a jax.Array, got {type(values).__name__}")
    if not isinstance(offsets, jax.Array):
        raise TypeError(f"offsets must be a jax.Array, got {type(offsets).__name__}")
    if values.dtype not in DTYPES:
        raise ValueError(f"values.dtype={values.dtype} is not supported; expected one of {DTYPES}")
    if values.ndim != 2:
        raise ValueError(f"values.shape={tuple(values.shape)} must be 2-D [N, M]")
    if not jnp.issubdtype(offsets.dtype, jnp.integer):
        raise ValueError(f"offsets.dtype={offsets.dtype} must be an integer dtype (int32)")
    check_block("block_n", block_n, 2, 1024)
    check_block("block_m", block_m, 1, 256)
    if isinstance(pad_value, bool) or not isinstance(pad_value, (int, float)):
        raise TypeError(f"pad_value must be a float, got {pad_value!r}")
    n_rows, n_cols = values.shape
    host = check_offsets_host(np.asarray(offsets), n_rows, dtype=str(offsets.dtype))
    n_segments = host.shape[0] - 1
    programs = _check_num_programs(num_programs, n_segments)
    if out is not None:
        if not isinstance(out, jax.Array):
            raise TypeError(f"out must be a jax.Array or None, got {type(out).__name__}")
        if out.shape != values.shape or out.dtype != values.dtype:
            raise ValueError(
                f"out is {out.dtype}{list(out.shape)}; expected values' {values.dtype}{list(values.shape)}"
            )
    if n_rows == 0 or n_cols == 0:
        return values if out is None else out
    rows_p = max(next_pow2(n_rows + block_n - 1), _MIN_ROWS)
    cols_p = max(next_pow2(n_cols), block_m, _MIN_COLS)
    # One spare entry at least, so that offsets_ref[B + 1] exists (and is N: an empty segment).
    segs_p = max(next_pow2(n_segments + 2), _MIN_SEGMENTS)
    offsets_p = np.full(segs_p, n_rows, np.int32)
    offsets_p[: n_segments + 1] = host
    static = _Static(block_n=block_n, block_m=block_m, aliased_out=out is not None)
    device = next(iter(values.devices()))
    y = _jagged_softmax_padded(
        jax.device_put(np.array([n_segments, n_cols, programs, 0], np.int32), device),  # (4,)
        jax.device_put(offsets_p, device),
        jax.device_put(_pad2(values, rows_p, cols_p, pad_value), device),
        None if out is None else jax.device_put(_pad2(out, rows_p, cols_p, pad_value), device),
        static=static,
        programs=segs_p,
        interpret=interpret,
    )
    return jax.device_put(np.asarray(y)[:n_rows, :n_cols], device)
