"""``@jit_any_size``: a ``triton.jit`` that compiles a kernel once for every size and stride.

By default Triton specializes each integer argument on its value being 1 and on divisibility by
16, and compiles a new binary for every combination it meets. A kernel with twenty lengths and
strides then compiles hundreds of times under a fuzzer, which draws exactly the odd sizes that
make new combinations: on a GPU host most of a campaign's time went to the compiler. Lengths and
the strides of outer dimensions are therefore runtime values here; only the arguments named in
``specialize`` (the unit strides of the innermost dimension, which keep loads vectorized) and the
``tl.constexpr`` parameters select a binary.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
import triton


def dynamic_params(fn: Callable[..., Any], specialize: Sequence[str] = ()) -> list[str]:
    """The parameters of ``fn`` that are neither pointers (``*_ptr``), ``tl.constexpr``, nor named
    in ``specialize``."""
    if isinstance(specialize, str):
        raise TypeError(f"specialize must be a sequence of names, got the string {specialize!r}")
    params = inspect.signature(fn).parameters
    unknown = sorted(set(specialize) - set(params))
    if unknown:
        raise ValueError(f"specialize names {unknown}, which {fn.__name__} does not take")
    return [
        name
        for name, p in params.items()
        if not name.endswith("_ptr")
        and "constexpr" not in str(p.annotation)
        and name not in specialize
    ]


def jit_any_size(*, specialize: Sequence[str] = ()) -> Callable[[Callable[..., Any]], Any]:
    """``@triton.jit`` with ``do_not_specialize`` set to :func:`dynamic_params`."""

    def wrap(fn: Callable[..., Any]) -> Any:
        return triton.jit(fn, do_not_specialize=dynamic_params(fn, specialize))

    return wrap


_PLACEHOLDERS: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def placeholders(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A float32 and an int32 tensor (2 elements each) standing in for absent optional operands
    (slopes, lengths, offsets, initial or final states): with the same pointer types in every
    call, whether a feature is used is a runtime flag and not a new binary. Never read: the
    kernels' loads of an absent operand are masked off or behind its flag."""
    if device not in _PLACEHOLDERS:
        _PLACEHOLDERS[device] = (
            torch.zeros(2, dtype=torch.float32, device=device),
            torch.zeros(2, dtype=torch.int32, device=device),
        )
    return _PLACEHOLDERS[device]
