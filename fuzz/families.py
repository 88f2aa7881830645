"""What an external kernel of each built-in family is called with, and returns.

A plugin (``fuzz.plugin.fuzz_kernel``) fuzzes its kernel against a built-in family: the family's
strategies draw the cases (narrowed to the kernel's capabilities), its fp64 oracle, error bound,
hazards, poisoning and properties judge them. This module holds, per family, the contract the
plugin's kernel function sees:

* the tensors it receives positionally, in the family's canonical layout (``layouts``: one axis
  letter per dimension; a plugin's :class:`fuzz.plugin.Layout` converts);
* the keyword arguments for each optional feature and tile size (only those the kernel supports
  are drawn and passed);
* the outputs it returns (a dict by name, a tuple in ``outputs`` order, or a single tensor).

Each family's contract mirrors how the libraries of the field spell it (FlashAttention,
flash-linear-attention, liger), so that a plugin's kernel function is usually a thin wrapper.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzz.case import Case


@dataclass(frozen=True)
class Family:
    """The contract of one built-in family for external kernels.

    Attributes:
        name: the family's name (also the built-in target its oracle and properties come from).
        tensors: the tensor inputs, positional, in this order (absent optional ones are None).
        outputs: the outputs, in the order a kernel returning a tuple returns them.
        layouts: canonical axis letters of every tensor input and output.
        features: optional features (``strategies``' ``FEATURES`` of the family).
        tiles: tile-size parameters the strategy draws (and passes to a kernel that takes them).
        dims: the axis letters that are head dims (padded by ``Layout.pad_head_dim``).
        keywords: the keyword arguments of each optional feature and tile parameter (key
            ``None``: always passed); a kernel is passed those of the features it supports and
            of the tile parameters its function takes.
        values: ``values(case) -> {keyword: value}``: every keyword's value for a case.
        conventions: the :class:`fuzz.plugin.Conventions` fields that mean something here.
        strategy: ``strategy(scale, **narrowing)``: the family's case strategy.
        narrowing: ``narrowing(capabilities) -> strategy kwargs``.
        empty_rows: ``empty_rows(case) -> {output: bool mask}``: elements of rows with no valid
            key (what the ``empty_rows`` convention decides), where the family has such rows.
        space: ``space(scale) -> {strategy keyword: choices}``: the strategy's compile-time
            dimensions (dtype, tiles, head dims: each value a kernel binary of its own) and the
            choices it draws from at ``scale``, simplest first.
        lengths: the lengths a kernel may restrict (``fuzz.Lengths``), by name, each with what it
            measures; the strategy draws them within a kernel's rules (its ``lengths`` keyword:
            ``{name: fit}``, ``fit(n, tiles) -> n'`` mapping a drawn length to an allowed one).
        measure: ``measure(case) -> {length name: value}`` (framework arrays or host arrays).
        same_lengths: ``same_lengths(case) -> bool``: whether each sequence has as many keys as
            queries (the ``same_as`` rule; the strategy's ``same_lengths`` keyword draws so);
            None where the family has no such pair.
        uses: ``{feature: uses(case) -> bool}``: whether a case uses an optional feature.
        drop: ``{feature: drop(case) -> case}``: the case without the feature, for the features
            a case can lose without changing its other draws (``fuzz.Constraint`` with a
            feature).
        reduce: ``{hazard: reduce(case) -> case or None}``: the case with a shape hazard taken
            away, its other inputs kept where they can be (a softmax row cut to its first tile,
            or to whole tiles), None where it cannot: the duplicate check drops an incidental
            trigger so (``fuzz.duplicates.Duplicates.needs_fewer``).
        recast: ``{feature: (other, recast(case) -> case or None)}``: the case with the
            feature's input given through another feature of the same meaning (simple GLA's
            per-head decay ``g_gamma`` as a per-token ``g`` equal over the tokens), None where
            it cannot be: the duplicate check takes away a trigger that is only the form a free
            choice drew so (a planted GLA kernel's one bug came as two rows, one with each form).
        grow: ``grow(case) -> case or None``: the case with its reductions of one element given
            a second (a jagged segment of one row: its row repeated), None where it has none:
            such an output is fixed by the mask alone (a one-row segment's 1), so a wrong value
            there is classed ``masking``, and the duplicate check runs the grown call to see
            whether it is wrong as an ``accuracy`` row's values are (``fuzz.duplicates``).
        vary: ``vary(case) -> cases``: neighbours of the case that tell the conventions of
            :mod:`fuzz.explain` apart where a small case cannot (attention: one key more, one
            query more): a hypothesis of what a kernel computed instead must hold on them too.
        requests: ``{output: request(case) -> case}``: the case with an optional output asked
            for (simple GLA's final state ``ht``), its inputs kept: the duplicate check runs a
            minimal example that did not ask for an output a known bug was seen on with it
            (``fuzz.duplicates.fails_as``).
        guard_inputs: ``guard_inputs(inputs, params) -> inputs``: torch inputs as views into
            poisoned guard buffers, as the family's own entry points pass them (the jagged
            family's guard rows: the masked-poison property swaps their poison).
        runtime: the inputs and params the strategy draws with the values, not with the case's
            structure (an initial state, a flag): a reused structure meets each of them, so no
            kernel binary may depend on them (``fuzz.triton_keys`` groups cases without them).
        types: what each tensor input, keyword and output is, by name, as a kernel sees it: a
            tensor's shape (its axes in ``layouts`` order, named as the strategies name them)
            and dtype (``dtype``: the case's float dtype), a scalar's Python type; ``or None``
            where a case may lack it. :func:`signature` shows them.
    """

    name: str
    tensors: tuple[str, ...]
    outputs: tuple[str, ...]
    layouts: Mapping[str, str]
    features: tuple[str, ...]
    tiles: tuple[str, ...]
    dims: tuple[str, ...]
    keywords: Mapping[str | None, tuple[str, ...]]
    values: Callable[[Any], Mapping[str, Any]]
    conventions: tuple[str, ...]
    strategy: Callable[..., Any]
    narrowing: Callable[[Any], dict[str, Any]]
    empty_rows: Callable[[Case], Mapping[str, np.ndarray]] | None = None
    space: Callable[[str], dict[str, tuple[Any, ...]]] = lambda scale: {}
    lengths: Mapping[str, str] = field(default_factory=dict)
    measure: Callable[[Any], dict[str, int]] = lambda case: {}
    same_lengths: Callable[[Any], bool] | None = None
    uses: Mapping[str, Callable[[Any], bool]] = field(default_factory=dict)
    drop: Mapping[str, Callable[[Case], Case]] = field(default_factory=dict)
    reduce: Mapping[str, Callable[[Case], Case | None]] = field(default_factory=dict)
    recast: Mapping[str, tuple[str, Callable[[Case], Case | None]]] = field(default_factory=dict)
    requests: Mapping[str, Callable[[Case], Case]] = field(default_factory=dict)
    grow: Callable[[Case], Case | None] | None = None
    vary: Callable[[Case], list[Case]] | None = None
    guard_inputs: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]] | None = None
    runtime: tuple[str, ...] = ()
    types: Mapping[str, str] = field(default_factory=dict)

    def passed(self, features: frozenset[str], tiles: frozenset[str]) -> tuple[str, ...]:
        """The keywords a kernel supporting ``features`` and taking ``tiles`` is called with."""
        return tuple(
            kw
            for key, names in self.keywords.items()
            if key is None or key in features or key in tiles
            for kw in names
        )


def _host(x: Any) -> np.ndarray:
    """A host copy of a small integer array (torch, JAX or NumPy)."""
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _without(name: str) -> Callable[[Case], Case]:
    """The case without input ``name``."""

    def drop(case: Case) -> Case:
        return Case({k: v for k, v in case.inputs.items() if k != name}, case.params, case.recipe)

    return drop


def _param(name: str, value: Any) -> Callable[[Case], Case]:
    """The case with param ``name`` set to ``value``."""
    return lambda case: case.replace(**{name: value})


def _has(name: str) -> Callable[[Any], bool]:
    return lambda case: case.inputs.get(name) is not None


def _set(name: str) -> Callable[[Any], bool]:
    return lambda case: case.params.get(name) is not None


def _scale(case: Any, dim: int) -> float:
    s = case.params.get("scale")
    return 1.0 / math.sqrt(dim) if s is None else float(s)


# softmax ------------------------------------------------------------------------------------------


_SOFTMAX_KEYWORDS = {
    None: (),
    "mask": ("mask",),
    "bias": ("bias",),
    "scale": ("scale",),
    "block_m": ("block_m",),
    "block_n": ("block_n",),
}


_SOFTMAX_TYPES = {
    "x": "[R, C] dtype",
    "mask": "[R, C] bool (True: a valid key) or None",
    "bias": "[R, C] dtype or None",
    "scale": "float",
    "block_m": "int",
    "block_n": "int",
    "y": "[R, C] dtype",
}


def _softmax_values(case: Any) -> dict[str, Any]:
    p = case.params
    return {
        "mask": case.inputs.get("mask"),
        "bias": case.inputs.get("bias"),
        "scale": 1.0 if p.get("scale") is None else float(p["scale"]),
        "block_m": p["block_m"],
        "block_n": p["block_n"],
    }


def _softmax_empty(case: Case) -> dict[str, np.ndarray]:
    from fuzz.targets.softmax import logits64

    live = np.isfinite(logits64(case)).any(axis=-1, keepdims=True)
    return {"y": np.broadcast_to(~live, case.inputs["x"].shape)}


_SOFTMAX_USES = {"mask": _has("mask"), "bias": _has("bias"), "scale": _set("scale")}
_SOFTMAX_DROP = {"mask": _without("mask"), "bias": _without("bias"), "scale": _param("scale", None)}


def _softmax_columns(keep: Callable[[int, int], int]) -> Callable[[Case], Case | None]:
    """A softmax case whose rows are cut to their first ``keep(n, block_n)`` columns (every
    input of the row's length alike), or None where that keeps none or all of them."""

    def reduce(case: Case) -> Case | None:
        n, block = case.inputs["x"].shape[-1], int(case.params.get("block_n") or 0)
        k = keep(n, block) if block > 0 else 0
        if not 0 < k < n:
            return None
        inputs = {
            name: a[..., :k] if a.ndim and a.shape[-1] == n else a
            for name, a in case.inputs.items()
        }
        return Case(inputs, case.params, case.recipe)

    return reduce


_SOFTMAX_REDUCE = {
    "multi-tile": _softmax_columns(lambda n, b: b),
    "partial-tile": _softmax_columns(lambda n, b: n // b * b),
}


def _softmax_narrowing(caps: Any) -> dict[str, Any]:
    return {"dtypes": caps.dtypes, "features": caps.features, **caps.tile_kwargs()}


# attention ----------------------------------------------------------------------------------------


_ATTN_KEYWORDS: dict[str | None, tuple[str, ...]] = {
    None: ("scale",),
    "causal": ("causal",),
    "window": ("window",),
    "key_padding": ("key_lengths",),
    "alibi": ("alibi_slopes",),
    "softcap": ("softcap",),
    "block_q": ("block_q",),
    "block_k": ("block_k",),
    "num_splits": ("num_splits",),
}


_ATTN_TYPES = {
    "q": "[B, Hq, Tq, D] dtype",
    "k": "[B, Hkv, Tk, D] dtype",
    "v": "[B, Hkv, Tk, D] dtype",
    "scale": "float",
    "causal": "bool",
    "window": "(int, int) or None",
    "key_lengths": "[B] int32 or None",
    "alibi_slopes": "[Hq] float32 or None",
    "softcap": "float or None",
    "block_q": "int",
    "block_k": "int",
    "num_splits": "int",
    "o": "[B, Hq, Tq, D] dtype",
    "lse": "[B, Hq, Tq] float32 (Conventions.lse='split': m, l; 'none': no lse)",
}
_VARLEN_TYPES = {
    **_ATTN_TYPES,
    "q": "[B=1, Hq, Tq, D] dtype (the sequences packed along Tq)",
    "k": "[B=1, Hkv, Tk, D] dtype (packed, guard rows after the last sequence)",
    "v": "[B=1, Hkv, Tk, D] dtype (as k)",
    "cu_seqlens_q": "[N + 1] int32",
    "cu_seqlens_k": "[N + 1] int32",
    "o": "[B=1, Hq, Tq, D] dtype",
    "lse": "[B=1, Hq, Tq] float32 (as attention's)",
}
_DECODE_TYPES = {
    **_ATTN_TYPES,
    "q": "[B, Hq, Tq=1, D] dtype",
    "k": "[B, Hkv, Tmax, D] dtype (the cache)",
    "v": "[B, Hkv, Tmax, D] dtype (the cache)",
    "cache_len": "[B] int32 (the keys in use)",
    "o": "[B, Hq, Tq=1, D] dtype",
    "lse": "[B, Hq, Tq=1] float32 (as attention's)",
}


def _attention_values(case: Any) -> dict[str, Any]:
    p, i = case.params, case.inputs
    window = p.get("window")
    return {
        "scale": _scale(case, i["q"].shape[-1]),
        "causal": bool(p.get("causal", False)),
        "window": None if window is None else (int(window[0]), int(window[1])),
        "key_lengths": i.get("key_lengths"),
        "alibi_slopes": i.get("alibi_slopes"),
        "softcap": p.get("softcap"),
        "cu_seqlens_q": i.get("cu_seqlens_q"),
        "cu_seqlens_k": i.get("cu_seqlens_k"),
        "cache_len": i.get("cache_len"),
        "block_q": p.get("block_q"),
        "block_k": p.get("block_k"),
        "num_splits": p.get("num_splits"),
    }


def _attention_empty(case: Case) -> dict[str, np.ndarray]:
    from fuzz.targets.attention import fixed_outputs

    return dict(fixed_outputs(case))


def _attention_measure(case: Any) -> dict[str, int]:
    """``q``: the query rows of the array (packed: every sequence's), ``k``: the key rows (packed:
    with the guard rows after the last sequence; decode: the cache)."""
    return {"q": int(case.inputs["q"].shape[2]), "k": int(case.inputs["k"].shape[2])}


def _attention_same(case: Any) -> bool:
    """Each sequence has as many keys as queries (dense: ``Tq == Tk``; packed: per sequence, the
    guard rows after the last sequence aside)."""
    i = case.inputs
    if i.get("cu_seqlens_q") is not None:
        cq, ck = _host(i["cu_seqlens_q"]), _host(i["cu_seqlens_k"])
        return bool(np.array_equal(np.diff(cq), np.diff(ck)))
    return int(i["q"].shape[2]) == int(i["k"].shape[2])


_ATTN_USES: dict[str, Callable[[Any], bool]] = {
    "causal": lambda case: bool(case.params.get("causal")),
    "window": _set("window"),
    "key_padding": _has("key_lengths"),
    "alibi": _set("alibi"),
    "softcap": _set("softcap"),
    "gqa": lambda case: int(case.inputs["q"].shape[1]) != int(case.inputs["k"].shape[1]),
    "scale": _set("scale"),
    "splits": lambda case: int(case.params.get("num_splits") or 1) > 1,
}


def _drop_alibi(case: Case) -> Case:
    return _without("alibi_slopes")(case).replace(alibi=None)


_ATTN_DROP: dict[str, Callable[[Case], Case]] = {
    "causal": _param("causal", False),
    "window": _param("window", None),
    "key_padding": _without("key_lengths"),
    "alibi": _drop_alibi,
    "softcap": _param("softcap", None),
    "scale": _param("scale", None),
    "splits": _param("num_splits", 1),
}


def _attention_narrowing(caps: Any) -> dict[str, Any]:
    kw: dict[str, Any] = {
        "dtypes": caps.dtypes,
        "features": caps.features,
        "head_dims": caps.head_dims,
    }
    tiles = dict(caps.tiles or {})
    if "block_q" in tiles or "block_k" in tiles:
        qs: tuple[int, ...] = tiles.get("block_q") or tiles["block_k"]
        ks: tuple[int, ...] = tiles.get("block_k") or tiles["block_q"]
        kw["block_pairs"] = tuple((bq, bk) for bq in qs for bk in ks)
    return kw


def _decode_narrowing(caps: Any) -> dict[str, Any]:
    tiles = dict(caps.tiles or {})
    return {
        "dtypes": caps.dtypes,
        "features": caps.features,
        "head_dims": caps.head_dims,
        "blocks_k": tiles.get("block_k"),
        "num_splits": tiles.get("num_splits"),
    }


_ATTN_LAYOUTS = {"q": "BHTD", "k": "BHTD", "v": "BHTD", "o": "BHTD", "lse": "BHT"}


def _attention_family(
    name: str,
    features: tuple[str, ...],
    tiles: tuple[str, ...],
    strategy: Callable[..., Any],
    narrowing: Callable[[Any], dict[str, Any]],
    space: Callable[[str], dict[str, tuple[Any, ...]]],
    types: Mapping[str, str],
    always: tuple[str, ...] = (),
    conventions: tuple[str, ...] = ("causal", "empty_rows", "lse", "fp32_dots", "masked_inputs"),
) -> Family:
    keywords: dict[str | None, tuple[str, ...]] = {
        k: v for k, v in _ATTN_KEYWORDS.items() if k is None or k in features or k in tiles
    }
    keywords[None] = (*keywords[None], *always)  # the family's own inputs: offsets, cache lengths
    decode = "splits" in features
    return Family(
        name=name,
        tensors=("q", "k", "v"),
        outputs=("o", "lse"),
        layouts=_ATTN_LAYOUTS,
        features=features,
        tiles=tiles,
        dims=("D",),
        keywords=keywords,
        values=_attention_values,
        conventions=conventions,
        strategy=strategy,
        narrowing=narrowing,
        empty_rows=_attention_empty,
        space=space,
        lengths=(
            {"k": "the cache's length (Tmax)"}
            if decode
            else {
                "q": "the query rows (Tq; packed: all sequences')",
                "k": "the key rows (Tk; packed: all sequences' and the guard rows after them)",
            }
        ),
        measure=(lambda case: {"k": _attention_measure(case)["k"]})
        if decode
        else _attention_measure,
        same_lengths=None if decode else _attention_same,
        uses={f: u for f, u in _ATTN_USES.items() if f in features},
        drop={f: d for f, d in _ATTN_DROP.items() if f in features},
        vary=_attention_vary,
        types=types,
    )


def _attention_vary(case: Case) -> list[Case]:
    """``Family.vary`` of attention: the case with one key more, and (but for decode) one query
    more, each the last of its sequence (dense: of every batch element whose keys end at the
    array's end; packed: of the last sequence; decode: one more cache slot in use), its values
    drawn (normal, seeded by the case). Two queries on one key under a window ``(-1, 0)`` read
    the same aligned top-left as with the window's sides swapped; with a second key they do
    not."""
    i = case.inputs
    rng = np.random.default_rng(int(case.digest()[:8], 16))

    def one_more(a: np.ndarray, at: int) -> np.ndarray:
        row = rng.standard_normal((*a.shape[:2], 1, a.shape[3])).astype(a.dtype)
        return np.concatenate([a[:, :, :at], row, a[:, :, at:]], axis=2)

    out = []
    tk = int(i["k"].shape[2])
    if "cache_len" in i:
        n = np.asarray(i["cache_len"])
        k, v = (i[x] if (n < tk).all() else one_more(i[x], tk) for x in ("k", "v"))
        out.append(case.replace(inputs={"k": k, "v": v, "cache_len": (n + 1).astype(n.dtype)}))
        return out
    cu_q, cu_k = i.get("cu_seqlens_q"), i.get("cu_seqlens_k")
    if cu_q is not None and cu_k is not None:
        cq, ck = np.asarray(cu_q), np.asarray(cu_k)
        last = lambda c: np.concatenate([c[:-1], c[-1:] + 1]).astype(c.dtype)  # noqa: E731
        at_k, at_q = int(ck[-1]), int(cq[-1])
        k, v = one_more(i["k"], at_k), one_more(i["v"], at_k)
        out.append(case.replace(inputs={"k": k, "v": v, "cu_seqlens_k": last(ck)}))
        out.append(case.replace(inputs={"q": one_more(i["q"], at_q), "cu_seqlens_q": last(cq)}))
        return out
    more = {"k": one_more(i["k"], tk), "v": one_more(i["v"], tk)}
    lengths = i.get("key_lengths")
    if lengths is not None:
        n = np.asarray(lengths)
        more["key_lengths"] = (n + (n == tk)).astype(n.dtype)
    out.append(case.replace(inputs=more))
    out.append(case.replace(inputs={"q": one_more(i["q"], int(i["q"].shape[2]))}))
    return out


# jagged softmax -----------------------------------------------------------------------------------


_JAGGED_KEYWORDS = {
    None: ("offsets",),
    "block_n": ("block_n",),
    "block_m": ("block_m",),
    "num_programs": ("num_programs",),
}


_JAGGED_TYPES = {
    "values": "[N, M] dtype",
    "offsets": "[B + 1] int32 (segment starts, then N)",
    "block_n": "int",
    "block_m": "int",
    "num_programs": "int",
    "y": "[N, M] dtype",
}


def _jagged_values(case: Any) -> dict[str, Any]:
    p = case.params
    return {
        "offsets": case.inputs["offsets"],
        "block_n": p["block_n"],
        "block_m": p["block_m"],
        "num_programs": p["num_programs"],
    }


def _jagged_narrowing(caps: Any) -> dict[str, Any]:
    return {"dtypes": caps.dtypes, **caps.tile_kwargs()}


def _jagged_grow(case: Case) -> Case | None:
    """``Family.grow`` of the jagged family: each segment of one row given a second (its row
    repeated), the others as they are; None without such a segment. Three planted jagged
    kernels (rounds 5, 9 and 10) came as a ``masking`` row (a one-row segment written wrong)
    and an ``accuracy`` row (the same fault in a longer segment)."""
    values, offsets = np.asarray(case.inputs["values"]), np.asarray(case.inputs["offsets"])
    bounds = offsets.astype(np.int64)
    lengths = np.diff(bounds)
    if not (lengths == 1).any():
        return None
    rows = [np.arange(int(bounds[0]))]
    rows += [
        np.repeat(np.arange(a, a + n), 2 if n == 1 else 1)
        for a, n in zip(bounds[:-1], lengths, strict=True)
    ]
    rows.append(np.arange(int(bounds[-1]), values.shape[0]))  # (rows past the last segment)
    grown = np.where(lengths == 1, 2, lengths)
    starts = np.concatenate([bounds[:1], bounds[0] + np.cumsum(grown)]).astype(offsets.dtype)
    inputs = {**case.inputs, "values": values[np.concatenate(rows)], "offsets": starts}
    return Case(inputs, dict(case.params), {**case.recipe, "lengths": [int(n) for n in grown]})


def _jagged_guards(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` and ``offsets`` as views into guard buffers holding the case's ``guard`` poison
    (``fuzz.targets.jagged_softmax``: rows before and after, a column after every row, offsets
    -1 and N + 1 around), as the family's own entry points get them."""
    from fuzz.targets.jagged_softmax import _guarded_torch

    values, offsets = _guarded_torch(
        inputs["values"], inputs["offsets"], params["guard"], params["block_n"]
    )
    return {**inputs, "values": values, "offsets": offsets}


# simple GLA ---------------------------------------------------------------------------------------


_GLA_KEYWORDS = {
    None: ("scale",),
    "g": ("g",),
    "g_gamma": ("g_gamma",),
    "varlen": ("cu_seqlens",),
    "initial_state": ("initial_state",),
    "final_state": ("output_final_state",),
    "dht": ("dht",),
    "chunk_size": ("chunk_size",),
}


_GLA_TYPES = {
    "q": "[B, T, H, K] dtype",
    "k": "[B, T, H, K] dtype",
    "v": "[B, T, H, V] dtype",
    "do": "[B, T, H, V] dtype",
    "scale": "float",
    "g": "[B, T, H] float32 (log decays <= 0) or None",
    "g_gamma": "[H] float32 (log decays <= 0) or None",
    "cu_seqlens": "[N + 1] int32 or None (with it, B = 1)",
    "initial_state": "[N, H, K, V] float32 or None (N: B, or cu_seqlens' N)",
    "output_final_state": "bool",
    "dht": "[N, H, K, V] float32 or None",
    "chunk_size": "int",
    "o": "[B, T, H, V] dtype",
    "ht": "[N, H, K, V] float32 (with output_final_state)",
    "dq": "[B, T, H, K] dtype",
    "dk": "[B, T, H, K] dtype",
    "dv": "[B, T, H, V] dtype",
    "dg": "[B, T, H] float32 (with g)",
    "dh0": "[N, H, K, V] float32 (with initial_state)",
}


def _gla_values(case: Any) -> dict[str, Any]:
    p, i = case.params, case.inputs
    return {
        "scale": _scale(case, i["q"].shape[-1]),
        "g": i.get("g"),
        "g_gamma": i.get("g_gamma"),
        "cu_seqlens": i.get("cu_seqlens"),
        "initial_state": i.get("h0"),
        "output_final_state": bool(p.get("output_final_state", False)),
        "dht": i.get("dht"),
        "chunk_size": p["chunk_size"],
    }


_GLA_USES: dict[str, Callable[[Any], bool]] = {
    "g": _has("g"),
    "g_gamma": _has("g_gamma"),
    "varlen": _has("cu_seqlens"),
    "initial_state": _has("h0"),
    "final_state": lambda case: bool(case.params.get("output_final_state")),
    "dht": _has("dht"),
    "scale": _set("scale"),
    "padding_tokens": lambda case: (
        case.inputs.get("cu_seqlens") is not None
        and int(_host(case.inputs["cu_seqlens"])[-1]) < int(case.inputs["q"].shape[1])
    ),
}


def _g_gamma_as_g(case: Case) -> Case | None:
    """A simple GLA case's per-head decay ``g_gamma`` ``[H]`` as a per-token ``g`` ``[B, T, H]``
    equal over the tokens (the same decays)."""
    gamma = case.inputs.get("g_gamma")
    if gamma is None:
        return None
    batch, tokens = case.inputs["q"].shape[:2]
    row = np.asarray(_host(gamma), np.float32)
    g = np.ascontiguousarray(np.broadcast_to(row[None, None, :], (batch, tokens, row.shape[0])))
    inputs = {k: v for k, v in case.inputs.items() if k != "g_gamma"}
    return Case({**inputs, "g": g}, case.params, case.recipe)


def _g_as_g_gamma(case: Case) -> Case | None:
    """A simple GLA case's per-token decay ``g`` as a per-head ``g_gamma``, where ``g`` is equal
    over the batch and the tokens; else None."""
    g = case.inputs.get("g")
    if g is None:
        return None
    host = np.asarray(_host(g), np.float32)
    if host.size == 0 or not np.all(host == host[:1, :1, :]):
        return None
    inputs = {k: v for k, v in case.inputs.items() if k != "g"}
    return Case({**inputs, "g_gamma": host[0, 0].copy()}, case.params, case.recipe)


def _gla_last_chunk(case: Case) -> Case | None:
    """A simple GLA forward case of several chunks cut to its last chunk, the state the float64
    recurrence carries into it given as the initial state (the same computation of that chunk,
    through the kernel's initial-state path): the duplicate check takes ``multi-chunk`` away
    so. None for packed sequences or a single chunk."""
    import torch

    from fuzz.arrays import to_float64
    from oracles.simple_gla import simple_gla_reference

    chunk, tokens = int(case.params.get("chunk_size") or 0), case.inputs["q"].shape[1]
    if case.inputs.get("cu_seqlens") is not None or chunk <= 0 or tokens <= chunk:
        return None
    cut = (tokens - 1) // chunk * chunk

    def head(name: str) -> Any:
        a = case.inputs.get(name)
        return None if a is None else torch.from_numpy(to_float64(np.asarray(a)))

    g = head("g")
    q, k, v = (head(n)[:, :cut] for n in ("q", "k", "v"))
    _, state = simple_gla_reference(
        q,
        k,
        v,
        g=None if g is None else g[:, :cut],
        g_gamma=head("g_gamma"),
        scale=case.params.get("scale"),
        initial_state=head("h0"),
    )
    inputs = {
        name: a[:, cut:] if name in ("q", "k", "v", "g") else a
        for name, a in case.inputs.items()
        if name != "h0"
    }
    return Case({**inputs, "h0": state.numpy().astype(np.float32)}, case.params, case.recipe)


_GLA_RECAST: dict[str, tuple[str, Callable[[Case], Case | None]]] = {
    "g_gamma": ("g", _g_gamma_as_g),
    "g": ("g_gamma", _g_as_g_gamma),
}


_GLA_DROP: dict[str, Callable[[Case], Case]] = {
    "initial_state": _without("h0"),
    "final_state": _param("output_final_state", False),
    "dht": _without("dht"),
    "scale": _param("scale", None),
}


def _gla_narrowing(caps: Any) -> dict[str, Any]:
    tiles = dict(caps.tiles or {})
    return {
        "dtypes": caps.dtypes,
        "features": caps.features,
        "head_dims": caps.head_dims,
        "chunk_sizes": tiles.get("chunk_size"),
    }


_GLA_LAYOUTS = {
    "initial_state": "NHKV",
    "dht": "NHKV",
    "g": "BTH",
    "q": "BTHK",
    "k": "BTHK",
    "v": "BTHV",
    "do": "BTHV",
    "o": "BTHV",
    "ht": "NHKV",
    "dq": "BTHK",
    "dk": "BTHK",
    "dv": "BTHV",
    "dg": "BTH",
    "dh0": "NHKV",
}


# Drawn with GLA's values, not its structure (``strategies.simple_gla``): runtime arguments of
# every kernel, which select no binary of their own.
_GLA_RUNTIME = ("h0", "dht", "output_final_state", "scale")

_GLA_LENGTHS = {"T": "the token axis (packed: all sequences' and the padding tokens after them)"}


def _gla_measure(case: Any) -> dict[str, int]:
    return {"T": int(case.inputs["q"].shape[1])}


def _space(module: str, **dims: str) -> Callable[[str], dict[str, tuple[Any, ...]]]:
    """A family's variant space: each strategy keyword in ``dims`` with the ``LIMITS`` field of
    ``module`` it draws from, and the dtypes."""

    def space(scale: str) -> dict[str, tuple[Any, ...]]:
        import importlib

        from fuzz.arrays import FLOAT_DTYPES

        lim = importlib.import_module(module).LIMITS[scale]
        return {"dtypes": FLOAT_DTYPES, **{k: tuple(getattr(lim, f)) for k, f in dims.items()}}

    return space


def _families() -> dict[str, Family]:
    """The built-in families, by name."""
    fams = [*_softmax_families(), *_attention_families(), *_gla_families()]
    return {f.name: f for f in fams}


def _softmax_families() -> list[Family]:
    """softmax and jagged_softmax."""
    from strategies.jagged_softmax import jagged_softmax_cases
    from strategies.softmax import FEATURES as SOFTMAX_FEATURES
    from strategies.softmax import softmax_cases

    return [
        Family(
            name="softmax",
            tensors=("x",),
            outputs=("y",),
            layouts={"x": "RC", "y": "RC"},
            features=SOFTMAX_FEATURES,
            tiles=("block_m", "block_n"),
            dims=(),
            keywords=_SOFTMAX_KEYWORDS,
            values=_softmax_values,
            conventions=("empty_rows", "masked_inputs"),
            strategy=softmax_cases,
            narrowing=_softmax_narrowing,
            empty_rows=_softmax_empty,
            space=_space("strategies.softmax", block_m="block_m", block_n="block_n"),
            uses=_SOFTMAX_USES,
            drop=_SOFTMAX_DROP,
            reduce=_SOFTMAX_REDUCE,
            types=_SOFTMAX_TYPES,
        ),
        Family(
            name="jagged_softmax",
            tensors=("values",),
            outputs=("y",),
            layouts={"values": "NM", "y": "NM"},
            features=(),
            tiles=("block_n", "block_m", "num_programs"),
            dims=(),
            keywords=_JAGGED_KEYWORDS,
            values=_jagged_values,
            conventions=("masked_inputs",),
            strategy=jagged_softmax_cases,
            narrowing=_jagged_narrowing,
            space=_space("strategies.jagged_softmax", block_n="block_n", block_m="block_m"),
            guard_inputs=_jagged_guards,
            types=_JAGGED_TYPES,
            grow=_jagged_grow,
        ),
    ]


def _attention_families() -> list[Family]:
    """attention (dense), attention_varlen and attention_decode."""
    from strategies.attention import (
        DECODE_FEATURES,
        FEATURES,
        VARLEN_FEATURES,
        attention_cases,
        decode_cases,
        varlen_cases,
    )

    dense_space = _space("strategies.attention", block_pairs="block_pairs", head_dims="head_dims")
    return [
        _attention_family(
            "attention",
            FEATURES,
            ("block_q", "block_k"),
            attention_cases,
            _attention_narrowing,
            space=dense_space,
            types=_ATTN_TYPES,
        ),
        _attention_family(
            "attention_varlen",
            VARLEN_FEATURES,
            ("block_q", "block_k"),
            varlen_cases,
            _attention_narrowing,
            space=dense_space,
            always=("cu_seqlens_q", "cu_seqlens_k"),
            types=_VARLEN_TYPES,
        ),
        _attention_family(
            "attention_decode",
            DECODE_FEATURES,
            ("block_k", "num_splits"),
            decode_cases,
            _decode_narrowing,
            always=("cache_len",),
            types=_DECODE_TYPES,
            conventions=("empty_rows", "lse", "fp32_dots", "masked_inputs"),
            space=_decode_space,
        ),
    ]


def _decode_space(scale: str) -> dict[str, tuple[Any, ...]]:
    """The decode family's variant space: the dense kernels' dimensions and the split counts,
    each a compile where the kernel is built per count (a planted Pallas decode kernel whose
    bug needs two splits ran 300 examples on an H200 without meeting one: its compile share
    kept it to the one-split variants compiled first, and no warm-up compiled others)."""
    from strategies.attention import decode_splits

    space = _space("strategies.attention", blocks_k="blocks_k", head_dims="head_dims")(scale)
    return {**space, "num_splits": decode_splits(scale)}


def _gla_families() -> list[Family]:
    """simple_gla_fwd and simple_gla_bwd."""
    from strategies.simple_gla import FEATURES as GLA_FEATURES
    from strategies.simple_gla import simple_gla_bwd_cases, simple_gla_fwd_cases

    gla_space = _space("strategies.simple_gla", chunk_sizes="chunks", head_dims="dims")
    return [
        Family(
            name="simple_gla_fwd",
            tensors=("q", "k", "v"),
            outputs=("o", "ht"),
            layouts=_GLA_LAYOUTS,
            features=tuple(f for f in GLA_FEATURES if f != "dht"),
            tiles=("chunk_size",),
            dims=("K", "V"),
            conventions=("fp32_dots", "masked_inputs"),
            space=gla_space,
            keywords={k: v for k, v in _GLA_KEYWORDS.items() if k != "dht"},
            values=_gla_values,
            strategy=simple_gla_fwd_cases,
            narrowing=_gla_narrowing,
            lengths=_GLA_LENGTHS,
            measure=_gla_measure,
            uses={f: u for f, u in _GLA_USES.items() if f != "dht"},
            drop={f: d for f, d in _GLA_DROP.items() if f != "dht"},
            reduce={"multi-chunk": _gla_last_chunk},
            recast=_GLA_RECAST,
            requests={"ht": _param("output_final_state", True)},
            runtime=_GLA_RUNTIME,
            types=_GLA_TYPES,
        ),
        Family(
            name="simple_gla_bwd",
            tensors=("q", "k", "v", "do"),
            outputs=("dq", "dk", "dv", "dg", "dh0"),
            layouts=_GLA_LAYOUTS,
            features=tuple(f for f in GLA_FEATURES if f != "final_state"),
            tiles=("chunk_size",),
            dims=("K", "V"),
            conventions=("fp32_dots", "masked_inputs"),
            strategy=simple_gla_bwd_cases,
            space=gla_space,
            keywords={k: v for k, v in _GLA_KEYWORDS.items() if k != "final_state"},
            values=_gla_values,
            narrowing=_gla_narrowing,
            lengths=_GLA_LENGTHS,
            measure=_gla_measure,
            uses={f: u for f, u in _GLA_USES.items() if f != "final_state"},
            drop={f: d for f, d in _GLA_DROP.items() if f != "final_state"},
            recast=_GLA_RECAST,
            runtime=_GLA_RUNTIME,
            types=_GLA_TYPES,
        ),
    ]


_FAMILIES: dict[str, Family] = {}


def get_family(name: str) -> Family:
    """The contract of built-in family ``name`` (a clear error naming the known ones)."""
    if not _FAMILIES:
        _FAMILIES.update(_families())
    try:
        return _FAMILIES[name]
    except KeyError:
        raise ValueError(
            f"family={name!r} is not a built-in family; choose one of {sorted(_FAMILIES)}"
        ) from None


def family_names() -> list[str]:
    if not _FAMILIES:
        _FAMILIES.update(_families())
    return sorted(_FAMILIES)


# The columns of a family's kernel signature (:func:`signature`), in order.
SIGNATURE_COLUMNS = (
    "family",
    "positional inputs",
    "keywords always passed",
    "keywords passed with a feature the kernel supports",
    "keywords passed with a tile its function takes",
    "outputs (a tuple in this order, or a dict)",
    "features without a keyword",
)


def signature(family: Family) -> dict[str, tuple[str, ...]]:
    """``family``'s kernel signature, by :data:`SIGNATURE_COLUMNS`: each input, keyword and output
    with its type (``Family.types``), as ``fuzz.fuzz_kernel``'s kernel receives and returns them.

    A feature's keywords are passed to a kernel that supports the feature
    (``Capabilities.features`` names it, or is None: all of them), each followed by the
    feature's name where the two differ; a tile's, to a kernel whose function takes it (a
    ``**kwargs`` function: where ``Capabilities.tiles`` declares it). The last column holds the
    features that pass nothing of their own: they change what the tensors hold (their shapes or
    values; ``non-default values`` of an always-passed keyword).
    """
    types = family.types
    always = family.keywords.get(None, ())

    def typed(name: str, sep: str = ": ", label: str = "") -> str:
        label = label or name
        return f"{label}{sep}{types[name]}" if name in types else label

    def keywords(kinds: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(
            typed(kw, label=kw if kw == key else f"{kw} ({key})")
            for key, names in family.keywords.items()
            if key in kinds
            for kw in names
        )

    columns = (
        (family.name,),
        tuple(typed(t, " ") for t in family.tensors),
        tuple(typed(kw) for kw in always),
        keywords(family.features),
        keywords(family.tiles),
        tuple(typed(o, " ") for o in family.outputs),
        tuple(
            f"{f} (non-default values)" if f in always else f
            for f in family.features
            if not family.keywords.get(f)
        ),
    )
    return dict(zip(SIGNATURE_COLUMNS, columns, strict=True))


def family_of(target: Any) -> Family | None:
    """The built-in family whose strategy ``target`` draws from, None for a family not built in.
    A built-in target, its mutants and its reformulations share the family's strategy function
    (``attention_decode_lse_merge`` is of family ``attention`` but draws decode cases), also
    through wrappers that say what they wrap (``__wrapped__``); a plugin's target builds its own
    around it and is found by its family's name."""
    import inspect

    names = family_names()
    strategy = inspect.unwrap(target.strategy)  # a campaign worker's checking wrapper
    for name in names:
        if get_family(name).strategy is strategy:
            return get_family(name)
    for key in (target.name, target.mutant_of, target.family):
        if key in names:
            return get_family(key)
    return None


def variant_space(target: Any, scale: str) -> dict[str, tuple[Any, ...]]:
    """The compile-time dimensions of ``target``'s cases at ``scale`` (``Family.space``), each
    narrowed to what the target's kernel supports (a plugin's capabilities); empty for a family
    that is not built in."""
    fam = family_of(target)
    if fam is None:
        return {}
    space = fam.space(scale)
    for k, v in (getattr(target.strategy, "narrowing", None) or {}).items():
        if k in space and v is not None:
            space[k] = tuple(v)
    return space


def contract_problems(target: Any, case: Case) -> list[str]:
    """Why ``case`` lies outside what ``target``'s strategy ever draws (a hand-edited
    reproducer: integer data, a negative tile), so that a failure on it would say nothing about
    the kernel; empty where nothing is wrong or nothing is known. Checked: the case's ``dtype``
    is one the target is fuzzed with; for a target of a built-in family, each of the family's
    tensors is of that dtype and each tile parameter a positive integer."""
    from fuzz.arrays import FLOAT_DTYPES, dtype_name

    problems = []
    dtype = case.params.get("dtype")
    allowed = tuple(variant_space(target, "small").get("dtypes", FLOAT_DTYPES))
    if dtype is not None and dtype not in allowed:
        problems.append(f"params['dtype']={dtype!r} is not one of {allowed}")
    fam = family_of(target)
    if fam is None:
        return problems
    for name in fam.tensors:
        a = case.inputs.get(name)
        if a is not None and dtype is not None and dtype_name(a.dtype) != dtype:
            problems.append(f"input {name} is {dtype_name(a.dtype)}, not the case's {dtype}")
    for tile in fam.tiles:
        v = case.params.get(tile)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
            problems.append(f"params[{tile!r}]={v!r} is not a positive integer")
    return problems
