"""The jagged softmax kernels' public wrappers: bad input gets a clear error naming the argument
(before any launch), and the edge cases the semantics promise hold on both interpreters."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from kernels.jagged_softmax import pallas as kpallas
from kernels.jagged_softmax import triton as ktriton
from oracles.jagged_softmax import jagged_softmax_reference


def call_triton(values, offsets, **kw):
    conv = lambda a: torch.from_numpy(a) if isinstance(a, np.ndarray) else a  # noqa: E731
    kw = {k: conv(v) for k, v in kw.items()}
    return ktriton.jagged_softmax(conv(values), conv(offsets), interpret=True, **kw)


def call_pallas(values, offsets, **kw):
    conv = lambda a: jnp.asarray(a) if isinstance(a, np.ndarray) else a  # noqa: E731
    kw = {k: conv(v) for k, v in kw.items()}
    return kpallas.jagged_softmax(conv(values), conv(offsets), interpret=True, **kw)


CALLS = [call_triton, call_pallas]
IDS = ["triton", "pallas"]

X = np.zeros((5, 3), np.float32)
OFF = np.array([0, 2, 2, 5], np.int32)
BAD = [
    (dict(values=X.astype(np.int32), offsets=OFF), ValueError, "values.dtype="),
    (
        dict(values=np.zeros(5, np.float32), offsets=OFF),
        ValueError,
        "values.shape=(5,) must be 2-D [N, M]",
    ),
    (dict(values=X, offsets=OFF.astype(np.float32)), ValueError, "offsets.dtype="),
    (
        dict(values=X, offsets=OFF.reshape(2, 2)),
        ValueError,
        "offsets.shape=(2, 2) must be 1-D [B+1]",
    ),
    (dict(values=X, offsets=np.zeros(0, np.int32)), ValueError, "must have at least one entry"),
    (dict(values=X, offsets=np.array([1, 2, 5], np.int32)), ValueError, "offsets[0]=1 must be 0"),
    (
        dict(values=X, offsets=np.array([0, 3, 2, 5], np.int32)),
        ValueError,
        "offsets must be non-decreasing: offsets[1]=3 > offsets[2]=2",
    ),
    (
        dict(values=X, offsets=np.array([0, 2, 4], np.int32)),
        ValueError,
        "offsets[-1]=4 must equal values.shape[0]=5",
    ),
    (
        dict(values=X, offsets=np.array([0, 2, 6], np.int32)),
        ValueError,
        "offsets[-1]=6 must equal values.shape[0]=5",
    ),
    (
        dict(values=X, offsets=OFF, block_n=3),
        ValueError,
        "block_n=3 must be a power of two in [2, 1024]",
    ),
    (
        dict(values=X, offsets=OFF, block_n=1),
        ValueError,
        "block_n=1 must be a power of two in [2, 1024]",
    ),
    (
        dict(values=X, offsets=OFF, block_m=512),
        ValueError,
        "block_m=512 must be a power of two in [1, 256]",
    ),
    (dict(values=X, offsets=OFF, block_m=True), TypeError, "block_m must be an int"),
    (dict(values=X, offsets=OFF, num_programs=0), ValueError, "num_programs=0 must be >= 1"),
    (
        dict(values=X, offsets=OFF, num_programs=1.5),
        TypeError,
        "num_programs must be an int or None",
    ),
    (dict(values=X, offsets=OFF, out=np.zeros((5, 2), np.float32)), ValueError, "out is"),
    (dict(values=X, offsets=OFF, out=np.zeros((5, 3), np.float16)), ValueError, "out is"),
]


@pytest.mark.parametrize("call", CALLS, ids=IDS)
@pytest.mark.parametrize("kwargs, exc, message", BAD)
def test_bad_input_is_named(call, kwargs, exc, message):
    with pytest.raises(exc) as info:
        call(**kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize("module", [ktriton, kpallas], ids=IDS)
def test_wrong_array_types_are_named(module):
    with pytest.raises(TypeError, match="values must be a"):
        module.jagged_softmax([[1.0]], OFF, interpret=True)
    good = torch.zeros(5, 3) if module is ktriton else jnp.zeros((5, 3))
    with pytest.raises(TypeError, match="offsets must be a"):
        module.jagged_softmax(good, [0, 5], interpret=True)


def test_triton_refuses_float64_and_offsets_on_another_device():
    with pytest.raises(ValueError, match=r"values\.dtype=torch\.float64 is not supported"):
        call_triton(X.astype(np.float64), OFF)
    with pytest.raises(ValueError, match=r"offsets\.dtype=torch\.int16"):
        call_triton(X, OFF.astype(np.int16))


def test_pallas_pad_value_must_be_a_number():
    with pytest.raises(TypeError, match="pad_value must be a float"):
        call_pallas(X, OFF, pad_value="nan")


def _check(call, lengths, m, *, dtype=np.float32, values=None, **kw):
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    n = int(offsets[-1])
    if values is None:
        values = np.random.default_rng(n * 31 + m).standard_normal((n, m)).astype(dtype)
    y = np.asarray(call(values, offsets, **kw), dtype=np.float64)
    ref = jagged_softmax_reference(
        torch.from_numpy(values.astype(np.float64)), torch.from_numpy(offsets)
    ).numpy()
    assert y.shape == (n, m)
    tol = {np.float32: 1e-6, np.float16: 2e-3}[dtype]
    np.testing.assert_allclose(y, ref, atol=tol, rtol=0)
    return y, offsets


@pytest.mark.parametrize("call", CALLS, ids=IDS)
@pytest.mark.parametrize(
    "lengths",
    [
        [0, 0, 3, 0, 0, 5, 0, 0],  # leading, consecutive, trailing empty segments
        [1, 1, 1],  # one-row segments
        [4, 5, 3, 8, 9],  # below, at and above the tile (block_n=4) and its multiples
        [1, 17, 2],  # one long segment among short ones
    ],
    ids=["empties", "ones", "tile-edges", "one-long"],
)
@pytest.mark.parametrize("num_programs", [None, 2])
def test_edge_layouts_match_the_oracle(call, lengths, num_programs):
    _check(call, lengths, 5, block_n=4, block_m=4, num_programs=num_programs)


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_one_row_segments_give_exactly_one_and_empty_columns_zero(call):
    values = np.array([[3.0, -np.inf], [-1e4, -np.inf], [1e4, 2.0], [-np.inf, -np.inf]], np.float32)
    y, _ = _check(call, [1, 2, 1], 2, values=values, block_n=4, block_m=4)
    assert y[0, 0] == 1.0 and y[3, 0] == 0.0 and y[3, 1] == 0.0
    assert y[0, 1] == 0.0  # a one-row segment whose value is -inf: nothing to normalize
    assert np.isfinite(y).all()


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_no_rows_and_no_segments(call):
    y = call(np.zeros((0, 3), np.float32), np.array([0, 0, 0], np.int32))
    assert tuple(y.shape) == (0, 3)
    y = call(np.zeros((0, 3), np.float32), np.array([0], np.int32))
    assert tuple(y.shape) == (0, 3)


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_float16_and_large_logits(call):
    values = (np.random.default_rng(3).standard_normal((9, 3)) * 30 + 80).astype(np.float16)
    _check(call, [4, 5], 3, dtype=np.float16, values=values, block_n=4, block_m=4)


def test_triton_int64_offsets_and_strided_views():
    rng = np.random.default_rng(5)
    big = torch.from_numpy(rng.standard_normal((12, 7)).astype(np.float32))
    values = big[1:11, 2:6]  # [10, 4], row stride 7
    offsets = torch.tensor([0, 3, 3, 10], dtype=torch.int64)
    out_buf = torch.full((10, 9), float("nan"))
    out = out_buf[:, 3:7]
    y = ktriton.jagged_softmax(values, offsets, out=out, block_n=4, block_m=2, interpret=True)
    assert y is out
    ref = jagged_softmax_reference(values, offsets)
    torch.testing.assert_close(out.double(), ref, atol=1e-6, rtol=0)
    assert torch.isnan(out_buf[:, :3]).all() and torch.isnan(out_buf[:, 7:]).all()


def test_pallas_out_is_the_initial_buffer_and_fully_written():
    values = jnp.asarray(np.random.default_rng(1).standard_normal((7, 3)), jnp.float32)
    offsets = jnp.asarray([0, 0, 2, 7], jnp.int32)
    init = jnp.full(values.shape, jnp.nan, jnp.float32)
    y = kpallas.jagged_softmax(values, offsets, out=init, block_n=4, block_m=2, interpret=True)
    ref = jagged_softmax_reference(torch.from_numpy(np.array(values)), torch.tensor([0, 0, 2, 7]))
    np.testing.assert_allclose(np.asarray(y), ref.numpy(), atol=1e-6)


@pytest.mark.parametrize("call", CALLS, ids=IDS)
def test_num_programs_larger_than_the_segment_count_is_clipped(call):
    _check(call, [2, 3], 2, block_n=4, block_m=4, num_programs=64)


def test_pallas_padding_never_reaches_the_output():
    values = np.random.default_rng(2).standard_normal((6, 3)).astype(np.float32)
    offsets = np.array([0, 1, 6], np.int32)
    outs = [
        np.asarray(call_pallas(values, offsets, block_n=4, block_m=4, pad_value=p))
        for p in (math.nan, math.inf, -math.inf, 3.4e38, 0.0)
    ]
    for o in outs[1:]:
        assert np.array_equal(o.view(np.uint32), outs[0].view(np.uint32))


def test_jax_arrays_and_torch_tensors_are_not_mixed():
    with pytest.raises(TypeError, match=r"values must be a torch\.Tensor"):
        ktriton.jagged_softmax(jax.numpy.zeros((2, 2)), torch.tensor([0, 2]), interpret=True)
