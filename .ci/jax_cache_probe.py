"""Whether a kernel one process compiled loads in another: the first cases of a target, launched
in this process with each launch's compile time and persistent-cache hits and misses
(``fuzz.timing``). Run it twice: a second process should only load.

    python .ci/jax_cache_probe.py [TARGET] [BACKEND] [N]     (default attention pallas-gpu 3)

With ``JAX_EXPLAIN_CACHE_MISSES=1`` JAX logs why each compile missed its persistent cache.
"""

import os
import sys

sys.path.insert(0, ".")

from fuzz import timing
from fuzz.backends import adapter_for, get_backend
from fuzz.target import draw_cases, get

name, backend, n = (sys.argv[1:] + ["attention", "pallas-gpu", "3"][len(sys.argv) - 1 :])[:3]
if os.environ.get("JAX_EXPLAIN_CACHE_MISSES"):
    import jax

    jax.config.update("jax_explain_cache_misses", True)
target, b = get(name), get_backend(backend)
adapter = adapter_for(b)
entry = target.kernels[b.impl]
for case in draw_cases(target, "large", int(n), 0):
    inputs = {k: adapter.put(v) for k, v in case.inputs.items()}
    outputs = target.outputs(case) if target.outputs is not None else {}
    bufs = {k: adapter.alloc(tuple(s), d, 0.0).array for k, (s, d) in outputs.items()}
    out = bufs if target.library.writes_out else None
    hits, misses = timing.cache_counts()
    with timing.LaunchTimer() as t:
        entry(inputs, dict(case.params), out=out, interpret=b.interpret)
        adapter.synchronize()
    h, m = timing.cache_counts()
    print(
        f"pid {os.getpid()} {case.shapes()} {dict(case.params)}: {t.seconds:.2f} s, compiled "
        f"{t.compiled}, loaded {t.loaded}, cache hits {h - hits}, misses {m - misses}",
        flush=True,
    )
