"""The planted one-bug kernels of round 6 (``tests/plugins/planted6.py``, Triton;
``planted6_pallas.py``, Pallas): each target registered through the public plugin API, its bug
in its plugin's docstring and in the records (``_planted6_bugs.py``), each bug's documented
trigger failing with its expected class (and a near miss of it passing: the kernel is right where
the trigger does not hold), the bug-free controls clean on short seeded hunts, and a sample of
the bugs found with their expected class by short hunts on the CPU interpreters (stopped by
example counts, never by seconds).

How many rows each bug becomes is measured by ``.ci/planted_rows.py --round 6``, not asserted
here.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest

from fuzz.case import Case
from fuzz.target import get, load_beside

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = load_beside(__file__, "_planted_checks.py", "kernel_fuzz_planted_checks")
PLUGINS = {
    "triton": os.path.join(HERE, "planted6.py"),
    "pallas": os.path.join(HERE, "planted6_pallas.py"),
}
BACKENDS = CHECKS.BACKENDS
# The families each language's kernels cover (attention: dense, packed or decode).
FAMILIES = ("softmax", "jagged_softmax", "attention", "simple_gla_fwd")
# The record files of the earlier rounds, whose patterns are not planted again.
EARLIER = ("_planted_bugs.py", "_planted3_bugs.py", "_planted4_bugs.py", "_planted5_bugs.py")


ROUND = CHECKS.Round(
    6,
    PLUGINS,
    FAMILIES,
    EARLIER,
    ("softmax_frozen_max", "attention_window_right", "gla_cumsum_per_tile"),
)
_planted = ROUND.planted
_language = CHECKS.language


@pytest.fixture(scope="module")
def plugins():
    """Each language's plugin module, loaded as ``--plugin`` loads it."""
    return ROUND.modules()


def test_every_planted_kernel_is_a_registered_plugin_target(plugins):
    ROUND.check_registered(plugins)


def test_every_control_is_a_registered_bug_free_target(plugins):
    ROUND.check_controls(plugins)


def test_every_record_names_a_family_a_class_and_a_trigger(plugins):
    ROUND.check_records(plugins)


def test_the_patterns_are_new(plugins):
    """No pattern of the earlier rounds' records, nor a mutant of the same family and name, is
    planted again (the patterns were checked against the mutants' and the other test plugins'
    descriptions when they were written; names are what a test can hold)."""
    ROUND.check_new(plugins, HERE)


def test_every_planted_kernel_has_a_docstring_line_with_its_trigger_and_class(plugins):
    ROUND.check_docstrings(plugins)


def test_the_pallas_kernels_are_declared_for_both_backend_kinds(plugins):
    """Round 6's Pallas kernels are written for the GPU's lowering too (power-of-two arrays,
    head dims padded for the dots), not for interpret mode only as rounds 1 and 3 were."""
    ROUND.check_pallas_kinds(plugins)


# Each bug's documented trigger, and a near miss of it ---------------------------------------------


def _rng():
    return np.random.default_rng(0)


def _softmax_case(x, *, scale=None):
    inputs = {"x": np.asarray(x, np.float32)}
    return Case(inputs, {"dtype": "float32", "scale": scale, "block_m": 2, "block_n": 16})


def _jagged_case(lengths, values=None):
    rows = sum(lengths)
    if values is None:
        values = _rng().standard_normal((rows, 1))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return Case(
        {"values": np.asarray(values, np.float32).reshape(rows, -1), "offsets": offsets},
        {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None, "guard": "nan"},
        {"lengths": list(lengths)},
    )


def _attention_case(tq, tk, d=1, *, causal=False, window=None, softcap=None, qk=None):
    """One query head on one kv head; ``qk``: every element of q and of k (else normal)."""
    rng = _rng()
    q = rng.standard_normal((1, 1, tq, d))
    k = rng.standard_normal((1, 1, tk, d))
    if qk is not None:
        q, k = np.full_like(q, qk), np.full_like(k, qk)
    inputs = {
        "q": q.astype(np.float32),
        "k": k.astype(np.float32),
        "v": rng.standard_normal((1, 1, tk, d)).astype(np.float32),
    }
    params = {
        "dtype": "float32", "causal": causal, "window": window, "scale": None,
        "softcap": softcap, "alibi": None, "block_q": 16, "block_k": 16,
    }  # fmt: skip
    return Case(inputs, params)


def _varlen_case(cu_q, cu_k, tk, *, causal=False, window=None):
    case = _attention_case(cu_q[-1], tk, causal=causal, window=window)
    cu = {
        "cu_seqlens_q": np.asarray(cu_q, np.int32),
        "cu_seqlens_k": np.asarray(cu_k, np.int32),
    }
    return case.replace(inputs=cu)


def _decode_case(cache, *, splits):
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, 1, 1, 2)).astype(np.float32),
        "k": rng.standard_normal((1, 1, cache, 2)).astype(np.float32),
        "v": rng.standard_normal((1, 1, cache, 2)).astype(np.float32),
        "cache_len": np.array([cache], np.int32),
    }
    params = {
        "dtype": "float32", "window": None, "scale": None, "softcap": None, "alibi": None,
        "block_k": 16, "num_splits": splits,
    }  # fmt: skip
    return Case(inputs, params)


def _gla_case(tokens, *, v_dim=16, gamma=None, final=True):
    """Per-token gates of -0.3, or a per-head decay ``gamma``."""
    rng = _rng()

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    inputs = {"q": arr(1, tokens, 1, 16), "k": arr(1, tokens, 1, 16), "v": arr(1, tokens, 1, v_dim)}
    if gamma is None:
        inputs["g"] = np.full((1, tokens, 1), -0.3, np.float32)
    else:
        inputs["g_gamma"] = np.full((1,), gamma, np.float32)
    params = {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": final}
    return Case(inputs, params)


# pattern -> (its trigger, a near miss: the same kernel right where the trigger does not hold)
TRIGGERS = {
    # scale 2, one key of x = 100 (its logit 200 shifted by 100) | scale 1
    "softmax_max_of_unscaled": (
        lambda: _softmax_case([[100.0]], scale=2.0),
        lambda: _softmax_case([[100.0]], scale=1.0),
    ),
    # a segment of 5 rows (block_n 4), its max in the first tile | its max in the last tile
    "jagged_shift_of_last_tile": (
        lambda: _jagged_case([5], [2.0, 0.0, 0.5, -0.5, -1.0]),
        lambda: _jagged_case([5], [-1.0, 0.0, 0.5, -0.5, 2.0]),
    ),
    # causal, Tq = 2 and Tk = 1 (query 0 sits before key 0) | causal, Tq = 1 and Tk = 2 (query
    # 0 sits at key 1 and sees both)
    "attention_causal_tile_only": (
        lambda: _attention_case(2, 1, causal=True),
        lambda: _attention_case(1, 2, causal=True),
    ),
    # window (-1, -1), one sequence of one query and one key | window (0, -1)
    "varlen_window_unbounded_left": (
        lambda: _varlen_case([0, 1], [0, 1], 1, window=[-1, -1]),
        lambda: _varlen_case([0, 1], [0, 1], 1, window=[0, -1]),
    ),
    # V = 8 (a tile of 16), one token | V = 16
    "gla_ht_store_unmasked_v": (lambda: _gla_case(1, v_dim=8), lambda: _gla_case(1)),
    # scale 0.5, two keys of different logits | scale 2
    "softmax_scale_truncated": (
        lambda: _softmax_case([[0.5, -0.25]], scale=0.5),
        lambda: _softmax_case([[0.5, -0.25]], scale=2.0),
    ),
    # an empty segment, then one of one row | one of one row, then an empty one
    "jagged_stop_at_empty_segment": (
        lambda: _jagged_case([0, 1]),
        lambda: _jagged_case([1, 0]),
    ),
    # a soft cap of 1, one key of logit 50 | of logit 40 (exp(80) is finite)
    "attention_tanh_overflow": (
        lambda: _attention_case(1, 1, softcap=1.0, qk=50.0**0.5),
        lambda: _attention_case(1, 1, softcap=1.0, qk=40.0**0.5),
    ),
    # 2 splits of a cache of 3 keys (2 and 1) | of a cache of 2 (one key each: equal sums)
    "decode_merge_by_split_max": (
        lambda: _decode_case(3, splits=2),
        lambda: _decode_case(2, splits=2),
    ),
    # g_gamma -0.5, one token, the final state | per-token gates
    "gla_gamma_position_from_zero": (lambda: _gla_case(1, gamma=-0.5), lambda: _gla_case(1)),
}


def test_every_pattern_has_a_trigger_here(plugins):
    assert set(TRIGGERS) == set(plugins["triton"].PATTERNS)


@pytest.mark.parametrize("pattern", sorted(TRIGGERS))
def test_a_bugs_trigger_fails_with_its_class_and_a_near_miss_passes(plugins, pattern):
    ROUND.check_trigger(plugins, pattern, TRIGGERS)


# Short seeded hunts ------------------------------------------------------------------------------


# Every Triton control, and the Pallas ones quick to hunt (the Pallas attention, decode and GLA
# controls compile a program per case structure: the campaign of .ci/planted_rows.py --round 6
# runs them).
CONTROLS = [
    *(f"control6_{f}_triton" for f in (*FAMILIES, "attention_varlen")),
    "control6_softmax_pallas",
    "control6_jagged_softmax_pallas",
]


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_is_clean_on_a_short_seeded_hunt(plugins, name):
    ROUND.check_clean(name, 10)


# A sample quick to find under seed 1, of both languages, each of its expected class.
SAMPLE = [
    ("planted6_softmax_max_of_unscaled_triton", 10),
    ("planted6_attention_causal_tile_only_triton", 10),
    ("planted6_gla_ht_store_unmasked_v_triton", 10),
    ("planted6_softmax_scale_truncated_pallas", 10),
    ("planted6_jagged_stop_at_empty_segment_pallas", 10),
]


@pytest.mark.parametrize(("name", "examples"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, examples):
    ROUND.check_found(plugins, name, examples)


def test_inputs_a_shrink_left_at_one_value_are_drawn_again_for_the_influence_evidence(plugins):
    """The causal mask applied as the key loop's bound only (no mask inside the diagonal tile)
    came as two rows of ``lse``: ``accuracy`` (two queries on two keys: query 0 sees key 1 too;
    the shrink left its values zero, so its wrong element reads ``k`` alone) and ``masking``
    (two queries on one key: query 0 has no key and sees key 0, its ``o`` reading ``v``).
    Neither example fails the other's way. The values drawn again (``fuzz.influence.revalued``)
    show the first one reading ``v`` too: the second's anomaly nests in its, one bug."""
    from fuzz import influence
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates, bug_of

    target, backend = (
        get("planted6_attention_causal_tile_only_triton"),
        get_backend(BACKENDS["triton"]),
    )

    def case(q, k, v):
        def arr(x):
            return np.asarray(x, np.float32).reshape(1, 1, -1, 1)

        params = {
            "dtype": "float32", "causal": True, "window": None, "scale": None, "softcap": None,
            "alibi": None, "block_q": 16, "block_k": 16,
        }  # fmt: skip
        return Case({"q": arr(q), "k": arr(k), "v": arr(v)}, params)

    wrong = CHECKS.as_found(target, backend, case([-1.2714454, 0.0], [0.0, -0.08401772], [0, 0]))
    unmasked = CHECKS.as_found(target, backend, case([0.0, -1.4785151], [0.0], [0.0]))
    assert (wrong.key, unmasked.key) == ("accuracy|oracle|lse|-", "masking|oracle|lse|-")
    options = CHECKS.options()
    assert influence.anomalies(target, backend, options, wrong.case) == {("k", influence.READS)}
    me = Duplicates(
        target, backend, options, found={"masking": unmasked}, known_bugs=[bug_of(unmasked)]
    )
    assert me.also_fails(wrong) is None and me.shown_by_known(wrong) is None
    assert me.reads_alike(wrong) == bug_of(unmasked)
    # Each small example matches the oracle under a mix-up (``fuzz.explain``), but not on its
    # neighbours (one key more, one query more): the mask is missing inside a tile, not moved.
    # No explanation is given; the influence evidence joins the two.
    assert me.explained(wrong) is None
    assert me.of(wrong) == (bug_of(unmasked), "influence")


def test_a_nan_made_of_a_special_input_is_checked_with_that_input_made_finite(plugins):
    """The scale truncated to an integer (0.5 becomes 0) came as two rows on the CPU and on an
    H200: ``accuracy`` (every key of a row weighted alike) and ``nan`` (a key of -inf times the
    zero scale). The NaN example fails no other way as it is; with its -inf keys made finite
    (``fuzz.influence.finite``: far below the others) it weights them as the others, the
    accuracy row's way with its trigger (the scale) holding: one bug, whichever came first."""
    from fuzz import influence
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates, bug_of

    target = get("planted6_softmax_scale_truncated_pallas")
    backend = get_backend(BACKENDS["pallas"])
    params = {"dtype": "float32", "scale": 0.5, "block_m": 8, "block_n": 16}
    values = np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)
    specials = np.zeros((1, 16), np.float32)
    specials[0, [3, 9]] = -np.inf
    wrong = CHECKS.as_found(target, backend, Case({"x": values}, params))
    nan = CHECKS.as_found(target, backend, Case({"x": specials}, params))
    assert (wrong.key, nan.key) == ("accuracy|oracle|y|-", "nan|oracle|y|-")
    made = influence.finite(nan.case)
    assert np.isfinite(made.inputs["x"]).all() and made.inputs["x"][0, 3] == -16.0
    options = CHECKS.options()
    for new, old in ((nan, wrong), (wrong, nan)):
        me = Duplicates(target, backend, options, found={"old": old}, known_bugs=[bug_of(old)])
        assert me.of(new) == (bug_of(old), "property")
    # With the scale an integer there is no bug: the NaN example made finite passes.
    me = Duplicates(target, backend, options, found={"old": wrong}, known_bugs=[bug_of(wrong)])
    assert (
        me.fails_as(dataclasses.replace(nan, case=nan.case.replace(scale=1.0)), nan.key, wrong.key)
        is None
    )
