"""The mutant scoreboard: the harness against randn trials and a fixed grid, on the same mutants."""

import dataclasses
import json
import signal
import subprocess
import sys
from pathlib import Path

from fuzz import reproducer
from fuzz.profiles import get_profile
from fuzz.scoreboard import run_scoreboard, summary_lines, table_rows, write_scoreboard
from fuzz.target import get

FAKE = str(Path(__file__).parent / "fake_targets.py")


def test_scale_twice_is_missed_by_randn_and_found_by_the_harness_and_the_grid(tmp_path):
    mutant = get("softmax_mutant_scale_twice")
    grid = mutant.baselines.grid
    # The fp32 third of the grid keeps the test quick; the other dtypes repeat the same shapes.
    # The harness stops at the mutant's class (an event); the budget is only a safety net (the
    # first failure takes about 1 s on an idle machine, 15 s on a loaded one).
    fp32 = dataclasses.replace(
        mutant.baselines, grid=lambda s: [c for c in grid(s) if c.params["dtype"] == "float32"]
    )
    mutant = dataclasses.replace(mutant, baselines=fp32)
    board = run_scoreboard([mutant], ["triton-interpret"], get_profile("ci"), budget=600, seed=0)
    (row,) = board["rows"]
    h = row["harness"]
    assert h["found"] and h["expected"] and h["class"] == "accuracy"
    assert h["examples_to_first"] >= 1 and h["reproducer_size"] <= 2 and h["shrink_seconds"] >= 0
    # KernelBench-style trials use no scale: a scale applied twice is invisible to them.
    assert row["randn"]["cases"] == 5 and not row["randn"]["found"]
    # The Triton-tutorial-style grid scales its masked cases: it sees the bug.
    assert row["grid"]["found"] and row["grid"]["class"] == "accuracy"
    assert row["grid"]["run"] == row["grid"]["cases"] > 5  # no limit: every case
    s = board["summary"]
    assert s["harness"]["rate"] == 1.0 and s["randn"]["rate"] == 0.0 and s["grid"]["rate"] == 1.0
    assert table_rows(board)[0][:4] == [
        "softmax_mutant_scale_twice",
        "triton-interpret",
        "yes",
        "accuracy",
    ]
    assert any(line.startswith("harness      detected 1/1 (100%)") for line in summary_lines(board))
    write_scoreboard(tmp_path, board)
    assert (
        "| softmax_mutant_scale_twice | triton-interpret | yes | accuracy |"
        in (tmp_path / "scoreboard.md").read_text()
    )


def test_cli_scoreboard_shows_na_for_targets_without_baselines(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fuzz",
            "mutants",
            "--plugin",
            FAKE,
            "--targets",
            "fake_double_nan",
            "--backends",
            "fake",
            "--budget",
            "600",  # each row stops at its mutant's class: a safety net
            "--profile",
            "ci",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "fake_double_nan" in proc.stdout and "n/a" in proc.stdout
    assert "harness      detected 1/1 (100%)" in proc.stdout
    assert "randn x5     n/a" in proc.stdout
    # The minimal example whose size the row reports is saved as its reproducer.
    (row,) = json.loads((tmp_path / "scoreboard.json").read_text())["rows"]
    meta, _ = reproducer.load(row["harness"]["reproducer"])
    assert meta["target"] == "fake_double_nan" and meta["class"] == "nan"
    assert Path(row["harness"]["reproducer"]).parent == tmp_path / "reproducers"


def _scoreboard_until_first_row(out_dir, stdout) -> tuple[subprocess.Popen, str]:
    """Starts the fake family's scoreboard; returns it and the first mutant whose row is done
    (each row is logged as soon as it is complete)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fuzz",
            "mutants",
            "--plugin",
            FAKE,
            "--targets",
            "fake_double_*",
            "--backends",
            "fake",
            "--budget",
            "30",
            "--profile",
            "ci",
            "--out",
            str(out_dir),
        ],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("done "):
            return proc, line.split()[1]
    return proc, ""


def test_sigterm_ends_the_scoreboard_with_the_rows_so_far(tmp_path):
    """A scoreboard stopped by its time limit (SIGTERM) still prints and writes what it ran."""
    proc, finished = _scoreboard_until_first_row(tmp_path, subprocess.PIPE)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, err  # interrupted (README: exit status 2)
    assert finished and "interrupted" in out and finished in out
    board = json.loads((tmp_path / "scoreboard.json").read_text())
    assert board["interrupted"] and board["rows"][0]["mutant"] == finished
    assert len(board["rows"]) < 11  # the fake family has eleven mutants: it stopped early


def test_a_scoreboard_killed_outright_leaves_its_finished_rows_written(tmp_path):
    """SIGKILL (a compile that ignored SIGTERM, then ``timeout -k``): the rows are on disk."""
    proc, finished = _scoreboard_until_first_row(tmp_path, subprocess.DEVNULL)
    proc.kill()
    proc.wait(timeout=60)
    board = json.loads((tmp_path / "scoreboard.json").read_text())
    assert board["interrupted"] and [r["mutant"] for r in board["rows"]][:1] == [finished]


def _slowed(target, impl: str, seconds: float):
    """``target`` whose ``impl`` kernel sleeps ``seconds`` per launch (a GPU's compiles, in
    miniature)."""
    import time

    fast = target.kernels[impl]

    def slow(inputs, params, *, out, interpret):
        time.sleep(seconds)
        return fast(inputs, params, out=out, interpret=interpret)

    return dataclasses.replace(target, kernels={impl: slow})


def test_a_row_shrinks_no_longer_than_its_shrink_limit():
    """On a GPU every shrink step may be a compile: the scoreboard bounds a row's shrinking so
    that one slow mutant does not take the whole run; the row says its shrinking was cut."""
    from fuzz.target import load_plugin

    load_plugin(FAKE)
    mutant = _slowed(get("fake_double_accuracy"), "fake", 0.05)
    board = run_scoreboard(
        [mutant], ["fake"], get_profile("ci"), budget=600, shrink_limit=0.5, seed=0
    )
    cut = board["rows"][0]["harness"]
    assert cut["found"] and cut["class"] == "accuracy" and cut["shrink_cut"]
    assert board["shrink_limit"] == 0.5 and "(cut)" in table_rows(board)[0][6]
    # Without a limit the same row shrinks on to the minimal example (1 row x 2 columns), which
    # takes longer. Hypothesis checks the limit between shrink steps: a step may run past it.
    board = run_scoreboard([mutant], ["fake"], get_profile("ci"), budget=600, seed=0)
    full = board["rows"][0]["harness"]
    assert not full["shrink_cut"] and full["reproducer_size"] == 2
    assert 0.5 <= cut["shrink_seconds"] < full["shrink_seconds"]
    assert cut["reproducer_size"] >= full["reproducer_size"]


def test_a_baseline_stops_at_its_limit_and_says_how_many_cases_ran():
    """A fixed grid on a GPU may compile a new variant per case: --baseline-limit bounds it."""
    from fuzz.scoreboard import run_baseline

    mutant = _slowed(get("softmax_mutant_scale_twice"), "triton", 0.1)
    cases = [c for c in mutant.baselines.grid("small") if c.params["dtype"] == "float32"]
    r = run_baseline(mutant, "triton-interpret", cases, get_profile("ci"), time_limit=0.5)
    # The limit is checked before each case; the case running at the limit completes (a busy
    # machine may take long over one case: the margin is wide).
    assert 1 <= r["run"] < len(cases) and r["seconds"] < 0.5 + 60
    board = {
        "rows": [
            {
                "mutant": "m",
                "backend": "b",
                "expected_class": "accuracy",
                "harness": {
                    "found": False,
                    "class": None,
                    "expected": False,
                    "examples_to_first": None,
                    "seconds_to_first": None,
                    "shrink_seconds": None,
                    "reproducer_size": None,
                },
                "randn": None,
                "grid": r,
            }
        ]
    }
    assert table_rows(board)[0][9].endswith(f"({r['run']}/{len(cases)} cases)")
