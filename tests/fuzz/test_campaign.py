"""Campaigns: worker processes survive kernels that raise, segfault or hang; nothing found is lost;
SIGTERM ends with a complete report; triage against the previous report; GPU slots per worker."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

HERE = Path(__file__).parent
FAKE = str(HERE / "fake_targets.py")
FAULTS = str(HERE.parent / "plugins" / "faults.py")


def fuzz_cli(*args, env=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "fuzz", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def fuzz_popen(*args, **popen):
    """``python -m fuzz ARGS`` started in the background, its output (stdout and stderr) piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "fuzz", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **popen,
    )


@pytest.fixture(scope="module")
def fault_campaign(tmp_path_factory):
    """One short CPU campaign over the fault-injection mutants, their correct base kernel and two
    fake targets (a correct one and a planted NaN). Run once per test session: under
    `pytest -n N` the first worker to need it runs it and the others read its output (the tests
    only read it)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's folder, above each worker's own
    folder = shared / "fault-campaign"
    folder.mkdir(exist_ok=True)
    out, ran = folder / "out", folder / "campaign.json"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a worker that comes second waits for the first
        if not ran.exists():
            proc = fuzz_cli(
                "run",
                "--profile",
                "ci",
                "--plugin",
                FAULTS,
                "--plugin",
                FAKE,
                "--mutants",
                "--targets",
                "faults*,fake_double,fake_double_nan,fake_double_sticky",
                "--backends",
                "triton-interpret,fake",
                "--examples",
                "40",
                "--budget",
                "900",
                "--example-timeout",
                "2",
                # Slices end at their pair's 40 examples; a long slice only gives the lost-context
                # crash's shrink in child processes (each a fresh interpreter's imports) its time
                # on a slow machine, within the slice's hard limit.
                "--slice",
                "60",
                "--seed",
                "1",
                "--out",
                str(out),
            )
            ran.write_text(json.dumps([proc.returncode, proc.stdout, proc.stderr]))
    returncode, stdout, stderr = json.loads(ran.read_text())
    proc = SimpleNamespace(returncode=returncode, stdout=stdout, stderr=stderr)
    report = json.loads((out / "report.json").read_text())
    return proc, out, report


def test_faults_are_reported_with_their_class_and_the_campaign_goes_on(fault_campaign):
    proc, _out, report = fault_campaign
    assert proc.returncode == 0, proc.stdout + proc.stderr  # only mutants fail
    assert report["complete"] and report["interrupted"] is None
    rows = {(r["target"], r["backend"]): r for r in report["results"]}
    expected = {
        "faults_mutant_raise": "crash",  # in-process exception
        "faults_mutant_wild_store": "crash",  # a real segfault in Triton's interpreter
        "faults_mutant_spin": "hang",  # the per-example timeout
    }
    for target, cls in expected.items():
        row = rows[(target, "triton-interpret")]
        assert row["status"] == "found", row
        assert [f["class"] for f in row["findings"]] == [cls]
    wild = rows[("faults_mutant_wild_store", "triton-interpret")]["findings"][0]
    assert "SIGSEGV" in wild["message"] and wild["details"]["log"]  # faulthandler's traceback
    spin = rows[("faults_mutant_spin", "triton-interpret")]["findings"][0]
    assert "per-example timeout" in spin["message"]
    assert "_scale_kernel" in spin["details"]["log"]  # the hung stack, dumped before the kill
    raised = rows[("faults_mutant_raise", "triton-interpret")]["findings"][0]
    assert raised["shrunk"] and raised["shapes"] == {"x": [1, 4]}  # in-process: shrunk
    # Every other finding is kept, the correct targets pass, and workers were restarted.
    assert [f["class"] for f in rows[("fake_double_nan", "fake")]["findings"]] == ["nan"]
    assert rows[("faults", "triton-interpret")]["status"] == "pass"
    assert rows[("fake_double", "fake")]["status"] == "pass"
    assert report["worker_restarts"] >= 1
    # A crash that loses its worker's CUDA context (faked: every later launch in that process
    # fails too) is shrunk in child processes before the worker makes way for a fresh one.
    sticky = rows[("fake_double_sticky", "fake")]["findings"]
    assert [(f["class"], f["shapes"], f["shrunk"]) for f in sticky] == [
        ("crash", {"x": [1, 4]}, True)
    ], sticky
    assert any("child process" in n for n in sticky[0]["shrink_notes"]), sticky[0]
    assert any(
        "fake_double_sticky on fake: the CUDA context was lost" in n for n in report["notes"]
    )
    assert report["summary"]["new"] == 5 and report["summary"]["mutants_found"] == 5
    for f in report["findings"]:
        assert Path(f["reproducer"]).exists() and f["signature"]


def test_every_saved_reproducer_replays_and_crashes_do_not_kill_the_replayer(fault_campaign):
    _, out, report = fault_campaign
    proc = fuzz_cli("replay", "--plugin", FAULTS, "--plugin", FAKE, str(out / "reproducers"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = proc.stdout
    assert text.count("== ") == len(report["findings"]) == 5
    assert (
        "faults_mutant_wild_store on triton-interpret: FAIL crash (the replay process was killed by SIGSEGV)"
        in text
    )
    assert "faults_mutant_spin on triton-interpret: FAIL hang" in text
    assert "faults_mutant_raise on triton-interpret: FAIL crash (same class as recorded)" in text
    assert "fake_double_nan on fake: FAIL nan" in text
    assert "fake_double_sticky on fake: FAIL crash" in text  # (in a child: it loses the context)
    assert "cannot replay" not in text


def test_replay_in_parallel_processes_gives_every_verdict(fault_campaign):
    _, out, report = fault_campaign
    proc = fuzz_cli(
        "replay", "--jobs", "3", "--plugin", FAULTS, "--plugin", FAKE, str(out / "reproducers")
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = proc.stdout
    assert text.count("== ") == len(report["findings"]) == 5
    for verdict in (
        "faults_mutant_wild_store on triton-interpret: FAIL crash",
        "faults_mutant_spin on triton-interpret: FAIL hang",
        "faults_mutant_raise on triton-interpret: FAIL crash",
        "fake_double_nan on fake: FAIL nan",
        "fake_double_sticky on fake: FAIL crash",
    ):
        assert verdict in text
    bad = fuzz_cli("replay", "--jobs", "0", str(out / "reproducers"))
    assert bad.returncode == 2 and "argument --jobs/-j: 0 must be >= 1" in bad.stderr


def test_reports_markdown_and_junit(fault_campaign):
    _, out, report = fault_campaign
    md = (out / "report.md").read_text()
    assert "**5 new, 0 still failing, 0 fixed**" in md
    assert "### `hang` in faults_mutant_spin (mutant, expected)" in md
    assert "python reproducers/faults_mutant_wild_store__triton-interpret__crash__" in md
    suite = ET.parse(out / "report.xml").getroot().find("testsuite")
    assert int(suite.get("tests")) == len(report["results"])
    assert int(suite.get("failures")) == 0 and int(suite.get("errors")) == 0


def test_sigterm_ends_the_campaign_with_a_complete_report(tmp_path):
    out = tmp_path / "out"
    proc = fuzz_popen(
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
        "--budget",
        "120",
        "--slice",
        "1",
        "--out",
        str(out),
    )
    deadline = time.time() + 300  # a busy machine starts a worker slowly
    found = False
    while time.time() < deadline and not found:
        time.sleep(0.3)
        try:
            found = bool(json.loads((out / "report.json").read_text())["findings"])
        except (OSError, ValueError, KeyError):
            pass
    assert found, "no finding streamed into report.json"
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, output  # interrupted: neither a pass nor a real failure
    report = json.loads((out / "report.json").read_text())
    assert report["interrupted"] == "SIGTERM" and not report["complete"]
    assert [f["class"] for f in report["findings"]] == ["nan"]
    assert {r["target"] for r in report["results"]} == {"fake_double", "fake_double_nan"}
    assert (out / "index.html").exists() and (out / "report.md").exists()
    assert "INCOMPLETE (SIGTERM)" in (out / "report.md").read_text()
    assert not list(out.rglob("*.tmp"))  # every file was written atomically


def _wait_for_examples(out, proc, seconds=300):
    """Waits until the campaign writing ``out`` has streamed a report with examples in it."""
    deadline = time.time() + seconds
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.3)
        try:
            if json.loads((out / "report.json").read_text())["summary"]["examples"] > 0:
                return
        except (OSError, ValueError, KeyError):
            pass
    raise AssertionError("no examples streamed into report.json")


def test_sigterm_to_the_process_group_is_a_stop_not_a_crash(tmp_path):
    # timeout(1), a systemd stop and `kill -TERM -- -PGID` signal the whole process group: the
    # workers get SIGTERM too, in the middle of an example. That is the user's stop, no finding.
    out = tmp_path / "out"
    proc = fuzz_popen(
        "run",
        "--profile",
        "ci",
        "--plugin",
        FAKE,
        "--targets",
        "fake_double",
        "--backends",
        "fake",
        "--budget",
        "120",
        "--slice",
        "1",
        "--out",
        str(out),
        start_new_session=True,
    )
    _wait_for_examples(out, proc)
    os.killpg(proc.pid, signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, output  # interrupted
    report = json.loads((out / "report.json").read_text())
    assert report["interrupted"] == "SIGTERM"
    assert report["findings"] == [] and report["summary"]["real_failed"] == [], report["findings"]
    assert report["results"][0]["status"] == "pass" and report["results"][0]["worker_deaths"] == 0
    assert not list((out / "reproducers").glob("*.py"))
    assert "failing real targets" not in output


WORKER_ONLY_IMPORT_ERROR = """
import multiprocessing
from fuzz.target import load_plugin
load_plugin({fake!r})
if multiprocessing.current_process().name.startswith("fuzz-worker"):
    raise ImportError("a module only the worker needs is missing (injected fault)")
"""


def test_a_campaign_whose_workers_cannot_start_is_a_harness_error(tmp_path):
    plugin = tmp_path / "worker_only_import_error.py"
    plugin.write_text(WORKER_ONLY_IMPORT_ERROR.format(fake=FAKE))
    out = tmp_path / "out"
    proc = fuzz_cli(
        "run",
        "--profile",
        "ci",
        "--plugin",
        str(plugin),
        "--targets",
        "fake_double",
        "--backends",
        "fake",
        "--examples",
        "20",
        "--budget",
        "600",
        "--out",
        str(out),
    )
    assert proc.returncode == 2, proc.stderr  # neither clean nor a failing kernel
    report = json.loads((out / "report.json").read_text())
    assert not report["complete"] and report["summary"]["examples"] == 0
    errors = report["summary"]["harness_errors"]
    assert any(
        "worker 0 could not start: ImportError: a module only the worker" in e for e in errors
    )
    assert "no worker could be started" in " ".join(errors)
    assert "harness error: no worker could be started" in proc.stderr
    suite = ET.parse(out / "report.xml").getroot().find("testsuite")
    assert int(suite.get("errors")) == 1  # CI's JUnit view sees it too
    assert "Harness errors" in (out / "report.md").read_text()


FAILING_FIRST_WRITE = """
from fuzz.campaign import report
from fuzz.target import load_plugin
load_plugin({fake!r})
_real, _said = report.campaign_report, []


def _first_write_fails(record, final=False):
    if not final and not _said:
        _said.append(1)
        raise AttributeError("'str' object has no attribute 'get'")
    return _real(record, final=final)


report.campaign_report = _first_write_fails
"""


def test_a_report_write_that_fails_mid_campaign_is_a_harness_error_not_its_end(tmp_path):
    """A fault of the report's own while the campaign runs (on an H200, a record of another
    shape ended a campaign at 281 s of 300): said once as a harness error (the report is not
    ``complete``), and the campaign fuzzes on to its end and writes its final report."""
    plugin = tmp_path / "failing_first_write.py"
    plugin.write_text(FAILING_FIRST_WRITE.format(fake=FAKE))
    out = tmp_path / "out"
    proc = fuzz_cli(
        "run", "--profile", "ci", "--plugin", str(plugin), "--targets", "fake_double",
        "--backends", "fake", "--examples", "30", "--budget", "600", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr  # (a harness error: exit 2)
    report = json.loads((out / "report.json").read_text())
    assert report["interrupted"] is None and report["summary"]["examples"] >= 30
    assert [r["status"] for r in report["results"]] == ["pass"]  # (fuzzed to its end)
    errors = report["summary"]["harness_errors"]
    assert errors == ["the report could not be written: AttributeError: 'str' object has no "
                      "attribute 'get'"], errors  # fmt: skip


BAD_STRATEGY = """
import dataclasses
from hypothesis import strategies as st
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
register(dataclasses.replace(get("fake_double"), name="fake_bad_strategy", source="builtin",
                             strategy=lambda scale: st.integers(5, 1)))
"""


def test_a_harness_error_is_exit_2_not_a_failing_real_target(tmp_path):
    plugin = tmp_path / "bad_strategy.py"
    plugin.write_text(BAD_STRATEGY.format(fake=FAKE))
    out = tmp_path / "out"
    # A previous report.json of another shape (another tool's, a hand edit) is no crash either.
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"findings": [{"signature": 1}, "x"]}))
    proc = fuzz_cli(
        "run",
        "--profile",
        "ci",
        "--plugin",
        str(plugin),
        "--targets",
        "fake_double,fake_bad_strategy",
        "--backends",
        "fake",
        "--examples",
        "20",
        "--budget",
        "600",
        "--out",
        str(out),
    )
    assert proc.returncode == 2, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["real_failed"] == []
    rows = {r["target"]: r for r in report["results"]}
    assert (
        rows["fake_bad_strategy"]["status"] == "error" and rows["fake_double"]["status"] == "pass"
    )
    assert any("InvalidArgument" in e for e in report["summary"]["harness_errors"])
    # Its traceback is kept with it (report.json, and report.md under the harness errors).
    trace = rows["fake_bad_strategy"]["error_trace"]
    assert (
        "Traceback" in trace
        and "InvalidArgument" in trace
        and rows["fake_double"]["error_trace"] is None
    )
    assert (
        "traceback of fake_bad_strategy on fake's harness error" in (out / "report.md").read_text()
    )
    assert "2 finding(s) of the previous report.json are malformed; skipped" in report["notes"]
    assert "failing real targets" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_previous_report_of_another_shape_is_not_triaged_against(tmp_path):
    from fuzz.campaign.report_files import read_previous

    path = tmp_path / "report.json"
    for text, problem in [
        ("[1, 2]", "is not a campaign report"),
        ('{"findings": 3}', "is not a campaign report"),
        ("{not json", "cannot be read"),
    ]:
        path.write_text(text)
        prev, why = read_previous(path)
        assert prev is None and problem in why
    good = {"signature": "abc", "target": "t", "class": "nan", "message": "m", "backends": ["b"]}
    path.write_text(json.dumps({"started": 5, "findings": [good, {**good, "backends": "b"}]}))
    prev, why = read_previous(path)
    assert prev["findings"] == [good] and prev["started"] is None and "1 finding(s)" in why
    assert read_previous(tmp_path / "none.json") == (None, None)


def test_a_second_campaign_into_the_same_folder_stops_naming_the_first(tmp_path):
    # Two campaigns into one --out shared the workers' in-flight records and the last writer of
    # report.json dropped the other's findings: the folder is locked; the lock dies with its
    # holder (even by SIGKILL), so a killed campaign leaves no stale lock.
    out = tmp_path / "out"
    args = [
        "run",
        "--profile",
        "ci",
        "--plugin",
        FAKE,
        "--targets",
        "fake_double",  # a correct kernel: its campaign runs to its budget
        "--backends",
        "fake",
        "--slice",
        "1",
        "--out",
        str(out),
    ]
    first = fuzz_popen(*args, "--budget", "600", start_new_session=True)
    lock = out / ".campaign.lock"
    try:
        deadline = time.time() + 300
        while f'"pid": {first.pid}' not in (lock.read_text() if lock.exists() else ""):
            assert time.time() < deadline and first.poll() is None, "the first did not start"
            time.sleep(0.2)
        second = fuzz_cli(*args, "--budget", "1")
        assert second.returncode == 2, second.stderr
        assert f"is in use by another campaign (pid {first.pid} on " in second.stderr
        assert (
            "python -m fuzz run --profile ci" in second.stderr and "Traceback" not in second.stderr
        )
        assert not (out / "history").exists()  # the second one touched nothing
        assert f'"pid": {first.pid}' in lock.read_text()
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate(timeout=60)
    from fuzz.campaign.outdir import lock_output

    lock_output(out).close()  # free again once its holder is gone


NOT_A_CASE = """
import dataclasses
from hypothesis import strategies as st
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
base = get("fake_double")
register(dataclasses.replace(base, name="fake_not_a_case", source="builtin",
                             strategy=lambda scale: st.just({{"x": 1}})))
register(dataclasses.replace(base, name="fake_not_a_strategy", source="builtin",
                             strategy=lambda scale: None))
"""


def test_quiet_failures_are_said_on_the_console_and_name_their_plugin(tmp_path):
    # A Redis database that cannot be reached showed only in report.json/md; a plugin strategy
    # that draws no Case failed as "AttributeError: 'dict' object has no attribute 'inputs'".
    import socket

    with socket.socket() as sock:  # a port nothing listens on: the connection is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    plugin = tmp_path / "not_a_case.py"
    plugin.write_text(NOT_A_CASE.format(fake=FAKE))
    out = tmp_path / "out"
    proc = fuzz_cli(
        "run",
        "--profile",
        "ci",
        "--plugin",
        str(plugin),
        "--targets",
        "fake_double,fake_not_a_*",
        "--backends",
        "fake",
        "--examples",
        "20",
        "--budget",
        "600",
        "--out",
        str(out),
        "--db",
        f"redis://127.0.0.1:{port}/0",
    )
    assert proc.returncode == 2, proc.stderr  # harness errors
    said = proc.stderr[: proc.stderr.index("fuzzing ")]  # before any work
    assert f"WARNING example database redis://127.0.0.1:{port}/0: fetch failed: Connection" in said
    assert "example database warning(s)" in proc.stderr  # and again in the closing summary
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["real_failed"] == [] and report["database"]["problems"]
    errors = {r["target"]: r["error"] for r in report["results"] if r["error"]}
    assert set(errors) == {"fake_not_a_case", "fake_not_a_strategy"}
    assert (
        "the strategy of target 'fake_not_a_case' drew a dict; it must draw fuzz.Case"
        in (errors["fake_not_a_case"])
    )
    assert "'fake_not_a_strategy' returned a NoneType" in errors["fake_not_a_strategy"]
    for error in errors.values():
        assert error.endswith(f"(target from plugin {plugin})")
        assert "ERROR fake_not_a" in proc.stderr


RESOURCES = """
import dataclasses, mmap, os, signal, time
from pathlib import Path
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
base = get("fake_double")
run = base.kernels["fake"]
held = []


def leak(n):  # n memory maps (alternate protections: the kernel cannot merge neighbours)
    for i in range(n):
        held.append(mmap.mmap(-1, 4096, prot=mmap.PROT_READ | (mmap.PROT_WRITE * (i % 2))))


def first_time(name):  # the fault happens in the first worker process only
    marker = Path({d!r}, name)
    if marker.exists() and marker.read_text() != str(os.getpid()):
        return False
    marker.write_text(str(os.getpid()))
    return True


def leaks(inputs, params, *, out, interpret):  # compiled programs piling up, in miniature
    # At its first example, past the recycling count (60% of the limit, and 10% more than the
    # process started with), short of the 85% that reads as exhaustion: recycled at the end of
    # this slice however few examples it runs (a loaded machine runs few).
    if first_time("leaks") and not held:
        maps = Path("/proc/self/maps").read_text().count("\\n")
        limit = int(os.environ["KERNEL_FUZZ_MAP_LIMIT"])
        leak(max(int(0.65 * limit), maps + int(0.12 * limit)) - maps)
    return run(inputs, params, out=out, interpret=interpret)


def hogs(inputs, params, *, out, interpret):  # LLVM at the limit: its next mmap fails, SIGSEGV
    if first_time("hogs"):
        maps = Path("/proc/self/maps").read_text().count("\\n")
        leak(int(0.9 * int(os.environ["KERNEL_FUZZ_MAP_LIMIT"])) - maps)
        time.sleep(2.5)
        os.kill(os.getpid(), signal.SIGSEGV)
    return run(inputs, params, out=out, interpret=interpret)


def says_enomem(inputs, params, *, out, interpret):
    if first_time("says_enomem"):
        os.write(2, b"LLVM ERROR: Cannot allocate memory\\n")
        os.kill(os.getpid(), signal.SIGSEGV)
    return run(inputs, params, out=out, interpret=interpret)


for name, kernel in (("fake_leaks", leaks), ("fake_hogs", hogs), ("fake_says_enomem", says_enomem)):
    register(dataclasses.replace(base, name=name, source="builtin", kernels={{"fake": kernel}}))
"""


def test_memory_maps_recycle_workers_and_exhaustion_is_no_kernel_crash(tmp_path):
    # A worker compiling an XLA program per new shape (Pallas interpret=True) exhausted its memory
    # maps after ~1000 examples (LLVM "Cannot allocate memory", then SIGSEGV): reported as kernel
    # crashes. With the limit lowered: the leaking worker is recycled before the limit; a death
    # at the limit, or after an out-of-memory message, is a warning, not a finding.
    plugin = tmp_path / "resources.py"
    plugin.write_text(RESOURCES.format(fake=FAKE, d=str(tmp_path)))
    out = tmp_path / "out"
    proc = fuzz_cli(
        "run",
        "--profile",
        "ci",
        "--plugin",
        str(plugin),
        "--targets",
        "fake_leaks,fake_hogs,fake_says_enomem",
        "--backends",
        "fake",
        "--examples",
        "400",
        "--budget",
        "900",
        "--slice",
        "1",
        "--out",
        str(out),
        env={"KERNEL_FUZZ_MAP_LIMIT": "8000"},
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["findings"] == [] and not list((out / "reproducers").glob("*.py"))
    assert report["workers"][0]["recycles"] >= 1, proc.stderr
    assert "is recycled: its process holds" in proc.stderr
    notes = "\n".join(report["notes"])
    assert "killed by SIGSEGV (segmentation fault) while fuzzing fake_hogs" in notes
    assert "the harness ran out of resources (7" in notes and "memory maps of the 8000" in notes
    assert "fake_says_enomem on fake: the harness ran out of resources (it said " in notes
    rows = {r["target"]: r for r in report["results"]}
    hogs = rows["fake_hogs"]  # no finding: a pass, or unrun where its only example was cut
    assert hogs["resource_exhaustions"] == 1
    assert hogs["status"] == ("pass" if hogs["examples"] else "unrun")
    assert rows["fake_hogs"]["worker_deaths"] == 0


TOGGLE = """
import os, dataclasses
from fuzz.target import load_plugin, get, register
load_plugin({fake!r})
buggy = os.environ.get("FAKE_TOGGLE_BUG") == "1"
t = get("fake_double_nan" if buggy else "fake_double")
register(dataclasses.replace(t, name="fake_toggle", mutant=None, source="builtin"))
"""


def test_triage_against_the_previous_report(tmp_path):
    plugin = tmp_path / "toggle.py"
    plugin.write_text(TOGGLE.format(fake=FAKE))
    out = tmp_path / "out"
    args = [
        "run",
        "--profile",
        "ci",
        "--plugin",
        str(plugin),
        "--mutants",
        "--targets",
        "fake_toggle,fake_double_oob",
        "--backends",
        "fake",
        "--examples",
        "100",
        "--budget",
        "900",
        "--out",
        str(out),
        "--seed",
        "2",
    ]
    first = fuzz_cli(*args, env={"FAKE_TOGGLE_BUG": "1"})
    assert first.returncode == 1, first.stderr  # a real target fails: exit status 1
    assert "failing real targets: fake_toggle" in first.stderr
    r1 = json.loads((out / "report.json").read_text())
    assert sorted(f["triage"] for f in r1["findings"]) == ["new", "new"]
    # The bug is fixed; a short run: the previous reproducers are replayed before any fuzzing.
    second = fuzz_cli(*[a if a != "100" else "5" for a in args], env={"FAKE_TOGGLE_BUG": "0"})
    assert second.returncode == 0, second.stderr
    r2 = json.loads((out / "report.json").read_text())
    assert [(f["target"], f["triage"]) for f in r2["findings"]] == [
        ("fake_double_oob", "still failing")
    ]
    assert [f["target"] for f in r2["triage"]["fixed"]] == ["fake_toggle"]
    assert r2["triage"]["previous"] == r1["started"]
    history = list((out / "history").iterdir())
    assert len(history) == 1 and (history[0] / "report.json").exists()
    assert "**0 new, 1 still failing, 1 fixed**" in (out / "report.md").read_text()


GPU_PROBE = """
import os
from pathlib import Path
from fuzz.target import load_plugin
load_plugin({fake!r})
Path({d!r}, f"worker-{{os.getpid()}}").write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "unset"))
"""


def _fake_campaign(tmp_path, targets, plugin, **config):
    """Runs an in-process campaign over fake targets on the ``fake`` backend; returns its report."""
    from fuzz.campaign.runner import Campaign, CampaignConfig
    from fuzz.profiles import Profile
    from fuzz.target import get

    config = CampaignConfig(
        targets=[get(t) for t in targets],
        backends=["fake"],
        profile=Profile("ci", ("fake",), "small", False, "cpu", False, 60),
        out=tmp_path / "out",
        repro_dir=tmp_path / "out" / "reproducers",
        db=None,
        plugins=[str(plugin)],
        **config,
    )
    return Campaign(config, log=lambda line: None).run()


def test_one_worker_per_gpu_each_with_its_own_device(tmp_path):
    from fuzz.target import load_plugin

    probe = tmp_path / "probe.py"
    probe.write_text(GPU_PROBE.format(fake=FAKE, d=str(tmp_path)))
    load_plugin(FAKE)
    report = _fake_campaign(
        tmp_path,
        ["fake_double", "fake_double_nan"],
        probe,
        budget=600.0,  # a safety net: the campaign ends at its examples
        examples=40,
        workers=2,
        devices=["3", "5"],
        example_timeout=30,
    )
    seen = sorted(p.read_text() for p in tmp_path.glob("worker-*"))
    assert seen == ["3", "5"]
    assert [w["device"] for w in report["workers"]] == ["3", "5"]
    assert report["summary"]["mutants_found"] == 1


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def test_the_html_report_renders_in_a_headless_browser(fault_campaign, tmp_path):
    import re
    import shutil

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    _, out, report = fault_campaign
    page = (out / "index.html").resolve().as_uri()
    text = (out / "index.html").read_text()
    for external in ('src="http', "src='http", 'href="http', "<link", "url(http", "@import"):
        assert external not in text  # self-contained: nothing fetched from a network
    cmd = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*cmd, "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    check = re.search(r'data-selfcheck="([^"]*)"', dom.stdout)
    assert check is not None, "the page's load handler did not run"
    ok, images, svgs = re.fullmatch(
        r"(ok|fail.*?) (\d+) images (\d+) svgs", check.group(1)
    ).groups()
    assert ok == "ok"
    plotted = [f for f in report["findings"] if f["plots"]]
    assert plotted  # the NaN finding: heatmap + legend + histogram per output
    assert int(images) >= 2 * len(plotted) and int(svgs) >= len(plotted) + 1
    assert dom.stdout.count('class="finding ') == len(report["findings"])
    shot = tmp_path / "page.png"
    proc = subprocess.run(
        [*cmd, f"--screenshot={shot}", "--window-size=1100,1400", page],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and shot.stat().st_size > 20_000


SLOW_FIRST = """
import os, time
from pathlib import Path
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
import dataclasses
base = get("fake_double")
run = base.kernels["fake"]
marker = Path({d!r}, "compiled")

def slow_first(inputs, params, *, out, interpret):
    if not marker.exists():  # the first call ever "compiles" for longer than the timeout
        time.sleep(4.0)
        marker.write_text("done")
    return run(inputs, params, out=out, interpret=interpret)

register(dataclasses.replace(base, name="fake_slow_first", kernels={{"fake": slow_first}}))
"""


def test_a_first_slow_example_is_not_a_hang_once_a_second_try_finishes(tmp_path):
    """The per-example timeout fires on an example that is only slow the first time (a first
    compilation): its replay in a fresh worker, with more time, finishes, so there is no hang
    finding, only a note; a real hang (faults_mutant_spin, above) is confirmed by its replay."""
    from fuzz.target import load_plugin

    plugin = tmp_path / "slow_first.py"
    plugin.write_text(SLOW_FIRST.format(fake=FAKE, d=str(tmp_path)))
    load_plugin(str(plugin))
    report = _fake_campaign(
        tmp_path, ["fake_slow_first"], plugin, budget=600.0, examples=30, example_timeout=2.0
    )
    assert report["findings"] == [], report["findings"]
    assert any("not a hang" in n for n in report["notes"]), report["notes"]
    assert not list((tmp_path / "out" / "reproducers").glob("*hang*"))


COMPILE_HANG = """
import time
from fuzz.target import get, load_plugin, register
from fuzz.timing import compile_starting
load_plugin({fake!r})
import dataclasses
base = get("fake_double")

def compiles_forever(inputs, params, *, out, interpret):
    compile_starting()  # as the compilers' hooks do: the example clock stops
    time.sleep(60.0)

register(dataclasses.replace(base, name="fake_compile_hang", kernels={{"fake": compiles_forever}}))
"""


def test_a_compile_past_the_compile_timeout_is_a_hang_finding(tmp_path):
    """Compile time is not example time, but --compile-timeout bounds it: a kernel still
    compiling after it is a ``hang`` finding with a reproducer (the message used to be built and
    dropped: no finding at all)."""
    from fuzz.target import load_plugin

    plugin = tmp_path / "compile_hang.py"
    plugin.write_text(COMPILE_HANG.format(fake=FAKE))
    load_plugin(str(plugin))
    report = _fake_campaign(
        tmp_path,
        ["fake_compile_hang"],
        plugin,
        budget=30.0,  # the compile timeout is what is tested: room for a slow worker start
        example_timeout=1.0,
        compile_timeout=2.0,
    )
    hangs = [f for f in report["findings"] if f["class"] == "hang"]
    assert hangs and "still compiling after 2 s" in hangs[0]["message"], report["findings"]
    assert list((tmp_path / "out" / "reproducers").glob("*hang*"))


def test_the_first_round_visits_every_family_before_any_family_twice():
    from types import SimpleNamespace

    from fuzz.campaign.pairs import PairState, interleave

    def pair(name, family, backend, mutant=False):
        t = SimpleNamespace(name=name, family=family, is_mutant=mutant)
        return PairState(t, backend)  # type: ignore[arg-type]

    pairs = [
        pair("a_mutant_x", "a", "b1", True),
        pair("a", "a", "b1"),
        pair("a", "a", "b2"),
        pair("b", "b", "b1"),
        pair("c_mutant_y", "c", "b1", True),
    ]
    order = [(p.target.name, p.backend) for p in interleave(pairs)]
    assert order == [
        ("a", "b1"),
        ("b", "b1"),
        ("c_mutant_y", "b1"),
        ("a", "b2"),
        ("a_mutant_x", "b1"),
    ]


def test_time_given_back_for_restarts_and_hang_confirmations_is_capped():
    # On a GPU host, kernels that compile past the example timeout made workers restart again and
    # again; every restart gave its time back and a 600 s campaign was still running at 937 s.
    from fuzz.campaign.config import refund_cap
    from fuzz.campaign.runner import Campaign

    c = Campaign.__new__(Campaign)
    c.deadline = 1000.0
    c.latest_deadline = c.deadline + refund_cap(600.0)
    assert refund_cap(600.0) == 150.0 and refund_cap(20.0) == 60.0
    c._refund(40.0)
    assert c.deadline == 1040.0
    for _ in range(10):
        c._refund(40.0)
    assert c.deadline == 1150.0


def test_an_examples_clock_stops_while_a_kernel_compiles():
    # A kernel's first compile (minutes for a big Triton kernel on a loaded host) is not a hang:
    # the worker's example clock turns negative while the compiler runs and restarts after it.
    import time
    from types import SimpleNamespace

    import jax
    import jax.numpy as jnp

    from fuzz import timing
    from fuzz.campaign.worker import _pause_clock_while_compiling

    started = SimpleNamespace(value=0.0)
    seen = []
    _pause_clock_while_compiling(started)
    timing.watch_compiles(
        lambda: seen.append(("start", started.value)), lambda: seen.append(("end", started.value))
    )
    timing._started()
    assert started.value == 0.0  # no example running: nothing to pause
    t0 = time.time()
    started.value = t0 - 5.0
    timing._started()
    assert -time.time() <= started.value < 0
    timing._ended()
    assert started.value >= t0  # the clock restarts after the compile
    seen.clear()
    started.value = time.time() - 5.0
    jax.jit(lambda x: x * 3 + 2)(jnp.arange(7.0)).block_until_ready()  # a fresh compile
    kinds = [k for k, _ in seen]
    assert "start" in kinds and kinds[-1] == "end"
    assert any(v < 0 for k, v in seen if k == "start")  # paused while compiling
    assert started.value > 0


def test_a_worker_clears_the_compile_caches_then_asks_to_be_recycled():
    # What leaks in a long-lived worker: the executables XLA compiles for every new shape keep
    # memory maps (about 3 per trivial jitted program here, 40-100 per example of the attention
    # and softmax targets under Pallas interpret=True); jax.clear_caches() frees them.
    import mmap

    import jax
    import jax.numpy as jnp

    from fuzz.campaign.process import CLEAR_AT, MapBudget, count_maps

    double = jax.jit(lambda x: x * 2 + 1)
    before = count_maps()
    for n in range(1, 41):  # 40 new shapes: 40 programs
        double(jnp.ones(n)).block_until_ready()
    grown = count_maps()
    assert grown >= before + 40
    budget = MapBudget(int(grown / (CLEAR_AT + 0.05)))  # past the clear mark, short of recycling
    assert budget.check(now=True) is False
    assert count_maps() <= grown - 40 and budget.cleared_at <= grown - 40
    stuck = MapBudget(int(count_maps() / 0.5))  # a process at half its limit, then
    held = [  # maps no cache holds: only a fresh process gets rid of them
        mmap.mmap(-1, 4096, prot=mmap.PROT_READ | (mmap.PROT_WRITE * (i % 2)))
        for i in range(int(0.15 * stuck.limit))
    ]
    assert stuck.check(now=True) is True and stuck.recycle >= 0.6 * stuck.limit
    del held
    # A process that starts past the mark (a limit set too low) is not recycled again and again.
    assert MapBudget(int(count_maps() / 0.7)).check(now=True) is False
