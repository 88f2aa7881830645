"""A fence around the stores of Triton's interpreter: none lands outside its launch's buffers.

The interpreter stores through a kernel's raw pointers into host memory. A store past every
buffer of its launch lands in the process's heap: the guard bands around outputs and allocations
catch the near misses, but a store far past them corrupts the allocator, and the process aborts
later, somewhere else (a GPU campaign's worker died of SIGABRT in ``inspect.getmembers`` while
replaying a planted jagged kernel's out-of-bounds store of 2,340 elements in the interpreter: a
``crash`` row beside that bug's own ``out-of-bounds-write`` row, whose stack named the harness).

Installed once (:func:`install`), the fence takes the extent of every tensor a launch is given
(its whole allocation: the storage, guard bands included) and, at each store, drops the lanes
that would write outside all of them, noting how many and where (:func:`take`). A launch that
dropped any is an ``out-of-bounds-write`` finding (``fuzz.properties``); what it did write is
kept. Loads are fenced alike (:func:`take_loads`): a load outside every buffer reads the heap or
faults, and a planted jagged kernel reading row 0 of a values array of no rows killed the CPU
campaign's worker (SIGSEGV in the interpreter's load: a ``crash`` row of the process, unshrunk,
beside that bug's own ``out-of-bounds-write`` row); its lanes outside read the load's ``other``
value and the launch is a finding (``fuzz.properties``). A launch whose kernel stores through
pointers the fence cannot see the buffers of (loaded from a table of pointers, or made from an
integer address) is not fenced from that point: its accesses are not the kernel's fault for being
outside its arguments. Compiled launches do not pass through the interpreter's builder: nothing
changes for them.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

_state = threading.local()
_lock = threading.Lock()
_installed = False


def view_extent(a: Any) -> tuple[int, int] | None:
    """The bytes a tensor view spans: [first element, one past the last); None for what is not a
    tensor, or an empty one."""
    if not hasattr(a, "data_ptr") or not hasattr(a, "stride"):
        return None
    try:
        if a.numel() == 0:
            return None
        start = int(a.data_ptr())
        last = sum((int(n) - 1) * abs(int(s)) for n, s in zip(a.shape, a.stride(), strict=True))
        return start, start + (last + 1) * int(a.element_size())
    except Exception:
        return None


def _extent(a: Any) -> tuple[int, int] | None:
    """The bytes of ``a``'s whole allocation (its storage), else of its view."""
    try:
        storage = a.untyped_storage()
        lo = int(storage.data_ptr())
        return lo, lo + int(storage.nbytes())
    except Exception:
        return view_extent(a)


def _tensors(args: Any) -> list[Any]:
    """The tensors among a launch's arguments, those in tuples and tensor descriptors too."""
    found: list[Any] = []
    for a in args:
        if isinstance(a, (tuple, list)):
            found += _tensors(a)
        elif hasattr(a, "data_ptr"):
            found.append(a)
        elif hasattr(a, "base") and hasattr(a.base, "data_ptr"):
            found.append(a.base)  # a TensorDescriptor
    return found


def reset() -> None:
    """Forgets what this thread's launches dropped (before a launch)."""
    _state.dropped, _state.wild_loads = [], []


def take() -> list[str]:
    """What this thread's launches dropped since :func:`reset`, one line per store, and forgets
    it."""
    return _taken("dropped")


def take_loads() -> list[str]:
    """The loads outside every buffer this thread's launches made since :func:`reset`, one line
    per load, and forgets them."""
    return _taken("wild_loads")


def _taken(what: str) -> list[str]:
    """This thread's list of dropped stores or wild loads, emptied."""
    got = list(getattr(_state, what, []))
    setattr(_state, what, [])
    return got


def _outside(ptrs: Any, on: Any, size: int) -> tuple[Any, str] | None:
    """The lanes of ``ptrs`` (addresses of ``size`` bytes each) that ``on`` enables and no buffer
    of the launch holds, and where the first lies; None where there is none (or no fence)."""
    extents = getattr(_state, "extents", None)
    if not extents:
        return None
    at = np.asarray(ptrs.data).astype(np.uint64, copy=False).astype(np.int64)
    inside = np.zeros(at.shape, bool)
    for lo, hi in extents:
        inside |= (at >= lo) & (at + size <= hi)
    wild = on & ~inside
    if not wild.any():
        return None
    first = int(at[wild].flat[0])
    nearest = min(extents, key=lambda e: abs(first - e[0]))
    past = (first - nearest[1]) // size
    where = (
        f"{past + 1} element(s) past the end of the nearest buffer"
        if past >= 0
        else f"{(nearest[0] - first) // size} element(s) before it"
    )
    return wild, where


def _noted(what: str) -> list[str]:
    """This thread's list of dropped stores or wild loads (made where missing)."""
    got = getattr(_state, what, None)
    if got is None:
        got = []
        setattr(_state, what, got)
    return got


def install() -> None:
    """Fences the interpreter's loads and stores (once per process; a no-op without Triton)."""
    global _installed
    if _installed:  # (every interpreted launch calls this)
        return
    with _lock:
        if _installed:
            return
        try:
            import triton.runtime.interpreter as ti
        except Exception:
            return
        builder = ti.interpreter_builder
        store, init = builder.create_masked_store, ti.GridExecutor._init_args_hst

        def fenced_init(self: Any, args_dev: Any, kwargs: Any) -> Any:
            args_hst, kwargs_hst = init(self, args_dev, kwargs)
            extents = [_extent(a) for a in _tensors([*args_hst, *kwargs_hst.values()])]
            _state.extents = [e for e in extents if e is not None]
            return args_hst, kwargs_hst

        def fenced_store(ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
            on = np.asarray(mask.data, bool)
            out = _outside(ptrs, on, np.dtype(value.data.dtype).itemsize)
            if out is None:
                return store(ptrs, value, mask, *rest)
            wild, where = out
            _noted("dropped").append(
                f"{int(wild.sum())} of {int(on.sum())} element(s) of one store outside every "
                f"buffer of its launch (first: {where}), not written"
            )
            return store(ptrs, value, type(mask)(on & ~wild, mask.dtype), *rest)

        load, bitcast = builder.create_masked_load, builder.create_bitcast
        pointer = ti.tl.pointer_type

        def blind(dtype: Any) -> bool:
            """A pointer the fence cannot see the buffer of: loaded from memory (a table of
            pointers) or made from an integer (an address passed as a number)."""
            return isinstance(getattr(dtype, "scalar", dtype), pointer)

        def fenced_load(ptrs: Any, mask: Any, *rest: Any, **kw: Any) -> Any:
            if blind(getattr(ptrs.dtype, "element_ty", None)):
                _state.extents = []  # (the fence is off for the rest of this launch)
                return load(ptrs, mask, *rest, **kw)
            on = np.asarray(mask.data, bool)
            size = np.dtype(ti._get_np_dtype(ptrs.get_element_ty())).itemsize
            out = _outside(ptrs, on, size)
            if out is None:
                return load(ptrs, mask, *rest, **kw)
            wild, where = out
            _noted("wild_loads").append(
                f"{int(wild.sum())} of {int(on.sum())} element(s) of one load outside every "
                f"buffer of its launch (first: {where}), read as the load's other value"
            )
            return load(ptrs, type(mask)(on & ~wild, mask.dtype), *rest, **kw)

        def fenced_bitcast(src: Any, dst_type: Any) -> Any:
            if blind(dst_type) and not blind(getattr(src, "dtype", None)):
                _state.extents = []
            return bitcast(src, dst_type)

        builder.create_masked_store = fenced_store
        builder.create_masked_load = fenced_load
        builder.create_bitcast = builder.create_int_to_ptr = fenced_bitcast
        ti.GridExecutor._init_args_hst = fenced_init  # type: ignore[method-assign]
        _installed = True
