"""Records the campaign scheduler's picks on scripted event sequences (run once, before the
campaign package was split into a policy and its mechanisms; its output is
``tests/fuzz/data/recorded_picks.json``, which ``tests/fuzz/test_policy_picks.py`` replays).

Each scenario is a fake campaign (pairs of fake targets, fuzzing and compile workers) driven by a
fake clock: idle workers ask for a slice, the slice that ends first ends (with a summary drawn
from a seeded generator: examples, seconds, compiles, features, findings, refusals, deaths), and
so on. Every pick is kept with the task the worker was sent, and the pairs' rows at the end: the
same events fed to the scheduler after the move must give the same picks and rows.

    python tests/fuzz/record_picks.py   # rewrites tests/fuzz/data/recorded_picks.json
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).parent
OUT = HERE / "data" / "recorded_picks.json"

# The fake variant space: a "wide" family has two compile-time dimensions, a "plain" one none.
SPACE = {
    "dtypes": ["float32", "bfloat16", "float16"],
    "tiles": [[16, 16], [32, 16], [16, 32], [64, 64], [128, 64]],
}


def fake_narrowing(target: Any, options: Any, seed: Any, *, widen: int = 0) -> dict[str, Any]:
    """``run_narrowing`` of the fake targets: two values per dimension, one more per widening."""
    if target.family != "wide":
        return {}
    return {
        d: tuple(tuple(v) if isinstance(v, list) else v for v in vs[: 2 + widen])
        for d, vs in SPACE.items()
    }


SCENARIOS = [
    # name, fuzz workers, compile workers, pairs (name, family, mutant, expected, cost), options
    {
        "name": "cpu",
        "fuzz": 2,
        "compile": 0,
        "budget": 600.0,
        "examples": None,
        "seed": 3,
        "steps": 140,
        "pairs": [
            ("softmax", "plain", False, None, 0.0),
            ("softmax_mutant_a", "plain", True, "nan", 0.0),
            ("softmax_mutant_b", "plain", True, "accuracy", 0.0),
            ("attention", "wide", False, None, 0.0),
            ("attention_mutant_c", "wide", True, "masking", 0.0),
            ("attention_mutant_d", "wide", True, "inf", 0.0),
        ],
        "backends": ["interp-a", "interp-b"],
    },
    {
        "name": "gpu",
        "fuzz": 3,
        "compile": 2,
        "budget": 900.0,
        "examples": None,
        "seed": 5,
        "steps": 260,
        "pairs": [
            ("softmax", "plain", False, None, 0.3),
            ("softmax_mutant_a", "plain", True, "nan", 0.3),
            ("attention", "wide", False, None, 2.0),
            ("attention_mutant_c", "wide", True, "masking", 2.0),
            ("attention_mutant_d", "wide", True, "inf", 2.0),
            ("gla", "wide", False, None, 6.0),
            ("gla_mutant_e", "wide", True, "nan", 6.0),
            ("gla_mutant_f", "wide", True, "accuracy", 6.0),
        ],
        "backends": ["compiled-a", "compiled-b"],
    },
    {
        "name": "quota",
        "fuzz": 2,
        "compile": 1,
        "budget": 300.0,
        "examples": 600,
        "seed": 7,
        "steps": 200,
        "pairs": [
            ("softmax", "plain", False, None, 0.5),
            ("softmax_mutant_a", "plain", True, "nan", 0.5),
            ("attention", "wide", False, None, 1.5),
            ("attention_mutant_c", "wide", True, "masking", 1.5),
        ],
        "backends": ["compiled-a"],
    },
]

KEYS = {
    "nan": "nan|oracle|y|-",
    "inf": "inf|oracle|y|-",
    "accuracy": "accuracy|oracle|y|-",
    "masking": "masking|poison|y|-",
}
TRIGGERS = ["partial-tile", "multi-tile", "feature causal", "dtype bfloat16", "subnormal"]


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_round(v) for v in x]
    return x


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


def _record_rng_finding(rng: random.Random, pair: Any, sid: int, n: int) -> dict[str, Any]:
    """A finding record a slice streams: the pair's expected class mostly (a mutant), else
    another; some triggers; shrunk or not; a NaN with a site now and then."""
    cls = (
        pair.target.expected_class
        if pair.target.is_mutant and rng.random() < 0.7
        else rng.choice(["nan", "accuracy", "masking", "inf"])
    )
    key = KEYS[cls]
    triggers = sorted(rng.sample(TRIGGERS, rng.choice([0, 1, 1, 2, 3])))
    sig = f"{pair.target.name[:6]}-{cls}-{'+'.join(t[:3] for t in triggers) or 'none'}"
    details: dict[str, Any] = {"round": rng.choice([0, 0, 1])}
    if cls in ("nan", "inf") and rng.random() < 0.5:
        details["origin"] = {
            "found": True,
            "file": "k.py",
            "line": rng.choice([10, 20]),
            "expression": "a / b",
        }
    return {
        "signature": sig,
        "class": cls,
        "bug_key": key,
        "triggers": triggers,
        "message": f"{cls} in y",
        "reproducer": f"repro/{sig}-{sid}-{n}.py",
        "shrunk": rng.random() < 0.6,
        "case_digest": rng.choice([None, "d1", "d2", f"d{sid}"]),
        "details": details,
        "first_example": rng.randrange(100),
        "first_seconds": round(rng.random() * 5, 3),
        "case_size": rng.choice([1, 16, 784]),
    }


def build(scenario: dict[str, Any]) -> tuple[Any, list[Any], Clock]:
    from fuzz.campaign import runner
    from fuzz.campaign.runner import Campaign, PairState, WorkerHandle, interleave

    clock = Clock()
    runner.time = clock  # type: ignore[assignment]
    runner.run_narrowing = fake_narrowing  # type: ignore[assignment]
    c = Campaign.__new__(Campaign)
    c.config = SimpleNamespace(
        floor_examples=200,
        floor_seconds=30.0,
        real_floor_seconds=60.0,
        examples=scenario["examples"],
        max_deaths=2,
        compile_workers=scenario["compile"],
        seed=scenario["seed"],
        warm_quiet=8,
        options=None,
        example_timeout=120.0,
        compile_timeout=900.0,
        hang_confirm_factor=4.0,
        budget=scenario["budget"],
        slice_seconds=None,
    )
    pairs = []
    for name, family, mutant, expected, cost in scenario["pairs"]:
        for b in scenario["backends"]:
            t = SimpleNamespace(
                name=name,
                is_mutant=mutant,
                expected_class=expected,
                mutant_of=name.split("_mutant_")[0] if mutant else None,
                family=family,
                source="builtin",
                compile_cost=cost,
            )
            pairs.append(PairState(t, b))
    c.pairs = interleave(pairs)
    for p in c.pairs:
        p.narrowing = fake_narrowing(p.target, None, scenario["seed"])
        if scenario["compile"]:
            p.warm = "cold"
    c.workers = []
    c.log = lambda line: None
    c._superseded = []
    c._write_report = lambda **kw: {}
    c.note_db_problems = lambda problems: None
    c.replay_queue = []
    c.stop_reason = None
    c.slice_ids = 0
    c.notes = []
    c.errors = []
    c.restarts = 0
    c.deadline = clock.now + scenario["budget"]
    c.latest_deadline = c.deadline + 60.0
    n = max(len(c.pairs), 1)
    low = min(3.0, max(0.5, scenario["budget"] / n))
    c.slice_seconds = min(60.0, max(low, scenario["budget"] / (4 * n)))
    workers = []
    for slot in range(scenario["fuzz"] + scenario["compile"]):
        role = "fuzz" if slot < scenario["fuzz"] else "compile"
        w = WorkerHandle(slot, None, SimpleNamespace(log="/nonexistent/log"), role=role)
        w.process = object()
        w.ready = True
        sent: list[Any] = []
        w.conn = SimpleNamespace(send=sent.append, sent=sent)
        workers.append(w)
    c.workers = workers
    return c, workers, clock


def summary_of(rng: random.Random, c: Any, w: Any, task: dict[str, Any]) -> dict[str, Any]:
    """What the slice of ``task`` reports when it ends, drawn from ``rng``."""
    pair = w.busy.pair
    cost = pair.target.compile_cost
    warm = task["warm"]
    limit = task["time_limit"]
    if warm:
        compiles = rng.randrange(1, 6) if cost else 0
        seconds = compiles * cost + rng.uniform(0.5, 3.0)
        return {
            "examples": rng.randrange(3, 20),
            "seconds": seconds,
            "compile_seconds": compiles * cost,
            "compiles": compiles,
            "cache_loads": rng.randrange(0, 2) if compiles else 0,
            "cache_load_seconds": 0.1 if compiles else 0.0,
            "structures": [f"s{rng.randrange(9)}" for _ in range(rng.randrange(1, 4))],
            "stopped": "warmed",
        }
    cold = pair.warm != "ready" or not pair.warm_count
    compiles = rng.randrange(0, 4 if cold else 2) if cost else 0
    compile_s = compiles * cost
    fuzz_s = limit * rng.uniform(0.6, 1.1)
    shrink = rng.choice([0.0, 0.0, 0.0, rng.uniform(1, 20)])
    examples = max(0, int(fuzz_s * rng.choice([2, 5, 10, 30])))
    refused = rng.choice([0, 0, 0, 3, 12]) if cost else 0
    stopped = "time"
    if refused and rng.random() < 0.2:
        examples, stopped = 0, "refused"
    found = []
    duplicates = []
    r = rng.random()
    if r < 0.25:
        found.append(_record_rng_finding(rng, pair, task["slice"], 0))
    if r < 0.05:
        found.append(_record_rng_finding(rng, pair, task["slice"], 1))
    if found and rng.random() < 0.3 and pair.found:
        twin = rng.choice(sorted(pair.found))
        f = found[0]
        duplicates.append(
            {
                "round": f["details"]["round"],
                "bug_key": f["bug_key"],
                "signature": f["signature"],
                "twin": twin,
                "triggers": f["triggers"],
                "how": rng.choice(["site", "shrink", "property", "case"]),
            }
        )
    if rng.random() < 0.02:
        stopped = "exhausted"
    out: dict[str, Any] = {
        "examples": examples,
        "seconds": fuzz_s + compile_s + shrink,
        "compile_seconds": compile_s,
        "compiles": compiles,
        "cache_loads": 0,
        "cache_load_seconds": 0.0,
        "launches": examples * 2,
        "launch_seconds": fuzz_s / 3,
        "twin_launches": 0,
        "twin_seconds": 0.0,
        "shrink_seconds": shrink,
        "events": {"rejected: would compile": refused} if refused else {},
        "known_hits": {rng.choice(sorted(pair.found)): rng.randrange(1, 5)}
        if pair.found and rng.random() < 0.4
        else {},
        "declared_hits": {},
        "features": [f"f{rng.randrange(40)}" for _ in range(rng.randrange(0, 4))],
        "found": found,
        "duplicates": duplicates,
        "stopped": stopped,
    }
    if rng.random() < 0.01:
        out["error"] = "RuntimeError: boom"
    return out


def run(scenario: dict[str, Any]) -> dict[str, Any]:
    from fuzz.campaign import runner

    rng = random.Random(scenario["seed"])
    c, workers, clock = build(scenario)
    events: list[dict[str, Any]] = []
    ends: dict[int, float] = {}  # slot -> when its slice ends
    fate: dict[int, str] = {}
    for _ in range(scenario["steps"]):
        for w in workers:
            if w.busy is None and w.process is not None and w.ready:
                before = len(w.conn.sent)
                ok = c._dispatch(w)
                task = w.conn.sent[-1][1] if len(w.conn.sent) > before else None
                events.append(
                    {
                        "op": "next",
                        "worker": w.slot,
                        "now": clock.now,
                        "left": c.remaining(),
                        "plan": task if ok else None,
                    }
                )
                if ok:
                    assert task is not None
                    dur = task["time_limit"] * rng.uniform(0.7, 1.3) + rng.uniform(0, 3)
                    if task["warm"]:
                        dur = rng.uniform(2, 12)
                    ends[w.slot] = clock.now + dur
                    r = rng.random()
                    fate[w.slot] = (
                        "done"
                        if r < 0.9 or (task["warm"] and r < 0.97)
                        else rng.choice(["crash", "overran", "exhausted", "context-lost"])
                    )
        busy = [w for w in workers if w.busy is not None]
        if not busy:
            break
        w = min(busy, key=lambda w: (ends[w.slot], w.slot))
        clock.now = max(clock.now, ends[w.slot])
        task = w.conn.sent[-1][1]
        sid = task["slice"]
        pair = w.busy.pair
        # Streamed before the end: progress, a feature, sometimes a finding.
        if rng.random() < 0.5:
            ex, comp = rng.randrange(0, 50), rng.uniform(0, 2)
            c._handle(w, ("progress", sid, ex, 1.0, comp))
            events.append(
                {"op": "progress", "worker": w.slot, "examples": ex, "compile": comp}
            )
        if rng.random() < 0.3:
            feat = f"f{rng.randrange(40)}"
            c._handle(w, ("feature", sid, feat))
            events.append({"op": "feature", "worker": w.slot, "name": feat})
        if rng.random() < 0.15 and not task["warm"]:
            rec = _record_rng_finding(rng, pair, sid, 9)
            c._handle(w, ("found", sid, rec))
            events.append({"op": "found", "worker": w.slot, "record": rec})
        how = fate[w.slot]
        if how == "done":
            s = summary_of(rng, c, w, task)
            events.append(
                {"op": "done", "worker": w.slot, "now": clock.now, "summary": s}
            )
            c._handle(w, ("done", sid, s))
        else:
            sl = w.busy
            rec = None
            if how == "crash":
                rec = {
                    "signature": f"{pair.target.name[:6]}-crash",
                    "class": "crash",
                    "bug_key": "crash|process|-|-",
                    "triggers": [],
                    "message": "the worker was killed by SIGSEGV",
                    "reproducer": f"repro/crash-{sid}.py",
                    "shrunk": False,
                }
            events.append(
                {
                    "op": "lost",
                    "worker": w.slot,
                    "now": clock.now,
                    "how": how,
                    "record": rec,
                }
            )
            if how == "exhausted":
                c._book_slice(sl)
                c._exhaustion(w, pair, -11, "memory maps")
            else:
                c._death_record = lambda *a, rec=rec, **k: dict(rec) if rec else None
                c._book_slice(sl)
                code = {"crash": -11, "overran": -9, "context-lost": runner.EXIT_CONTEXT_LOST}[how]
                reason = "overran" if how == "overran" else None
                c._slice_lost(w, pair, code, reason, stopped=False)
            w.busy = None
            w.loaded = set()  # a fresh process
            events.append({"op": "replaced", "worker": w.slot})
    rows = []
    for p in sorted(c.pairs, key=lambda p: (p.target.name, p.backend)):
        d = p.as_dict()
        rows.append(
            _round(
                {
                    k: d[k]
                    for k in (
                        "target",
                        "backend",
                        "status",
                        "examples",
                        "seconds",
                        "fuzz_seconds",
                        "refused_seconds",
                        "shrink_seconds",
                        "slices",
                        "worker_deaths",
                        "resource_exhaustions",
                        "retired",
                        "compiles",
                        "compile_seconds",
                        "precompiles",
                        "precompile_seconds",
                        "warm_seconds",
                        "warm",
                        "variants",
                        "variants_widened",
                        "structures",
                        "bugs",
                        "unshrunk_maybe_known",
                        "known_hits",
                        "coverage_features",
                    )
                }
                | {
                    "findings": [
                        {
                            k: f.get(k)
                            for k in (
                                "signature",
                                "class",
                                "triggers",
                                "also_triggers",
                                "hits",
                                "maybe_of",
                                "reproducer",
                            )
                        }
                        for f in d["findings"]
                    ],
                    "rate": p.rate,
                }
            )
        )
    return {
        "scenario": {k: v for k, v in scenario.items()},
        "events": events,
        "rows": rows,
        "superseded": sorted(str(p) for p in c._superseded),
    }


def main() -> None:
    sys.path.insert(0, str(HERE.parent.parent))
    recorded = [run(s) for s in SCENARIOS]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(recorded, sort_keys=True, separators=(",", ":")) + "\n")
    for r in recorded:
        picks = [e for e in r["events"] if e["op"] == "next"]
        print(
            r["scenario"]["name"],
            len(r["events"]),
            "events,",
            sum(e["plan"] is not None for e in picks),
            "slices",
        )


if __name__ == "__main__":
    main()
