"""How much of a run's time went into compiling kernels.

A launch during which Triton or JAX compiled something counts, wall time and all, as compile
time: the first launch of a new shape bucket or block size is dominated by its compilation.
Triton reports compilations through ``triton.knobs.compilation.listener``; JAX through its
monitoring events (tracing, lowering and backend compilation).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any


@dataclass
class _Counter:
    events: int = 0


_counter = _Counter()
_lock = threading.Lock()
_installed = False


def _bump(*_: Any, **__: Any) -> None:
    with _lock:
        _counter.events += 1


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
            if previous is not None:
                previous(**kwargs)

        knobs.compilation.listener = listener
    except Exception:  # triton absent or without knobs: nothing to hook
        pass
    try:
        import jax.monitoring

        def on_duration(event: str, duration_secs: float, **kwargs: Any) -> None:
            if "compile" in event or "trace" in event or "lower" in event:
                _bump()

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
