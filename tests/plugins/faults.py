"""Fault-injection targets: kernels that raise, corrupt memory, or hang -- for campaigns only.

Load as a plugin (``python -m fuzz run --plugin tests/plugins/faults.py --mutants``). One real
Triton kernel, ``y = 2 * x`` row by row, and three mutants of it:

``faults_mutant_raise``
    the launcher raises (as a failed launch does) when a row has >= 4 columns: ``crash``, found
    in-process and shrunk to one row of 4.
``faults_mutant_wild_store``
    with >= 2 rows of >= 5 columns, the kernel loads and stores through pointers 2**40 elements
    past its buffers: on a GPU a real illegal memory access (the CUDA context is lost); in
    Triton's interpreter a real segmentation fault (of the load, made through an address the
    kernel computed as an integer: the harness fences the interpreter's loads and stores through
    the launch's pointers, ``fuzz.store_fence``). Either way the process running it dies:
    ``crash``.
``faults_mutant_spin``
    with >= 6 columns, the kernel spins on a flag that is never set: ``hang`` (the campaign's
    per-example timeout kills the worker).

Never load this plugin into an in-process run (``pytest --plugin``, ``python -m fuzz mutants``):
the wild load and the spin take that process down; campaigns run kernels in worker processes
precisely so that they survive such kernels.
"""

from __future__ import annotations

import signal

import numpy as np
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

from fuzz.case import Case
from fuzz.compare import Tolerance
from fuzz.target import MutantOf, Target, register
from kernels._triton_interp import interpreted

# As a library loaded after the campaign's worker started may (a GPU worker killed past its
# slice's hard limit left an empty log): the hang probe's signal taken over. The worker
# registers its probe again before each job, and the hung kernel's stack is dumped all the same.
signal.signal(signal.SIGUSR1, signal.SIG_IGN)

WILD_OFFSET = tl.constexpr(1 << 40)  # elements past the output: far outside any allocation


@triton.jit
def _scale_kernel(
    x_ptr,
    y_ptr,
    flag_ptr,
    n_cols,
    stride_xm,
    stride_ym,
    WILD: tl.constexpr,
    SPIN: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    ok = cols < n_cols
    if WILD:  # a wild load through an address made from an integer: the interpreter's fence
        # (fuzz.store_fence) cannot see its buffer and stands aside, so it faults there too
        at = (x_ptr + row * stride_xm + WILD_OFFSET).to(tl.int64)
        x = tl.load(at.to(tl.pointer_type(tl.float32)) + cols, mask=ok, other=0.0)
    else:
        x = tl.load(x_ptr + row * stride_xm + cols, mask=ok, other=0.0)
    if SPIN:
        while tl.load(flag_ptr, volatile=True) == 0:  # nobody ever sets the flag
            pass
    if WILD:
        tl.store(y_ptr + row * stride_ym + cols + WILD_OFFSET, x * 2.0, mask=ok)
    else:
        tl.store(y_ptr + row * stride_ym + cols, x * 2.0, mask=ok)


def scale(
    x: torch.Tensor, out: torch.Tensor, *, fault: str | None, interpret: bool
) -> torch.Tensor:
    rows, cols = x.shape
    if fault == "raise" and cols >= 4:
        raise RuntimeError(f"launch failed: {cols=} >= 4 (injected fault)")
    wild = fault == "wild_store" and rows >= 2 and cols >= 5
    spin = fault == "spin" and cols >= 6
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    kernel = interpreted(_scale_kernel) if interpret else _scale_kernel
    kernel[(rows,)](
        x,
        out,
        flag,
        cols,
        x.stride(0),
        out.stride(0),
        WILD=wild,
        SPIN=spin,
        BLOCK=triton.next_power_of_2(cols),
    )
    return out


def entry(fault: str | None):
    def run(inputs, params, *, out, interpret):
        x = inputs["x"]
        y = out["y"] if out is not None else torch.empty_like(x)
        return {"y": scale(x, y, fault=fault, interpret=interpret)}

    return run


def cases(scale_name: str) -> st.SearchStrategy[Case]:
    """Rows 1..3, columns 1..8, standard-normal values; shrinks toward one row, one column."""

    @st.composite
    def build(draw):
        rows = draw(st.integers(1, 3))
        cols = draw(st.integers(1, 8))
        seed = draw(st.integers(0, 2**16))
        x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
        return Case({"x": x}, {"dtype": "float32"}, {"seed": seed})

    return build()


def oracle(case, device):
    return {"y": case.inputs["x"].astype(np.float64) * 2}


def naive(case, device):
    return {"y": (case.inputs["x"] * np.float32(2)).astype(np.float32)}


def make(name, fault=None, expected=None, bound=None, description=""):
    return Target(
        name=name,
        family="faults",
        kernels={"triton": entry(fault)},
        oracle=oracle,
        naive=naive,
        strategy=cases,
        tolerance=Tolerance(rho=1.0, floor_ulps=1.0),
        mutant=None if fault is None else MutantOf("faults", expected, shrink_bound=bound),
        description=description,
    )


register(make("faults", description="y = 2 x row by row (the base of the fault-injection mutants)"))
register(make("faults_mutant_raise", "raise", "crash", 4, "the launcher raises for >= 4 columns"))
register(
    make(
        "faults_mutant_wild_store",
        "wild_store",
        "crash",
        16,
        "stores 2**40 elements past the output: illegal address (GPU) / segfault (CPU)",
    )
)
register(make("faults_mutant_spin", "spin", "hang", 8, "spins forever for >= 6 columns"))
