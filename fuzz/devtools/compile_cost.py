"""What one kernel variant costs to compile: for each (target, backend), N examples of the
profile's strategy, each launched twice (the first launch compiles whatever the example needs, the
second runs the compiled kernel). Prints the launches that compiled, the seconds per compile and
the run time once compiled. The caches are as they are: point ``KERNEL_FUZZ_CACHE_DIR`` (and
``TRITON_CACHE_DIR``) at an empty folder for a cold machine.

    python -m fuzz.devtools.compile_cost TARGET[,TARGET] BACKEND[,BACKEND] [--examples 12] [--profile gpu]
"""

from __future__ import annotations

import argparse
import statistics
import time

from fuzz.backends import adapter_for, get_backend
from fuzz.profiles import get_profile
from fuzz.target import draw_cases, get

COMPILED = 0.15  # a first launch this much slower than the second one compiled something


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("targets")
    p.add_argument("backends")
    p.add_argument("--profile", default="gpu")
    p.add_argument("--examples", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    profile = get_profile(args.profile)
    print(
        f"{'target':18} {'backend':17} {'ex':>3} {'compiled':>8} {'s/compile':>9} "
        f"{'max':>6} {'run ms':>7}"
    )
    for name in args.targets.split(","):
        t = get(name)
        drawn = draw_cases(t, profile.scale, args.examples, args.seed)
        for bname in args.backends.split(","):
            b = get_backend(bname)
            if b.unavailable_reason():
                print(f"{name:18} {bname:17} unavailable: {b.unavailable_reason()}")
                continue
            adapter = adapter_for(b)
            firsts, seconds = [], []
            for case in drawn:
                inputs = {k: adapter.put(v) for k, v in case.inputs.items()}
                times = []
                for _ in range(2):
                    adapter.synchronize()
                    t0 = time.perf_counter()
                    try:
                        out = t.kernels[b.impl](
                            inputs, dict(case.params), out=None, interpret=b.interpret
                        )
                        for v in out.values():
                            adapter.get(v)
                    except (ValueError, TypeError) as e:
                        print(f"   rejected: {e}")
                        break
                    times.append(time.perf_counter() - t0)
                if len(times) == 2:
                    firsts.append(times[0])
                    seconds.append(times[1])
            extra = [f - s for f, s in zip(firsts, seconds, strict=True) if f - s > COMPILED]
            per = statistics.mean(extra) if extra else 0.0
            print(
                f"{name:18} {bname:17} {len(firsts):3} {len(extra):8} {per:9.2f} "
                f"{max(extra, default=0):6.2f} {1e3 * statistics.median(seconds or [0]):7.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
