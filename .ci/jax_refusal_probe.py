"""Whether a Pallas kernel that another process compiled loads where nothing may compile
(``fuzz.timing.no_new_compiles``: a JAX compile is refused at its persistent-cache miss, not at
lowering). One process compiles two kernels into a fresh cache, a second runs them inside
``no_new_compiles``: both should run (loaded), none be refused.

    python .ci/jax_refusal_probe.py
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, ".")
mode = sys.argv[1] if len(sys.argv) > 1 else "parent"
if mode == "parent":
    env = {**os.environ, "KERNEL_FUZZ_CACHE_DIR": tempfile.mkdtemp(prefix="refusal-probe-")}
    for step in ("compile", "check"):
        out = subprocess.run(
            [sys.executable, __file__, step], capture_output=True, text=True, env=env, timeout=280
        )
        print(out.stdout.strip(), flush=True)
        if out.returncode:
            print(out.stderr.strip()[-1500:], flush=True)
    sys.exit(0)

import jax  # noqa: E402

from fuzz import timing  # noqa: E402
from fuzz.backends import enable_jax_compilation_cache  # noqa: E402

enable_jax_compilation_cache()
timing.install()
print(
    f"{mode}: jax {jax.__version__}, miss hook {timing._jax_miss_hook}, defers {timing._jax_defers()}"
)
sys.path.insert(0, "tests/kernels")
from test_pallas_buckets import _dense, _gla_fwd  # noqa: E402

for launch in (_dense, _gla_fwd):
    scope = timing.no_new_compiles() if mode == "check" else timing.LaunchTimer()
    try:
        with scope:
            jax.block_until_ready(launch(17, interpret=False))
        said = "ran"
    except timing.NewCompile:
        said = "refused"
    hits, misses = timing.cache_counts()
    print(f"{mode}: {launch.__name__} {said}; cache hits {hits}, misses {misses}", flush=True)
