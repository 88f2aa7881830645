"""References for the jagged softmax, written for clarity.

    segment b = rows offsets[b]:offsets[b+1] of values [N, M]
    y[r, c] = exp(x[r, c] - max_b[c]) / sum_{r' in b} exp(x[r', c] - max_b[c])    for r in b

An empty segment has no rows (nothing to compute); a column of a segment whose values are all
``-inf`` gives zeros (the softmax of an empty set, by the same convention as the row softmax).

``jagged_softmax_reference`` computes in float64, one segment at a time (the oracle).
``jagged_softmax_reference_scatter`` reaches the same numbers by another route: per-row segment
ids, a scatter-max and a scatter-add of exponentials into per-segment log-sum-exps, then
``exp(x - lse[segment])`` for every row at once; the two are checked against each other and
against mpmath in the tests. ``jagged_softmax_naive`` is what eager PyTorch gives per segment in
the input dtype (the seed's reference loop: ``torch.softmax(x[a:b], dim=0)``).
``jagged_softmax_error_bound`` is the error any fp32 implementation may have per output element:
each segment's column is a row softmax of its values (``oracles.softmax.softmax_error_bound``
with scale 1, no bias, no mask; the derivation: ``kernels/jagged_softmax/README.md``).
"""

from __future__ import annotations

import itertools

import torch

from oracles.softmax import softmax_error_bound

__all__ = [
    "jagged_softmax_error_bound",
    "jagged_softmax_naive",
    "jagged_softmax_reference",
    "jagged_softmax_reference_scatter",
]


def _bounds(offsets: torch.Tensor) -> list[tuple[int, int]]:
    o = [int(v) for v in offsets.tolist()]
    return list(itertools.pairwise(o))


def _segment_softmax64(s: torch.Tensor) -> torch.Tensor:
    """float64 softmax over axis 0; columns whose every value is -inf give zeros."""
    col_max = s.amax(dim=0, keepdim=True)
    empty = torch.isneginf(col_max)
    e = torch.exp(s - torch.where(empty, 0.0, col_max))
    total = e.sum(dim=0, keepdim=True)
    return torch.where(empty, 0.0, e / torch.where(empty, 1.0, total))


def jagged_softmax_reference(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """float64 softmax over each segment's rows, per column: ``[N, M]`` float64."""
    x = values.to(torch.float64)
    out = torch.zeros_like(x)
    for a, b in _bounds(offsets):
        if b > a:
            out[a:b] = _segment_softmax64(x[a:b])
    return out


def jagged_softmax_reference_scatter(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """float64, all segments at once through per-segment log-sum-exps (scatter-max, scatter-add)."""
    x = values.to(torch.float64)
    n, m = x.shape
    lengths = (offsets[1:] - offsets[:-1]).to(torch.int64).cpu()
    b = lengths.shape[0]
    seg = torch.repeat_interleave(torch.arange(b), lengths).to(x.device)  # [N]: row -> segment
    idx = seg[:, None].expand(n, m)
    top = torch.full((b, m), float("-inf"), dtype=torch.float64, device=x.device)
    top = top.scatter_reduce(0, idx, x, reduce="amax", include_self=True)
    shift = torch.where(torch.isneginf(top), 0.0, top)
    sums = torch.zeros((b, m), dtype=torch.float64, device=x.device)
    sums = sums.index_add(0, seg, torch.exp(x - shift[seg]))
    lse = shift + torch.log(sums)  # -inf for a column with no finite value (log 0)
    y = torch.exp(x - lse[seg])
    return torch.where(torch.isneginf(lse[seg]), 0.0, y)


def jagged_softmax_naive(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Eager PyTorch per segment in ``values.dtype`` (``torch.softmax(x[a:b], dim=0)``), with the
    empty-column convention (zeros, not NaN)."""
    out = torch.zeros_like(values)
    for a, b in _bounds(offsets):
        if b > a:
            s = values[a:b]
            y = torch.softmax(s, dim=0)
            empty = torch.isneginf(s.amax(dim=0, keepdim=True))
            out[a:b] = torch.where(empty, torch.zeros((), dtype=s.dtype, device=s.device), y)
    return out


def jagged_softmax_error_bound(
    values: torch.Tensor, offsets: torch.Tensor, *, out_dtype: str, min_tile: int
) -> torch.Tensor:
    """float64 ``[N, M]``: the error bound of each output element (see the module docstring).

    ``min_tile``: the fewest rows an implementation takes per online step (its rescale count).
    """
    out = torch.zeros(values.shape, dtype=torch.float64, device=values.device)
    for a, b in _bounds(offsets):
        if b > a:
            got = softmax_error_bound(values[a:b].T, out_dtype=out_dtype, min_tile=min_tile)
            out[a:b] = got.y.T
    return out
