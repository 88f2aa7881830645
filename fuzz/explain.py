"""What a failing kernel computed instead: its outputs matched against the oracle under the
mix-ups kernels of a family are often written with.

A minimal example fails its oracle; the hypotheses here are the oracle's result changed one way
at a time, each a mistake a maintainer would recognize:

- an output's values in another layout: written in one axis order and read in the declared
  one (log-sum-exps stored token-major where head-major is read, a state kept transposed);
- a parameter read to another convention than the declared one: attention's queries aligned
  top-left where bottom-right is declared (or the other way), or one key earlier or later (a
  decode query placed at the cache's length, a causal diagonal off by one), or at the
  bottom-right of the whole buffer (its padded or packed lengths) rather than of each
  sequence (causal masks, windows and ALiBi distances all move with the query's position); a
  window's ``(left, right)`` read as ``(right, left)``; a boolean mask read with the opposite
  polarity (True: masked out, as ``key_padding_mask``);
- attention's log-sum-exp in the other base (times log2 e: a kernel keeping its logits in log2
  units; or divided by it).

An example is *explained* by a hypothesis where every output of the kernel matches the
hypothesis's outputs within the bounds the oracle check uses (the case's own bounds, computed
for the moved queries where they move, the permuted bounds of a permuted output), and it did
not match the oracle. The explanation is checked on the whole kernel call, not on its wrong
elements alone: a kernel whose lse rows are each some other row's by chance does not match a
layout hypothesis on its other elements.

Two rows of one target whose minimal examples are explained by the same hypothesis are one bug
(``fuzz.duplicates``): a layout mix-up met through a query with no key under a causal mask,
under a window and in an empty sequence is one mistake, whichever free choice each example drew
(three rows of a planted varlen kernel on an H200). Two bugs that scale values differently (the
two-bug softmax) match no hypothesis: nothing joins them here. The finding's message names the
explanation, what a maintainer reads first.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzz.compare import measure
from fuzz.properties import Context, excess

# Outputs of more axes than this are not permuted (4! orders at most).
MAX_PERMUTED_AXES = 4
LOG2E = 1.4426950408889634
# The query shifts tried, in keys (an off-by-one).
SHIFTS = (1, -1)
# Examples larger than this (``Case.size``) are not explained: a minimal example is small, and
# each hypothesis of attention is an oracle run (seconds for an unshrunk GPU case).
MAX_ELEMENTS = 1 << 16
_WITH = "every output matches the oracle with "


@dataclass(frozen=True)
class Explanation:
    """What an example's kernel call matched: ``keys``, one per hypothesis that matched (a
    small example may match several: two queries on one key under a window ``(-1, 0)`` read the
    same aligned top-left as with the window's sides swapped), compared between rows (two rows
    whose keys meet are one mistake); ``text``, what the report says."""

    keys: frozenset[str]
    text: str
    order: tuple[str, ...] = ()  # the keys in the order the hypotheses are tried
    texts: Mapping[str, str] = field(default_factory=dict, compare=False)  # each key's words

    @property
    def key(self) -> str:
        """The first hypothesis that matched (the one named first)."""
        return self.order[0] if self.order else min(self.keys)


@dataclass(frozen=True)
class _Match:
    key: str
    text: str


@dataclass(frozen=True)
class _Hypothesis:
    explanation: _Match
    outputs: Mapping[str, np.ndarray]
    bounds: Mapping[str, np.ndarray]


def explain(ctx: Context, got: Mapping[str, Any]) -> Explanation | None:
    """The hypotheses that every output in ``got`` (the kernel's outputs of ``ctx``'s case)
    matches where the oracle does not, or None. ``ctx``: the case's checking context
    (its oracle and bounds are reused)."""
    if ctx.case.size > MAX_ELEMENTS:
        return None
    names = [n for n in ctx.oracle if n in got]
    if not names:
        return None
    outputs = {n: np.asarray(got[n]) for n in names}
    failing = [n for n in names if not _matches(outputs[n], ctx.oracle[n], ctx.bound(n))]
    if not failing:
        return None  # (nothing to explain: the oracle agrees)
    matched = [
        hyp.explanation
        for hyp in _hypotheses(ctx, names, failing)
        if all(_matches(outputs[n], hyp.outputs[n], hyp.bounds[n]) for n in names)
    ]
    if not matched:
        return None
    texts = {m.key: m.text for m in reversed(matched)}
    order = tuple(dict.fromkeys(m.key for m in matched))
    return Explanation(frozenset(order), _text(order, texts), order, texts)


def holds(ctx: Context, got: Mapping[str, Any], keys: frozenset[str]) -> frozenset[str]:
    """The hypotheses of ``keys`` that ``got`` (the kernel's outputs of ``ctx``'s case, a
    neighbour of the example they explained) matches on every output: a hypothesis that
    changes nothing here holds where the kernel matches the oracle. A small example matches
    several hypotheses; what the kernel does on a neighbour that tells them apart (the family's
    ``vary``) keeps the ones that name its mistake."""
    names = [n for n in ctx.oracle if n in got]
    if not names or ctx.case.size > MAX_ELEMENTS:
        return frozenset()
    outputs = {n: np.asarray(got[n]) for n in names}
    exact = all(_matches(outputs[n], ctx.oracle[n], ctx.bound(n)) for n in names)
    tried: set[str] = set()
    kept: set[str] = set()
    for hyp in _hypotheses(ctx, names, names):
        key = hyp.explanation.key
        if key not in keys or key in tried:
            continue
        tried.add(key)
        if all(_matches(outputs[n], hyp.outputs[n], hyp.bounds[n]) for n in names):
            kept.add(key)
    return frozenset(kept | ({k for k in keys if k not in tried} if exact else set()))


def narrowed(explanation: Explanation, keys: frozenset[str]) -> Explanation | None:
    """``explanation`` with only the hypotheses of ``keys`` (None: none of them)."""
    order = tuple(k for k in explanation.order if k in keys)
    if not order:
        return None
    if order == explanation.order:
        return explanation
    texts = explanation.texts
    return Explanation(frozenset(order), _text(order, texts), order, texts)


def _text(order: tuple[str, ...], texts: Mapping[str, str]) -> str:
    """One sentence for the hypotheses ``order`` names: "every output matches the oracle with
    A, or with B" for the conventions; the others each their own."""
    picked = list(dict.fromkeys(texts[k] for k in order))
    same = [t[len(_WITH) :] for t in picked if t.startswith(_WITH)]
    others = [t for t in picked if not t.startswith(_WITH)]
    if same:
        others.append(_WITH + ", or with ".join(same))
    return "; or ".join(others)


def _matches(got: np.ndarray, want: np.ndarray, bound: np.ndarray) -> bool:
    """Whether ``got`` is ``want`` within ``bound``, element by element, its special values
    where ``want`` has them (the oracle check's comparison)."""
    if got.shape != want.shape:
        return False
    m = measure(got, want)
    if m.nonfinite_where_finite or m.special_mismatch:
        return False
    return float(excess(m.errors, bound).max(initial=0.0)) <= 1.0


def _hypotheses(ctx: Context, names: list[str], failing: list[str]) -> Iterator[_Hypothesis]:
    yield from _layouts(ctx, names, failing)
    yield from _lse_base(ctx, names, failing)
    yield from _conventions(ctx, names)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def _family(ctx: Context) -> Any:
    """The case's target's family (``fuzz.families.family_of``), or None."""
    from fuzz.families import family_of

    return family_of(ctx.target)


def _family_name(ctx: Context) -> str:
    family = _family(ctx)
    return ctx.target.family if family is None else family.name


def _axes(ctx: Context, name: str, ndim: int) -> str:
    """The axis letters of output ``name`` (its family's layout), else their numbers."""
    family = _family(ctx)
    letters = None if family is None else family.layouts.get(name)
    if letters is None or len(letters) != ndim:
        return "".join(str(i) for i in range(ndim))
    return str(letters)


def _one_changed(
    ctx: Context, names: list[str], match: _Match, name: str, output: Any, bound: Any
) -> _Hypothesis:
    """The oracle's outputs and bounds with output ``name``'s replaced by ``output`` and
    ``bound``."""
    outputs = {n: ctx.oracle[n] for n in names}
    bounds = {n: ctx.bound(n) for n in names}
    outputs[name], bounds[name] = output, bound
    return _Hypothesis(match, outputs, bounds)


def _layouts(ctx: Context, names: list[str], failing: list[str]) -> Iterator[_Hypothesis]:
    """One failing output's oracle written in another axis order and read in the declared one
    (``ascontiguousarray(a.transpose(order)).reshape(a.shape)``), the others as the oracle."""
    for name in failing:
        want = ctx.oracle[name]
        if not 2 <= want.ndim <= MAX_PERMUTED_AXES:
            continue
        bound = np.broadcast_to(ctx.bound(name), want.shape)
        letters = _axes(ctx, name, want.ndim)
        for order in itertools.permutations(range(want.ndim)):
            if order == tuple(range(want.ndim)):
                continue
            moved = np.ascontiguousarray(want.transpose(order)).reshape(want.shape)
            if _same(moved, want):
                continue  # (only axes of one element moved)
            written = ", ".join(letters[i] for i in order)
            match = _Match(
                f"layout {name} {''.join(letters[i] for i in order)}",
                f"{name} holds the oracle's values written in axis order ({written}) and "
                f"read as ({', '.join(letters)}): a layout or reshape mix-up",
            )
            moved_bound = np.ascontiguousarray(bound.transpose(order)).reshape(want.shape)
            yield _one_changed(ctx, names, match, name, moved, moved_bound)


def _lse_base(ctx: Context, names: list[str], failing: list[str]) -> Iterator[_Hypothesis]:
    """Attention's ``lse`` in the other base: the oracle's natural log-sum-exp times log2 e (a
    kernel that keeps its logits in log2 units returns base 2), or divided by it."""
    if "lse" not in failing or not _family_name(ctx).startswith("attention"):
        return
    for factor, key, text in (
        (LOG2E, "lse base2", "lse is the oracle's in base 2 (times log2 e)"),
        (1 / LOG2E, "lse over log2e", "lse is the oracle's divided by log2 e"),
    ):
        lse, bound = ctx.oracle["lse"] * factor, np.asarray(ctx.bound("lse")) * factor
        yield _one_changed(ctx, names, _Match(key, text), "lse", lse, bound)


def _other_calls(ctx: Context) -> Iterator[tuple[str, str, Any]]:
    """``(key, text, case)``: the case as a kernel written to another convention of its
    parameters reads it: for attention, the queries aligned the other way or one key later or
    earlier than declared, the window's two sides swapped; a boolean mask of the opposite
    polarity."""
    from oracles.attention import split_alignment

    case = ctx.case
    if _family_name(ctx).startswith("attention"):
        declared = str(case.params.get("align", "bottom-right"))
        base, shift = split_alignment(declared)
        other = "top-left" if base == "bottom-right" else "bottom-right"
        text = f"the queries aligned {other} (declared: {base})"
        yield f"align {other}", text, case.replace(align=other)
        for s in SHIFTS:
            n = shift + s
            moved = base if n == 0 else f"{base}{n:+d}"
            where = "later" if s > 0 else "earlier"
            text = f"each query one key {where} than {base} alignment"
            yield f"align {base}{s:+d}", text, case.replace(align=moved)
        q, k = case.inputs.get("q"), case.inputs.get("k")
        if base == "bottom-right" and q is not None and k is not None and q.ndim == k.ndim == 4:
            # Every sequence's queries at the buffer's bottom-right (its padded or packed
            # lengths) instead of the sequence's own: ``top-left`` shifted by Tk - Tq.
            d = int(k.shape[2]) - int(q.shape[2]) + shift
            text = (
                f"each sequence's queries aligned bottom-right to the whole buffer (its padded "
                f"or packed lengths: key position = query index + {d}), not to its own lengths"
            )
            yield "align buffer", text, case.replace(align=f"top-left{d:+d}")
        window = case.params.get("window")
        if isinstance(window, (list, tuple)) and len(window) == 2 and window[0] != window[1]:
            left, right = window
            text = f"the window's sides swapped: (left, right) = ({right}, {left}), not ({left}, {right})"
            yield "window sides swapped", text, case.replace(window=[right, left])
    mask = case.inputs.get("mask")
    if isinstance(mask, np.ndarray) and mask.dtype == np.bool_:
        text = "the boolean mask read with the opposite polarity (True: a key masked out)"
        yield "mask polarity", text, case.replace(inputs={"mask": ~mask})


def _conventions(ctx: Context, names: list[str]) -> Iterator[_Hypothesis]:
    """Every output as the oracle computes it for the case read to another convention
    (:func:`_other_calls`), with that case's own bounds."""
    for key, text, case in _other_calls(ctx):
        alt = Context(ctx.target, ctx.backend, case)
        try:
            outputs = {n: alt.oracle[n] for n in names}
            bounds = {n: alt.bound(n) for n in names}
        except Exception:  # a hypothesis the oracle cannot take: none
            continue
        if all(_same(outputs[n], ctx.oracle[n]) for n in names):
            continue  # (nothing that convention decides here)
        yield _Hypothesis(_Match(key, _WITH + text), outputs, bounds)
