"""The planted bugs of round 5: ``tests/plugins/planted5.py`` (Triton) and ``planted5_pallas.py``
(Pallas). One record per bug pattern, each written in one language, in the record format of
round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``, loaded from there, not copied). Data
only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (two tile constants mixed up in a program's offset, a reduction with its axis left out,
a causal mask aligned top-left in a bottom-right kernel, a packed batch's positions measured with
the buffer's totals, a state read in the other layout, a scale taken for a temperature,
accumulators not reset between segments, a soft cap applied before the scale, a decode query
placed one past the last key, a prefix sum restarted per tile inside a chunk), and none is a
pattern of the earlier planted rounds (``_planted_bugs.py``, ``_planted3_bugs.py``,
``_planted4_bugs.py``), of the harness's own mutants (``kernels/*/mutants.py``), on which it was
tuned, or of the other test plugins (``two_bugs.py``, ``dtype_kernels.py``, ``walls.py``). A
target of pattern ``p`` in language ``L`` is named ``planted5_<p>_<L>``.

A record says what a measurement needs (``.ci/planted_rows.py --round 5``): the bug, its trigger
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
    "softmax_row_block_of_block_n": Pattern(
        "softmax",
        (
            Bug(
                "each program's first row is pid * BLOCK_N instead of pid * BLOCK_M (the column "
                "tile's size where the row tile's belongs): the rows from BLOCK_M up to BLOCK_N "
                "are written by no program and keep what the output held (NaN where the harness "
                "poisons a new buffer)",
                "BLOCK_M + 1 rows (3 rows with block_m 2)",
                "nan",
            ),
        ),
        TRITON,
    ),
    "jagged_sum_all_columns": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the running sum is tl.sum of the tile's exponentials with no axis, one total "
                "over the rows and the column block: each column is normalized by the sum of "
                "every column of its block; right with one column",
                "one segment of one row and two columns (each written as 1/2 instead of 1); "
                "accuracy for longer segments",
                "masking",
                _of_classes("masking", "accuracy"),
            ),
        ),
        TRITON,
    ),
    "attention_causal_top_left": Pattern(
        "attention",
        (
            Bug(
                "the causal mask keeps j <= i (top-left, PyTorch's is_causal) while the kernel "
                "declares, and its window and ALiBi use, the bottom-right position "
                "p = i + Tk - Tq: right when Tq = Tk",
                "causal, one query and two keys (query 0 sits at key 1 and sees both; the bug "
                "shows it key 0 only); masking where the queries outnumber the keys",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "varlen_offset_of_totals": Pattern(
        "attention_varlen",
        (
            Bug(
                "packed sequences: each query's key position is measured with the packed "
                "totals, i + Tk - Tq (key rows with the guard rows, minus query rows), instead "
                "of its sequence's i + k_len - q_len; the causal mask, the window and ALiBi "
                "move with it",
                "causal, one sequence of 2 queries and 2 keys, and one guard key row (query 0 "
                "sees key 1); masking where the shift hides every key of a query",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "gla_h0_transposed": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the initial state [K, V] is read as if laid out [V, K] (element (k, v) from "
                "v * K + k), the layout of a kernel that keeps its state transposed",
                "an initial state that is not symmetric, one token",
                "accuracy",
            ),
        ),
        TRITON,
    ),
    # Pallas ---------------------------------------------------------------------------------------
    "softmax_scale_as_temperature": Pattern(
        "softmax",
        (
            Bug(
                "the scale is taken for a temperature: the logits are x / scale + bias instead "
                "of scale * x + bias; right for a scale of 1",
                "a scale other than 1 and one row of two keys of different logits",
                "accuracy",
            ),
        ),
        PALLAS,
    ),
    "jagged_stats_not_reset": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the running max and sum are set up once, before the loop over the segments, "
                "and carried from one segment into the next instead of starting again at -inf "
                "and 0: every segment after the first is normalized by the earlier segments' "
                "sums as well",
                "two segments of one row each, one column (the second written as "
                "e1 / (e0 + e1) instead of 1); accuracy for longer segments",
                "masking",
                _of_classes("masking", "accuracy"),
            ),
        ),
        PALLAS,
    ),
    "attention_softcap_before_scale": Pattern(
        "attention",
        (
            Bug(
                "the soft cap is applied to the unscaled logits and the scale after it, "
                "scale * cap * tanh(q.k / cap), instead of cap * tanh(scale * q.k / cap); right "
                "for a scale of 1",
                "a soft cap, a scale other than 1 (D >= 2 with the default scale) and one query "
                "on two keys of different logits",
                "accuracy",
            ),
        ),
        PALLAS,
    ),
    "decode_position_is_length": Pattern(
        "attention_decode",
        (
            Bug(
                "the decode query's key position is taken as cache_len instead of "
                "cache_len - 1 (one past the newest key): a window's left edge moves one key "
                "right, and ALiBi's distances grow by one (o right, lse off by the slope)",
                "a window of left side 0 and a cache of one key (the query's only key "
                "hidden: o 0, lse -inf: inf where that key's value is 0), or ALiBi and a cache "
                "of one key (lse off by the slope)",
                "accuracy",
                _of_classes("accuracy", "inf"),
            ),
        ),
        PALLAS,
    ),
    "gla_cumsum_per_tile": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the gates' prefix sum inside a chunk restarts at every 16-token tile instead "
                "of running over the whole chunk: right for chunks of 16, wrong from token 16 "
                "of a longer chunk on (its decays lose the earlier tiles' gates)",
                "chunk size 32, 17 tokens, gates other than 0 (inf or nan where the gates are "
                "large: exp(b_i - b_j) across a tile boundary grows instead of decaying)",
                "accuracy",
                _of_classes("accuracy", "inf", "nan"),
            ),
        ),
        PALLAS,
    ),
}

# What CPU campaigns found (``python .ci/planted_rows.py --round 5 --cpu-campaign 300``: ``python
# -m fuzz run --targets 'planted5_*' --backends triton-interpret,pallas-interpret --db none --seed
# 1``, on a 2-core VM shared with another job), with the harness at a1055c9: 2,786 examples in
# 309 s, every bug found, 19 rows (4 unshrunk), 1.90 rows per bug found, row sizes median 6 and
# at most 784 elements. The controls (``--targets 'control5_*'``, 200 s, 1,925 examples): no row.
# Again with the harness at 9af7742 (a property's call under another chunk size traced on its
# own; on the CPU each Pallas kernel runs on one backend), the VM quieter: 5,061 examples in 309 s, every
# bug found, 15 rows (none unshrunk), 1.50 rows per bug found, median 8, at most 512 elements;
# where a pattern's rows changed, its entry says "then:". Per pattern and language: the rows of
# ``report.json`` and, for a bug of more than one row, why.
CPU: dict[str, dict[str, str]] = {
    "softmax_row_block_of_block_n": {
        "triton": "found, 1 row (nan/poisoned-output of y, 6 elements: 3 rows of 2, row 2 "
        "never written), 130 examples",
    },
    "jagged_sum_all_columns": {
        "triton": "found, 2 rows (accuracy/oracle of y, 4 elements: a segment of 2 rows, "
        "partial-column-block; masking/oracle of y, 4: one-row segments, a fixed output of 1 "
        "written as 1/M), 120 examples: the class depends on the element made wrong, the two "
        "examples' triggers do not nest and neither fails the other's way. Then: 1 row "
        "(accuracy/oracle of y, 8; also seen as masking of y, 6 and 8), 705 examples",
    },
    "attention_causal_top_left": {
        "triton": "found, 2 rows (accuracy/oracle of lse, 2 elements: Tk > Tq, a query shown "
        "too few keys; masking/oracle of lse, 2: Tq > Tk, causal-more-queries-than-keys, a query "
        "that must see no key shown one: lse 0 where -inf), 361 examples: the two sides of "
        "Tq != Tk, triggers that do not nest",
    },
    "varlen_offset_of_totals": {
        "triton": "found, 2 rows (accuracy/oracle of lse, 4 elements: ALiBi without the causal "
        "mask, the distances moved by the guard rows; masking/oracle of o, 8: causal, a query "
        "that must see no key shown one, also seen as accuracy of o), 143 examples: the "
        "position moves the ALiBi bias in one and the causal mask in the other",
    },
    "gla_h0_transposed": {
        "triton": "found, 1 row (accuracy/oracle of o, 256 elements: one token, K = V = 16, "
        "g_gamma), 116 examples",
    },
    "softmax_scale_as_temperature": {
        "pallas": "found, 1 row (accuracy/shift-invariance of y, 3 elements: scale 0.125, x + "
        "(-64) moves the logits by -512 instead of -8 and costs fp32 bits; also seen as "
        "accuracy/oracle of y, 16), 519 examples",
    },
    "jagged_stats_not_reset": {
        "pallas": "found, 1 row (accuracy/oracle of y, 4 elements; also seen as masking/oracle "
        "of y, 5 and 8 elements, by influence), 258 examples",
    },
    "attention_softcap_before_scale": {
        "pallas": "found, 1 row (accuracy/scale-applied-once of lse, 1 element: q * 2 with "
        "scale / 2 under a soft cap of 30; also seen as accuracy/oracle of lse, 2), 276 "
        "examples",
    },
    "decode_position_is_length": {
        "pallas": "found, 2 rows (inf/oracle of lse, 1 element: window (0, -1), one key hidden, "
        "lse -inf where finite, also seen as accuracy of o; accuracy/oracle of lse, 16: ALiBi, "
        "lse off by the slope 2^-8), 298 examples: the window and ALiBi, features that do not "
        "nest. The ALiBi row's message blames TF32 (its error is within the TF32 bound) on "
        "pallas-interpret, whose dots are exact, in a kernel with no dot. Then: 3 rows, 289 "
        "examples: the window's two (inf of lse, 1 element, a window of (0, -1); accuracy of "
        "lse, 2, a window of (1, -1): one key too many) and ALiBi's (accuracy of lse, 16); "
        "neither window example fails the other's way (one lse is -inf, the other finite)",
    },
    "gla_cumsum_per_tile": {
        "pallas": "found, 6 rows, 4 unshrunk (inf/finite-every-chunk of o, 272 elements; "
        "inf/oracle of o, 272, unshrunk; nan/chunk-independence of o, 330, unshrunk; "
        "nan/finite-every-chunk of o, 544; accuracy/chunk-independence of o, 608, unshrunk; "
        "accuracy/oracle of o, 784, unshrunk), 565 examples: with large gates the decay across "
        "a tile boundary grows and overflows (inf, then nan) where small gates give wrong "
        "finite values, under three properties; the unshrunk rows' slices hit their hard limit "
        "and were not checked against the bugs found before ('it may be one of them seen "
        "another way'). Then: 2 rows, none unshrunk (inf/finite-every-chunk of o, 496; "
        "accuracy/chunk-independence of o, 512, also seen as accuracy/oracle of o), 462 "
        "examples: the Inf and NaN rows through finite-every-chunk are traced now (the chunk-32 "
        "call had been taken for the case's own) to the oracle rows' exp, and joined",
    },
}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
