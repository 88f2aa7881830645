"""``python -m fuzz``: list, run (report, reproducers, exit status), replay."""

import json
import os
import subprocess
import sys

import pytest

FAKE = os.path.join(os.path.dirname(__file__), "fake_targets.py")


def fuzz_cli(*args, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "fuzz", *args], capture_output=True, text=True, timeout=timeout
    )


def test_list_shows_targets_and_backend_availability():
    proc = fuzz_cli("list", "--plugin", FAKE)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "softmax_mutant_no_rowmax" in out and "fake_double_oob" in out
    assert "triton-interpret" in out and "pallas-interpret" in out
    assert "no: torch sees no CUDA device" in out or "yes" in out


def test_run_writes_report_and_reproducers_and_fails_on_a_real_target(tmp_path):
    out = tmp_path / "out"
    proc = fuzz_cli("run", "--profile", "ci", "--plugin", FAKE, "--targets", "fake_double,fake_double_nan,fake_double_oob",
                    "--backends", "fake", "--mutants", "--budget", "4", "--out", str(out), "--seed", "3")  # fmt: skip
    # Only mutants fail: exit 0.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["complete"] and report["summary"]["mutants_found"] == 2
    rows = {r["target"]: r for r in report["results"]}
    assert rows["fake_double"]["status"] == "pass" and rows["fake_double"]["examples"] > 0
    nan = rows["fake_double_nan"]
    assert nan["mutant"] and nan["expected_class"] == "nan" and nan["status"] == "found"
    finding = nan["findings"][0]
    assert finding["class"] == "nan" and finding["where"] == "y[1, 0]"
    assert os.path.exists(finding["reproducer"])
    # Replaying the reproducer folder: they all still fail -> exit 1.
    proc = fuzz_cli("replay", "--plugin", FAKE, str(out / "reproducers"))
    assert proc.returncode == 1 and "FAIL nan" in proc.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--budget", "-3", "--out", "x"], "--budget='-3' must be > 0 seconds"),
        (["run", "--budget", "soon", "--out", "x"], "--budget='soon' must be a number of seconds"),
        (
            ["run", "--targets", "nothing*", "--out", "{tmp}/new"],
            "--targets='nothing*' matches no target",
        ),
        (["run", "--profile", "warp", "--out", "{tmp}"], "profile='warp' is unknown"),
        (
            ["run", "--backends", "cuda-only", "--out", "{tmp}/new"],
            "--backends='cuda-only' matches no backend",
        ),
        (["mutants", "--backends", "nope"], "--backends='nope' matches no backend"),
        (["run", "--workers", "0", "--out", "{tmp}"], "argument --workers: 0 must be >= 1"),
        (["run", "--out", "{file}"], "--out='{file}' is a file; it must name a folder"),
        (["run", "--out", "{file}/sub"], "--out='{file}/sub' cannot be created: {file} is a file"),
        (["run", "--out", "{tmp}", "--repro-dir", "{file}"], "--repro-dir='{file}' is a file"),
        (["run", "--out", "{tmp}/new", "--plugin", "{syntax}"], "--plugin='{syntax}' failed to "
         "import: SyntaxError: invalid syntax"),
        (["run", "--out", "{tmp}/new", "--plugin", "{raises}"], "--plugin='{raises}' failed to "
         "import: SystemExit: exit from a plugin"),
        (["list", "--plugin", "{syntax}"], "failed to import: SyntaxError: invalid syntax"),
        (["list", "--plugin", "no/such/file.py"], "--plugin='no/such/file.py': no such file"),
        (["replay", "no-such-path"], "'no-such-path' is neither a file nor a folder"),
        (["replay", "{file}", "/no/such/file.py"], "'/no/such/file.py' is neither a file nor"),
    ],
)  # fmt: skip
def test_bad_arguments_get_clear_errors(tmp_path, args, message):
    # Usage errors: one line naming the argument, exit status 2 (never 1, which means a real
    # target or a reproducer fails), before any work starts.
    files = {"{file}": tmp_path / "a-file", "{syntax}": tmp_path / "syntax_error.py",
             "{raises}": tmp_path / "raises.py"}  # fmt: skip
    files["{file}"].write_text("not a folder\n")
    files["{syntax}"].write_text("def broken(:\n")
    files["{raises}"].write_text("import sys\nsys.exit('exit from a plugin')\n")

    def fill(text):
        for key, path in {**files, "{tmp}": tmp_path}.items():
            text = text.replace(key, str(path))
        return text

    proc = fuzz_cli(*map(fill, args))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert fill(message) in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "new").exists()  # nothing was started, nothing created


@pytest.mark.parametrize(
    "argv, message",
    [(["--procs", "0"], "argument --procs: 0 must be >= 1"),
     (["--examples", "x"], "argument --examples: 'x' is not an integer >= 1")],
)  # fmt: skip
def test_bench_rejects_bad_counts_naming_the_option(argv, message, capsys):
    from fuzz.bench import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
