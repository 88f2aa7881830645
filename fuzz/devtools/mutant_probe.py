"""Does a GLA mutant produce NaN on a backend for the minimal cases the interpreters shrink to?

python -m fuzz.devtools.mutant_probe [BACKEND ...]      (default: triton pallas-gpu)
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from fuzz.backends import get_backend
from fuzz.case import Case
from fuzz.properties import Context
from fuzz.target import get


def case(
    kind: str,
    t: int,
    h: int,
    *,
    gamma: float | None = None,
    gate: float | None = None,
    chunk: int = 16,
    h0: bool = False,
) -> Case:
    rng = np.random.default_rng(0)
    f32 = np.float32
    inputs = {n: rng.standard_normal((1, t, h, 16)).astype(f32) for n in ("q", "k", "v")}
    if gamma is not None:
        inputs["g_gamma"] = np.full(h, gamma, f32)
    else:
        inputs["g"] = np.full((1, t, h), gate, f32)
    if h0:
        inputs["h0"] = rng.standard_normal((1, h, 16, 16)).astype(f32)
    params = {"dtype": "float32", "chunk_size": chunk, "scale": None}
    if kind == "fwd":
        params["output_final_state"] = True
    else:
        inputs["do"] = rng.standard_normal((1, t, h, 16)).astype(f32)
    return Case(inputs, params)


CASES: dict[str, dict[str, Any]] = {
    "T=1 gamma=-6.0": dict(t=1, h=1, gamma=-6.0),
    "T=16 gamma=-6.0": dict(t=16, h=1, gamma=-6.0),
    "T=2 gates -1000": dict(t=2, h=1, gate=-1000.0),
    "T=16 gates -7": dict(t=16, h=1, gate=-7.0),
    "T=20 gamma=-6.0": dict(t=20, h=1, gamma=-6.0),
    "T=31 gamma=-6.0": dict(t=31, h=1, gamma=-6.0),
    "T=1 gamma=-1000": dict(t=1, h=1, gamma=-1000.0),
}
MUTANTS = (
    "simple_gla_fwd_mutant_mask_mul",
    "simple_gla_bwd_mutant_mask_mul",
    "simple_gla_fwd_mutant_anchor",
    "simple_gla_fwd",
)

for backend in sys.argv[1:] or ["triton", "pallas-gpu"]:
    for name in MUTANTS:
        target = get(name)
        kind = "fwd" if "_fwd" in name else "bwd"
        row = []
        for label, kw in CASES.items():
            try:
                ctx = Context(target, get_backend(backend), case(kind, **kw))
                outs = ctx.clean.outputs
                bad = [
                    n for n, a in outs.items() if not np.isfinite(np.asarray(a, np.float64)).all()
                ]
                row.append(f"{label}: {'NaN/Inf in ' + ','.join(bad) if bad else 'finite'}")
            except Exception as e:  # a probe: report and go on
                row.append(f"{label}: {type(e).__name__}: {str(e)[:80]}")
        print(f"{backend:10} {name}", *row, sep="\n    ", flush=True)
