"""Jagged offsets (``cu_seqlens``) aimed at the boundaries where jagged kernels break.

Offsets are drawn as segment *lengths* (structure) and then summed, so that shrinking works on
the lengths: it removes segments and shortens the rest. A length list is::

    [leading empties] + body + [many short segments] + [trailing empties]

where each body segment is one of, in shrinking order:

    short       1 to 3 rows, or 0 (empty; consecutive empties come from neighbouring draws);
                shrinks to a single row
    tile edge   k * block + d for d in (-1, 0, +1), k = 1 .. max_tiles: a segment that ends just
                before, at, or just after a tile boundary (``max_seqlen`` around the tile size
                and its multiples)
    long        n_tiles * block + remainder: one long segment among short ones

The total number of rows is bounded; a draw that would exceed it is cut to fit (later segments
become shorter or empty).
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from strategies._validate import check_int

__all__ = ["jagged_offsets", "offsets_from_lengths", "segment_lengths"]


def offsets_from_lengths(lengths: list[int] | tuple[int, ...], dtype=np.int32) -> np.ndarray:
    """``[0, l0, l0 + l1, ...]``: the ``[B+1]`` offsets of segments with these lengths."""
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(np.asarray(lengths, np.int64), out=out[1:])
    return out.astype(dtype)


def segment_lengths(
    *,
    block: int,
    max_total: int,
    max_segments: int = 6,
    max_tiles: int = 3,
    max_edge_empties: int = 2,
    max_many: int = 0,
) -> st.SearchStrategy[tuple[int, ...]]:
    """Segment lengths for a kernel that walks segments in tiles of ``block`` rows.

    Args:
        block: the kernel's tile size along a segment (the boundaries are relative to it).
        max_total: the most rows in all (the profile's scale).
        max_segments: the most body segments.
        max_tiles: tile edges up to ``max_tiles * block + 1``; long segments up to
            ``max_tiles`` full tiles plus a remainder.
        max_edge_empties: the most empty segments before and after the body.
        max_many: the most extra short segments (0 to 2 rows each, from a drawn seed): many
            segments, without drawing each one.

    Shrinks toward a single segment of one row: fewer segments first (no leading or trailing
    empties, no extra segments, a shorter body), then shorter ones (toward 1 row).
    """
    check_int("block", block, lo=1)
    check_int("max_total", max_total, lo=0)
    check_int("max_segments", max_segments, lo=1)
    check_int("max_tiles", max_tiles, lo=1)
    check_int("max_edge_empties", max_edge_empties, lo=0)
    check_int("max_many", max_many, lo=0)
    edges = sorted({k * block + d for k in range(1, max_tiles + 1) for d in (-1, 0, 1)} - {0})
    # Every branch makes at least one choice, the plainest first: Hypothesis prefers fewer choices,
    # so a choice-free ``st.just(0)`` branch would make an empty segment the simplest one.
    segment = st.one_of(
        st.sampled_from((1, 2, 3, 0)),
        st.sampled_from(edges),
        st.builds(
            lambda tiles, rem: tiles * block + rem,
            st.integers(1, max_tiles),
            st.integers(0, block - 1),
        ),
    )

    @st.composite
    def build(draw: st.DrawFn) -> tuple[int, ...]:
        leading = draw(st.integers(0, max_edge_empties), label="leading empties")
        body = draw(st.lists(segment, min_size=1, max_size=max_segments), label="segments")
        many: list[int] = []
        if max_many:
            n = draw(st.integers(0, max_many), label="extra short segments")
            if n:
                seed = draw(st.integers(0, 2**32 - 1), label="extra seed")
                many = [int(v) for v in np.random.default_rng(seed).integers(0, 3, n)]
        trailing = draw(st.integers(0, max_edge_empties), label="trailing empties")
        lengths, used = [], 0
        for n_rows in [0] * leading + body + many + [0] * trailing:
            n_rows = min(n_rows, max_total - used)
            lengths.append(n_rows)
            used += n_rows
        return tuple(lengths)

    return build()


def jagged_offsets(**kwargs) -> st.SearchStrategy[np.ndarray]:
    """``[B+1]`` int32 offsets from :func:`segment_lengths` (same arguments, same shrinking)."""
    return segment_lengths(**kwargs).map(offsets_from_lengths)
