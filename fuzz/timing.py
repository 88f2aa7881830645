"""How much of a run's time went into compiling kernels.

A launch during which Triton or JAX compiled something counts, wall time and all, as compile
time: the first launch of a new shape bucket or block size is dominated by its compilation.
Triton reports compilations through ``triton.knobs.compilation.listener``; JAX through its
monitoring events (tracing, lowering and backend compilation).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class _Counter:
    events: int = 0


_counter = _Counter()
_lock = threading.Lock()
_installed = False


_watchers: list[tuple[Callable[[], None], Callable[[], None]]] = []


def _bump(*_: Any, **__: Any) -> None:
    with _lock:
        _counter.events += 1


def _started() -> None:
    for start, _ in list(_watchers):
        start()


def _ended() -> None:
    for _, end in list(_watchers):
        end()


def watch_compiles(start: Callable[[], None], end: Callable[[], None]) -> None:
    """Calls ``start()`` when a compilation begins and ``end()`` when it is done (a campaign worker
    stops its example clock meanwhile: a first compilation is not a hang). Triton: its JIT cache
    hook (a miss, before compiling) and its compilation listener; JAX: lowering done (the backend
    compile begins) and the backend compile's duration event."""
    install()
    _watchers.append((start, end))


def install() -> None:
    """Hooks the compilers' notifications (idempotent, chains any existing Triton listener)."""
    global _installed
    if _installed:
        return
    _installed = True
    try:
        import triton.knobs as knobs

        previous = knobs.compilation.listener

        def listener(**kwargs: Any) -> None:
            _bump()
            _ended()
            if previous is not None:
                previous(**kwargs)

        knobs.compilation.listener = listener
        previous_hook = knobs.runtime.jit_cache_hook

        def cache_hook(*args: Any, **kwargs: Any) -> Any:
            _started()
            return previous_hook(*args, **kwargs) if previous_hook is not None else None

        knobs.runtime.jit_cache_hook = cache_hook
    except Exception:  # triton absent or without knobs: nothing to hook
        pass
    try:
        import jax.monitoring

        def on_duration(event: str, duration_secs: float, **kwargs: Any) -> None:
            if "compile" in event or "trace" in event or "lower" in event:
                _bump()
            if "backend_compile" in event:
                _ended()
            elif "to_mlir" in event or "lower" in event:
                _started()

        jax.monitoring.register_event_duration_secs_listener(on_duration)
    except Exception:
        pass


def events() -> int:
    with _lock:
        return _counter.events


class LaunchTimer:
    """Times one launch and tells whether a compilation happened during it."""

    def __enter__(self) -> LaunchTimer:
        install()
        self._events = events()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self._t0
        self.compiled = events() > self._events
