"""How many workers a host (or each node of a cluster) gets: from its GPUs, their memory and its
cores.

A fuzzing worker is mostly host-side Python between short launches (drawing cases, the fp64
oracle, the comparison): a GPU is kept fed by several workers, each a core's worth of work, and
the campaigns these numbers were tuned on ran 5 fuzzing workers and 6 compile workers on one
GPU of a 16-core host. A host's share of cores per GPU is its cores over *all* its GPUs, the
visible ones or not: a campaign that sees one GPU of a 4-GPU host (``CUDA_VISIBLE_DEVICES=0``)
gets that GPU's share, not the whole host's (on a 2-GPU, 32-core host, one visible GPU got 10
workers and both GPUs got 10 too: the second GPU added 11% of examples). So the fuzzing workers
grow with the GPUs, and the compile workers, which warm each pair up once, with a few more per
GPU (the pairs reach their floors sooner, and a pair not warmed up by then compiles on the
fuzzing path). A GPU whose memory cannot hold that many processes' shares (each keeps
``MIN_GIB_PER_PROCESS``) gets fewer.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from dataclasses import dataclass

CORES_PER_FUZZ_WORKER = 3  # of a GPU's share of the host's cores (the tuned 16-core host: 5)
COMPILE_WORKERS_ONE_GPU = 6  # compile workers of a one-GPU campaign (as tuned)
COMPILE_WORKERS_PER_MORE_GPU = 2  # and for each GPU more
MIN_GIB_PER_PROCESS = 4.0  # GPU memory a worker process keeps for its share (the largest cases)


@dataclass(frozen=True)
class HostPlan:
    """The workers of one host (or one node of a cluster).

    Attributes:
        gpus: the GPUs the campaign uses here.
        host_gpus: the GPUs of the host, used or not (its cores are shared over them).
        cores: the host's cores.
        gpu_memory_gib: each GPU's memory (None: not known).
        per_gpu: fuzzing workers per GPU (0 without GPUs).
        workers: fuzzing workers.
        compile_workers: workers that compile pairs' kernels ahead.
    """

    gpus: int
    host_gpus: int
    cores: int
    gpu_memory_gib: float | None
    per_gpu: int
    workers: int
    compile_workers: int

    def describe(self) -> str:
        """The plan in a line, for the console's header and the report."""
        if not self.gpus:
            return (
                f"{self.workers} fuzzing worker(s)"
                + (f", {self.compile_workers} compiling ahead" if self.compile_workers else "")
                + f" on {self.cores} core(s), no GPU"
            )
        memory = f", {self.gpu_memory_gib:.0f} GiB each" if self.gpu_memory_gib else ""
        of = f" of {self.host_gpus}" if self.host_gpus > self.gpus else ""
        return (
            f"{self.gpus}{of} GPU(s){memory}: {self.workers} fuzzing worker(s) "
            f"({self.per_gpu} per GPU), {self.compile_workers} compiling ahead, "
            f"{self.cores} core(s)"
        )

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def plan_host(
    *,
    gpus: int,
    cores: int,
    host_gpus: int | None = None,
    gpu_memory_gib: float | None = None,
    compiled: bool = True,
    workers: int | None = None,
    compile_workers: int | None = None,
) -> HostPlan:
    """The workers of a host with ``cores`` cores that fuzzes on ``gpus`` of its ``host_gpus``
    GPUs (see the module's docstring); ``workers``/``compile_workers`` given are kept.
    ``compiled``: some backend compiles (else nothing compiles ahead)."""
    for name, value in (("gpus", gpus), ("cores", cores)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}={value!r} must be an integer >= 0")
    if workers is not None and workers < 1:
        raise ValueError(f"--workers={workers} must be >= 1")
    if compile_workers is not None and compile_workers < 0:
        raise ValueError(f"--compile-workers={compile_workers} must be >= 0")
    cores = max(cores, 1)
    host_gpus = max(host_gpus or gpus, gpus)
    if not gpus:
        n = workers or 1
        ahead = compile_workers if compile_workers is not None else 0
        if compile_workers is None and compiled:
            ahead = min(COMPILE_WORKERS_ONE_GPU, max(1, cores - n - 1))
        return HostPlan(0, host_gpus, cores, None, 0, n, ahead)
    per_gpu = max(1, cores // host_gpus // CORES_PER_FUZZ_WORKER)
    if gpu_memory_gib:
        per_gpu = min(per_gpu, max(1, int(gpu_memory_gib // MIN_GIB_PER_PROCESS) - 1))
    n = workers or per_gpu * gpus
    if compile_workers is None:
        want = COMPILE_WORKERS_ONE_GPU + COMPILE_WORKERS_PER_MORE_GPU * (gpus - 1)
        compile_workers = min(want, max(1, cores - n - 1)) if compiled else 0
    return HostPlan(gpus, host_gpus, cores, gpu_memory_gib, per_gpu, n, compile_workers)


def sharing_gpus(gpus: int, host_gpus: int, cores: int, machine_cores: int | None) -> int:
    """The GPUs among which ``cores`` are shared (``plan_host``'s ``host_gpus``): all the host's
    GPUs, unless the campaign runs on fewer cores than the machine has (an affinity mask, as
    ``taskset -c 0-15 ... CUDA_VISIBLE_DEVICES=0`` for one campaign per GPU): its cores were then
    given to its own GPUs, and dividing them by the host's GPUs again halved its workers (a
    16-core, one-GPU share of a 2-GPU host ran 2 fuzzing workers where a 16-core host runs 5)."""
    if machine_cores is not None and cores < machine_cores:
        return gpus
    return max(gpus, host_gpus)


def cpu_cores() -> int:
    """The cores this process may run on."""
    from fuzz.campaign.threads import cpu_count

    return cpu_count()


def gpu_inventory() -> tuple[int, float | None]:
    """(GPUs of this host, visible to the campaign or not; each one's memory in GiB, None where
    unknown), from ``nvidia-smi`` (the coordinator does not start CUDA itself); (0, None) without
    it."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0, None
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    try:
        out = subprocess.run(
            [smi, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            env=env,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0, None
    mib = [float(x) for x in out.split() if x.strip().replace(".", "", 1).isdigit()]
    return len(mib), (min(mib) / 1024 if mib else None)
