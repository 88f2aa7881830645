"""References for the masked row softmax, written for clarity.

    s = scale * x + bias ;  s = -inf where mask is False
    y = exp(s - max(s)) / sum(exp(s - max(s)))   per row; rows with no finite logit -> zeros

``softmax_reference`` computes in float64 (the oracle). ``softmax_reference_lse`` reaches the same
numbers by another route (``exp(s - logsumexp(s))``); the two are checked against each other and
against mpmath in the tests. ``softmax_naive`` is what eager PyTorch gives in the input dtype: the
logits tensor is materialised (rounded) in that dtype and the result rounded back to it; the
tolerance policy is relative to its error.
"""

from __future__ import annotations

import torch

__all__ = ["softmax_naive", "softmax_reference", "softmax_reference_lse"]


def _logits(x: torch.Tensor, mask: torch.Tensor | None, bias: torch.Tensor | None, scale: float | None,
            dtype: torch.dtype) -> torch.Tensor:  # fmt: skip
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
