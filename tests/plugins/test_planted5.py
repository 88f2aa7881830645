"""The planted one-bug kernels of round 5 (``tests/plugins/planted5.py``, Triton;
``planted5_pallas.py``, Pallas): each target registered through the public plugin API, its bug
in its plugin's docstring and in the records (``_planted5_bugs.py``), each bug's documented
trigger failing with its expected class (and a near miss of it passing: the kernel is right where
the trigger does not hold), the bug-free controls clean on short seeded hunts, and a sample of
the bugs found with their expected class by short hunts on the CPU interpreters (stopped by
example counts, never by seconds).

How many rows each bug becomes is measured by ``.ci/planted_rows.py --round 5``, not asserted
here.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from fuzz.case import Case
from fuzz.target import get, load_beside

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = load_beside(__file__, "_planted_checks.py", "kernel_fuzz_planted_checks")
PLUGINS = {
    "triton": os.path.join(HERE, "planted5.py"),
    "pallas": os.path.join(HERE, "planted5_pallas.py"),
}
BACKENDS = CHECKS.BACKENDS
# The families each language's kernels cover (attention: dense, packed or decode).
FAMILIES = ("softmax", "jagged_softmax", "attention", "simple_gla_fwd")


ROUND = CHECKS.Round(
    5,
    PLUGINS,
    FAMILIES,
    ("_planted_bugs.py", "_planted3_bugs.py", "_planted4_bugs.py"),
    ("softmax_frozen_max", "attention_window_right", "attention_lse_log2"),
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
    """Round 5's Pallas kernels are written for the GPU's lowering too (power-of-two arrays,
    head dims padded for the dots), not for interpret mode only as rounds 1 and 3 were."""
    ROUND.check_pallas_kinds(plugins)


# Each bug's documented trigger, and a near miss of it ---------------------------------------------


def _rng():
    return np.random.default_rng(0)


def _softmax_case(x, *, scale=None, keep=None):
    inputs = {"x": np.asarray(x, np.float32)}
    if keep is not None:
        inputs["mask"] = np.asarray(keep)
    return Case(inputs, {"dtype": "float32", "scale": scale, "block_m": 2, "block_n": 16})


def _jagged_case(lengths, cols):
    rows = sum(lengths)
    values = _rng().standard_normal((rows, cols)).astype(np.float32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return Case(
        {"values": values, "offsets": offsets},
        {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None, "guard": "nan"},
        {"lengths": list(lengths)},
    )


def _attention_case(tq, tk, d=1, *, causal=False, softcap=None):
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, 1, tq, d)).astype(np.float32),
        "k": rng.standard_normal((1, 1, tk, d)).astype(np.float32),
        "v": rng.standard_normal((1, 1, tk, d)).astype(np.float32),
    }
    params = {
        "dtype": "float32", "causal": causal, "window": None, "scale": None, "softcap": softcap,
        "alibi": None, "block_q": 16, "block_k": 16,
    }  # fmt: skip
    return Case(inputs, params)


def _varlen_case(cu_q, cu_k, tk, *, causal=True):
    case = _attention_case(cu_q[-1], tk, causal=causal)
    cu = {
        "cu_seqlens_q": np.asarray(cu_q, np.int32),
        "cu_seqlens_k": np.asarray(cu_k, np.int32),
    }
    return case.replace(inputs=cu)


def _decode_case(cache, *, window=None):
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, 1, 1, 2)).astype(np.float32),
        "k": rng.standard_normal((1, 1, cache, 2)).astype(np.float32),
        "v": rng.standard_normal((1, 1, cache, 2)).astype(np.float32),
        "cache_len": np.array([cache], np.int32),
    }
    params = {
        "dtype": "float32", "window": window, "scale": None, "softcap": None, "alibi": None,
        "block_k": 16, "num_splits": 1,
    }  # fmt: skip
    return Case(inputs, params)


def _gla_case(tokens, *, gate=-0.3, chunk=16, h0=None, final=True):
    rng = _rng()

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    inputs = {"q": arr(1, tokens, 1, 16), "k": arr(1, tokens, 1, 16), "v": arr(1, tokens, 1, 16)}
    inputs["g"] = np.full((1, tokens, 1), gate, np.float32)
    if h0 is not None:
        inputs["h0"] = h0
    params = {"dtype": "float32", "chunk_size": chunk, "scale": None, "output_final_state": final}
    return Case(inputs, params)


def _h0():
    state = np.arange(256, dtype=np.float32).reshape(1, 1, 16, 16) / 64.0  # not symmetric
    return state - state.mean()


# pattern -> (its trigger, a near miss: the same kernel right where the trigger does not hold)
TRIGGERS = {
    # 3 rows (block_m 2: row 2 is no program's) | 2 rows
    "softmax_row_block_of_block_n": (
        lambda: _softmax_case(_rng().standard_normal((3, 2))),
        lambda: _softmax_case(_rng().standard_normal((2, 2))),
    ),
    # one segment of one row and two columns | one segment of two rows and one column
    "jagged_sum_all_columns": (lambda: _jagged_case([1], 2), lambda: _jagged_case([2], 1)),
    # causal, Tq = 1, Tk = 2 | causal, Tq = Tk = 2
    "attention_causal_top_left": (
        lambda: _attention_case(1, 2, causal=True),
        lambda: _attention_case(2, 2, causal=True),
    ),
    # causal, one sequence of 2 queries and 2 keys, one guard row | no guard row
    "varlen_offset_of_totals": (
        lambda: _varlen_case([0, 2], [0, 2], 3),
        lambda: _varlen_case([0, 2], [0, 2], 2),
    ),
    # a non-symmetric initial state, one token | no initial state
    "gla_h0_transposed": (lambda: _gla_case(1, h0=_h0()), lambda: _gla_case(1)),
    # scale 0.5, two keys of different logits | scale 1
    "softmax_scale_as_temperature": (
        lambda: _softmax_case([[0.5, -0.25]], scale=0.5),
        lambda: _softmax_case([[0.5, -0.25]], scale=1.0),
    ),
    # two segments of one row, one column | one segment of two rows
    "jagged_stats_not_reset": (lambda: _jagged_case([1, 1], 1), lambda: _jagged_case([2], 1)),
    # a soft cap, D = 2 (default scale 2^-0.5), one query on two keys | no soft cap (a scale of
    # 1 is no near miss: the scale-applied-once property runs q * 2 with scale / 2)
    "attention_softcap_before_scale": (
        lambda: _attention_case(1, 2, d=2, softcap=2.0),
        lambda: _attention_case(1, 2, d=2),
    ),
    # window (0, -1), a cache of one key | no window
    "decode_position_is_length": (
        lambda: _decode_case(1, window=[0, -1]),
        lambda: _decode_case(1),
    ),
    # chunk 32, 17 tokens, gates -0.3 | chunk 16
    "gla_cumsum_per_tile": (
        lambda: _gla_case(17, chunk=32, final=False),
        lambda: _gla_case(17, chunk=16, final=False),
    ),
}


def test_every_pattern_has_a_trigger_here(plugins):
    assert set(TRIGGERS) == set(plugins["triton"].PATTERNS)


@pytest.mark.parametrize("pattern", sorted(TRIGGERS))
def test_a_bugs_trigger_fails_with_its_class_and_a_near_miss_passes(plugins, pattern):
    ROUND.check_trigger(plugins, pattern, TRIGGERS)


# Short seeded hunts ------------------------------------------------------------------------------


# Every Triton control, and the Pallas ones quick to hunt (the Pallas attention, decode and GLA
# controls compile a program per case structure: the campaign of .ci/planted_rows.py --round 5
# runs them).
CONTROLS = [
    *(f"control5_{f}_triton" for f in (*FAMILIES, "attention_varlen")),
    "control5_softmax_pallas",
    "control5_jagged_softmax_pallas",
]


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_is_clean_on_a_short_seeded_hunt(plugins, name):
    ROUND.check_clean(name, 10)


# A sample quick to find under seed 1, of both languages, each of its expected class.
SAMPLE = [
    ("planted5_softmax_row_block_of_block_n_triton", 10),
    ("planted5_jagged_sum_all_columns_triton", 10),
    ("planted5_attention_causal_top_left_triton", 10),
    ("planted5_softmax_scale_as_temperature_pallas", 10),
    ("planted5_jagged_stats_not_reset_pallas", 10),
]


@pytest.mark.parametrize(("name", "examples"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, examples):
    ROUND.check_found(plugins, name, examples)


def test_a_minimal_example_whose_wrong_elements_read_nothing_is_analysed_with_values_drawn_again(
    plugins,
):
    """The decode kernel that placed its query one key late came as two rows of one window: a
    window of one key (the kernel sees none: ``lse`` is -inf, ``o`` ignores ``v``) and a window
    of two keys whose minimal example has a zero query (the kernel sees one key of two: ``lse``
    is log 1 for log 2 whatever the keys, so its wrong element depends on no input, and the
    influence analysis had nothing to compare). Neither example fails the other's way. With the
    values its shrink left at one value drawn again (``fuzz.influence.revalued``) the second
    example still fails so, and its wrong elements ignore ``q`` and ``v``: the first row's
    anomaly nests in them, one bug."""
    from fuzz import influence
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates, bug_of

    target, backend = (
        get("planted5_decode_position_is_length_pallas"),
        get_backend(BACKENDS["pallas"]),
    )
    # the minimal examples: one head of size 1, the values the failures do not need zeros
    one, two = _decode_case(1, window=[0, -1]), _decode_case(2, window=[1, -1])
    one = one.replace(inputs={n: np.zeros((1, 1, 1, 1), np.float32) for n in "qkv"})
    two = two.replace(
        inputs={
            "q": np.zeros((1, 1, 1, 1), np.float32),
            "k": two.inputs["k"][..., :1],
            "v": np.zeros((1, 1, 2, 1), np.float32),
        }
    )
    options = CHECKS.options()
    none_seen, one_seen = (CHECKS.as_found(target, backend, c) for c in (one, two))
    assert (none_seen.key, one_seen.key) == ("inf|oracle|lse|-", "accuracy|oracle|lse|-")
    assert not influence.anomalies(target, backend, options, two)  # it reads nothing
    assert influence.revalued(two).inputs["q"].any()
    me = Duplicates(
        target, backend, options, found={"inf": none_seen}, known_bugs=[bug_of(none_seen)]
    )
    assert me.also_fails(one_seen) is None and me.shown_by_known(one_seen) is None
    assert me.reads_alike(one_seen) == bug_of(none_seen)
    # Both examples also match the oracle with the query one key late (``fuzz.explain``),
    # evidence the check takes first.
    assert me.of(one_seen) == (bug_of(none_seen), "explained")


def test_an_overflow_example_is_checked_on_smaller_values(plugins):
    """The gates' prefix sum restarted at every 16-token tile of a 32-token chunk came as two
    rows on the CPU: ``inf`` through ``finite-every-chunk`` (strong gates, g_gamma -5.92: the
    decay across the tile boundary grows to exp(183)) and ``accuracy`` through
    ``chunk-independence`` (weak gates: it grows less). Neither fails the other's way as it is;
    the Inf example on a quarter of its values (``fuzz.influence.tamed``: the gates too) fails
    the accuracy row's way with its triggers holding: one bug, whichever came first."""
    from fuzz import influence
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates, bug_of

    target, backend = get("planted5_gla_cumsum_per_tile_pallas"), get_backend(BACKENDS["pallas"])
    rng = np.random.default_rng(3)

    def case(tokens, g_gamma):
        qkv = {n: rng.standard_normal((1, tokens, 1, 16)).astype(np.float32) for n in "qkv"}
        params = {"dtype": "float32", "chunk_size": 16, "scale": None}
        params["output_final_state"] = False
        return Case({**qkv, "g_gamma": np.array([g_gamma], np.float32)}, params)

    drawn = {  # each property's parameter (chunk size 32 for both)
        "masked-poison": "nan", "finite-every-chunk": 0, "chunk-independence": 0,
        "state-continuation": [0, 0.5],
    }  # fmt: skip
    inf = CHECKS.as_found(target, backend, case(31, -5.9206324), drawn)
    wrong = CHECKS.as_found(target, backend, case(32, -(2.0**-8)), drawn)
    assert (inf.key, wrong.key) == ("inf|finite-every-chunk|o|-", "accuracy|chunk-independence|o|-")
    made = influence.tamed(inf.case, 0.25)
    assert made.inputs["g_gamma"][0] == np.float32(-5.9206324) / 4
    options = CHECKS.options()
    for new, old in ((inf, wrong), (wrong, inf)):
        me = Duplicates(target, backend, options, found={"old": old}, known_bugs=[bug_of(old)])
        assert me.of(new) == (bug_of(old), "property")
