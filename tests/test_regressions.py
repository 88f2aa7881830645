"""Saved reproducers in tests/regressions/ run as ordinary tests.

A reproducer of a real target is a fixed bug: it must replay clean. A reproducer of a mutant
documents what the harness finds: it must still fail, with the class it was saved with (a mutant
can fail in more than one way: no_rowmax overflows to NaN, and also loses a row to underflow).
"""

from pathlib import Path

import pytest

from fuzz import reproducer

FILES = sorted((Path(__file__).parent / "regressions").glob("*.py"))


def test_the_regression_folder_is_not_empty():
    assert FILES, "tests/regressions/ holds no reproducers"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_saved_reproducer(path):
    meta, data = reproducer.load(path)
    outcome = reproducer.replay(meta, data)
    if meta["mutant_of"] is None:
        assert outcome.finding is None, f"regression: {outcome.finding.summary()}"
    else:
        assert outcome.finding is not None, f"{meta['target']} no longer fails on {meta['backend']}"
        assert outcome.finding.cls == meta["class"], outcome.finding.summary()
