"""Cases for attention: dense batches, packed variable-length sequences, and decode steps.

Structure is drawn before values, in a fixed order, so that shrinking one choice does not reshuffle
the rest: dtype, tile sizes, heads (kv heads, GQA group), batch, lengths (tiles, then tail), masks
(causal, window, key padding / sequence lengths / cache lengths), score modifiers (scale, ALiBi
slopes, soft cap), the logit level, and last the value recipes of ``q``, ``k`` and ``v``.

Boundaries the draws aim at (``kernels/attention/README.md`` says why each matters):

* lengths ``T = n_tiles * block + rem`` with ``rem`` in ``{0, 1, block - 1}``; ``Tq != Tk`` both
  ways (bottom-right alignment leaves the top rows of a causal ``Tq > Tk`` without keys);
* both ``block_q > block_k`` and ``block_q < block_k`` (the causal loop bound);
* windows narrower than the distance (rows with no visible key); key lengths 0, 1 and full;
  packed batches with empty and length-1 sequences and guard rows after the last one; decode
  caches of length 0 and 1, and more splits than key tiles (splits without keys);
* GQA ratios, including head counts that are not powers of two (ALiBi's second rule);
* ALiBi slopes from ``strategies.alibi``: standard first, then scaled, constant and adversarial
  (0, tiny, huge); soft caps small (saturating) and large;
* a logit level: ``q`` and ``k`` shifted along a common direction so that every logit sits near
  +-100 or +-1000 (the log-sum-exp beyond fp32's exp range, +-88.72) or 12 (fp16's), and, last,
  below the finite sentinels kernels mask with (-5e4, -1e5, -1e9: a key masked with a sentinel
  above a row's genuine logits outranks them all);
* values large enough that an unnormalized partial result overflows fp16 although the output
  does not (a v offset of 6e4: a sum of V rows over two keys, or a split's weighted output before
  the merge's division, passes 65504);
* a logit trend: the keys shifted along that direction in proportion to their position, so that
  the logits rise (or fall) across the key axis: with a rise, the running max of the online
  softmax grows in every key tile and the accumulator must be rescaled each time;
* occasionally (about one example in 8), the compiled scale's tiles, head dims and split counts
  with few rows, so that every kernel variant a GPU run reaches is reachable on the CPU, and (one
  decode example in 16) a cache of thousands of keys.

Everything shrinks toward one batch element, one head, length 1, head dim 1, no mask, no modifier,
float32, standard slopes and plain normal values (seed 0).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from fuzz.arrays import FLOAT_DTYPES, np_dtype
from fuzz.case import Case
from strategies import alibi, shapes
from strategies._validate import (
    check_features,
    check_lengths,
    check_scale,
    check_sizes,
    check_subset,
    fitted,
)
from strategies.reuse import free_lengths, free_options, reusing, structure_key
from strategies.values import EXPLICIT_MAX, ValueRecipe, float_dtypes, materialize, occasionally

LEVELS = (0.0, 100.0, -100.0, 12.0, -1000.0, 1000.0)
DEEP_LEVELS = (-5e4, -1e5, -1e9)  # occasionally: below the finite sentinels kernels mask with
LONG_CACHE_MIN = 1024  # an occasional long decode cache holds at least this many keys
TRENDS = (0.0, 8.0, -8.0, 40.0)
SOFTCAPS = (30.0, 1.0, 50.0, 0.1, 5.0)
SCALES = (None, 0.5, 1.0, 0.125, 2.0, 0.03)
WINDOW_SIDES = (-1, 0, 1, 2, 3, 7, 16)
QK_MAGNITUDES = (1.0, 0.1, 4.0, 16.0)
V_MAGNITUDES = (1.0, 0.01, 100.0)
V_OFFSETS = (0.0, 1.0, -3.0)
# Occasionally: values near fp16's largest, whose unnormalized sums (P . V before the division, a
# split's weighted output before the merge's) overflow fp16 while the output does not.
LARGE_V_MAGNITUDES = (3e4,)
LARGE_V_OFFSETS = (6e4,)
EXPLICIT = (1.0, 0.0, -1.0, 2.0, 10.0, -10.0, 0.5)
SPECIALS = ("none", "zero", "subnormal")
# Optional features a kernel may support (``fuzz.plugin.Capabilities.features``); a strategy given
# a subset draws none of the others. ``scale``: an explicit scale (else always None, 1/sqrt(D)).
FEATURES = ("causal", "window", "key_padding", "alibi", "softcap", "gqa", "scale")
VARLEN_FEATURES = ("causal", "window", "alibi", "softcap", "gqa", "scale")
DECODE_FEATURES = ("window", "alibi", "softcap", "gqa", "scale", "splits")


# The shared factories build a fresh ``st.composite`` per call, and defining a composite makes
# Hypothesis read the function's source (milliseconds); a case draws several, so build each
# distinct one once.
@functools.cache
def tiled_sizes(block: int, *, max_size: int) -> st.SearchStrategy[int]:
    return shapes.tiled_sizes(block, max_size=max_size)


@functools.cache
def key_sizes(block: int, *, max_size: int) -> st.SearchStrategy[int]:
    """A key length ``tiles * block + rem`` like ``strategies.shapes.tiled_sizes``, but with two
    thirds of the draws spanning more than one tile when ``max_size`` allows two: the online
    softmax's rescaling, the loop bounds and the partial last tile all need a second key tile.
    Shrinks toward one partial tile of one key."""
    max_tiles = max_size // block
    if max_tiles != 1:
        return shapes.tiled_sizes(block, max_size=max_size)

    @st.composite
    def build(draw: st.DrawFn) -> int:
        tiles = draw(st.sampled_from((0, 1, 1)), label="key tiles")
        rem = draw(
            st.one_of(st.integers(0, block - 1), st.sampled_from((block - 1, 1, 0))),
            label="key remainder",
        )
        return min(max(tiles * block + rem, 1), max_size)

    return build()


@functools.cache
def slope_recipes(n_heads: int) -> st.SearchStrategy[alibi.SlopeRecipe]:
    return alibi.slope_recipes(n_heads)


@dataclass(frozen=True)
class Limits:
    """Bounds for one scale.

    Attributes:
        block_pairs: ``(block_q, block_k)`` pairs to draw from (first = simplest); pairs with
            ``block_q > block_k`` (the causal loop bound's condition) are listed twice.
        blocks_k: key tile sizes for decode (first = simplest).
        head_dims: head dims to draw from (first = simplest).
        groups: GQA ratios ``Hq / Hkv``.
        max_kv_heads, max_batch: bounds of ``Hkv`` and ``B``.
        max_bh: bound of ``B * Hq`` (or ``N * Hq``).
        max_tiles: full tiles in a length (plus a tail of up to ``block - 1``).
        max_seqs: packed sequences; max_splits: decode splits.
        max_scores: bound of ``B * Hq * Tq * Tk`` (the oracle's score matrix).
        max_programs: bound of the programs of one dense launch (``B * Hq * q tiles``); the key
            axis always gets its ``max_tiles + 1`` tiles (rescaling, loop bounds and partial
            tiles live there). The Triton interpreter costs about 10 ms per program and tile.
        max_work: bound of the program-tiles of one packed launch (``Hq * sum over sequences of
            q tiles * k tiles``).
        tile_elements: bound of ``block * D_pad``: tiles are cut for large head dims, as
            deployments choose them (fp32 tiles of 128 x 256 overflow a GPU's shared memory).
        rare_block_pairs, rare_blocks_k, rare_head_dims, rare_splits: drawn about one example
            in 8 instead (``strategies.values.occasionally``): the compiled scale's tiles, head
            dims and split counts, so that every kernel variant it reaches is reachable here.
        long_cache: decode caches of this many keys at most, drawn about one example in 16
            (0: none beyond ``max_tiles``).
    """

    block_pairs: tuple[tuple[int, int], ...]
    blocks_k: tuple[int, ...]
    head_dims: tuple[int, ...]
    groups: tuple[int, ...]
    max_kv_heads: int
    max_batch: int
    max_bh: int
    max_tiles: int
    max_seqs: int
    max_splits: int
    max_scores: int
    max_programs: int
    max_work: int
    tile_elements: int
    rare_block_pairs: tuple[tuple[int, int], ...] = ()
    rare_blocks_k: tuple[int, ...] = ()
    rare_head_dims: tuple[int, ...] = ()
    rare_splits: tuple[int, ...] = ()
    long_cache: int = 0


# small keeps the CPU interpreters quick (a few program-tiles per launch); large is for the GPU.
LIMITS = {
    "small": Limits(
        block_pairs=((16, 16), (32, 16), (16, 32), (32, 16), (32, 32)),
        blocks_k=(16, 32),
        head_dims=(1, 16, 2, 8, 32, 3, 64, 24),
        groups=(1, 2, 3),
        max_kv_heads=2,
        max_batch=2,
        max_bh=4,
        max_tiles=1,
        max_seqs=3,
        max_splits=4,
        max_scores=1 << 14,
        max_programs=3,
        max_work=6,
        tile_elements=1 << 13,
        rare_block_pairs=(
            (64, 64),
            (128, 64),
            (64, 128),
            (128, 32),
            (32, 64),
            (64, 16),
            (128, 128),
            (64, 32),
        ),
        rare_blocks_k=(64, 128),
        rare_head_dims=(80, 96, 128, 256),
        rare_splits=(8, 16),
        long_cache=4096,
    ),
    "large": Limits(
        block_pairs=(
            (64, 64),
            (128, 64),
            (64, 128),
            (128, 32),
            (32, 64),
            (64, 16),
            (16, 16),
            (128, 128),
            (32, 32),
            (64, 32),
        ),
        blocks_k=(64, 16, 32, 128),
        # 16 first: the smallest tensor-core K is what shrinking reaches, so a reproducer's row is
        # 16 elements (64 first left every two-row GPU reproducer at 128 elements).
        head_dims=(16, 64, 128, 32, 1, 80, 96, 8, 256),
        groups=(1, 2, 4, 8, 3, 5),
        max_kv_heads=8,
        max_batch=4,
        max_bh=32,
        max_tiles=32,
        max_seqs=8,
        max_splits=16,
        max_scores=1 << 26,
        max_programs=1 << 30,
        max_work=1 << 30,
        tile_elements=1 << 13,
    ),
}


@dataclass(frozen=True)
class Modifiers:
    """Score modifiers and the logit level of a case (``alibi`` is None, 'standard' or 'user')."""

    scale: float | None
    softcap: float | None
    alibi: str | None
    slopes: np.ndarray | None
    slope_recipe: dict[str, Any] | None
    level: float
    trend: float

    def params(self) -> dict[str, Any]:
        return {"scale": self.scale, "softcap": self.softcap, "alibi": self.alibi}

    def describe(self) -> dict[str, Any]:
        return {"slopes": self.slope_recipe, "level": self.level, "trend": self.trend}


def _limits(
    scale: str,
    *,
    block_pairs: tuple[tuple[int, int], ...] | None = None,
    blocks_k: tuple[int, ...] | None = None,
    head_dims: tuple[int, ...] | None = None,
) -> tuple[Limits, Callable[[int, int], int]]:
    """The scale's limits with a kernel's own tiles and head dims (or a run's narrowing of the
    scale's) in place of the scale's, and the tile fitting to use: the tile budget cuts a tile
    for a large head dim, to the largest of the given tile sizes within it (the smallest where
    none is), never to a size not given. Narrowed tiles fitted so: a campaign drew fp32 tiles of
    128 x 128 with head dim 256 and Triton needed 344 KB of shared memory, above an H100's
    227 KB."""
    lim = LIMITS[check_scale(scale)]
    own_tiles = block_pairs is not None or blocks_k is not None
    lim = dataclasses.replace(
        lim,
        block_pairs=check_sizes("block_pairs", block_pairs, lim.block_pairs),
        blocks_k=check_sizes("blocks_k", blocks_k, lim.blocks_k),
        head_dims=check_sizes("head_dims", head_dims, lim.head_dims),
        # a kernel's own sizes are all it has: no rare ones beside them
        rare_block_pairs=lim.rare_block_pairs if block_pairs is None else (),
        rare_blocks_k=lim.rare_blocks_k if blocks_k is None else (),
        rare_head_dims=lim.rare_head_dims if head_dims is None else (),
    )
    if own_tiles:
        sizes = sorted({b for pair in lim.block_pairs for b in pair} | set(lim.blocks_k))
        return lim, lambda block, d: _fit(block, d, lim, sizes)
    return lim, lambda block, d: _fit(block, d, lim)


def _fit(block: int, d: int, lim: Limits, sizes: Sequence[int] | None = None) -> int:
    """``block``, cut so that ``block * D_pad <= tile_elements``: to the largest of ``sizes``
    within that (the smallest of them where none is), or without ``sizes`` to that bound (never
    below 16)."""
    d_pad = max(16, 1 << max(d - 1, 0).bit_length())
    most = lim.tile_elements // d_pad
    if block <= most:
        return block
    if sizes is None:
        return max(16, most)
    within = [b for b in sizes if b <= most]
    return max(within) if within else min(sizes)


def _heads(draw: st.DrawFn, lim: Limits, feats: frozenset[str]) -> tuple[int, int]:
    """``(Hq, Hkv)``: the GQA ratio (1 without the ``gqa`` feature), then the kv heads within
    ``max_bh``."""
    groups = tuple(g for g in lim.groups if g <= lim.max_bh) if "gqa" in feats else (1,)
    group = draw(st.sampled_from(groups), label="group")
    hkv = draw(shapes.few(1, max(1, min(lim.max_kv_heads, lim.max_bh // group))), label="Hkv")
    return hkv * group, hkv


def _flag(draw: st.DrawFn, feats: frozenset[str], name: str) -> bool:
    """A drawn boolean for an optional feature; False (nothing drawn) where it is unsupported."""
    return name in feats and draw(st.booleans(), label=name)


def _score_modifiers(draw: st.DrawFn, n_heads: int, feats: frozenset[str]) -> dict[str, Any]:
    """The score modifiers of a case's structure: scale, ALiBi (kind, slopes), soft cap."""
    scale = draw(st.sampled_from(SCALES if "scale" in feats else (None,)), label="scale")
    alibi = _flag(draw, feats, "alibi")
    slopes = recipe = None
    kind = None
    if alibi:
        r = draw(slope_recipes(n_heads), label="slopes")
        slopes = r.slopes(n_heads).astype(np.float32)
        kind = "standard" if r.kind == "standard" else "user"
        recipe = r.describe()
    softcap = (
        draw(st.one_of(st.none(), st.sampled_from(SOFTCAPS)), label="softcap")
        if "softcap" in feats
        else None
    )
    return {"scale": scale, "softcap": softcap, "alibi": kind, "slopes": slopes, "recipe": recipe}


def _modifiers(draw: st.DrawFn, score: dict[str, Any]) -> Modifiers:
    """The structure's score modifiers (:func:`_score_modifiers`) with the logit level and trend
    drawn, the first of a case's values."""
    level = draw(occasionally(LEVELS, DEEP_LEVELS), label="logit level")
    trend = draw(st.sampled_from(TRENDS), label="logit trend")
    return Modifiers(
        score["scale"],
        score["softcap"],
        score["alibi"],
        score["slopes"],
        score["recipe"],
        level,
        trend,
    )


_WINDOW_SIDE = st.one_of(st.sampled_from(WINDOW_SIDES), st.integers(0, 40))


def _window(draw: st.DrawFn, feats: frozenset[str]) -> list[int] | None:
    """None, or ``[left, right]`` with -1 (unbounded) and narrow sides first."""
    if not _flag(draw, feats, "window"):
        return None
    return [draw(_WINDOW_SIDE, label="window left"), draw(_WINDOW_SIDE, label="window right")]


# A padded key (or cache) length, drawn before Tk is known and resolved against it: full first,
# then 0, 1, Tk - 1, then any. As a list, the shrinker deletes the elements that do not matter
# (cache lengths [Tk, Tk, 0] -> [0]: one batch element, the list being the batch) instead of
# having to lower the batch and re-draw every length at once.
_LENGTH_KIND = st.sampled_from(("full", "zero", "one", "last", "any"))


def _max_batch(lim: Limits, n_heads: int, most: int) -> int:
    """Batch elements (or sequences) of ``n_heads`` q heads each within ``max_bh``, at most
    ``most``."""
    return max(1, min(most, lim.max_bh // n_heads))


def _length_kinds(draw: st.DrawFn, lim: Limits, max_batch: int, label: str) -> list[str]:
    """One length kind per batch element, at most ``max_batch`` of them. The list's own bound is
    the profile's, not ``max_batch`` (which depends on the head count drawn before): a bound that
    moved with the heads would change how the list's choices read whenever the shrinker lowers
    the heads, and it could not."""
    kinds = draw(st.lists(_LENGTH_KIND, min_size=1, max_size=lim.max_batch), label=label)
    return kinds[:max_batch]


def _key_lengths(
    draw: st.DrawFn, feats: frozenset[str], lim: Limits, batch: int, tk: int
) -> np.ndarray | None:
    """None (no key padding), or each batch element's key length in ``[0, tk]``: a list of
    length kinds, element ``i`` taking kind ``i`` modulo the list's length.

    Key lengths are a case's data, not its shape (a kernel takes them as an array): drawn as an
    option (:func:`free_options`), a structure reused from earlier examples meets a key length
    of 0 while its shapes stay compiled (round 3's Pallas kernel that writes nothing for a batch
    element without keys went unfound on an H200 with the padding replayed from its first five
    structures). Cycling keeps shrinking short: deleting kinds of the list leaves the rest where
    they were, so ``B = 3`` with kinds ``[full, full, zero]`` goes to kinds ``[zero]`` (every
    element without keys), then ``B = 1``."""
    if not _flag(draw, feats, "key_padding"):
        return None
    kinds = _length_kinds(draw, lim, lim.max_batch, "key lengths")
    return _resolve_lengths(draw, [kinds[i % len(kinds)] for i in range(batch)], tk)


def _resolve_lengths(draw: st.DrawFn, kinds: list[str], n: int) -> np.ndarray:
    """``kinds`` (from ``_LENGTH_KIND``) as lengths in ``[0, n]`` (int32)."""
    fixed = {"full": n, "zero": 0, "one": min(1, n), "last": max(n - 1, 0)}
    return np.array(
        [fixed[k] if k in fixed else draw(shapes.few(0, n), label="length") for k in kinds],
        np.int32,
    )


@functools.cache
def _seq_length(block: int, top: int) -> st.SearchStrategy[int]:
    """A packed sequence's length in ``[0, top]``: tiny first, then 0, 1 and the block's edges."""
    edges = sorted({min(x, top) for x in (0, 1, block - 1, block, block + 1)})
    return st.one_of(st.integers(1, min(3, top)), st.sampled_from(edges), shapes.few(0, top))


_SEED = st.integers(0, 2**16 - 1)
_QK_DISTRIBUTIONS = ("normal", "uniform", "constant")
_EXPLICIT_VALUE = st.sampled_from(EXPLICIT)


def _recipes(draw: st.DrawFn, q_numel: int, k_numel: int) -> tuple[ValueRecipe, ...]:
    """Value recipes of q, k and v (``strategies.values``), drawn as one compact recipe: a seed
    and a distribution shared by q and k, a magnitude each, v's magnitude and offset, and one
    kind of special values for all three. Few choices keep shrinking quick. Tiny q and k (at most
    ``EXPLICIT_MAX`` elements) may instead be given element by element."""
    explicit = max(q_numel, k_numel) <= EXPLICIT_MAX
    kinds = (*_QK_DISTRIBUTIONS, "explicit") if explicit else _QK_DISTRIBUTIONS
    dist = draw(st.sampled_from(kinds), label="q/k distribution")
    if dist == "explicit":
        rq = ValueRecipe(
            distribution="explicit",
            values=tuple(draw(_EXPLICIT_VALUE, label="q value") for _ in range(q_numel)),
        )
        rk = ValueRecipe(
            distribution="explicit",
            values=tuple(draw(_EXPLICIT_VALUE, label="k value") for _ in range(k_numel)),
        )
        seed = 0
    else:
        q_mag = draw(st.sampled_from(QK_MAGNITUDES), label="q magnitude")
        k_mag = draw(st.sampled_from(QK_MAGNITUDES), label="k magnitude")
        seed = draw(_SEED, label="seed")
        rq = ValueRecipe(seed, dist, q_mag)
        rk = ValueRecipe(seed + 1, dist, k_mag)
    v_mag = draw(occasionally(V_MAGNITUDES, LARGE_V_MAGNITUDES, one_in=8), label="v magnitude")
    v_off = draw(occasionally(V_OFFSETS, LARGE_V_OFFSETS, one_in=8), label="v offset")
    special = draw(st.sampled_from(SPECIALS), label="specials")
    density = 0.0 if special == "none" else draw(st.sampled_from((0.1, 0.5, 1.0)), label="density")
    rv = ValueRecipe(seed + 2, "normal", v_mag, v_off, special, density)
    if special != "none" and dist != "explicit":
        rq = ValueRecipe(rq.seed, rq.distribution, rq.magnitude, 0.0, special, density)
        rk = ValueRecipe(rk.seed, rk.distribution, rk.magnitude, 0.0, special, density)
    return rq, rk, rv


def _materialize_qkv(
    recipes: tuple[ValueRecipe, ...],
    q_shape: tuple[int, ...],
    k_shape: tuple[int, ...],
    dtype: str,
    mods: Modifiers,
) -> dict[str, np.ndarray]:
    """q, k, v from their recipes; ``q`` and ``k`` shifted along the all-ones direction so that
    ``scale * q_i . k_j ~ level + trend * j / (Tk - 1)`` (plus the recipes' own logits)."""
    rq, rk, rv = recipes
    v = materialize(rv, k_shape, dtype)
    if not (mods.level or mods.trend):
        return {"q": materialize(rq, q_shape, dtype), "k": materialize(rk, k_shape, dtype), "v": v}
    q = materialize(rq, q_shape, "float32").astype(np.float64)
    k = materialize(rk, k_shape, "float32").astype(np.float64)
    d = q_shape[-1]
    scale = mods.scale if mods.scale is not None else 1.0 / math.sqrt(d)
    a = math.sqrt(max(abs(mods.level), abs(mods.trend)) / (scale * d))
    t = np.arange(k_shape[2], dtype=np.float64) / max(k_shape[2] - 1, 1)
    q = q + a
    k = k + ((mods.level + mods.trend * t) / (a * d * scale))[:, None]
    big = float(np.finfo(np.float32).max) if dtype != "float16" else 65504.0
    return {
        "q": np.clip(q, -big, big).astype(np_dtype(dtype)),
        "k": np.clip(k, -big, big).astype(np_dtype(dtype)),
        "v": v,
    }


def _described(recipes: tuple[ValueRecipe, ...], mods: Modifiers, **extra: Any) -> dict[str, Any]:
    d = {"q": recipes[0].describe(), "k": recipes[1].describe(), "v": recipes[2].describe()}
    return {**extra, **mods.describe(), "values": d}


def attention_cases(
    scale: str = "small",
    *,
    dtypes: tuple[str, ...] = FLOAT_DTYPES,
    block_pairs: tuple[tuple[int, int], ...] | None = None,
    head_dims: tuple[int, ...] | None = None,
    features: frozenset[str] | None = None,
    lengths: dict[str, Any] | None = None,
    same_lengths: bool = False,
) -> st.SearchStrategy[Case]:
    """Dense batched attention cases.

    Inputs ``q [B, Hq, Tq, D]``, ``k, v [B, Hkv, Tk, D]``, and when drawn ``key_lengths [B]``
    (int32) and ``alibi_slopes [Hq]`` (float32). Params: ``dtype``, ``scale``, ``causal``,
    ``window`` (``[left, right]`` or None), ``softcap``, ``alibi`` (None, ``'standard'``: the
    kernel computes the standard slopes itself, ``'user'``), ``block_q``, ``block_k``.

    Shrinks toward one batch element, one head, ``Tq = Tk = 1``, ``D = 1``, float32, no mask, no
    modifier, logit level 0 and plain normal values.

    ``block_pairs`` and ``head_dims`` replace the scale's (a kernel's own tiles are not cut to the
    tile budget) and ``features`` (from ``FEATURES``; None: all) leaves out what a kernel does not
    support: the cases a kernel's capabilities admit, and only those. ``lengths`` (``{"q": fit,
    "k": fit}``, each ``fit(n, tiles) -> int``) maps each drawn length to one a kernel takes (the
    smallest at or above it: shrinking still goes down), and ``same_lengths`` draws ``Tk = Tq``.
    """
    lim, fit = _limits(scale, block_pairs=block_pairs, head_dims=head_dims)
    dtypes = check_subset("dtypes", dtypes, FLOAT_DTYPES)
    feats = check_features(features, FEATURES)
    rules = check_lengths(lengths, ("q", "k"))

    @st.composite
    def structure(draw: st.DrawFn) -> dict[str, Any]:
        dtype = draw(float_dtypes(dtypes), label="dtype")
        block_q, block_k = draw(
            occasionally(lim.block_pairs, lim.rare_block_pairs),
            label="(block_q, block_k)",
        )
        hq, hkv = _heads(draw, lim, feats)
        max_batch = _max_batch(lim, hq, lim.max_batch)
        batch = draw(st.integers(1, max_batch), label="B")
        d = draw(occasionally(lim.head_dims, lim.rare_head_dims), label="D")
        block_q, block_k = fit(block_q, d), fit(block_k, d)
        tiles = {"block_q": block_q, "block_k": block_k}
        n_q = max(1, min(lim.max_tiles + 1, lim.max_programs // (batch * hq)))
        with free_lengths(draw):
            tq = draw(
                tiled_sizes(block_q, max_size=n_q * block_q - 1 if n_q > 1 else block_q),
                label="Tq",
            )
            tq = fitted(rules, "q", tq, tiles)
            if same_lengths:
                tk = fitted(rules, "k", tq, tiles)
            else:
                max_tk = (lim.max_tiles + 1) * block_k - 1
                max_tk = max(1, min(max_tk, lim.max_scores // (batch * hq * tq)))
                tk = draw(key_sizes(block_k, max_size=max_tk), label="Tk")
                tk = fitted(rules, "k", tk, tiles)
        with free_options(draw):
            causal = _flag(draw, feats, "causal")
            window = _window(draw, feats)
            key_lengths = _key_lengths(draw, feats, lim, batch, tk)
            score = _score_modifiers(draw, hq, feats)
        return {
            "dtype": dtype,
            "block_q": block_q,
            "block_k": block_k,
            "hq": hq,
            "hkv": hkv,
            "batch": batch,
            "d": d,
            "tq": tq,
            "tk": tk,
            "causal": causal,
            "window": window,
            "key_lengths": key_lengths,
            "score": score,
        }

    key = structure_key(
        "attention", scale, dtypes, block_pairs, head_dims, feats, rules, same_lengths
    )
    structure_st = reusing(structure(), key=key)

    @st.composite
    def build(draw: st.DrawFn) -> Case:
        s = draw(structure_st, label="structure")
        dtype, batch, hq, hkv, d, tq, tk = (
            s[k] for k in ("dtype", "batch", "hq", "hkv", "d", "tq", "tk")
        )
        block_q, block_k, causal, window = s["block_q"], s["block_k"], s["causal"], s["window"]
        key_lengths = s["key_lengths"]
        mods = _modifiers(draw, s["score"])
        recipes = _recipes(draw, batch * hq * tq * d, batch * hkv * tk * d)
        inputs = _materialize_qkv(recipes, (batch, hq, tq, d), (batch, hkv, tk, d), dtype, mods)
        if key_lengths is not None:
            inputs["key_lengths"] = key_lengths
        if mods.slopes is not None:
            inputs["alibi_slopes"] = mods.slopes
        params = {
            "dtype": dtype,
            "causal": causal,
            "window": window,
            **mods.params(),
            "block_q": block_q,
            "block_k": block_k,
        }
        return Case(inputs, params, _described(recipes, mods))

    return build()


def varlen_cases(
    scale: str = "small",
    *,
    dtypes: tuple[str, ...] = FLOAT_DTYPES,
    block_pairs: tuple[tuple[int, int], ...] | None = None,
    head_dims: tuple[int, ...] | None = None,
    features: frozenset[str] | None = None,
    lengths: dict[str, Any] | None = None,
    same_lengths: bool = False,
) -> st.SearchStrategy[Case]:
    """Packed variable-length cases: ``N`` sequences in a batch of one.

    Inputs ``q [1, Hq, total_q, D]``, ``k, v [1, Hkv, total_k + tail, D]`` (``tail`` guard rows
    after the last sequence that no query may see), ``cu_seqlens_q``, ``cu_seqlens_k`` (int32
    ``[N + 1]``), ``alibi_slopes`` when drawn. Params as :func:`attention_cases`.

    Per-sequence query and key lengths are drawn first (zero-length and length-1 sequences
    included), then accumulated into offsets. Shrinks toward one sequence of one query and one
    key, no guard rows, and the simplest modifiers and values. ``block_pairs``, ``head_dims``
    and ``features`` (from ``VARLEN_FEATURES``) as for :func:`attention_cases`; ``lengths``
    fits the query rows (``"q"``: the last sequence takes the extra queries) and the key rows
    (``"k"``: more guard rows), ``same_lengths`` gives each sequence as many keys as queries.
    """
    lim, fit = _limits(scale, block_pairs=block_pairs, head_dims=head_dims)
    dtypes = check_subset("dtypes", dtypes, FLOAT_DTYPES)
    feats = check_features(features, VARLEN_FEATURES)
    rules = check_lengths(lengths, ("q", "k"))

    @st.composite
    def structure(draw: st.DrawFn) -> dict[str, Any]:
        dtype = draw(float_dtypes(dtypes), label="dtype")
        block_q, block_k = draw(
            occasionally(lim.block_pairs, lim.rare_block_pairs),
            label="(block_q, block_k)",
        )
        hq, hkv = _heads(draw, lim, feats)
        d = draw(occasionally(lim.head_dims, lim.rare_head_dims), label="D")
        block_q, block_k = fit(block_q, d), fit(block_k, d)
        n_max = _max_batch(lim, hq, lim.max_seqs)
        max_q = (lim.max_tiles + 1) * block_q - 1
        max_k = (lim.max_tiles + 1) * block_k - 1

        with free_lengths(draw):
            pairs = draw(
                st.lists(
                    st.tuples(_seq_length(block_q, max_q), _seq_length(block_k, max_k)),
                    min_size=1,
                    max_size=n_max,
                ),
                label="sequence lengths",
            )

        # Keep the oracle's and the interpreters' work bounded: drop sequences from the end.
        def work(ps: list[tuple[int, int]]) -> int:
            return hq * sum(
                max(1, math.ceil(a / block_q)) * max(1, math.ceil(b / block_k)) for a, b in ps
            )

        if same_lengths:
            pairs = [(a, a) for a, _ in pairs]
        while len(pairs) > 1 and (
            sum(a * b for a, b in pairs) * hq > lim.max_scores or work(pairs) > lim.max_work
        ):
            pairs.pop()
        tiles = {"block_q": block_q, "block_k": block_k}
        total = sum(a for a, _ in pairs)
        extra = fitted(rules, "q", total, tiles) - total  # the last sequence takes them
        if extra:
            a, b = pairs[-1]
            pairs[-1] = (a + extra, b + extra if same_lengths else b)
        lq = np.array([p[0] for p in pairs], np.int64)
        lk = np.array([p[1] for p in pairs], np.int64)
        with free_lengths(draw):
            tail = draw(st.sampled_from((0, 1, 3, block_k)), label="guard rows")
        keys = int(lk.sum())
        tail = fitted(rules, "k", keys + tail, tiles) - keys
        with free_options(draw):
            causal, window = _flag(draw, feats, "causal"), _window(draw, feats)
            score = _score_modifiers(draw, hq, feats)
        return {
            "dtype": dtype,
            "block_q": block_q,
            "block_k": block_k,
            "hq": hq,
            "hkv": hkv,
            "d": d,
            "lq": lq,
            "lk": lk,
            "tail": tail,
            "causal": causal,
            "window": window,
            "score": score,
        }

    key = structure_key(
        "attention_varlen", scale, dtypes, block_pairs, head_dims, feats, rules, same_lengths
    )
    structure_st = reusing(structure(), key=key)

    @st.composite
    def build(draw: st.DrawFn) -> Case:
        s = draw(structure_st, label="structure")
        dtype, hq, hkv, d, tail = (s[k] for k in ("dtype", "hq", "hkv", "d", "tail"))
        block_q, block_k, causal, window = s["block_q"], s["block_k"], s["causal"], s["window"]
        cu_q = np.concatenate([[0], np.cumsum(s["lq"])]).astype(np.int32)
        cu_k = np.concatenate([[0], np.cumsum(s["lk"])]).astype(np.int32)
        total_q, total_k = int(cu_q[-1]), int(cu_k[-1]) + tail
        mods = _modifiers(draw, s["score"])
        recipes = _recipes(draw, hq * total_q * d, hkv * total_k * d)
        inputs = _materialize_qkv(recipes, (1, hq, total_q, d), (1, hkv, total_k, d), dtype, mods)
        inputs["cu_seqlens_q"] = cu_q
        inputs["cu_seqlens_k"] = cu_k
        if mods.slopes is not None:
            inputs["alibi_slopes"] = mods.slopes
        params = {
            "dtype": dtype,
            "causal": causal,
            "window": window,
            **mods.params(),
            "block_q": block_q,
            "block_k": block_k,
        }
        return Case(inputs, params, _described(recipes, mods, guard_rows=tail))

    return build()


def decode_splits(scale: str) -> tuple[int, ...]:
    """The split counts a decode case draws at ``scale`` (the simplest, one split, first): a
    compile-time choice where the kernel's grid or its merge is built per count (a Pallas
    kernel's ``n_splits``), so a variant dimension of the family (``fuzz.families``)."""
    return tuple(s for s in (1, 2, 4, 8, 16) if s <= LIMITS[scale].max_splits)


def decode_cases(
    scale: str = "small",
    *,
    dtypes: tuple[str, ...] = FLOAT_DTYPES,
    blocks_k: tuple[int, ...] | None = None,
    num_splits: tuple[int, ...] | None = None,
    head_dims: tuple[int, ...] | None = None,
    features: frozenset[str] | None = None,
    lengths: dict[str, Any] | None = None,
) -> st.SearchStrategy[Case]:
    """Decode steps: one query per sequence against a cache with per-batch ``cache_len``.

    Inputs ``q [B, Hq, 1, D]``, ``k, v [B, Hkv, Tmax, D]`` (the cache), ``cache_len [B]`` (int32,
    0 and 1 and full among the draws), ``alibi_slopes`` when drawn. Params: ``dtype``, ``scale``,
    ``window`` (only its left side can matter: the query is the newest position), ``softcap``,
    ``alibi``, ``block_k``, ``num_splits`` (the key range of each sequence is split into that many
    parts, each reduced on its own and combined through their log-sum-exps; more splits than key
    tiles leave splits without keys).

    Occasionally (about one example in 16) the cache holds up to ``Limits.long_cache`` keys.
    Shrinks toward one batch element, one head, a cache of one key, one split, and the simplest
    modifiers and values. ``blocks_k``, ``num_splits`` and ``head_dims`` replace the scale's;
    ``features`` (from ``DECODE_FEATURES``; ``splits``: more than one split) as for
    :func:`attention_cases`; ``lengths`` fits the cache's length (``"k"``).
    """
    lim, fit = _limits(scale, blocks_k=blocks_k, head_dims=head_dims)
    dtypes = check_subset("dtypes", dtypes, FLOAT_DTYPES)
    feats = check_features(features, DECODE_FEATURES)
    rules = check_lengths(lengths, ("k",))
    default_splits = decode_splits(scale)
    splits_st = (
        occasionally(default_splits, lim.rare_splits, one_in=8)
        if num_splits is None
        else st.sampled_from(check_sizes("num_splits", num_splits, default_splits))
    )
    if "splits" not in feats:
        splits_st = st.just(1)

    @st.composite
    def structure(draw: st.DrawFn) -> dict[str, Any]:
        dtype = draw(float_dtypes(dtypes), label="dtype")
        block_k = draw(occasionally(lim.blocks_k, lim.rare_blocks_k, one_in=8), label="block_k")
        splits = draw(splits_st, label="num_splits")
        hq, hkv = _heads(draw, lim, feats)
        max_batch = _max_batch(lim, hq, lim.max_batch)
        length_kinds = _length_kinds(draw, lim, max_batch, "cache lengths")
        batch = len(length_kinds)
        d = draw(occasionally(lim.head_dims, lim.rare_head_dims), label="D")
        block_k = fit(block_k, d)
        room = max(1, lim.max_scores // (batch * hq))
        max_t = (lim.max_tiles + 1) * block_k - 1
        with free_lengths(draw):
            long_cache = lim.long_cache and draw(
                occasionally((False,), (True,), one_in=16), label="long cache"
            )
            if long_cache:
                # Thousands of keys: long reductions, many tiles per split (within the score
                # bound).
                top = max(1, min(lim.long_cache, room))
                tmax = draw(shapes.few(min(LONG_CACHE_MIN, top), top), label="Tmax")
            else:
                tmax = draw(key_sizes(block_k, max_size=max(1, min(max_t, room))), label="Tmax")
            tmax = fitted(rules, "k", tmax, {"block_k": block_k, "num_splits": splits})
            cache_len = _resolve_lengths(draw, length_kinds, tmax)
        with free_options(draw):
            window, score = _window(draw, feats), _score_modifiers(draw, hq, feats)
        return {
            "dtype": dtype,
            "block_k": block_k,
            "splits": splits,
            "hq": hq,
            "hkv": hkv,
            "batch": batch,
            "d": d,
            "tmax": tmax,
            "cache_len": cache_len,
            "window": window,
            "score": score,
        }

    key = structure_key(
        "attention_decode", scale, dtypes, blocks_k, num_splits, head_dims, feats, rules
    )
    structure_st = reusing(structure(), key=key)

    @st.composite
    def build(draw: st.DrawFn) -> Case:
        s = draw(structure_st, label="structure")
        dtype, batch, hq, hkv, d, tmax = (
            s[k] for k in ("dtype", "batch", "hq", "hkv", "d", "tmax")
        )
        block_k, splits, window, cache_len = s["block_k"], s["splits"], s["window"], s["cache_len"]
        mods = _modifiers(draw, s["score"])
        recipes = _recipes(draw, batch * hq * d, batch * hkv * tmax * d)
        inputs = _materialize_qkv(recipes, (batch, hq, 1, d), (batch, hkv, tmax, d), dtype, mods)
        inputs["cache_len"] = cache_len
        if mods.slopes is not None:
            inputs["alibi_slopes"] = mods.slopes
        params = {
            "dtype": dtype,
            "window": window,
            **mods.params(),
            "block_k": block_k,
            "num_splits": splits,
        }
        return Case(inputs, params, _described(recipes, mods))

    return build()
