"""A compiled backend's finding shrunk past its search's narrowing: the twin interpreter searches
its own variant space for a smaller example of the same bug (``fuzz.shrink``'s
``_Shrinker.in_own_space``). On an H100 a mutant needing two key tiles stayed at 1,056 and
2,080 elements (tiles and head dims narrowed to 16), against 50 on the CPU."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest
from hypothesis import strategies as st

from fuzz.case import Case
from fuzz.compare import Tolerance
from fuzz.engine import hunt
from fuzz.failures import Unsupported
from fuzz.target import Search, Target, get, register

DECLINE_NARROW = [False]  # the compiled kernel declines columns that are not a multiple of 8


def _plugin():
    return next(m for n, m in sys.modules.items() if n.startswith("fuzz_plugin_fake_targets"))


def _widths_cases(scale: str, widths: tuple[int, ...] | None = None) -> st.SearchStrategy[Case]:
    """Columns are a multiple of a compile-time width (a narrowing dimension, as a GPU pair's
    tiles and head dims): at the interpreters' scale the simplest width is the smallest, at the
    GPU's a large one, as the attention family's head dims are 1 first and 16 first."""
    if widths is None:
        widths = (5, 96) if scale == "small" else (96, 5)

    @st.composite
    def build(draw):
        width = draw(st.sampled_from(widths))
        rows = draw(st.integers(1, 4))
        cols = width * draw(st.integers(1, 3))
        seed = draw(st.integers(0, 2**16))
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        return Case({"x": x}, {"dtype": "float32"}, {"seed": seed})

    return build()


def _kernel(base):
    def run(inputs, params, *, out, interpret):
        x = inputs["x"]
        if not interpret and DECLINE_NARROW[0] and x.shape[1] % 8:
            raise Unsupported("columns must be a multiple of 8 here")
        res = base(inputs, params, out=out, interpret=interpret)
        if x.shape[1] >= 5:
            res["y"][0, 4] = float("nan")
        return res

    return run


def _widths_target(name, description, kernel=_kernel, oracle=None, properties=()):
    """A fake target drawing ``_widths_cases``, registered once per session."""
    try:
        return get(name)
    except Exception:
        pass
    mod = _plugin()
    register(
        Target(
            name=name,
            family="fake",
            kernels={"fake": kernel(mod.make_kernel(None))},
            oracle=mod.oracle if oracle is None else oracle(mod.oracle),
            naive=mod.naive,
            strategy=_widths_cases,
            tolerance=Tolerance(rho=2.0, floor_ulps=4.0),
            search=Search(interpret_cost=lambda case: float(case.inputs["x"].shape[0])),
            properties=properties,
            description=description,
        )
    )
    return get(name)


@pytest.fixture
def wide_target(fake_plugin):
    return _widths_target(
        "fake_narrowed_nan",
        "fake target whose small failures need a width its narrowing leaves out",
    )


@pytest.fixture
def compiled_profile(fake_profile):
    return dataclasses.replace(
        fake_profile, backends=("fake-compiled",), max_examples=100, scale="large"
    )


def _found(target, profile, seed, tmp_path=None):
    result = hunt(
        target,
        "fake-compiled",
        profile,
        seed=seed,
        database=None,
        narrowing={"widths": (96,)},  # the search's compile-time choices: the simplest width
        repro_dir=tmp_path,
    )
    assert result.error is None, result.error
    return result.found["nan"]


@pytest.mark.parametrize("seed", range(3))
def test_the_twin_finds_the_bug_smaller_outside_the_narrowing_and_it_is_confirmed(
    wide_target, compiled_profile, seed
):
    DECLINE_NARROW[0] = False
    found = _found(wide_target, compiled_profile, seed)
    assert any("over its own variant space" in n for n in found.shrink_notes), found.shrink_notes
    assert found.shrink_path == "interpreter"
    assert found.case.inputs["x"].shape == (1, 5), found.shrink_notes  # not (1, 96)
    assert found.interpreted is None


@pytest.mark.parametrize("seed", range(2))
def test_a_smaller_case_the_compiled_kernel_declines_is_kept_beside_the_confirmed_one(
    wide_target, compiled_profile, seed, tmp_path
):
    DECLINE_NARROW[0] = True
    try:
        found = _found(wide_target, compiled_profile, seed, tmp_path)
    finally:
        DECLINE_NARROW[0] = False
    assert found.case.inputs["x"].shape == (1, 96), found.shrink_notes
    small = found.interpreted
    assert small is not None and found.interpreted_on == "fake", found.shrink_notes
    assert small.case.inputs["x"].shape == (1, 5)
    assert any("not confirmed on fake-compiled" in n for n in found.shrink_notes)
    record = found.as_dict()["interpreter_minimal"]
    assert record["case_size"] == 5 and record["backend"] == "fake"
    # Both reproducers are written; the interpreter's replays there.
    from fuzz import reproducer

    assert found.reproducer is not None and small.reproducer is not None
    meta, data = reproducer.load(small.reproducer)
    assert meta["backend"] == "fake"
    outcome = reproducer.replay(meta, data)
    assert outcome.finding is not None and outcome.finding.cls == "nan"


def test_a_small_enough_finding_is_not_searched_again(wide_target, compiled_profile):
    found = hunt(
        wide_target,
        "fake-compiled",
        compiled_profile,
        seed=0,
        database=None,
        narrowing={"widths": (5,)},
    ).found["nan"]
    assert found.case.inputs["x"].shape == (1, 5)
    assert not any("own variant space" in n for n in found.shrink_notes), found.shrink_notes


def test_a_real_mutant_narrowed_as_a_gpu_pair_shrinks_to_its_interpreter_bound(monkeypatch):
    """The project's own mutant that needs two key tiles, searched as a GPU host's interpreter
    pair is (its head dim and tiles narrowed to 16): the narrowed minimal case is over the
    mutant's shrink bound, and the hunt's own-space search (``fuzz.shrink.shrink_in_own_space``)
    brings it within, outside the narrowing."""
    import json
    from pathlib import Path

    from fuzz import shrink
    from fuzz.profiles import get_profile

    target = get("attention_mutant_no_rescale")
    ci = get_profile("ci")
    narrowing = {"head_dims": (16,), "block_pairs": ((16, 16),), "dtypes": ("float32",)}
    result = hunt(target, "triton-interpret", ci, database=None, narrowing=narrowing)
    found = min(result.of_class(target.expected_class), key=lambda f: f.case.size)
    # The GPU goal: at most twice the CPU campaign's reproducer (.ci/cpu-reproducer-sizes.json).
    sizes = Path(__file__).resolve().parents[2] / ".ci" / "cpu-reproducer-sizes.json"
    cpu = json.loads(sizes.read_text())["attention_mutant_no_rescale|triton-interpret"]
    notes = [n for n in found.shrink_notes if "over its own variant space" in n]
    assert notes, found.shrink_notes
    assert found.case.size <= 2 * cpu, (found.case, found.shrink_notes)
    assert found.case.size <= target.shrink_limit(found.case)
    assert found.finding.cls == target.expected_class and found.final
    assert found.case.params.get("head_dim", found.case.inputs["q"].shape[-1]) != 16
    # Without that search, the narrowing's floor: over twice the CPU size.
    monkeypatch.setattr("fuzz.engine.shrink_in_own_space", lambda target, b, o, f, **kw: f)
    bare = hunt(target, "triton-interpret", ci, database=None, narrowing=narrowing)
    first = min(bare.of_class(target.expected_class), key=lambda f: f.case.size)
    assert first.case.size > max(2 * cpu, shrink.SMALL_ENOUGH), first.case


def test_an_interpreter_pair_s_narrowed_finding_is_searched_again_in_its_own_space(
    wide_target, compiled_profile
):
    """An interpreter's own hunt under a narrowing (a GPU host's ``pallas-interpret`` pair: its
    head dims begin at 16): its minimal example is looked for again over the whole variant space, and the smaller one is
    the row, streamed again to the campaign; with no narrowing nothing more runs."""
    streamed = []
    from fuzz.engine import Hooks

    result = hunt(
        wide_target,
        "fake",
        compiled_profile,
        seed=0,
        database=None,
        narrowing={"widths": (96,)},
        hooks=Hooks(on_found=lambda r, f: streamed.append(f)),
    )
    assert result.error is None, result.error
    found = result.found["nan"]
    assert found.case.inputs["x"].shape == (1, 5), found.shrink_notes
    assert any("over its own variant space" in n for n in found.shrink_notes)
    finals = [f.case.inputs["x"].shape for f in streamed if f.final]
    assert finals[-1] == (1, 5) and (1, 96) in finals, finals
    plain = hunt(wide_target, "fake", compiled_profile, seed=0, database=None, narrowing={})
    assert not any("own variant" in n for n in plain.found["nan"].shrink_notes)


def test_a_case_too_costly_for_the_interpreter_is_still_looked_for_small_in_its_own_space(
    wide_target, compiled_profile
):
    """The compiled cut could not bring the case within the interpreter's cost (a GLA backward
    mutant stayed at 4,224 elements on an H100): the twin still searches its own space, and a
    small example confirmed on the compiled backend is the reproducer."""
    DECLINE_NARROW[0] = False
    profile = dataclasses.replace(compiled_profile, interpreter_max_cost=0.5)
    found = _found(wide_target, profile, 0)
    assert any("interpreter not tried" in n for n in found.shrink_notes), found.shrink_notes
    assert found.shrink_path == "interpreter", found.shrink_notes
    assert found.case.inputs["x"].shape == (1, 5)


def _row_mean_is_small(ctx, value):
    """A property of the target's own, checked after the oracle: row 0's mean stays under 10."""
    mean = float(np.mean(ctx.clean.outputs["y"][0]))
    if abs(mean) < 10.0:
        return None
    return ctx.finding("accuracy", "row-mean", f"row 0's mean is {mean:.3g}", output="y")


def _shifted_row(base):
    def run(inputs, params, *, out, interpret):
        res = base(inputs, params, out=out, interpret=interpret)
        res["y"][0] += 100.0  # row 0's mean is 100 off: the later property fails on every case
        return res

    return run


def _blind_oracle(oracle):
    """The oracle misses the bug on wide cases (columns a multiple of 96), as an fp64 oracle
    within its tolerance missed what a metamorphic property caught on an H100 (an attention
    mutant's rows-sum-to-one at 1,040 and 6,144 elements): there the later property fails alone,
    while a narrow case fails the oracle first, with the same class."""

    def run(case, device):
        y = oracle(case, device)["y"]
        if case.inputs["x"].shape[1] % 96 == 0:
            y = y.copy()
            y[0] += 100.0
        return {"y": y}

    return run


@pytest.fixture
def later_property_target(fake_plugin):
    from fuzz.properties import Property

    return _widths_target(
        "fake_later_property",
        "fake target whose wide cases fail a property after the oracle alone",
        kernel=_shifted_row,
        oracle=_blind_oracle,
        properties=(Property("row-mean", _row_mean_is_small),),
    )


@pytest.mark.parametrize("seed", range(2))
def test_a_bug_of_a_later_property_is_shrunk_where_the_oracle_fails_first(
    later_property_target, compiled_profile, seed
):
    """A compiled backend's finding of a property checked after the oracle: in the twin's own
    space the small cases fail the oracle first (same class, another key). The search for the
    bug's key checks on past that failure and takes the case where its property fails too, and
    the compiled backend confirms it."""
    result = hunt(
        later_property_target,
        "fake-compiled",
        compiled_profile,
        seed=seed,
        database=None,
        narrowing={"widths": (96,)},
    )
    assert result.error is None, result.error
    found = next(f for f in result.found.values() if f.key == "accuracy|row-mean|y|-")
    assert found.case.inputs["x"].shape == (1, 5), found.shrink_notes  # not (1, 96)
    assert found.shrink_path == "interpreter" and found.interpreted is None, found.shrink_notes
    assert found.finding.prop == "row-mean", found.finding


@pytest.mark.parametrize("narrowing, share", [({"widths": (96,)}, 1 / 3), ({}, 1 / 2)])
def test_the_cut_through_new_variants_leaves_the_own_space_search_its_time(
    wide_target, compiled_profile, narrowing, share
):
    """The compiled backend's cut through new variants (each a compile: 5 s for a GLA kernel on
    an H100) takes a third of the time left where the twin can search its own space after it,
    half where it cannot."""
    from fuzz import shrink
    from fuzz.backends import get_backend
    from fuzz.profiles import HuntOptions
    from fuzz.results import HuntResult

    found = _found(wide_target, compiled_profile, 0)
    big = dataclasses.replace(
        found, case=Case({"x": np.ones((40, 96), np.float32)}, {"dtype": "float32"}, {})
    )
    asked = []

    def hunt_stub(*args, stage, hard_limit, **kw):
        asked.append((stage.only_compiled, hard_limit))
        return HuntResult(wide_target.name, "fake-compiled", None, None)

    options = dataclasses.replace(HuntOptions.of(compiled_profile), shrink_seconds=60.0)
    s = shrink._Shrinker(
        wide_target,
        get_backend("fake-compiled"),
        options,
        big,
        hunt=hunt_stub,
        into=HuntResult(wide_target.name, "fake-compiled", None, None),
        hard_at=None,
        narrowing=narrowing,
    )
    s.max_cost = 2 * s.cut_cost  # the interpreter takes less than the case costs: both cuts run
    s.cut()
    (first, a), (second, b) = asked
    assert first and not second
    # Half of the 60 s left for the cut through compiled variants (it returned at once here),
    # then the share of what is left for the one through new variants.
    assert a == pytest.approx(30.0, abs=0.5) and b == pytest.approx(share * 60.0, abs=0.5)


def test_a_small_case_that_fails_a_known_bug_first_is_that_bugs_example(
    later_property_target, compiled_profile
):
    """Where the bug the later property's small case fails first (the oracle's) is known, the
    small case is that bug's example: the finding keeps its own case and says why (a plugin with
    a planted bug seen through two properties was reported twice with one 33-element case)."""
    from fuzz.signatures import Bug

    oracle_bug = Bug("accuracy|oracle|y|-", frozenset(), "0123456789ab")
    result = hunt(
        later_property_target,
        "fake-compiled",
        compiled_profile,
        seed=0,
        database=None,
        narrowing={"widths": (96,)},
        known=[oracle_bug],
    )
    assert result.error is None, result.error
    found = next(f for f in result.found.values() if f.key == "accuracy|row-mean|y|-")
    assert found.case.inputs["x"].shape[1] == 96, found.shrink_notes
    assert any("fails accuracy|oracle|y|- first" in n for n in found.shrink_notes)


def test_a_hunt_reports_its_shrink_stages_seconds_apart(wide_target, compiled_profile):
    """The seconds the shrink stages took after the search (compiling not counted) are the
    result's ``shrink_seconds``, which a campaign's floors leave out."""
    DECLINE_NARROW[0] = False
    result = hunt(
        wide_target,
        "fake-compiled",
        compiled_profile,
        seed=0,
        database=None,
        narrowing={"widths": (96,)},
    )
    assert result.found["nan"].shrink_notes  # it went through the shrink stages
    assert 0.0 < result.shrink_seconds <= result.seconds
    assert result.as_dict()["shrink_seconds"] == pytest.approx(result.shrink_seconds, abs=1e-3)
