"""A plugin target whose Triton kernel is autotuned over six configs, one of them wrong.

``autotuned_config_bug``: a row softmax (``fuzz.fuzz_kernel``, family ``softmax``) behind
``triton.autotune``; its fifth config (``SKEW=1``) scales every output by 1.01, an accuracy bug
that only that config has, as a library's config that one GPU's autotuner picks. Safe to load
into a process (no fault ends it).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import fuzz

BAD = 4  # the position of the wrong config in CONFIGS
CONFIGS = [
    triton.Config({"SKEW": int(i == BAD)}, num_warps=w, num_stages=s)
    for i, (w, s) in enumerate(((1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (4, 2)))
]


@triton.autotune(configs=CONFIGS, key=["n_cols"])
@triton.jit
def softmax_kernel(
    x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr, SKEW: tl.constexpr
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=-float("inf")).to(tl.float32)
    e = tl.where(ok, tl.exp(x - tl.max(x, axis=0)), 0.0)
    y = e / tl.sum(e, axis=0)
    if SKEW:
        y = y * 1.01
    tl.store(y_ptr + row * stride_y + cols, y, mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    rows = x.reshape(-1, x.shape[-1])
    y = torch.empty_like(rows)
    n = rows.shape[-1]
    softmax_kernel[(rows.shape[0],)](
        rows, y, n, rows.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n)
    )
    return y.reshape(x.shape)


fuzz.fuzz_kernel(
    "autotuned_config_bug",
    family="softmax",
    kernel=softmax,
    capabilities=fuzz.Capabilities(dtypes=("float32",), features=()),
    conventions=fuzz.Conventions(empty_rows="nan"),
    description="an autotuned row softmax whose fifth config scales its outputs by 1.01",
)
