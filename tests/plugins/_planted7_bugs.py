"""The planted bugs of round 7: ``tests/plugins/planted7.py`` (Triton) and ``planted7_pallas.py``
(Pallas). One record per bug pattern, each written in one language, in the record format of
round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``, loaded from there, not copied). Data
only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (logits formed in the input's half precision before an fp32 kernel, a store whose
addresses leave out the program's block offset, a bias added in natural units to logits kept in
log2 units, a scratch buffer sized by the kv heads where every query head stores, a final state
read from the slot of the last chunk's entering state, a last tile moved back to end at the
row's end and its overlap counted twice, a one-element fast path that ignores its element, a
window that replaces the causal mask instead of narrowing it, log-sum-exps written token-major
and reshaped as if head-major, a recurrent state updated before the output reads it), and none
is a pattern of the earlier planted rounds (``_planted_bugs.py``, ``_planted3_bugs.py``,
``_planted4_bugs.py``, ``_planted5_bugs.py``, ``_planted6_bugs.py``), of the harness's own
mutants (``kernels/*/mutants.py``), on which it was tuned, or of the other test plugins
(``two_bugs.py``, ``dtype_kernels.py``, ``walls.py``, ``half_bugs.py``, ``late_crash.py``). A
target of pattern ``p`` in language ``L`` is named ``planted7_<p>_<L>``.

A record says what a measurement needs (``.ci/planted_rows.py --round 7``): the bug, its trigger
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
    "softmax_prescaled_in_input_dtype": Pattern(
        "softmax",
        (
            Bug(
                "the wrapper forms the logits x * scale + bias with torch in the input dtype "
                "before the fp32 kernel reads them: in float16 a logit past 65504 is inf (an "
                "inf max, inf - inf = NaN; -inf for a valid key: a row with no key), and "
                "half-precision logits are rounded once more (twice with a bias)",
                "float16, scale 2 and one key of x = 40000 (its logit 80000 is inf in float16: "
                "NaN where 1); masking at x = -40000 (the key's logit -inf)",
                "nan",
                _of_classes("nan", "inf", "masking", "accuracy"),
            ),
        ),
        TRITON,
    ),
    "jagged_store_without_column_offset": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the store's column offsets leave out the program's column block (the block's "
                "lanes, tl.arange(0, BLOCK_M), where pid * BLOCK_M + lanes belongs; the loads "
                "and the store's mask have it): every column block writes into the first "
                "block's columns, and the columns past the first block are never written",
                "one segment of one row and block_m + 1 columns (5 with block_m 4): column 4 "
                "is never written (NaN, as the harness poisons what the library allocates), "
                "and column 0 gets column 4's result",
                "nan",
                _of_classes("nan", "accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "attention_alibi_not_log2": Pattern(
        "attention",
        (
            Bug(
                "the kernel's logits are in log2 units (the queries pre-scaled by "
                "scale * log2(e), for exp2), but the ALiBi bias -slope * |p - j| is added in "
                "natural units: each distance is penalized log2(e) times too little (o and lse "
                "wrong wherever a visible key lies at a distance from the query's position)",
                "ALiBi, one query and two keys (key 0 at distance 1 from the query's position 1)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "decode_partials_sized_by_kv_heads": Pattern(
        "attention_decode",
        (
            Bug(
                "the scratch buffer of the splits' partial outputs and log-sum-exps is "
                "allocated with the kv head count where the splits of every query head are "
                "stored: under GQA the later query heads' partials land past its end (past "
                "another batch element's slots where there is one)",
                "two query heads on one kv head, one key, one split: head 1's partials are "
                "stored one slot past the end of the scratch",
                "out-of-bounds-write",
                _of_classes("out-of-bounds-write", "nan", "accuracy", "nondeterminism"),
            ),
        ),
        TRITON,
    ),
    "gla_ht_entering_last_chunk": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the kernel stores each chunk's entering state and then the final one after "
                "them (slots 0..NT-1, then NT); the wrapper returns slot NT - 1, the state "
                "entering the last chunk, as the final state: the last chunk's keys and "
                "decay are missing from it (right only with no token, where slot -1 is the "
                "final one)",
                "one token and the final state (ht 0, or the initial state, where k^T v belongs)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    # Pallas ---------------------------------------------------------------------------------------
    "softmax_last_tile_overlap": Pattern(
        "softmax",
        (
            Bug(
                "the last column tile is moved back to end at the row's last column (its start "
                "clamped to n_cols - block_n, so that no tile reaches past the row), and the "
                "columns it shares with the tile before are counted twice in the row's sum: "
                "right for rows of at most one tile or of whole tiles",
                "one row of block_n + 1 keys (17 with block_n 16): 15 keys counted twice",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
    "jagged_single_row_fast_path": Pattern(
        "jagged_softmax",
        (
            Bug(
                "a segment of one row is written as 1 (the softmax of one value) without its "
                "value being read: a -inf (a column with no finite value, 0 by the family's "
                "convention), a +inf or a NaN gives 1",
                "one segment of one row of -inf (0 where the kernel writes 1)",
                "masking",
                _of_classes("masking", "nan", "accuracy"),
            ),
        ),
        PALLAS,
    ),
    "attention_window_overrides_causal": Pattern(
        "attention",
        (
            Bug(
                "with a window given, its bounds replace the causal mask instead of narrowing "
                "it: a window's right side (unbounded at -1, or any r > 0) lets a causal query "
                "see keys after its position",
                "causal, a window (-1, -1), two queries and one key (query 0 sits before key 0 "
                "and must see no key: o 0, lse -inf; the bug shows it key 0); accuracy where "
                "Tq <= Tk (Tq = Tk = 2: query 0 sees key 1)",
                "masking",
                _of_classes("masking", "accuracy"),
            ),
        ),
        PALLAS,
    ),
    "varlen_lse_token_major": Pattern(
        "attention_varlen",
        (
            Bug(
                "the kernel writes its log-sum-exps token-major, [total, Hq] beside o's "
                "[total, Hq, D], and the wrapper hands them back as [1, Hq, Tq] with a reshape "
                "where a transpose belongs: right with one query head or one query, lse "
                "scrambled otherwise (o is right)",
                "one sequence of two queries and one key, two query heads on one kv head",
                "accuracy",
                _of_classes("accuracy", "masking", "inf"),
            ),
        ),
        PALLAS,
    ),
    "gla_state_updated_before_output": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "each chunk's state update runs before the output's inter-chunk term reads "
                "the state: the queries read the state after their own chunk's keys, which "
                "the intra-chunk term counts again",
                "one token (o = 2 scale q k^T v where scale q k^T v belongs, with g = 0)",
                "accuracy",
            ),
        ),
        PALLAS,
    ),
}

# What CPU campaigns found (``python .ci/planted_rows.py --round 7 --cpu-campaign 300``: ``python
# -m fuzz run --targets 'planted7_*' --backends triton-interpret,pallas-interpret --db none --seed
# 1``, on a 2-core VM), with the harness at ee03768: 4,205 examples in 314 s, 9 of the 10 bugs
# found, 12 rows (none unshrunk), 1.33 rows per bug found, row sizes median 6 and at most 240
# elements. An earlier run of the same command (5,159 examples in 304 s, the harness between
# 1c26bd9 and ee03768) found all 10, one row each. The controls (``--targets 'control7_*'``,
# 200 s, 3,260 examples): no row. Per pattern and language: the rows of ``report.json`` and, for
# a bug of more than one row or not found, why.
CPU: dict[str, dict[str, str]] = {
    "softmax_prescaled_in_input_dtype": {
        "triton": "found, 1 row (accuracy/shift-invariance of y, 2 elements: float16, one row "
        "of two keys with a bias, the logits rounded to float16 twice, 64 added to x moving y "
        "by more than the bound; also seen as accuracy/oracle of y, 2), 492 examples. No row "
        "of the trigger's nan: no drawn case took a float16 logit past 65504 (the earlier "
        "run's row was such rounding too, accuracy/oracle of y, 2 elements of bfloat16)",
    },
    "jagged_store_without_column_offset": {
        "triton": "found, 2 rows (nan/poisoned-output of y, 8 elements: a segment of one row of 8 "
        "columns, columns 4 to 7 never written; nan/poisoned-output of y, 10: a segment of two "
        "rows of 5 columns, a partial column block), 307 examples: one bug, its unwritten "
        "columns met with two different triggers (single-row segments, a partial column "
        "block) that do not nest; the earlier run had one row (16 elements)",
    },
    "attention_alibi_not_log2": {
        "triton": "found, 1 row (accuracy/oracle of lse, 32 elements: the standard ALiBi "
        "slopes; also seen as accuracy/oracle of o, 2 and 16), 535 examples. Its message says "
        "every error is within the bound of TF32 dot products, on triton-interpret, whose dots "
        "are exact",
    },
    "decode_partials_sized_by_kv_heads": {
        "triton": "found, 1 row (out-of-bounds-write/guard-bands, 16 elements: two query heads "
        "on one kv head, one split, a cache of 16, head dim 1: one element past the end "
        "of the partial outputs' torch.empty [1, 1, 1, 1]), 304 examples",
    },
    "gla_ht_entering_last_chunk": {
        "triton": "found, 1 row (accuracy/state-continuation of o, 240 elements: g_gamma, 15 "
        "tokens run as 8 then 7, the first call's final state without its chunk; also seen as "
        "accuracy/oracle of ht, 256, and accuracy/chunk-independence of ht, 272), 524 "
        "examples. Not shrunk to the one token of the trigger",
    },
    "softmax_last_tile_overlap": {
        "pallas": "NOT found in 227 examples (one slice of 10.5 s, the pair given no other): "
        "no row of more than one tile and not of whole tiles among them. The earlier run found "
        "it, 1 row (accuracy/oracle of y, 17 elements: one row of 17 keys, block_n 16, the "
        "trigger), 252 examples; seeded hunts of 10 examples (seed 1) and of 230 (seeds 2 to "
        "4) find it too",
    },
    "jagged_single_row_fast_path": {
        "pallas": "found, 1 row (masking/oracle of y, 4 elements: one segment of one row, a "
        "column of -inf written 1), 240 examples",
    },
    "attention_window_overrides_causal": {
        "pallas": "found, 2 rows (masking/oracle of lse, 2 elements: causal, window (-1, -1), "
        "two queries on one key, the trigger; accuracy/oracle of lse, 2: the same with two "
        "keys, query 0 shown key 1), 773 examples: the two sides of Tq > Tk, triggers that do "
        "not nest (as round 6's causal_tile_only); the earlier run had one row",
    },
    "varlen_lse_token_major": {
        "pallas": "found, 2 rows (accuracy/oracle of lse, 4 elements: two heads, one sequence of "
        "two queries on one key; inf/oracle of lse, 4: two sequences, one of them with no key, "
        "a -inf and a finite lse swapped), 592 examples: one scrambled lse whose wrong "
        "elements are finite or not; the earlier run had one row (inf, also seen as accuracy)",
    },
    "gla_state_updated_before_output": {
        "pallas": "found, 1 row (accuracy/state-continuation of o, 240 elements: g_gamma, 15 "
        "tokens run as 8 then 7; also seen as accuracy/oracle of o, 256), 211 examples. The "
        "earlier run's row was the trigger's one token (accuracy/oracle of o, 16 elements)",
    },
}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
