"""CPU threads for fuzzing processes that share one machine.

A fuzzing process spends most of its time on the host (drawing inputs, NumPy comparisons, the
interpreters), and NumPy's OpenBLAS, torch and OpenMP each start one thread per core by default.
``k`` processes side by side (a campaign's ``--workers``, ``pytest -n k``, ``fuzz.bench --procs
k``) then run ``k x cores`` busy threads on ``cores`` cores. Each process gets its share instead:
``cores // k`` threads, at least one.

The thread pools read their environment variables when they load, so the processes get them
from their parent (:func:`children_share_cpus` around starting them, or :func:`share_cpus` in
a parent that does no work of its own), or set them before NumPy and torch are imported;
:func:`share_cpus` also resizes torch's pool if it is already loaded. A variable the user has
set is left alone; ``KERNEL_FUZZ_THREADS=off`` turns the sharing off and
``KERNEL_FUZZ_THREADS=N`` asks for ``N`` threads per process.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
SWITCH = "KERNEL_FUZZ_THREADS"


# Of one process's 1/k of a GPU that k processes share (xdist workers, a campaign's workers): most
# for torch (inputs, fp64 oracle, Triton), the rest for XLA; a quarter is left outside both pools
# for what neither counts (each process's CUDA context, its loaded kernel modules). With 0.9 in
# the pools, eleven processes on an H100 ran kernel launches out of memory.
TORCH_SHARE, XLA_SHARE = 0.45, 0.30
GPU_SHARE = "KERNEL_FUZZ_GPU_SHARE"


def gpu_share() -> float | None:
    """The share of each GPU this run's processes take together (``KERNEL_FUZZ_GPU_SHARE``: a
    number in (0, 1], default 1; two campaigns on one GPU run with 0.5 each, where each had
    split the whole GPU among its own processes and JAX's workers ran out of memory on an H200),
    or None: ``off``, the allocators left alone. ValueError naming the variable otherwise."""
    value = os.environ.get(GPU_SHARE, "").strip()
    if value == "off":
        return None
    if not value:
        return 1.0
    try:
        share = float(value)
    except ValueError:
        share = float("nan")
    if not 0.0 < share <= 1.0:
        raise ValueError(
            f"{GPU_SHARE}={value!r} must be 'off' or a number in (0, 1]: the share of each GPU "
            "this run's processes take together"
        )
    return share


def split_gpu_memory(k: int, share: float | None) -> float | None:
    """Splits ``share`` of one GPU's memory (:func:`gpu_share`; None: leave the allocators
    alone) between ``k`` processes on it: XLA's fraction is set here, before JAX starts, and
    torch's is returned, to be applied once torch is loaded (None: a process with the whole GPU
    to itself, or nothing to split)."""
    if share is None or (k <= 1 and share == 1.0):
        return None
    k = max(1, k)
    os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{XLA_SHARE * share / k:.4f}")
    return TORCH_SHARE * share / k


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads_per_process(processes: int, cpus: int | None = None) -> int:
    """Each of ``processes`` processes' share of ``cpus`` (default: this machine's), at least 1."""
    if processes < 1:
        raise ValueError(f"processes must be at least 1, got {processes}")
    return max(1, (cpu_count() if cpus is None else cpus) // processes)


def threads_for(processes: int) -> int | None:
    """Threads per process when ``processes`` share the machine, or None to leave the defaults
    (one process, or ``KERNEL_FUZZ_THREADS=off``); ``KERNEL_FUZZ_THREADS=N`` decides."""
    switch = os.environ.get(SWITCH, "").strip().lower()
    if switch == "off":
        return None
    if switch:
        if not switch.isdigit() or int(switch) < 1:
            raise ValueError(f"{SWITCH} must be 'off' or a positive integer, got {switch!r}")
        return int(switch)
    return None if processes <= 1 else threads_per_process(processes)


def _set_pools(n: int) -> None:
    """``n`` threads for every pool whose variable the user has not set."""
    for var in POOL_VARIABLES:
        os.environ.setdefault(var, str(n))


def share_cpus(processes: int) -> int | None:
    """Sets this process's (and its future children's) thread pools to its share of the CPUs
    when ``processes`` processes share the machine. Returns the threads per process, or None
    when nothing was changed (see :func:`threads_for`)."""
    n = threads_for(processes)
    if n is None:
        return None
    _set_pools(n)
    chosen = os.environ["OMP_NUM_THREADS"]  # the user's, where set
    n = int(chosen) if chosen.isdigit() and int(chosen) > 0 else n
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


@contextlib.contextmanager
def children_share_cpus(processes: int) -> Iterator[int | None]:
    """Processes started inside the block get their share (through the environment they
    inherit); this process's own pools and environment are left as they were."""
    n = threads_for(processes)
    saved = {var: os.environ.get(var) for var in POOL_VARIABLES}
    if n is not None:
        _set_pools(n)
    try:
        yield n
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
