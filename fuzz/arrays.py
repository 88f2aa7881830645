"""Dtypes and host arrays: NumPy (with ``ml_dtypes`` for bfloat16) is the exchange format.

Cases hold NumPy arrays; backends convert them to torch tensors or JAX arrays and back. bfloat16
travels as its raw 16 bits, since neither ``torch.from_numpy`` nor NumPy itself knows the type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

FLOAT_DTYPES = ("float32", "float16", "bfloat16")

_NUMPY = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
}
_BITS = {"float64": np.uint64, "float32": np.uint32, "float16": np.uint16, "bfloat16": np.uint16}


def np_dtype(name: str) -> np.dtype:
    try:
        return _NUMPY[name]
    except KeyError:
        raise ValueError(f"dtype={name!r} is not one of {sorted(_NUMPY)}") from None


_NAMES: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """The canonical name of a NumPy, torch or JAX dtype (``'bfloat16'``, ``'float32'``...)."""
    try:
        return _NAMES[dtype]
    except (KeyError, TypeError):
        pass
    name = _dtype_name(dtype)
    try:
        _NAMES[dtype] = name
    except TypeError:
        pass
    return name


def _dtype_name(dtype: Any) -> str:
    name = str(dtype).replace("torch.", "")
    if name not in _NUMPY:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            pass
    if name == "bool_":
        name = "bool"
    if name not in _NUMPY:
        raise ValueError(f"dtype {dtype!r} is not supported; expected one of {sorted(_NUMPY)}")
    return name


def is_float(name: str) -> bool:
    return name in _BITS


@dataclass(frozen=True)
class FloatInfo:
    name: str
    eps: float  # spacing of 1.0
    max: float
    tiny: float  # smallest normal
    log_max: float  # log(max): exp overflows above this

    @property
    def unit_roundoff(self) -> float:
        return self.eps / 2


def finfo(name: str) -> FloatInfo:
    fi = ml_dtypes.finfo(np_dtype(name)) if name == "bfloat16" else np.finfo(np_dtype(name))
    return FloatInfo(
        name, float(fi.eps), float(fi.max), float(fi.tiny), float(np.log(float(fi.max)))
    )


POISON_KINDS = ("nan", "inf", "max", "-max", "-inf")


def special_value(kind: str, name: str) -> float:
    """The value of poison ``kind`` (one of ``POISON_KINDS``) in dtype ``name``."""
    if kind not in POISON_KINDS:
        raise ValueError(f"poison kind={kind!r} must be one of {POISON_KINDS}")
    if kind in ("max", "-max"):
        big = finfo(name).max
        return big if kind == "max" else -big
    return float(kind)


def cast(a: np.ndarray, name: str) -> np.ndarray:
    """Rounds ``a`` to dtype ``name`` (round to nearest even, as hardware conversions do)."""
    return np.asarray(a).astype(np_dtype(name))


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bit patterns of a float array (for bit-exact comparisons that see NaN payloads)."""
    name = dtype_name(a.dtype)
    if name not in _BITS:
        return np.ascontiguousarray(a).view(np.uint8)
    return np.ascontiguousarray(a).view(_BITS[name])


def ordered(a: np.ndarray) -> np.ndarray:
    """Maps floats to int64 so that adjacent floats differ by 1 (for ULP distances)."""
    name = dtype_name(a.dtype)
    width = np.dtype(_BITS[name]).itemsize * 8
    b = bits(a).astype(np.int64)
    sign = np.int64(1) << (width - 1)
    return np.where(b & sign, -(b & (sign - 1)), b)


def ulp_distance(kernel: np.ndarray, oracle64: np.ndarray, name: str) -> np.ndarray:
    """ULPs between ``kernel`` and the oracle rounded to ``name``; NaN where either is NaN."""
    k = cast(kernel, name)
    o = cast(oracle64, name)
    d = np.abs(ordered(k) - ordered(o)).astype(np.float64)
    return np.where(np.isnan(k.astype(np.float64)) | np.isnan(o.astype(np.float64)), np.nan, d)


def to_float64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def describe(a: np.ndarray) -> str:
    """``f16[3,17]``-style summary of an array."""
    short = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64"}
    name = dtype_name(a.dtype)
    return f"{short.get(name, name)}[{','.join(str(s) for s in a.shape)}]"
