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

import dataclasses
import threading
import types
from typing import Any

import triton.language as tl
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


def _call(self: JITFunction, *args: Any, **kwargs: Any) -> Any:
    if getattr(_active, "depth", 0) == 0:
        return _original_call(self, *args, **kwargs)
    twin = _twin(self)
    if _langs_of(twin.fn) <= _active.patched:
        # The launch has these language modules patched already (see _Launcher).
        return twin.rewrite()(*args, **kwargs)
    # InterpretedFunction.__call__ patches the callee's language modules (tl.core for the
    # standard library) with interpreter builtins and never restores them: in a process that also
    # compiles kernels, the next compilation would then trace interpreter builtins. Patch for the
    # duration of the call only.
    scope = _interpreter._patch_lang(twin.fn)
    try:
        return twin.rewrite()(*args, **kwargs)
    finally:
        scope.restore()


def _langs_of(fn: Any) -> frozenset[int]:
    """The language modules ``_patch_lang(fn)`` patches (by id)."""
    return frozenset(id(v) for v in fn.__globals__.values() if v is tl or v is tl.core)


# A function that sees triton.language.core only: ``_patch_lang`` of it patches what the standard
# library's jit functions (tl.max, tl.sum, tl.zeros...) use.
_core_anchor = types.FunctionType(
    compile("def f(): pass", "<core>", "exec").co_consts[0], {"core": tl.core}
)


JITFunction.__call__ = _call  # type: ignore[method-assign]

# The interpreter holds a scalar as a one-element 1-D array and converts it with ``int(array)``
# (``range(0, n, BLOCK)`` over a runtime ``n``), which NumPy >= 2.4 refuses for ndim > 0.
_original_patch_tensor = _interpreter._patch_lang_tensor


def _patch_lang_tensor(tensor: Any, scope: Any) -> None:
    _original_patch_tensor(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))


_interpreter._patch_lang_tensor = _patch_lang_tensor


class _Launcher:
    def __init__(self, twin: InterpretedFunction, grid: Any, fast: bool) -> None:
        self._twin = twin
        self._grid = grid
        self._fast = fast

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The interpreter patches the kernel's own language modules (usually triton.language) for
        # the launch. Patch triton.language.core too, once, around it (so that the scopes unwind
        # in order), instead of once per call of a standard-library function such as tl.max or
        # tl.sum: re-patching costs milliseconds per call.
        outermost = getattr(_active, "depth", 0) == 0
        scope = None
        builder = _interpreter.interpreter_builder
        options = builder.options
        if outermost:
            scope = _interpreter._patch_lang(_core_anchor)
            _active.patched = _langs_of(self._twin.fn) | _langs_of(_core_anchor)
            if self._fast:
                builder.options = dataclasses.replace(options, sanitize_overflow=False)
        _active.depth = getattr(_active, "depth", 0) + 1
        try:
            return self._twin[self._grid](*args, **kwargs)
        finally:
            _active.depth -= 1
            if scope is not None:
                builder.options = options
                scope.restore()
                _active.patched = frozenset()


class Interpreted:
    """``kernel[grid](...)`` like a ``JITFunction``, run by Triton's interpreter."""

    def __init__(self, kernel: JITFunction, fast: bool = False) -> None:
        self.kernel = kernel
        self.twin = _twin(kernel)
        self.fast = fast

    def __getitem__(self, grid: Any) -> _Launcher:
        return _Launcher(self.twin, grid, self.fast)


_interpreted: dict[tuple[int, bool], Interpreted] = {}


def interpreted(kernel: JITFunction, *, fast: bool = False) -> Interpreted:
    """Returns the interpreted twin of ``kernel`` (cached); it runs on CPU tensors.

    ``fast=True`` also turns off, for the launch, the interpreter's int32-overflow checks of
    integer arithmetic (an int64 recomputation and an assertion per operation, for index
    arithmetic that can only overflow at tensor sizes the interpreter never runs). Results are the
    same; compiled launches are unaffected.
    """
    if not isinstance(kernel, JITFunction):
        raise TypeError(f"kernel must be a @triton.jit function, got {type(kernel).__name__}")
    key = (id(kernel), bool(fast))
    twin = _interpreted.get(key)
    if twin is None or twin.kernel is not kernel:
        twin = Interpreted(kernel, fast=bool(fast))
        _interpreted[key] = twin
    return twin
