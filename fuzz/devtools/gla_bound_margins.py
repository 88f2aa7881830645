"""Margins of the simple GLA error bound on both sides, measured on drawn cases.

For each target (real kernels, reformulations, precision-loss mutants), backend, output and input
dtype: over N cases drawn from the target's strategy, each case's largest ``error / bound`` over
the output's elements (the oracle comparison's excess ratio, ``Context.bound``): the max and the
median over cases, and how many cases exceed 1. A correct implementation must stay below 1 (its
max is the false-positive margin); a precision-loss mutant should exceed 1 (its max is the
detection margin, its count how often a draw shows it).

python -m fuzz.devtools.gla_bound_margins [--examples N] [--targets GLOB,...] [--backends B,...]
                                [--scale small|large] [--seed S]

Default: 60 cases of each real GLA target and each mutant, on both interpreters.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict

import numpy as np

from fuzz.backends import get_backend
from fuzz.properties import Context, excess
from fuzz.target import draw_cases, select


def ratios(target, backend, case) -> dict[str, float] | None:
    """Per output: the largest error / bound of the case (inf for NaN/Inf where finite)."""
    ctx = Context(target, backend, case)
    if ctx.clean.error is not None:
        return None
    out = {}
    for name, o in ctx.oracle.items():
        got = np.asarray(ctx.clean.outputs[name]).astype(np.float64)
        finite = np.isfinite(o)
        if (finite & ~np.isfinite(got)).any():
            out[name] = float("inf")
            continue
        err = np.where(finite, np.abs(got - o), 0.0)
        r = excess(err, np.asarray(ctx.bound(name)))
        out[name] = float(r.max(initial=0.0))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=60)
    ap.add_argument("--targets", default="simple_gla_*")
    ap.add_argument("--backends", default="triton-interpret,pallas-interpret")
    ap.add_argument("--scale", default="small", choices=("small", "large"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    targets = select(args.targets, mutants=None)
    rows = []
    for target in targets:
        cases = draw_cases(target, args.scale, args.examples, args.seed)
        for bname in args.backends.split(","):
            backend = get_backend(bname)
            if not backend.available or backend.impl not in target.kernels:
                continue
            t0 = time.perf_counter()
            per = defaultdict(list)
            crashes = 0
            for case in cases:
                got = ratios(target, backend, case)
                if got is None:
                    crashes += 1
                    continue
                for name, r in got.items():
                    per[(name, case.params["dtype"])].append(r)
            for (name, dtype), rs in sorted(per.items()):
                rows.append(
                    (
                        target.name,
                        bname,
                        name,
                        dtype,
                        len(rs),
                        max(rs),
                        statistics.median(rs),
                        sum(r > 1 for r in rs),
                    )
                )
            print(
                f"# {target.name} on {bname}: {len(cases)} cases, {crashes} raised, "
                f"{time.perf_counter() - t0:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    print("| target | backend | output | dtype | cases | max err/bound | median | cases > 1 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for t, b, n, d, c, mx, med, over in rows:
        print(f"| {t} | {b} | {n} | {d} | {c} | {mx:.3g} | {med:.3g} | {over} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
