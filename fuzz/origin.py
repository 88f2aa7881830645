"""Where a NaN or Inf is born: the kernel line of the first overflow, invalid operation or
division by zero, found by replaying a case in an interpreter with floating-point traps.

Triton
    Triton's interpreter evaluates every ``tl.*`` operation with NumPy, so running the launch
    under ``numpy.errstate(over='raise', invalid='raise', divide='raise')`` turns the first
    overflow (``exp(100)``), invalid operation (``0 * Inf``, ``Inf - Inf``, ``0 / 0``) or
    division by zero into a ``FloatingPointError`` (wrapped in the interpreter's
    ``InterpreterError``); the innermost traceback frame in kernel code is the line, and its
    column range the expression.
Pallas
    JAX's own ``jax_debug_nans``/``jax_debug_infs`` cannot be used on interpreted Pallas kernels:
    interpret mode fills fresh buffers with NaN and kernels legitimately build ``-inf`` masks, and
    an overflow that later turns into NaN (``Inf / Inf``) is reported where the NaN appears, not
    where the Inf was born. Instead the launch runs with jit disabled and the ``pallas_call``
    primitive is intercepted: its interpreted form (the grid loop around the discharged kernel
    jaxpr) is evaluated one primitive at a time, recursing into loops and conditionals, and the
    first primitive whose output holds an Inf where its operands are finite (overflow, division
    by zero) or a NaN where they hold none (invalid operation) is reported with the kernel source
    line JAX recorded for it when the kernel was traced.

Mutant kernels are executed from sources registered with ``linecache`` (``kernels/_mutate.py``),
so the origin points at the mutated line.

Known limit: the origin is the first birth, also one in a value the kernel then discards. Both
sides of a ``jnp.where``/``tl.where`` are computed: the attention Pallas kernels evaluate their
soft-cap polynomial (``_tanh``) with the cap off, and it overflows for scores beyond about 1600,
so an Inf found at such scores (``attention_mutant_lse_fp16`` at logits near -1e5) is traced to
``_tanh`` rather than to the line that put it in the output. Replays that make one birth site
finite cannot tell such a discarded birth from one a later overflow masks (a NaN from Inf * 0
where both factors were born), so telling them apart needs element-wise data flow through the
kernel's primitives.
"""

from __future__ import annotations

import contextlib
import os
import traceback
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from fuzz.case import Case
    from fuzz.target import Target

_KIND_OF_NUMPY = {
    "overflow": "overflow",
    "invalid value": "invalid operation",
    "divide by zero": "division by zero",
}


def trace(target: Target, backend: str, case: Case) -> dict[str, Any]:
    """The origin of the first non-finite value the kernel of ``backend`` computes for ``case``.

    Returns a dict with ``found`` (bool); when found: ``kind`` (``overflow``, ``invalid
    operation``, ``division by zero``), ``file``, ``line``, ``function``, ``source`` (the line),
    ``expression`` (the sub-expression, when the column range is known), ``interpreter`` and
    ``detail``; else a ``note`` saying why nothing was found.
    """
    from fuzz.backends import get_backend

    impl = get_backend(backend).impl
    if impl not in target.kernels:
        return {"found": False, "note": f"target {target.name} has no {impl} kernel"}
    if impl == "triton":
        return _trace_triton(target, case)
    if impl == "pallas":
        return _trace_pallas(target, case)
    return {"found": False, "note": f"no NaN/Inf origin tracer for {impl} kernels"}


def trace_finding(
    target: Target, backend: str, case: Case, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Like :func:`trace`, for a finding: the non-finite value may come from a launch on inputs a
    property derived from ``case`` (masked keys poisoned, a constant added). The case is checked
    again with the recorded property ``params`` while every launched input set is recorded, and
    each is traced in launch order until one shows an origin.
    """
    from fuzz.backends import get_backend
    from fuzz.properties import Context, check_case

    launched: list[Case] = []
    original = Context.launch

    def spy(self: Context, c: Case | None = None, **kw: Any) -> Any:
        if kw.get("backend") in (None, self.backend):
            launched.append(self.case if c is None else c)
        return original(self, c, **kw)

    Context.launch = spy  # type: ignore[method-assign,assignment]
    try:
        check_case(target, get_backend(backend), case, params=params or {})
    finally:
        Context.launch = original  # type: ignore[method-assign]
    distinct: list[Case] = []
    for c in launched:
        if not any(c is d or _same(c, d) for d in distinct):
            distinct.append(c)
    first: dict[str, Any] | None = None
    for c in distinct or [case]:
        o = trace(target, backend, c)
        if o.get("found"):
            if c is not case and not _same(c, case):
                changed = [k for k in c.inputs if not _same_array(c.inputs[k], case.inputs.get(k))]
                o["launch"] = (
                    f"launch on inputs a property derived from the example ({', '.join(changed)} changed)"
                )
                o["launch_hazards"] = target.hazards_of(c)
            return o
        first = first or o
    return first or trace(target, backend, case)


def _same_array(a: Any, b: Any) -> bool:
    return (
        b is not None and a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    )


def _same(a: Case, b: Case) -> bool:
    return a.inputs.keys() == b.inputs.keys() and all(
        _same_array(a.inputs[k], b.inputs[k]) for k in a.inputs
    )


def describe(origin: dict[str, Any] | None) -> list[str]:
    """Human lines for reports and reproducer output."""
    if not origin:
        return []
    if "error" in origin:
        return [f"origin: not traced ({origin['error']})"]
    if not origin.get("found"):
        return [f"origin: {origin.get('note', 'not found')}"]
    expr = origin.get("expression")
    what = f"{origin['kind']} in `{expr}`" if expr else origin["kind"]
    lines = [
        f"origin: {what} at {origin['file']}:{origin['line']} ({origin['function']}), "
        f"{origin['interpreter']}",
        f"        {origin['source'].strip()}",
    ]
    if origin.get("detail"):
        lines.append(f"        {origin['detail']}")
    caller = origin.get("caller")
    if caller:
        lines.append(
            f"        called from {caller['function']} at {caller['file']}:{caller['line']}:"
        )
        lines.append(f"        {caller['source'].strip()}")
    if origin.get("launch"):
        lines.append(f"        in the {origin['launch']}")
        lines.extend(f"        hazard there: {h}" for h in origin.get("launch_hazards", []))
    return lines


def _frame_record(
    filename: str,
    line: int,
    function: str,
    col: int | None,
    end_line: int | None,
    end_col: int | None,
) -> dict[str, Any]:
    import linecache

    source = linecache.getline(filename, line).rstrip("\n")
    expression = None
    if col is not None and end_col is not None and end_line == line and 0 <= col < end_col:
        expression = source.encode()[col:end_col].decode(errors="replace") or None
    return {
        "file": filename,
        "line": line,
        "function": function,
        "source": source,
        "expression": expression,
    }


# Triton -------------------------------------------------------------------------------------------------


def _library_dirs() -> tuple[str, ...]:
    import numpy

    dirs = [os.path.dirname(numpy.__file__) + os.sep, os.path.dirname(__file__) + os.sep]
    for mod in ("triton", "torch"):
        try:
            dirs.append(os.path.dirname(str(__import__(mod).__file__)) + os.sep)
        except Exception:
            pass
    try:  # the interpreter shim that routes calls of jit helpers (tl.sum...) to their twins
        import kernels._triton_interp as shim

        dirs.append(str(shim.__file__))
    except Exception:
        pass
    return tuple(dirs)


def _fp_error(e: BaseException) -> FloatingPointError | None:
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, FloatingPointError):
            return e
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return None


def _trace_triton(target: Target, case: Case) -> dict[str, Any]:
    from fuzz.backends import adapter_for, get_backend

    backend = get_backend("triton-interpret")
    reason = backend.unavailable_reason()
    if reason:
        return {"found": False, "note": f"the Triton interpreter cannot run here: {reason}"}
    adapter = adapter_for(backend)
    naive = target.naive(case, "cpu")
    inputs = {k: adapter.put(v) for k, v in case.inputs.items()}
    out = (
        {k: adapter.alloc(v.shape, _dtype(v), 0.0).array for k, v in naive.items()}
        if target.library.writes_out
        else None
    )
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
            target.kernels["triton"](inputs, dict(case.params), out=out, interpret=True)
    except Exception as e:
        fpe = _fp_error(e)
        if fpe is None:
            return {
                "found": False,
                "note": f"the interpreted replay raised {type(e).__name__}: {e}"[:300],
            }
        libs = _library_dirs()
        frames = [
            f for f in traceback.extract_tb(fpe.__traceback__) if not f.filename.startswith(libs)
        ]
        if not frames:
            return {"found": False, "note": f"{fpe} outside kernel code"}
        f = frames[-1]
        message = str(fpe)
        kind = next((k for s, k in _KIND_OF_NUMPY.items() if s in message), "floating-point error")
        rec = _frame_record(f.filename, f.lineno or 0, f.name, f.colno, f.end_lineno, f.end_colno)
        if len(frames) > 1:  # a jit helper (a library's exp2): the kernel line that called it
            c = frames[-2]
            rec["caller"] = _frame_record(
                c.filename, c.lineno or 0, c.name, c.colno, c.end_lineno, c.end_colno
            )
        return {
            "found": True,
            "kind": kind,
            "interpreter": "Triton interpreter, NumPy traps",
            "detail": f"NumPy: {message}",
            **rec,
        }
    return {
        "found": False,
        "note": "no overflow, invalid operation or division by zero in the "
        "interpreted replay (the non-finite value may be compiled-only behaviour)",
    }


def _dtype(a: np.ndarray) -> str:
    from fuzz.arrays import dtype_name

    return dtype_name(a.dtype)


# Pallas -------------------------------------------------------------------------------------------------


class _Born(Exception):
    def __init__(self, record: dict[str, Any]) -> None:
        super().__init__(record.get("kind", "origin"))
        self.record = record


def _floating(x: Any) -> bool:
    dt = getattr(x, "dtype", None)
    try:
        return dt is not None and np.issubdtype(np.dtype(dt), np.floating)
    except TypeError:
        return str(dt) == "bfloat16"


def _np(x: Any) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def _check(eqn: Any, invals: list[Any], outs: list[Any]) -> None:
    from jax._src import source_info_util

    fins = [_np(x) for x in invals if _floating(x)]
    for out in outs:
        if not _floating(out):
            continue
        o = _np(out)
        bad_inf, bad_nan = np.isinf(o), np.isnan(o)
        if not (bad_inf.any() or bad_nan.any()):
            continue
        if fins and all(x.shape == o.shape for x in fins):
            in_nonfinite = np.logical_or.reduce([~np.isfinite(x) for x in fins])
            in_nan = np.logical_or.reduce([np.isnan(x) for x in fins])
            overflow, invalid = bad_inf & ~in_nonfinite, bad_nan & ~in_nan
        else:
            finite = all(np.isfinite(x).all() for x in fins)
            no_nan = not any(np.isnan(x).any() for x in fins)
            overflow = bad_inf if finite else np.zeros_like(bad_inf)
            invalid = bad_nan if no_nan else np.zeros_like(bad_nan)
        if not (overflow.any() or invalid.any()):
            continue
        name = eqn.primitive.name
        bad = overflow if overflow.any() else invalid
        idx = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
        if name == "div" and len(fins) == 2 and fins[1].shape == o.shape and fins[1][idx] == 0:
            kind = "division by zero"
        else:
            kind = "overflow" if overflow.any() else "invalid operation"
        operands = ", ".join(
            f"{x[idx]:.6g}"
            if x.shape == o.shape
            else (f"{x.reshape(-1)[0]:.6g}" if x.size == 1 else f"[{x.size} values]")
            for x in fins
        )
        detail = f"{name}({operands}) = {o[idx]} at element {list(idx)} of a {list(o.shape)} block"
        frame = source_info_util.user_frame(eqn.source_info.traceback)
        if frame is None:
            rec = {"file": "?", "line": 0, "function": "?", "source": "", "expression": None}
        else:
            rec = _frame_record(
                frame.file_name,
                frame.start_line,
                frame.function_name,
                frame.start_column,
                frame.end_line,
                frame.end_column,
            )
        raise _Born(
            {
                "found": True,
                "kind": kind,
                "primitive": name,
                "detail": detail,
                "interpreter": "Pallas interpret mode, checked primitive by primitive",
                **rec,
            }
        )


# The device an interpreted Pallas replay runs on (the pallas-interpret backend's CPU device). On a
# GPU host JAX's default device is a GPU: arrays made while the replay runs eagerly (jit disabled)
# land there, committed ones too, and a primitive mixing them with the CPU inputs fails
# ("Received incompatible devices for jitted computation").
_TRACE_DEVICE: list[Any] = []


def _on_trace_device(values: list[Any]) -> list[Any]:
    """``values`` with every JAX array not on the replay's device moved there."""
    if not _TRACE_DEVICE:
        return values
    import jax

    dev = _TRACE_DEVICE[-1]
    return [
        jax.device_put(v, dev) if isinstance(v, jax.Array) and v.devices() != {dev} else v
        for v in values
    ]


def _eval(jaxpr: Any, consts: list[Any], args: list[Any]) -> list[Any]:
    from jax._src import core

    env: dict[Any, Any] = {}

    def read(v: Any) -> Any:
        return v.val if isinstance(v, core.Literal) else env[v]

    for v, c in zip(jaxpr.constvars, consts, strict=True):
        env[v] = c
    for v, a in zip(jaxpr.invars, args, strict=True):
        env[v] = a
    for eqn in jaxpr.eqns:
        invals = _on_trace_device([read(v) for v in eqn.invars])
        outs = _eval_eqn(eqn, invals)
        for v, o in zip(eqn.outvars, outs, strict=True):
            if not isinstance(v, core.DropVar):
                env[v] = o
    return [read(v) for v in jaxpr.outvars]


def _closed(c: Any) -> tuple[Any, list[Any]]:
    return (c.jaxpr, list(c.consts)) if hasattr(c, "consts") else (c, [])


def _eval_eqn(eqn: Any, invals: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    name, p = eqn.primitive.name, eqn.params
    if name == "while":
        nc, nb = p["cond_nconsts"], p["body_nconsts"]
        cc, bc, carry = invals[:nc], invals[nc : nc + nb], invals[nc + nb :]
        cj, cconsts = _closed(p["cond_jaxpr"])
        bj, bconsts = _closed(p["body_jaxpr"])
        while bool(np.asarray(_eval(cj, cconsts, [*cc, *carry])[0])):
            carry = _eval(bj, bconsts, [*bc, *carry])
        return carry
    if name == "cond":
        index, ops = invals[0], invals[1:]
        j, consts = _closed(
            p["branches"][int(np.clip(np.asarray(index), 0, len(p["branches"]) - 1))]
        )
        return _eval(j, consts, ops)
    if name == "scan":
        j, consts = _closed(p["jaxpr"])
        n_c, n_carry = p["num_consts"], p["num_carry"]
        cs, carry, xs = invals[:n_c], invals[n_c : n_c + n_carry], invals[n_c + n_carry :]
        order = range(p["length"] - 1, -1, -1) if p["reverse"] else range(p["length"])
        ys: list[list[Any]] = []
        for i in order:
            out = _eval(j, consts, [*cs, *carry, *(x[i] for x in xs)])
            carry, y = out[:n_carry], out[n_carry:]
            ys.append(y)
        if p["reverse"]:
            ys.reverse()
        stacked = [
            jnp.stack([y[k] for y in ys]) if ys else jnp.zeros(v.aval.shape, v.aval.dtype)
            for k, v in enumerate(eqn.outvars[n_carry:])
        ]
        return [*carry, *stacked]
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        sub = p.get(key)
        if sub is not None and name in (
            "pjit",
            "jit",
            "closed_call",
            "core_call",
            "remat",
            "checkpoint",
            "custom_jvp_call",
            "custom_vjp_call",
            "custom_vjp_call_jaxpr",
        ):
            j, consts = _closed(sub)
            return _eval(j, consts, invals)
    outs = eqn.primitive.bind(*invals, **p)
    outs = list(outs) if eqn.primitive.multiple_results else [outs]
    _check(eqn, invals, outs)
    return outs


@contextlib.contextmanager
def _intercept_pallas_call() -> Any:
    import jax
    from jax._src.pallas import hlo_interpreter
    from jax._src.pallas.pallas_call import pallas_call_p

    def impl(*args: Any, **params: Any) -> Any:
        params = dict(params)
        params.pop("interpret", None)
        params.pop("backend", None)
        fn = lambda *a: hlo_interpreter.pallas_call_hlo_interpret(*a, **params)  # noqa: E731
        closed = jax.make_jaxpr(fn)(*args)
        return _eval(closed.jaxpr, list(closed.consts), list(args))

    saved = pallas_call_p.impl
    pallas_call_p.impl = impl  # type: ignore[method-assign]
    try:
        with jax.disable_jit():
            yield
    finally:
        pallas_call_p.impl = saved  # type: ignore[method-assign]


def _trace_pallas(target: Target, case: Case) -> dict[str, Any]:
    from fuzz.backends import adapter_for, get_backend

    backend = get_backend("pallas-interpret")
    reason = backend.unavailable_reason()
    if reason:
        return {"found": False, "note": f"Pallas interpret mode cannot run here: {reason}"}
    import jax

    adapter = adapter_for(backend)
    inputs = {k: adapter.put(v) for k, v in case.inputs.items()}
    device = adapter.device  # type: ignore[attr-defined]
    _TRACE_DEVICE.append(device)
    try:
        with jax.default_device(device), _intercept_pallas_call(), np.errstate(all="ignore"):
            target.kernels["pallas"](inputs, dict(case.params), out=None, interpret=True)
    except _Born as b:
        return b.record
    except Exception as e:
        born = e
        while born is not None and not isinstance(born, _Born):
            born = born.__cause__ or born.__context__  # type: ignore[assignment]
        if isinstance(born, _Born):
            return born.record
        return {
            "found": False,
            "note": f"the interpreted replay raised {type(e).__name__}: {e}"[:300],
        }
    finally:
        _TRACE_DEVICE.pop()
    return {
        "found": False,
        "note": "no primitive of the interpreted kernel turned finite "
        "operands into Inf or NaN (the non-finite value may be compiled-only behaviour)",
    }
