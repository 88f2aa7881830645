"""Hunts that reuse case structures (``strategies.reuse``): a fake compiled backend compiles
every exact shape it meets (``fake_targets.exact_kernel``: fake compiles counted by
``fuzz.timing``), on a virtual clock, so that the counts are the same on every machine."""

from __future__ import annotations

import dataclasses
import sys
import types

import numpy as np
import pytest

from fuzz import engine, timing
from fuzz.engine import hunt
from fuzz.target import get
from strategies.reuse import NEW_SEEN, StructureMemo


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


@pytest.mark.parametrize("seed", range(2))
def test_the_compile_share_holds_over_a_pairs_earlier_slices(exact, seed):
    """A campaign's slice of a pair whose earlier slices already spent its compile share
    (``compile_spent``) compiles no new structure: it fuzzes the structures its memo knows (taken
    in from the slice that launched them, as a campaign's compile worker hands them over), each
    of them at most loaded again in this process; new ones are refused before compiling, and
    the memo explores at its floor. Where the earlier slices left room, it explores."""
    run, profile = exact
    mod = _plugin_module()
    profile = dataclasses.replace(profile, reuse_share=0.25, compile_share=0.25)
    first = StructureMemo(target_share=0.25, seed=seed)
    warm_up = dataclasses.replace(profile, compile_share=None)  # a compile worker's slice
    run(warm_up, seed=seed, memo=first, max_examples=60)
    known = set(mod.EXACT_COMPILES)
    assert len(known) >= 2

    def later_slice(spent):
        memo = StructureMemo(target_share=0.25, seed=seed + 1)  # another worker process
        assert memo.take_in(first.export()) == first.structures()
        result, _ = run(profile, seed=seed + 100, memo=memo, max_examples=150, compile_spent=spent)
        return result, set(mod.EXACT_COMPILES), memo

    # 100 virtual seconds in 110 spent compiling: far over the share of 0.25.
    held, compiled, memo = later_slice((100.0, 110.0))
    assert held.examples == 150  # examples checked: the refused ones are events
    assert compiled <= known, compiled - known  # loads of known structures only
    # Here a known structure compiles again in the new process (the fake has no disk cache, as
    # a kernel compiled per length has none for new lengths): no cheaper than a new one, after
    # the first it is refused too.
    assert len(compiled) <= 2, compiled
    assert held.events["rejected: would compile"] > 0
    assert memo.over_budget and memo.explore_rate == memo.min_explore
    assert memo.counts["reused"] > memo.counts["explored"]
    # Earlier slices that fuzzed 1000 s compiling nothing leave room: new structures compile.
    _, compiled, _ = later_slice((0.0, 1000.0))
    assert compiled - known
    # 5 s of 100 compiling leaves room for 1 s compiles (measured), not for 30 s ones (told).
    _, compiled, _ = later_slice((5.0, 100.0))
    assert compiled - known
    held, compiled, _ = later_slice((5.0, 100.0, 30.0))
    assert compiled <= known and held.events["rejected: would compile"] > 0
    # A pair's first fuzzing slice (nothing compiled on the fuzzing path yet), its memo holding
    # what a compile worker compiled, which loads from a cache here: where a compile is known to
    # cost 30 s, it fuzzes those; where its cost is not known, its first new one compiles.
    for cost in (30.0, 0.0):
        memo = StructureMemo(target_share=0.25, seed=seed + 1)
        memo.take_in(first.export())
        mod.EXACT_COMPILES.clear()
        mod._exact.clear()
        mod._exact.update(known)  # (the cache of what the warm-up compiled)
        held = hunt(
            get("fake_exact"),
            "fake-compiled",
            profile,
            database=None,
            seed=seed + 100,
            memo=memo,
            max_examples=150,
            compile_spent=(0.0, 0.0, cost),
        )
        new = set(mod.EXACT_COMPILES) - known
        assert held.examples == 150 and bool(new) == (cost == 0.0), (cost, new)
    # A cold pair (its memo knowing no structure) compiles its first all the same.
    cold, compiles = run(
        profile, seed=seed, memo=StructureMemo(target_share=0.25), compile_spent=(0.0, 0.0, 30.0)
    )
    assert cold.error is None and cold.examples > 0 and compiles >= 1


@pytest.mark.parametrize("seed", range(2))
def test_a_spent_share_skips_the_derived_launches_that_would_compile(exact, seed):
    """Past its compile share a slice still fuzzes the structures its memo knows (they only
    load), but a property's derived launch has a shape of its own (here the first k rows, k drawn
    with the values): it would compile, so the property is skipped for that example and counted
    (``spared``), and the example is still checked. Under the share the same launches compile."""
    _, profile = exact
    mod = _plugin_module()
    profile = dataclasses.replace(profile, reuse_share=0.25, compile_share=0.25)
    target = get("fake_exact_derived")

    def run(profile, **kw):
        return hunt(target, "fake-compiled", profile, database=None, **kw)

    mod.EXACT_COMPILES.clear()
    mod._exact.clear()
    first = StructureMemo(target_share=0.25, seed=seed)
    run(dataclasses.replace(profile, compile_share=None), seed=seed, memo=first, max_examples=60)
    # The cases' own shapes and the first-rows shapes compiled so far.
    known = set(mod.EXACT_COMPILES)
    assert first.structures() >= 2

    memo = StructureMemo(target_share=0.25, seed=seed + 1)
    memo.take_in(first.export())
    mod.EXACT_COMPILES.clear()
    held = run(profile, seed=seed + 100, memo=memo, max_examples=150, compile_spent=(100.0, 110.0))
    compiled = set(mod.EXACT_COMPILES)
    assert held.examples == 150
    # Nothing new compiled: every launch was of a shape compiled before.
    assert not compiled - known, compiled - known
    assert held.stats.compiles == 0
    spared = held.events["spared: first-rows (would compile)"]
    assert spared > 0, dict(held.events)
    # Most examples of known structures are checked, their derived launch skipped where new.
    assert held.events["rejected: would compile"] < held.examples, dict(held.events)
    # Under the share (earlier slices compiled nothing in 1000 s), the derived launches compile.
    mod.EXACT_COMPILES.clear()
    free = run(profile, seed=seed + 100, memo=memo, max_examples=150, compile_spent=(0.0, 1000.0))
    assert free.events["spared: first-rows (would compile)"] == 0
    assert free.stats.compiles > 0


def test_a_slice_whose_every_example_would_compile_ends_refused_not_in_error(exact):
    """A slice that knows no structure, with its pair's share spent: every example it draws would
    compile and is refused, and Hypothesis gives up. The slice ends "refused" with nothing
    checked, not as a harness error (that retired a Pallas pair of a GPU campaign)."""
    run, profile = exact
    profile = dataclasses.replace(profile, reuse_share=0.25, compile_share=0.25)
    result, compiles = run(
        profile, seed=0, memo=StructureMemo(target_share=0.25), compile_spent=(100.0, 110.0)
    )
    assert result.error is None, result.error
    assert result.stopped == "refused"
    assert compiles == 0 and result.examples == 0
    assert result.events["rejected: would compile"] > 0


@pytest.mark.parametrize("seed", range(2))
def test_over_the_share_a_structure_with_a_new_hazard_is_admitted_from_a_pot_of_its_own(
    exact, monkeypatch, seed
):
    """A pair's compile share goes to its first structures, the simplest: a Pallas-interpret
    pair whose planted bug needs grouped heads refused 125 structures and never checked one
    with grouped heads, where fresh draws have them 3 times in 4. Past the share, a structure
    that brings a hazard none of the memo's checked examples had is admitted all the same,
    while such compiles stay within ``engine.NOVEL_SHARE`` of the pair's time. Here a kernel
    compiled per exact shape is wrong for 33 rows or more (hazard "tall"), its pair's share
    spent by earlier slices: without the pot every example is refused."""
    from fuzz.target import Hazard

    mod = _plugin_module()
    pot = engine.NOVEL_SHARE
    base = get("fake_exact")
    correct = base.kernels["fake"]

    def tall_kernel(inputs, params, *, out, interpret):
        got = correct(inputs, params, out=out, interpret=interpret)
        if inputs["x"].shape[0] >= 33:
            out["y"].mul_(1.01)
        return got

    tall = dataclasses.replace(
        base,
        name="fake_exact_tall",
        kernels={"fake": tall_kernel},
        hazards=(
            Hazard("tall", lambda c: "33 rows or more" if len(c.inputs["x"]) >= 33 else None),
        ),
    )
    profile = dataclasses.replace(exact[1], reuse_share=0.25, compile_share=0.25, max_examples=150)

    def slice_(pot):
        monkeypatch.setattr(engine, "NOVEL_SHARE", pot)
        mod.EXACT_COMPILES.clear()
        mod._exact.clear()
        return hunt(
            tall,
            "fake-compiled",
            profile,
            database=None,
            seed=seed,
            memo=StructureMemo(target_share=0.25, seed=seed),
            compile_spent=(100.0, 110.0),  # 100 s compiled in 110: the share long spent
        )

    refused = slice_(0.0)
    assert refused.examples == 0 and not refused.found, dict(refused.events)
    admitted = slice_(pot)
    assert "accuracy" in admitted.found, dict(admitted.events)
    assert admitted.found["accuracy"].case.inputs["x"].shape[0] == 33  # shrunk as ever
    # Each admission brought a hazard not checked before: here there is one to bring.
    assert admitted.events["admitted past the share: a new hazard"] == 1, dict(admitted.events)


def test_compile_spent_is_checked(exact):
    run, profile = exact
    for bad in ((1.0,), (-1.0, 2.0), ("a", 1.0), (True, 1.0), None):
        with pytest.raises(ValueError, match="compile_spent"):
            run(profile, seed=0, compile_spent=bad, max_examples=1)


def _warm_up_plan(target, *, seed, max_examples, quiet, limit=float("inf")):
    """A compile worker's warm-up slice of ``target`` on the fake compiled backend."""
    from fuzz.campaign.messages import SlicePlan, WarmUp

    return SlicePlan(
        id=1,
        target=target,
        backend="fake-compiled",
        started=0.0,
        time_limit=10**6,
        hard_limit=10**6,
        seed=seed,
        max_examples=max_examples,
        known=(),
        reuse=False,
        narrowing=None,
        warm_up=WarmUp(quiet, limit),
        structures=(),
        compile_spent=(0.0, 0.0, 0.0),
    )


def _done(sent):
    """The summary of the slice whose messages are ``sent``."""
    from fuzz.campaign.messages import Done

    return next(m.summary for m in sent if isinstance(m, Done))


def test_a_warm_up_draws_a_fresh_structure_every_example(exact, tmp_path):
    """A compile worker's warm-up is there to compile the variants the pair's fuzzing will draw:
    its examples all explore (a reusing memo would end it after a few structures, as soon as
    ``quiet`` examples in a row reused one), and it hands every structure it launched to the
    workers that fuzz. The worker's memo explores as before once the warm-up is done."""
    from fuzz.campaign import worker

    _, profile = exact
    mod = _plugin_module()
    mod.EXACT_COMPILES.clear()
    mod._exact.clear()
    config = _worker_config(tmp_path, profile)
    sent = []
    conn = types.SimpleNamespace(send=sent.append)
    started = types.SimpleNamespace(value=0.0)
    task = _warm_up_plan("fake_exact", seed=3, max_examples=40, quiet=8)
    worker._MEMOS.clear()
    worker._hunt(conn, config, None, started, task)
    summary = _done(sent)
    # It ran until 8 examples in a row compiled nothing new (a reusing memo stopped there after
    # 6 structures), and every structure it compiled is handed over.
    assert summary["stopped"] == "warmed" and summary["compiles"] >= 12, summary
    assert len(summary["structures"]) == summary["compiles"]
    memo = worker._MEMOS[("fake_exact", "fake-compiled")]
    assert memo.explore is None and memo.counts["reused"] == 0
    # A warm-up also ends at its time limit (compiling included): the pair waits for it.
    worker._MEMOS.clear()
    sent.clear()
    worker._hunt(
        conn,
        config,
        None,
        started,
        _warm_up_plan("fake_exact", seed=3, max_examples=40, quiet=8, limit=0.0),
    )
    summary = _done(sent)
    assert summary["stopped"] == "warmed" and summary["examples"] <= 2, summary
    worker._MEMOS.clear()


@pytest.mark.parametrize("seed", range(2))
def test_over_its_share_a_new_structure_is_refused_before_its_launch(exact, seed):
    """Where new structures mostly compile (a kernel compiled per shape bucket), a slice over its
    share refuses a structure no process launched before it calls the kernel: a refusal at the
    compile comes after JAX's tracing and lowering, which cost a Pallas attention kernel
    0.3-1 s each, and a GPU campaign's Pallas pairs refused 5 examples for each one checked.
    Until the memo has seen a few new structures, they are tried (a compiled-per-variant kernel
    loads most new structures)."""
    from strategies.reuse import NEW_SEEN

    run, profile = exact
    mod = _plugin_module()
    profile = dataclasses.replace(profile, reuse_share=0.25, compile_share=0.25)
    first = StructureMemo(target_share=0.25, seed=seed)
    run(dataclasses.replace(profile, compile_share=None), seed=seed, memo=first, max_examples=40)
    known = set(mod.EXACT_COMPILES)
    memo = StructureMemo(target_share=0.25, seed=seed + 1)
    memo.take_in(first.export())
    memo.explore = 0.5  # many new structures drawn
    mod.EXACT_CALLS.clear()
    held, _ = run(profile, seed=seed + 7, memo=memo, max_examples=150, compile_spent=(100.0, 110.0))
    refused = held.events["rejected: would compile"]
    called_new = [s for s in mod.EXACT_CALLS if s not in known]
    assert refused > 3 * NEW_SEEN, dict(held.events)
    assert len(called_new) <= NEW_SEEN + 1, (len(called_new), refused)
    assert memo.new_would_compile()
    assert held.examples == 150  # the known structures are fuzzed meanwhile


def test_structures_taken_in_from_a_warm_up_launch_its_kernel_programs(monkeypatch):
    """What a campaign's compile worker compiles is what the fuzzing workers launch: a structure
    taken in from a warm-up's memo gives a case whose Pallas program (the padded shapes, tiles and
    group of ``_attention_padded``) the warm-up launched. (On an H100 the fuzzing workers of
    ``attention_reverse_kv`` loaded nothing a warm-up compiled; here the programs match, so the
    misses are the GPU cache's.)"""
    from fuzz.campaign.worker import checked_strategy
    from fuzz.profiles import HuntOptions, get_profile
    from kernels.attention.reformulations import REFORMULATIONS

    mod = next(r for r in REFORMULATIONS if r.name == "reverse_kv").module("pallas")
    launched: list[tuple] = []
    lengths: list[tuple] = []  # (the rows' query and key lengths, which the padding hides)
    real = mod._attention_padded

    def recording(*args, static, group, interpret):
        launched.append((tuple((a.shape, str(a.dtype)) for a in args), static, group))
        lengths.append(tuple(tuple(np.asarray(a).tolist()) for a in args[:2]))
        return real(*args, static=static, group=group, interpret=interpret)

    monkeypatch.setattr(mod, "_attention_padded", recording)
    target = checked_strategy(get("attention_reverse_kv"))
    options = dataclasses.replace(
        HuntOptions.of(get_profile("ci")), reuse_share=0.25, compile_share=None, max_examples=30
    )
    warm = StructureMemo(target_share=0.25, seed=1)
    warm.explore = 1.0  # a warm-up: every example a fresh structure
    hunt(target, "pallas-interpret", options, max_examples=8, seed=5, database=None, memo=warm)
    compiled, warm_lengths = set(launched), set(lengths)
    assert warm.structures() >= 4
    launched.clear()
    structures = warm.export()

    def fuzz_with(fresh_lengths):
        launched.clear()
        lengths.clear()
        fuzz = StructureMemo(target_share=0.25, seed=2, fresh_lengths=fresh_lengths)
        fuzz.take_in(structures)  # another process's
        fuzz.explore = 0.0  # reuse only
        result = hunt(target, "pallas-interpret", options, max_examples=30, seed=9,
                      database=None, memo=fuzz)  # fmt: skip
        assert result.error is None and fuzz.counts["reused"] >= 10, fuzz.counts
        return set(launched), fuzz

    # Replayed whole, a structure launches exactly the program the warm-up compiled.
    launched_exact, _ = fuzz_with(False)
    new = launched_exact - compiled
    assert not new, new
    # With fresh lengths, the same kernel variants (tiles, group, dtypes, head dims) in shape
    # buckets of their lengths: only the padded lengths may be new.
    launched_free, fuzz = fuzz_with(True)
    assert fuzz.counts["relengthed"] == fuzz.counts["reused"]

    def variant(program):
        arrays, static, group = program
        return tuple((shape[:1] + shape[2:], dtype) for shape, dtype in arrays), static, group

    assert set(lengths) - warm_lengths, "fresh lengths launched only the warm-up's lengths"
    assert {variant(p) for p in launched_free} <= {variant(p) for p in compiled}


def _buggy_over_the_share(profile, seed):
    """A hunt of a kernel compiled per exact shape whose launches of two or more columns fail,
    with room for about 5 compiles of 1 s before its compile share is spent."""
    mod = _plugin_module()
    mod.EXACT_COMPILES.clear()
    mod._exact.clear()
    return hunt(
        get("fake_exact_accuracy"),
        "fake-compiled",
        dataclasses.replace(profile, reuse_share=0.25, compile_share=0.25),
        seed=seed,
        database=None,
        memo=StructureMemo(target_share=0.25, seed=seed),
        max_examples=200,
        compile_spent=(0.0, 20.0),
    )


def test_a_failing_structure_replays_over_the_share(exact, monkeypatch):
    """An example that failed is not offered for reuse (it would only hit its bug again), but it
    launched: replaying it over the share must not be refused as a structure no process
    launched, or the hunt ends in `UnsatisfiedAssumption` (a CPU campaign of
    attention_mutant_causal_loop_bound on pallas-interpret did). Shrinking itself is exempt from
    the share (the test after this one); here it is not, so that its replays meet the share as
    replays outside it do (the database's, a flaky failure's re-shrinks). Over several seeds:
    whether a hunt of some 20 examples explores a new structure after its share is spent
    depends on its draws, and most must have (refused ones: it was over the share)."""
    monkeypatch.setattr(engine, "in_shrink_phase", lambda: False)
    over = 0
    for seed in range(6):
        result = _buggy_over_the_share(exact[1], seed)
        assert result.error is None, (seed, result.error)
        assert "accuracy" in result.found, (seed, dict(result.events))
        over += result.events["rejected: would compile"] > 0
    assert over >= 3, over


@pytest.mark.parametrize("seed", range(3))
def test_shrinking_a_failure_compiles_past_the_share(exact, seed):
    """Hypothesis's shrink steps of a failure are new shapes, which a kernel compiled per shape
    compiles: the compile share refused them all, and a CPU campaign's Pallas-interpreter
    reproducers stayed 5x the size of the Triton interpreter's. Shrinking compiles what it needs
    (bounded by its time); the search around it keeps to the share."""
    result = _buggy_over_the_share(exact[1], seed)
    assert result.error is None, result.error
    assert result.found["accuracy"].case.inputs["x"].shape == (1, 2)  # the least that fails


def _free_lengths_hunt(exact, name, seed, fresh_lengths=None, **kw):
    """A hunt of a fake target whose structures draw a variant and free lengths, with its
    compile share spent after about 5 compiles of 1 s: (result, memo, shapes launched)."""
    _, profile = exact
    mod = _plugin_module()
    for registry in (mod.EXACT_COMPILES, mod.EXACT_CALLS, mod.VARIANT_COMPILES, mod.VARIANT_CALLS):
        registry.clear()
    mod._exact.clear()
    mod._variants.clear()
    memo = StructureMemo(target_share=0.25, seed=seed, fresh_lengths=fresh_lengths)
    result = hunt(
        get(name),
        "fake-compiled",
        dataclasses.replace(profile, reuse_share=0.25, compile_share=0.25),
        seed=seed,
        database=None,
        memo=memo,
        max_examples=300,
        compile_spent=(0.0, 20.0),
        **kw,
    )
    per_variant = name.startswith("fake_variant") and name != "fake_variant_exact"
    calls = mod.VARIANT_CALLS if per_variant else mod.EXACT_CALLS
    shapes = {c[1] if per_variant else c for c in calls}
    return result, memo, shapes


@pytest.mark.parametrize("seed", range(2))
def test_reused_variants_draw_fresh_lengths_where_lengths_compile_nothing(exact, seed):
    """A kernel compiled per variant (as the project's Triton kernels: lengths compile nothing)
    reuses its few compiled variants with fresh lengths: over its compile share, examples of
    many shapes run and none compiles. Replayed whole, the same variants ran a handful of shapes
    (the lengths of the structures first launched)."""
    free, free_memo, free_shapes = _free_lengths_hunt(exact, "fake_variant", seed)
    whole, whole_memo, whole_shapes = _free_lengths_hunt(
        exact, "fake_variant", seed, fresh_lengths=False
    )
    mod = _plugin_module()
    assert free.status == whole.status == "pass"
    assert free.examples == whole.examples == 300
    assert free_memo.lengths_free and free_memo.counts["relengthed"] > 100, free_memo.counts
    assert whole_memo.counts["relengthed"] == 0
    # The same compiled variants (the share bounds both), many more shapes.
    assert free.stats.compiles <= whole.stats.compiles + 2
    assert len(free_shapes) > 3 * len(whole_shapes), (len(free_shapes), len(whole_shapes))
    assert len(set(mod.VARIANT_COMPILES)) == len(mod.VARIANT_COMPILES)  # each variant once


@pytest.mark.parametrize("seed", range(2))
def test_where_fresh_lengths_compile_the_memo_replays_structures_whole(exact, seed):
    """The same structures on a kernel compiled per exact shape: fresh lengths compile, the memo
    measures it and turns them off (but for a few, which keep measuring), so the compile share
    holds as with structures replayed whole."""
    free, free_memo, _ = _free_lengths_hunt(exact, "fake_variant_exact", seed)
    whole, _, _ = _free_lengths_hunt(exact, "fake_variant_exact", seed, fresh_lengths=False)
    assert free.status == whole.status == "pass"
    assert not free_memo.lengths_free, (free_memo.costs, free_memo.counts)
    assert free_memo.costs.relength + free_memo.costs.relength_refused >= NEW_SEEN
    assert free.stats.compiles <= 1.5 * whole.stats.compiles + NEW_SEEN, (
        free.stats.compiles,
        whole.stats.compiles,
    )
    assert free.examples >= 0.8 * whole.examples, (free.examples, whole.examples)


def test_a_kernel_failing_everywhere_still_reuses_its_variants(exact):
    """A kernel whose bug every case reaches, its bug known (a campaign's slice after the
    finding): failing structures are not offered for reuse as they
    are, but their variants are, with fresh lengths; over the compile share the hunt runs its
    examples on them instead of exploring new structures that are refused (an H200 campaign's
    GLA mutant: 17 examples, 5,235 refused)."""
    from fuzz.failures import CLASSES

    result, memo, shapes = _free_lengths_hunt(exact, "fake_variant_always", 0, known=CLASSES)
    assert result.examples == 300, dict(result.events)
    assert sum(result.known_hits.values()) == 300
    assert memo.counts["relengthed"] > 100, memo.counts
    assert result.events["rejected: would compile"] < 100, dict(result.events)
    assert len(shapes) > 50


def test_a_kernel_failing_everywhere_whose_lengths_compile_reuses_its_structures_whole(exact):
    """As above, where fresh lengths are not drawn (they compile: a Pallas kernel's shape
    buckets): over the compile share its failing structures are reused whole, values fresh,
    rather than explore structures that are each refused (a Pallas pair of an H200 campaign,
    its planted bug reached by most cases, checked 114 examples and refused 7,056)."""
    from fuzz.failures import CLASSES

    result, memo, _ = _free_lengths_hunt(
        exact, "fake_variant_always", 0, fresh_lengths=False, known=CLASSES
    )
    assert result.examples == 300, dict(result.events)
    assert memo.counts["reused"] > 100 and memo.counts["relengthed"] == 0, memo.counts
    assert result.events["rejected: would compile"] < 100, dict(result.events)


def _clear_fakes():
    mod = _plugin_module()
    for registry in (
        mod.EXACT_COMPILES,
        mod.EXACT_CALLS,
        mod.VARIANT_COMPILES,
        mod.VARIANT_CALLS,
        mod.BUCKET_COMPILES,
    ):
        registry.clear()
    for launched in (mod._exact, mod._variants, mod._buckets):
        launched.clear()
    return mod


@pytest.mark.parametrize("seed", range(2))
def test_fresh_lengths_turned_off_come_back_once_they_stop_compiling(exact, seed):
    """A memo that judged fresh lengths to compile keeps measuring them on a few reuses, and
    those reach the launch even over the compile share: refused before it, on the memo's own
    prediction that new structures compile, they were judged as compiling, and the lengths of
    a GPU campaign's Pallas attention pairs stayed off (3% of their examples had a second key
    tile, 29% on Triton). Here lengths compile nothing, so they come back on."""
    _, profile = exact
    _clear_fakes()
    memo = StructureMemo(target_share=0.25, seed=seed)
    memo.explore = 1.0  # launch (compile) variants first, as a warm-up would
    hunt(get("fake_variant"), "fake-compiled",
         dataclasses.replace(profile, reuse_share=0.25, compile_share=None),
         seed=seed, database=None, memo=memo, max_examples=40)  # fmt: skip
    memo.explore = None
    for _ in range(20):  # judged to compile (elsewhere, earlier)
        memo._judge_lengths(None)
    assert not memo.lengths_free and memo.new_would_compile()
    before = memo.counts["relengthed"]
    result = hunt(get("fake_variant"), "fake-compiled",
                  dataclasses.replace(profile, reuse_share=0.25, compile_share=0.25),
                  seed=seed + 1, database=None, memo=memo, max_examples=300,
                  compile_spent=(100.0, 110.0))  # fmt: skip
    assert result.status == "pass" and result.examples == 300
    assert memo.lengths_free, (memo.costs, memo.counts)
    assert memo.counts["relengthed"] - before > 60, memo.counts


@pytest.mark.parametrize("seed", range(2))
def test_what_a_derived_launch_compiles_is_not_held_against_fresh_lengths(exact, seed):
    """Only the case's own launches tell whether its lengths compile: a property that runs the
    case at other compile-time choices (GLA's runs at every other chunk size) compiles per
    variant whatever the lengths, and counted with them it turned the fresh lengths of an H100
    campaign's Triton GLA pairs off."""
    _, profile = exact
    _clear_fakes()
    memo = StructureMemo(target_share=0.25, seed=seed)
    result = hunt(get("fake_variant_derived"), "fake-compiled",
                  dataclasses.replace(profile, reuse_share=0.25, compile_share=None),
                  seed=seed, database=None, memo=memo, max_examples=200)  # fmt: skip
    assert result.status == "pass" and result.examples == 200
    # Relengthed examples compiled (their derived launches), their own launches nothing.
    assert memo.costs.relength >= NEW_SEEN and memo.costs.relength_compiling == 0, memo.costs
    assert memo.lengths_free and memo.counts["relengthed"] > 50, memo.counts


def _worker_config(tmp_path, profile):
    """A campaign worker's configuration for ``profile``, reusing structures, with a compile
    share of 25%."""
    from fuzz.campaign.messages import WorkerConfig
    from fuzz.profiles import HuntOptions

    options = HuntOptions.of(dataclasses.replace(profile, reuse_share=0.25, compile_share=0.25))
    return WorkerConfig(
        slot=0,
        plugins=[],
        options=options,
        repro_dir=str(tmp_path / "repro"),
        inflight=str(tmp_path / "inflight"),
        log=str(tmp_path / "log"),
    )


def _warm_up(tmp_path, profile, target, *, examples, seed=3):
    """A compile worker's warm-up slice of ``target`` (fake-compiled): its summary and memo."""
    from fuzz.campaign import worker

    config = _worker_config(tmp_path, profile)
    sent = []
    task = _warm_up_plan(target, seed=seed, max_examples=examples, quiet=10**6)
    worker._MEMOS.clear()
    worker._hunt(types.SimpleNamespace(send=sent.append), config, None,
                 types.SimpleNamespace(value=0.0), task)  # fmt: skip
    memo = worker._MEMOS.pop((target, "fake-compiled"))
    worker._MEMOS.clear()
    return _done(sent), memo


def test_a_warm_up_compiles_launched_variants_at_fresh_lengths_where_lengths_compile(
    exact, tmp_path
):
    """A kernel compiled per variant and shape bucket (a Pallas kernel): a third of a warm-up's
    examples reuse a variant it launched with fresh lengths, compiling its other buckets ahead,
    and the fuzzing worker that takes its structures in then runs most of its reuses with fresh
    lengths without compiling. Explored only, the warm-up compiled each variant at one bucket."""
    _, profile = exact
    mod = _clear_fakes()
    summary, warm = _warm_up(tmp_path, profile, "fake_variant_bucket", examples=100)
    assert summary["examples"] == 100
    # Of the structures the memo chose (Hypothesis's own variations aside), about a third.
    relengthed, chosen = warm.counts["relengthed"], warm.counts["explored"] + warm.counts["reused"]
    assert 0.2 * chosen <= relengthed <= 0.5 * chosen, warm.counts
    per_variant: dict[int, set[int]] = {}
    for v, b in mod.BUCKET_COMPILES:
        per_variant.setdefault(v, set()).add(b)
    assert sum(len(b) - 1 for b in per_variant.values()) >= 8, per_variant
    assert warm.warm_relength() > 0  # lengths compile here: the next warm-up goes on
    # The fuzzing worker (same caches): reuses with fresh lengths mostly launch compiled buckets.
    fuzz = StructureMemo(target_share=0.25, seed=5)
    fuzz.take_in(summary["structures"])
    compiled_before = len(mod.BUCKET_COMPILES)
    result = hunt(get("fake_variant_bucket"), "fake-compiled",
                  dataclasses.replace(profile, reuse_share=0.25, compile_share=0.25),
                  seed=11, database=None, memo=fuzz, max_examples=200,
                  compile_spent=(0.0, 20.0))  # fmt: skip
    assert result.examples == 200
    assert fuzz.counts["relengthed"] > 50, (fuzz.counts, fuzz.costs)
    assert len(mod.BUCKET_COMPILES) - compiled_before < 0.2 * fuzz.counts["relengthed"]
    # Where a reuse's new lengths compiled, the events name what (the kernel a length selects).
    named = {k: n for k, n in result.events.items() if k.startswith("lengths ")}
    assert set(named) <= {"lengths compiled: fake_bucket", "lengths refused: fake_bucket"}, named
    assert 0 < sum(named.values()) <= fuzz.costs.relength_compiling + fuzz.costs.relength_refused


def test_a_warm_up_stops_drawing_fresh_lengths_where_they_compile_nothing(exact, tmp_path):
    """Where fresh lengths compile nothing (the project's Triton kernels), the warm-up measures it
    on its first few reuses and then explores only: its time goes to variants not compiled."""
    from strategies.reuse import NEW_SEEN

    _, profile = exact
    _clear_fakes()
    summary, warm = _warm_up(tmp_path, profile, "fake_variant", examples=80)
    assert summary["examples"] == 80
    assert warm.warm_relength() == 0.0
    assert NEW_SEEN <= warm.counts["relengthed"] <= 3 * NEW_SEEN, warm.counts


def test_a_twin_launch_that_would_compile_is_spared_not_the_example(exact):
    """Over the compile share, the differential's launch on the interpreted twin (Pallas
    interpret mode compiles an XLA program per new shape) is skipped like a derived launch:
    it refused whole examples of a compiled Pallas pair whose own kernel was compiled, and
    those refusals were judged as fresh lengths that compile."""
    import numpy as np

    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.properties import check_case

    mod = _clear_fakes()
    mod.TWIN_COMPILES.clear()
    mod._twin_shapes.clear()
    target, backend = get("fake_exact_twin_compiles"), get_backend("fake-compiled")
    case = Case({"x": np.ones((3, 5), np.float32)}, {"dtype": "float32"}, {"seed": 0})
    first = check_case(target, backend, case, differential=True, params={"backend-agreement": 0})
    assert first.finding is None and mod.TWIN_COMPILES == [(3, 5)]
    other = case.replace(inputs={"x": np.ones((4, 5), np.float32)})
    mod._exact.add((4, 5))  # its own kernel compiled, its twin's program not
    spared = check_case(target, backend, other, differential=True, spare_derived=True,
                        params={"backend-agreement": 0})  # fmt: skip
    assert spared.finding is None and spared.spared == ["backend-agreement"]
    assert mod.TWIN_COMPILES == [(3, 5)]
    # Not spared: the twin compiles and is compared.
    ran = check_case(target, backend, other, differential=True, params={"backend-agreement": 0})
    assert ran.finding is None and ran.spared == [] and mod.TWIN_COMPILES[-1] == (4, 5)


def test_a_twin_that_declines_the_case_skips_the_differential(exact):
    """A kernel its twin declines (a compiled Pallas kernel's block limits, run beside its
    interpreted form under the gpu profile) skips the differential for that example: the twin's
    launch has no outputs to compare, and reading them was a harness error (``KeyError``) that
    ended the pair."""
    import numpy as np

    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.properties import check_case

    _clear_fakes()
    target, backend = get("fake_twin_declines"), get_backend("fake")
    case = Case({"x": np.ones((3, 5), np.float32)}, {"dtype": "float32"}, {"seed": 0})
    out = check_case(target, backend, case, differential=True, params={"backend-agreement": 0})
    assert out.finding is None
    assert out.declined == ["no compiled kernel for this shape (backend-agreement)"], out.declined
