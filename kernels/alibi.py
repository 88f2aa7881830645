"""ALiBi slopes (Press et al., "Train Short, Test Long"), for the kernels' wrappers.

For ``n`` heads, a power of two, head ``h`` (0-based) gets slope ``2 ** (-8 * (h + 1) / n)``: a
geometric sequence that starts and has ratio ``2 ** (-8 / n)``. For other head counts the rule
takes the slopes of the largest power of two ``p < n`` and then every other slope of ``2 * p``
heads (the odd-numbered ones) until there are ``n``. Attention adds ``-slope * |i - j|`` to the
logit of query ``i`` and key ``j``; a linear-attention decay uses ``-slope`` as the per-token log
decay (``kernels.simple_gla``).
"""

from __future__ import annotations

import math

__all__ = ["alibi_slopes"]


def _pow2_slopes(n: int) -> list[float]:
    start = 2.0 ** (-8.0 / n)
    return [start ** (h + 1) for h in range(n)]


def alibi_slopes(n_heads: int) -> list[float]:
    """The standard ALiBi slopes for ``n_heads`` heads (any positive count), largest first."""
    if isinstance(n_heads, bool) or not isinstance(n_heads, int):
        raise TypeError(f"n_heads must be an int, got {n_heads!r}")
    if n_heads < 1:
        raise ValueError(f"n_heads={n_heads} must be >= 1")
    p = 2 ** math.floor(math.log2(n_heads))
    slopes = _pow2_slopes(p)
    if p < n_heads:
        slopes += _pow2_slopes(2 * p)[0::2][: n_heads - p]
    return slopes
