"""Interpreted launches patch triton.language once per launch and leave it exactly as they found
it: after a launch, after a launch that raised, and with nested helper and standard-library calls
(the patches are per launch, not per call: patching costs more than most interpreted ops)."""

import inspect

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
import triton.language.core as core
import triton.language.math as tmath
from triton.runtime.interpreter import InterpreterError

from kernels._triton_interp import interpreted


def _snapshot():
    out = {}
    for mod in (tl, core, tmath, core.tensor, core.tensor_descriptor_base):
        for name, member in inspect.getmembers(mod):
            out[(id(mod), name)] = member
    return out


@triton.jit
def _double(x):
    return x * 2.0


@triton.jit
def _kernel(x_ptr, N: tl.constexpr, SCALE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    for _ in tl.static_range(N):
        x = _double(x) + tl.sum(x, axis=0)
    x = tl.exp(x * SCALE)
    tl.store(x_ptr + tl.arange(0, 16), x)


def test_patches_are_restored_after_a_launch_and_after_a_failing_one():
    before = _snapshot()
    x = torch.zeros(16)
    interpreted(_kernel)[(1,)](x, 3, 1.0)
    assert _snapshot() == before
    x = torch.ones(16)
    with pytest.raises(InterpreterError, match="overflow"), np.errstate(over="raise"):
        interpreted(_kernel)[(1,)](x, 3, 100.0)  # exp overflows inside the kernel
    assert _snapshot() == before


def test_nested_calls_compute_the_same_as_before():
    x = torch.arange(16, dtype=torch.float32) / 1000.0
    want = x.clone().double()
    for _ in range(2):
        want = want * 2.0 + want.sum()
    want = torch.exp(want)
    interpreted(_kernel)[(1,)](x, 2, 1.0)
    assert torch.allclose(x.double(), want, rtol=1e-5)
