"""Cases for chunked simple GLA: shapes, chunking, varlen boundaries, decays aimed at the
exp-overflow thresholds, then values.

A case holds ``q, k [B, T, H, K]``, ``v [B, T, H, V]``, one decay (``g_gamma [H]`` or per-token
``g [B, T, H]``, float32 log decays <= 0), optionally ``h0 [N, H, K, V]`` and ``cu_seqlens``
(int32 ``[N + 1]``), and for gradient cases ``do [B, T, H, V]`` and optionally ``dht``. Params:
``dtype``, ``chunk_size``, ``scale`` (None: ``K ** -0.5``), ``output_final_state``.

The decays are where chunked GLA breaks. A kernel that forms ``exp(b_i - b_j)`` over a chunk (or a
tile) of ``C`` tokens before masking meets ``exp(|gamma| (C - 1))`` in the masked triangle, which
overflows ``dtype`` once ``|gamma| > log(finfo(dtype).max) / (C - 1)`` (fp32/bf16: 88.72 / (C - 1),
fp16: 11.09 / (C - 1)). The ``threshold`` decays sit just below or just above that value for a
chosen dtype and chunk size; the ALiBi slopes of real models come first.

Decay kinds, simplest first::

    g_gamma:  alibi      -standard ALiBi slopes for H heads (strategies.alibi)
              threshold  |gamma| = log(max(dtype)) / (C - 1) * (1 -/+ margin), per head below/above
              slopes     -(scaled, constant or adversarial ALiBi slopes)
    g:        logsigmoid log(sigmoid(s * N(0, 1))) (fla's default gates), s from mild to extreme
              threshold  the per-token form of the threshold decay (every token the same)
              mixed      logsigmoid gates with exact zeros or large negative values injected
              weak       -|N(0, 1)| * 2^-w, 0 where |N| < 0.5: slow forgetting, long chunks with
                         little decay

Token magnitudes (after the values): flat; a query burst (q and do of some tokens times 2^e: their
dg terms dwarf the later tokens', where a cancelling suffix sum shows); a key burst (k and v of
some tokens times 2^e, every q and do times 2^-e: the state grows past fp16's range while the
outputs stay moderate).

Shrinks toward one sequence of one token, one head, float32, chunk 16, the g_gamma form with the
standard ALiBi slopes, K = V = 16, no initial state, no final state, default scale, and the
plainest values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from fuzz.arrays import FLOAT_DTYPES, finfo, np_dtype
from fuzz.case import Case
from strategies._cache import cached_factory
from strategies._validate import (
    check_features,
    check_lengths,
    check_scale,
    check_sizes,
    check_subset,
    fitted,
)
from strategies.alibi import SlopeRecipe, slope_recipes, standard_slopes
from strategies.reuse import free_lengths, reusing, structure_key
from strategies.shapes import few
from strategies.values import ValueRecipe, materialize, value_recipes

FORMS = ("g_gamma", "g")
# Optional features a kernel may support (``fuzz.plugin.Capabilities.features``): the two decay
# forms, packed sequences, an initial state, the final state (forward), its cotangent ``dht``
# (backward), an explicit scale (else always None: K ** -0.5), packed batches ending in tokens of
# no sequence (past ``cu_seqlens[-1]``; their outputs must be zero).
FEATURES = (
    "g_gamma",
    "g",
    "varlen",
    "initial_state",
    "final_state",
    "dht",
    "scale",
    "padding_tokens",
)
GAMMA_KINDS = ("alibi", "threshold", "slopes")
GATE_KINDS = ("logsigmoid", "threshold", "mixed", "weak")
SIDES = ("below", "above")
MARGINS = (2.0**-10, 2.0**-6, 2.0**-3, 1.0)
# A margin of 1 (twice the threshold) also overflows the padded rows of a half-empty last chunk.
MARGIN_WEIGHTS = (2, 1, 1, 3)
GATE_SCALES = (1.0, 4.0, 0.25, 16.0)
GATE_SPECIALS = (0.0, -30.0, -100.0, -1e3, -1e4)
GATE_DENSITIES = (0.1, 0.5, 1.0)
WEAK_SCALES = (2.0**-8, 2.0**-4, 2.0**-12)
TOKEN_KINDS = ("flat", "query_burst", "key_burst")
TOKEN_EXPONENTS = (12, 8)
TOKEN_PERIODS = (0, 4, 2)  # 0: the first token only
SCALES = (None, 1.0, 0.5)
VALUE_MAGNITUDES = (1.0, 0.1, 3.0)
VALUE_OFFSETS = (0.0,)  # centred values: offsets only add shrinking work here
VALUE_SPECIALS = ("none", "zero", "subnormal")
VALUE_DISTRIBUTIONS = ("normal", "uniform", "constant", "ramp")
# fp16 outputs must stay representable: inputs are scaled down by powers of two (exactly) until a
# crude bound of every output (and gradient) is at most this.
FP16_OUTPUT_LIMIT = 2.0**12
KERNEL_TILE = 64  # kernels.simple_gla._common.TILE: longer chunks are processed as such tiles


@dataclass(frozen=True)
class Limits:
    heads: tuple[int, ...]
    max_batch: int
    max_seqs: int  # varlen sequences
    chunks: tuple[int, ...]
    max_tiles: int  # full chunks per sequence (plus a partial one)
    dims: tuple[int, ...]
    max_elements: int  # B * T * H * max(K, V)
    chunk_weights: tuple[int, ...] = ()  # draw weights of ``chunks`` (default: equal)
    long_chunk: int = 1 << 30  # chunks of at least this many tokens get the two limits below
    long_tiles: int = 0
    long_elements: int = 0
    long_max_len: int = 1 << 30

    def tiles(self, chunk: int) -> int:
        return self.long_tiles if chunk >= self.long_chunk else self.max_tiles

    def elements(self, chunk: int) -> int:
        return self.long_elements if chunk >= self.long_chunk else self.max_elements

    def max_len(self, chunk: int, per_token: int) -> int:
        """The longest sequence for ``chunk`` with ``per_token`` elements per token."""
        longest = self.tiles(chunk) * chunk + chunk - 1
        if chunk >= self.long_chunk:
            longest = min(longest, self.long_max_len)
        return max(1, min(longest, self.elements(chunk) // per_token))


# small keeps the CPU interpreters quick (every head dim below pads to 16); large is for the GPU.
# The small scale draws every chunk size, the long ones (64 and up, the multi-tile paths of the
# kernels: chunks of more than 64 tokens are 64-token tiles) with at most one full chunk and a
# tail, 128 tokens and 2048 elements: enough for a 128- or 256-token chunk to hold more than one
# tile (65 tokens and up), little enough for the token recurrence (a reformulation target) and
# the backward on the interpreter within CI's time.
LIMITS = {
    "small": Limits(
        heads=(1, 2),
        max_batch=2,
        max_seqs=3,
        chunks=(16, 32, 64, 128, 256),
        max_tiles=2,
        dims=(16, 8, 5),
        max_elements=1024,
        chunk_weights=(4, 3, 1, 3, 1),
        long_chunk=64,
        long_tiles=1,
        long_elements=2048,
        long_max_len=128,
    ),
    "large": Limits(
        heads=(1, 2, 16, 4, 20, 32, 64),
        max_batch=4,
        max_seqs=6,
        chunks=(16, 32, 64, 128, 256),
        max_tiles=4,
        dims=(16, 64, 32, 128, 48, 100, 1),
        max_elements=1 << 22,
    ),
}


def overflow_threshold(dtype: str, chunk: int) -> float:
    """The ``|gamma|`` above which ``exp(|gamma| (chunk - 1))`` overflows ``dtype``."""
    return finfo(dtype).log_max / (chunk - 1)


@dataclass(frozen=True)
class DecayRecipe:
    """How a case's decays were made (for reports and for rebuilding them).

    Attributes:
        form: ``g_gamma`` or ``g``.
        kind: one of ``GAMMA_KINDS`` / ``GATE_KINDS``.
        dtype: for ``threshold``, whose overflow threshold.
        chunk: for ``threshold``, the chunk size whose threshold.
        sides: for ``threshold``, per head (cycled): ``below``/``above``.
        margin: for ``threshold``, the relative distance from the threshold.
        slopes: for ``slopes``, the ALiBi slope recipe.
        gate_scale: for ``logsigmoid``/``mixed``, ``s`` in ``log(sigmoid(s * N(0, 1)))``; for
            ``weak``, the gates' scale ``2^-w``.
        special, density: for ``mixed``, the injected value and how often.
        seed: for per-token gates.
    """

    form: str = "g_gamma"
    kind: str = "alibi"
    dtype: str = "float32"
    chunk: int = 16
    sides: tuple[str, ...] = ("above",)
    margin: float = MARGINS[0]
    slopes: SlopeRecipe | None = None
    gate_scale: float = 1.0
    special: float = 0.0
    density: float = 0.0
    seed: int = 0

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"form": self.form, "kind": self.kind}
        if self.kind == "threshold":
            d.update(
                dtype=self.dtype,
                chunk=self.chunk,
                sides=list(self.sides),
                margin=self.margin,
                threshold=overflow_threshold(self.dtype, self.chunk),
            )
        elif self.kind == "slopes":
            assert self.slopes is not None
            d["slopes"] = self.slopes.describe()
        elif self.form == "g":
            d.update(gate_scale=self.gate_scale, seed=self.seed)
            if self.kind == "mixed":
                d.update(special=self.special, density=self.density)
        return d

    def gamma_magnitudes(self, heads: int) -> np.ndarray:
        """``|gamma|`` per head (float64) for the ``threshold`` kinds."""
        t = overflow_threshold(self.dtype, self.chunk)
        sign = np.array([1.0 if s == "above" else -1.0 for s in self.sides])
        return t * (1.0 + np.resize(sign, heads) * self.margin)

    def g_gamma(self, heads: int) -> np.ndarray:
        """float32 ``[H]`` log decays (<= 0)."""
        if self.kind == "alibi":
            mag = standard_slopes(heads)
        elif self.kind == "threshold":
            mag = self.gamma_magnitudes(heads)
        else:
            assert self.slopes is not None
            mag = self.slopes.slopes(heads)
        return (-np.abs(mag)).astype(np.float32)

    def gates(self, shape: tuple[int, int, int]) -> np.ndarray:
        """float32 ``[B, T, H]`` per-token log decays (<= 0)."""
        if self.kind == "threshold":
            mag = self.gamma_magnitudes(shape[2])
            return np.broadcast_to(-mag.astype(np.float32), shape).copy()
        rng = np.random.default_rng(self.seed)
        if self.kind == "weak":  # slow forgetting, and tokens that do not forget at all
            x = np.abs(rng.standard_normal(shape))
            return np.where(x < 0.5, 0.0, -x * self.gate_scale).astype(np.float32)
        x = rng.standard_normal(shape) * self.gate_scale
        g = -np.logaddexp(0.0, -x)  # log(sigmoid(x)), stable on both sides
        if self.kind == "mixed":
            hit = rng.random(shape) < self.density
            if not hit.any() and hit.size:
                hit.flat[rng.integers(hit.size)] = True
            g = np.where(hit, self.special, g)
        return np.minimum(g, 0.0).astype(np.float32)


@dataclass(frozen=True)
class TokenRecipe:
    """Per-token magnitudes (exact powers of two) applied on top of the value recipe.

    Attributes:
        kind: ``flat``, ``query_burst`` (q and do of the hit tokens times ``2^exponent``) or
            ``key_burst`` (k and v of the hit tokens times ``2^exponent``, every q and do times
            ``2^-exponent``).
        exponent: the power of two.
        period: the tokens hit are those at multiples of it (0: the first token only). Regular, so
            that a shorter case keeps its pattern (the shrinker can cut tokens).
    """

    kind: str = "flat"
    exponent: int = 0
    period: int = 0

    def describe(self) -> dict[str, Any]:
        if self.kind == "flat":
            return {"kind": "flat"}
        return {"kind": self.kind, "exponent": self.exponent, "period": self.period}

    def hits(self, starts: list[tuple[int, int]], length: int) -> np.ndarray:
        """``[T]`` bool: the tokens hit, counted from each sequence's start (``starts``: each
        sequence's ``(start, end)``). The first token of each always: with an initial state
        (whose terms with the burst make every partial sum of the chunk's dg large) and one
        ordinary token after it, the smallest case where a cancelling suffix sum shows: T = 2."""
        hit = np.zeros(length, bool)
        for bos, eos in starts:
            hit[bos : eos : self.period or max(eos - bos, 1)] = True
        return hit

    def apply(
        self, arrays: dict[str, np.ndarray], starts: list[tuple[int, int]], length: int
    ) -> dict[str, np.ndarray]:
        """``arrays`` (``[B, T, H, D]`` token arrays by name) with the magnitudes applied."""
        if self.kind == "flat" or not length:
            return arrays
        up = np.where(self.hits(starts, length), np.float32(2.0**self.exponent), np.float32(1.0))
        up = up[None, :, None, None]
        scaled, rest = (
            (("q", "do"), None) if self.kind == "query_burst" else (("k", "v"), ("q", "do"))
        )
        out = dict(arrays)
        for name, a in arrays.items():
            if name in scaled:
                out[name] = (a.astype(np.float32) * up).astype(a.dtype)
            elif rest is not None and name in rest:
                out[name] = (a.astype(np.float32) * np.float32(2.0**-self.exponent)).astype(a.dtype)
        return out


@cached_factory
def token_recipes() -> st.SearchStrategy[TokenRecipe]:
    """Token magnitude recipes; shrinks toward flat."""

    @st.composite
    def build(draw: st.DrawFn) -> TokenRecipe:
        kind = draw(
            weighted((("flat", 1), ("query_burst", 3), ("key_burst", 1))), label="token magnitudes"
        )
        if kind == "flat":
            return TokenRecipe()
        exponent = draw(st.sampled_from(TOKEN_EXPONENTS), label="token exponent")
        period = draw(st.sampled_from(TOKEN_PERIODS), label="token period")
        return TokenRecipe(kind, exponent, period)

    return build()


def weighted(choices: tuple[tuple[Any, int], ...]) -> st.SearchStrategy[Any]:
    """One of ``choices`` (value, weight), drawn with the given weights; shrinks toward the first.

    The overflow corners are a small part of the input space; the weights put a good share of a
    short CI run's examples there while shrinking still prefers the plainest value.
    """
    values = [v for v, w in choices for _ in range(w)]
    return st.integers(0, len(values) - 1).map(values.__getitem__)


@cached_factory
def decay_recipes(form: str, heads: int, chunks: tuple[int, ...], chunk: int):
    """Decay recipes for ``form``; thresholds of the case's chunk size (and of its 64-token tiles
    when longer) first, then the others.

    Weighted toward the overflow thresholds (above them first: the side where unguarded kernels
    break). Shrinks toward the standard ALiBi slopes (``g_gamma``) or mild log-sigmoid gates (``g``).
    """
    kinds = (
        (("alibi", 2), ("threshold", 6), ("slopes", 2))
        if form == "g_gamma"
        else (("logsigmoid", 2), ("threshold", 2), ("mixed", 2), ("weak", 2))
    )
    # a chunk longer than a kernel tile is processed as 64-token tiles: the tile's thresholds are
    # the ones its masked triangle and padded rows meet (the chunk's: seed 004's whole-chunk matrix)
    own = ((KERNEL_TILE, 4), (chunk, 2)) if chunk > KERNEL_TILE else ((chunk, 6),)
    threshold_chunks = (*own, *((c, 1) for c in chunks if c not in (chunk, KERNEL_TILE)))

    @st.composite
    def build(draw: st.DrawFn) -> DecayRecipe:
        kind = draw(weighted(kinds), label="decay kind")
        if kind == "alibi":
            return DecayRecipe("g_gamma", "alibi")
        if kind == "threshold":
            dtype = draw(
                weighted((("float32", 3), ("bfloat16", 1), ("float16", 1))), label="threshold dtype"
            )
            c = draw(weighted(threshold_chunks), label="threshold chunk")
            sides = draw(
                st.lists(weighted((("above", 3), ("below", 1))), min_size=1, max_size=heads),
                label="sides",
            )
            margins = tuple(zip(MARGINS, MARGIN_WEIGHTS, strict=True))
            margin = draw(weighted(margins), label="margin")
            return DecayRecipe(form, "threshold", dtype, c, tuple(sides), margin)
        if kind == "slopes":
            rec = draw(
                slope_recipes(heads, kinds=("scaled", "constant", "adversarial")), label="slopes"
            )
            return DecayRecipe("g_gamma", "slopes", slopes=rec)
        scales = WEAK_SCALES if kind == "weak" else GATE_SCALES
        gate_scale = draw(st.sampled_from(scales), label="gate scale")
        special, density = 0.0, 0.0
        if kind == "mixed":
            special = draw(st.sampled_from(GATE_SPECIALS), label="gate special")
            density = draw(st.sampled_from(GATE_DENSITIES), label="gate density")
        seed = draw(st.integers(0, 2**32 - 1), label="gate seed")
        return DecayRecipe(
            "g", kind, gate_scale=gate_scale, special=special, density=density, seed=seed
        )

    return build()


@cached_factory
def chunked_lengths(chunk: int, *, max_size: int, min_size: int = 1) -> st.SearchStrategy[int]:
    """A length ``n_chunks * chunk + tail``: the chunk count, then the tail aimed at 1, ``chunk - 1``
    and 0 (a last chunk of one token leaves ``chunk - 1`` padded rows: the most exposed case), and
    in a chunk longer than one kernel tile (64 tokens) at one token past the first tile (the
    smallest chunk that takes the multi-tile path).

    Like ``strategies.shapes.tiled_sizes`` but with the tail's corners weighted up. Shrinks toward
    ``min_size`` (whole chunks removed first, then the tail toward 0).
    """
    tails: tuple[tuple[str, int], ...] = (("any", 2), ("one", 3), ("last", 1), ("zero", 1))
    if chunk > KERNEL_TILE:
        tails += (("tile", 2),)

    @st.composite
    def build(draw: st.DrawFn) -> int:
        tiles = draw(few(0, max(0, max_size // chunk)), label="chunks")
        kind = draw(weighted(tails), label="tail")
        if kind == "any":
            tail = draw(st.integers(0, chunk - 1), label="tail length")
        else:
            tail = {"one": 1, "last": chunk - 1, "zero": 0, "tile": KERNEL_TILE + 1}[kind]
        return min(max(tiles * chunk + tail, min_size), max_size)

    return build()


def output_bound(arrays: dict[str, np.ndarray], scale: float, length: int, dims: int) -> float:
    """A crude bound of every output and gradient: ``scale (T + 1) max(K, V)`` times the product
    of the three largest of max|q|, max|k|, max|v|, max|do| (each term of an output or a gradient
    multiplies three of them), plus the terms through the states ``h0`` and ``dht`` (a product
    of two)."""
    m = {n: float(np.abs(a.astype(np.float64)).max(initial=0.0)) for n, a in arrays.items()}
    top = sorted((m.get(n, 0.0) for n in ("q", "k", "v", "do")), reverse=True)
    states = max(m.get("h0", 0.0), m.get("dht", 0.0))
    return scale * (length + 1) * dims * (top[0] * top[1] * top[2] + 2 * top[0] * states)


def simple_gla_cases(
    scale: str = "small",
    *,
    grads: bool = False,
    dtypes: tuple[str, ...] = FLOAT_DTYPES,
    forms: tuple[str, ...] = FORMS,
    chunk_sizes: tuple[int, ...] | None = None,
    varlen: bool | None = None,
    head_dims: tuple[int, ...] | None = None,
    features: frozenset[str] | None = None,
    lengths: dict[str, Any] | None = None,
) -> st.SearchStrategy[Case]:
    """Simple GLA cases (forward inputs; with ``grads`` also ``do`` and maybe ``dht``).

    Args:
        scale: ``'small'`` (CPU interpreters) or ``'large'`` (compiled backends) bounds.
        grads: draw the backward's extra inputs ``do`` (always) and ``dht`` (sometimes).
        dtypes, forms: allowed input dtypes and decay forms.
        chunk_sizes: allowed chunk sizes (default: the scale's).
        varlen: True/False to force or forbid ``cu_seqlens``; None for both.
        head_dims: allowed K and V (default: the scale's).
        features: the optional features a kernel supports (from ``FEATURES``; None: all):
            the cases its capabilities admit, and only those.
        lengths: ``{"T": fit}``, ``fit(n, tiles) -> int``: the token axis mapped to a length a
            kernel takes (the smallest at or above the drawn one); a packed batch gets the extra
            tokens as padding tokens where the kernel takes them, else in its last sequence.

    Structure is drawn before values: dtype, chunk size, heads, K, V, decay form, varlen or not,
    the lengths (chunk count then tail per sequence, so tails shrink to 0 and empty sequences
    appear; packed batches may end with padding tokens of no sequence), initial/final state,
    ``dht``, scale, the decays, then the value recipe and the token magnitudes. Shrinks
    toward one sequence of one token, one head, float32, chunk 16, g_gamma with the standard ALiBi
    slopes, K = V = 16, no states, default scale and plain normal values.
    """
    lim = LIMITS[check_scale(scale)]
    dtypes = check_subset("dtypes", dtypes, FLOAT_DTYPES)
    forms = check_subset("forms", forms, FORMS)
    chunks = (
        lim.chunks
        if chunk_sizes is None
        else check_subset("chunk_sizes", chunk_sizes, LIMITS["large"].chunks)
    )
    varlen_choices = (False, True) if varlen is None else (bool(varlen),)
    weights = dict(zip(lim.chunks, lim.chunk_weights or (1,) * len(lim.chunks), strict=True))
    chunk_st = weighted(tuple((c, weights.get(c, 1)) for c in chunks))
    feats = check_features(features, FEATURES)
    forms = tuple(f for f in forms if f in feats)
    if not forms:
        raise InvalidArgument(f"features={sorted(feats)} name no decay form; one of {FORMS}")
    if "varlen" not in feats:
        varlen_choices = (False,)
    dims = check_sizes("head_dims", head_dims, lim.dims)
    scales = SCALES if "scale" in feats else (None,)
    rules = check_lengths(lengths, ("T",))

    @st.composite
    def structure(draw: st.DrawFn) -> dict[str, Any]:
        dtype = draw(st.sampled_from(dtypes), label="dtype")
        chunk = draw(chunk_st, label="chunk_size")
        heads = draw(st.sampled_from(lim.heads), label="heads")
        k_dim = draw(st.sampled_from(dims), label="K")
        v_dim = draw(st.sampled_from(dims), label="V")
        # the forward's overflow corners are g_gamma's (padded rows of a partial chunk); the
        # backward's dg exists for per-token gates only: each gets twice the weight there
        favoured = "g" if grads else "g_gamma"
        form = draw(weighted(tuple((f, 2 if f == favoured else 1) for f in forms)), label="form")
        is_varlen = draw(st.sampled_from(varlen_choices), label="varlen")
        per_token_elems = heads * max(k_dim, v_dim)
        max_len = lim.max_len(chunk, per_token_elems)
        with free_lengths(draw):
            padding = 0
            if is_varlen:
                n_seqs = draw(st.integers(1, lim.max_seqs), label="sequences")
                per_seq = max(1, max_len // n_seqs)
                lengths = [
                    draw(chunked_lengths(chunk, max_size=per_seq, min_size=0), label=f"length {i}")
                    for i in range(n_seqs)
                ]
                if sum(lengths) == 0:
                    lengths[-1] = 1  # at least one token in the batch
                # tokens of no sequence after cu_seqlens[-1] (a packed batch padded to a size)
                if "padding_tokens" in feats:
                    padding = draw(
                        weighted(((0, 3), (1, 1), (5, 1), (chunk - 1, 1))), label="padding"
                    )
                total = sum(lengths) + padding
                extra = fitted(rules, "T", total, {"chunk_size": chunk}) - total
                if "padding_tokens" in feats:
                    padding += extra
                else:
                    lengths[-1] += extra
                batch, length = 1, sum(lengths) + padding
                cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
            else:
                batch = draw(st.integers(1, lim.max_batch), label="batch")
                length = draw(chunked_lengths(chunk, max_size=max(1, max_len // batch)), label="T")
                length = fitted(rules, "T", length, {"chunk_size": chunk})
                cu = None
                lengths = [length] * batch
        return {
            "dtype": dtype,
            "chunk": chunk,
            "heads": heads,
            "k_dim": k_dim,
            "v_dim": v_dim,
            "form": form,
            "batch": batch,
            "length": length,
            "lengths": lengths,
            "padding": padding,
            "cu": cu,
        }

    key = structure_key(
        "simple_gla", scale, grads, dtypes, forms, chunks, varlen, head_dims, features, rules
    )
    structure_st = reusing(structure(), key=key)

    @st.composite
    def build(draw: st.DrawFn) -> Case:
        s = draw(structure_st, label="structure")
        dtype, chunk, heads, k_dim, v_dim, form = (
            s[k] for k in ("dtype", "chunk", "heads", "k_dim", "v_dim", "form")
        )
        batch, length, lengths, padding, cu = (
            s[k] for k in ("batch", "length", "lengths", "padding", "cu")
        )
        # Drawn with the values, not the structure: an initial state, the final state, dht and
        # the scale are runtime arguments of every kernel (no compile of their own), so a reused
        # structure still meets each of them.
        # the backward's dh0 exists with an initial state only: it gets twice the weight there
        has_h0 = "initial_state" in feats and draw(
            weighted(((False, 1), (True, 2 if grads else 1))), label="h0"
        )
        final = (
            draw(weighted(((False, 1), (True, 3))), label="output_final_state")
            if not grads and "final_state" in feats
            else False
        )
        has_dht = draw(st.booleans(), label="dht") if grads and "dht" in feats else False
        scale_value = draw(st.sampled_from(scales), label="scale")
        n = len(lengths)
        decay = draw(decay_recipes(form, heads, chunks, chunk), label="decay")
        recipe = draw(
            value_recipes(
                numel=batch * length * heads * k_dim,
                distributions=VALUE_DISTRIBUTIONS,
                magnitudes=VALUE_MAGNITUDES,
                offsets=VALUE_OFFSETS,
                specials=VALUE_SPECIALS,
            ),
            label="values",
        )
        x_shape = (batch, length, heads)
        arrays: dict[str, np.ndarray] = {}
        for i, (name, d) in enumerate((("q", k_dim), ("k", k_dim), ("v", v_dim))):
            arrays[name] = materialize(_reseed(recipe, i), (*x_shape, d), dtype)
        if grads:
            arrays["do"] = materialize(_reseed(recipe, 3), (*x_shape, v_dim), dtype)
        tokens = draw(token_recipes(), label="token magnitudes")
        bounds = (
            [(0, length)]
            if cu is None
            else [(int(cu[i]), int(cu[i + 1])) for i in range(len(cu) - 1)]
        )
        # In fp16 the bursts are applied in fp32 and the arrays scaled into fp16's range before
        # they are cast: a burst of 2^exponent cast first made inf inputs (and an infinite
        # bound) of a case the recipe meant finite.
        dtypes = {k: a.dtype for k, a in arrays.items()}
        if dtype == "float16":
            arrays = {k: a.astype(np.float32) for k, a in arrays.items()}
        arrays = tokens.apply(arrays, bounds, length)
        state_shape = (n, heads, k_dim, v_dim)
        if has_h0:
            arrays["h0"] = materialize(_reseed(recipe, 4), state_shape, "float32")
        if has_dht:
            arrays["dht"] = materialize(_reseed(recipe, 5), state_shape, "float32")
        s = (k_dim**-0.5) if scale_value is None else scale_value
        if dtype == "float16":
            bound = output_bound(arrays, s, max(lengths), max(k_dim, v_dim))
            if bound > FP16_OUTPUT_LIMIT:  # every term is a product of at least two arrays
                e = int(np.ceil(np.log2(bound / FP16_OUTPUT_LIMIT) / 2))
                arrays = {k: (a * np.float32(2.0**-e)).astype(a.dtype) for k, a in arrays.items()}
            arrays = {k: a.astype(dtypes.get(k, a.dtype)) for k, a in arrays.items()}
        inputs: dict[str, np.ndarray] = {n_: arrays[n_] for n_ in ("q", "k", "v")}
        if form == "g_gamma":
            inputs["g_gamma"] = decay.g_gamma(heads)
        else:
            inputs["g"] = decay.gates(x_shape)
        for name in ("h0", "do", "dht"):
            if name in arrays:
                inputs[name] = arrays[name]
        if cu is not None:
            inputs["cu_seqlens"] = cu
        params: dict[str, Any] = {"dtype": dtype, "chunk_size": chunk, "scale": scale_value}
        if not grads:
            params["output_final_state"] = final
        described = {
            "decay": decay.describe(),
            "values": recipe.describe(),
            "lengths": lengths,
            "tokens": tokens.describe(),
        }
        if padding:
            described["padding"] = padding
        return Case(inputs, params, described)

    return build()


def _reseed(recipe: ValueRecipe, i: int) -> ValueRecipe:
    from dataclasses import replace

    return replace(recipe, seed=(recipe.seed + 7919 * i) % 2**32)


def simple_gla_fwd_cases(scale: str = "small", **kw: Any) -> st.SearchStrategy[Case]:
    """:func:`simple_gla_cases` for the forward kernels (same shrinking)."""
    return simple_gla_cases(scale, grads=False, **kw)


def simple_gla_bwd_cases(scale: str = "small", **kw: Any) -> st.SearchStrategy[Case]:
    """:func:`simple_gla_cases` with ``do`` and maybe ``dht`` (same shrinking)."""
    return simple_gla_cases(scale, grads=True, **kw)


def np_float(dtype: str) -> np.dtype:
    return np_dtype(dtype)
