"""How many compiled Pallas kernels a hunt needs: the distinct kernel variants ``N`` examples of a
target's strategy (gpu profile shapes by default) ask for. A compiled backend pays one compile
(1-2 s on a GPU) per variant, so this number bounds how fast a cold campaign can go.

No kernel runs: the wrappers take their compiled path (``interpret=False``) on the CPU, and
``pallas_call`` is replaced by a stub that counts its traces (jax.jit traces a kernel once per
variant: shapes, dtypes, grid, static options) and returns zeros.

    python -m fuzz.devtools.variants TARGET [TARGET...] [--examples 200] [--scale large] [--top 8]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from jax.experimental import pallas as pl

from fuzz.backends import adapter_for, get_backend
from fuzz.target import get

seen: collections.Counter = collections.Counter()
kinds: collections.Counter = collections.Counter()


def _stub_pallas_call(kernel, *, out_shape, grid=(), **kw):
    name = getattr(getattr(kernel, "func", kernel), "__name__", "kernel")

    def call(*operands):
        key = (
            name,
            tuple(grid) if isinstance(grid, (tuple, list)) else grid,
            tuple((tuple(o.shape), str(o.dtype)) for o in operands),
            repr(getattr(kernel, "keywords", {})),
        )
        seen[key] += 1
        kinds[name] += 1
        if isinstance(out_shape, (list, tuple)):
            return type(out_shape)(jnp.zeros(s.shape, s.dtype) for s in out_shape)
        return jnp.zeros(out_shape.shape, out_shape.dtype)

    return call


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("targets", nargs="+")
    p.add_argument("--examples", type=int, default=200)
    p.add_argument("--scale", default="large")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top", type=int, default=0, help="print the N most used variants")
    args = p.parse_args()
    pl.pallas_call = _stub_pallas_call  # type: ignore[assignment]
    backend = get_backend("pallas-interpret")
    adapter = adapter_for(backend)
    for name in args.targets:
        t = get(name)
        seen.clear()
        kinds.clear()
        count = 0

        def one(case):
            nonlocal count
            count += 1
            inputs = {k: adapter.put(v) for k, v in case.inputs.items()}
            try:
                t.kernels[backend.impl](inputs, dict(case.params), out=None, interpret=False)
            except (ValueError, TypeError):
                pass

        test = given(t.strategy(args.scale))(one)
        test = settings(
            max_examples=args.examples,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )(test)
        t0 = time.perf_counter()
        hypothesis_seed(args.seed)(test)()
        per_kind = ", ".join(f"{k} {v} calls" for k, v in kinds.items())
        print(
            f"{name}: {count} examples -> {len(seen)} kernel variants "
            f"({per_kind}; {time.perf_counter() - t0:.0f} s)"
        )
        for key, n in seen.most_common(args.top):
            print(f"   {n:4d}x {key[0]} grid={key[1]} {key[2]} {key[3]}")
    jax.clear_caches()
    return 0


if __name__ == "__main__":
    sys.exit(main())
