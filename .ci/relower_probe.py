"""Does a process lower the same Pallas attention program more than once? A GPU campaign worker
of ``attention_reverse_kv`` logged 643 persistent-cache hits of one program in 209 examples
(``JAX_LOG_COMPILES=1``): each launch lowered the program again and loaded it from disk, where
JAX's in-memory caches should have answered. This probe counts lowerings per launched program
(arrays, tiles, group) in one process, first for repeated launches of one case, then over a
hunt whose compile share is spent (refusals between launches), and prints what JAX's caches
held.

    python .ci/relower_probe.py [backend] [examples]     (pallas-gpu, 80; pallas-interpret on CPU)
"""

from __future__ import annotations

import collections
import dataclasses
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jax

from fuzz import timing
from fuzz.backends import enable_jax_compilation_cache
from fuzz.campaign.worker import checked_strategy
from fuzz.engine import hunt
from fuzz.profiles import HuntOptions, get_profile
from fuzz.target import get
from kernels.attention.reformulations import REFORMULATIONS
from strategies.reuse import StructureMemo

backend = sys.argv[1] if len(sys.argv) > 1 else "pallas-gpu"
n_examples = int(sys.argv[2]) if len(sys.argv) > 2 else 80
if backend != "pallas-interpret":
    import os

    os.environ.setdefault("KERNEL_FUZZ_CACHE_DIR", tempfile.mkdtemp())
    enable_jax_compilation_cache()
timing.install()

lowerings = [0]


def on_duration(event: str, duration: float, **_: object) -> None:
    if "to_mlir" in event:
        lowerings[0] += 1


jax.monitoring.register_event_duration_secs_listener(on_duration)
# Which JAX config states are defined after start-up (a module imported late): one included in
# the tracing context changes every in-memory cache key.
try:
    import traceback

    from jax._src import config as _jax_config

    _real_init = _jax_config.State.__init__

    def _noting_init(self, name, *args, **kwargs):
        _real_init(self, name, *args, **kwargs)
        if kwargs.get("include_in_trace_context"):
            frames = [f for f in traceback.extract_stack()[:-1] if "/jax/" not in f.filename]
            where = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in frames[-4:])
            print(f"config state {name!r} defined (in the tracing context) from {where}")

    _jax_config.State.__init__ = _noting_init
except Exception as e:
    print("config states not watched:", e)
fastpath: collections.Counter = collections.Counter()
try:  # whether JAX's C++ dispatch takes over a program after its first call
    from jax._src import pjit as _pjit

    _real_fastpath = _pjit._get_fastpath_data

    def _counting_fastpath(*args, **kwargs):
        data = _real_fastpath(*args, **kwargs)
        fastpath["none" if data is None else "set"] += 1
        return data

    _pjit._get_fastpath_data = _counting_fastpath
except Exception as e:
    print("fast path not counted:", e)
mod = next(r for r in REFORMULATIONS if r.name == "reverse_kv").module("pallas")
real = mod._attention_padded
calls: collections.Counter = collections.Counter()
lowered: collections.Counter = collections.Counter()
refused: collections.Counter = collections.Counter()


def context_values() -> list[str]:
    try:
        from jax._src import config

        return [repr(v)[:200] for v in config.trace_context()]
    except Exception:
        return []


def recording(*args, static, group, interpret):
    sig = (tuple((a.shape, str(a.dtype)) for a in args), static, group)
    before = lowerings[0]
    values = context_values()
    modules = set(sys.modules)
    holders = set(getattr(__import__("jax._src.config").config, "_value_holders", ()))
    try:
        return real(*args, static=static, group=group, interpret=interpret)
    except timing.NewCompile:
        refused[sig] += 1
        raise
    finally:
        if trace_context_size() != size[0]:
            print(f"trace context {size[0]} -> {trace_context_size()} at launch of {sig[1]}")
            now = context_values()
            import difflib

            print("      changed during the launch:", values != now)
            from jax._src import config as _c

            new_holders = set(getattr(_c.config, "_value_holders", ())) - holders
            print("      config options defined meanwhile:", sorted(new_holders)[:20])
            print("      modules imported meanwhile:", sorted(set(sys.modules) - modules)[:40])
            for line in difflib.unified_diff(last[0], now, lineterm="", n=0):
                print("     ", line)
            size[0] = trace_context_size()
        last[0] = context_values()
        calls[sig] += 1
        lowered[sig] += lowerings[0] - before


mod._attention_padded = recording
size = [-1]
last: list[list[str]] = [[]]


def trace_context_size() -> int:
    try:
        from jax._src import config

        return len(config.trace_context())
    except Exception:
        return -1


def cache_info() -> str:
    from jax._src import pjit

    out = []
    for name in ("_pjit_lower", "_create_pjit_jaxpr"):
        fn = getattr(pjit, name, None)
        info = getattr(fn, "cache_info", None)
        out.append(f"{name}: {info() if info else 'no cache_info'}")
    return "; ".join(out)


def report(title: str) -> None:
    again = {s: (calls[s], lowered[s], refused[s]) for s in calls if lowered[s] > 1}
    print(
        f"{title}: {sum(calls.values())} launches of {len(calls)} programs, "
        f"{sum(lowered.values())} lowerings, {sum(refused.values())} refused; "
        f"{len(again)} programs lowered more than once; trace context {trace_context_size()}"
    )
    for sig, (n, low, ref) in sorted(again.items(), key=lambda kv: -kv[1][1])[:6]:
        print(
            f"   launched {n}, lowered {low}, refused {ref}: {sig[1]} group {sig[2]} q {sig[0][5]}"
        )
    print("  ", cache_info(), "; fast-path data:", dict(fastpath))
    fastpath.clear()
    calls.clear()
    lowered.clear()
    refused.clear()


target = checked_strategy(get("attention_reverse_kv"))
options = dataclasses.replace(
    HuntOptions.of(get_profile("gpu" if backend != "pallas-interpret" else "ci")),
    reuse_share=0.25,
    max_examples=n_examples,
)
print("trace context before any launch:", trace_context_size())
warm = StructureMemo(target_share=0.25, seed=1)
first = hunt(
    target,
    backend,
    dataclasses.replace(options, compile_share=None),
    max_examples=n_examples,
    seed=5,
    database=None,
    memo=warm,
)
print(
    "hunt 1:",
    first.examples,
    "examples",
    first.error or "",
    {k: v for k, v in first.events.items() if not k.startswith("hazard")},
)
report("hunt 1 (no share)")
memo = StructureMemo(target_share=0.25, seed=2)
memo.take_in(warm.export())
memo.explore = 0.5
second = hunt(
    target,
    backend,
    dataclasses.replace(options, compile_share=0.25),
    max_examples=n_examples,
    seed=7,
    database=None,
    memo=memo,
    compile_spent=(100.0, 110.0),
)
print(
    "hunt 2:",
    second.examples,
    "examples",
    second.error or "",
    {k: v for k, v in second.events.items() if not k.startswith("hazard")},
)
report("hunt 2 (share spent: refusals between launches)")
