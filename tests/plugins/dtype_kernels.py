"""Plugin kernels that pass and allocate dtypes of their own, each with a planted bug: the harness
must read, poison and guard what they hand it (or decline it as its own limit), never report it
as the kernel's crash, and find the bug.

* ``uint8_mask_softmax``: a Triton softmax whose wrapper views the bool mask as ``torch.uint8``
  before the launch (Triton has no bool pointers; ``kernels/softmax/triton.py`` does the same).
  Planted bug: the denominator sums the masked keys too.
* ``scratch_softmax``: a torch softmax that allocates scratch of every integer width, float64,
  bool, complex64 and float8 through each allocator the harness guards. Planted bug: a row of two
  or more keys has 1 added to its denominator.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import fuzz


@triton.jit
def _masked_softmax_kernel(
    x_ptr,
    mask_ptr,
    y_ptr,
    n_cols,
    stride_xm,
    stride_maskm,
    stride_ym,
    scale,
    HAS_MASK: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    in_bounds = cols < n_cols
    x = tl.load(x_ptr + row * stride_xm + cols, mask=in_bounds, other=float("-inf"))
    x = x.to(tl.float32) * scale
    s = x
    if HAS_MASK:
        keep = tl.load(mask_ptr + row * stride_maskm + cols, mask=in_bounds, other=0)
        s = tl.where(keep != 0, x, float("-inf"))
    m = tl.max(s, 0)
    m = tl.where(m == float("-inf"), 0.0, m)
    e = tl.exp(s - m)
    denominator = tl.sum(tl.exp(x - m), 0)  # the planted bug: masked keys counted (exp(s - m))
    y = tl.where(denominator > 0, e / denominator, 0.0)
    tl.store(y_ptr + row * stride_ym + cols, y.to(y_ptr.dtype.element_ty), mask=in_bounds)


def uint8_mask_softmax(x, *, mask, scale):
    n = x.shape[-1]
    x2 = x.reshape(-1, n).contiguous()
    y = torch.empty_like(x2)
    mask2 = None
    if mask is not None:
        mask2 = torch.broadcast_to(mask, x.shape).reshape(-1, n).contiguous().view(torch.uint8)
    _masked_softmax_kernel[(x2.shape[0],)](
        x2,
        mask2 if mask2 is not None else x2,
        y,
        n,
        x2.stride(0),
        mask2.stride(0) if mask2 is not None else 0,
        y.stride(0),
        1.0 if scale is None else float(scale),
        HAS_MASK=mask2 is not None,
        BLOCK_N=triton.next_power_of_2(n),
    )
    return y.reshape(x.shape)


fuzz.fuzz_kernel(
    "uint8_mask_softmax",
    family="softmax",
    kernel=uint8_mask_softmax,
    capabilities=fuzz.Capabilities(
        dtypes=("float32",), features={"mask", "scale"}, backends=("interpreted",)
    ),
    description="a Triton softmax taking its mask as uint8; planted bug: masked keys in the sum",
)


def scratch_softmax(x, *, scale):
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    r = rows.shape[0]
    # Scratch a library allocates: flags, codes, lookup tables, counters, an fp8 copy.
    flags = torch.zeros_like(rows, dtype=torch.bool)
    codes = torch.empty((r, n), dtype=torch.uint8)
    small = torch.zeros(r, dtype=torch.int8)
    table = torch.empty_like(rows, dtype=torch.int16)
    halfwords = rows.new_empty((r, n), dtype=torch.uint16)
    phases = rows.new_zeros((r, n), dtype=torch.complex64)
    fp8 = torch.empty_strided((r, n), (n, 1), dtype=torch.float8_e4m3fn)
    count = torch.zeros(r, dtype=torch.int64)
    sums = torch.empty((r, 1), dtype=torch.float64)
    flags.fill_(True)
    codes.fill_(1)
    small += 1
    table.fill_(n)
    halfwords.fill_(n)
    phases += 1
    fp8.copy_(rows.clamp(-448, 448))
    count += table[:, 0].long()
    s = rows.double() * (1.0 if scale is None else float(scale))
    e = torch.exp(s - s.amax(-1, keepdim=True))
    sums.copy_(e.sum(-1, keepdim=True))
    y = e / (sums + (count[:, None] > 1))  # the planted bug: 1 added where a row has 2+ keys
    return y.to(x.dtype).reshape(x.shape)


fuzz.fuzz_kernel(
    "scratch_softmax",
    family="softmax",
    kernel=scratch_softmax,
    capabilities=fuzz.Capabilities(dtypes=("float32",), features={"scale"}),
    description="a softmax with scratch of many dtypes; planted bug: 1 added to a denominator",
)
