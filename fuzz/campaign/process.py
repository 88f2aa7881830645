"""A campaign worker's process: its exit codes (and how it ended, in words: :func:`exit_text`),
its memory maps, its share of a GPU's memory, and dying with its campaign.

A long-lived worker on the CPU interpreters compiles an XLA program for every new shape (Pallas
``interpret=True``, JAX-based plugins), and each keeps memory maps of its JIT-compiled code
(measured in one process: 40-100 per example over the first hundred examples of the attention
and softmax targets, about 3 per trivial jitted program; attention alone levels off near 16,000
maps after 3,000 examples as shapes repeat, but every target and mutant compiles programs of its
own). At the kernel's limit (``vm.max_map_count``, 65530 by default) LLVM fails with "Cannot
allocate memory" and the process dies by SIGSEGV. :class:`MapBudget` watches the count: at
:data:`CLEAR_AT` of the limit it clears JAX's compile caches (which frees those maps: 4,000 ->
620 in a Pallas attention worker), and at :data:`RECYCLE_AT` the worker ends its slice and exits
with :data:`EXIT_RECYCLE`, to be replaced by a fresh one. The parent samples each worker's count
too and tells a death near the limit (or after an out-of-memory message) from a kernel crash.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

EXIT_CONTEXT_LOST = 86
EXIT_RECYCLE = 87  # a worker that ends itself to be replaced by a fresh process (memory maps)
EXIT_DEVICE_MEMORY = 88  # a worker whose GPU memory ran out: a fresh process takes over
EXIT_NODE_LOST = 89  # a worker on a cluster node that went away (its actor died with the node)

# What a worker calls to exit with a code (a process: os._exit; a Ray actor says its code to
# the coordinator first: fuzz.campaign.ray_worker).
EXIT_HOOK: Callable[[int], None] | None = None


def exit_worker(code: int) -> None:
    """Ends this worker with ``code`` (:data:`EXIT_CONTEXT_LOST`, :data:`EXIT_DEVICE_MEMORY`):
    at once, whatever runs (a process that lost its CUDA context must not run anything more)."""
    if EXIT_HOOK is not None:
        EXIT_HOOK(code)
    os._exit(code)


# Fractions of the memory-map limit: clear JAX's compile caches, recycle the worker, and (the
# parent) call a worker's death by a signal at this count a resource exhaustion, not a crash.
CLEAR_AT, RECYCLE_AT, OUT_OF_MAPS_AT = 0.4, 0.6, 0.85


def map_limit() -> int | None:
    """How many memory maps a process may have (``KERNEL_FUZZ_MAP_LIMIT``, else the kernel's
    ``vm.max_map_count``); None where the system does not say."""
    env = os.environ.get("KERNEL_FUZZ_MAP_LIMIT")
    if env:
        if not env.isdigit() or int(env) < 100:
            raise ValueError(f"KERNEL_FUZZ_MAP_LIMIT={env!r} must be an integer >= 100")
        return int(env)
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return None


def count_maps(pid: int | str = "self") -> int | None:
    """The number of memory maps of process ``pid`` (None where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return None


class MapBudget:
    """Keeps this process's memory maps under its limit (see the module's docstring): call
    :meth:`check` between examples; once it returns True the worker should end its slice and
    exit with :data:`EXIT_RECYCLE`."""

    def __init__(self, limit: int | None, *, every: float = 0.5) -> None:
        self.limit = limit
        self.every = every  # seconds between two counts (a count reads /proc: a few ms)
        self.last = 0.0
        self.cleared_at = 0  # the count after the last clear
        self.recycle: int | None = None  # the count that asked for a fresh process
        # A fresh process is asked for only once this one has grown by a tenth of the limit:
        # a limit below what a process needs to start must not recycle workers endlessly.
        self.start = count_maps() or 0

    def check(self, *, now: bool = False) -> bool:
        t = time.monotonic()
        if (
            self.limit is None
            or self.recycle is not None
            or (not now and t - self.last < self.every)
        ):
            return self.recycle is not None
        self.last = t
        n = count_maps()
        if n is None:
            return False
        n = self.clear_if_due(n)
        if n >= RECYCLE_AT * self.limit and n >= self.start + 0.1 * self.limit:
            self.recycle = n
        return self.recycle is not None

    def clear_if_due(self, n: int | None = None) -> int:
        """Clears JAX's compile caches once the count ``n`` (counted now if None) reaches
        :data:`CLEAR_AT` of the limit and has grown by a tenth of it since the last clear;
        returns the count. A process that cannot be recycled (pytest's) calls only this."""
        n = count_maps() if n is None else n
        if n is None or self.limit is None:
            return n or 0
        if n >= CLEAR_AT * self.limit and n >= self.cleared_at + 0.1 * self.limit:
            n = self.clear(n)
        return n

    def clear(self, before: int) -> int:
        """Clears JAX's compile caches (their executables hold the maps); returns the count."""
        import gc

        jax = sys.modules.get("jax")
        if jax is not None:
            jax.clear_caches()
        programs = sys.modules.get("kernels._programs")
        if programs is not None:  # the executables the project's Pallas wrappers keep
            programs.clear()
        gc.collect()
        after = count_maps() or before
        self.cleared_at = after
        print(
            f"memory maps: {before} -> {after} of {self.limit} after clearing the compile caches",
            file=sys.stderr,
            flush=True,
        )
        return after


# Dying with the campaign ------------------------------------------------------------------------

PR_SET_PDEATHSIG = 1  # prctl(2)

# The guard of a worker's process group (see :func:`die_with_campaign`): a tiny process in the
# group that waits for the worker (its parent) to end, however it ends, then kills the group.
_GUARD = """
import os, signal, sys, time
leader = int(sys.argv[1])
for s in (signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
while os.getppid() == leader:
    time.sleep(0.2)
os.killpg(leader, signal.SIGKILL)
"""


def die_with_campaign(parent_pid: int | None) -> None:
    """Makes this worker, and every process it starts, end with the campaign's process.

    A worker killed outright (its campaign got ``kill -9``, or an OOM kill) must not live on
    inside a hung kernel, holding a GPU. Three pieces, Linux only:

    * the worker leads a process group of its own, which the processes it starts (a library's
      helpers, a compiler) inherit;
    * the parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``): the kernel kills the worker
      the moment the campaign's process ends, even in a kernel that never returns to Python;
    * a guard process in the group waits for the worker to end (that way or any other: killed
      for a hang, recycled, stopped) and then kills the whole group, so no child outlives it.

    The campaign's ``SIGTERM``/``SIGINT`` to its own process group no longer reaches the worker:
    the campaign stops its workers itself. Elsewhere than Linux this does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import subprocess

    try:
        os.setpgid(0, 0)
    except OSError:
        return  # (a session leader already): leave the process where it is
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)  # the campaign ended before the parent-death signal was armed
    subprocess.Popen(
        [sys.executable, "-S", "-I", "-c", _GUARD, str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
    )


def share_gpu_memory(k: int) -> float | None:
    """Splits one GPU's memory between the ``k`` campaign processes on it (fuzzing and compile
    workers), as the pytest plugin splits it between xdist workers: XLA's fraction is set here,
    before JAX starts; torch's is returned, to be applied once torch is loaded. On an H100 with
    13 processes and no split, JAX grew until a kernel launch failed with CUDA_ERROR_OUT_OF_MEMORY
    and a correct kernel read as a crash. ``KERNEL_FUZZ_GPU_SHARE``: ``off`` leaves the
    allocators alone; a number, the share of the GPU the campaign takes (``threads.gpu_share``)."""
    from fuzz.campaign.threads import gpu_share, split_gpu_memory

    return split_gpu_memory(k, gpu_share())


def cap_torch_memory(fraction: float) -> None:
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.set_per_process_memory_fraction(fraction)
    except Exception as e:  # a cap is a courtesy to the other processes: never fatal
        print(f"GPU memory share not applied: {type(e).__name__}: {e}", file=sys.stderr)


# How a worker's process ended ---------------------------------------------------------------

# Signals that ask a process to stop (timeout, systemd, a CI runner, Ctrl-C, a closed terminal):
# a worker ended by one of them was stopped, it did not crash.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def stop_signal(code: int | None) -> str | None:
    """The name of the stop signal that ended a process with exit ``code``, else None."""
    if code is None or code >= 0 or -code not in {s.value for s in STOP_SIGNALS}:
        return None
    return signal.Signals(-code).name


def exit_text(code: int | None, reason: str | None) -> str:
    """How a worker's process ended, in words."""
    if reason == "hang":
        return "was killed after the per-example timeout"
    if reason == "overran":
        return "was killed: its slice overran"
    if reason == "shutdown":
        return "was stopped at the end of the campaign"
    if reason == "budget":  # (SIGKILL: never the kernel's OOM killer's, whatever the code says)
        return "was stopped: the campaign's time ran out while its slice still ran"
    if code is None:
        return "vanished"
    if code == EXIT_CONTEXT_LOST:
        return "exited after losing its CUDA context"
    if code == EXIT_NODE_LOST:
        return "was lost with its node"
    if code == EXIT_RECYCLE:
        return "was recycled (too many memory maps)"
    if code == EXIT_DEVICE_MEMORY:
        return "exited after the GPU ran out of memory"
    if stop_signal(code):
        return f"was stopped by {stop_signal(code)}"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        extra = {
            "SIGSEGV": " (segmentation fault)",
            "SIGABRT": " (abort)",
            "SIGKILL": " (out of memory? the kernel's OOM killer sends SIGKILL)",
            "SIGBUS": " (bus error)",
            "SIGFPE": " (arithmetic fault)",
        }.get(name, "")
        return f"was killed by {name}{extra}"
    return f"exited with status {code}"


def tail(path: str, n: int) -> str:
    """The last ``n`` lines of the file at ``path`` (at most 16,000 characters, the first of
    them kept: a stack dump's most recent calls come first; "" if unread)."""
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return ""
    return "".join(lines[-n:])[:16000]
