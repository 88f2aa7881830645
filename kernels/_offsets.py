"""Checks of jagged ``offsets`` (a.k.a. ``cu_seqlens``) shared by the kernels' public wrappers.

``offsets [B+1]`` splits the ``N`` rows of a jagged tensor into ``B`` segments: segment ``b`` is
rows ``offsets[b]:offsets[b+1]``. Valid offsets are integers, start at 0, never decrease (empty
segments are allowed) and end at ``N``. The wrappers check this on the host before any launch,
so that bad offsets are a ``ValueError`` naming the first bad entry rather than an illegal address
or a silently wrong result inside a kernel.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_offsets_host", "segment_lengths"]

_INT32_MAX = 2**31 - 1


def check_offsets_host(host: np.ndarray, n_rows: int, *, dtype: str) -> np.ndarray:
    """Validates offsets already copied to the host; returns them as int64.

    Args:
        host: the offsets as a NumPy array (any shape; it is checked here).
        n_rows: ``N``, the number of rows of the jagged values.
        dtype: the offsets' dtype as the caller sees it, for messages.

    Raises:
        ValueError: naming the offending entry and what was expected.
    """
    if host.ndim != 1:
        raise ValueError(f"offsets.shape={tuple(host.shape)} must be 1-D [B+1]")
    if host.shape[0] < 1:
        raise ValueError("offsets.shape=(0,) must have at least one entry (B+1 >= 1; [0] is B=0)")
    o = host.astype(np.int64)
    if o[0] != 0:
        raise ValueError(f"offsets[0]={int(o[0])} must be 0")
    steps = np.diff(o)
    if (steps < 0).any():
        i = int(np.flatnonzero(steps < 0)[0])
        raise ValueError(
            f"offsets must be non-decreasing: offsets[{i}]={int(o[i])} > offsets[{i + 1}]={int(o[i + 1])}"
        )
    if o[-1] != n_rows:
        raise ValueError(
            f"offsets[-1]={int(o[-1])} must equal values.shape[0]={n_rows} (the total row count N)"
        )
    if n_rows > _INT32_MAX:
        raise ValueError(f"values.shape[0]={n_rows} must be < 2**31 ({dtype} offsets)")
    return o


def segment_lengths(offsets: np.ndarray) -> np.ndarray:
    """``offsets[1:] - offsets[:-1]`` as int64 (the segments' row counts)."""
    o = np.asarray(offsets, np.int64)
    return o[1:] - o[:-1]
