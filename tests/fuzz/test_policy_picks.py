"""The scheduling policy makes the picks the campaign made before the campaign package was split
into a policy and its mechanisms: ``data/recorded_picks.json`` holds three fake campaigns (event
sequences on a fake clock, each pick with the task its worker was sent, and every pair's row at
the end), recorded from the old ``Campaign`` by ``tests/fuzz/record_picks.py`` as of commit 7abfafc (removed since: it drove the old class). The same
events, fed to :class:`fuzz.campaign.policy.SchedulingPolicy` through its public interface, must
give the same slices and the same rows.

Since the recording, four things changed on purpose, and the replay leaves them out: pairs are
shared by workers that would otherwise idle (off here: ``share_pairs=False``), a pair being fuzzed
is warmed up by an idle compile worker too (off here: ``warm_running=False``), a slice of a pair
under its floor ends at its floor's seconds (off here: ``floor_slices=False``), and a bug seen
another way (a record of another key that its duplicate check names) is kept beside the bug's
record (``also_seen``) instead of dropped: its conditions are then known to later slices too
(the ``known`` bugs of the bug's signature and another key), and its reproducer is no longer
superseded. Since commit f06fcfc, the ways a bug was also seen count with its class too (a
mutant whose expected class was seen that way is found and shrunk, and retires sooner): the
replay counts only each bug's own record, as the old campaign did (``_own_records_only``), and
``test_scheduling`` holds the new rule. Since the duplicate check's influence evidence, a bug
seen another way with a smaller minimal example stands for the bug (the smallest reproducer
first, its signature the bug's from then on): the replay keeps the bug's first record in its
place, as the old campaign did (``_own_records_only`` too), and ``test_scheduling`` holds the
new rule. A slice's time to shrink now ends before the campaign stops what still runs past its
budget (off here: ``end_grace`` unbounded; ``test_scheduling`` holds the rule). Rows are checked
again against the bugs found since (off here: ``BugLedger.queue_rechecks``, as
``_own_records_only`` sets it; ``test_ledger_ways`` holds the rule)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fuzz.campaign.messages import SlicePlan
from fuzz.campaign.pairs import PairState, Warmth, interleave
from fuzz.campaign.policy import CONTEXT_LOST, DEATH, OVERRAN, SchedulingPolicy
from fuzz.campaign.tunables import Tunables, slice_seconds

RECORDED = json.loads((Path(__file__).parent / "data" / "recorded_picks.json").read_text())

SPACE = {
    "dtypes": ["float32", "bfloat16", "float16"],
    "tiles": [[16, 16], [32, 16], [16, 32], [64, 64], [128, 64]],
}


def _narrowing(target: Any, widen: int = 0) -> dict[str, Any]:
    """The recorded campaigns' fake variant space (two values per dimension, one more per
    widening; none for a "plain" family)."""
    if target.family != "wide":
        return {}
    return {
        d: tuple(tuple(v) if isinstance(v, list) else v for v in vs[: 2 + widen])
        for d, vs in SPACE.items()
    }


def _json(x: Any) -> Any:
    return json.loads(json.dumps(x))


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_round(v) for v in x]
    return x


def _task(plan: SlicePlan) -> dict[str, Any]:
    """A plan in the recorded tasks' terms (a fuzzing slice's warm-up numbers are not compared:
    the old task carried them unused; its known bugs by their signatures, not each way to
    them: see above)."""
    d = {
        "slice": plan.id,
        "target": plan.target,
        "backend": plan.backend,
        "seed": plan.seed,
        "time_limit": plan.time_limit,
        "hard_limit": plan.hard_limit,
        "max_examples": plan.max_examples,
        "known": sorted({b.signature for b in plan.known}),
        "reuse": plan.reuse,
        "narrowing": plan.narrowing,
        "warm": plan.warm_up is not None,
        "structures": list(plan.structures),
        "compile_spent": list(plan.compile_spent),
    }
    if plan.warm_up is not None:
        d.update(quiet=plan.warm_up.quiet, warm_limit=plan.warm_up.limit)
    return _json(d)


def _recorded_task(task: dict[str, Any]) -> dict[str, Any]:
    task = {**task, "known": sorted({b["signature"] for b in task["known"]})}
    if not task["warm"]:
        del task["quiet"], task["warm_limit"]
    return task


def _policy(scenario: dict[str, Any]) -> SchedulingPolicy:
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
            p = PairState(t, b)  # type: ignore[arg-type]
            p.narrowing = _narrowing(t)
            if scenario["compile"]:
                p.warmth = Warmth.COLD
            pairs.append(p)
    tunables = Tunables(
        share_pairs=False,  # (recorded before pairs could be shared by idle workers)
        warm_running=False,  # (and before a pair being fuzzed was warmed up too)
        floor_slices=False,  # (and before a slice under its floor ended at it)
        end_grace=float("inf"),  # (and before a slice's shrink time ended with the campaign)
        examples=scenario["examples"],
        slice_seconds=slice_seconds(scenario["budget"], len(pairs)),
        seed=scenario["seed"],
        compile_ahead=bool(scenario["compile"]),
    )
    policy = SchedulingPolicy(
        interleave(pairs), tunables, widen=lambda p, level: _narrowing(p.target, level)
    )
    for slot in range(scenario["fuzz"] + scenario["compile"]):
        policy.add_worker(slot, "fuzz" if slot < scenario["fuzz"] else "compile")
    return policy


def _row(p: PairState) -> dict[str, Any]:
    d = p.as_dict()
    keys = (
        "target backend status examples seconds fuzz_seconds refused_seconds shrink_seconds "
        "slices worker_deaths resource_exhaustions retired compiles compile_seconds precompiles "
        "precompile_seconds warm_seconds warm variants variants_widened structures bugs "
        "unshrunk_maybe_known known_hits coverage_features"
    ).split()
    found = ("signature", "class", "triggers", "also_triggers", "hits", "maybe_of", "reproducer")
    return _round(
        _json(
            {k: d[k] for k in keys}
            | {
                "findings": [{k: f.get(k) for k in found} for f in d["findings"]],
                "rate": p.rate,
            }
        )
    )


def _own_records_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules of the recording: a bug's classes and records are its own record's, not the
    ways it was also seen, and its first record stays in its place (see above)."""
    from fuzz import ledger
    from fuzz.ledger import BugLedger

    monkeypatch.setattr(ledger, "smaller", lambda rec, than: False)
    monkeypatch.setattr(BugLedger, "queue_rechecks", lambda self: None)
    monkeypatch.setattr(BugLedger, "records", lambda self: list(self.found.values()))
    monkeypatch.setattr(
        BugLedger, "classes", property(lambda self: {r["class"] for r in self.found.values()})
    )


@pytest.mark.parametrize("recorded", RECORDED, ids=[r["scenario"]["name"] for r in RECORDED])
def test_the_policy_makes_the_recorded_picks(recorded, monkeypatch):
    _own_records_only(monkeypatch)
    scenario = recorded["scenario"]
    policy = _policy(scenario)
    roles = {s: "fuzz" if s < scenario["fuzz"] else "compile" for s in range(len(policy._seats))}
    busy: dict[int, int] = {}  # worker -> its slice
    ids = 0
    superseded: list[str] = []
    picks = 0
    for e in recorded["events"]:
        w = e["worker"]
        op = e["op"]
        if op == "next":
            plan = policy.next_slice(w, slice_id=ids + 1, now=e["now"], left=e["left"])
            got = None if plan is None else _task(plan)
            want = None if e["plan"] is None else _recorded_task(e["plan"])
            assert got == want, f"pick {picks} of worker {w}"
            picks += 1
            if plan is not None:
                ids += 1
                busy[w] = plan.id
        elif op == "progress":
            policy.progress(busy[w], e["examples"], e["compile"])
        elif op == "feature":
            policy.feature(busy[w], e["name"])
        elif op == "found":
            out = policy.found(busy[w], e["record"])
            assert out is not None
            superseded += out.superseded
        elif op == "done":
            ended = policy.ended(busy.pop(w), e["summary"], e["now"])
            for _, out in ended.found:
                superseded += out.superseded
            for out in ended.withdrawn:
                superseded += out.superseded
        elif op == "lost":
            lost = policy.lost(busy.pop(w), e["now"])
            how = e["how"]
            if how == "exhausted":
                policy.out_of_resources(lost.pair, "memory maps")
            else:
                kind = {"crash": DEATH, "overran": OVERRAN, "context-lost": CONTEXT_LOST}[how]
                out = policy.died(lost, kind, e["record"] and dict(e["record"]))
                superseded += out.superseded if out is not None else []
        elif op == "replaced":
            policy.add_worker(w, roles[w])  # a fresh process: nothing loaded
    rows = [_row(p) for p in sorted(policy.pairs, key=lambda p: (p.target.name, p.backend))]
    # A bug seen another way no longer adds that way's conditions as a way to the bug's own
    # key (see above): the ways left are the recorded ones, less those.
    for got, want in zip(rows, recorded["rows"], strict=True):
        for f, g in zip(got["findings"], want["findings"], strict=True):
            ways, recorded_ways = f.pop("also_triggers") or [], g.pop("also_triggers") or []
            assert all(w in recorded_ways for w in ways), (f, g)
    assert rows == [{**r, "findings": r["findings"]} for r in recorded["rows"]]
    seen = {
        s["reproducer"]
        for p in policy.pairs
        for f in p.found.values()
        for s in f.get("also_seen", [])
    }
    assert sorted(set(superseded)) == sorted(set(recorded["superseded"]) - seen)
