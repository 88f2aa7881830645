"""The compiled Pallas path without a GPU: JAX lowers a ``pallas_call`` for the ``cuda`` platform
(Pallas -> Triton IR, embedded in the custom call) on any machine. Interpret mode accepts code the
GPU lowering rejects (ops it has no rule for, block shapes it cannot tile), so CI lowers the GPU
kernels too."""

import jax
import jax.numpy as jnp
import pytest

pytest.importorskip("jax.experimental.pallas.triton")
from jax import export

from kernels.simple_gla import pallas as gla

F32 = jnp.float32
TRITON_CALL = "__gpu$xla.gpu.triton"


def _lower_for_cuda(fn, *args) -> str:
    """The StableHLO text of ``fn`` lowered for CUDA (raises if Pallas cannot lower a kernel)."""
    checks = [export.DisabledSafetyCheck.custom_call(TRITON_CALL)]
    exported = export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=checks)(*args)
    return exported.mlir_module()


def _sds(*shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("per_token, chunk", [(True, 256), (False, 64)])
def test_gla_kernels_lower_for_a_gpu(dtype, per_token, chunk):
    n, h, lp, kp, vp = 4, 2, 2 * chunk, 32, 64
    tile = gla.gpu_tile(min(chunk, 64), kp, vp)
    scalars = [_sds(n, h, dtype=jnp.int32), _sds(1), _sds(h)]
    qkv = [
        _sds(n, h, lp, kp, dtype=dtype),
        _sds(n, h, lp, kp, dtype=dtype),
        _sds(n, h, lp, vp, dtype=dtype),
    ]
    g, state = _sds(n, h, lp), _sds(n, h, kp, vp)

    fwd = gla._Static(per_token=per_token, chunk=chunk, tile=tile)
    text = _lower_for_cuda(
        lambda *a: gla._fwd_padded(*a, static=fwd, interpret=False),
        *scalars,
        *qkv,
        g,
        state,
        _sds(n, h, lp, vp, dtype=dtype),
        state,
    )
    assert TRITON_CALL in text

    states = gla._Static(per_token=per_token, chunk=chunk, tile=tile, states=True)
    text = _lower_for_cuda(
        lambda *a: gla._fwd_padded(*a, None, None, static=states, interpret=False),
        *scalars,
        *qkv,
        g,
        state,
    )
    assert TRITON_CALL in text

    nts = gla.next_pow2(lp // chunk + 1)
    inits = (qkv[0], qkv[1], qkv[2], g, state)
    text = _lower_for_cuda(
        lambda *a: gla._bwd_padded(*a[:10], tuple(a[10:]), static=fwd, interpret=False),
        *scalars,
        *qkv,
        _sds(n, h, lp, vp, dtype=dtype),
        g,
        state,
        _sds(n, h, nts, kp, vp),
        *inits,
    )
    assert TRITON_CALL in text
