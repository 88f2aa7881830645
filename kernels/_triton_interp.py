"""An interpreted twin of a ``@triton.jit`` kernel, in the same process as the compiled one.

``TRITON_INTERPRET=1`` switches every kernel of a process to Triton's interpreter at decoration
time. To hold the compiled and the interpreted version of one kernel source side by side (the
compiled-vs-interpreted differential, and CPU runs in a process that also compiles), we build the
twin explicitly with ``triton.runtime.interpreter.InterpretedFunction``.

That alone is not enough: inside an interpreted body, calls to other ``@triton.jit`` functions
(the kernel's own helpers, and standard-library functions such as ``tl.zeros`` or ``tl.max``,
which are jit functions too) reach ``JITFunction.__call__``, which only raises. While one of our
interpreted launches runs, that call is routed to the callee's own interpreted twin.
"""

from __future__ import annotations

import threading
from typing import Any

import triton.runtime.interpreter as _interpreter
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

_twins: dict[int, InterpretedFunction] = {}
_active = threading.local()
_original_call = JITFunction.__call__


def _twin(kernel: JITFunction) -> InterpretedFunction:
    twin = _twins.get(id(kernel))
    if twin is None or twin.fn is not kernel.fn:
        twin = InterpretedFunction(kernel.fn)
        _twins[id(kernel)] = twin
    return twin


def _lang_key(fn: Any) -> frozenset[int]:
    """The language modules a function sees (what ``_patch_lang`` patches for it)."""
    tl, core = _interpreter.tl, _interpreter.tl.core
    return frozenset(id(v) for v in fn.__globals__.values() if v is tl or v is core)


class _LaunchScope:
    """The patches of one interpreted launch: the launch's own (made by the interpreter for the
    kernel's module) and those made for the helpers and standard-library functions it calls,
    each set of language modules patched once. ``restore`` undoes the nested ones first, in
    reverse order, then the launch's own, so every attribute gets its original back."""

    def __init__(self, own: Any, fn: Any) -> None:
        self.own = own
        self.nested: dict[frozenset[int], Any] = {_lang_key(fn): None}

    def restore(self) -> None:
        for scope in reversed([s for s in self.nested.values() if s is not None]):
            scope.restore()
        self.nested.clear()
        _active.launch = None
        self.own.restore()


_original_patch_lang = _interpreter._patch_lang


def _patch_lang(fn: Any) -> Any:
    scope = _original_patch_lang(fn)
    if getattr(_active, "depth", 0) and getattr(_active, "launch", None) is None:
        # The interpreter patching for one of our launches: track the nested patches with it.
        _active.launch = _LaunchScope(scope, fn)
        return _active.launch
    return scope


_interpreter._patch_lang = _patch_lang


def _call(self: JITFunction, *args: Any, **kwargs: Any) -> Any:
    if getattr(_active, "depth", 0) == 0:
        return _original_call(self, *args, **kwargs)
    # InterpretedFunction.__call__ patches the callee's language modules (tl.core for the
    # standard library) with interpreter builtins and never restores them: in a process that also
    # compiles kernels, the next compilation would then trace interpreter builtins. So the patch
    # lasts until the end of the launch (and each set of modules is patched once per launch:
    # patching costs far more than most interpreted operations).
    twin = _twin(self)
    launch = getattr(_active, "launch", None)
    if launch is None:  # not inside a launch's patches: patch for the duration of the call
        scope = _original_patch_lang(twin.fn)
        try:
            return twin.rewrite()(*args, **kwargs)
        finally:
            scope.restore()
    key = _lang_key(twin.fn)
    if key not in launch.nested:
        launch.nested[key] = _original_patch_lang(twin.fn)
    return twin.rewrite()(*args, **kwargs)


JITFunction.__call__ = _call  # type: ignore[method-assign]

# The interpreter holds a scalar as a one-element 1-D array and converts it with ``int(array)``
# (``range(0, n, BLOCK)`` over a runtime ``n``), which NumPy >= 2.4 refuses for ndim > 0.
_original_patch_tensor = _interpreter._patch_lang_tensor


def _patch_lang_tensor(tensor: Any, scope: Any) -> None:
    _original_patch_tensor(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))


_interpreter._patch_lang_tensor = _patch_lang_tensor


class _Launcher:
    def __init__(self, twin: InterpretedFunction, grid: Any) -> None:
        self._twin = twin
        self._grid = grid

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _active.depth = getattr(_active, "depth", 0) + 1
        outer = getattr(_active, "launch", None)
        _active.launch = None
        try:
            return self._twin[self._grid](*args, **kwargs)
        finally:
            _active.depth -= 1
            _active.launch = outer


class Interpreted:
    """``kernel[grid](...)`` like a ``JITFunction``, run by Triton's interpreter."""

    def __init__(self, kernel: JITFunction) -> None:
        self.kernel = kernel
        self.twin = _twin(kernel)

    def __getitem__(self, grid: Any) -> _Launcher:
        return _Launcher(self.twin, grid)


_interpreted: dict[int, Interpreted] = {}


def interpreted(kernel: JITFunction) -> Interpreted:
    """Returns the interpreted twin of ``kernel`` (cached); it runs on CPU tensors."""
    if not isinstance(kernel, JITFunction):
        raise TypeError(f"kernel must be a @triton.jit function, got {type(kernel).__name__}")
    twin = _interpreted.get(id(kernel))
    if twin is None or twin.kernel is not kernel:
        twin = Interpreted(kernel)
        _interpreted[id(kernel)] = twin
    return twin
