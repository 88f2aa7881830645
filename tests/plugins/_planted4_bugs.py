"""The planted bugs of round 4: ``tests/plugins/planted4.py`` (Triton). One record per bug
pattern, in the record format of round 3 (``_planted3_bugs.py``: its ``Pattern`` and ``Bug``,
loaded from there, not copied). Data only: no kernel, no registration.

Every pattern is a bug of a kind public attention, softmax and linear-attention projects have
reported (a mask forgotten in one of two passes, an output addressed with its input's strides, a
log-sum-exp left in the log2 units of an ``exp2`` kernel, a causal-only ALiBi distance used
without the causal mask, a packed batch's last sequence ended at the buffer's end, a decay of the
wrong side of a chunk), and none is a pattern of the earlier planted rounds (``_planted_bugs.py``,
``_planted3_bugs.py``), of the harness's own mutants (``kernels/*/mutants.py``), on which it was
tuned, or of the other test plugins (``two_bugs.py``, ``dtype_kernels.py``, ``walls.py``). A
target of pattern ``p`` is named ``planted4_<p>_triton``.

A record says what a measurement needs (``.ci/planted_rows.py --round 4``): the bug, its trigger
(the smallest input that shows it), the failure class expected, and ``match``: which of the
report's rows (findings, as dicts of ``report.json``) count as this bug found. ``cpu`` says what
the CPU campaign found, and for a bug of more than one row, why (empty until one has run).
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
_of_classes = _round_three()._of_classes

PATTERNS: dict[str, Pattern] = {
    "softmax_mask_not_in_output": Pattern(
        "softmax",
        (
            Bug(
                "the writing pass recomputes the logits without the mask: the row max and sum "
                "leave the masked keys out, but each masked key is written as exp(s - max) / sum "
                "instead of 0",
                "a mask and one row of two keys, one of them masked out (a finite logit)",
                "masking",
            ),
        ),
        TRITON,
    ),
    "jagged_out_stride_of_input": Pattern(
        "jagged_softmax",
        (
            Bug(
                "the output's rows are addressed with the input's row stride (values.stride(0)) "
                "instead of the output's: right for contiguous values, but the family passes a "
                "view with a guard column after every row, so row r lands r elements late and "
                "the last row is written past the output",
                "one segment of 2 rows (one column)",
                "out-of-bounds-write",
            ),
        ),
        TRITON,
    ),
    "attention_lse_log2": Pattern(
        "attention",
        (
            Bug(
                "the log-sum-exp is stored in the kernel's log2 units (m + log2(l) of the logits "
                "times log2 e) without the factor ln 2 back to the natural log-sum-exp it "
                "declares; o is right",
                "one query, one key, a logit other than 0",
                "accuracy",
            ),
        ),
        TRITON,
    ),
    "attention_alibi_signed": Pattern(
        "attention",
        (
            Bug(
                "the ALiBi bias is -slope * (p - j), the signed distance of causal-only "
                "implementations, instead of -slope * |p - j|: a key right of the query's "
                "position p gets a bonus instead of a penalty",
                "ALiBi, no causal mask, Tq = Tk = 2 (query 0 sees key 1)",
                "accuracy",
            ),
        ),
        TRITON,
    ),
    "varlen_last_len_from_total": Pattern(
        "attention_varlen",
        (
            Bug(
                "packed sequences: the last sequence's keys are taken to end at the end of the "
                "key rows (Tk) instead of at cu_seqlens_k[-1], so it also attends to the guard "
                "(padding) rows after it",
                "one sequence of one query and one key, and one guard row (masking where the "
                "last sequence has no key, or where the guard rows are poisoned)",
                "accuracy",
                _of_classes("accuracy", "masking"),
            ),
        ),
        TRITON,
    ),
    "gla_key_decay_from_start": Pattern(
        "simple_gla_fwd",
        (
            Bug(
                "the state update weights each key by exp(b_j), its decay from the chunk's start "
                "(the queries' factor), instead of exp(b_last - b_j), its decay to the chunk's "
                "end",
                "the final state, one token, a gate other than 0 (or a state read after a chunk "
                "whose gates are not 0: T > chunk_size)",
                "accuracy",
            ),
        ),
        TRITON,
    ),
}

# What CPU campaigns found (``python .ci/planted_rows.py --round 4 --cpu-campaign S``), per
# pattern and language: the rows of ``report.json`` and, for a bug of more than one row or not
# found, why. No campaign over the planted targets has run yet.
CPU: dict[str, dict[str, str]] = {}
PATTERNS = {name: replace(p, cpu=CPU.get(name, {})) for name, p in PATTERNS.items()}
