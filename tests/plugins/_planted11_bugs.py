"""The planted bugs of round 11: ``tests/plugins/planted11.py`` (Triton) and ``planted11_pallas.py``
(Pallas). One record per bug pattern, each written in one language, in the record format of
round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``, loaded from there, not copied). Data
only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (a fused bias path that drops the softmax scale, row tiles aligned to the array and
masked at one end only, a causal mask applied in one diagonal key tile where the query tile's
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
                "a segment's row tiles are aligned to multiples of block_n from the array's "
                "first row (its first tile starts at the boundary at or before its start) and "
                "masked at the segment's end only, not at its start: a segment that starts "
                "inside a tile takes the rows before it (the previous segment's) into its max "
                "and sum, and overwrites them with its own softmax; right for segments that "
                "start on a tile boundary",
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

# What CPU campaigns found (``python .ci/planted_rows.py --round 11 --cpu-campaign 300``): empty
# until one has run.
CPU: dict[str, dict[str, str]] = {}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
