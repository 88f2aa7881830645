"""Reproducer scripts: standalone, exit 1 while failing and 0 once fixed, replayable elsewhere."""

import dataclasses
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from fuzz import reproducer
from fuzz.case import Case
from fuzz.engine import hunt
from fuzz.target import get

FAKE = os.path.join(os.path.dirname(__file__), "fake_targets.py")


def run_script(path, *args):
    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=300
    )


def test_arrays_round_trip_without_pickle():
    arrays = {
        "x": np.arange(6, dtype=np.float32).reshape(2, 3),
        "b": np.array([1.5, -np.inf], ml_dtypes.bfloat16),
        "h": np.array([[np.nan]], np.float16),
        "m": np.array([True, False]),
    }
    data, dtypes = reproducer.encode_arrays(arrays)
    back = reproducer.decode_arrays(data, dtypes)
    for k, a in arrays.items():
        assert back[k].dtype == a.dtype and back[k].shape == a.shape
        assert np.array_equal(back[k].view(np.uint8), a.view(np.uint8))


def test_large_data_is_cut_into_lines_without_textwrap(monkeypatch):
    """A large case's data (MBs of base64, one word) is cut in linear time: textwrap took 34 s
    for 4 MB, and a GPU campaign's slices were killed while writing such reproducers."""
    import textwrap

    text = reproducer.encode_arrays({"x": np.random.default_rng(0).random(3000)})[0]
    assert reproducer._lines(text, 100).split("\n") == textwrap.wrap(text, 100)
    assert "".join(reproducer._lines(text, 100).split()) == text

    def refuse(text, *args, **kwargs):
        if len(text) > 10_000:
            raise AssertionError("textwrap on a long text (quadratic time)")
        return real(text, *args, **kwargs)

    real = textwrap.wrap
    monkeypatch.setattr(textwrap, "wrap", refuse)
    monkeypatch.setattr(textwrap, "fill", lambda text, *a, **k: "\n".join(refuse(text, *a, **k)))
    big = reproducer.encode_arrays({"x": np.random.default_rng(1).random(200_000)})[0]
    assert len(big) > 10**6
    lines = reproducer._lines(big, 100).split("\n")
    assert len(lines) == -(-len(big) // 100) and "".join(lines) == big


def test_script_reproduces_and_names_the_failure(fake_plugin, fake_profile, tmp_path):
    result = hunt(get("fake_double_nan"), "fake", fake_profile, repro_dir=tmp_path)
    path = result.found["nan"].reproducer
    text = path.read_text()
    assert "pickle" not in text and "REPRO = " in text and "DATA = " in text
    proc = run_script(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL nan (same class as recorded)" in proc.stdout
    assert "y[1, 0]" in proc.stdout


def test_replay_passes_once_fixed(fake_plugin, fake_profile, tmp_path):
    result = hunt(get("fake_double_accuracy"), "fake", fake_profile, repro_dir=tmp_path)
    meta, data = reproducer.load(result.found["accuracy"].reproducer)
    meta = {**meta, "target": "fake_double"}  # the same case against the fixed kernel
    assert reproducer.replay(meta, data).finding is None
    assert reproducer.report_replay(meta, data) == 0


def test_replay_on_another_backend(fake_plugin, fake_profile, tmp_path):
    result = hunt(get("fake_double_nan"), "fake", fake_profile, repro_dir=tmp_path)
    proc = run_script(result.found["nan"].reproducer, "--backend", "fake-compiled")
    assert proc.returncode == 1 and "on fake-compiled: FAIL nan" in proc.stdout


def test_replay_on_an_unavailable_backend_says_why(fake_plugin, fake_profile, tmp_path):
    result = hunt(get("fake_double_nan"), "fake", fake_profile, repro_dir=tmp_path)
    meta, data = reproducer.load(result.found["nan"].reproducer)
    code = reproducer.report_replay(meta, data, backend="no-such-backend")
    assert code == 2


def test_softmax_reproducer_runs_as_a_script(tmp_path):
    from fuzz.profiles import get_profile

    result = hunt(
        get("softmax_mutant_masked_row_nan"),
        "triton-interpret",
        get_profile("ci"),
        repro_dir=tmp_path,
    )
    path = result.found["nan"].reproducer
    proc = run_script(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL nan" in proc.stdout and "row-without-valid-key" in proc.stdout
    # A bug seen on one backend, replayed on the other kernel language's interpreter.
    proc = run_script(path, "--backend", "pallas-interpret", "--quiet")
    assert proc.returncode == 1 and "pallas-interpret: FAIL nan" in proc.stdout


def test_load_rejects_other_files(tmp_path):
    p = tmp_path / "x.py"
    p.write_text("print('hello')\n")
    with pytest.raises(ValueError, match="not a reproducer"):
        reproducer.load(p)


def test_a_race_is_replayed_several_times_before_it_counts_as_fixed(monkeypatch):
    from types import SimpleNamespace

    from fuzz import reproducer

    calls = []

    def once(meta, data, *, backend=None, path=None):
        calls.append(meta["class"])
        failing = meta["class"] == "nondeterminism" and len(calls) == 3  # the race shows once
        return SimpleNamespace(finding=object() if failing else None)

    monkeypatch.setattr(reproducer, "_replay_once", once)
    assert reproducer.replay({"class": "nondeterminism"}, "").finding is not None
    assert len(calls) == 3  # stopped at the first failing replay
    calls.clear()
    assert reproducer.replay({"class": "accuracy"}, "").finding is None
    assert calls == ["accuracy"]  # a deterministic failure: one replay decides
    calls.clear()
    assert reproducer.replay({"class": "nondeterminism"}, "", attempts=2).finding is None
    assert len(calls) == 2
    assert reproducer.replay_attempts({"class": "nondeterminism"}) == reproducer.RACE_ATTEMPTS


def test_replay_reports_the_recorded_class_when_another_failure_shows_first(fake_plugin):
    # A kernel with a race and an accuracy bug (the jagged seed on a GPU): its accuracy
    # reproducer may meet the race first; the replay still says whether the accuracy bug is there.
    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.properties import check_case

    case = Case({"x": np.arange(12, dtype=np.float32).reshape(3, 4)}, {"dtype": "float32"}, {})
    target, backend = get("fake_double_nondeterminism"), get_backend("fake")
    assert check_case(target, backend, case).finding.cls == "nondeterminism"
    assert check_case(target, backend, case, prefer="accuracy").finding.cls == "accuracy"
    # No accuracy failure to prefer: the first failure is still reported.
    assert check_case(target, backend, case, prefer="masking").finding.cls == "nondeterminism"
    data, dtypes = reproducer.encode_arrays(case.inputs)
    meta = {
        "format": reproducer.FORMAT,
        "target": "fake_double_nondeterminism",
        "backend": "fake",
        "class": "accuracy",
        "params": case.params,
        "dtypes": dtypes,
    }
    assert reproducer.replay(meta, data).finding.cls == "accuracy"


def test_a_crash_that_loses_the_cuda_context_replays_in_a_child_and_so_do_the_ones_after(
    fake_plugin, fake_profile, tmp_path, monkeypatch
):
    # On a GPU, a wild store raises "illegal memory access" in-process; every later launch in
    # that process fails the same way, so such reproducers (and any replayed after one) run in
    # a child process.
    from fuzz import cli

    unshrunk = dataclasses.replace(fake_profile, shrink_seconds=0.0)  # (no child shrinking it)
    crash = hunt(get("fake_double_context"), "fake", unshrunk, repro_dir=tmp_path / "a")
    nan = hunt(get("fake_double_nan"), "fake", fake_profile, repro_dir=tmp_path / "b")
    crash_path, nan_path = crash.found["crash"].reproducer, nan.found["nan"].reproducer
    assert reproducer.load(crash_path)[0]["isolate"] is True  # "illegal memory access"
    assert reproducer.load(nan_path)[0]["isolate"] is False
    calls = []

    def fake_report(meta, data, *, backend=None, path=None, isolate=False, **kw):
        calls.append((meta["target"], isolate))
        if meta["target"] == "fake_double_nan":  # pretend this replay lost the context
            print(
                "fake_double_nan on fake: FAIL crash (recorded nan)\n  CUDA error: an illegal memory access"
            )
        return 1

    monkeypatch.setattr(reproducer, "report_replay", fake_report)
    args = cli._parser().parse_args(["replay", str(nan_path), str(crash_path), str(nan_path)])
    assert cli.cmd_replay(args) == 1
    assert calls == [
        ("fake_double_nan", False),
        ("fake_double_context", True),
        ("fake_double_nan", True),
    ]


def _crash_reproducer(tmp_path, target="fake_double_crash"):
    """A crash reproducer recorded as killing its process (so it replays in a child), of a case
    that raises in the fake kernel (4 columns)."""
    from fuzz.failures import Finding

    case = Case({"x": np.ones((1, 4), np.float32)}, {"dtype": "float32"}, {})
    return reproducer.write(
        tmp_path,
        target=get(target),
        backend="fake",
        case=case,
        params={},
        finding=Finding("crash", "process", "the worker was killed by SIGSEGV"),
        ref_device="cpu",
        differential=False,
        isolate=True,
        timeout=5.0,
    )


CHILD_ONLY_IMPORT_ERROR = """
import dataclasses, os
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
if os.environ.get("KERNEL_FUZZ_REPLAY_MARKER"):
    raise ImportError("a module only the child replay lacks (injected fault)")
register(dataclasses.replace(get("fake_double_crash"), name="fake_child_only", source="builtin"))
"""


def test_what_cannot_replay_in_a_child_is_cannot_replay_not_a_crash(fake_plugin, tmp_path, capsys):
    # A crash/hang reproducer replays in a child process; a replay that cannot even start (a
    # backend not available, data that does not decode, an unknown target, a plugin that does not
    # import there) is "cannot replay", exit 2 -- never "FAIL crash", which means the bug is there.
    from fuzz.target import load_plugin

    path = _crash_reproducer(tmp_path)
    meta, data = reproducer.load(path)
    assert meta["isolate"]
    cases = [
        ({}, "triton", "cannot replay"),
        ({}, "no-such-backend", "backend='no-such-backend' is unknown"),
        ({"target": "no_such_target"}, None, "target='no_such_target' is not registered"),
        ({"dtypes": {"x": "float32", "y": "float32"}}, None, "its DATA does not decode"),
    ]
    for change, backend, said in cases:
        assert reproducer.report_replay({**meta, **change}, data, backend=backend, path=path) == 2
        out = capsys.readouterr().out
        assert said in out and "FAIL" not in out, out
    assert reproducer.report_replay(meta, data[: len(data) // 2], path=path) == 2  # cut short
    assert "cannot replay" in capsys.readouterr().out
    plugin = tmp_path / "child_only.py"
    plugin.write_text(CHILD_ONLY_IMPORT_ERROR.format(fake=FAKE))
    load_plugin(str(plugin))
    path = _crash_reproducer(tmp_path, "fake_child_only")
    assert reproducer.report_replay(*reproducer.load(path), path=path) == 2
    out = capsys.readouterr().out
    assert "cannot replay" in out and "injected fault" in out and "FAIL" not in out, out


def test_a_crash_reproducer_without_its_main_block_still_fails(fake_plugin, tmp_path):
    # The child replay reads REPRO and DATA; it does not run the file, so a file cut short (or
    # edited) cannot pass by doing nothing.
    path = _crash_reproducer(tmp_path)
    text = path.read_text()
    path.write_text(text[: text.index('if __name__ == "__main__":')])
    proc = subprocess.run(
        [sys.executable, "-m", "fuzz", "replay", "--plugin", FAKE, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "fake_double_crash on fake: FAIL crash" in proc.stdout


SELF_TERM = """
import dataclasses, os, signal
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
base = get("fake_double")

def stopped(inputs, params, *, out, interpret):  # the user's stop arrives mid-replay
    os.kill(os.getpid(), signal.SIGTERM)

register(dataclasses.replace(base, name="fake_stopped", source="builtin",
                             kernels={{"fake": stopped}}))
"""


def test_a_child_replay_stopped_by_sigterm_is_interrupted_not_a_crash(fake_plugin, tmp_path):
    from fuzz.target import load_plugin

    plugin = tmp_path / "self_term.py"
    plugin.write_text(SELF_TERM.format(fake=FAKE))
    load_plugin(str(plugin))
    code, verdict = reproducer.replay_isolated(_crash_reproducer(tmp_path, "fake_stopped"))
    assert (code, verdict) == (2, "interrupted (the replay process was stopped by SIGTERM)")


# Handed on: a reproducer copied elsewhere, its plugin moved, read without the harness ----------

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _with_harness(path, *args, cwd):
    """``python PATH ARGS`` from ``cwd`` where only the harness is installed (on PYTHONPATH)."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run(
        [sys.executable, str(path), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env=env,
    )


def _without_harness(path, *args, cwd, numpy=True):
    """``python PATH ARGS`` where ``fuzz`` cannot be imported: no site-packages (``-S``: not the
    editable install of any checkout either), NumPy alone on the path (or nothing)."""
    import numpy as np

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if numpy:
        only = cwd.parent / "numpy-only"
        only.mkdir(exist_ok=True)
        if not (only / "numpy").exists():
            (only / "numpy").symlink_to(os.path.dirname(np.__file__))
        env["PYTHONPATH"] = str(only)
    return subprocess.run(
        [sys.executable, "-S", str(path), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )


def test_a_copied_reproducer_replays_where_the_harness_is_and_says_what_is_missing_elsewhere(
    fake_plugin, fake_profile, tmp_path
):
    import shutil

    result = hunt(get("fake_double_nan"), "fake", fake_profile, repro_dir=tmp_path / "found")
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    script = shutil.copy(result.found["nan"].reproducer, empty / "bug.py")
    proc = _with_harness(script, cwd=empty)
    assert proc.returncode == 1 and "FAIL nan" in proc.stdout, proc.stdout + proc.stderr
    # Without the harness: exit 2 (cannot replay, never 1: "still failing"), one line.
    proc = _without_harness(script, cwd=empty)
    said = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 2 and len(said) == 1, proc.stdout + proc.stderr
    assert said[0].startswith("bug.py: cannot replay: ModuleNotFoundError: No module named 'fuzz'")
    assert "--show prints the case without it" in said[0]
    # --show needs NumPy only: the inputs as Python that gives back the recorded arrays.
    proc = _without_harness(script, "--show", cwd=empty)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fake_double_nan on fake -> nan (oracle)" in proc.stdout
    code = proc.stdout.split("# the inputs, as Python\n", 1)[1]
    namespace = {}
    exec(code, namespace)
    recorded = result.found["nan"].case.inputs["x"]
    assert namespace["x"].dtype == recorded.dtype
    assert np.array_equal(namespace["x"].view(np.uint32), recorded.view(np.uint32))
    proc = _without_harness(script, "--show", cwd=empty, numpy=False)
    said = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 2 and len(said) == 1 and "--show needs NumPy" in said[0], said


MOVABLE = """
import dataclasses
from fuzz.target import get, load_plugin, register
load_plugin({fake!r})
register(dataclasses.replace(get("fake_double_nan"), name="fake_movable", source="builtin"))
"""


def test_a_moved_plugin_is_found_beside_its_reproducer_or_given_with_plugin(
    fake_plugin, fake_profile, tmp_path
):
    # A plugin's reproducer recorded the plugin's absolute path: moved, it said "cannot replay:
    # ValueError: --plugin=...: no such file", and `fuzz replay --plugin NEWPATH` was ignored.
    from fuzz.target import load_plugin

    first, moved, other = tmp_path / "first", tmp_path / "moved", tmp_path / "elsewhere"
    for folder in (first, moved, other):
        folder.mkdir()
    (first / "my_kernels.py").write_text(MOVABLE.format(fake=FAKE))
    load_plugin(str(first / "my_kernels.py"))
    found = hunt(get("fake_movable"), "fake", fake_profile, repro_dir=first).found["nan"]
    assert reproducer.load(found.reproducer)[0]["plugin"] == str(first / "my_kernels.py")
    script = found.reproducer.rename(moved / found.reproducer.name)
    (first / "my_kernels.py").rename(moved / "my_kernels.py")
    # Beside the script (run from another folder).
    proc = _with_harness(script, cwd=other)
    assert proc.returncode == 1 and "FAIL nan" in proc.stdout, proc.stdout + proc.stderr
    # Renamed: nowhere to be found; the message says how to give it.
    (moved / "my_kernels.py").rename(other / "renamed.py")
    proc = _with_harness(script, cwd=moved)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot replay: ValueError: its plugin" in proc.stdout
    assert "give the plugin's place with --plugin PATH" in proc.stdout
    proc = _with_harness(script, "--plugin", str(other / "renamed.py"), cwd=moved)
    assert proc.returncode == 1 and "FAIL nan" in proc.stdout, proc.stdout + proc.stderr
    env = {**os.environ, "PYTHONPATH": ROOT}
    replay = [sys.executable, "-m", "fuzz", "replay", "--plugin", "renamed.py", str(script)]
    proc = subprocess.run(replay, capture_output=True, text=True, timeout=300, cwd=other, env=env)
    assert proc.returncode == 1 and "FAIL nan" in proc.stdout, proc.stdout + proc.stderr
    # On sys.path (the folder of a module a user imports from).
    env["PYTHONPATH"] = os.pathsep.join([ROOT, str(other)])
    (other / "renamed.py").rename(other / "my_kernels.py")
    proc = subprocess.run(
        [sys.executable, "-m", "fuzz", "replay", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 1 and "FAIL nan" in proc.stdout, proc.stdout + proc.stderr


def test_replay_show_prints_the_inputs_and_runs_nothing(fake_plugin, fake_profile, tmp_path):
    from fuzz import cli

    found = hunt(get("fake_double_nan"), "fake", fake_profile, repro_dir=tmp_path).found["nan"]
    broken = tmp_path / "broken.py"
    broken.write_text("print('not a reproducer')\n")
    args = cli._parser().parse_args(["replay", "--show", str(found.reproducer)])
    assert cli.cmd_replay(args) == 0
    args = cli._parser().parse_args(["replay", "--show", str(tmp_path)])
    assert cli.cmd_replay(args) == 2  # the broken file: cannot show


def test_remove_takes_the_issue_text_with_the_script(fake_plugin, fake_profile, tmp_path):
    found = hunt(get("fake_double_nan"), "fake", fake_profile, repro_dir=tmp_path).found["nan"]
    issue = reproducer.issue_path(found.reproducer)
    assert issue.name == found.reproducer.stem + ".md" and issue.is_file()
    assert reproducer.companions(found.reproducer) == [issue]
    reproducer.remove(found.reproducer)
    assert not found.reproducer.exists() and not issue.exists()
    reproducer.remove(found.reproducer)  # nothing left: nothing to do
