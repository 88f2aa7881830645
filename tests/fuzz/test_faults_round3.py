"""Reliability, round 3: no fault of the harness reaches a report (issue "no harness fault reaches
a report"): its own refusals inside a kernel's host callbacks, Hypothesis's own words on the
console, a flaky kernel, a stop after the campaign's end, records left undecided.

Campaigns here stop by example counts (``--examples``), never by a few seconds of budget: the
budgets are safety nets only.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

HERE = Path(__file__).parent
FAKE = str(HERE / "fake_targets.py")


def report_of(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


# A stop signal after the campaign's end ------------------------------------------------------------

# ``python -m fuzz run`` as ``fuzz/__main__.py`` runs it (``main()`` with the process's argv), a
# SIGTERM arriving while the closing summary is printed (after the final report is written).
_LATE_STOP = """
import os, signal, sys
import fuzz.cli as cli

printed = cli._print_summary


def summary(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    printed(*args, **kwargs)


cli._print_summary = summary
sys.argv = ["fuzz", *sys.argv[1:]]
sys.exit(cli.main())
"""


def test_a_stop_after_the_final_report_keeps_the_campaigns_exit_status(tmp_path):
    # The handlers were restored once the campaign returned: a SIGTERM in the ~0.4 s of the
    # summary's printing ended the process with 143, not the campaign's status.
    out = tmp_path / "out"
    args = ["--profile", "ci", "--plugin", FAKE, "--targets", "fake_double", "--backends", "fake"]
    args += ["--examples", "5", "--budget", "300", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-c", _LATE_STOP, "run", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    assert report_of(out)["complete"] and "report: " in proc.stderr  # the summary, all of it


# Hypothesis's words and a kernel's prints stay off the console --------------------------------------


def test_hypothesis_says_nothing_itself_and_a_cut_shrink_is_noted(fake_plugin, fake_profile, capfd):
    # A 480 s campaign printed "Hypothesis has spent more than five minutes working to shrink a
    # failing test case ... PLEASE REPORT THIS" 9 times, "exited early because it took too long
    # to shrink" and @seed(...) hints for the harness's own test function. The hunt's shrink
    # time here is next to nothing: Hypothesis cuts its shrinking at the first step.
    from fuzz import engine
    from fuzz.profiles import HuntOptions
    from fuzz.target import get

    options = HuntOptions.of(fake_profile, shrink_seconds=1e-9)
    result = engine.hunt(get("fake_double_nan"), "fake", options, seed=1, database=None)
    said = capfd.readouterr()
    assert "Hypothesis" not in said.out + said.err and "@seed" not in said.out + said.err
    assert "Falsifying example" not in said.out + said.err
    (found,) = result.found.values()
    assert found.final and found.finding.cls == "nan"
    assert found.shrink_notes == [
        "shrinking cut after 1e-09 s (the hunt's shrink time): the best example so far is the "
        "reproducer"
    ]


PRINTS = """
import dataclasses, os
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
base = get("fake_double")
run = base.kernels["fake"]


def chatty(inputs, params, *, out, interpret):
    print("the kernel says hello (print)")
    os.write(1, b"the kernel says hello (file descriptor 1)\\n")
    return run(inputs, params, out=out, interpret=interpret)


register(dataclasses.replace(base, name="fake_chatty", kernels={{"fake": chatty}}))
register(dataclasses.replace(get("fake_double_nan"), name="fake_nan", mutant=None))
"""

# ``python -m fuzz run`` whose profile gives Hypothesis next to no time to shrink a failure.
_CUT_SHRINKING = """
import dataclasses, sys
import fuzz.cli as cli
from fuzz import profiles

profiles.PROFILES["ci"] = dataclasses.replace(profiles.PROFILES["ci"], shrink_seconds=1e-9)
sys.argv = ["fuzz", *sys.argv[1:]]
sys.exit(cli.main())
"""


def test_a_campaigns_console_has_neither_hypothesis_nor_a_kernels_prints(tmp_path):
    # A kernel's stdout flooded the campaign's console while its worker's log stayed empty; and
    # Hypothesis's own reports (the shrink-time warning, @seed hints, falsifying examples).
    plugin = tmp_path / "chatty.py"
    plugin.write_text(PRINTS.format(fake=FAKE))
    out = tmp_path / "out"
    args = ["--profile", "ci", "--plugin", str(plugin), "--backends", "fake"]
    args += ["--targets", "fake_chatty,fake_nan", "--examples", "30", "--budget", "600"]
    proc = subprocess.run(
        [sys.executable, "-c", _CUT_SHRINKING, "run", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # fake_nan fails
    console = proc.stdout + proc.stderr
    for words in ("hello", "Hypothesis", "@seed", "PLEASE REPORT", "Falsifying"):
        assert words not in console, (words, console[-3000:])
    logs = "".join(p.read_text() for p in (out / "workers").glob("worker-*.log"))
    assert "the kernel says hello (print)" in logs
    assert "the kernel says hello (file descriptor 1)" in logs
    (nan,) = report_of(out)["findings"]
    assert nan["class"] == "nan" and nan["shrunk"]
    assert any(n.startswith("shrinking cut after 1e-09 s") for n in nan["shrink_notes"]), nan


# The harness's refusal of a compile, come back through a kernel's host callback -------------------


def _compiling_in_a_callback(wrap):
    """fake_double run through a host callback that compiles a program per exact shape, shapes of
    at most 3 columns compiled already: a compile the harness refuses there comes back as
    ``wrap(exception)`` raises it (the runtime's own error around it)."""
    import dataclasses

    from fuzz import timing
    from fuzz.target import get

    base = get("fake_double")
    run = base.kernels["fake"]
    compiled = {(r, c) for r in range(1, 7) for c in range(1, 4)}

    def callback(shape):
        if shape not in compiled:
            timing.compile_starting(name="callback program")
            compiled.add(shape)
            timing.compile_done()

    def kernel(inputs, params, *, out, interpret):
        try:
            callback(tuple(inputs["x"].shape))
        except BaseException as e:
            wrap(e)
        return run(inputs, params, out=out, interpret=interpret)

    return dataclasses.replace(base, name="fake_callback_compiles", kernels={"fake": kernel})


def _as_jax_says(e):
    # What XLA's CPU runtime makes of an exception its Python callback raised: its own error,
    # the original's name in the text, nothing chained.
    raise RuntimeError(f"INTERNAL: CpuCallback error calling callback: ... {type(e).__name__}: ")


def test_a_compile_refused_inside_a_kernels_callback_is_refused_not_a_crash(
    fake_plugin, fake_profile
):
    # A Pallas library written for TPUs (its kernels compile inside host callbacks), fuzzed on
    # pallas-interpret with the gpu profile: two crash rows whose message ended in the harness's
    # own NewCompile, then a harness error, FlakyStrategyDefinition. Here the pair's compile
    # share is spent from the start (its earlier slices compiled 1000 s of 1 s): every example
    # of a shape not compiled yet is refused.
    from fuzz import engine
    from fuzz.profiles import HuntOptions

    options = dataclasses.replace(HuntOptions.of(fake_profile), compile_share=0.25)
    result = engine.hunt(
        _compiling_in_a_callback(_as_jax_says),
        "fake",
        options,
        max_examples=60,
        seed=1,
        database=None,
        compile_spent=(1000.0, 1.0),
    )
    assert result.error is None and not result.found, (result.error, list(result.found))
    assert result.events["rejected: would compile"] > 0 and result.examples > 0


def test_jaxs_error_around_a_compile_refused_in_its_callback_is_the_refusal(fake_plugin):
    # The real thing: a jitted program whose host callback compiles a program of its own (each
    # call a new one, as Pallas's TPU interpret mode compiles a kernel body there). Inside
    # no_new_compiles JAX gives the callback's NewCompile back as its own error, chaining
    # nothing (JAX 0.10 on the CPU: "ValueError: ... NewCompile:").
    import jax
    import numpy as np
    import pytest
    import torch

    from fuzz import timing
    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.properties import check_case
    from fuzz.target import get

    timing.install()
    calls = [0]

    def host(x):
        calls[0] += 1
        offset = calls[0] * 0.0
        return np.asarray(jax.jit(lambda a: a * 2 + offset)(x))

    @jax.jit
    def program(x):
        return jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    def kernel(inputs, params, *, out, interpret):
        out["y"].copy_(torch.from_numpy(np.array(program(inputs["x"].numpy()))))
        return {"y": out["y"]}

    target = dataclasses.replace(
        get("fake_double"), name="fake_jax_callback", kernels={"fake": kernel}
    )
    case = Case({"x": np.ones((2, 3), np.float32)}, {"dtype": "float32"})
    fake = get_backend("fake")
    assert check_case(target, fake, case).finding is None  # compiles the program
    with timing.no_new_compiles(), pytest.raises(timing.NewCompile):
        check_case(target, fake, case)  # the callback's program is new


# A flaky kernel ------------------------------------------------------------------------------------


def _second_call_nan(base):
    """``base`` (a fake target) whose kernel returns a NaN on its second call with the same inputs
    only (a module-level counter of the inputs it was given): an example fails once, then
    passes on every replay."""
    import collections

    run, calls = base.kernels["fake"], collections.Counter()

    def flaky(inputs, params, *, out, interpret):
        res = run(inputs, params, out=out, interpret=interpret)
        x = inputs["x"].numpy()
        calls[x.tobytes(), x.shape] += 1
        if calls[x.tobytes(), x.shape] == 2:
            res["y"][0, 0] = float("nan")
        return res

    return dataclasses.replace(base, name="fake_flaky", kernels={"fake": flaky})


def test_a_flaky_kernel_is_one_flaky_finding_shrunk(fake_plugin, fake_profile):
    # Its examples failed (two runs differ, a NaN...) and passed on Hypothesis's replays: bugs of
    # several keys, none shrunk ("Failed to reproduce"), and draws that differed between runs
    # of one example (FlakyStrategyDefinition, a harness error).
    from fuzz import engine
    from fuzz.target import get

    result = engine.hunt(
        _second_call_nan(get("fake_double")), "fake", fake_profile, seed=1, database=None
    )
    assert result.error is None and list(result.found) == ["nondeterminism"], result.found
    found = result.found["nondeterminism"]
    assert found.final and found.case.inputs["x"].shape == (1, 1), found.case
    assert found.key == "nondeterminism|replays|-|-" and not found.triggers
    f = found.finding
    assert f.message.startswith("flaky: the same example failed 1 of 2 runs"), f.message
    assert f.details["runs"] == 2 and f.details["failed"] == 1
    assert 0 < f.details["failed_in_all"] < f.details["runs_in_all"]


def test_a_flaky_example_failing_as_a_known_bug_is_a_hit_of_it(fake_plugin, fake_profile):
    """A flaky example one of whose runs failed as a known bug is that bug's example (a race's
    example fails as the race's rows do, one run or another), not a flaky row of its own: a
    planted jagged kernel's race kept a flaky row beside its out-of-bounds row on an H200.
    The flaky finding says how its runs failed (``run_keys``)."""
    import collections
    from types import SimpleNamespace

    from fuzz import engine
    from fuzz.signatures import Bug
    from fuzz.target import get

    alone = engine.hunt(
        _second_call_nan(get("fake_double")), "fake", fake_profile, seed=1, database=None
    )
    keys = alone.found["nondeterminism"].finding.details["run_keys"]
    assert keys == ["nondeterminism|determinism|y|-"], keys  # (two calls differ: a NaN)
    me = object.__new__(engine._Hunter)
    me.result = SimpleNamespace(known_hits=collections.Counter())
    flaky = engine.flaky_finding([None, engine.Finding("masking", "oracle", "m"), None], [], (1, 3))
    assert flaky.details["run_keys"] == ["masking|oracle|-|-"]
    me.known_bugs = [Bug("masking|oracle|-|-", frozenset({"partial-tile"}), "race")]
    assert not me._known_runs(flaky, {"wide"})  # its conditions are not the bug's
    assert me._known_runs(flaky, {"wide", "partial-tile"})
    assert me.result.known_hits == {"race": 1}


FLAKY_SOFTMAX = """
import collections

import torch

import fuzz

calls = collections.Counter()  # how often the kernel was given each input


def softmax(x, *, scale):
    seen = (x.numpy().tobytes(), tuple(x.shape), scale)
    calls[seen] += 1
    y = torch.softmax(x.float() * scale, dim=-1)
    if calls[seen] == 2 and y.numel():  # a NaN on its second call with the same inputs only
        y.view(-1)[0] = float("nan")
    return y


fuzz.fuzz_kernel(
    "flaky_softmax",
    family="softmax",
    kernel=softmax,
    capabilities=fuzz.Capabilities(dtypes=("float32",), features={"scale"}),
    conventions=fuzz.Conventions(empty_rows="nan"),
)
"""


def test_a_flaky_kernel_in_a_campaign_is_one_shrunk_finding(tmp_path):
    # A GPU campaign reported 14 "new" bugs (9 nondeterminism, 5 nan), none shrunk, then the
    # pair ended in a harness error (FlakyStrategyDefinition).
    plugin = tmp_path / "flaky.py"
    plugin.write_text(FLAKY_SOFTMAX)
    out = tmp_path / "out"
    args = ["--profile", "ci", "--plugin", str(plugin), "--backends", "triton-interpret"]
    args += ["--targets", "flaky_softmax", "--examples", "150", "--budget", "600", "--seed", "1"]
    proc = subprocess.run(
        [sys.executable, "-m", "fuzz", "run", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # a real target fails; no harness error
    assert proc.stderr.count("FOUND ") == 1, proc.stderr[-3000:]
    report = report_of(out)
    assert not report["summary"]["harness_errors"] and report["results"][0]["error"] is None
    (found,) = report["findings"]
    assert found["class"] == "nondeterminism" and found["shrunk"], found
    assert found["message"].startswith("flaky: the same example failed"), found["message"]
    assert found["case_size"] <= 2, found["case"]


# A bug its slice's hard limit left unshrunk --------------------------------------------------------


def test_a_bug_the_hard_limit_left_unshrunk_is_shrunk_in_the_time_given_past_it(
    fake_plugin, fake_profile, monkeypatch
):
    # Rows "not shrunk; maybe a bug found before" (2 of 52 in a GPU campaign): a slice whose hard
    # limit cut the shrinking of a bug sent it unshrunk, and the campaign could not tell whether
    # it was a bug shrunk elsewhere. Time here is virtual (each launch 10 ms): at the bug's first
    # sight it jumps past the hard limit, which ends the shrinking at its next step.
    import types

    from fuzz import engine, shrink
    from fuzz.target import get

    clock = types.SimpleNamespace(now=0.0)
    virtual = types.SimpleNamespace(perf_counter=lambda: clock.now)
    for module in (engine, shrink):
        monkeypatch.setattr(module, "time", virtual)
    base = get("fake_double_nan")
    run = base.kernels["fake"]

    def kernel(inputs, params, *, out, interpret):
        clock.now += 0.01
        return run(inputs, params, out=out, interpret=interpret)

    def on_found(result, found):
        if not found.final:
            clock.now += 1000.0

    result = engine.hunt(
        dataclasses.replace(base, kernels={"fake": kernel}),
        "fake",
        fake_profile,
        seed=1,
        database=None,
        hard_limit=100.0,
        hooks=engine.Hooks(on_found=on_found),
    )
    assert result.stopped == "hard-limit"
    (found,) = result.found.values()
    assert found.final and found.case.inputs["x"].shape == (2, 1), found.case
    assert found.shrink_notes[-1].startswith("the slice's hard limit cut its shrinking; shrunk")


def test_a_slice_killed_past_its_hard_limit_says_where_its_worker_was():
    """A worker killed for overrunning its slice's hard limit is asked for its stacks first
    (as for a hang): the note names the harness frames the main thread was in, innermost first,
    by module (no machine's path), so that a killed slice says what was too slow."""
    from fuzz.campaign.faults import where_stuck

    log = (
        "earlier output\n"
        "Thread 0x00007f01 (most recent call first):\n"
        '  File "/srv/x/lib/python3.12/threading.py", line 331 in wait\n'
        '  File "/srv/x/src/fuzz/campaign/threads.py", line 20 in run\n'
        "\n"
        "Current thread 0x00007f02 (most recent call first):\n"
        '  File "/srv/x/site-packages/triton/runtime/interpreter.py", line 900 in __call__\n'
        '  File "/srv/x/src/kernels/attention/triton.py", line 88 in _attn_fwd\n'
        '  File "/srv/x/src/fuzz/origin.py", line 115 in trace_finding\n'
        '  File "/srv/x/src/fuzz/origin.py", line 160 in of_finding\n'
        '  File "/srv/x/src/fuzz/campaign/worker.py", line 455 in summary\n'
        "\n"
    )
    assert where_stuck(log) == (
        "kernels.attention.triton:88 (_attn_fwd) < fuzz.origin:115 (trace_finding) < "
        "fuzz.origin:160 (of_finding)"
    )
    assert where_stuck("no dump here") == ""


def test_a_worker_that_lost_its_cuda_context_in_a_slice_takes_no_other(monkeypatch):
    """A sticky CUDA error met where no streamed finding ends the worker (a replay while
    shrinking another bug, a compile worker's warm-up) leaves the process unable to launch: the
    worker sends its slice's summary and exits with EXIT_CONTEXT_LOST, for a fresh process. On an
    H200 a compile worker whose fla backward warm-up hit an illegal address warmed up two more
    pairs, each a harness error ("this process lost its CUDA context earlier")."""
    from fuzz import engine
    from fuzz.campaign import database, worker
    from fuzz.campaign import messages as M
    from fuzz.campaign.process import EXIT_CONTEXT_LOST

    class Exited(Exception):
        pass

    def exit_worker(code):
        raise Exited(code)

    ran = []

    def hunt(conn, config, db, started, plan, maps=None):
        ran.append(plan)
        engine._context_lost.append("fake on fake: CUDA error: an illegal memory access")

    class Conn:
        def __init__(self, messages):
            self.messages, self.sent = list(messages), []

        def recv(self):
            return self.messages.pop(0)

        def send(self, msg):
            self.sent.append(msg)

    for name, value in {
        "die_with_campaign": lambda pid: None,
        "_setup": lambda config: None,
        "_pause_clock_while_compiling": lambda started: None,
        "_hunt": hunt,
        "exit_worker": exit_worker,
    }.items():
        monkeypatch.setattr(worker, name, value)
    monkeypatch.setattr(database, "open_database", lambda *a, **k: None)
    config = dataclasses.make_dataclass("C", ["parent_pid", "db", "db_shared", "db_fallback"])
    conn = Conn([M.Hunt(plan="first"), M.Hunt(plan="second"), M.Stop()])
    with pytest.raises(Exited) as info:
        worker.worker_main(conn, config(1, None, None, None), started=None)
    assert info.value.args == (EXIT_CONTEXT_LOST,)
    assert ran == ["first"]  # the second slice goes to a fresh process
    assert engine.context_lost() == "fake on fake: CUDA error: an illegal memory access"


def test_hypothesis_prints_a_case_as_its_short_repr_never_its_arrays():
    """Hypothesis prints a failing example's arguments on its final replay, through the call
    that built each (``st.builds``, ``.map``) with every argument in full: a GPU campaign's
    worker formatted a case of 196,608 elements that way until its slice's hard limit killed it
    (faulthandler: ``numpy/_core/arrayprint.py`` under ``hypothesis/vendor/pretty.py``). A case
    prints as its own short repr, however it was built."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from hypothesis.vendor.pretty import pretty

    from fuzz.case import Case

    np = pytest.importorskip("numpy")
    big = np.arange(4 * 8 * 64 * 24, dtype=np.float32).reshape(4, 8, 64, 24)
    printed = []

    @settings(max_examples=1, database=None)
    @given(case=st.builds(Case, st.just({"x": big}), st.just({"dtype": "float32"})))
    def test(case):
        printed.append(pretty(case))

    test()
    assert printed == ["Case(x=f32[4,8,64,24], dtype='float32')"]


def test_a_slices_summary_checks_nothing_again_once_its_time_is_spent(monkeypatch):
    """A slice's summary plots each finding that has no picture yet (the best example so far of
    a bug whose shrinking was cut: its case checked again) and traces a NaN's origin: both run
    the kernel again, outside any example. Past the slice's hard limit and the time given to
    settle its bugs, a large case doing so on a GPU is how a slice is killed with what it found;
    the summary then writes what it has, unplotted and untraced."""
    import time

    import numpy as np

    from fuzz import origin
    from fuzz.campaign import slice_run
    from fuzz.case import Case
    from fuzz.failures import Finding
    from fuzz.results import Found, HuntResult

    run = object.__new__(slice_run.SliceRun)
    run.target, run.backend = SimpleNamespace(name="t"), SimpleNamespace(name="b", interpret=False)
    run.config = SimpleNamespace(options=SimpleNamespace(interpreter_max_cost=16.0))
    run.try_reproducer = lambda f: None
    checked = []
    monkeypatch.setattr(slice_run, "_plots", lambda *a: checked.append("plot") or [{"p": 1}])
    monkeypatch.setattr(origin, "of_finding", lambda *a, **k: checked.append(k["seconds"]))
    result = HuntResult("t", "b", None, None)
    case = Case({"x": np.zeros((2, 2), np.float32)}, {"dtype": "float32"})
    result.found["nan"] = Found(Finding("nan", "oracle", "m"), case, {}, 1, 0.1)
    run.t0, run.hard_limit = time.perf_counter() - 1000.0, 10.0  # long past it
    summary = run.summary(result)
    assert checked == [0.0] and summary["found"][0]["plots"] == []  # (a trace of 0 s: none)
    checked.clear()
    run.t0 = time.perf_counter()  # in time
    summary = run.summary(result)
    assert checked[0] == "plot" and 0 < checked[1] <= origin.TRACE_SECONDS


def test_a_worker_stopped_when_the_campaigns_time_ran_out_is_not_said_to_be_out_of_memory():
    """A slice still running past the campaign's end (its shrinking would not end) is stopped
    with SIGKILL; the console said "worker 0 was killed by SIGKILL (out of memory? the kernel's
    OOM killer sends SIGKILL)" for it (a 300 s CPU campaign of the planted round 3). A death by
    SIGKILL the campaign did not send still says what it may be."""
    from fuzz.campaign.process import exit_text

    assert exit_text(-9, "budget") == (
        "was stopped: the campaign's time ran out while its slice still ran"
    )
    assert "out of memory?" in exit_text(-9, None)


# A worker whose process ended after its last slice -------------------------------------------------


def test_a_slice_sent_to_a_worker_whose_process_has_ended_is_taken_back(tmp_path, monkeypatch):
    """On an H200 a worker's process ended after it had sent its slice's summary (its CUDA
    context lost), the campaign sent it its next slice before it saw the end, and the send's
    ``BrokenPipeError`` ended the campaign: no final report, nothing more fuzzed. A send that
    finds the pipe closed takes the slice back (nothing booked: no crash of the pair it was
    for), and the end is an idle worker's: replaced, the campaign goes on to its examples."""
    from fuzz.campaign import pool as pool_module
    from fuzz.campaign.config import CampaignConfig
    from fuzz.campaign.messages import Hunt
    from fuzz.campaign.runner import Campaign
    from fuzz.profiles import Profile
    from fuzz.target import get, load_plugin

    load_plugin(FAKE)
    sent = pool_module.ProcessPool.send
    hunts = []

    def send(self, w, message):
        if isinstance(message, Hunt):
            hunts.append(message.plan.target)
            if len(hunts) == 2:  # the process ends before this slice reaches it
                w.process.kill()
                w.process.join(5)
        return sent(self, w, message)

    monkeypatch.setattr(pool_module.ProcessPool, "send", send)
    lines = []
    config = CampaignConfig(
        targets=[get("fake_double"), get("fake_double_nan")],
        backends=["fake"],
        profile=Profile("ci", ("fake",), "small", False, "cpu", False, 60),
        budget=900,  # a safety net: the campaign ends at its examples
        examples=300,
        out=tmp_path / "out",
        repro_dir=tmp_path / "out" / "reproducers",
        db=None,
        plugins=[FAKE],
        seed=3,
        workers=1,
    )
    report = Campaign(config, log=lines.append).run()
    assert len(hunts) > 2 and hunts[1] == "fake_double_nan", hunts
    assert report["complete"] and not report["errors"], report["errors"]
    rows = {r["target"]: r for r in report["results"]}
    assert rows["fake_double"]["findings"] == [], rows["fake_double"]["findings"]
    assert [f["class"] for f in rows["fake_double_nan"]["findings"]] == ["nan"]
    assert all(r["examples"] >= 300 or r["retired"] for r in rows.values()), rows
    assert all(r["worker_deaths"] == 0 for r in rows.values()), rows
