"""The planted bugs of round 8: ``tests/plugins/planted8.py`` (Triton) and ``planted8_pallas.py``
(Pallas). One record per bug pattern, each written in one language, in the record format of
round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``, loaded from there, not copied). Data
only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (a one-tile row kernel handed rows longer than its tile, a jagged kernel's longest
segment estimated from the total rows, a sliding window's first key tile rounded up instead of
down, a scratch buffer addressed with the padded head dim's stride, a chunk's total decay read
from raw gates where cumulative ones belong, a boolean mask read with the opposite polarity, a
segment's end taken from an offsets array where lengths belong, an output accumulator cast to
the half-precision output dtype before its division, a window's sides unpacked in the other
order, an intra-chunk decay ratio inverted), and none is a pattern of the earlier planted rounds
(``_planted_bugs.py``, ``_planted3_bugs.py``, ``_planted4_bugs.py``, ``_planted5_bugs.py``,
``_planted6_bugs.py``, ``_planted7_bugs.py``), of the harness's own mutants
(``kernels/*/mutants.py``), on which it was tuned, or of the other test plugins (``two_bugs.py``,
``dtype_kernels.py``, ``walls.py``, ``half_bugs.py``, ``late_crash.py``). A target of pattern
``p`` in language ``L`` is named ``planted8_<p>_<L>``.

A record says what a measurement needs (``.ci/planted_rows.py --round 8``): the bug, its trigger
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
    "softmax_row_tile_of_block_n": Pattern(
        "softmax",
        (
            Bug(
                "a one-tile row kernel (the whole row in one tile, no loop over tiles) is "
                "launched with the tuned block_n as its tile where the row's power of two (at "
                "least block_n) belongs: the columns past block_n are neither read nor written "
                "(left as the output was allocated) and the row is normalized over its first "
                "block_n keys",
                "one row of block_n + 1 keys (17 with block_n 16): column 16 never written (NaN, "
                "as the harness poisons what the library allocates)",
                "nan",
                _of_classes("nan", "accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "jagged_max_len_of_mean": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the kernel takes the longest segment's length (max_len, as jagged kernels that "
                "stop at a maximum length do) and the wrapper passes total rows // segments, the "
                "length of a dense batch, where the longest segment's belongs: the rows of a "
                "segment past that length are neither read nor written",
                "two segments of 1 and 2 rows (max_len 3 // 2 = 1): the second segment's last "
                "row never written (NaN), its first written 1",
                "nan",
                _of_classes("nan", "accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "attention_window_start_rounded_up": Pattern(
        "attention",
        (
            Bug(
                "with a window, the key loop starts at the first key tile any query of the "
                "query tile can see, and that tile is computed by rounding the tile's leftmost "
                "visible key up to a whole tile (ceil) where down belongs (floor): the keys "
                "before that tile boundary are skipped for every query of the tile (right "
                "where the leftmost visible key is 0 or on a tile boundary)",
                "a window (0, -1), one query on two keys (its one visible key, key 1, in the "
                "skipped first tile: o 0 and lse -inf where key 1's value belongs)",
                "accuracy",
                _of_classes("accuracy", "masking", "inf"),
            ),
        ),
        TRITON,
    ),
    "decode_scratch_padded_stride": Pattern(
        "attention_decode",
        (
            Bug(
                "the split kernel and the merge address the scratch buffer of the splits' "
                "partial outputs with the padded head-dim tile (BLOCK_D, a power of two of at "
                "least 16) as its row stride, where the buffer is allocated with the head dim D "
                "as its row: with D below its tile every slot after the first lands past the "
                "slot's row, the last ones past the buffer's end (right for D of 16 or 32)",
                "head dim 2, one head, two keys in two splits: split 1's partial output is "
                "stored at elements 16 and 17 of a scratch of 4",
                "out-of-bounds-write",
                _of_classes("out-of-bounds-write", "nan", "accuracy", "nondeterminism"),
            ),
        ),
        TRITON,
    ),
    "gla_chunk_decay_of_last_gate": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "per-token gates: the chunk's total decay b_last (by which the carried state "
                "decays and each key is weighted, exp(b_last - b_j)) is loaded from the gates at "
                "the chunk's last token, as kernels that take chunk-local cumulative gates do, "
                "where this kernel's gates are the raw ones (their sum belongs): the final "
                "state and every later chunk wrong once a chunk holds two tokens with a gate "
                "other than 0, and exp(b_last - b_j) overflowing (inf, then NaN) once a key's "
                "cumulative gate b_j lies more than 88.7 below the last token's gate (the "
                "per-head decay is right)",
                "two tokens with gates -0.3 and the final state (ht decays key 0 by exp(0) where "
                "exp(-0.3) belongs)",
                "accuracy",
                _of_classes("accuracy", "nan", "inf", "masking"),
            ),
        ),
        TRITON,
    ),
    # Pallas ---------------------------------------------------------------------------------------
    "softmax_mask_polarity_inverted": Pattern(
        "softmax",
        (
            Bug(
                "the wrapper reads the boolean mask with the opposite polarity (True as a key to "
                "drop, the convention of nn.MultiheadAttention's key_padding_mask, where the "
                "family's True is a key to keep): the masked keys are kept and the valid ones "
                "dropped (right with no mask)",
                "one row of two keys, key 1 masked (y [1, 0] expected, [0, 1] given)",
                "masking",
                _of_classes("masking", "accuracy", "nan"),
            ),
        ),
        PALLAS,
    ),
    "jagged_offsets_as_lengths": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the kernel takes each segment's start and length, and the wrapper passes the "
                "segments' ends (offsets[1:]) as their lengths where offsets[1:] - offsets[:-1] "
                "belongs: segment i runs to offsets[i] + offsets[i + 1] (cut at the row count), "
                "taking the next segments' rows into its max and sum; right for the first "
                "segment, the last, and any segment that starts at row 0",
                "three segments of one row each: the middle one normalized with the last one's "
                "row (a one-row segment's output is fixed at 1; longer segments: accuracy)",
                "masking",
                _of_classes("masking", "accuracy", "nan"),
            ),
        ),
        PALLAS,
    ),
    "attention_acc_cast_before_division": Pattern(
        "attention",
        (
            Bug(
                "the output accumulator (the unnormalized sum of p * v, up to the row's sum of "
                "exponentials times the largest |v|) is cast to the output dtype before its "
                "division by that sum: in float16 an accumulator past 65504 is inf where o is "
                "finite (and half-precision outputs are rounded twice)",
                "float16, one query on two keys of equal logits, both values 40000 (an "
                "accumulator of 80000: inf where o is 40000)",
                "inf",
                _of_classes("inf", "nan", "accuracy"),
            ),
        ),
        PALLAS,
    ),
    "varlen_window_sides_swapped": Pattern(
        "attention_varlen",
        (
            Bug(
                "the wrapper unpacks the window (left, right) as (right, left): each query sees "
                "the keys from p - right to p + left (right for symmetric windows)",
                "a window (0, -1), one sequence of one query on two keys (key 0 seen, which "
                "the window's left side of 0 hides)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
    "gla_intra_decay_reversed": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the intra-chunk decay is exp(b_j - b_i) where exp(b_i - b_j) belongs (the "
                "ratio of the cumulative decays inverted): an earlier key's contribution grows "
                "with the gates between it and the query instead of decaying (overflowing "
                "once they sum past 88.7); right with no decay and for a token's own key",
                "two tokens with gates -0.3 (key 0 weighted exp(0.3) in query 1's output where "
                "exp(-0.3) belongs)",
                "accuracy",
                _of_classes("accuracy", "inf", "nan", "masking"),
            ),
        ),
        PALLAS,
    ),
}

# What CPU campaigns found (``python .ci/planted_rows.py --round 8 --cpu-campaign 300``: ``python
# -m fuzz run --targets 'planted8_*' --backends triton-interpret,pallas-interpret --db none --seed
# 1``, on a 2-core VM), with the harness between ba8bea5 and ecb31f4: 7,495 examples in 308 s, 9
# of the 10 bugs found, 11 rows (none unshrunk), 1.22 rows per bug found, row sizes median 15 and
# at most 240 elements. The controls (``--cpu-campaign 150 --targets 'control8_*'``, 153 s, 2,884
# examples): no row. Per pattern and language: the rows of ``report.json`` and, for a bug of more
# than one row or not found, why.
CPU: dict[str, dict[str, str]] = {
    "softmax_row_tile_of_block_n": {
        "triton": "found, 1 row (nan/poisoned-output of y, 32 elements: one row of 32 keys, "
        "block_n 16, columns 16 to 31 never written), 1,035 examples. Not shrunk to the "
        "trigger's 17 keys",
    },
    "jagged_max_len_of_mean": {
        "triton": "found, 1 row (nan/poisoned-output of y, 20 elements: segments of 3 and 2 "
        "rows of 4 columns, max_len 5 // 2 = 2, the first segment's last row never written), "
        "1,112 examples",
    },
    "attention_window_start_rounded_up": {
        "triton": "found, 1 row (inf/oracle of lse, 15 elements: window (1, -1), one query on "
        "15 keys, its visible keys 13 and 14 in the skipped tile: lse -inf; also seen as "
        "accuracy/oracle of o, 3 and 16, and accuracy/oracle of lse, 17), 512 examples. Its "
        "class is the lse's -inf where the trigger's worst element is o's 0 (accuracy): one "
        "skipped tile, both outputs wrong",
    },
    "decode_scratch_padded_stride": {
        "triton": "found, 1 row (out-of-bounds-write/guard-bands, 32 elements: two query heads "
        "on two kv heads, head dim 1, one split: head 1's partial output stored past the end "
        "of the scratch's torch.empty [1, 2, 1, 1]), 353 examples. A second slot "
        "of a head, not of a split as in the trigger",
    },
    "gla_chunk_decay_of_last_gate": {
        "triton": "found, 1 row (accuracy/oracle of ht, 240 elements: per-token gates, 15 "
        "tokens in one chunk, the final state; also seen as inf/oracle and nan/oracle of ht, "
        "240, the keys' weights exp(b_last - b_j) overflowing, and accuracy/oracle of o, 272, "
        "a later chunk), 631 examples. Not shrunk to the trigger's two tokens",
    },
    "softmax_mask_polarity_inverted": {
        "pallas": "found, 1 row (accuracy/rows-sum-to-one of y, 1 element: one row of one valid "
        "key, dropped: the row sums to 0; also seen as accuracy/oracle of y, 1, "
        "masking/masked-poison of y, 1, and masking/oracle of y, 2, 3 and 16, a masked key "
        "given weight), 757 examples. Its class is accuracy where the trigger's is masking: "
        "the smallest example has no masked key, only a valid one dropped",
    },
    "jagged_offsets_as_lengths": {
        "pallas": "found, 1 row (masking/segment-permutation of y, 4 elements: three one-row "
        "segments, the trigger, the middle one's 1 changed by reordering the segments; also "
        "seen as accuracy/oracle of y, 6 and 24, and masking/oracle of y, 16), 1,227 examples",
    },
    "attention_acc_cast_before_division": {
        "pallas": "NOT found in 436 examples: no drawn case had a float16 accumulator past "
        "65504 (large values on many keys of near-equal logits), and the double rounding of "
        "bfloat16 and float16 outputs stays within the bound. Seeded hunts of the ci profile "
        "(1,500 examples each, seeds 1 to 3) find it, inf/oracle of o, 16 elements (o inf where "
        "60000)",
    },
    "varlen_window_sides_swapped": {
        "pallas": "found, 3 rows (accuracy/oracle of lse, 4 elements: window (-1, 0), one "
        "sequence of one query on two keys, key 0 hidden, also seen as accuracy/oracle of o, "
        "4; inf/oracle of lse, 8: window (0, -1), two queries on one key, query 0's one key "
        "hidden: lse -inf; masking/oracle of lse, 8: window (-1, 0), two queries on one key, "
        "query 0 shown the key it must not see, also seen as masking/oracle of o, 8), 924 "
        "examples: one swap met as its two sides (a key hidden, a key shown) and as a row left "
        "with no key, three classes whose triggers do not nest",
    },
    "gla_intra_decay_reversed": {
        "pallas": "found, 1 row (accuracy/oracle of o, 240 elements: g_gamma, 15 tokens in one "
        "chunk; also seen as nan/oracle and inf/oracle of o, 240, the inverted decays "
        "overflowing), 508 examples. Not shrunk to the trigger's two tokens",
    },
}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
