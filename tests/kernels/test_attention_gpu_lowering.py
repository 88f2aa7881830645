"""The compiled Pallas attention kernels without a GPU: JAX lowers each ``pallas_call`` for the
``cuda`` platform on any machine (see ``test_pallas_gpu_lowering.py``). Interpret mode accepts
code the GPU lowering rejects, so CI lowers the dense and decode kernels too, real and
reformulated."""

import jax
import jax.numpy as jnp
import pytest

pytest.importorskip("jax.experimental.pallas.triton")
from jax import export

from kernels.attention import pallas as dense
from kernels.attention import pallas_decode as decode
from kernels.attention.reformulations import REFORMULATIONS

TRITON_CALL = "__gpu$xla.gpu.triton"


def _lower_for_cuda(fn, *args) -> str:
    """The StableHLO of ``fn`` lowered for CUDA (raises if Pallas cannot lower a kernel); the
    kernels' jitted entry points are called through ``__wrapped__`` (``jit_twins``)."""
    checks = [export.DisabledSafetyCheck.custom_call(TRITON_CALL)]
    exported = export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=checks)(*args)
    return exported.mlir_module()


def _sds(*shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _modules(decode_kernel: bool):
    real = decode if decode_kernel else dense
    return [real] + [
        r.module("pallas") for r in REFORMULATIONS if r.real.endswith("_decode") == decode_kernel
    ]


@pytest.mark.parametrize("module", _modules(False), ids=lambda m: m.__name__)
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_dense_attention_lowers_for_a_gpu(module, dtype):
    rows, group, t, d = 4, 2, 128, 64
    static = module._Static(64, 32)
    per_row = _sds(rows, dtype=jnp.int32)
    args = (
        per_row,
        per_row,
        _sds(2),
        _sds(4, dtype=jnp.int32),
        _sds(rows),
        _sds(rows, t, d, dtype=dtype),
        _sds(rows // group, t, d, dtype=dtype),
        _sds(rows // group, t, d, dtype=dtype),
        _sds(rows, t, d, dtype=dtype),
        _sds(rows, t),
    )
    text = _lower_for_cuda(
        lambda *a: module._attention_padded.__wrapped__(
            *a, static=static, group=group, interpret=False
        ),
        *args,
    )
    assert TRITON_CALL in text


@pytest.mark.parametrize("module", _modules(True), ids=lambda m: m.__name__)
def test_decode_attention_lowers_for_a_gpu(module):
    b, hkv, g, t, d = 2, 2, 16, 128, 64
    static = module._Static(32, 4)
    args = (
        _sds(b, dtype=jnp.int32),
        _sds(2),
        _sds(2, dtype=jnp.int32),
        _sds(hkv, g),
        _sds(b, hkv, g, d),
        _sds(b, hkv, t, d),
        _sds(b, hkv, t, d),
        _sds(b, hkv, g, d),
        _sds(b, hkv, g),
    )
    text = _lower_for_cuda(
        lambda *a: module._decode_padded(*a, static=static, interpret=False), *args
    )
    assert TRITON_CALL in text
