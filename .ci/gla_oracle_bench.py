"""Seconds per case of the GLA float64 references at a profile's sizes: the token recurrence
(``simple_gla_reference``, autograd through it for the backward) against the blocked form the
targets' oracle uses (``simple_gla_blocked``), and how far apart their values are (relative to
each output's largest magnitude). On a GPU every float64 operation is a launch: the recurrence
takes a few per token, forward and backward; the blocked form a few per block of 64 tokens.

    python .ci/gla_oracle_bench.py [--target simple_gla_bwd] [--scale large] [--cases 20]
                                   [--device cuda]

Prints one line per case (its shape, both times, the largest relative difference) and the
totals; exit status 1 where the two differ by more than 1e-9 relative.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzz.target import draw_cases, get, load_builtin
from fuzz.targets.simple_gla import kind_of, reference_args


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _timed(fn, device: str):
    _sync(device)
    t0 = time.perf_counter()
    out = fn()
    _sync(device)
    return out, time.perf_counter() - t0


def main() -> int:
    import torch

    from oracles import simple_gla as og

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--target", default="simple_gla_bwd", choices=("simple_gla_bwd", "simple_gla_fwd")
    )
    p.add_argument("--scale", default="large", choices=("small", "large"))
    p.add_argument("--cases", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    load_builtin()
    target = get(args.target)
    totals, worst = [0.0, 0.0], 0.0
    for case in draw_cases(target, args.scale, args.cases, args.seed):
        t, kw = reference_args(case, args.device)
        if kind_of(case) == "fwd":
            runs = [
                lambda f=f: dict(zip(("o", "ht"), f(t["q"], t["k"], t["v"], **kw), strict=True))
                for f in (og.simple_gla_reference, og.simple_gla_blocked)
            ]
        else:
            runs = [
                lambda f=f: f(t["q"], t["k"], t["v"], t["do"], dht=t.get("dht"), **kw).as_dict()
                for f in (og.simple_gla_reference_grads, og.simple_gla_blocked_grads)
            ]
        (a, ta), (b, tb) = (_timed(r, args.device) for r in runs)
        rel = max(
            float((a[n] - b[n]).abs().max()) / max(float(a[n].abs().max()), 1e-300) for n in a
        )
        worst = max(worst, rel)
        totals[0] += ta
        totals[1] += tb
        shape = "x".join(str(d) for d in case.inputs["v"].shape)
        print(f"v {shape:>16}: recurrence {ta:7.3f} s, blocked {tb:7.3f} s, rel diff {rel:.1e}")
    n = max(args.cases, 1)
    print(
        f"{args.target} at {args.scale} on {args.device}: {args.cases} cases, recurrence "
        f"{totals[0] / n:.3f} s a case, blocked {totals[1] / n:.3f} s "
        f"({totals[0] / max(totals[1], 1e-9):.1f}x), largest relative difference {worst:.1e}"
    )
    return 0 if worst <= 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
