"""Where a fresh hunt's time goes, compiles included: for each (target, backend), one hunt of N
examples with the caches as they are, then the same examples again (warm).

    python -m fuzz.devtools.first_hunt TARGET[,TARGET] BACKEND[,BACKEND] [--examples 8] [--limit 150]
"""

from __future__ import annotations

import argparse
import time

from fuzz.engine import hunt
from fuzz.profiles import get_profile
from fuzz.target import get

p = argparse.ArgumentParser()
p.add_argument("targets")
p.add_argument("backends")
p.add_argument("--profile", default="gpu")
p.add_argument("--examples", type=int, default=8)
p.add_argument("--limit", type=float, default=150.0)
args = p.parse_args()
profile = get_profile(args.profile)
for name in args.targets.split(","):
    for backend in args.backends.split(","):
        for run in ("fresh", "warm"):
            t0 = time.perf_counter()
            r = hunt(
                get(name),
                backend,
                profile,
                max_examples=args.examples,
                seed=0,
                database=None,
                time_limit=args.limit,
                hard_limit=args.limit,
            )
            st = r.stats
            props = sorted(st.property_seconds.items(), key=lambda kv: -kv[1])[:5]
            print(
                f"{name:16} {backend:10} {run:5} {r.examples:3} ex {time.perf_counter() - t0:6.1f}s"
                f" launches {st.launches} ({st.launch_seconds:.1f}s, compiling {st.compile_seconds:.1f}s)"
                f" refs {st.reference_seconds:.1f}s props {[(k, round(v, 1)) for k, v in props]}",
                flush=True,
            )
