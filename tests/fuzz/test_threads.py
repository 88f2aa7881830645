"""Processes sharing one machine get their share of its CPU threads (fuzz.campaign.threads)."""

import os

import pytest

from fuzz.campaign import threads
from fuzz.campaign.threads import (
    POOL_VARIABLES,
    SWITCH,
    children_share_cpus,
    share_cpus,
    threads_per_process,
)


@pytest.fixture
def clean_env(monkeypatch):
    for var in (*POOL_VARIABLES, SWITCH):
        monkeypatch.delenv(var, raising=False)
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    yield monkeypatch
    torch.set_num_threads(before)


def test_each_process_gets_its_share_of_the_cores_and_at_least_one():
    assert threads_per_process(8, cpus=16) == 2
    assert threads_per_process(3, cpus=16) == 5
    assert threads_per_process(12, cpus=8) == 1
    assert threads_per_process(1, cpus=16) == 16
    with pytest.raises(ValueError, match="processes must be at least 1, got 0"):
        threads_per_process(0)


def test_share_cpus_sets_the_pools_and_resizes_a_loaded_torch(clean_env, monkeypatch):
    import torch

    monkeypatch.setattr(threads, "cpu_count", lambda: 16)
    assert share_cpus(1) is None  # a process alone keeps the defaults
    assert all(var not in os.environ for var in POOL_VARIABLES)
    assert share_cpus(8) == 2
    assert all(os.environ[var] == "2" for var in POOL_VARIABLES)
    assert torch.get_num_threads() == min(2, torch.get_num_threads()) == 2


def test_the_users_settings_win(clean_env, monkeypatch):
    import torch

    monkeypatch.setattr(threads, "cpu_count", lambda: 16)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert share_cpus(8) == 3  # the user's OpenMP setting is the one torch gets
    assert os.environ["OMP_NUM_THREADS"] == "3" and os.environ["OPENBLAS_NUM_THREADS"] == "2"
    assert torch.get_num_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    monkeypatch.delenv("MKL_NUM_THREADS")
    monkeypatch.setenv(SWITCH, "off")
    assert share_cpus(8) is None and "OMP_NUM_THREADS" not in os.environ
    monkeypatch.setenv(SWITCH, "1")
    assert share_cpus(1) == 1  # asked for explicitly: applies to a lone process too
    monkeypatch.setenv(SWITCH, "many")
    with pytest.raises(ValueError, match="KERNEL_FUZZ_THREADS must be 'off' or a positive"):
        share_cpus(4)


CHILD = f"""
import json, os
import torch
print(json.dumps([{{v: os.environ.get(v) for v in {POOL_VARIABLES!r}}}, torch.get_num_threads()]))
"""


def test_processes_started_in_the_block_get_their_share_and_this_one_keeps_its_own(clean_env):
    import json
    import subprocess
    import sys

    import torch

    own = torch.get_num_threads()
    clean_env.setenv(SWITCH, "1")  # the share on any machine, this one's 2 cores included
    with children_share_cpus(4) as n:
        child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    out, _ = child.communicate(timeout=120)
    pools, child_threads = json.loads(out)
    assert n == 1 and child_threads == 1 and all(v == "1" for v in pools.values())
    assert all(var not in os.environ for var in POOL_VARIABLES)  # restored here
    assert torch.get_num_threads() == own


XDIST_TEST = """
import os

def test_threads():
    import torch
    expected = max(1, {cpus} // 2)
    assert os.environ["PYTEST_XDIST_WORKER_COUNT"] == "2"
    assert os.environ["OPENBLAS_NUM_THREADS"] == str(expected)
    assert torch.get_num_threads() == expected
"""


# Set in this process when the suite itself runs under xdist: the inner run's controller must not
# take itself for a worker.
XDIST_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


def test_xdist_workers_start_with_their_share(pytester, monkeypatch):
    pytest.importorskip("xdist")
    for var in (*POOL_VARIABLES, SWITCH, *XDIST_VARIABLES):
        monkeypatch.delenv(var, raising=False)
    pytester.makepyfile(XDIST_TEST.format(cpus=threads.cpu_count()))
    result = pytester.runpytest_subprocess("-n", "2", "-p", "xdist", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_bad_switch_is_a_clear_error_from_every_entry_point(pytester, monkeypatch, capsys):
    from fuzz import bench, cli

    for var in XDIST_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(SWITCH, "lots")
    message = "KERNEL_FUZZ_THREADS must be 'off' or a positive integer, got 'lots'"
    assert cli.main(["run", "--budget", "1", "--out", str(pytester.path / "out")]) == 2
    assert message in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        bench.main(["--targets", "softmax", "--procs", "2"])
    assert e.value.code == 2 and message in capsys.readouterr().err
    pytest.importorskip("xdist")
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("-n", "2", "-p", "xdist", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str() and "Traceback" not in result.stderr.str()


def test_a_bad_gpu_share_is_a_clear_error_before_the_campaign_starts(tmp_path, monkeypatch, capsys):
    """``KERNEL_FUZZ_GPU_SHARE`` (``off`` or the share of each GPU a run's processes take) is
    checked up front, where a worker would have died of it at its start."""
    from fuzz import cli

    monkeypatch.setenv("KERNEL_FUZZ_GPU_SHARE", "2")
    assert cli.main(["run", "--budget", "1", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "KERNEL_FUZZ_GPU_SHARE='2' must be 'off' or a number in (0, 1]" in err
    assert "Traceback" not in err
