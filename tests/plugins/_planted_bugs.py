"""The planted bugs of ``tests/plugins/planted.py`` (Triton) and ``planted_pallas.py`` (Pallas):
one record per bug pattern, shared by both languages. Data only: no kernel, no registration.

Each pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (``bug-classes.md`` of the team's notes: off-by-one masks, strides, reads past a
sequence, rescaling forgotten, states dropped), none of them one of the harness's own mutants
(``kernels/*/mutants.py``), on which it was tuned. A plugin target of pattern ``p`` is named
``planted_<p>_triton`` or ``planted_<p>_pallas``; ``planted_two_bugs_softmax`` (Triton) and
``planted_two_bugs_softmax_pallas`` hold two bugs each.

A record says what a measurement needs: the bug, its trigger (the smallest input that shows it),
the failure class expected, and ``match``: which of the report's rows (findings, as dicts of
``report.json``) count as this bug found. ``cpu`` says what a short CPU campaign found; where the
harness cannot find a bug today, it says why, and the record stays (a finding for the harness).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


def _of_class(cls: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda row: row.get("class") == cls


def _of_class_and_dtype(cls: str, dtype: str) -> Callable[[Mapping[str, Any]], bool]:
    def match(row: Mapping[str, Any]) -> bool:
        return row.get("class") == cls and (row.get("params") or {}).get("dtype") == dtype

    return match


@dataclass(frozen=True)
class Bug:
    """One planted bug.

    Attributes:
        what: the bug, as its kernel's docstring states it.
        trigger: the smallest input that shows it.
        expected: the failure class a report should give it.
        match: ``match(row) -> bool`` for a row of ``report.json``'s findings (default: of the
            expected class).
    """

    what: str
    trigger: str
    expected: str
    match: Callable[[Mapping[str, Any]], bool] | None = None

    def matches(self, row: Mapping[str, Any]) -> bool:
        return (self.match or _of_class(self.expected))(row)


@dataclass(frozen=True)
class Pattern:
    """A planted-bug pattern: its family, its bugs (one, or two for the two-bug softmax), and
    per language (``triton``, ``pallas``) what short CPU campaigns found (``CPU`` below)."""

    family: str
    bugs: tuple[Bug, ...]
    cpu: Mapping[str, str] = field(default_factory=dict)
    not_in: tuple[str, ...] = ()  # languages it is not written in


PATTERNS: dict[str, Pattern] = {
    "softmax_bias_row0": Pattern(
        "softmax",
        (
            Bug(
                "the bias is read as one row broadcast to every row (its row stride taken as 0): "
                "every row gets row 0's bias",
                "a bias of two rows that differ (rows >= 2)",
                "accuracy",
            ),
        ),
    ),
    "softmax_frozen_max": Pattern(
        "softmax",
        (
            Bug(
                "the online max is taken from the first column tile and never updated: later "
                "tiles are shifted by the first tile's max (by 0 where it has no valid key), so "
                "exp overflows once a later logit is 88.7 above it, and inf / inf = NaN",
                "a row longer than one tile whose first tile's max is more than 88.7 below a "
                "later logit (e.g. the first tile masked or -inf, a later logit of 89)",
                "nan",
            ),
        ),
    ),
    "two_bugs_softmax": Pattern(
        "softmax",
        (
            Bug(
                "every float16 output is multiplied by 1.01",
                "any float16 row (one element)",
                "accuracy",
                _of_class_and_dtype("accuracy", "float16"),
            ),
            Bug(
                "bfloat16 rows of odd length >= 3 are multiplied by 0.97",
                "one bfloat16 row of 3 columns",
                "accuracy",
                _of_class_and_dtype("accuracy", "bfloat16"),
            ),
        ),
    ),
    "jagged_read_next_segment": Pattern(
        "jagged_softmax",
        (
            Bug(
                "row tiles are load-masked against the total row count N instead of the "
                "segment's end: a segment whose length is not a multiple of block_n takes the "
                "next segment's first rows into its max and sum (stores are masked right)",
                "two segments, the first of a length that is not a multiple of block_n (1 row, "
                "block_n 4: its output, 1, is fixed), the second not empty",
                "masking",
            ),
        ),
    ),
    "attention_causal_clamp": Pattern(
        "attention",
        (
            Bug(
                "the bottom-right offset Tk - Tq (each query's key position, which the causal "
                "mask, the window and the ALiBi distances measure from) is clamped at 0: with "
                "more queries than keys they are aligned top-left, so the first Tq - Tk "
                "queries, which see no key under a causal mask, see some",
                "causal, Tq = 2, Tk = 1 (or a window or ALiBi with Tq > Tk)",
                "masking",
            ),
        ),
    ),
    "attention_window_left": Pattern(
        "attention",
        (
            Bug(
                "the sliding window's left bound is off by one (j >= p - left - 1): one key "
                "more than the window holds is visible on the left",
                "a window with left >= 0 and a key at p - left - 1 (Tq = Tk = 2, window (0, "
                "-1): query 1 sees key 0)",
                "accuracy",
            ),
        ),
    ),
    "attention_alibi_kv_head": Pattern(
        "attention",
        (
            Bug(
                "with GQA the ALiBi slope is read at the kv head (h // group) instead of the "
                "query head h",
                "ALiBi, 2 query heads sharing 1 kv head with different slopes, Tk >= 2",
                "accuracy",
            ),
        ),
    ),
    "attention_softcap_unscaled": Pattern(
        "attention",
        (
            Bug(
                "the logit soft cap is computed as cap * tanh(s) instead of cap * tanh(s / cap)",
                "a soft cap other than 1 and two keys of different logits",
                "accuracy",
            ),
        ),
    ),
    "attention_lse_no_max": Pattern(
        "attention",
        (
            Bug(
                "the log-sum-exp is stored as log(l) without the running max m (m + log(l))",
                "one query, one key, a logit other than 0",
                "accuracy",
            ),
        ),
    ),
    "varlen_next_key": Pattern(
        "attention_varlen",
        (
            Bug(
                "packed sequences: the key tiles are load-masked against the last sequence's "
                "end (cu_seqlens_k[-1]) instead of their own: a sequence whose key count is not "
                "a multiple of block_k also attends to the next sequence's first keys",
                "two sequences, the first of 1 key, the second not empty, no causal mask",
                "accuracy",
            ),
        ),
    ),
    "decode_merge_no_rescale": Pattern(
        "attention_decode",
        (
            Bug(
                "the split-KV merge adds the splits' partial outputs and sums without "
                "rescaling each by exp(m_split - m) (its partial log-sum-exp against the "
                "largest): right only when every split has the same max",
                "2 splits with keys of different largest logits (a cache of block_k + 1 keys)",
                "accuracy",
            ),
        ),
    ),
    "gla_h0_one_chunk": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "a sequence of one chunk (T <= chunk_size) takes a path that starts from a "
                "zero state: the initial state is dropped from o and ht",
                "an initial state and T = 1",
                "accuracy",
            ),
        ),
    ),
    "gla_prev_chunk_decay": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "per-token gates: the state carried into chunk c + 1 is decayed by chunk c - 1's "
                "total gate instead of chunk c's (an off-by-one chunk index)",
                "per-token gates, two chunks of different gate sums and the final state, or "
                "three chunks",
                "accuracy",
            ),
        ),
    ),
}

# What CPU campaigns found, per pattern and language: ``python -m fuzz run --examples 300
# --seed 1 --db none`` on triton-interpret or pallas-interpret (1,000 examples where said), the
# rows of ``report.json`` and, for a bug not found, why.
#
# The Pallas misses have one cause. Pallas interpret mode compiles a program per new case
# structure (dtype, heads, buckets, grid), and a campaign pair bounds its compile time
# (``Profile.compile_share``, 25%): in 300 examples a pair fuzzed 10-60 s, explored 25-60
# structures, refused 60-190 examples as "would compile" and reused the rest. A bug whose trigger
# is a particular structure (a bias of rows that differ, Tq > Tk, two packed sequences, 2 splits,
# a window) is then not met, though the family draws it: of 200-300 cases ``draw_cases`` drew
# fresh, 10-50% held the trigger, and ``check_case`` failed on most of them.
STARVED = "not met: the pair reused too few case structures (compile share; see above)"
CPU: dict[str, dict[str, str]] = {
    "softmax_bias_row0": {
        "triton": "found: 3 rows (accuracy/oracle; masking/oracle: a -inf bias of row 0 in row "
        "1; masking/masked-poison: row 0's bias at a key row 1 masks)",
        "pallas": f"300 examples: {STARVED}; 1,000: found, 2 rows (masking/oracle, "
        "accuracy/oracle)",
    },
    "softmax_frozen_max": {
        "triton": "found: 2 rows (nan/oracle, nan/shift-invariance)",
        "pallas": "found: 1 row (nan/oracle)",
    },
    "two_bugs_softmax": {
        "triton": "the float16 bug found: 1 row (accuracy/rows-sum-to-one; its minimal example "
        "keeps an offset of -1e4 and triggers it does not need). The bfloat16 bug is NOT "
        "reported: the campaign met it (y = 0.194 for 0.2, streamed as new) and then shrank it "
        "into the float16 bug ('shrank to the bug found before: one bug'): the re-shrink that "
        "tells two bugs of one failure key apart may change the dtype, and float16 comes before "
        "bfloat16",
        "pallas": "as in Triton, in 300 and in 1,000 examples: the float16 bug found (1 row), "
        "the bfloat16 bug shrunk into it",
    },
    "jagged_read_next_segment": {
        "triton": "found: 4 rows (masking/oracle twice, masking/segment-permutation, "
        "accuracy/oracle)",
        "pallas": "found: 3 rows (accuracy/oracle, masking/segment-permutation, masking/oracle)",
    },
    "attention_causal_clamp": {
        "triton": "found: 4 rows (masking/oracle of o and of lse; accuracy/oracle of o and of "
        "lse, through the ALiBi distances)",
        "pallas": f"300 examples: {STARVED}; 1,000: found, 5 rows (masking, accuracy and inf; "
        "o and lse)",
    },
    "attention_window_left": {
        "triton": "found: 3 rows (accuracy/oracle of o and of lse, masking/masked-poison)",
        "pallas": f"NOT found in 300 nor in 1,000 examples: {STARVED} (1,000 examples: 167 "
        "structures explored, 505 examples refused)",
    },
    "attention_alibi_kv_head": {
        "triton": "found: 2 rows (accuracy/oracle of o and of lse)",
        "pallas": "found: 2 rows (accuracy/oracle of o and of lse)",
    },
    "attention_softcap_unscaled": {
        "triton": "found: 2 rows (accuracy/oracle of o and of lse)",
        "pallas": "found: 2 rows (accuracy/oracle of o and of lse)",
    },
    "attention_lse_no_max": {
        "triton": "found: 1 row (accuracy/oracle of lse, shrunk to 16 keys where 1 shows it)",
        "pallas": "found: 1 row (accuracy/oracle of lse, 16 keys)",
    },
    "varlen_next_key": {
        "triton": "found: 3 rows (accuracy/oracle of o and of lse, masking/masked-poison)",
        "pallas": f"300 examples: {STARVED}; 1,000: found, 1 row (accuracy/oracle)",
    },
    "decode_merge_no_rescale": {
        "triton": "found: 1 row (accuracy/oracle)",
        "pallas": f"300 examples: {STARVED}; 1,000: found after about 600, 1 row (accuracy/oracle)",
    },
    "gla_h0_one_chunk": {
        "triton": "found: 5 rows (accuracy: oracle of o and of ht, state-continuation, "
        "chunk-independence twice)",
        "pallas": "found: 4 rows (accuracy: oracle of o and of ht, state-continuation, "
        "chunk-independence)",
    },
    "gla_prev_chunk_decay": {
        "triton": "found: 5 rows (accuracy: oracle three times, state-continuation, "
        "chunk-independence)",
        "pallas": "found: 1 row (accuracy/oracle of ht)",
    },
}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
