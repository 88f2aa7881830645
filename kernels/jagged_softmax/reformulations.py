"""Correct reformulations of the jagged softmax kernels: the same function computed another way.

Each is a text edit of the real kernel (``kernels._mutate``, kind ``'reformulation'``) in both
languages and is registered as a real target (``jagged_softmax_<name>``): the harness must pass it
on every example, the evidence that the error bound (``oracles.jagged_softmax``) admits any
backward-stable fp32 implementation.

    reversed    each segment's running max and sum taken over its row tiles from the last to the
                first: another summation order and other rescales of the online softmax
"""

from __future__ import annotations

from kernels._mutate import Edit, Reformulation, rewrites_of

REFORMULATIONS = rewrites_of(
    "kernels.jagged_softmax.{impl}",
    Reformulation(
        "reversed",
        "each segment's statistics reduced over its row tiles from the last to the first",
        triton=(
            Edit(
                """        for row0 in range(start, end, BLOCK_N):
            # Rows at or past""",
                """        n_tiles = (end - start + BLOCK_N - 1) // BLOCK_N
        for t in range(0, n_tiles):
            row0 = start + (n_tiles - 1 - t) * BLOCK_N
            # Rows at or past""",
            ),
        ),
        pallas=(
            Edit(
                "x, _, _ = _load_tile(values_ref, start + t * block_n, end, col_ok, block_n)",
                "x, _, _ = _load_tile(values_ref, start + (n_tiles - 1 - t) * block_n, end, "
                "col_ok, block_n)",
            ),
        ),
    ),
)
