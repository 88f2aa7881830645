"""The rounding model behind the softmax families' per-element error bounds.

A kernel of these families computes in fp32 (statistics, accumulation) whatever its input dtype.
Every bound is one that *any* backward-stable fp32 implementation meets: the same result computed
with the exp2 domain (log2 e folded into the scale), two passes instead of an online one, other
tiles or loop orders, split-KV merges, another fp32 reduction order. The derivations are in
``kernels/softmax/README.md``, ``kernels/jagged_softmax/README.md`` and
``kernels/attention/README.md``; this module holds their shared constants and the one propagation
step they all use.

Model: ``fl(a op b) = (a op b)(1 + e) + f``, ``|e| <= U`` (fp32 unit roundoff), ``|f| <= TINY``
where an fp32 result or operand may be flushed to zero (XLA on the CPU flushes subnormals; GPUs do
in fast paths). Library functions (GPU fast paths included) are accurate to:

* ``exp``/``exp2``: ``C_EXP`` U relative (``ex2.approx``: 2 ulp), plus the rounding of their
  argument, which ``__expf`` multiplies by log2 e (``2 + 1.16 |x|`` ulp in all): the argument terms
  are counted as logit perturbations (``C_ARG``);
* ``log``: ``C_LOG`` U absolute plus U relative (``lg2.approx``: 2^-22.6 absolute near 1);
* ``tanh`` (the soft cap; neither Triton nor its interpreter has one): ``C_TANH`` U relative.

Online softmaxes rescale their running sums and accumulators whenever the running max grows:
at most once per tile, and no kernel of these families takes a tile of fewer keys than its
wrapper allows (``rescales``).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = [
    "C_ARG",
    "C_EXP",
    "C_LOG",
    "C_LOGIT",
    "C_TANH",
    "SAFETY",
    "TINY",
    "U",
    "ceil_div",
    "conversion_error",
    "log_count",
    "rescales",
    "softmax_spread",
    "subnormal_spacing",
    "unit_roundoff",
]

U = 2.0**-24  # fp32 unit roundoff
TINY = float(np.finfo(np.float32).tiny)  # fp32 smallest normal: what a flush to zero may lose
C_EXP = 4.0  # exp/exp2 relative error, in U (2 ulp)
C_LOG = 4.0  # log absolute error near 1, in U
C_TANH = 12.0  # soft cap tanh relative error, in U (the kernels' series / exp formula)
# Roundings that form a logit from its operands, relative to their magnitude |scale x| + |bias|:
# the scale rounded to fp32, the product, log2 e folded into the scale and into the bias, the sum.
C_LOGIT = 4.0
# Roundings of exp's argument relative to |s - m| (m the row max): the subtraction, the multiply
# by log2 e inside exp (1.16 ulp = 2.32 U), and the rescale arguments m_old - m_new, which
# telescope: their sum over the rescales an element sees is m - s.
C_ARG = 5.0
# Second-order terms (products of first-order relative errors, all below 1e-2 where the bound
# means anything) and a margin for the library accuracies above.
SAFETY = 2.0

_SUBNORMAL_SPACING = {
    # The spacing of the dtype's subnormals: what a faithful conversion of a value below its
    # smallest normal may lose (fp32 and bfloat16 results may be flushed instead: TINY).
    "float32": 2.0**-149,
    "bfloat16": 2.0**-133,
    "float16": 2.0**-24,
}


def unit_roundoff(dtype: str) -> float:
    """The unit roundoff of ``dtype`` (``'float32'``, ``'float16'``, ``'bfloat16'``)."""
    return {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}[dtype]


def conversion_error(dtype: str) -> float:
    """The relative error of storing an fp32 result in ``dtype``: 0 for fp32 (stored as
    computed), one ulp of a half dtype: a faithful conversion, not only a rounded one (Triton's
    interpreter truncates fp32 to bfloat16; GPUs and XLA round to nearest). Exact, so a bound
    adds it outside ``SAFETY``: ``|fl(r) - x| <= c (|x| + e) + e`` for a result ``r`` within
    ``e`` of ``x``."""
    return 0.0 if dtype == "float32" else 2.0 * unit_roundoff(dtype)


def ceil_div(n: int, d: int) -> int:
    return -(-n // d)


# fp32 dot operands rounded to TF32 (10 explicit mantissa bits, fp32's exponent range), what GPUs
# do to fp32 dots by default in Triton and JAX: a faithful conversion, one TF32 ulp relative
# (2^-10; tensor cores drop the 13 low bits of an operand not rounded before; rounded to nearest
# it is 2^-11), as conversion_error takes one ulp of a half dtype; below fp32's normal range an
# operand moves by at most a TF32 subnormal step, TINY * TF32_UNIT.
TF32_UNIT = 2.0**-10


def subnormal_spacing(dtype: str) -> float:
    """The subnormal spacing of ``dtype``: the absolute part of a faithful conversion to it."""
    return _SUBNORMAL_SPACING[dtype]


def rescales(n: torch.Tensor, min_tile: int) -> torch.Tensor:
    """How often an online softmax may rescale one element's running sum over ``n`` keys (a
    float64 count): once per tile the keys touch, tiles of at least ``min_tile`` keys
    (``ceil(n / min_tile) + 1``)."""
    return torch.ceil(n / min_tile) + 1.0


def _log_expm1(x: torch.Tensor) -> torch.Tensor:
    """``log(expm1(x))`` for ``x >= 0`` without overflow (-inf at 0)."""
    return x + torch.log(-torch.expm1(-x))


def softmax_spread(
    logp: torch.Tensor, delta: torch.Tensor, dim: int = -1
) -> tuple[torch.Tensor, torch.Tensor]:
    """How far a softmax moves when each logit moves by at most ``delta`` (float64).

    With exact probabilities ``p = exp(logp)`` (``logp = -inf`` where a key is invalid) and logits
    perturbed by ``|d_j| <= delta_j``, the renormalized ``p'_j = p_j e^{d_j} / sum_k p_k e^{d_k}``
    satisfies, with ``E = sum_k p_k expm1(delta_k)``:

    * ``|p'_j - p_j| <= w_j = p_j expm1(delta_j + E)`` (the denominator lies in
      ``[exp(-sum p delta), 1 + E]``, Jensen below, and ``1 + E <= e^E``);
    * ``|log sum_k p_k e^{d_k}| <= E``: the log-sum-exp moves by at most ``E``.

    Exact at any size of ``delta``, not only to first order. ``w`` is computed in the log domain
    (a ``p`` below float64's range with a large ``delta`` still gets its share) and capped at 1.

    Returns:
        ``(w, E)``: ``w`` like ``logp``; ``E`` with ``dim`` kept (size 1), 0 for a row of no
        valid key.
    """
    valid = torch.isfinite(logp)
    delta = torch.where(valid, delta, torch.zeros((), dtype=delta.dtype, device=delta.device))
    with torch.no_grad():
        log_terms = torch.where(valid, logp + _log_expm1(delta), -torch.inf)
        big = torch.logsumexp(log_terms, dim=dim, keepdim=True)  # log E, -inf where E = 0
        e = torch.exp(big).nan_to_num(nan=0.0)
        # E beyond any float is no bound at all; every p' lies in [0, 1] regardless.
        e = torch.clamp(e, max=1e300)
        w = torch.exp(torch.where(valid, logp + _log_expm1(delta + e), -torch.inf))
    return torch.clamp(w, max=1.0), e


def log_count(n: torch.Tensor) -> torch.Tensor:
    """``log(max(n, 1))`` of a count tensor, float64."""
    return torch.log(torch.clamp(n.to(torch.float64), min=1.0))
