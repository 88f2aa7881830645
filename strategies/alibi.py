"""ALiBi slopes: the standard rule for any head count, and adversarial slopes.

The standard slopes are computed here from the published rule, independently of
``kernels.alibi`` (the tests compare the two with a hand-written table): for a power-of-two head
count ``n`` the slopes are ``r, r**2, ..., r**n`` with ``r = 2 ** (-8 / n)``; for other counts the
``p = 2 ** floor(log2 n)`` slopes come first, then the slopes of ``2 p`` heads at even positions
(``r2**1, r2**3, ...``) until there are ``n``.

Kinds, in shrinking order (simplest first)::

    standard    the rule above
    scaled      the standard slopes times a factor (models that scale ALiBi per layer)
    constant    one slope for every head
    adversarial per-head slopes from a list of troublemakers: 0, tiny, huge, mixed
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from strategies._cache import cached_factory
from strategies._validate import check_int, check_subset

SLOPE_KINDS = ("standard", "scaled", "constant", "adversarial")
SCALE_FACTORS = (2.0, 0.5, 4.0, 8.0, 0.125)
ADVERSARIAL = (0.0, 1.0, 1e-6, 0.5, 2.0, 8.0, 64.0, 2.0**-8, 1e3)


def standard_slopes(n_heads: int) -> np.ndarray:
    """float64 ``[n_heads]``: the standard ALiBi slopes, largest first."""
    check_int("n_heads", n_heads, lo=1)

    def geometric(n: int) -> np.ndarray:
        r = 2.0 ** (-8.0 / n)
        return r ** np.arange(1, n + 1, dtype=np.float64)

    p = 1 << (n_heads.bit_length() - 1)
    if p == n_heads:
        return geometric(n_heads)
    extra = geometric(2 * p)[0::2][: n_heads - p]
    return np.concatenate([geometric(p), extra])


@dataclass(frozen=True)
class SlopeRecipe:
    """How a case's slopes were made (for reports); ``slopes`` holds the values."""

    kind: str
    factor: float = 1.0
    picks: tuple[float, ...] = ()

    def describe(self) -> dict[str, Any]:
        if self.kind == "standard":
            return {"kind": "standard"}
        if self.kind in ("scaled", "constant"):
            return {"kind": self.kind, "factor": self.factor}
        return {"kind": self.kind, "picks": list(self.picks)}

    def slopes(self, n_heads: int) -> np.ndarray:
        check_int("n_heads", n_heads, lo=1)
        if self.kind == "standard":
            return standard_slopes(n_heads)
        if self.kind == "scaled":
            return standard_slopes(n_heads) * self.factor
        if self.kind == "constant":
            return np.full(n_heads, self.factor, np.float64)
        if self.kind == "adversarial":
            return np.resize(np.asarray(self.picks, np.float64), n_heads)
        raise ValueError(f"slope kind={self.kind!r} must be one of {SLOPE_KINDS}")


@cached_factory
def slope_recipes(
    n_heads: int, *, kinds: tuple[str, ...] = SLOPE_KINDS
) -> st.SearchStrategy[SlopeRecipe]:
    """Slope recipes for ``n_heads`` heads.

    Shrinks toward the standard slopes; then scaled by 2, a constant 2, and adversarial picks
    starting from 0 (a head with no bias at all).
    """
    check_int("n_heads", n_heads, lo=1)
    kinds = check_subset("kinds", kinds, SLOPE_KINDS)

    kind_st, factor_st = st.sampled_from(kinds), st.sampled_from(SCALE_FACTORS)
    picks_st = st.lists(st.sampled_from(ADVERSARIAL), min_size=1, max_size=n_heads)

    @st.composite
    def build(draw: st.DrawFn) -> SlopeRecipe:
        kind = draw(kind_st, label="slope kind")
        if kind == "standard":
            return SlopeRecipe("standard")
        if kind in ("scaled", "constant"):
            return SlopeRecipe(kind, draw(factor_st, label="slope factor"))
        picks = draw(picks_st, label="slope picks")
        return SlopeRecipe("adversarial", picks=tuple(picks))

    return build()


@cached_factory
def alibi_slopes(
    n_heads: int, *, kinds: tuple[str, ...] = SLOPE_KINDS
) -> st.SearchStrategy[np.ndarray]:
    """float64 ``[n_heads]`` slopes; shrinks toward the standard slopes (see :func:`slope_recipes`)."""
    return slope_recipes(n_heads, kinds=kinds).map(lambda r: r.slopes(n_heads))
