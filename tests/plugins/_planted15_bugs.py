"""The planted bugs of round 15: ``tests/plugins/planted15.py`` (Triton) and ``planted15_pallas.py``
(Pallas). One record per bug pattern, each written in one language, in the record format of
round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``, loaded from there, not copied). Data
only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (a store masked by the kept keys, leaving masked outputs as allocated; a launch grid
whose axes are swapped against the kernel's program ids; a row base strided by the length in
use where the allocated length belongs; two kernels that disagree on a scratch buffer's layout;
a copy-pasted operand, queries where keys belong; an online sum whose tile is shifted by the
stale max; a staging copy in half precision; a key padding mask applied to the queries too; a
causal loop bound aligned top-left while the mask is bottom-right; gates read past a packed
sequence's end), and none is
a pattern of the earlier planted rounds (``_planted_bugs.py``, ``_planted3_bugs.py`` to
``_planted14_bugs.py``), of the harness's own mutants (``kernels/*/mutants.py``), on which it was
tuned, or of the other test plugins (``two_bugs.py``, ``two_positional_bugs.py``,
``dtype_kernels.py``, ``walls.py``, ``half_bugs.py``, ``late_crash.py``). A target of pattern
``p`` in language ``L`` is named ``planted15_<p>_<L>``.

A record says what a measurement needs (``.ci/planted_rows.py --round 15``): the bug, its trigger
(the smallest input that shows it), the failure class expected, and ``match``: which of the
report's rows (findings, as dicts of ``report.json``) count as this bug found. ``cpu`` says what
the CPU campaign found, and for a bug of more than one row or not found, why (empty until one
has run).
"""

from __future__ import annotations

from dataclasses import replace

import fuzz


def _round_three():
    """``_planted3_bugs.py`` beside this file, under the name its plugins load it by (records
    are loaded by path, not as a package): its records and class matches serve here too."""
    return fuzz.load_beside(__file__, "_planted3_bugs.py", "kernel_fuzz_planted3_bugs")


Bug = _round_three().Bug
Pattern = _round_three().Pattern
TRITON = _round_three().TRITON
PALLAS = _round_three().PALLAS
_of_classes = _round_three()._of_classes

PATTERNS: dict[str, Pattern] = {
    # Triton ---------------------------------------------------------------------------------------
    "softmax_store_masked_by_keep": Pattern(
        "softmax",
        (
            Bug(
                "the writes are masked by the kept keys (the mask's, inside the row), where "
                "every lane inside the row belongs: a masked key's output, 0, is never written "
                "and keeps what the output was allocated with (torch.empty: uninitialized, NaN "
                "under the harness's poison), and so does every lane of a row with no kept key; "
                "right without a mask, or where the mask keeps every key",
                "one row of two keys, the second masked (y[1] as allocated where 0)",
                "nan",
                _of_classes("nan", "masking", "accuracy"),
            ),
        ),
        TRITON,
    ),
    "jagged_grid_axes_swapped": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the launch grid is (column blocks, segments), (cdiv(M, block_m), B), where the "
                "kernel reads its program ids as (segment, column block): with more segments "
                "than column blocks the segments past the column block count are never written "
                "(zeros, as the output starts), and with more column blocks than segments the "
                "programs past the segments read the offsets past their end (an out-of-bounds "
                "read); right where the segment count is the column block count",
                "two segments of two rows, one column (the second segment written 0 where its softmax "
                "belongs)",
                "accuracy",
                _of_classes("accuracy", "out-of-bounds-read", "masking", "nan"),
            ),
        ),
        TRITON,
    ),
    "attention_kv_rows_strided_by_key_length": Pattern(
        "attention",
        (
            Bug(
                "the first key row of a (batch element, kv head) is (b * Hkv + hk) * k_len, the "
                "key length in use (the key padding's), where the rows allocated per (batch "
                "element, kv head), Tk, belong: under key padding every (batch element, kv head) "
                "but the first reads another's keys and values (or a padded key of its own or of "
                "another); right without key padding, or where every key length is Tk",
                "one batch element, two kv heads of two keys, a key length of one (the second "
                "head reads the first's padded key)",
                "accuracy",
                _of_classes("accuracy", "masking", "nan"),
            ),
        ),
        TRITON,
    ),
    "decode_partials_read_split_major": Pattern(
        "attention_decode",
        (
            Bug(
                "the merge reads the splits' partial outputs and log-sum-exps split-major, slot "
                "s * (B * Hq) + bh, where the split kernel writes them (batch, head)-major, slot "
                "bh * num_splits + s (two kernels that disagree on the scratch buffer's layout): "
                "each (batch element, query head) merges splits of other heads and batch "
                "elements; right with one split or one (batch element, query head)",
                "two query heads, two splits, a cache of two keys",
                "accuracy",
                _of_classes("accuracy", "masking", "inf"),
            ),
        ),
        TRITON,
    ),
    "gla_state_update_of_queries": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the state's update is (q exp(b_last - b))^T v where the keys' (k exp(b_last - "
                "b))^T v belongs (the operand copied from the inter-chunk term's line): the "
                "carried state, the later chunks' inter-chunk terms and the final state are "
                "built from the queries; the first chunk's output is right",
                "one token, its final state (ht q^T v where k^T v)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    # Pallas ---------------------------------------------------------------------------------------
    "softmax_tile_exp_of_stale_max": Pattern(
        "softmax",
        (
            Bug(
                "the online sum adds each tile's exponentials shifted by the running max before "
                "the tile, exp(s - m_old) (guarded to 0 while no valid key is seen), where the "
                "new max's shift belongs (the old sum is rescaled to the new max, the tile's "
                "terms are not): a tile that raises a row's max adds its terms exp(m_new - "
                "m_old) times too large, and they overflow (a sum of inf: zeros) where it rises "
                "by more than 88; right where no tile raises the max, the first tile's being 0",
                "one row of one key, x = 1 (y 1/e where 1)",
                "accuracy",
                _of_classes("accuracy", "masking", "nan", "inf"),
            ),
        ),
        PALLAS,
    ),
    "jagged_dense_batch_in_half_precision": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the wrapper builds the padded dense batch in float16 (to halve the copy) "
                "whatever the values' dtype, and the kernel writes its output in the batch's "
                "dtype: float32 and bfloat16 values are rounded to 11 bits on the way in (past "
                "65504: inf, a NaN column) and the softmax on the way out; right for float16 "
                "values",
                "one segment of two rows of one column, 0 and 0.1",
                "accuracy",
                _of_classes("accuracy", "nan", "inf", "masking"),
            ),
        ),
        PALLAS,
    ),
    "attention_key_padding_masks_queries": Pattern(
        "attention",
        (
            Bug(
                "the key length in use masks the queries too, rows < k_len (the self-attention "
                "padding mask of both axes), where it masks keys only: every query at or past "
                "its batch element's key length sees no key (o 0, lse -inf); right where every "
                "key length is at least the query count",
                "two queries on two keys, a key length of one (the second query: o 0, lse -inf)",
                "accuracy",
                _of_classes("accuracy", "masking", "inf"),
            ),
        ),
        PALLAS,
    ),
    "varlen_causal_loop_bound_top_left": Pattern(
        "attention_varlen",
        (
            Bug(
                "under the causal mask the key loop stops after the query tile's last index, "
                "min(k_len, i0 + block_q), where its last key position, i0 + block_q - 1 + "
                "k_len - q_len (bottom-right, as the mask measures it), belongs: a sequence "
                "with more keys than fit the tile's indexes loses the keys past them, its "
                "queries' own positions among them (a query with no key left: o 0, lse -inf); "
                "right without the causal mask or where k_len <= i0 + block_q for every tile",
                "causal, one query on 17 keys, block_q 16 (key 16, the query's own, skipped)",
                "accuracy",
                _of_classes("accuracy", "masking", "inf"),
            ),
        ),
        PALLAS,
    ),
    "gla_gates_unmasked_past_sequence_end": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "per-token gates are read over every row of the chunk, the rows past the "
                "sequence's end (the next sequence's tokens, packed after it) included, where "
                "those rows' gates are 0: a sequence whose last chunk is partial and followed by "
                "another decays its final state by the next sequence's gates too (its chunk "
                "total b_last takes them in); o is right, and so is a per-head decay",
                "two sequences of one token, gates -1, their final states (the first's ht "
                "decayed by e^-1)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
}

# What CPU campaigns found (``python .ci/planted_rows.py --round 15 --cpu-campaign 300``: ``python
# -m fuzz run --targets 'planted15_*' --backends triton-interpret,pallas-interpret --db none --seed
# 1``, on a 2-core VM), started with the harness at 2a21147, a clean tree, with no other
# engineer's full test suite running at either campaign's start (one was running at a check
# minutes after the controls' campaign; when it began is not known); another engineer edited and
# committed fuzz/duplicates.py (bf32717: which free choices nest with a row's needs) during the
# campaign's last minute: a module imported late, as the report was written, may have been the
# edited one:
# 2,731 examples in 305 s, 9 of the 10 bugs found, 11 rows (none unshrunk), 1.10 rows per bug run
# and 1.22 per bug found, row sizes median 3 and at most 17 elements; every kernel 166-489
# examples. The controls (``--cpu-campaign 150 --targets 'control15_*'``, at bf32717: 1,806
# examples in about 155 s): no row. The Triton kernels were not compiled on a GPU for this round
# (no device time was left to the session that wrote it). Per pattern and language: the rows of
# ``report.json`` and, for a bug of more than one row or not found, why.
CPU: dict[str, dict[str, str]] = {
    "softmax_store_masked_by_keep": {
        "triton": "found, 2 rows, both nan/poisoned-output of y, of one line: 1 element (one row "
        "of one masked key: a row with no kept key, its lane never written) and 2 elements (one "
        "row of two keys, one masked: a row with a kept key and a masked one); the first's "
        "example holds the row-without-valid-key condition and the second's the single-valid-key "
        "one, and neither row was taken as the other's way, 166 examples",
    },
    "jagged_grid_axes_swapped": {
        "triton": "found, 1 row (masking/oracle of y, 3 elements: an empty segment, then one of "
        "one row: the second segment never written, 0 where 1; also seen as accuracy/oracle of "
        "y, 3 and 32 elements, and as out-of-bounds-write/guard-bands, 5 elements: more column "
        "blocks than segments, the extra programs' offsets read past their end and their writes "
        "landing past the output; the record's out-of-bounds read was not reported as such), "
        "240 examples",
    },
    "attention_kv_rows_strided_by_key_length": {
        "triton": "found, 1 row (accuracy/oracle of o, 4 elements: two batch elements of one "
        "query on two keys with key padding: the second reads the first's rows), 214 examples",
    },
    "decode_partials_read_split_major": {
        "triton": "found, 1 row (inf/oracle of lse, 2 elements: two query heads, a cache of one "
        "key, two splits: head 1 merges head 0's empty split, lse -inf where finite; also seen "
        "as accuracy/oracle of o, 2, and of lse, 3), 198 examples",
    },
    "gla_state_update_of_queries": {
        "triton": "found, 1 row (accuracy/oracle of ht, 16 elements: one token, head dims 16, "
        "its final state q^T v where k^T v; also seen as accuracy/oracle of ht, 256 elements, "
        "and of o, 272 and 512, where a later chunk reads the carried state), 284 examples",
    },
    "softmax_tile_exp_of_stale_max": {
        "pallas": "found, 1 row (accuracy/oracle of y, 1 element: one row of one key, its "
        "exponential taken from a shift of 0: y exp(x) where 1; also seen as accuracy/"
        "shift-invariance of y, 1 element), 489 examples",
    },
    "jagged_dense_batch_in_half_precision": {
        "pallas": "found, 2 rows, both accuracy/oracle of y, of one line: 2 elements (one "
        "segment of two rows of one column, the record's trigger, a partial column block) and "
        "12 elements (segments of one and two rows of four columns, a whole column block, "
        "shrunk no further than that: its smallest, one segment of two rows of four columns, is "
        "8); the second example does not hold the first's partial-column-block condition, and "
        "nothing joined them, 273 examples",
    },
    "attention_key_padding_masks_queries": {
        "pallas": "found, 1 row (inf/oracle of lse, 3 elements: three queries on two keys, no "
        "key padding (the key length Tk): the third query past it sees no key, lse -inf where "
        "finite; also seen as accuracy/oracle of o, 2 elements), 328 examples",
    },
    "varlen_causal_loop_bound_top_left": {
        "pallas": "found, 1 row (accuracy/oracle of o, 17 elements: the record's trigger, one "
        "query on 17 keys under the causal mask, key 16 never visited), 358 examples",
    },
    "gla_gates_unmasked_past_sequence_end": {
        "pallas": "not found in 181 examples (the kernel's share of the budget, 38 + 143 "
        "examples in two visits): the bug needs per-token gates (the forward's strategy weighs "
        "the per-head decay 2:1 over them), two or more sequences of which one before the last "
        "ends in a partial chunk, nonzero gates after it and the final state; the Pallas "
        "family's structures are drawn once and reused for many examples (one compile each), "
        "so few structures were tried; the trigger is a failure of its expected class "
        "(test_planted15.py)",
    },
}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
