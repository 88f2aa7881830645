"""A crash that lost its process's CUDA context is replayed alone, in a fresh process, before it
is reported as its example's (``fuzz.isolated``): CUDA reports an illegal access at a later call
than the launch that made it, so the example that met it may not be the one that did it (on an
H200 JAX's ``mha`` lost its context in the harness's own ``jit_transpose``, and a row of
3,145,728 elements that no smaller example reproduced was reported as a crash).

The plugin ``tests/plugins/late_crash.py``: wide rows are wrong (an accuracy bug) and damage the
process; a later call of another row length raises an illegal memory access."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

PLUGIN = str(Path(__file__).resolve().parent.parent / "plugins" / "late_crash.py")


@pytest.fixture
def late(monkeypatch):
    """The plugin loaded, its process damaged by a call no example makes (length 999)."""
    from fuzz.target import load_plugin

    load_plugin(PLUGIN)
    module = next(m for n, m in sys.modules.items() if n.startswith("fuzz_plugin_late_crash_"))
    monkeypatch.setattr(module, "DAMAGED", {999})
    return module


def _crash(name: str, shrink_seconds: float):
    from fuzz import engine, get_profile
    from fuzz.profiles import HuntOptions
    from fuzz.target import get

    options = HuntOptions.of(get_profile("ci"), shrink_seconds=shrink_seconds)
    result = engine.hunt(get(name), "triton-interpret", options, seed=1, database=None)
    assert result.stopped == "context-lost", result.stopped
    (found,) = [f for f in result.found.values() if f.finding.cls == "crash"]
    return found


def test_a_crash_that_does_not_reproduce_alone_says_so(late):
    """Its first example crashed only because the process was damaged before: replayed alone it
    passes, and the row says so (``details["alone"]``: no way it failed there)."""
    found = _crash("late_crash_softmax", 300.0)  # (its one child shrinks to the end)
    assert found.finding.details["alone"] == [], found.finding.details
    assert "not reproduced alone: replayed in a fresh process, it passed" in found.shrink_notes[-1]
    assert "run_keys" not in found.finding.details


def test_a_crash_that_fails_another_way_alone_is_an_example_whose_runs_differ(late, monkeypatch):
    """Replayed alone, the wide example that crashed fails as the accuracy bug: its runs differ
    (``details["run_keys"]``), and the ledger joins its row to the accuracy row. (Its shrink in
    child processes is left out here: each child's own wide examples damage it, and it walks
    on through their late crashes; the test above runs it.)"""
    from fuzz import isolated
    from fuzz.ledger import BugLedger

    def no_shrink(tmp, out, found, spec, deadline):
        out.stopped = "not shrunk (this test)"

    monkeypatch.setattr(isolated, "_shrink", no_shrink)
    found = _crash("late_crash_wide_softmax", 300.0)
    details = found.finding.details
    accuracy = "accuracy|oracle|y|-"
    assert details["alone"] == [accuracy], details
    assert sorted(details["run_keys"]) == sorted([accuracy, found.key]), details
    ledger = BugLedger()
    ledger.record({"signature": "acc", "class": "accuracy", "bug_key": accuracy, "shrunk": True})
    crash = {
        "signature": "crash",
        "class": "crash",
        "bug_key": found.key,
        "shrunk": True,
        "details": {"run_keys": details["run_keys"]},
    }
    ledger.record(crash)
    assert list(ledger.found) == ["acc"], ledger.found
    assert [w["signature"] for w in ledger.found["acc"]["also_seen"]] == ["crash"]
