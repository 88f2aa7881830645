"""The planted bugs of round 3: ``tests/plugins/planted3.py`` (Triton) and ``planted3_pallas.py``
(Pallas). One record per bug pattern; each pattern is written in one language. Data only: no
kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (the team's ``bug-classes.md``: masks applied late, off-by-one bounds, GQA head maps,
rows never written, splits dropped, states of the wrong sequence), and none is a pattern of the
earlier planted rounds (``_planted_bugs.py``) or of the harness's own mutants
(``kernels/*/mutants.py``), on which it was tuned. A target of pattern ``p`` in language ``L`` is
named ``planted3_<p>_<L>``.

A record says what a measurement needs (``.ci/planted_rows.py --round 3``): the bug, its trigger
(the smallest input that shows it), the failure class expected, and ``match``: which of the
report's rows (findings, as dicts of ``report.json``) count as this bug found. ``cpu`` says what
the CPU campaign found, and for a bug of more than one row, why.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


def _of_class(cls: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda row: row.get("class") == cls


def _of_classes(*classes: str) -> Callable[[Mapping[str, Any]], bool]:
    """A row of any of ``classes``: one bug whose class depends on the element it makes wrong
    (an element the family fixes, a row with no key or a one-row segment, is ``masking``; any
    other ``accuracy``)."""
    return lambda row: row.get("class") in classes


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
    """A planted-bug pattern: its family, its one bug, the languages it is written in, and what
    the CPU campaign found in each (``CPU`` below)."""

    family: str
    bugs: tuple[Bug, ...]
    languages: tuple[str, ...]
    cpu: Mapping[str, str] = field(default_factory=dict)


TRITON, PALLAS = ("triton",), ("pallas",)

PATTERNS: dict[str, Pattern] = {
    # Triton ---------------------------------------------------------------------------------------
    "softmax_masked_max": Pattern(
        "softmax",
        (
            Bug(
                "the row max is taken over the logits before the mask is applied: masked keys "
                "shift the row, so a masked NaN or Inf poisons every valid key and a masked logit "
                "more than 104 above the valid ones underflows them all to a zero sum",
                "a mask and a masked-out key whose value changes the row (one row of two keys, "
                "one masked, holding a NaN or a logit of 1e4)",
                "masking",
            ),
        ),
        TRITON,
    ),
    "softmax_masked_scale_twice": Pattern(
        "softmax",
        (
            Bug(
                "with a mask the logits are multiplied by the scale twice (only on the masked "
                "path: without a mask it is right, unlike the mutant softmax_mutant_scale_twice)",
                "a mask, a scale other than 1 and two valid keys of different logits",
                "accuracy",
            ),
        ),
        TRITON,
    ),
    "jagged_store_inclusive_end": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the writing pass's store mask is row <= end instead of row < end: a segment "
                "whose length is not a multiple of block_n writes a zero into the row after its "
                "end, past the output for the last segment",
                "one segment of 1 row (block_n 4)",
                "out-of-bounds-write",
            ),
        ),
        TRITON,
    ),
    "attention_window_right": Pattern(
        "attention",
        (
            Bug(
                "the sliding window's right bound is off by one (j <= p + right + 1): one key "
                "more than the window holds is visible on the right",
                "a window with right >= 0 and a key at p + right + 1 (Tq = Tk = 2, window "
                "(-1, 0): query 0 sees key 1); masking where the query's window holds no key "
                "(Tq = 2, Tk = 1, window (-1, 0): query 0 sees key 0)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "varlen_key_start_of_query": Pattern(
        "attention_varlen",
        (
            Bug(
                "packed sequences: a sequence's keys are read from its query offset "
                "(cu_seqlens_q[i]) instead of its key offset (cu_seqlens_k[i])",
                "two sequences, the first with more keys than queries (query lengths 1, 1; key "
                "lengths 2, 1)",
                "accuracy",
            ),
        ),
        TRITON,
    ),
    "gla_inter_unscaled": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the output's inter-chunk term q exp(b) h (through the state carried in, or the "
                "initial state) is left without the scale; only the intra-chunk term is scaled",
                "a state to read (an initial state, or T > chunk_size) and a scale other than 1 "
                "(K > 1 with the default scale)",
                "accuracy",
            ),
        ),
        TRITON,
    ),
    # Pallas ---------------------------------------------------------------------------------------
    "softmax_bias_scaled": Pattern(
        "softmax",
        (
            Bug(
                "the scale is applied after the bias is added: scale * (x + bias) instead of "
                "scale * x + bias",
                "a bias, a scale other than 1 and one row of two keys whose biases differ",
                "accuracy",
            ),
        ),
        PALLAS,
    ),
    "jagged_max_from_zero": Pattern(
        "jagged_softmax",
        (
            Bug(
                "each column's running max starts at 0 instead of -inf: a segment whose values "
                "are all far below 0 is shifted by 0, its exponentials underflow and the column "
                "sums to 0 (or to a few subnormals)",
                "one segment of 1 row holding a value below about -104 (-1e4): its output, "
                "fixed at 1, is 0; accuracy for longer segments (2 rows below -104)",
                "masking",
                _of_classes("masking", "accuracy"),
            ),
        ),
        PALLAS,
    ),
    "attention_gqa_v_head": Pattern(
        "attention",
        (
            Bug(
                "under GQA the value block of query head h is picked at kv head h % Hkv (heads "
                "taken as interleaved) instead of h // (Hq / Hkv); keys are picked right",
                "4 query heads on 2 kv heads, one key",
                "accuracy",
            ),
        ),
        PALLAS,
    ),
    "attention_empty_row_unwritten": Pattern(
        "attention",
        (
            Bug(
                "key padding: a batch element with no key skips its whole program body, so its o "
                "and lse are never written (NaN in interpret mode) instead of 0 and -inf",
                "key padding with a key length of 0 (one query)",
                "nan",
            ),
        ),
        PALLAS,
    ),
    "decode_drop_partial_split": Pattern(
        "attention_decode",
        (
            Bug(
                "split-KV decode: the splits holding keys are counted as cache_len // per "
                "(rounded down), so a last split of fewer than per keys is dropped from the merge",
                "2 splits and a cache of 3 keys (per = 2: key 2 is dropped)",
                "accuracy",
            ),
        ),
        PALLAS,
    ),
    "gla_h0_batch0": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the initial state's block spec picks batch element 0's state for every batch "
                "element (index map (0, h), as for a state shared by the batch)",
                "two batch elements with different initial states, one token",
                "accuracy",
            ),
        ),
        PALLAS,
    ),
}

CPU: dict[str, dict[str, str]] = {}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
