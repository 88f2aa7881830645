"""Which Triton binaries each target's cases would compile, without a GPU, and any that a length
selects (``fuzz.triton_keys``: how the keys are computed and the cases grouped). Exit status 1
when one does.

    python -m fuzz.devtools.triton_keys [TARGET...] [--examples 200] [--scale small] [--mutants]
        [--reused]
"""

from __future__ import annotations

import argparse

from fuzz.target import get
from fuzz.triton_keys import reused_keys, target_keys, triton_targets


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("targets", nargs="*", default=["*"])
    p.add_argument("--examples", type=int, default=200)
    p.add_argument("--scale", default="small", choices=("small", "large"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mutants", action="store_true", help="mutants and reformulations too")
    p.add_argument(
        "--reused",
        action="store_true",
        help="draw as a campaign's fuzzing does (reused variants, fresh lengths and values) and "
        "group by variant",
    )
    args = p.parse_args()
    bad = 0
    for t in triton_targets(",".join(args.targets), mutants=args.mutants):
        keys = (reused_keys if args.reused else target_keys)(
            get(t.name), scale=args.scale, examples=args.examples, seed=args.seed
        )
        lines = keys.recompiles()
        bad += bool(lines)
        print(
            f"{t.name:44} groups {len(keys.groups):4} with lengths varied {keys.varied:4} "
            f"recompiling {len(lines):3} wrapper errors {len(keys.errors)}",
            flush=True,
        )
        for line in lines[:5]:
            print("   ", line[:400])
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
