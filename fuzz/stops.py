"""Telling a stop from outside (Ctrl-C, SIGTERM) from an exception a kernel raised itself.

A kernel's fault is a finding whatever it raises, ``SystemExit``, ``GeneratorExit`` and
``KeyboardInterrupt`` included (a plugin's ``sys.exit()`` deep in a library, a generator closed
under it, a ``KeyboardInterrupt`` its own code raises). But a Ctrl-C or a SIGTERM turned into
``KeyboardInterrupt`` by a handler (pytest's, ``python -m fuzz mutants``'s, ``replay``'s) arrives
as the same exception in the middle of whatever runs, a kernel included: it must stop the run,
never become a finding. :func:`noting_stops` tells the two apart: while it is entered, every
stop signal delivered to a Python handler is noted before the handler runs; an exception that
unwinds through it with no stop noted came from the code it wrapped.

Signals reach Python handlers in the main thread only: in any other thread a
``KeyboardInterrupt`` is never a signal's. A campaign's worker processes ignore SIGINT, and
SIGTERM ends them outright (no handler), so there every such exception is the kernel's.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

# Signals that ask a process to stop (timeout, systemd, a CI runner, Ctrl-C, a closed terminal).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# Exceptions that are not ``Exception`` but that code under test raises as faults (Hypothesis
# counts the first two as failures too); anything else derived from ``BaseException`` alone is
# control flow of the harness (its time limits, Hypothesis's own), never a kernel's fault.
BASE_FAULTS = (SystemExit, GeneratorExit, KeyboardInterrupt)


@contextlib.contextmanager
def noting_stops() -> Iterator[list[int]]:
    """Notes the stop signals (:data:`STOP_SIGNALS`) delivered while the body runs; yields the
    list they are appended to. Each Python handler is wrapped for the time of the body (and
    restored after, also when the body raises); a handler that raises still raises."""
    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen  # no signal handler runs in this thread
        return
    saved: dict[int, Any] = {}
    for s in STOP_SIGNALS:
        handler = signal.getsignal(s)
        if not callable(handler):
            continue  # ignored, or the default action (the process ends, nothing unwinds)

        def noting(signum: int, frame: Any, _handler: Any = handler) -> Any:
            seen.append(signum)
            return _handler(signum, frame)

        try:
            signal.signal(s, noting)
        except (ValueError, OSError):  # not the main interpreter
            continue
        saved[s] = handler
    try:
        yield seen
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)


def is_fault(exc: BaseException, stops: list[int]) -> bool:
    """Whether ``exc``, raised by code run inside :func:`noting_stops` (which noted ``stops``),
    is that code's own fault: any ``Exception``; ``SystemExit``, ``GeneratorExit`` or
    ``KeyboardInterrupt`` unless a stop signal arrived meanwhile; never other control flow."""
    if isinstance(exc, Exception):
        return True
    return isinstance(exc, BASE_FAULTS) and not stops
