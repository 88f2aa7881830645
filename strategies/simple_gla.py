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
from strategies._validate import check_features, check_scale, check_sizes, check_subset
from strategies.alibi import SlopeRecipe, slope_recipes, standard_slopes
from strategies.shapes import few
from strategies.values import ValueRecipe, materialize, value_recipes

FORMS = ("g_gamma", "g")
# Optional features a kernel may support (``fuzz.plugin.Capabilities.features``): the two decay
# forms, packed sequences, an initial state, the final state (forward), its cotangent ``dht``
# (backward), an explicit scale (else always None: K ** -0.5).
FEATURES = ("g_gamma", "g", "varlen", "initial_state", "final_state", "dht", "scale")
GAMMA_KINDS = ("alibi", "threshold", "slopes")
GATE_KINDS = ("logsigmoid", "threshold", "mixed")
SIDES = ("below", "above")
MARGINS = (2.0**-10, 2.0**-6, 2.0**-3, 1.0)
# A margin of 1 (twice the threshold) also overflows the padded rows of a half-empty last chunk.
MARGIN_WEIGHTS = (2, 1, 1, 3)
GATE_SCALES = (1.0, 4.0, 0.25, 16.0)
GATE_SPECIALS = (0.0, -30.0, -100.0, -1e3, -1e4)
GATE_DENSITIES = (0.1, 0.5, 1.0)
SCALES = (None, 1.0, 0.5)
VALUE_MAGNITUDES = (1.0, 0.1, 3.0)
VALUE_OFFSETS = (0.0,)  # centred values: offsets only add shrinking work here
VALUE_SPECIALS = ("none", "zero", "subnormal")
VALUE_DISTRIBUTIONS = ("normal", "uniform", "constant", "ramp")
# fp16 outputs must stay representable: inputs are scaled down by powers of two (exactly) until a
# crude bound of every output (and gradient) is at most this.
FP16_OUTPUT_LIMIT = 2.0**12


@dataclass(frozen=True)
class Limits:
    heads: tuple[int, ...]
    max_batch: int
    max_seqs: int  # varlen sequences
    chunks: tuple[int, ...]
    max_tiles: int  # full chunks per sequence (plus a partial one)
    dims: tuple[int, ...]
    max_elements: int  # B * T * H * max(K, V)


# small keeps the CPU interpreters quick (every head dim below pads to 16); large is for the GPU.
LIMITS = {
    "small": Limits(heads=(1, 2), max_batch=2, max_seqs=3, chunks=(16, 32), max_tiles=2,
                    dims=(16, 8, 5), max_elements=1024),
    "large": Limits(heads=(1, 2, 16, 4, 20, 32, 64), max_batch=4, max_seqs=6,
                    chunks=(16, 32, 64, 128, 256), max_tiles=4, dims=(16, 64, 32, 128, 48, 100, 1),
                    max_elements=1 << 22),
}  # fmt: skip


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
        gate_scale: for ``logsigmoid``/``mixed``, ``s`` in ``log(sigmoid(s * N(0, 1)))``.
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
            d.update(dtype=self.dtype, chunk=self.chunk, sides=list(self.sides), margin=self.margin,
                     threshold=overflow_threshold(self.dtype, self.chunk))  # fmt: skip
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
        x = rng.standard_normal(shape) * self.gate_scale
        g = -np.logaddexp(0.0, -x)  # log(sigmoid(x)), stable on both sides
        if self.kind == "mixed":
            hit = rng.random(shape) < self.density
            if not hit.any() and hit.size:
                hit.flat[rng.integers(hit.size)] = True
            g = np.where(hit, self.special, g)
        return np.minimum(g, 0.0).astype(np.float32)


def weighted(choices: tuple[tuple[Any, int], ...]) -> st.SearchStrategy[Any]:
    """One of ``choices`` (value, weight), drawn with the given weights; shrinks toward the first.

    The overflow corners are a small part of the input space; the weights put a good share of a
    short CI run's examples there while shrinking still prefers the plainest value.
    """
    values = [v for v, w in choices for _ in range(w)]
    return st.integers(0, len(values) - 1).map(values.__getitem__)


@cached_factory
def decay_recipes(form: str, heads: int, chunks: tuple[int, ...], chunk: int):
    """Decay recipes for ``form``; thresholds of the case's chunk size first, then the others.

    Weighted toward the overflow thresholds (above them first: the side where unguarded kernels
    break). Shrinks toward the standard ALiBi slopes (``g_gamma``) or mild log-sigmoid gates (``g``).
    """
    kinds = (
        (("alibi", 2), ("threshold", 6), ("slopes", 2)) if form == "g_gamma"
        else (("logsigmoid", 2), ("threshold", 2), ("mixed", 2))
    )  # fmt: skip
    threshold_chunks = ((chunk, 3), *((c, 1) for c in chunks if c != chunk))

    @st.composite
    def build(draw: st.DrawFn) -> DecayRecipe:
        kind = draw(weighted(kinds), label="decay kind")
        if kind == "alibi":
            return DecayRecipe("g_gamma", "alibi")
        if kind == "threshold":
            dtype = draw(weighted((("float32", 3), ("bfloat16", 1), ("float16", 1))),
                         label="threshold dtype")  # fmt: skip
            c = draw(weighted(threshold_chunks), label="threshold chunk")
            sides = draw(st.lists(weighted((("above", 3), ("below", 1))), min_size=1,
                                  max_size=heads), label="sides")  # fmt: skip
            margins = tuple(zip(MARGINS, MARGIN_WEIGHTS, strict=True))
            margin = draw(weighted(margins), label="margin")
            return DecayRecipe(form, "threshold", dtype, c, tuple(sides), margin)
        if kind == "slopes":
            rec = draw(slope_recipes(heads, kinds=("scaled", "constant", "adversarial")),
                       label="slopes")  # fmt: skip
            return DecayRecipe("g_gamma", "slopes", slopes=rec)
        gate_scale = draw(st.sampled_from(GATE_SCALES), label="gate scale")
        special, density = 0.0, 0.0
        if kind == "mixed":
            special = draw(st.sampled_from(GATE_SPECIALS), label="gate special")
            density = draw(st.sampled_from(GATE_DENSITIES), label="gate density")
        seed = draw(st.integers(0, 2**32 - 1), label="gate seed")
        return DecayRecipe("g", kind, gate_scale=gate_scale, special=special, density=density,
                           seed=seed)  # fmt: skip

    return build()


@cached_factory
def chunked_lengths(chunk: int, *, max_size: int, min_size: int = 1) -> st.SearchStrategy[int]:
    """A length ``n_chunks * chunk + tail``: the chunk count, then the tail aimed at 1, ``chunk - 1``
    and 0 (a last chunk of one token leaves ``chunk - 1`` padded rows: the most exposed case).

    Like ``strategies.shapes.tiled_sizes`` but with the tail's corners weighted up. Shrinks toward
    ``min_size`` (whole chunks removed first, then the tail toward 0).
    """

    @st.composite
    def build(draw: st.DrawFn) -> int:
        tiles = draw(few(0, max(0, max_size // chunk)), label="chunks")
        kind = draw(weighted((("any", 2), ("one", 2), ("last", 1), ("zero", 1))), label="tail")
        if kind == "any":
            tail = draw(st.integers(0, chunk - 1), label="tail length")
        else:
            tail = {"one": 1, "last": chunk - 1, "zero": 0}[kind]
        return min(max(tiles * chunk + tail, min_size), max_size)

    return build()


def _bound_outputs(arrays: dict[str, np.ndarray], scale: float, length: int, dims: int) -> float:
    """A crude bound of every output and gradient (``do`` and the states count as values):
    ``scale (T + 1) max(K, V) m^3`` with ``m`` the largest |value| (no decay)."""
    m = max((float(np.abs(a.astype(np.float64)).max(initial=0.0)) for a in arrays.values()),
            default=0.0)  # fmt: skip
    return scale * (length + 1) * dims * m**3


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

    Structure is drawn before values: dtype, chunk size, heads, K, V, decay form, varlen or not,
    the lengths (chunk count then tail per sequence, so tails shrink to 0 and empty sequences
    appear), initial/final state, ``dht``, scale, the decays, then the value recipe. Shrinks
    toward one sequence of one token, one head, float32, chunk 16, g_gamma with the standard ALiBi
    slopes, K = V = 16, no states, default scale and plain normal values.
    """
    lim = LIMITS[check_scale(scale)]
    dtypes = check_subset("dtypes", dtypes, FLOAT_DTYPES)
    forms = check_subset("forms", forms, FORMS)
    chunks = lim.chunks if chunk_sizes is None else check_subset("chunk_sizes", chunk_sizes,
                                                                  LIMITS["large"].chunks)  # fmt: skip
    varlen_choices = (False, True) if varlen is None else (bool(varlen),)
    feats = check_features(features, FEATURES)
    forms = tuple(f for f in forms if f in feats)
    if not forms:
        raise InvalidArgument(f"features={sorted(feats)} name no decay form; one of {FORMS}")
    if "varlen" not in feats:
        varlen_choices = (False,)
    dims = check_sizes("head_dims", head_dims, lim.dims)
    scales = SCALES if "scale" in feats else (None,)

    @st.composite
    def build(draw: st.DrawFn) -> Case:
        dtype = draw(st.sampled_from(dtypes), label="dtype")
        chunk = draw(st.sampled_from(chunks), label="chunk_size")
        heads = draw(st.sampled_from(lim.heads), label="heads")
        k_dim = draw(st.sampled_from(dims), label="K")
        v_dim = draw(st.sampled_from(dims), label="V")
        form = draw(weighted(tuple((f, 2 if f == "g_gamma" else 1) for f in forms)), label="form")
        is_varlen = draw(st.sampled_from(varlen_choices), label="varlen")
        per_token_elems = heads * max(k_dim, v_dim)
        max_len = max(1, min(lim.max_tiles * chunk + chunk - 1,
                             lim.max_elements // per_token_elems))  # fmt: skip
        if is_varlen:
            n_seqs = draw(st.integers(1, lim.max_seqs), label="sequences")
            per_seq = max(1, max_len // n_seqs)
            lengths = [
                draw(chunked_lengths(chunk, max_size=per_seq, min_size=0), label=f"length {i}")
                for i in range(n_seqs)
            ]
            if sum(lengths) == 0:
                lengths[-1] = 1  # at least one token in the batch
            batch, length = 1, sum(lengths)
            cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        else:
            batch = draw(st.integers(1, lim.max_batch), label="batch")
            length = draw(chunked_lengths(chunk, max_size=max(1, max_len // batch)), label="T")
            cu = None
            lengths = [length] * batch
        n = len(lengths)
        has_h0 = "initial_state" in feats and draw(st.booleans(), label="h0")
        final = (
            draw(weighted(((False, 1), (True, 3))), label="output_final_state")
            if not grads and "final_state" in feats
            else False
        )
        has_dht = draw(st.booleans(), label="dht") if grads and "dht" in feats else False
        scale_value = draw(st.sampled_from(scales), label="scale")
        decay = draw(decay_recipes(form, heads, chunks, chunk), label="decay")
        recipe = draw(
            value_recipes(numel=batch * length * heads * k_dim,
                          distributions=VALUE_DISTRIBUTIONS, magnitudes=VALUE_MAGNITUDES,
                          offsets=VALUE_OFFSETS, specials=VALUE_SPECIALS),
            label="values",
        )  # fmt: skip
        x_shape = (batch, length, heads)
        arrays: dict[str, np.ndarray] = {}
        for i, (name, d) in enumerate((("q", k_dim), ("k", k_dim), ("v", v_dim))):
            arrays[name] = materialize(_reseed(recipe, i), (*x_shape, d), dtype)
        if grads:
            arrays["do"] = materialize(_reseed(recipe, 3), (*x_shape, v_dim), dtype)
        state_shape = (n, heads, k_dim, v_dim)
        if has_h0:
            arrays["h0"] = materialize(_reseed(recipe, 4), state_shape, "float32")
        if has_dht:
            arrays["dht"] = materialize(_reseed(recipe, 5), state_shape, "float32")
        s = (k_dim**-0.5) if scale_value is None else scale_value
        if dtype == "float16":
            bound = _bound_outputs(arrays, s, max(lengths), max(k_dim, v_dim))
            if bound > FP16_OUTPUT_LIMIT:
                e = int(np.ceil(np.log2(bound / FP16_OUTPUT_LIMIT) / 3))
                arrays = {k: (a * np.float32(2.0**-e)).astype(a.dtype) for k, a in arrays.items()}
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
        described = {"decay": decay.describe(), "values": recipe.describe(), "lengths": lengths}
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
