"""The planted one-bug kernels of round 13 (``tests/plugins/planted13.py``, Triton;
``planted13_pallas.py``, Pallas): each target registered through the public plugin API, its bug
in its plugin's docstring and in the records (``_planted13_bugs.py``), each bug's documented
trigger failing with its expected class (and a near miss of it passing: the kernel is right where
the trigger does not hold), the bug-free controls passing every trigger of their family and clean
on short seeded hunts, and a sample of the bugs found with their expected class by short hunts on
the CPU interpreters (stopped by example counts, never by seconds).

How many rows each bug becomes is measured by ``.ci/planted_rows.py --round 13``, not asserted
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
    "triton": os.path.join(HERE, "planted13.py"),
    "pallas": os.path.join(HERE, "planted13_pallas.py"),
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
    "_planted9_bugs.py",
    "_planted10_bugs.py",
    "_planted11_bugs.py",
    "_planted12_bugs.py",
)


ROUND = CHECKS.Round(
    13,
    PLUGINS,
    FAMILIES,
    EARLIER,
    ("softmax_bias_row0", "jagged_stats_not_reset", "decode_empty_split_lse_zero"),
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
    """Round 13's Pallas kernels are written for the GPU's lowering too (power-of-two blocks,
    head dims padded for the dots), not for interpret mode only as rounds 1 and 3 were."""
    ROUND.check_pallas_kinds(plugins)


# Each bug's documented trigger, and a near miss of it ---------------------------------------------


def _rng():
    return np.random.default_rng(0)


def _softmax_case(x, *, mask=None, bias=None, scale=None, block_n=16):
    inputs = {"x": np.asarray(x, np.float32)}
    if mask is not None:
        inputs["mask"] = np.asarray(mask, bool)
    if bias is not None:
        inputs["bias"] = np.asarray(bias, np.float32)
    return Case(inputs, {"dtype": "float32", "scale": scale, "block_m": 4, "block_n": block_n})


def _jagged_case(lengths, columns=1, *, values=None, block_n=4):
    rows = sum(lengths)
    if values is None:
        values = _rng().standard_normal((rows, columns))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return Case(
        {"values": np.asarray(values, np.float32).reshape(rows, -1), "offsets": offsets},
        {"dtype": "float32", "block_n": block_n, "block_m": 4, "num_programs": None,
         "guard": "nan"},
        {"lengths": list(lengths)},
    )  # fmt: skip


def _attention_case(
    tq, tk, *, causal=False, window=None, scale=None, slopes=None, softcap=None, block_q=16
):  # fmt: skip
    """Head dim 1, one head."""
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, 1, tq, 1)).astype(np.float32),
        "k": rng.standard_normal((1, 1, tk, 1)).astype(np.float32),
        "v": rng.standard_normal((1, 1, tk, 1)).astype(np.float32),
    }
    if slopes is not None:
        inputs["alibi_slopes"] = np.asarray(slopes, np.float32)
    params = {
        "dtype": "float32", "causal": causal, "window": window, "scale": scale,
        "softcap": softcap, "alibi": None if slopes is None else "user", "block_q": block_q,
        "block_k": 16,
    }  # fmt: skip
    return Case(inputs, params)


def _varlen_case(cu_q, cu_k, tk, **kw):
    case = _attention_case(cu_q[-1], tk, **kw)
    cu = {
        "cu_seqlens_q": np.asarray(cu_q, np.int32),
        "cu_seqlens_k": np.asarray(cu_k, np.int32),
    }
    return case.replace(inputs=cu)


def _decode_case(cache, slots, *, splits=1):
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


def _gla_case(tokens, *, gate=None, gamma=None, final=True, scale=None):
    """Per-token gates of ``gate`` or a per-head decay ``gamma``, one head, head dims 16 (the
    default scale 1/4)."""
    rng = _rng()

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    inputs = {"q": arr(1, tokens, 1, 16), "k": arr(1, tokens, 1, 16), "v": arr(1, tokens, 1, 16)}
    if gamma is None:
        inputs["g"] = np.full((1, tokens, 1), gate, np.float32)
    else:
        inputs["g_gamma"] = np.full((1,), gamma, np.float32)
    params = {"dtype": "float32", "chunk_size": 16, "scale": scale, "output_final_state": final}
    return Case(inputs, params)


def _ramp(cols):
    """One row of ``cols`` logits from -1 to 1."""
    return np.linspace(-1, 1, cols)[None, :]


# pattern -> (its trigger, a near miss: the same kernel right where the trigger does not hold)
TRIGGERS = {
    # one row of one key, x = -inf, no mask | the same row, its key masked
    "softmax_empty_row_by_mask_count": (
        lambda: _softmax_case([[-np.inf]]),
        lambda: _softmax_case([[-np.inf]], mask=[[False]]),
    ),
    # one row of one column, -inf | 0.5
    "jagged_values_sanitized_in_place": (
        lambda: _jagged_case([1], values=[[-np.inf]]),
        lambda: _jagged_case([1], values=[[0.5]]),
    ),
    # one query on one key (block_k 16) | on 16 keys, a whole tile
    "attention_values_loaded_without_key_mask": (
        lambda: _attention_case(1, 1),
        lambda: _attention_case(1, 16),
    ),
    # a cache of two keys in one split | of one key
    "decode_split_output_unnormalized": (
        lambda: _decode_case(2, 2, splits=1),
        lambda: _decode_case(1, 2, splits=1),
    ),
    # one token, the default scale 1/4 (head dim 16), final state | a scale of 1
    "gla_scale_folded_into_keys": (
        lambda: _gla_case(1, gate=-0.1),
        lambda: _gla_case(1, gate=-0.1, scale=1.0),
    ),
    # one row of 16 keys, block_n 16 | of 15 keys
    "softmax_tile_count_one_too_many": (
        lambda: _softmax_case(_ramp(16)),
        lambda: _softmax_case(_ramp(15)),
    ),
    # a segment of two rows (block_n 4: a slab of 4) | of four rows, a full slab
    "jagged_slab_filled_from_its_end": (
        lambda: _jagged_case([2]),
        lambda: _jagged_case([4]),
    ),
    # ALiBi, one query on two keys, a slope of 1 | two queries on two keys
    "attention_alibi_distance_of_query_index": (
        lambda: _attention_case(1, 2, slopes=[1.0]),
        lambda: _attention_case(2, 2, slopes=[1.0]),
    ),
    # two sequences of one query, the first with no key, the second with one | the other way
    "varlen_keys_of_compacted_sequence_index": (
        lambda: _varlen_case([0, 1, 2], [0, 0, 1], 1),
        lambda: _varlen_case([0, 1, 2], [0, 1, 1], 1),
    ),
    # two tokens of gates -100 | of gates -30 (no cumulative decay past -87)
    "gla_cumulative_decay_clamped": (
        lambda: _gla_case(2, gate=-100.0),
        lambda: _gla_case(2, gate=-30.0),
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
# controls compile a program per case structure: the campaign of .ci/planted_rows.py --round 13
# runs them).
CONTROLS = [
    *(f"control13_{f}_triton" for f in (*FAMILIES, "attention_decode")),
    "control13_softmax_pallas",
    "control13_jagged_softmax_pallas",
]


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_is_clean_on_a_short_seeded_hunt(plugins, name):
    ROUND.check_clean(name, 10)


# A sample quick to find under seed 1, of both languages, each of its expected class.
SAMPLE = [
    ("planted13_jagged_values_sanitized_in_place_triton", 10),
    ("planted13_jagged_slab_filled_from_its_end_pallas", 10),
]


@pytest.mark.parametrize(("name", "examples"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, examples):
    ROUND.check_found(plugins, name, examples)
