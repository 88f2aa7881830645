"""How much room the per-element error bounds leave, on both sides.

python -m fuzz.devtools.bound_margins [--examples N] [--backend B] [--scale small|large] [--seed S]
                            [--ref-device cpu|cuda] [FAMILY...]

For each family (softmax, jagged_softmax, attention, attention_varlen, attention_decode), draws N
cases from the family's strategy (derandomized, generation only), runs every real target, every
correct reformulation and every precision-loss mutant of the family on them, and prints per target
and input dtype the ratio error / bound of the worst element of each case (``max`` and
``median`` over the cases; a real target or a reformulation must stay below 1 everywhere), and for
each mutant the share of cases where it exceeds its bound with an accuracy verdict and its largest
excess. Nothing here asserts: the numbers go in the report. On pallas-interpret run one family per
process: every kernel variant it compiles stays in memory (all families in one process ran out of
memory on a 23 GiB machine).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings

from fuzz.backends import get_backend
from fuzz.properties import Context, excess
from fuzz.target import select

FAMILIES = {
    "softmax": "softmax",
    "jagged_softmax": "jagged_softmax",
    "attention": "attention",
    "attention_varlen": "attention_varlen",
    "attention_decode": "attention_decode",
}


def _members(family: str) -> list:
    """The real target of a family strategy, its reformulations, its precision-loss mutants."""
    real = select(family)[0]
    others = [
        t
        for t in select(f"{family}_*", mutants=None)
        if t.strategy is real.strategy
        and t.name != family
        and (not t.is_mutant or t.expected_class == "accuracy")
        and not (
            family == "attention" and t.name.startswith(("attention_varlen", "attention_decode"))
        )
    ]
    return [real, *others]


def _cases(strategy, n: int, seed: int) -> list:
    got = []

    @settings(
        max_examples=n,
        derandomize=seed == 0,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        deadline=None,
    )
    @given(strategy)
    def draw(case):
        got.append(case)

    if seed:
        from hypothesis import seed as hseed

        draw = hseed(seed)(draw)
    draw()
    return got


def _worst(ctx: Context) -> tuple[float, bool]:
    """The largest error / bound over the outputs, and whether a NaN/Inf appeared where the
    oracle is finite (counted as an excess of inf)."""
    top = 0.0
    for name in ctx.oracle:
        m = ctx.metrics(name)
        if m.nonfinite_where_finite or m.special_mismatch:
            return float("inf"), True
        r = excess(m.errors, ctx.bound(name))
        top = max(top, float(r.max()) if r.size else 0.0)
    return top, False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("families", nargs="*", default=list(FAMILIES))
    p.add_argument("--examples", type=int, default=60)
    p.add_argument("--backend", default="triton-interpret")
    p.add_argument("--scale", default="small")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ref-device", default="cpu", help="where the fp64 oracle and bound run")
    args = p.parse_args(argv)
    backend = get_backend(args.backend)
    for family in args.families:
        members = [t for t in _members(family) if backend.impl in t.kernels]
        t0 = time.perf_counter()
        cases = _cases(members[0].strategy(args.scale), args.examples, args.seed)
        ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
        for case in cases:
            dtype = case.params["dtype"]
            for t in members:
                ctx = Context(t, backend, case, ref_device=args.ref_device)
                if ctx.clean.error is not None:
                    ratios[(t.name, dtype)].append(float("nan"))
                    continue
                ratios[(t.name, dtype)].append(_worst(ctx)[0])
        print(
            f"\n{family} on {args.backend}, {len(cases)} cases ({time.perf_counter() - t0:.0f} s)"
        )
        print(f"  {'target':52} {'dtype':9} {'max err/bound':>14} {'median':>10} {'over 1':>7}")
        for t in members:
            for dtype in ("float32", "float16", "bfloat16"):
                r = [x for x in ratios.get((t.name, dtype), []) if not np.isnan(x)]
                if not r:
                    continue
                over = sum(x > 1.0 for x in r)
                print(
                    f"  {t.name:52} {dtype:9} {max(r):14.4g} {statistics.median(r):10.3g} "
                    f"{over:3d}/{len(r):<3d}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
