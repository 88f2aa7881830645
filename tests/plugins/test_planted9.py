"""The planted one-bug kernels of round 9 (``tests/plugins/planted9.py``, Triton;
``planted9_pallas.py``, Pallas): each target registered through the public plugin API, its bug
in its plugin's docstring and in the records (``_planted9_bugs.py``), each bug's documented
trigger failing with its expected class (and a near miss of it passing: the kernel is right where
the trigger does not hold), the bug-free controls passing every trigger of their family and clean
on short seeded hunts, and a sample of the bugs found with their expected class by short hunts on
the CPU interpreters (stopped by example counts, never by seconds).

How many rows each bug becomes is measured by ``.ci/planted_rows.py --round 9``, not asserted
here.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from fuzz.case import Case
from fuzz.target import load_beside

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = load_beside(__file__, "_planted_checks.py", "kernel_fuzz_planted_checks")
PLUGINS = {
    "triton": os.path.join(HERE, "planted9.py"),
    "pallas": os.path.join(HERE, "planted9_pallas.py"),
}
# The families each language's kernels cover (attention: dense, packed or decode).
FAMILIES = ("softmax", "jagged_softmax", "attention", "simple_gla_fwd")
# The record files of the earlier rounds, whose patterns are not planted again.
EARLIER = (
    "_planted_bugs.py",
    "_planted3_bugs.py",
    "_planted4_bugs.py",
    "_planted5_bugs.py",
    "_planted6_bugs.py",
    "_planted7_bugs.py",
    "_planted8_bugs.py",
)


ROUND = CHECKS.Round(
    9,
    PLUGINS,
    FAMILIES,
    EARLIER,
    ("softmax_bias_row0", "jagged_stats_not_reset", "varlen_window_sides_swapped"),
)


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
    """Round 9's Pallas kernels are written for the GPU's lowering too (power-of-two blocks,
    head dims padded for the dots), not for interpret mode only as rounds 1 and 3 were."""
    ROUND.check_pallas_kinds(plugins)


# Each bug's documented trigger, and a near miss of it ---------------------------------------------


def _rng():
    return np.random.default_rng(0)


def _softmax_case(x, *, mask=None, bias=None):
    inputs = {"x": np.asarray(x, np.float32)}
    if mask is not None:
        inputs["mask"] = np.asarray(mask, bool)
    if bias is not None:
        inputs["bias"] = np.asarray(bias, np.float32)
    return Case(inputs, {"dtype": "float32", "scale": None, "block_m": 2, "block_n": 16})


def _jagged_case(lengths, columns=1, *, values=None):
    rows = sum(lengths)
    if values is None:
        values = _rng().standard_normal((rows, columns))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return Case(
        {"values": np.asarray(values, np.float32).reshape(rows, -1), "offsets": offsets},
        {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None, "guard": "nan"},
        {"lengths": list(lengths)},
    )


def _attention_case(tq, tk, *, window=None, causal=False, key_lengths=None, block_k=16):
    """One head, head dim 1."""
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, 1, tq, 1)).astype(np.float32),
        "k": rng.standard_normal((1, 1, tk, 1)).astype(np.float32),
        "v": rng.standard_normal((1, 1, tk, 1)).astype(np.float32),
    }
    if key_lengths is not None:
        inputs["key_lengths"] = np.asarray(key_lengths, np.int32)
    params = {
        "dtype": "float32", "causal": causal, "window": window, "scale": None, "softcap": None,
        "alibi": None, "block_q": 16, "block_k": block_k,
    }  # fmt: skip
    return Case(inputs, params)


def _varlen_case(cu_q, cu_k, tk, *, block_k=16):
    case = _attention_case(cu_q[-1], tk, block_k=block_k)
    cu = {
        "cu_seqlens_q": np.asarray(cu_q, np.int32),
        "cu_seqlens_k": np.asarray(cu_k, np.int32),
    }
    return case.replace(inputs=cu)


def _decode_case(cache, slots, *, splits):
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, 1, 1, 2)).astype(np.float32),
        "k": rng.standard_normal((1, 1, slots, 2)).astype(np.float32),
        "v": rng.standard_normal((1, 1, slots, 2)).astype(np.float32),
        "cache_len": np.array([cache], np.int32),
    }
    params = {
        "dtype": "float32", "window": None, "scale": None, "softcap": None, "alibi": None,
        "block_k": 16, "num_splits": splits,
    }  # fmt: skip
    return Case(inputs, params)


def _gla_case(tokens, *, gate=None, gammas=None, final=True):
    """Per-token gates of ``gate``, or per-head decays ``gammas`` (one head a decay)."""
    rng = _rng()
    heads = 1 if gammas is None else len(gammas)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    inputs = {
        "q": arr(1, tokens, heads, 16),
        "k": arr(1, tokens, heads, 16),
        "v": arr(1, tokens, heads, 16),
    }
    if gammas is None:
        inputs["g"] = np.full((1, tokens, heads), gate, np.float32)
    else:
        inputs["g_gamma"] = np.asarray(gammas, np.float32)
    params = {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": final}
    return Case(inputs, params)


# pattern -> (its trigger, a near miss: the same kernel right where the trigger does not hold)
TRIGGERS = {
    # one row of two different logits | one row of two equal logits
    "softmax_exp2_without_log2e": (
        lambda: _softmax_case([[0.5, -0.25]]),
        lambda: _softmax_case([[0.5, 0.5]]),
    ),
    # one segment of 5 rows (block_n 4: two row tiles) | of 4 rows (one tile)
    "jagged_write_with_partial_sum": (lambda: _jagged_case([5]), lambda: _jagged_case([4])),
    # causal, two queries on two keys, one in use | the same, both keys in use
    "attention_causal_offset_of_padded_length": (
        lambda: _attention_case(2, 2, causal=True, key_lengths=[1]),
        lambda: _attention_case(2, 2, causal=True, key_lengths=[2]),
    ),
    # one key in use of two slots, two splits | one split
    "decode_split_end_of_capacity": (
        lambda: _decode_case(1, 2, splits=2),
        lambda: _decode_case(1, 2, splits=1),
    ),
    # two tokens with gates -50 and the final state | gates -30 (no overflow)
    "gla_key_decay_factored": (
        lambda: _gla_case(2, gate=-50.0),
        lambda: _gla_case(2, gate=-30.0),
    ),
    # two rows of two keys with a bias | one row of two keys with a bias
    "softmax_bias_transposed_layout": (
        lambda: _softmax_case([[0.5, -0.25], [0.0, 1.0]], bias=[[0.0, 1.0], [2.0, 3.5]]),
        lambda: _softmax_case([[0.5, -0.25]], bias=[[0.0, 1.0]]),
    ),
    # segments of one row and two, values 0 and -200, -201 | 0 and -20, -21
    "jagged_shift_of_global_max": (
        lambda: _jagged_case([1, 2], values=[[0.0], [-200.0], [-201.0]]),
        lambda: _jagged_case([1, 2], values=[[0.0], [-20.0], [-21.0]]),
    ),
    # window (0, -1), one query on two keys | window (1, -1)
    "attention_window_zero_side_as_unbounded": (
        lambda: _attention_case(1, 2, window=[0, -1]),
        lambda: _attention_case(1, 2, window=[1, -1]),
    ),
    # one sequence of one query on 17 keys (block_k 16) | on 16 keys
    "varlen_key_loop_of_query_length": (
        lambda: _varlen_case([0, 1], [0, 17], 17),
        lambda: _varlen_case([0, 1], [0, 16], 16),
    ),
    # two heads of decays -0.1 and -0.5, two tokens | of equal decays
    "gla_gamma_of_batch_index": (
        lambda: _gla_case(2, gammas=[-0.1, -0.5], final=False),
        lambda: _gla_case(2, gammas=[-0.3, -0.3], final=False),
    ),
}


def test_every_pattern_has_a_trigger_here(plugins):
    assert set(TRIGGERS) == set(plugins["triton"].PATTERNS)


@pytest.mark.parametrize("pattern", sorted(TRIGGERS))
def test_a_bugs_trigger_fails_with_its_class_and_a_near_miss_passes(plugins, pattern):
    """The trigger fails with the expected class on the planted kernel and passes on the
    family's control (the planted line is what fails); the near miss passes."""
    ROUND.check_trigger(plugins, pattern, TRIGGERS)


# Short seeded hunts ------------------------------------------------------------------------------


# Every Triton control, and the Pallas ones quick to hunt (the Pallas attention, packed and GLA
# controls compile a program per case structure: the campaign of .ci/planted_rows.py --round 9
# runs them).
CONTROLS = [
    *(f"control9_{f}_triton" for f in (*FAMILIES, "attention_decode")),
    "control9_softmax_pallas",
    "control9_jagged_softmax_pallas",
]


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_is_clean_on_a_short_seeded_hunt(plugins, name):
    ROUND.check_clean(name, 10)


# A sample quick to find under seed 1, of both languages, each of its expected class.
SAMPLE = [
    ("planted9_softmax_exp2_without_log2e_triton", 10),
    ("planted9_softmax_bias_transposed_layout_pallas", 10),
]


@pytest.mark.parametrize(("name", "examples"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, examples):
    ROUND.check_found(plugins, name, examples)
