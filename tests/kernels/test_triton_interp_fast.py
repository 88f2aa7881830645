"""``interpreted(kernel, fast=True)``: same results as the default twin, and ``triton.language``
and the interpreter's options exactly as they were after the launch."""

import torch
import triton.language as tl
import triton.runtime.interpreter as interpreter

from kernels._triton_interp import interpreted
from kernels.attention import triton as ktriton


def _snapshot():
    objs = (tl, tl.core, tl.math, tl.tensor, tl.dtype, tl.core.tensor_descriptor_base)
    return {
        (id(o), name): getattr(o, name)
        for o in objs
        for name in dir(o)
        if not name.startswith("__")
    }


def test_fast_launch_matches_the_default_twin_and_restores_everything():
    torch.manual_seed(0)
    q, k = torch.randn(1, 2, 19, 8), torch.randn(1, 2, 23, 8)
    before = _snapshot()
    options = interpreter.interpreter_builder.options
    fast = ktriton.attention(
        q,
        k,
        k,
        causal=True,
        softcap=3.0,
        alibi_slopes="standard",
        block_q=16,
        block_k=16,
        interpret=True,
    )
    assert interpreter.interpreter_builder.options is options and options.sanitize_overflow
    after = _snapshot()
    assert before.keys() == after.keys()
    assert [key for key in before if before[key] is not after[key]] == []
    # The default twin (overflow checks on) gives the same bits.
    slow = ktriton._attn_fwd_kernel
    assert interpreted(slow, fast=True) is not interpreted(slow)
    orig = ktriton._kernel
    ktriton._kernel = lambda interpret: interpreted(slow)
    try:
        default = ktriton.attention(
            q,
            k,
            k,
            causal=True,
            softcap=3.0,
            alibi_slopes="standard",
            block_q=16,
            block_k=16,
            interpret=True,
        )
    finally:
        ktriton._kernel = orig
    assert all(torch.equal(a, b) for a, b in zip(fast, default, strict=True))
