"""Array values from a small recipe instead of element by element.

Drawing every element through Hypothesis makes large arrays slow to generate and slow to shrink.
A :class:`ValueRecipe` (seed, distribution, magnitude, offset, injected specials) is a handful of
choices that shrink well: toward seed 0, the normal distribution, magnitude 1, offset 0 and no
specials. Arrays of at most ``EXPLICIT_MAX`` elements may instead be drawn element by element
from values that matter (0, +-1, the exp-overflow boundary, a large negative logit, -inf...), so a
minimal reproducer can show the one value that breaks a kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from fuzz.arrays import FLOAT_DTYPES, finfo, np_dtype
from strategies._cache import cached_factory
from strategies._validate import check_int, check_subset

DISTRIBUTIONS = ("normal", "uniform", "constant", "ramp", "explicit")
SPECIALS = ("none", "-inf", "subnormal", "zero")
EXPLICIT_MAX = 4

# Magnitudes and offsets that put logits where softmax pipelines break: exp overflow in fp32 at
# 88.72 (fp16: 11.09), sentinels at -1e4/-1e9, fp16's 65504 range.
MAGNITUDES = (1.0, 0.01, 4.0, 30.0, 1e4)
OFFSETS = (0.0, 88.0, -88.0, 90.0, 12.0, -1e4, 1e4)
EXPLICIT_VALUES = (0.0, 1.0, -1.0, 2.0, 89.0, -89.0, 12.0, 1e4, -1e4, -3e4, float("-inf"))
# Deeper logits, drawn occasionally by the families that pass them on as ``rare_offsets`` and
# ``rare_explicit_values`` (the defaults stay as they are): below the finite sentinels kernels mask
# with (-5e4, -6e4 and -1e9 all appear in bug reports; a masked key outranks genuine logits below
# its sentinel), and around -1e5, still well inside the fp32 range a user kernel meets.
SENTINEL_VALUES = (-5e4, -6e4, -1e5, -1e9)


@dataclass(frozen=True)
class ValueRecipe:
    """How to fill one float array.

    Attributes:
        seed: NumPy generator seed.
        distribution: ``normal``/``uniform`` (+-1)/``constant`` (every element equal)/``ramp``
            (evenly spaced in [-1, 1] along the last axis)/``explicit`` (``values`` as given).
        magnitude: multiplies the distribution.
        offset: added after scaling.
        specials: ``-inf``/``subnormal``/``zero`` injected at a random ``density`` of positions.
        density: fraction of positions that get the special value.
        values: the elements, for ``explicit``.
    """

    seed: int = 0
    distribution: str = "normal"
    magnitude: float = 1.0
    offset: float = 0.0
    specials: str = "none"
    density: float = 0.0
    values: tuple[float, ...] = ()

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        if self.distribution != "explicit":
            d.pop("values")
        if self.specials == "none":
            d.pop("density")
        return d


def _standard_normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """float32 standard normals by the Box-Muller transform: about 3x faster per element than
    NumPy's ziggurat (float64 or float32) on the host, which draws every example's arrays (at a
    GPU's shapes, most of the time Hypothesis spends generating). Tails end at ``sqrt(2 * 24 *
    ln 2) ~ 5.77`` (float32 uniforms): enough for fuzzing values."""
    n = int(np.prod(shape)) if shape else 1
    half = (n + 1) // 2
    u = rng.random((2, half), dtype=np.float32)
    radius = np.sqrt(-2.0 * np.log1p(-u[0]))  # 1 - u in (0, 1]: finite
    angle = np.float32(2 * np.pi) * u[1]
    out = np.empty(2 * half, np.float32)
    np.multiply(radius, np.cos(angle), out=out[:half])
    np.multiply(radius, np.sin(angle), out=out[half:])
    return out[:n].reshape(shape)


def _uniform(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """float32 uniforms in ``[-1, 1)``."""
    return 2.0 * rng.random(shape, dtype=np.float32) - 1.0


def materialize(recipe: ValueRecipe, shape: Sequence[int], dtype: str) -> np.ndarray:
    """The array a recipe describes, rounded to ``dtype`` (finite values clipped to its range).
    Computed in float32 (every kernel dtype is at most that wide)."""
    shape = tuple(int(s) for s in shape)
    n = int(np.prod(shape)) if shape else 1
    rng = np.random.default_rng(recipe.seed)
    if recipe.distribution == "explicit":
        vals = np.resize(np.asarray(recipe.values or (0.0,), np.float32), n)
        a = vals.reshape(shape)
    else:
        if recipe.distribution == "normal":
            base = _standard_normal(rng, shape)
        elif recipe.distribution == "uniform":
            base = _uniform(rng, shape)
        elif recipe.distribution == "constant":
            base = np.full(shape, rng.standard_normal(), np.float32)
        elif recipe.distribution == "ramp":
            last = shape[-1] if shape else 1
            base = np.broadcast_to(np.linspace(-1.0, 1.0, last, dtype=np.float32), shape).copy()
        else:
            raise ValueError(f"distribution={recipe.distribution!r} must be one of {DISTRIBUTIONS}")
        a = base
        if recipe.magnitude != 1.0:
            a = np.float32(recipe.magnitude) * a
        if recipe.offset != 0.0:
            a = np.float32(recipe.offset) + a
    if recipe.specials != "none" and n:
        hit = rng.random(shape, dtype=np.float32) < recipe.density
        if not hit.any():
            hit.flat[rng.integers(n)] = True
        fi = finfo(dtype)
        if recipe.specials == "-inf":
            a = np.where(hit, np.float32(-np.inf), a)
        elif recipe.specials == "subnormal":
            a = np.where(hit, _uniform(rng, shape) * np.float32(fi.tiny), a)
        elif recipe.specials == "zero":
            a = np.where(hit, np.float32(0.0), a)
        else:
            raise ValueError(f"specials={recipe.specials!r} must be one of {SPECIALS}")
    big = finfo(dtype).max
    a = np.asarray(a)
    if a.size and not (-big <= a.min() and a.max() <= big):  # else nothing to clip
        a = np.where(np.isfinite(a), np.clip(a, -big, big), a)
    return a.astype(np_dtype(dtype), copy=False)


def value_recipes(
    *,
    numel: int,
    distributions: Sequence[str] = DISTRIBUTIONS,
    magnitudes: Sequence[float] = MAGNITUDES,
    offsets: Sequence[float] = OFFSETS,
    specials: Sequence[str] = SPECIALS,
    explicit_values: Sequence[float] = EXPLICIT_VALUES,
    rare_offsets: Sequence[float] = (),
    rare_explicit_values: Sequence[float] = (),
) -> st.SearchStrategy[ValueRecipe]:
    """Recipes for an array of ``numel`` elements.

    ``explicit`` is only drawn when ``numel <= EXPLICIT_MAX``. ``rare_offsets`` and
    ``rare_explicit_values`` replace an offset or an explicit value about one draw in 8
    (:func:`occasionally`; none by default, which draws exactly as before). Shrinks toward seed
    0, the first distribution (normal), the first magnitude and offset (1 and 0) and no specials.
    """
    check_int("numel", numel, lo=0)
    # Every numel above EXPLICIT_MAX gets the same strategy (built once).
    return _value_recipes(
        min(numel, EXPLICIT_MAX + 1),
        tuple(distributions),
        tuple(magnitudes),
        tuple(offsets),
        tuple(specials),
        tuple(explicit_values),
        tuple(rare_offsets),
        tuple(rare_explicit_values),
    )


@cached_factory
def _value_recipes(
    numel: int,
    distributions: tuple[str, ...],
    magnitudes: tuple[float, ...],
    offsets: tuple[float, ...],
    specials: tuple[str, ...],
    explicit_values: tuple[float, ...],
    rare_offsets: tuple[float, ...] = (),
    rare_explicit_values: tuple[float, ...] = (),
) -> st.SearchStrategy[ValueRecipe]:
    distributions = check_subset("distributions", distributions, DISTRIBUTIONS)
    specials = check_subset("specials", specials, SPECIALS)
    if not magnitudes:
        raise InvalidArgument("magnitudes must not be empty")
    if not offsets:
        raise InvalidArgument("offsets must not be empty")
    if numel > EXPLICIT_MAX:
        distributions = tuple(d for d in distributions if d != "explicit") or ("normal",)
    dist_st, magnitude_st = st.sampled_from(distributions), st.sampled_from(magnitudes)
    offset_st, special_st = occasionally(offsets, rare_offsets), st.sampled_from(specials)
    density_st, seed_st = st.sampled_from((0.1, 0.5, 1.0)), st.integers(0, 2**32 - 1)
    element_st = occasionally(explicit_values, rare_explicit_values)
    explicit_st = st.lists(element_st, min_size=numel, max_size=numel)

    @st.composite
    def build(draw: st.DrawFn) -> ValueRecipe:
        dist = draw(dist_st, label="distribution")
        if dist == "explicit":
            values = draw(explicit_st, label="values")
            return ValueRecipe(distribution="explicit", values=tuple(values))
        magnitude = draw(magnitude_st, label="magnitude")
        offset = draw(offset_st, label="offset")
        special = draw(special_st, label="specials")
        density = 0.0 if special == "none" else draw(density_st, label="density")
        seed = draw(seed_st, label="seed")
        return ValueRecipe(seed, dist, magnitude, offset, special, density)

    return build()


@cached_factory
def float_dtypes(allowed: Sequence[str] = FLOAT_DTYPES) -> st.SearchStrategy[str]:
    """One of ``allowed`` (names); shrinks toward the first (float32)."""
    return st.sampled_from(check_subset("allowed", allowed, FLOAT_DTYPES))


_RARE = object()  # the marker that stands for "one of the rare choices"


@cached_factory
def occasionally(
    common: Sequence[Any], rare: Sequence[Any], *, one_in: int | None = None
) -> st.SearchStrategy[Any]:
    """One of ``common``, or now and then one of ``rare``.

    For choices a profile must be able to reach but should not spend many examples on (a large
    tile on a CPU interpreter, a logit below the finite sentinels). Drawn as one choice among
    ``common`` and a marker after them (the marker taken about one draw in ``len(common) + 1``,
    or one in ``one_in`` where given, by repeating the common choices), then, for the marker, the
    rare value: the common choices keep their draw and their order, and shrinking goes to
    ``common[0]``. Without ``rare``, exactly ``st.sampled_from(common)``.
    """
    if not common:
        raise InvalidArgument("common must not be empty")
    common = tuple(common)
    if not rare:
        return st.sampled_from(common)
    slots = len(common) + 1 if one_in is None else one_in
    check_int("one_in", slots, lo=len(common) + 1)
    choices = (*(common[i % len(common)] for i in range(slots - 1)), _RARE)
    pick_st, rare_st = st.sampled_from(choices), st.sampled_from(tuple(rare))

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        value = draw(pick_st)
        return draw(rare_st, label="rare value") if value is _RARE else value

    return build()
