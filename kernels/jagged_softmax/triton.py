"""Jagged softmax in Triton (compiled on CUDA, or Triton's interpreter on CPU tensors).

Semantics (shared with the Pallas kernel and ``oracles.jagged_softmax``)::

    values [N, M], offsets [B+1]: segment b is rows offsets[b]:offsets[b+1]
    y[r, c] = exp(x[r, c] - max_b[c]) / sum_{r' in b} exp(x[r', c] - max_b[c])    for r in b

that is, a softmax over each segment's rows, separately for every column. An empty segment has
no rows and produces nothing; a one-row segment gives 1.0; a column of a segment whose values are
all ``-inf`` (nothing to normalize) gives zeros, never NaN.

Each program owns one block of ``BLOCK_M`` columns and takes segments ``pid, pid + P, pid + 2P...``
(``P = tl.num_programs(0)``, by default one program per segment). For each segment it walks the
rows in tiles of ``BLOCK_N``: an online pass for the running max and sum (so segments longer than
one tile work), then a pass that writes. A tile's rows past the segment's end are masked on load
(they drop out as ``-inf``) and on store (they belong to the next segment). Statistics are fp32
whatever the input dtype; the output has the input's dtype.
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from kernels._offsets import check_offsets_host
from kernels._triton_interp import interpreted
from kernels._triton_jit import jit_any_size
from kernels._validate import check_block

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
OFFSET_DTYPES = (torch.int32, torch.int64)


@jit_any_size(specialize=("stride_vm", "stride_om"))
def _jagged_softmax_kernel(
    values_ptr,
    offsets_ptr,
    out_ptr,
    n_segments,
    n_cols,
    stride_vn,
    stride_vm,
    stride_on,
    stride_om,
    BLOCK_N: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    cols = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    col_ok = cols[None, :] < n_cols
    # Element offsets of a tile relative to its first row (64-bit: N * M may pass 2**31).
    tile_rows = tl.arange(0, BLOCK_N)[:, None]
    v_tile = tile_rows.to(tl.int64) * stride_vn + cols[None, :] * stride_vm
    o_tile = tile_rows.to(tl.int64) * stride_on + cols[None, :] * stride_om
    for seg in range(tl.program_id(0), n_segments, tl.num_programs(0)):
        start = tl.load(offsets_ptr + seg).to(tl.int64)
        end = tl.load(offsets_ptr + seg + 1).to(tl.int64)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.full([BLOCK_M], 0.0, tl.float32)
        for row0 in range(start, end, BLOCK_N):
            # Rows at or past the segment's end, and columns past the last, load as -inf (out of
            # the max; exp(-inf) = 0 in the sum). Convert right after the load: the interpreter
            # holds bf16 as raw 16-bit integers. (The tile is loaded inline rather than by a
            # helper: the interpreter pays for every call of a jit function.)
            ok = (tile_rows < end - row0) & col_ok
            x = tl.load(values_ptr + row0 * stride_vn + v_tile, mask=ok, other=float("-inf"))
            x = x.to(tl.float32)
            m_new = tl.maximum(m_i, tl.max(x, 0))
            # A column with no finite value so far has max -inf: shift it by 0 instead, so that
            # exp(-inf - -inf) never happens.
            m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
            l_i = l_i * tl.exp(m_i - m_shift) + tl.sum(tl.exp(x - m_shift[None, :]), 0)
            m_i = m_new
        m_shift = tl.where(m_i == float("-inf"), 0.0, m_i)
        # l_i >= 1 for a column with a finite value (its max contributes exp(0)); 0 for a column
        # with none, which then gives zeros instead of 0 * (1 / 0). (A NaN value makes the
        # column's sum NaN and stays NaN, as in torch.softmax.)
        inv_l = tl.where(l_i == 0.0, 0.0, 1.0 / tl.where(l_i == 0.0, 1.0, l_i))
        for row0 in range(start, end, BLOCK_N):
            ok = (tile_rows < end - row0) & col_ok
            x = tl.load(values_ptr + row0 * stride_vn + v_tile, mask=ok, other=float("-inf"))
            x = x.to(tl.float32)
            y = tl.exp(x - m_shift[None, :]) * inv_l[None, :]
            # The store is masked like the load: the tile's rows past `end` belong to the next
            # segment, which another program writes.
            tl.store(out_ptr + row0 * stride_on + o_tile, y.to(out_ptr.dtype.element_ty), mask=ok)


def _kernel(interpret: bool):
    return interpreted(_jagged_softmax_kernel) if interpret else _jagged_softmax_kernel


def _check_num_programs(num_programs, n_segments: int) -> int:
    if num_programs is None:
        return max(n_segments, 1)
    if isinstance(num_programs, bool) or not isinstance(num_programs, int):
        raise TypeError(f"num_programs must be an int or None, got {num_programs!r}")
    if num_programs < 1:
        raise ValueError(f"num_programs={num_programs} must be >= 1 (or None: one per segment)")
    return min(num_programs, max(n_segments, 1))


def jagged_softmax(
    values: torch.Tensor,
    offsets: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    block_n: int = 32,
    block_m: int = 32,
    num_programs: int | None = None,
    interpret: bool = False,
) -> torch.Tensor:
    """Softmax over the rows of each segment of a jagged tensor, per column.

    Args:
        values: ``[N, M]`` float32/float16/bfloat16, any strides.
        offsets: ``[B+1]`` int32/int64 on ``values``' device: 0, non-decreasing, ending at ``N``.
            They are copied to the host and checked before the launch (one device sync).
        out: optional ``[N, M]`` output of ``values.dtype`` on the same device, any strides;
            only its ``N x M`` elements are written.
        block_n: rows per tile (the tile size along a segment); a power of two in [2, 1024].
        block_m: columns per program; a power of two in [1, 256].
        num_programs: programs per column block; program ``p`` takes segments ``p, p + P, ...``
            (``None``: one program per segment). The result does not depend on it.
        interpret: run Triton's interpreter (CPU tensors) instead of the compiled kernel.

    Returns:
        ``[N, M]`` in ``values.dtype`` (``out`` if given).

    Raises:
        TypeError, ValueError: bad arguments, named, before any launch.
    """
    if not isinstance(values, torch.Tensor):
        raise TypeError(f"values must be a torch.Tensor, got {type(values).__name__}")
    if not isinstance(offsets, torch.Tensor):
        raise TypeError(f"offsets must be a torch.Tensor, got {type(offsets).__name__}")
    if values.dtype not in DTYPES:
        raise ValueError(f"values.dtype={values.dtype} is not supported; expected one of {DTYPES}")
    if values.ndim != 2:
        raise ValueError(f"values.shape={tuple(values.shape)} must be 2-D [N, M]")
    if offsets.dtype not in OFFSET_DTYPES:
        raise ValueError(f"offsets.dtype={offsets.dtype} must be one of {OFFSET_DTYPES}")
    if offsets.device != values.device:
        raise ValueError(f"offsets is on {offsets.device} but values is on {values.device}")
    check_block("block_n", block_n, 2, 1024)
    check_block("block_m", block_m, 1, 256)
    n_rows, n_cols = values.shape
    check_offsets_host(np.asarray(offsets.detach().cpu()), n_rows, dtype=str(offsets.dtype))
    n_segments = offsets.shape[0] - 1
    programs = _check_num_programs(num_programs, n_segments)
    if out is None:
        out = torch.empty_like(values)
    else:
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
        if tuple(out.shape) != (n_rows, n_cols) or out.dtype != values.dtype:
            raise ValueError(
                f"out is {out.dtype}{list(out.shape)}; expected values' {values.dtype}{[n_rows, n_cols]}"
            )
        if out.device != values.device:
            raise ValueError(f"out is on {out.device} but values is on {values.device}")
    if n_rows == 0 or n_cols == 0:
        return out
    grid = (programs, triton.cdiv(n_cols, block_m))
    _kernel(interpret)[grid](
        values,
        offsets,
        out,
        n_segments,
        n_cols,
        values.stride(0),
        values.stride(1),
        out.stride(0),
        out.stride(1),
        BLOCK_N=block_n,
        BLOCK_M=block_m,
    )
    return out
