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
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzz.case import Case
from fuzz.failures import MASKING, Finding
from fuzz.families import Family, get_family
from fuzz.properties import Context, Property
from fuzz.signatures import KnownFailure
from fuzz.target import Baselines, Library, Target, get, register

LANGUAGES = {"triton": "triton", "pallas": "pallas"}
BACKEND_KINDS = ("compiled", "interpreted")
CAUSAL = ("bottom-right", "top-left")
EMPTY_ROWS = ("zeros", "nan")
LSE = ("natural", "base2", "none", "split")


def _tuple(name: str, value: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, set, frozenset)):
        raise ValueError(f"{name}={value!r} must be a sequence (or None)")
    value = tuple(value)
    if not value:
        raise ValueError(f"{name} must not be empty (None: everything the family draws)")
    return value


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
    """

    dtypes: Sequence[str] | None = None
    tiles: Mapping[str, Sequence[int]] | None = None
    head_dims: Sequence[int] | None = None
    features: Sequence[str] | frozenset[str] | set[str] | None = None
    backends: Sequence[str] = BACKEND_KINDS

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

    def check(self, family: Family) -> None:
        """Raises ``ValueError`` naming the field where these capabilities do not fit ``family``."""
        unknown = sorted(set(self.features or ()) - set(family.features))
        if unknown:
            raise ValueError(
                f"Capabilities.features has {unknown}, which family {family.name!r} does not "
                f"have; its features are {list(family.features)}"
            )
        unknown = sorted(set(self.tiles or {}) - set(family.tiles))
        if unknown:
            raise ValueError(
                f"Capabilities.tiles has {unknown}, which family {family.name!r} does not draw; "
                f"its tile parameters are {list(family.tiles)}"
            )
        if self.head_dims is not None and not family.dims:
            raise ValueError(f"Capabilities.head_dims: family {family.name!r} has no head dim")

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
    """

    causal: str = "bottom-right"
    empty_rows: str = "zeros"
    lse: str = "natural"

    def __post_init__(self) -> None:
        for name, allowed in (("causal", CAUSAL), ("empty_rows", EMPTY_ROWS), ("lse", LSE)):
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"Conventions.{name}={value!r}: choose one of {allowed}")

    def check(self, family: Family) -> None:
        default = Conventions()
        for name in ("causal", "empty_rows", "lse"):
            if getattr(self, name) != getattr(default, name) and name not in family.conventions:
                raise ValueError(
                    f"Conventions.{name}={getattr(self, name)!r} means nothing for family "
                    f"{family.name!r} (its conventions: {list(family.conventions) or 'none'})"
                )


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


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Inside it, memory a library allocates uninitialized (``torch.empty``, ``empty_like``,
    ``empty_strided``, ``Tensor.new_empty``) holds NaN (floats) or ``-0x5A5A`` (ints): an output
    or scratch buffer read before it is written shows, as the harness's own outputs do when they
    are poisoned before each launch."""
    import torch

    saved = {n: getattr(torch, n) for n in ("empty", "empty_like", "empty_strided")}
    saved_new = torch.Tensor.new_empty

    def poison(t: Any) -> Any:
        if t.is_floating_point():
            t.fill_(float("nan"))
        elif t.dtype not in (torch.bool,) and not t.is_complex():
            info = torch.iinfo(t.dtype)  # a pattern the type holds (int8: -0x5B, uint8: 0xA5)
            t.fill_(-0x5A5A if info.min <= -0x5A5A else (-0x5B if info.min < 0 else 0xA5))
        return t

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *a, **k: poison(fn(*a, **k))

    for n, fn in saved.items():
        setattr(torch, n, wrap(fn))
    torch.Tensor.new_empty = lambda self, *a, **k: poison(saved_new(self, *a, **k))  # type: ignore[method-assign]
    try:
        yield
    finally:
        for n, fn in saved.items():
            setattr(torch, n, fn)
        torch.Tensor.new_empty = saved_new  # type: ignore[method-assign]


def _accepts(fn: Callable[..., Any]) -> tuple[set[str], bool, list[str]]:
    """``fn``'s keyword parameters, whether it takes ``**kwargs``, and its required positional
    parameters."""
    sig = inspect.signature(fn)
    names = set()
    var_kw = False
    positional = []
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            var_kw = True
        elif p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            names.add(p.name)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            positional.append(p.name)
    return names, var_kw, positional


def _check_signature(
    kernel: Callable[..., Any], family: Family, caps: Capabilities
) -> frozenset[str]:
    """The tile parameters ``kernel`` takes (it is passed the drawn ones); raises naming what
    does not fit: required positional arguments beyond the family's tensors, or keywords its
    capabilities make the family pass that the function does not take."""
    if not callable(kernel):
        raise ValueError(f"kernel={kernel!r} must be callable")
    try:
        names, var_kw, positional = _accepts(kernel)
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return frozenset()
    label = getattr(kernel, "__name__", "kernel")
    if len(positional) > len(family.tensors):
        raise ValueError(
            f"kernel {label}() requires positional arguments {positional}; family "
            f"{family.name!r} passes {list(family.tensors)} (the rest as keywords)"
        )
    feats = frozenset(family.features if caps.features is None else caps.features)
    missing = sorted(k for k in family.passed(feats, frozenset()) if k not in names)
    if missing and not var_kw:
        raise ValueError(
            f"kernel {label}() takes no {missing} argument(s), which Capabilities.features="
            f"{sorted(feats)} make family {family.name!r} pass; add them to the function or "
            "narrow Capabilities.features"
        )
    return frozenset(t for t in family.tiles if t in names or (var_kw and t in (caps.tiles or {})))


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


def _outputs_of(got: Any, family: Family, conventions: Conventions) -> dict[str, Any]:
    """The kernel's result as the family's outputs by name (conventions applied)."""
    if isinstance(got, Mapping):
        out = dict(got)
    elif isinstance(got, (tuple, list)):
        names = family.outputs
        if family.name.startswith("attention") and conventions.lse == "split":
            names = ("o", "m", "l")
        elif family.name.startswith("attention") and conventions.lse == "none":
            names = ("o",)
        out = dict(zip(names, got, strict=False))
    else:
        out = {family.outputs[0]: got}
    out = {k: v for k, v in out.items() if v is not None}
    if family.name.startswith("attention"):
        if conventions.lse == "base2" and "lse" in out:
            out["lse"] = out["lse"] * math.log(2.0)
        elif conventions.lse == "split":
            m, ell = out.pop("m"), out.pop("l")
            out["lse"] = m + (ell.log() if hasattr(ell, "log") else _jlog(ell))
    return out


def _jlog(x: Any) -> Any:
    import jax.numpy as jnp

    return jnp.log(x)


def _entry(
    kernel: Callable[..., Any],
    family: Family,
    caps: Capabilities,
    conventions: Conventions,
    layout: Layout,
    tiles: frozenset[str],
    language: str,
) -> Callable[..., Any]:
    """The harness's entry point (``Target.kernels``) around a plugin's kernel function."""
    feats = frozenset(family.features if caps.features is None else caps.features)
    keywords = family.passed(feats, tiles)

    def run(
        inputs: Mapping[str, Any], params: Mapping[str, Any], *, out: Any, interpret: bool
    ) -> dict[str, Any]:
        values = family.values(_CaseView(inputs, params))
        kw = {k: values[k] for k in keywords}
        if language == "pallas":
            kw["interpret"] = interpret
        args = []
        for name in family.tensors:
            x = inputs.get(name)
            if x is not None:
                axes = layout.axes(family, name)
                x = _pad(
                    _permute(x, family.layouts[name], axes), axes, family.dims, layout.pad_head_dim
                )
            args.append(x)
        with _language_scope(language, interpret):
            got = kernel(*args, **kw)
        res = _outputs_of(got, family, conventions)
        for name, x in list(res.items()):
            if name in family.layouts:
                x = _permute(x, layout.axes(family, name), family.layouts[name])
                res[name] = _unpad(x, family, name, inputs)
        return res

    return run


class _CaseView:
    """A case's inputs (framework arrays) and params, for ``Family.kwargs``."""

    def __init__(self, inputs: Mapping[str, Any], params: Mapping[str, Any]) -> None:
        self.inputs, self.params = inputs, params


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
def _language_scope(language: str, interpret: bool) -> Iterator[None]:
    """Around a plugin kernel's call: poisoned allocations (torch), and on the interpreted Triton
    backend, Triton's interpreter for every launch the library makes."""
    with contextlib.ExitStack() as stack:
        try:
            import torch  # noqa: F401
        except ImportError:
            pass
        else:
            stack.enter_context(poisoned_allocations())
        if interpret and language == "triton":
            stack.enter_context(_interpreting())
        yield


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
    siblings: Mapping[str, Callable[..., Any]] | None = None,
    properties: Sequence[Property] = (),
    disable: Mapping[str, str] | None = None,
    known_failures: Sequence[KnownFailure] = (),
    description: str = "",
) -> Target:
    """Registers ``kernel`` to be fuzzed as a ``family`` kernel; returns its target.

    Args:
        name: the target's name (letters, digits, ``_``, ``-``, ``.``).
        family: a built-in family (``fuzz.families.family_names()``).
        kernel: the kernel function (see the module docstring for how it is called).
        language: ``triton`` (torch tensors; backends ``triton``, ``triton-interpret``) or
            ``pallas`` (JAX arrays, called with ``interpret=``; ``pallas-gpu``,
            ``pallas-interpret``).
        capabilities: what it supports (:class:`Capabilities`); None: everything.
        conventions: how it behaves where libraries differ (:class:`Conventions`).
        layout: its tensor layout where not the family's (:class:`Layout`).
        siblings: the library's kernels of other families that a property compares with (e.g.
            ``{"attention": dense}`` for decode's "a decode step is the last row of a causal
            prefill"); a property whose sibling is missing is switched off, and
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
    import re

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
    caps.check(fam)
    conv.check(fam)
    lay.check(fam)
    tiles = _check_signature(kernel, fam, caps)
    base = get(fam.name)
    narrowing = fam.narrowing(caps)
    params = {"align": conv.causal} if conv.causal != Conventions().causal else {}
    strategy = _narrowed_strategy(fam, narrowing, params)
    entry = _entry(kernel, fam, caps, conv, lay, tiles, language)
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
    )
    if known:
        for k in known:
            k.check(target)
        target = dataclasses.replace(
            target, library=dataclasses.replace(target.library, known_failures=known)
        )
    return register(target)


# Family properties that compare a kernel with another kernel of its library, by the family of
# that sibling: they run the plugin's own kernels, never the project's.
SIBLING_PROPERTIES = {"attention_decode": {"decode-equals-last-causal-row": "attention"}}


def _sibling_entries(
    fam: Family,
    siblings: Mapping[str, Callable[..., Any]],
    caps: Capabilities,
    conv: Conventions,
    lay: Layout,
    language: str,
) -> dict[str, Any]:
    """The harness's entries around a plugin's sibling kernels (same conventions and layout; the
    features the sibling's family has of the kernel's), and None for each sibling family a
    property needs but the plugin did not give."""
    needed = set(SIBLING_PROPERTIES.get(fam.name, {}).values())
    unknown = sorted(set(siblings) - needed)
    if unknown:
        raise ValueError(
            f"siblings names {unknown}; family {fam.name!r} compares with "
            f"{sorted(needed) or 'no other kernel'}"
        )
    out: dict[str, Any] = {n: None for n in needed}
    for sib_name, kernel in siblings.items():
        sib = get_family(sib_name)
        own = set(fam.features if caps.features is None else caps.features)
        sib_caps = Capabilities(
            dtypes=caps.dtypes,
            head_dims=caps.head_dims,
            features=own & set(sib.features) | {"causal"},
            backends=caps.backends,
        )
        tiles = _check_signature(kernel, sib, sib_caps)
        out[sib_name] = _entry(kernel, sib, sib_caps, conv, lay, tiles, language)
    return out


def _narrowed_strategy(
    fam: Family, narrowing: Mapping[str, Any], params: Mapping[str, Any]
) -> Callable[..., Any]:
    """The family's strategy narrowed to a kernel's capabilities, its cases carrying ``params``
    (a convention the oracle reads: the causal alignment as ``align``)."""
    kw = {
        k: (frozenset(v) if k == "features" and v is not None else v)
        for k, v in narrowing.items()
        if v is not None
    }
    strategy = fam.strategy

    def make(scale: str, **more: Any) -> Any:
        """The family's cases narrowed to the kernel's capabilities (and to ``more``: a run's
        own narrowing within them)."""
        cases = strategy(scale, **{**kw, **more})
        return cases.map(lambda c: c.replace(**params)) if params else cases

    make.__name__ = f"{fam.name}_cases"
    make.narrowing = kw  # type: ignore[attr-defined]
    return make


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
) -> Target:
    oracle, naive = base.oracle, base.naive
    extra: list[Property] = list(properties)
    if conv.empty_rows != "zeros" and fam.empty_rows is not None:
        oracle, naive, prop = _empty_rows_convention(fam, conv, base)
        extra.append(prop)
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
            conventions=dataclasses.asdict(conv),
            siblings=dict(siblings),
            disabled=dict(disable),
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
