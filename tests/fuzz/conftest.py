import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from fuzz.profiles import Profile
from fuzz.target import load_plugin

FAKE = os.path.join(os.path.dirname(__file__), "fake_targets.py")


@pytest.fixture(scope="session")
def fake_plugin():
    return load_plugin(FAKE)


@pytest.fixture
def fake_profile():
    return Profile("ci", ("fake",), "small", False, "cpu", False, 60)


@pytest.fixture
def fake_differential_profile():
    return Profile("ci", ("fake",), "small", True, "cpu", False, 60)


@pytest.fixture(autouse=True)
def _cuda_context_state_per_test():
    """The fake ``context`` bug simulates a lost CUDA context, which the engine remembers for the
    rest of the process (later GPU hunts refuse); each test here starts from a clean slate."""
    from fuzz import engine

    yield
    engine._context_lost.clear()


# ``python -m fuzz ARGS`` for each ARGS in turn, in one process: ``fuzz.cli.main(ARGS)`` as
# ``fuzz/__main__.py`` calls it, with its output and exit status kept per command line (written
# to the file named by argv[1]). Usage errors that load the built-in targets and plugins first
# would otherwise pay a fresh interpreter's imports (torch, JAX, Triton, every kernel) each.
_CLI_BATCH = """
import contextlib, io, json, os, sys, traceback
import fuzz
from fuzz.cli import main

into, results = sys.argv[1], []
for argv in json.loads(sys.stdin.read()):
    sys.argv = [os.path.join(os.path.dirname(fuzz.__file__), "__main__.py"), *argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:  # as the interpreter turns it into an exit status
            code = e.code
            if code is None:
                code = 0
            elif not isinstance(code, int):
                print(code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
    results.append([code, out.getvalue(), err.getvalue()])
with open(into, "w") as f:
    json.dump(results, f)
"""


def fuzz_cli_batch(argvs, tmp_path, timeout=600):
    """The result (``returncode``, ``stdout``, ``stderr``) of ``python -m fuzz ARGS`` for each
    ARGS of ``argvs``, run one after the other in one process (see ``_CLI_BATCH``)."""
    into = tmp_path / "cli-batch.json"
    proc = subprocess.run(
        [sys.executable, "-c", _CLI_BATCH, str(into)],
        input=json.dumps([list(map(str, a)) for a in argvs]),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0 and into.exists(), proc.stdout + proc.stderr
    return [
        SimpleNamespace(returncode=code, stdout=out, stderr=err)
        for code, out, err in json.loads(into.read_text())
    ]


@pytest.fixture(scope="session")
def cli_batch():
    return fuzz_cli_batch
