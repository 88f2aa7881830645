"""The planted bugs of round 11: ``tests/plugins/planted11.py`` (Triton) and ``planted11_pallas.py``
(Pallas). One record per bug pattern, each written in one language, in the record format of
round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``, loaded from there, not copied). Data
only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (a fused bias path that drops the softmax scale, row tiles started at the array's tile
boundary before a segment's start and masked at its end only, a causal mask applied in one diagonal key tile where the query tile's
positions span two, ALiBi written as + slope * j for its shift invariance while the lse is
exposed, a chunked cumulative sum carried across chunk boundaries; a boolean mask turned into an
additive one as (1 - mask) * -inf, a Pallas index map with its block indices swapped, a running
max kept in unscaled logits and an lse built from it, ALiBi added inside the soft cap, a packed
batch's state not reset at a sequence's start), and none is a pattern of the earlier planted
rounds (``_planted_bugs.py``, ``_planted3_bugs.py`` to ``_planted10_bugs.py``), of the harness's
own mutants (``kernels/*/mutants.py``), on which it was tuned, or of the other test plugins
(``two_bugs.py``, ``dtype_kernels.py``, ``walls.py``, ``half_bugs.py``, ``late_crash.py``). A
target of pattern ``p`` in language ``L`` is named ``planted11_<p>_<L>``.

A record says what a measurement needs (``.ci/planted_rows.py --round 11``): the bug, its trigger
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
    "softmax_bias_path_without_scale": Pattern(
        "softmax",
        (
            Bug(
                "the kernel's bias path forms the logits as x + bias, the scale left out (the "
                "path without a bias forms scale * x): with a bias every row is the softmax of "
                "x + bias where scale * x + bias belongs; right without a bias or with a scale "
                "of 1",
                "one row of two keys of different values, scale 0.5, a bias of zeros",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "jagged_aligned_tiles_without_start_mask": Pattern(
        "jagged_softmax",
        (
            Bug(
                "a segment's row tiles start at the tile boundary at or before its start "
                "(aligned to multiples of block_n from the array's first row, as for aligned "
                "loads) where its start belongs, and are masked at the segment's end only: a "
                "segment that starts inside a tile takes the rows before it (the previous "
                "segment's) into its max and sum, and overwrites them with its own softmax; "
                "right for segments that start on a tile boundary",
                "two segments of two rows each, block_n 4 (segment 1's tile holds rows 0 to 3)",
                "accuracy",
                _of_classes("accuracy", "masking", "nan"),
            ),
        ),
        TRITON,
    ),
    "attention_causal_mask_on_first_diagonal_tile_only": Pattern(
        "attention",
        (
            Bug(
                "under the causal mask the per-element test is applied only in the key tile "
                "that holds the query tile's first position (one diagonal tile, as when "
                "block_q equals block_k and Lq equals Lk), the tiles after it, which the loop "
                "visits up to the tile's last position, taken as wholly visible: a query sees "
                "keys after its position where the query tile's positions span two key tiles "
                "(block_q > block_k, or Lk - Lq not a multiple of block_k)",
                "causal, two queries on 17 keys, block_q = block_k = 16 (query 0, at key "
                "position 15, shown key 16)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "decode_alibi_of_key_index": Pattern(
        "attention_decode",
        (
            Bug(
                "ALiBi's bias is added as + slope * j, the key's index (BLOOM-style: the "
                "softmax does not change with a shift), where -slope * |p - j| belongs (p = "
                "cache_len - 1, no key after it): o is right to rounding, but the log-sum-exp is "
                "slope * p too large; right with a cache of one key",
                "ALiBi, one query head on a cache of two keys (lse off by the slope)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "gla_cumsum_not_reset_per_chunk": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the gates' running sum b is carried from chunk to chunk (a sequence-wide "
                "prefix) where each chunk's restarts at its start: the intra-chunk decays "
                "exp(b_i - b_j) and the keys' exp(b_last - b_j) are right (differences), but "
                "the carried state is decayed by exp(b_last), the whole prefix, and the "
                "queries read it through exp(b_i): the final state and the chunks after the "
                "first wrong; right within the first chunk or without decay",
                "17 tokens of gate -0.1, chunk 16, and the final state",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    # Pallas ---------------------------------------------------------------------------------------
    "softmax_mask_as_zero_times_inf": Pattern(
        "softmax",
        (
            Bug(
                "the wrapper turns the boolean mask into the kernel's additive mask as "
                "(1 - mask) * -inf where where(mask, 0, -inf) belongs: a kept key gets "
                "0 * -inf = NaN, so every row with a mask is NaN at its kept keys (and "
                "through the sum at every key); right without a mask",
                "one row of one key, a mask that keeps it",
                "nan",
                _of_classes("nan", "masking", "accuracy"),
            ),
        ),
        PALLAS,
    ),
    "jagged_values_index_map_swapped": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the values' block spec maps column block i to block (i, 0) where (0, i) "
                "belongs (the block holds every row and block_m columns): column blocks past "
                "the first read a row block past the array, which interpret mode clamps back "
                "to block (0, 0): columns block_m and on are written as the softmax of the "
                "first block's columns (on the GPU: read past the array); right for M <= "
                "block_m",
                "one segment of two rows and 5 columns, block_m 4 (column 4 given column 0's "
                "softmax)",
                "accuracy",
                _of_classes("accuracy", "masking", "nan"),
            ),
        ),
        PALLAS,
    ),
    "attention_lse_of_unscaled_max": Pattern(
        "attention",
        (
            Bug(
                "the running max is kept in the unscaled logits q.k (the scale applied inside "
                "the exponential, exp(scale * (q.k - m))) and the log-sum-exp is stored as "
                "m + log(l) where scale * m + log(l) belongs: o is right, lse off by "
                "(1 - scale) * m; right for a scale of 1 or a largest logit of 0",
                "one query on one key, head dim 1, scale 0.5, q.k = 1",
                "accuracy",
                _of_classes("accuracy", "masking", "inf"),
            ),
        ),
        PALLAS,
    ),
    "varlen_alibi_inside_softcap": Pattern(
        "attention_varlen",
        (
            Bug(
                "ALiBi's bias is added before the soft cap, cap * tanh((s - slope |p - j|) / "
                "cap), where the cap applies to the scaled logits and the bias after it, "
                "cap * tanh(s / cap) - slope |p - j|: the bias is squashed with the logits; "
                "right without ALiBi, without a soft cap, or for keys at distance 0",
                "a soft cap of 1, ALiBi, one sequence of one query on two keys",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
    "gla_state_not_reset_between_sequences": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the kernel walks the batch's sequences (packed, or the batch elements) in "
                "turn and sets the state to the initial state only before the first: each "
                "later sequence starts from the previous one's final state, where its own "
                "initial state (or zero) belongs; right for one sequence",
                "two batch elements of one token each (batch element 1's o reads batch "
                "element 0's k^T v)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
}

# What CPU campaigns found (``python .ci/planted_rows.py --round 11 --cpu-campaign 300``: ``python
# -m fuzz run --targets 'planted11_*' --backends triton-interpret,pallas-interpret --db none --seed
# 1``, on a 2-core VM), with the harness at ed2eba8 and another engineer's jagged and GLA property
# changes in the working tree (committed as 247c9e1 to 0c355af during the run; the controls' run at
# 0c355af): 2,014 examples in 307 s, 10 of the 10 bugs found, 10 rows (0 unshrunk), 1.00 rows per
# bug found, row sizes median 4 and at most 272 elements; every pair 99-379 examples. The controls
# (``--cpu-campaign 150 --targets 'control11_*'``, 154 s, 1,147 examples): no row. The first pair of
# campaigns, at c0cb114 (2,301 examples in 307 s): 9 of 10 found, 9 rows (the Pallas jagged index
# map not found: see its note), and one control row, control11_jagged_softmax_triton
# masking/segment-permutation of y (39 elements, unshrunk): its row tiles, aligned to the array's
# rows, summed a segment's rows in other groups when a permutation moved it, a last-bit difference;
# the bug-free kernel's tiles now start at the segment's start (the planted kernel computes what it
# did). Per pattern and language: the rows of ``report.json`` and, for a bug of more than one row or
# not found, why.
CPU: dict[str, dict[str, str]] = {
    "softmax_bias_path_without_scale": {
        "triton": "found, 1 row (accuracy/oracle of y, 2 elements: one row of two keys, an "
        "ALiBi-style bias, scale 0.5), 141 examples",
    },
    "jagged_aligned_tiles_without_start_mask": {
        "triton": "found, 1 row (masking/oracle of y, 3 elements: two one-row segments, block_n "
        "4, segment 1's tile taking row 0 and writing it 0.448 where a one-row segment's fixed "
        "1), 99 examples; the expected accuracy is the same fault in longer segments (the first "
        "campaign's row: masking of 12 elements, also seen as accuracy/oracle, 5, and "
        "masking/segment-permutation, 6)",
    },
    "attention_causal_mask_on_first_diagonal_tile_only": {
        "triton": "found, 1 row (accuracy/oracle of o, 17 elements: causal, two queries on 17 "
        "keys, block_q = block_k = 16; also seen as masking/oracle of lse, 18), 379 examples",
    },
    "decode_alibi_of_key_index": {
        "triton": "found, 1 row (accuracy/oracle of lse, 16 elements: one query on a cache of 16 "
        "keys, the standard slope, one split; lse 0.0586 too large, o right), 165 examples",
    },
    "gla_cumsum_not_reset_per_chunk": {
        "triton": "found, 1 row (accuracy/oracle of ht, 272 elements: float16, 17 tokens, chunk "
        "16, g_gamma, an initial state; 1.94 times the bound), 307 examples (the first "
        "campaign's row also seen as accuracy/oracle of o, 544)",
    },
    "softmax_mask_as_zero_times_inf": {
        "pallas": "found, 1 row (nan/oracle of y, 2 elements: one row of two keys, a mask that "
        "keeps both), 164 examples",
    },
    "jagged_values_index_map_swapped": {
        "pallas": "found, 1 row (masking/oracle of y, 5 elements: one segment of one row and 5 "
        "columns, column 4 a column of -inf written 1 where 0: it read column 0), 281 "
        "examples; the first campaign did NOT find it in 188 examples: every example kept to "
        "the two programs compiled first (at most 4 columns, one column block), 187 draws "
        "rejected as 'would compile', and the bug needs more than block_m columns",
    },
    "attention_lse_of_unscaled_max": {
        "pallas": "found, 1 row (accuracy/scale-applied-once of lse, 1 element: one query on "
        "one key, q * 2 and scale / 2 changing the lse; also seen as accuracy/oracle of lse, 1 "
        "and 2), 158 examples",
    },
    "varlen_alibi_inside_softcap": {
        "pallas": "found, 1 row (accuracy/oracle of lse, 2 elements: one sequence of one query on "
        "two keys, a soft cap of 30, the standard slope; 1.02 times the bound: a cap of 30 "
        "hardly bends a logit near 0), 183 examples",
    },
    "gla_state_not_reset_between_sequences": {
        "pallas": "found, 1 row (accuracy/oracle of o, 32 elements: two batch elements of one "
        "token, g_gamma), 137 examples",
    },
}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
