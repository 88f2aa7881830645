"""Guard buffers of the torch adapter: the output is a strided view into guard elements, and every
write outside it is reported with its offset, in every float dtype (bit patterns, NaN payloads)."""

import numpy as np
import pytest
import torch

from fuzz.arrays import bits
from fuzz.backends import GUARD_ELEMENTS, ROW_GAP, TorchAdapter, guard_value
from fuzz.properties import describe_offset


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64", "int32"])
def test_guard_buffer_reports_writes_outside_the_output(dtype):
    adapter = TorchAdapter("cpu")
    fill = -7 if dtype == "int32" else -7.75
    buf = adapter.alloc((2, 3, 5), dtype, fill)
    out = buf.array
    assert tuple(out.shape) == (2, 3, 5)
    assert (out == fill).all()
    assert adapter.guard_violations(buf).size == 0
    out.fill_(1)  # writes inside the view touch no guard
    assert adapter.guard_violations(buf).size == 0
    storage = buf.storage
    pitch = 5 + ROW_GAP
    storage[GUARD_ELEMENTS - 1] = 0  # just before the output
    storage[GUARD_ELEMENTS + 5] = 0  # the gap after row 0
    storage[GUARD_ELEMENTS + 6 * pitch - ROW_GAP] = 0  # just past the last row
    got = adapter.guard_violations(buf)
    assert got.tolist() == [-1, 5, 6 * pitch - ROW_GAP]
    shape = (2, 3, 5)
    assert describe_offset(-1, shape) == "1 element(s) before the output"
    assert describe_offset(5, shape) == "past the end of row 0 (column 5 of 5)"
    assert describe_offset(6 * pitch - ROW_GAP, shape) == "1 element(s) past the output's end"


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_guard_fill_is_the_payload_nan_bit_for_bit(dtype):
    adapter = TorchAdapter("cpu")
    buf = adapter.alloc((1, 4), dtype, 0.0)
    host = adapter.get(buf.storage)
    want = bits(guard_value(dtype))[0]
    assert (bits(host[:GUARD_ELEMENTS]) == want).all()
    # A NaN with another payload (what a kernel's 0/0 writes) is a change, not the guard.
    buf.storage[0] = float("nan")
    assert adapter.guard_violations(buf).tolist() == [-GUARD_ELEMENTS]
    assert np.isnan(adapter.get(buf.storage)[0])


def test_empty_output_has_only_guards():
    adapter = TorchAdapter("cpu")
    buf = adapter.alloc((0, 7), "float32", float("nan"))
    assert tuple(buf.array.shape) == (0, 7)
    assert adapter.guard_violations(buf).size == 0
    assert buf.storage.dtype == torch.float32


def test_a_coordinator_probes_jax_gpu_in_a_child_process(monkeypatch):
    """The campaign's parent asks a child process whether JAX has a GPU (JAX's client would hold
    a context on every GPU in the coordinator); the answer matches the in-process probe."""
    import importlib
    import subprocess

    b = importlib.import_module("fuzz.backends")

    calls = []
    real_run = subprocess.run

    def spy(*args, **kwargs):
        calls.append(args[0])
        return real_run(*args, **kwargs)

    monkeypatch.setattr(subprocess, "run", spy)
    in_process = b._jax_gpu_reason()
    assert calls == []
    monkeypatch.setattr(b, "PROBE_JAX_IN_SUBPROCESS", True)
    in_child = b._jax_gpu_reason()
    assert len(calls) == 1 and "jax.devices" in calls[0][-1]
    assert (in_process is None) == (in_child is None)
    if in_process is not None:  # a CPU machine: both name the missing GPU backend
        assert "has no GPU backend" in in_child


def test_the_cpu_interpreter_leaves_jax_s_persistent_cache_off():
    """Loading a cached CPU executable can crash the process (it segfaulted CI inside
    ``get_executable_and_time``); only an accelerator's adapter turns the cache on."""
    import subprocess
    import sys

    code = (
        "import jax\n"
        "from fuzz.backends import JaxAdapter\n"
        "JaxAdapter('cpu').device\n"
        "print(jax.config.jax_compilation_cache_dir)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "None"


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), True, "32"])
def test_a_backend_names_a_bad_cost_speedup(bad):
    import dataclasses

    from fuzz.backends import get_backend

    with pytest.raises(ValueError, match=r"cost_speedup=.* must be a positive finite number"):
        dataclasses.replace(get_backend("pallas-interpret"), name="x", cost_speedup=bad)
