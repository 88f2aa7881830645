"""The seed-004 project's Pallas simple GLA, declared as that project's kernel needs, with no
padding in the plugin.

That project (a third-party Pallas/Triton ``chunk_simple_gla``; its code is not a package any
registry serves, so it is not vendored here) has two restrictions its users meet:

* its forward pads the token axis to a multiple of the chunk with zero tokens before its chunked
  kernels and cuts ``o`` back, but a per-head decay keeps decaying the state over the padded
  tokens: the final state is right only when ``T % chunk_size == 0``;
* its backward's chunk-local cumulative sums assert ``T % chunk_size == 0``.

``library_forward`` and ``library_backward`` model that library around this project's own Pallas
kernels (``kernels.simple_gla.pallas``): the padding below is the library's, not the plugin's.
The plugin part declares the rules (``fuzz.Constraint`` on the final state, ``fuzz.Lengths`` on
the token axis) and the strategies draw within them; ``tests/fuzz/test_plugin_walls.py`` checks
that both are needed and that, declared, the hunt is clean.
"""

from __future__ import annotations

import jax.numpy as jnp

import fuzz
from kernels.simple_gla import pallas

# The library (a model of the seed-004 project's behaviour) --------------------------------------


def library_forward(
    q, k, v, *, g_gamma, scale, initial_state, output_final_state, chunk_size, interpret
):
    t = q.shape[1]
    pad = [(0, 0), (0, -t % chunk_size), (0, 0), (0, 0)]  # zero tokens; the decay goes on
    q, k, v = (jnp.pad(x, pad) for x in (q, k, v))
    o, ht = pallas.chunk_simple_gla_fwd(
        q,
        k,
        v,
        g_gamma=g_gamma,
        scale=scale,
        initial_state=initial_state,
        output_final_state=output_final_state,
        chunk_size=chunk_size,
        interpret=interpret,
    )
    return o[:, :t], ht


def library_backward(q, k, v, do, *, g_gamma, scale, initial_state, dht, chunk_size, interpret):
    if q.shape[1] % chunk_size:
        raise ValueError(f"T={q.shape[1]} must be a multiple of chunk_size={chunk_size}")
    dq, dk, dv, _, dh0 = pallas.chunk_simple_gla_bwd(
        q,
        k,
        v,
        do,
        g_gamma=g_gamma,
        scale=scale,
        initial_state=initial_state,
        dht=dht,
        chunk_size=chunk_size,
        interpret=interpret,
    )
    return {"dq": dq, "dk": dk, "dv": dv, "dh0": dh0}


# The plugin ------------------------------------------------------------------------------------------


def whole_chunks(case):
    return case.inputs["q"].shape[1] % case.params["chunk_size"] == 0


FEATURES = {"g_gamma", "initial_state", "scale"}
TILES = {"chunk_size": (16, 32)}
fuzz.fuzz_kernel(
    "seed004_gla_fwd",
    family="simple_gla_fwd",
    kernel=library_forward,
    language="pallas",
    capabilities=fuzz.Capabilities(
        features=FEATURES | {"final_state"},
        tiles=TILES,
        constraints=[
            fuzz.Constraint(whole_chunks, "final state of a partial chunk", "final_state")
        ],
    ),
)
fuzz.fuzz_kernel(
    "seed004_gla_bwd",
    family="simple_gla_bwd",
    kernel=library_backward,
    language="pallas",
    capabilities=fuzz.Capabilities(
        features=FEATURES | {"dht"}, tiles=TILES, lengths={"T": fuzz.Lengths("chunk_size")}
    ),
)
