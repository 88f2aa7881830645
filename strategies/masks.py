"""Boolean key masks for row-wise kernels, described by a small recipe.

Kinds, in shrinking order (simplest first)::

    none             no mask at all (the kernel's unmasked path)
    full             a mask that keeps every key (the masked path with nothing masked)
    random           each key kept with probability ``density``
    causal           key c kept for row r when c <= r + (cols - rows) (bottom-right aligned:
                     with more rows than keys, the top rows keep nothing)
    masked_rows      random, and a random subset (at least one) of rows keeps nothing
    single_valid     exactly one key kept per row
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from strategies._cache import cached_factory
from strategies._validate import check_int, check_subset

MASK_KINDS = ("none", "full", "random", "causal", "masked_rows", "single_valid")


@dataclass(frozen=True)
class MaskRecipe:
    kind: str = "none"
    density: float = 0.5
    seed: int = 0

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        if self.kind in ("none", "full", "causal"):
            return {"kind": self.kind}
        return d


def build_mask(recipe: MaskRecipe, rows: int, cols: int) -> np.ndarray | None:
    """The ``[rows, cols]`` boolean mask of ``recipe`` (None for kind ``none``)."""
    rng = np.random.default_rng(recipe.seed)
    if recipe.kind == "none":
        return None
    if recipe.kind == "full":
        return np.ones((rows, cols), bool)
    if recipe.kind == "random":
        return rng.random((rows, cols)) < recipe.density
    if recipe.kind == "causal":
        r = np.arange(rows)[:, None]
        c = np.arange(cols)[None, :]
        return c <= r + (cols - rows)
    if recipe.kind == "masked_rows":
        m = rng.random((rows, cols)) < recipe.density
        dead = rng.random(rows) < 0.5
        dead[rng.integers(rows)] = True
        m[dead] = False
        return m
    if recipe.kind == "single_valid":
        m = np.zeros((rows, cols), bool)
        m[np.arange(rows), rng.integers(0, cols, rows)] = True
        return m
    raise ValueError(f"mask kind={recipe.kind!r} must be one of {MASK_KINDS}")


@cached_factory
def mask_recipes(kinds: tuple[str, ...] = MASK_KINDS) -> st.SearchStrategy[MaskRecipe]:
    """Mask recipes; shrinks toward the first kind (``none``), density 0.5 and seed 0."""
    kinds = check_subset("kinds", kinds, MASK_KINDS)

    kind_st, density_st = st.sampled_from(kinds), st.sampled_from((0.5, 0.1, 0.9))
    seed_st = st.integers(0, 2**32 - 1)

    @st.composite
    def build(draw: st.DrawFn) -> MaskRecipe:
        kind = draw(kind_st, label="mask kind")
        if kind in ("none", "full", "causal"):
            return MaskRecipe(kind)
        density = draw(density_st, label="mask density")
        seed = draw(seed_st, label="mask seed")
        return MaskRecipe(kind, density, seed)

    return build()


@cached_factory
def masks(
    rows: int, cols: int, kinds: tuple[str, ...] = MASK_KINDS
) -> st.SearchStrategy[np.ndarray | None]:
    """``[rows, cols]`` masks (or None); shrinks toward no mask."""
    check_int("rows", rows, lo=1)
    check_int("cols", cols, lo=1)
    return mask_recipes(kinds).map(lambda r: build_mask(r, rows, cols))
