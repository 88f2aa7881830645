"""One executable per kernel program per process, for the project's jitted Pallas wrappers.

``jax.jit`` keeps a compiled program in caches keyed on the tracing context as well as the
arguments. A GPU campaign worker (JAX 0.11.2) lowered one Pallas attention program again for
nearly every launch, 663 lowerings and 643 loads from the persistent cache for 209 examples, and
a Pallas module JAX imports only at its first interpreted launch adds a value to the tracing
context, so that every program launched before it was lowered (and looked up on disk) again.
:func:`compiled_programs` keeps the ``Compiled`` executable of each program it launched, keyed
on the tracing context, the arguments' types and placements and the static arguments, and
calls it directly: a program compiles (or loads) at most once per context in a process.

Calls it cannot key (an argument that is a tracer, a NumPy array or a Python number, or
``jax.disable_jit()`` in effect) go to the jitted function as before.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import jax

_CACHES: list[dict[Any, Any]] = []
_lock = threading.Lock()


def clear() -> None:
    """Drops every executable the wrappers keep (with ``jax.clear_caches()``, to release what
    they hold: a campaign worker clears both when its memory maps run high)."""
    with _lock:
        for cache in _CACHES:
            cache.clear()


def cached_executables() -> int:
    """How many executables the wrappers keep now."""
    with _lock:
        return sum(len(c) for c in _CACHES)


def _tracing_context() -> Any:
    try:
        from jax._src import config

        return config.trace_context()
    except Exception:  # a JAX without it: the executables are keyed on the arguments only
        return None


def _jit_disabled() -> bool:
    try:
        from jax._src import config

        return bool(config.disable_jit.value)
    except Exception:
        return False


def _leaf_key(leaf: Any) -> Any:
    """What a compiled program needs of an argument (None: an argument it cannot key)."""
    if leaf is None:
        return ("none",)
    if isinstance(leaf, jax.core.Tracer) or not isinstance(leaf, jax.Array):
        return None
    try:
        return (leaf.aval, leaf.sharding)
    except Exception:
        return None


def compiled_programs(
    fn: Callable[..., Any], static_argnames: tuple[str, ...], **jit_kwargs: Any
) -> Callable[..., Any]:
    """``jax.jit(fn, static_argnames=..., **jit_kwargs)``, whose calls run the executable this
    process compiled (or loaded) for the same program, when there is one."""
    jitted = jax.jit(fn, static_argnames=static_argnames, **jit_kwargs)
    cache: dict[Any, Any] = {}
    with _lock:
        _CACHES.append(cache)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        static = tuple(sorted((k, v) for k, v in kwargs.items() if k in static_argnames))
        dynamic = {k: v for k, v in kwargs.items() if k not in static_argnames}
        if _jit_disabled():
            return jitted(*args, **kwargs)
        leaves, tree = jax.tree_util.tree_flatten((args, dynamic), is_leaf=lambda x: x is None)
        keys = [_leaf_key(x) for x in leaves]
        if any(k is None for k in keys):
            return jitted(*args, **kwargs)
        try:
            key = (_tracing_context(), tree, tuple(keys), static)
            hash(key)
        except TypeError:  # an unhashable static argument: jax.jit says what is wrong
            return jitted(*args, **kwargs)
        executable = cache.get(key)
        if executable is None:
            executable = jitted.lower(*args, **kwargs).compile()
            with _lock:
                cache[key] = executable
        return executable(*args, **dynamic)

    call.jitted = jitted  # type: ignore[attr-defined]
    return call
