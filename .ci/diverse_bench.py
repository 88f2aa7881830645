"""What diverse explorations (``strategies.reuse.StructureMemo.diverse``) change in the structures
a rationed pair launches, on the CPU, with no kernel run: each case drawn under a memo is only
counted. Two measures, each with ``diverse`` 0 (Hypothesis's generator draws every explored
structure) and 8:

- planted round 3's Pallas GQA kernel (``planted3_attention_gqa_v_head_pallas``, interpreted kind,
  explore rate 0.3): the share of cases with GQA of two or more kv heads, its bug's trigger;
- fla's compiled backward (``fla_chunk_simple_gla_bwd``, a warm-up: every example explores): the
  (K, V) pairs and (K, V, dtype) triples among the structures explored, and how many structures
  came before the first with K = 16, V >= 64 in a half type (its dq bug's condition on Hopper).

    python .ci/diverse_bench.py [--examples N] [--seeds S]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _run(strategy, body, examples, seed):
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    test = given(strategy)(lambda value: body(value))
    test = settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )(test)
    hypothesis_seed(seed)(test)()


def gqa(examples: int, seed: int, diverse: int) -> str:
    from fuzz.target import get
    from strategies.reuse import StructureMemo

    strategy = get("planted3_attention_gqa_v_head_pallas").strategy("small", kind=("interpreted",))
    memo = StructureMemo(explore=0.3, seed=seed, diverse=diverse)
    n = hit = 0

    def body(case):
        nonlocal n, hit
        hq, hkv = case.inputs["q"].shape[1], case.inputs["k"].shape[1]
        n += 1
        hit += hkv >= 2 and hq > hkv
        memo.observe(0.5, 1.0)

    with memo.active():
        _run(strategy, body, examples, seed)
    return f"{hit}/{n} cases GQA with >= 2 kv heads"


def fla(examples: int, seed: int, diverse: int) -> str:
    from fuzz.target import get
    from strategies.reuse import StructureMemo

    strategy = get("fla_chunk_simple_gla_bwd").strategy("large", kind=("compiled",))
    memo = StructureMemo(explore=1.0, seed=seed, diverse=diverse)
    seen: list[tuple[int, int, str]] = []
    first = None

    def body(case):
        nonlocal first
        k, v = case.inputs["q"].shape[-1], case.inputs["v"].shape[-1]
        key = (k, v, case.params["dtype"])
        if key not in seen:
            seen.append(key)
            if first is None and k == 16 and v >= 64 and key[2] != "float32":
                first = len(seen)
        memo.observe(1.0, 1.0)

    with memo.active(), memo.warming():
        _run(strategy, body, examples, seed)
    pairs = {(k, v) for k, v, _ in seen}
    return (
        f"{memo.counts['explored']} explored: {len(pairs)} (K, V), {len(seen)} (K, V, dtype); "
        f"K=16, V>=64, half at #{first or '-'}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=150)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    if args.examples < 1 or args.seeds < 1:
        ap.error("--examples and --seeds must be >= 1")
    from fuzz.target import load_plugin

    load_plugin(str(ROOT / "tests/plugins/planted3_pallas.py"))
    measures = [("planted3 GQA", gqa)]
    try:
        load_plugin("fuzz.clients.fla_simple_gla")
        measures.append(("fla backward", fla))
    except Exception as e:  # the clients extra is not installed
        print(f"fla backward: skipped ({type(e).__name__}: {e})")
    for name, measure in measures:
        for seed in range(args.seeds):
            for diverse in (0, 8):
                print(
                    f"{name}, seed {seed}, diverse {diverse}: {measure(args.examples, seed, diverse)}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
