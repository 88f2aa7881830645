"""Every dtype a kernel may pass or allocate is handled by the harness (named, read, poisoned,
guarded) or declined as the harness's own limit (``HarnessLimit``), never blamed on the kernel:
kernels that view a mask as uint8 or allocate scratch of many dtypes have their planted bugs
found, with no crash row."""

from __future__ import annotations

import os
import warnings

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch

from fuzz.arrays import DTYPES, dtype_name, finfo, holds_nan, np_dtype
from fuzz.backends import TorchAdapter, _torch_guard, guard_value, poison_tensor
from fuzz.engine import hunt
from fuzz.failures import HarnessLimit, Unsupported, is_harness_limit
from fuzz.profiles import get_profile
from fuzz.target import get, load_plugin

DTYPE_KERNELS = os.path.join(os.path.dirname(__file__), "..", "plugins", "dtype_kernels.py")

TORCH_DTYPES = sorted(
    {v for v in vars(torch).values() if isinstance(v, torch.dtype)}, key=lambda d: str(d)
)


@pytest.fixture(scope="module")
def plugin():
    return load_plugin(DTYPE_KERNELS)


def _hunt(name):
    result = hunt(get(name), "triton-interpret", get_profile("ci"), database=None)
    assert result.error is None, result.error
    return result


def test_a_mask_viewed_as_uint8_is_no_crash_and_the_planted_bug_is_found(plugin):
    """Triton's interpreter copies every tensor argument with ``new_empty``: a uint8 one went
    through the allocation guard's dtype table, which raised, and every masked example was a
    crash of the kernel; the bug (masked keys in the denominator) was never reported."""
    result = _hunt("uint8_mask_softmax")
    assert "crash" not in result.found, result.found["crash"].finding.summary()
    assert result.found, "the planted bug was not found"
    masked = [f for f in result.found.values() if "mask" in f.case.inputs]
    assert masked and masked[0].finding.cls in ("accuracy", "masking"), result.classes


def test_scratch_of_many_dtypes_is_no_crash_and_the_planted_bug_is_found(plugin):
    result = _hunt("scratch_softmax")
    assert "crash" not in result.found, result.found["crash"].finding.summary()
    assert "accuracy" in result.found, result.classes
    assert result.found["accuracy"].case.inputs["x"].shape[-1] == 2  # shrunk to two keys


def test_every_torch_numpy_and_jax_dtype_has_a_name():
    for d in TORCH_DTYPES:
        assert dtype_name(d) == str(d).removeprefix("torch.")
    for name, dt in DTYPES.items():
        assert dtype_name(dt.numpy) == name and dtype_name(name) == name
        assert np_dtype(name) == dt.numpy
    assert dtype_name(jnp.bfloat16) == "bfloat16" and dtype_name(jnp.zeros(1, bool).dtype) == "bool"
    assert dtype_name(ml_dtypes.float8_e5m2) == "float8_e5m2"
    with pytest.raises(ValueError, match=r"dtype 'junk' is not a dtype"):
        dtype_name("junk")
    with pytest.raises(ValueError, match=r"dtype='qint8' is not one of \["):
        np_dtype("qint8")


def test_the_table_holds_the_narrow_types_a_kernel_may_use():
    for name in ("uint8", "int16", "uint16", "uint32", "uint64", "complex64", "float8_e4m3fn"):
        assert name in DTYPES
    assert holds_nan("float8_e4m3fn") and holds_nan("bfloat16") and not holds_nan("int8")
    assert not holds_nan("float4_e2m1fn")  # a NaN converts to a number there
    assert finfo("float8_e4m3fn").max == 448.0 and finfo("float64").eps == 2.0**-52
    with pytest.raises(ValueError, match=r"dtype='uint8' is not a float dtype"):
        finfo("uint8")


def _allocatable(d):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's complex32 and quantized types warn
        for make in (
            lambda: torch.zeros(3, dtype=d),
            lambda: torch.empty(3, dtype=d),
            lambda: torch.quantize_per_tensor(torch.zeros(3), 1.0, 0, d),
        ):
            try:
                return make()
            except Exception:
                pass
        return None


@pytest.mark.parametrize("d", TORCH_DTYPES, ids=str)
def test_a_torch_tensor_of_any_dtype_is_read_or_declined_as_the_harness_limit(d):
    t = _allocatable(d)
    if t is None:
        pytest.skip(f"torch cannot allocate {d} here")
    adapter = TorchAdapter("cpu")
    name = dtype_name(d)
    if name not in DTYPES:
        with pytest.raises(HarnessLimit, match=rf"^harness limit: .*{name}") as e:
            adapter.get(t)
        assert isinstance(e.value, Unsupported) and is_harness_limit(e.value.reason)
        return
    host = adapter.get(t)
    assert dtype_name(host.dtype) == name and host.shape == (3,)
    back = adapter.put(host)
    assert back.dtype == d and torch.equal(back.view(torch.uint8), t.view(torch.uint8))


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_held_dtype_has_a_guard_fill(name):
    g = guard_value(name)
    assert g.dtype == np_dtype(name) and g.shape == (1,)
    try:
        pattern, as_int = _torch_guard(name)
    except HarnessLimit as e:
        assert DTYPES[name].kind == "complex", e
        return
    td = getattr(torch, name, None)
    if not isinstance(td, torch.dtype) or td.itemsize != DTYPES[name].itemsize:
        return  # a type torch lacks: never allocated by a torch kernel
    t = torch.empty(1, dtype=td)
    (t.view(as_int) if as_int is not None else t).fill_(pattern)  # as the guards are written
    assert t.view(torch.uint8).numpy().tobytes() == np.ascontiguousarray(g).tobytes()


@pytest.mark.parametrize("d", TORCH_DTYPES, ids=str)
def test_the_poison_of_a_library_allocation_never_raises(d):
    """Unguarded allocations are poisoned where their type holds the poison; a type torch cannot
    fill (packed fp4, bit containers, quantized) is left as allocated."""
    t = _allocatable(d)
    if t is None:
        pytest.skip(f"torch cannot allocate {d} here")
    assert poison_tensor(t, float("nan")) is t
    if d in (torch.float32, torch.float16, torch.bfloat16):
        assert torch.isnan(t).all()
    elif d == torch.int8:
        assert (t == -0x5B).all()
    elif d in (torch.int16, torch.int32, torch.int64):
        assert (t == -0x5A5A).all()


def test_an_output_of_another_kind_of_number_is_the_kernel_s_crash_said_plainly(plugin):
    """A float8 or bit-container output where the family returns float32: the kernel's fault,
    named before the harness tries to read it."""
    import fuzz
    from fuzz.case import Case
    from fuzz.properties import Context

    def fp8(x, *, scale):
        return torch.softmax(x.float(), -1).to(torch.float8_e4m3fn)

    def bits16(x, *, scale):
        return torch.softmax(x.float(), -1).half().view(torch.bits16)

    case = Case(
        {"x": np.ones((1, 4), np.float32)},
        {"dtype": "float32", "scale": None, "block_m": 8, "block_n": 16},
    )
    for kernel, name in ((fp8, "float8_e4m3fn"), (bits16, "bits16")):
        t = fuzz.fuzz_kernel(
            f"dtype_wrong_output_{name}",
            family="softmax",
            kernel=kernel,
            capabilities=fuzz.Capabilities(dtypes=("float32",), features={"scale"}),
        )
        launch = Context(t, fuzz.get_backend("triton-interpret"), case).launch()
        assert launch.declined is None
        assert isinstance(launch.error, TypeError)
        assert str(launch.error) == f"the kernel returned output y as {name}; expected float32"


def test_the_markdown_report_lists_the_harness_limits_apart():
    from fuzz.campaign.report_md import _markdown_declined

    limit = HarnessLimit("a torch tensor of dtype qint8, which NumPy cannot hold").reason
    results = [
        {"target": "a", "backend": "b", "events": {"unsupported: odd rows": 3}},
        {"target": "a", "backend": "b", "events": {f"unsupported: {limit}": 2}},
    ]
    lines = _markdown_declined(results)
    cut = lines.index("## Not checked: the harness's own limits (not the kernels')")
    assert "| a | b | odd rows | 3 |" in lines[:cut]
    assert f"| a | b | {limit} | 2 |" in lines[cut:]
