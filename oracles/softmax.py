"""References for the masked row softmax, written for clarity.

    s = scale * x + bias ;  s = -inf where mask is False
    y = exp(s - max(s)) / sum(exp(s - max(s)))   per row; rows with no finite logit -> zeros

``softmax_reference`` computes in float64 (the oracle). ``softmax_reference_lse`` reaches the same
numbers by another route (``exp(s - logsumexp(s))``); the two are checked against each other and
against mpmath in the tests. ``softmax_naive`` is what eager PyTorch gives in the input dtype: the
logits tensor is materialised (rounded) in that dtype and the result rounded back to it.
``softmax_error_bound`` is the error any fp32 implementation may have per output element (the
derivation: ``kernels/softmax/README.md``).
"""

from __future__ import annotations

from typing import Generic, NamedTuple, TypeVar

import torch

from oracles import error_model as em

__all__ = [
    "SoftmaxBound",
    "softmax_error_bound",
    "softmax_naive",
    "softmax_reference",
    "softmax_reference_lse",
]


def _logits(
    x: torch.Tensor,
    mask: torch.Tensor | None,
    bias: torch.Tensor | None,
    scale: float | None,
    dtype: torch.dtype,
) -> torch.Tensor:
    s = x.to(dtype) * (1.0 if scale is None else scale)
    if bias is not None:
        s = s + bias.to(dtype)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s


def softmax_reference(
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """float64 softmax over the last axis; rows whose every logit is -inf give zeros."""
    s = _logits(x, mask, bias, scale, torch.float64)
    row_max = s.amax(dim=-1, keepdim=True)
    empty = torch.isneginf(row_max)
    e = torch.exp(s - torch.where(empty, 0.0, row_max))
    total = e.sum(dim=-1, keepdim=True)
    return torch.where(empty, 0.0, e / torch.where(empty, 1.0, total))


def softmax_reference_lse(
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """float64 softmax through the log-sum-exp: ``exp(s - logsumexp(s))``."""
    s = _logits(x, mask, bias, scale, torch.float64)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)  # -inf for an empty row
    return torch.where(torch.isneginf(lse), 0.0, torch.exp(s - lse))


def softmax_naive(
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """Eager PyTorch in ``x.dtype``: logits materialised in ``x.dtype``, result in ``x.dtype``."""
    s = _logits(x, mask, bias, scale, x.dtype)
    empty = torch.isneginf(s.amax(dim=-1, keepdim=True))
    y = torch.softmax(s.float(), dim=-1).to(x.dtype)
    return torch.where(empty, torch.zeros((), dtype=x.dtype, device=x.device), y)


A = TypeVar("A")  # torch.Tensor here, NumPy arrays once on the host


class SoftmaxBound(NamedTuple, Generic[A]):
    """Per-element and per-row error bounds of a row softmax (float64).

    Attributes:
        y: ``[..., N]``: how far an output element of any fp32 implementation may be from the
            exact softmax.
        row_sum: ``[...]``: how far the sum of a row's outputs may be from 1 (for rows with a
            valid key): the roundings that form the logits cancel in it (every implementation
            normalizes by the sum of the exponentials of the logits it formed), so it is much
            tighter than the sum of the element bounds where logits are large.
    """

    y: A
    row_sum: A


def softmax_error_bound(
    x: torch.Tensor,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    scale: float | None = None,
    *,
    out_dtype: str,
    min_tile: int,
    extra_delta: torch.Tensor | None = None,
) -> SoftmaxBound[torch.Tensor]:
    """The error bound of each output of ``softmax(scale * x + bias)`` computed in fp32.

    Per logit ``s_j`` (``m`` the row max), the perturbation any fp32 implementation introduces is
    at most ``delta_j = C_LOGIT U (|scale x_j| + |b_j|) + C_ARG U |s_j - m| + (scale + 3) TINY``
    (``oracles.error_model``), plus ``extra_delta`` (a perturbation of the inputs themselves).
    Through the softmax (``error_model.softmax_spread``) that moves ``y_i`` by at most ``w_i``;
    exponentials (their own error and ``R`` rescales), the sum of ``n`` terms and the division add
    ``y_i (eta + eps_l + 2U)``: all of it times ``SAFETY`` is the error ``e_i`` of the fp32 result,
    plus ``2 TINY`` for flushed values. Storing it in ``out_dtype`` (``error_model
    .conversion_error`` ``c``, exact) adds ``c (y_i + e_i)`` and the subnormal spacing.

    Args:
        x, mask, bias, scale: as :func:`softmax_reference`.
        out_dtype: the output's dtype name.
        min_tile: the fewest keys an implementation takes per online step (its rescale count).
        extra_delta: optional ``[..., N]`` float64 perturbation of each logit to add.
    """
    u_out = em.conversion_error(out_dtype)
    sx = x.to(torch.float64) * (1.0 if scale is None else float(scale))
    b = torch.zeros_like(sx) if bias is None else bias.to(torch.float64).expand_as(sx)
    s = _logits(x, mask, bias, scale, torch.float64)
    valid = torch.isfinite(s)
    zero = torch.zeros((), dtype=torch.float64, device=s.device)
    m = torch.where(valid, s, -torch.inf).amax(dim=-1, keepdim=True)
    lse = torch.logsumexp(torch.where(valid, s, -torch.inf), dim=-1, keepdim=True)
    logp = torch.where(valid, s - torch.where(torch.isfinite(lse), lse, zero), -torch.inf)
    spread_arg = torch.where(valid, (s - torch.where(torch.isfinite(m), m, zero)).abs(), zero)
    size = torch.where(valid, sx.abs() + b.abs(), zero)
    delta = em.C_LOGIT * em.U * size + em.C_ARG * em.U * spread_arg
    delta = delta + (abs(1.0 if scale is None else float(scale)) + 3.0) * em.TINY
    if extra_delta is not None:
        delta = delta + extra_delta.to(torch.float64)
    w, _ = em.softmax_spread(logp, delta)
    p = torch.exp(logp)
    n = valid.sum(dim=-1, keepdim=True).to(torch.float64)
    r = em.rescales(n, min_tile)
    eta = (em.C_EXP * (1.0 + r) + 2.0 * r) * em.U  # an exponential and its rescales
    eps_l = eta + (n - 1.0).clamp(min=0.0) * em.U  # ... and the sum of n of them
    # The fp32 result: the division (reciprocal, product) rounds twice; flushes lose 2 TINY.
    comp = em.SAFETY * (w + p * (eta + eps_l + 2.0 * em.U)) + 2.0 * em.TINY
    spacing = em.subnormal_spacing(out_dtype)
    y = comp + u_out * (p + comp) + spacing  # stored in the output dtype
    # The row sum: the logit roundings cancel; what remains are the two exponentials of each
    # element (numerator and the sum's copy, recomputed or rescaled), their arguments, the sum,
    # the division and the output rounding.
    per_elem = (2.0 * em.C_EXP + 2.0 * em.C_ARG * spread_arg) * em.U
    row = (p * per_elem).sum(dim=-1) + (r * (em.C_EXP + 2.0) + n + 1.0).squeeze(-1) * em.U
    row = em.SAFETY * row
    row_sum = row + u_out * (1.0 + row) + n.squeeze(-1) * (spacing + 2.0 * em.TINY)
    return SoftmaxBound(y, row_sum)
