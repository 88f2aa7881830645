"""Argument checks and the mask description shared by the Triton and Pallas attention wrappers.

Everything here is framework-free: shapes as tuples, lengths as NumPy arrays read back from the
device, options as Python values. Every message names the argument, the value it got and what is
allowed, and every check runs before any launch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels._validate import check_block, check_scale, next_pow2

MAX_HEAD_DIM = 256
BLOCK_MIN, BLOCK_MAX = 16, 256
MAX_SPLITS = 64


@dataclass(frozen=True)
class Options:
    """The score modifiers and masks of one call, validated.

    Attributes:
        scale: multiplier of ``q . k`` (``1/sqrt(D)`` when the caller passed None).
        causal: bottom-right aligned causal mask.
        window_left, window_right: sliding window in aligned positions, -1 for unbounded.
        softcap: ``cap`` of ``cap * tanh(s / cap)``, or None.
        has_alibi: whether per-head ALiBi slopes are given.
    """

    scale: float
    causal: bool
    window_left: int
    window_right: int
    softcap: float | None
    has_alibi: bool

    @property
    def has_window(self) -> bool:
        return self.window_left >= 0 or self.window_right >= 0


def check_shapes(
    q_shape: Sequence[int], k_shape: Sequence[int], v_shape: Sequence[int]
) -> tuple[int, int, int, int, int, int]:
    """``q [B, Hq, Tq, D]``, ``k/v [B, Hkv, Tk, D]`` -> ``(B, Hq, Hkv, Tq, Tk, D)``."""
    q_shape, k_shape, v_shape = tuple(q_shape), tuple(k_shape), tuple(v_shape)
    for name, shape in (("q", q_shape), ("k", k_shape), ("v", v_shape)):
        if len(shape) != 4:
            raise ValueError(f"{name}.shape={shape} must have 4 axes [B, H, T, D]")
    if k_shape != v_shape:
        raise ValueError(f"k.shape={k_shape} and v.shape={v_shape} must be equal")
    b, hq, tq, d = q_shape
    bk, hkv, tk, dk = k_shape
    if bk != b:
        raise ValueError(f"k.shape[0]={bk} must equal the batch q.shape[0]={b}")
    if dk != d:
        raise ValueError(f"k.shape[3]={dk} must equal the head dim q.shape[3]={d}")
    if not 1 <= d <= MAX_HEAD_DIM:
        raise ValueError(f"head dim q.shape[3]={d} must be in [1, {MAX_HEAD_DIM}]")
    if hq < 1 or hkv < 1:
        raise ValueError(f"head counts Hq={hq} and Hkv={hkv} must be >= 1")
    if hq % hkv:
        raise ValueError(
            f"Hq={hq} must be a multiple of Hkv={hkv} (GQA/MQA share each kv head among "
            "Hq/Hkv query heads)"
        )
    return b, hq, hkv, tq, tk, d


def check_dtypes(q_dtype: Any, k_dtype: Any, v_dtype: Any, allowed: Sequence[Any]) -> None:
    if q_dtype not in allowed:
        raise ValueError(f"q.dtype={q_dtype} is not supported; expected one of {tuple(allowed)}")
    if k_dtype != q_dtype or v_dtype != q_dtype:
        raise ValueError(f"k.dtype={k_dtype} and v.dtype={v_dtype} must equal q.dtype={q_dtype}")


def check_options(
    *,
    head_dim: int,
    scale: Any,
    causal: Any,
    window: Any,
    softcap: Any,
    has_alibi: bool,
) -> Options:
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be a bool, got {causal!r}")
    scale = 1.0 / math.sqrt(head_dim) if scale is None else check_scale(scale)
    if window is None:
        left, right = -1, -1
    else:
        if isinstance(window, (str, bytes)) or not isinstance(window, Sequence) or len(window) != 2:
            raise ValueError(f"window={window!r} must be None or a pair (left, right)")
        left, right = window
        for name, w in (("window[0] (left)", left), ("window[1] (right)", right)):
            if isinstance(w, bool) or not isinstance(w, (int, np.integer)):
                raise TypeError(f"{name}={w!r} must be an int")
            if w < -1:
                raise ValueError(f"{name}={w} must be >= 0, or -1 for unbounded")
        left, right = int(left), int(right)
    if softcap is not None:
        if isinstance(softcap, bool) or not isinstance(softcap, (int, float)):
            raise TypeError(f"softcap must be a float or None, got {softcap!r}")
        softcap = float(softcap)
        if not math.isfinite(softcap) or softcap <= 0.0:
            raise ValueError(f"softcap={softcap} must be finite and > 0")
    return Options(float(scale), bool(causal), left, right, softcap, has_alibi)


def check_blocks(block_q: Any, block_k: Any) -> tuple[int, int]:
    return (
        check_block("block_q", block_q, BLOCK_MIN, BLOCK_MAX),
        check_block("block_k", block_k, BLOCK_MIN, BLOCK_MAX),
    )


def check_num_splits(num_splits: Any) -> int:
    return check_block("num_splits", num_splits, 1, MAX_SPLITS)


def check_lengths(name: str, lengths: np.ndarray, count: int, upper: int) -> np.ndarray:
    """Per-batch lengths: ``[count]`` integers in ``[0, upper]``."""
    lengths = np.asarray(lengths)
    if lengths.shape != (count,):
        raise ValueError(f"{name}.shape={lengths.shape} must be ({count},), one per batch element")
    if lengths.dtype.kind not in "iu":
        raise ValueError(f"{name}.dtype={lengths.dtype} must be an integer dtype")
    bad = np.flatnonzero((lengths < 0) | (lengths > upper))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{name}[{i}]={int(lengths[i])} must be in [0, {upper}]")
    return lengths.astype(np.int32)


def check_cu_seqlens(name: str, cu: np.ndarray, total: int, *, exact: bool) -> np.ndarray:
    """Offsets ``[N + 1]``: start at 0, non-decreasing, last ``== total`` (``<= total`` if not
    ``exact``: rows past the last sequence are then a tail no sequence owns)."""
    cu = np.asarray(cu)
    if cu.ndim != 1 or cu.shape[0] < 2:
        raise ValueError(f"{name}.shape={cu.shape} must be (N + 1,) with N >= 1 sequences")
    if cu.dtype.kind not in "iu":
        raise ValueError(f"{name}.dtype={cu.dtype} must be an integer dtype")
    if cu[0] != 0:
        raise ValueError(f"{name}[0]={int(cu[0])} must be 0")
    steps = np.diff(cu.astype(np.int64))
    if (steps < 0).any():
        i = int(np.flatnonzero(steps < 0)[0])
        raise ValueError(
            f"{name} must be non-decreasing, but {name}[{i + 1}]={int(cu[i + 1])} < "
            f"{name}[{i}]={int(cu[i])}"
        )
    last = int(cu[-1])
    if (exact and last != total) or last > total:
        rel = "==" if exact else "<="
        raise ValueError(f"{name}[-1]={last} must be {rel} the packed length {total}")
    return cu.astype(np.int32)


def padded_head_dim(d: int, minimum: int = 16) -> int:
    """The power of two (>= ``minimum``, itself >= 16) the head dim is padded to in a kernel."""
    return max(minimum, next_pow2(d))


def to_host(name: str, a: Any) -> np.ndarray:
    """A small integer array (lengths, offsets) read back to the host for validation."""
    if a is None:
        raise ValueError(f"{name} must not be None")
    if hasattr(a, "detach"):  # torch
        return a.detach().cpu().numpy()
    return np.asarray(a)
