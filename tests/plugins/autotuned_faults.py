"""Fault-injection plugin targets whose Triton kernel is autotuned -- for campaigns only.

Load as a plugin (``python -m fuzz run --plugin tests/plugins/autotuned_faults.py``). Each target
is the same row softmax, registered through ``fuzz.fuzz_kernel`` as a user's library would be:
a ``triton.autotune`` kernel with three configs (``num_warps`` 1, 2, 4), which the harness pins to
one drawn config per example. The fault strikes only when another config than the first ran, so
a reproducer replays the fault only if it recorded the config the launch chose (not the raw
draw, nor the first config):

``autotuned_exit3`` / ``autotuned_exit0``
    the library ends the process with ``os._exit(3)`` / ``os._exit(0)`` after the launch.
``autotuned_killed``
    the process is killed by SIGKILL after the launch, as a memory cgroup's OOM killer does.
``autotuned_hang``
    the library sleeps for ever after the launch: a ``hang``.

Never load it into an in-process run (``pytest --plugin``, ``python -m fuzz mutants``): the faults
end the process running them.
"""

from __future__ import annotations

import os
import signal
import time

import torch
import triton
import triton.language as tl

import fuzz

CONFIGS = [triton.Config({}, num_warps=w) for w in (1, 2, 4)]


@triton.autotune(configs=CONFIGS, key=["n_cols"])
@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.where(ok, tl.exp(x - m), 0.0)
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=ok)


def _fault(kind: str) -> None:
    if kind == "exit3":
        os._exit(3)
    if kind == "exit0":
        os._exit(0)
    if kind == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "hang":
        while True:
            time.sleep(0.05)


def softmax_with(kind: str):
    def softmax(x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        y = torch.empty_like(rows)
        n = rows.shape[-1]
        _softmax_kernel[(rows.shape[0],)](
            rows, y, n, rows.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n)
        )
        if _softmax_kernel.best_config.num_warps != CONFIGS[0].num_warps:
            _fault(kind)
        return y.reshape(x.shape)

    return softmax


for _kind in ("exit3", "exit0", "killed", "hang"):
    fuzz.fuzz_kernel(
        f"autotuned_{_kind}",
        family="softmax",
        kernel=softmax_with(_kind),
        capabilities=fuzz.Capabilities(dtypes=("float32",), features=(), backends=("interpreted",)),
        conventions=fuzz.Conventions(empty_rows="nan"),
        description=f"an autotuned row softmax that faults ({_kind}) with another config than the first",
    )
