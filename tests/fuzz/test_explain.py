"""What a failing kernel computed instead (``fuzz.explain``), and the rows it joins
(``fuzz.duplicates.Duplicates.explained_alike``): each hypothesis shown on a planted kernel that
makes that mistake, the same examples on its bug-free control explained by nothing (they pass),
and bugs no hypothesis explains left apart."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fuzz import explain
from fuzz.backends import get_backend
from fuzz.case import Case
from fuzz.duplicates import Duplicates, bug_of
from fuzz.families import family_of
from fuzz.properties import check_case
from fuzz.target import get, load_beside, load_plugin

PLUGINS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugins")
CHECKS = load_beside(os.path.join(PLUGINS, "x.py"), "_planted_checks.py", "kernel_fuzz_pc")


@pytest.fixture(scope="module", autouse=True)
def plugins():
    for name in ("planted5.py", "planted5_pallas.py", "planted7_pallas.py", "half_bugs.py"):
        load_plugin(os.path.join(PLUGINS, name))


def _explained(name: str, backend: str, case: Case) -> explain.Explanation | None:
    outcome = check_case(get(name), get_backend(backend), case, only=("oracle",))
    assert outcome.context.clean.error is None
    return explain.explain(outcome.context, outcome.context.clean.outputs)


def _attention(tq, tk, *, hq=1, causal=False, window=None, d=1, seed=0):
    rng = np.random.default_rng(seed)
    inputs = {
        "q": rng.standard_normal((1, hq, tq, d)).astype(np.float32),
        "k": rng.standard_normal((1, 1, tk, d)).astype(np.float32),
        "v": rng.standard_normal((1, 1, tk, d)).astype(np.float32),
    }
    params = {
        "dtype": "float32", "causal": causal, "window": window, "scale": None, "softcap": None,
        "alibi": None, "block_q": 16, "block_k": 16,
    }  # fmt: skip
    return Case(inputs, params)


def _varlen(cu_q, cu_k, *, causal=False, window=None):
    case = _attention(cu_q[-1], cu_k[-1], hq=2, causal=causal, window=window)
    cu = {"cu_seqlens_q": np.asarray(cu_q, np.int32), "cu_seqlens_k": np.asarray(cu_k, np.int32)}
    return case.replace(inputs=cu)


def _decode(cache, *, window=None, alibi=None):
    rng = np.random.default_rng(1)
    inputs = {
        "q": rng.standard_normal((1, 1, 1, 2)).astype(np.float32),
        "k": rng.standard_normal((1, 1, cache, 2)).astype(np.float32),
        "v": rng.standard_normal((1, 1, cache, 2)).astype(np.float32),
        "cache_len": np.array([cache], np.int32),
    }
    if alibi is not None:
        inputs["alibi_slopes"] = np.full((1,), alibi, np.float32)
    params = {
        "dtype": "float32", "window": window, "scale": None, "softcap": None, "alibi": None,
        "block_k": 16, "num_splits": 1,
    }  # fmt: skip
    return Case(inputs, params)


# Round 7's log-sum-exps stored token-major and read head-major, met four ways: a query with no
# key under a causal mask, under a window, in a sequence of no keys (Inf rows), and wrong values.
LSE_WAYS = {
    "causal": lambda: _varlen([0, 2], [0, 1], causal=True),
    "window": lambda: _varlen([0, 2], [0, 1], window=[-1, 0]),
    "empty sequence": lambda: _varlen([0, 1, 2], [0, 0, 2]),
    "values": lambda: _varlen([0, 2], [0, 1]),
}


@pytest.mark.parametrize("way", sorted(LSE_WAYS))
def test_a_layout_mix_up_is_named_whichever_way_it_is_met(way):
    case = LSE_WAYS[way]()
    got = _explained("planted7_varlen_lse_token_major_pallas", "pallas-interpret", case)
    assert got is not None and got.key == "layout lse BTH", got
    assert "written in axis order (B, T, H) and read as (B, H, T)" in got.text
    # The bug-free control passes the same call: nothing to explain.
    assert _explained("control7_attention_varlen_pallas", "pallas-interpret", case) is None


def test_a_layout_hypothesis_must_match_every_element_not_only_the_wrong_ones():
    """The kernel's lse rows transposed match; with one other element of ``o`` off as well, the
    call is not what the hypothesis computes (a wrong value elsewhere is another fault)."""
    case = LSE_WAYS["values"]()
    outcome = check_case(
        get("planted7_varlen_lse_token_major_pallas"),
        get_backend("pallas-interpret"),
        case,
        only=("oracle",),
    )
    got = {n: np.array(v) for n, v in outcome.context.clean.outputs.items()}
    assert explain.explain(outcome.context, got) is not None
    got["o"][0, 1, 0, 0] += 0.25
    assert explain.explain(outcome.context, got) is None


def test_a_query_one_key_late_is_named_through_a_window_and_through_alibi():
    """Round 5's decode query placed at the cache's length: a window of one key hides the one
    key it should see (``inf`` lse), ALiBi measures every distance one too long (lse off by the
    slope, ``accuracy``): one explanation."""
    name, backend = "planted5_decode_position_is_length_pallas", "pallas-interpret"
    window = _explained(name, backend, _decode(1, window=[0, -1]))
    alibi = _explained(name, backend, _decode(3, alibi=0.5))
    assert window is not None and alibi is not None
    assert window.key == alibi.key == "align bottom-right+1", (window, alibi)
    assert "one key later than bottom-right" in window.text


def test_a_causal_mask_aligned_top_left_is_named():
    name, backend = "planted5_attention_causal_top_left_triton", "triton-interpret"
    for case in (_attention(1, 2, causal=True), _attention(2, 3, causal=True, seed=2)):
        got = _explained(name, backend, case)
        assert got is not None and got.key == "align top-left", got


def test_bugs_that_scale_values_are_explained_by_nothing():
    """The two-bug softmax (fp16 outputs x 1.01; bf16 rows of odd length >= 3 x 0.97): no
    hypothesis matches either, so nothing here joins them."""
    rng = np.random.default_rng(0)
    for dtype, cols in (("float16", 2), ("bfloat16", 3)):
        x = rng.standard_normal((1, cols)).astype(np.float32)
        from fuzz.arrays import np_dtype

        case = Case(
            {"x": x.astype(np_dtype(dtype))},
            {"dtype": dtype, "scale": None, "block_m": 16, "block_n": 32},
        )
        outcome = check_case(
            get("half_two_bugs_softmax"), get_backend("triton-interpret"), case, only=("oracle",)
        )
        assert outcome.finding is not None
        assert explain.explain(outcome.context, outcome.context.clean.outputs) is None


def test_rows_explained_alike_are_one_bug_whatever_free_choices_reached_them():
    """The causal and the window example of the lse bug: one key (``inf`` of ``lse``), free
    choices that do not nest (a causal mask, a window), neither failing the other's way with
    the other's triggers. Explained alike: one bug, told so."""
    target = get("planted7_varlen_lse_token_major_pallas")
    backend = get_backend("pallas-interpret")
    causal = CHECKS.as_found(target, backend, LSE_WAYS["causal"]())
    window = CHECKS.as_found(target, backend, LSE_WAYS["window"]())
    assert causal.key == window.key == "inf|oracle|lse|-"
    me = Duplicates(target, backend, CHECKS.options(), found={"w": window}, known_bugs=[])
    me.known_bugs = [bug_of(window)]
    bug, how = me.of(causal)
    assert (bug.signature, how) == (bug_of(window).signature, "explained")
    assert "read as (B, H, T)" in causal.finding.message


# Conventions of a parameter (round 8's kernels, written without this module in view) ------------


def _softmax(x, mask):
    x = np.asarray(x, np.float32)
    params = {"dtype": "float32", "scale": None, "block_m": 16, "block_n": 16}
    return Case({"x": x, "mask": np.asarray(mask, bool)}, params)


def test_a_mask_read_with_the_opposite_polarity_is_named_both_ways_it_shows():
    """A row whose one key is kept comes out with no key (its row sums to 0), a row whose one
    key is masked out comes out with it (1 where the oracle has no key): two classes, one
    mistake. The bug-free control passes both."""
    name, backend = "planted8_softmax_mask_polarity_inverted_pallas", "pallas-interpret"
    load_plugin(os.path.join(PLUGINS, "planted8_pallas.py"))
    for mask in ([[True]], [[False]], [[True, False]]):
        case = _softmax([[0.5, -0.25][: len(mask[0])]], mask)
        got = _explained(name, backend, case)
        assert got is not None and got.key == "mask polarity", (mask, got)
        assert _explained("control8_softmax_pallas", backend, case) is None


def test_a_window_read_with_its_sides_swapped_is_named():
    name, backend = "planted8_varlen_window_sides_swapped_pallas", "pallas-interpret"
    load_plugin(os.path.join(PLUGINS, "planted8_pallas.py"))
    for cu_q, cu_k in (([0, 1], [0, 2]), ([0, 2], [0, 1])):
        case = _varlen(cu_q, cu_k, window=[-1, 0])
        got = _explained(name, backend, case)
        assert got is not None and "window sides swapped" in got.keys, (cu_q, cu_k, got)
    # A window of equal sides reads alike either way: nothing to swap, not this explanation.
    got = _explained(name, backend, _varlen([0, 2], [0, 3], window=[1, 1]))
    assert got is None or "window sides swapped" not in got.keys


@pytest.mark.parametrize(("factor", "key"), [(1.4426950408889634, "lse base2"), (0.5, None)])
def test_an_lse_in_base_two_is_named_and_another_scale_is_not(factor, key):
    """The kernel's outputs stood in for: ``o`` right and ``lse`` the oracle's times ``factor``:
    times log2 e is the base-2 log-sum-exp; halved, no hypothesis."""
    case = _attention(3, 5, causal=True, d=4)
    outcome = check_case(get("attention"), get_backend("triton-interpret"), case, only=("oracle",))
    ctx = outcome.context
    got = {"o": ctx.oracle["o"].astype(np.float32), "lse": ctx.oracle["lse"] * factor}
    found = explain.explain(ctx, got)
    assert (found and found.key) == key, found


def test_rows_whose_explanations_meet_are_one_bug():
    """The swapped window's two GPU rows of round 8: one query on two keys (a key hidden:
    ``accuracy``) and two queries on one key (a query with no key shown one: ``masking``). The
    second also reads as a top-left alignment and as each query one key late (a small example
    matches more than one mix-up); the two explanations meet in the swapped window: one bug."""
    load_plugin(os.path.join(PLUGINS, "planted8_pallas.py"))
    target = get("planted8_varlen_window_sides_swapped_pallas")
    backend = get_backend("pallas-interpret")
    hidden = CHECKS.as_found(target, backend, _varlen([0, 1], [0, 2], window=[-1, 0]))
    shown = CHECKS.as_found(target, backend, _varlen([0, 2], [0, 1], window=[-1, 0]))
    assert (hidden.finding.cls, shown.finding.cls) == ("accuracy", "masking")
    me = Duplicates(target, backend, CHECKS.options(), found={"h": hidden}, known_bugs=[])
    me.known_bugs = [bug_of(hidden)]
    assert me.explained(hidden).keys == {"window sides swapped"}
    alone = _explained(target.name, "pallas-interpret", shown.case)  # the call alone
    assert alone.keys >= {"window sides swapped", "align top-left"}
    said = alone.text  # one sentence names them all
    assert said.count("every output matches the oracle with") == 1 and ", or with " in said
    # With one key more, only the swapped window holds: the row names it alone.
    assert me.explained(shown).keys == {"window sides swapped"}
    assert ", or with " not in me.explained(shown).text
    assert me.explained_alike(shown) == bug_of(hidden)


def test_two_positional_bugs_a_small_example_confuses_stay_two_rows():
    """A kernel with its causal mask aligned top-left and its window's sides swapped: the
    window bug's small example (two queries on one key, window ``(-1, 0)``) matches a top-left
    alignment too, as the causal bug's does; the examples' neighbours (one key more, one query
    more) tell the hypotheses apart, and the two rows stay two. The bug-free control passes both
    calls and their neighbours."""
    load_plugin(os.path.join(PLUGINS, "two_positional_bugs.py"))
    target = get("two_positional_bugs")
    backend = get_backend("triton-interpret")
    causal = CHECKS.as_found(target, backend, _attention(1, 2, causal=True))
    window = CHECKS.as_found(target, backend, _attention(2, 1, window=[-1, 0]))
    me = Duplicates(target, backend, CHECKS.options(), found={"c": causal}, known_bugs=[])
    me.known_bugs = [bug_of(causal)]
    assert "align top-left" in _explained(target.name, "triton-interpret", window.case).keys
    assert me.explained(causal).keys == {"align top-left"}
    assert me.explained(window).keys == {"window sides swapped"}
    assert me.explained_alike(window) is None
    assert me.of(window) is None
    for case in (causal.case, window.case):
        for near in (case, *family_of(get("control_positional")).vary(case)):
            assert _explained("control_positional", "triton-interpret", near) is None


def test_queries_aligned_to_the_whole_buffer_are_named_and_told_from_a_sequences_own():
    """Positions measured from the buffer's padded or packed lengths instead of each sequence's
    own: round 5's packed sequences (one sequence of 2 queries and 2 keys, one guard key row:
    each query one key late) and round 9's padded keys under a window with ALiBi (three query
    heads, 5 keys of 9 valid: every distance off by 4, not a shift of one). The bug-free
    kernel passes the same calls."""
    load_plugin(os.path.join(PLUGINS, "planted9.py"))
    packed = _varlen([0, 2], [0, 2], causal=True).replace(
        inputs={
            "k": np.random.default_rng(3).standard_normal((1, 1, 3, 1)).astype(np.float32),
            "v": np.random.default_rng(4).standard_normal((1, 1, 3, 1)).astype(np.float32),
        }
    )
    got = _explained("planted5_varlen_offset_of_totals_triton", "triton-interpret", packed)
    assert got is not None and "align buffer" in got.keys, got
    rng = np.random.default_rng(5)
    padded = _attention(2, 9, hq=3, window=[2, -1], d=2).replace(
        inputs={
            "k": rng.standard_normal((1, 1, 9, 2)).astype(np.float32),
            "v": rng.standard_normal((1, 1, 9, 2)).astype(np.float32),
            "key_lengths": np.array([5], np.int32),
            "alibi_slopes": np.array([0.5, 0.25, 0.125], np.float32),
        }
    )
    name = "planted9_attention_causal_offset_of_padded_length_triton"
    got = _explained(name, "triton-interpret", padded)
    assert got is not None and got.keys == {"align buffer"}, got
    assert "query index + 7" in got.text
    assert _explained("control9_attention_triton", "triton-interpret", padded) is None


def test_a_hunts_first_bug_is_named_when_the_campaign_records_it():
    """The finding a campaign records (``Hooks.on_found``, when its minimal example is final)
    names what the kernel computed instead: a hunt's first bug is never checked against
    another, and was reported without its explanation."""
    from fuzz.engine import Hooks, hunt
    from fuzz.profiles import get_profile

    load_plugin(os.path.join(PLUGINS, "two_positional_bugs.py"))
    recorded = []
    hooks = Hooks(on_found=lambda result, f: recorded.append((f.final, f.finding.message)))
    hunt(
        get("positional_causal_top_left"),
        "triton-interpret",
        get_profile("ci"),
        database=None,
        max_examples=150,
        seed=1,
        time_limit=10**6,
        hooks=hooks,
    )
    final = [message for final, message in recorded if final]
    assert final, recorded
    assert any("the queries aligned top-left (declared: bottom-right)" in m for m in final), final


def test_a_compiled_examples_neighbours_run_on_its_interpreter():
    """A neighbour's new shape is a compile on a GPU, and a kernel that reads out of bounds
    there can lose the process's CUDA context: a compiled backend's example has its neighbours
    run on the interpreter of its kernel source, within the profile's interpreter cost, and
    none past it (its explanation then as the example alone gives it)."""
    import dataclasses

    load_plugin(os.path.join(PLUGINS, "two_positional_bugs.py"))
    interpreter = get_backend("triton-interpret")
    compiled = dataclasses.replace(
        interpreter, name="triton", interpret=False, twin=interpreter.name
    )
    me = Duplicates(get("two_positional_bugs"), compiled, CHECKS.options(), found={}, known_bugs=[])
    small = _attention(2, 1, window=[-1, 0])
    assert me._neighbours_on(small) is interpreter
    big = _attention(4096, 4096, d=64)
    assert me.target.search.cost(big) > me.options.interpreter_max_cost
    assert me._neighbours_on(big) is None
    mine = Duplicates(
        get("two_positional_bugs"), interpreter, CHECKS.options(), found={}, known_bugs=[]
    )
    assert mine._neighbours_on(big) is interpreter


def test_an_explanation_narrowed_twice_keeps_the_words_of_what_is_left():
    """Each neighbour may narrow the hypotheses again: the second narrowing names what is left
    as the first did."""
    load_plugin(os.path.join(PLUGINS, "planted8_pallas.py"))
    case = _varlen([0, 2], [0, 1], window=[-1, 0])
    got = _explained("planted8_varlen_window_sides_swapped_pallas", "pallas-interpret", case)
    assert len(got.keys) >= 3, got
    keep = got.order[1:]
    once = explain.narrowed(got, frozenset(keep))
    twice = explain.narrowed(once, frozenset(keep[:1]))
    assert twice is not None and twice.keys == {keep[0]} and twice.order == keep[:1]
    assert twice.text == explain.narrowed(got, frozenset(keep[:1])).text
    assert explain.narrowed(twice, frozenset()) is None


def test_an_example_too_large_to_explain_makes_no_kernel_call(monkeypatch):
    """A finding is named at its final replay (on a GPU, an unshrunk example can have a million
    elements): past ``MAX_ELEMENTS`` nothing is run, not even the call and its oracle."""
    from fuzz import duplicates

    load_plugin(os.path.join(PLUGINS, "two_positional_bugs.py"))
    backend = get_backend("triton-interpret")
    found = CHECKS.as_found(get("two_positional_bugs"), backend, _attention(2, 1, window=[-1, 0]))
    me = Duplicates(get("two_positional_bugs"), backend, CHECKS.options(), found={}, known_bugs=[])
    monkeypatch.setattr(explain, "MAX_ELEMENTS", found.case.size - 1)
    monkeypatch.setattr(duplicates, "check_case", lambda *a, **k: pytest.fail("a kernel call"))
    assert me.explained(found) is None


def test_a_way_holding_both_positional_bugs_choices_takes_neither_bug_into_the_other():
    """The window row of the two-positional-bugs kernel took in, as a way it was seen, an
    example with a causal mask and a window (both bugs' free choices); the causal bug's example
    then read alike with that way's and the two rows became one on the CPU (one row at b3b59f5
    too). A bug's free choices are those of every way its row was seen (the window alone): the
    causal example's do not nest with them, and it stays a bug of its own."""
    import dataclasses

    from fuzz.signatures import Bug

    load_plugin(os.path.join(PLUGINS, "two_positional_bugs.py"))
    target = get("two_positional_bugs")
    backend = get_backend("triton-interpret")
    window = CHECKS.as_found(target, backend, _attention(1, 2, window=[-1, 0]))
    causal = CHECKS.as_found(target, backend, _attention(1, 2, causal=True))
    both = CHECKS.as_found(target, backend, _attention(1, 2, causal=True, window=[-1, 0]))
    # (met as its lse: -inf, no key left by the two masks, where the oracle has both keys)
    lse = "inf|oracle|lse|-"
    shown = check_case(target, backend, both.case, params=both.params, prefer=lse).finding
    assert shown.cls == "inf" and shown.output == "lse", shown
    both = dataclasses.replace(both, key=lse)
    window.seen_as.append(both)
    me = Duplicates(target, backend, CHECKS.options(), found={"w": window}, known_bugs=[])
    me.known_bugs = [bug_of(window), Bug(both.key, frozenset(both.triggers), window.signature)]
    alike = {me.anomalies(x, x.key) for x in (window, both, causal)}
    assert len(alike) == 1 and None not in alike  # (each reads alike: the check's evidence)
    assert me.reads_alike(causal) is None and me.of(causal) is None
