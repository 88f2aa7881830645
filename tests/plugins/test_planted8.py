"""The planted one-bug kernels of round 8 (``tests/plugins/planted8.py``, Triton;
``planted8_pallas.py``, Pallas): each target registered through the public plugin API, its bug
in its plugin's docstring and in the records (``_planted8_bugs.py``), each bug's documented
trigger failing with its expected class (and a near miss of it passing: the kernel is right where
the trigger does not hold), the bug-free controls passing every trigger of their family and clean
on short seeded hunts, and a sample of the bugs found with their expected class by short hunts on
the CPU interpreters (stopped by example counts, never by seconds).

How many rows each bug becomes is measured by ``.ci/planted_rows.py --round 8``, not asserted
here.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from fuzz.arrays import np_dtype
from fuzz.case import Case
from fuzz.target import load_beside

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = load_beside(__file__, "_planted_checks.py", "kernel_fuzz_planted_checks")
PLUGINS = {
    "triton": os.path.join(HERE, "planted8.py"),
    "pallas": os.path.join(HERE, "planted8_pallas.py"),
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
)


ROUND = CHECKS.Round(
    8,
    PLUGINS,
    FAMILIES,
    EARLIER,
    ("softmax_bias_row0", "jagged_stats_not_reset", "varlen_lse_token_major"),
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
    """Round 8's Pallas kernels are written for the GPU's lowering too (power-of-two blocks,
    head dims padded for the dots), not for interpret mode only as rounds 1 and 3 were."""
    ROUND.check_pallas_kinds(plugins)


# Each bug's documented trigger, and a near miss of it ---------------------------------------------


def _rng():
    return np.random.default_rng(0)


def _softmax_case(x, *, mask=None):
    inputs = {"x": np.asarray(x, np.float32)}
    if mask is not None:
        inputs["mask"] = np.asarray(mask, bool)
    return Case(inputs, {"dtype": "float32", "scale": None, "block_m": 2, "block_n": 16})


def _jagged_case(lengths, columns=1):
    rows = sum(lengths)
    values = _rng().standard_normal((rows, columns))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return Case(
        {"values": np.asarray(values, np.float32).reshape(rows, -1), "offsets": offsets},
        {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None, "guard": "nan"},
        {"lengths": list(lengths)},
    )


def _attention_case(tq, tk, *, window=None, dtype="float32", values=None, zero_q=False):
    """One head, head dim 1; ``values``: every value (else drawn); ``zero_q``: every logit 0."""
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, 1, tq, 1)),
        "k": rng.standard_normal((1, 1, tk, 1)),
        "v": rng.standard_normal((1, 1, tk, 1)),
    }
    if zero_q:
        inputs["q"] = np.zeros_like(inputs["q"])
    if values is not None:
        inputs["v"] = np.full_like(inputs["v"], values)
    inputs = {n: a.astype(np_dtype(dtype)) for n, a in inputs.items()}
    params = {
        "dtype": dtype, "causal": False, "window": window, "scale": None, "softcap": None,
        "alibi": None, "block_q": 16, "block_k": 16,
    }  # fmt: skip
    return Case(inputs, params)


def _varlen_case(cu_q, cu_k, tk, *, window=None):
    case = _attention_case(cu_q[-1], tk, window=window)
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


def _gla_case(tokens, *, final=True):
    """Per-token gates of -0.3."""
    rng = _rng()

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    inputs = {"q": arr(1, tokens, 1, 16), "k": arr(1, tokens, 1, 16), "v": arr(1, tokens, 1, 16)}
    inputs["g"] = np.full((1, tokens, 1), -0.3, np.float32)
    params = {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": final}
    return Case(inputs, params)


# pattern -> (its trigger, a near miss: the same kernel right where the trigger does not hold)
TRIGGERS = {
    # one row of 17 keys (block_n 16: column 16 past the tile) | 16 keys
    "softmax_row_tile_of_block_n": (
        lambda: _softmax_case(_rng().standard_normal((1, 17))),
        lambda: _softmax_case(_rng().standard_normal((1, 16))),
    ),
    # segments of 1 and 2 rows (max_len 3 // 2 = 1) | of 2 and 2 rows (the mean is the longest)
    "jagged_max_len_of_mean": (lambda: _jagged_case([1, 2]), lambda: _jagged_case([2, 2])),
    # window (0, -1), one query on two keys (key 1, its one key, skipped) | window (1, -1)
    "attention_window_start_rounded_up": (
        lambda: _attention_case(1, 2, window=[0, -1]),
        lambda: _attention_case(1, 2, window=[1, -1]),
    ),
    # head dim 2, two keys in two splits | in one split
    "decode_scratch_padded_stride": (
        lambda: _decode_case(2, splits=2),
        lambda: _decode_case(2, splits=1),
    ),
    # two tokens and the final state | two tokens, no final state asked for (o is right)
    "gla_chunk_decay_of_last_gate": (lambda: _gla_case(2), lambda: _gla_case(2, final=False)),
    # one row of two keys, key 1 masked | no mask
    "softmax_mask_polarity_inverted": (
        lambda: _softmax_case([[0.5, -0.25]], mask=[[True, False]]),
        lambda: _softmax_case([[0.5, -0.25]]),
    ),
    # three segments of one row | two (the first and the last are right)
    "jagged_offsets_as_lengths": (lambda: _jagged_case([1, 1, 1]), lambda: _jagged_case([1, 1])),
    # float16, one query on two keys of logit 0 and value 40000 (an accumulator of 80000) | one key
    "attention_acc_cast_before_division": (
        lambda: _attention_case(1, 2, dtype="float16", values=40000.0, zero_q=True),
        lambda: _attention_case(1, 1, dtype="float16", values=40000.0, zero_q=True),
    ),
    # window (0, -1), one sequence of one query on two keys | window (1, 1), symmetric
    "varlen_window_sides_swapped": (
        lambda: _varlen_case([0, 1], [0, 2], 2, window=[0, -1]),
        lambda: _varlen_case([0, 1], [0, 2], 2, window=[1, 1]),
    ),
    # two tokens | one token (its own key only)
    "gla_intra_decay_reversed": (
        lambda: _gla_case(2, final=False),
        lambda: _gla_case(1, final=False),
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
# controls compile a program per case structure: the campaign of .ci/planted_rows.py --round 8
# runs them).
CONTROLS = [
    *(f"control8_{f}_triton" for f in (*FAMILIES, "attention_decode")),
    "control8_softmax_pallas",
    "control8_jagged_softmax_pallas",
]


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_is_clean_on_a_short_seeded_hunt(plugins, name):
    ROUND.check_clean(name, 10)


# A sample quick to find under seed 1, of both languages, each of its expected class.
SAMPLE = [
    ("planted8_softmax_row_tile_of_block_n_triton", 10),
    ("planted8_jagged_max_len_of_mean_triton", 10),
    ("planted8_decode_scratch_padded_stride_triton", 10),
    ("planted8_softmax_mask_polarity_inverted_pallas", 10),
    ("planted8_jagged_offsets_as_lengths_pallas", 10),
]


@pytest.mark.parametrize(("name", "examples"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, examples):
    ROUND.check_found(plugins, name, examples)
