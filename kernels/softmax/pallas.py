"""Masked row softmax in JAX Pallas (compiled for GPU through the Triton lowering, or interpreted).

Same semantics as ``kernels.softmax.triton`` (see its docstring): ``s = scale * x + bias``, masked
keys removed, rows with no valid key give zeros, statistics in fp32, output in the input dtype.

GPU lowering constraints shape the wrapper: every array the kernel sees has power-of-two sizes,
and no block may overhang its array (the compiled path does not honour the overhang the way the
interpreter does). So the wrapper pads rows and columns on the host to power-of-two buckets and
passes the true row length as data: one compiled kernel serves every length in a bucket. The
kernel masks the padding itself with an iota against that length. Mask and bias are always
passed (all-true and zeros when absent), so a kernel variant is a dtype, two tiles and a bucket:
on a GPU each costs a compile of ~0.9 s (H100), which is most of a fresh example's time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from kernels._programs import compiled_programs
from kernels._validate import check_block, check_scale, grown_bucket

DTYPES = (jnp.dtype(jnp.float32), jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))


@dataclass(frozen=True)
class _Static:
    block_m: int
    block_n: int


def _logits(x_ref, mask_ref, bias_ref, scale, n_cols, start, block_n):
    """One ``[block_m, block_n]`` tile of logits; columns past ``n_cols`` are -inf."""
    cols = pl.ds(start, block_n)
    s = x_ref[:, cols].astype(jnp.float32) * scale
    s = s + bias_ref[:, cols]
    # Padding columns (the host padded the row to a power of two) drop out as -inf.
    col = start + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
    s = jnp.where(col < n_cols, s, -jnp.inf)
    return jnp.where(mask_ref[:, cols] != 0, s, -jnp.inf)


def _softmax_kernel(n_ref, scale_ref, x_ref, mask_ref, bias_ref, init_ref, o_ref, *, static):
    del init_ref  # the aliased initial contents of the output: never read
    n_cols = n_ref[0]
    scale = scale_ref[0]
    block_m, block_n = x_ref.shape[0], static.block_n
    n_tiles = (n_cols + block_n - 1) // block_n

    def stats(j, carry):
        m_i, l_i = carry
        start = pl.multiple_of(j * block_n, block_n)
        s = _logits(x_ref, mask_ref, bias_ref, scale, n_cols, start, block_n)
        m_new = jnp.maximum(m_i, s.max(axis=1))
        # Shift a row that has no valid key yet by 0, never by -inf (exp(-inf - -inf) = NaN).
        m_shift = jnp.where(m_new == -jnp.inf, 0.0, m_new)
        l_i = l_i * jnp.exp(m_i - m_shift) + jnp.exp(s - m_shift[:, None]).sum(axis=1)
        return m_new, l_i

    init = (jnp.full((block_m,), -jnp.inf, jnp.float32), jnp.zeros((block_m,), jnp.float32))
    m_i, l_i = jax.lax.fori_loop(0, n_tiles, stats, init)
    m_shift = jnp.where(m_i == -jnp.inf, 0.0, m_i)
    # l_i >= 1 for a row with a valid key (its max contributes exp(0)); 0 for a row without one.
    inv_l = jnp.where(l_i > 0.0, 1.0 / jnp.where(l_i > 0.0, l_i, 1.0), 0.0)

    def write(j, carry):
        start = pl.multiple_of(j * block_n, block_n)
        s = _logits(x_ref, mask_ref, bias_ref, scale, n_cols, start, block_n)
        y = jnp.exp(s - m_shift[:, None]) * inv_l[:, None]
        o_ref[:, pl.ds(start, block_n)] = y.astype(o_ref.dtype)
        return carry

    jax.lax.fori_loop(0, n_tiles, write, 0)


@functools.partial(compiled_programs, static_argnames=("static", "interpret"))
def _softmax_padded(n_cols, scale, x, mask, bias, init, *, static: _Static, interpret: bool):
    rows, cols = x.shape
    row_block = pl.BlockSpec((static.block_m, cols), lambda i: (i, 0))
    scalar = pl.BlockSpec((1,), lambda i: (0,))
    return pl.pallas_call(
        functools.partial(_softmax_kernel, static=static),
        grid=(rows // static.block_m,),
        in_specs=[scalar, scalar, row_block, row_block, row_block, row_block],
        out_specs=row_block,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        input_output_aliases={5: 0},
        interpret=interpret,
    )(n_cols, scale, x, mask, bias, init)


# The layout (broadcasting, padding to the buckets, cutting the result out) is done with NumPy
# and arrays go to the device with ``jax.device_put``: jnp ops compile an XLA program per exact
# shape (tens of ms each on a GPU), while the kernel compiles once per bucket
# (tests/kernels/test_pallas_buckets.py).


def _pad2(a: np.ndarray, rows: int, cols: int, value=0) -> np.ndarray:
    r, c = a.shape
    if (r, c) == (rows, cols):
        return a
    return np.pad(a, ((0, rows - r), (0, cols - c)), constant_values=value)


def _rows_of(name: str, a, shape: tuple[int, ...]) -> np.ndarray | None:
    if a is None:
        return None
    if not isinstance(a, jax.Array):
        raise TypeError(f"{name} must be a jax.Array or None, got {type(a).__name__}")
    try:
        host = np.broadcast_to(np.asarray(a), shape)
    except ValueError:
        raise ValueError(f"{name}.shape={a.shape} does not broadcast to x.shape={shape}") from None
    return host.reshape(-1, shape[-1])


def softmax(
    x: jax.Array,
    *,
    mask: jax.Array | None = None,
    bias: jax.Array | None = None,
    scale: float | None = None,
    out: jax.Array | None = None,
    block_m: int = 16,
    block_n: int = 128,
    interpret: bool = False,
) -> jax.Array:
    """Masked softmax over the last axis of ``x``.

    Args:
        x: logits ``[..., N]``, float32/float16/bfloat16, ``N >= 1``.
        mask: optional boolean ``[..., N]`` (broadcastable); ``False`` removes a key.
        bias: optional additive bias ``[..., N]`` (broadcastable), any float dtype; not scaled.
        scale: positive finite multiplier applied to ``x`` once (default 1).
        out: optional ``[..., N]`` array of ``x.dtype`` whose contents the kernel's output buffer
            starts from (aliased): an element the kernel never writes keeps its value there.
        block_m, block_n: tile sizes (powers of two; ``block_m <= 128``, ``16 <= block_n <= 8192``).
        interpret: run Pallas's interpreter instead of compiling for the GPU.

    Returns:
        ``[..., N]`` in ``x.dtype``; rows with no valid key are zeros.
    """
    if not isinstance(x, jax.Array):
        raise TypeError(f"x must be a jax.Array, got {type(x).__name__}")
    if x.dtype not in DTYPES:
        raise ValueError(f"x.dtype={x.dtype} is not supported; expected one of {DTYPES}")
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"x.shape={x.shape} must have a last axis of length >= 1")
    scale = check_scale(scale)
    check_block("block_m", block_m, 1, 128)
    check_block("block_n", block_n, 16, 8192)
    if mask is not None and isinstance(mask, jax.Array) and mask.dtype != jnp.bool_:
        raise ValueError(f"mask.dtype={mask.dtype} must be bool")
    if bias is not None and isinstance(bias, jax.Array):
        if not jnp.issubdtype(bias.dtype, jnp.floating):
            raise ValueError(f"bias.dtype={bias.dtype} must be a floating dtype")
    if out is not None:
        if not isinstance(out, jax.Array):
            raise TypeError(f"out must be a jax.Array or None, got {type(out).__name__}")
        if out.shape != x.shape or out.dtype != x.dtype:
            raise ValueError(
                f"out is {out.dtype}{list(out.shape)}; expected x's {x.dtype}{list(x.shape)}"
            )
    n_cols = x.shape[-1]
    device = next(iter(x.devices()))
    x2 = np.asarray(x).reshape(-1, n_cols)
    n_rows = x2.shape[0]
    mask2 = _rows_of("mask", mask, x.shape)
    bias2 = _rows_of("bias", bias, x.shape)
    if n_rows == 0:
        return x if out is None else out
    # Buckets: rows to block_m times a power of the growth, columns to block_n times one. Each
    # bucket is a kernel compile (~1 s on a GPU, ~0.3 s interpreted): compiled, the buckets grow
    # 4x (padding rows and columns costs the GPU next to nothing; the kernel skips column tiles
    # past the row length), interpreted 2x (each padded row block is interpreted work).
    growth = 2 if interpret else 4
    rows_p = grown_bucket(n_rows, block_m, growth)
    cols_p = grown_bucket(n_cols, block_n, growth)
    # Mask and bias are data, never compile-time options: an absent mask keeps every key, an
    # absent bias adds 0 (exact: s + 0 == s for every s the kernel meets, -0 aside, which exp
    # cannot tell from 0). The bias is fp32 whatever its dtype (the kernel adds it in fp32), and
    # the output buffer always starts from an aliased array (the caller's ``out``, or zeros).
    # Fewer kernel variants: one per dtype, tiles and bucket.
    shape = (rows_p, cols_p)
    mask_p = np.ones(shape, np.int8) if mask2 is None else _pad2(mask2.astype(np.int8), *shape)
    bias_p = (
        np.zeros(shape, np.float32) if bias2 is None else _pad2(bias2.astype(np.float32), *shape)
    )
    init = (
        np.zeros(shape, x2.dtype)
        if out is None
        else _pad2(np.asarray(out).reshape(-1, n_cols), *shape)
    )
    operands = (
        np.array([n_cols], np.int32),
        np.array([scale], np.float32),
        _pad2(x2, *shape),
        mask_p,
        bias_p,
        init,
    )
    y = _softmax_padded(
        *(jax.device_put(a, device) for a in operands),
        static=_Static(block_m=block_m, block_n=block_n),
        interpret=interpret,
    )
    return jax.device_put(np.asarray(y)[:n_rows, :n_cols].reshape(x.shape), device)
