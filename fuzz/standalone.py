"""What a reproducer script does without the harness: ``--show`` prints its case, and a replay
that cannot import the harness says so in one line (exit status 2).

Every reproducer carries this module's code after its ``DATA`` (``fuzz.reproducer`` copies it
in), so it needs NumPy and the standard library only, and no ``from __future__`` import (which
would have to open the script). The issue text beside each reproducer (``fuzz.issue``) writes
its inputs with :func:`assignment` too, so both show the same literals.
"""

import base64
import io
import json
import sys
from typing import Any

# Inputs of at most this many elements are written out in full (as NumPy literals); larger ones
# are summarized (shape, dtype, range, NaN/Inf counts).
INLINE_LIMIT = 4096


def decode_for_reading(data: str, dtypes: dict[str, str]) -> dict[str, Any]:
    """The arrays of a reproducer's ``DATA`` by name, read with NumPy alone: bfloat16 (stored as
    its 16 bits) widened to float32, which holds every bfloat16 value exactly."""
    import numpy as np

    raw = base64.b64decode("".join(data.split()))
    out = {}
    with np.load(io.BytesIO(raw)) as z:  # plain arrays only: NumPy refuses object arrays
        for name, dtype in dtypes.items():
            a = z[name]
            if dtype == "bfloat16":
                a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            out[name] = a
    return out


def _evaluated(text: str, dtype: Any) -> Any:
    import numpy as np

    names = {"nan": np.nan, "inf": np.inf, "__builtins__": {}}
    return np.array(eval(text, names), dtype=dtype)  # our own text: numbers, nan, inf, brackets


def _same(a: Any, b: Any) -> bool:
    import numpy as np

    return bool(
        a.shape == b.shape
        and np.array_equal(a, b, equal_nan=True)
        and np.array_equal(np.signbit(a), np.signbit(b))
    )


def values_text(a: Any) -> str:
    """The elements of ``a`` as a nested Python list (``nan``, ``inf`` for the special values):
    each float in the shortest form that reads back to the same value of its dtype, or, where
    one would not (a decimal read as a Python float first), in float64's exact form."""
    import numpy as np

    def written(x: Any, mode: Any = "maxprec") -> str:
        return np.array2string(
            x, separator=", ", threshold=sys.maxsize, max_line_width=96, floatmode=mode
        )

    if a.dtype.kind != "f":
        return written(a)
    text = written(a, "unique")
    if not _same(_evaluated(text, a.dtype), a):
        text = written(a.astype(np.float64), "unique")
    return text


def assignment(name: str, a: Any, dtype: str) -> str:
    """``name = np.array(..., dtype=np.DTYPE)``: input ``name`` as Python (``a`` as
    :func:`decode_for_reading` gives it), or a comment that summarizes it where it has more
    than :data:`INLINE_LIMIT` elements."""
    shape = list(a.shape)
    if a.size > INLINE_LIMIT:
        return (
            f"# {name}: {summary(a, dtype)}: more than {INLINE_LIMIT:,} elements, not written out"
        )
    held = {"bfloat16": "float32", "bool": "bool_"}.get(dtype, dtype)  # NumPy's names (1.x too)
    if a.size == 0:
        literal = f"np.zeros({tuple(shape)!r}, dtype=np.{held})"
    else:
        literal = f"np.array({values_text(a)}, dtype=np.{held})"
    if dtype == "bfloat16":
        literal += ".astype(ml_dtypes.bfloat16)"
    return f"{name} = {literal}  # {dtype} {shape}"


def summary(a: Any, dtype: str) -> str:
    """``float32 [2, 33], min -1.5, max 3, 1 NaN, 2 Inf``: shape, dtype and range of an input."""
    import numpy as np

    parts = [f"{dtype} {list(a.shape)}"]
    if a.size and a.dtype.kind == "f":
        finite = a[np.isfinite(a)]
        if finite.size:
            parts += [f"min {finite.min():.6g}", f"max {finite.max():.6g}"]
        nans, infs = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        parts += [f"{nans} NaN"] if nans else []
        parts += [f"{infs} Inf"] if infs else []
    elif a.size and a.dtype.kind == "b":
        parts.append(f"{int(a.sum())} of {a.size} True")
    elif a.size:
        parts += [f"min {a.min()}", f"max {a.max()}"]
    return ", ".join(parts)


def show(meta: dict[str, Any], data: str, out: Any = None) -> int:
    """Prints what a reproducer holds (target, failure, parameters, and its inputs as Python
    when small); returns the exit status (2 where NumPy is missing or ``DATA`` does not decode)."""
    out = out if out is not None else sys.stdout
    head = f"{meta.get('target')} on {meta.get('backend')}"
    try:
        arrays = decode_for_reading(data, meta["dtypes"])
    except ImportError as e:
        print(f"{head}: cannot show: {type(e).__name__}: {e} (--show needs NumPy)", file=out)
        return 2
    except Exception as e:
        print(f"{head}: cannot show: its DATA does not decode: {type(e).__name__}: {e}", file=out)
        return 2
    print(f"{head} -> {meta.get('class')} ({meta.get('property')})", file=out)
    print(f"  {meta.get('message')}", file=out)
    params = ", ".join(f"{k}={v!r}" for k, v in meta.get("params", {}).items())
    print(f"params: {params or 'none'}", file=out)
    drawn = json.loads(meta.get("property_params") or "{}")
    if drawn:
        print("property params: " + ", ".join(f"{k}={v!r}" for k, v in drawn.items()), file=out)
    for name, a in arrays.items():
        print(f"{name}: {summary(a, meta['dtypes'][name])}", file=out)
    print("\n# the inputs, as Python", file=out)
    print("import numpy as np\nfrom numpy import inf, nan", file=out)
    if "bfloat16" in meta["dtypes"].values():
        print("import ml_dtypes", file=out)
    for name, a in arrays.items():
        print(assignment(name, a, meta["dtypes"][name]), file=out)
    return 0


def harness_missing(script: str, error: BaseException) -> int:
    """Says in one line that the harness needed to replay cannot be imported; returns 2."""
    print(
        f"{script}: cannot replay: {type(error).__name__}: {error} (replaying needs the "
        "kernel-fuzz harness and its dependencies: install it, or put its checkout on "
        "PYTHONPATH; --show prints the case without it)"
    )
    return 2
