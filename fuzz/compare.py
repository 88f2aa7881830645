"""Error metrics and the tolerance policy.

``measure`` only measures; ``Tolerance.bound`` only computes the allowed error; the properties
decide. The default rule is the one flash-attention's tests use: the kernel's error against the
fp64 oracle may not exceed ``rho`` times the error of a naive implementation computing in the same
dtype (what eager PyTorch would give), plus a noise floor of a few units in the last place of the
output's largest value.
"""

from __future__ import annotations

import functools
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


class Metrics:
    """How far an output is from the fp64 oracle (elements where the oracle is NaN are ignored).

    What a verdict needs is computed at once: the max absolute error and where it is, NaN/Inf
    where the oracle is finite and +-Inf mismatches. The rest (the naive reference's max error,
    max relative error, ULPs, RMSEs) is only reported, and most examples pass: it is computed on
    first use (a finding's details, ``as_dict``).
    """

    def __init__(self, kernel: np.ndarray, oracle: np.ndarray, naive: np.ndarray | None) -> None:
        if kernel.shape != oracle.shape:
            raise ValueError(f"kernel output shape {kernel.shape} != oracle shape {oracle.shape}")
        self._kernel = kernel
        self._name = dtype_name(kernel.dtype)
        k = to_float64(kernel)
        o = np.asarray(oracle, np.float64)
        with np.errstate(all="ignore"):  # inf - inf and friends are masked out below
            finite = np.isfinite(o)
            k_finite = np.isfinite(k)
            bad = finite & ~k_finite
            special = ~finite & ~np.isnan(o) & (k != o)
            err = np.abs(k - o)
            err[~(finite & k_finite)] = 0.0
        err.setflags(write=False)
        self._o, self._finite, self._err = o, finite, err
        self._nonfinite = bad | special
        self._nonfinite.setflags(write=False)
        self._both_finite = finite & k_finite
        self.max_abs = float(err.max()) if err.size else 0.0
        self.worst: Worst | None = None
        if err.size:
            flat = int(np.argmax(err))
            idx = _index(flat, err.shape)
            self.worst = Worst(idx, float(k.flat[flat]), float(o.flat[flat]), float(err.flat[flat]))
        self.nonfinite_where_finite = int(bad.sum())
        self.special_mismatch = int(special.sum())
        self.first_nonfinite: Worst | None = None
        if self.nonfinite_where_finite or self.special_mismatch:
            flat = int(np.flatnonzero(self._nonfinite)[0])
            self.first_nonfinite = Worst(
                _index(flat, k.shape), float(k.flat[flat]), float(o.flat[flat]), float("inf")
            )
        self._naive = naive

    @property
    def errors(self) -> np.ndarray:
        """``|kernel - oracle|`` per element, 0 where either is not finite (read-only)."""
        return self._err

    @property
    def nonfinite(self) -> np.ndarray:
        """Where the kernel is not finite and the oracle is, or both are special and differ
        (read-only)."""
        return self._nonfinite

    @functools.cached_property
    def naive_max_abs(self) -> float | None:
        """The naive reference's max error (None without one)."""
        return None if self._naive is None else measure_naive(self._naive, self._o)

    @functools.cached_property
    def max_rel(self) -> float:
        if not self._err.size:
            return 0.0
        tiny = finfo(self._name).tiny if self._name != "float64" else 1e-300
        with np.errstate(all="ignore"):
            rel = self._err / np.maximum(np.abs(self._o), tiny)
        return float(np.where(self._finite, rel, 0.0).max())

    @functools.cached_property
    def max_ulp(self) -> float:
        if not self._err.size:
            return 0.0
        if self._name == "float64":
            return self.max_rel
        with np.errstate(all="ignore"):
            ulps = ulp_distance(self._kernel, np.where(self._finite, self._o, 0.0), self._name)
        return float(np.nanmax(np.where(self._both_finite, ulps, 0.0)))

    @functools.cached_property
    def rmse(self) -> float:
        return _rms(self._err[self._finite])

    @functools.cached_property
    def rmse_ratio(self) -> float | None:
        """Kernel RMSE / naive RMSE (None without a naive reference)."""
        if self._naive is None:
            return None
        nrms = _rms(_naive_errors(self._naive, self._o)[self._finite])
        return self.rmse / nrms if nrms > 0 else (0.0 if self.rmse == 0 else float("inf"))

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "max_ulp": self.max_ulp,
            "rmse": self.rmse,
            "naive_max_abs": self.naive_max_abs,
            "rmse_ratio": self.rmse_ratio,
            "nonfinite_where_finite": self.nonfinite_where_finite,
            "special_mismatch": self.special_mismatch,
        }
        if self.worst is not None:
            d["worst"] = self.worst.__dict__
        return d


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a)))) if a.size else 0.0


def _naive_errors(naive: np.ndarray, oracle: np.ndarray) -> np.ndarray:
    """``|naive - oracle|``, 0 where either is not finite."""
    nv = to_float64(naive)
    o = np.asarray(oracle, np.float64)
    with np.errstate(all="ignore"):
        nerr = np.abs(nv - o)
    nerr[~(np.isfinite(o) & np.isfinite(nv))] = 0.0
    return nerr


def measure_naive(naive: np.ndarray, oracle: np.ndarray) -> float:
    """The naive reference's max absolute error where both it and the oracle are finite."""
    nerr = _naive_errors(naive, oracle)
    return float(nerr.max()) if nerr.size else 0.0


def measure(kernel: np.ndarray, oracle: np.ndarray, naive: np.ndarray | None = None) -> Metrics:
    """Compares a kernel output with the fp64 oracle (and, optionally, the naive reference)."""
    return Metrics(kernel, oracle, naive)


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
        ratio_caps_analysis: for a target with a per-element analytic bound
            (``Target.error_bound``): whether this ratio rule also applies, the smaller of the two
            being the bound. Only where the family shows the rule justified: the naive
            reference's error must be one that every implementation incurs (a same-dtype naive
            that is exact by luck, as fp32 logits scaled by a power of two make it, is not).
    """

    rho: float = 2.0
    floor_ulps: float = 2.0
    atol: float = 0.0
    divergence_factor: float = 2.0
    ratio_caps_analysis: bool = False

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
            "ratio_caps_analysis": self.ratio_caps_analysis,
        }


# The softmax families' rule (row softmax, jagged softmax): twice the error of the naive
# same-dtype softmax (one pass, libm exp), plus 4 eps of the largest output. An online softmax over
# several tiles rounds two exponentials per element (its own and the running max's rescale; a
# GPU's fast exp2 is good to ~2 ulp each, plus the rounding of its scaled argument), a rescale
# product and the division: ~6 ulp of an element near the largest. Measured: a 69-row jagged
# segment over two 64-row tiles on an H100, 4.8 ulp.
ONLINE_SOFTMAX = Tolerance(rho=2.0, floor_ulps=4.0)
