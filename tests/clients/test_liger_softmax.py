"""liger-kernel's softmax (``LigerSoftmaxFunction``: Triton kernels launched by liger's own Python
code) in Triton's interpreter on CPU tensors, through ``fuzz.triton_runtime``: the forward against
the harness's softmax oracle and tolerance, the backward against float64 autograd with the bound
derived below. liger takes the softmax over the last axis, as the harness's softmax does. Skipped
when liger-kernel is not installed (``pip install -e ".[clients]"``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip(
    "liger_kernel.ops.softmax", reason="liger-kernel is not installed (extra 'clients')"
)

from liger_kernel.ops.softmax import LigerSoftmaxFunction

from fuzz.arrays import finfo, np_dtype
from fuzz.backends import TorchAdapter
from fuzz.case import Case
from fuzz.triton_runtime import interpreting
from oracles.softmax import softmax_reference

CPU = TorchAdapter("cpu")
# Half the smallest subnormal: the most a product or sum that underflows loses, absolutely.
ETA = {"float32": 2.0**-150, "float16": 2.0**-25, "bfloat16": 2.0**-134}


def _gamma(k: int, u: float) -> float:
    return k * u / (1 - k * u)


def forward_error(x: np.ndarray, y: np.ndarray, dtype: str) -> np.ndarray:
    """How far liger's stored forward output ``y_s`` may be from the exact softmax ``y``.

    liger computes in float32 (unit roundoff ``v``): ``x - m`` (relative ``v``, so the exponent is
    off by ``v |x - m|``), ``exp`` (NumPy's float32 exp is validated to 3 ulp, ``6 v`` relative),
    the row sum of ``n`` exponentials (``gamma_n``, any order, each term off as above), the
    division (``v``), then the store in the dtype (``u``). To first order (every term is below
    0.02 here, so ``exp(e) - 1 <= 1.01 e``): ``|y_s - y| <= 1.01 rho |y| + eta32 + eta`` with
    ``rho = v (|x_i - m| + max_j |x_j - m| + 13) + gamma_n(v) + u``; the etas cover exponentials
    and stores that underflow (``d >= 1``: the largest term is exp(0)).
    """
    v, u = finfo("float32").eps / 2, finfo(dtype).eps / 2
    x = x.astype(np.float64)
    spread = np.abs(x - x.max(axis=-1, keepdims=True))
    rho = v * (spread + spread.max(axis=-1, keepdims=True) + 13) + _gamma(x.shape[-1], v) + u
    assert rho.max() < 0.02
    return 1.01 * rho * np.abs(y) + ETA["float32"] + ETA[dtype]


def backward_bound(x: np.ndarray, y: np.ndarray, dy: np.ndarray, dtype: str) -> np.ndarray:
    """What liger's backward ``dx = y_s * (dy - sum(y_s * dy))`` may miss the exact gradient by.

    liger computes in the input dtype (Triton keeps fp16/bf16 arithmetic in it; unit roundoff
    ``u``): every product, the row sum's additions, the difference and the last product round.
    The scope sums fp16/bf16 along a tree (``ceil(log2 n)`` roundings per term) and NumPy float32
    in any order (``n``): ``k`` roundings with the product's. With ``a_j`` the forward's error
    (:func:`forward_error`), ``S = sum |y dy|`` and ``A = sum a |dy|``, the computed row sum is off
    by ``E <= A + gamma_k (S + A) + n eta``; then ``|dx_i - y_i (dy_i - s)| <= a_i (|dy_i| + S +
    E)(1 + gamma_2) + |y_i| (gamma_2 (|dy_i| + S + E) + E) + eta``.
    """
    u = finfo(dtype).eps / 2
    n = y.shape[-1]
    k = n if dtype == "float32" else int(np.ceil(np.log2(max(n, 2)))) + 1
    eta = ETA[dtype]
    a = forward_error(x, y, dtype)
    s_abs = np.abs(y * dy).sum(axis=-1, keepdims=True)
    a_dy = (a * np.abs(dy)).sum(axis=-1, keepdims=True)
    e = a_dy + _gamma(k, u) * (s_abs + a_dy) + n * eta
    rest = np.abs(dy) + s_abs + e
    return a * rest * (1 + _gamma(2, u)) + np.abs(y) * (_gamma(2, u) * rest + e) + eta


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(3, 5, 37), (2, 1), (4, 300)])
def test_forward_and_backward(dtype, shape, within_bounds):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 4).astype(np_dtype(dtype))
    dy = rng.standard_normal(shape).astype(np_dtype(dtype))
    xt = CPU.put(x).requires_grad_()
    with interpreting():
        y = LigerSoftmaxFunction.apply(xt)
        y.backward(CPU.put(dy))
    case = Case({"x": x}, {"dtype": dtype, "scale": None, "block_m": 16, "block_n": 128})
    within_bounds("softmax", case, {"y": CPU.get(y)})
    x64 = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    y64 = softmax_reference(x64)
    y64.backward(torch.from_numpy(dy.astype(np.float64)))
    exact = x64.grad.numpy()
    bound = backward_bound(x, y64.detach().numpy(), dy.astype(np.float64), dtype)
    dx = CPU.get(xt.grad).astype(np.float64)
    assert np.isfinite(dx).all()
    worst = np.unravel_index(int(np.argmax(np.abs(dx - exact) / bound)), dx.shape)
    assert np.abs(dx - exact)[worst] <= bound[worst], (worst, dx[worst], exact[worst], bound[worst])


def test_side_by_side_with_the_harness_own_softmax():
    """In one scope: liger's kernel (routed) and the harness's own softmax (its own twins)."""
    from kernels.softmax.triton import softmax

    x = torch.linspace(-5, 5, 3 * 50).reshape(3, 50)
    with interpreting():
        ours = softmax(x, interpret=True)
        theirs = LigerSoftmaxFunction.apply(x)
    assert torch.allclose(ours, theirs, rtol=0, atol=4 * 2.0**-24)  # two fp32 roundings of <= 1
