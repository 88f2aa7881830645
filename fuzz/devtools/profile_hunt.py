"""Where one (target, backend)'s time goes: runs a hunt twice (compile, then the same examples
again) and prints the second run's cProfile, by own time and by cumulative time.

    python -m fuzz.devtools.profile_hunt TARGET BACKEND [--profile gpu] [--examples 150] [--stub]

``--stub`` (torch backends): the kernel is replaced by the target's fp64 oracle computed on the
host and rounded once to the output dtypes, so that the harness's own host-side cost at GPU
shapes can be profiled on a machine without a GPU (with ``triton-interpret``: no interpreter
time, no differential). Only a real target: a mutant's stub would not be a mutant.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import hashlib
import json
import pstats

import numpy as np

from fuzz.arrays import dtype_name, np_dtype
from fuzz.backends import TorchAdapter
from fuzz.case import Case
from fuzz.engine import hunt
from fuzz.profiles import get_profile
from fuzz.target import get

p = argparse.ArgumentParser()
p.add_argument("target")
p.add_argument("backend")
p.add_argument("--profile", default="gpu")
p.add_argument("--examples", type=int, default=150)
p.add_argument("--no-differential", action="store_true")
p.add_argument("--stub", action="store_true")
p.add_argument("--callers", nargs="*", default=[], help="also print who calls these")
args = p.parse_args()
profile = get_profile(args.profile)
if args.no_differential or args.stub:
    profile = dataclasses.replace(profile, differential=False)
t = get(args.target)
if args.stub:  # references on the host too: their time is reported apart ("references")
    profile = dataclasses.replace(profile, ref_device="cpu", needs_gpu=False)
    adapter = TorchAdapter("cpu")

    memo: dict[str, dict[str, np.ndarray]] = {}

    def stub(inputs, params, *, out, interpret):
        case = Case({k: adapter.get(v) for k, v in inputs.items()}, dict(params))
        h = hashlib.blake2b(json.dumps(dict(params), sort_keys=True, default=str).encode())
        for k in sorted(case.inputs):
            h.update(k.encode() + str(case.inputs[k].dtype).encode() + case.inputs[k].tobytes())
        ref = memo.get(h.hexdigest())
        if ref is None:  # the same inputs run several times (clean, repeat, poisoned outputs)
            ref = memo[h.hexdigest()] = dict(t.oracle(case, "cpu"))
            if out is None:
                naive = t.naive(case, "cpu")
                ref = {k: v.astype(naive[k].dtype) for k, v in ref.items()}
        res = {}
        for name, a in ref.items():
            if out is not None and name in out:  # the oracle rounded once to the output's dtype
                a = a.astype(np_dtype(dtype_name(out[name].dtype)))
            host = adapter.put(np.ascontiguousarray(a))
            if out is not None and name in out:
                out[name].copy_(host)
                res[name] = out[name]
            else:
                res[name] = host
        return res

    t = dataclasses.replace(t, kernels={**t.kernels, "triton": stub})
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
stats.sort_stats("tottime").print_stats(45)
stats.sort_stats("cumulative").print_stats(45)
if args.callers:
    for pattern in args.callers:
        stats.print_callers(pattern)
