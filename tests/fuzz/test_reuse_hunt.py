"""Hunts that reuse case structures (``strategies.reuse``): a fake compiled backend compiles
every exact shape it meets (``fake_targets.exact_kernel``: fake compiles counted by
``fuzz.timing``), on a virtual clock, so that the counts are the same on every machine."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from fuzz import engine, timing
from fuzz.engine import hunt
from fuzz.target import get
from strategies.reuse import StructureMemo


def _plugin_module():
    return next(m for n, m in sys.modules.items() if n.startswith("fuzz_plugin_fake_targets"))


@pytest.fixture
def exact(fake_plugin, fake_profile, monkeypatch):
    """The fake plugin with its virtual clock as the harness's clock, and a profile on its
    compiled backend."""
    mod = _plugin_module()
    clock = types.SimpleNamespace(perf_counter=mod.CLOCK.perf_counter)
    monkeypatch.setattr(timing, "time", clock)
    monkeypatch.setattr(engine, "time", clock)
    profile = dataclasses.replace(
        fake_profile, backends=("fake-compiled",), max_examples=300, interpreter_shrink=False
    )

    def run(profile, **kw):
        mod.EXACT_COMPILES.clear()
        mod._exact.clear()
        result = hunt(get("fake_exact"), "fake-compiled", profile, database=None, **kw)
        return result, len(mod.EXACT_COMPILES)

    return run, profile


@pytest.mark.parametrize("seed", range(2))
def test_reused_structures_cut_the_compiles_of_an_exact_shape_kernel(exact, seed):
    run, profile = exact
    fresh, fresh_compiles = run(profile, seed=seed)
    memo = StructureMemo(target_share=0.25)
    reused, reused_compiles = run(
        dataclasses.replace(profile, reuse_share=0.25), seed=seed, memo=memo
    )
    assert fresh.status == reused.status == "pass"
    assert fresh.examples == reused.examples == 300
    assert fresh.stats.compiles == fresh_compiles and reused.stats.compiles == reused_compiles
    # Fresh: nearly every example meets a shape of its own (40 x 60 of them).
    assert fresh_compiles > 150
    assert reused_compiles * 4 < fresh_compiles, (reused_compiles, fresh_compiles, memo.counts)
    # Compiling (1 s a shape) against 1 ms launches: the memo explores at its floor.
    assert memo.explore_rate == memo.min_explore
    assert memo.counts["reused"] > 50
    share = reused.stats.compile_seconds / reused.seconds
    assert share < fresh.stats.compile_seconds / fresh.seconds


def test_a_profile_that_reuses_structures_makes_its_own_memo(exact):
    run, profile = exact
    _, fresh_compiles = run(profile, seed=0)
    _, reused_compiles = run(dataclasses.replace(profile, reuse_share=0.25), seed=0)
    assert reused_compiles * 4 < fresh_compiles


def test_a_memo_needs_a_profile_that_reuses_structures(exact):
    run, profile = exact
    with pytest.raises(ValueError, match="reuse_share"):
        run(profile, seed=0, memo=StructureMemo())


def test_a_failure_found_with_a_memo_shrinks_as_without_one(fake_plugin, fake_profile):
    """The structures a memo reuses never change what Hypothesis shrinks to: a bug that needs
    two columns, first met on a reused structure, is reported at shape (1, 2) as without a
    memo."""
    profile = dataclasses.replace(fake_profile, max_examples=200)
    plain = hunt(get("fake_exact_accuracy"), "fake", profile, seed=3, database=None)
    reusing = dataclasses.replace(profile, reuse_share=0.25)
    # Structures to reuse: a passing run of the same strategy, every structure fresh.
    memo = StructureMemo(explore=1.0)
    hunt(get("fake_exact"), "fake", reusing, seed=3, database=None, memo=memo)
    assert memo.structures() > 50
    memo.explore = 0.0  # from now on the memo chooses reuse only
    before = memo.counts["reused"]
    found = hunt(get("fake_exact_accuracy"), "fake", reusing, seed=3, database=None, memo=memo)
    assert memo.counts["reused"] > before
    assert plain.found["accuracy"].case.inputs["x"].shape == (1, 2)
    assert found.found["accuracy"].case.inputs["x"].shape == (1, 2)


def test_the_bench_passes_of_a_pair_share_one_memo(exact, monkeypatch):
    """``fuzz.bench``: the three passes of a pair run with one memo, as a campaign's rounds of a
    pair would: pass 2 starts with what pass 1 launched and measured."""
    import fuzz.bench
    from fuzz.profiles import HuntOptions

    made = []

    class Recorded(StructureMemo):
        def __post_init__(self):
            super().__post_init__()
            made.append(self)

    monkeypatch.setattr(fuzz.bench, "StructureMemo", Recorded)
    _, profile = exact
    options = HuntOptions.of(dataclasses.replace(profile, reuse_share=0.25))
    passes = fuzz.bench._passes("fake_exact", "fake-compiled", options, 100, 0)
    assert [r.examples for r in passes] == [100, 100, 100]
    assert len(made) == 1 and made[0].target_share == 0.25
    assert made[0].counts["observed"] == 300
    # Passes 2 and 3 reuse what pass 1 launched: far more reuses than explorations.
    assert made[0].counts["reused"] > 2 * made[0].counts["explored"]
    # Without reuse in the profile, no memo.
    fuzz.bench._passes("fake_exact", "fake-compiled", HuntOptions.of(profile), 10, 0)
    assert len(made) == 1
