"""Argument checks and tiling shared by the Triton and Pallas simple GLA wrappers.

The checks work on shapes, dtype names and host integers, so both wrappers raise the same
messages (naming the argument, its value and what is allowed) before any launch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernels._validate import next_pow2

CHUNK_SIZES = (16, 32, 64, 128, 256)
DTYPES = ("float32", "float16", "bfloat16")
MAX_HEAD_DIM = 128
TILE = 64  # chunks longer than this are processed as TILE x TILE tiles


def tile_size(chunk_size: int) -> int:
    """Rows per tile: the whole chunk up to 64, else 64 (tiles above the diagonal are skipped)."""
    return min(chunk_size, TILE)


def padded_dim(n: int) -> int:
    """A head dimension padded to a power of two >= 16 (``tl.dot``/``jnp.dot`` need >= 16)."""
    return max(16, next_pow2(n))


@dataclass(frozen=True)
class Problem:
    """The validated sizes of one call.

    Attributes:
        batch, length, heads, k_dim, v_dim: ``q [B, T, H, K]``, ``v [B, T, H, V]``.
        dtype: the dtype name of q, k, v (and do).
        per_token: True for ``g [B, T, H]``, False for ``g_gamma [H]``.
        seqs: ``(batch row, start, end)`` of each sequence (one per batch row, or per varlen
            segment).
        scale: the scale actually used.
        chunk_size: tokens per chunk.
        varlen: the sequences come from ``cu_seqlens``.
    """

    batch: int
    length: int
    heads: int
    k_dim: int
    v_dim: int
    dtype: str
    per_token: bool
    seqs: tuple[tuple[int, int, int], ...]
    scale: float
    chunk_size: int
    varlen: bool

    @property
    def n_seqs(self) -> int:
        return len(self.seqs)

    @property
    def max_len(self) -> int:
        return max((e - s for _, s, e in self.seqs), default=0)

    @property
    def max_chunks(self) -> int:
        return -(-self.max_len // self.chunk_size)

    @property
    def block_k(self) -> int:
        return padded_dim(self.k_dim)

    @property
    def block_v(self) -> int:
        return padded_dim(self.v_dim)

    @property
    def tile(self) -> int:
        return tile_size(self.chunk_size)

    @property
    def padding(self) -> tuple[int, int]:
        """``[start, T)``: the tokens of no sequence (past ``cu_seqlens[-1]``; empty without)."""
        end = self.seqs[-1][2] if self.varlen and self.seqs else self.length
        return end, self.length


def _shape(name: str, shape: Sequence[int], want: Sequence[int], what: str) -> None:
    if tuple(shape) != tuple(want):
        raise ValueError(f"{name}.shape={tuple(shape)} must be {what}={tuple(want)}")


def check_dtype(name: str, dtype: str, allowed: Sequence[str]) -> None:
    if dtype not in allowed:
        raise ValueError(f"{name}.dtype={dtype} is not supported; expected one of {tuple(allowed)}")


def check_chunk_size(chunk_size: Any) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise TypeError(f"chunk_size must be an int, got {chunk_size!r}")
    if chunk_size not in CHUNK_SIZES:
        raise ValueError(f"chunk_size={chunk_size} must be one of {CHUNK_SIZES}")
    return chunk_size


def check_scale(scale: Any, k_dim: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(k_dim)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale must be a float or None, got {scale!r}")
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0.0:
        raise ValueError(f"scale={scale} must be finite and > 0")
    return scale


def check_cu_seqlens(cu: Sequence[int], length: int) -> tuple[int, ...]:
    """Validates host values of ``cu_seqlens``: starts at 0, non-decreasing, ends at most at
    ``T`` (tokens past its end belong to no sequence: padding, never read, outputs 0)."""
    cu = tuple(int(c) for c in cu)
    if len(cu) < 2:
        raise ValueError(
            f"cu_seqlens={list(cu)} must have at least 2 entries (N + 1 for N sequences)"
        )
    if cu[0] != 0:
        raise ValueError(f"cu_seqlens[0]={cu[0]} must be 0")
    if cu[-1] > length:
        raise ValueError(f"cu_seqlens[-1]={cu[-1]} must be <= T={length}")
    for i in range(len(cu) - 1):
        if cu[i + 1] < cu[i]:
            raise ValueError(
                f"cu_seqlens must be non-decreasing; cu_seqlens[{i + 1}]={cu[i + 1]} < "
                f"cu_seqlens[{i}]={cu[i]} (empty sequences are allowed, negative lengths are not)"
            )
    return cu


def check_problem(
    *,
    q: tuple[tuple[int, ...], str] | None,
    k: tuple[tuple[int, ...], str] | None,
    v: tuple[tuple[int, ...], str] | None,
    g: tuple[tuple[int, ...], str] | None,
    g_gamma: tuple[tuple[int, ...], str] | None,
    initial_state: tuple[tuple[int, ...], str] | None,
    cu_seqlens: Sequence[int] | None,
    cu_dtype: str | None,
    scale: Any,
    chunk_size: Any,
) -> Problem:
    """Checks shapes and dtypes (``(shape, dtype name)`` pairs) and returns the problem sizes."""
    for name, spec in (("q", q), ("k", k), ("v", v)):
        if spec is None:
            raise TypeError(
                f"{name} is required (an array [B, T, H, {'V' if name == 'v' else 'K'}])"
            )
    assert q is not None and k is not None and v is not None
    q_shape, dtype = q
    if len(q_shape) != 4:
        raise ValueError(f"q.shape={tuple(q_shape)} must be [B, T, H, K] (4 axes)")
    batch, length, heads, k_dim = q_shape
    check_dtype("q", dtype, DTYPES)
    _shape("k", k[0], q_shape, "q.shape")
    if k[1] != dtype:
        raise ValueError(f"k.dtype={k[1]} must equal q.dtype={dtype}")
    if len(v[0]) != 4 or tuple(v[0][:3]) != (batch, length, heads):
        raise ValueError(
            f"v.shape={tuple(v[0])} must be [B, T, H, V] with B, T, H = {(batch, length, heads)}"
        )
    if v[1] != dtype:
        raise ValueError(f"v.dtype={v[1]} must equal q.dtype={dtype}")
    v_dim = v[0][3]
    if heads < 1:
        raise ValueError(f"H={heads} (q.shape[2]) must be >= 1")
    for name, d in (("K", k_dim), ("V", v_dim)):
        if not 1 <= d <= MAX_HEAD_DIM:
            raise ValueError(f"{name}={d} must be in [1, {MAX_HEAD_DIM}]")
    chunk_size = check_chunk_size(chunk_size)
    scale = check_scale(scale, k_dim)
    if (g is None) == (g_gamma is None):
        raise ValueError(
            "pass exactly one decay: g [B, T, H] (per-token log decay) or g_gamma [H] (per-head "
            f"log decay); got g={'given' if g is not None else None}, "
            f"g_gamma={'given' if g_gamma is not None else None}"
        )
    if g is not None:
        _shape("g", g[0], (batch, length, heads), "[B, T, H]")
        check_dtype("g", g[1], ("float32",))
    if g_gamma is not None:
        _shape("g_gamma", g_gamma[0], (heads,), "[H]")
        check_dtype("g_gamma", g_gamma[1], ("float32",))
    if cu_seqlens is not None:
        if cu_dtype not in ("int32", "int64"):
            raise ValueError(f"cu_seqlens.dtype={cu_dtype} must be int32 or int64")
        if batch != 1:
            raise ValueError(
                f"with cu_seqlens the batch must be 1 (packed sequences), got B={batch}"
            )
        cu = check_cu_seqlens(cu_seqlens, length)
        seqs = tuple((0, cu[i], cu[i + 1]) for i in range(len(cu) - 1))
    else:
        if batch < 1:
            raise ValueError(f"B={batch} (q.shape[0]) must be >= 1")
        seqs = tuple((b, 0, length) for b in range(batch))
    if initial_state is not None:
        _shape("initial_state", initial_state[0], (len(seqs), heads, k_dim, v_dim), "[N, H, K, V]")
        check_dtype("initial_state", initial_state[1], ("float32",))
    return Problem(
        batch,
        length,
        heads,
        k_dim,
        v_dim,
        dtype,
        g is not None,
        seqs,
        scale,
        chunk_size,
        cu_seqlens is not None,
    )


def check_like(name: str, shape: tuple[int, ...], dtype: str, want_shape, want_dtype: str) -> None:
    """An extra input (``do``, ``dht``) or an ``out_*`` buffer must have exactly this shape/dtype."""
    if tuple(shape) != tuple(want_shape) or dtype != want_dtype:
        raise ValueError(f"{name} is {dtype}{list(shape)}; expected {want_dtype}{list(want_shape)}")
