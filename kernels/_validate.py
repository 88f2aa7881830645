"""Argument checks shared by the kernels' public wrappers.

Every message names the argument, the value it got and what is allowed, so that a bad call fails
in the wrapper with a ``ValueError``/``TypeError`` instead of deep inside a kernel launch.
"""

from __future__ import annotations

import math
from typing import Any


def is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def grown_bucket(n: int, start: int, growth: int) -> int:
    """The padded size of ``n``: ``start * growth**k``, the smallest that holds ``n``."""
    size = start
    while size < n:
        size *= growth
    return size


def check_block(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if not is_pow2(value) or not lo <= value <= hi:
        raise ValueError(f"{name}={value} must be a power of two in [{lo}, {hi}]")
    return value


def check_scale(scale: Any) -> float:
    if scale is None:
        return 1.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"scale must be a float or None, got {scale!r}")
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0.0:
        raise ValueError(f"scale={scale} must be finite and > 0")
    return scale


def check_out_tensor(out: Any, x: Any) -> Any:
    """Checks a torch ``out`` against ``x`` and returns it viewed as ``[rows, N]``."""
    import torch

    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
    if out.shape != x.shape:
        raise ValueError(f"out.shape={tuple(out.shape)} must equal x.shape={tuple(x.shape)}")
    if out.dtype != x.dtype:
        raise ValueError(f"out.dtype={out.dtype} must equal x.dtype={x.dtype}")
    if out.device != x.device:
        raise ValueError(f"out is on {out.device} but x is on {x.device}")
    try:
        return out.view(-1, x.shape[-1])
    except RuntimeError:
        raise ValueError(
            f"out with strides {out.stride()} cannot be viewed as [rows, {x.shape[-1]}]; "
            "pass a tensor whose leading axes collapse into one"
        ) from None
