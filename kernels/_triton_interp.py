"""An interpreted twin of a ``@triton.jit`` kernel, in the same process as the compiled one.

``TRITON_INTERPRET=1`` switches every kernel of a process to Triton's interpreter at decoration
time. To hold the compiled and the interpreted version of one kernel source side by side (the
compiled-vs-interpreted differential, and CPU runs in a process that also compiles), we build the
twin explicitly with ``triton.runtime.interpreter.InterpretedFunction``.

That alone is not enough: inside an interpreted body, calls to other ``@triton.jit`` functions
(the kernel's own helpers, and standard-library functions such as ``tl.zeros`` or ``tl.max``,
which are jit functions too) reach ``JITFunction.__call__``, which only raises. While one of our
interpreted launches runs, that call is routed to the callee's own interpreted twin.

Two more pieces serve code that launches its kernels itself (a third-party library): while a
thread is inside an interpreting scope (:func:`push_scope`), ``JITFunction.run`` (what
``kernel[grid](...)`` calls, also through ``triton.autotune`` and ``triton.heuristics``) sends a
launch whose tensors are all on the CPU to the kernel's twin; and a launch may ask for
:func:`bfloat16 arithmetic <_patch_bf16>`, which Triton 3.6's interpreter gets wrong.

Every interpreted launch patches module attributes of ``triton.language`` and of the interpreter
for its duration, which no other thread may see: launches (interpreted and routed compiled ones)
hold one process-wide lock.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
import threading
import types
from typing import Any

import ml_dtypes
import numpy as np
import triton.language as tl
import triton.runtime.interpreter as _interpreter
from triton import knobs
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

_twins: dict[tuple[int, bool], InterpretedFunction] = {}
_active = threading.local()
_original_call = JITFunction.__call__
_original_run = JITFunction.run
# Held by every interpreted launch (re-entrant: the autotuner's hooks may launch again) and by
# compiled launches made through JITFunction.run, so that no compilation traces the interpreter's
# patched triton.language of another thread's launch.
_LOCK = threading.RLock()


def _twin(kernel: Any, tensor_loops: bool = False) -> InterpretedFunction:
    key = (id(kernel), tensor_loops)
    twin = _twins.get(key)
    if twin is None or twin.fn is not kernel.fn:
        twin = _Twin(kernel.fn, tensor_loops)
        # Hooks added to the kernel (JITFunction.add_pre_run_hook) run before its twin's launches.
        twin.pre_run_hooks = kernel.pre_run_hooks
        _twins[key] = twin
    return twin


def _call(self: JITFunction, *args: Any, **kwargs: Any) -> Any:
    if getattr(_active, "depth", 0) == 0:
        return _original_call(self, *args, **kwargs)
    twin = _twin(self, _active.options.tensor_loops)
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


# Types as values ---------------------------------------------------------------------------------
#
# Each interpreted operation builds its result's block type afresh (``get_block_ty``,
# ``block_type.with_element_ty``: a name string, a shape check, a tuple of constexprs) and looks
# its NumPy dtype up in a dict it builds per call (``_get_np_dtype``): a third of a softmax mutant
# proof's time in the interpreter (1.2 million block types for 150,000 operations). Both are pure
# functions of hashable values compared by ``==``: memoized, an operation reuses the type of the
# same element type and shape. (Where a Triton release lacks them, nothing is patched.)
_BLOCK_TYPES: dict[tuple[Any, tuple[int, ...]], Any] = {}
_NP_DTYPES: dict[Any, Any] = {}


def _block_type(element_ty: Any, shape: Any) -> Any:
    try:
        key = (element_ty, tuple(int(d) for d in shape))
        ty = _BLOCK_TYPES.get(key)
    except (TypeError, ValueError):  # (a shape of symbols: built as Triton builds it)
        return _new_block_type(element_ty, shape)
    if ty is None:
        ty = _BLOCK_TYPES[key] = _new_block_type(element_ty, list(key[1]))
    return ty


def _new_block_type(element_ty: Any, shape: Any) -> Any:
    return tl.block_type(element_ty, shape)


def _np_dtype(tt_dtype: Any) -> Any:
    try:
        return _NP_DTYPES[tt_dtype]
    except KeyError:
        np_dtype = _NP_DTYPES[tt_dtype] = _original_np_dtype(tt_dtype)
        return np_dtype
    except TypeError:  # (unhashable)
        return _original_np_dtype(tt_dtype)


_original_tensor_init = tl.tensor.__init__


def _tensor_init(self: Any, handle: Any, type: Any) -> None:
    """``tl.tensor.__init__``, its type's parts (numel, dtype, shape as a tuple of constexprs)
    built once per type object and kept on it: with block types shared, once per type."""
    parts = getattr(type, "_kernel_fuzz_parts", None)
    if parts is None:
        _original_tensor_init(self, handle, type)
        try:
            type._kernel_fuzz_parts = (self.numel, self.dtype, self.shape)
        except AttributeError:  # (a type without a __dict__)
            pass
        return
    self.handle = handle
    self.type = type
    self.numel, self.dtype, self.shape = parts


_original_np_dtype: Any = getattr(_interpreter, "_get_np_dtype", None)  # (called once installed)
if _original_np_dtype is not None and hasattr(_interpreter, "InterpreterBuilder"):
    _interpreter._get_np_dtype = _np_dtype
    _interpreter.InterpreterBuilder.get_block_ty = lambda self, dtype, shape: _block_type(
        dtype, shape
    )
    tl.block_type.with_element_ty = lambda self, scalar_ty: _block_type(scalar_ty, self.shape)
    tl.tensor.__init__ = _tensor_init


# Loop variables ----------------------------------------------------------------------------------
#
# Compiled, the variable of ``for i in range(n)`` / ``tl.range(...)`` is an integer tensor (int32, or
# int64 when a bound is): kernels write ``i.to(tl.int64)``, and ``i * BLOCK`` wraps around in int32.
# The interpreter iterates a Python range, so its loop variable is a Python int: the first raises
# AttributeError, the second never overflows. A twin built with ``tensor_loops`` rewrites those
# loops to yield tensors of the compiled type (tl.static_range stays a Python int: a constexpr).


def _tensor_range(arg1: Any, arg2: Any = None, step: Any = None, **_options: Any) -> Any:
    """``range`` over interpreter tensors of the type the compiler gives the loop variable."""
    lb, ub = (0, arg1) if arg2 is None else (arg1, arg2)
    semantic = _interpreter.interpreter_semantic
    bounds = [semantic.to_tensor(x) for x in (lb, ub, 1 if step is None else step)]
    iv_type = semantic.integer_promote_impl(bounds[0].dtype, bounds[1].dtype)
    iv_type = semantic.integer_promote_impl(iv_type, bounds[2].dtype)
    np_dtype = _interpreter._get_np_dtype(iv_type)
    for i in range(*(int(b.handle.data.reshape(-1)[0]) for b in bounds)):
        yield tl.tensor(_interpreter.TensorHandle(np.array([i], dtype=np_dtype), iv_type), iv_type)


_RANGE_NAME = "_kernel_fuzz_tensor_range"


class _LoopTransformer(_interpreter.ASTTransformer):
    def visit_For(self, node: ast.For) -> ast.For:
        self.generic_visit(node)
        func = node.iter.func if isinstance(node.iter, ast.Call) else None
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name == "range":  # the builtin or tl.range; not tl.static_range
            call = node.iter
            assert isinstance(call, ast.Call)
            call.func = ast.Name(id=_RANGE_NAME, ctx=ast.Load())
        return node


class _LoopRewriter(_interpreter.FunctionRewriter):
    ast_transformer = _LoopTransformer()

    def _compile_and_exec(self, transformed_ast: Any) -> Any:
        # The interpreter runs the rewritten body with the module's globals (and adds its own
        # names there too); the loop helper joins them.
        self.fn.__globals__.setdefault(_RANGE_NAME, _tensor_range)
        return super()._compile_and_exec(transformed_ast)


class _Twin(InterpretedFunction):
    """An ``InterpretedFunction`` that caches its own rewrite (one per loop variant)."""

    def __init__(self, fn: Any, tensor_loops: bool) -> None:
        super().__init__(fn)
        if tensor_loops:
            self.rewriter = _LoopRewriter(fn)
        self._rewritten: Any = None

    def rewrite(self) -> Any:
        if self._rewritten is None:
            self._rewritten = self.rewriter.rewrite_ast()
        return self._rewritten


# bfloat16 ----------------------------------------------------------------------------------------
#
# Triton 3.6's interpreter holds bfloat16 values as their raw bits in uint16 arrays. Loads, stores,
# tl.where and bitcasts move bits and are right; everything that computes is wrong, silently:
#   - arithmetic and comparisons of two bf16 tensors (a + b, a * b, a < b, tl.maximum, tl.sum of a
#     bf16 tensor) are NumPy integer operations on the bit patterns;
#   - tl.dot of bf16 operands multiplies the bit patterns as integers;
#   - casts: int -> bf16, bf16 -> int and fp64 -> bf16 convert the bit pattern as an integer;
#     fp32 -> bf16 (x.to(tl.bfloat16), the usual store path) truncates instead of rounding to
#     nearest even; bf16 subnormals read as zero; the explicit rtne rounding mode
#     (fp_downcast_rounding="rtne") loses the carry into the exponent;
#   - constants: tl.full(shape, 1.5, tl.bfloat16) stores the integer 1 as bits, and a scalar
#     constant of a bf16 operation (x * 0.5) fails (the builder has no get_bf16);
#   - atomics on bf16 raise "Unsupported data type".
# Only bf16 -> fp32 of normal numbers and fp32 -> bf16 by truncation are implemented right, which is
# why kernels that convert bf16 to fp32 after every load (and store with .to()) are *almost* right.
#
# The fix: hold bf16 values as ml_dtypes.bfloat16 arrays, a NumPy dtype whose operations compute in
# float32 and round to nearest even once per operation. That is the GPU's bf16 arithmetic: for
# +, -, * and comparisons float32 holds the exact result or rounds it innocuously (24 >= 2 * 8 + 2
# bits: double rounding through float32 equals one correct rounding); Triton's semantics promote
# bf16 division and math functions to fp32 before they reach the interpreter. tl.dot casts bf16
# operands to float32 exactly and accumulates in float32, as the tensor cores do (products of 8-bit
# significands are exact in float32). Reductions of bf16 round after every addition, as on the GPU,
# in NumPy's order rather than the GPU's tree order. tl.fma rounds once, through float64.


_BF16 = np.dtype(ml_dtypes.bfloat16)
_original_get_np_dtype = _interpreter._get_np_dtype
_builder_cls = _interpreter.InterpreterBuilder


def _get_np_dtype_bf16(tt_dtype: Any) -> np.dtype:
    np_dtype = _original_get_np_dtype(tt_dtype)
    if np_dtype == np.uint16 and _is_bf16(tt_dtype):
        return _BF16
    return np_dtype


def _is_bf16(tt_dtype: Any) -> bool:
    if isinstance(tt_dtype, tl.pointer_type):
        return False
    return getattr(tt_dtype, "scalar", tt_dtype) == tl.bfloat16


def _bf16_cast(self: Any, src: Any, dst_type: Any) -> Any:
    if _is_bf16(src.dtype) or _is_bf16(dst_type):
        data = src.data.astype(_get_np_dtype_bf16(dst_type))  # rounds to nearest even
        return _interpreter.TensorHandle(data, dst_type.scalar)
    return _original_cast_impl(self, src, dst_type)


def _bf16_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
    src_ty, dst_ty = src.dtype.scalar, dst_type.scalar
    if not (_is_bf16(dst_ty) and src_ty in (tl.float32, tl.float64)):
        return _original_fp_to_fp(self, src, dst_type, rounding_mode)
    if rounding_mode == _interpreter._ir.ROUNDING_MODE.RTZ:
        if src_ty == tl.float64:
            raise NotImplementedError("fp64 -> bf16 with rounding 'rtz' in Triton's interpreter")
        data = (src.data.view(np.uint32) >> 16).astype(np.uint16).view(_BF16)
        # Dropping the low half of a NaN's payload may leave an infinity's bits.
        data = np.where(np.isnan(src.data), _BF16.type(np.nan), data)
        return _interpreter.TensorHandle(data, dst_ty)
    return _interpreter.TensorHandle(src.data.astype(_BF16), dst_ty)


def _bf16_dot(self: Any, a: Any, b: Any, d: Any, input_precision: Any, max_imprecise: Any) -> Any:
    if not (_is_bf16(a.dtype) or _is_bf16(b.dtype)):
        return _original_dot(self, a, b, d, input_precision, max_imprecise)
    a_data = a.data.astype(np.float32) if _is_bf16(a.dtype) else a.data
    b_data = b.data.astype(np.float32) if _is_bf16(b.dtype) else b.data
    out = np.matmul(a_data, b_data, dtype=np.float32).astype(d.data.dtype) + d.data
    return _interpreter.TensorHandle(out, d.dtype.scalar)


def _bf16_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
    if not _is_bf16(z.dtype):
        return _original_fma(self, x, y, z)
    wide = x.data.astype(np.float64) * y.data.astype(np.float64) + z.data.astype(np.float64)
    return _interpreter.TensorHandle(wide.astype(_BF16), z.dtype.scalar)


def _get_bf16(self: Any, value: float) -> Any:
    """A bf16 scalar constant (``x * 0.5`` of a bf16 ``x``: Triton's semantics keep it bf16)."""
    return _interpreter.TensorHandle(np.array([value], dtype=_BF16), tl.bfloat16)


def _bf16_atomic_rmw(
    self: Any, op: Any, ptr: Any, val: Any, mask: Any, sem: Any, scope: Any
) -> Any:
    if _is_bf16(val.dtype):
        raise NotImplementedError(
            f"atomic {op} on bfloat16 is not supported by Triton's interpreter (the kernel's "
            "compiled version may support it); run this kernel in float16 or float32"
        )
    return _original_atomic_rmw(self, op, ptr, val, mask, sem, scope)


def _bf16_atomic_cas(self: Any, ptr: Any, cmp: Any, val: Any, sem: Any, scope: Any) -> Any:
    if _is_bf16(val.dtype):
        raise NotImplementedError("atomic_cas on bfloat16 is not supported by Triton's interpreter")
    return _original_atomic_cas(self, ptr, cmp, val, sem, scope)


_original_cast_impl = _builder_cls.cast_impl
_original_fp_to_fp = _builder_cls.create_fp_to_fp
_original_dot = _builder_cls.create_dot
_original_fma = _builder_cls.create_fma
_original_atomic_rmw = _builder_cls.create_atomic_rmw
_original_atomic_cas = _builder_cls.create_atomic_cas


def _patch_bf16(scope: Any) -> None:
    """Patch the interpreter (for one launch, restored by ``scope``) to compute bf16 as bf16."""
    scope.set_attr(_interpreter, "_get_np_dtype", _get_np_dtype_bf16)
    # create_si_to_fp, create_fp_trunc and the other casts call self.cast_impl: patched with it.
    scope.set_attr(_builder_cls, "cast_impl", _bf16_cast)
    scope.set_attr(_builder_cls, "create_fp_to_fp", _bf16_fp_to_fp)
    scope.set_attr(_builder_cls, "create_dot", _bf16_dot)
    scope.set_attr(_builder_cls, "create_fma", _bf16_fma)
    scope.set_attr(_builder_cls, "get_bf16", _get_bf16)
    scope.set_attr(_builder_cls, "create_atomic_rmw", _bf16_atomic_rmw)
    scope.set_attr(_builder_cls, "create_atomic_cas", _bf16_atomic_cas)


# Sums of fp16 and bf16 ------------------------------------------------------------------------------
#
# tl.sum keeps fp16 and bf16 (Triton's semantics widen only small integers): on a GPU every
# addition of the reduction tree rounds to the dtype. NumPy sums float16 pairwise in float32 and
# rounds once at the end (more accurate than any GPU), and ml_dtypes' bfloat16 sequentially
# (error growing with n, where a GPU's tree grows with log n). ``tree_sums`` reduces fp16/bf16 by
# adding neighbours level by level in the dtype: every element passes ceil(log2 n) roundings,
# as in a GPU's tree (its threads first add their few elements in sequence, then shuffle).

_original_reduce_sum = _interpreter.ReduceOps.sum


def _tree_sum(self: Any, input: Any) -> Any:
    data = input.handle.data
    if data.dtype not in (np.float16, _BF16):
        return _original_reduce_sum(self, input)
    axis = self.axis
    x = data.reshape(-1) if axis is None else np.moveaxis(data, axis, -1)
    if x.shape[-1] == 0:
        x = np.zeros((*x.shape[:-1], 1), x.dtype)
    while x.shape[-1] > 1:
        if x.shape[-1] % 2:
            x = np.concatenate([x, np.zeros((*x.shape[:-1], 1), x.dtype)], axis=-1)
        x = x[..., 0::2] + x[..., 1::2]
    out = x[..., 0]
    if self.keep_dims:
        out = out.reshape((1,) * data.ndim) if axis is None else np.expand_dims(out, axis)
    return self.to_tensor(out, input.dtype)


# Launches ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    """How an interpreted launch runs.

    Attributes:
        fast: turn off the interpreter's int32-overflow checks of integer arithmetic (an int64
            recomputation and an assertion per operation).
        bf16: compute bfloat16 values as bfloat16 numbers (see the notes above ``_patch_bf16``);
            off, bf16 tensors are raw bits that every arithmetic operation gets wrong.
        tensor_loops: loop variables of ``range``/``tl.range`` loops are integer tensors of the
            type the compiler gives them (see ``_tensor_range``); off, Python ints.
        tree_sums: ``tl.sum`` of fp16 and bf16 adds in the dtype along a tree, as a GPU does (see
            ``_tree_sum``); off, NumPy's sums (fp16 in float32, bf16 in sequence).
        debug: what ``debug=True`` (``TRITON_DEBUG=1``) compiles: ``tl.device_assert`` checked and
            integer arithmetic checked for int32 overflow (both raise ``InterpreterError``).
            Triton's interpreter alone never checks either (its ``sanitize_overflow`` only
            computes the checks, which assert in debug mode only).
    """

    fast: bool = False
    bf16: bool = False
    tensor_loops: bool = False
    tree_sums: bool = False
    debug: bool = False


class _Launcher:
    def __init__(self, twin: InterpretedFunction, grid: Any, options: LaunchOptions) -> None:
        self._twin = twin
        self._grid = grid
        self._options = options

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The interpreter patches the kernel's own language modules (usually triton.language) for
        # the launch. Patch triton.language.core too, once, around it (so that the scopes unwind
        # in order), instead of once per call of a standard-library function such as tl.max or
        # tl.sum: re-patching costs milliseconds per call.
        with _LOCK:
            outermost = getattr(_active, "depth", 0) == 0
            scope = None
            builder = _interpreter.interpreter_builder
            options = builder.options
            if outermost:
                scope = _interpreter._patch_lang(_core_anchor)
                if self._options.bf16:
                    _patch_bf16(scope)
                if self._options.tree_sums:
                    scope.set_attr(_interpreter.ReduceOps, "sum", _tree_sum)
                _active.patched = _langs_of(self._twin.fn) | _langs_of(_core_anchor)
                _active.options = self._options
                if self._options.debug:
                    builder.options = dataclasses.replace(
                        options, debug=True, sanitize_overflow=True
                    )
                elif self._options.fast:
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

    def __init__(self, kernel: Any, options: LaunchOptions) -> None:
        self.kernel = kernel
        self.twin = _twin(kernel, options.tensor_loops)
        self.options = options

    @property
    def fast(self) -> bool:
        return self.options.fast

    def __getitem__(self, grid: Any) -> _Launcher:
        return _Launcher(self.twin, grid, self.options)


_interpreted: dict[tuple[int, LaunchOptions], Interpreted] = {}


def interpreted(
    kernel: Any,
    *,
    fast: bool = False,
    bf16: bool = False,
    tensor_loops: bool = False,
    tree_sums: bool = False,
) -> Interpreted:
    """Returns the interpreted twin of ``kernel`` (cached); it runs on CPU tensors.

    Args:
        kernel: a ``@triton.jit`` function (or an ``InterpretedFunction``, what ``@triton.jit``
            makes when ``TRITON_INTERPRET=1`` was set).
        fast: also turn off, for the launch, the interpreter's int32-overflow checks of integer
            arithmetic (an int64 recomputation and an assertion per operation, for index
            arithmetic that can only overflow at tensor sizes the interpreter never runs). Results
            are the same; compiled launches are unaffected.
        bf16: compute bfloat16 values as bfloat16 numbers, rounded to nearest even once per
            operation as on a GPU (Triton's interpreter alone computes on their raw bits).
        tensor_loops: give ``range``/``tl.range`` loops integer-tensor loop variables of the
            compiled type (``i.to(tl.int64)`` works, ``i * BLOCK`` wraps in int32 as compiled);
            off, they are Python ints, as in Triton's interpreter alone.
        tree_sums: ``tl.sum`` of fp16/bf16 adds in the dtype along a tree, as a GPU does.
    """
    if not isinstance(kernel, JITFunction | InterpretedFunction):
        raise TypeError(f"kernel must be a @triton.jit function, got {type(kernel).__name__}")
    options = LaunchOptions(
        fast=bool(fast), bf16=bool(bf16), tensor_loops=bool(tensor_loops), tree_sums=bool(tree_sums)
    )
    return _interpreted_with(kernel, options)


def _interpreted_with(kernel: Any, options: LaunchOptions) -> Interpreted:
    key = (id(kernel), options)
    twin = _interpreted.get(key)
    if twin is None or twin.kernel is not kernel:
        twin = Interpreted(kernel, options)
        _interpreted[key] = twin
    return twin


# Routing launches of a scope ---------------------------------------------------------------------
#
# A thread inside an interpreting scope (push_scope ... pop_scope) sends the launches made through
# JITFunction.run (kernel[grid](...), also from triton.autotune and triton.heuristics) to the
# kernel's twin when every tensor argument lives on the CPU; a launch with tensors on a GPU
# compiles as before, so a scope never changes what compiled code does. Scopes are per thread,
# and followed by torch's autograd workers (ThreadScopes).


class ThreadScopes:
    """Scope stacks per thread, which torch's autograd worker threads follow.

    A scope holds in the thread that entered it. A backward pass of CUDA tensors runs on torch's
    autograd device thread, not on the thread that called ``backward()``: a thread that has no
    scope of its own, while it runs an autograd graph task, follows the scopes of the one thread
    that has any (with scopes in several threads at once it follows none: which thread's backward
    it runs is not known).
    """

    def __init__(self) -> None:
        self._local = threading.local()
        self._stacks: dict[int, list[Any]] = {}
        self._guard = threading.Lock()

    def push(self, item: Any) -> None:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        with self._guard:
            self._stacks[threading.get_ident()] = stack
        stack.append(item)

    def pop(self, item: Any) -> None:
        stack = self._local.stack
        stack.remove(item)
        if not stack:
            with self._guard:
                self._stacks.pop(threading.get_ident(), None)

    def current(self) -> Any:
        """This thread's innermost item (or, in an autograd worker, the scoped thread's)."""
        stack = getattr(self._local, "stack", None)
        if stack:
            return stack[-1]
        if not self._stacks or not _in_autograd_task():
            return None
        with self._guard:
            stacks = [s for s in self._stacks.values() if s]
        return stacks[0][-1] if len(stacks) == 1 else None


def _in_autograd_task() -> bool:
    """Whether this thread is running a torch autograd graph task (a backward pass)."""
    torch = sys.modules.get("torch")
    task_id = getattr(getattr(torch, "_C", None), "_current_graph_task_id", None)
    return task_id is not None and task_id() >= 0


_scopes = ThreadScopes()


def push_scope(options: LaunchOptions) -> None:
    """Enter an interpreting scope in this thread (scopes nest; the innermost options apply)."""
    _scopes.push(options)


def pop_scope(options: LaunchOptions) -> None:
    """Leave this thread's interpreting scope ``options`` (what :func:`push_scope` was given)."""
    _scopes.pop(options)


def scope_options() -> LaunchOptions | None:
    """The options of this thread's innermost interpreting scope, or None outside any."""
    return _scopes.current()


def on_cpu(args: Any, kwargs: dict[str, Any]) -> bool:
    """Whether no tensor among the launch arguments lives off the CPU."""
    for value in (*args, *kwargs.values()):
        device = getattr(getattr(value, "base", value), "device", None)
        if device is not None and getattr(device, "type", "cpu") != "cpu":
            return False
    return True


def routes(args: Any, kwargs: dict[str, Any]) -> LaunchOptions | None:
    """The options a launch with these arguments is interpreted with here, or None: compiled."""
    options = scope_options()
    if options is None or not on_cpu(args, kwargs):
        return None
    return options


def _run(self: JITFunction, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
    options = routes(args, kwargs)
    if options is None:
        with _LOCK:
            return _original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
    if warmup:  # compiles without running: nothing to do for the interpreter
        return None
    if kwargs.get("debug", self.debug) or knobs.runtime.debug:  # as the compiled launch reads it
        options = dataclasses.replace(options, debug=True)
    return _interpreted_with(self, options)[grid](*args, **kwargs)


JITFunction.run = _run  # type: ignore[method-assign]
