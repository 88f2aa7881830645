"""A campaign's actors over a Ray cluster, planned (no Ray here: :mod:`fuzz.campaign.cluster`
asks the cluster for its nodes and starts the actors). Every machine is sized as a host is
(:func:`fuzz.campaign.hosts.plan_host`): a fuzzing actor holds a share of one GPU (``per_gpu`` of
them share a GPU, the compile actors of the node a tenth of each), a compile actor runs on each
node with GPUs; a node without GPUs runs fuzzing actors of one CPU each."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fuzz.campaign.hosts import HostPlan, plan_host

GPU_SHARE_OF_COMPILE = 0.1  # of each GPU, for the node's compile actors


@dataclass(frozen=True)
class Node:
    id: str
    address: str
    cpus: int
    gpus: int
    gpu_memory_gib: float | None = None


@dataclass(frozen=True)
class ClusterPlan:
    """The actors of a campaign over a cluster: each node's plan, and each actor's share."""

    nodes: tuple[tuple[Node, HostPlan], ...]

    @property
    def workers(self) -> int:
        return sum(p.workers for _, p in self.nodes)

    @property
    def compile_workers(self) -> int:
        return sum(p.compile_workers for _, p in self.nodes)

    @property
    def gpus(self) -> int:
        return sum(p.gpus for _, p in self.nodes)

    def describe(self) -> str:
        return (
            f"a Ray cluster of {len(self.nodes)} node(s), {self.gpus} GPU(s): "
            f"{self.workers} fuzzing actor(s), {self.compile_workers} compiling ahead"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster": True,
            "nodes": [{"node": n.id, "address": n.address, **p.as_dict()} for n, p in self.nodes],
            "workers": self.workers,
            "compile_workers": self.compile_workers,
            "gpus": self.gpus,
        }


def plan_cluster(nodes: list[Node], *, compiled: bool) -> ClusterPlan:
    """Each machine sized as a host (:func:`fuzz.campaign.hosts.plan_host`): the nodes of one
    address (several raylets on one machine, each given its own GPUs) share its cores and its
    compile cache, so they are planned as one host of all their GPUs and CPUs, each node given
    its GPUs' fuzzing workers and its share of the machine's compile workers (planned node by
    node, a four-GPU host as four nodes compiled ahead with 24 processes where the host alone
    uses 12, beside 20 fuzzing: 42% fewer examples than the same host run locally). Where the
    cluster has GPUs only its GPU nodes fuzz; a cluster without GPUs runs one fuzzing actor per
    CPU of each node, less one for its raylet, and compiles nothing ahead."""
    if not nodes:
        raise ValueError("--cluster: the Ray cluster has no live node")
    if any(n.gpus for n in nodes):  # GPU nodes fuzz; a node without (a head, say) coordinates
        nodes = [n for n in nodes if n.gpus]
    plans: dict[str, HostPlan] = {}
    machines: dict[str, list[Node]] = {}
    for n in nodes:
        machines.setdefault(n.address or n.id, []).append(n)
    for group in machines.values():
        if not group[0].gpus:
            for n in group:
                plans[n.id] = plan_host(
                    gpus=0, cores=n.cpus, workers=max(1, n.cpus - 1), compile_workers=0
                )
            continue
        memory = [n.gpu_memory_gib for n in group if n.gpu_memory_gib]
        host = plan_host(
            gpus=sum(n.gpus for n in group),
            cores=sum(n.cpus for n in group),
            gpu_memory_gib=min(memory) if memory else None,
            compiled=compiled,
        )
        ahead = _shares(host.compile_workers, [n.gpus for n in group])
        for n, c in zip(group, ahead, strict=True):
            plans[n.id] = HostPlan(
                n.gpus, n.gpus, n.cpus, n.gpu_memory_gib, host.per_gpu, host.per_gpu * n.gpus, c
            )
    return ClusterPlan(tuple((n, plans[n.id]) for n in nodes))


def _shares(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainders first)."""
    whole = sum(weights)
    exact = [total * w / whole for w in weights]
    out = [int(x) for x in exact]
    for i in sorted(range(len(out)), key=lambda i: out[i] - exact[i])[: total - sum(out)]:
        out[i] += 1
    return out


def actor_options(plan: HostPlan, role: str) -> dict[str, Any]:
    """The Ray resources of one actor of a node planned as ``plan``: fuzzing actors share each
    GPU (``per_gpu`` of them), the node's compile actors a tenth of each; without GPUs, one CPU
    per fuzzing actor."""
    if not plan.gpus:
        return {"num_cpus": 1}
    if role == "compile":
        per_gpu = max(1, math.ceil(plan.compile_workers / plan.gpus))
        return {"num_cpus": 0, "num_gpus": _share(GPU_SHARE_OF_COMPILE / per_gpu)}
    return {"num_cpus": 0, "num_gpus": _share((1 - GPU_SHARE_OF_COMPILE) / plan.per_gpu)}


def _share(x: float) -> float:
    return math.floor(x * 1e4) / 1e4  # Ray's resource precision, rounded down (they must fit)
