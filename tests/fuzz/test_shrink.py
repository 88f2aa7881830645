"""Shrinking a compiled backend's finding where it is cheap (``fuzz.shrink``), with a fake
compiled backend that pays a compile per shape bucket (``fake_targets.slow_kernel``)."""

import dataclasses

import numpy as np
import pytest

from fuzz.engine import hunt
from fuzz.target import get


@pytest.fixture
def compiled_profile(fake_profile):
    return dataclasses.replace(fake_profile, backends=("fake-compiled",), max_examples=100)


def _plugin_module():
    import sys

    return next(m for n, m in sys.modules.items() if n.startswith("fuzz_plugin_fake_targets"))


@pytest.mark.parametrize("seed", range(3))
def test_a_failure_that_reproduces_in_the_interpreter_is_shrunk_there(
    fake_plugin, compiled_profile, tmp_path, seed
):
    mod = _plugin_module()
    result = hunt(
        get("fake_slow_nan"),
        "fake-compiled",
        compiled_profile,
        seed=seed,
        database=None,
        repro_dir=tmp_path,
    )
    found = result.found["nan"]
    assert found.shrink_path == "interpreter", found.shrink_notes
    assert any("fake said: nan (reproduced)" in n for n in found.shrink_notes), found.shrink_notes
    assert found.case.inputs["x"].shape == (1, 5)  # the least that fails
    assert found.final
    assert "fake-compiled" in found.reproducer.name
    # The search compiled what it met; confirming the minimal case compiles its bucket at most.
    after_search = [k for k in mod.COMPILES if k[0] == "nan"]
    assert len(after_search) <= 8


@pytest.mark.parametrize("seed", range(3))
def test_a_compiled_only_failure_is_shrunk_on_the_compiled_backend_through_compiled_variants(
    fake_plugin, compiled_profile, seed
):
    mod = _plugin_module()
    mod.COMPILES.clear()
    mod._compiled.clear()
    result = hunt(
        get("fake_slow_compiled-only"), "fake-compiled", compiled_profile, seed=seed, database=None
    )
    found = result.found["accuracy"]
    assert found.shrink_path == "compiled", found.shrink_notes
    assert any("fake said: passes" in n for n in found.shrink_notes), found.shrink_notes
    assert found.case.inputs["x"].shape == (2, 1), found.case
    # Compiled variants were tried first: steps to new variants were rejected before compiling.
    assert result.events["shrink: rejected: would compile"] > 0
    only_compiled = next(n for n in found.shrink_notes if "compiled variants only" in n)
    assert " 0 compiles" in only_compiled, found.shrink_notes


def test_a_compiled_only_failure_leaves_new_variants_to_a_compile_worker(
    fake_plugin, compiled_profile, monkeypatch
):
    """The compile ladder. In a campaign with compile workers (``HuntOptions.compile_ladder``)
    a compiled-only failure is shrunk on the fuzzing path through compiled variants only: the
    steps to new variants, each a compile, are left to a compile worker (``Found.ladder``, its
    record keeping its choices). That worker's slice resumes it (``Resume.ladder``, a hunt of no
    search: ``max_examples=0``) in a process that has compiled nothing, and compiles what the
    steps need, down to the least that fails; its example replaces the row (``resumes``)."""
    from hypothesis import Phase

    from fuzz import shrink
    from fuzz.engine import Hooks, Stage
    from fuzz.profiles import HuntOptions
    from fuzz.results import encode_choices
    from fuzz.signatures import Resume

    mod = _plugin_module()
    mod.COMPILES.clear()
    mod._compiled.clear()
    monkeypatch.setattr(shrink, "SMALL_ENOUGH", 0)  # (every case is left to the ladder)
    target = get("fake_slow_compiled-only")
    options = dataclasses.replace(HuntOptions.of(compiled_profile), compile_ladder=True)
    result = hunt(target, "fake-compiled", options, seed=0, database=None)
    found = result.found["accuracy"]
    assert found.shrink_path == "compiled" and found.ladder and found.final, found.shrink_notes
    assert not any("any variant" in n for n in found.shrink_notes), found.shrink_notes
    assert found.shrink_notes[-1].startswith("smaller variants left to a compile worker")
    rec = found.as_dict()
    assert rec["ladder"] and rec["shrunk"] and rec["choices"]
    # Without compile workers the same failure takes both steps on the fuzzing path.
    plain = hunt(target, "fake-compiled", compiled_profile, seed=0, database=None)
    assert not plain.found["accuracy"].ladder
    assert "ladder" not in plain.found["accuracy"].as_dict()

    # A compile worker's slice, from a large failing example (a search that did not shrink).
    unshrunk = dataclasses.replace(options, interpreter_shrink=False)
    big = hunt(
        target,
        "fake-compiled",
        unshrunk,
        seed=1,
        database=None,
        stage=Stage(phases=(Phase.generate,)),
    ).found["accuracy"]
    assert big.case.size > 2 and big.choices
    mod._compiled.clear()  # (a fresh process: nothing compiled in it)
    before = len(mod.COMPILES)
    entry = Resume(big.key, encode_choices(big.choices), None, "7:0:k", ladder=True, notes=("a",))
    got = []
    run = hunt(
        target,
        "fake-compiled",
        dataclasses.replace(options, compile_share=None),
        max_examples=0,
        database=None,
        hard_limit=120.0,
        resume=[entry],
        hooks=Hooks(on_found=lambda _, f: got.append(f)),
    )
    assert run.stopped == "resumed" and run.examples == 0 and run.error is None
    [small] = got
    assert small.resumes == "7:0:k" and small.final and not small.ladder
    assert small.case.inputs["x"].shape == (2, 1), small.case
    assert small.shrink_notes[0] == "a" and "on a compile worker" in small.shrink_notes[-1]
    assert len(mod.COMPILES) > before  # the variants its steps needed, compiled there
    # Its time run out before its shrinking ended: still the ladder's, from where it got to
    # (another compile worker goes on: ``BugLedger.requeue`` takes its choices).
    mod._compiled.clear()
    monkeypatch.setattr(mod, "COMPILE_SECONDS", 0.5)  # (its 1 s holds two compiles at most)
    rushed = []
    hunt(
        target,
        "fake-compiled",
        dataclasses.replace(options, compile_share=None, shrink_seconds=0.001),
        max_examples=0,
        database=None,
        hard_limit=120.0,
        resume=[entry],
        hooks=Hooks(on_found=lambda _, f: rushed.append(f)),
    )
    [cut] = rushed
    assert cut.ladder and cut.as_dict()["choices"], cut.shrink_notes
    assert cut.shrink_notes[-1].endswith("(its time ran out: another goes on)")


def test_a_failure_whose_shrink_time_ran_out_is_left_to_a_compile_worker(
    fake_plugin, compiled_profile, monkeypatch
):
    """In a campaign with compile workers, a failure still over ``SMALL_ENOUGH`` elements when
    its shrink time ran out is left to them whatever its path (here no time was left for the
    interpreter): JAX's ``mha_varlen`` kept a row of 65,536 elements on an H200 whose cut
    stages took the time. Not one whose shrinking ended in time."""
    from fuzz import shrink
    from fuzz.profiles import HuntOptions

    monkeypatch.setattr(shrink, "SMALL_ENOUGH", 0)
    target = get("fake_slow_nan")
    options = dataclasses.replace(HuntOptions.of(compiled_profile), compile_ladder=True)
    rushed = dataclasses.replace(options, shrink_seconds=0.001)
    found = hunt(target, "fake-compiled", rushed, seed=0, database=None).found["nan"]
    assert found.ladder and found.case.size > 16, found.shrink_notes
    assert "when the shrink time here ran out" in found.shrink_notes[-1]
    assert found.as_dict()["ladder"] and found.as_dict()["choices"]
    timely = hunt(target, "fake-compiled", options, seed=0, database=None).found["nan"]
    assert timely.shrink_path == "interpreter" and not timely.ladder, timely.shrink_notes


def test_a_case_too_costly_for_the_interpreter_is_cut_on_the_compiled_backend_first(
    fake_plugin, compiled_profile
):
    profile = dataclasses.replace(compiled_profile, interpreter_max_cost=8.0)
    result = hunt(get("fake_slow_nan"), "fake-compiled", profile, seed=0, database=None)
    found = result.found["nan"]
    first = next(n for n in found.shrink_notes)
    assert first.startswith("cut on fake-compiled"), found.shrink_notes
    assert found.shrink_path == "interpreter"
    assert found.case.inputs["x"].shape == (1, 5)


def test_a_faster_interpreter_takes_costlier_cases(fake_plugin, compiled_profile, monkeypatch):
    """The profile's cost bound is in Triton-interpreter units: a twin that runs a unit faster
    (``Backend.cost_speedup``: Pallas's interpreter, which XLA compiles) takes the same case
    without compiling new variants on the compiled backend to cut it."""
    import importlib

    backends = importlib.import_module("fuzz.backends")  # (fuzz.backends is also a function)
    fast = dataclasses.replace(backends.get_backend("fake"), cost_speedup=1000.0)
    monkeypatch.setitem(backends._BACKENDS, "fake", fast)
    profile = dataclasses.replace(compiled_profile, interpreter_max_cost=8.0)
    result = hunt(get("fake_slow_nan"), "fake-compiled", profile, seed=0, database=None)
    found = result.found["nan"]
    assert not any("through any variant" in n for n in found.shrink_notes), found.shrink_notes
    assert found.shrink_path == "interpreter"
    assert found.case.inputs["x"].shape == (1, 5)


def test_an_interpreter_that_compiles_per_shape_shrinks_past_the_compile_share(
    fake_plugin, compiled_profile
):
    """Pallas's interpret mode has XLA compile a program per new shape, and every shrink step
    is a new shape: the compile share that keeps a search fuzzing refused them all, and a GPU
    finding of 458,752 elements came back from the interpreter unshrunk. A shrink stage's
    compiles are what shrinking costs there, bounded by its time."""
    mod = _plugin_module()
    mod.INTERPRETER_COMPILES.clear()
    mod.interpreter_compiles = True
    # The compiled kernel's buckets are compiled already (as a warm-up leaves them): the search
    # reaches the bug (5 columns or more) whichever bucket its first example drew. Otherwise,
    # past a 5% share after one compile, the search fuzzes only the bucket of its first example,
    # which Hypothesis's local-constants cache (.hypothesis/constants) changes between runs.
    before = set(mod._compiled)
    mod._compiled.update(("nan", 1 << b) for b in range(7))
    try:
        profile = dataclasses.replace(compiled_profile, compile_share=0.05)
        result = hunt(get("fake_slow_nan"), "fake-compiled", profile, seed=0, database=None)
    finally:
        mod.interpreter_compiles = False
        mod._compiled.intersection_update(before)
    found = result.found["nan"]
    assert found.shrink_path == "interpreter", found.shrink_notes
    assert found.case.inputs["x"].shape == (1, 5), found.shrink_notes
    assert len(mod.INTERPRETER_COMPILES) > 2  # it compiled as it shrank


def test_a_faster_interpreter_still_shrinks_what_compiled_variants_can_cut(
    fake_plugin, compiled_profile, monkeypatch
):
    """A twin that takes costlier cases (``Backend.cost_speedup``) is no reason to skip what the
    compiled backend shrinks for nothing: its compiled variants cut the case to the plain bound
    first (Pallas's interpreter pays a compile per shape it shrinks through)."""
    import importlib

    backends = importlib.import_module("fuzz.backends")
    fast = dataclasses.replace(backends.get_backend("fake"), cost_speedup=1000.0)
    monkeypatch.setitem(backends._BACKENDS, "fake", fast)
    profile = dataclasses.replace(compiled_profile, interpreter_max_cost=8.0)
    result = hunt(get("fake_slow_nan"), "fake-compiled", profile, seed=1, database=None)
    found = result.found["nan"]
    assert found.shrink_notes[0].startswith("cut on fake-compiled through compiled variants")
    assert found.shrink_path == "interpreter"
    assert found.case.inputs["x"].shape == (1, 5)


def test_interpreter_backends_shrink_in_place(fake_plugin, fake_profile):
    """On an interpreter nothing changes: Hypothesis shrinks the failure where it was found."""
    result = hunt(get("fake_slow_nan"), "fake", fake_profile, seed=0, database=None)
    found = result.found["nan"]
    assert found.shrink_path == "" and found.final
    assert found.case.inputs["x"].shape == (1, 5)


def test_a_run_stays_within_its_compile_share(fake_plugin, compiled_profile):
    """Past the profile's compile share, examples that would compile a new variant are drawn
    again instead (rejected before the compiler runs): the run's compile time stays near it."""
    mod = _plugin_module()
    mod._compiled.clear()
    # A compile of half a second, as a small GPU kernel's: the share allows about one more after
    # the first in 300 examples even on a machine busy enough to make them ten times slower.
    saved, mod.COMPILE_SECONDS = mod.COMPILE_SECONDS, 0.5
    profile = dataclasses.replace(compiled_profile, compile_share=0.05, interpreter_shrink=False)
    result = hunt(
        get("fake_slow_compiled-only"), "fake", profile, seed=0, database=None, max_examples=300
    )
    assert result.stats.compiles == 0  # the interpreter compiles nothing
    result = hunt(
        get("fake_slow_nan"),
        "fake-compiled",
        profile,
        seed=1,
        database=None,
        max_examples=300,
        known={"nan"},
    )
    stats = result.stats
    assert result.events["rejected: would compile"] > 0
    # One compile (the first) is always allowed; after it the share is kept.
    assert stats.compile_seconds <= 0.05 * result.seconds + 2 * mod.COMPILE_SECONDS + 0.01
    unlimited = dataclasses.replace(profile, compile_share=None)
    mod._compiled.clear()
    free = hunt(
        get("fake_slow_nan"),
        "fake-compiled",
        unlimited,
        seed=1,
        database=None,
        max_examples=300,
        known={"nan"},
    )
    mod.COMPILE_SECONDS = saved
    assert free.stats.compiles > stats.compiles


def test_every_target_accepts_its_own_narrowing():
    """Each registered target's strategy takes the compile-time choices of its variant space: a
    reformulation or mutant draws from its real target's space, not its family's (the decode
    reformulation of family ``attention`` once got the dense kernel's ``block_pairs`` under the
    gpu profile, and every run of it failed before its first example)."""
    from fuzz.campaign.worker import checked_strategy
    from fuzz.families import family_of
    from fuzz.narrowing import run_narrowing, strategy_keywords
    from fuzz.profiles import get_profile
    from fuzz.target import KNOWN_FAMILIES, all_targets

    gpu = get_profile("gpu")
    for real in all_targets():
        if real.family not in KNOWN_FAMILIES:  # a test's fake target registered in this process
            continue
        # as a hunt sees it, and as a campaign worker does (its strategy checks what is drawn)
        for target in (real, checked_strategy(real)):
            assert family_of(target) is family_of(real) is not None, target.name
            narrowing = run_narrowing(target, gpu, 0)
            assert narrowing, target.name
            # (raises TypeError for a keyword it lacks)
            target.strategy(gpu.scale, **strategy_keywords(narrowing))
    decode = get("attention_decode_lse_merge")
    assert family_of(decode) is family_of(get("attention_decode"))


def test_a_campaign_worker_hunts_a_narrowed_run():
    """The campaign worker's path with the gpu profile's narrowing, on an interpreter: every
    gpu-profile campaign once stopped at its first example with a harness error (the worker's
    checking wrapper took no narrowing; found on an H100)."""
    from fuzz.campaign.worker import checked_strategy
    from fuzz.profiles import get_profile

    narrowed = dataclasses.replace(get_profile("ci"), variant_choices=1)
    target = checked_strategy(get("softmax"))
    result = hunt(target, "triton-interpret", narrowed, seed=3, database=None, max_examples=4)
    assert result.error is None and result.examples >= 4
    assert result.variants and all(len(v) == 1 for v in result.variants.values())


def test_a_run_draws_its_compile_time_choices_from_a_few_values(fake_plugin):
    """The gpu profile narrows each run's dtype, tiles and head dims to a few values, the
    simplest always among them; a seeded run picks the same again."""
    from fuzz.narrowing import run_narrowing
    from fuzz.profiles import get_profile

    gpu = get_profile("gpu")
    target = get("attention")
    a = run_narrowing(target, gpu, 7)
    assert a == run_narrowing(target, gpu, 7)
    assert set(a) == {"dtypes", "block_pairs", "head_dims"}
    assert all(len(v) == 2 for v in a.values())
    assert a["dtypes"][0] == "float32" and a["block_pairs"][0] == (64, 64)
    assert a["head_dims"][0] == 16
    assert any(run_narrowing(target, gpu, s) != a for s in range(8))
    assert run_narrowing(target, get_profile("ci"), 7) == {}
    wide = run_narrowing(target, gpu, 7, widen=1)
    assert all(wide[d][:2] == a[d] and len(wide[d]) == 3 for d in a)
    with pytest.raises(ValueError, match="widen=-1 must be an integer >= 0"):
        run_narrowing(target, gpu, 7, widen=-1)
    result = hunt(
        target,
        "triton-interpret",
        dataclasses.replace(get_profile("ci"), variant_choices=1),
        seed=3,
        database=None,
        max_examples=5,
    )
    assert result.variants == {"dtypes": ["float32"], "block_pairs": [(16, 16)], "head_dims": [1]}


def test_an_interpreter_minimal_larger_than_its_start_is_not_taken(
    fake_plugin, compiled_profile, monkeypatch
):
    """Hypothesis orders examples by their choices, not their elements: an interpreter's minimal
    case can be larger than the compiled cut it started from (10,374 elements came back as
    122,880 on an H100). The smaller one stays."""
    from fuzz import shrink

    real_stage = shrink._Shrinker.stage

    def stage(self, backend, options, **kw):
        found, run = real_stage(self, backend, options, **kw)
        if backend.interpret and found is not None:  # the twin's answer, made larger
            x = np.zeros((7, 9), np.float32)
            found = dataclasses.replace(
                found, case=dataclasses.replace(found.case, inputs={"x": x})
            )
        return found, run

    monkeypatch.setattr(shrink._Shrinker, "stage", stage)
    profile = dataclasses.replace(compiled_profile, interpreter_max_cost=8.0)
    result = hunt(get("fake_slow_nan"), "fake-compiled", profile, seed=0, database=None)
    found = result.found["nan"]
    assert any("is larger than the one it started from" in n for n in found.shrink_notes), (
        found.shrink_notes
    )
    assert found.shrink_path == "compiled"
    assert found.case.inputs["x"].size <= 8  # the cut's, shrunk on on the compiled backend


@pytest.mark.parametrize("where", ["twin", "compiled"])
def test_a_bug_met_while_shrinking_another_is_reported_and_shrunk(fake_plugin, fake_profile, where):
    """A shrink stage shrinks one bug; another bug it meets on the way is reported and then
    shrunk as the search's own. Here the first failure reports its NaN (two rows); shrinking it
    meets one-row cases that fail with the error (two columns) alone. Met by a stage on the
    hunt's own backend, the error is streamed as first seen at once (a campaign's worker may be
    killed before the stage ends); met on the interpreter twin, its example is checked on the
    hunt's backend first. Counted as a hit of the NaN, the error was lost: the hunt found
    nothing more."""
    from fuzz.engine import Hooks

    profile = dataclasses.replace(fake_profile, backends=("fake-compiled",), max_examples=200)
    if where == "compiled":  # no case is cheap enough for the twin: shrunk compiled
        profile = dataclasses.replace(profile, interpreter_max_cost=1e-9)
    streamed = []

    def on_found(result, found):
        streamed.append((found.key, found.final, found.finding.details.get("met_on")))

    result = hunt(
        get("fake_nan_accuracy"),
        "fake-compiled",
        profile,
        database=None,
        seed=0,
        hooks=Hooks(on_found=on_found),
    )
    keys = [k for k, _, _ in streamed]
    assert keys[0].startswith("nan|")  # the search's bug, first seen
    nan_final = keys.index(keys[0], 1)  # ... and its minimal example
    met = next(i for i, k in enumerate(keys) if k.startswith("accuracy|"))
    if where == "compiled":
        assert met < nan_final and streamed[met][2] == "fake-compiled", streamed
    else:
        assert met > nan_final and streamed[met][2] == "fake", streamed
    assert sorted(result.classes) == ["accuracy", "nan"]
    (acc,) = result.of_class("accuracy")
    assert acc.final and acc.case.inputs["x"].shape == (1, 2)
    (nan,) = result.of_class("nan")
    assert nan.case.inputs["x"].shape == (2, 1)


def test_a_bug_met_on_the_twin_is_not_confirmed_past_the_hard_limit(
    fake_plugin, fake_profile, monkeypatch
):
    """Confirming a bug the interpreter twin met is a launch on the hunt's backend, a compile of
    the met example's variant: past the hunt's hard limit it ran into the campaign's kill (an
    H200 slice of JAX's mha was killed while it traced one). Past the limit the met bug is left
    to the pair's next slices, counted; the search's own bug stays as shrunk."""
    from fuzz import engine

    real_shrink, real_check = engine.shrink_compiled, engine.check_as
    shrunk, checked = [], []

    def shrink_then_the_limit_passes(*args, **kwargs):
        out = real_shrink(*args, **kwargs)
        shrunk.append(out.key)
        return out

    def check_as(target, backend, options, f, key):
        checked.append(key)
        return real_check(target, backend, options, f, key)

    monkeypatch.setattr(engine, "shrink_compiled", shrink_then_the_limit_passes)
    monkeypatch.setattr(engine._Hunter, "shrink_hard_at", lambda self: 0.0 if shrunk else None)
    monkeypatch.setattr(engine, "check_as", check_as)
    profile = dataclasses.replace(fake_profile, backends=("fake-compiled",), max_examples=200)
    result = hunt(get("fake_nan_accuracy"), "fake-compiled", profile, database=None, seed=0)
    assert shrunk and shrunk[0].startswith("nan|")
    assert not any(k.startswith("accuracy|") for k in checked), checked
    assert result.events["met while shrinking, not confirmed: past the hard limit"] == 1
    assert sorted(result.classes) == ["nan"]


def test_a_watched_hunt_hears_of_its_shrink_stages_examples_and_compiles(
    fake_plugin, compiled_profile
):
    """A shrink stage is a hunt of its own: a campaign's worker heard nothing of its examples
    (no example in flight, no compile, no progress), its hard limit did not move with the
    stage's compiles, and the campaign killed slices of JAX's ``mha`` on an H200 that were
    shrinking within their own limits. The watched hunt's ``before_example`` runs before each
    stage example, and ``progress`` after it, with the compile seconds so far, the running
    stage's counted."""
    from fuzz.engine import Hooks, in_stage

    mod = _plugin_module()
    mod.COMPILES.clear()  # (what this process compiled before is no compile now)
    mod._compiled.clear()
    heard, staged = [], []
    hooks = Hooks(
        before_example=lambda case: heard.append(("before", staged.append(in_stage()))),
        after_example=lambda result: heard.append(("after", result.stats.compile_seconds)),
        progress=lambda examples, compiled: heard.append(("progress", compiled)),
    )
    result = hunt(
        get("fake_slow_compiled-only"),
        "fake-compiled",
        compiled_profile,
        seed=0,
        database=None,
        hooks=hooks,
    )
    assert result.found["accuracy"].shrink_path == "compiled"
    kinds = [k for k, _ in heard]
    # Every example on the hunt's backend is announced (not those of a stage on the twin
    # interpreter: a death there is no example of this backend); every stage's is heard after.
    assert (
        kinds.count("after")
        < kinds.count("before")
        < kinds.count("after") + kinds.count("progress")
    )
    progress = [c for k, c in heard if k == "progress"]
    assert progress == sorted(progress) and progress[-1] <= result.stats.compile_seconds + 1e-6
    last_after = max(c for k, c in heard if k == "after")
    assert progress[-1] > last_after  # the stages' compiles, heard while they ran
    # A stage's example says so (a warm-up slice that has compiled enough still shrinks).
    assert staged.count(True) >= 1 and staged.count(False) >= 1
    # A stage example's drawn parameters are told to the watched hunt's hook too (a worker
    # dying in it leaves them with its case).
    from fuzz.backends import get_backend
    from fuzz.engine import _Hunter

    stage, watched = object.__new__(_Hunter), object.__new__(_Hunter)
    told = Hooks(on_draw=lambda name, value: None)
    stage.hooks, stage.outer, watched.hooks = Hooks(), watched, told
    stage.b = watched.b = get_backend("fake-compiled")
    assert stage._on_draw() is told.on_draw
    stage.b = get_backend("fake")  # (a stage on the twin: its examples are not this backend's)
    assert stage._on_draw() is None
    assert not in_stage()


def test_a_warmed_up_slice_ends_its_search_not_the_shrinking_of_what_it_found(
    tmp_path, monkeypatch
):
    """A compile worker's warm-up slice ends before its next example once it has compiled
    enough; the examples of the shrink stages that follow (now heard by the slice's hooks) are
    no such examples: what the warm-up found is still shrunk, each stage example persisted and
    on the example clock, then off it with the slice's progress."""
    import types

    import numpy as np

    from fuzz import engine, hypothesis_internals
    from fuzz.campaign import messages as M
    from fuzz.campaign import slice_run
    from fuzz.case import Case

    monkeypatch.setattr(hypothesis_internals, "is_final_replay", lambda: False)
    sent = []
    run = object.__new__(slice_run.SliceRun)
    run.conn = types.SimpleNamespace(send=sent.append)
    run.config = types.SimpleNamespace(inflight=str(tmp_path / "inflight"))
    run.started = types.SimpleNamespace(value=0.0)
    run.maps = types.SimpleNamespace(check=lambda: False)
    run.target, run.backend = types.SimpleNamespace(name="t"), types.SimpleNamespace(name="b")
    run.id, run.t0, run.last_progress, run.warmed = 7, 0.0, 0.0, True
    case = Case({"x": np.ones((1, 2), np.float32)}, {"dtype": "float32"})
    with pytest.raises(engine.OutOfTime):
        run.before_example(case)  # the search's next example
    token = engine._IN_STAGE.set(True)
    try:
        run.before_example(case)  # a shrink stage's
    finally:
        engine._IN_STAGE.reset(token)
    assert run.started.value > 0 and list(tmp_path.iterdir())
    run.progress(12, 3.5)
    assert run.started.value == 0.0
    assert sent == [M.Progress(7, 12, sent[0].seconds, 3.5)]


@pytest.mark.parametrize("seed", range(4))
def test_a_shrink_stage_does_not_walk_into_a_known_bug_of_the_same_key(
    fake_plugin, compiled_profile, seed
):
    """Two bugs of one class and output with independent triggers stay two: every shrink stage
    counts a known bug's examples as its hits, as the search does. The fake kernel's block is
    drawn first and shrinks toward the smaller one, which turns an example of the ``tall`` bug
    into one of both; a stage that took it as a failure went on into the known ``multi-tile``
    bug and reported it as this hunt's (seeds 2 and 3, before), and on an H200 the two-bug
    softmax's two rows came back as one."""
    from fuzz.signatures import Bug

    key = "accuracy|oracle|y|-"
    known = Bug(key, frozenset({"multi-tile"}), "known")
    profile = dataclasses.replace(compiled_profile, max_examples=200)
    target = get("fake_two_bugs_one_key")
    result = hunt(target, "fake-compiled", profile, seed=seed, database=None, known=[known])
    (found,) = result.found.values()
    assert found.key == key and found.shrink_path == "interpreter", found.shrink_notes
    assert sorted(found.triggers) == ["tall"], (found.triggers, found.case)
    assert found.case.inputs["x"].shape == (2, 1)


def test_the_interpreters_dots_are_exact_and_the_compiled_backends_are_not():
    from fuzz.backends import get_backend

    assert get_backend("triton-interpret").exact_dots and get_backend("pallas-interpret").exact_dots
    assert not get_backend("triton").exact_dots and not get_backend("pallas-gpu").exact_dots


def test_a_tf32_hint_is_taken_back_where_the_interpreter_fails_alike(
    fake_plugin, compiled_profile, monkeypatch
):
    """Every accuracy finding here carries the TF32 hint (``_tf32_hint`` made to say it): a
    compiled finding that reproduces on an interpreter whose fp32 dots are exact loses it (TF32
    is not its cause, and the message says so); one that fails only compiled keeps it."""
    import importlib

    from fuzz import properties
    from fuzz.target import _TARGETS, Target

    monkeypatch.setattr(properties, "_tf32_hint", lambda *a: properties.TF32_HINT)
    backends = importlib.import_module("fuzz.backends")
    exact = dataclasses.replace(backends.get_backend("fake"), exact_dots=True)
    monkeypatch.setitem(backends._BACKENDS, "fake", exact)
    mod = _plugin_module()
    base = mod.slow_kernel(None)

    def off_everywhere(inputs, params, *, out, interpret):
        res = base(inputs, params, out=out, interpret=interpret)
        if inputs["x"].shape[0] >= 2:
            res["y"][1, 0] += 1.0
        return res

    slow = get("fake_slow_compiled-only")
    both = dataclasses.replace(slow, name="fake_slow_both", kernels={"fake": off_everywhere})
    assert isinstance(both, Target)
    monkeypatch.setitem(_TARGETS, both.name, both)

    found = hunt(both, "fake-compiled", compiled_profile, seed=0, database=None).found["accuracy"]
    assert found.shrink_path == "interpreter", found.shrink_notes
    assert properties.TF32_HINT not in found.finding.message
    assert "fails alike on fake, whose fp32 dot products are exact" in found.finding.message
    assert found.finding.details["tf32_ruled_out"] == "fake"
    assert "likely_cause" not in found.finding.details

    only = hunt(slow, "fake-compiled", compiled_profile, seed=0, database=None).found["accuracy"]
    assert only.shrink_path == "compiled", only.shrink_notes
    assert only.finding.message.endswith(properties.TF32_HINT)
    assert only.finding.details["likely_cause"] == "tf32"


def test_an_interpreter_minimal_the_compiled_backend_does_not_confirm_is_kept_beside_it(
    fake_plugin, compiled_profile, monkeypatch, tmp_path
):
    """The twin shrinks the bug to a case the compiled backend runs without failing so (a read
    past the keys: NaN from the interpreter's poisoned padding, whatever lies there on a GPU):
    the compiled cut stays the row's example, and the twin's case is kept beside it with its
    reproducer, as the search over the twin's own variant space keeps one. A GPU campaign's NaN
    row of JAX's attention stayed at 1,572,864 elements, the twin's 6,144-element case dropped."""
    from fuzz import reproducer, shrink

    monkeypatch.setattr(shrink, "_confirm", lambda *a, **kw: None)
    # (and the compiled stages after it get no smaller: on the GPU, each smaller shape a compile)
    monkeypatch.setattr(shrink._Shrinker, "on_compiled", lambda self: None)
    profile = dataclasses.replace(compiled_profile, interpreter_max_cost=8.0)
    result = hunt(
        get("fake_slow_nan"), "fake-compiled", profile, seed=0, database=None, repro_dir=tmp_path
    )
    found = result.found["nan"]
    assert any("kept as fake's reproducer" in n for n in found.shrink_notes), found.shrink_notes
    assert found.shrink_path == "compiled"
    small = found.interpreted
    assert small is not None and found.interpreted_on == "fake", found.shrink_notes
    assert small.case.size < found.case.size
    record = found.as_dict()["interpreter_minimal"]
    assert record["backend"] == "fake" and record["case_size"] == small.case.size
    meta, data = reproducer.load(small.reproducer)
    assert meta["backend"] == "fake"
    assert reproducer.replay(meta, data).finding.cls == "nan"
