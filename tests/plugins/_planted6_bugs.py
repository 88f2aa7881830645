"""The planted bugs of round 6: ``tests/plugins/planted6.py`` (Triton) and ``planted6_pallas.py``
(Pallas). One record per bug pattern, each written in one language, in the record format of
round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``, loaded from there, not copied). Data
only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (a row max taken over the inputs instead of the logits it shifts, a loop's last tile
read after the loop where its running value belongs, a causal mask applied per tile and not per
element on the diagonal tile, a window side's -1 (unbounded) taken as a number, a store whose
padded head-dim lanes are not masked, a float scale packed into an integer scalar array, an
empty segment taken for the end of a padded offsets list, tanh written from exp and overflowing,
a split-KV merge weighted by each split's max instead of its log-sum-exp, positions counted from
0 where a per-head decay counts from 1), and none is a pattern of the earlier planted rounds
(``_planted_bugs.py``, ``_planted3_bugs.py``, ``_planted4_bugs.py``, ``_planted5_bugs.py``), of
the harness's own mutants (``kernels/*/mutants.py``), on which it was tuned, or of the other test
plugins (``two_bugs.py``, ``dtype_kernels.py``, ``walls.py``, ``half_bugs.py``,
``late_crash.py``). A target of pattern ``p`` in language ``L`` is named ``planted6_<p>_<L>``.

A record says what a measurement needs (``.ci/planted_rows.py --round 6``): the bug, its trigger
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
    "softmax_max_of_unscaled": Pattern(
        "softmax",
        (
            Bug(
                "the row max is taken over the inputs x instead of the logits scale * x + bias "
                "that it shifts: exact in real arithmetic (a softmax does not depend on its "
                "shift), but exp(s - max x) overflows (Inf / Inf = NaN) or underflows (a sum of "
                "0) once the logits stray 88.7 from max x",
                "scale 2 and one key of x = 100 (exp(200 - 100) overflows: NaN; at x = -100 the "
                "sum exp(-100) is subnormal and its reciprocal inf: inf); or a bias that moves "
                "the logits as far",
                "nan",
                _of_classes("nan", "inf", "accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "jagged_shift_of_last_tile": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the writing pass shifts by the last row tile's max (the loop's tile variable, "
                "read after the loop) instead of the running max the sums were taken with: "
                "right where a column's max lies in its segment's last tile, too large by "
                "exp(max - last tile's max) elsewhere",
                "one segment of block_n + 1 rows (5 with block_n 4), one column, its max in the "
                "first tile; inf where the last tile lies 88.7 below the max",
                "accuracy",
                _of_classes("accuracy", "inf", "masking"),
            ),
        ),
        TRITON,
    ),
    "attention_causal_tile_only": Pattern(
        "attention",
        (
            Bug(
                "causal masking only as the key loop's bound (the key tiles past the query "
                "tile's last position are skipped) and no per-element mask on the tiles it "
                "visits: a query sees the later keys of its diagonal tile",
                "causal, Tq = 2 and Tk = 1 (query 0 sits before key 0 and must see no key: o "
                "0, lse -inf; the bug shows it key 0); accuracy where Tq <= Tk (Tq = Tk = 2: "
                "query 0 sees key 1)",
                "masking",
                _of_classes("masking", "accuracy"),
            ),
        ),
        TRITON,
    ),
    "varlen_window_unbounded_left": Pattern(
        "attention_varlen",
        (
            Bug(
                "a window's left side of -1 (unbounded) is not special-cased: the bound "
                "j >= p - left becomes j >= p + 1, every key up to the query's own position "
                "hidden; the right side's -1 is handled",
                "a window (-1, -1), one sequence of one query and one key (the key hidden: o 0, "
                "lse -inf; inf where the key's value is 0 and only lse is wrong)",
                "accuracy",
                _of_classes("inf", "accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "gla_ht_store_unmasked_v": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the final state is stored with the key-row mask only, not the value-column "
                "one: with V below its power-of-two tile the padded columns of the last row "
                "land past the head's state, in the next head's (rewritten when its program "
                "runs after) and, for the last head, past the end of ht",
                "V = 8 (a tile of 16), one head, one token: 8 elements past the end of ht",
                "out-of-bounds-write",
            ),
        ),
        TRITON,
    ),
    # Pallas ---------------------------------------------------------------------------------------
    "softmax_scale_truncated": Pattern(
        "softmax",
        (
            Bug(
                "the wrapper packs the scale into the kernel's scalar array with the column "
                "count, an int32 array: the scale is truncated toward 0 (0.5 and 0.125 become "
                "0, every valid key of a row weighted alike, and a valid key of x = +-inf "
                "gives inf * 0 = NaN); right for integer scales",
                "scale 0.5 and one row of two keys of different logits",
                "accuracy",
                _of_classes("accuracy", "nan"),
            ),
        ),
        PALLAS,
    ),
    "jagged_stop_at_empty_segment": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the kernel walks the padded offsets (the wrapper repeats N after the last "
                "segment) and stops at the first segment with no rows, taken for the padding, "
                "instead of at the segment count: the segments after an empty one are never "
                "written (NaN on pallas-interpret, whose outputs start as NaN; on the GPU "
                "whatever the memory held)",
                "an empty segment before a segment of one row (offsets [0, 0, 1])",
                "nan",
                _of_classes("nan", "masking", "accuracy"),
            ),
        ),
        PALLAS,
    ),
    "attention_tanh_overflow": Pattern(
        "attention",
        (
            Bug(
                "the soft cap's tanh is written as (exp(2x) - 1) / (exp(2x) + 1): once 2x "
                "passes 88.7 (a logit above 44.4 times the cap) it is Inf / Inf = NaN instead "
                "of 1",
                "a soft cap of 1 and one query on one key of logit 50",
                "nan",
            ),
        ),
        PALLAS,
    ),
    "decode_merge_by_split_max": Pattern(
        "attention_decode",
        (
            Bug(
                "the split-KV merge weights each split's normalized output by exp(m_split - m) "
                "(its max) instead of exp(lse_split - lse) (its log-sum-exp): right where every "
                "split holds the same sum (one key each), wrong elsewhere; lse is merged right",
                "2 splits and a cache of 3 keys (splits of 2 keys and 1)",
                "accuracy",
            ),
        ),
        PALLAS,
    ),
    "gla_gamma_position_from_zero": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the per-head decay's prefix inside a chunk is gamma * i (positions counted "
                "from 0) instead of gamma * (i + 1): the carried state reaches each query one "
                "decay short and each key is decayed once too often into the next state; the "
                "per-token gates' prefix is right",
                "g_gamma other than 0, one token and the final state (or an initial state)",
                "accuracy",
            ),
        ),
        PALLAS,
    ),
}

# What CPU campaigns found (``python .ci/planted_rows.py --round 6 --cpu-campaign 300``: ``python
# -m fuzz run --targets 'planted6_*' --backends triton-interpret,pallas-interpret --db none --seed
# 1``, on a 2-core VM), with the harness at ae8a65f (its GLA error model as 29b4634 commits it,
# then in the working tree): 5,232 examples in 305 s, 9 of the 10 bugs found, 12 rows (none
# unshrunk), 1.33 rows per bug found, row sizes median 2.5 and at most 18 elements. The controls
# (``--targets 'control6_*'``, 200 s, 2,874 examples): no row. Per pattern and language: the rows
# of ``report.json`` and, for a bug of more than one row or not found, why.
CPU: dict[str, dict[str, str]] = {
    "softmax_max_of_unscaled": {
        "triton": "found, 2 rows (inf/oracle of y, 1 element: scale 2, one key near x = -88, "
        "its sum exp(x) subnormal and the reciprocal inf, also seen as accuracy; "
        "nan/shift-invariance of y, 1: the same key with 1000 added to x overflows, also seen as "
        "nan/oracle), 701 examples: the two ends of the bug, underflow and overflow, of two "
        "classes",
    },
    "jagged_shift_of_last_tile": {
        "triton": "found, 1 row (masking/oracle of y, 18 elements: a column whose only finite "
        "value lies in its segment's first tile and whose last tile holds -inf alone, shifted by "
        "0: exp(x) where the fixed output is 1; also seen as inf of y, 9, and accuracy of y, "
        "20), 714 examples",
    },
    "attention_causal_tile_only": {
        "triton": "found, 2 rows (accuracy/oracle of lse, 2 elements: Tq <= Tk, a query shown a "
        "later key of its tile; masking/oracle of lse, 2: causal-more-queries-than-keys, a "
        "query that must see no key shown one, lse 0 where -inf), 280 examples: the two sides "
        "of Tq > Tk, triggers that do not nest (as round 5's causal_top_left)",
    },
    "varlen_window_unbounded_left": {
        "triton": "found, 1 row (inf/oracle of lse, 2 elements: window (-1, -1), the query's "
        "only key hidden, lse -inf where 0; also seen as accuracy of o, 2 and 3), 476 examples",
    },
    "gla_ht_store_unmasked_v": {
        "triton": "found, 1 row (out-of-bounds-write/guard-bands, 16 elements: V = 8, 8 "
        "elements past the end of ht's torch.empty [1, 1, 16, 8], without the final state "
        "asked for: ht is stored whatever the call returns), 428 examples",
    },
    "softmax_scale_truncated": {
        "pallas": "found, 2 rows (accuracy/oracle of y, 16 elements: scale 0.5 taken as 0; "
        "nan/oracle of y, 16: a valid key of x = -inf, -inf * 0 = NaN), 1,156 examples: the "
        "truncated scale's two effects, a uniform row and a NaN, of two classes",
    },
    "jagged_stop_at_empty_segment": {
        "pallas": "found, 1 row (nan/oracle of y, 3 elements: an empty segment first, the rows "
        "after it never written; also seen as masking/segment-permutation), 494 examples. On "
        "pallas-gpu (an H200, 25 examples of a seed-1 hunt) the unwritten rows hold old memory: "
        "masking and accuracy rows instead",
    },
    "attention_tanh_overflow": {
        "pallas": "found, 1 row (nan/oracle of o, 1 element: a soft cap of 5, one query on one "
        "key at logit level 1000, 2x = 400), 407 examples",
    },
    "decode_merge_by_split_max": {
        "pallas": "NOT found in 315 examples. The campaign compiled 9 programs and reused 301 "
        "examples' structures (182 refused as 'would compile'), and most examples put the "
        "logits beyond exp's range (205 'lse-above/below-exp-range' hazards), where one split's "
        "max dominates both weightings alike; bf16, fp16 and constant values hide it too. Of "
        "the 315 cases the strategy draws with seed 1 on their own, 15 fail (splits > 1, a "
        "cache of 3 keys or more); a single seeded hunt of 1,000 examples (pallas-interpret, "
        "seed 1) found it, 3 rows (accuracy/oracle of o, 1,024 and 16 elements; "
        "accuracy/rows-sum-to-one of o, 6), all with 2 splits in fp32",
    },
    "gla_gamma_position_from_zero": {
        "pallas": "found, 1 row (accuracy/oracle of ht, 16 elements: g_gamma of ALiBi's slope "
        "2^-8, one token, K = V = 16; also seen as accuracy/oracle of o, 256: with an initial "
        "state), 261 examples. Its message blames TF32 (the error, a factor exp(2^-8), is "
        "within the TF32 bound) on pallas-interpret, whose dots are exact",
    },
}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
