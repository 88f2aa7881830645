"""The planted one-bug kernels of round 10 (``tests/plugins/planted10.py``, Triton;
``planted10_pallas.py``, Pallas): each target registered through the public plugin API, its bug
in its plugin's docstring and in the records (``_planted10_bugs.py``), each bug's documented
trigger failing with its expected class (and a near miss of it passing: the kernel is right where
the trigger does not hold), the bug-free controls passing every trigger of their family and clean
on short seeded hunts, and a sample of the bugs found with their expected class by short hunts on
the CPU interpreters (stopped by example counts, never by seconds).

How many rows each bug becomes is measured by ``.ci/planted_rows.py --round 10``, not asserted
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
    "triton": os.path.join(HERE, "planted10.py"),
    "pallas": os.path.join(HERE, "planted10_pallas.py"),
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
)


ROUND = CHECKS.Round(
    10,
    PLUGINS,
    FAMILIES,
    EARLIER,
    ("softmax_bias_row0", "jagged_stats_not_reset", "gla_gamma_of_batch_index"),
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
    """Round 10's Pallas kernels are written for the GPU's lowering too (power-of-two blocks,
    head dims padded for the dots), not for interpret mode only as rounds 1 and 3 were."""
    ROUND.check_pallas_kinds(plugins)


# Each bug's documented trigger, and a near miss of it ---------------------------------------------


def _rng():
    return np.random.default_rng(0)


def _softmax_case(x, *, mask=None, bias=None, block_n=16):
    inputs = {"x": np.asarray(x, np.float32)}
    if mask is not None:
        inputs["mask"] = np.asarray(mask, bool)
    if bias is not None:
        inputs["bias"] = np.asarray(bias, np.float32)
    return Case(inputs, {"dtype": "float32", "scale": None, "block_m": 2, "block_n": block_n})


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


def _attention_case(tq, tk, *, causal=False, heads=(1, 1), k=None, block_k=16):
    """Head dim 1 (``heads``: query and kv heads); ``k``: the keys of the one kv head."""
    rng = _rng()
    hq, hkv = heads
    inputs = {
        "q": rng.standard_normal((1, hq, tq, 1)).astype(np.float32),
        "k": rng.standard_normal((1, hkv, tk, 1)).astype(np.float32),
        "v": rng.standard_normal((1, hkv, tk, 1)).astype(np.float32),
    }
    if k is not None:
        inputs["q"] = np.ones((1, hq, tq, 1), np.float32)
        inputs["k"] = np.asarray(k, np.float32).reshape(1, hkv, tk, 1)
    params = {
        "dtype": "float32", "causal": causal, "window": None, "scale": None, "softcap": None,
        "alibi": None, "block_q": 16, "block_k": block_k,
    }  # fmt: skip
    return Case(inputs, params)


def _varlen_case(cu_q, cu_k, tk, *, causal=False):
    case = _attention_case(cu_q[-1], tk, causal=causal)
    cu = {
        "cu_seqlens_q": np.asarray(cu_q, np.int32),
        "cu_seqlens_k": np.asarray(cu_k, np.int32),
    }
    return case.replace(inputs=cu)


def _decode_case(cache, slots, *, heads=(1, 1), splits=1):
    rng = _rng()
    hq, hkv = heads
    inputs = {
        "q": rng.standard_normal((1, hq, 1, 2)).astype(np.float32),
        "k": rng.standard_normal((1, hkv, slots, 2)).astype(np.float32),
        "v": rng.standard_normal((1, hkv, slots, 2)).astype(np.float32),
        "cache_len": np.array([cache], np.int32),
    }
    params = {
        "dtype": "float32", "window": None, "scale": None, "softcap": None, "alibi": None,
        "block_k": 16, "num_splits": splits,
    }  # fmt: skip
    return Case(inputs, params)


def _gla_case(tokens, *, gate, batch=1, heads=1, final=True):
    """Per-token gates of ``gate``."""
    rng = _rng()

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    inputs = {
        "q": arr(batch, tokens, heads, 16),
        "k": arr(batch, tokens, heads, 16),
        "v": arr(batch, tokens, heads, 16),
        "g": np.full((batch, tokens, heads), gate, np.float32),
    }
    params = {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": final}
    return Case(inputs, params)


# pattern -> (its trigger, a near miss: the same kernel right where the trigger does not hold)
TRIGGERS = {
    # one row of two keys | one row of one key
    "softmax_lse_of_natural_log": (
        lambda: _softmax_case([[0.5, -0.25]]),
        lambda: _softmax_case([[0.5]]),
    ),
    # one segment of two rows and 5 columns, block_n 8 | block_n 4 (as block_m)
    "jagged_column_grid_of_row_tile": (
        lambda: _jagged_case([2], 5, block_n=8),
        lambda: _jagged_case([2], 5, block_n=4),
    ),
    # one query on 17 keys (block_k 16), key 16 the largest | on 16 keys
    "attention_acc_rescaled_twice": (
        lambda: _attention_case(1, 17, k=[0.0] * 16 + [2.0]),
        lambda: _attention_case(1, 16, k=[0.0] * 15 + [2.0]),
    ),
    # four query heads on two kv heads | on one
    "decode_gqa_head_modulo": (
        lambda: _decode_case(2, 2, heads=(4, 2)),
        lambda: _decode_case(2, 2, heads=(4, 1)),
    ),
    # two batch elements of two heads, final state | one batch element of two heads
    "gla_ht_head_major": (
        lambda: _gla_case(2, gate=-0.1, batch=2, heads=2),
        lambda: _gla_case(2, gate=-0.1, batch=1, heads=2),
    ),
    # one row of two keys with a bias (0, 1) | a bias of zeros
    "softmax_write_pass_without_bias": (
        lambda: _softmax_case([[0.5, -0.25]], bias=[[0.0, 1.0]]),
        lambda: _softmax_case([[0.5, -0.25]], bias=[[0.0, 0.0]]),
    ),
    # one segment of 5 rows (block_n 4) | of 4 rows
    "jagged_stats_skip_partial_tile": (lambda: _jagged_case([5]), lambda: _jagged_case([4])),
    # causal, 17 queries on 17 keys (block_k 16) | 16 on 16
    "attention_mask_key_index_without_tile_start": (
        lambda: _attention_case(17, 17, causal=True),
        lambda: _attention_case(16, 16, causal=True),
    ),
    # causal, one sequence of 17 queries on 17 keys (block_q 16) | the same, not causal
    "varlen_tile_start_in_tiles": (
        lambda: _varlen_case([0, 17], [0, 17], 17, causal=True),
        lambda: _varlen_case([0, 17], [0, 17], 17),
    ),
    # one token of gate -1, final state | gate 0
    "gla_state_decay_after_update": (
        lambda: _gla_case(1, gate=-1.0),
        lambda: _gla_case(1, gate=0.0),
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
# controls compile a program per case structure: the campaign of .ci/planted_rows.py --round 10
# runs them).
CONTROLS = [
    *(f"control10_{f}_triton" for f in (*FAMILIES, "attention_decode")),
    "control10_softmax_pallas",
    "control10_jagged_softmax_pallas",
]


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_is_clean_on_a_short_seeded_hunt(plugins, name):
    ROUND.check_clean(name, 10)


# A sample quick to find under seed 1, of both languages, each of its expected class.
SAMPLE = [
    ("planted10_softmax_lse_of_natural_log_triton", 10),
    ("planted10_jagged_stats_skip_partial_tile_pallas", 10),
]


@pytest.mark.parametrize(("name", "examples"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, examples):
    ROUND.check_found(plugins, name, examples)
