"""A crash that lost its process's CUDA context is replayed alone, in a fresh process, before it
is reported as its example's (``fuzz.isolated``): CUDA reports an illegal access at a later call
than the launch that made it, so the example that met it may not be the one that did it (on an
H200 JAX's ``mha`` lost its context in the harness's own ``jit_transpose``, and a row of
3,145,728 elements that no smaller example reproduced was reported as a crash).

The plugin ``tests/plugins/late_crash.py``: wide rows are wrong (an accuracy bug) and damage the
process; a later call of another row length raises an illegal memory access."""

from __future__ import annotations

import sys
import time
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


def test_a_crash_is_checked_on_the_interpreter_of_its_kernel_source(tmp_path):
    """A GPU faults on a read far past an allocation only, so out-of-bounds reads crash large
    examples alone (a planted Pallas jagged kernel: 50,880 elements on an H200, beside its
    5-element ``masking`` row). A crash's example is checked, in a fresh child, on the
    interpreter of its kernel source, where nothing faults: what it failed as there and what
    held for it (here a planted Triton kernel's accuracy bug, in Triton's interpreter)."""
    import numpy as np

    from fuzz import isolated
    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.failures import Finding
    from fuzz.profiles import HuntOptions, get_profile
    from fuzz.results import Found
    from fuzz.target import get, load_plugin

    plugins = Path(__file__).resolve().parent.parent / "plugins"
    load_plugin(str(plugins / "planted11.py"))
    target = get("planted11_softmax_bias_path_without_scale_triton")
    x = np.array([[0.0, 1.0]], np.float32)
    params = {"dtype": "float32", "scale": 0.5, "block_m": 4, "block_n": 16}
    case = Case({"x": x, "bias": np.zeros_like(x)}, params, {})
    found = Found(Finding("crash", "crash", "m"), case, dict(case.params), 1, 0.0)
    out = isolated.Isolated(found)
    spec = {
        "target": target.name,
        "plugin": str(plugins / "planted11.py"),
        "backend": "triton-interpret",
        "options": HuntOptions.of(get_profile("ci")),
    }
    got = isolated._on_twin(tmp_path, out, spec, time.monotonic() + 120)
    assert got["backend"] == "triton-interpret" and out.children == 1
    assert got["key"] == "accuracy|oracle|y|-", got
    assert "feature bias" in got["holds"] and "feature scale" in got["holds"], got
    out.twin = got
    assert "it fails as accuracy|oracle|y|-" in out.twin_note()
    assert isolated._twin_of(get_backend("triton-interpret")) is None  # (an interpreter's own)


def test_a_crash_shrink_keeps_time_for_its_alone_replay_and_its_interpreter(monkeypatch):
    """Its children shrink first, then its example is replayed alone and checked on the
    interpreter of its kernel source, each in a child of its own, the time for both kept back
    from the shrink (each a replay, which ends early)."""
    from types import SimpleNamespace

    from fuzz import isolated
    from fuzz.failures import Finding
    from fuzz.results import Found

    specs = []

    def child(tmp, n, spec, seconds):
        specs.append((dict(spec), seconds))
        if spec.get("check"):
            return isolated.DONE, [{"key": "masking|oracle|y|-", "holds": ["h"]}], ""
        return isolated.DONE, [], ""

    monkeypatch.setattr(isolated, "_run_child", child)
    monkeypatch.setattr(isolated, "_twin_of", lambda backend: "pallas-interpret")
    monkeypatch.setattr(isolated, "_spec", lambda *a: {"backend": "pallas-gpu", "known": {}})
    finding = Finding("crash", "crash", "m", details={"exception": "E", "text": "illegal"})
    case = SimpleNamespace(size=9)
    found = Found(finding, case, {}, 1, 0.0, choices=(1,), key="crash|crash|-|E: x")
    got = isolated.shrink(None, None, None, found, narrowing={}, seconds=100.0)
    assert [s.get("alone", False) or s.get("check", False) for s, _ in specs] == [
        False,
        True,
        True,
    ]
    shrink_seconds, alone_seconds, twin_seconds = (seconds for _, seconds in specs)
    assert shrink_seconds <= 100 - isolated.ALONE_SECONDS - isolated.TWIN_SECONDS + 1
    assert alone_seconds >= twin_seconds > 0  # (each child given what is left)
    assert specs[2][0]["backend"] == "pallas-interpret" and specs[1][0]["backend"] == "pallas-gpu"
    assert got.alone == [] and got.twin == {
        "backend": "pallas-interpret",
        "key": "masking|oracle|y|-",
        "holds": ["h"],
    }
    assert "it fails as masking|oracle|y|-" in got.twin_note()
