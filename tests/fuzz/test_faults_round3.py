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

