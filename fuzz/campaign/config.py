"""What a campaign runs: its configuration (built by ``python -m fuzz run``), and the GPUs its
workers can use."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fuzz.profiles import HuntOptions, Profile
from fuzz.target import Target, plugins, target_plugin

if TYPE_CHECKING:
    from fuzz.campaign.messages import WorkerConfig

CAMPAIGN_COMPILE_SHARE = 0.25  # where a profile sets no share of its own (the CPU profiles)


def refund_cap(budget: float) -> float:
    """The most a campaign's deadline moves for time that was not fuzzing (worker restarts, hang
    confirmations): a quarter of the budget, at least a minute."""
    return max(60.0, 0.25 * budget)


@dataclass
class CampaignConfig:
    """Everything a campaign needs; built by ``python -m fuzz run``."""

    targets: Sequence[Target]
    backends: Sequence[str]
    profile: Profile
    budget: float
    out: Path
    repro_dir: Path
    db: str | None
    db_shared: Sequence[str] = ()
    db_fallback: str | None = None  # a folder for a server --db while it does not answer
    seed: int = 0
    workers: int = 1
    devices: Sequence[str | None] = (None,)
    example_timeout: float = 120.0
    compile_timeout: float = 900.0  # a kernel still compiling after this long is a hang too
    hang_confirm_factor: float = 4.0
    floor_examples: int = 200  # every pair is fuzzed this many examples...
    floor_seconds: float = 30.0  # ... or this many seconds (compiling not counted) first
    # A real target's seconds floor: what the nightly job is for gets more before the bandit
    # (a GPU campaign's real Pallas attention pair met a 30 s floor at 164 examples).
    real_floor_seconds: float = 60.0
    slice_seconds: float | None = None
    examples: int | None = None  # a pair is done once it has run this many examples
    compile_workers: int = 0  # processes that compile pairs' kernel variants ahead
    warm_quiet: int = 8  # a warm-up ends after this many examples in a row compiled nothing
    max_deaths: int = 2  # deaths on bugs found before that retire a pair
    argv: Sequence[str] = ()
    plugins: Sequence[str] = ()
    triage: bool = True
    # A Ray cluster's address (``--cluster``): its workers are actors there (else processes
    # here), planned by ``host`` (a ``fuzz.campaign.cluster_plan.ClusterPlan``).
    cluster: str | None = None
    # How this host's (or the cluster's) workers were sized: ``fuzz.campaign.hosts.HostPlan``
    # or ``ClusterPlan`` (said in the console's header and the report).
    host: Any = None
    # A budget shorter than the floors need scales them down (said up front); False: the floors
    # were asked for (--floor-examples/--floor-seconds/--real-floor-seconds) and are kept.
    scale_floors: bool = True

    @functools.cached_property
    def options(self) -> HuntOptions:
        """What every hunt of the campaign runs under (its workers', its reproducers'). A
        campaign is not a derandomized CI run: whatever its profile, its hunts reuse case
        structures (``strategies.reuse``) and keep compiling to ``CAMPAIGN_COMPILE_SHARE`` of
        their time, unless the profile sets its own shares. With compile workers, a compiled-only
        bug's shrinking through variants not compiled yet is theirs (``compile_ladder``)."""
        options = HuntOptions.of(self.profile)
        return dataclasses.replace(
            options,
            reuse_share=options.reuse_share or CAMPAIGN_COMPILE_SHARE,
            compile_share=options.compile_share or CAMPAIGN_COMPILE_SHARE,
            compile_ladder=self.compile_workers > 0,
        )


def slot_devices(config: CampaignConfig) -> list[str | None]:
    """The GPU of each worker slot (fuzzing workers, then compile workers), round robin over
    ``config.devices`` (None: no GPU). The processes on one GPU split its memory
    (``fuzz.campaign.messages.WorkerConfig.gpu_share``: how many name it)."""
    slots = range(config.workers + config.compile_workers)
    devices = list(config.devices)
    return [devices[s % len(devices)] if devices else None for s in slots]


def worker_configs(config: CampaignConfig, *, parent_pid: int) -> list[WorkerConfig]:
    """What each worker slot of a campaign on this host is started with (fuzzing workers
    first, then compile workers; ``config.out/workers`` holds their logs and in-flight
    records)."""
    from fuzz.campaign.messages import WorkerConfig

    workdir = config.out / "workers"
    devices = slot_devices(config)
    return [
        WorkerConfig(
            slot=slot,
            plugins=list(config.plugins),
            options=config.options,
            repro_dir=str(config.repro_dir),
            inflight=str(workdir / f"inflight-{slot}"),
            log=str(workdir / f"worker-{slot}.log"),
            db=config.db,
            db_shared=list(config.db_shared),
            db_fallback=config.db_fallback,
            cuda_device=device,
            gpu_share=1 if device is None else devices.count(device),
            parent_pid=parent_pid,
        )
        for slot, device in enumerate(devices)
    ]


def visible_gpus() -> list[str]:
    """The GPUs a campaign can put one worker on each (``CUDA_VISIBLE_DEVICES`` entries)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:
        return []


def plugin_specs(targets: Sequence[Target]) -> list[str]:
    specs = list(plugins())
    for t in targets:
        spec = target_plugin(t)
        if spec and spec not in specs:
            specs.append(spec)
    return specs
