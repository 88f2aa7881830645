"""Which Triton binaries a target's cases would compile, without a GPU: whether any length
selects a new one.

Triton compiles a kernel once per *specialization key*: the ``tl.constexpr`` values, each
argument's type (an integer is ``i32`` or ``i64`` by its value), and, for the arguments not in
``do_not_specialize``, whether an integer is 1 or a multiple of 16 and whether a pointer is
16-byte aligned; plus the launch options (``num_warps``, ``num_stages``). The project's kernels
are declared with ``kernels._triton_jit.jit_any_size`` so that lengths and outer strides are
runtime values; whether a target really compiles once per kernel variant also depends on its
wrapper (a constexpr or a launch option computed from a length) and on the harness's own buffers
(a view whose alignment follows a length).

Here every ``JITFunction.run`` (``kernel[grid](...)``) computes the key Triton's CUDA backend
would compute for its arguments (an sm90 target: no driver needed) and returns without
launching; the target's entry is called with CPU tensors laid out as the harness lays them out
(inputs in fresh allocations, as on a GPU; outputs in ``TorchAdapter`` guard buffers). Cases are
grouped by everything but their lengths (params, input dtypes, head dims, which inputs are
present): within a group every launch of a kernel must have one key.

``python -m fuzz.devtools.triton_keys`` prints it for every target;
``tests/kernels/test_triton_specialization.py`` checks the family targets.
"""

from __future__ import annotations

import collections
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fuzz.backends import TorchAdapter
from fuzz.families import family_of
from fuzz.target import Target, draw_cases, generate, select

_binders: dict[int, Any] = {}


def _backend() -> Any:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    return make_backend(GPUTarget("cuda", 90, 32))


@contextlib.contextmanager
def recording_keys(into: list[tuple[str, tuple[str, ...], tuple[Any, ...]]]) -> Iterator[None]:
    """Inside it, a compiled launch appends ``(kernel, argument names, key)`` to ``into`` and
    returns without running (its outputs are left as they were)."""
    from triton.runtime.jit import JITFunction, create_function_from_signature

    backend = _backend()
    original = JITFunction.run

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        binder = _binders.get(id(self))
        if binder is None:
            binder = create_function_from_signature(self.signature, self.params, backend)
            _binders[id(self)] = binder
        _, specialization, options = binder(*args, **kwargs)
        key = (*specialization, str(backend.parse_options(dict(options))))
        into.append((self.fn.__qualname__, tuple(p.name for p in self.params), key))

    JITFunction.run = run  # type: ignore[method-assign]
    try:
        yield
    finally:
        JITFunction.run = original  # type: ignore[method-assign]


@dataclass
class Keys:
    """What a target's launches would compile, per kernel and group of cases (everything but
    their lengths): each key with the input shapes that selected it."""

    target: str
    groups: dict[tuple[str, str], dict[tuple[Any, ...], set[Any]]] = field(
        default_factory=lambda: collections.defaultdict(lambda: collections.defaultdict(set))
    )
    names: dict[str, tuple[str, ...]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def recompiles(self) -> list[str]:
        """One line per kernel and group with more than one key: which arguments differ."""
        lines = []
        for (kernel, group), keys in sorted(self.groups.items()):
            if len(keys) < 2:
                continue
            ks = list(keys)
            names = (*self.names[kernel], "options")
            differ = [i for i in range(len(ks[0])) if len({k[i] for k in ks}) > 1]
            what = "; ".join(
                f"{names[i] if i < len(names) else i}: {sorted({repr(k[i]) for k in ks})}"
                for i in differ
            )
            shapes = [sorted(keys[k])[0] for k in ks]
            lines.append(f"{self.target} {kernel}: {len(ks)} binaries ({what}) {group} {shapes}")
        return lines

    @property
    def varied(self) -> int:
        """Groups whose cases had more than one set of shapes (where lengths were tested)."""
        return sum(1 for keys in self.groups.values() if len(set().union(*keys.values())) > 1)


def _group(target: Target, case: Any) -> str:
    """What selects a binary besides lengths: the params and the inputs' dtypes and head dims,
    less what the family draws with the values (``Family.runtime``: an initial state present or
    not, a flag), which a reused structure meets too and which therefore must not select one."""
    fam = family_of(target)
    head_axes = set(fam.dims) if fam is not None else set()
    runtime = set(fam.runtime) if fam is not None else set()
    dims = []
    for name, a in sorted(case.inputs.items()):
        if name in runtime:
            continue
        axes = fam.layouts.get(name) if fam is not None else None
        head = tuple(n for ax, n in zip(axes or (), a.shape, strict=False) if ax in head_axes)
        dims.append([name, str(a.dtype), list(head)])
    params = {k: v for k, v in case.params.items() if k not in runtime}
    return json.dumps([params, dims], sort_keys=True, default=repr)


def target_keys(target: Target, *, scale: str, examples: int, seed: int = 0) -> Keys:
    """The Triton keys of ``examples`` cases of ``target`` (its ``triton`` entry)."""
    out = Keys(target.name)
    for case in draw_cases(target, scale, examples, seed):
        _record(target, case, out, _group(target, case))
    return out


def reused_keys(target: Target, *, scale: str, examples: int, seed: int = 0) -> Keys:
    """The Triton keys of ``examples`` cases of ``target`` drawn as a campaign's fuzzing draws
    them: through a ``strategies.reuse.StructureMemo`` that reuses launched variants with fresh
    lengths and values, grouped by the memo's variant (a case's structure less its lengths).
    Within a variant every launch of a kernel must have one key: that is what makes a reuse
    cost no compile. Unlike :func:`target_keys`' grouping, nothing about the family need be
    declared: whatever the strategy draws outside the structure (values, flags, optional
    inputs) varies within a group (an absent initial state's stride selected a binary of the
    GLA kernels of its own, and a GPU campaign's reuses compiled it)."""
    from strategies.reuse import StructureMemo

    memo = StructureMemo(explore=0.3, fresh_lengths=True, seed=seed)
    out = Keys(target.name)

    def body(case: Any) -> None:
        variant = memo.drawn_variant()
        try:
            if variant is not None:
                group = json.dumps(case.params.get("dtype"), default=repr) + " " + variant
                _record(target, case, out, group)
        finally:
            memo.observe(0.0, 0.001)

    with memo.active():
        generate(target.strategy(scale), body, examples=examples, seed=seed)
    return out


def _record(target: Target, case: Any, out: Keys, group: str) -> None:
    """Adds the keys of ``case``'s launches to ``out`` under ``group``."""
    import torch

    adapter = TorchAdapter("cpu")
    entry = target.kernels["triton"]
    # Fresh allocations (a GPU's inputs are copies); outputs as the harness allocates them.
    inputs = {k: adapter.put(v).clone() for k, v in case.inputs.items()}
    outputs = target.outputs(case) if target.outputs is not None else None
    bufs = (
        {k: adapter.alloc(tuple(s), d, 0.0).array for k, (s, d) in outputs.items()}
        if outputs is not None and target.library.writes_out
        else None
    )
    launches: list[tuple[str, tuple[str, ...], tuple[Any, ...]]] = []
    with recording_keys(launches), torch.no_grad():
        try:
            entry(inputs, dict(case.params), out=bufs, interpret=False)
        except Exception as e:  # a wrapper that reads what a launch wrote: what it got to
            out.errors.append(f"{type(e).__name__}: {e}"[:200])
    shapes = tuple(sorted((k, tuple(a.shape)) for k, a in case.inputs.items()))
    for kernel, names, key in launches:
        out.names[kernel] = names
        out.groups[(kernel, group)][key].add(shapes)


def triton_targets(patterns: str = "*", *, mutants: bool = False) -> list[Target]:
    """The targets with a project Triton kernel (real ones; with ``mutants``, theirs too)."""
    chosen = select(patterns, mutants=None if mutants else False)
    return [t for t in chosen if "triton" in t.kernels and t.source == "builtin"]
