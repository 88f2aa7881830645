"""Masked row softmax in Triton (compiled on CUDA, or Triton's interpreter on CPU tensors).

Semantics (shared with the Pallas kernel and ``oracles.softmax``)::

    s[r, c] = scale * x[r, c] + bias[r, c]          (bias optional, scale default 1)
    s[r, c] = -inf             where mask[r, c] is False (mask optional)
    y[r, :] = exp(s[r, :] - max(s[r, :])) / sum(exp(s[r, :] - max(s[r, :])))

A row with no valid key (every key masked, or every unmasked logit ``-inf``) returns zeros.

Each program owns ``BLOCK_M`` rows and walks the columns in ``BLOCK_N`` tiles twice: an online
pass for the running max and sum (rows longer than one tile work), then a pass that writes.
Statistics are fp32 whatever the input dtype; the output has the input's dtype.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._triton_interp import interpreted
from kernels._triton_jit import jit_any_size
from kernels._validate import check_block, check_out_tensor, check_scale

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _load_logits(
    x_ptr,
    mask_ptr,
    bias_ptr,
    rows,
    cols,
    n_rows,
    n_cols,
    scale,
    stride_xm,
    stride_xn,
    stride_maskm,
    stride_maskn,
    stride_biasm,
    stride_biasn,
    HAS_MASK: tl.constexpr,
    HAS_BIAS: tl.constexpr,
):
    # Padding lanes (past the row's end or past the last row) load -inf, so they drop out of the
    # max and contribute exp(-inf) = 0 to the sum.
    in_bounds = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(
        x_ptr + rows[:, None] * stride_xm + cols[None, :] * stride_xn,
        mask=in_bounds,
        other=float("-inf"),
    ).to(tl.float32)
    s = x * scale
    if HAS_BIAS:
        b = tl.load(
            bias_ptr + rows[:, None] * stride_biasm + cols[None, :] * stride_biasn,
            mask=in_bounds,
            other=0.0,
        ).to(tl.float32)
        s = s + b
    if HAS_MASK:
        keep = tl.load(
            mask_ptr + rows[:, None] * stride_maskm + cols[None, :] * stride_maskn,
            mask=in_bounds,
            other=0,
        )
        s = tl.where(keep != 0, s, float("-inf"))
    return s


@jit_any_size(specialize=("stride_xn", "stride_maskn", "stride_biasn", "stride_outn"))
def _softmax_kernel(
    x_ptr,
    mask_ptr,
    bias_ptr,
    out_ptr,
    n_rows,
    n_cols,
    scale,
    stride_xm,
    stride_xn,
    stride_maskm,
    stride_maskn,
    stride_biasm,
    stride_biasn,
    stride_outm,
    stride_outn,
    HAS_MASK: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        s = _load_logits(
            x_ptr,
            mask_ptr,
            bias_ptr,
            rows,
            cols,
            n_rows,
            n_cols,
            scale,
            stride_xm,
            stride_xn,
            stride_maskm,
            stride_maskn,
            stride_biasm,
            stride_biasn,
            HAS_MASK,
            HAS_BIAS,
        )
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row whose keys are all masked so far has max -inf; shift by 0 instead so that
        # exp(-inf - -inf) never happens.
        m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        l_i = l_i * tl.exp(m_i - m_shift) + tl.sum(tl.exp(s - m_shift[:, None]), 1)
        m_i = m_new
    m_shift = tl.where(m_i == float("-inf"), 0.0, m_i)
    # l_i >= 1 for a row with a valid key (its max contributes exp(0)); 0 for a row without one.
    inv_l = tl.where(l_i > 0.0, 1.0 / tl.where(l_i > 0.0, l_i, 1.0), 0.0)
    row_ok = rows < n_rows
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        s = _load_logits(
            x_ptr,
            mask_ptr,
            bias_ptr,
            rows,
            cols,
            n_rows,
            n_cols,
            scale,
            stride_xm,
            stride_xn,
            stride_maskm,
            stride_maskn,
            stride_biasm,
            stride_biasn,
            HAS_MASK,
            HAS_BIAS,
        )
        y = tl.exp(s - m_shift[:, None]) * inv_l[:, None]
        tl.store(
            out_ptr + rows[:, None] * stride_outm + cols[None, :] * stride_outn,
            y.to(out_ptr.dtype.element_ty),
            mask=row_ok[:, None] & (cols[None, :] < n_cols),
        )


def _kernel(interpret: bool):
    return interpreted(_softmax_kernel) if interpret else _softmax_kernel


def _as_rows(name: str, t: torch.Tensor | None, shape: torch.Size) -> torch.Tensor | None:
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or None, got {type(t).__name__}")
    try:
        t = t.expand(shape)
    except RuntimeError:
        raise ValueError(
            f"{name}.shape={tuple(t.shape)} does not broadcast to x.shape={tuple(shape)}"
        ) from None
    return t.reshape(-1, shape[-1])


def softmax(
    x: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
    out: torch.Tensor | None = None,
    block_m: int = 16,
    block_n: int = 128,
    interpret: bool = False,
) -> torch.Tensor:
    """Masked softmax over the last axis of ``x``.

    Args:
        x: logits ``[..., N]``, float32/float16/bfloat16, ``N >= 1``.
        mask: optional boolean ``[..., N]`` (broadcastable); ``False`` removes a key.
        bias: optional additive bias ``[..., N]`` (broadcastable), any float dtype; not scaled.
        scale: positive finite multiplier applied to ``x`` once (default 1).
        out: optional output ``[..., N]`` of ``x.dtype``, rows viewable as ``[rows, N]``.
        block_m, block_n: tile sizes (powers of two; ``block_m <= 128``, ``16 <= block_n <= 8192``).
        interpret: run Triton's interpreter (CPU tensors) instead of the compiled kernel.

    Returns:
        ``[..., N]`` in ``x.dtype``; rows with no valid key are zeros.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in DTYPES:
        raise ValueError(f"x.dtype={x.dtype} is not supported; expected one of {DTYPES}")
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError(f"x.shape={tuple(x.shape)} must have a last axis of length >= 1")
    scale = check_scale(scale)
    check_block("block_m", block_m, 1, 128)
    check_block("block_n", block_n, 16, 8192)
    if mask is not None and isinstance(mask, torch.Tensor) and mask.dtype != torch.bool:
        raise ValueError(f"mask.dtype={mask.dtype} must be torch.bool")
    if bias is not None and isinstance(bias, torch.Tensor) and not bias.is_floating_point():
        raise ValueError(f"bias.dtype={bias.dtype} must be a floating dtype")
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    mask2 = _as_rows("mask", mask, x.shape)
    bias2 = _as_rows("bias", bias, x.shape)
    for name, t in (("mask", mask2), ("bias", bias2)):
        if t is not None and t.device != x.device:
            raise ValueError(f"{name} is on {t.device} but x is on {x.device}")
    if out is None:
        out = torch.empty_like(x)
    out2 = check_out_tensor(out, x)
    n_rows = x2.shape[0]
    if n_rows == 0:
        return out
    if mask2 is not None:
        mask2 = mask2.view(torch.uint8)
    dummy = x2
    grid = (triton.cdiv(n_rows, block_m),)
    _kernel(interpret)[grid](
        x2,
        mask2 if mask2 is not None else dummy,
        bias2 if bias2 is not None else dummy,
        out2,
        n_rows,
        n_cols,
        scale,
        x2.stride(0),
        x2.stride(1),
        *(mask2.stride() if mask2 is not None else (0, 0)),
        *(bias2.stride() if bias2 is not None else (0, 0)),
        out2.stride(0),
        out2.stride(1),
        HAS_MASK=mask2 is not None,
        HAS_BIAS=bias2 is not None,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
    )
    return out
