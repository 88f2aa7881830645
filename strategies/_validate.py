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


def check_features(features: Any, allowed: Iterable[str]) -> frozenset[str]:
    """``features`` (the optional features a kernel supports; None: all of ``allowed``) as a
    frozenset, every name among ``allowed``."""
    allowed = tuple(allowed)
    if features is None:
        return frozenset(allowed)
    if isinstance(features, str) or not isinstance(features, Iterable):
        raise InvalidArgument(f"features={features!r} must be a set of names from {allowed}")
    bad = sorted(set(features) - set(allowed))
    if bad:
        raise InvalidArgument(f"features contains {bad}; this family's features are {allowed}")
    return frozenset(features)


def check_sizes(name: str, values: Any, default: tuple[Any, ...]) -> tuple[Any, ...]:
    """``values`` (sizes a kernel supports, in the order to try them; None: ``default``) as a
    non-empty tuple of positive ints."""
    if values is None:
        return default
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidArgument(f"{name}={values!r} must be a sequence of positive ints")
    values = tuple(values)
    if not values:
        raise InvalidArgument(f"{name} must not be empty")
    for v in values:
        if isinstance(v, tuple):
            for x in v:
                check_int(name, x, lo=1)
        else:
            check_int(name, v, lo=1)
    return values


def check_lengths(lengths: Any, allowed: Iterable[str]) -> dict[str, Any]:
    """``lengths`` (a kernel's length rules: ``{name: fit}``, ``fit(n, tiles) -> int`` mapping a
    drawn length to the nearest one the kernel takes at or above it; None: none) as a dict whose
    names are among ``allowed``."""
    allowed = tuple(allowed)
    if lengths is None:
        return {}
    if not hasattr(lengths, "items"):
        raise InvalidArgument(f"lengths={lengths!r} must map length names {allowed} to fits")
    bad = sorted(set(lengths) - set(allowed))
    if bad:
        raise InvalidArgument(f"lengths names {bad}; this strategy's lengths are {allowed}")
    for name, fit in lengths.items():
        if not callable(fit):
            raise InvalidArgument(f"lengths[{name!r}]={fit!r} must be callable: fit(n, tiles)")
    return dict(lengths)


def fitted(lengths: dict[str, Any], name: str, n: int, tiles: dict[str, Any]) -> int:
    """``n`` mapped by the rule of length ``name`` (itself without one)."""
    fit = lengths.get(name)
    return n if fit is None else int(fit(n, tiles))
