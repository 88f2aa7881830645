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


def _call(self: JITFunction, *args: Any, **kwargs: Any) -> Any:
    if getattr(_active, "depth", 0) == 0:
        return _original_call(self, *args, **kwargs)
    # InterpretedFunction.__call__ patches the callee's language modules (tl.core for the
    # standard library) with interpreter builtins and never restores them: in a process that also
    # compiles kernels, the next compilation would then trace interpreter builtins. Patch for the
    # duration of the call only (or not at all inside a fast launch, which patched both language
    # modules for its whole duration).
    twin = _twin(self)
    if getattr(_active, "prepatched", False):
        return twin.rewrite()(*args, **kwargs)
    scope = _interpreter._patch_lang(twin.fn)
    try:
        return twin.rewrite()(*args, **kwargs)
    finally:
        scope.restore()


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
        _active.depth = getattr(_active, "depth", 0) + 1
        try:
            if not self._fast or getattr(_active, "prepatched", False):
                return self._twin[self._grid](*args, **kwargs)
            return self._fast_launch(*args, **kwargs)
        finally:
            _active.depth -= 1

    def _fast_launch(self, *args: Any, **kwargs: Any) -> Any:
        # Patch tl.core (the standard library's module) once, around the interpreter's own patch of
        # the kernel's modules, so that restores happen in reverse order (the two patches share the
        # tensor and dtype classes); nested @jit calls then need no patching of their own.
        builder = _interpreter.interpreter_builder
        options = builder.options
        scope = _interpreter._patch_lang(_STDLIB_FN)
        _active.prepatched = True
        builder.options = dataclasses.replace(options, sanitize_overflow=False)
        try:
            return self._twin[self._grid](*args, **kwargs)
        finally:
            builder.options = options
            _active.prepatched = False
            scope.restore()


def _stdlib_fn() -> Any:
    from triton.language import standard

    return standard.max.fn  # any standard-library function: its globals hold triton.language.core


_STDLIB_FN = _stdlib_fn()


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

    ``fast=True`` halves the interpreter's overhead per operation: the language modules are
    patched once per launch instead of once per nested ``@jit`` call (``tl.max``, ``tl.sum``, the
    kernel's own helpers), and the interpreter's int32-overflow checks of integer arithmetic (an
    int64 recomputation and an assertion per operation, for index arithmetic that can only
    overflow at tensor sizes the interpreter never runs) are off for the launch. Results are the
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
