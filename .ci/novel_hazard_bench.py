"""Structures with a new hazard admitted past the compile share (``fuzz.engine.NOVEL_SHARE``):
single hunts of a planted Pallas kernel on the Pallas interpreter under the gpu profile's
narrowing (oracles on the CPU), with and without that pot, as a campaign slice whose pair has
spent its compile share (``compile_spent``).

    python .ci/novel_hazard_bench.py [--target planted3_attention_gqa_v_head_pallas]
        [--seeds 1 3 4] [--examples 80]

Each hunt starts with a memo of its own, as a slice in a new worker process does (Pallas
interpret pairs are not compiled ahead): with the share spent, it knows no structure to reuse.
Prints, per seed and setting: examples checked, the bug found (its first example and size),
the admissions and the refusals. The planted GQA kernel's bug needs grouped heads (4 query
heads on 2 kv heads), which fresh draws have 3 times in 4; its GPU campaign pair spent its
share on its first, simplest structures and never checked one.
"""

import argparse
import dataclasses
import subprocess
import sys
import time

import fuzz.engine as engine
import fuzz.target as registry
from fuzz.narrowing import run_narrowing
from fuzz.profiles import get_profile

PLUGIN = "tests/plugins/planted3_pallas.py"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="planted3_attention_gqa_v_head_pallas")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 3, 4])
    ap.add_argument("--examples", type=int, default=80)
    ap.add_argument(
        "--spent",
        type=float,
        nargs=3,
        default=[15.0, 100.0, 1.0],
        metavar=("COMPILED", "SECONDS", "PER_COMPILE"),
        help="the pair's history: compile seconds, seconds, seconds per compile",
    )
    ap.add_argument("--only", choices=("with", "without"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.only is None:
        # Each setting in a process of its own: JAX's compiled programs stay in the process,
        # and a setting run after the other would load what the first compiled.
        print(f"{args.target} on pallas-interpret, {args.examples} examples, spent {args.spent}")
        for only in ("with", "without"):
            subprocess.run([sys.executable, *sys.argv, "--only", only], check=True)
        return
    registry.load_builtin()
    registry.load_plugin(PLUGIN)
    target = registry.get(args.target)
    profile = dataclasses.replace(get_profile("gpu"), ref_device="cpu", needs_gpu=False)
    setting = "with the pot" if args.only == "with" else "without"
    if args.only == "without":
        engine.NOVEL_SHARE = 0.0
    for seed in args.seeds:
        t0 = time.perf_counter()
        r = engine.hunt(
            target,
            "pallas-interpret",
            profile,
            max_examples=args.examples,
            seed=seed,
            database=None,
            narrowing=run_narrowing(target, profile, seed),
            compile_spent=tuple(args.spent),
        )
        found = {c: (f.first_example, f.case.size) for c, f in r.found.items()}
        print(
            f"  {setting:12} seed {seed}: {r.examples:4} examples, found {found or '-'}, "
            f"admitted {r.events.get('admitted past the share: a new hazard', 0)}, "
            f"refused {r.events.get('rejected: would compile', 0)}, "
            f"{time.perf_counter() - t0:.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
