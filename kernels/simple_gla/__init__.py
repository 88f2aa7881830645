"""Chunked simple gated linear attention (simple GLA): Triton and Pallas kernels, forward and
backward, and the ALiBi decay helper.

``kernels.simple_gla.triton`` and ``kernels.simple_gla.pallas`` each provide
``chunk_simple_gla_fwd`` and ``chunk_simple_gla_bwd`` with the same arguments (torch tensors or
JAX arrays). The recurrence, the chunked algorithm and the error analysis are in ``README.md``
next to this file.
"""

from __future__ import annotations

from kernels.alibi import alibi_slopes

__all__ = ["alibi_g_gamma"]


def alibi_g_gamma(n_heads: int, scale: float = 1.0) -> list[float]:
    """Per-head log decays ``g_gamma = -scale * slope`` from the standard ALiBi slopes.

    Args:
        n_heads: number of heads (any positive count; non powers of two follow the ALiBi rule).
        scale: a positive factor on every slope (models that scale ALiBi per layer).

    Returns:
        ``[n_heads]`` log decays, all < 0, largest magnitude first; pass them as ``g_gamma``
        (float32) to the kernels.
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale must be a float, got {scale!r}")
    if not (scale > 0 and scale < float("inf")):
        raise ValueError(f"scale={scale} must be finite and > 0")
    return [-float(scale) * s for s in alibi_slopes(n_heads)]
