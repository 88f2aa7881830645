"""Cases for the masked row softmax: ``x [rows, cols]``, optional mask and bias, scale, tiles."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from fuzz.arrays import FLOAT_DTYPES, np_dtype
from fuzz.case import Case
from strategies._cache import cached_factory
from strategies._validate import check_features, check_scale, check_sizes, check_subset
from strategies.masks import MASK_KINDS, build_mask, mask_recipes
from strategies.reuse import free_lengths, free_options, reusing
from strategies.shapes import sizes, tiled_sizes
from strategies.values import (
    SENTINEL_VALUES,
    float_dtypes,
    materialize,
    occasionally,
    value_recipes,
)

BIAS_KINDS = ("none", "random", "alibi", "-inf")
# Optional features a kernel may support (``fuzz.plugin.Capabilities.features``): a mask input, a
# bias input, an explicit scale (without it the scale is always None: the kernel's default, 1).
FEATURES = ("mask", "bias", "scale")
SCALES = (None, 0.5, 0.125, 2.0, 1 / math.sqrt(64), 1 / math.sqrt(96))


@dataclass(frozen=True)
class Limits:
    """Bounds for one scale: ``rare_block_*`` are drawn about one example in 8 (the compiled
    scale's tiles, so that every tile a GPU run reaches is reachable on the CPU too, with few
    rows)."""

    max_rows: int
    max_tiles: int  # full column tiles (plus a partial one)
    block_m: tuple[int, ...]
    block_n: tuple[int, ...]
    max_elements: int
    rare_block_m: tuple[int, ...] = ()
    rare_block_n: tuple[int, ...] = ()


# Bounds per scale: small keeps the CPU interpreters quick; large is for compiled backends.
LIMITS = {
    "small": Limits(
        max_rows=8,
        max_tiles=3,
        block_m=(8, 4),
        block_n=(16, 32),
        max_elements=1024,
        rare_block_m=(16, 64),
        rare_block_n=(128, 256, 1024),
    ),
    "large": Limits(
        max_rows=300,
        max_tiles=8,
        block_m=(16, 4, 64),
        block_n=(128, 16, 32, 256, 1024),
        max_elements=1 << 18,
    ),
}


def _bias(kind: str, rows: int, cols: int, seed: int, dtype: str) -> np.ndarray | None:
    if kind == "none":
        return None
    rng = np.random.default_rng(seed)
    if kind == "random":
        b = rng.standard_normal((rows, cols))
    elif kind == "alibi":
        # A per-row slope times the distance to the last key, as ALiBi adds to attention logits.
        slopes = 2.0 ** (-8.0 * (np.arange(rows) + 1) / max(rows, 1))
        b = -slopes[:, None] * (cols - 1 - np.arange(cols))[None, :]
    else:  # "-inf": a bias that removes some keys, as an additive mask does
        b = np.where(rng.random((rows, cols)) < 0.3, -np.inf, 0.0)
    return b.astype(np_dtype(dtype))


@cached_factory
def softmax_cases(
    scale: str = "small",
    *,
    dtypes: tuple[str, ...] = FLOAT_DTYPES,
    mask_kinds: tuple[str, ...] = MASK_KINDS,
    bias_kinds: tuple[str, ...] = BIAS_KINDS,
    block_m: tuple[int, ...] | None = None,
    block_n: tuple[int, ...] | None = None,
    features: frozenset[str] | None = None,
) -> st.SearchStrategy[Case]:
    """Softmax cases with inputs ``x`` (and ``mask``, ``bias`` when drawn).

    Structure is drawn before values: dtype, tile sizes, rows, columns (tile count then tail), mask,
    bias, scale, then the value recipe (offsets and explicit values reach below the finite
    sentinels kernels mask with: -5e4, -6e4, -1e5, -1e9). Shrinks toward float32, one row, one
    column, no mask, no bias, no scale and the plainest values (seed 0, normal, magnitude 1,
    offset 0).

    ``block_m``/``block_n`` replace the scale's tile sizes (the rare ones with them) and
    ``features`` (from ``FEATURES``; None: all) leaves out what a kernel does not support: the
    cases a kernel's capabilities admit, and only those.
    """
    lim = LIMITS[check_scale(scale)]
    dtypes = check_subset("dtypes", dtypes, FLOAT_DTYPES)
    mask_kinds = check_subset("mask_kinds", mask_kinds, MASK_KINDS)
    bias_kinds = check_subset("bias_kinds", bias_kinds, BIAS_KINDS)
    feats = check_features(features, FEATURES)
    if "mask" not in feats:
        mask_kinds = ("none",)
    if "bias" not in feats:
        bias_kinds = ("none",)
    blocks_m = check_sizes("block_m", block_m, lim.block_m)
    blocks_n = check_sizes("block_n", block_n, lim.block_n)

    # Strategies are built once, outside the draw (building one is far slower than drawing).
    dtype_st = float_dtypes(dtypes)
    block_m_st = (
        occasionally(lim.block_m, lim.rare_block_m, one_in=8)
        if block_m is None
        else st.sampled_from(blocks_m)
    )
    block_n_st = (
        occasionally(lim.block_n, lim.rare_block_n, one_in=8)
        if block_n is None
        else st.sampled_from(blocks_n)
    )
    mask_st, bias_st = mask_recipes(mask_kinds), st.sampled_from(bias_kinds)
    seed_st = st.integers(0, 2**32 - 1)
    scale_st = st.sampled_from(SCALES if "scale" in feats else (None,))

    @st.composite
    def structure(draw: st.DrawFn) -> dict[str, Any]:
        dtype = draw(dtype_st, label="dtype")
        block_m = draw(block_m_st, label="block_m")
        block_n = draw(block_n_st, label="block_n")
        with free_lengths(draw):
            rows = draw(sizes(max_size=lim.max_rows, blocks=(block_m,)), label="rows")
            max_cols = max(1, min(lim.max_tiles * block_n + block_n - 1, lim.max_elements // rows))
            cols = draw(tiled_sizes(block_n, max_size=max_cols), label="cols")
        with free_options(draw):
            mask_recipe = draw(mask_st, label="mask")
            bias_kind = draw(bias_st, label="bias")
            bias_seed = 0 if bias_kind in ("none", "alibi") else draw(seed_st, label="bias seed")
            scale_value = draw(scale_st, label="scale")
        return {
            "dtype": dtype,
            "block_m": block_m,
            "block_n": block_n,
            "rows": rows,
            "cols": cols,
            "mask": mask_recipe,
            "bias": bias_kind,
            "bias_seed": bias_seed,
            "scale": scale_value,
        }

    key = ("softmax", scale, dtypes, mask_kinds, bias_kinds, block_m, block_n, feats)
    structure_st = reusing(structure(), key=key)

    @st.composite
    def build(draw: st.DrawFn) -> Case:
        s = draw(structure_st, label="structure")
        dtype, rows, cols = s["dtype"], s["rows"], s["cols"]
        recipe = draw(
            value_recipes(
                numel=rows * cols,
                rare_offsets=SENTINEL_VALUES,
                rare_explicit_values=SENTINEL_VALUES,
            ),
            label="values",
        )
        inputs = {"x": materialize(recipe, (rows, cols), dtype)}
        mask = build_mask(s["mask"], rows, cols)
        if mask is not None:
            inputs["mask"] = mask
        bias = _bias(s["bias"], rows, cols, s["bias_seed"], dtype)
        if bias is not None:
            inputs["bias"] = bias
        params = {
            "dtype": dtype,
            "scale": s["scale"],
            "block_m": s["block_m"],
            "block_n": s["block_n"],
        }
        described = {"values": recipe.describe(), "mask": s["mask"].describe(), "bias": s["bias"]}
        return Case(inputs, params, described)

    return build()
