"""Sizes aimed at the boundaries where kernels break.

Random sizes rarely land on a tile boundary; kernels break at 1, at powers of two plus or minus
one, at a multiple of the block size plus or minus one, and at primes (no divisor to hide behind).
These strategies mix such values with plain small integers, and shrink toward ``min_size``.
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from strategies._cache import cached_factory
from strategies._validate import check_int, check_order

SMALL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 257, 509, 1021, 2039, 4093)


def boundary_values(max_size: int, *, blocks: Sequence[int] = (), min_size: int = 1) -> list[int]:
    """Sorted boundary values in ``[min_size, max_size]``: 1, pow2 +-1, block multiples +-1, primes."""
    vals = {1, 2, 3}
    p = 1
    while p <= 2 * max_size:
        vals.update((p - 1, p, p + 1))
        p *= 2
    for b in blocks:
        for k in range(1, 4):
            vals.update((k * b - 1, k * b, k * b + 1))
    vals.update(SMALL_PRIMES)
    return sorted(v for v in vals if min_size <= v <= max_size)


FEW_SPAN = 8  # ranges wider than this are drawn by :func:`few` log-uniformly


@cached_factory
def few(lo: int, hi: int) -> st.SearchStrategy[int]:
    """An integer in ``[lo, hi]``, small ones far more often than large ones.

    A tile or chunk count, a sequence length: dimensions multiply, so a uniform draw on each makes
    the typical case nearly as large as the largest (slow to generate, check and shrink, with
    nothing a moderate case lacks). Ranges of at most ``FEW_SPAN`` are drawn uniformly; a wider
    one as a uniform draw from one of the nested ranges ``[lo, lo + 1]``, ``[lo, lo + 3]``,
    ``[lo, lo + 7]``... ``[lo, hi]``, each as likely (log-uniform: the median of ``[0, 1000]`` is
    about 10 and its top still comes up). Shrinks toward ``lo``.
    """
    check_int("lo", lo)
    check_int("hi", hi)
    check_order("lo", lo, "hi", hi)
    if hi - lo <= FEW_SPAN:
        return st.integers(lo, hi)
    tops, width = [], 2
    while lo + width - 1 < hi:
        tops.append(lo + width - 1)
        width *= 2
    return st.one_of(*(st.integers(lo, t) for t in (*tops, hi)))


@cached_factory
def sizes(
    *, max_size: int, min_size: int = 1, blocks: Sequence[int] = ()
) -> st.SearchStrategy[int]:
    """One dimension's length in ``[min_size, max_size]``.

    A third of the draws are boundary values (see :func:`boundary_values`), the rest plain
    integers, small ones first (:func:`few`). Shrinks toward ``min_size``; plain integers come before the
    boundary values so that a size can shrink to the smallest one that still fails.
    """
    check_int("min_size", min_size, lo=0)
    check_int("max_size", max_size, lo=0)
    check_order("min_size", min_size, "max_size", max_size)
    for b in blocks:
        check_int("blocks[...]", b, lo=1)
    small_hi = min(max_size, min_size + 7)
    return st.one_of(
        st.integers(min_size, small_hi),
        few(min_size, max_size),
        st.sampled_from(boundary_values(max_size, blocks=blocks, min_size=min_size) or [min_size]),
    )


@cached_factory
def tiled_sizes(block: int, *, max_size: int, min_size: int = 1) -> st.SearchStrategy[int]:
    """A length ``n_tiles * block + rem`` with the remainder aimed at ``{0, 1, block - 1}``.

    Drawn as structure (tile count, then remainder) so that shrinking removes whole tiles first and
    then the tail: shrinks toward ``min_size`` (one partial tile of one element).
    """
    check_int("block", block, lo=1)
    check_int("max_size", max_size, lo=1)
    check_int("min_size", min_size, lo=0)
    check_order("min_size", min_size, "max_size", max_size)
    max_tiles = max_size // block

    tiles_st = few(0, max_tiles)
    # Plain integers first, so that shrinking can walk a tail of block - 1 down to 2; the
    # boundary remainders as the second branch, so half the draws land on them.
    rem_st = st.one_of(st.integers(0, block - 1), st.sampled_from((block - 1, 1, 0)))

    @st.composite
    def build(draw: st.DrawFn) -> int:
        tiles = draw(tiles_st, label="tiles")
        rem = draw(rem_st, label="remainder")
        return min(max(tiles * block + rem, min_size), max_size)

    return build()
