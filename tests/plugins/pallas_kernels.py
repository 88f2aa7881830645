"""Pallas kernels compiled per exact shape, registered through the public plugin API: the
measurements of reused case structures (``fuzz.devtools.reuse_bench``, ``strategies.reuse``) and
their tests fuzz them on ``pallas-interpret``, where every new shape compiles an XLA program.

Unlike the project's Pallas kernels, which pad to power-of-two buckets so that one compiled
kernel serves many lengths, these compile for every shape they meet, as many libraries' kernels
do: ``pallas_softmax_exact`` (a one-block row softmax) and ``jax_mha``, JAX's own Pallas
attention (``jax.experimental.pallas.ops.gpu.attention.mha``), called with ``interpret=``.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import fuzz


@functools.partial(jax.jit, static_argnames=("scale", "interpret"))
def _softmax(x, *, scale, interpret):
    def kernel(x_ref, o_ref):
        s = x_ref[...].astype(jnp.float32) * scale
        e = jnp.exp(s - jnp.max(s, axis=1, keepdims=True))
        o_ref[...] = (e / jnp.sum(e, axis=1, keepdims=True)).astype(o_ref.dtype)

    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return pl.pallas_call(kernel, out_shape=out, interpret=interpret)(x)


def softmax(x, *, scale, interpret):
    """The whole ``[rows, cols]`` array as one block: one compiled kernel per shape and scale."""
    return _softmax(x, scale=1.0 if scale is None else float(scale), interpret=interpret)


fuzz.fuzz_kernel(
    "pallas_softmax_exact",
    family="softmax",
    kernel=softmax,
    language="pallas",
    capabilities=fuzz.Capabilities(features={"scale"}, backends=("interpreted",)),
    conventions=fuzz.Conventions(empty_rows="nan"),
    description="a one-block Pallas row softmax compiled per exact shape (no buckets)",
)


def _divisor_block(n: int, most: int = 128) -> int:
    """The largest divisor of ``n`` up to ``most``: ``mha`` needs lengths that its blocks
    divide (the interpreter takes any block size)."""
    return max(b for b in range(1, min(n, most) + 1) if n % b == 0)


def attention(q, k, v, *, scale, causal, interpret):
    """JAX's Pallas flash attention (``[B, T, H, D]``, no log-sum-exp output)."""
    from jax.experimental.pallas.ops.gpu import attention as ops

    block_q, block_k = _divisor_block(q.shape[1]), _divisor_block(k.shape[1])
    blocks = ops.BlockSizes(
        block_q=block_q,
        block_k=block_k,
        block_q_dkv=block_q,
        block_kv_dkv=block_k,
        block_q_dq=block_q,
        block_kv_dq=block_k,
    )
    sm_scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return ops.mha(
        q,
        k,
        v,
        None,
        sm_scale=sm_scale,
        causal=causal,
        block_sizes=blocks,
        interpret=interpret,
    )


fuzz.fuzz_kernel(
    "jax_mha",
    family="attention",
    kernel=attention,
    language="pallas",
    capabilities=fuzz.Capabilities(
        head_dims=(16, 32, 64), features={"causal", "scale"}, backends=("interpreted",)
    ),
    conventions=fuzz.Conventions(causal="top-left", lse="none"),
    layout=fuzz.Layout("BTHD"),
    description="JAX's Pallas attention op (jax.experimental.pallas.ops.gpu.attention.mha)",
)
