"""What a compile refused at JAX's persistent-cache miss leaves behind: JAX's tracing context (the
values its in-memory caches key on) before and after one refusal, for a plain jitted function
and for a Pallas kernel. On an H100 (JAX 0.11.2) a refusal left the context one value longer,
and every program launched after it missed the in-memory caches and the persistent cache
entries written before it.

    python .ci/trace_context_probe.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("KERNEL_FUZZ_CACHE_DIR", tempfile.mkdtemp())

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import config as jax_config

from fuzz import timing
from fuzz.backends import enable_jax_compilation_cache

enable_jax_compilation_cache()
timing.install()


def context() -> list[str]:
    return [repr(v)[:160] for v in jax_config.trace_context()]


def local_states() -> dict[str, str]:
    """Every config state's thread-local value that is set (name -> repr)."""
    out = {}
    holders = getattr(jax_config.config, "_value_holders", {})
    for name, holder in holders.items():
        get_local = getattr(holder, "get_local", None)
        if get_local is None:
            continue
        try:
            value = get_local()
        except Exception:
            continue
        if value is not getattr(jax_config, "unset", object()) and repr(value) != "<unset>":
            out[name] = repr(value)[:160]
    return out


def diff(title: str, before: list[str], after: list[str], lb: dict, la: dict) -> None:
    print(f"{title}: trace context {len(before)} -> {len(after)} values")
    for i in range(max(len(before), len(after))):
        b = before[i] if i < len(before) else "-"
        a = after[i] if i < len(after) else "-"
        if a != b:
            print(f"   [{i}] {b} -> {a}")
    for name in sorted(set(lb) | set(la)):
        if lb.get(name) != la.get(name):
            print(f"   local {name}: {lb.get(name)} -> {la.get(name)}")


def refuse(fn, *args, **kw) -> str:
    with timing.no_new_compiles():
        try:
            fn(*args, **kw)
            return "ran"
        except timing.NewCompile:
            return "refused"


@jax.jit
def plain(x):
    return jnp.sin(x) * 2


before, lb = context(), local_states()
print("plain jit:", refuse(plain, jnp.ones(8)))
diff("plain jit", before, context(), lb, local_states())

from kernels.attention import pallas as attn  # noqa: E402

rng = np.random.default_rng(0)
q = jnp.asarray(rng.standard_normal((1, 2, 40, 32), np.float32))
k = jnp.asarray(rng.standard_normal((1, 2, 50, 32), np.float32))
v = jnp.asarray(rng.standard_normal((1, 2, 50, 32), np.float32))
before, lb = context(), local_states()
print("pallas attention:", refuse(attn.attention, q, k, v, block_q=32, block_k=32))
diff("pallas attention", before, context(), lb, local_states())
before, lb = context(), local_states()
attn.attention(q, k, v, block_q=32, block_k=32)
print("pallas attention compiled outside the refusal")
diff("pallas attention, compiled", before, context(), lb, local_states())
