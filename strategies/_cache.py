"""Strategy factories are cached.

Family strategies call the shared factories (``sizes``, ``value_recipes``...) inside their own
``@st.composite`` draws, with arguments that depend on what was drawn before. Building a
composite strategy is not free (Hypothesis inspects the function's source), and on a GPU, where
a launch takes microseconds, rebuilding a handful of them per example cost more than the kernel.
A factory wrapped here builds each distinct strategy once; sequences in its arguments are turned
into tuples so that lists work as keys too. Argument errors are raised on every call (errors are
not cached).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def _frozen(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def cached_factory(fn: F) -> F:
    """Memoizes a strategy factory on its (hashable, or list-valued) arguments."""
    cached = functools.lru_cache(maxsize=4096)(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        args = tuple(_frozen(a) for a in args)
        kwargs = {k: _frozen(v) for k, v in kwargs.items()}
        try:
            return cached(*args, **kwargs)
        except TypeError as e:
            if "unhashable" not in str(e):
                raise
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
