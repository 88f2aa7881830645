"""bfloat16 in Triton's interpreter: what Triton 3.6 gets wrong (``bf16=False``, its own behaviour:
bf16 values are raw uint16 bits) and what ``interpreted(kernel, bf16=True)`` (and the
``interpreting()`` scope) computes instead: bf16 numbers rounded to nearest even after every
operation, as a GPU computes them. Expected values come from torch on the CPU, whose bf16
operations round the float32 result of each operation to nearest even (the same rule)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kernels._triton_interp import interpreted

N = 16
BF16 = torch.bfloat16


@triton.jit
def _arith(a_ptr, b_ptr, add_ptr, mul_ptr, sub_ptr, max_ptr, lt_ptr, half_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    tl.store(add_ptr + offs, a + b)
    tl.store(mul_ptr + offs, a * b)
    tl.store(sub_ptr + offs, a - b)
    tl.store(max_ptr + offs, tl.maximum(a, b))
    tl.store(lt_ptr + offs, (a < b).to(tl.int8))
    tl.store(half_ptr + offs, a * 0.5 + tl.full([N], 1.5, tl.bfloat16))


def _bits(t: torch.Tensor) -> list[int | str]:
    """The bit patterns, NaN as "nan" (NaN payloads differ between implementations)."""
    nan = torch.isnan(t.float()).tolist()
    return ["nan" if n else b for n, b in zip(nan, t.view(torch.int16).tolist(), strict=True)]


def _run_arith(bf16: bool):
    gen = torch.Generator().manual_seed(0)
    a = (torch.randn(N, generator=gen) * 3).to(BF16)
    b = (torch.randn(N, generator=gen) * 3).to(BF16)
    b[0] = a[0]  # a tie for < and max
    outs = [torch.zeros(N, dtype=BF16) for _ in range(4)]
    lt, half = torch.zeros(N, dtype=torch.int8), torch.zeros(N, dtype=BF16)
    interpreted(_arith, bf16=bf16)[(1,)](a, b, *outs, lt, half, N)
    want = [a + b, a * b, a - b, torch.maximum(a, b)]
    return outs, want, lt, (a < b).to(torch.int8), half, a * 0.5 + 1.5


def test_arithmetic_and_comparisons_are_bf16_arithmetic():
    outs, want, lt, want_lt, half, want_half = _run_arith(bf16=True)
    for got, exp in zip(outs, want, strict=True):
        assert _bits(got) == _bits(exp)
    assert torch.equal(lt, want_lt)
    assert _bits(half) == _bits(want_half)


def test_triton_alone_computes_on_the_bits():
    with pytest.raises(Exception, match="get_bf16"):  # a bf16 scalar constant: no builder method
        _run_arith(bf16=False)


@triton.jit
def _arith_no_constants(a_ptr, b_ptr, add_ptr, mul_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    tl.store(add_ptr + offs, a + b)
    tl.store(mul_ptr + offs, a * b)


def test_triton_alone_adds_and_multiplies_bit_patterns():
    a, b = torch.full((N,), 1.5, dtype=BF16), torch.full((N,), 2.0, dtype=BF16)
    add, mul = torch.zeros(N, dtype=BF16), torch.zeros(N, dtype=BF16)
    interpreted(_arith_no_constants)[(1,)](a, b, add, mul, N)
    assert add[0].item() != 3.5 and mul[0].item() != 3.0  # integer sums of the bit patterns
    interpreted(_arith_no_constants, bf16=True)[(1,)](a, b, add, mul, N)
    assert add[0].item() == 3.5 and mul[0].item() == 3.0


@triton.jit
def _reduce_dot(a_ptr, b_ptr, sum_ptr, dot_ptr, N: tl.constexpr):
    rows = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    a = tl.load(a_ptr + rows)
    b = tl.load(b_ptr + rows)
    tl.store(sum_ptr + tl.arange(0, N), tl.sum(a, axis=1))
    tl.store(dot_ptr + rows, tl.dot(a, b))


@pytest.mark.parametrize("bf16", [True, False])
def test_sums_and_dots_of_bf16(bf16):
    """Small integers: every partial sum and product is exact in bf16 (|sum| <= 16 * 8 = 128 <
    2^8) and in the float32 accumulator, so the order of additions cannot matter."""
    gen = torch.Generator().manual_seed(1)
    a = torch.randint(-8, 9, (N, N), generator=gen).to(BF16)
    b = torch.randint(-8, 9, (N, N), generator=gen).to(BF16)
    sums, dot = torch.zeros(N, dtype=BF16), torch.zeros(N, N, dtype=torch.float32)
    interpreted(_reduce_dot, bf16=bf16)[(1,)](a, b, sums, dot, N)
    right = torch.equal(sums, a.float().sum(1).to(BF16)) and torch.equal(dot, a.float() @ b.float())
    assert right == bf16


@triton.jit
def _casts(
    f32_ptr,
    f64_ptr,
    i32_ptr,
    sub_ptr,
    to_bf16_ptr,
    from_f64_ptr,
    from_i32_ptr,
    to_i32_ptr,
    sub_f32_ptr,
    rtz_ptr,
    N: tl.constexpr,
):
    offs = tl.arange(0, N)
    x = tl.load(f32_ptr + offs)
    tl.store(to_bf16_ptr + offs, x.to(tl.bfloat16))
    tl.store(rtz_ptr + offs, x.to(tl.bfloat16, fp_downcast_rounding="rtz"))
    tl.store(from_f64_ptr + offs, tl.load(f64_ptr + offs).to(tl.bfloat16))
    tl.store(from_i32_ptr + offs, tl.load(i32_ptr + offs).to(tl.bfloat16))
    tl.store(to_i32_ptr + offs, x.to(tl.bfloat16).to(tl.int32))
    tl.store(sub_f32_ptr + offs, tl.load(sub_ptr + offs).to(tl.float32))


def _cast_inputs():
    base = 1.0 + 2.0**-7  # a bf16 number with its last bit set
    f32 = torch.tensor(
        [
            base + 2.0**-8,
            1.0 + 2.0**-8,
            1.0 + 2.0**-8 + 2.0**-20,
            -(base + 2.0**-9),
            3.3,
            -7.77,
            float("inf"),
            float("nan"),
            0.0,
            -0.0,
            1e-40,
            255.5,
            256.5,
            -1.0,
            2.0**100,
            0.1,
        ],
        dtype=torch.float32,
    )
    f64 = torch.tensor([1.0 + 2.0**-8 + 2.0**-40] * 8 + [0.1, -3.3] * 4, dtype=torch.float64)
    i32 = torch.tensor(
        [257, 258, 259, -513, 7, 0, 1 << 20, (1 << 20) + 4097] * 2, dtype=torch.int32
    )
    sub = torch.tensor([1, 2, 3, 0x7F, -0x7FFF, -0x7F81, 0, 0x40] * 2, dtype=torch.int16).view(BF16)
    return f32, f64, i32, sub


def _run_casts(bf16: bool):
    f32, f64, i32, sub = _cast_inputs()
    outs = [torch.zeros(N, dtype=BF16) for _ in range(3)]
    to_i32, sub_f32, rtz = (
        torch.zeros(N, dtype=torch.int32),
        torch.zeros(N),
        torch.zeros(N, dtype=BF16),
    )
    with np.errstate(invalid="ignore"):  # inf and NaN to int32 (undefined, as on a GPU)
        interpreted(_casts, bf16=bf16)[(1,)](f32, f64, i32, sub, *outs, to_i32, sub_f32, rtz, N)
    return outs, to_i32, sub_f32, rtz


def test_casts_round_to_nearest_even_and_keep_subnormals():
    f32, f64, i32, sub = _cast_inputs()
    (to_bf16, from_f64, from_i32), to_i32, sub_f32, rtz = _run_casts(bf16=True)
    assert _bits(to_bf16) == _bits(f32.to(BF16))  # torch rounds to nearest even
    assert _bits(from_f64) == _bits(f64.to(BF16))  # one rounding from float64
    assert _bits(from_i32) == _bits(i32.to(BF16))
    finite = torch.isfinite(f32)
    assert torch.equal(to_i32[finite], f32.to(BF16)[finite].to(torch.int32))
    assert torch.equal(sub_f32, sub.float())  # bf16 subnormals are exact in float32
    truncated = (f32.view(torch.int32) >> 16).to(torch.int16).view(BF16)
    assert _bits(rtz) == _bits(truncated)  # rtz: truncation


def test_triton_alone_truncates_and_flushes():
    f32, _, _, sub = _cast_inputs()
    (to_bf16, _, from_i32), _, sub_f32, _ = _run_casts(bf16=False)
    assert _bits(to_bf16) != _bits(f32.to(BF16))  # truncated, not rounded
    assert from_i32[0].item() != 257.0 or from_i32[4].item() != 7.0  # integer bits as bf16 bits
    assert not torch.equal(sub_f32, sub.float())  # subnormals read as zero


@triton.jit
def _atomic(x_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.atomic_add(x_ptr + offs, tl.load(x_ptr + offs))


def test_bf16_atomics_are_a_clear_error():
    with pytest.raises(Exception, match=r"atomic .* on bfloat16 is not supported"):
        interpreted(_atomic, bf16=True)[(1,)](torch.ones(N, dtype=BF16), N)


def test_scopes_use_bf16_arithmetic():
    """A library's launch in ``interpreting()`` computes bf16 as bf16 (routed, not interpreted())."""
    from fuzz.triton_runtime import interpreting

    a, b = torch.full((N,), 1.5, dtype=BF16), torch.full((N,), 2.0, dtype=BF16)
    add, mul = torch.zeros(N, dtype=BF16), torch.zeros(N, dtype=BF16)
    with interpreting():
        _arith_no_constants[(1,)](a, b, add, mul, N)
    assert np.all(add.float().numpy() == 3.5) and np.all(mul.float().numpy() == 3.0)


@triton.jit
def _row_sum(x_ptr, out_ptr, N: tl.constexpr):
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, N)), axis=0))


@pytest.mark.parametrize("dtype", [torch.float16, BF16])
def test_half_sums_round_in_the_dtype_along_a_tree(dtype):
    """``tl.sum`` keeps fp16/bf16, so a GPU rounds every addition of its tree to the dtype. 2^k
    then ones: a tree of neighbours rounds 2^k + 1 back to 2^k first (one unit is half the
    spacing there, a tie to even), then adds the ones' partial sums 2 + 4 + 8 exactly: 2^k + 14.
    NumPy alone sums fp16 in float32 (2^k + 15, rounded once: 2^k + 16) and bf16 in sequence
    (every 1 lost: 2^k)."""
    big = 2048.0 if dtype == torch.float16 else 256.0  # where the spacing is 2
    x = torch.tensor([big] + [1.0] * 15, dtype=dtype)
    out = torch.zeros(1, dtype=dtype)
    interpreted(_row_sum, bf16=True, tree_sums=True)[(1,)](x, out, N)
    assert out.item() == big + 14
    interpreted(_row_sum, bf16=True)[(1,)](x, out, N)
    assert out.item() == (big + 16 if dtype == torch.float16 else big)
