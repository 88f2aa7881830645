"""Shared memory of the Pallas simple-GLA kernels on this GPU, per tile and head dims.

    python -m fuzz.devtools.gla_smem

For each (K, V) and forced tile, runs the forward and the backward once at chunk 128 (fp32) and
prints "ok" with the time, or the shared memory the Triton lowering asked for.
"""

from __future__ import annotations

import re
import time

import jax
import jax.numpy as jnp
import numpy as np

from kernels.simple_gla import pallas as P


def one(kind: str, k_dim: int, v_dim: int, tile: int, chunk: int = 128, t: int = 300) -> str:
    P._tile_for = lambda p, interpret: min(tile, p.chunk_size)  # type: ignore[assignment]
    rng = np.random.default_rng(0)
    q, k = (jnp.asarray(rng.standard_normal((1, t, 2, k_dim)), jnp.float32) for _ in range(2))
    v = jnp.asarray(rng.standard_normal((1, t, 2, v_dim)), jnp.float32)
    gamma = jnp.asarray([-0.1, -0.5], jnp.float32)
    t0 = time.perf_counter()
    try:
        if kind == "fwd":
            o, _ = P.chunk_simple_gla_fwd(
                q, k, v, g_gamma=gamma, chunk_size=chunk, output_final_state=True
            )
            o.block_until_ready()
        else:
            do = jnp.ones_like(v)
            dq = P.chunk_simple_gla_bwd(q, k, v, do, g_gamma=gamma, chunk_size=chunk)[0]
            dq.block_until_ready()
    except Exception as e:
        m = re.search(r"requested (\d+)", str(e))
        return f"smem {int(m.group(1)) // 1024} KiB" if m else f"{type(e).__name__}: {str(e)[:120]}"
    return f"ok {time.perf_counter() - t0:.1f}s"


def main() -> None:
    print(jax.devices())
    for k_dim, v_dim in ((16, 16), (64, 16), (64, 64), (128, 16), (128, 128)):
        for tile in (64, 32, 16):
            row = [one(kind, k_dim, v_dim, tile) for kind in ("fwd", "bwd")]
            print(
                f"K={k_dim:3} V={v_dim:3} tile={tile:2}  fwd {row[0]:28} bwd {row[1]}", flush=True
            )


if __name__ == "__main__":
    main()
