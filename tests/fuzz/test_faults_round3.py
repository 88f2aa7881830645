"""Reliability, round 3: no fault of the harness reaches a report (issue "no harness fault reaches
a report"): its own refusals inside a kernel's host callbacks, Hypothesis's own words on the
console, a flaky kernel, a stop after the campaign's end, records left undecided.

Campaigns here stop by example counts (``--examples``), never by a few seconds of budget: the
budgets are safety nets only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
