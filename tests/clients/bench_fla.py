"""Fresh fla-core ``chunk_simple_gla`` examples per second under ``pinned_configs`` (a GPU
measurement, not a test; on a CPU it runs in the interpreter).

    python tests/clients/bench_fla.py --seconds 110 [--configs first|drawn] [--dims 64] [--heads 2]

Each example draws a new case (dtype, batch, length, packed sequences, initial state, decay form),
runs fla's forward and backward with one config per autotuned kernel (the first, or drawn) and
checks every output against the harness's simple GLA oracle and bound. Printed: examples/s, time
per example, kernel variants compiled (Triton's compile calls), and the examples outside the bound
with their choices. fla's constexprs are the head count and dims (``--heads``, ``--dims``): a new
combination compiles every kernel again; lengths, batch and sequence boundaries are runtime values.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import time

import numpy as np
import torch
from triton.runtime.jit import JITFunction

from fuzz.backends import TorchAdapter
from fuzz.triton_runtime import interpreting, pinned_configs, positions


def _load(name: str):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    spec = importlib.util.spec_from_file_location(name[:-3], path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COMPILES: list[float] = []


def _count_compiles() -> None:
    original = JITFunction._do_compile

    def counted(self, *args, **kwargs):
        t0 = time.perf_counter()
        out = original(self, *args, **kwargs)
        COMPILES.append(time.perf_counter() - t0)
        return out

    JITFunction._do_compile = counted


def draw_case(tests, rng, *, dims, heads, gates):
    dtype = str(rng.choice(["float32", "bfloat16", "float16"]))
    batch, length = int(rng.integers(1, 3)), int(rng.integers(1, 257))
    cu = None
    if rng.integers(0, 3) == 0:
        cuts = sorted(int(c) for c in rng.integers(0, length + 1, int(rng.integers(0, 3))))
        cu, batch = [0, *cuts, length], 1
    shape = (batch, length, int(rng.choice(heads)), int(rng.choice(dims)), int(rng.choice(dims)))
    return tests.make_case(
        dtype,
        gates=gates and bool(rng.integers(0, 2)),
        h0=bool(rng.integers(0, 2)),
        cu=cu,
        shape=shape,
        chunk=64,
        seed=int(rng.integers(0, 2**31)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--configs", choices=("first", "drawn"), default="first")
    parser.add_argument("--dims", type=int, nargs="+", default=[64])
    parser.add_argument("--heads", type=int, nargs="+", default=[2])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    tests, conf = _load("test_fla_simple_gla.py"), _load("conftest.py")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    adapter = TorchAdapter(device)
    tests.CPU = adapter  # run_fla puts the inputs on this device
    scope = contextlib.nullcontext if device == "cuda" else interpreting
    # fla 0.6.0 refuses the gated backward on Hopper with Triton < 3.7.1 (a miscompile, fla #640)
    import fla.ops.common.chunk_o as chunk_o

    gates = not (device == "cuda" and chunk_o.IS_NVIDIA_HOPPER and not chunk_o.TRITON_ABOVE_3_7_1)
    _count_compiles()
    done, t0, times, compiled, outside = 0, time.perf_counter(), [], [], []
    while time.perf_counter() - t0 < args.seconds:
        rng = np.random.default_rng(args.seed + done)
        case = draw_case(tests, rng, dims=args.dims, heads=args.heads, gates=gates)
        picks = [int(x) for x in rng.integers(0, 1000, 8)] if args.configs == "drawn" else []
        n, s0 = len(COMPILES), time.perf_counter()
        with scope(), pinned_configs(positions(picks)) as choices:
            got = tests.run_fla(case)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - s0)
        compiled.append(len(COMPILES) - n)
        try:
            tests.check(case, got, conf.check_against_oracle)
        except AssertionError as e:
            outside.append((str(e)[:300], [str(c) for c in choices]))
        done += 1
    wall = time.perf_counter() - t0
    for message, choices in outside[:3]:  # the summary line comes last
        print("  outside the bound:", message[:200], choices[:2])
    print(
        f"{device} {torch.cuda.get_device_name(0) if device == 'cuda' else ''}: {done} examples "
        f"in {wall:.1f}s = {done / wall:.2f} ex/s ({args.configs} configs, dims {args.dims}, "
        f"heads {args.heads}, gated cases {gates}); per example median {np.median(times):.3f}s, "
        f"max {max(times):.1f}s; {sum(c > 0 for c in compiled)} examples compiled "
        f"{sum(compiled)} variants in {sum(COMPILES):.1f}s; {len(outside)} outside the bound"
    )


if __name__ == "__main__":
    main()
