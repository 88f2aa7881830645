"""The softmax kernels' public wrappers: bad input gets a clear error naming the argument, and the
call shapes the harness's 2-D strategies do not draw (leading axes, broadcast masks) work."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from kernels.softmax import pallas as kpallas
from kernels.softmax import triton as ktriton
from oracles.softmax import softmax_reference


def call_triton(x, **kw):
    conv = lambda a: torch.from_numpy(a) if isinstance(a, np.ndarray) else a  # noqa: E731
    kw = {k: conv(v) for k, v in kw.items()}
    return ktriton.softmax(conv(x), interpret=True, **kw)


def call_pallas(x, **kw):
    conv = lambda a: jnp.asarray(a) if isinstance(a, np.ndarray) else a  # noqa: E731
    kw = {k: conv(v) for k, v in kw.items()}
    return kpallas.softmax(conv(x), interpret=True, **kw)


X = np.zeros((2, 5), np.float32)
BAD = [
    (dict(x=X.astype(np.float16)[:, :0]), ValueError, "must have a last axis of length >= 1"),
    (dict(x=X.astype(np.int32)), ValueError, "x.dtype="),
    (dict(x=np.zeros((2, 0), np.float32)), ValueError, "must have a last axis of length >= 1"),
    (dict(x=X, scale=0.0), ValueError, "scale=0.0 must be finite and > 0"),
    (dict(x=X, scale=-2.0), ValueError, "scale=-2.0 must be finite and > 0"),
    (dict(x=X, scale=math.nan), ValueError, "scale=nan must be finite and > 0"),
    (dict(x=X, scale=math.inf), ValueError, "scale=inf must be finite and > 0"),
    (dict(x=X, scale="1"), TypeError, "scale must be a float or None"),
    (dict(x=X, block_m=3), ValueError, "block_m=3 must be a power of two in [1, 128]"),
    (dict(x=X, block_n=8), ValueError, "block_n=8 must be a power of two in [16, 8192]"),
    (dict(x=X, block_n=16384), ValueError, "block_n=16384 must be a power of two in [16, 8192]"),
    (dict(x=X, block_m=True), TypeError, "block_m must be an int"),
    (dict(x=X, mask=np.zeros((2, 5), np.int8)), ValueError, "mask.dtype="),
    (
        dict(x=X, mask=np.zeros((3, 5), bool)),
        ValueError,
        "mask.shape=(3, 5) does not broadcast to x.shape=(2, 5)",
    ),
    (dict(x=X, bias=np.zeros((2, 5), np.int32)), ValueError, "bias.dtype="),
    (
        dict(x=X, bias=np.zeros((2, 4), np.float32)),
        ValueError,
        "bias.shape=(2, 4) does not broadcast",
    ),
    (dict(x=X, out=np.zeros((2, 4), np.float32)), ValueError, "out"),
    (dict(x=X, out=np.zeros((2, 5), np.float16)), ValueError, "out"),
]


@pytest.mark.parametrize("call", [call_triton, call_pallas], ids=["triton", "pallas"])
@pytest.mark.parametrize("kwargs, exc, message", BAD)
def test_bad_input_is_named(call, kwargs, exc, message):
    with pytest.raises(exc) as info:
        call(**kwargs)
    assert message in str(info.value)


def test_float64_is_refused_by_triton():
    with pytest.raises(ValueError, match=r"x\.dtype=torch\.float64 is not supported"):
        call_triton(X.astype(np.float64))


@pytest.mark.parametrize("call", [call_triton, call_pallas], ids=["triton", "pallas"])
def test_wrong_array_type_is_named(call):
    with pytest.raises(TypeError, match="x must be a"):
        (ktriton if call is call_triton else kpallas).softmax([1.0, 2.0], interpret=True)


@pytest.mark.parametrize("call", [call_triton, call_pallas], ids=["triton", "pallas"])
def test_leading_axes_broadcast_mask_and_bias(call):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 37)).astype(np.float32)
    mask = rng.random((1, 1, 37)) < 0.5
    bias = rng.standard_normal((37,)).astype(np.float32)
    y = np.asarray(call(x, mask=mask, bias=bias, scale=0.3, block_n=16))
    ref = softmax_reference(
        torch.from_numpy(x),
        torch.from_numpy(np.broadcast_to(mask, x.shape).copy()),
        torch.from_numpy(np.broadcast_to(bias, x.shape).copy()),
        0.3,
    ).numpy()
    assert y.shape == x.shape
    np.testing.assert_allclose(y, ref, atol=1e-6)


def test_triton_writes_into_a_strided_out_and_nothing_else():
    x = torch.randn(4, 21)
    big = torch.full((4, 30), float("nan"))
    out = big[:, 3:24]
    r = ktriton.softmax(x, out=out, interpret=True, block_n=16)
    assert r is out
    assert torch.isnan(big[:, :3]).all() and torch.isnan(big[:, 24:]).all()
    torch.testing.assert_close(out, torch.softmax(x, -1))


def test_pallas_out_is_the_initial_buffer():
    x = jnp.asarray(np.random.default_rng(1).standard_normal((3, 9)), jnp.float32)
    init = jnp.full(x.shape, jnp.nan, jnp.float32)
    y = kpallas.softmax(x, out=init, interpret=True, block_n=16)
    np.testing.assert_allclose(np.asarray(y), np.asarray(jax.nn.softmax(x, -1)), atol=1e-6)
