"""A campaign's economics: every pair is fuzzed to a floor (examples or fuzzing seconds, compile
time not counted) before productive pairs are favoured, real targets before mutants; a pair is
retired only when it is finished, never for running fast or finding something; a bug found
again is a hit of it, and a smaller example of it replaces it.

Tested through the scheduling policy's public interface (``fuzz.campaign.policy``): pairs,
workers added and removed, slices begun, their progress, findings and summaries; no process."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from fuzz.campaign.config import CampaignConfig
from fuzz.campaign.pairs import PairState, Warmth, interleave
from fuzz.campaign.policy import SchedulingPolicy
from fuzz.campaign.runner import Campaign
from fuzz.campaign.tunables import Tunables
from fuzz.ledger import sighting

_IDS = itertools.count(1)


def _target(name, *, mutant=False, expected=None):
    return SimpleNamespace(
        name=name,
        is_mutant=mutant,
        expected_class=expected if mutant else None,
        mutant_of="base" if mutant else None,
        family="fake",
        source="builtin",
    )


def _pair(name, *, examples=0, seconds=0.0, compile_seconds=0.0, slices=1, rate=0.0, **kw):
    p = PairState(_target(name, **kw), "fake", examples=examples, seconds=seconds, slices=slices)
    p.stats["compile_seconds"] = compile_seconds
    p.rate = rate
    return p


def _in_flight(*pairs):
    """Marks ``pairs`` as fuzzed by a slice in flight (another worker's)."""
    for p in pairs:
        p.live[next(_IDS)] = [0, 0.0]


def _policy(pairs, **tunables):
    """A policy over ``pairs`` with one fuzzing worker (0) and one compile worker (9) seated
    where ``compile_ahead``; ``widen`` as given."""
    widen = tunables.pop("widen", None)
    policy = SchedulingPolicy(pairs, Tunables(**tunables), widen=widen)
    policy.add_worker(0, "fuzz")
    return policy


def _slice(policy, pair, summary, *, worker=0, now=100.0, left=1000.0, sid=None):
    """Runs one slice of ``pair`` on ``worker`` to its ``summary``: what the policy decided."""
    sid = next(_IDS) if sid is None else sid
    policy.begin(pair, worker, slice_id=sid, now=now, left=left)
    return policy.ended(sid, summary, now)


def test_every_pair_once_then_to_its_floor_then_the_productive_ones():
    fresh_mutant = _pair("m", slices=0, mutant=True, expected="nan")
    fresh_real = _pair("r", slices=0)
    low = _pair("low", examples=50, seconds=2.0)  # under both floors
    fast = _pair("fast", examples=250, seconds=1.0)  # 200 examples: floor met, fast or not
    slow = _pair("slow", examples=20, seconds=61.0)  # 60 s of fuzzing: a real target's floor
    busy = _pair("busy", examples=300, seconds=40.0, rate=9.0)  # finding new things lately
    policy = _policy([fast, slow, busy, low, fresh_mutant, fresh_real])
    assert policy.pick() is fresh_real  # nothing is left unrun; real targets first
    fresh_real.slices = 1
    assert policy.pick() is fresh_mutant
    fresh_mutant.slices = 1
    assert policy.pick() is fresh_real  # then every pair to its floor, the least fuzzed first
    fresh_real.examples = 200
    assert policy.pick() is low  # the real one under its floor before the mutant
    low.examples = 200
    assert policy.pick() is fresh_mutant
    fresh_mutant.examples = 200
    for p in (fast, slow):
        assert policy.floor_progress(p) >= 1.0
    # Floors met; one by its seconds with 20 examples: fuzzed on to the floor's examples, up to
    # three times its seconds.
    assert policy.pick() is slow
    slow.examples = 200
    assert policy.pick() is busy  # then the pair that found new bugs or coverage lately
    slow.examples, slow.seconds = 20, 179.0
    assert policy.pick() is slow
    slow.seconds = 180.0
    assert policy.pick() is busy


def test_compile_time_counts_toward_no_floor_and_no_rate():
    # 60 s in its slices, 58 of them compiling: 2 s of fuzzing, far from the 30 s floor.
    compiled = _pair(
        "compiled", examples=10, seconds=60.0, compile_seconds=58.0, mutant=True, expected="nan"
    )
    other = _pair("other", examples=100, seconds=20.0, mutant=True, expected="nan")
    policy = _policy([compiled, other])
    assert compiled.fuzz_seconds == pytest.approx(2.0)
    assert policy.floor_progress(compiled) == pytest.approx(max(10 / 200, 2 / 30))
    assert policy.pick() is compiled
    row = compiled.as_dict()
    assert row["fuzz_seconds"] == pytest.approx(2.0) and row["compile_seconds"] == 58.0
    assert row["examples_per_second"] == pytest.approx(5.0)  # per fuzzing second


def test_shrinking_counts_toward_no_floor():
    """A slice's seconds of shrinking its bugs after the search (compiling not counted:
    ``HuntResult.shrink_seconds``) are not fuzzing: a GPU pair met its 30 s floor with 42
    examples, most of its seconds shrinking."""
    p = _pair("p", examples=0, seconds=0.0, slices=0, mutant=True, expected="nan")
    policy = _policy([p])
    summary = {"examples": 40, "seconds": 50.0, "compile_seconds": 6.0, "shrink_seconds": 36.0}
    _slice(policy, p, summary)
    assert p.fuzz_seconds == pytest.approx(8.0)  # 50 - 6 compiling - 36 shrinking
    assert policy.floor_progress(p) == pytest.approx(max(40 / 200, 8 / 30))
    assert p.as_dict()["shrink_seconds"] == pytest.approx(36.0)


def test_a_worker_fuzzes_the_pairs_it_has_loaded_first():
    """Each pair once, real targets first, whatever a worker has loaded; then, under their
    floors, a worker's own pairs (their kernels loaded in its process) before the others', the
    least fuzzed first; past the floors another worker's pair counts at ``AFFINITY``."""
    mine = _pair("mine", examples=150, seconds=2.0)
    theirs = _pair("theirs", examples=20, seconds=1.0)  # less fuzzed, loaded by another worker
    fresh = _pair("fresh", slices=0, mutant=True, expected="nan")
    policy = _policy([mine, theirs, fresh])
    loaded = {mine.key}
    assert policy.pick(loaded) is fresh  # never run: first, in any worker
    fresh.slices, fresh.examples = 1, 300
    assert policy.pick(loaded) is mine  # its kernels are loaded here
    assert policy.pick() is theirs  # no worker named: the least fuzzed
    assert policy.pick({theirs.key}) is theirs
    # A worker's loaded pairs are those it began slices of, in its process.
    policy.add_worker(1)
    plan = policy.next_slice(1, slice_id=1, now=0.0, left=100.0)
    assert plan.pair == theirs.key and policy.ended(1, {}, 0.0).pair is theirs
    assert policy._seats[1].loaded == {theirs.key}
    policy.add_worker(1)  # a fresh process: nothing loaded
    assert policy._seats[1].loaded == set()
    affinity = policy.t.affinity
    mine.examples = theirs.examples = fresh.examples = 300  # every floor met
    mine.rate, theirs.rate = 1.0, 1.0 / affinity + 0.5  # theirs pays its reload and still wins
    mine.slices = theirs.slices = fresh.slices = 5
    assert policy.pick(loaded) is theirs
    theirs.rate = 1.0 / affinity - 0.1
    assert policy.pick(loaded) is mine


def test_a_fuzzing_worker_takes_a_cold_pair_whose_warm_up_is_far_away():
    """With compile workers, fuzzing workers take the pairs they warmed up, and a cold pair only
    where its warm-up is more than ``COLD_WAIT`` seconds away (by its place in the compile
    workers' queue and the warm-ups measured so far), and after the warmed-up pairs under their
    floor: it would compile on the fuzzing path."""
    ready = _pair("ready", examples=100, seconds=5.0)
    next_up = _pair("next", examples=0, slices=0)
    later = _pair("later", examples=0, slices=0, mutant=True, expected="nan")  # warmed up last
    for p in (next_up, later):
        p.warmth = Warmth.COLD
    policy = _policy([later, ready, next_up], share_pairs=False)  # (no sharing: it waits)
    policy.add_worker(9, "compile")
    cold_wait = policy.t.cold_wait
    assert policy.pick() is ready  # the others never ran, but are not warmed up
    _in_flight(ready)
    assert policy.pick() is None  # no warm-up measured yet: wait
    ready.live.clear()
    ready.warm_count, ready.warm_seconds = 1, 0.75 * cold_wait
    ready.first_warm_compile = 1.0  # its family's warm-ups compile for a second
    assert policy.pick() is ready  # under its floor, and compiled ahead
    ready.examples, ready.seconds = 300, 40.0  # at its floor
    assert policy.pick() is later  # "next" is warmed up in 0.75 COLD_WAIT, "later" in 1.5
    _in_flight(later)
    assert policy.pick() is ready
    policy.remove_worker(9)  # no compile worker: every pair is fuzzed as it is
    assert policy.pick() is next_up


def test_compile_workers_warm_the_costliest_compiles_first_and_fuzzing_takes_the_cheap_cold():
    """Real targets are warmed up first, then the mutants whose family compiles slowest on their
    backend. A fuzzing worker takes a cold pair only where its warm-up is further away than
    ``COLD_WAIT`` and than ``COLD_COMPILE_FACTOR`` times its family's warm-up compiles (what
    fuzzing it cold would compile on the fuzzing path), the cheapest to compile first; a pair
    of a family none has compiled yet is warmed up first and never fuzzed cold."""
    t = Tunables()
    COLD_WAIT, COLD_COMPILE_FACTOR = t.cold_wait, t.cold_compile_factor
    slow = _pair("slow", examples=100, seconds=5.0, compile_seconds=40.0)  # 10 s a compile
    fast = _pair("fast", examples=100, seconds=5.0, compile_seconds=2.0)  # 0.5 s a compile
    slow.stats["compiles"], fast.stats["compiles"] = 4, 4
    slow.target.family, fast.target.family = "slow", "fast"
    fast.warm_count, fast.warm_seconds = 1, 0.75 * COLD_WAIT  # the mean warm-up
    fast.first_warm_compile = 1.0
    slow.first_warm_compile = 2.5 * COLD_WAIT / COLD_COMPILE_FACTOR  # 2.5 COLD_WAIT, fuzzed cold
    cheap = [_pair(f"cheap{i}", slices=0, mutant=True, expected="nan") for i in range(2)]
    costly = [_pair(f"costly{i}", slices=0, mutant=True, expected="nan") for i in range(3)]
    real = _pair("real", slices=0)
    for p in cheap:
        p.target.family = "fast"
    for p in costly:
        p.target.family = "slow"
    for p in (*cheap, *costly, real):
        p.warmth = Warmth.COLD
    policy = _policy([slow, fast, *cheap, *costly, real])  # the first round's order: cheap first
    assert policy.cold_queue() == [real, *costly, *cheap]
    assert policy.next_warm_up() is real
    policy.add_worker(9, "compile")
    _in_flight(slow, fast)
    # One compile worker, 0.75 COLD_WAIT a warm-up: the queue's k-th pair is (k + 1) 0.75
    # COLD_WAIT away. The cheap ones (places 4 and 5) are far; of the costly ones, only the
    # third (3 COLD_WAIT away) is further than its warm-up's compiles times the factor.
    # no help from the order; no sharing of a pair in flight (it waits)
    policy = _policy([slow, fast, *costly, *cheap, real], share_pairs=False)
    policy.add_worker(9, "compile")
    assert policy.pick() is cheap[0]
    for p in cheap:
        _in_flight(p)
    assert policy.pick() is costly[2]
    _in_flight(costly[2])
    assert policy.pick() is None  # the other costly ones wait for their warm-up
    # A family none has compiled yet may compile dear: warmed up first, never fuzzed cold.
    unknown = _pair("unknown", slices=0, mutant=True, expected="nan")
    unknown.target.family, unknown.warmth = "new", Warmth.COLD
    policy.pairs.append(unknown)
    assert policy.cold_queue() == [real, unknown, *costly[:2]]
    assert policy.pick() is costly[1]  # now 3 COLD_WAIT away; "unknown", 1.5 away, is never far
    _in_flight(costly[1])
    assert policy.pick() is None


def test_a_worker_that_would_idle_shares_a_pair_another_worker_fuzzes():
    """More workers than free pairs (a plugin's few kernels on a host of several GPUs): a worker
    with no free pair joins one in flight rather than idle, each slice with its own seed; under
    its floor the least fuzzed, then the most productive, the least shared first. Never a pair
    whose first slice or warm-up is in flight, nor one retired or done."""
    a = _pair("a", examples=50, seconds=2.0)
    b = _pair("b", examples=150, seconds=2.0)
    fresh = _pair("fresh", slices=0)
    policy = _policy([a, b, fresh])
    for w in (1, 2, 3):
        policy.add_worker(w)
    plans = [policy.next_slice(w, slice_id=w + 1, now=0.0, left=100.0) for w in (0, 1, 2)]
    assert [p.pair for p in plans] == [fresh.key, a.key, b.key]  # the free pairs first
    assert policy.pick() is a  # none free: shares the least fuzzed of those under their floor
    shared = policy.next_slice(3, slice_id=4, now=0.0, left=100.0)
    assert shared.pair == a.key and shared.seed != plans[1].seed and not shared.reuse
    assert len(a.live) == 2 and a.running
    assert policy.pick() is b  # a has two slices in flight; b one (fresh: its first slice)
    policy.progress(2, 30, 1.0)
    policy.progress(4, 10, 0.5)
    assert a.total_examples == 90 and a.compile_seconds == pytest.approx(1.5)
    policy.ended(2, {"examples": 35, "seconds": 3.0}, 3.0)
    assert a.examples == 85 and a.total_examples == 95 and a.running  # slice 4 goes on
    policy.lost(4, 5.0)
    assert a.examples == 95 and not a.running
    a.retired = "search space exhausted"
    b.retired = "search space exhausted"
    assert policy.pick() is None  # only a first slice in flight: not shared
    assert _policy([_pair("x")], share_pairs=False).pick() is not None


def test_a_compiles_expected_cost_comes_from_the_pair_else_its_family():
    """The seconds one compile is expected to take, for the compile share's refusals: the mean
    of the pair's compiles (its warm-ups' too, not loads of kernels compiled elsewhere), else
    of its family's pairs on its backend; 0 where none has compiled."""
    a = _pair("a", compile_seconds=10.0)
    a.stats.update(compiles=3, cache_loads=1, cache_load_seconds=0.5, precompiles=2)
    a.stats["precompile_seconds"] = 6.5
    b = _pair("b", slices=0)
    other = PairState(_target("o"), "other")
    policy = _policy([a, b, other])
    assert policy.compile_cost(a) == pytest.approx((10.0 - 0.5 + 6.5) / (3 - 1 + 2))
    assert policy.compile_cost(b) == policy.compile_cost(a)  # the same family ("fake") on "fake"
    assert policy.compile_cost(other) == 0.0


def test_a_slice_carries_its_pairs_compile_time_so_far():
    """A fuzzing slice is told the compile and wall seconds its pair spent before
    (``compile_spent``): the profile's compile share holds over the campaign; a warm-up (a
    compile worker's) is there to compile and is told nothing."""
    p = _pair("p", examples=50, seconds=40.0, compile_seconds=12.0)
    policy = _policy([p], slice_seconds=5.0, seed=1, warm_quiet=4)
    policy.add_worker(9, "compile")
    fuzz_task = policy.next_slice(0, slice_id=1, now=0.0, left=100.0)
    policy.ended(1, {"seconds": 0.0}, 0.0)
    p.warmth = Warmth.COLD
    warm_task = policy.next_slice(9, slice_id=2, now=0.0, left=100.0)
    assert fuzz_task.compile_spent == (12.0, 40.0, 0.0)  # no compile counted: cost unknown
    assert warm_task.compile_spent == (0.0, 0.0, 0.0) and warm_task.warm_up is not None
    assert fuzz_task.warm_up is None and warm_task.warm_up.quiet == 4
    policy.ended(2, {"seconds": 0.0}, 0.0)
    # Its time to shrink a new bug: at least 30 s, and shrink_compiles of its compiles, up to
    # shrink_max seconds.
    t = policy.t
    assert fuzz_task.hard_limit == 5.0 + 30.0
    for sid, (per_compile, shrink) in enumerate(
        ((4.0, t.shrink_compiles * 4.0), (60.0, t.shrink_max)), start=3
    ):
        p.stats["compiles"], p.stats["compile_seconds"] = 3, 3 * per_compile
        plan = policy.begin(p, 0, slice_id=sid, now=7.0, left=100.0)
        assert plan.hard_limit == pytest.approx(5.0 + shrink)
        assert plan.hard_deadline == pytest.approx(7.0 + 5.0 + shrink)
        policy.ended(sid, {"seconds": 0.0}, 0.0)


@pytest.mark.parametrize(
    "summary, mutant, found, retired",
    [
        ({"stopped": "examples", "examples": 3, "seconds": 0.1}, False, [], ""),  # fast: hunt on
        ({"stopped": "time"}, False, [{"class": "nan", "shrunk": True}], ""),  # found: hunt on
        ({"stopped": "exhausted"}, False, [], "search space exhausted"),  # Hypothesis said so
        ({"stopped": "time", "error": "boom"}, False, [], "harness error"),
        ({"stopped": "time"}, True, [{"class": "nan", "shrunk": True}], "mutant found and shrunk"),
        ({"stopped": "time"}, True, [{"class": "nan", "shrunk": False}], ""),  # not shrunk yet
        ({"stopped": "time"}, True, [{"class": "inf", "shrunk": True}], ""),  # another class
        # The bug seen its expected way too (a duplicate check's evidence), shrunk that way.
        (
            {"stopped": "time"},
            True,
            [{"class": "inf", "shrunk": True, "also_seen": [{"class": "nan", "shrunk": True}]}],
            "mutant found and shrunk",
        ),
        (
            {"stopped": "time"},
            True,
            [{"class": "inf", "shrunk": True, "also_seen": [{"class": "nan", "shrunk": False}]}],
            "",
        ),
    ],
)
def test_a_pair_is_retired_only_when_it_is_finished(summary, mutant, found, retired):
    p = _pair("p", mutant=mutant, expected="nan")
    p.ledger.found = {f"s{i}": {**f, "signature": f"s{i}"} for i, f in enumerate(found)}
    policy = _policy([p])
    assert _slice(policy, p, summary).retired == retired
    assert p.retired == retired


def _rec(sig, key="nan|oracle|y|-", triggers=(), **kw):
    return {
        "signature": sig,
        "class": key.split("|")[0],
        "bug_key": key,
        "triggers": list(triggers),
        "message": "m",
        "reproducer": f"/nowhere/{sig}.py",
        **kw,
    }


def _queued(pair):
    """The rows a pair's ledger queued to shrink or check (its checks again of rows checked
    before, ``Resume.example``, left out: ``fuzz.ledger.BugLedger.queue_rechecks``)."""
    return [e for e in pair.ledger.resume if not e.example]


class _Ledger:
    """The policy's ``record`` and ``withdraw`` of a pair's findings, keeping the names of the
    reproducers they superseded and the last outcome."""

    def __init__(self, policy):
        self.policy, self.superseded, self.last = policy, [], None

    def _kept(self, out):
        self.last = out
        self.superseded += [Path(x).name for x in out.superseded]
        return out.new

    def record(self, pair, rec, origin=None):
        return self._kept(self.policy.record(pair, rec, sighting=origin))

    def withdraw(self, pair, origin, dup):
        return self._kept(self.policy.withdraw(pair, origin, dup))


def test_a_record_left_unshrunk_with_a_key_a_shrunk_bug_was_also_seen_as_may_be_that_bug():
    """On an H200 a planted jagged kernel's accuracy row had also been seen as ``inf`` (25
    elements); an Inf example of 60 elements, its slice's shrinking cut, came as a row of its
    own. Its key is one of the ways the shrunk bug was seen: it may be that bug, kept with its
    reproducer and not counted as a distinct one, and the report lists it right after that
    bug's row. A key no shrunk bug was seen with stays a bug of its own."""
    from fuzz.campaign import report

    p = _pair("p")
    led = _Ledger(_policy([p]))
    way = {"signature": "w", "class": "inf", "bug_key": "inf|oracle|y|-", "triggers": []}
    acc = _rec("acc", key="accuracy|oracle|y|-", shrunk=True, also_seen=[way])
    assert led.record(p, acc)
    assert led.record(p, _rec("zz", key="masking|oracle|y|-", shrunk=True))
    assert led.record(p, _rec("c", key="crash|process|-|-", shrunk=True))  # (sorted between)
    assert led.record(
        p, _rec("big", key="inf|oracle|y|-", triggers=("tile-overhang",), shrunk=False)
    )
    assert led.record(p, _rec("nan", key="nan|oracle|y|-", shrunk=False))
    row = p.as_dict()
    by = {f["signature"]: f for f in row["findings"]}
    assert by["big"]["maybe_of"] == "acc" and "maybe_of" not in by["nan"]
    assert row["bugs"] == 4 and row["unshrunk_maybe_known"] == 1  # acc, zz, c, nan
    found = [{**f, "triage": "new", "target": "p"} for f in row["findings"]]
    rows = [{"target": "p", "mutant": False, "mutant_of": None, "expected_class": None}]
    order = [f["signature"] for f in report.ordered_findings(found, rows)]
    assert order.index("big") == order.index("acc") + 1, order


def test_a_crash_that_passed_alone_beside_one_that_crashed_alone_is_not_a_distinct_bug():
    """A sticky CUDA error is reported at a later call than the launch that made it: a crash
    row whose example passed replayed alone in a fresh process (a planted Pallas kernel's
    2-element row on an H200) beside a crash of the pair that crashed alone (66,600 elements) is
    maybe that one: kept with its reproducer, said why, not counted. Without a crash that
    crashed alone it stands as a row of its own."""
    from fuzz.campaign import report
    from fuzz.ledger import mark_maybe_of
    from fuzz.results import maybe_note

    key = "crash|crash|-|JaxRuntimeError: INTERNAL: CUDA error: Failed to check stream"
    other = "crash|crash|-|JaxRuntimeError: INTERNAL: CUDA error: Error recording CUDA event"
    p = _pair("p")
    led = _Ledger(_policy([p]))
    assert led.record(p, _rec("late", key=other, shrunk=True, details={"alone": []}))
    assert p.as_dict()["bugs"] == 1  # (alone: no crash that crashed alone to be)
    assert led.record(p, _rec("big", key=key, shrunk=True, details={"alone": [key]}))
    row = p.as_dict()
    assert row["bugs"] == 1 and row["unshrunk_maybe_known"] == 1
    by = {f["signature"]: {**f, "target": "p"} for f in row["findings"]}
    assert by["late"]["maybe_of"] == "big" and "maybe_of" not in by["big"]
    marked = mark_maybe_of({sig: dict(f, maybe_of=None) for sig, f in by.items()})
    assert marked["late"]["maybe_of"] == "big" and not marked["big"].get("maybe_of")
    assert "not reproduced alone" in maybe_note(marked["late"])
    found = [{**f, "triage": "new", "mutant": False} for f in marked.values()]
    s = report.summary_of([{**row, "status": "fail"}], found, [], [])
    assert s["maybe_known"] == 1


def test_a_crash_that_passed_alone_after_another_kernels_crash_in_its_process_is_not_its_bug():
    """On an H200 a planted GLA kernel's first example of a slice (16 elements) lost the CUDA
    context of a worker that had fuzzed a planted jagged kernel whose out-of-bounds reads crash
    alone; replayed alone in a fresh process the GLA example passed. Such a crash, of a kernel
    with no crash of its own that crashed alone, is maybe the one of a kernel its process ran
    before (on its backend): kept, said why, not counted. Where its process ran no such kernel,
    or the other crash did not crash alone either, it stands."""
    from fuzz.ledger import mark_maybe_of
    from fuzz.results import maybe_note

    key = "crash|crash|-|JaxRuntimeError: sticky CUDA error: illegal memory access"

    def rows(ran_before, jag_alone, backend="pallas-gpu"):
        gla = _rec("gla", key=key, shrunk=True, target="gla", backend="pallas-gpu")
        gla["details"] = {"alone": [], "ran_before": ran_before}
        jag = _rec("jag", key=key, shrunk=True, target="jag", backend=backend)
        jag["details"] = {"alone": [key] if jag_alone else []}
        acc = _rec("acc", key="accuracy|oracle|o|-", shrunk=True, target="gla")
        return mark_maybe_of({"gla": gla, "jag": jag, "acc": {**acc, "backend": "pallas-gpu"}})

    marked = rows(["jag", "other"], True)
    assert marked["gla"]["maybe_of"] == "jag" and not marked["jag"].get("maybe_of")
    assert "a kernel its process had run before" in maybe_note(marked["gla"])
    assert not rows(["other"], True)["gla"].get("maybe_of")  # (its process never ran it)
    assert not rows([], True)["gla"].get("maybe_of")
    assert not rows(["jag"], False)["gla"].get("maybe_of")  # (nor did that one crash alone)
    assert not rows(["jag"], True, backend="triton")["gla"].get("maybe_of")  # (another backend)


def test_a_crash_that_fails_on_its_interpreter_as_a_row_does_is_maybe_that_row():
    """A planted Pallas jagged kernel's out-of-bounds reads crashed on an H200 at 50,880
    elements only (a GPU faults on reads far past an allocation), beside their 5-element
    ``masking`` row. Checked on the interpreter of its kernel source, a crash's example that
    fails as a shrunk row of its kernel does or was seen (that way's key, its triggers holding
    there) is maybe that row's bug: kept, said why, not counted, in the pair's table and the
    report. Another key, or a way whose triggers do not hold, leaves it a row of its own."""
    from fuzz.ledger import mark_maybe_of
    from fuzz.results import maybe_note

    crash_key = "crash|crash|-|JaxRuntimeError: sticky CUDA error: illegal memory access"
    way = _rec("way", key="accuracy|oracle|y|-", triggers=("tile-overhang",), shrunk=True)

    def crash(key, holds):
        twin = {"backend": "pallas-interpret", "key": key, "holds": holds}
        return _rec(
            "crash", key=crash_key, shrunk=True, details={"alone": [crash_key], "twin": twin}
        )

    def marked(key, holds):
        p = _pair("p")
        led = _Ledger(_policy([p]))
        row = _rec("row", key="masking|oracle|y|-", triggers=("single-row-segments",), shrunk=True)
        assert led.record(p, {**row, "also_seen": [way]})
        assert led.record(p, crash(key, holds))
        pair = p.as_dict()
        by = {f["signature"]: {**f, "target": "p"} for f in pair["findings"]}
        return pair, mark_maybe_of({sig: dict(f, maybe_of=None) for sig, f in by.items()})

    holds = ["single-row-segments", "tile-overhang", "empty-segments"]
    pair, got = marked("masking|oracle|y|-", holds)
    assert pair["bugs"] == 1 and got["crash"]["maybe_of"] == "row", got["crash"]
    assert "checked on pallas-interpret" in maybe_note(got["crash"])
    assert marked("accuracy|oracle|y|-", holds)[1]["crash"]["maybe_of"] == "row"  # (a way)
    pair, got = marked("masking|oracle|y|-", ["empty-segments"])  # (the row's trigger not held)
    assert pair["bugs"] == 2 and not got["crash"].get("maybe_of")
    assert not marked("nan|oracle|y|-", holds)[1]["crash"].get("maybe_of")
    assert not marked(None, holds)[1]["crash"].get("maybe_of")  # (it passed there)


def test_a_backend_divergence_beside_a_checked_crash_is_no_harness_error():
    """A ``backend-divergence`` finding names the backend it differs from as its ``twin`` (a
    string), where a crash's check on its interpreter keeps a mapping: on an H200 a planted
    Pallas softmax's divergence ended a campaign with a harness error when the pair's table was
    written. Each is read as what it is: the crash still maybe its row, the divergence a row."""
    from fuzz.ledger import ON_TWIN, mark_maybe_of
    from fuzz.results import maybe_note

    crash_key = "crash|crash|-|JaxRuntimeError: sticky CUDA error: illegal memory access"
    p = _pair("p")
    led = _Ledger(_policy([p]))
    row = _rec("row", key="masking|oracle|y|-", triggers=("single-row-segments",), shrunk=True)
    twin = {"backend": "pallas-interpret", "key": row["bug_key"], "holds": list(row["triggers"])}
    crash = _rec("crash", key=crash_key, shrunk=True, details={"alone": [crash_key], "twin": twin})
    diverged = _rec(
        "div",
        key="backend-divergence|backend-agreement|y|-",
        triggers=("multi-tile",),
        shrunk=True,
        details={"twin": "pallas-interpret", "twin_value": 0.5},
    )
    for rec in (row, diverged, crash):
        assert led.record(p, rec)
    pair = p.as_dict()
    assert pair["bugs"] == 2, pair["findings"]
    by = {f["signature"]: {**f, "target": "p", "maybe_of": None} for f in pair["findings"]}
    got = mark_maybe_of(by)
    assert got["crash"]["maybe_of"] == "row" and not got["div"].get("maybe_of")
    said = maybe_note({**got["div"], "maybe_of": "row", "maybe_why": ON_TWIN})
    assert said is not None and "fails as bug row" in said  # (a string twin read as none)


def test_a_slices_crash_names_the_kernels_its_process_ran_before(monkeypatch):
    """Each slice of a worker process knows the kernels the process ran before it, and a crash
    it streams names them (the ledger's evidence above); other findings do not."""
    from types import SimpleNamespace

    from fuzz.campaign import slice_run
    from fuzz.failures import Finding

    monkeypatch.setattr(slice_run, "_RAN", set())
    sent = []
    conn = SimpleNamespace(send=sent.append)
    monkeypatch.setattr(slice_run.SliceRun, "try_reproducer", lambda self, found: None)

    def run(target):
        plan = SimpleNamespace(id=1, hard_limit=None, target=target, warm_up=None)
        return slice_run.SliceRun(conn, None, None, plan, None, target=None, backend=None)

    assert run("jag").ran_before == [] and run("jag").ran_before == []
    gla = run("gla")
    assert gla.ran_before == ["jag"]
    for cls in ("accuracy", "crash"):
        f = Finding(cls, "p", "m")
        found = SimpleNamespace(final=False, finding=f, isolating=True, signature=cls)
        found.as_dict = lambda f=f: {"class": f.cls, "details": f.details}
        gla.on_found(None, found)
    assert [m.record["details"].get("ran_before") for m in sent] == [None, ["jag"]]


@pytest.mark.parametrize("big_first", [True, False])
def test_a_crash_that_passed_alone_takes_not_the_place_of_one_of_its_key_that_crashed_alone(
    big_first,
):
    """On an H200 a planted Pallas kernel's out-of-bounds reads crashed at 64,530 elements, alone
    too; a fresh worker's 2-element example then lost its context, and passed alone: an earlier
    example's damage. One key, triggers that nest: the 2-element record took the other's place
    as its smaller example, and the reproducer that crashes was removed. Neither is the other's
    example: both are kept, the one that passed alone maybe the other's crash."""
    key = "crash|crash|-|JaxRuntimeError: sticky CUDA error: illegal memory access"
    big = _rec("big", key=key, triggers=("a", "b"), shrunk=True, details={"alone": [key]})
    big["case_size"] = 64530
    small = _rec("small", key=key, triggers=("a",), shrunk=True, details={"alone": []})
    small["case_size"] = 2
    p = _pair("p")
    led = _Ledger(_policy([p]))
    for rec in (big, small) if big_first else (small, big):
        assert led.record(p, rec)
    row = p.as_dict()
    by = {f["signature"]: f for f in row["findings"]}
    assert set(by) == {"big", "small"} and by["small"]["maybe_of"] == "big"
    assert row["bugs"] == 1 and "big.py" not in led.superseded


def test_two_input_writes_that_write_alike_are_one_row_and_other_writes_are_not():
    """Across slices, the ledger takes two input-write records of conditions that do not nest
    for one bug where they wrote the same kinds of value over the same kinds (round 13's
    wrapper sanitizing its values in place: -inf made the lowest finite); a write of other
    kinds, or of finite values only, stays a row of its own."""
    key = "input-write|inputs-unchanged|-|-"

    def rows(*writes):
        p = _pair("p")
        led = _Ledger(_policy([p]))
        for i, w in enumerate(writes):
            rec = _rec(f"w{i}", key=key, triggers=(f"t{i}",), shrunk=True, details={"writes": w})
            led.record(p, rec)
        return p.as_dict()["bugs"]

    sanitized = {"values": ["-inf -> lowest finite"]}
    assert rows(sanitized, sanitized) == 1
    assert rows(sanitized, {"values": ["nan -> 0"]}) == 2
    assert rows({"values": ["finite -> finite"]}, {"values": ["finite -> finite"]}) == 2


def test_a_record_left_unshrunk_beside_a_shrunk_bug_of_its_key_is_not_a_distinct_bug(tmp_path):
    """A slice killed while shrinking leaves its first sight of a bug unshrunk; where a shrunk
    bug of the pair has its failure key, it may be that bug (a GPU campaign's last slice left a
    6,789-element NaN example beside its 1-element twin): kept with its reproducer, marked, and
    not counted as a distinct bug. Hits counted under a record since replaced go to the one in
    its place."""
    from fuzz.campaign import report

    p = _pair("p")
    policy = _policy([p])
    led = _Ledger(policy)
    assert led.record(p, _rec("small", triggers=("unmasked-neg-inf",), shrunk=True))
    assert led.record(p, _rec("big", triggers=("feature mask", "subnormal"), shrunk=False))
    assert led.record(p, _rec("acc", key="accuracy|oracle|y|-", triggers=("multi-tile",)))
    crash = _rec("crash", key="crash|process|-|-", shrunk=False)
    assert led.record(p, crash)
    row = p.as_dict()
    assert row["bugs"] == 3 and row["unshrunk_maybe_known"] == 1  # small, acc, crash
    by = {f["signature"]: f for f in row["findings"]}
    assert by["big"]["maybe_of"] == "small" and set(by) == {"small", "big", "acc", "crash"}
    assert all("maybe_of" not in by[s] for s in ("small", "acc", "crash"))
    assert "(+1 not shrunk)" in report.cell_text({**row, "status": "fail"})
    s = report.summary_of(
        [{**row, "status": "fail"}],
        [{**f, "triage": "new", "mutant": False, "target": "p"} for f in row["findings"]],
        [],
        [],
    )
    assert s["maybe_known"] == 1
    # Once shrunk (another slice), it is a bug of its own or the known one: no longer marked.
    p.found["big"]["shrunk"] = True
    assert p.as_dict()["bugs"] == 4 and "maybe_of" not in str(p.as_dict()["findings"])
    # Hits under a replaced record's signature count for the record in its place.
    p.ledger.known_hits.update({"gone": 5, "small": 2})
    p.ledger.replaced["gone"] = "small"
    assert p.as_dict()["known_hits"] == {"small": 7}
    assert {f["signature"]: f["hits"] for f in p.as_dict()["findings"]}["small"] == 7


def test_a_signature_taken_into_a_bug_is_that_bug_when_another_slice_meets_it_again():
    """A record merged into a bug (seen another way, or replaced by its minimal example) and
    met again unshrunk by a later slice is a hit of the bug standing for it, not a new row (a
    GPU campaign reported a nondeterminism it had merged at 79 s as a new bug at 381 s, when
    the later slice ended before shrinking it)."""
    p = _pair("p")
    policy = _policy([p])
    led = _Ledger(policy)
    acc = _rec("acc", key="accuracy|oracle|o|-", triggers=("tile",), shrunk=True, case_size=16)
    assert led.record(p, acc, origin=sighting(1, acc))
    flaky = _rec("flaky", key="nondeterminism|replays|-|-", case_size=524288, details={"round": 0})
    assert led.record(p, flaky, origin=sighting(2, flaky))
    said = {"round": 0, "bug_key": flaky["bug_key"], "signature": "flaky", "twin": "acc",
            "triggers": [], "how": "influence"}  # fmt: skip
    led.withdraw(p, sighting(2, {"details": said, "bug_key": said["bug_key"]}), said)
    assert list(p.found) == ["acc"] and p.ledger.current("flaky") == "acc"
    again = _rec("flaky", key="nondeterminism|replays|-|-", case_size=524288,
                 details={"round": 0})  # fmt: skip
    assert not led.record(p, again, origin=sighting(9, again))
    assert list(p.found) == ["acc"] and p.as_dict()["bugs"] == 1
    assert p.ledger.hits()["acc"] >= 1
    # A first sight replaced by its slice's minimal example, met again first by another slice.
    first = _rec("big", key="nan|oracle|o|-", triggers=("tile", "causal"), case_size=4096)
    assert led.record(p, first, origin="3:k")
    small = _rec("small", key="nan|oracle|o|-", triggers=("causal",), shrunk=True, case_size=2)
    assert not led.record(p, small, origin="3:k")
    assert sorted(p.found) == ["acc", "small"]
    assert not led.record(p, dict(first), origin="4:k")
    assert sorted(p.found) == ["acc", "small"]


def test_a_bug_found_again_is_a_hit_and_a_smaller_example_of_it_takes_its_place():
    p = _pair("p")
    policy = _policy([p])
    led = _Ledger(policy)
    assert led.record(p, _rec("a", triggers=("multi-tile", "partial-tile")), origin="1:k")
    # The same slice's minimal example of it replaces its first sight (not a new bug).
    assert not led.record(p, _rec("a2", triggers=("multi-tile",), shrunk=True), origin="1:k")
    assert list(p.found) == ["a2"]
    # Another slice meets it with more conditions: a hit of it.
    assert not led.record(p, _rec("a3", triggers=("multi-tile", "subnormal")), origin="2:k")
    assert list(p.found) == ["a2"] and p.ledger.known_hits == Counter({"a2": 1})
    # Another slice meets it needing fewer conditions, unshrunk: a hit, its conditions another
    # way to the bug; the shrunk example stays the smallest reproducer.
    assert not led.record(p, _rec("a5", triggers=()), origin="7:k")
    assert list(p.found) == ["a2"] and p.found["a2"]["also_triggers"] == [[]]
    # Needing fewer conditions, shrunk and no larger: that example is kept in its place.
    assert not led.record(p, _rec("a4", triggers=(), shrunk=True), origin="3:k")
    assert list(p.found) == ["a4"] and p.ledger.known_hits["a4"] == 3
    # A bug of another key, or whose triggers do not nest, is a new bug.
    assert led.record(p, _rec("b", key="nan|oracle|crash|-"), origin="4:k")
    assert led.record(p, _rec("c", key="inf|oracle|y|-", triggers=("feature bias",)), origin="5:k")
    assert led.record(p, _rec("d", key="inf|oracle|y|-", triggers=("multi-tile",)), origin="6:k")
    assert sorted(p.found) == ["a4", "b", "c", "d"] and p.as_dict()["bugs"] == 4
    # Replaced examples' reproducers are removed at the end (unless still named).
    assert set(led.superseded) >= {"a.py", "a3.py", "a2.py"}


def test_a_larger_example_of_a_bug_with_fewer_conditions_leaves_the_smaller_one_standing():
    """On an H200 a planted GLA kernel's row of 16 elements (the final state asked for, a
    per-head decay, an initial state) was replaced by a later slice's minimal example of 256
    (the same without the initial state): the row grew 16x. The smaller reproducer stands; the
    fewer conditions are another way to the bug."""
    p = _pair("p")
    led = _Ledger(_policy([p]))
    key = "accuracy|oracle|ht|-"
    three = ("feature final_state", "feature g_gamma", "feature initial_state")
    assert led.record(p, _rec("s", key, three, shrunk=True, case_size=16), origin="1:k")
    two = three[:2]
    assert not led.record(p, _rec("l", key, two, shrunk=True, case_size=256), origin="2:k")
    assert list(p.found) == ["s"] and p.found["s"]["case_size"] == 16
    assert p.found["s"]["also_triggers"] == [list(two)] and p.ledger.known_hits["s"] == 1
    # As small or smaller, the example of fewer conditions takes its place.
    assert not led.record(p, _rec("t", key, two[:1], shrunk=True, case_size=16), origin="3:k")
    assert list(p.found) == ["t"]


def test_a_bug_streamed_as_new_that_shrank_to_a_known_one_is_retracted():

    p = _pair("p")
    policy = _policy([p])
    led = _Ledger(policy)
    assert led.record(p, _rec("r", key="accuracy|oracle|y|-", triggers=("partial-tile",)))
    # A slice streams a bug whose triggers do not nest with the known one's: new, for now.
    dup = _rec("n", key="accuracy|oracle|y|-", triggers=("multi-tile",), details={"round": 0})
    assert led.record(p, dup, origin=sighting(7, dup))
    assert sorted(p.found) == ["n", "r"]
    # Its hunt's duplicate check shrank it into the known bug: one bug, its reproducer goes.
    said = {"round": 0, "bug_key": "accuracy|oracle|y|-", "signature": "n", "twin": "r"}
    led.withdraw(p, sighting(7, {"details": said, "bug_key": said["bug_key"]}), said)
    assert list(p.found) == ["r"] and p.as_dict()["bugs"] == 1
    assert "n.py" in set(led.superseded)
    # The conditions it was first seen with are a way to the known bug: later slices count
    # examples with all of them as its hits instead of shrinking them again.
    assert {b.triggers for b in p.bugs()} == {
        frozenset({"partial-tile"}),
        frozenset({"multi-tile"}),
    }
    from fuzz.signatures import covering

    hit = covering(p.bugs(), "accuracy|oracle|y|-", {"multi-tile", "subnormal"})
    assert hit is not None and hit.signature == "r"  # (what its slices are told: known)
    # A slice's first sight replaced by its minimal example keeps the first conditions for that.
    first = _rec(
        "f", key="accuracy|oracle|y|-", triggers=("feature bias", "tail"), details={"round": 0}
    )
    assert led.record(p, first, origin=sighting(11, first))
    small = _rec(
        "s", key="accuracy|oracle|y|-", triggers=("tail",), shrunk=True, details={"round": 0}
    )
    assert not led.record(p, small, origin=sighting(11, small))
    assert p.found["s"]["first_triggers"] == ["feature bias", "tail"]
    said = {"round": 0, "bug_key": "accuracy|oracle|y|-", "signature": "s", "twin": "r"}
    led.withdraw(p, sighting(11, {"details": said, "bug_key": said["bug_key"]}), said)
    assert frozenset({"feature bias", "tail"}) in {b.triggers for b in p.bugs()}


def test_a_bug_seen_another_way_with_a_smaller_example_stands_for_the_bug():
    """A slice's duplicate check finds that a bug it streamed as new (another key) is a known
    bug seen another way: one row. Where its minimal example is smaller than the known bug's, it
    stands for the bug (the smallest reproducer first), and the known bug's record is kept
    beside it as a way it was also seen, with its reproducer and its other conditions; a later
    duplicate check naming the old record goes to the new one."""
    p = _pair("p")
    policy = _policy([p])
    led = _Ledger(policy)
    masking = _rec(
        "m", key="masking|oracle|y|-", triggers=("tile",), shrunk=True, case_size=12,
        first_example=5, also_triggers=[["lone-row"]],
    )  # fmt: skip
    assert led.record(p, masking)
    p.ledger.known_hits["m"] = 3
    small = _rec(
        "a", key="accuracy|oracle|y|-", triggers=("tile",), shrunk=True, case_size=4,
        details={"round": 0}, first_example=40,
    )  # fmt: skip
    assert led.record(p, small, origin=sighting(7, small))
    said = {"round": 0, "bug_key": small["bug_key"], "signature": "a", "twin": "m",
            "triggers": ["tile"], "how": "influence"}  # fmt: skip
    led.withdraw(p, sighting(7, {"details": said, "bug_key": said["bug_key"]}), said)
    assert list(p.found) == ["a"] and p.as_dict()["bugs"] == 1
    assert led.last.merged == [("a", "m", "stands", "accuracy")]
    from fuzz.campaign import console

    (said_line,) = console.recorded(p, led.last)
    assert "(a) is the bug found before (m)" in said_line and "smaller example" in said_line
    row = p.found["a"]
    assert row["case_size"] == 4 and row["first_example"] == 5  # first seen as the bug was
    (seen,) = row["also_seen"]
    assert seen["signature"] == "m" and seen["reproducer"] == "/nowhere/m.py"
    assert seen["how"] == "influence" and not led.superseded  # both reproducers kept
    assert p.ledger.current("m") == "a" and p.ledger.hits()["a"] == 3
    # Its later slices know it each way it was seen, with each way's example to check.
    ways = {(b.key, b.triggers, b.example) for b in p.bugs()}
    assert ("masking|oracle|y|-", frozenset({"lone-row"}), "/nowhere/m.py") in ways
    assert ("accuracy|oracle|y|-", frozenset({"tile"}), "/nowhere/a.py") in ways
    assert {b.signature for b in p.bugs()} == {"a"}
    # A larger example seen another way is kept beside the bug, not in its place.
    big = _rec(
        "b", key="accuracy|oracle|lse|-", triggers=("tile",), shrunk=True, case_size=9,
        details={"round": 1},
    )  # fmt: skip
    assert led.record(p, big, origin=sighting(8, big))
    said = {"round": 1, "bug_key": big["bug_key"], "signature": "b", "twin": "m",
            "triggers": ["tile"], "how": "property"}  # fmt: skip
    led.withdraw(p, sighting(8, {"details": said, "bug_key": said["bug_key"]}), said)
    assert list(p.found) == ["a"]
    assert [s["signature"] for s in p.found["a"]["also_seen"]] == ["b", "m"]


def test_a_bug_streamed_as_new_that_is_a_known_one_is_no_gain_of_its_slice():
    """A slice's gain (new bugs, new coverage: what favours a pair once floors are met) does not
    count a bug it streamed as new that turned out to be one found before (a GPU plugin campaign
    found one NaN bug again in every slice of a pair, each time first as new). Its first sight
    says that a bug found before has its key."""
    p = _pair("p")
    policy = _policy([p])
    NEW_CLASS_WEIGHT = policy.t.new_class_weight
    led = _Ledger(policy)
    key = "nan|oracle|y|-"
    assert led.record(p, _rec("r", key=key, triggers=("unmasked-neg-inf",), shrunk=True))
    policy.begin(p, 0, slice_id=3, now=0.0, left=100.0)  # a slice begins: no gain yet
    assert p.slice_new == 0.0
    first = _rec("f", key=key, triggers=("feature mask",), details={"round": 0})
    out = policy.found(3, first)
    assert out.new and out.maybe_of == "r"  # (said on the console: it may shrink into r)
    assert p.slice_new == NEW_CLASS_WEIGHT
    # Its minimal example is the known bug's: a hit, no gain.
    final = _rec("r", key=key, triggers=("unmasked-neg-inf",), shrunk=True, details={"round": 0})
    assert not led.record(p, final, origin=sighting(3, final))
    assert p.slice_new == 0.0 and list(p.found) == ["r"]
    # A bug of its own: its minimal example replaces its first sight and the gain stays.
    other = _rec("o", key="accuracy|oracle|y|-", triggers=("multi-tile",), details={"round": 1})
    assert led.record(p, other, origin=sighting(3, other))
    assert led.last.maybe_of is None
    small = _rec("o2", key="accuracy|oracle|y|-", triggers=(), shrunk=True, details={"round": 1})
    assert not led.record(p, small, origin=sighting(3, small))
    assert p.slice_new == NEW_CLASS_WEIGHT and sorted(p.found) == ["o2", "r"]
    # Withdrawn by its hunt's duplicate check: no gain either.
    third = _rec("t", key=key, triggers=("subnormal",), details={"round": 2})
    assert led.record(p, third, origin=sighting(3, third))
    assert p.slice_new == 2 * NEW_CLASS_WEIGHT
    said = {"round": 2, "bug_key": key, "signature": "t", "twin": "r"}
    led.withdraw(p, sighting(3, {"details": said, "bug_key": key}), said)
    assert p.slice_new == NEW_CLASS_WEIGHT and "t" not in p.found


def test_deaths_retire_a_pair_only_when_they_repeat_a_bug_found_before():
    p = _pair("p")
    policy = _policy([p])
    led = _Ledger(policy)
    death = _rec("x", key="crash|process|-|-")
    assert led.record(p, dict(death))
    for _ in range(2):
        assert not policy.death_record(p, dict(death)).new
    assert p.repeat_deaths == 2
    assert p.retired.startswith("killed its worker 2 more times")


def test_campaign_config_floors_default_to_the_issue_numbers():
    fields = CampaignConfig.__dataclass_fields__
    assert fields["floor_examples"].default == 200 and fields["floor_seconds"].default == 30.0
    assert fields["real_floor_seconds"].default == 60.0
    t = Tunables()
    assert (t.floor_examples, t.floor_seconds, t.real_floor_seconds) == (200, 30.0, 60.0)


def test_a_real_target_has_a_longer_seconds_floor_than_a_mutant():
    """What the nightly job is for gets twice the fuzzing seconds before the bandit: a GPU
    campaign's real Pallas attention pair met a 30 s floor at 164 examples."""
    real = _pair("real", examples=50, seconds=31.0)
    mutant = _pair("mut", examples=50, seconds=31.0, mutant=True, expected="nan")
    policy = _policy([real, mutant])
    assert policy.floor_progress(mutant) >= 1.0
    assert policy.floor_progress(real) == pytest.approx(31.0 / 60.0)
    assert policy.pick() is real  # still under its floor
    real.seconds = 61.0
    assert policy.floor_progress(real) >= 1.0


FAKE = str(Path(__file__).parent / "fake_targets.py")


def _fake_gpu_campaign(
    tmp_path, monkeypatch, targets, *, plugin, examples, seed, compile_workers, compile, log
):
    """A campaign over fake kernels (``targets``, names) compiled per column bucket (``compile``
    seconds each, into a cache on disk that processes share, as Triton's is) on a compiled fake
    backend, ended by its ``examples``; its report and the processes that paid a slow compile."""
    from fuzz.profiles import Profile
    from fuzz.target import get, load_plugin

    load_plugin(plugin)
    cache = tmp_path / "cache"
    cache.mkdir(parents=True)
    monkeypatch.setenv("KERNEL_FUZZ_FAKE_CACHE", str(cache))
    monkeypatch.setenv("KERNEL_FUZZ_FAKE_COMPILE", str(compile))
    config = CampaignConfig(
        targets=[get(name) for name in targets],
        backends=["fake-gpu"],
        profile=Profile("ci", ("fake-gpu",), "small", False, "cpu", False, 60),
        budget=900,  # a safety net: the campaign ends at its examples
        examples=examples,
        out=tmp_path / "out",
        repro_dir=tmp_path / "out" / "reproducers",
        db=None,
        plugins=[plugin],
        seed=seed,
        compile_workers=compile_workers,
    )
    report = Campaign(config, log=log).run()
    slow = (cache / "slow.log").read_text().split() if (cache / "slow.log").exists() else []
    return report, slow[0::2]


def _cached_campaign(tmp_path, monkeypatch, compile_workers):
    """A campaign over two fake kernels compiled per column bucket (0.3 s each)."""
    return _fake_gpu_campaign(
        tmp_path,
        monkeypatch,
        ["fake_cached", "fake_cached_nan"],
        plugin=FAKE,
        examples=120,
        seed=5,
        compile_workers=compile_workers,
        compile=0.3,
        log=lambda line: None,
    )


def test_compile_workers_compile_ahead_and_the_fuzzing_path_does_not_pay(tmp_path, monkeypatch):
    ahead, ahead_pids = _cached_campaign(tmp_path / "a", monkeypatch, compile_workers=1)
    alone, alone_pids = _cached_campaign(tmp_path / "b", monkeypatch, compile_workers=0)
    rows = {r["target"]: r for r in ahead["results"]}
    for r in rows.values():
        assert r["warm"] == "ready" and r["precompile_seconds"] >= 0.3, r  # warmed up first
        assert r["examples"] >= 120
    assert rows["fake_cached_nan"]["status"] == "fail"  # warm-ups find bugs too: none is lost
    # Without compile workers the fuzzing worker pays each variant's compile it draws (0.3 s each;
    # the campaign's compile share bound keeps that to a few: one per pair, the first); with
    # one, most of the slow compiles happen in the compile worker (one process) and the fuzzing
    # worker pays fewer.
    paid_alone = sum(r["compile_seconds"] for r in alone["results"])
    paid_ahead = sum(r["compile_seconds"] for r in ahead["results"])
    assert paid_alone >= 2 * 0.3 and len(alone_pids) >= 2, (paid_alone, alone_pids)
    top = max(set(ahead_pids), key=ahead_pids.count)
    on_the_path = len(ahead_pids) - ahead_pids.count(top)
    assert ahead_pids.count(top) > on_the_path, ahead_pids
    assert on_the_path < len(alone_pids) and paid_ahead < paid_alone, (ahead_pids, alone_pids)


def test_idle_compile_workers_warm_again_the_pair_whose_fuzzing_compiles_most():
    a = _pair("a", examples=300, seconds=20.0, compile_seconds=9.0)
    b = _pair("b", examples=300, seconds=20.0, compile_seconds=3.0)
    interpreted = _pair("i", examples=300, seconds=20.0, compile_seconds=30.0)  # never warmed
    for p, at in ((a, 1.0), (b, 0.5)):
        p.warm_count, p.compile_at_warm = 1, at
    cold = _pair("cold", examples=0, slices=0)
    cold.warmth = Warmth.COLD
    policy = _policy([a, b, interpreted, cold])
    assert policy.next_warm_up() is cold  # a pair not warmed up yet first
    cold.warmth = Warmth.READY
    assert policy.next_warm_up() is a  # then the one that paid most since its warm-up (8 s)
    a.warm_count = 4
    assert policy.next_warm_up() is b  # a had its warm-ups
    b.compile_at_warm = 2.0  # 1 s since: not worth another
    assert policy.next_warm_up() is None
    # Its compile share spent, b's fuzzing refuses new structures instead of compiling them:
    # ten refusals since its warm-up call for another.
    b.events["rejected: would compile"] = 9
    assert policy.next_warm_up() is None
    b.events["rejected: would compile"] = 10
    assert policy.next_warm_up() is b
    b.refused_at_warm = 10
    assert policy.next_warm_up() is None


def test_the_processes_on_one_gpu_split_its_memory(monkeypatch):
    """A campaign's fuzzing and compile workers on one GPU split its memory, as xdist workers
    do (13 processes with no split ran a correct kernel out of memory on an H100)."""
    from fuzz.campaign import process
    from fuzz.campaign.config import slot_devices

    devices = slot_devices(SimpleNamespace(workers=5, compile_workers=4, devices=["0", "1"]))
    assert [devices.count(d) for d in ("0", "1")] == [5, 4]
    assert slot_devices(SimpleNamespace(workers=2, compile_workers=1, devices=[])) == [None] * 3
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    monkeypatch.delenv("KERNEL_FUZZ_GPU_SHARE", raising=False)
    assert process.share_gpu_memory(1) is None
    torch_share = process.share_gpu_memory(5)
    assert torch_share == pytest.approx(0.45 / 5)
    assert float(__import__("os").environ["XLA_PYTHON_CLIENT_MEM_FRACTION"]) == pytest.approx(0.06)
    # A quarter of the GPU stays outside both pools (CUDA contexts, loaded kernel modules).
    from fuzz.campaign.threads import TORCH_SHARE, XLA_SHARE

    assert TORCH_SHARE + XLA_SHARE <= 0.75
    monkeypatch.setenv("KERNEL_FUZZ_GPU_SHARE", "off")
    assert process.share_gpu_memory(5) is None
    # Two campaigns on one GPU, half each: each splits its half (a lone process too), where
    # each had split the whole GPU among its own and JAX's workers ran out of memory on an H200.
    monkeypatch.setenv("KERNEL_FUZZ_GPU_SHARE", "0.5")
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION")
    assert process.share_gpu_memory(5) == pytest.approx(0.45 / 10)
    assert float(__import__("os").environ["XLA_PYTHON_CLIENT_MEM_FRACTION"]) == pytest.approx(0.03)
    assert process.share_gpu_memory(1) == pytest.approx(0.45 / 2)
    for bad in ("0", "1.5", "half", "-1"):
        monkeypatch.setenv("KERNEL_FUZZ_GPU_SHARE", bad)
        with pytest.raises(ValueError, match=r"KERNEL_FUZZ_GPU_SHARE=.*'off' or a number in"):
            process.share_gpu_memory(5)


def test_a_pair_widens_its_kernel_variants_after_each_floor():
    """A pair's compile-time choices (a few per dimension, compiled once) grow by a value per
    dimension each time it has had another floor's worth with them, until they are the whole
    space: a mutant whose bug needs block_q > block_k was missed by every GPU campaign whose
    choices for it lacked such a pair. The earlier choices stay first (what the pair recorded
    still means the same), and a compile worker warms the pair up again."""
    from fuzz.engine import run_narrowing
    from fuzz.families import variant_space
    from fuzz.profiles import HuntOptions, get_profile
    from fuzz.target import get

    target = get("attention_mutant_causal_loop_bound")
    options = HuntOptions.of(get_profile("gpu"))
    space = variant_space(target, options.scale)
    pair = PairState(target, "triton", slices=1)
    pair.narrowing = run_narrowing(target, options, 1)
    pair.warm_count = 1
    fresh = PairState(target, "triton", slices=1, seconds=40.0)
    fresh.narrowing = run_narrowing(target, options, 1)
    fresh.stats["compile_seconds"] = 15.0
    policy = _policy(
        [pair, fresh],
        seed=1,
        compile_ahead=True,
        widen=lambda p, level: run_narrowing(p.target, options, 1, widen=level),
    )
    policy.add_worker(9, "compile")
    ended = _slice(policy, pair, {"examples": 199, "seconds": 0.0})
    assert pair.widened == 0 and ended.widened is None  # under a floor's worth: nothing changes
    seen = [pair.narrowing]
    while pair.widened < 20:
        ended = _slice(policy, pair, {"examples": 200, "seconds": 0.0})
        if pair.pending is None:
            break
        assert ended.widened  # what it added, per dimension
        # Compiled ahead before its fuzzing draws them: it fuzzes on with those it has, and
        # widens no more, until its warm-up of them.
        assert pair.narrowing == seen[-1] and pair.warmth is Warmth.READY
        assert _slice(policy, pair, {"examples": 200, "seconds": 0.0}).widened is None
        assert pair.narrowing == seen[-1]
        assert policy.next_warm_up() is pair
        _slice(policy, pair, {"seconds": 1.0}, worker=9)  # its warm-up of them
        assert pair.pending is None and pair.warm_count == 1
        before, now = seen[-1], pair.narrowing
        for dim, values in now.items():
            assert values[: len(before[dim])] == before[dim]  # the earlier choices first
            assert len(values) == min(len(before[dim]) + 1, len(set(space[dim])))
        seen.append(now)
    assert all(set(seen[-1][d]) == set(space[d]) for d in seen[-1])  # the whole space, in the end
    assert any(q > k for q, k in seen[-1]["block_pairs"])
    assert pair.as_dict()["variants_widened"] == pair.widened == len(seen) - 1
    # Fuzzing seconds count as the floor does (compiling not counted).
    _slice(policy, fresh, {"seconds": 0.0})
    assert fresh.widened == 0  # 25 s of fuzzing
    fresh.seconds = 46.0
    _slice(policy, fresh, {"seconds": 0.0})
    assert fresh.widened == 1  # (not warmed up yet: widened at once, compiled as drawn)
    fresh.retired = "mutant found and shrunk"
    fresh.seconds = 200.0
    _slice(policy, fresh, {"seconds": 0.0})
    assert fresh.widened == 1  # a retired pair is left as it is


def test_a_slice_that_only_refused_is_no_fuzzing_toward_the_floor():
    """A slice whose every example was refused (it would have compiled past the share) checked
    nothing: its seconds count toward no floor (a GPU campaign's Pallas pair met the 30 s floor
    with 16 examples checked, and had its variants widened on it)."""
    pair = _pair("p", examples=10, seconds=5.0)
    policy = _policy([pair])
    refused = {"rejected: would compile": 30}  # a slice cut by its time, every example refused
    _slice(policy, pair, {"examples": 0, "seconds": 40.0, "stopped": "time", "events": refused})
    assert pair.seconds == 45.0 and pair.fuzz_seconds == pytest.approx(5.0)
    assert policy.floor_progress(pair) < 1.0
    _slice(policy, pair, {"examples": 3, "seconds": 30.0, "stopped": "refused"})
    assert pair.fuzz_seconds == pytest.approx(35.0)  # it checked some: fuzzing
    assert pair.as_dict()["refused_seconds"] == 40.0


def test_widened_variants_warm_up_after_every_first_warm_up_and_are_fuzzed_after_theirs():
    """A pair whose choices were widened fuzzes on with the variants compiled for it; the compile
    workers warm its new ones up after the first warm-up of every pair (a GPU campaign that put
    widened real targets first spent 1,164 s of 2,200 in its compile workers on them and left
    25 mutant pairs to compile on the fuzzing path), real targets first; once warmed up, its
    fuzzing draws them."""
    old, wide = {"block": [64]}, {"block": [64, 128]}
    real = _pair("real", examples=400, seconds=20.0)
    mutant = _pair("mutant", examples=400, seconds=20.0, mutant=True, expected="nan")
    for p, since in ((mutant, 1), (real, 2)):  # the mutant widened first
        p.warm_count, p.narrowing, p.pending, p.pending_since = 1, old, wide, since
    cold = _pair("cold", slices=0, mutant=True, expected="nan")
    cold.warmth = Warmth.COLD
    policy = _policy([real, mutant, cold], compile_ahead=True)
    policy.add_worker(9, "compile")
    assert policy.next_warm_up() is cold  # a first warm-up before any widened pair's
    assert policy.pick() in (real, mutant)  # the widened pairs are fuzzed meanwhile
    cold.warmth = Warmth.READY
    assert policy.next_warm_up() is real  # real targets first
    _slice(policy, real, {"examples": 5, "seconds": 2.0})  # a fuzzing slice: as it was
    assert real.narrowing == old and real.pending == wide
    plan = policy.begin(real, 9, slice_id=2, now=0.0, left=100.0)  # its warm-up
    assert plan.narrowing == wide and real.warmth is Warmth.WARMING
    policy.ended(2, {"examples": 5, "seconds": 9.0, "compile_seconds": 8.0}, 9.0)
    assert real.narrowing == wide and real.pending is None and real.warm_count == 1
    assert real.warmth is Warmth.READY and real.stats["precompile_seconds"] == 8.0
    assert policy.next_warm_up() is mutant
    # A widened pair whose warm-up died takes its new variants as they are (compiled as drawn).
    policy.begin(mutant, 9, slice_id=3, now=0.0, left=100.0)
    policy.lost(3, 5.0)
    assert mutant.narrowing == wide and mutant.pending is None and policy.next_warm_up() is None


def test_a_killed_slice_past_its_search_limit_is_no_fuzzing_and_what_it_streamed_retires():
    """A slice killed past its hard limit was shrinking (or running over) after its search's
    time limit: that time counts toward no floor. A mutant whose expected bug it streamed shrunk
    is finished, though its summary never came (an H100 campaign left such a pair unretired,
    its 111 s counted as fuzzing with 5 examples)."""
    p = _pair("m", examples=0, seconds=0.0, slices=0, mutant=True, expected="nan")
    q = _pair("q", examples=0, seconds=0.0, slices=0, mutant=True, expected="nan")
    policy = _policy([p, q], slice_seconds=15.0)
    assert policy.record(p, _rec("n", triggers=("partial-tile",), shrunk=True)).new
    policy.begin(p, 0, slice_id=1, now=0.0, left=1000.0)
    policy.progress(1, 5, 4.0)
    lost = policy.lost(1, 100.0)
    assert p.examples == 5 and p.seconds == pytest.approx(100.0)
    assert p.stats["shrink_seconds"] == pytest.approx(81.0)  # past 15 s + 4 s compiling
    assert p.fuzz_seconds == pytest.approx(15.0)
    assert p.retired == lost.retired == "mutant found and shrunk"
    # A slice that died inside its search: all of it was fuzzing; nothing found, not retired.
    policy.begin(q, 0, slice_id=2, now=0.0, left=1000.0)
    policy.lost(2, 10.0)
    assert q.stats["shrink_seconds"] == 0.0 and q.fuzz_seconds == pytest.approx(10.0)
    assert not q.retired


def test_a_slice_is_not_killed_for_overrunning_while_it_compiles():
    """The hard limit of a slice does not count compiling: its compiles so far, and the one in
    flight (an H100 campaign killed a Pallas GLA pair's slices while they compiled)."""
    from fuzz.campaign.pool import Job, overran

    late = Job(1, 0.0, plan=object(), hard_deadline=145.0)  # 55 s past its hard limit at 200
    assert overran(late, now=200.0, live_compile=0.0, compiling=0.0)
    assert not overran(late, now=200.0, live_compile=0.0, compiling=15.0)  # 15 s in flight
    assert not overran(late, now=200.0, live_compile=12.0, compiling=0.0)  # its compiles so far
    replay = Job(2, 0.0, replay_path="r.py", hard_deadline=160.0)
    assert not overran(replay, now=200.0, live_compile=0.0, compiling=0.0)
    # 40 s past: within the time to settle its bugs (SETTLE_SECONDS) and 30 s more.
    assert not overran(late, now=185.0, live_compile=0.0, compiling=0.0)
    # An example in flight that began before that point is left to its own timeout; one begun
    # after it is not.
    assert not overran(late, now=200.0, live_compile=0.0, compiling=0.0, example_since=185.0)
    assert overran(late, now=200.0, live_compile=0.0, compiling=0.0, example_since=192.0)


def test_a_slice_whose_worker_began_late_has_its_deadline_from_then():
    """A worker that began a slice late (a fresh process importing torch, JAX and Triton on a
    loaded machine) stops its hunt by its own clock: its hard deadline counts from when it
    began (a progress message less the seconds it reports), never before the dispatch's. A CPU
    campaign's slice was killed 30 s past a deadline counted from the dispatch while it settled
    its bug by its own."""
    from fuzz.campaign.pool import Job, overran, slice_deadline

    job = Job(1, 100.0, plan=object(), hard_deadline=160.0)  # dispatched at 100, 60 s limit
    job.hard_deadline = slice_deadline(job.hard_deadline, began=118.0, hard_limit=60.0)
    assert job.hard_deadline == 178.0
    assert not overran(job, now=215.0, live_compile=0.0, compiling=0.0)  # 37 s past: not 45
    assert overran(job, now=225.0, live_compile=0.0, compiling=0.0)
    assert slice_deadline(160.0, began=95.0, hard_limit=60.0) == 160.0  # never earlier


def test_a_nan_born_where_a_known_ones_is_counts_as_it_and_its_conditions_as_another_way():
    """Two records of one NaN key whose trigger sets do not nest, traced to one kernel
    expression: one bug. Its slice streamed the second as new before its origin was traced; the
    traced record of it takes that back. Later slices know both ways to the bug."""

    at = {"origin": {"found": True, "file": "k.py", "line": 76, "expression": "e / l"}}
    p = _pair("p")
    policy = _policy([p])
    led = _Ledger(policy)
    assert led.record(p, _rec("neg", triggers=("unmasked-neg-inf",), details=at))
    streamed = _rec("mask", triggers=("feature mask",), details={"round": 2})
    assert led.record(p, streamed, origin=sighting(5, streamed))  # no origin yet: new for now
    traced = _rec("mask", triggers=("feature mask",), details={"round": 2, **at}, shrunk=True)
    assert not led.record(p, traced, origin=sighting(5, traced))
    assert list(p.found) == ["neg"] and p.as_dict()["bugs"] == 1
    assert p.found["neg"]["also_triggers"] == [["feature mask"]]
    assert p.ledger.known_hits["neg"] >= 1 and "mask.py" in set(led.superseded)
    ways = {b.triggers for b in p.bugs()}
    assert ways == {frozenset({"unmasked-neg-inf"}), frozenset({"feature mask"})}
    assert {b.signature for b in p.bugs()} == {"neg"}
    # Born elsewhere: another bug, though its key is the same.
    elsewhere = {"origin": {**at["origin"], "line": 90}}
    assert led.record(p, _rec("late", triggers=("multi-tile",), details=elsewhere))
    # A slice's own duplicate check said "born at the site": its conditions are kept too.
    dup = _rec("pad", triggers=("feature pad",), details={"round": 0})
    assert led.record(p, dup, origin=sighting(8, dup))
    said = {"round": 0, "bug_key": dup["bug_key"], "signature": "pad", "twin": "neg",
            "triggers": ["feature pad"], "how": "site"}  # fmt: skip
    led.withdraw(p, sighting(8, {"details": said, "bug_key": said["bug_key"]}), said)
    assert sorted(p.found) == ["late", "neg"]
    assert p.found["neg"]["also_triggers"] == [["feature mask"], ["feature pad"]]


def test_a_duplicate_whose_twin_was_replaced_meanwhile_is_still_taken_back():
    """On an H100 a slice's duplicate check named its twin by the signature it had when the
    slice began; the campaign had since replaced that record by a smaller example of the bug
    (fewer conditions), and the duplicate stayed in the report beside it."""

    p = _pair("p")
    policy = _policy([p])
    led = _Ledger(policy)
    assert led.record(p, _rec("a", triggers=("partial-tile", "row-without-valid-key")))
    assert not led.record(p, _rec("a2", triggers=("row-without-valid-key",)))  # in its place
    assert list(p.found) == ["a2"] and p.ledger.replaced == {"a": "a2"}
    dup = _rec("m", triggers=("feature mask",), details={"round": 1})
    assert led.record(p, dup, origin=sighting(5, dup))  # streamed as new by a slice
    said = {"round": 1, "bug_key": dup["bug_key"], "signature": "m", "twin": "a",
            "triggers": ["feature mask"], "how": "site"}  # fmt: skip
    led.withdraw(p, sighting(5, {"details": said, "bug_key": said["bug_key"]}), said)
    assert list(p.found) == ["a2"] and p.found["a2"]["also_triggers"] == [["feature mask"]]


def test_a_slice_streams_a_minimal_nan_with_its_origin(monkeypatch):
    """A minimal NaN example goes to the campaign with where its NaN is born, so that a known
    bug reached through other conditions is told at once (``fuzz.signatures.same_bug``), not
    only from the slice's summary (a slice may end without one)."""
    from fuzz import origin
    from fuzz.campaign.messages import Found
    from fuzz.campaign.slice_run import SliceRun
    from fuzz.failures import Finding

    sent = []
    at = {"found": True, "file": "k.py", "line": 7, "expression": "a / b"}
    monkeypatch.setattr(origin, "trace_finding", lambda *a, **k: dict(at))
    me = SimpleNamespace(
        id=3,
        target=SimpleNamespace(name="t"),
        backend=SimpleNamespace(name="triton"),
        conn=SimpleNamespace(send=sent.append),
        try_reproducer=lambda found: None,
        ran_before=[],
        _trace_cost=None,  # (no cost bound: tests/fuzz/test_origin.py has it)
        _trace_seconds=lambda: 30.0,  # (a slice with time left)
    )
    me._trace = lambda found: SliceRun._trace(me, found)

    def found(cls, final):
        return SimpleNamespace(
            final=final,
            finding=Finding(cls, "oracle", "m", output="y"),
            case=None,
            params={},
            reproducer=None,
        )

    monkeypatch.setattr("fuzz.campaign.slice_run._found_dict", lambda f: dict(f.finding.details))
    for cls, final, traced in (
        ("nan", True, True),
        ("nan", False, False),
        ("accuracy", True, True),  # (a load past a buffer: ``fuzz.origin.trace_loads``)
        ("crash", True, False),
    ):
        sent.clear()
        SliceRun.on_found(me, None, found(cls, final))
        assert isinstance(sent[0], Found) and ("origin" in sent[0].record) == traced, (cls, final)


def test_a_record_whose_minimal_call_is_a_known_bugs_is_a_hit_of_it():
    p = _pair("p")
    policy = _policy([p])
    led = _Ledger(policy)
    assert led.record(p, _rec("o", key="accuracy|oracle|y|-", case_digest="d1", shrunk=True))
    same = _rec("r", key="accuracy|rows-sum-to-one|y|-", case_digest="d1", shrunk=True)
    assert not led.record(p, same)
    assert list(p.found) == ["o"] and p.ledger.known_hits["o"] == 1
    # Not yet shrunk, or another call: a bug of its own for now.
    assert led.record(p, _rec("r2", key="accuracy|rows-sum-to-one|y|-", case_digest="d1"))
    assert led.record(
        p, _rec("r3", key="accuracy|rows-sum-to-one|y|x", case_digest="d2", shrunk=True)
    )


def test_a_mutant_found_and_shrunk_before_its_worker_ran_out_of_memory_is_finished():
    p = _pair("m", mutant=True, expected="nan")
    policy = _policy([p])
    p.ledger.found = {"s": {"class": "nan", "shrunk": True, "signature": "s"}}  # streamed before
    assert policy.out_of_resources(p, "the GPU ran out of memory") == "mutant found and shrunk"
    assert p.retired == "mutant found and shrunk" and p.error is None and p.out_of_resources == 1
    # A pair whose worker runs out twice (found nothing) is a harness error: it cannot run here.
    q = _pair("q", mutant=True, expected="nan")
    policy = _policy([q])
    assert policy.out_of_resources(q, "maps") == ""
    assert policy.out_of_resources(q, "maps") == "resource exhaustion" and "2 times" in q.error


def _config(budget, **kw):
    """A campaign's config, as ``estimates.fitted_floors`` reads it: the default floors, one
    fuzzing worker."""
    return SimpleNamespace(
        **{
            "floor_examples": 200,
            "floor_seconds": 30.0,
            "real_floor_seconds": 60.0,
            "examples": None,
            "slice_seconds": None,
            "budget": budget,
            "seed": 0,
            "compile_workers": 0,
            "warm_quiet": 8,
            "max_deaths": 2,
            "workers": 1,
            "scale_floors": True,
            **kw,
        }
    )


def test_a_budget_short_of_the_floors_scales_them_and_says_so():
    """A newcomer's two-minute run of every target and mutant (111 pairs) needed over an hour of
    fuzzing for its floors: 60 pairs ran nothing and the rest read 'pass' after 1 s. Where the
    budget is short of the floors, they are scaled to fit it (every pair gets its share), said
    up front with the budget the full floors need; floors asked for are kept."""
    from fuzz.campaign.estimates import FLOORS_SHARE, fitted_floors, floors_text

    pairs = [_pair(f"m{i}", mutant=True, expected="nan") for i in range(4)] + [_pair("r")]
    config = _config(90.0)
    t, said = fitted_floors(config, pairs)
    need = 4 * 30.0 + 60.0
    factor = 90.0 * FLOORS_SHARE / need
    assert said["need_seconds"] == need and said["scaled"] == pytest.approx(factor, abs=1e-4)
    assert t.floor_seconds == pytest.approx(30.0 * factor)
    assert t.real_floor_seconds == pytest.approx(60.0 * factor)
    assert t.floor_examples == round(200 * factor)
    text = floors_text(said, 5, 90.0)
    assert "floors scaled to 40%" in text and f"--budget {round(need / FLOORS_SHARE)}" in text
    for budget, scale in ((need / FLOORS_SHARE, True), (90.0, False)):
        config.budget, config.scale_floors = budget, scale
        t, said = fitted_floors(config, pairs)
        assert said["scaled"] == 1.0 and floors_text(said, 5, budget) is None
        assert (t.floor_examples, t.floor_seconds) == (200, 30.0)  # fits, or asked for


def _fitted_policy(pairs, budget, *, fit=True):
    """A policy over ``pairs`` (in the first round's order) with one fuzzing worker (0), its
    floors fitted to ``budget`` as a campaign's are; ``fit``: and refitted as it goes (else the
    floors fitted up front are kept). Returns it and what it says of its floors."""
    from fuzz.campaign.estimates import fitted_floors

    pairs = interleave(pairs)
    t, floors = fitted_floors(_config(budget), pairs)
    policy = SchedulingPolicy(pairs, t, floors=floors if fit else None)
    policy.add_worker(0, "fuzz")
    return policy, floors


def _fake_campaign(policy, budget, *, shrink, rate=5.0):
    """Runs ``policy``'s campaign on a fake clock, its one fuzzing worker (0) taking slices till
    the budget is spent: a slice fuzzes its time limit at ``rate`` examples a second; a
    mutant's first slice finds its planted bug and shrinks it (as Hypothesis does in the search
    on an interpreter) ``shrink`` seconds past that limit, which retires the mutant. Returns
    what the slices' ends said of the floors."""
    now, said = 0.0, []
    for sid in itertools.count(1):
        plan = policy.next_slice(0, slice_id=sid, now=now, left=budget - now)
        if plan is None:
            return said
        pair = policy.pair(f"{plan.target}|{plan.backend}")
        found = pair.target.is_mutant and pair.slices == 0
        now += plan.time_limit + (shrink if found else 0.0)
        summary = {"examples": round(rate * plan.time_limit), "seconds": now - plan.started}
        if found:
            summary["found"] = [_rec(f"s{sid}", shrunk=True)]
        out = policy.ended(sid, summary, now, left=budget - now)
        said += [out.floors] if out.floors is not None else []


def _reals_and_mutants():
    return [_pair(f"r{i}", slices=0) for i in range(2)] + [
        _pair(f"m{i}", slices=0, mutant=True, expected="nan") for i in range(6)
    ]


def test_floors_fitted_to_the_budget_are_lowered_for_what_slices_spend_past_fuzzing():
    """Floors fitted up front to a share of the budget leave the rest for shrinking what is
    found, compiling and the last slices; a two-minute run of the softmax kernels and their
    mutants on a loaded 2-core CPU spent 16 s compiling and 50 s past its slices' limits,
    mostly shrinking the mutants' bugs, and left 3 of 20 pairs short of their floor, one
    unrun. The policy measures what the slices spend past fuzzing as they end, and lowers the
    floors where the budget left would otherwise leave pairs short of them (said, with what it
    expects), never below what every pair has had; the same events with the floors kept leave
    the real targets short."""
    from fuzz.campaign import report

    budget = 60.0  # 2 real targets and 6 mutants: floors of 32 examples or 4.8 s (9.6 s)
    for fit in (False, True):
        policy, floors = _fitted_policy(_reals_and_mutants(), budget, fit=fit)
        fitted = dict(floors)
        said = _fake_campaign(policy, budget, shrink=6.0)
        rows = [p.as_dict() for p in policy.pairs]
        short = report.short_of_floor(rows, floors)
        assert report.summary_of(rows, [], [], [])["unrun"] == []
        if not fit:
            assert said == [] and floors == fitted
            assert short == ["r0 on fake", "r1 on fake"]  # one slice each: the budget was spent
            continue
        assert short == [] and floors["lowered"] < 1.0
        assert floors["examples"] < fitted["examples"] and floors["seconds"] < fitted["seconds"]
        assert said and said[0].startswith("floors lowered to ")
        assert "compiling and shrinking what they find" in said[0]
        assert all(p.retired or policy.floor_progress(p) >= 1.0 for p in policy.pairs)
        assert sum(p.retired != "" for p in policy.pairs) == 6  # every mutant found, shrunk


def test_floors_are_lowered_only_as_far_as_the_budget_left_needs_and_never_raised():
    """Floors are lowered where what is left of the budget no longer gives them, till they take
    ``FLOORS_SHARE`` of it; kept while it does; never below what every pair not finished has
    had nor below ``MIN_FLOOR_EXAMPLES``, and never raised again: a first slice compiles and a mutant's finds and shrinks its
    bug, and what the first few measured forecasts the rest badly (floors raised on them were
    lowered again, and again, and floors raised late left a pair short)."""
    from fuzz.campaign.estimates import FLOORS_SHARE, floors_left

    policy, floors = _fitted_policy(_reals_and_mutants(), 60.0)
    fitted = policy.t
    assert policy.refit(60.0) is None  # nothing measured: the floors fitted up front fit
    m0 = policy.pair("m0|fake")
    for p in policy.pairs:  # every pair has had its first slice: forecasts may be made
        p.slices = max(p.slices, 1)
    policy.overheads.book(m0, first=True, busy=7.5, fuzzed=3.0)  # 4.5 s past fuzzing
    said = policy.refit(50.0)
    assert said.startswith("floors lowered") and policy.t.floor_seconds < fitted.floor_seconds
    assert floors["examples"] == 11 and floors["seconds"] == 1.6 and floors["lowered"] < 1.0
    need = floors_left(policy.pairs, policy.t, policy.overheads)[0]
    assert need == pytest.approx(FLOORS_SHARE * 50.0, rel=0.02)
    lowered = policy.t
    assert policy.refit(50.0) is None  # the same estimates: kept
    for _ in range(30):  # slice after slice that cost nothing past fuzzing
        policy.overheads.book(m0, first=True, busy=3.0, fuzzed=3.0)
    for p in policy.pairs:
        p.slices, p.examples = 1, 1
    assert policy.refit(50.0) is None and policy.t == lowered  # not raised
    # Never below what every pair has had: 10 examples each.
    for p in policy.pairs:
        p.examples = 10
    policy.overheads.book(m0, first=False, busy=1000.0, fuzzed=0.1)
    assert policy.refit(20.0).startswith("floors lowered to 5% of the full ones, 10 examples")
    assert floors["examples"] == 10 and policy.t.floor_examples == 10


def test_once_the_scaled_floors_are_met_the_time_left_brings_pairs_toward_the_full_ones():
    """Floors scaled to a short budget are a share every pair gets first; the forecast counts
    every pair's full floor, and most mutants finish in a slice. Once every pair has had the
    scaled floors, the pairs short of the full ones come before the bandit, the furthest
    behind first (a 450 s H200 campaign gave 930 examples to a passing softmax while 25 real
    pairs stayed at 83-148 of 200), and only then the pairs that found things lately."""
    policy, floors = _fitted_policy(_reals_and_mutants(), 60.0)
    t = policy.t
    assert floors["scaled"] < 1.0 and floors["full"] == [200, 30.0, 60.0]
    busy, behind = policy.pair("r0|fake"), policy.pair("r1|fake")
    for p in policy.pairs:
        p.slices, p.examples, p.seconds = 1, t.floor_examples, t.real_floor_seconds
        p.retired = "finished" if p.target.is_mutant else None
    busy.examples, busy.rate = 250, 9.0  # at its full floor, finding things lately
    behind.examples = 40  # met the scaled floor, far from the full one
    assert policy.floor_progress(behind) >= 1.0 and not busy.retired
    assert policy.pick() is behind
    behind.examples = 200
    assert policy.pick() is busy  # every pair at its full floor: the bandit
    # Floors not scaled (the budget covers them, or they were asked for): the bandit at once.
    policy.floors = None
    behind.examples = 40
    assert policy.pick() is busy


def test_floors_are_not_lowered_on_the_first_slices_forecast():
    """Before every pair has had a slice, and with more than half the budget left, the floors
    are kept: the first slices compile and shrink the mutants' bugs, and an H200 campaign that
    forecast the rest from its first 33 slices lowered its floors to 9% in 50 s of 450."""
    policy, floors = _fitted_policy(_reals_and_mutants(), 60.0)
    m0 = policy.pair("m0|fake")
    assert any(p.slices == 0 for p in policy.pairs)
    policy.overheads.book(m0, first=True, busy=30.0, fuzzed=3.0)  # a costly first slice
    kept = dict(floors)
    assert policy.refit(50.0) is None and floors == kept  # too early to forecast
    said = policy.refit(29.0)  # under half the budget left: planned for
    assert said is not None and said.startswith("floors lowered"), said


def test_floors_lowered_late_are_never_under_min_floor_examples():
    """A CPU campaign of 10 planted pairs spent its first half on three slices that compiled
    and shrank (about 50 s each past fuzzing), then lowered its floors to what the seven pairs
    not run yet had had: none. Each ran one example, and six of their bugs went unfound. Floors
    are never lowered below ``MIN_FLOOR_EXAMPLES`` (or their seconds' share) now."""
    from fuzz.campaign.estimates import MIN_FLOOR_EXAMPLES

    policy, floors = _fitted_policy(_reals_and_mutants(), 60.0)
    fitted = policy.t
    for p in policy.pairs[:3]:
        p.slices, p.examples = 1, fitted.floor_examples
        policy.overheads.book(p, first=True, busy=53.0, fuzzed=3.0)
    assert any(p.slices == 0 for p in policy.pairs)
    said = policy.refit(25.0)
    assert said is not None and said.startswith("floors lowered"), said
    assert floors["examples"] == policy.t.floor_examples == MIN_FLOOR_EXAMPLES
    share = MIN_FLOOR_EXAMPLES / fitted.floor_examples
    assert policy.t.floor_seconds == pytest.approx(fitted.floor_seconds * share, abs=0.01)


def test_floors_are_not_lowered_at_the_budgets_end_nor_where_asked_for():
    """A refit plans the slices to come: with less than a slice left there are none, and a pair
    short of its floor then is reported short, not explained away by floors lowered to what it
    had. Floors asked for (``--floor-examples`` ...) are kept however short the budget."""
    pairs = _reals_and_mutants()
    policy, floors = _fitted_policy(pairs, 60.0)
    for p in policy.pairs:
        policy.overheads.book(p, first=True, busy=20.0, fuzzed=0.0)
    kept = dict(floors)
    assert policy.refit(policy.t.slice_seconds - 0.1) is None and floors == kept
    assert policy.refit(None) is None and floors == kept  # (a caller that says no time)
    floors["fit_to_budget"] = False  # asked for
    assert policy.refit(40.0) is None and floors == {**kept, "fit_to_budget": False}
    floors["fit_to_budget"] = True
    assert policy.refit(29.0).startswith("floors lowered") and floors["lowered"] < 1.0


def test_a_slice_of_a_pair_under_its_floor_ends_at_it():
    """A pair's floor is its share of a short budget: a slice of a pair under it ends at its
    floor's seconds (a pair at 3 s of a 3.69 s floor would take another whole 3 s slice), and a
    slice past it runs the slice's seconds; ``floor_slices=False`` keeps the whole slice."""
    under = _pair("under", examples=10, seconds=2.5, mutant=True, expected="nan")
    met = _pair("met", examples=10, seconds=4.0, mutant=True, expected="nan")
    for cap, want in ((True, 0.5), (False, 3.0)):
        policy = _policy([under, met], floor_seconds=3.0, slice_seconds=3.0, floor_slices=cap)
        plan = policy.begin(under, 0, slice_id=next(_IDS), now=0.0, left=100.0)
        assert plan.time_limit == pytest.approx(want)
        assert plan.hard_limit == pytest.approx(want + 30.0)  # its time to shrink is kept
        assert policy.begin(met, 0, slice_id=next(_IDS), now=0.0, left=100.0).time_limit == 3.0


def test_what_slices_spend_past_fuzzing_is_expected_by_their_kind():
    """A slice's cost past fuzzing (its seconds on its worker less those toward its pair's
    floor) is expected from the slices of its kind: its compiling per slice (family, backend,
    first or later slice), the rest (shrinking what it found) per fuzzing second (family,
    backend, mutant or not), each with one more slice at the kind above's: one mutant's first
    slice that shrank long is not taken for every mutant's, and many of a kind come to their
    own mean."""
    from fuzz.campaign.estimates import Overheads

    o = Overheads()
    m = _pair("m", mutant=True, expected="nan")
    r = _pair("r")
    assert o.expected(m, first=True, fuzzing=3.0) == 0.0  # nothing measured
    for _ in range(3):  # real targets' first slices: 1 s compiling, nothing more
        o.book(r, first=True, busy=4.0, fuzzed=3.0, compiled=1.0)
    o.book(m, first=True, busy=10.0, fuzzed=3.0, compiled=1.0)  # a mutant's: 6 s shrinking
    assert 1.0 < o.expected(m, first=True, fuzzing=3.0) < 7.0
    assert o.expected(m, first=False, fuzzing=0.0) == 0.0  # later slices compile nothing yet
    for _ in range(30):  # 4 s of shrinking in each 2 s slice of a mutant
        o.book(m, first=True, busy=7.0, fuzzed=2.0, compiled=1.0)
    assert o.expected(m, first=True, fuzzing=1.0) == pytest.approx(1.0 + 2.0, abs=0.1)
    assert o.expected(r, first=True, fuzzing=3.0) == pytest.approx(1.0, abs=0.2)
    assert o.total() == (3.0 + 7.0 + 30 * 5.0, 34)


def test_the_summary_says_which_pairs_the_budget_left_unrun_or_short_of_their_floor():
    from fuzz.campaign import report
    from fuzz.cli import _coverage_text

    floors = {"examples": 20, "seconds": 3.0, "real_seconds": 6.0, "need_seconds": 700}
    rows = [
        {"target": "a", "backend": "b", "status": "pass", "mutant": False, "examples": 5,
         "fuzz_seconds": 1.0, "retired": None, "error": None},  # short
        {"target": "c", "backend": "b", "status": "pass", "mutant": False, "examples": 25,
         "fuzz_seconds": 1.0, "retired": None, "error": None},  # its examples
        {"target": "m", "backend": "b", "status": "found", "mutant": True, "examples": 3,
         "fuzz_seconds": 0.5, "retired": "mutant found and shrunk", "error": None},  # finished
        {"target": "u", "backend": "b", "status": "unrun", "mutant": True, "examples": 0,
         "fuzz_seconds": 0.0, "retired": None, "error": None},
    ]  # fmt: skip
    assert report.short_of_floor(rows, floors) == ["a on b"]
    s = report.summary_of(rows, [], [], [])
    assert s["unrun"] == ["u on b"]
    said = _coverage_text({**s, "short_of_floor": ["a on b"]}, {"floors": floors})
    assert "1 pair(s) not run at all" in said and "1 pair(s) short of their floor" in said
    assert "--budget 875" in said


@pytest.mark.parametrize("same_signature", [True, False])
def test_the_console_says_a_bug_once_seen_then_once_found_with_its_minimal_reproducer(
    same_signature,
):
    """A first sight is said without a reproducer (it is replaced); its minimal example, the
    same sighting's record, is the one FOUND line, whether or not shrinking changed its
    signature (a flaky kernel's bug has no triggers: one signature from first sight to the
    end)."""
    from fuzz.campaign import console

    p = _pair("p")
    policy = _policy([p])
    first = _rec("s1", triggers=["dtype=float16"], shrunk=False)
    out = policy.record(p, first, sighting="1:0:k")
    (line,) = console.recorded(p, out)
    assert line.startswith("seen nan in p on fake (s1), shrinking it") and "->" not in line
    minimal = _rec("s1" if same_signature else "s2", shrunk=True, case_size=4)
    out = policy.record(p, minimal, sighting="1:0:k")
    (line,) = console.recorded(p, out)
    sig = minimal["signature"]
    assert line.startswith("FOUND nan in p on fake") and f"/nowhere/{sig}.py (4 elements)" in line
    assert list(p.found) == [sig]
    # The same bug met again by a later slice is a hit: nothing more is said.
    assert console.recorded(p, policy.record(p, _rec(sig, shrunk=True), sighting="2:0:k")) == []


def test_a_slice_begun_near_the_end_shrinks_no_longer_than_the_campaign_waits():
    """A slice's time to shrink (and the bugs' settling past its hard limit) ends before the
    campaign stops what still runs, ``end_grace`` past its budget: a CPU campaign killed a slice
    begun near its end while it settled a bug, and the shrinking was lost."""
    a, b = _pair("a", examples=500, seconds=100.0), _pair("b", examples=500, seconds=100.0)
    policy = _policy([a, b], slice_seconds=3.0, end_grace=15.0, settle_seconds=15.0)
    early = policy.begin(a, 0, slice_id=1, now=0.0, left=1000.0)
    assert early.hard_limit == 3.0 + 30.0  # the usual 30 s to shrink
    late = policy.begin(b, 0, slice_id=2, now=990.0, left=10.0)
    # 3 s of fuzzing, then shrinking, then 15 s to settle and 5 s for the summary: within the
    # 10 s left and the 15 s the campaign waits.
    assert late.hard_limit + 15.0 + 5.0 <= 10.0 + 15.0, late.hard_limit


def test_a_row_not_shrunk_says_why_in_the_reports(tmp_path):
    """A finding that was not shrunk says why in report.md and index.html: its shrinking's last
    note where it has one, else that its slice ended first (a GPU campaign's unshrunk rows of
    98,304-262,144 elements said nothing)."""
    from fuzz.campaign.report_html import _finding_html
    from fuzz.campaign.report_md import _markdown_finding
    from fuzz.results import not_shrunk_why

    base = {
        "class": "nan",
        "target": "t",
        "backends": ["triton"],
        "message": "m",
        "case": "Case(x=f32[512,192])",
        "case_size": 98304,
        "triage": "new",
        "signature": "s",
    }
    cut = {**base, "shrunk": False, "shrink_notes": ["a", "interpreter not tried: cost 80 > 16"]}
    ended = {**base, "shrunk": False, "shrink_notes": []}
    assert not_shrunk_why({**base, "shrunk": True}) is None
    assert not_shrunk_why(cut) == "interpreter not tried: cost 80 > 16"
    md = "\n".join(_markdown_finding(cut, tmp_path))
    assert "- not shrunk: interpreter not tried: cost 80 > 16" in md
    md = "\n".join(_markdown_finding(ended, tmp_path))
    assert "- not shrunk: its slice ended before it was shrunk" in md
    html = _finding_html(ended, tmp_path)
    assert "not shrunk: its slice ended before it was shrunk" in str(html)


def test_a_crash_shrunk_to_its_end_says_why_it_is_no_smaller(tmp_path):
    """A crash that loses its CUDA context is shrunk in child processes (``fuzz.isolated``);
    where they shrank to the end and nothing smaller crashed so, report.md and index.html say
    so. An H200 campaign's ``jax_mha`` crash row of 196,608 elements, marked shrunk, said
    nothing of why it was that large."""
    from types import SimpleNamespace

    from fuzz.campaign.report_html import _finding_html
    from fuzz.campaign.report_md import _markdown_finding
    from fuzz.isolated import NOTHING_SMALLER, Isolated
    from fuzz.results import not_shrunk_why, not_smaller_why

    big = SimpleNamespace(case=SimpleNamespace(size=196608))
    ended = Isolated(big, children=1, stopped=NOTHING_SMALLER).note(196608)  # type: ignore[arg-type]
    stalled = Isolated(big, children=2, stopped="2 children in a row").note(196608)  # type: ignore[arg-type]
    assert ended.startswith("not smaller: 1 child process(es) shrank from it to the end")
    assert stalled.startswith("not shrunk:")  # it did not shrink to its end
    row = {
        "class": "crash",
        "target": "t",
        "backends": ["pallas-gpu"],
        "message": "m",
        "case": "Case(q=f16[2,3,2048,16])",
        "case_size": 196608,
        "triage": "new",
        "signature": "s",
        "shrunk": True,
        "shrink_notes": ["earlier", ended],
    }
    assert not_shrunk_why(row) is None
    assert not_smaller_why(row).startswith("1 child process(es) shrank from it")
    assert not_smaller_why({**row, "shrink_notes": [stalled]}) is None
    md = "\n".join(_markdown_finding(row, tmp_path))
    assert "- not smaller: 1 child process(es) shrank from it to the end" in md
    assert "not smaller: 1 child process(es)" in str(_finding_html(row, tmp_path))


def test_a_row_the_compile_ladder_did_not_finish_says_why_it_is_no_smaller(tmp_path):
    """A row shrunk through the compiled shapes only is left to the compile workers (its
    ``ladder``); where the campaign ends before they finish it, report.md and index.html say
    so. Two H200 rows found as a 450 s budget ran out, JAX's ``mha`` NaN of 1,572,864 elements
    and fla's wrong ``dq`` of 16,896, said nothing of why they were that large. A row the
    ladder finished (its flag cleared) says nothing."""
    from fuzz.campaign.report_html import _finding_html
    from fuzz.campaign.report_md import _markdown_finding
    from fuzz.results import LADDER_UNFINISHED, not_smaller_why

    row = {
        "class": "nan",
        "target": "t",
        "backends": ["pallas-gpu"],
        "message": "m",
        "case": "Case(q=f16[2,3,2048,128])",
        "case_size": 1572864,
        "triage": "new",
        "signature": "s",
        "shrunk": True,
        "ladder": True,
        "shrink_notes": ["smaller variants left to a compile worker: 1572864 elements"],
    }
    assert not_smaller_why(row) == LADDER_UNFINISHED
    assert not_smaller_why({**row, "ladder": False}) is None
    md = "\n".join(_markdown_finding(row, tmp_path))
    assert f"- not smaller: {LADDER_UNFINISHED}" in md
    assert "which had not finished shrinking it" in str(_finding_html(row, tmp_path))


def test_a_bug_a_lost_slice_streamed_unshrunk_is_shrunk_by_the_pairs_next_slice():
    """A slice killed past its hard limit (or whose worker died) leaves what it streamed
    unshrunk: JAX's ``mha`` on pallas-gpu kept rows of 196,608 elements on an H200 so. The
    pair's next fuzzing slice shrinks each such bug first (``SlicePlan.resume``: its choices,
    under the lost slice's compile-time choices), once, and its shrunk example replaces the
    record (its sighting). Not a bug shrunk since, nor one whose own resumption was lost, nor a
    warm-up's business."""
    from fuzz.signatures import Resume

    p = _pair("p")
    p.narrowing = {"dtypes": ["float16"]}
    policy = _policy([p])
    policy.add_worker(9, "compile")
    key = "nan|oracle|y|-"
    policy.begin(p, 0, slice_id=3, now=0.0, left=100.0)
    seen = _rec("big", key=key, triggers=("multi-tile",), details={"round": 0}, choices="AAE=")
    shrunk = _rec("done", key="inf|oracle|y|-", shrunk=True, details={"round": 0}, choices=None)
    assert policy.found(3, seen).new and policy.found(3, shrunk).new
    policy.lost(3, 5.0)
    first = sighting(3, seen)
    assert _queued(p) == [Resume(key, "AAE=", {"dtypes": ["float16"]}, first)]
    assert policy.begin(p, 9, slice_id=4, now=6.0, left=100.0).resume == ()  # (a warm-up)
    plan = policy.begin(p, 0, slice_id=5, now=6.0, left=100.0)
    assert plan.resume == (Resume(key, "AAE=", {"dtypes": ["float16"]}, first),)
    assert _queued(p) == []  # once
    # The slice streams the shrunk example as that sighting's: it replaces the row.
    small = _rec("small", key=key, shrunk=True, details={"round": 0}, resumes=first)
    policy.found(5, small)
    assert sorted(p.found) == ["done", "small"]
    # Lost again: what it streamed as a resumption is not resumed a second time.
    again = _rec("again", key="accuracy|oracle|y|-", details={"round": 1}, choices="AAI=")
    policy.found(5, {**again, "resumes": "1:0:x"})
    policy.lost(5, 9.0)
    assert _queued(p) == []
    # A resumption whose record was shrunk meanwhile (another slice's example of it replaced
    # it) is dropped.
    policy.begin(p, 0, slice_id=6, now=10.0, left=100.0)
    other = _rec("other", key="masking|oracle|y|-", details={"round": 0}, choices="AAM=")
    policy.found(6, other)
    policy.begin(p, 0, slice_id=7, now=10.0, left=100.0)  # (a second worker's slice)
    policy.lost(6, 12.0)
    assert [e.sighting for e in _queued(p)] == [sighting(6, other)]
    replaced = _rec("other2", key="masking|oracle|y|-", shrunk=True, details={"round": 0})
    policy.found(7, {**replaced, "resumes": sighting(6, other)})
    assert not p.ledger.unshrunk(sighting(6, other))
    assert policy.begin(p, 0, slice_id=8, now=13.0, left=100.0).resume == ()


def test_a_bug_a_slice_left_unshrunk_at_its_end_is_shrunk_by_the_pairs_next_slice():
    """A slice that ends with its summary can still leave a bug unshrunk: its hard limit cut
    the shrinking and the time given past it to settle the bug did not end it (a planted
    kernel's rows of 6,288 and 9,632 elements on an H200). The pair's next fuzzing slice
    resumes it as it resumes a lost slice's; a bug the summary brought shrunk is not resumed."""
    from fuzz.signatures import Resume

    p = _pair("p")
    policy = _policy([p])
    key = "nan|oracle|y|-"
    policy.begin(p, 0, slice_id=3, now=0.0, left=100.0)
    cut = _rec("cut", key=key, details={"round": 0}, choices="AAE=")
    big = _rec("big", key="inf|oracle|y|-", details={"round": 0}, choices="AAI=")
    policy.found(3, cut)
    policy.found(3, big)
    small = _rec("small", key="inf|oracle|y|-", shrunk=True, details={"round": 0})
    policy.ended(3, {"found": [cut, small], "seconds": 5.0}, 5.0)
    assert _queued(p) == [Resume(key, "AAE=", None, sighting(3, cut))]
    plan = policy.begin(p, 0, slice_id=4, now=6.0, left=100.0)
    assert plan.resume == (Resume(key, "AAE=", None, sighting(3, cut)),)


def test_past_the_floors_a_pair_with_a_bug_to_resume_comes_first():
    """Once every pair has its floor, a pair whose slices left a bug unshrunk is fuzzed next
    (its slice shrinks the bug first), before the productive ones; not once the bug is shrunk
    by another slice."""
    from fuzz.signatures import Resume

    busy = _pair("busy", examples=300, seconds=40.0, rate=9.0)
    cut = _pair("cut", examples=300, seconds=40.0, rate=0.0)
    policy = _policy([busy, cut])
    assert policy.pick() is busy
    policy.begin(cut, 0, slice_id=71, now=0.0, left=100.0)
    big = _rec("big", key="nan|oracle|y|-", details={"round": 0}, choices="AAE=")
    policy.ended(71, {"found": [big], "seconds": 5.0}, 5.0)
    assert _queued(cut) == [Resume("nan|oracle|y|-", "AAE=", None, sighting(71, big))]
    assert policy.pick() is cut
    small = _rec("small", key="nan|oracle|y|-", shrunk=True, details={"round": 0})
    policy.record(cut, {**small, "resumes": sighting(71, big)}, sighting=sighting(71, big))
    assert policy.pick() is busy  # shrunk meanwhile: nothing left to resume
    # A row queued to be checked again does not put its pair first: its next slice, whenever
    # it comes, takes it (a README campaign's mutant pair was left at 75 examples otherwise);
    # past the budget, a finishing slice does.
    other = _rec("other", key="accuracy|oracle|y|-", shrunk=True, details={"round": 1})
    policy.record(cut, other, sighting=sighting(71, other))
    cut.ledger.queue_rechecks()
    assert {e.signature for e in cut.ledger.resume if e.example} == {"small", "other"}
    assert cut.ledger.resumable() and not cut.ledger.resumable(rechecks=False)
    assert policy.pick() is busy
    from fuzz.campaign import picks

    assert picks.next_unshrunk([busy, cut]) is cut


def test_a_bug_shrunk_through_compiled_variants_only_is_shrunk_on_by_a_compile_worker():
    """The compile ladder: a compiled-only bug that a slice shrank through the variants it had
    compiled (``Found.ladder``: JAX's ``mha`` on an H200 stayed at 16,384-98,304 elements so)
    is shrunk on through new variants by a compile worker, before any warm-up, off the fuzzing
    path: its slice only shrinks (``SlicePlan.ladder``), books no fuzzing toward the pair's
    floor, leaves the pair free to be fuzzed meanwhile, and its example replaces the row. A
    fuzzing slice never takes such a bug; nor is it taken again once shrunk."""
    from fuzz.signatures import Resume

    p, cold = _pair("p", examples=50, seconds=10.0), _pair("cold", slices=0)
    cold.warmth = Warmth.COLD
    policy = _policy([p, cold], compile_ahead=True)
    policy.add_worker(9, "compile")
    policy.begin(p, 0, slice_id=81, now=0.0, left=500.0)
    notes = ["pallas-gpu, compiled variants only: 51 examples, 0 compiles, 98304 elements"]
    rec = _rec(
        "big",
        shrunk=True,
        ladder=True,
        choices="AAE=",
        shrink_notes=notes,
        details={"round": 0},
    )
    policy.ended(81, {"found": [rec], "seconds": 5.0}, 5.0)
    entry = Resume("nan|oracle|y|-", "AAE=", None, sighting(81, rec), ladder=True, notes=(*notes,))
    assert _queued(p) == [entry]
    # Another slice that streams the same row queues nothing more (it would be shrunk twice).
    policy.begin(p, 0, slice_id=80, now=5.0, left=500.0)
    policy.ended(80, {"found": [{**rec, "details": {"round": 1}}], "seconds": 1.0}, 6.0)
    assert _queued(p) == [entry]
    assert p.ledger.resumable(ladder=True) and not p.ledger.resumable()
    # An entry queued while the row stood unshrunk is no fuzzing slice's once it is a ladder's.
    p.ledger.resume.append(Resume("nan|oracle|y|-", "AAE=", None, sighting(81, rec)))
    assert p.ledger.take_resumes(2) == () and _queued(p) == [entry]
    # A fuzzing slice does not take it (nor does the pick favour the pair for it).
    fuzzing = policy.begin(p, 0, slice_id=82, now=6.0, left=500.0)
    assert fuzzing.resume == () and not fuzzing.ladder
    policy.ended(82, {"seconds": 5.0, "examples": 10}, 11.0)
    slices, seconds = p.slices, p.seconds
    # The compile worker shrinks it before warming up the cold pair.
    plan = policy.next_slice(9, slice_id=83, now=12.0, left=500.0)
    assert plan is not None and plan.ladder and plan.target == "p"
    assert plan.resume == (entry,) and plan.warm_up is None and plan.time_limit == 0.0
    assert _queued(p) == [] and 83 not in p.live  # the pair may be fuzzed meanwhile
    assert policy.pick() is p
    small = _rec("big", shrunk=True, details={"round": 0}, resumes=entry.sighting)
    policy.found(83, small)  # (streamed as the worker does, then in its summary)
    summary = {"found": [small], "seconds": 20.0, "compile_seconds": 12.0, "compiles": 4}
    ended = policy.ended(83, summary, 32.0)
    assert p.found["big"].get("ladder") is None and p.found["big"]["resumes"] == entry.sighting
    # (a ladder slice whose time ran out streams its row as the ladder's again, with the choices
    # it got to: the entry handed back starts from them)
    p.ledger.found["big"] = {**p.found["big"], "ladder": True, "choices": "AAI="}
    p.ledger.requeue([entry])
    assert _queued(p) == [dataclasses.replace(entry, choices="AAI=", notes=())]
    p.ledger.resume.clear()
    p.ledger.found["big"] = {k: v for k, v in p.found["big"].items() if k != "ladder"}
    assert (p.slices, p.seconds) == (slices, seconds)  # no fuzzing booked
    assert p.stats["compile_seconds"] == 0.0 and p.stats["ladder_compile_seconds"] == 12.0
    assert ended.widened is None
    # Nothing left for the ladder: the compile worker warms the cold pair up.
    nxt = policy.next_slice(9, slice_id=84, now=33.0, left=500.0)
    assert nxt is not None and not nxt.ladder and nxt.target == "cold"


def test_a_compile_ladder_slice_ends_before_the_campaign_does():
    """A ladder slice is given the shrink time a slice of the pair has, within what is left of
    the budget and the campaign's grace; none where too little is left."""
    p = _pair("p", examples=50, seconds=10.0)
    policy = _policy([p], compile_ahead=True, end_grace=15.0, settle_seconds=15.0)
    policy.add_worker(9, "compile")
    policy.begin(p, 0, slice_id=91, now=0.0, left=500.0)
    rec = _rec("big", shrunk=True, ladder=True, choices="AAE=", details={"round": 0})
    policy.ended(91, {"found": [rec], "seconds": 5.0}, 5.0)
    assert policy.next_slice(9, slice_id=92, now=6.0, left=4.0) is None
    plan = policy.next_slice(9, slice_id=93, now=6.0, left=100.0)
    assert plan is not None and plan.ladder and 5.0 <= plan.hard_limit <= 100.0


def test_past_the_budget_a_row_left_unshrunk_is_shrunk_within_the_grace():
    """A bug met near the end, its slice's shrink time run out (JAX's varlen ``mha`` kept a row
    of 524,288 elements on an H200 so): past the budget, within the campaign's end grace, an
    idle worker runs a slice that only shrinks it (``SlicePlan.finishing``), books no fuzzing,
    ends before the campaign stops what still runs; none once the grace is too short, nor
    without a row to shrink."""
    from fuzz.signatures import Resume

    p, other = _pair("p", examples=50, seconds=10.0), _pair("other", examples=50, seconds=10.0)
    policy = _policy([p, other], end_grace=40.0, settle_seconds=10.0)
    assert policy.next_slice(0, slice_id=100, now=0.0, left=-1.0) is None  # nothing to shrink
    policy.begin(p, 0, slice_id=101, now=0.0, left=50.0)
    big = _rec("big", key="nan|oracle|y|-", details={"round": 0}, choices="AAE=")
    policy.ended(101, {"found": [big], "seconds": 5.0}, 5.0)
    entry = Resume("nan|oracle|y|-", "AAE=", None, sighting(101, big))
    assert _queued(p) == [entry]
    slices, seconds = p.slices, p.seconds
    assert policy.next_slice(0, slice_id=102, now=50.0, left=-30.0) is None  # too late
    plan = policy.next_slice(0, slice_id=103, now=50.0, left=-1.0)
    assert plan is not None and plan.finishing and plan.shrink_only and not plan.ladder
    assert plan.target == "p" and plan.resume == (entry,) and plan.time_limit == 0.0
    assert 5.0 <= plan.hard_limit <= 40.0 - 10.0 - 1.0
    assert policy.next_slice(0, slice_id=104, now=50.0, left=-1.0) is None  # taken
    small = _rec("big", shrunk=True, details={"round": 0}, resumes=entry.sighting)
    policy.found(103, small)  # (streamed as the worker does, then in its summary)
    fuzzed = p.fuzz_seconds
    policy.ended(103, {"found": [small], "seconds": 9.0, "shrink_seconds": 8.5}, 59.0)
    assert p.found["big"].get("shrunk") and (p.slices, p.seconds) == (slices, seconds)
    assert p.stats["finishing_seconds"] == 9.0
    # its shrinking is off the fuzzing path: not taken from the pair's fuzzing seconds
    assert p.fuzz_seconds == fuzzed and p.stats["shrink_seconds"] == 0.0
    from fuzz.campaign.console import ladder_line

    said = ladder_line(p, {"events": {"resumed: shrunk": 1}, "shrink_examples": 40}, False)
    assert said.startswith("p on fake: past the budget, rows left unshrunk: 1 bug(s) shrunk,")


def test_a_row_a_slice_took_to_shrink_and_did_not_get_to_is_queued_again():
    """A slice that took a row left unshrunk (``SlicePlan.resume``) and ended with it still
    unshrunk (its time ran out before its turn, or it was lost) hands it back: the next slice
    of the pair, or past the budget a finishing one, takes it again, up to ``RESUMES`` slices
    (a planted kernel's row of 536 elements stayed unshrunk, without a note, so)."""
    from fuzz.ledger import RESUMES
    from fuzz.signatures import Resume

    p = _pair("p", examples=50, seconds=10.0)
    policy = _policy([p], end_grace=40.0, settle_seconds=10.0)
    policy.begin(p, 0, slice_id=201, now=0.0, left=500.0)
    big = _rec("big", details={"round": 0}, choices="AAE=")
    policy.ended(201, {"found": [big], "seconds": 5.0}, 5.0)
    entry = Resume("nan|oracle|y|-", "AAE=", None, sighting(201, big))
    for n in range(RESUMES):
        assert _queued(p) == [entry], n
        plan = policy.begin(p, 0, slice_id=202 + n, now=10.0 + n, left=500.0)
        assert plan.resume == (entry,) and _queued(p) == []
        if n % 2:
            policy.lost(202 + n, 12.0 + n)
        else:
            policy.ended(202 + n, {"seconds": 1.0, "examples": 3}, 12.0 + n)
    assert _queued(p) == []  # taken RESUMES times: not again
    # Shrunk meanwhile: not queued again either.
    policy.begin(p, 0, slice_id=301, now=20.0, left=500.0)
    other = _rec("other", details={"round": 0}, choices="AAI=")
    policy.ended(301, {"found": [other], "seconds": 5.0}, 25.0)
    plan = policy.next_slice(0, slice_id=302, now=30.0, left=-1.0)  # past the budget
    assert (
        plan is not None
        and plan.finishing
        and [e.sighting for e in plan.resume] == [sighting(301, other)]
    )
    small = _rec("other", shrunk=True, details={"round": 0}, resumes=sighting(301, other))
    policy.found(302, small)
    policy.ended(302, {"found": [small], "seconds": 3.0}, 33.0)
    assert _queued(p) == []


_WIDE_ROWS = """
import dataclasses
import sys

from fuzz.target import get, load_plugin, register

load_plugin({fake!r})
fake = next(m for n, m in list(sys.modules.items()) if n.startswith("fuzz_plugin_fake_targets"))
base = fake.cached_kernel(None)


def run(inputs, params, *, out, interpret):
    res = base(inputs, params, out=out, interpret=interpret)
    x = inputs["x"]
    if not interpret and x.shape[0] >= 2 and x.shape[1] >= 40:  # compiled only, 80 elements
        res["y"][1, 0] += 1.0
    return res


register(
    dataclasses.replace(
        get("fake_cached"),
        name="fake_cached_wide_rows",
        kernels={{"fake": run}},
        description="compiled per column bucket; wrong when compiled with 2 rows of 40 columns",
    )
)
"""


def test_a_campaign_with_a_compile_worker_shrinks_a_compiled_only_bug_off_the_fuzzing_path(
    tmp_path, monkeypatch
):
    """End to end, in processes: a compiled-only bug (the interpreter twin passes) found by a
    fuzzing worker is shrunk there through the variants compiled already, then by the compile
    worker through new ones (the compile ladder), and the row says so; the campaign waits for
    that shrinking once its pairs have their examples."""
    plugin = tmp_path / "wide_rows.py"
    plugin.write_text(_WIDE_ROWS.format(fake=FAKE))
    lines = []
    report, _ = _fake_gpu_campaign(
        tmp_path,
        monkeypatch,
        ["fake_cached_wide_rows"],
        plugin=str(plugin),
        examples=60,
        seed=3,
        compile_workers=1,
        compile=0.2,
        log=lines.append,
    )
    [row] = [f for f in report["findings"] if f["class"] == "accuracy"]
    notes = row["shrink_notes"]
    assert row["shrunk"] and "ladder" not in row, notes
    assert any(n.startswith("smaller variants left to a compile worker") for n in notes), notes
    assert "on a compile worker" in notes[-1], notes
    assert row["case_size"] == 80, row["case"]  # 2 rows of 40 columns: the least that fails
    assert any("compile ladder: 1 bug(s) shrunk" in line for line in lines), lines[-20:]
    assert not any("compile ladder: 2 bug(s)" in line for line in lines), lines[-20:]
    [result] = report["results"]
    assert result["examples"] >= 60


def test_a_row_whose_check_was_cut_is_checked_by_the_next_slice_and_taken_into_its_twin():
    """A row shrunk with its check against the known bugs cut at its slice's hard limit
    (``details["unchecked"]``, its choices kept) is queued for the pair's next slice to check
    (``Resume.check``); a duplicate that slice reports for that sighting (``resumes``) takes the
    row into the known bug, as the check would have in its own slice."""
    from fuzz.signatures import Resume

    p = _pair("p", examples=50, seconds=10.0)
    policy = _policy([p])
    policy.begin(p, 0, slice_id=301, now=0.0, left=500.0)
    o = _rec("o", "accuracy|oracle|o|-", ["feature g_gamma"], shrunk=True, case_size=512,
             details={"round": 0}, choices="AAA=")  # fmt: skip
    ht = _rec("ht", "accuracy|oracle|ht|-", ["feature g_gamma", "feature final_state"],
              shrunk=True, case_size=512, choices="AAE=",
              details={"round": 0, "unchecked": True})  # fmt: skip
    policy.ended(301, {"found": [o, ht], "seconds": 5.0}, 5.0)
    assert set(p.ledger.found) == {"o", "ht"}
    entry = Resume(ht["bug_key"], "AAE=", None, sighting(301, ht), check=True)
    assert _queued(p) == [entry] and p.ledger.resume[0].signature == "ht"
    plan = policy.begin(p, 0, slice_id=302, now=10.0, left=500.0)
    assert plan.resume == (entry,)
    dup = {"round": 0, "bug_key": ht["bug_key"], "signature": "ht", "twin": "o",
           "triggers": ht["triggers"], "how": "property", "resumes": entry.sighting}  # fmt: skip
    policy.ended(302, {"found": [], "duplicates": [dup], "seconds": 5.0}, 15.0)
    assert set(p.ledger.found) == {"o"} and _queued(p) == []
    assert [s["signature"] for s in p.ledger.found["o"]["also_seen"]] == ["ht"]
    # a checked row (no longer unchecked) is not queued again
    q = _pair("q", examples=50, seconds=10.0)
    policy = _policy([q])
    policy.begin(q, 0, slice_id=401, now=0.0, left=500.0)
    policy.ended(401, {"found": [{**ht, "details": {"round": 0}}], "seconds": 5.0}, 5.0)
    assert _queued(q) == []


def test_a_row_whose_replay_was_a_known_bug_joins_that_bug_with_its_reproducer():
    """A slice's duplicate of a row it took (``how`` "replay": its example failed as a known
    bug when replayed) takes the row into that bug's, kept beside it with its reproducer and
    told by the replay; it is no longer queued to shrink."""
    from fuzz.campaign.report import SEEN_HOW

    p = _pair("p", examples=50, seconds=10.0)
    policy = _policy([p])
    policy.begin(p, 0, slice_id=601, now=0.0, left=500.0)
    oob = _rec("oob", key="out-of-bounds-write|guard-bands|-|-", details={"round": 0}, shrunk=True)
    big = _rec("big", key="accuracy|oracle|y|-", details={"round": 1}, choices="AAE=",
               shrunk=False, case_size=3239)  # fmt: skip
    policy.ended(601, {"found": [oob, big], "seconds": 5.0}, 5.0)
    assert set(p.ledger.found) == {"oob", "big"} and p.ledger.resume
    policy.begin(p, 0, slice_id=602, now=10.0, left=500.0)
    dup = {"round": 0, "bug_key": big["bug_key"], "signature": "big", "twin": "oob",
           "triggers": [], "how": "replay", "resumes": sighting(601, big)}  # fmt: skip
    policy.ended(602, {"found": [], "duplicates": [dup], "seconds": 5.0}, 15.0)
    assert set(p.ledger.found) == {"oob"} and not p.ledger.resumable()
    (way,) = p.ledger.found["oob"]["also_seen"]
    assert way["signature"] == "big" and way["how"] == "replay" and way["reproducer"]
    assert "replayed" in SEEN_HOW["replay"]
    # every way a row is told to be another's has its words in the report
    told = {"case", "property", "site", "conditions", "influence", "shared", "replay", "runs"}
    assert told | {"same"} <= set(SEEN_HOW)


def test_what_a_later_slice_found_of_a_row_it_took_is_noted_on_the_row():
    """A slice's ``resume_notes`` (a row it took whose example did not fail so again) go onto
    that row: its report says why it is left unshrunk, not only that its slice ended."""
    from fuzz.results import not_shrunk_why

    p = _pair("p", examples=50, seconds=10.0)
    policy = _policy([p])
    policy.begin(p, 0, slice_id=501, now=0.0, left=500.0)
    big = _rec("big", details={"round": 0}, choices="AAE=", shrunk=False)
    policy.ended(501, {"found": [big], "seconds": 5.0}, 5.0)
    assert not_shrunk_why(p.ledger.found["big"]).startswith("its slice ended")
    policy.begin(p, 0, slice_id=502, now=10.0, left=500.0)
    note = {"resumes": sighting(501, big), "note": "not shrunk: a later slice replayed it ..."}
    policy.ended(502, {"found": [], "resume_notes": [note], "seconds": 5.0}, 15.0)
    assert not_shrunk_why(p.ledger.found["big"]) == note["note"]
