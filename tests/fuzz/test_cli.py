"""``python -m fuzz``: list, run (report, reproducers, exit status), replay."""

import json
import os
import subprocess
import sys

import pytest

from fuzz.backends import cuda_reason

FAKE = os.path.join(os.path.dirname(__file__), "fake_targets.py")


def fuzz_cli(*args, timeout=600, umask=None):
    return subprocess.run(
        [sys.executable, "-m", "fuzz", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=None if umask is None else lambda: os.umask(umask),
    )


def strict_json(text):
    """``json.loads`` that rejects NaN and Infinity, as JavaScript's JSON.parse and jq do."""

    def reject(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=reject)


def test_list_shows_targets_and_backend_availability():
    proc = fuzz_cli("list", "--plugin", FAKE)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "softmax_mutant_no_rowmax" in out and "fake_double_oob" in out
    assert "triton-interpret" in out and "pallas-interpret" in out
    assert "no: torch sees no CUDA device" in out or "yes" in out


def test_run_writes_report_and_reproducers_and_fails_on_a_real_target(tmp_path):
    out = tmp_path / "out"
    proc = fuzz_cli(
        "run",
        "--profile",
        "ci",
        "--plugin",
        FAKE,
        "--targets",
        "fake_double,fake_double_nan,fake_double_oob",
        "--backends",
        "fake",
        "--mutants",
        "--examples",
        "100",
        "--budget",
        "600",
        "--out",
        str(out),
        "--seed",
        "3",
        umask=0o022,
    )
    # Only mutants fail: exit 0.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = strict_json((out / "report.json").read_text())  # the NaN found is a string
    # Readable by a web server and teammates, as the umask says (they were 0600 whatever it was).
    for name in ("report.json", "report.md", "report.xml", "index.html"):
        assert (out / name).stat().st_mode & 0o777 == 0o644, name
    for script in (out / "reproducers").glob("*.py"):
        assert script.stat().st_mode & 0o777 == 0o755
    assert report["complete"] and report["summary"]["mutants_found"] == 2
    rows = {r["target"]: r for r in report["results"]}
    assert rows["fake_double"]["status"] == "pass" and rows["fake_double"]["examples"] > 0
    nan = rows["fake_double_nan"]
    assert nan["mutant"] and nan["expected_class"] == "nan" and nan["status"] == "found"
    finding = nan["findings"][0]
    assert finding["class"] == "nan" and finding["where"] == "y[1, 0]"
    assert finding["kernel_value"] == "nan"
    assert os.path.exists(finding["reproducer"])
    # Replaying the reproducer folder: they all still fail -> exit 1.
    proc = fuzz_cli("replay", "--plugin", FAKE, str(out / "reproducers"))
    assert proc.returncode == 1 and "FAIL nan" in proc.stdout


BAD_ARGUMENTS = [
    (["run", "--budget", "-3", "--out", "x"], "--budget='-3' must be > 0 seconds"),
    (["run", "--budget", "soon", "--out", "x"], "--budget='soon' must be a number of seconds"),
    (
        ["run", "--targets", "nothing*", "--out", "{tmp}/new"],
        "--targets='nothing*' matches no target (see python -m fuzz list)",
    ),
    (
        ["run", "--targets", "softmax_mutant_*", "--out", "{tmp}/new"],
        "--targets='softmax_mutant_*' matches no target but mutants (they run with --mutants: "
        "add --mutants)",
    ),
    (["run", "--profile", "warp", "--out", "{tmp}"], "profile='warp' is unknown"),
    (
        ["run", "--backends", "cuda-only", "--out", "{tmp}/new"],
        "--backends='cuda-only' matches no backend",
    ),
    (["mutants", "--backends", "nope"], "--backends='nope' matches no backend"),
    (["mutants", "--out", "{file}"], "--out='{file}' is a file; it must name a folder"),
    (["run", "--workers", "0", "--out", "{tmp}"], "argument --workers: 0 must be >= 1"),
    (["run", "--out", "{file}"], "--out='{file}' is a file; it must name a folder"),
    (["run", "--out", "{file}/sub"], "--out='{file}/sub' cannot be created: {file} is a file"),
    (["run", "--out", "{tmp}", "--repro-dir", "{file}"], "--repro-dir='{file}' is a file"),
    (
        ["run", "--out", "{tmp}/new", "--plugin", "{syntax}"],
        "--plugin='{syntax}' failed to import: SyntaxError: invalid syntax",
    ),
    (
        ["run", "--out", "{tmp}/new", "--plugin", "{raises}"],
        "--plugin='{raises}' failed to import: SystemExit: exit from a plugin",
    ),
    (["list", "--plugin", "no/such/file.py"], "--plugin='no/such/file.py': no such file"),
    (["replay", "no-such-path"], "'no-such-path' is neither a file nor a folder"),
    (["replay", "{file}", "/no/such/file.py"], "'/no/such/file.py' is neither a file nor"),
    # A GPU profile on a machine without CUDA: one line naming the option, not a harness error
    # in every pair (its oracles run on the GPU). Where CUDA is, the profile runs.
    *(
        [
            (
                ["run", "--profile", "gpu", "--out", "{tmp}/new"],
                "the 'gpu' profile runs the compiled backends triton, pallas-gpu and needs a CUDA "
                "GPU",
            ),
            (["mutants", "--profile", "nightly"], "Use --profile=ci (CPU interpreters) here"),
        ]
        if cuda_reason() is not None
        else []
    ),
]


@pytest.fixture(scope="module")
def bad_argument_runs(tmp_path_factory, cli_batch):
    """Every command line of ``BAD_ARGUMENTS``, each with a folder of its own, run in one
    process (``cli_batch``): ``(folder, result)`` per case."""
    folders, argvs = [], []
    for args, _message in BAD_ARGUMENTS:
        folder = tmp_path_factory.mktemp("bad-arguments")
        fill = _bad_argument_files(folder)
        folders.append((folder, fill))
        argvs.append([fill(a) for a in args])
    results = cli_batch(argvs, tmp_path_factory.mktemp("bad-arguments-batch"))
    return list(zip(folders, results, strict=True))


def _bad_argument_files(tmp_path):
    files = {
        "{file}": tmp_path / "a-file",
        "{syntax}": tmp_path / "syntax_error.py",
        "{raises}": tmp_path / "raises.py",
    }
    files["{file}"].write_text("not a folder\n")
    files["{syntax}"].write_text("def broken(:\n")
    files["{raises}"].write_text("import sys\nsys.exit('exit from a plugin')\n")

    def fill(text):
        for key, path in {**files, "{tmp}": tmp_path}.items():
            text = text.replace(key, str(path))
        return text

    return fill


@pytest.mark.parametrize("args, message", BAD_ARGUMENTS)
def test_bad_arguments_get_clear_errors(bad_argument_runs, args, message):
    # Usage errors: one line naming the argument, exit status 2 (never 1, which means a real
    # target or a reproducer fails), before any work starts. The command lines run in one
    # process, each through the entry point `python -m fuzz` calls (fuzz.cli.main).
    (tmp_path, fill), proc = bad_argument_runs[BAD_ARGUMENTS.index((args, message))]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert fill(message) in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "new").exists()  # nothing was started, nothing created


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--procs", "0"], "argument --procs: 0 must be >= 1"),
        (["--examples", "x"], "argument --examples: 'x' is not an integer >= 1"),
    ],
)
def test_bench_rejects_bad_counts_naming_the_option(argv, message, capsys):
    from fuzz.bench import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_replay_gives_every_file_its_own_verdict(fake_plugin, fake_profile, tmp_path):
    # A broken file (a field missing, not a reproducer, not text, a folder named x.py) gets its own
    # "cannot replay"; the good files after it still replay; the exit status summarises all.
    from fuzz.engine import hunt
    from fuzz.target import get

    folder = tmp_path / "repros"
    nan = hunt(get("fake_double_nan"), "fake", fake_profile, repro_dir=folder).found["nan"]
    text = nan.reproducer.read_text()
    (folder / "a_missing_field.py").write_text(text.replace("'target': ", "'tar': "))
    (folder / "b_not_a_reproducer.py").write_text("print('hello')\n")
    (folder / "c_binary.py").write_bytes(b"\xff\xfe\x00 not text")
    (folder / "d_folder.py").mkdir()
    proc = fuzz_cli("replay", "--plugin", FAKE, str(folder))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # one still fails
    out = proc.stdout
    assert out.count("== ") == 4 and "Traceback" not in proc.stderr
    assert "a_missing_field.py: cannot replay: ValueError:" in out and "lacks 'target'" in out
    assert "b_not_a_reproducer.py: cannot replay" in out and "c_binary.py: cannot replay" in out
    assert "fake_double_nan on fake: FAIL nan" in out
    assert "replayed 4 of 4 file(s): 1 still fail, 0 pass, 3 without a verdict" in out
    nan.reproducer.unlink()  # only broken files left: not clean, not failing
    proc = fuzz_cli("replay", "--plugin", FAKE, "--jobs", "2", str(folder))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout.count("cannot replay") == 3


SLEEPER = """
import dataclasses, time
from pathlib import Path
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})

def sleeps(inputs, params, *, out, interpret):
    Path({started!r}).write_text("started")  # the test waits for this, not for a guess
    time.sleep(600)

register(dataclasses.replace(get("fake_double"), name="fake_sleeps", source="builtin",
                             kernels={{"fake": sleeps}}))
"""


def test_sigterm_to_a_replays_process_group_is_interrupted_not_a_verdict(tmp_path):
    import signal
    import time

    import numpy as np

    from fuzz import reproducer
    from fuzz.case import Case
    from fuzz.failures import Finding
    from fuzz.target import get, load_plugin

    plugin = tmp_path / "sleeper.py"
    started = tmp_path / "started"
    plugin.write_text(SLEEPER.format(fake=FAKE, started=str(started)))
    load_plugin(str(plugin))
    path = reproducer.write(
        tmp_path,
        target=get("fake_sleeps"),
        backend="fake",
        params={},
        ref_device="cpu",
        case=Case({"x": np.ones((1, 2), np.float32)}, {"dtype": "float32"}, {}),
        finding=Finding("hang", "timeout", "an example did not finish"),
        differential=False,
        isolate=True,
        timeout=300.0,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "fuzz", "replay", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while not started.exists():  # the child replay has started its kernel
        assert time.time() < deadline and proc.poll() is None, "the replay did not start"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    assert "interrupted" in out and "FAIL" not in out and "PASS" not in out, out


@pytest.mark.parametrize(
    "umask, text_mode, script_mode", [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)]
)
def test_written_files_get_the_mode_the_umask_gives(tmp_path, umask, text_mode, script_mode):
    from fuzz.campaign.report_files import write_json
    from fuzz.files import atomic_write_text

    old = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "a.md", "text\n")
        atomic_write_text(tmp_path / "r.py", "print()\n", executable=True)
        write_json(tmp_path / "r.json", {"x": [float("nan"), float("-inf"), 1.5]})
    finally:
        os.umask(old)
    assert (tmp_path / "a.md").stat().st_mode & 0o777 == text_mode
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == text_mode
    assert (tmp_path / "r.py").stat().st_mode & 0o777 == script_mode
    assert strict_json((tmp_path / "r.json").read_text()) == {"x": ["nan", "-inf", 1.5]}
