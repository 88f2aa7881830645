"""Where one pair's examples spend their time: a hunt under cProfile, after a first hunt that
compiles what its examples need (the profiled one then meets a warm cache, as a campaign's later
slices do).

    python .ci/profile_hunt.py TARGET BACKEND [EXAMPLES] [--profile gpu] [--top 40]
    python .ci/profile_hunt.py fla_chunk_simple_gla_bwd triton 20 --plugin fuzz.clients.fla_simple_gla

Prints the hunt's examples/s and the functions with the most cumulative time (the kernel
launches, the float64 oracle, the naive reference, the error bound, each property).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzz.engine import hunt
from fuzz.profiles import get_profile
from fuzz.target import get, load_builtin, load_plugin_checked


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("target")
    p.add_argument("backend")
    p.add_argument("examples", type=int, nargs="?", default=40)
    p.add_argument("--profile", default="gpu")
    p.add_argument("--top", type=int, default=40)
    p.add_argument(
        "--plugin", action="append", default=[], help="a plugin to load first (a path or module)"
    )
    args = p.parse_args()
    load_builtin()
    for spec in args.plugin:
        load_plugin_checked(spec)
    target, profile = get(args.target), get_profile(args.profile)
    kw = dict(max_examples=args.examples, database=None)
    t0 = time.perf_counter()
    warm = hunt(target, args.backend, profile, seed=1, **kw)
    print(f"warm-up: {warm.examples} examples in {time.perf_counter() - t0:.1f} s", flush=True)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    r = hunt(target, args.backend, profile, seed=2, **kw)
    prof.disable()
    took = time.perf_counter() - t0
    print(f"profiled: {r.examples} examples in {took:.1f} s ({r.examples / took:.2f}/s)")
    stats = pstats.Stats(prof)
    # The project's own functions (the chain of Hypothesis's above them says nothing).
    stats.sort_stats("cumulative").print_stats(r"/(fuzz|oracles|kernels|strategies|fla)/", args.top)
    stats.sort_stats("tottime").print_stats(args.top // 2)


if __name__ == "__main__":
    main()
