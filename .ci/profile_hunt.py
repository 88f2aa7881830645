"""Where one (target, backend)'s time goes: runs a hunt twice (compile, then the same examples
again) and prints the second run's cProfile, by own time and by cumulative time.

    python .ci/profile_hunt.py TARGET BACKEND [--profile gpu] [--examples 150]
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import pstats

from fuzz.engine import hunt
from fuzz.profiles import get_profile
from fuzz.target import get

p = argparse.ArgumentParser()
p.add_argument("target")
p.add_argument("backend")
p.add_argument("--profile", default="gpu")
p.add_argument("--examples", type=int, default=150)
p.add_argument("--no-differential", action="store_true")
args = p.parse_args()
profile = get_profile(args.profile)
if args.no_differential:
    profile = dataclasses.replace(profile, differential=False)
t = get(args.target)
hunt(t, args.backend, profile, max_examples=args.examples, seed=0, database=None)
prof = cProfile.Profile()
prof.enable()
r = hunt(t, args.backend, profile, max_examples=args.examples, seed=0, database=None)
prof.disable()
st = r.stats
print(
    f"{r.examples} examples, {r.examples_per_second:.1f}/s; launches {st.launches} "
    f"({st.launch_seconds:.2f}s, twin {st.twin_seconds:.2f}s, compile {st.compile_seconds:.2f}s), "
    f"references {st.reference_seconds:.2f}s, total {r.seconds:.2f}s"
)
print({k: round(v, 3) for k, v in sorted(st.property_seconds.items(), key=lambda kv: -kv[1])})
stats = pstats.Stats(prof)
stats.sort_stats("tottime").print_stats(25)
stats.sort_stats("cumulative").print_stats(45)
