"""Dtypes and host arrays: NumPy (with ``ml_dtypes`` for bfloat16 and the 8-bit floats) is the
exchange format.

Cases hold NumPy arrays; backends convert them to torch tensors or JAX arrays and back. A type
NumPy lacks (bfloat16, float8) travels as its raw bits, since ``torch.from_numpy`` does not know
``ml_dtypes``' types.

Every dtype a kernel may hand the harness has a name (:func:`dtype_name`, for any NumPy, torch or
JAX dtype); the harness holds it on the host where NumPy or ``ml_dtypes`` has its type
(:data:`DTYPES`), and says where it cannot (:class:`fuzz.failures.HarnessLimit`, a declined
example, never a kernel's crash).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from fuzz.failures import HarnessLimit

FLOAT_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class Dtype:
    """One dtype the harness holds on the host.

    Attributes:
        name: its canonical name (NumPy's, torch's and JAX's: ``float8_e4m3fn``).
        kind: ``float``, ``int`` (signed), ``uint``, ``bool`` or ``complex``.
        numpy: its NumPy type (``ml_dtypes``' for the types NumPy lacks).
        native: NumPy's own type (torch converts it); else ``ml_dtypes``', moved as raw bits.
    """

    name: str
    kind: str
    numpy: np.dtype
    native: bool = True

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize


# NumPy's own, and ml_dtypes' (those of the installed version): bfloat16, the 8-, 6- and 4-bit
# floats and the sub-byte integers, each held in a byte or two.
_NATIVE = {
    "float": ("float64", "float32", "float16"),
    "int": ("int8", "int16", "int32", "int64"),
    "uint": ("uint8", "uint16", "uint32", "uint64"),
    "bool": ("bool",),
    "complex": ("complex64", "complex128"),
}
_ML_DTYPES = {
    "float": (
        "bfloat16",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float8_e4m3b11fnuz",
        "float8_e4m3",
        "float8_e3m4",
        "float8_e8m0fnu",
        "float6_e2m3fn",
        "float6_e3m2fn",
        "float4_e2m1fn",
    ),
    "int": ("int2", "int4"),
    "uint": ("uint2", "uint4"),
}


def _table() -> dict[str, Dtype]:
    out = {n: Dtype(n, kind, np.dtype(n)) for kind, names in _NATIVE.items() for n in names}
    for kind, names in _ML_DTYPES.items():
        for n in names:
            if hasattr(ml_dtypes, n):
                out[n] = Dtype(n, kind, np.dtype(getattr(ml_dtypes, n)), native=False)
    return out


DTYPES: dict[str, Dtype] = _table()
_UINTS: dict[int, np.dtype] = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.uint16),
    4: np.dtype(np.uint32),
    8: np.dtype(np.uint64),
}


def np_dtype(name: str) -> np.dtype:
    """The NumPy type of dtype ``name`` (one of :data:`DTYPES`)."""
    try:
        return DTYPES[name].numpy
    except (KeyError, TypeError):
        raise ValueError(f"dtype={name!r} is not one of {sorted(DTYPES)}") from None


def host_dtype(name: str, what: str) -> np.dtype:
    """:func:`np_dtype` of a dtype a kernel chose (``what``: where the harness met it): one NumPy
    has no type for (torch's ``complex32``, its quantized and bit-container types) is the
    harness's limit, never the kernel's fault.

    Raises:
        HarnessLimit: NumPy and ``ml_dtypes`` have no type ``name``.
    """
    dt = DTYPES.get(name)
    if dt is None:
        raise HarnessLimit(f"{what} of dtype {name}, which NumPy cannot hold")
    return dt.numpy


_NAMES: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """The canonical name of a NumPy, torch or JAX dtype (``'bfloat16'``, ``'float32'``,
    ``'uint8'``...), or of a dtype name: every dtype has one, those the harness cannot hold on
    the host too (torch's ``'qint8'``; see :data:`DTYPES` for those it can).

    Raises:
        ValueError: ``dtype`` is not a dtype.
    """
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
    if isinstance(dtype, str) and dtype.removeprefix("torch.") in DTYPES:
        return dtype.removeprefix("torch.")
    if type(dtype).__module__.split(".")[0] == "torch":  # torch.dtype: torch's own name
        return str(dtype).removeprefix("torch.")
    try:
        name = np.dtype(dtype).name
    except TypeError:
        raise ValueError(
            f"dtype {dtype!r} is not a dtype (a NumPy, torch or JAX dtype, or one of "
            f"{sorted(DTYPES)})"
        ) from None
    return "bool" if name == "bool_" else name


def is_float(name: str) -> bool:
    """Whether dtype ``name`` is a floating-point type the harness holds (bfloat16, float8...)."""
    dt = DTYPES.get(name)
    return dt is not None and dt.kind == "float"


def holds_nan(name: str) -> bool:
    """Whether dtype ``name`` has a NaN (a float but the 6- and 4-bit ones): where it does not, an
    output's initial NaN cannot be told from a value written (a NaN converts to a number)."""
    if not is_float(name):
        return False
    return bool(np.isnan(np.array([np.nan]).astype(np_dtype(name)).astype(np.float64))[0])


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
    if not is_float(name):
        floats = sorted(n for n in DTYPES if is_float(n))
        raise ValueError(f"dtype={name!r} is not a float dtype; expected one of {floats}")
    fi = ml_dtypes.finfo(np_dtype(name))  # NumPy's own floats too
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


def uint_of(itemsize: int) -> np.dtype:
    """The unsigned integer type of ``itemsize`` bytes (to view raw bits through)."""
    try:
        return _UINTS[itemsize]
    except KeyError:
        raise ValueError(
            f"itemsize={itemsize} has no unsigned type; one of {sorted(_UINTS)}"
        ) from None


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bit patterns of a float array (for bit-exact comparisons that see NaN payloads);
    the bytes of any other array."""
    a = np.ascontiguousarray(a)
    if not is_float(dtype_name(a.dtype)):
        return a.view(np.uint8)
    return a.view(uint_of(a.dtype.itemsize))


def ordered(a: np.ndarray) -> np.ndarray:
    """Maps floats to int64 so that adjacent floats differ by 1 (for ULP distances; a
    sign-magnitude type that fills its bytes: the IEEE types, bfloat16, the 8-bit floats but
    ``float8_e8m0fnu``)."""
    name = dtype_name(a.dtype)
    if not is_float(name):
        raise ValueError(f"ordered() needs a float array, not {name}")
    width = a.dtype.itemsize * 8
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


_SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64"}


def describe(a: np.ndarray) -> str:
    """``f16[3,17]``-style summary of an array."""
    name = dtype_name(a.dtype)
    return f"{_SHORT.get(name, name)}[{','.join(str(s) for s in a.shape)}]"
