"""The planted one-bug kernels of round 11 (``tests/plugins/planted11.py``, Triton;
``planted11_pallas.py``, Pallas): each target registered through the public plugin API, its bug
in its plugin's docstring and in the records (``_planted11_bugs.py``), each bug's documented
trigger failing with its expected class (and a near miss of it passing: the kernel is right where
the trigger does not hold), the bug-free controls passing every trigger of their family and clean
on short seeded hunts, and a sample of the bugs found with their expected class by short hunts on
the CPU interpreters (stopped by example counts, never by seconds).

How many rows each bug becomes is measured by ``.ci/planted_rows.py --round 11``, not asserted
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
    "triton": os.path.join(HERE, "planted11.py"),
    "pallas": os.path.join(HERE, "planted11_pallas.py"),
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
)


ROUND = CHECKS.Round(
    11,
    PLUGINS,
    FAMILIES,
    EARLIER,
    ("softmax_bias_row0", "jagged_stats_not_reset", "gla_state_decay_after_update"),
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
    """Round 11's Pallas kernels are written for the GPU's lowering too (power-of-two blocks,
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


def _jagged_case(lengths, columns=1, *, block_n=4):
    rows = sum(lengths)
    values = _rng().standard_normal((rows, columns))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return Case(
        {"values": np.asarray(values, np.float32).reshape(rows, -1), "offsets": offsets},
        {"dtype": "float32", "block_n": block_n, "block_m": 4, "num_programs": None,
         "guard": "nan"},
        {"lengths": list(lengths)},
    )  # fmt: skip


def _attention_case(
    tq, tk, *, causal=False, scale=None, qk=None, slopes=None, softcap=None, block_q=16
):  # fmt: skip
    """Head dim 1, one head; ``qk``: q = 1 and k = qk on every key."""
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, 1, tq, 1)).astype(np.float32),
        "k": rng.standard_normal((1, 1, tk, 1)).astype(np.float32),
        "v": rng.standard_normal((1, 1, tk, 1)).astype(np.float32),
    }
    if qk is not None:
        inputs["q"] = np.ones((1, 1, tq, 1), np.float32)
        inputs["k"] = np.full((1, 1, tk, 1), qk, np.float32)
    if slopes is not None:
        inputs["alibi_slopes"] = np.asarray(slopes, np.float32)
    params = {
        "dtype": "float32", "causal": causal, "window": None, "scale": scale, "softcap": softcap,
        "alibi": None if slopes is None else "user", "block_q": block_q, "block_k": 16,
    }  # fmt: skip
    return Case(inputs, params)


def _varlen_case(cu_q, cu_k, tk, **kw):
    case = _attention_case(cu_q[-1], tk, **kw)
    cu = {
        "cu_seqlens_q": np.asarray(cu_q, np.int32),
        "cu_seqlens_k": np.asarray(cu_k, np.int32),
    }
    return case.replace(inputs=cu)


def _decode_case(cache, slots, *, slopes=None):
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, 1, 1, 2)).astype(np.float32),
        "k": rng.standard_normal((1, 1, slots, 2)).astype(np.float32),
        "v": rng.standard_normal((1, 1, slots, 2)).astype(np.float32),
        "cache_len": np.array([cache], np.int32),
    }
    if slopes is not None:
        inputs["alibi_slopes"] = np.asarray(slopes, np.float32)
    params = {
        "dtype": "float32", "window": None, "scale": None, "softcap": None,
        "alibi": None if slopes is None else "user", "block_k": 16, "num_splits": 1,
    }  # fmt: skip
    return Case(inputs, params)


def _gla_case(tokens, *, gate, batch=1, final=True):
    """Per-token gates of ``gate``, one head."""
    rng = _rng()

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    inputs = {
        "q": arr(batch, tokens, 1, 16),
        "k": arr(batch, tokens, 1, 16),
        "v": arr(batch, tokens, 1, 16),
        "g": np.full((batch, tokens, 1), gate, np.float32),
    }
    params = {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": final}
    return Case(inputs, params)


# pattern -> (its trigger, a near miss: the same kernel right where the trigger does not hold)
TRIGGERS = {
    # one row of two keys, scale 0.5, a bias of zeros | scale 1
    "softmax_bias_path_without_scale": (
        lambda: _softmax_case([[0.5, -0.25]], bias=[[0.0, 0.0]], scale=0.5),
        lambda: _softmax_case([[0.5, -0.25]], bias=[[0.0, 0.0]], scale=1.0),
    ),
    # two segments of two rows each (block_n 4) | of four rows each (on tile boundaries)
    "jagged_aligned_tiles_without_start_mask": (
        lambda: _jagged_case([2, 2]),
        lambda: _jagged_case([4, 4]),
    ),
    # causal, two queries on 17 keys (block 16) | one query on 17 keys
    "attention_causal_mask_on_first_diagonal_tile_only": (
        lambda: _attention_case(2, 17, causal=True),
        lambda: _attention_case(1, 17, causal=True),
    ),
    # ALiBi, a cache of two keys | of one key
    "decode_alibi_of_key_index": (
        lambda: _decode_case(2, 2, slopes=[0.5]),
        lambda: _decode_case(1, 2, slopes=[0.5]),
    ),
    # 17 tokens of gate -0.1 (chunk 16), final state | 16 tokens
    "gla_cumsum_not_reset_per_chunk": (
        lambda: _gla_case(17, gate=-0.1),
        lambda: _gla_case(16, gate=-0.1),
    ),
    # one row of one key, a mask that keeps it | no mask
    "softmax_mask_as_zero_times_inf": (
        lambda: _softmax_case([[0.5]], mask=[[True]]),
        lambda: _softmax_case([[0.5]]),
    ),
    # one segment of two rows and 5 columns (block_m 4) | of 4 columns
    "jagged_values_index_map_swapped": (
        lambda: _jagged_case([2], 5),
        lambda: _jagged_case([2], 4),
    ),
    # one query on one key, scale 0.5, q.k = 1 | q.k = 0 (a largest logit of 0)
    "attention_lse_of_unscaled_max": (
        lambda: _attention_case(1, 1, scale=0.5, qk=1.0),
        lambda: _attention_case(1, 1, scale=0.5, qk=0.0),
    ),
    # a soft cap of 1, ALiBi, one sequence of one query on two keys | no soft cap
    "varlen_alibi_inside_softcap": (
        lambda: _varlen_case([0, 1], [0, 2], 2, slopes=[0.5], softcap=1.0),
        lambda: _varlen_case([0, 1], [0, 2], 2, slopes=[0.5]),
    ),
    # two batch elements of one token each | one batch element
    "gla_state_not_reset_between_sequences": (
        lambda: _gla_case(1, gate=-0.1, batch=2),
        lambda: _gla_case(1, gate=-0.1, batch=1),
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
# controls compile a program per case structure: the campaign of .ci/planted_rows.py --round 11
# runs them).
CONTROLS = [
    *(f"control11_{f}_triton" for f in (*FAMILIES, "attention_decode")),
    "control11_softmax_pallas",
    "control11_jagged_softmax_pallas",
]


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_is_clean_on_a_short_seeded_hunt(plugins, name):
    ROUND.check_clean(name, 10)


# A sample quick to find under seed 1, of both languages, each of its expected class.
SAMPLE = [
    ("planted11_softmax_bias_path_without_scale_triton", 10),
    ("planted11_softmax_mask_as_zero_times_inf_pallas", 10),
]


@pytest.mark.parametrize(("name", "examples"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, examples):
    ROUND.check_found(plugins, name, examples)
