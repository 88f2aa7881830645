"""Error metrics and the tolerance policy.

``measure`` only measures; ``Tolerance.bound`` only computes the allowed error; the properties
decide. The default rule is the one flash-attention's tests use: the kernel's error against the
fp64 oracle may not exceed ``rho`` times the error of a naive implementation computing in the same
dtype (what eager PyTorch would give), plus a noise floor of a few units in the last place of the
output's largest value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fuzz.arrays import dtype_name, finfo, to_float64, ulp_distance


@dataclass(frozen=True)
class Worst:
    """The worst element of a comparison."""

    index: tuple[int, ...]
    kernel: float
    oracle: float
    error: float

    def where(self, output: str) -> str:
        return f"{output}[{', '.join(str(i) for i in self.index)}]"


@dataclass(frozen=True)
class Metrics:
    """How far an output is from the fp64 oracle (elements where the oracle is NaN are ignored)."""

    max_abs: float
    max_rel: float
    max_ulp: float
    rmse: float
    naive_max_abs: float | None
    rmse_ratio: float | None  # kernel RMSE / naive RMSE
    worst: Worst | None
    nonfinite_where_finite: int  # NaN/Inf in the kernel where the oracle is finite
    special_mismatch: int  # oracle +-Inf where the kernel differs
    first_nonfinite: Worst | None = None

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k not in ("worst", "first_nonfinite")}
        if self.worst is not None:
            d["worst"] = self.worst.__dict__
        return d


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a)))) if a.size else 0.0


def measure(kernel: np.ndarray, oracle: np.ndarray, naive: np.ndarray | None = None) -> Metrics:
    """Compares a kernel output with the fp64 oracle (and, optionally, the naive reference)."""
    with np.errstate(all="ignore"):  # inf - inf and friends are masked out below
        return _measure(kernel, oracle, naive)


def _measure(kernel: np.ndarray, oracle: np.ndarray, naive: np.ndarray | None) -> Metrics:
    if kernel.shape != oracle.shape:
        raise ValueError(f"kernel output shape {kernel.shape} != oracle shape {oracle.shape}")
    name = dtype_name(kernel.dtype)
    k = to_float64(kernel)
    o = np.asarray(oracle, np.float64)
    finite = np.isfinite(o)
    bad = finite & ~np.isfinite(k)
    special = ~finite & ~np.isnan(o) & (k != o)
    err = np.where(finite & np.isfinite(k), np.abs(k - o), 0.0)
    tiny = finfo(name).tiny if name != "float64" else 1e-300
    rel = err / np.maximum(np.abs(o), tiny)
    rel = np.where(finite, rel, 0.0)
    ulps = ulp_distance(kernel, np.where(finite, o, 0.0), name) if name != "float64" else rel
    ulps = np.where(finite & np.isfinite(k), ulps, 0.0)
    worst = None
    if err.size:
        flat = int(np.argmax(err))
        idx = _index(flat, err.shape)
        worst = Worst(idx, float(k.flat[flat]), float(o.flat[flat]), float(err.flat[flat]))
    first_bad = None
    if bad.any() or special.any():
        flat = int(np.flatnonzero(bad | special)[0])
        first_bad = Worst(
            _index(flat, k.shape), float(k.flat[flat]), float(o.flat[flat]), float("inf")
        )
    naive_max = ratio = None
    if naive is not None:
        nv = to_float64(naive)
        nerr = np.where(finite & np.isfinite(nv), np.abs(nv - o), 0.0)
        naive_max = float(nerr.max()) if nerr.size else 0.0
        nrms = _rms(nerr[finite])
        krms = _rms(err[finite])
        ratio = krms / nrms if nrms > 0 else (0.0 if krms == 0 else float("inf"))
    return Metrics(
        max_abs=float(err.max()) if err.size else 0.0,
        max_rel=float(rel.max()) if rel.size else 0.0,
        max_ulp=float(np.nanmax(ulps)) if ulps.size else 0.0,
        rmse=_rms(err[finite]),
        naive_max_abs=naive_max,
        rmse_ratio=ratio,
        worst=worst,
        nonfinite_where_finite=int(bad.sum()),
        special_mismatch=int(special.sum()),
        first_nonfinite=first_bad,
    )


@dataclass(frozen=True)
class Tolerance:
    """Allowed error of one output against the fp64 oracle.

    ``bound = rho * naive_max_abs + floor_ulps * eps(dtype) * max(|oracle|)`` (+ ``atol``).

    Attributes:
        rho: how many times worse than the naive same-dtype reference the kernel may be.
        floor_ulps: the noise floor, in units of the dtype's epsilon at the output's magnitude.
        atol: an absolute allowance on top (0 by default).
        divergence_factor: compiled vs interpreted may differ by this many times the bound (two
            results each within the bound of the oracle are within twice it of each other; fast
            ``exp`` and TF32 dots are what moves the compiled one).
    """

    rho: float = 2.0
    floor_ulps: float = 2.0
    atol: float = 0.0
    divergence_factor: float = 2.0

    def __post_init__(self) -> None:
        for name in ("rho", "floor_ulps", "atol", "divergence_factor"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value >= 0 and np.isfinite(value)):
                raise ValueError(f"Tolerance.{name}={value!r} must be a finite number >= 0")

    def bound(self, oracle: np.ndarray, naive_max_abs: float | None, dtype: str) -> float:
        o = np.asarray(oracle, np.float64)
        finite = o[np.isfinite(o)]
        magnitude = float(np.abs(finite).max()) if finite.size else 0.0
        eps = finfo(dtype).eps if dtype != "float64" else 2.0**-52
        floor = self.floor_ulps * eps * max(magnitude, finfo(dtype).tiny)
        return self.rho * (naive_max_abs or 0.0) + floor + self.atol

    def describe(self) -> str:
        return f"rho={self.rho} x naive + {self.floor_ulps} eps x max|oracle|" + (
            f" + {self.atol}" if self.atol else ""
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "rho": self.rho,
            "floor_ulps": self.floor_ulps,
            "atol": self.atol,
            "divergence_factor": self.divergence_factor,
        }


# The softmax families' rule (row softmax, jagged softmax): twice the error of the naive
# same-dtype softmax (one pass, libm exp), plus 4 eps of the largest output. An online softmax over
# several tiles rounds two exponentials per element (its own and the running max's rescale; a
# GPU's fast exp2 is good to ~2 ulp each, plus the rounding of its scaled argument), a rescale
# product and the division: ~6 ulp of an element near the largest. Measured: a 69-row jagged
# segment over two 64-row tiles on an H100, 4.8 ulp.
ONLINE_SOFTMAX = Tolerance(rho=2.0, floor_ulps=4.0)
