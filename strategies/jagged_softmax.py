"""Cases for the jagged softmax: ``values [N, M]``, ``offsets [B+1]``, tiles, program count."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from fuzz.arrays import FLOAT_DTYPES
from fuzz.case import Case
from strategies._validate import check_scale, check_sizes, check_subset
from strategies.jagged import offsets_from_lengths, segment_lengths
from strategies.reuse import free_lengths, reusing, structure_key
from strategies.shapes import sizes
from strategies.values import (
    SENTINEL_VALUES,
    float_dtypes,
    materialize,
    occasionally,
    value_recipes,
)


@dataclass(frozen=True)
class Limits:
    max_rows: int  # N, all segments together
    max_segments: int  # body segments (plus edge empties and extra short ones)
    max_many: int  # extra short segments
    max_tiles: int  # tiles of the longest tile-edge or long segment
    max_cols: int  # M
    max_elements: int  # N * M
    block_n: tuple[int, ...]
    block_m: tuple[int, ...]
    num_programs: tuple[int | None, ...]
    # Drawn about one example in 8: the compiled scale's tiles, reachable on the CPU with few rows.
    rare_block_n: tuple[int, ...] = ()
    rare_block_m: tuple[int, ...] = ()


# Bounds per scale: small keeps the CPU interpreters quick (the Triton interpreter costs a few
# milliseconds per launch, per segment and per tile); large is for compiled backends. Small rows
# fit in the harness's 64-element guard band after the output, so that a stray row written past
# the output's end stays inside the allocation on the CPU (larger ones still hit the band first).
LIMITS = {
    "small": Limits(
        max_rows=24,
        max_segments=4,
        max_many=6,
        max_tiles=2,
        max_cols=9,
        max_elements=160,
        block_n=(4, 8),
        block_m=(4,),
        # One program per segment only: the schedule-invariance property reruns every case with
        # other program counts, and on a sequential interpreter that is what exposes order.
        num_programs=(None,),
        rare_block_n=(16, 32, 64, 128),
        rare_block_m=(32, 16, 128),
    ),
    "large": Limits(
        max_rows=4096,
        max_segments=12,
        max_many=200,
        max_tiles=4,
        max_cols=300,
        max_elements=1 << 18,
        # A small tile first: a segment one row longer than a tile is then 5 rows, which is what
        # a cross-tile bug shrinks to on every profile (the mutants' shrink bounds hold on both).
        block_n=(4, 16, 32, 64, 128),
        block_m=(32, 16, 128),
        num_programs=(None, 1, 2, 7, 64),
    ),
}

# A column of -inf (no finite value in any segment), simplest choice first.
DEAD_COLUMNS = ("none", "last")
GUARDS = ("nan",)  # the clean run's guard-row poison; the masked-poison property varies it


def jagged_softmax_cases(
    scale: str = "small",
    *,
    dtypes: tuple[str, ...] = FLOAT_DTYPES,
    block_n: tuple[int, ...] | None = None,
    block_m: tuple[int, ...] | None = None,
    num_programs: tuple[int | None, ...] | None = None,
) -> st.SearchStrategy[Case]:
    """Jagged softmax cases: inputs ``values [N, M]`` and ``offsets [B+1]`` (int32).

    Structure is drawn before values: dtype, tile sizes, program count, segment lengths (see
    ``strategies.jagged.segment_lengths``), columns, then the value recipe. Shrinks toward float32,
    the first tile sizes, one program per segment, a single one-row segment, one column, and the
    plainest values (seed 0, normal, magnitude 1, offset 0). ``block_n``, ``block_m`` and
    ``num_programs`` replace the scale's (a kernel's own tiles and launch widths).
    """
    lim = LIMITS[check_scale(scale)]
    dtypes = check_subset("dtypes", dtypes, FLOAT_DTYPES)
    lim = dataclasses.replace(
        lim,
        block_n=check_sizes("block_n", block_n, lim.block_n),
        block_m=check_sizes("block_m", block_m, lim.block_m),
        # a kernel's own sizes are all it has: no rare ones beside them
        rare_block_n=lim.rare_block_n if block_n is None else (),
        rare_block_m=lim.rare_block_m if block_m is None else (),
        num_programs=num_programs if num_programs is not None else lim.num_programs,
    )

    # Sub-strategies are built once, outside the draw (building one costs more than drawing).
    dtype_st = float_dtypes(dtypes)
    block_n_st = occasionally(lim.block_n, lim.rare_block_n, one_in=8)
    block_m_st = occasionally(lim.block_m, lim.rare_block_m, one_in=8)
    programs_st = st.sampled_from(lim.num_programs)
    dead_st = st.sampled_from(DEAD_COLUMNS)
    lengths_st = {
        b: segment_lengths(
            block=b,
            max_total=lim.max_rows,
            max_segments=lim.max_segments,
            max_tiles=lim.max_tiles,
            max_many=lim.max_many,
        )
        for b in (*lim.block_n, *lim.rare_block_n)
    }

    @st.composite
    def structure(draw: st.DrawFn) -> dict[str, Any]:
        dtype = draw(dtype_st, label="dtype")
        block_n = draw(block_n_st, label="block_n")
        block_m = draw(block_m_st, label="block_m")
        num_programs = draw(programs_st, label="num_programs")
        with free_lengths(draw):
            lengths = draw(lengths_st[block_n], label="segment lengths")
            n_rows = int(offsets_from_lengths(lengths)[-1])
            max_cols = max(1, min(lim.max_cols, lim.max_elements // max(n_rows, 1)))
            n_cols = draw(sizes(max_size=max_cols, blocks=(block_m,)), label="columns")
        return {
            "dtype": dtype,
            "block_n": block_n,
            "block_m": block_m,
            "num_programs": num_programs,
            "lengths": lengths,
            "n_cols": n_cols,
        }

    key = structure_key("jagged_softmax", scale, dtypes, block_n, block_m, num_programs)
    structure_st = reusing(structure(), key=key)

    @st.composite
    def build(draw: st.DrawFn) -> Case:
        s = draw(structure_st, label="structure")
        dtype, block_n, block_m = s["dtype"], s["block_n"], s["block_m"]
        num_programs, lengths, n_cols = s["num_programs"], s["lengths"], s["n_cols"]
        offsets = offsets_from_lengths(lengths)
        n_rows = int(offsets[-1])
        recipe = draw(
            value_recipes(
                numel=n_rows * n_cols,
                rare_offsets=SENTINEL_VALUES,
                rare_explicit_values=SENTINEL_VALUES,
            ),
            label="values",
        )
        values = materialize(recipe, (n_rows, n_cols), dtype)
        dead = draw(dead_st, label="dead column")
        if dead == "last" and n_rows:
            # A column whose every value is -inf: no valid entry in any segment (0/0 territory).
            values[:, -1] = -np.inf
        params = {
            "dtype": dtype,
            "block_n": block_n,
            "block_m": block_m,
            "num_programs": num_programs,
            "guard": GUARDS[0],
        }
        described = {"lengths": list(lengths), "values": recipe.describe(), "dead column": dead}
        return Case({"values": values, "offsets": offsets}, params, described)

    return build()
