"""The planted bugs of round 12: ``tests/plugins/planted12.py`` (Triton) and ``planted12_pallas.py``
(Pallas). One record per bug pattern, each written in one language, in the record format of
round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``, loaded from there, not copied). Data
only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (an additive bias added over the mask's -inf, a length clamped to one against a division
by zero where zero lengths are valid, the online softmax's max taken per tile instead of running,
an empty split-KV share whose log-sum-exp is the log of a guarded sum, a last partial chunk's
decay taken as a full chunk's; the online rescale's -inf - -inf, a padded batch flattened back
as if it were packed, ALiBi slopes derived from the head count over the slopes given, a window's
first key tile taken from the query tile's wrong end, a dot's operands swapped), and none is a
pattern of the earlier planted rounds (``_planted_bugs.py``, ``_planted3_bugs.py`` to
``_planted11_bugs.py``), of the harness's own mutants (``kernels/*/mutants.py``), on which it
was tuned, or of the other test plugins (``two_bugs.py``, ``two_positional_bugs.py``,
``dtype_kernels.py``, ``walls.py``, ``half_bugs.py``, ``late_crash.py``). A target of pattern
``p`` in language ``L`` is named ``planted12_<p>_<L>``.

A record says what a measurement needs (``.ci/planted_rows.py --round 12``): the bug, its trigger
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
    "softmax_bias_added_after_mask": Pattern(
        "softmax",
        (
            Bug(
                "the mask is applied to the scaled inputs and the bias added after it, "
                "where(keep, scale * x, -inf) + bias, where the bias belongs before the mask: a "
                "masked key's logit is -inf + bias, NaN where its bias is NaN or +inf (a masked "
                "key's bias is a value the kernel must ignore): the masked key is written NaN "
                "and the row's sum is NaN (its valid keys written 0 by the guard of a sum not "
                "> 0); right without a mask, without a bias, or with finite biases",
                "one row of one key, masked, with a bias of +inf (or NaN): y NaN where 0",
                "nan",
                _of_classes("nan", "masking", "accuracy"),
            ),
        ),
        TRITON,
    ),
    "jagged_empty_segment_as_one_row": Pattern(
        "jagged_softmax",
        (
            Bug(
                "a segment's end is clamped to at least one row past its start (the guard a "
                "jagged mean takes against a division by zero, max(length, 1)): an empty "
                "segment's program reads the row at its start and writes that row's one-row "
                "softmax there, a row of the next segment (whose own program writes it too: a "
                "race) or, for an empty segment at the end, one row past the output; right "
                "without empty segments",
                "a segment of one row and an empty segment after it (row 1 written, past the "
                "output's end)",
                "out-of-bounds-write",
                _of_classes("out-of-bounds-write", "accuracy", "masking", "nan"),
            ),
        ),
        TRITON,
    ),
    "attention_running_max_of_tile_only": Pattern(
        "attention",
        (
            Bug(
                "the online softmax's new max is the key tile's own max, max(s), where "
                "max(m, max(s)) belongs: the rescaling exp(m_old - m_new) still cancels while "
                "each tile holds a visible key and lies less than 88 below the ones before, but "
                "a tile with no key a query sees leaves its max -inf (its lse -inf where the "
                "tile comes after its keys) and a tile 88 below an earlier one overflows the "
                "rescaling (o NaN); right for one key tile",
                "causal, two queries on 17 keys, block_q = block_k = 16 (query 0 sees keys 0 to "
                "15 only: key tile 1 leaves its max -inf)",
                "inf",
                _of_classes("inf", "nan", "accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "decode_empty_split_lse_zero": Pattern(
        "attention_decode",
        (
            Bug(
                "a split that holds no key (cache_len below num_splits * ceil(cache_len / "
                "num_splits), or a window that hides its keys) stores the log-sum-exp "
                "shift + log(1) = 0, the guarded shift of an empty split without the -inf "
                "select, where -inf belongs: the merge weighs the split's zero output by "
                "exp(-lse), so o is too small and lse too large; right where every split holds "
                "a key",
                "a cache of one key in two splits",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "gla_gamma_partial_chunk_total_of_full_chunk": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "with a per-head decay the chunk's total decay b_last is gamma * C, a whole "
                "chunk's, also for a last chunk of fewer tokens where gamma * (T - c0) belongs: "
                "the final state is decayed as if the chunk were full, and its keys weighted by "
                "exp(gamma * (C - j - 1)) where exp(gamma * (T - c0 - j - 1)) belongs; o is "
                "right (no chunk reads that state); right for per-token gates, for T a multiple "
                "of the chunk, or without the final state",
                "one token of g_gamma -0.1, chunk 16, the final state (a last chunk of one token)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    # Pallas ---------------------------------------------------------------------------------------
    "softmax_rescale_of_unguarded_max": Pattern(
        "softmax",
        (
            Bug(
                "the online sum's correction factor is exp(m - m_new), the running maxes "
                "themselves, where exp(m - shift) with the shift guarded to 0 while no valid "
                "key is seen belongs: a row whose first column tile holds no valid key (masked, "
                "or -inf logits) gets -inf - -inf = NaN there and keeps it in its sum, and a "
                "sum that is not > 0 writes the row as a row with no valid key, zeros; right "
                "for rows with a valid key in their first tile, and for rows with none",
                "one row of 17 keys, block_n 16, a mask keeping key 16 only (written 0 where 1)",
                "accuracy",
                _of_classes("accuracy", "masking", "nan"),
            ),
        ),
        PALLAS,
    ),
    "jagged_unpadded_by_reshape": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the wrapper runs the kernel on a padded dense batch [B, L, M] (each segment in "
                "a slab of L rows) and takes the output back by flattening it and keeping its "
                "first N rows, as if the segments lay back to back, where each segment's first "
                "length rows of its slab belong: the rows after the first segment's end are "
                "its slab's padding (0) and the slabs after, shifted; right for one segment and "
                "for segments that all fill their slabs",
                "two segments of one row each (row 1 given slab 0's padding row, 0 where a "
                "one-row segment's 1)",
                "masking",
                _of_classes("masking", "accuracy"),
            ),
        ),
        PALLAS,
    ),
    "attention_alibi_slopes_of_head_count": Pattern(
        "attention",
        (
            Bug(
                "the wrapper takes ALiBi's slopes from the head count (the ALiBi paper's "
                "geometric rule, as models that build them inside the attention do) where the "
                "slopes given belong: every head's bias uses the standard slope; right for the "
                "standard slopes",
                "ALiBi, one query head on two keys, a slope of 1 (the rule's 2**-8)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
    "varlen_window_start_of_last_query": Pattern(
        "attention_varlen",
        (
            Bug(
                "the key loop visits only the tiles some query of the tile sees, and its first "
                "tile is taken from the window's left edge of the query tile's last row "
                "(p_last - left, p_last the position of row i0 + block_q - 1, past the last "
                "query in a partial tile; the loop's last tile is rightly taken from it) where "
                "the first query's (p_first - left) belongs: the tile's earlier queries lose "
                "their keys before that key tile (a query left with none: o 0, lse -inf); right "
                "without a window's left side, or where both edges fall in one key tile",
                "a window (0, -1), one sequence of one query on two keys, block_q 16 (the "
                "tile's last row puts the first key at 16: no key tile visited)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
    "gla_intra_scores_operands_swapped": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the intra-chunk scores are k q^T (the dot's operands swapped: element (i, j) "
                "= k_i . q_j) where q k^T belongs, masked causally and decayed as before: each "
                "query reads its earlier keys' values through the wrong products; right for one "
                "token (the diagonal is the same), and where q = k",
                "two tokens, one chunk",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
}

# What CPU campaigns found (``python .ci/planted_rows.py --round 12 --cpu-campaign 300``: ``python
# -m fuzz run --targets 'planted12_*' --backends triton-interpret,pallas-interpret --db none --seed
# 1``, on a 2-core VM), with the harness at eca535f and another engineer's crash-ledger changes in
# the working tree (committed as 12b82ff during the run): 2,810 examples in 336 s, 9 of the 10 bugs
# found, 15 rows (2 of them unshrunk; 2 more unshrunk records not counted, each maybe a row's bug),
# 1.50 rows per bug run, 1.67 per bug found, record sizes median 3 and at most 272 elements; every
# pair 179-521 examples. The controls (``--cpu-campaign 150 --targets 'control12_*'``, at 12b82ff
# with further uncommitted harness changes of that engineer in the working tree: 1,648 examples in
# 153 s, every pair 132-214 examples): no row. Per pattern and language: the rows of
# ``report.json`` and, for a bug of more than one row or not found, why.
CPU: dict[str, dict[str, str]] = {
    "softmax_bias_added_after_mask": {
        "triton": "found, 1 row (masking/masked-poison of y, 1 element: one row of one key, "
        "masked, with a bias; a NaN poison in the masked bias turns y 0 into NaN), 384 "
        "examples",
    },
    "jagged_empty_segment_as_one_row": {
        "triton": "found, 2 rows: out-of-bounds-write/guard-bands (3 elements: a segment of two "
        "rows and an empty one after it, one element written past y's end, its store's line "
        "traced), and crash/process (4 elements, unshrunk: no row and three empty segments, "
        "the worker killed by SIGSEGV in the interpreter's masked load: the empty segment's "
        "program reads row 0 of a values array of no rows, the same clamped end), 182 "
        "examples",
    },
    "attention_running_max_of_tile_only": {
        "triton": "found, 2 rows, neither of the documented lse -inf (inf) alone: nan/oracle of "
        "o (17 elements: causal, two queries on 17 keys, logits above 88: the empty key tile's "
        "rescaling exp(m) overflows; lse NaN too), and accuracy/oracle of o (36 elements: "
        "causal with key padding, two queries on 18 keys, logits below -88: the same "
        "rescaling underflows, o 0 where 0.736; lse -inf too; its message adds that every "
        "error is within a TF32 bound), 357 examples",
    },
    "decode_empty_split_lse_zero": {
        "triton": "found, 2 rows: accuracy/oracle of lse (1 element: a cache of one key in two "
        "splits, lse 0.693 where 0; also seen as accuracy/oracle of o, 1), and masking/oracle "
        "of lse (1 element: a cache_len of 0 in one split, lse 0 where -inf: the same line), "
        "187 examples",
    },
    "gla_gamma_partial_chunk_total_of_full_chunk": {
        "triton": "found, 1 row (accuracy/oracle of ht, 16 elements: one token of g_gamma, "
        "chunk 16, the final state; also seen as accuracy/state-continuation of o, 272), 179 "
        "examples",
    },
    "softmax_rescale_of_unguarded_max": {
        "pallas": "NOT found in 306 examples (9 compiles, 103 draws rejected as 'would "
        "compile', 114 examples of more than one column tile): no example had a row whose "
        "first tile held no valid key before a later valid one (28 of 400 of the strategy's "
        "draws outside a campaign have one); a 10-example seed-1 hunt as the tests run one "
        "(Round.hunt_rows) finds it (accuracy/oracle of y, 50 elements)",
    },
    "jagged_unpadded_by_reshape": {
        "pallas": "found, 3 rows, all of 3 elements: masking/oracle of y (two segments of one "
        "row, row 1 0 where 1; also seen as accuracy/oracle of y, 3), masking/oracle of y (a "
        "segment of one row after an empty one, row 0 0 where 1; also seen as "
        "masking/segment-permutation of y, 3), and masking/segment-permutation of y (two "
        "one-row segments reordered), 243 examples",
    },
    "attention_alibi_slopes_of_head_count": {
        "pallas": "found, 1 row (accuracy/oracle of lse, 2 elements: one query on two keys, a "
        "user slope; also seen as accuracy/oracle of o, 2), 235 examples",
    },
    "varlen_window_start_of_last_query": {
        "pallas": "found, 2 rows: accuracy/oracle of o (2 elements: a window (0, -1), one query "
        "on two keys, o 0 where 1.9; lse -inf too), and accuracy/oracle of lse (46 elements, "
        "unshrunk: window (12, -1), soft cap, ALiBi, three sequences); two more unshrunk "
        "records (inf/oracle of lse, 32, and accuracy/oracle of o, 45) maybe of the first "
        "row, not counted, 521 examples",
    },
    "gla_intra_scores_operands_swapped": {
        "pallas": "found, 1 row (accuracy/oracle of o, 272 elements: 17 tokens of g_gamma, "
        "chunk 16, where two tokens show it), 216 examples",
    },
}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
