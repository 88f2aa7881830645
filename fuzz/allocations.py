"""What a plugin's kernel allocates itself, poisoned and guarded.

The harness's own entry points write into outputs it allocates (``Target.kernels``' ``out``):
poisoned before each launch and surrounded by guard bands (``fuzz.backends``). A plugin's kernel
allocates its outputs itself, so the same is done where it allocates:

* **torch** (:func:`torch_allocations`): inside the scope, ``torch.empty``, ``empty_like``,
  ``empty_strided``, ``Tensor.new_empty`` (filled with the launch's poison: NaN for the clean run,
  ``-7.75`` for the repeat, ``-0x5A5A`` for integers) and ``torch.zeros``, ``zeros_like``,
  ``Tensor.new_zeros`` return views into buffers with ``GUARD_ELEMENTS`` guard elements before and
  after, holding a NaN with a payload no arithmetic produces. After the call,
  :meth:`TorchAllocations.report` names every buffer whose guards changed: a store past the end
  of an output (or of a scratch buffer) is an out-of-bounds write, not a corruption of whatever
  memory lay beyond. Outputs keep their strides (``empty_like`` of a permuted tensor is permuted
  too) and stay contiguous where they were: only the storage around them grows.
* **Pallas in interpret mode** (:func:`pallas_guards`): inside the scope, ``pallas_call``
  (reached as ``jax.experimental.pallas.pallas_call``, as JAX's own ops call it) allocates each
  output whose ``out_specs`` block shape is given one block larger along every axis (one element
  along a squeezed one), past the end of the output's last block. The kernel sees the same blocks
  and the same grid; a block index past the end, or a store through a whole-array ref past it,
  lands in that guard region instead of being clamped onto the last block (what the interpreter
  does with an out-of-range ``dynamic_update_slice``), and the guard region must still hold the
  interpreter's initial value (NaN, the smallest integer) after the call. Not covered: outputs
  without a block shape (the kernel sees the whole array: enlarging it would change what the
  kernel sees), calls through ``grid_spec`` or with aliased inputs, stores past the end of a block
  inside it (the interpreter clamps them within the block, where they overwrite valid elements:
  an accuracy or nondeterminism finding), a NaN written past the end, and the compiled backend
  (``pallas-gpu``: the initial contents of an output there are not known).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuzz.arrays import dtype_name, holds_nan
from fuzz.backends import GUARD_ELEMENTS, POISON_NAN

_GUARDED_FLOATS = ("float32", "float16", "bfloat16", "float64")
_GUARDED_INTS = ("int32", "int64", "int16")


def _where(off: int, span: int) -> str:
    """Where a changed guard element ``off`` elements from a buffer's first element lies."""
    if off < 0:
        return f"{-off} element(s) before its start"
    if off >= span:
        return f"{off - span + 1} element(s) past its end"
    return f"element {off} of its span, between the elements it holds"


# torch ---------------------------------------------------------------------------------------------


@dataclass
class _Buffer:
    """One guarded allocation: its storage, the view handed out and where that view lies."""

    storage: Any
    shape: tuple[int, ...]  # the view handed out (a library may resize it later)
    strides: tuple[int, ...]
    span: int  # elements from the view's first element to one past its last
    label: str


@dataclass
class TorchAllocations:
    """What the library allocated inside :func:`torch_allocations` (guarded buffers)."""

    fill: float
    buffers: list[_Buffer] = field(default_factory=list)

    def report(self, outputs: Mapping[str, Any]) -> dict[str, list[str]]:
        """Every guarded buffer whose guards changed: ``{label: [where, ...]}``, a buffer that an
        output of ``outputs`` (by name) lives in labelled ``output <name>``."""
        import torch

        owners: dict[int, str] = {}
        for name, t in outputs.items():
            if isinstance(t, torch.Tensor):
                with contextlib.suppress(Exception):
                    owners.setdefault(t.untyped_storage().data_ptr(), f"output {name}")
        changed = [self._changed(buf) for buf in self.buffers]
        if not changed:
            return {}
        hits = [False] * len(changed)
        by_device: dict[Any, list[int]] = {}
        for i, c in enumerate(changed):
            by_device.setdefault(c.device, []).append(i)
        for idx in by_device.values():  # one sync per device, not per buffer
            flags = torch.stack([changed[i].any() for i in idx]).cpu().tolist()
            for i, hit in zip(idx, flags, strict=True):
                hits[i] = hit
        found: dict[str, list[str]] = {}
        for buf, mask, hit in zip(self.buffers, changed, hits, strict=True):
            if not hit:
                continue
            offsets = torch.nonzero(mask).flatten().cpu().numpy()
            label = owners.get(buf.storage.untyped_storage().data_ptr(), buf.label)
            where = [_where(int(o) - GUARD_ELEMENTS, buf.span) for o in offsets[:8]]
            found[label] = [f"{offsets.size} element(s) changed; first: {where[0]}", *where[1:]]
        return found

    @staticmethod
    def _changed(buf: _Buffer) -> Any:
        """bool over ``buf``'s storage: guard elements whose bits changed."""
        import torch

        from fuzz.backends import _torch_guard

        pattern, as_int = _torch_guard(dtype_name(buf.storage.dtype))
        now = buf.storage.view(as_int) if as_int is not None else buf.storage
        outside = torch.ones(now.numel(), dtype=torch.bool, device=now.device)
        if buf.span == math.prod(buf.shape):  # dense: the guards are the two ends
            outside[GUARD_ELEMENTS : GUARD_ELEMENTS + buf.span] = False
        else:
            torch.as_strided(outside, buf.shape, buf.strides, GUARD_ELEMENTS).fill_(False)
        return (now != pattern) & outside


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _shape(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, ...] | None:
    """The size argument of a ``torch.empty``-style call (varargs ints or one sequence)."""
    if "size" in kwargs:
        args = (kwargs.pop("size"),)
    if len(args) == 1 and not isinstance(args[0], int):
        try:
            return tuple(int(n) for n in args[0])
        except TypeError:
            return None
    if all(isinstance(n, int) for n in args):
        return tuple(int(n) for n in args)
    return None


# Keywords a guarded allocation understands; any other (out=, pin_memory=True, a sparse layout,
# requires_grad=True...) leaves the call to torch, poisoned but unguarded.
_PLAIN = ("dtype", "device", "layout", "memory_format", "requires_grad", "pin_memory")


class _TorchAllocator:
    """The allocation functions of one :func:`torch_allocations` scope: each returns a guarded
    view (:meth:`guarded`) where the dtype and keywords allow, else torch's own allocation,
    poisoned unless zeroed."""

    def __init__(self, torch: Any, state: TorchAllocations, empty: Callable[..., Any]) -> None:
        from fuzz.backends import _torch_guard

        self.torch, self.state, self.empty = torch, state, empty
        self._guard = _torch_guard

    def poison(self, t: Any) -> Any:
        """``t`` filled with the scope's poison where its type holds one
        (``fuzz.backends.poison_tensor``: never raises for a type torch allocated)."""
        from fuzz.backends import poison_tensor

        return poison_tensor(t, self.state.fill)

    def guarded(
        self,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: Any,
        device: Any,
        zero: bool,
        label: str,
    ) -> Any | None:
        """A view of ``shape`` and ``strides`` into new storage with guard elements before and
        after it (recorded in the scope's state), zeroed or poisoned; None for a dtype that is
        not guarded."""
        torch = self.torch
        name = dtype_name(dtype)
        if name not in _GUARDED_FLOATS + _GUARDED_INTS:
            return None
        span = (
            1 + sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) if all(shape) else 0
        )
        storage = self.empty(span + 2 * GUARD_ELEMENTS, dtype=dtype, device=device)
        pattern, as_int = self._guard(name)
        with torch.no_grad():
            (storage.view(as_int) if as_int is not None else storage).fill_(pattern)
            view = torch.as_strided(storage, shape, strides, GUARD_ELEMENTS)
            if zero:
                view.zero_()
            else:
                self.poison(view)
        self.state.buffers.append(
            _Buffer(storage, tuple(shape), tuple(strides), span, f"{label} {list(shape)} {name}")
        )
        return view

    def plain(self, kwargs: dict[str, Any]) -> bool:
        """Whether an allocation's keywords are all a guarded one understands (``_PLAIN``)."""
        torch = self.torch
        if set(kwargs) - set(_PLAIN) or kwargs.get("requires_grad") or kwargs.get("pin_memory"):
            return False
        if kwargs.get("layout") not in (None, torch.strided):
            return False
        fmt = kwargs.get("memory_format")
        return fmt in (None, torch.contiguous_format, torch.preserve_format)

    def device_of(self, kwargs: dict[str, Any]) -> Any:
        """The device an allocation with keywords ``kwargs`` goes to."""
        torch = self.torch
        dev = kwargs.get("device")
        if dev is not None:
            return torch.device(dev)
        get = getattr(torch, "get_default_device", None)
        return torch.device("cpu") if get is None else get()

    def new(self, fn_name: str, original: Callable[..., Any], zero: bool) -> Callable[..., Any]:
        """``torch.empty`` or ``torch.zeros`` (``original``), guarded."""
        torch = self.torch

        def call(*args: Any, **kwargs: Any) -> Any:
            shape = _shape(args, dict(kwargs))
            kw = {k: v for k, v in kwargs.items() if k != "size"}
            if shape is not None and self.plain(kw):
                dtype = kw.get("dtype") or torch.get_default_dtype()
                t = self.guarded(
                    shape, _contiguous(shape), dtype, self.device_of(kw), zero, f"torch.{fn_name}"
                )
                if t is not None:
                    return t
            t = original(*args, **kwargs)
            return t if zero else self.poison(t)

        return call

    def like(self, fn_name: str, original: Callable[..., Any], zero: bool) -> Callable[..., Any]:
        """``torch.empty_like`` or ``torch.zeros_like`` (``original``), guarded, with the
        strides torch would give."""
        torch = self.torch

        def call(x: Any, *args: Any, **kwargs: Any) -> Any:
            if not args and self.plain(kwargs) and isinstance(x, torch.Tensor):
                dtype = kwargs.get("dtype") or x.dtype
                device = torch.device(kwargs["device"]) if kwargs.get("device") else x.device
                fmt = kwargs.get("memory_format")
                if fmt == torch.contiguous_format:
                    strides = _contiguous(tuple(x.shape))
                else:  # torch's rule, without allocating: the strides of a meta tensor
                    strides = tuple(original(x, dtype=dtype, device="meta").stride())
                t = self.guarded(tuple(x.shape), strides, dtype, device, zero, f"torch.{fn_name}")
                if t is not None:
                    return t
            t = original(x, *args, **kwargs)
            return t if zero else self.poison(t)

        return call

    def strided(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``torch.empty_strided`` (``original``), guarded."""
        torch = self.torch

        def call(*args: Any, **kwargs: Any) -> Any:
            size = kwargs.get("size", args[0] if args else None)
            stride = kwargs.get("stride", args[1] if len(args) > 1 else None)
            kw = {k: v for k, v in kwargs.items() if k not in ("size", "stride")}
            if size is not None and stride is not None and len(args) <= 2 and self.plain(kw):
                dtype = kw.get("dtype") or torch.get_default_dtype()
                t = self.guarded(
                    tuple(int(n) for n in size),
                    tuple(int(s) for s in stride),
                    dtype,
                    self.device_of(kw),
                    False,
                    "torch.empty_strided",
                )
                if t is not None:
                    return t
            return self.poison(original(*args, **kwargs))

        return call

    def method(self, zero: bool, original: Callable[..., Any]) -> Callable[..., Any]:
        """``Tensor.new_empty`` or ``Tensor.new_zeros`` (``original``), guarded."""
        torch = self.torch
        name = "new_zeros" if zero else "new_empty"

        def call(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            shape = _shape(args, dict(kwargs))
            kw = {k: v for k, v in kwargs.items() if k != "size"}
            if shape is not None and self.plain(kw):
                dtype = kw.get("dtype") or tensor.dtype
                device = torch.device(kw["device"]) if kw.get("device") else tensor.device
                t = self.guarded(shape, _contiguous(shape), dtype, device, zero, f"Tensor.{name}")
                if t is not None:
                    return t
            t = original(tensor, *args, **kwargs)
            return t if zero else self.poison(t)

        return call


@contextlib.contextmanager
def torch_allocations(fill: float = POISON_NAN) -> Iterator[TorchAllocations]:
    """Inside it, memory the library allocates uninitialized holds the poison ``fill`` (floats;
    integers ``-0x5A5A``), and float and int32/int64 buffers (uninitialized or zeroed) are views
    into storage with guard elements before and after: :meth:`TorchAllocations.report` says
    which changed."""
    import torch

    state = TorchAllocations(fill)
    saved = {n: getattr(torch, n) for n in ("empty", "empty_like", "empty_strided", "zeros")}
    saved["zeros_like"] = torch.zeros_like
    saved_new = torch.Tensor.new_empty
    saved_new_zeros = torch.Tensor.new_zeros
    alloc = _TorchAllocator(torch, state, saved["empty"])
    patched = {
        "empty": alloc.new("empty", saved["empty"], False),
        "zeros": alloc.new("zeros", saved["zeros"], True),
        "empty_like": alloc.like("empty_like", saved["empty_like"], False),
        "zeros_like": alloc.like("zeros_like", saved["zeros_like"], True),
        "empty_strided": alloc.strided(saved["empty_strided"]),
    }
    for n, fn in patched.items():
        setattr(torch, n, fn)
    torch.Tensor.new_empty = alloc.method(False, saved_new)  # type: ignore[method-assign]
    torch.Tensor.new_zeros = alloc.method(True, saved_new_zeros)  # type: ignore[method-assign]
    try:
        yield state
    finally:
        for n, fn in saved.items():
            setattr(torch, n, fn)
        torch.Tensor.new_empty = saved_new  # type: ignore[method-assign]
        torch.Tensor.new_zeros = saved_new_zeros  # type: ignore[method-assign]


# Pallas ---------------------------------------------------------------------------------------------


@dataclass
class PallasGuards:
    """What the ``pallas_call`` outputs of one call wrote past their ends (:func:`pallas_guards`),
    and the calls left unguarded (why)."""

    found: dict[str, list[str]] = field(default_factory=dict)
    unguarded: list[str] = field(default_factory=list)

    def report(self) -> dict[str, list[str]]:
        import jax

        jax.effects_barrier()  # the guard checks run as callbacks of the computation
        return dict(self.found)


_ACTIVE: list[PallasGuards] = []
_NAN_INIT: list[bool] = []  # whether interpret mode starts outputs as NaN (probed once)


def _interpret_inits_nan(original: Callable[..., Any]) -> bool:
    """Whether an output a Pallas kernel never writes holds NaN in interpret mode (as JAX 0.10's
    interpreter initializes it); the guard regions are checked against that."""
    if not _NAN_INIT:
        import jax
        import jax.numpy as jnp

        def nothing(o_ref: Any) -> None:
            del o_ref

        try:
            out = original(nothing, jax.ShapeDtypeStruct((8,), jnp.float32), interpret=True)()
            _NAN_INIT.append(bool(np.isnan(np.asarray(out)).all()))
        except Exception:
            _NAN_INIT.append(False)
    return _NAN_INIT[0]


def _block(dim: Any) -> int | None:
    """The block size of one axis of a block shape (1 for a squeezed axis), None where unknown."""
    if dim is None:
        return 1
    if isinstance(dim, int):
        return dim
    if "Squeezed" in type(dim).__name__:
        return 1
    size = getattr(dim, "block_size", None)
    if type(dim).__name__ == "Blocked" and isinstance(size, int):
        return size
    return None


def _record(label: str, shape: tuple[int, ...], full: tuple[int, ...]) -> Callable[..., None]:
    """The host callback of one guarded output: records how many guard elements were written."""

    def record(count: Any, first: Any) -> None:
        counts, firsts = np.atleast_1d(np.asarray(count)), np.atleast_1d(np.asarray(first))
        if not _ACTIVE or not counts.sum():
            return
        i = int(np.flatnonzero(counts)[0])
        index = np.unravel_index(int(firsts.reshape(-1)[i]), full)
        past = [
            f"axis {a} at {int(j)} (size {n})"
            for a, (j, n) in enumerate(zip(index, shape, strict=True))
            if j >= n
        ]
        _ACTIVE[-1].found[label] = [
            f"{int(counts.sum())} element(s) written past its end; first at "
            f"{[int(j) for j in index]}: " + ", ".join(past)
        ]

    return record


def _checked(got: Any, plans: list[Any]) -> Any:
    """The outputs of a guarded ``pallas_call``, cut back to their shapes, each guard region
    checked by a host callback (:func:`_record`)."""
    import jax
    import jax.numpy as jnp

    outs, out_tree = jax.tree_util.tree_flatten(got)
    res = []
    for out, plan in zip(outs, plans, strict=True):
        if plan is None:
            res.append(out)
            continue
        shape, ends, full, label = plan
        outside = jnp.zeros(full, bool)
        for axis, end in enumerate(ends):
            outside = outside | (jax.lax.broadcasted_iota(jnp.int32, full, axis) >= end)
        if jnp.issubdtype(out.dtype, jnp.floating):
            written = outside & ~jnp.isnan(out)
        else:
            written = outside & (out != jnp.iinfo(out.dtype).min)
        jax.debug.callback(
            _record(label, shape, full), written.sum(), jnp.argmax(written.reshape(-1))
        )
        res.append(out[tuple(slice(0, n) for n in shape)])
    return jax.tree_util.tree_unflatten(out_tree, res)


def _guarded_call(original: Callable[..., Any]) -> Callable[..., Any]:
    """``pallas_call`` with guard regions around the outputs that have block shapes (interpret
    mode only; see the module docstring)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def is_shape(x: Any) -> bool:
        return hasattr(x, "shape") and hasattr(x, "dtype")

    def call(kernel: Any, out_shape: Any = None, *args: Any, **kwargs: Any) -> Any:
        name = kwargs.get("name") or getattr(kernel, "__name__", "kernel")
        why = None
        if out_shape is None or args:
            why = "positional arguments"
        elif not kwargs.get("interpret"):
            why = "compiled"
        elif kwargs.get("grid_spec") is not None or kwargs.get("input_output_aliases"):
            why = "grid_spec or aliased outputs"
        elif not _NAN_INIT or not _NAN_INIT[0]:
            why = "the interpreter does not start outputs as NaN"
        shapes, tree = jax.tree_util.tree_flatten(out_shape, is_leaf=is_shape)
        specs = kwargs.get("out_specs")
        if isinstance(specs, pl.BlockSpec) or specs is None:
            spec_list = [specs] * len(shapes)
        else:
            spec_list = jax.tree_util.tree_leaves(
                specs, is_leaf=lambda x: isinstance(x, pl.BlockSpec)
            )
        if why is None and len(spec_list) != len(shapes):
            why = "out_specs do not match out_shape"
        if why is not None:
            if _ACTIVE:
                _ACTIVE[-1].unguarded.append(f"pallas_call {name!r}: {why}")
            return original(kernel, out_shape, *args, **kwargs)
        new_shapes: list[Any] = []
        plans: list[Any] = []
        for i, (sds, spec) in enumerate(zip(shapes, spec_list, strict=True)):
            shape = tuple(int(n) for n in sds.shape)
            block = getattr(spec, "block_shape", None)
            found = [] if block is None else [_block(b) for b in block]
            # (a float without NaN cannot tell its initial poison from a value written)
            numeric = (
                jnp.issubdtype(sds.dtype, jnp.floating) and holds_nan(dtype_name(sds.dtype))
            ) or jnp.issubdtype(sds.dtype, jnp.integer)
            blocks = [b for b in found if b is not None]
            if block is None or len(blocks) != len(shape) or not numeric:
                new_shapes.append(sds)
                plans.append(None)
                continue
            ends = tuple(math.ceil(n / b) * b for n, b in zip(shape, blocks, strict=True))
            full = tuple(e + b for e, b in zip(ends, blocks, strict=True))
            new_shapes.append(jax.ShapeDtypeStruct(full, sds.dtype))
            plans.append((shape, ends, full, f"output {i} of pallas_call {name!r} {list(shape)}"))
        launch = original(kernel, jax.tree_util.tree_unflatten(tree, new_shapes), **kwargs)

        def run(*inputs: Any, **named: Any) -> Any:
            return _checked(launch(*inputs, **named), plans)

        return run

    call._fuzz_guarded = True  # type: ignore[attr-defined]
    return call


@contextlib.contextmanager
def pallas_guards() -> Iterator[PallasGuards]:
    """Inside it, ``jax.experimental.pallas.pallas_call`` in interpret mode gives the outputs it
    allocates guard regions past their ends (see the module docstring); the yielded record says
    which were written, once :meth:`PallasGuards.report` is called."""
    from jax.experimental import pallas as pl

    state = PallasGuards()
    original = pl.pallas_call
    nested = getattr(original, "_fuzz_guarded", False)
    if not nested:
        _interpret_inits_nan(original)  # probed here, never while a computation is traced
        pl.pallas_call = _guarded_call(original)
    _ACTIVE.append(state)
    try:
        yield state
    finally:
        _ACTIVE.pop()
        if not nested:
            pl.pallas_call = original
