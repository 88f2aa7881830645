"""Argument checks for strategy factories; every error is Hypothesis's ``InvalidArgument`` and names
the argument, the value and what would be valid."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hypothesis.errors import InvalidArgument


def check_int(name: str, value: Any, *, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name}={value!r} must be an int")
    if lo is not None and value < lo:
        raise InvalidArgument(f"{name}={value} must be >= {lo}")
    if hi is not None and value > hi:
        raise InvalidArgument(f"{name}={value} must be <= {hi}")
    return value


def check_order(lo_name: str, lo: int, hi_name: str, hi: int) -> None:
    if lo > hi:
        raise InvalidArgument(f"{lo_name}={lo} is larger than {hi_name}={hi}")


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    allowed = tuple(allowed)
    if value not in allowed:
        raise InvalidArgument(f"{name}={value!r} must be one of {allowed}")
    return value


def check_subset(name: str, values: Any, allowed: Iterable[Any]) -> tuple[Any, ...]:
    allowed = tuple(allowed)
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidArgument(f"{name}={values!r} must be a sequence drawn from {allowed}")
    values = tuple(values)
    if not values:
        raise InvalidArgument(f"{name} must not be empty; choose from {allowed}")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise InvalidArgument(f"{name} contains {bad!r}; allowed values are {allowed}")
    return values


def check_pow2(name: str, value: Any, *, lo: int = 1, hi: int | None = None) -> int:
    check_int(name, value, lo=lo, hi=hi)
    if value & (value - 1):
        raise InvalidArgument(f"{name}={value} must be a power of two")
    return value


def check_scale(scale: Any) -> str:
    return check_choice("scale", scale, ("small", "large"))
