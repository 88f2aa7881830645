"""The planted bugs of round 13: ``tests/plugins/planted13.py`` (Triton) and ``planted13_pallas.py``
(Pallas). One record per bug pattern, each written in one language, in the record format of
round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``, loaded from there, not copied). Data
only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (a row with no valid key told by a count of the mask's kept keys where additive -inf
masks also empty a row, a caller's tensor sanitized in place, a value tile loaded without the key
mask its key tile has, split-KV partial outputs left unnormalized for a merge that expects them
normalized, the attention scale folded into the keys that also build the recurrent state; a tile
count rounded up one tile too far, a padded batch filled on the other side from the one its
kernel reads, ALiBi's distance taken from the query's index where its aligned position belongs,
empty sequences dropped from a tile table whose lookups then use the wrong index, a cumulative
log decay clamped against underflow where its ratios need it exact), and none is a pattern of the
earlier planted rounds (``_planted_bugs.py``, ``_planted3_bugs.py`` to ``_planted12_bugs.py``),
of the harness's own mutants (``kernels/*/mutants.py``), on which it was tuned, or of the other
test plugins (``two_bugs.py``, ``two_positional_bugs.py``, ``dtype_kernels.py``, ``walls.py``,
``half_bugs.py``, ``late_crash.py``). A target of pattern ``p`` in language ``L`` is named
``planted13_<p>_<L>``.

A record says what a measurement needs (``.ci/planted_rows.py --round 13``): the bug, its trigger
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
    "softmax_empty_row_by_mask_count": Pattern(
        "softmax",
        (
            Bug(
                "a row is taken to have no valid key where the mask keeps none of its keys (a "
                "running count of the kept keys), where a max of -inf belongs: the shift is "
                "guarded to 0 only while the count is 0, so a row whose kept keys all have a "
                "logit of -inf (an x of -inf, or a bias of -inf: an additive mask) is shifted by "
                "-inf and exp(-inf - -inf) = NaN: such a row is written NaN where zeros belong, "
                "and a row whose first column tile holds only such keys carries a NaN sum into "
                "its later tiles and is written as zeros (the guard of a sum not > 0); right for "
                "rows with a finite logit in their first tile, and for rows the mask empties",
                "one row of one key, x = -inf, no mask (y NaN where 0)",
                "nan",
                _of_classes("nan", "masking", "accuracy"),
            ),
        ),
        TRITON,
    ),
    "jagged_values_sanitized_in_place": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the wrapper sanitizes the values in place before the launch, "
                "values.nan_to_num_() (NaN to 0, -inf and +inf to the dtype's lowest and "
                "largest finite values: defensive code against NaN inputs) where a copy, or "
                "nothing, belongs: the caller's values are changed wherever they hold -inf, and "
                "a column with no finite value in a segment (all -inf: 0 by the family's "
                "convention) becomes a column of equal finite values, written as 1 / length; "
                "right for values without -inf",
                "one row of one column, -inf (y 1 where 0, and the caller's -inf changed)",
                "input-write",
                _of_classes("masking", "input-write", "accuracy"),
            ),
        ),
        TRITON,
    ),
    "attention_values_loaded_without_key_mask": Pattern(
        "attention",
        (
            Bug(
                "the value tile is loaded with the head-dim mask only, where the key tile's mask "
                "(the keys some query of the tile sees, inside the sequence) belongs too, as if "
                "the keys past the sequence were zero padding: the last key tile of the last "
                "head reads past the end of v (an out-of-bounds read), and a key no query sees "
                "(key padding, the causal mask, a window) adds p * v = 0 * v, NaN where its value "
                "is NaN or Inf; right where the keys fill whole tiles and every loaded key is "
                "finite",
                "one query on one key, block_k 16 (rows 1 to 15 of v read past its end)",
                "out-of-bounds-read",
                _of_classes("out-of-bounds-read", "masking", "nan", "accuracy"),
            ),
        ),
        TRITON,
    ),
    "decode_split_output_unnormalized": Pattern(
        "attention_decode",
        (
            Bug(
                "each split stores its unnormalized output, the accumulator sum_j p_j v_j, "
                "where the merge expects it divided by the split's sum (the merge weighs each "
                "split's output by exp(lse_split - lse)): o is the split's sum of exponentials "
                "times too large; the log-sum-exp is right; right where each split holds one "
                "key (its sum exp(s - s) = 1) or none",
                "a cache of two keys in one split",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "gla_scale_folded_into_keys": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the scale is folded into the keys as they are loaded (k * scale) and left out "
                "of the output, where it belongs on the queries or the output: the intra-chunk "
                "term and the state's keys are right for o, but the state carried is built "
                "from scaled keys, so the final state ht is the keys' part times the scale (the "
                "initial state's part right), and the initial state's term in o, q exp(b) h0, "
                "misses the scale; right for a scale of 1",
                "one token, head dim 4 (scale 0.5), the final state",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    # Pallas ---------------------------------------------------------------------------------------
    "softmax_tile_count_one_too_many": Pattern(
        "softmax",
        (
            Bug(
                "the row's column tile count is (n_cols + block_n) // block_n, rounded up one "
                "tile too far where (n_cols + block_n - 1) // block_n belongs: where the row "
                "fills its padded width (a power-of-two multiple of block_n columns) the extra "
                "tile starts past the block; its statistics pass reads padding (masked, no "
                "effect) but its write pass stores zeros there, which interpret mode clamps onto "
                "the block's last tile (on a GPU: past the row, into the next one): the row's "
                "last block_n outputs are written 0; right for rows shorter than their padded "
                "width",
                "one row of 16 keys, block_n 16 (its outputs written 0)",
                "accuracy",
                _of_classes("accuracy", "masking", "out-of-bounds-write", "nondeterminism"),
            ),
        ),
        PALLAS,
    ),
    "jagged_slab_filled_from_its_end": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the wrapper copies each segment into the last length rows of its slab of the "
                "padded dense batch, dense[b, -length:] (padded on the left, as batches padded "
                "for generation are), where the kernel reads a segment from its slab's first "
                "length rows: the kernel normalizes the slab's leading padding (zeros) and the "
                "segment's first rows, so a segment shorter than its slab is written as the "
                "softmax of zeros (1 / length per row) and a -inf column as such; and for an "
                "empty segment -0: is the whole slab, so its copy of no rows into it raises "
                "(numpy cannot broadcast 0 rows to the slab's); right for segments that fill "
                "their slabs",
                "a segment of two rows, block_n 4 (each row 0.5 where the two rows' softmax)",
                "accuracy",
                _of_classes("accuracy", "masking", "crash"),
            ),
        ),
        PALLAS,
    ),
    "attention_alibi_distance_of_query_index": Pattern(
        "attention",
        (
            Bug(
                "ALiBi's distance is |i - j|, from the query's index, where |p - j| from its "
                "bottom-right position p = i + Tk - Tq belongs (the causal mask and the window "
                "use p): with Tq < Tk every query's bias is measured from the wrong key (o and "
                "lse wrong); under the causal mask with Tq > Tk every visible key is farther "
                "by Tq - Tk, a constant per row (o right, lse too small by slope * (Tq - Tk)); "
                "right where Tq = Tk",
                "ALiBi, one query on two keys (the bias of key 1 where key 0's belongs)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
    "varlen_keys_of_compacted_sequence_index": Pattern(
        "attention_varlen",
        (
            Bug(
                "the wrapper leaves the sequences with no key out of its table of query tiles "
                "(their queries see nothing: o 0, lse -inf, as the outputs start) and numbers "
                "the sequences it keeps 0, 1, 2, ...; each kept sequence's keys are looked up "
                "in cu_seqlens_k by that number where its own index belongs: a sequence after "
                "one with no key attends to an earlier sequence's keys (none: o 0, lse -inf); "
                "right where no sequence before the last with keys has none",
                "two sequences of one query, the first with no key, the second with one (o 0, "
                "lse -inf where the key's)",
                "accuracy",
                _of_classes("accuracy", "masking", "inf"),
            ),
        ),
        PALLAS,
    ),
    "gla_cumulative_decay_clamped": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the chunk's cumulative log decay b is clamped at -87 (so that exp(b), the "
                "queries' factor on the carried state, stays a normal float) where the decays "
                "need it exact: the ratios exp(b_i - b_j) between tokens past the clamp are 1 "
                "where tiny, so a query reads earlier keys' values undecayed, and the keys' "
                "weights to the chunk's end exp(b_last - b_j) with them (the final state, and "
                "later chunks' o); right while no chunk's cumulative decay passes -87",
                "two tokens of gates -100 each, one chunk (token 1 reads token 0's value "
                "undecayed)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        PALLAS,
    ),
}

# What CPU campaigns found (``python .ci/planted_rows.py --round 13 --cpu-campaign 300``: ``python
# -m fuzz run --targets 'planted13_*' --backends triton-interpret,pallas-interpret --db none --seed
# 1``, on a 2-core VM), with the harness at f587374 (another engineer's uncommitted change to
# ``tests/plugins/faults.py`` in the working tree, a plugin this campaign does not load): 3,152
# examples in 310 s, 10 of the 10 bugs found, 14 rows (none unshrunk, no maybe-known record), 1.40
# rows per bug run and per bug found, record sizes median 10 and at most 240 elements; every pair
# 200-531 examples. The controls (``--cpu-campaign 150 --targets 'control13_*'``, at f587374, a
# clean tree: 1,168 examples in 156 s, every pair 97-176 examples): no row. Per pattern and
# language: the rows of ``report.json`` and, for a bug of more than one row or not found, why.
CPU: dict[str, dict[str, str]] = {
    "softmax_empty_row_by_mask_count": {
        "triton": "found, 2 rows, the two ways the record names, of two classes: nan/oracle of "
        "y (16 elements: one row of 16 keys, every x -inf, no mask: NaN where 0; its first "
        "sighting, one key, had the partial-tile trigger besides and gave its place to this "
        "one), and accuracy/oracle of y (24 elements: a row of 24 keys with a mask and a bias "
        "of -inf, the first tile's one kept key of bias -inf, the second tile's of bias 0: "
        "written 0 where 1), 531 examples",
    },
    "jagged_values_sanitized_in_place": {
        "triton": "found, 2 rows of one key, masking/oracle of y, whose triggers do not nest: "
        "a segment of two rows in one column of -inf (2 elements, 0.5 where 0; no-finite-value "
        "and partial-column-block) and one row of four columns, the last -inf (4 elements, 1 "
        "where 0; no-finite-value and single-row-segments). The input-write is never reported: "
        "the family hands a Triton kernel its values as a view into a guard buffer, a copy "
        "(``fuzz.families._jagged_guards``), and inputs-unchanged compares the launch's own "
        "inputs, which the kernel never sees (a case whose -inf values do not change y, "
        "[-inf, 0.5] in one segment, passes every property), 215 examples. Since then the "
        "family writes what the kernel wrote into its guarded copy back into the launch's "
        "inputs (``fuzz.targets.jagged_softmax.write_back``): the trigger is an input-write, "
        "the class the round's author first expected",
    },
    "attention_values_loaded_without_key_mask": {
        "triton": "found, 3 rows: out-of-bounds-read/guard-bands (2 elements: one query on two "
        "keys, block_k 16: 14 of the value load's 16 lanes outside every buffer), and two "
        "masking/masked-poison rows of o (16 elements each, one query on 16 keys: under "
        "key_lengths [1], and under a window (0, -1): a NaN in the hidden keys' values turns o "
        "NaN), one key with triggers that do not nest (key padding, keys outside the data; a "
        "window); none joined to another, 265 examples",
    },
    "decode_split_output_unnormalized": {
        "triton": "found, 1 row (accuracy/oracle of o, 2 elements: a cache of two keys in one "
        "split; also seen as accuracy/rows-sum-to-one of o, 2), 287 examples",
    },
    "gla_scale_folded_into_keys": {
        "triton": "found, 1 row (accuracy/oracle of ht, 16 elements: one token of g_gamma, head "
        "dims 16, the final state; also seen as accuracy/oracle of o twice, 256 each: one token "
        "and 16 tokens with an initial state), 228 examples",
    },
    "softmax_tile_count_one_too_many": {
        "pallas": "found, 1 row (accuracy/oracle of y, 16 elements: one row of 16 keys, "
        "block_n 16, written 0), 218 examples",
    },
    "jagged_slab_filled_from_its_end": {
        "pallas": "found, 1 row (crash, 4 elements: a segment of one row of four columns and an "
        "empty segment after it, the copy of no rows into a whole slab raising ValueError); "
        "the wrong values of a segment shorter than its slab never failed an example (16 of "
        "400 of the strategy's draws outside a campaign have no empty segment and a segment of "
        "two rows or more short of its slab: the empty segments crash first), 416 examples",
    },
    "attention_alibi_distance_of_query_index": {
        "pallas": "found, 1 row (accuracy/oracle of lse, 2 elements: two queries on one key, "
        "the standard slope, lse off by one slope where o is right; also seen as "
        "accuracy/oracle of o, 2 and 16: one query on two and on 16 keys); its message names "
        "the mix-up (every output matches the oracle with the queries aligned top-left) after "
        "a note that every error is within a TF32 bound, 482 examples",
    },
    "varlen_keys_of_compacted_sequence_index": {
        "pallas": "found, 1 row (inf/oracle of lse, 3 elements: two sequences of one query, "
        "the first with no key, the second with one: lse -inf where 0; also seen as "
        "accuracy/oracle of o, 3), 200 examples",
    },
    "gla_cumulative_decay_clamped": {
        "pallas": "found, 1 row (accuracy/oracle of o, 240 elements: 15 tokens of g_gamma "
        "-5.92, chunk 16: the cumulative decay passes -87 at the last token), 310 examples",
    },
}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
