"""The planted bugs of round 14: ``tests/plugins/planted14.py`` (Triton) and ``planted14_pallas.py``
(Pallas). One record per bug pattern, each written in one language, in the record format of
round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``, loaded from there, not copied). Data
only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (a reduction missing its axis, a store masked by its rows only, a soft cap applied to
logits already masked to -inf, an empty KV cache clamped to one key to keep a split size above 0,
a strict causal mask inside a chunk; an additive mask trusted to keep -inf, segments sorted by
length for balance and not unpermuted, a padded length copied from the neighbouring tensor's
line, outputs unpadded from their packed rows, a state's query-side decay left out), and none is
a pattern of the earlier planted rounds (``_planted_bugs.py``, ``_planted3_bugs.py`` to
``_planted13_bugs.py``), of the harness's own mutants (``kernels/*/mutants.py``), on which it was
tuned, or of the other test plugins (``two_bugs.py``, ``two_positional_bugs.py``,
``dtype_kernels.py``, ``walls.py``, ``half_bugs.py``, ``late_crash.py``). A target of pattern
``p`` in language ``L`` is named ``planted14_<p>_<L>``.

A record says what a measurement needs (``.ci/planted_rows.py --round 14``): the bug, its trigger
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
    "softmax_row_sum_over_row_block": Pattern(
        "softmax",
        (
            Bug(
                "each column tile's sum of exponentials is reduced with no axis, tl.sum(p), the "
                "whole [BLOCK_M, BLOCK_N] block's sum where each row's, tl.sum(p, 1), belongs: "
                "every row of a block is divided by the sum of all its rows' exponentials (each "
                "shifted by its own running max), so rows sum to less than one; right where a "
                "block of rows holds one row with a valid key",
                "two rows of one key each, block_m 4 (each written 0.5 where 1)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "jagged_store_without_column_mask": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the writes are masked by the segment's rows only, (rows < stop), where the "
                "column mask (cols < n_cols) belongs too: a column block that overhangs the "
                "values' columns writes its padding lanes (zeros) past each row's end, into the "
                "next row's first columns (of this segment or the next, whichever program "
                "writes last) and, from the last row, past the output's end; right where the "
                "column count is a multiple of block_m",
                "one row of one column, block_m 4 (three zeros written past the output's end)",
                "out-of-bounds-write",
                _of_classes("out-of-bounds-write", "accuracy", "nondeterminism", "masking"),
            ),
        ),
        TRITON,
    ),
    "attention_softcap_after_mask": Pattern(
        "attention",
        (
            Bug(
                "the mask is applied to the scaled logits before the soft cap, "
                "cap * tanh(where(keep, s, -inf) / cap), where the cap belongs first and the "
                "mask last: a masked key's -inf is capped to a finite -cap, so every masked key "
                "the key loop visits (past the diagonal within the causal bound's tiles, outside "
                "a window, past the key length in the last tile) takes part in the softmax with "
                "its value (0 where no query of the tile sees it), and a query with no visible "
                "key averages them (lse finite where -inf); right without a soft cap or where "
                "no visited key is masked",
                "a soft cap, one query on one key, block_k 16 (the tile's 15 keys past the key "
                "length weigh in with values of 0)",
                "accuracy",
                _of_classes("accuracy", "masking", "inf"),
            ),
        ),
        TRITON,
    ),
    "decode_empty_cache_clamped_to_one_key": Pattern(
        "attention_decode",
        (
            Bug(
                "the cache length is clamped to at least one key, max(cache_len, 1) (so that "
                "the split size ceil(cache_len / num_splits) is never 0), where an empty cache "
                "belongs to no key: a sequence with an empty cache attends to its cache's slot "
                "0, a slot past its length (o its value, lse its logit, where o 0 and lse -inf "
                "belong); right for every cache of one key or more",
                "a cache length of 0 (slot 0 read: o v[0], lse finite)",
                "masking",
                _of_classes("masking", "accuracy", "inf", "nan"),
            ),
        ),
        TRITON,
    ),
    "gla_intra_mask_strict_diagonal": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the intra-chunk causal mask is strict, i > j, where i >= j belongs (a token "
                "sees its own key): each token's own q.k v term is dropped from its output; the "
                "state carried, and the final state, are right",
                "one token (o 0 where scale q.k v)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    # Pallas ---------------------------------------------------------------------------------------
    "softmax_additive_mask_added_to_logits": Pattern(
        "softmax",
        (
            Bug(
                "the kernel adds the additive mask (0 or -inf, built by the wrapper) to the "
                "logits and trusts the sum to be -inf at a dropped key, where the dropped keys "
                "belong selected out (a dropped key's logit -inf whatever it holds): a dropped "
                "key whose x or bias is +inf or NaN (values the kernel must ignore) is NaN, and "
                "with it the row's max and sum: the row is written NaN, or zeros (the guard of "
                "a sum not > 0); right where every dropped key's logit is finite or -inf",
                "one row of one key, masked, x = +inf (y NaN where 0)",
                "nan",
                _of_classes("masking", "nan", "accuracy"),
            ),
        ),
        PALLAS,
    ),
    "jagged_segments_sorted_by_length_unpermuted": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the wrapper fills the padded batch's slabs with the segments longest first "
                "(slab i holds segment order[i], so that a column block's programs run from the "
                "longest down) and copies slab i back to segment i, where slab i belongs to "
                "segment order[i]: wherever a segment is longer than an earlier one the "
                "segments get each other's softmax, cut or padded (rows of a slab's padding: "
                "zeros); right where the lengths never increase",
                "two segments of two and three rows (the first written the second's first two "
                "rows' softmax)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
    "attention_keys_padded_to_query_bucket": Pattern(
        "attention",
        (
            Bug(
                "the wrapper pads the keys and values to the queries' padded length (rows_k = "
                "rows_q, the line above's) where the keys' own padded length belongs: more keys "
                "than the queries' padded length cannot be padded to it (NumPy's pad raises), "
                "and a padded length below block_k holds no whole key tile (the key loop's "
                "slice raises); right where the keys fit the queries' padded length and it "
                "holds a key tile",
                "one query on 17 keys, block_q 16 (a crash)",
                "crash",
                _of_classes("crash", "accuracy"),
            ),
        ),
        PALLAS,
    ),
    "varlen_outputs_read_back_at_packed_rows": Pattern(
        "attention_varlen",
        (
            Bug(
                "the wrapper copies each sequence's outputs back from its packed rows "
                "(cu_seqlens_q[s] on) of the tiled output, where its rows in the tiled layout "
                "(its first tile's first row) belong: every sequence but the first whose packed "
                "start is not its tiled start reads another sequence's rows or padding (o 0, "
                "lse -inf); right for one sequence, and where every sequence before the last "
                "fills whole query tiles",
                "two sequences of one query on one key each (the second: o 0, lse -inf)",
                "accuracy",
                _of_classes("accuracy", "masking", "inf"),
            ),
        ),
        PALLAS,
    ),
    "gla_inter_term_without_query_decay": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the output's inter-chunk term is q h where q exp(b) h belongs (each query's "
                "decay from the chunk's start, b its running sum of the gates): the carried "
                "state (an initial state, or an earlier chunk's) reaches each query undecayed; "
                "the intra-chunk term and the state are right; right with no decay (gates 0) or "
                "no state (one chunk, no initial state)",
                "17 tokens of gates -1, chunk 16 (token 16 reads the state undecayed)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
}

# What CPU campaigns found (``python .ci/planted_rows.py --round 14 --cpu-campaign 300``: ``python
# -m fuzz run --targets 'planted14_*' --backends triton-interpret,pallas-interpret --db none --seed
# 1``, on a 2-core VM), started with the harness at 236215d, a clean tree (another engineer
# committed 810fbf4 and edited fuzz/duplicates.py, failures.py, ledger.py, properties.py and
# signatures.py in the working tree during its last minute and a half: a module imported late,
# as the report was written, may have been the edited one): 3,817 examples in 309 s, 10 of the 10
# bugs found, 11 rows (none unshrunk), 1.10 rows per bug run and per bug found, row sizes median
# 3 and at most 256 elements; every pair 204-1,173 examples. The controls (``--cpu-campaign 150
# --targets 'control14_*'``, at 810fbf4 with that engineer's uncommitted edits of those five
# modules in the tree: 2,015 examples in 153 s): no row. Per pattern and language: the rows of
# ``report.json`` and, for a bug of more than one row, why.
CPU: dict[str, dict[str, str]] = {
    "softmax_row_sum_over_row_block": {
        "triton": "found, 1 row (accuracy/oracle of y, 32 elements: two rows of 16 keys, "
        "block_m 4, each row divided by both rows' sums; the record's trigger, two rows of one "
        "key, is 2 elements), 244 examples",
    },
    "jagged_store_without_column_mask": {
        "triton": "found, 1 row (out-of-bounds-write/guard-bands, 2 elements: one segment of "
        "two rows of one column, block_m 4: three zeros written past the output's end), 284 "
        "examples",
    },
    "attention_softcap_after_mask": {
        "triton": "found, 1 row (accuracy/oracle of lse, 1 element: one query on one key, a "
        "soft cap of 30, block_k 16: the tile's 15 keys past the key length weigh in at -30; "
        "also seen as accuracy/oracle of o twice, 1 element), 244 examples",
    },
    "decode_empty_cache_clamped_to_one_key": {
        "triton": "found, 1 row (masking/oracle of lse, 1 element: a cache of one slot, cache "
        "length 0: lse 0 where -inf; also seen as masking/oracle of o, 1), 219 examples",
    },
    "gla_intra_mask_strict_diagonal": {
        "triton": "found, 1 row (accuracy/oracle of o, 256 elements: 16 tokens of g_gamma, head "
        "dims 16; the record's trigger, one token, is 16), 283 examples",
    },
    "softmax_additive_mask_added_to_logits": {
        "pallas": "found, 1 row (masking/masked-poison of y, 1 element: one row of one masked "
        "key, its x set to NaN by the poison: y NaN where 0; the record's trigger, x = +inf, is "
        "a nan/oracle failure of the same line), 244 examples",
    },
    "jagged_segments_sorted_by_length_unpermuted": {
        "pallas": "found, 1 row (accuracy/oracle of y, 3 elements: an empty segment, then one "
        "of two rows of one column: the second written the empty segment's slab, zeros; also "
        "seen as masking/oracle and masking/segment-permutation of y, 3 to 12 elements, where "
        "a segment of one row, fixed at 1, is written another's value), 1,173 examples",
    },
    "attention_keys_padded_to_query_bucket": {
        "pallas": "found, 2 rows, the two ways the record names, of two exceptions: crash (17 "
        "elements: one query on 17 keys, block_q 16: NumPy's pad raising ValueError on a "
        "negative width) and crash (1 element: one query on one key, block_k 32: the keys "
        "padded to 16 rows, the key loop's 32-row slice raising TypeError); neither is the "
        "other's case, 372 examples",
    },
    "varlen_outputs_read_back_at_packed_rows": {
        "pallas": "found, 1 row (inf/oracle of lse, 3 elements: two sequences of one query on "
        "one key each, the second read back from the first's padding: lse -inf where 0; also "
        "seen as accuracy/oracle and masking/oracle of o, 3), 550 examples",
    },
    "gla_inter_term_without_query_decay": {
        "pallas": "found, 1 row (accuracy/oracle of o, 256 elements: 16 tokens of g_gamma with an "
        "initial state, head dims 16: the state reaches each query undecayed), 204 examples",
    },
}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
