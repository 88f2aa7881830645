"""A plugin Triton softmax with two independent planted bugs, and one whose library declares a
known failure: the harness must report every distinct bug of a kernel, each with its own minimal
reproducer, and look past a failure the library says it knows.

``two_bugs_softmax`` (one program per row, an online max and sum over ``block_n`` tiles):

* bug 1, a bias present: the scale is applied to the bias too (``scale * (x + bias)``);
* bug 2, rows longer than one tile: the running sum is rescaled by ``exp(m_new - m_old)``
  instead of ``exp(m_old - m_new)``.

Both are ``accuracy`` failures of output ``y``, at float32: one failure class, one output, one
dtype. What tells them apart is what their minimal examples need (a bias; a second tile), not
their class.

``tf32_softmax`` rounds its inputs to TF32's 10-bit mantissa (as fp32 dot products on a tensor
core do): every float32 case is off by more than the error bound, which its library declares as a
known failure. Its other bug: a row with every key masked gives NaN (0 / 0) where the family's
convention is zeros.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import fuzz


@triton.jit
def _softmax_kernel(
    x_ptr,
    bias_ptr,
    mask_ptr,
    y_ptr,
    n_cols,
    stride_x,
    stride_b,
    stride_m,
    stride_y,
    scale,
    HAS_BIAS: tl.constexpr,
    HAS_MASK: tl.constexpr,
    TF32: tl.constexpr,
    BAD_RESCALE: tl.constexpr,
    EMPTY_NAN: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    m_run = float("-inf")
    l_run = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        s = _logits(
            x_ptr, bias_ptr, mask_ptr, row, cols, n_cols, stride_x, stride_b, stride_m, scale,
            HAS_BIAS, HAS_MASK, TF32,
        )  # fmt: skip
        m_new = tl.maximum(m_run, tl.max(s, axis=0))
        safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        # Planted bug 2: the running sum is rescaled by exp(m_new - m_old), not exp(m_old - m_new)
        # (in the first tile the old sum is 0: only a second tile shows it).
        if BAD_RESCALE:
            alpha = tl.where(m_run == float("-inf"), 0.0, tl.exp(safe - m_run))
        else:
            alpha = tl.where(m_run == float("-inf"), 0.0, tl.exp(m_run - safe))
        l_run = l_run * alpha + tl.sum(tl.exp(s - safe), axis=0)
        m_run = m_new
    safe = tl.where(m_run == float("-inf"), 0.0, m_run)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        s = _logits(
            x_ptr, bias_ptr, mask_ptr, row, cols, n_cols, stride_x, stride_b, stride_m, scale,
            HAS_BIAS, HAS_MASK, TF32,
        )  # fmt: skip
        # tf32_softmax's bug: a row with every key masked has l_run = 0: 0 / 0 = NaN.
        y = tl.exp(s - safe) / l_run
        if not EMPTY_NAN:  # a row with no finite logit gives zeros, as the family's convention
            y = tl.where(l_run == 0.0, 0.0, y)
        tl.store(y_ptr + row * stride_y + cols, y, mask=cols < n_cols)


@triton.jit
def _logits(
    x_ptr, bias_ptr, mask_ptr, row, cols, n_cols, stride_x, stride_b, stride_m, scale,
    HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr, TF32: tl.constexpr,
):  # fmt: skip
    inb = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=inb, other=float("-inf")).to(tl.float32)
    if TF32:  # keep 10 explicit mantissa bits (round to nearest even), as a TF32 operand
        bits = x.to(tl.int32, bitcast=True)
        bits = (bits + 0xFFF + ((bits >> 13) & 1)) & -8192
        x = tl.where(inb, bits.to(tl.float32, bitcast=True), x)
    if HAS_BIAS:
        b = tl.load(bias_ptr + row * stride_b + cols, mask=inb, other=0.0).to(tl.float32)
        s = scale * (x + b)  # planted bug 1: the bias is scaled too
    else:
        s = scale * x
    if HAS_MASK:
        keep = tl.load(mask_ptr + row * stride_m + cols, mask=inb, other=0) != 0
        s = tl.where(keep, s, float("-inf"))
    return s


def _launch(x, *, bias=None, mask=None, scale, block_n, tf32=False, bad_rescale=False, nan=False):
    rows, cols = x.shape
    x = x.contiguous()
    y = torch.empty((rows, cols), dtype=torch.float32, device=x.device)
    b = bias.contiguous() if bias is not None else x
    m = mask.to(torch.int8).contiguous() if mask is not None else x
    if rows and cols:
        _softmax_kernel[(rows,)](
            x, b, m, y, cols, x.stride(0), b.stride(0), m.stride(0), y.stride(0), float(scale),
            HAS_BIAS=bias is not None, HAS_MASK=mask is not None, TF32=tf32,
            BAD_RESCALE=bad_rescale, EMPTY_NAN=nan, BLOCK=block_n,
        )  # fmt: skip
    return y.to(x.dtype)


def two_bugs_softmax(x, *, bias, scale, block_n):
    return _launch(x, bias=bias, scale=scale, block_n=block_n, bad_rescale=True)


fuzz.fuzz_kernel(
    "two_bugs_softmax",
    family="softmax",
    kernel=two_bugs_softmax,
    capabilities=fuzz.Capabilities(
        dtypes=("float32",), features={"bias", "scale"}, tiles={"block_n": (16,)}
    ),
    description="a Triton softmax with two planted bugs: a scaled bias; a wrong rescale across tiles",
)


def tf32_softmax(x, *, mask, scale, block_n):
    return _launch(
        x, mask=mask, scale=scale, block_n=block_n, tf32=x.dtype == torch.float32, nan=True
    )


fuzz.fuzz_kernel(
    "tf32_softmax",
    family="softmax",
    kernel=tf32_softmax,
    capabilities=fuzz.Capabilities(
        dtypes=("float32", "float16"), features={"mask", "scale"}, tiles={"block_n": (16,)}
    ),
    known_failures=[
        fuzz.KnownFailure(
            "float32 inputs are rounded to TF32 (10-bit mantissa), as on tensor cores",
            classes="accuracy",
            dtypes="float32",
        )
    ],
    description="a Triton softmax on TF32-rounded float32 inputs (declared) and a NaN for fully masked rows",
)
