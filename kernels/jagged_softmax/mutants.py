"""Jagged softmax mutants: the real kernels with one bug planted (seed 000's two, each alone and
together, and two more from the jagged-offset checklist).

Each mutant is the same bug written the way each kernel language's kernel would have it, and names
the failure class the harness must report for it. A mutant whose bug cannot show in one language
has no edits for it (``pallas=None``) and is registered for the other language only; the reason
is in its description.
"""

from __future__ import annotations

import types
from dataclasses import dataclass

from kernels._mutate import Edit, mutate


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    expected_class: str
    triton: tuple[Edit, ...]
    pallas: tuple[Edit, ...] | None

    @property
    def languages(self) -> tuple[str, ...]:
        return ("triton",) if self.pallas is None else ("triton", "pallas")

    def module(self, impl: str) -> types.ModuleType:
        if impl == "triton":
            from kernels.jagged_softmax import triton as real
        elif impl == "pallas" and self.pallas is not None:
            from kernels.jagged_softmax import pallas as real  # type: ignore[no-redef]
        else:
            raise ValueError(
                f"impl={impl!r} must be one of {self.languages} for mutant {self.name}"
            )
        return mutate(real, self.name, getattr(self, impl))


# The seed's first bug: the running sum is replaced by the last tile's sum.
_SUM_TRITON = Edit(
    "l_i = l_i * tl.exp(m_i - m_shift) + tl.sum(tl.exp(x - m_shift[None, :]), 0)",
    "l_i = tl.sum(tl.exp(x - m_shift[None, :]), 0)",
)
_SUM_PALLAS = Edit(
    "l_i = l_i * jnp.exp(m_i - m_shift) + jnp.exp(x - m_shift[None, :]).sum(axis=0)",
    "l_i = jnp.exp(x - m_shift[None, :]).sum(axis=0)",
)
# The seed's second bug: the store is bounded by the total row count N (the seed's flat index
# against N * M), not by the segment's end, so a segment's last tile writes into the next segment.
_STORE_TRITON = Edit(
    "y.to(out_ptr.dtype.element_ty), mask=ok)",
    "y.to(out_ptr.dtype.element_ty),\n"
    "                     mask=(tile_rows < tl.load(offsets_ptr + n_segments) - row0) & col_ok)",
)
_STORE_PALLAS = Edit(
    "y.astype(o_ref.dtype), mask=ok)",
    "y.astype(o_ref.dtype),\n"
    "                      mask=(row0 + jax.lax.broadcasted_iota(jnp.int32, ok.shape, 0)\n"
    "                            < offsets_ref[n_segments]) & col_ok)",
)

MUTANTS = (
    Mutant(
        "sum_overwrite",
        "seed 000: the per-tile sum overwrites the running sum instead of accumulating it; right "
        "while every segment fits in one tile, wrong once one is longer than block_n",
        "accuracy",
        triton=(_SUM_TRITON,),
        pallas=(_SUM_PALLAS,),
    ),
    Mutant(
        "store_past_end",
        "seed 000: the store is masked against the total row count N instead of the segment's "
        "end, so a segment's last partial tile writes zeros into the next segment's first rows; "
        "the result depends on which program writes those rows last",
        "nondeterminism",
        triton=(_STORE_TRITON,),
        pallas=(_STORE_PALLAS,),
    ),
    Mutant(
        "seed",
        "seed 000 as reported: the overwritten per-tile sum and the store masked against N, "
        "together",
        "accuracy",
        triton=(_SUM_TRITON, _STORE_TRITON),
        pallas=(_SUM_PALLAS, _STORE_PALLAS),
    ),
    Mutant(
        "empty_nan",
        "no guard for a sum of 0: a segment with nothing to normalize (empty, or a column whose "
        "values are all -inf) computes 0 * (1 / 0) = NaN instead of 0; only the -inf column "
        "stores it (an empty segment has no rows to store into)",
        "nan",
        triton=(
            Edit(
                "inv_l = tl.where(l_i == 0.0, 0.0, 1.0 / tl.where(l_i == 0.0, 1.0, l_i))",
                "inv_l = 1.0 / l_i",
            ),
        ),
        pallas=(
            Edit(
                "inv_l = jnp.where(l_i == 0.0, 0.0, 1.0 / jnp.where(l_i == 0.0, 1.0, l_i))",
                "inv_l = 1.0 / l_i",
            ),
        ),
    ),
    Mutant(
        "offsets_past_end",
        "the segment loop's bound is inclusive: one more segment than there are, whose end is "
        "read one past the end of offsets; Triton only (Pallas pads offsets on the host with N, "
        "so the extra segment is empty there and the bug cannot show)",
        "out-of-bounds-write",
        triton=(
            Edit(
                "for seg in range(tl.program_id(0), n_segments, tl.num_programs(0)):",
                "for seg in range(tl.program_id(0), n_segments + 1, tl.num_programs(0)):",
            ),
        ),
        pallas=None,
    ),
    Mutant(
        "sum_bf16",
        "the running column sum kept in bf16 between row tiles (rounded once per tile), in an fp32 "
        "kernel: outputs off by up to 2^-8 per tile, more the longer the segment",
        "accuracy",
        triton=(
            Edit(
                "l_i = l_i * tl.exp(m_i - m_shift) + tl.sum(tl.exp(x - m_shift[None, :]), 0)",
                "l_i = (l_i * tl.exp(m_i - m_shift) + tl.sum(tl.exp(x - m_shift[None, :]), 0))"
                ".to(tl.bfloat16).to(tl.float32)",
            ),
        ),
        pallas=(
            Edit(
                "l_i = l_i * jnp.exp(m_i - m_shift) + jnp.exp(x - m_shift[None, :]).sum(axis=0)",
                "l_i = (l_i * jnp.exp(m_i - m_shift) + jnp.exp(x - m_shift[None, :]).sum(axis=0))"
                ".astype(jnp.bfloat16).astype(jnp.float32)",
            ),
        ),
    ),
)
