"""Nightly reliability, round 2 (issue 28): faults of plugins, kernels, disks, databases and the
coordinator itself, each injected for real (processes, signals, a tmpfs, a stopped redis-server).

Campaigns here stop by example counts (``--examples``) or by events, never by a few seconds of
budget: the budgets are safety nets only.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
FAKE = str(HERE / "fake_targets.py")
AUTOTUNED = str(HERE.parent / "plugins" / "autotuned_faults.py")


def fuzz_cli(*args, env=None, timeout=600, **kw):
    return subprocess.run(
        [sys.executable, "-m", "fuzz", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        **kw,
    )


def report_of(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def rows_of(report: dict) -> dict:
    return {(r["target"], r["backend"]): r for r in report["results"]}


def repro_meta(path: str) -> dict:
    from fuzz.reproducer import load

    return load(path)[0]


# 1. Death reproducers of autotuned plugin Triton targets ------------------------------------------


def test_death_reproducers_of_autotuned_plugin_targets_replay(tmp_path):
    # The in-flight record kept the raw autotune draw (integers such as 16548): every crash, hang
    # and OOM reproducer of an autotuned plugin target was "cannot replay: ValueError: a choice
    # is a Choice, ...", and triage said "not re-checked" every night. It now holds the configs
    # as each launch chose them. The targets end their worker (os._exit(0); SIGKILL, as an OOM
    # killer sends it) with another config than the first only.
    out = tmp_path / "out"
    run = fuzz_cli(
        "run",
        "--profile",
        "ci",
        "--plugin",
        AUTOTUNED,
        "--targets",
        "autotuned_exit0,autotuned_killed",
        "--backends",
        "triton-interpret",
        "--budget",
        "600",
        "--examples",
        "40",
        "--out",
        str(out),
    )
    assert run.returncode == 1, run.stderr[-3000:]  # real targets fail
    found = {f["target"]: f for f in report_of(out)["findings"]}
    assert set(found) == {"autotuned_exit0", "autotuned_killed"}
    assert found["autotuned_exit0"]["message"] == "the worker exited with status 0"
    assert "SIGKILL" in found["autotuned_killed"]["message"]
    for f in found.values():
        assert f["class"] == "crash"
        params = json.loads(repro_meta(f["reproducer"])["property_params"])
        (kernel, index, config), *_ = params["autotune"]
        assert kernel.endswith("._softmax_kernel") and index in (1, 2)
        assert f"num_warps: {2 * index}," in config

    replay = fuzz_cli("replay", "--plugin", AUTOTUNED, str(out / "reproducers"))
    assert replay.returncode == 1, replay.stdout
    text = replay.stdout
    assert "cannot replay" not in text and text.count("== ") == 2, text
    # os._exit(0) in the kernel ends the replay process without a verdict: a crash too.
    assert (
        "autotuned_exit0 on triton-interpret: FAIL crash (the replay process exited with status 0"
        in text
    )
    assert (
        "autotuned_killed on triton-interpret: FAIL crash (the replay process was killed by "
        "SIGKILL)" in text
    )


def test_the_autotune_configs_are_noted_as_each_launch_chooses_them():
    # What a worker's in-flight record is told (Hooks.on_draw): the raw draw, then before any
    # launch the empty record, then the configs as they are chosen -- what a replay takes.
    from hypothesis import find

    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.properties import check_case
    from fuzz.target import get, load_plugin

    load_plugin(AUTOTUNED)
    target = get("autotuned_exit3")
    seen: list[tuple[str, object]] = []
    noted_before_launch: list[object] = []
    kernel = target.kernels["triton"]

    def watched(inputs, params, *, out, interpret):
        noted_before_launch.append(seen[-1])
        return kernel(inputs, params, out=out, interpret=interpret)

    target = dataclasses.replace(target, kernels={"triton": watched})
    params = {"dtype": "float32", "scale": None, "block_m": 4, "block_n": 16}
    case = Case({"x": np.ones((2, 3), np.float32)}, params)
    outcome = check_case(
        target,
        get_backend("triton-interpret"),
        case,
        draw=lambda strategy, label: [0] if label == "autotune" else find(strategy, bool),
        note=lambda name, value: seen.append((name, value)),
    )
    assert noted_before_launch[0] == ("autotune", [])
    assert seen[-1][0] == "autotune" and seen[-1][1] == outcome.params["autotune"]
    assert outcome.params["autotune"][0][1] == 0  # the first config: no fault


# 2. A kernel's fault is a finding whatever it raises ---------------------------------------------


def _faulty(kind: str, min_cols: int = 3):
    """A fake kernel that faults (``kind``) on rows of >= ``min_cols`` columns."""
    import torch

    from fuzz.target import get

    base = get("fake_double")
    run = base.kernels["fake"]

    def kernel(inputs, params, *, out, interpret):
        if inputs["x"].shape[1] >= min_cols:
            if kind == "int32":
                return {"y": run(inputs, params, out=out, interpret=interpret)["y"].to(torch.int32)}
            if kind == "SystemExit":
                raise SystemExit(3)
            if kind == "KeyboardInterrupt":
                raise KeyboardInterrupt("raised by the kernel's own code")
            if kind == "GeneratorExit":
                raise GeneratorExit
            if kind == "input-write":
                inputs["x"].mul_(2)
            if kind == "ctrl-c":
                os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C arriving during the kernel
        return run(inputs, params, out=out, interpret=interpret)

    return dataclasses.replace(base, name=f"fake_{kind}", kernels={"fake": kernel})


KINDS = {
    "int32": "TypeError: the kernel returned output y as int32; expected float32",
    "SystemExit": "SystemExit: 3",
    "KeyboardInterrupt": "KeyboardInterrupt: raised by the kernel's own code",
    "GeneratorExit": "GeneratorExit",
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("time_limit", [None, 1e-6], ids=["no-limit", "slice-timer"])
def test_a_kernel_fault_is_a_crash_finding_whatever_it_raises(
    fake_plugin, fake_profile, kind, time_limit
):
    # They were "the harness failed, not a kernel" with no reproducer; with a short slice the
    # timer cut Hypothesis's shrinking of them and the target read "pass" (here: the time is up
    # from the first example on, which faults).
    from fuzz import engine

    min_cols = 3 if time_limit is None else 1
    result = engine.hunt(
        _faulty(kind, min_cols),
        "fake",
        fake_profile,
        max_examples=200,
        seed=1,
        database=None,
        time_limit=time_limit,
    )
    assert result.error is None and list(result.found) == ["crash"], (result.error, result.found)
    found = result.found["crash"]
    assert found.finding.message.startswith(KINDS[kind])
    assert found.case.inputs["x"].shape[1] == min_cols  # shrunk to the smallest faulty case


def test_a_ctrl_c_during_a_kernel_still_stops_the_hunt(fake_plugin, fake_profile):
    # The kernel's own KeyboardInterrupt is a finding; a real SIGINT that lands in the kernel is
    # the user's stop, as before.
    from fuzz import engine

    # Python's own Ctrl-C handler, as in a terminal (a process of the suite may have been left
    # another by what ran in it before).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            engine.hunt(_faulty("ctrl-c"), "fake", fake_profile, max_examples=50, database=None)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_slice_timer_never_swallows_an_error_of_the_harness(fake_plugin, fake_profile):
    # An error of the harness on the first example: Hypothesis shrinks it, the slice's time limit
    # ended that shrinking (OutOfTime) and the error was lost: the target read "pass".
    from fuzz import engine
    from fuzz.properties import Property
    from fuzz.target import get

    def broken(ctx, _):
        raise ZeroDivisionError("a property of the harness failed (injected)")

    target = dataclasses.replace(
        get("fake_double"), name="fake_broken_property", properties=(Property("broken", broken),)
    )
    for limit in (None, 1e-6):
        result = engine.hunt(
            target, "fake", fake_profile, max_examples=50, seed=1, database=None, time_limit=limit
        )
        assert result.status == "error" and "ZeroDivisionError" in result.error, limit
        # The error keeps where it was raised: the property's frame, in its traceback.
        trace = result.error_trace or ""
        assert trace.startswith(("Traceback", "...")) and "in broken" in trace, (limit, trace)
        assert result.as_dict()["error_trace"] == trace


FAULTY_PLUGIN = """
import dataclasses, os, torch
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
base = get("fake_double")
run = base.kernels["fake"]

def faulty(kind):
    def kernel(inputs, params, *, out, interpret):
        if inputs["x"].shape[1] >= 3:
            if kind == "int32":
                return {{"y": run(inputs, params, out=out, interpret=interpret)["y"].int()}}
            if kind == "exit":
                raise SystemExit(3)
            if kind == "interrupt":
                raise KeyboardInterrupt("raised by the kernel's own code")
            if kind == "genexit":
                raise GeneratorExit
            if kind == "write":
                inputs["x"].mul_(2)
        return run(inputs, params, out=out, interpret=interpret)
    return kernel

for kind in ("int32", "exit", "interrupt", "genexit", "write"):
    register(dataclasses.replace(base, name=f"fake_faulty_{{kind}}", source="builtin",
                                 kernels={{"fake": faulty(kind)}}))
"""


def test_kernel_faults_in_a_campaign_with_short_slices_are_findings(tmp_path):
    # In worker processes (which ignore SIGINT: every KeyboardInterrupt there is the kernel's),
    # with 0.3 s slices: each is a finding with a reproducer that replays it; none a harness
    # error, none a pass; a kernel writing into its input is `input-write`, not a race.
    plugin = tmp_path / "faulty.py"
    plugin.write_text(FAULTY_PLUGIN.format(fake=FAKE))
    out = tmp_path / "out"
    proc = fuzz_cli(
        "run",
        "--profile",
        "ci",
        "--plugin",
        str(plugin),
        "--targets",
        "fake_faulty_*",
        "--backends",
        "fake",
        "--slice",
        "0.3",
        "--budget",
        "600",
        "--examples",
        "40",
        "--seed",
        "4",
        "--out",
        str(out),
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # real targets fail; no harness error
    report = report_of(out)
    assert report["summary"]["harness_errors"] == []
    classes = {r["target"]: [f["class"] for f in r["findings"]] for r in report["results"]}
    assert classes == {
        "fake_faulty_int32": ["crash"],
        "fake_faulty_exit": ["crash"],
        "fake_faulty_interrupt": ["crash"],
        "fake_faulty_genexit": ["crash"],
        "fake_faulty_write": ["input-write"],
    }, proc.stderr[-3000:]
    replay = fuzz_cli("replay", "--plugin", str(plugin), str(out / "reproducers"))
    assert replay.returncode == 1 and replay.stdout.count("(same class as recorded)") == 5, (
        replay.stdout
    )


# 3. A kernel that writes into its inputs ----------------------------------------------------------


def test_a_kernel_writing_into_its_inputs_is_an_input_write_not_a_race(fake_plugin, fake_profile):
    # Both runs were handed the same tensors (and a CPU tensor the case's own memory): the second
    # run read what the first wrote, and the report said "nondeterminism".
    from fuzz import engine
    from fuzz.properties import check_case

    target = _faulty("input-write")
    result = engine.hunt(target, "fake", fake_profile, max_examples=200, seed=1, database=None)
    assert list(result.found) == ["input-write"], result.found
    f = result.found["input-write"].finding
    assert f.prop == "inputs-unchanged"
    assert f.message.startswith(
        "the kernel wrote into its input x: 3 element(s) changed, first x[0, 0]"
    )
    from fuzz.backends import get_backend
    from fuzz.case import Case

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    case = Case({"x": x.copy()}, {"dtype": "float32"})
    outcome = check_case(target, get_backend("fake"), case)
    assert outcome.finding.cls == "input-write"
    assert np.array_equal(case.inputs["x"], x)  # the case itself is untouched
    clean, repeat = outcome.context.clean, outcome.context.repeat
    # Each run doubled its own copy, then doubled that: the second did not read the first's.
    assert np.array_equal(clean.outputs["y"], 4 * x) and np.array_equal(repeat.outputs["y"], 4 * x)
    honest = check_case(_faulty("none"), get_backend("fake"), case)
    assert honest.finding is None and honest.context.clean.input_writes == {}


# 4. Workers die with their campaign; the next campaign picks up what was in flight ---------------

STUCK = """
import dataclasses, os, subprocess, time
from pathlib import Path
from fuzz.target import Hazard, get, load_plugin, register
load_plugin({fake!r})
base = get("fake_double")
run = base.kernels["fake"]
here = Path({d!r})

def stuck(inputs, params, *, out, interpret):  # a hung kernel, with a helper process of its own
    if inputs["x"].shape[1] >= 3 and (here / "stick").exists():
        helper = subprocess.Popen(["sleep", "600"])
        with open(here / "pids", "a") as f:
            f.write(f"{{os.getpid()}} {{helper.pid}}\\n")
        while True:
            time.sleep(0.05)
    return run(inputs, params, out=out, interpret=interpret)

register(dataclasses.replace(base, name="fake_stuck", source="builtin", kernels={{"fake": stuck}}))
"""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an orphan nobody reaps)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_for(predicate, seconds: float, what: str) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _pids(path: Path) -> list[int]:
    return [int(p) for line in path.read_text().split("\n") if line for p in line.split()]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal: Linux")
def test_workers_die_with_their_campaign_and_the_next_one_replays_what_was_in_flight(tmp_path):
    # A worker inside a hung kernel outlived a `kill -9` of its campaign (on a GPU it keeps the
    # card), and so did what it had started; the next campaign dropped the in-flight record.
    plugin = tmp_path / "stuck.py"
    plugin.write_text(STUCK.format(fake=FAKE, d=str(tmp_path)))
    (tmp_path / "stick").write_text("")
    out = tmp_path / "out"
    args = ["run", "--profile", "ci", "--plugin", str(plugin), "--targets", "fake_stuck"]
    args += ["--backends", "fake", "--budget", "600", "--out", str(out)]
    first = subprocess.Popen(
        [sys.executable, "-m", "fuzz", *args, "--example-timeout", "600", "--examples", "50"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    pids = tmp_path / "pids"
    try:
        _wait_for(pids.exists, 300, "the kernel never hung")
        worker, helper = _pids(pids)
        assert _alive(worker) and _alive(helper)
        first.kill()  # kill -9 of the campaign
        first.wait(60)
        _wait_for(lambda: not _alive(worker), 60, "the worker outlived its campaign")
        _wait_for(lambda: not _alive(helper), 60, "the worker's child outlived its campaign")
        assert list((out / "workers").glob("inflight-*.json"))  # what was running

        # The next campaign replays it first, with 4 x its 2 s timeout: still hung, a finding.
        second = fuzz_cli(*args, "--example-timeout", "2", "--examples", "1")
        assert second.returncode == 1, second.stderr[-3000:]
        report = report_of(out)
        hangs = [f for f in report["findings"] if f["class"] == "hang"]
        assert hangs, (report["findings"], report["notes"])
        message = hangs[0]["message"]
        assert f"was still running when its campaign (pid {first.pid}) died" in message
        assert "replayed first by the next campaign, it did not finish within 8 s" in message
        assert Path(hangs[0]["reproducer"]).exists()
        # The replay hung in a fresh worker, killed for it: its own helper died with it.
        again = _pids(pids)[2:]
        assert len(again) >= 2
        _wait_for(lambda: not any(_alive(p) for p in again), 60, "a killed worker's child lives")
    finally:
        os.killpg(first.pid, signal.SIGKILL) if first.poll() is None else None
        for pid in _pids(pids) if pids.exists() else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


# 7, 8. A stop during the workers' start-up; pairs that ran no example ------------------------------

SLOW_START = """
import multiprocessing, os, time
from pathlib import Path
from fuzz.target import load_plugin
load_plugin({fake!r})
if multiprocessing.current_process().name.startswith("fuzz-worker"):
    Path({d!r}, "starting").write_text(str(os.getpid()))
    while True:  # an import that takes its time in the worker (a large library, a cold disk)
        time.sleep(0.05)
"""


def test_a_stop_while_workers_start_is_an_interruption_and_nothing_ran_is_unrun(tmp_path):
    # `timeout 30 python -m fuzz run ...` that fired while the workers were still importing was
    # reported as the harness error "no worker could be started: nothing was fuzzed"; pairs that
    # ran no example read "pass" (a passing JUnit test) and mutants "missed".
    import xml.etree.ElementTree as ET

    plugin = tmp_path / "slow_start.py"
    plugin.write_text(SLOW_START.format(fake=FAKE, d=str(tmp_path)))
    out = tmp_path / "out"
    args = ["--plugin", str(plugin), "--mutants", "--targets", "fake_double,fake_double_nan"]
    args += ["--backends", "fake", "--budget", "600", "--examples", "5", "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fuzz", "run", "--profile", "ci", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    starting = tmp_path / "starting"
    try:
        _wait_for(starting.exists, 300, "no worker began to start")
        os.killpg(proc.pid, signal.SIGTERM)  # as timeout(1) and systemd stop a job
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2, output
    assert "harness error" not in output and "interrupted (SIGTERM)" in output, output
    report = report_of(out)
    assert report["interrupted"] == "SIGTERM" and report["errors"] == []
    assert report["summary"]["harness_errors"] == [] and report["summary"]["examples"] == 0
    assert {r["target"]: r["status"] for r in report["results"]} == {
        "fake_double": "unrun",
        "fake_double_nan": "unrun",  # a mutant that never ran is not "missed"
    }
    assert report["summary"]["unrun"] == ["fake_double on fake", "fake_double_nan on fake"]
    suite = ET.parse(out / "report.xml").getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    for name in ("fake_double[fake]", "fake_double_nan[fake]"):
        assert "not run" in cases[name].find("skipped").get("message")
    assert int(suite.get("skipped")) == 2 and int(suite.get("failures")) == 0
    interrupted = cases["interrupted"].find("error")
    assert "interrupted (SIGTERM)" in interrupted.get("message")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props == {"complete": "false", "interrupted": "SIGTERM"}
    assert "Not run (no example): 2 pair(s)" in (out / "report.md").read_text()
    worker = int(starting.read_text())
    _wait_for(lambda: not _alive(worker), 60, "the starting worker outlived the campaign")


# 5. A frozen Redis -------------------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def frozen_redis(tmp_path):
    """A real redis-server on a free loopback port, stopped (SIGSTOP) once it answers: it
    accepts connections and answers nothing, as a frozen server does. Yields its URL."""
    import shutil
    import time

    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    redis = pytest.importorskip("redis")
    port = _free_port()
    cmd = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    cmd += ["no", "--dir", str(tmp_path)]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)
    try:
        for _ in range(200):
            try:
                if client.ping():
                    break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail("redis-server did not answer")
        proc.send_signal(signal.SIGSTOP)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.terminate()
        proc.wait(10)


def test_a_frozen_database_costs_one_bounded_call_then_the_local_one_takes_over(
    fake_plugin, fake_profile, frozen_redis, tmp_path
):
    import time

    from fuzz.campaign.database import CALL_TIMEOUT, open_database

    local = tmp_path / "local"
    db = open_database(frozen_redis, fallback=str(local))
    t0 = time.monotonic()
    with pytest.warns(Warning, match="using the local database"):
        result = engine_hunt(db, fake_profile)
    assert "nan" in result.found and result.error is None
    # One call waited for the frozen server (it is left alone afterwards), not every call.
    assert time.monotonic() - t0 < 10 * CALL_TIMEOUT
    assert len([p for p in db.problems if "TimeoutError" in p or "Timeout" in p]) == 1
    assert list(local.rglob("*")), "the failing example was not saved locally"
    again = engine_hunt(open_database(str(local)), fake_profile, seed=7)
    assert again.found["nan"].first_example == 1  # replayed from the local fallback


def engine_hunt(db, profile, seed=1):
    from fuzz import engine
    from fuzz.target import get

    return engine.hunt(
        get("fake_double_nan"), "fake", profile, database=db, seed=seed, max_examples=60
    )


def test_a_campaign_with_a_frozen_redis_says_so_and_saves_locally(frozen_redis, tmp_path):
    # Each database call blocked 10 s: slices overran, a worker was killed for "shrinking too
    # slow", a mutant never ran and read "missed"; nothing was said on the console.
    out = tmp_path / "out"
    proc = fuzz_cli(
        "run",
        "--profile",
        "ci",
        "--plugin",
        FAKE,
        "--mutants",
        "--targets",
        "fake_double,fake_double_nan",
        "--backends",
        "fake",
        "--db",
        frozen_redis,
        "--budget",
        "600",
        "--examples",
        "30",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = " ".join(proc.stderr[: proc.stderr.index("fuzzing ")].split())  # before any work
    assert f"WARNING example database {frozen_redis}: fetch failed: Timeout" in said
    assert f"using the local database {out / 'examples'} instead" in said
    report = report_of(out)
    rows = {r["target"]: r for r in report["results"]}
    assert rows["fake_double_nan"]["status"] == "found" and rows["fake_double"]["status"] == "pass"
    assert all(r["examples"] == 30 for r in rows.values())
    assert not any("overran" in n for n in report["notes"]), report["notes"]
    assert any("using the local database" in p for p in report["database"]["problems"])
    assert "example database" in (out / "report.md").read_text()
    assert [p for p in (out / "examples").rglob("*") if p.is_file()], "nothing saved locally"


# 9. Database folders that cannot work ------------------------------------------------------------


def _read_only_folder(path: Path) -> Path:
    """A folder nothing can be written into, even by root: a read-only tmpfs where this process
    may mount one, else a folder without write permission (enough for anyone but root)."""
    path.mkdir()
    if os.geteuid() == 0:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)])
        if done.returncode != 0:
            pytest.skip("running as root, but tmpfs cannot be mounted here (a container?)")
    else:
        path.chmod(0o555)
    return path


def _release(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
    else:
        path.chmod(0o755)


def test_database_folders_that_cannot_work_are_usage_errors(tmp_path, cli_batch):
    # --db on a read-only folder and --db-shared on a missing one ran with no warning, saving or
    # reading nothing.
    read_only = _read_only_folder(tmp_path / "ro")
    try:
        base = ["run", "--profile", "ci", "--plugin", FAKE, "--targets", "fake_double"]
        base += ["--backends", "fake", "--examples", "1", "--out", str(tmp_path / "out")]
        missing = tmp_path / "team-db"
        # The two command lines one after the other in one process (`python -m fuzz` each).
        bad, bad_shared = cli_batch(
            [[*base, "--db", read_only], [*base, "--db-shared", missing]], tmp_path
        )
        assert bad.returncode == 2 and "Traceback" not in bad.stderr
        assert f"error: --db={str(read_only)!r} is not writable" in bad.stderr
        assert bad_shared.returncode == 2
        assert f"--db-shared={str(missing)!r} does not exist" in bad_shared.stderr
        assert not (tmp_path / "out").exists()  # a usage error touches nothing
    finally:
        _release(read_only)


def test_database_entries_get_the_mode_the_umask_gives(tmp_path):
    # Hypothesis writes entries through mkstemp (0600) in the system's temporary folder: a shared
    # folder was unreadable to teammates whatever the umask.
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "fuzz", "run", "--profile", "ci", "--plugin", FAKE, "--mutants"]
    cmd += ["--targets", "fake_double_nan", "--backends", "fake", "--examples", "20"]
    proc = subprocess.run(
        [*cmd, "--budget", "600", "--out", str(out)],
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.umask(0o022),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    entries = [p for p in (out / "examples").rglob("*") if p.is_file()]
    assert entries
    for p in entries:
        assert p.stat().st_mode & 0o777 == 0o644, (p, oct(p.stat().st_mode))
        assert p.stat().st_size > 0 and not p.name.endswith(".tmp")


# 6. A disk that fills mid-run --------------------------------------------------------------------

FILLER = """
import dataclasses
import functools
from pathlib import Path
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
disk = Path({disk!r})
nan = get("fake_double_nan")
base = get("fake_double")
run = base.kernels["fake"]

def fills_the_disk(inputs, params, *, out, interpret):
    # Once the first finding's reproducer is on disk: fill the disk to its last byte.
    filler = disk / "filler"
    if not filler.exists() and any((disk / "out" / "reproducers").glob("*.py")):
        with open(filler, "wb", buffering=0) as f:
            for chunk in (1 << 16, 1 << 12, 1):
                try:
                    while True:
                        f.write(b"\\0" * chunk)
                except OSError:
                    pass
    return run(inputs, params, out=out, interpret=interpret)

# Real targets, run in name order: the NaN is found (reproducer, database entries), then the disk
# fills while the second runs.
register(dataclasses.replace(nan, name="fake_a_nan", mutant=None, source="builtin"))
register(dataclasses.replace(base, name="fake_b_fills_the_disk", source="builtin",
                             kernels={{"fake": fills_the_disk}}))
"""


@pytest.fixture
def small_disk(tmp_path):
    """A 24 MiB tmpfs (root, as CI runs; unprivileged: through a user namespace), unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk)])
    if done.returncode != 0:
        pytest.skip("a tmpfs cannot be mounted here (needs root, as CI runs)")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_disk_that_fills_mid_run_ends_in_one_line_and_consistent_reports(small_disk):
    # It ended in a traceback: no report.md/xml/html, a report.json naming 2 of 4 findings with
    # reproducer paths since deleted, reproducers no report mentioned, 0-byte database entries
    # and .tmp leftovers.
    import xml.etree.ElementTree as ET

    plugin = small_disk.parent / "filler.py"
    plugin.write_text(FILLER.format(fake=FAKE, disk=str(small_disk)))
    out = small_disk / "out"
    proc = fuzz_cli(
        "run",
        "--profile",
        "ci",
        "--plugin",
        str(plugin),
        "--targets",
        "fake_a_nan,fake_b_fills_the_disk",
        "--backends",
        "fake",
        "--budget",
        "600",
        "--examples",
        "40",
        "--out",
        str(out),
    )
    assert (small_disk / "filler").exists(), proc.stderr[-3000:]  # the disk did fill
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("python -m fuzz run: error")]
    assert len(errors) == 1 and "no space left on device" in errors[0], proc.stderr[-3000:]
    # Every report was written (the space kept for them was given back) and is consistent.
    report = report_of(out)
    assert report["interrupted"] == "disk full"
    assert any(n.startswith("the disk is full: ") for n in report["notes"]), report["notes"]
    assert "search space exhausted" not in {r["retired"] for r in report["results"]}
    assert "INCOMPLETE (disk full)" in (out / "report.md").read_text()
    ET.parse(out / "report.xml")
    assert (out / "index.html").read_text().rstrip().endswith("</html>")
    named = {
        p for f in report["findings"] for p in [f.get("reproducer"), *f.get("reproducers", [])] if p
    }
    assert report["findings"] and all(Path(p).exists() for p in named)
    on_disk = {str(p) for p in (out / "reproducers").glob("*.py")}
    assert on_disk <= named, on_disk - named  # no reproducer that no report mentions
    assert not (out / ".campaign.reserve").exists()
    for path in out.rglob("*"):
        assert ".tmp" not in path.name, path  # every write atomic, cleaned up when it failed
        if path.is_file() and "examples" in path.parts:
            assert path.stat().st_size > 0, path  # no 0-byte database entry


# 11. Small ones ----------------------------------------------------------------------------------


def test_a_campaign_writes_nothing_into_the_current_folder(tmp_path):
    # Hypothesis cached the constants of the modules under the current folder (a plugin beside
    # the user) in ./.hypothesis; --out "" wrote the whole campaign into the current folder.
    import shutil

    here = tmp_path / "here"
    here.mkdir()
    shutil.copy(FAKE, here / "my_kernels.py")
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_STORAGE_DIRECTORY"}
    env["KERNEL_FUZZ_CACHE_DIR"] = str(tmp_path / "cache")
    args = ["--profile", "ci", "--plugin", "my_kernels.py", "--targets", "fake_double"]
    args += ["--backends", "fake", "--examples", "5", "--budget", "600"]
    run = subprocess.run(
        [sys.executable, "-m", "fuzz", "run", *args, "--out", str(tmp_path / "out")],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert sorted(p.name for p in here.iterdir()) == ["my_kernels.py"]
    assert not (tmp_path / "out" / ".hypothesis").exists()  # nor into the output folder
    empty = subprocess.run(
        [sys.executable, "-m", "fuzz", "run", *args, "--out", ""],
        cwd=here,
        env=env,
        capture_output=True,
        text=True,
    )
    assert empty.returncode == 2 and "--out='' is empty" in empty.stderr
    assert sorted(p.name for p in here.iterdir()) == ["my_kernels.py"]


def test_bad_profile_and_plugin_folder_are_usage_errors(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--hypothesis-profile=nope"]
    proc = subprocess.run(
        [*cmd, str(tmp_path / "test_one.py")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    text = proc.stdout + proc.stderr
    assert "INTERNALERROR" not in text and "Traceback" not in text
    assert "--hypothesis-profile='nope' is not a registered profile; choose one of ci," in text
    folder = fuzz_cli("list", "--plugin", str(tmp_path))
    assert folder.returncode == 2 and "is a folder; give the plugin's .py file" in folder.stderr


def test_a_reproducer_edited_outside_the_contract_cannot_replay(tmp_path, cli_batch):
    # Integer data or a negative tile replayed as "FAIL crash": a verdict on the edit, not on the
    # kernel.
    from hypothesis import find

    from fuzz import reproducer
    from fuzz.failures import Finding
    from fuzz.target import get, load_builtin

    load_builtin()
    target = get("softmax")
    case = find(target.strategy("small"), lambda c: c.inputs["x"].shape[-1] >= 2)

    def written(name, edited):
        d = tmp_path / name
        d.mkdir()
        return reproducer.write(
            d,
            target=target,
            backend="triton-interpret",
            case=edited,
            params={},
            finding=Finding("accuracy", "oracle", "recorded"),
            ref_device="cpu",
            differential=False,
        )

    as_int = case.replace(inputs={"x": case.inputs["x"].astype(np.int64)})
    edits = (
        ("int64", as_int, "input x is int64, not the case's float32"),
        ("block", case.replace(block_m=-4), "params['block_m']=-4 is not a positive integer"),
        ("dtype", case.replace(dtype="float64"), "params['dtype']='float64' is not one of"),
    )
    # `python -m fuzz replay FILE` for each file, one after the other in one process.
    *procs, honest = cli_batch(
        [["replay", written(name, edited)] for name, edited, _ in edits]
        + [["replay", written("honest", case)]],
        tmp_path,
    )
    for proc, (_name, _edited, why) in zip(procs, edits, strict=True):
        assert proc.returncode == 2, proc.stdout
        assert "cannot replay: ValueError: its case is outside what target softmax is fuzzed" in (
            proc.stdout
        )
        assert why in proc.stdout, proc.stdout
    assert honest.returncode == 0 and "softmax on triton-interpret: PASS" in honest.stdout


SUPERSEDED = """
import dataclasses, os, time
from pathlib import Path
from fuzz.target import Hazard, get, load_plugin, register
load_plugin({fake!r})
base = get("fake_double")
run = base.kernels["fake"]
here = Path({d!r})

def shifting_nan(inputs, params, *, out, interpret):
    got = run(inputs, params, out=out, interpret=interpret)
    rows, cols = inputs["x"].shape
    if rows >= 2:  # NaN in row rows-2, last column: the finding's location moves as it shrinks
        got["y"][rows - 2, cols - 1] = float("nan")
    return got

def hangs(inputs, params, *, out, interpret):
    (here / "hanging").write_text(str(os.getpid()))
    while True:
        time.sleep(0.05)

# A hazard its first example has and its minimal one does not: the two are one bug with
# different triggers (fuzz.signatures), so their reproducers have different names.
more = (Hazard("more-than-two", lambda c: "yes" if c.inputs["x"].size > 2 else None),)
register(dataclasses.replace(base, name="fake_a_shifting_nan", source="builtin",
                             kernels={{"fake": shifting_nan}}, hazards=more))
register(dataclasses.replace(base, name="fake_b_hangs", source="builtin", kernels={{"fake": hangs}}))
"""


def test_a_replaced_reproducer_is_gone_even_after_a_kill_9(tmp_path):
    # The reproducer of a finding's first example, replaced by the minimal one's, was removed only
    # when the campaign ended: a kill -9 left it, named by no report.
    plugin = tmp_path / "superseded.py"
    plugin.write_text(SUPERSEDED.format(fake=FAKE, d=str(tmp_path)))
    out = tmp_path / "out"
    args = ["--plugin", str(plugin), "--targets", "fake_a_shifting_nan,fake_b_hangs"]
    args += ["--backends", "fake", "--seed", "3", "--examples", "40", "--example-timeout", "600"]
    args += ["--budget", "600", "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "fuzz", "run", "--profile", "ci", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_for((tmp_path / "hanging").exists, 300, "the second target never ran")
        _wait_for(
            lambda: (
                "shrunk" in (out / "report.json").read_text()
                and report_of(out)["findings"][0]["shrunk"]
            ),
            60,
            "the minimal example was never reported",
        )
        proc.kill()  # kill -9 of the campaign
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # Its first sight is said without a reproducer (it is replaced), by its signature.
    first = output.split("seen nan in fake_a_shifting_nan on fake (", 1)[1].split(")")[0]
    named = {f["reproducer"] for f in report_of(out)["findings"]}
    assert not any(first in r for r in named), "no replaced reproducer: the seed misses the case"
    assert {str(p) for p in (out / "reproducers").glob("*.py")} == named
    assert not list((out / "reproducers").glob(f"*{first}*"))  # the replaced one is gone


# The GPU's memory running out is the harness's, not the kernel's -----------------------------------

DEVICE_OOM = {
    "torch": "CUDA out of memory. Tried to allocate 2.00 GiB",
    "jax": "RESOURCE_EXHAUSTED: : CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    "triton": "Triton Error [CUDA]: out of memory",
}


@pytest.mark.parametrize("words", sorted(DEVICE_OOM))
def test_a_launch_that_runs_the_gpu_out_of_memory_stops_the_hunt_without_a_finding(
    fake_plugin, fake_profile, words
):
    """Eleven campaign processes on one H100 ran launches out of memory, and correct kernels
    read as crashes (`JaxRuntimeError: RESOURCE_EXHAUSTED ... CUDA_ERROR_OUT_OF_MEMORY`). The hunt
    stops with an error that says whose resources ran out; a kernel that needs more shared memory
    than the GPU has (Triton's `OutOfResources`) is still the kernel's crash."""
    from fuzz import engine
    from fuzz.target import get

    base = get("fake_double")
    run = base.kernels["fake"]

    class OutOfResources(Exception):
        pass

    def kernel(inputs, params, *, out, interpret, raises):
        if inputs["x"].shape[1] >= 3:
            raise raises
        return run(inputs, params, out=out, interpret=interpret)

    oom = dataclasses.replace(
        base,
        name="fake_oom",
        kernels={"fake": functools.partial(kernel, raises=RuntimeError(DEVICE_OOM[words]))},
    )
    result = engine.hunt(oom, "fake", fake_profile, max_examples=200, seed=1, database=None)
    assert not result.found, result.found
    assert result.stopped == "device-memory"
    assert "the GPU ran out of memory" in result.error and "not a kernel finding" in result.error
    assert result.events["device out of memory"] == 1
    smem = dataclasses.replace(
        base,
        name="fake_smem",
        kernels={
            "fake": functools.partial(
                kernel,
                raises=OutOfResources(
                    "out of resource: shared memory, Required: 344320, Hardware limit: 232448"
                ),
            )
        },
    )
    result = engine.hunt(smem, "fake", fake_profile, max_examples=200, seed=1, database=None)
    assert result.error is None and list(result.found) == ["crash"]


def test_an_example_too_large_for_the_gpu_memory_is_declined_and_the_hunt_goes_on(
    fake_plugin, fake_profile
):
    """On an H200, fla's chunked GLA drew cases its process's share of the GPU could not hold;
    each ended the process's hunt, and twice retired the pair as a harness error. An example
    that runs the GPU out of memory is declined instead (no finding, not an example, an event):
    the hunt goes on, and a bug of the cases that fit is still found and shrunk. Where the
    examples that run out are half or more of a hunt's (the process's memory itself may be
    what is short), the hunt still ends for a fresh process (the test above)."""
    from fuzz import engine
    from fuzz.target import get

    for name, bug in (("fake_double", None), ("fake_double_nan", "nan")):
        base = get(name)
        run = base.kernels["fake"]

        def kernel(inputs, params, *, out, interpret, run=run):
            if inputs["x"].numel() >= 40:  # a few of the drawn cases (up to 6 x 9)
                raise RuntimeError(DEVICE_OOM["torch"])
            return run(inputs, params, out=out, interpret=interpret)

        large = dataclasses.replace(base, name=f"{name}_large_oom", kernels={"fake": kernel})
        result = engine.hunt(large, "fake", fake_profile, max_examples=150, seed=3, database=None)
        declined = result.events["device out of memory: example declined"]
        assert declined > 0, result.events
        assert result.stopped != "device-memory" and result.error is None, result.error
        assert "device out of memory" not in result.events, result.events
        if bug is None:
            assert not result.found, result.found
            assert result.examples >= 100, result.examples  # every declined one drawn again
        else:
            (f,) = result.found.values()
            shape = f.case.inputs["x"].shape
            assert f.finding.cls == "nan" and shape[0] == 2, shape


def test_a_campaign_worker_out_of_gpu_memory_is_an_exhaustion_not_a_crash(tmp_path):
    """In a campaign the worker exits for a fresh process (its memory with it), the pair books a
    resource exhaustion, and twice retires it so: no crash finding, a note that says why."""
    out = tmp_path / "out"
    proc = fuzz_cli(
        "run",
        "--profile",
        "ci",
        "--plugin",
        FAKE,
        "--targets",
        "fake_device_oom",
        "--backends",
        "fake",
        "--budget",
        "600",
        "--examples",
        "200",
        "--seed",
        "2",
        "--out",
        str(out),
    )
    report = report_of(out)
    (row,) = report["results"]
    assert row["findings"] == [] and row["worker_deaths"] == 0, row["findings"]
    assert row["resource_exhaustions"] == 2 and row["retired"] == "resource exhaustion", row
    assert any("the GPU ran out of memory" in n for n in report["notes"]), report["notes"]
    assert "the GPU ran out of memory" in row["error"], row["error"]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]


def test_gpu_memory_running_out_outside_an_example_is_an_exhaustion_too(monkeypatch, tmp_path):
    """On an H100 a GLA mutant's warm-up found and shrank its bug, then the GPU's memory ran out
    outside an example (``torch.OutOfMemoryError``), and the slice ended as a harness error that
    retired the pair as broken. Out of an example too, it is the harness's resources: the worker
    exits for a fresh process (the campaign books an exhaustion); another error is still one."""
    from types import SimpleNamespace

    from fuzz import engine, get_profile
    from fuzz.campaign import messages, worker
    from fuzz.campaign.process import EXIT_DEVICE_MEMORY
    from fuzz.profiles import HuntOptions
    from fuzz.target import load_builtin

    load_builtin()
    sent = []
    config = messages.WorkerConfig(
        slot=0,
        plugins=[],
        options=HuntOptions.of(get_profile("ci")),
        repro_dir=str(tmp_path),
        inflight=str(tmp_path / "inflight"),
        log=str(tmp_path / "log"),
    )
    from fuzz.campaign.messages import Done, SlicePlan

    task = SlicePlan(
        id=1,
        target="softmax",
        backend="triton-interpret",
        started=0.0,
        time_limit=5.0,
        hard_limit=10.0,
        seed=1,
        max_examples=None,
        known=(),
        reuse=False,
        narrowing=None,
        warm_up=None,
        structures=(),
        compile_spent=(0.0, 0.0, 0.0),
    )

    def exits(code):
        raise SystemExit(code)

    monkeypatch.setattr(worker.os, "_exit", exits)
    for raised, ends in (
        (
            RuntimeError("CUDA out of memory. Tried to allocate 636.00 MiB"),
            EXIT_DEVICE_MEMORY,
        ),
        (ValueError("a harness bug"), None),
    ):

        def hunt(*a, raised=raised, **k):
            raise raised

        monkeypatch.setattr(engine, "hunt", hunt)
        sent.clear()
        conn = SimpleNamespace(send=sent.append)
        if ends is None:
            worker._hunt(conn, config, None, SimpleNamespace(value=0.0), task)
            assert isinstance(sent[-1], Done) and "a harness bug" in sent[-1].summary["error"]
            assert "in hunt" in sent[-1].summary["error_trace"]  # where it was raised
        else:
            with pytest.raises(SystemExit) as e:
                worker._hunt(conn, config, None, SimpleNamespace(value=0.0), task)
            assert e.value.code == ends and not [m for m in sent if isinstance(m, Done)]
