"""Examples/s and compile share of hunts with and without reused case structures
(``strategies.reuse``): each (target, backend) runs ``--examples`` examples in each mode, each in
a process of its own (nothing compiled by one run serves another). Modes: ``fresh`` (every case
structure fresh), ``reuse`` (a structure memo aiming compiling at ``--share`` of the time),
``cap`` (no memo; examples that would compile are drawn again while compiling is over
``--share``: ``Profile.compile_share``), ``both`` (memo and cap: the gpu profile's setting),
``whole`` (as ``both``, but a reused structure replays its lengths too: no fresh lengths).

    python -m fuzz.devtools.reuse_bench TARGET:BACKEND [...] [--examples 150] [--seed 0]
        [--profile ci] [--share 0.25] [--modes fresh,reuse,cap,both]
        [--plugin tests/plugins/pallas_kernels.py]

Failures are counted, not shrunk (every class is passed as known): what is measured is the
search. Prints one line per run: examples that ran (and those rejected before compiling, which
Hypothesis draws again: they are not counted as examples), seconds, examples/s, launches that
compiled and the seconds they took, the compile share, failing examples, distinct input shapes
and the share of examples with more than one key tile (attention), and for the memo its
counts (explored, reused, fresh: Hypothesis's generator chose part of the structure, replayed:
its mutations of earlier examples) and final explore rate. On a CPU machine, the
``pallas-interpret`` backend compiles an XLA program per new kernel shape.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from typing import Any


def run_one(spec: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    from fuzz.engine import Hooks, hunt
    from fuzz.failures import CLASSES
    from fuzz.profiles import HuntOptions, get_profile
    from fuzz.target import get, load_plugin
    from strategies.reuse import StructureMemo

    for plugin in args.plugin:
        load_plugin(plugin)
    name, backend = spec.split(":")
    options = HuntOptions.of(get_profile(args.profile), differential=False)
    memo = None
    reuse, cap = mode in ("reuse", "both", "whole"), mode in ("cap", "both", "whole")
    options = dataclasses.replace(
        options,
        reuse_share=args.share if reuse else None,
        compile_share=args.share if cap else None,
    )
    if reuse:
        memo = StructureMemo(
            target_share=args.share,
            seed=args.seed,
            fresh_lengths=False if mode == "whole" else None,
        )
    shapes: set[tuple[Any, ...]] = set()

    def before_example(case: Any) -> None:
        shapes.add(tuple(sorted((k, getattr(a, "shape", ())) for k, a in case.inputs.items())))

    r = hunt(
        get(name),
        backend,
        options,
        max_examples=args.examples,
        seed=args.seed,
        database=None,
        memo=memo,
        known=CLASSES,
        hooks=Hooks(before_example=before_example),
    )
    st = r.stats
    rejected = r.events.get("rejected: would compile", 0)
    ran = r.examples - rejected
    row: dict[str, Any] = {
        "target": name,
        "backend": backend,
        "mode": mode,
        "examples": ran,
        "rejected": rejected,
        "seconds": round(r.seconds, 2),
        "examples_per_second": round(ran / r.seconds, 2) if r.seconds else 0.0,
        "compiles": st.compiles,
        "compile_seconds": round(st.compile_seconds, 2),
        "compile_share": round(st.compile_seconds / r.seconds, 3) if r.seconds else 0.0,
        "failing": sum(r.known_hits.values()),
        "shapes": len(shapes),
        "tiles": round(r.events.get("hazard multi-kv-tile", 0) / ran, 3) if ran else 0.0,
        "error": r.error,
    }
    if memo is not None:
        row["memo"] = {**memo.counts, "explore_rate": round(memo.explore_rate, 3)}
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pairs", nargs="+", help="TARGET:BACKEND")
    p.add_argument("--examples", type=int, default=150)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", default="ci")
    p.add_argument("--share", type=float, default=0.25)
    p.add_argument("--plugin", action="append", default=[])
    p.add_argument("--modes", default="fresh,reuse")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one is not None:
        print(json.dumps(run_one(args.pairs[0], args.one, args)))
        return
    print(
        f"{'target':28} {'backend':16} {'mode':6} {'ex':>5} {'rej':>5} {'s':>7} {'ex/s':>7} "
        f"{'compiles':>8} {'compile s':>9} {'share':>6} {'failing':>7} {'shapes':>6} "
        f"{'tiles':>6}  memo"
    )
    for spec in args.pairs:
        for mode in args.modes.split(","):
            cmd = [sys.executable, "-m", "fuzz.devtools.reuse_bench", spec, "--one", mode]
            for flag in ("examples", "seed", "profile", "share"):
                cmd += [f"--{flag}", str(getattr(args, flag))]
            for plugin in args.plugin:
                cmd += ["--plugin", plugin]
            out = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
            if out.returncode != 0:
                print(f"{spec} {mode}: failed\n{out.stderr[-3000:]}", flush=True)
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            memo = r.get("memo", "")
            print(
                f"{r['target']:28} {r['backend']:16} {mode:6} {r['examples']:5} {r['rejected']:5} "
                f"{r['seconds']:7.1f} {r['examples_per_second']:7.2f} {r['compiles']:8} "
                f"{r['compile_seconds']:9.1f} {r['compile_share']:6.1%} {r['failing']:7} "
                f"{r['shapes']:6} {r['tiles']:6.1%}  {memo}"
                + (f"  ERROR {r['error']}" if r["error"] else ""),
                flush=True,
            )


if __name__ == "__main__":
    main()
