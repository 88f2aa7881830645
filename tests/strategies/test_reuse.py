"""Structures that reuse compiled kernel variants (``strategies.reuse``): the combinator draws
exactly as its strategy without a memo; with one, it reuses launched structures at the memo's
rate, shrinking still reaches the fresh path's minimal example, and the explore rate follows the
measured costs."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, Phase, given, settings, target
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.errors import InvalidArgument

from strategies import attention_cases, jagged_softmax_cases, softmax_cases
from strategies.reuse import (
    NEW_SEEN,
    StructureMemo,
    current_memo,
    free_lengths,
    free_options,
    reusing,
    structure_key,
)
from strategies.simple_gla import simple_gla_bwd_cases, simple_gla_fwd_cases

# A structure of several choices (as a case's: dtype, tiles, lengths), and values after it.
STRUCTURE = st.tuples(st.integers(0, 100), st.integers(0, 100), st.sampled_from("abc"))


@st.composite
def toy_cases(draw, structure=STRUCTURE, key="toy"):
    s = draw(reusing(structure, key=key), label="structure")
    return s, draw(st.integers(0, 1000), label="value")


def _run(strategy, body, *, examples, seed=0, phases=(Phase.generate,)):
    """``body(value)`` on ``examples`` draws of ``strategy`` with a fixed seed."""

    def test(value):
        body(value)

    test = given(strategy)(test)
    test = settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
    )(test)
    hypothesis_seed(seed)(test)()


def _draws(strategy, examples=40, seed=0):
    """(value, choices) of each example drawn."""
    out = []
    _run(
        strategy,
        lambda v: out.append((repr(v), tuple(current_build_context().data.choices))),
        examples=examples,
        seed=seed,
    )
    return out


# Without a memo ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strategy",
    [
        STRUCTURE,
        st.lists(st.integers(0, 5), max_size=4),
        st.one_of(st.none(), st.floats(-1, 1), st.booleans()),
    ],
    ids=["tuple", "list", "one_of"],
)
def test_without_a_memo_reusing_draws_exactly_its_strategy(strategy):
    assert current_memo() is None
    assert _draws(reusing(strategy, key="k")) == _draws(strategy)


# With a memo -------------------------------------------------------------------------------------


def _mode(memo, before):
    """How the running example's structure was drawn: the memo count that moved since
    ``before`` (its counts after the previous example)."""
    modes = ("explored", "reused", "fresh", "replayed")
    return next((k for k in modes if memo.counts[k] > before[k]), None)


def _hunt_like(memo, strategy, *, examples, seed=0, check=None):
    """Runs ``strategy`` under ``memo`` as a hunt does (observe after each example), recording
    per example how its structure was drawn (the memo's count that moved) and the structure."""
    log = []
    # counts move during the draw, before the body: compare with the previous example's
    prev = dict(memo.counts)

    def body_with_prev(case):
        nonlocal prev
        mode = _mode(memo, prev)
        log.append((mode, case[0]))
        try:
            if check is not None:
                check(case)
        finally:
            memo.observe(0.0, 0.001)
            prev = dict(memo.counts)

    with memo.active():
        _run(strategy, body_with_prev, examples=examples, seed=seed)
    return log


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_a_memo_reuses_launched_structures_at_its_rate(rate):
    memo = StructureMemo(explore=rate, seed=3)
    log = _hunt_like(memo, toy_cases(), examples=400)
    launched = set()
    for mode, structure in log:
        if mode == "reused":
            assert structure in launched  # only structures an earlier example launched
        launched.add(structure)
    decided = [m for m, _ in log if m in ("explored", "reused")]
    explored = decided.count("explored") / len(decided)
    # Seeded (Hypothesis and the memo): deterministic; the bounds are the binomial's, wide.
    assert len(decided) >= 100
    assert abs(explored - rate) < 0.1, (explored, rate, len(decided))
    assert memo.counts["stale"] == 0
    assert memo.structures("toy") == len(launched)


def test_reused_structures_come_with_fresh_values():
    memo = StructureMemo(explore=0.0)
    values = {}
    log = _hunt_like(
        memo,
        toy_cases(),
        examples=300,
        check=lambda c: values.setdefault(c[0], set()).add(c[1]),
    )
    reused = {s for m, s in log if m == "reused"}
    assert reused
    assert max(len(values[s]) for s in reused) > 5


def test_hypothesis_variations_of_an_example_keep_its_structure():
    """Hypothesis's mutations of generated examples and its hill climbing on ``target()`` scores
    vary values, not structures, but at the explore rate: with a rate of 0 no structure comes
    from them. (Without the guard, 27 of this run's structures came from them.)"""
    memo = StructureMemo(explore=1.0)
    first = _hunt_like(memo, toy_cases(), examples=100)  # structures to reuse
    memo.explore = 0.0
    log = _hunt_like(memo, toy_cases(), examples=300, seed=1, check=lambda c: target(float(c[1])))
    seen, new = {s for _, s in first}, []
    for mode, structure in log:
        if structure not in seen:
            new.append(mode)
        seen.add(structure)
    assert memo.counts["replayed"] > 30 and memo.counts["reused"] > 100
    assert new == [], new


def test_structures_another_process_launched_are_reused_first():
    """A campaign's compile worker launches a pair's structures (their kernels compiled into the
    caches on disk) and hands them over (``export``); the fuzzing worker's memo takes them in
    and reuses them before any structure of its own."""
    ahead = StructureMemo(explore=1.0)
    warmed = {s for _, s in _hunt_like(ahead, toy_cases(), examples=60)}
    handed = ahead.export()
    assert len(handed) == ahead.structures("toy") == len(warmed)
    fuzzing = StructureMemo(explore=0.0)
    assert fuzzing.take_in(handed) == len(handed)
    assert fuzzing.take_in(handed) == 0  # offered once
    log = _hunt_like(fuzzing, toy_cases(), examples=200, seed=2)
    reused = [s for m, s in log if m == "reused"]
    assert reused and set(reused) <= warmed


def test_a_failing_structure_is_not_offered():
    memo = StructureMemo(explore=0.0)
    with memo.active():

        def body(case):
            memo.observe(0.0, 0.001, offer=case[0][0] % 2 == 0)

        _run(toy_cases(), body, examples=200)
    assert memo.structures("toy") > 0
    assert all(e.nodes[0][1] % 2 == 0 for e in memo._pools["toy"])


def test_structures_are_offered_only_to_their_own_key():
    memo = StructureMemo(explore=0.0)
    _hunt_like(memo, toy_cases(key="one"), examples=100)
    assert memo.structures("one") > 0 and memo.structures("two") == 0
    log = _hunt_like(memo, toy_cases(key="two"), examples=100)
    launched = set()  # only structures of key "two" are reused in its run
    for mode, structure in log:
        assert mode != "reused" or structure in launched
        launched.add(structure)
    assert [m for m, _ in log].count("reused") > 10


def test_a_widened_strategy_reuses_the_narrower_ones_structures():
    """A campaign widens a pair's compile-time choices keeping the earlier ones first (another
    key: the strategy names its choices): the structures launched under the narrower strategy
    are reused under the wider one (their kernels are compiled), as the same structures."""
    memo = StructureMemo(explore=1.0, seed=1)
    narrow = st.tuples(st.integers(0, 100), st.sampled_from([16, 32]))
    wide = st.tuples(st.integers(0, 100), st.sampled_from([16, 32, 64]))
    first = _hunt_like(memo, toy_cases(structure=narrow, key=("k", (16, 32))), examples=40)
    launched = {structure for _, structure in first}
    assert len(launched) > 10
    memo.explore = 0.0
    log = _hunt_like(memo, toy_cases(structure=wide, key=("k", (16, 32, 64))), examples=60)
    assert memo.counts["borrowed"] > 5 and memo.counts["stale"] == 0
    reused = [structure for mode, structure in log if mode == "reused"]
    assert set(reused) <= launched  # nothing drawn afresh: every one compiled before
    assert len(set(reused)) > 5  # not just the first one it launched
    # A strategy whose draws the records do not fit (another scale, say) draws afresh, and
    # tries each record once.
    other = st.tuples(st.integers(200, 300), st.sampled_from([16, 32]))
    memo.explore = 0.0
    _hunt_like(memo, toy_cases(structure=other, key=("k", "other")), examples=60)
    assert 0 < memo.counts["stale"] <= memo.structures() - memo.structures(("k", "other"))


def test_a_structure_the_strategy_no_longer_draws_is_dropped():
    """Same key, another strategy (its draws no longer match the record): the structure is drawn
    fresh from where they differ, and the record is dropped."""
    memo = StructureMemo(explore=0.0)
    _hunt_like(memo, toy_cases(key="k"), examples=60)
    offered = memo.structures("k")
    narrower = st.tuples(st.integers(0, 50), st.integers(0, 100), st.sampled_from("abc"))
    log = _hunt_like(memo, toy_cases(structure=narrower, key="k"), examples=60)
    assert memo.counts["stale"] > 0
    assert all(s[0] <= 50 for _, s in log)
    assert memo.structures("k") < offered + 60


# Diverse explorations -----------------------------------------------------------------------------

# Five independent choices of four values: 160 pairs of (choice, value) to cover.
GRID = st.tuples(*(st.integers(0, 3) for _ in range(5)))


def _pairs_covered(structures):
    return {
        ((i, s[i]), (j, s[j]))
        for s in structures
        for i in range(len(s))
        for j in range(i + 1, len(s))
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_explorations_of_a_warm_up_cover_more_pairs_of_choices(seed):
    """Where structures are rationed, an exploration launches the candidate (of ``diverse``
    drawn aside) with the most pairs of choices no launched structure had: the first 15
    structures the memo explored cover more pairs than Hypothesis's generator's."""
    covered = {}
    for diverse in (0, 8):
        memo = StructureMemo(explore=1.0, seed=seed, diverse=diverse)
        explored = []
        prev = dict(memo.counts)

        def body(case):
            nonlocal prev
            if _mode(memo, prev) == "explored":
                explored.append(case[0])
            memo.observe(1.0, 1.0)
            prev = dict(memo.counts)

        with memo.active(), memo.warming():
            _run(toy_cases(GRID, key="grid"), body, examples=150, seed=seed)
        assert len(explored) >= 15
        covered[diverse] = len(_pairs_covered(explored[:15]))
        assert (memo.counts["diversified"] > 0) == (diverse > 0)
    assert covered[8] >= covered[0] + 10, covered


def test_explorations_are_not_diversified_where_every_example_explores():
    """At an explore rate of 1 outside a warm-up (the Triton interpreter: nothing compiles),
    Hypothesis's generator draws every structure: no candidates drawn aside."""
    memo = StructureMemo(explore=1.0)
    _hunt_like(memo, toy_cases(GRID, key="grid"), examples=60)
    assert memo.counts["explored"] > 10 and memo.counts["diversified"] == 0


def test_shrinking_a_failure_found_on_a_diverse_exploration_reaches_the_fresh_minimal():
    """A diverse exploration is a replay of the chosen candidate's choices: its example's
    choice sequence is a fresh draw's, and shrinking reaches the minimal example without a
    memo."""
    memo = StructureMemo(explore=0.5, seed=2)
    failures = []

    def check(case):
        (a, b, c, d, e), value = case
        if a + b + c + d + e >= 9 and value >= 3:
            failures.append(case)
            raise AssertionError(case)

    prev = dict(memo.counts)
    modes = []

    def body(case):
        nonlocal prev
        modes.append(_mode(memo, prev))
        try:
            check(case)
        finally:
            memo.observe(0.0, 0.001)
            prev = dict(memo.counts)

    with pytest.raises(AssertionError), memo.active():
        _run(
            toy_cases(GRID, key="grid"),
            body,
            examples=300,
            seed=1,
            phases=(Phase.generate, Phase.shrink),
        )
    assert memo.counts["diversified"] > 0
    minimal = failures[-1]
    assert sum(minimal[0]) == 9 and minimal[1] == 3, minimal


# Shrinking ---------------------------------------------------------------------------------------


def test_shrinking_a_failure_found_on_a_reused_structure_reaches_the_fresh_minimal():
    """A failure first met on a reused structure shrinks as it would without a memo: to the
    simplest structure that fails, which no example drew and the memo never held."""
    memo = StructureMemo(explore=1.0)
    # Fill the memo with structures (a passing run).
    _hunt_like(memo, toy_cases(), examples=150)
    held = {tuple(v for _, v, _ in e.nodes) for e in memo._pools["toy"]}
    assert held
    memo.explore = 0.0  # from now on every generated example reuses one of them
    failures = []

    def check(case):
        (a, _, _), value = case
        if a >= 10 and value >= 3:
            failures.append((case, memo.counts["reused"]))
            raise AssertionError(case)

    with pytest.raises(AssertionError):
        _run_phases(memo, check)
    first, minimal = failures[0][0], failures[-1][0]
    assert first[0] != (10, 0, "a")
    assert minimal == ((10, 0, "a"), 3)
    # The minimal structure is none the memo held (it was only ever reached by shrinking).
    assert (10, 0, 0) not in held


def _run_phases(memo, check):
    prev = dict(memo.counts)
    first_mode = []

    def body(case):
        nonlocal prev
        mode = _mode(memo, prev)
        try:
            check(case)
        except AssertionError:
            first_mode.append(mode)
            raise
        finally:
            memo.observe(0.0, 0.001)
            prev = dict(memo.counts)

    try:
        with memo.active():
            _run(toy_cases(), body, examples=300, seed=1, phases=(Phase.generate, Phase.shrink))
    finally:
        # The failure was first met on a structure the memo gave (not a fresh draw).
        assert first_mode and first_mode[0] == "reused", first_mode


# The explore rate --------------------------------------------------------------------------------


def _memo_with(**costs):
    memo = StructureMemo(target_share=0.25, min_explore=0.02)
    for k, v in costs.items():
        setattr(memo.costs, k, v)
    return memo


def test_the_explore_rate_keeps_compiling_at_the_target_share():
    # c = 1 s per new structure, e = 1 s per example: f c / (f c + e) = 1/4 at f = 1/3.
    costs = {"new": 10, "new_compile": 10.0, "known": 90, "chosen": 100, "run_seconds": 100.0}
    memo = _memo_with(**costs)
    assert memo.explore_rate == pytest.approx(1 / 3)
    f = memo.explore_rate
    assert f * 1.0 / (f * 1.0 + 1.0) == pytest.approx(0.25)
    # What Hypothesis's own choices compiled (mutations, hill climbing) takes its part first.
    memo = _memo_with(**costs, other_compile=20.0)
    assert memo.explore_rate == pytest.approx((100 / 3 - 20) / 100)
    # A known structure that still compiles (a value the kernel compiles for) costs too.
    memo = _memo_with(**costs, known_compile=9.0)
    assert memo.explore_rate == pytest.approx((1 / 3 - 0.1) / (1.0 - 0.1))


@pytest.mark.parametrize(
    "costs, rate",
    [
        ({}, 1.0),  # nothing measured yet: explore
        ({"new": 5, "chosen": 5, "run_seconds": 5.0}, 1.0),  # compiling costs nothing
        ({"new": 5, "new_compile": 50.0, "known": 95, "chosen": 100, "run_seconds": 1.0}, 0.02),
        ({"new": 5, "new_compile": 0.01, "known": 95, "chosen": 100, "run_seconds": 100.0}, 1.0),
        ({"new": 5, "new_compile": 5.0, "known": 95, "chosen": 100, "other_compile": 99.0}, 0.02),
    ],
)
def test_the_explore_rate_is_clamped(costs, rate):
    assert _memo_with(**costs).explore_rate == pytest.approx(rate)


def test_observe_measures_new_and_known_structures():
    memo = StructureMemo(target_share=0.25)
    launched, other, prev = set(), 0.0, dict(memo.counts)

    def body(case):
        nonlocal prev, other
        mode = _mode(memo, prev)
        seconds = 0.0 if case[0] in launched else 2.0  # a new structure compiles for 2 s
        launched.add(case[0])
        memo.observe(seconds, seconds + 0.1)
        prev = dict(memo.counts)
        if mode in ("fresh", "replayed"):  # Hypothesis chose the structure
            other += seconds

    with memo.active():
        _run(toy_cases(), body, examples=200)
    c, n = memo.costs, memo.counts
    assert c.new == len(launched) and c.new_compile == pytest.approx(2.0 * len(launched))
    assert c.known == n["observed"] - len(launched) and c.known_compile == 0.0
    assert c.chosen == n["explored"] + n["reused"]
    assert c.other_compile == pytest.approx(other)
    assert c.run_seconds == pytest.approx(0.1 * n["observed"])
    # 2 s per new structure against 0.1 s of fuzzing: the floor, or close to it.
    assert memo.explore_rate < memo.min_explore + 0.05


def test_the_rate_learns_from_structures_hypothesis_chose():
    """Explored examples that never report back (refused before compiling, past the profile's
    compile share) do not hold the rate at 1: the first launch of any structure, Hypothesis's
    first example included, measures what a new one costs."""
    memo = StructureMemo(target_share=0.25)
    launched, prev = set(), dict(memo.counts)

    def body(case):
        nonlocal prev
        mode = _mode(memo, prev)
        prev = dict(memo.counts)
        if mode == "explored":
            return  # refused: no observe
        seconds = 0.0 if case[0] in launched else 1.0
        launched.add(case[0])
        memo.observe(seconds, seconds + 0.01)

    with memo.active():
        _run(toy_cases(), body, examples=200)
    assert memo.explore_rate == memo.min_explore
    assert memo.counts["reused"] > 100


# Families ----------------------------------------------------------------------------------------


# Free lengths ------------------------------------------------------------------------------------


@st.composite
def _variant_and_lengths(draw, dependent=False):
    """A variant (two choices), lengths (two), and a choice after them: with ``dependent``, its
    bound is the first length (a record whose lengths cannot be drawn fresh)."""
    variant = (draw(st.integers(0, 3)), draw(st.sampled_from("ab")))
    with free_lengths(draw):
        lengths = (draw(st.integers(1, 50)), draw(st.integers(1, 50)))
    flag = draw(st.integers(0, lengths[0] if dependent else 7))
    return variant, lengths, flag


def test_without_a_memo_free_lengths_draws_exactly_its_strategy():
    @st.composite
    def plain(draw):
        variant = (draw(st.integers(0, 3)), draw(st.sampled_from("ab")))
        lengths = (draw(st.integers(1, 50)), draw(st.integers(1, 50)))
        return variant, lengths, draw(st.integers(0, 7))

    assert _draws(reusing(_variant_and_lengths(), key="k")) == _draws(plain())
    assert _draws(_variant_and_lengths()) == _draws(plain())


def test_a_reused_variant_draws_fresh_lengths():
    memo = StructureMemo(explore=0.0, seed=1)
    log = _hunt_like(memo, toy_cases(_variant_and_lengths()), examples=300)
    first_lengths: dict = {}
    relengthed = 0
    for mode, (variant, lengths, _flag) in log:
        if mode == "reused":
            assert variant in first_lengths  # a variant an earlier example launched
            relengthed += lengths != first_lengths[variant]
        first_lengths.setdefault(variant, lengths)
    assert memo.counts["reused"] > 100 and memo.counts["relengthed"] == memo.counts["reused"]
    assert relengthed > 0.8 * memo.counts["reused"], relengthed
    assert memo.variants("toy") <= 8 < memo.structures("toy")
    assert memo.counts["stale"] == memo.counts["unfree"] == 0


def test_a_record_whose_later_choices_depend_on_its_lengths_is_replayed_whole():
    memo = StructureMemo(explore=0.0, seed=1)
    log = _hunt_like(memo, toy_cases(_variant_and_lengths(dependent=True)), examples=300)
    assert memo.counts["unfree"] > 0  # found out, once a record
    assert memo.counts["stale"] == 0  # ... and kept
    launched = set()
    for mode, structure in log:
        if mode == "reused" and structure not in launched:
            assert memo.counts["relengthed"]  # a fresh-length reuse, before its record was found
        launched.add(structure)
    unfree = [e for e in memo._pools["toy"] if e.unfree]
    assert unfree and memo.counts["reused"] > 100


def _phase(memo, strategy, examples, seed, compiled=None):
    """``examples`` of ``strategy`` under ``memo``, observed as a hunt does: each structure not
    launched before (a case's first part) compiles for a second where ``compiled`` is given (the
    structures compiled, updated), else every launch only loads."""

    def observe(case):
        if compiled is None:
            memo.observe(0.0, 0.01)
        else:
            memo.observe(1.0 if case[0] not in compiled else 0.0, 1.01)
            compiled.add(case[0])

    with memo.active():
        _run(strategy, observe, examples=examples, seed=seed)


def test_the_memo_judges_whether_fresh_lengths_compile():
    """Fresh lengths are turned off where most of the latest reuses of a launched variant with
    new lengths compiled (or were refused for it), and on again once they stop compiling (a
    Pallas kernel's shape buckets, compiled one by one)."""
    memo = StructureMemo(explore=0.0, seed=2)
    strategy = toy_cases(_variant_and_lengths())
    assert memo.lengths_free  # nothing measured
    _phase(memo, strategy, 120, 0, compiled=set())
    assert not memo.lengths_free, (memo.costs, memo.counts)
    assert memo.costs.relength_compiling >= NEW_SEEN
    before = dict(memo.counts)
    _phase(memo, strategy, 200, 1)  # lengths stop compiling: the few fresh-length reuses say so
    assert memo.counts["relengthed"] > before["relengthed"]
    assert memo.lengths_free


# What GLA draws with the values, not the structure: runtime arguments of its kernels (an initial
# state, dht, the final state's flag, the scale), which compile nothing of their own.
GLA_RUNTIME = ("h0", "dht", "scale", "output_final_state")


@pytest.mark.parametrize(
    "strategy, runtime",
    [
        (softmax_cases("small"), ()),
        (jagged_softmax_cases("small"), ()),
        (attention_cases("small", features=frozenset({"causal", "key_padding"})), ()),
        (simple_gla_bwd_cases("small"), GLA_RUNTIME),
        (simple_gla_fwd_cases("small"), GLA_RUNTIME),
    ],
    ids=["softmax", "jagged_softmax", "attention", "simple_gla_bwd", "simple_gla_fwd"],
)
def test_families_reuse_their_structures(strategy, runtime):
    """A family's reused case has an earlier case's variant (dtypes, ranks and static params)
    with fresh lengths and fresh values: lengths are drawn fresh (``free_lengths``; options
    replayed here, ``fresh_options=False``: see the test after it)."""
    memo = StructureMemo(explore=0.0, fresh_options=False)
    seen: dict = {}
    reused = new_shapes = 0
    prev = dict(memo.counts)

    def body(case):
        nonlocal prev, reused, new_shapes
        arrays = {k: a for k, a in case.inputs.items() if k not in runtime}
        variant = (
            tuple(sorted((k, a.ndim, str(a.dtype)) for k, a in arrays.items())),
            repr(sorted((k, v) for k, v in case.params.items() if k not in runtime)),
        )
        shapes = tuple(sorted((k, a.shape) for k, a in arrays.items()))
        if memo.counts["reused"] > prev["reused"]:
            reused += 1
            assert variant in seen
            new_shapes += shapes not in seen[variant]
        seen.setdefault(variant, set()).add(shapes)
        memo.observe(0.0, 0.001)
        prev = dict(memo.counts)

    with memo.active():
        _run(strategy, body, examples=60)
    assert reused >= 10
    assert memo.counts["relengthed"] == memo.counts["reused"]
    assert memo.counts["stale"] == memo.counts["unfree"] == 0
    # Fresh lengths: reused variants come with shapes of their own (with lengths replayed, none).
    assert new_shapes >= reused // 4, (new_shapes, reused)


@st.composite
def _variant_and_options(draw):
    """A variant (two choices), lengths, options (a kind, and a scalar only some kinds draw),
    and a value after them."""
    variant = (draw(st.integers(0, 3)), draw(st.sampled_from("ab")))
    with free_lengths(draw):
        length = draw(st.integers(1, 50))
    with free_options(draw):
        kind = draw(st.sampled_from(("none", "random", "alibi")))
        scale = draw(st.sampled_from((None, 0.5, 2.0))) if kind != "none" else None
    return variant, length, (kind, scale)


def test_a_reused_structure_draws_fresh_options():
    """Where options compile nothing, a reused structure keeps its variant's other choices and
    draws its options fresh: a memo that reuses its first structures still meets every option."""
    memo = StructureMemo(explore=0.0, seed=1)
    log = _hunt_like(memo, toy_cases(_variant_and_options()), examples=300)
    variants, options = set(), set()
    for mode, (variant, _length, opts) in log:
        if mode == "reused":
            assert variant in variants  # a variant an earlier example launched
            options.add(opts)
        variants.add(variant)
    assert memo.counts["reused"] > 100
    assert memo.counts["reoptioned"] == memo.counts["reused"]
    assert len(options) == 7, options  # "none", and each kind with each scale
    assert memo.counts["fixed options"] == memo.counts["stale"] == 0
    # ... and replayed with them where the memo says so
    still = StructureMemo(explore=0.0, seed=1, fresh_options=False)
    log = _hunt_like(still, toy_cases(_variant_and_options()), examples=300)
    first = {}
    for mode, (variant, _length, opts) in log:
        if mode == "reused":
            assert opts == first[variant]
        first.setdefault(variant, opts)
    assert still.counts["reoptioned"] == 0 < still.counts["reused"]


def test_the_memo_judges_whether_fresh_options_compile():
    """Fresh options are turned off where most of the latest reuses that drew them fresh
    compiled, kept measuring on a share of reuses, and on again once they stop (a Triton kernel
    whose flags are ``constexpr``s, compiled one by one)."""
    memo = StructureMemo(explore=0.0, seed=2)

    @st.composite
    def wide_options(draw):  # a window, say: nearly every fresh draw is a variant of its own
        variant = draw(st.integers(0, 3))
        with free_options(draw):
            window = draw(st.integers(0, 10**6))
        return variant, window

    assert memo.options_free  # nothing measured
    _phase(memo, toy_cases(wide_options()), 40, 0, compiled=set())
    assert not memo.options_free, (memo.costs, memo.counts)
    assert memo.costs.reoption_compiling >= NEW_SEEN
    assert memo.lengths_free  # the lengths' judgement is their own
    before = dict(memo.counts)
    _phase(memo, toy_cases(wide_options()), 300, 1)
    assert memo.counts["reoptioned"] > before["reoptioned"]
    assert memo.options_free


def test_a_softmax_reusing_its_first_structure_meets_a_bias_with_a_scale():
    """The softmax strategy's mask, bias and scale are options: a memo that reuses the first
    structure it launched (no mask, no bias, no scale) still draws cases with a bias and a scale
    other than 1 (a bug that needs both went unfound over 2,365 examples with them replayed)."""

    def both(memo):
        hits = 0

        def body(case):
            nonlocal hits
            hits += "bias" in case.inputs and case.params["scale"] not in (None, 1.0)
            memo.observe(0.0, 0.001)

        with memo.active():
            _run(softmax_cases("small"), body, examples=80)
        return hits

    assert both(StructureMemo(explore=0.0, seed=4)) >= 10
    assert both(StructureMemo(explore=0.0, seed=4, fresh_options=False)) <= 1


def test_an_attention_reusing_its_first_structure_meets_a_batch_element_without_keys():
    """Key padding and the key lengths are options (a case's data): a memo that reuses the
    first structure it launched (no padding) still draws batch elements without keys (round 3's
    Pallas kernel that writes nothing for one went unfound on an H200 with them replayed)."""

    def empty(memo):
        hits = 0

        def body(case):
            nonlocal hits
            hits += "key_lengths" in case.inputs and 0 in case.inputs["key_lengths"].tolist()
            memo.observe(0.0, 0.001)

        with memo.active():
            _run(attention_cases("small"), body, examples=80)
        return hits

    assert empty(StructureMemo(explore=0.0, seed=4)) >= 5  # (padded in half, a zero in some)
    assert empty(StructureMemo(explore=0.0, seed=4, fresh_options=False)) == 0


def test_an_exported_structure_keeps_its_options():
    memo = StructureMemo(explore=0.0, seed=5)
    _hunt_like(memo, toy_cases(_variant_and_options()), examples=30)
    exported = memo.export()
    assert exported and all(len(rec) == 6 and rec[4] for rec in exported)
    other = StructureMemo(explore=0.0, seed=5)
    assert other.take_in(exported) == len(exported)
    assert [e.options for e in other._pools["toy"]] == [e.options for e in memo._pools["toy"]]
    # a record from before options (four fields) has none
    assert StructureMemo().take_in([rec[:4] for rec in exported]) == len(exported)


# Arguments ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"target_share": 0}, "target_share=0 must be in (0, 1)"),
        ({"target_share": 1.0}, "target_share=1.0 must be in (0, 1)"),
        ({"target_share": "a"}, "target_share='a' must be a number"),
        ({"target_share": True}, "target_share=True must be a number"),
        ({"min_explore": 0}, "min_explore=0 must be in (0, 1]"),
        ({"min_explore": 1.5}, "min_explore=1.5 must be in (0, 1]"),
        ({"explore": -0.1}, "explore=-0.1 must be in [0, 1]"),
        ({"explore": math.nan}, "explore=nan must be a number"),
        ({"seed": "x"}, "seed='x' must be an int"),
        ({"fresh_lengths": 1}, "fresh_lengths=1 must be None, True or False"),
        ({"fresh_options": "yes"}, "fresh_options='yes' must be None, True or False"),
        ({"diverse": -1}, "diverse=-1 must be an int >= 0"),
        ({"diverse": 2.0}, "diverse=2.0 must be an int >= 0"),
    ],
)
def test_invalid_memo_arguments_name_the_argument(kwargs, message):
    with pytest.raises(InvalidArgument) as info:
        StructureMemo(**kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: reusing(3, key="k"), "strategy=3 must be a SearchStrategy"),
        (lambda: reusing(st.none(), key=[1]), "key=[1] must be hashable"),
        (lambda: StructureMemo().observe(-1.0, 1.0), "compile_seconds=-1.0 must be"),
        (lambda: StructureMemo().observe(0.0, math.nan), "example_seconds=nan must be"),
    ],
)
def test_invalid_arguments_name_the_argument(call, message):
    with pytest.raises(InvalidArgument) as info:
        call()
    assert message in str(info.value)


def test_structure_key_freezes_arguments():
    key = structure_key("f", [1, [2]], {"b", "a"}, {"x": [1]}, None)
    assert key == ("f", (1, (2,)), frozenset({"a", "b"}), (("x", (1,)),), None)
    hash(key)


def test_a_known_structure_is_cheap_while_its_launches_only_load():
    """Known structures are spared the compile share's refusals while launching them costs about
    a load (at most ``LOAD_SECONDS`` or a tenth of a new structure's compile on average): not
    where a kernel compiles per length and a known structure compiles again."""
    from strategies.reuse import LOAD_SECONDS, StructureMemo

    memo = StructureMemo()
    assert memo.known_is_cheap()  # nothing measured
    c = memo.costs
    c.new, c.new_compile = 4, 40.0  # 10 s a new structure
    c.known, c.known_compiling, c.known_compile = 30, 10, 0.6  # 0.06 s a load, 20 launched here
    assert memo.known_is_cheap()
    c.known_compile = 10 * 0.9  # 0.9 s: under a tenth of 10 s
    assert memo.known_is_cheap()
    c.known_compile = 10 * 2.0
    assert not memo.known_is_cheap()
    c.new, c.new_compile = 0, 0.0  # no new one measured: LOAD_SECONDS is the bound
    c.known_compile = 10 * LOAD_SECONDS
    assert memo.known_is_cheap()
    c.known_compile = 10 * 2 * LOAD_SECONDS
    assert not memo.known_is_cheap()


def test_a_failing_structure_is_reused_only_with_fresh_lengths():
    """Where every example fails (a mutant whose bug most cases reach), the variants of failing
    structures are still reused, with fresh lengths and values (replayed whole they would only
    hit their bug again), so that over a compile share the memo has something to offer."""
    memo = StructureMemo(explore=0.0, seed=4)
    with memo.active():
        _run(
            toy_cases(_variant_and_lengths()),
            lambda case: memo.observe(0.0, 0.001, offer=False),
            examples=200,
        )
    entries = memo._pools["toy"]
    assert entries and all(e.failing for e in entries)
    assert memo.counts["reused"] > 50 and memo.counts["relengthed"] == memo.counts["reused"]
    # Not where lengths are replayed: nothing to offer.
    whole = StructureMemo(explore=0.0, seed=4, fresh_lengths=False)
    with whole.active():
        _run(
            toy_cases(_variant_and_lengths()),
            lambda case: whole.observe(0.0, 0.001, offer=False),
            examples=100,
        )
    assert whole.counts["reused"] == 0
    # ... but over the compile share, where each exploration would be refused, they are reused
    # whole (values fresh) rather than explore nothing.
    over = StructureMemo(explore=0.0, seed=4, fresh_lengths=False)
    with over.active():

        def body(case):
            over.over_budget = True  # (the engine sets it before each example)
            over.observe(0.0, 0.001, offer=False)

        _run(toy_cases(_variant_and_lengths()), body, examples=100)
    assert over.counts["reused"] > 20 and over.counts["relengthed"] == 0
    # Handed to another process's memo with the flag.
    other = StructureMemo(explore=0.0, fresh_lengths=False)
    other.take_in(memo.export())
    assert all(e.failing for e in other._pools["toy"])


def test_fresh_lengths_that_only_load_stay_free():
    """Launches of new lengths that load a kernel (a Triton kernel another process compiled, met
    for the first time here: 0.06-0.16 s) or compile once among many loads keep lengths free;
    every one compiling a second turns them off. (Counted as "compiled or not", the loads of an
    H200 campaign's Triton GLA pair turned them off.)"""
    from strategies.reuse import LOAD_SECONDS

    def judged(costs):
        memo = StructureMemo()
        for cost in costs:
            memo._judge_lengths(cost)
        return memo.lengths_free

    assert judged([0.1] * 20)
    assert judged([0.0] * 5 + [5.0] + [0.1] * 10)  # one compile among loads
    assert judged([LOAD_SECONDS] * 20)  # at the bound
    assert not judged([1.0] * 20)
    assert not judged([None] * 20)  # refused: they would have compiled
    assert not judged([0.0, 1.0] * 10 + [1.0])  # most of the latest compile


def test_a_run_begins_on_reused_structures_not_on_zero_extensions(monkeypatch):
    """Hypothesis begins each run by trying novel prefixes with the simplest rest (the simplest
    structure: one key) while the run's first examples are few, and a campaign's slice is a run
    of its own, often shorter than that (an H200's Pallas attention slices ran one key in 91 of
    93 examples). A memo holding structures refuses those zero-extensions: the first 20
    examples of each of three runs mostly reuse its structures with fresh lengths."""

    def one_key_share(memo):
        seen = []

        def body(case):
            seen[-1].append(case.inputs["k"].shape[2] == 1)
            memo.observe(0.0, 0.001)

        with memo.active():
            for seed in range(3):
                seen.append([])
                _run(attention_cases("small"), body, examples=200, seed=seed)
        firsts = [flag for run in seen for flag in run[:20]]
        return sum(firsts) / len(firsts)

    memo = StructureMemo(explore=0.1, seed=3)
    refused = one_key_share(memo)
    assert memo.counts["unextended"] >= 3 and refused < 0.3, (refused, memo.counts)
    import strategies.reuse

    monkeypatch.setattr(strategies.reuse, "zero_extending", lambda data: False)
    kept = one_key_share(StructureMemo(explore=0.1, seed=3))
    assert kept > refused + 0.15, (kept, refused)


def test_draws_beside_a_structure_are_replayed_with_it():
    """An autotuned kernel's configs are drawn as its launches ask, outside the case's strategy,
    yet they select compiled code as the structure does: drawn through ``draw_attached``, they
    are kept with the structure, replayed when it is reused (its compiled configs again, not a
    compile each: a GPU campaign's fla backward pair refused 4,454 examples to check 109), and
    handed to another process's memo with it. Explorations draw them fresh."""
    from hypothesis.control import current_build_context

    picks = st.lists(st.integers(0, 2**16 - 1), min_size=8, max_size=8)

    def run(memo, examples, seed):
        seen = []

        def body(case):
            data = current_build_context().data
            before = dict(memo.counts)
            drawn = memo.draw_attached(data, lambda: data.draw(picks), "autotune")
            seen.append(
                (
                    case[0],
                    tuple(drawn),
                    memo.counts["attached replayed"] > before.get("attached replayed", 0),
                )
            )
            memo.observe(0.0, 0.001)

        with memo.active():
            _run(toy_cases(), body, examples=examples, seed=seed)
        return seen

    first = StructureMemo(explore=1.0, seed=1)  # every example a structure of its own
    explored = run(first, 60, 0)
    configs = {}
    for structure, drawn, replayed in explored:
        assert not replayed
        configs.setdefault(structure, drawn)
    assert len({d for _, d, _ in explored}) > 30  # fresh each time
    other = StructureMemo(explore=0.0, seed=2)  # another process: reuse only
    assert other.take_in(first.export()) == first.structures()
    reused = run(other, 80, 1)
    replays = [(s, d) for s, d, r in reused if r]
    assert len(replays) == other.counts["reused"] >= 10, other.counts
    assert all(configs.get(s) == d for s, d in replays), replays[:3]
