"""The planted one-bug kernels of round 15 (``tests/plugins/planted15.py``, Triton;
``planted15_pallas.py``, Pallas): each target registered through the public plugin API, its bug
in its plugin's docstring and in the records (``_planted15_bugs.py``), each bug's documented
trigger failing with its expected class (and a near miss of it passing: the kernel is right where
the trigger does not hold), the bug-free controls passing every trigger of their family and clean
on short seeded hunts, and a sample of the bugs found with their expected class by short hunts on
the CPU interpreters (stopped by example counts, never by seconds).

How many rows each bug becomes is measured by ``.ci/planted_rows.py --round 15``, not asserted
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
    "triton": os.path.join(HERE, "planted15.py"),
    "pallas": os.path.join(HERE, "planted15_pallas.py"),
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
    "_planted13_bugs.py",
    "_planted14_bugs.py",
)


ROUND = CHECKS.Round(
    15,
    PLUGINS,
    FAMILIES,
    EARLIER,
    ("softmax_bias_row0", "jagged_stats_not_reset", "gla_intra_mask_strict_diagonal"),
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
    """Round 15's Pallas kernels are written for the GPU's lowering too (power-of-two blocks,
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
    tq, tk, *, causal=False, window=None, scale=None, slopes=None, softcap=None, block_q=16,
    heads=1, key_lengths=None,
):  # fmt: skip
    """Head dim 1, ``heads`` query and kv heads; ``key_lengths``: the key padding's."""
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, heads, tq, 1)).astype(np.float32),
        "k": rng.standard_normal((1, heads, tk, 1)).astype(np.float32),
        "v": rng.standard_normal((1, heads, tk, 1)).astype(np.float32),
    }
    if slopes is not None:
        inputs["alibi_slopes"] = np.asarray(slopes, np.float32)
    if key_lengths is not None:
        inputs["key_lengths"] = np.asarray(key_lengths, np.int32)
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


def _decode_case(cache, slots, *, splits=1, heads=1):
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, heads, 1, 2)).astype(np.float32),
        "k": rng.standard_normal((1, heads, slots, 2)).astype(np.float32),
        "v": rng.standard_normal((1, heads, slots, 2)).astype(np.float32),
        "cache_len": np.array([cache], np.int32),
    }
    params = {
        "dtype": "float32", "window": None, "scale": None, "softcap": None, "alibi": None,
        "block_k": 16, "num_splits": splits,
    }  # fmt: skip
    return Case(inputs, params)


def _gla_case(tokens, *, gate=None, gamma=None, final=True, scale=None, batch=1):
    """Per-token gates of ``gate`` or a per-head decay ``gamma``, one head, head dims 16 (the
    default scale 1/4), ``batch`` sequences of ``tokens`` tokens."""
    rng = _rng()

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    inputs = {
        "q": arr(batch, tokens, 1, 16),
        "k": arr(batch, tokens, 1, 16),
        "v": arr(batch, tokens, 1, 16),
    }
    if gamma is None:
        inputs["g"] = np.full((batch, tokens, 1), gate, np.float32)
    else:
        inputs["g_gamma"] = np.full((1,), gamma, np.float32)
    params = {"dtype": "float32", "chunk_size": 16, "scale": scale, "output_final_state": final}
    return Case(inputs, params)


def _ramp(cols):
    """One row of ``cols`` logits from -1 to 1."""
    return np.linspace(-1, 1, cols)[None, :]


# pattern -> (its trigger, a near miss: the same kernel right where the trigger does not hold)
TRIGGERS = {
    # one row of two keys, the second masked | both kept
    "softmax_store_masked_by_keep": (
        lambda: _softmax_case([[0.0, 0.0]], mask=[[True, False]]),
        lambda: _softmax_case([[0.0, 0.0]], mask=[[True, True]]),
    ),
    # two segments of two rows, one column | two segments, five columns (two column blocks)
    "jagged_grid_axes_swapped": (
        lambda: _jagged_case([2, 2]),
        lambda: _jagged_case([1, 2], 5),
    ),
    # two kv heads of two keys, a key length of one | of two (no key padded)
    "attention_kv_rows_strided_by_key_length": (
        lambda: _attention_case(1, 2, heads=2, key_lengths=[1]),
        lambda: _attention_case(1, 2, heads=2, key_lengths=[2]),
    ),
    # two query heads, two splits, a cache of two keys | one split
    "decode_partials_read_split_major": (
        lambda: _decode_case(2, 2, splits=2, heads=2),
        lambda: _decode_case(2, 2, splits=1, heads=2),
    ),
    # one token with its final state | without it (o alone)
    "gla_state_update_of_queries": (
        lambda: _gla_case(1, gate=-0.1),
        lambda: _gla_case(1, gate=-0.1, final=False),
    ),
    # one row of one key, x = 1 | x = 0
    "softmax_tile_exp_of_stale_max": (
        lambda: _softmax_case([[1.0]]),
        lambda: _softmax_case([[0.0]]),
    ),
    # one segment of two rows of one column, 0 and 0.1 | one row (its softmax 1, exact in fp16)
    "jagged_dense_batch_in_half_precision": (
        lambda: _jagged_case([2], values=[[0.0], [0.1]]),
        lambda: _jagged_case([1], values=[[0.1]]),
    ),
    # two queries on two keys, a key length of one | of two
    "attention_key_padding_masks_queries": (
        lambda: _attention_case(2, 2, key_lengths=[1]),
        lambda: _attention_case(2, 2, key_lengths=[2]),
    ),
    # causal, one query on 17 keys (block_q 16) | on 16 keys
    "varlen_causal_loop_bound_top_left": (
        lambda: _varlen_case([0, 1], [0, 17], 17, causal=True),
        lambda: _varlen_case([0, 1], [0, 16], 16, causal=True),
    ),
    # two sequences of one token, gates -1, final states | gates 0
    "gla_gates_unmasked_past_sequence_end": (
        lambda: _gla_case(1, gate=-1.0, batch=2),
        lambda: _gla_case(1, gate=0.0, batch=2),
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
# controls compile a program per case structure: the campaign of .ci/planted_rows.py --round 15
# runs them).
CONTROLS = [
    *(f"control15_{f}_triton" for f in (*FAMILIES, "attention_decode")),
    "control15_softmax_pallas",
    "control15_jagged_softmax_pallas",
]


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_is_clean_on_a_short_seeded_hunt(plugins, name):
    ROUND.check_clean(name, 10)


# A sample quick to find under seed 1, of both languages, each of its expected class.
SAMPLE = [
    ("planted15_softmax_store_masked_by_keep_triton", 10),
    ("planted15_softmax_tile_exp_of_stale_max_pallas", 10),
]


@pytest.mark.parametrize(("name", "examples"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, examples):
    ROUND.check_found(plugins, name, examples)
