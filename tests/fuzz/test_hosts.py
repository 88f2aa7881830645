"""How many workers a host, or each node of a Ray cluster, gets: from its GPUs, their memory and
its cores (``fuzz.campaign.hosts``, ``fuzz.campaign.cluster_plan``)."""

from __future__ import annotations

import math

import pytest

from fuzz.campaign.hosts import plan_host


def test_a_one_gpu_host_runs_what_the_campaigns_were_tuned_on():
    p = plan_host(gpus=1, cores=16, host_gpus=1, gpu_memory_gib=141.0)
    assert (p.per_gpu, p.workers, p.compile_workers) == (5, 5, 6)
    assert "1 GPU(s), 141 GiB each: 5 fuzzing worker(s) (5 per GPU), 6 compiling ahead" in (
        p.describe()
    )


def test_the_fuzzing_workers_grow_with_the_gpus_of_a_host():
    """A host's cores are shared over all its GPUs, visible or not: one visible GPU of a
    two-GPU host gets one GPU's share (it got the whole host's before, and both GPUs together
    got no more workers: the second added 11% of examples)."""
    one = plan_host(gpus=1, cores=32, host_gpus=2)
    both = plan_host(gpus=2, cores=32, host_gpus=2)
    assert (one.workers, both.workers) == (5, 10)
    assert both.compile_workers > one.compile_workers == 6
    four = plan_host(gpus=4, cores=64, host_gpus=4)
    assert four.workers == 4 * plan_host(gpus=1, cores=64, host_gpus=4).workers == 20
    assert four.compile_workers <= 64 - four.workers - 1
    assert "1 of 4 GPU(s)" in plan_host(gpus=1, cores=64, host_gpus=4).describe()


def test_cores_an_affinity_mask_gave_a_campaign_are_its_own_gpus_share():
    """One campaign per GPU, each on half the cores of a 2-GPU, 32-core host (``taskset``):
    its 16 cores are that GPU's share already, sized as a 16-core one-GPU host (5 workers), not
    divided by the host's GPUs again (2 workers: half the examples of the tuned host)."""
    from fuzz.campaign.hosts import sharing_gpus

    assert sharing_gpus(1, 2, cores=16, machine_cores=32) == 1
    masked = plan_host(gpus=1, cores=16, host_gpus=sharing_gpus(1, 2, 16, 32))
    assert masked.workers == plan_host(gpus=1, cores=16, host_gpus=1).workers == 5
    # The whole machine's cores: shared over all its GPUs, the visible ones or not.
    assert sharing_gpus(1, 2, cores=32, machine_cores=32) == 2
    assert sharing_gpus(1, 2, cores=32, machine_cores=None) == 2


def test_a_gpu_short_of_memory_gets_fewer_workers_and_the_cores_bound_them():
    assert plan_host(gpus=1, cores=64, host_gpus=1, gpu_memory_gib=16.0).per_gpu == 3
    small = plan_host(gpus=2, cores=4, host_gpus=2)
    assert small.per_gpu == 1 and small.compile_workers == 1  # a core left for the coordinator


def test_without_a_gpu_one_worker_and_compiling_ahead_only_for_a_compiled_backend():
    assert (plan_host(gpus=0, cores=2, compiled=False).workers, 0) == (1, 0)
    assert plan_host(gpus=0, cores=2, compiled=False).compile_workers == 0
    assert plan_host(gpus=0, cores=8, compiled=True).compile_workers == 6
    assert "no GPU" in plan_host(gpus=0, cores=2, compiled=False).describe()


def test_workers_asked_for_are_kept_and_bad_ones_named():
    p = plan_host(gpus=2, cores=32, host_gpus=2, workers=3, compile_workers=0)
    assert (p.workers, p.compile_workers) == (3, 0)
    with pytest.raises(ValueError, match="--workers=0"):
        plan_host(gpus=1, cores=8, workers=0)
    with pytest.raises(ValueError, match="--compile-workers=-1"):
        plan_host(gpus=1, cores=8, compile_workers=-1)
    with pytest.raises(ValueError, match="cores=-2"):
        plan_host(gpus=1, cores=-2)


def test_gpu_inventory_without_nvidia_smi(monkeypatch):
    from fuzz.campaign import hosts

    monkeypatch.setattr(hosts.shutil, "which", lambda name: None)
    assert hosts.gpu_inventory() == (0, None)


def test_a_cluster_is_planned_node_by_node_and_its_actors_fit_their_gpus():
    pytest.importorskip("ray")
    from fuzz.campaign.cluster_plan import Node, actor_options, plan_cluster

    nodes = [
        Node("a", "h1", cpus=32, gpus=2),
        Node("b", "h2", cpus=16, gpus=1),
        Node("c", "h3", 4, 0),
    ]
    plan = plan_cluster(nodes, compiled=True)
    per_node = {n.id: (p.workers, p.compile_workers) for n, p in plan.nodes}
    assert per_node == {"a": (10, 8), "b": (5, 6)}  # the node without GPUs coordinates
    assert (plan.workers, plan.gpus) == (15, 3)
    cpus = plan_cluster([Node("c", "h3", 4, 0), Node("d", "h4", 1, 0)], compiled=False)
    assert [(p.workers, p.compile_workers) for _, p in cpus.nodes] == [(3, 0), (1, 0)]
    for _, p in plan.nodes:
        if not p.gpus:
            assert actor_options(p, "fuzz") == {"num_cpus": 1}
            continue
        fuzz, ahead = actor_options(p, "fuzz"), actor_options(p, "compile")
        per_gpu_compile = math.ceil(p.compile_workers / p.gpus)
        used = p.per_gpu * fuzz["num_gpus"] + per_gpu_compile * ahead["num_gpus"]
        assert used <= 1.0 and fuzz["num_cpus"] == 0  # each GPU holds its share of actors
    assert "2 node(s), 3 GPU(s): 15 fuzzing actor(s)" in plan.describe()
    # Four raylets of one four-GPU machine (one address) are planned as that machine is when it
    # runs alone: its fuzzing workers, and its compile workers spread over its nodes.
    host = plan_host(gpus=4, cores=60, compiled=True)
    one = [Node(f"n{i}", "h9", cpus=15, gpus=1) for i in range(4)]
    shared = plan_cluster([Node("head", "h9", 2, 0), *one], compiled=True)
    assert [n.id for n, _ in shared.nodes] == ["n0", "n1", "n2", "n3"]
    assert (shared.workers, shared.compile_workers) == (host.workers, host.compile_workers)
    assert sorted(p.compile_workers for _, p in shared.nodes) == [3, 3, 3, 3]
    assert all(p.workers == host.per_gpu == p.per_gpu for _, p in shared.nodes)
    # Two machines of two nodes each: each machine as its own host.
    two = [Node(f"m{i}", f"h{i // 2}", cpus=16, gpus=1) for i in range(4)]
    mixed = plan_cluster(two, compiled=True)
    twin = plan_host(gpus=2, cores=32, compiled=True)
    assert mixed.compile_workers == 2 * twin.compile_workers and mixed.workers == 2 * twin.workers
    assert all(abs(p.compile_workers - twin.compile_workers / 2) <= 0.5 for _, p in mixed.nodes)
    with pytest.raises(ValueError, match="no live node"):
        plan_cluster([], compiled=True)
