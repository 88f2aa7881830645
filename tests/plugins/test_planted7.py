"""The planted one-bug kernels of round 7 (``tests/plugins/planted7.py``, Triton;
``planted7_pallas.py``, Pallas): each target registered through the public plugin API, its bug
in its plugin's docstring and in the records (``_planted7_bugs.py``), each bug's documented
trigger failing with its expected class (and a near miss of it passing: the kernel is right where
the trigger does not hold), the bug-free controls clean on short seeded hunts, and a sample of
the bugs found with their expected class by short hunts on the CPU interpreters (stopped by
example counts, never by seconds).

How many rows each bug becomes is measured by ``.ci/planted_rows.py --round 7``, not asserted
here.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from fuzz.arrays import np_dtype
from fuzz.case import Case
from fuzz.target import get, load_beside

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = load_beside(__file__, "_planted_checks.py", "kernel_fuzz_planted_checks")
PLUGINS = {
    "triton": os.path.join(HERE, "planted7.py"),
    "pallas": os.path.join(HERE, "planted7_pallas.py"),
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
)


ROUND = CHECKS.Round(
    7,
    PLUGINS,
    FAMILIES,
    EARLIER,
    ("softmax_bias_row0", "jagged_stats_not_reset", "decode_merge_by_split_max"),
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
    """Round 7's Pallas kernels are written for the GPU's lowering too (power-of-two blocks,
    head dims padded for the dots), not for interpret mode only as rounds 1 and 3 were."""
    ROUND.check_pallas_kinds(plugins)


# Each bug's documented trigger, and a near miss of it ---------------------------------------------


def _rng():
    return np.random.default_rng(0)


def _softmax_case(x, *, dtype="float32", scale=None):
    inputs = {"x": np.asarray(x, np.float32).astype(np_dtype(dtype))}
    return Case(inputs, {"dtype": dtype, "scale": scale, "block_m": 2, "block_n": 16})


def _jagged_case(lengths, columns=1, values=None):
    rows = sum(lengths)
    if values is None:
        values = _rng().standard_normal((rows, columns))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return Case(
        {"values": np.asarray(values, np.float32).reshape(rows, -1), "offsets": offsets},
        {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None, "guard": "nan"},
        {"lengths": list(lengths)},
    )


def _attention_case(tq, tk, *, hq=1, hkv=1, causal=False, window=None, alibi=None):
    """Query heads ``hq`` on ``hkv`` kv heads, head dim 1; ``alibi``: every head's slope."""
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, hq, tq, 1)).astype(np.float32),
        "k": rng.standard_normal((1, hkv, tk, 1)).astype(np.float32),
        "v": rng.standard_normal((1, hkv, tk, 1)).astype(np.float32),
    }
    if alibi is not None:
        inputs["alibi_slopes"] = np.full((hq,), alibi, np.float32)
    params = {
        "dtype": "float32", "causal": causal, "window": window, "scale": None, "softcap": None,
        "alibi": None, "block_q": 16, "block_k": 16,
    }  # fmt: skip
    return Case(inputs, params)


def _varlen_case(cu_q, cu_k, tk, *, hq=1, hkv=1):
    case = _attention_case(cu_q[-1], tk, hq=hq, hkv=hkv)
    cu = {
        "cu_seqlens_q": np.asarray(cu_q, np.int32),
        "cu_seqlens_k": np.asarray(cu_k, np.int32),
    }
    return case.replace(inputs=cu)


def _decode_case(cache, *, hq, hkv, splits=1):
    rng = _rng()
    inputs = {
        "q": rng.standard_normal((1, hq, 1, 2)).astype(np.float32),
        "k": rng.standard_normal((1, hkv, cache, 2)).astype(np.float32),
        "v": rng.standard_normal((1, hkv, cache, 2)).astype(np.float32),
        "cache_len": np.array([cache], np.int32),
    }
    params = {
        "dtype": "float32", "window": None, "scale": None, "softcap": None, "alibi": None,
        "block_k": 16, "num_splits": splits,
    }  # fmt: skip
    return Case(inputs, params)


def _gla_case(tokens, *, final=True, zero_keys=False):
    """Per-token gates of -0.3; ``zero_keys``: every key 0."""
    rng = _rng()

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    inputs = {"q": arr(1, tokens, 1, 16), "k": arr(1, tokens, 1, 16), "v": arr(1, tokens, 1, 16)}
    if zero_keys:
        inputs["k"] = np.zeros_like(inputs["k"])
    inputs["g"] = np.full((1, tokens, 1), -0.3, np.float32)
    params = {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": final}
    return Case(inputs, params)


# pattern -> (its trigger, a near miss: the same kernel right where the trigger does not hold)
TRIGGERS = {
    # float16, scale 2, one key of x = 40000 (its logit inf in float16) | scale 1
    "softmax_prescaled_in_input_dtype": (
        lambda: _softmax_case([[40000.0]], dtype="float16", scale=2.0),
        lambda: _softmax_case([[40000.0]], dtype="float16", scale=1.0),
    ),
    # one row of 5 columns (block_m 4): a second column block | 4 columns, one block
    "jagged_store_without_column_offset": (
        lambda: _jagged_case([1], 5),
        lambda: _jagged_case([1], 4),
    ),
    # ALiBi, one query on two keys (key 0 at distance 1) | on one key (distance 0)
    "attention_alibi_not_log2": (
        lambda: _attention_case(1, 2, alibi=0.5),
        lambda: _attention_case(1, 1, alibi=0.5),
    ),
    # two query heads on one kv head, one key, one split | two kv heads (no GQA)
    "decode_partials_sized_by_kv_heads": (
        lambda: _decode_case(1, hq=2, hkv=1),
        lambda: _decode_case(1, hq=2, hkv=2),
    ),
    # one token and the final state | one token, no final state asked for
    "gla_ht_entering_last_chunk": (lambda: _gla_case(1), lambda: _gla_case(1, final=False)),
    # one row of 17 keys (block_n 16: two tiles, the last moved back by 15) | 16 keys, one tile
    "softmax_last_tile_overlap": (
        lambda: _softmax_case(_rng().standard_normal((1, 17))),
        lambda: _softmax_case(_rng().standard_normal((1, 16))),
    ),
    # a segment of one row of -inf | of one finite value
    "jagged_single_row_fast_path": (
        lambda: _jagged_case([1], values=[[-np.inf]]),
        lambda: _jagged_case([1], values=[[0.5]]),
    ),
    # causal, window (-1, -1), two queries on one key | window (-1, 0): the causal bound anyway
    "attention_window_overrides_causal": (
        lambda: _attention_case(2, 1, causal=True, window=[-1, -1]),
        lambda: _attention_case(2, 1, causal=True, window=[-1, 0]),
    ),
    # one sequence of two queries on one key, two query heads on one kv head | one query
    "varlen_lse_token_major": (
        lambda: _varlen_case([0, 2], [0, 1], 1, hq=2),
        lambda: _varlen_case([0, 1], [0, 1], 1, hq=2),
    ),
    # one token | one token whose key is 0 (its chunk adds nothing to the state)
    "gla_state_updated_before_output": (
        lambda: _gla_case(1, final=False),
        lambda: _gla_case(1, final=False, zero_keys=True),
    ),
}


def test_every_pattern_has_a_trigger_here(plugins):
    assert set(TRIGGERS) == set(plugins["triton"].PATTERNS)


@pytest.mark.parametrize("pattern", sorted(TRIGGERS))
def test_a_bugs_trigger_fails_with_its_class_and_a_near_miss_passes(plugins, pattern):
    ROUND.check_trigger(plugins, pattern, TRIGGERS)


# Short seeded hunts ------------------------------------------------------------------------------


# Every Triton control, and the Pallas ones quick to hunt (the Pallas attention, packed and GLA
# controls compile a program per case structure: the campaign of .ci/planted_rows.py --round 7
# runs them).
CONTROLS = [
    *(f"control7_{f}_triton" for f in (*FAMILIES, "attention_decode")),
    "control7_softmax_pallas",
    "control7_jagged_softmax_pallas",
]


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_is_clean_on_a_short_seeded_hunt(plugins, name):
    ROUND.check_clean(name, 10)


# A sample quick to find under seed 1, of both languages, each of its expected class.
SAMPLE = [
    ("planted7_jagged_store_without_column_offset_triton", 10),
    ("planted7_decode_partials_sized_by_kv_heads_triton", 10),
    ("planted7_gla_ht_entering_last_chunk_triton", 10),
    ("planted7_softmax_last_tile_overlap_pallas", 10),
    ("planted7_gla_state_updated_before_output_pallas", 10),
]


@pytest.mark.parametrize(("name", "examples"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, examples):
    ROUND.check_found(plugins, name, examples)


def test_unwritten_elements_of_two_stores_at_one_block_are_one_site(plugins):
    """The store without its column block's offset (every block stored at block 0) came as two
    rows of unwritten elements on an H200: two rows of five columns (the blocks store other
    values there: a racing store, traced to the store's line) and one row of eight (each
    column of a one-row segment is 1: both blocks store 1 at columns 0-3, no race in effect,
    and the trace had found nothing). A store of elements another program stored with the same
    values is now the origin of unwritten elements too: one store site, one bug, whichever
    came first."""
    from fuzz import origin
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates, bug_of
    from fuzz.signatures import site

    target = get("planted7_jagged_store_without_column_offset_triton")
    backend = get_backend(CHECKS.BACKENDS["triton"])
    params = {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None, "guard": "nan"}

    def found(rows, columns):
        values = np.random.default_rng(rows).standard_normal((rows, columns)).astype(np.float32)
        offsets = np.array([0, rows], np.int32)
        return CHECKS.as_found(
            target, backend, Case({"values": values, "offsets": offsets}, params)
        )

    options = CHECKS.options()
    one = origin.trace_accesses(target, backend.name, found(1, 8).case, found(1, 8).params)
    assert one["kind"] == "store overlapping another program's", one
    assert site(one) == site(origin.trace_accesses(target, backend.name, found(2, 5).case, {}))
    for new, old in (((1, 8), (2, 5)), ((2, 5), (1, 8))):
        new, old = found(*new), found(*old)
        assert new.key == old.key == "nan|poisoned-output|y|-" and new.triggers != old.triggers
        me = Duplicates(target, backend, options, found={"old": old}, known_bugs=[bug_of(old)])
        bug, how = me.of(new)
        assert (bug.signature, how) == (bug_of(old).signature, "site")
