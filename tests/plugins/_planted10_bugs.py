"""The planted bugs of round 10: ``tests/plugins/planted10.py`` (Triton) and ``planted10_pallas.py``
(Pallas). One record per bug pattern, each written in one language, in the record format of
round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``, loaded from there, not copied). Data
only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (a log-sum-exp in log2 units built from the sum's natural log, a launch grid sized by
the wrong block constant, an online softmax's correction applied twice to the accumulator, GQA
query heads dealt round the kv heads where they are grouped, a final state stored in the
head-major layout, a two-pass kernel whose recompute drops the bias, statistics passes that skip
a segment's partial last tile, a mask test on the tile's own key index where the key's global index belongs,
a packed tile table holding the tile's number where its first row belongs, a state decay applied
after the chunk's update), and none is a pattern of the earlier planted rounds
(``_planted_bugs.py``, ``_planted3_bugs.py`` to ``_planted9_bugs.py``), of the harness's own
mutants (``kernels/*/mutants.py``), on which it was tuned, or of the other test plugins
(``two_bugs.py``, ``dtype_kernels.py``, ``walls.py``, ``half_bugs.py``, ``late_crash.py``). A
target of pattern ``p`` in language ``L`` is named ``planted10_<p>_<L>``.

A record says what a measurement needs (``.ci/planted_rows.py --round 10``): the bug, its trigger
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
    "softmax_lse_of_natural_log": Pattern(
        "softmax",
        (
            Bug(
                "the row is normalized through its log-sum-exp in log2 units (each lane written "
                "as exp2(s - lse2), s the logits times log2(e)), but lse2 = max + log(sum) takes "
                "the sum's natural log where log2 belongs: every lane is multiplied by "
                "sum^(1 - ln 2), the row summing to more than 1; right for a row whose sum is 1 "
                "(one valid key, or keys far below the max)",
                "one row of two keys (the sum 2 or less, each lane too large)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "jagged_column_grid_of_row_tile": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the launch grid's column axis is cdiv(M, block_n), the row tile, where the "
                "column block block_m belongs: with block_n larger than block_m the programs "
                "cover only the first cdiv(M, block_n) * block_m columns, the rest never written "
                "(left 0); right where block_n equals block_m or one program's columns hold M",
                "one segment of two rows and 5 columns, block_n 8, block_m 4 (column 4 left 0)",
                "accuracy",
                _of_classes("accuracy", "masking", "nan"),
            ),
        ),
        TRITON,
    ),
    "attention_acc_rescaled_twice": Pattern(
        "attention",
        (
            Bug(
                "the online softmax's correction exp2(m_old - m_new) is applied to the output "
                "accumulator twice when a key tile raises a query's running max (once by the "
                "rescale, once more where the tile's p @ v is added): the earlier tiles' share of "
                "o is too small (the sum, and the lse, are right); right where a query's max is "
                "met in its first key tile or every key is in one tile",
                "one query on 17 keys, block_k 16, key 16 the largest logit",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "decode_gqa_head_modulo": Pattern(
        "attention_decode",
        (
            Bug(
                "under GQA the kv head of query head h is taken as h % Hkv (the heads dealt "
                "round the kv heads) where the layout groups them, h // (Hq / Hkv): a query "
                "head reads another group's keys and values; right with one kv head or as many "
                "kv heads as query heads",
                "four query heads on two kv heads (query head 1 reads kv head 1 where 0)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "gla_ht_head_major": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the final state of (batch element b, head h) is stored at slot h * B + b, the "
                "head-major layout [H, B, K, V], where the output is [B, H, K, V] (slot b * H + "
                "h): the states are permuted; right with one batch element or one head (o is "
                "right)",
                "two batch elements of two heads and the final state (b 0's head 1 stored at "
                "b 1's head 0)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    # Pallas ---------------------------------------------------------------------------------------
    "softmax_write_pass_without_bias": Pattern(
        "softmax",
        (
            Bug(
                "the pass that writes the row recomputes its logits without the bias (scale * x "
                "where scale * x + bias belongs) while the max and the sum, from the first pass, "
                "include it: each lane is exp(-bias) times too large or small; right without a "
                "bias or with a bias of 0",
                "one row of two keys with a bias (0, 1)",
                "accuracy",
                _of_classes("accuracy", "masking", "inf", "nan"),
            ),
        ),
        PALLAS,
    ),
    "jagged_stats_skip_partial_tile": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the max and sum passes count a segment's row tiles as floor(length / block_n) "
                "where the ceiling belongs (the write pass counts right): the rows of a partial "
                "last tile are left out of the max and the sum but written, a segment shorter "
                "than block_n written as zeros; right for segments of a multiple of block_n rows",
                "one segment of 5 rows, block_n 4 (row 4 left out of the statistics)",
                "accuracy",
                _of_classes("accuracy", "masking", "inf", "nan"),
            ),
        ),
        PALLAS,
    ),
    "attention_mask_key_index_without_tile_start": Pattern(
        "attention",
        (
            Bug(
                "the visibility test (causal, window, key padding) compares the key's index "
                "within its tile where its global index (the tile's start plus it) belongs: "
                "in the key tiles past the first, keys are tested as if they were keys 0 to "
                "block_k - 1 (shown to causal queries before them, padding keys shown, window "
                "sides misplaced); right when every key is in the first tile or no mask applies",
                "causal, 17 queries on 17 keys, block_k 16 (query 0 shown key 16)",
                "accuracy",
                _of_classes("masking", "accuracy", "nan", "inf"),
            ),
        ),
        PALLAS,
    ),
    "varlen_tile_start_in_tiles": Pattern(
        "attention_varlen",
        (
            Bug(
                "the wrapper's table of query tiles holds each tile's number within its "
                "sequence (0, 1, 2, ...) where its first query's row (0, block_q, 2 block_q, "
                "...) belongs: the queries of a sequence's second and later tiles are placed at "
                "the wrong positions for the causal mask, the window and ALiBi; right for "
                "sequences of at most block_q queries or with none of the three",
                "causal, one sequence of 17 queries on 17 keys, block_q 16 (query 16 placed at "
                "1: shown keys 0 and 1 only)",
                "accuracy",
                _of_classes("accuracy", "masking", "inf"),
            ),
        ),
        PALLAS,
    ),
    "gla_state_decay_after_update": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the carried state is updated as exp(b_last) * (h + (k exp(b_last - b))^T v), "
                "the chunk's decay applied after its keys are added where exp(b_last) h + (k "
                "exp(b_last - b))^T v belongs: each chunk's keys decayed by the chunk's total "
                "once more (the final state, and later chunks' o, too small); right without "
                "decay",
                "one token of gate -1 and the final state (ht e^-1 times k^T v)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
}

# What CPU campaigns found (``python .ci/planted_rows.py --round 10 --cpu-campaign 300``: ``python
# -m fuzz run --targets 'planted10_*' --backends triton-interpret,pallas-interpret --db none --seed
# 1``, on a 2-core VM), with the harness at cd3b41e: 2,663 examples in 306 s, 9 of the 10 bugs
# found, 10 rows (0 unshrunk), 1.11 rows per bug found, row sizes median 13 and at most 1,024
# elements; every pair 87-697 examples. The controls (``--cpu-campaign 150 --targets
# 'control10_*'``, 154 s, 3,160 examples): no row. Per pattern and language: the rows of
# ``report.json`` and, for a bug of more than one row or not found, why.
CPU: dict[str, dict[str, str]] = {
    "softmax_lse_of_natural_log": {
        "triton": "found, 1 row (accuracy/oracle of y, 16 elements), 401 examples",
    },
    "jagged_column_grid_of_row_tile": {
        "triton": "found, 2 rows (accuracy/oracle of y, 10 elements: two rows of 5 columns, "
        "block_n 8, column 4 written 0; masking/oracle of y, 5: one row of 5 columns, column 4 "
        "written 0 where a one-row segment's fixed 1), 200 examples: the same unwritten column "
        "met on a one-row segment (its output fixed: masking) and on a longer one (accuracy), "
        "two classes whose examples do not nest",
    },
    "attention_acc_rescaled_twice": {
        "triton": "found, 1 row (accuracy/oracle of o, 17 elements: one query on 17 keys, "
        "block_k 16), 188 examples",
    },
    "decode_gqa_head_modulo": {
        "triton": "found, 1 row (accuracy/oracle of o, 4 elements: four query heads on two kv "
        "heads, one key, one split), 129 examples",
    },
    "gla_ht_head_major": {
        "triton": "found, 1 row (accuracy/oracle of ht, 1,024 elements: two batch elements of "
        "two heads, 16 tokens, g_gamma), 188 examples",
    },
    "softmax_write_pass_without_bias": {
        "pallas": "found, 1 row (accuracy/oracle of y, 1 element: one key with a bias), "
        "90 examples",
    },
    "jagged_stats_skip_partial_tile": {
        "pallas": "found, 1 row (accuracy/oracle of y, 2 elements; also seen as nan, masking "
        "and inf of y), 697 examples",
    },
    "attention_mask_key_index_without_tile_start": {
        "pallas": "found, 1 row (accuracy/oracle of lse, 17 elements; also seen as "
        "accuracy/oracle of o, 17), 87 examples",
    },
    "varlen_tile_start_in_tiles": {
        "pallas": "NOT found in 233 examples: no drawn case had a sequence of more than "
        "block_q queries together with the causal mask, a window or ALiBi (the only inputs "
        "the misplaced tiles change) before the budget ran out",
    },
    "gla_state_decay_after_update": {
        "pallas": "found, 1 row (accuracy/state-continuation of o, 240 elements: tokens [0, 8) "
        "then [8, 15); also seen as accuracy/oracle of ht, 256, and of o, 272), 450 examples",
    },
}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
