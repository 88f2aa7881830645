"""Fuzz your own kernel: the public plugin API.

A plugin is a Python file (or module) that registers kernels to fuzz; ``python -m fuzz run
--plugin my_kernels.py`` and ``pytest --plugin my_kernels.py`` load it. Each kernel is fuzzed
against one built-in family (``fuzz.families``): the family's strategies draw the cases, narrowed
to what the kernel supports, and its fp64 oracle, per-element error bound, hazards, poisoning and
properties judge them::

    import fuzz
    from my_library import flash_attention

    def attention(q, k, v, *, scale, causal):        # tensors in the layout declared below
        return flash_attention(q, k, v, softmax_scale=scale, causal=causal)   # (o, lse)

    fuzz.fuzz_kernel(
        "my_flash_attention",
        family="attention",
        kernel=attention,
        capabilities=fuzz.Capabilities(dtypes=("float16", "bfloat16"), head_dims=(64, 128),
                                       features={"causal"}),
        conventions=fuzz.Conventions(lse="base2"),
        layout=fuzz.Layout("BTHD", lse="BHT"),
    )

The kernel receives the family's tensors positionally (``Family.tensors``: torch tensors for a
Triton kernel, on the GPU or, for the interpreter, on the CPU; JAX arrays for a Pallas kernel)
and, as keywords, only what its capabilities declare (the always-present ones such as ``scale``
besides); it returns the family's outputs as a dict, a tuple in ``Family.outputs`` order, or a
single tensor. Triton kernels the library launches itself run in Triton's interpreter on the
interpreted backend, autotuned ones with one drawn config per example (``fuzz.triton_runtime``).

What the library allocates is poisoned and guarded (``fuzz.allocations``): its torch
allocations, and on ``pallas-interpret`` the outputs of its ``pallas_call``\\ s; a store past an
output's end is an ``out-of-bounds-write``. A kernel declines a case it does not support by
raising :class:`fuzz.Unsupported` (counted, never a finding); rules known up front are declared
(:class:`Lengths`, :class:`Constraint`, per backend kind) and the strategies draw within them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from fuzz.case import Case
from fuzz.failures import MASKING, Finding, Unsupported
from fuzz.families import Family, get_family
from fuzz.properties import GUARD_REPORTS, Context, Property, launch_fill
from fuzz.signatures import KnownFailure
from fuzz.target import Baselines, Library, Target, get, register

LANGUAGES = {"triton": "triton", "pallas": "pallas"}
BACKEND_KINDS = ("compiled", "interpreted")
CAUSAL = ("bottom-right", "top-left")
EMPTY_ROWS = ("zeros", "nan")
LSE = ("natural", "base2", "none", "split")
FP32_DOTS = ("ieee", "tf32", "tf32-compiled")
MASKED_INPUTS = ("any", "finite")
# The poisons of masked-out inputs a kernel that needs them finite is checked with.
FINITE_POISONS = ("max", "-max")


class PluginWarning(UserWarning):
    """A declaration that is legal but probably not what the plugin meant (said at
    registration)."""


def _tuple(name: str, value: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, set, frozenset)):
        raise ValueError(f"{name}={value!r} must be a sequence (or None)")
    value = tuple(value)
    if not value:
        raise ValueError(f"{name} must not be empty (None: everything the family draws)")
    return value


def _is_pow2(n: int) -> bool:
    return n > 0 and not n & (n - 1)


@dataclass(frozen=True)
class Lengths:
    """Which lengths of one of a family's length axes a kernel takes (``Capabilities.lengths``,
    by the family's length name: attention ``q`` and ``k``, decode ``k``, simple GLA ``T``;
    ``Family.lengths``). The strategy draws within the rule: each drawn length is mapped to the
    smallest allowed length at or above it (so shrinking still goes down), never rejected.

    Attributes:
        multiple_of: lengths are multiples of this: an int, a tile parameter of the family
            (``"block_q"``: the drawn tile of the case), or a tuple of them (their product:
            ``("num_splits", "block_k")``).
        shorter: lengths below one multiple are allowed too (a kernel that takes a tile of the
            whole length when it is shorter than one: ``block = min(block, T)``).
        power_of_two: lengths are powers of two (a lowering that needs power-of-two arrays).
        at_least: the shortest length.
        same_as: ``"q"`` for ``k``: every sequence has as many keys as queries (dense: ``Tk ==
            Tq``; packed: per sequence, with guard rows after the last one).
    """

    multiple_of: int | str | tuple[int | str, ...] = 1
    shorter: bool = False
    power_of_two: bool = False
    at_least: int = 1
    same_as: str | None = None

    def __post_init__(self) -> None:
        parts = self.multiple_of if isinstance(self.multiple_of, tuple) else (self.multiple_of,)
        for p in parts:
            if isinstance(p, bool) or not (
                (isinstance(p, int) and p >= 1) or (isinstance(p, str) and p)
            ):
                raise ValueError(
                    f"Lengths.multiple_of={self.multiple_of!r}: give an int >= 1, a tile "
                    "parameter's name, or a tuple of them"
                )
        if isinstance(self.at_least, bool) or not (
            isinstance(self.at_least, int) and self.at_least >= 0
        ):
            raise ValueError(f"Lengths.at_least={self.at_least!r} must be an int >= 0")
        if self.same_as is not None and not isinstance(self.same_as, str):
            raise ValueError(f"Lengths.same_as={self.same_as!r} must be a length name or None")

    def tiles(self) -> tuple[str, ...]:
        """The tile parameters the rule reads."""
        parts = self.multiple_of if isinstance(self.multiple_of, tuple) else (self.multiple_of,)
        return tuple(p for p in parts if isinstance(p, str))

    def unit(self, tiles: Mapping[str, Any]) -> int:
        """The multiple for a case whose tile parameters are ``tiles``."""
        parts = self.multiple_of if isinstance(self.multiple_of, tuple) else (self.multiple_of,)
        return math.prod(int(tiles[p]) if isinstance(p, str) else p for p in parts)

    def allows(self, n: int, tiles: Mapping[str, Any]) -> bool:
        """Whether length ``n`` is one the kernel takes."""
        m = self.unit(tiles)
        if n < self.at_least or (self.power_of_two and not _is_pow2(n)):
            return False
        return n % m == 0 or (self.shorter and n < m)

    def fit(self, n: int, tiles: Mapping[str, Any]) -> int:
        """The smallest length at or above ``n`` that the rule allows (``n`` itself if none
        is found: the kernel's check then declines the case)."""
        m = self.unit(tiles)
        start = max(int(n), self.at_least)
        if self.allows(start, tiles):
            return start
        if self.power_of_two:
            p = 1 << max(start - 1, 0).bit_length()
            for _ in range(64):
                if self.allows(p, tiles):
                    return p
                p *= 2
            return start
        c = -(-start // m) * m
        return c if self.allows(c, tiles) else start

    def describe(self) -> str:
        parts = []
        if self.multiple_of != 1:
            what = (
                " * ".join(map(str, self.multiple_of))
                if isinstance(self.multiple_of, tuple)
                else str(self.multiple_of)
            )
            parts.append(f"a multiple of {what}" + (" or shorter" if self.shorter else ""))
        if self.power_of_two:
            parts.append("a power of two")
        if self.at_least != 1:
            parts.append(f">= {self.at_least}")
        if self.same_as:
            parts.append(f"as long as {self.same_as} (per sequence)")
        return ", ".join(parts) or "any"


@dataclass(frozen=True)
class Constraint:
    """A rule a case must satisfy for the kernel to take it (``Capabilities.constraints``).

    ``when(case) -> bool`` sees the case as the family draws it (``case.inputs``: NumPy arrays in
    the family's layout, ``case.params``). With ``feature``, the rule conditions that feature:
    where it does not hold, the strategy draws the case without the feature (``Family.drop``:
    e.g. ``final_state`` only when the length is a multiple of the chunk). Without one, a case
    where it does not hold is declined (``unsupported: <reason>``, counted): prefer
    :class:`Lengths` or a feature rule, which the strategy draws within.

    Attributes:
        when: the predicate.
        reason: why, in a few words (the count's key, and the message of a declined case).
        feature: the optional feature the rule conditions (None: the whole case).
    """

    when: Callable[[Any], bool]
    reason: str
    feature: str | None = None

    def __post_init__(self) -> None:
        if not callable(self.when):
            raise ValueError(f"Constraint.when={self.when!r} must be callable: when(case) -> bool")
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValueError(f"Constraint.reason={self.reason!r} must be a non-empty str")
        if self.feature is not None and not isinstance(self.feature, str):
            raise ValueError(f"Constraint.feature={self.feature!r} must be a feature name or None")


@dataclass(frozen=True)
class Capabilities:
    """What a kernel supports; the family's strategies draw only that.

    Attributes:
        dtypes: input dtypes (``float32``, ``float16``, ``bfloat16``); None: all three.
        tiles: tile sizes by the family's tile parameter (``Family.tiles``: ``block_q``,
            ``block_k``, ``num_splits``, ``chunk_size``, ``block_m``, ``block_n``...), in the
            order to try them: the strategy aims lengths at their boundaries, and a kernel whose
            function takes the parameter receives the drawn one. None: the family's own.
        head_dims: head dims (attention ``D``; GLA ``K`` and ``V``); None: the family's own.
        features: the optional features supported (``Family.features``: e.g. ``causal``,
            ``window``, ``key_padding``, ``alibi``, ``softcap``, ``gqa``, ``scale`` for
            attention); None: all of them.
        backends: ``compiled`` (the GPU), ``interpreted`` (Triton's interpreter or Pallas
            interpret mode on CPU arrays), or both.
        lengths: rules on the family's lengths (:class:`Lengths`, by ``Family.lengths`` name);
            the strategy draws within them.
        constraints: further rules (:class:`Constraint`): a feature's condition, drawn within,
            or a predicate on the case, declined where it fails.
        compiled, interpreted: what differs on that backend kind: a ``Capabilities`` whose
            fields that are not None replace these (its ``constraints`` add to them; its
            ``backends`` is ignored). A lowering's rules (power-of-two arrays, matrix dims >= 16
            on the GPU) go in ``compiled``.
    """

    dtypes: Sequence[str] | None = None
    tiles: Mapping[str, Sequence[int]] | None = None
    head_dims: Sequence[int] | None = None
    features: Sequence[str] | frozenset[str] | set[str] | None = None
    backends: Sequence[str] = BACKEND_KINDS
    lengths: Mapping[str, Lengths] | None = None
    constraints: Sequence[Constraint] = ()
    compiled: Capabilities | None = None
    interpreted: Capabilities | None = None

    def __post_init__(self) -> None:
        from fuzz.arrays import FLOAT_DTYPES

        dtypes = _tuple("Capabilities.dtypes", self.dtypes)
        if dtypes is not None:
            bad = [d for d in dtypes if d not in FLOAT_DTYPES]
            if bad:
                raise ValueError(f"Capabilities.dtypes has {bad}; choose from {FLOAT_DTYPES}")
        object.__setattr__(self, "dtypes", dtypes)
        dims = _tuple("Capabilities.head_dims", self.head_dims)
        if dims is not None and not all(isinstance(d, int) and d > 0 for d in dims):
            raise ValueError(f"Capabilities.head_dims={dims!r} must be positive ints")
        object.__setattr__(self, "head_dims", dims)
        if self.tiles is not None:
            tiles = {}
            for k, v in dict(self.tiles).items():
                sizes = _tuple(f"Capabilities.tiles[{k!r}]", v)
                assert sizes is not None
                if not all(isinstance(s, int) and s > 0 for s in sizes):
                    raise ValueError(f"Capabilities.tiles[{k!r}]={sizes!r} must be positive ints")
                tiles[k] = sizes
            object.__setattr__(self, "tiles", tiles)
        if self.features is not None:
            if isinstance(self.features, str):
                raise ValueError(f"Capabilities.features={self.features!r} must be a set of names")
            object.__setattr__(self, "features", frozenset(self.features))
        backends = _tuple("Capabilities.backends", self.backends)
        bad = [b for b in backends or () if b not in BACKEND_KINDS]
        if bad or not backends:
            raise ValueError(
                f"Capabilities.backends={self.backends!r}: choose from {BACKEND_KINDS}"
            )
        object.__setattr__(self, "backends", backends)
        if self.lengths is not None:
            if not isinstance(self.lengths, Mapping):
                raise ValueError(
                    f"Capabilities.lengths={self.lengths!r} must map length names to fuzz.Lengths"
                )
            for k, rule in self.lengths.items():
                if not isinstance(rule, Lengths):
                    raise ValueError(f"Capabilities.lengths[{k!r}]={rule!r} must be a fuzz.Lengths")
            object.__setattr__(self, "lengths", dict(self.lengths))
        if isinstance(self.constraints, Constraint) or not isinstance(
            self.constraints, (Sequence, set, frozenset)
        ):
            raise ValueError(
                f"Capabilities.constraints={self.constraints!r} must be a sequence of "
                "fuzz.Constraint"
            )
        for c in self.constraints:
            if not isinstance(c, Constraint):
                raise ValueError(f"Capabilities.constraints has {c!r}: not a fuzz.Constraint")
        object.__setattr__(self, "constraints", tuple(self.constraints))
        for kind in BACKEND_KINDS:
            sub = getattr(self, kind)
            if sub is None:
                continue
            if not isinstance(sub, Capabilities):
                raise ValueError(f"Capabilities.{kind}={sub!r} must be a fuzz.Capabilities")
            if sub.compiled is not None or sub.interpreted is not None:
                raise ValueError(
                    f"Capabilities.{kind} sets compiled= or interpreted= itself: one level only"
                )

    def for_kind(self, kind: str) -> Capabilities:
        """These capabilities on backend kind ``kind`` (``compiled`` or ``interpreted``): the
        kind's own fields in place of these, its constraints added."""
        sub = getattr(self, kind)
        base = dataclasses.replace(self, compiled=None, interpreted=None)
        if sub is None:
            return base
        changes = {
            f: getattr(sub, f)
            for f in ("dtypes", "tiles", "head_dims", "features", "lengths")
            if getattr(sub, f) is not None
        }
        return dataclasses.replace(
            base, **changes, constraints=(*self.constraints, *sub.constraints)
        )

    def check(self, family: Family, where: str = "Capabilities") -> None:
        """Raises ``ValueError`` naming the field where these capabilities do not fit ``family``."""
        unknown = sorted(set(self.features or ()) - set(family.features))
        if unknown:
            raise ValueError(
                f"{where}.features has {unknown}, which family {family.name!r} does not "
                f"have; its features are {list(family.features)}"
            )
        unknown = sorted(set(self.tiles or {}) - set(family.tiles))
        if unknown:
            raise ValueError(
                f"{where}.tiles has {unknown}, which family {family.name!r} does not draw; "
                f"its tile parameters are {list(family.tiles)}"
            )
        if self.head_dims is not None and not family.dims:
            raise ValueError(f"{where}.head_dims: family {family.name!r} has no head dim")
        for name, rule in (self.lengths or {}).items():
            if name not in family.lengths:
                raise ValueError(
                    f"{where}.lengths names {name!r}; family {family.name!r} has lengths "
                    f"{list(family.lengths) or 'none'}"
                )
            bad = sorted(set(rule.tiles()) - set(family.tiles))
            if bad:
                raise ValueError(
                    f"{where}.lengths[{name!r}].multiple_of names {bad}: family "
                    f"{family.name!r}'s tile parameters are {list(family.tiles)}"
                )
            if rule.same_as is not None and (
                family.same_lengths is None or (name, rule.same_as) != ("k", "q")
            ):
                raise ValueError(
                    f"{where}.lengths[{name!r}].same_as={rule.same_as!r}: family "
                    f"{family.name!r} "
                    + (
                        "draws keys as long as queries with lengths={'k': Lengths(same_as='q')}"
                        if family.same_lengths is not None
                        else "has no such pair of lengths"
                    )
                )
        for c in self.constraints:
            if c.feature is None:
                continue
            if c.feature not in family.features:
                raise ValueError(
                    f"{where}.constraints: feature {c.feature!r} is not one of family "
                    f"{family.name!r}'s {list(family.features)}"
                )
            if c.feature not in family.drop:
                raise ValueError(
                    f"{where}.constraints: feature {c.feature!r} cannot be left out of a drawn "
                    f"case (family {family.name!r} can leave out {sorted(family.drop)}); give "
                    "the rule without feature= to decline the cases where it fails"
                )

    def tile_kwargs(self) -> dict[str, tuple[int, ...]]:
        return {k: tuple(v) for k, v in (self.tiles or {}).items()}


@dataclass(frozen=True)
class Conventions:
    """How a kernel behaves where libraries differ; the family checks it against these.

    Attributes:
        causal: where causal masking is aligned when ``Tq != Tk``: ``bottom-right`` (query i
            sees keys up to ``i + Tk - Tq``: FlashAttention 2.1+, the project's kernels) or
            ``top-left`` (keys up to ``i``: PyTorch's ``is_causal``).
        empty_rows: what a row with no valid key returns: ``zeros`` (``o = 0``, ``lse = -inf``;
            softmax ``y = 0``) or ``nan`` (as ``torch.softmax`` of a row of ``-inf``). Checked on
            exactly those rows; any other row must be right as usual.
        lse: the log-sum-exp output: ``natural``, ``base2`` (``log2 sum 2^(s log2 e)``, as
            kernels folding ``log2 e`` into the scale keep it), ``split`` (outputs ``m`` and
            ``l``, the row max and the sum of ``exp(s - m)``), or ``none`` (no such output).
        fp32_dots: how dot products of fp32 operands round them: ``ieee`` (not at all),
            ``tf32`` (to TF32, 10 explicit mantissa bits: unit roundoff 2^-11 per operand, the
            GPU's default in Triton and JAX), ``tf32-compiled`` (TF32 on the compiled backends,
            IEEE in the interpreters). The error bound then allows each dot operand's rounding
            (derived as for half inputs' rounded operands); without it, an fp32 failure within
            that bound says TF32 is the likely cause.
        masked_inputs: what masked-out inputs may hold: ``any`` (NaN, Inf, huge values: the
            masked-poison property tries all of them) or ``finite`` (the kernel multiplies a
            masked value by a zero probability, as JAX's kernels and references do: only the
            largest finite values are tried, on exactly the masked inputs).
    """

    causal: str = "bottom-right"
    empty_rows: str = "zeros"
    lse: str = "natural"
    fp32_dots: str = "ieee"
    masked_inputs: str = "any"

    def __post_init__(self) -> None:
        for name, allowed in (
            ("causal", CAUSAL),
            ("empty_rows", EMPTY_ROWS),
            ("lse", LSE),
            ("fp32_dots", FP32_DOTS),
            ("masked_inputs", MASKED_INPUTS),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"Conventions.{name}={value!r}: choose one of {allowed}")

    def check(self, family: Family) -> None:
        default = Conventions()
        for f in dataclasses.fields(self):
            name = f.name
            if getattr(self, name) != getattr(default, name) and name not in family.conventions:
                raise ValueError(
                    f"Conventions.{name}={getattr(self, name)!r} means nothing for family "
                    f"{family.name!r} (its conventions: {list(family.conventions) or 'none'})"
                )

    def of(self, family: Family) -> dict[str, str]:
        """The conventions that mean something for ``family``, by name."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k in family.conventions}

    def dots(self, kind: str) -> str:
        """How fp32 dots round on backend kind ``kind``: ``ieee`` or ``tf32``."""
        if self.fp32_dots == "tf32-compiled":
            return "tf32" if kind == "compiled" else "ieee"
        return self.fp32_dots


@dataclass(frozen=True)
class Layout:
    """How a kernel's tensors are laid out, when not as the family's (``Family.layouts``).

    ``Layout("BTHD")`` gives every tensor with the same axes as ``BTHD`` that order (the family's
    attention tensors are ``BHTD``); keywords give single tensors (``lse="BHT"``). Inputs are
    permuted (and made contiguous) before the call, outputs permuted back.
    ``pad_head_dim``: head dims are zero-padded to a multiple of this before the call and outputs
    cut back (for kernels that need, say, multiples of 8).
    """

    default: str | None = None
    pad_head_dim: int = 1
    tensors: Mapping[str, str] = field(default_factory=dict)

    def __init__(self, default: str | None = None, *, pad_head_dim: int = 1, **tensors: str):
        object.__setattr__(self, "default", default)
        object.__setattr__(self, "pad_head_dim", pad_head_dim)
        object.__setattr__(self, "tensors", dict(tensors))
        if not (isinstance(pad_head_dim, int) and pad_head_dim >= 1):
            raise ValueError(f"Layout.pad_head_dim={pad_head_dim!r} must be an int >= 1")

    def axes(self, family: Family, name: str) -> str:
        """The kernel's axis letters of tensor ``name`` (the family's where not declared)."""
        canon = family.layouts[name]
        mine = self.tensors.get(name)
        if mine is None and self.default is not None and sorted(self.default) == sorted(canon):
            mine = self.default
        return canon if mine is None else mine

    def check(self, family: Family) -> None:
        unknown = sorted(set(self.tensors) - set(family.layouts))
        if unknown:
            raise ValueError(
                f"Layout names {unknown}; family {family.name!r} has tensors "
                f"{sorted(family.layouts)}"
            )
        for name in family.layouts:
            axes, canon = self.axes(family, name), family.layouts[name]
            if sorted(axes) != sorted(canon):
                raise ValueError(
                    f"Layout of {name!r} is {axes!r}: it must order the family's axes {canon!r}"
                )
        if self.default is not None and not any(
            sorted(self.default) == sorted(c) for c in family.layouts.values()
        ):
            raise ValueError(
                f"Layout({self.default!r}) fits no tensor of family {family.name!r} "
                f"({dict(family.layouts)})"
            )


def _permute(x: Any, src: str, dst: str) -> Any:
    """``x`` with axes ``src`` reordered to ``dst`` (torch or JAX)."""
    if src == dst or x is None:
        return x
    order = [src.index(a) for a in dst]
    if hasattr(x, "permute"):
        return x.permute(*order).contiguous()
    import jax.numpy as jnp

    return jnp.transpose(x, order)


def _pad(x: Any, axes: str, dims: tuple[str, ...], multiple: int) -> Any:
    """``x`` zero-padded along its head-dim axes to a multiple of ``multiple``."""
    if multiple == 1 or x is None:
        return x
    widths = [(0, (-x.shape[i]) % multiple if a in dims else 0) for i, a in enumerate(axes)]
    if not any(w for _, w in widths):
        return x
    if hasattr(x, "permute"):
        import torch.nn.functional as tf

        flat = [v for pair in reversed(widths) for v in pair]
        return tf.pad(x, flat)
    import jax.numpy as jnp

    return jnp.pad(x, widths)


def _accepts(fn: Callable[..., Any], n_tensors: int) -> tuple[set[str], bool, list[str], list[str]]:
    """``fn``'s keyword parameters, whether it takes ``**kwargs``, its required positional
    parameters, and its required parameters the first ``n_tensors`` positional slots (the
    family's tensors) do not fill."""
    sig = inspect.signature(fn)
    names = set()
    var_kw = False
    positional, required = [], []
    slot = 0
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            var_kw = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            names.add(p.name)
        filled = False
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            filled = slot < n_tensors
            slot += 1
            if p.default is p.empty:
                positional.append(p.name)
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        if p.default is p.empty and not filled:
            required.append(p.name)
    return names, var_kw, positional, required


def _check_signature(
    kernel: Callable[..., Any],
    family: Family,
    caps: Capabilities,
    where: str = "",
    language: str = "triton",
) -> frozenset[str]:
    """The tile parameters ``kernel`` takes (it is passed the drawn ones); raises naming what
    does not fit: required positional arguments beyond the family's tensors, keywords its
    capabilities make the family pass that the function does not take, or required keywords
    they never pass. Warns (:class:`PluginWarning`) where a ``**kwargs`` kernel is not passed
    tile parameters its capabilities do not declare."""
    if not callable(kernel):
        raise ValueError(f"kernel={kernel!r} must be callable")
    try:
        names, var_kw, positional, required = _accepts(kernel, len(family.tensors))
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return frozenset()
    label = getattr(kernel, "__name__", "kernel")
    if len(positional) > len(family.tensors):
        raise ValueError(
            f"kernel {label}() requires positional arguments {positional}; family "
            f"{family.name!r} passes {list(family.tensors)} (the rest as keywords)"
        )
    feats = frozenset(family.features if caps.features is None else caps.features)
    passed = family.passed(feats, frozenset())
    missing = sorted(k for k in passed if k not in names)
    if missing and not var_kw:
        raise ValueError(
            f"kernel {label}() takes no {missing} argument(s), which Capabilities{where}.features="
            f"{sorted(feats)} make family {family.name!r} pass; add them to the function or "
            "narrow Capabilities.features"
        )
    tiles = frozenset(t for t in family.tiles if t in names or (var_kw and t in (caps.tiles or {})))
    given = {*passed, *tiles, *(("interpret",) if language == "pallas" else ())}
    never = [r for r in required if r not in given]
    if never:
        unlocks = {kw: key for key, kws in family.keywords.items() if key is not None for kw in kws}
        hints = [
            f"{r!r} (declare feature {unlocks[r]!r})"
            if r in unlocks and unlocks[r] in family.features
            else f"{r!r} (declare tile {unlocks[r]!r} in Capabilities.tiles)"
            if r in unlocks
            else f"{r!r} (family {family.name!r} has no such argument)"
            for r in never
        ]
        raise ValueError(
            f"kernel {label}() requires {', '.join(hints)}, which Capabilities{where} never "
            "make the family pass: every example would crash; declare it or give it a default"
        )
    undeclared = sorted(t for t in family.tiles if var_kw and t not in names and t not in tiles)
    if undeclared:
        warnings.warn(
            f"kernel {label}() takes **kwargs: the family's tile parameter(s) {undeclared} are "
            f"not passed to it unless declared in Capabilities{where}.tiles",
            PluginWarning,
            stacklevel=4,
        )
    return tiles


def autograd_backward(forward: Callable[..., Any]) -> Callable[..., Any]:
    """A backward kernel of the ``simple_gla_bwd`` family made from a forward one (the
    ``simple_gla_fwd`` contract) by torch autograd: gradients of ``o`` (and of ``ht`` with the
    cotangent ``dht``) with respect to ``q, k, v`` and, where given, ``g`` and the initial state.
    For libraries whose backward is reached through ``torch.autograd`` only."""

    def backward(q: Any, k: Any, v: Any, do: Any, *, dht: Any = None, **kw: Any) -> dict[str, Any]:
        import torch

        leaves: dict[str, Any] = {"q": q, "k": k, "v": v}
        for name in ("g", "initial_state"):
            if kw.get(name) is not None:
                leaves[name] = kw[name]
        leaves = {n: t.detach().clone().requires_grad_(True) for n, t in leaves.items()}
        call: dict[str, Any] = dict(kw)
        call.update({n: leaves[n] for n in ("g", "initial_state") if n in leaves})
        if dht is not None:
            call["output_final_state"] = True
        outs = forward(leaves["q"], leaves["k"], leaves["v"], **call)
        o, ht = (outs["o"], outs.get("ht")) if isinstance(outs, Mapping) else (outs[0], outs[1])
        tensors, grads = [o], [do]
        if dht is not None:
            tensors.append(ht)
            grads.append(dht)
        torch.autograd.backward(tensors, grads)
        out = {"dq": leaves["q"].grad, "dk": leaves["k"].grad, "dv": leaves["v"].grad}
        if "g" in leaves:
            out["dg"] = leaves["g"].grad
        if "initial_state" in leaves:
            out["dh0"] = leaves["initial_state"].grad
        return out

    backward.__name__ = f"autograd_backward({getattr(forward, '__name__', 'forward')})"
    return backward


def _names(family: Family, conventions: Conventions) -> tuple[str, ...]:
    """The outputs a kernel returning a tuple returns, in order."""
    if family.name.startswith("attention") and conventions.lse == "split":
        return ("o", "m", "l")
    if family.name.startswith("attention") and conventions.lse == "none":
        return ("o",)
    return family.outputs


def _outputs_of(
    got: Any, family: Family, conventions: Conventions, layout: Layout, language: str, label: str
) -> dict[str, Any]:
    """The kernel's result as the family's outputs by name (before the layout is undone and
    the conventions applied); raises naming what does not fit the family's contract.

    A tuple or a list is the outputs in order; one that is not (more values than the family has
    outputs, a value not an array of the kernel's language or of another rank: a list of rows,
    ``tolist()``) is refused with one message whatever the input's size, so that it is one bug,
    not one per number of rows."""
    names = _names(family, conventions)
    want = "torch tensors" if language == "triton" else "JAX arrays"
    if isinstance(got, Mapping):
        out = dict(got)
    elif isinstance(got, (tuple, list)) and not _is_array(got):
        fits = len(got) <= len(names) and all(
            x is None or _output_problem(x, name, family, layout, language) is None
            for name, x in zip(names, got, strict=False)
        )
        if not fits:
            raise TypeError(_sequence_refused(got, names, family, layout, want, label))
        out = dict(zip(names, got, strict=False))
    else:
        out = {names[0]: got}
    out = {k: v for k, v in out.items() if v is not None}
    for name, x in out.items():
        problem = _output_problem(x, name, family, layout, language)
        if problem == "type":
            raise TypeError(
                f"kernel {label}() returned {name} as a {type(x).__module__}.{type(x).__name__}: "
                f"a {language} kernel returns {want}"
            )
        if problem == "rank":
            mine = layout.axes(family, _layout_name(name))
            raise TypeError(
                f"kernel {label}() returned {name} with shape {list(x.shape)}; family "
                f"{family.name!r}'s {name} is [{', '.join(mine)}] in the kernel's layout: are the "
                f"outputs in the order {list(names)} (or a dict by name)?"
            )
    return out


def _layout_name(name: str) -> str:
    return "lse" if name in ("m", "l") else name


def _output_problem(x: Any, name: str, family: Family, layout: Layout, language: str) -> str | None:
    """What is wrong with output ``name`` as the kernel returned it: ``type`` (not an array of
    its language), ``rank`` (another number of dims than the family's), or None."""
    if not _is_array(x) or _framework(x) != language:
        return "type"
    axes = family.layouts.get(_layout_name(name))
    if axes is not None and len(x.shape) != len(axes):
        return "rank"
    return None


def _sequence_refused(
    got: Sequence[Any], names: Sequence[str], family: Family, layout: Layout, want: str, label: str
) -> str:
    """The one message for a tuple or list that is not the family's outputs in order."""
    kinds = sorted(
        {f"{type(x).__module__}.{type(x).__name__}".removeprefix("builtins.") for x in got}
    )
    expected = ", ".join(
        f"{n} [{', '.join(layout.axes(family, _layout_name(n)))}]"
        if _layout_name(n) in family.layouts
        else n
        for n in names
    )
    return (
        f"kernel {label}() returned a {type(got).__name__} of {len(got)} ({', '.join(kinds)}), "
        f"not the outputs of family {family.name!r}: {expected}, as {want} in the kernel's "
        "layout: one alone, a tuple or list in this order, or a dict by name"
    )


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (tuple, list))


def _framework(x: Any) -> str:
    """``triton`` for a torch tensor, ``pallas`` for a JAX array, else the type's module."""
    module = type(x).__module__.split(".")[0]
    return {"torch": "triton", "jax": "pallas", "jaxlib": "pallas"}.get(module, module)


def _conventions_applied(out: dict[str, Any], family: Family, conventions: Conventions) -> None:
    if not family.name.startswith("attention"):
        return
    if conventions.lse == "base2" and "lse" in out:
        out["lse"] = out["lse"] * math.log(2.0)
    elif conventions.lse == "split" and "m" in out and "l" in out:
        m, ell = out.pop("m"), out.pop("l")
        out["lse"] = m + (ell.log() if hasattr(ell, "log") else _jlog(ell))


def _jlog(x: Any) -> Any:
    import jax.numpy as jnp

    return jnp.log(x)


class _HostInputs(Mapping[str, Any]):
    """A launch's inputs as host NumPy arrays, converted when first read (the rules read shapes
    and small integer arrays; a large GPU tensor is never copied unless a predicate reads it)."""

    def __init__(self, inputs: Mapping[str, Any]) -> None:
        self._inputs = inputs
        self._host: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._host:
            x = self._inputs[name]
            if x is None:
                raise KeyError(name)
            if hasattr(x, "detach"):
                from fuzz.backends import TorchAdapter

                self._host[name] = TorchAdapter("cpu").get(x)
            else:
                self._host[name] = np.asarray(x)
        return self._host[name]

    def __iter__(self) -> Iterator[str]:
        return (k for k, v in self._inputs.items() if v is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _View:
    """A case's inputs and params for ``Family.values``, ``Family.measure`` and the rules."""

    def __init__(self, inputs: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        self.inputs, self.params = inputs, params


@dataclass(frozen=True)
class _KindRules:
    """A kernel's declarations resolved for one backend kind."""

    caps: Capabilities
    keywords: tuple[str, ...]
    tiles: frozenset[str]

    def check(self, family: Family, case: _View, host: _View) -> None:
        """Raises ``Unsupported`` where ``case`` (a launch's: the clean one, or one a property
        derives) is outside what was declared: the strategies draw within it, but a property
        may derive a case that is not. ``host``: the same case with host arrays, for the
        plugin's own predicates."""
        caps = self.caps
        dtype = case.params.get("dtype")
        if caps.dtypes is not None and dtype is not None and dtype not in caps.dtypes:
            raise Unsupported(f"dtype {dtype} not declared")
        for tile, sizes in (caps.tiles or {}).items():
            value = case.params.get(tile)
            if value is not None and int(value) not in sizes:
                raise Unsupported(f"{tile} not among {list(sizes)}")
        if caps.head_dims is not None and family.dims:
            for tensor in family.tensors:
                x = case.inputs.get(tensor)
                if x is None:
                    continue
                for axis, n in zip(family.layouts[tensor], x.shape, strict=False):
                    if axis in family.dims and int(n) not in caps.head_dims:
                        raise Unsupported(f"head dim {axis} not among {list(caps.head_dims)}")
        if caps.features is not None:  # a feature whose data the kernel would not be passed
            for feature, uses in family.uses.items():
                gated = feature in family.keywords or feature == "gqa"
                if gated and feature not in caps.features and uses(case):
                    raise Unsupported(f"feature {feature} not declared")
        if caps.lengths:
            measured = family.measure(case)
            tiles = case.params
            for name, rule in caps.lengths.items():
                if name in measured and not rule.allows(measured[name], tiles):
                    raise Unsupported(f"{name} length not {rule.describe()}")
                if rule.same_as and family.same_lengths is not None:
                    if not family.same_lengths(case):
                        raise Unsupported(f"{name} length not {rule.describe()}")
        for c in caps.constraints:
            if c.feature is not None and not family.uses[c.feature](case):
                continue
            try:
                holds = c.when(host)
            except Exception as e:
                raise RuntimeError(
                    f"fuzz.Constraint({c.reason!r}) raised {type(e).__name__}: {e} (its predicate "
                    "sees case.inputs, host arrays in the family's layout, and case.params)"
                ) from e
            if not holds:
                raise Unsupported(c.reason)


class _PluginKernel:
    """The harness's entry point (``Target.kernels``) around a plugin's kernel function: checks
    the case against the declarations of the launch's backend kind, converts the layout, calls
    the kernel with what the library allocates poisoned and guarded, and returns the family's
    outputs (with :data:`fuzz.properties.GUARD_REPORTS`)."""

    def __init__(
        self,
        kernel: Callable[..., Any],
        family: Family,
        rules: Mapping[str, _KindRules],
        conventions: Conventions,
        layout: Layout,
        language: str,
    ) -> None:
        self.kernel, self.family, self.rules = kernel, family, dict(rules)
        self.conventions, self.layout, self.language = conventions, layout, language
        self.label = getattr(kernel, "__name__", "kernel")
        self.__name__ = f"plugin entry of {self.label}()"

    def supports(self, feature: str, interpret: bool) -> bool:
        """Whether the kernel declares optional ``feature`` on the interpreted (or compiled)
        backend kind (a property deriving a launch for a sibling asks)."""
        rules = self.rules.get("interpreted" if interpret else "compiled")
        features = None if rules is None else rules.caps.features
        return features is None or feature in features

    def _to_kernel(self, name: str, x: Any) -> Any:
        fam, lay = self.family, self.layout
        if x is None or name not in fam.layouts or not _is_array(x):
            return x
        axes = lay.axes(fam, name)
        return _pad(_permute(x, fam.layouts[name], axes), axes, fam.dims, lay.pad_head_dim)

    def __call__(
        self, inputs: Mapping[str, Any], params: Mapping[str, Any], *, out: Any, interpret: bool
    ) -> dict[str, Any]:
        fam = self.family
        kind = "interpreted" if interpret else "compiled"
        rules = self.rules.get(kind) or next(iter(self.rules.values()))
        rules.check(fam, _View(inputs, params), _View(_HostInputs(inputs), params))
        given = inputs
        if fam.guard_inputs is not None and _framework(next(iter(inputs.values()))) == "triton":
            given = fam.guard_inputs(inputs, params)
        values = fam.values(_View(given, params))
        kw = {k: self._to_kernel(k, values[k]) for k in rules.keywords}
        if self.language == "pallas":
            kw["interpret"] = interpret
        args = [self._to_kernel(name, given.get(name)) for name in fam.tensors]
        with _language_scope(self.language, interpret) as guards:
            got = self.kernel(*args, **kw)
            if given is not inputs:  # (what it wrote into its guarded inputs, where it is seen)
                from fuzz.targets.jagged_softmax import write_back

                write_back(inputs, given)
            res = _outputs_of(got, fam, self.conventions, self.layout, self.language, self.label)
            notes = guards(res)
        _conventions_applied(res, fam, self.conventions)
        for name, x in list(res.items()):
            if name in fam.layouts:
                x = _permute(x, self.layout.axes(fam, name), fam.layouts[name])
                res[name] = _unpad(x, fam, name, inputs)
        res[GUARD_REPORTS] = notes
        return res


def _unpad(x: Any, family: Family, name: str, inputs: Mapping[str, Any]) -> Any:
    """Output ``x`` (canonical layout) cut back to the unpadded head dims."""
    axes = family.layouts[name]
    if not any(a in family.dims for a in axes):
        return x
    sizes = {}
    for tname in family.tensors:
        t = inputs.get(tname)
        if t is None:
            continue
        for a, n in zip(family.layouts[tname], t.shape, strict=True):
            if a in family.dims:
                sizes[a] = n
    index = tuple(slice(0, sizes[a]) if a in sizes else slice(None) for a in axes)
    return x[index]


@contextlib.contextmanager
def _language_scope(language: str, interpret: bool) -> Iterator[Callable[[Mapping[str, Any]], Any]]:
    """Around a plugin kernel's call: its torch allocations poisoned with the launch's poison and
    guarded; on the interpreted Triton backend, Triton's interpreter for every launch the library
    makes; on the interpreted Pallas backend, guard regions around its ``pallas_call`` outputs.
    Yields ``report(outputs) -> {buffer: [where, ...]}``, what was written outside them."""
    from fuzz import allocations

    with contextlib.ExitStack() as stack:
        torch_state = None
        try:
            import torch  # noqa: F401
        except ImportError:
            pass
        else:
            torch_state = stack.enter_context(allocations.torch_allocations(launch_fill()))
        pallas_state = None
        if interpret and language == "triton":
            stack.enter_context(_interpreting())
        if interpret and language == "pallas":
            pallas_state = stack.enter_context(allocations.pallas_guards())

        def report(outputs: Mapping[str, Any]) -> dict[str, list[str]]:
            found: dict[str, list[str]] = {}
            if torch_state is not None:
                found.update(torch_state.report(outputs))
            if pallas_state is not None:
                found.update(pallas_state.report())
            return found

        yield report


def _interpreting() -> Any:
    """Triton's interpreter for every launch a library makes (``fuzz.triton_runtime``)."""
    import importlib

    return importlib.import_module("fuzz.triton_runtime").interpreting()


def fuzz_kernel(
    name: str,
    *,
    family: str,
    kernel: Callable[..., Any],
    language: str = "triton",
    capabilities: Capabilities | None = None,
    conventions: Conventions | None = None,
    layout: Layout | None = None,
    siblings: Mapping[str, Callable[..., Any] | Target] | None = None,
    properties: Sequence[Property] = (),
    disable: Mapping[str, str] | None = None,
    known_failures: Sequence[KnownFailure] = (),
    description: str = "",
) -> Target:
    """Registers ``kernel`` to be fuzzed as a ``family`` kernel; returns its target.

    Args:
        name: the target's name (letters, digits, ``_``, ``-``, ``.``).
        family: a built-in family (``fuzz.families.family_names()``).
        kernel: the kernel function (see the module docstring for how it is called). It may
            raise :class:`fuzz.Unsupported` to decline a case (counted, never a finding).
        language: ``triton`` (torch tensors; backends ``triton``, ``triton-interpret``) or
            ``pallas`` (JAX arrays, called with ``interpret=``; ``pallas-gpu``,
            ``pallas-interpret``).
        capabilities: what it supports (:class:`Capabilities`); None: everything.
        conventions: how it behaves where libraries differ (:class:`Conventions`).
        layout: its tensor layout where not the family's (:class:`Layout`).
        siblings: the library's kernels of other families that a property compares with (e.g.
            ``{"attention": dense}`` for decode's "a decode step is the last row of a causal
            prefill"): the target ``fuzz_kernel`` returned for that kernel (its own
            capabilities, conventions and layout apply), or a kernel function (taken with this
            kernel's declarations); a property whose sibling is missing is switched off, and
            ``python -m fuzz list`` says so.
        properties: extra :class:`fuzz.Property` checks.
        disable: generic or family properties switched off, each with the reason (e.g.
            ``{"determinism": "atomic adds in the backward: order-dependent by design"}``).
        known_failures: failures the library knows about (:class:`fuzz.KnownFailure`, e.g. fp32
            dots computed in TF32): matching examples are counted as known and never end a hunt,
            so the kernel's other bugs are still searched for.
        description: one line for listings.

    Raises:
        ValueError: naming the field, for an unknown family, capability, convention or layout,
            an impossible combination, or a kernel whose signature does not fit.
    """
    fam = get_family(family)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
        raise ValueError(f"name={name!r} must be letters, digits, '_', '-' or '.'")
    if language not in LANGUAGES:
        raise ValueError(f"language={language!r}: choose one of {sorted(LANGUAGES)}")
    caps = capabilities if capabilities is not None else Capabilities()
    conv = conventions if conventions is not None else Conventions()
    lay = layout if layout is not None else Layout()
    for what, value, cls in (
        ("capabilities", caps, Capabilities),
        ("conventions", conv, Conventions),
        ("layout", lay, Layout),
    ):
        if not isinstance(value, cls):
            raise ValueError(f"{what}={value!r} must be a fuzz.{cls.__name__}")
    conv.check(fam)
    lay.check(fam)
    rules = _rules(kernel, fam, caps, language)
    base = get(fam.name)
    strategy = _narrowed_strategy(fam, rules, conv)
    entry = _PluginKernel(kernel, fam, rules, conv, lay, language)
    sibling_entries = _sibling_entries(fam, siblings or {}, caps, conv, lay, language)
    disabled = dict(disable or {})
    for prop, sibling in SIBLING_PROPERTIES.get(fam.name, {}).items():
        if sibling_entries.get(sibling) is None:
            disabled.setdefault(prop, f"no siblings[{sibling!r}] kernel given to compare with")
    known = tuple(known_failures)
    for k in known:
        if not isinstance(k, KnownFailure):
            raise ValueError(f"known_failures has {k!r}; each must be a fuzz.KnownFailure")
    target = _build_target(
        name,
        fam,
        base,
        entry,
        language,
        caps,
        conv,
        strategy,
        sibling_entries,
        properties,
        disabled,
        description,
        {kind: r.caps for kind, r in rules.items()},
    )
    if known:
        for k in known:
            k.check(target)
        target = dataclasses.replace(
            target, library=dataclasses.replace(target.library, known_failures=known)
        )
    return register(target)


def _rules(
    kernel: Callable[..., Any], fam: Family, caps: Capabilities, language: str
) -> dict[str, _KindRules]:
    """The kernel's declarations resolved for each backend kind it runs on, each checked."""
    rules = {}
    for kind in caps.backends:
        where = f".{kind}" if getattr(caps, kind) is not None else ""
        resolved = caps.for_kind(kind)
        resolved.check(fam, f"Capabilities{where}")
        tiles = _check_signature(kernel, fam, resolved, where, language)
        feats = frozenset(fam.features if resolved.features is None else resolved.features)
        rules[kind] = _KindRules(resolved, fam.passed(feats, tiles), tiles)
    return rules


# Family properties that compare a kernel with another kernel of its library, by the family of
# that sibling: they run the plugin's own kernels, never the project's.
SIBLING_PROPERTIES = {"attention_decode": {"decode-equals-last-causal-row": "attention"}}


def _sibling_entries(
    fam: Family,
    siblings: Mapping[str, Callable[..., Any] | Target],
    caps: Capabilities,
    conv: Conventions,
    lay: Layout,
    language: str,
) -> dict[str, Any]:
    """The harness's entries around a plugin's sibling kernels, and None for each sibling family
    a property needs but the plugin did not give. A sibling given as its own target brings its
    own declarations (capabilities, conventions, layout: its entry checks and declines what it
    does not support); a function is taken with this kernel's (the features the sibling's family
    has of the kernel's)."""
    needed = set(SIBLING_PROPERTIES.get(fam.name, {}).values())
    unknown = sorted(set(siblings) - needed)
    if unknown:
        raise ValueError(
            f"siblings names {unknown}; family {fam.name!r} compares with "
            f"{sorted(needed) or 'no other kernel'}"
        )
    out: dict[str, Any] = {n: None for n in needed}
    for sib_name, kernel in siblings.items():
        if isinstance(kernel, Target):
            impl = LANGUAGES[language]
            if kernel.family != sib_name or impl not in kernel.kernels:
                raise ValueError(
                    f"siblings[{sib_name!r}] is target {kernel.name!r} of family "
                    f"{kernel.family!r} in {sorted(kernel.kernels)}: give a {language} kernel of "
                    f"family {sib_name!r}"
                )
            out[sib_name] = kernel.kernels[impl]
            continue
        sib = get_family(sib_name)
        own = set(fam.features if caps.features is None else caps.features)
        sib_caps = Capabilities(
            dtypes=caps.dtypes,
            head_dims=caps.head_dims,
            features=own & set(sib.features) | {"causal"},
            backends=caps.backends,
        )
        out[sib_name] = _PluginKernel(
            kernel, sib, _rules(kernel, sib, sib_caps, language), conv, lay, language
        )
    return out


def _narrowed_strategy(
    fam: Family, rules: Mapping[str, _KindRules], conv: Conventions
) -> Callable[..., Any]:
    """The family's strategy narrowed to a kernel's capabilities on a backend kind (the hunt's:
    ``kind=("compiled",)``; without one, the compiled kind's where the kernel runs compiled),
    drawing within its length and feature rules, its cases carrying the conventions the oracle
    and the bounds read (the causal alignment as ``align``, TF32 dots as ``fp32_dots``)."""
    strategy = fam.strategy
    default = "compiled" if "compiled" in rules else next(iter(rules))

    def narrowing(kind: str) -> dict[str, Any]:
        caps = rules[kind].caps
        kw = {
            k: (frozenset(v) if k == "features" and v is not None else v)
            for k, v in fam.narrowing(caps).items()
            if v is not None
        }
        if caps.lengths:
            kw["lengths"] = {n: r.fit for n, r in caps.lengths.items()}
            if any(r.same_as for r in caps.lengths.values()):
                kw["same_lengths"] = True
        return kw

    def params(kind: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if conv.causal != Conventions().causal:
            out["align"] = conv.causal
        if conv.dots(kind) != "ieee":
            out["fp32_dots"] = conv.dots(kind)
        return out

    def make(scale: str, kind: tuple[str, ...] | None = None, **more: Any) -> Any:
        """The family's cases narrowed to the kernel's capabilities on ``kind`` (and to
        ``more``: a run's own narrowing within them)."""
        k = default if not kind else kind[0]
        if k not in rules:
            k = default
        constraints = [c for c in rules[k].caps.constraints if c.feature is not None]
        extra = params(k)
        cases = strategy(scale, **{**narrowing(k), **more})

        def within(case: Case) -> Case:
            for c in constraints:
                if fam.uses[c.feature](case) and not c.when(case):  # type: ignore[index]
                    case = fam.drop[c.feature](case)  # type: ignore[index]
            return case.replace(**extra) if extra else case

        return cases.map(within) if constraints or extra else cases

    make.__name__ = f"{fam.name}_cases"
    make.narrowing = narrowing(default)  # type: ignore[attr-defined]
    make.per_kind = True  # type: ignore[attr-defined]
    return make


def _masked_poison_finite() -> Property:
    """The masked-poison property for a kernel whose masked inputs must be finite: the same
    check (on exactly the masked inputs) with the largest finite values only."""
    from fuzz.properties import _masked_poison

    return Property(
        "masked-poison",
        _masked_poison,
        st.sampled_from(FINITE_POISONS),
        applies=lambda ctx: ctx.target.poison is not None,
        description="the largest finite values in masked-out inputs change no output bit "
        "(declared: masked inputs are finite)",
    )


def _build_target(
    name: str,
    fam: Family,
    base: Target,
    entry: Callable[..., Any],
    language: str,
    caps: Capabilities,
    conv: Conventions,
    strategy: Callable[[str], Any],
    siblings: Mapping[str, Any],
    properties: Sequence[Property],
    disable: Mapping[str, str],
    description: str,
    capabilities: Mapping[str, Capabilities],
) -> Target:
    oracle, naive = base.oracle, base.naive
    extra: list[Property] = list(properties)
    if conv.empty_rows != "zeros" and fam.empty_rows is not None:
        oracle, naive, prop = _empty_rows_convention(fam, conv, base)
        extra.append(prop)
    if conv.masked_inputs == "finite" and all(p.name != "masked-poison" for p in extra):
        extra.append(_masked_poison_finite())
    outputs = base.outputs
    if fam.name.startswith("attention") and conv.lse == "none":
        oracle, naive = _without(oracle, "lse"), _without(naive, "lse")
        outputs = _without_output(base.outputs, "lse")
    backends = tuple(
        b
        for kind in caps.backends
        for b in (
            (language if language == "triton" else "pallas-gpu",)
            if kind == "compiled"
            else (f"{language}-interpret",)
        )
    )
    return dataclasses.replace(
        base,
        name=name,
        family=fam.name,
        kernels={LANGUAGES[language]: entry},
        oracle=oracle,
        naive=naive,
        strategy=strategy,
        properties=(*base.properties, *extra),
        outputs=outputs,
        description=description or f"{fam.name} kernel {name}",
        source="builtin",
        library=Library(
            backends=backends,
            writes_out=False,
            autotune=language == "triton",
            conventions=conv.of(fam),
            siblings=dict(siblings),
            disabled=dict(disable),
            allocates=True,
            capabilities=dict(capabilities),
        ),
        baselines=Baselines(),
        mutant=None,
    )


def _without(
    fn: Callable[[Case, str], Mapping[str, np.ndarray]], output: str
) -> Callable[..., Any]:
    def wrapped(case: Case, device: str) -> dict[str, np.ndarray]:
        return {k: v for k, v in fn(case, device).items() if k != output}

    return wrapped


def _without_output(fn: Callable[[Case], Any] | None, output: str) -> Callable[[Case], Any] | None:
    if fn is None:
        return None
    return lambda case: {k: v for k, v in fn(case).items() if k != output}


def _empty_rows_convention(
    fam: Family, conv: Conventions, base: Target
) -> tuple[Any, Any, Property]:
    """The ``empty_rows`` convention: the oracle and the naive reference say NaN there (the
    oracle comparison skips such elements), and a property checks the kernel says what the
    convention says."""
    assert fam.empty_rows is not None
    empty_rows = fam.empty_rows

    def mark(fn: Callable[[Case, str], Mapping[str, np.ndarray]]) -> Callable[..., Any]:
        def wrapped(case: Case, device: str) -> dict[str, np.ndarray]:
            out = dict(fn(case, device))
            for k, mask in empty_rows(case).items():
                if k in out and mask.any():
                    a = np.array(out[k], copy=True)
                    a[mask] = np.nan
                    out[k] = a
            return out

        return wrapped

    def check(ctx: Context, _: Any) -> Finding | None:
        for k, mask in empty_rows(ctx.case).items():
            got = ctx.clean.outputs.get(k)
            if got is None or not mask.any():
                continue
            g = np.asarray(got, np.float64) if got.dtype.kind == "f" else got.astype(np.float64)
            wrong = mask & ~np.isnan(g)
            if wrong.any():
                idx = tuple(int(i) for i in np.argwhere(wrong)[0])
                return ctx.finding(
                    MASKING,
                    "empty-rows-convention",
                    f"{k}[{', '.join(map(str, idx))}] = {g[idx]:.6g} in a row with no valid key; "
                    f"the declared convention is {conv.empty_rows}",
                    output=k,
                    index=idx,
                    kernel_value=float(g[idx]),
                )
        return None

    prop = Property(
        "empty-rows-convention",
        check,
        description=f"rows with no valid key return {conv.empty_rows} (declared)",
    )
    return mark(base.oracle), mark(base.naive), prop
