"""A campaign over a Ray cluster (``python -m fuzz run --cluster``), tested without GPUs: a local
cluster of two nodes (Ray's own test cluster utilities), each declaring one GPU that stands in
for a real one, running the fake kernels and Triton's interpreter. The workers are actors on
both nodes; what they find is what a local run finds; a node killed mid-campaign loses nothing
that was streamed, and its pairs are finished on the other node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

HERE = Path(__file__).parent
FAKE = str(HERE / "fake_targets.py")
FAULTS = str(HERE.parent / "plugins" / "faults.py")
TARGETS = "fake_double,fake_double_nan,faults_mutant_raise,faults_mutant_wild_store"
pytestmark = pytest.mark.xdist_group("ray-cluster")  # one cluster at a time on a small machine


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False},
    )
    nodes = [c.add_node(num_cpus=1, num_gpus=1) for _ in range(2)]
    c.wait_for_nodes()
    yield c, nodes
    c.shutdown()


def _args(out: Path, examples: int) -> list[str]:
    return [
        "run",
        "--profile",
        "ci",
        "--plugin",
        FAKE,
        "--plugin",
        FAULTS,
        "--mutants",
        "--targets",
        TARGETS,
        "--backends",
        "fake,triton-interpret",
        "--examples",
        str(examples),
        "--budget",
        "900",  # a safety net: the campaign ends at its examples
        "--seed",
        "3",
        "--no-triage",
        "--out",
        str(out),
    ]


def _fuzz(*args: str, **popen: object) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return subprocess.Popen(
        [sys.executable, "-m", "fuzz", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        **popen,  # type: ignore[arg-type]
    )


def _found(report: dict) -> set[tuple[str, str, str]]:
    return {(f["target"], f["backend"], f["class"]) for f in report["findings"]}


def test_a_campaign_runs_on_every_node_and_finds_what_a_local_one_finds(cluster, tmp_path):
    c, nodes = cluster
    proc = _fuzz(*_args(tmp_path / "ray", 40), "--cluster", c.address)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    report = json.loads((tmp_path / "ray" / "report.json").read_text())
    assert report["complete"], report["errors"]
    used = {w["node"] for w in report["workers"]}
    assert used == {n.node_id for n in nodes}, report["workers"]  # both nodes fuzzed
    assert report["sizing"]["cluster"] and report["sizing"]["gpus"] == 2
    assert "a Ray cluster of 2 node(s), 2 GPU(s)" in out
    rows = {(r["target"], r["backend"]): r for r in report["results"]}
    assert all(r["examples"] >= 40 or r["retired"] for r in rows.values()), rows
    # The crash killed its actor on its node: the in-flight case was read there, its
    # reproducer written here; a finding streamed by an actor has its reproducer here too.
    for f in report["findings"]:
        assert Path(f["reproducer"]).is_file() and str(tmp_path) in f["reproducer"], f
    crash = rows[("faults_mutant_wild_store", "triton-interpret")]["findings"]
    assert [f["class"] for f in crash] == ["crash"] and "SIGSEGV" in crash[0]["message"]
    local = _fuzz(*_args(tmp_path / "local", 40), "--workers", "2")
    out_local, _ = local.communicate(timeout=900)
    assert local.returncode == 0, out_local[-3000:]
    here = json.loads((tmp_path / "local" / "report.json").read_text())
    assert (
        _found(report)
        == _found(here)
        == {
            ("fake_double_nan", "fake", "nan"),
            ("faults_mutant_raise", "triton-interpret", "crash"),
            ("faults_mutant_wild_store", "triton-interpret", "crash"),
        }
    )


PROBE = """
import dataclasses, json, os
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
base = get("fake_double")
run = base.kernels["fake"]


def probe(inputs, params, *, out, interpret):  # says how the process it runs in was started
    seen = {{"nice": os.nice(0), "hypothesis": os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY")}}
    with open(os.path.join({seen!r}, str(os.getpid())), "w") as f:
        json.dump(seen, f)
    return run(inputs, params, out=out, interpret=interpret)


register(dataclasses.replace(base, name="fake_probe", kernels={{"fake": probe}}))
"""


def test_actors_run_at_their_nodes_priority_with_hypothesis_files_in_the_cache(cluster, tmp_path):
    # Ray adds 15 to the nice value of the processes it runs actors in: beside any other work on
    # a node, the actors fuzzed with what was left of its cores, where a local campaign's workers
    # run at its own priority. And an actor has its raylet's environment, without the
    # HYPOTHESIS_STORAGE_DIRECTORY a campaign gives its workers: Hypothesis wrote its files into
    # the folder Ray was started in. (Robust to the other test's removed node: any actor will do.)
    from fuzz.backends import cache_dir

    c, _ = cluster
    seen = tmp_path / "seen"
    seen.mkdir()
    plugin = tmp_path / "probe.py"
    plugin.write_text(PROBE.format(fake=FAKE, seen=str(seen)))
    args = ["run", "--profile", "ci", "--plugin", str(plugin), "--targets", "fake_probe"]
    args += ["--backends", "fake", "--examples", "5", "--budget", "900", "--seed", "3"]
    proc = _fuzz(*args, "--no-triage", "--out", str(tmp_path / "out"), "--cluster", c.address)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]
    runs = [json.loads(f.read_text()) for f in seen.iterdir()]
    assert runs, out[-3000:]
    here = os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY") or os.path.join(cache_dir(), "hypothesis")
    # (the raylets were started by this process: its priority and environment are theirs)
    assert {r["nice"] for r in runs} == {os.nice(0)}, runs
    assert {r["hypothesis"] for r in runs} == {here}, runs


HELD = """
import dataclasses, os, time
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
base = get("fake_double")
run = base.kernels["fake"]


def held(inputs, params, *, out, interpret):  # a tenth of a second an example while held
    if os.path.exists({hold!r}):
        time.sleep(0.1)
    return run(inputs, params, out=out, interpret=interpret)


register(dataclasses.replace(base, name="fake_held", kernels={{"fake": held}}))
"""


def test_a_node_killed_mid_campaign_loses_nothing(cluster, tmp_path):
    c, nodes = cluster
    hold = tmp_path / "hold"
    hold.write_text("")
    plugin = tmp_path / "held.py"
    plugin.write_text(HELD.format(fake=FAKE, hold=str(hold)))
    out = tmp_path / "out"
    args = _args(out, 1000)
    proc = _fuzz(
        *args[: args.index("--targets")],
        *("--targets", "fake_held,fake_double_nan", "--slice", "1", "--plugin", str(plugin)),
        *args[args.index("--backends") :],
        *("--cluster", c.address),
    )
    # While held, the campaign cannot end: an example of fake_held takes a tenth of a second
    # (1,000 take 50 s on two workers). Once the NaN is found and each node's worker has ended
    # slices, the second node is killed, then the hold released.
    end = time.monotonic() + 600
    seen: dict = {}
    while time.monotonic() < end and proc.poll() is None:
        seen = _report(out)
        busy = {w.get("node") for w in seen.get("workers", [])}
        if seen.get("findings") and nodes[1].node_id in busy and _slices(seen) >= 3:
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the campaign ended while held"
    before = {f["signature"] for f in seen["findings"]}
    c.remove_node(nodes[1])
    while time.monotonic() < end and proc.poll() is None:  # its worker was mid-slice: lost
        if any("lost with its node" in n for n in _report(out).get("notes", [])):
            break
        time.sleep(0.5)
    hold.unlink()
    text, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, text[-3000:]  # as a local campaign's: only a mutant failed
    report = json.loads((out / "report.json").read_text())
    assert before <= {f["signature"] for f in report["findings"]}  # nothing streamed is lost
    rows = {r["target"]: r for r in report["results"]}
    assert rows["fake_held"]["examples"] >= 1000, rows  # finished on the other node
    assert rows["fake_double_nan"]["retired"] == "mutant found and shrunk", rows
    lost = [n for n in report["notes"] if "lost with its node" in n]
    assert lost and "fuzzed on elsewhere" in lost[0], report["notes"]
    assert "crash" not in {f["class"] for f in report["findings"]}  # a lost node is no crash


def _report(out: Path) -> dict:
    """The campaign's report as written so far ({} before its first)."""
    try:
        return json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        return {}


def _slices(report: dict) -> int:
    return sum(r.get("slices", 0) for r in report.get("results", []))
