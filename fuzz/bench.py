"""Throughput benchmark: examples/s per target and backend, and where the time goes.

    python -m fuzz.bench [--profile gpu] [--targets 'softmax'] [--examples 300] [--seed 0]
                         [--procs N]

Every example runs every property of the profile (oracle, naive reference, guard bands, poisoned
outputs, determinism, masked poisoning, the target's own properties, and, in the gpu profile, the
compiled-vs-interpreted differential within its cost cap). Each (target, backend) runs three
passes: one that compiles whatever its examples need, one on fresh examples (what a campaign
still meeting new kernel variants sees) and one replaying the first pass's examples (every variant
compiled: the steady state). Columns: share of time compiling, in the interpreted twin, in the
fp64 oracle + naive reference, in the kernel launches, and the three slowest properties. A bare
loop (one Hypothesis example = one kernel launch + one fp64 check) is timed for comparison.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from fuzz.campaign.threads import threads_for
from fuzz.cli import count_arg
from fuzz.engine import HuntResult, hunt
from fuzz.profiles import HuntOptions, default_profile, get_profile
from fuzz.target import get, select
from strategies.reuse import StructureMemo


def _bare_loop(target_name: str, backend: str, options: HuntOptions, examples: int) -> float:
    """Examples/s of a bare Hypothesis loop: draw, launch once, compare with fp64 once."""
    import numpy as np
    from hypothesis import given, settings
    from hypothesis import seed as hypothesis_seed

    from fuzz.backends import adapter_for, get_backend
    from fuzz.target import get

    t = get(target_name)
    b = get_backend(backend)
    adapter = adapter_for(b)
    count = 0

    def loop(case):
        nonlocal count
        count += 1
        inputs = {k: adapter.put(v) for k, v in case.inputs.items()}
        got = t.kernels[b.impl](inputs, dict(case.params), out=None, interpret=b.interpret)
        ref = t.oracle(case, options.ref_device)
        for name, r in ref.items():
            k = adapter.get(got[name]).astype(np.float64)
            assert k.shape == r.shape

    def run(seed: int) -> None:
        test = given(t.strategy(options.scale))(loop)
        test = settings(options.settings, max_examples=examples, database=None, derandomize=False)(
            test
        )
        hypothesis_seed(seed)(test)()

    run(0)  # warm-up: compiles
    count = 0
    t0 = time.perf_counter()
    run(1)
    return count / (time.perf_counter() - t0)


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "   - "


def _row(label: str, warm: HuntResult, r: HuntResult) -> str:
    st = r.stats
    per = st.launches / r.examples if r.examples else 0.0
    props = sorted(st.property_seconds.items(), key=lambda kv: -kv[1])[:3]
    top = ", ".join(f"{k} {100 * v / r.seconds:.0f}%" for k, v in props) if r.seconds else ""
    return (
        f"{r.target:30} {r.backend:17} {label:6} {warm.examples_per_second:8.1f} "
        f"{r.examples_per_second:7.1f} {_share(st.compile_seconds, r.seconds)} "
        f"{_share(st.twin_seconds, r.seconds)} {_share(st.reference_seconds, r.seconds)} "
        f"{_share(st.launch_seconds - st.twin_seconds, r.seconds)} {per:9.2f} {r.status:>7}  {top}"
        + (f"  ERROR {r.error}" if r.error else "")
    )


def _passes(
    name: str, backend: str, options: HuntOptions, examples: int, seed: int, sync: Any = None
) -> tuple[HuntResult, HuntResult, HuntResult]:
    """Pass 1 compiles what its examples need. Pass 2 ("fresh") draws new examples: what a
    campaign that is still meeting new shapes and configurations sees. Pass 3 ("warm") replays
    pass 1's examples: every kernel variant already compiled, the steady state of a long campaign
    whose variants have all been met. Where the profile reuses case structures
    (``Profile.reuse_share``) the three share one memo, as a campaign's rounds of a pair do: pass
    2 reuses what pass 1 compiled, and pass 3 draws from pass 1's seed what the memo then
    chooses (its choices follow measured costs: not pass 1's examples exactly). ``sync``
    (parallel runs) is called before passes 2 and 3, so that the processes measure them at the
    same time."""
    t = get(name)
    memo = None if options.reuse_share is None else StructureMemo(target_share=options.reuse_share)
    kw: dict[str, Any] = {"max_examples": examples, "database": None, "memo": memo}
    first = hunt(t, backend, options, seed=seed, **kw)
    if sync is not None:
        sync()
    fresh = hunt(t, backend, options, seed=seed + 1, **kw)
    if sync is not None:
        sync()
    again = hunt(t, backend, options, seed=seed, **kw)
    return first, fresh, again


def _record(fresh: HuntResult, again: HuntResult) -> dict[str, Any]:
    """One pass pair as numbers (``--json``)."""

    def one(r: HuntResult) -> dict[str, Any]:
        st = r.stats
        return {
            "examples": r.examples,
            "seconds": round(r.seconds, 3),
            "examples_per_second": round(r.examples_per_second, 3),
            "compiles": st.compiles,
            "compile_seconds": round(st.compile_seconds, 3),
            "rejected_would_compile": r.events.get("rejected: would compile", 0),
            "error": r.error,
        }

    return {"fresh": one(fresh), "warm": one(again)}


def _child(
    pairs: list[tuple[str, str]],
    options: HuntOptions,
    examples: int,
    seed: int,
    barrier: Any,
    results: Any,
    slot: int,
) -> None:
    for name, b in pairs:
        first, fresh, again = _passes(name, b, options, examples, seed, barrier.wait)
        results.put(
            (
                slot,
                _row("fresh", first, fresh),
                _row("warm", first, again),
                fresh.examples_per_second,
                again.examples_per_second,
                _record(fresh, again),
            )
        )


def _parallel(
    pairs: list[tuple[str, str]], options: HuntOptions, examples: int, seed: int, procs: int
) -> list[dict[str, Any]]:
    """``procs`` processes on one machine (one GPU), each running every pair's passes with seeds
    of its own; the passes of one pair start together. Prints each process's rows and the sum
    of their rates: the throughput of ``procs`` workers sharing the GPU (a campaign's
    ``--workers``, ``pytest -n``)."""
    import multiprocessing as mp

    from fuzz.campaign.threads import share_cpus

    threads = share_cpus(procs)  # inherited by the children, before they load NumPy and torch
    print(f"{procs} processes, {threads or 'default'} CPU thread(s) each", flush=True)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    children = [
        ctx.Process(
            target=_child, args=(pairs, options, examples, seed + 1000 * i, barrier, results, i)
        )
        for i in range(procs)
    ]
    for c in children:
        c.start()
    records = []
    for name, b in pairs:
        rows = sorted((results.get() for _ in range(procs)), key=lambda r: r[0])
        for slot, fresh_row, warm_row, *_ in rows:
            print(f"[{slot}] {fresh_row}\n[{slot}] {warm_row}", flush=True)
        fresh = sum(r[3] for r in rows)
        warm = sum(r[4] for r in rows)
        print(
            f"{name:30} {b:17} {procs} processes on one GPU: fresh {fresh:.1f} ex/s, "
            f"warm {warm:.1f} ex/s (sum of the processes' rates)",
            flush=True,
        )
        records.append(
            {
                "target": name,
                "backend": b,
                "procs": procs,
                "fresh_examples_per_second": round(fresh, 3),
                "warm_examples_per_second": round(warm, 3),
                "processes": [r[5] for r in rows],
            }
        )
    for c in children:
        c.join()
    return records


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fuzz.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", default=None)
    p.add_argument("--targets", default="softmax")
    p.add_argument("--backends", default=None, help="comma-separated (default: the profile's)")
    p.add_argument("--examples", type=count_arg, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--no-differential", action="store_true", help="measure without the differential"
    )
    p.add_argument("--bare", action="store_true", help="also time the bare loop")
    p.add_argument("--json", default=None, help="also write the numbers to this file")
    p.add_argument(
        "--procs",
        type=count_arg,
        default=1,
        help="run in this many processes side by side (one GPU)",
    )
    args = p.parse_args(argv)
    try:
        threads_for(args.procs)  # KERNEL_FUZZ_THREADS, checked before anything starts
    except ValueError as e:
        p.error(str(e))
    profile = get_profile(args.profile) if args.profile else default_profile()
    options = HuntOptions.of(profile, differential=False if args.no_differential else None)
    backends = args.backends.split(",") if args.backends else list(profile.backends)
    print(
        f"profile {options.name}, differential {'on' if options.differential else 'off'} "
        f"(max interpreter cost {options.differential_max_cost:g}, every "
        f"{options.differential_every} example(s)), {args.examples} examples per run"
    )
    head = (
        f"{'target':30} {'backend':17} {'pass':6} {'1st ex/s':>8} {'ex/s':>7} {'compile':>6} "
        f"{'twin':>6} {'refs':>6} {'launch':>6} {'launch/ex':>9} {'status':>7}  slowest properties"
    )
    print(head)
    print("-" * len(head), flush=True)
    pairs = [(t.name, b) for t in select(args.targets, mutants=None) for b in backends]
    records: list[dict[str, Any]] = []

    def save() -> None:  # after every pair: a run stopped by a time limit keeps what it measured
        if args.json:
            _write_json(args.json, profile.name, args.examples, records)

    if args.procs > 1:
        records = _parallel(pairs, options, args.examples, args.seed, args.procs)
    else:
        for name, b in pairs:
            warm, fresh, again = _passes(name, b, options, args.examples, args.seed)
            print(_row("fresh", warm, fresh), flush=True)
            print(_row("warm", warm, again), flush=True)
            rec = _record(fresh, again)
            records.append(
                {
                    "target": name,
                    "backend": b,
                    "procs": 1,
                    "fresh_examples_per_second": rec["fresh"]["examples_per_second"],
                    "warm_examples_per_second": rec["warm"]["examples_per_second"],
                    "processes": [rec],
                }
            )
            save()
    save()
    if args.bare:
        for b in backends:
            rate = _bare_loop(select(args.targets)[0].name, b, options, args.examples)
            print(
                f"bare loop ({select(args.targets)[0].name}, {b}, 1 launch + 1 fp64 check): {rate:.1f} ex/s"
            )
    return 0


def _write_json(path: str, profile: str, examples: int, records: list[dict[str, Any]]) -> None:
    import json

    from fuzz.backends import device_name

    doc = {
        "profile": profile,
        "examples": examples,
        "device": device_name(),
        "time": time.strftime("%Y-%m-%d %H:%M"),
        "results": records,
    }
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    raise SystemExit(main())
