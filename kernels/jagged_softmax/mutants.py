"""Jagged softmax mutants: the real kernels with one bug planted (seed 000's two, each alone and
together, and two more from the jagged-offset checklist).

Each mutant is the same bug written the way each kernel language's kernel would have it, and names
the failure class the harness must report for it. A mutant whose bug cannot show in one language
has no edits for it (``pallas=None``) and is registered for the other language only; the reason
is in its description.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernels._mutate import Edit, Expect, Mutant, rewrites_of


def _tile_plus(rows: int) -> Callable[[Any], int]:
    """A shrink bound of one tile of ``block_n`` rows plus ``rows``, one column each."""
    return lambda case: int(case.params["block_n"]) + rows


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

# Each mutant's shrink bound: the largest input (elements: max(N * M, B + 1)) its minimal
# reproducer may have, asserted by tests/test_mutants.py, with the minimal case the ci profile
# shrinks to (block_n=4, one column, float32, plain normal values, one program per segment). Both
# scales draw block_n=4 first, but the shrinker does not always get there from a larger tile (the
# gpu profile has stopped at block_n=16, lengths [17]), so the bounds of the tile bugs count in
# tiles.
MUTANTS = rewrites_of(
    "kernels.jagged_softmax.{impl}",
    Mutant(
        "sum_overwrite",
        "seed 000: the per-tile sum overwrites the running sum instead of accumulating it; right "
        "while every segment fits in one tile, wrong once one is longer than block_n",
        # one segment one row longer than the tile: lengths [5]
        {"jagged_softmax": Expect("accuracy", shrink_bound=_tile_plus(1))},
        triton=(_SUM_TRITON,),
        pallas=(_SUM_PALLAS,),
    ),
    Mutant(
        "store_past_end",
        "seed 000: the store is masked against the total row count N instead of the segment's "
        "end, so a segment's last partial tile writes zeros into the next segment's first rows; "
        "the result depends on which program writes those rows last",
        # lengths [1, 2, 1] or [1, 1, 1] (or [0, 1, 2]: a leading empty segment shifts the program
        # assignment the same way), found by schedule-invariance with num_programs=2: program 0
        # takes segments 0 and 2, then program 1's segment 1 overhangs onto segment 2's first
        # row. On a GPU the race is real, found by the determinism property, and a racing failure
        # shrinks less far (seen: [4, 2, 1, 1] at block_n=4): a tile and four rows.
        {"jagged_softmax": Expect("nondeterminism", shrink_bound=_tile_plus(4))},
        triton=(_STORE_TRITON,),
        pallas=(_STORE_PALLAS,),
    ),
    Mutant(
        "seed",
        "seed 000 as reported: the overwritten per-tile sum and the store masked against N, "
        "together",
        # the expected class (accuracy) comes from the sum bug: [5]. One more row leaves room for
        # an accuracy example of the store bug when a case's own num_programs runs segments out of
        # order (seen: [0, 0, 1, 1, 2] with P=2, 6 elements; its empty segments decide which
        # program takes which segment, so the shrinker cannot drop them).
        {"jagged_softmax": Expect("accuracy", shrink_bound=_tile_plus(2))},
        triton=(_SUM_TRITON, _STORE_TRITON),
        pallas=(_SUM_PALLAS, _STORE_PALLAS),
    ),
    Mutant(
        "empty_nan",
        "no guard for a sum of 0: a segment with nothing to normalize (empty, or a column whose "
        "values are all -inf) computes 0 * (1 / 0) = NaN instead of 0; only the -inf column "
        "stores it (an empty segment has no rows to store into)",
        # one row, one column, value -inf: values 1 element, offsets 2
        {"jagged_softmax": Expect("nan", shrink_bound=2)},
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
        # lengths [1]: the phantom segment [N, N + 1) writes row N, past the output's end
        {"jagged_softmax": Expect("out-of-bounds-write", shrink_bound=2)},
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
        # a precision loss: a segment of two rows in one column (one row gives a sum of
        # exp(0) = 1, exact in bf16; a second makes it 1 + exp(x2 - x1)). Its values come from the
        # seed-0 normal series, so whether the rounding of that sum shows depends on which of them
        # the segment gets: seen [1, 2] (the first value alone, the next two rounding visibly):
        # 3 elements, 4 with a row to spare.
        {"jagged_softmax": Expect("accuracy", shrink_bound=4)},
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
