"""How much of a run's time went into compiling kernels.

A launch during which Triton or JAX compiled something counts, wall time and all, as compile
time: the first launch of a new shape bucket or block size is dominated by its compilation.
Triton reports compilations through ``triton.knobs.compilation.listener``; JAX through its
monitoring events (tracing, lowering and backend compilation).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass
class _Counter:
    events: int = 0
    hits: int = 0  # compiles answered from a persistent cache (Triton's, JAX's)
    misses: int = 0  # compiles that ran the compiler


_counter = _Counter()
_lock = threading.Lock()
_installed = False


_watchers: list[tuple[Callable[[], None], Callable[[], None]]] = []


def _bump(*_: Any, **__: Any) -> None:
    if getattr(_quiet, "on", False):
        return
    with _lock:
        _counter.events += 1


# What the latest compiles were of (a Triton kernel's name, "jax"), numbered: what an example
# compiled, for the harness's diagnostics (``compiled_since``).
_names: list[tuple[int, str]] = []
_named = 0


def _name(name: str) -> None:
    global _named
    if getattr(_quiet, "on", False):
        return
    with _lock:
        _named += 1
        _names.append((_named, name))
        del _names[:-16]


def compile_mark() -> int:
    """A mark for :func:`compiled_since`."""
    with _lock:
        return _named


def compiled_since(mark: int) -> list[str]:
    """The names of what began to compile since ``mark`` (the last 16 at most)."""
    with _lock:
        return [name for n, name in _names if n > mark]


class NewCompile(BaseException):
    """Raised where a compilation is about to begin inside :func:`no_new_compiles` (a
    ``BaseException``: kernel wrappers and the harness's launch catch ``Exception`` only)."""


_forbid = threading.local()
_refused = 0  # compiles refused so far (NewCompile raised), in every thread


def _refuse() -> NewCompile:
    """Counts a refused compile; returns the exception to raise."""
    global _refused
    with _lock:
        _refused += 1
    return NewCompile()


def refusal_mark() -> int:
    """A mark for :func:`refused_in`."""
    with _lock:
        return _refused


def refused_in(exc: BaseException, mark: int) -> bool:
    """Whether ``exc``, raised by a launch that began at ``mark`` (:func:`refusal_mark`), is the
    harness's refusal of a compile (:class:`NewCompile`) however it came back: itself, chained
    (``__cause__``, ``__context__``, an exception group), or in another exception's place. A
    kernel run through host callbacks (Pallas's TPU interpret mode compiles the kernel's body
    inside one) gets it back from its runtime as that runtime's error, with the refusal's name
    in its text at best (``JaxRuntimeError: INTERNAL: CpuCallback error calling callback: ...
    NewCompile``; JAX 0.10 on the CPU: a ``ValueError``): a compile refused since ``mark``, in
    the launch that raised, is what ended it. Never the kernel's failure."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, NewCompile):
            return True
        if isinstance(e, BaseExceptionGroup):
            stack.extend(e.exceptions)
        stack.extend((e.__cause__, e.__context__))
    return refusal_mark() > mark


@contextlib.contextmanager
def no_new_compiles() -> Iterator[None]:
    """Inside it, a launch that would compile a kernel (a Triton JIT cache miss, a JAX lowering)
    raises :class:`NewCompile` before the compiler runs: shrinking on a compiled backend steps
    only to kernel variants that are compiled already. A persistent-cache hit still counts as a
    compile (it is not known before the lookup)."""
    with _raised(_forbid):
        yield


_quiet = threading.local()


@contextlib.contextmanager
def _raised(flag: threading.local) -> Iterator[None]:
    """Sets a thread's ``flag.on`` inside it (and what it was after)."""
    before = getattr(flag, "on", False)
    flag.on = True
    try:
        yield
    finally:
        flag.on = before


@contextlib.contextmanager
def unwatched() -> Iterator[None]:
    """Inside it, compiles are the harness's own (settling a compiler's state at start-up): no
    watcher hears of them, none is counted or refused."""
    with _raised(_quiet):
        yield


def compile_starting(*, lowering: bool = False, name: str | None = None) -> None:
    """Notifies the watchers that a compilation begins (the compilers' hooks call it; so may a
    plugin whose kernels compile through another route, or a test's fake compiler). Raises
    :class:`NewCompile` inside :func:`no_new_compiles`, except for a JAX lowering (``lowering``)
    while JAX's persistent cache is on: the program may be one another process compiled, and
    the refusal waits for the cache's answer (:func:`_on_jax_cache_miss`). A fresh campaign
    worker refused every load of what a warm-up compiled: 300 of 357 examples of a Pallas pair
    on an H100. ``name``: what compiles (the report names it where an example's lengths
    compiled).
    """
    if getattr(_quiet, "on", False):
        return
    if name is not None:
        _name(name)
    if getattr(_forbid, "on", False) and not (lowering and _jax_defers()):
        raise _refuse()
    _started()


_jax_miss_hook = False  # JAX tells us of a persistent-cache miss before it compiles
_jax_cache = False  # the harness turned JAX's persistent cache on (fuzz.backends)


def note_jax_cache() -> None:
    """Says that JAX's persistent compilation cache is on in this process."""
    global _jax_cache
    _jax_cache = True


def _jax_defers() -> bool:
    """Whether a JAX compile is refused at its persistent-cache miss rather than at lowering."""
    if not _jax_miss_hook:
        return False
    if _jax_cache:
        return True
    try:  # a cache the caller turned on (option names of JAX 0.4-0.10)
        import jax

        config: Any = jax.config
        return bool(config.jax_compilation_cache_dir) and bool(config.jax_enable_compilation_cache)
    except Exception:
        return False


# Where set, a compile refused at the persistent cache's miss says which program and cache key
# on stderr (JAX logs a miss only after this point, and only where it compiles): compared with
# the keys a compile worker wrote (``JAX_EXPLAIN_CACHE_MISSES=1`` logs them), it tells a key that
# differs between processes from a program nobody compiled (``.ci/pallas_cache_diag.py``).
LOG_REFUSED_KEYS = "KERNEL_FUZZ_LOG_REFUSED_KEYS"


def _refused_key() -> str:
    """``module 'NAME' key 'KEY'`` of the JAX compile now asking the cache (from the frame that
    looked it up), or what could be found."""
    frame = sys._getframe(1)
    while frame is not None:
        names = frame.f_locals
        if "cache_key" in names and "module_name" in names:
            return f"module {names['module_name']!r} key {names['cache_key']!r}"
        frame = frame.f_back  # type: ignore[assignment]
    return "module and key not found"


def _on_jax_cache_miss() -> None:
    """A lowered JAX program is not in the persistent cache: it is about to compile."""
    if getattr(_forbid, "on", False) and _jax_defers() and not getattr(_quiet, "on", False):
        _ended()  # the compile its lowering announced does not happen
        if os.environ.get(LOG_REFUSED_KEYS):
            print(f"refused at the persistent cache's miss: {_refused_key()}", file=sys.stderr)
        raise _refuse()


def compile_done() -> None:
    """Notifies the watchers that a compilation has ended and counts it (see
    :func:`compile_starting`)."""
    _bump()
    _ended()


def _started() -> None:
    if getattr(_quiet, "on", False):
        return
    for start, _ in list(_watchers):
        start()


def _ended() -> None:
    if getattr(_quiet, "on", False):
        return
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
            _cached(kwargs.get("cache_hit"))
            _ended()
            if previous is not None:
                previous(**kwargs)

        knobs.compilation.listener = listener
        previous_hook = knobs.runtime.jit_cache_hook

        def cache_hook(*args: Any, **kwargs: Any) -> Any:
            fn = kwargs.get("fn")
            _name(str(getattr(fn, "__name__", None) or getattr(fn, "name", None) or "triton"))
            compile_starting()
            return previous_hook(*args, **kwargs) if previous_hook is not None else None

        knobs.runtime.jit_cache_hook = cache_hook
    except Exception:  # triton absent or without knobs: nothing to hook
        pass
    try:
        import jax.monitoring

        def on_duration(event: str, duration_secs: float, **kwargs: Any) -> None:
            if "compile" in event or "trace" in event or "lower" in event:
                _bump()
            if "backend_compile" in event:  # recorded for a persistent-cache hit too
                _ended()
            elif "to_mlir" in event or "lower" in event:
                _name(f"jax {kwargs.get('fun_name') or 'program'}")
                compile_starting(lowering=True)

        def on_event(event: str, **kwargs: Any) -> None:
            if event == "/jax/compilation_cache/cache_hits":
                _cached(True)
            elif event == "/jax/compilation_cache/cache_misses":  # a compile written to it
                _cached(False)

        jax.monitoring.register_event_duration_secs_listener(on_duration)
        jax.monitoring.register_event_listener(on_event)
    except Exception:
        pass
    try:
        # JAX's own hook between a persistent-cache miss and the compile (its test utilities
        # count compiles with it); chained. Without it, refusals happen at lowering, as before.
        from jax._src import util as jax_util

        global _jax_miss_hook
        previous_test = getattr(jax_util, "test_event_listener", None)

        def on_test_event(name: str, *args: Any) -> None:
            if name == "compile_after_persistent_compilation_miss":
                _on_jax_cache_miss()
            if previous_test is not None:
                previous_test(name, *args)

        if hasattr(jax_util, "test_event") and hasattr(jax_util, "test_event_listener"):
            jax_util.test_event_listener = on_test_event
            _jax_miss_hook = True
    except Exception:
        pass


def _cached(hit: Any) -> None:
    """Counts a compile answered from a persistent cache (``hit``), or one that compiled (False);
    None: not known."""
    if hit is None or getattr(_quiet, "on", False):
        return
    with _lock:
        if hit:
            _counter.hits += 1
        else:
            _counter.misses += 1


def events() -> int:
    with _lock:
        return _counter.events


def cache_counts() -> tuple[int, int]:
    """(compiles answered from a persistent cache, compiles that ran the compiler) so far."""
    with _lock:
        return _counter.hits, _counter.misses


class LaunchTimer:
    """Times one launch and tells whether a compilation happened during it (``compiled``), and
    whether every compile it made was answered from a persistent cache (``loaded``: a kernel
    another process compiled, loaded into this one)."""

    def __enter__(self) -> LaunchTimer:
        install()
        self._events = events()
        self._cache = cache_counts()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self._t0
        self.compiled = events() > self._events
        hits, misses = cache_counts()
        self.loaded = self.compiled and hits > self._cache[0] and misses == self._cache[1]
