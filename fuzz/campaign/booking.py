"""Booking a slice into its pair: its examples, its seconds, its compiles, whichever way the
slice ended -- with its summary (:func:`book_time`, :func:`book_counters`), killed without one
(:func:`book_lost`), or cut short by the campaign's end (:func:`book_stopped`). A warm-up's time
and compiles are its pair's setup, off the fuzzing path (:func:`book_warm_up`), and so are a
slice's that only shrinks (:func:`book_shrink_only`). Pure: the scheduling policy
(:mod:`fuzz.campaign.policy`) calls these with its clock's readings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fuzz.campaign.messages import SlicePlan
from fuzz.campaign.pairs import PairState, Warmth
from fuzz.campaign.tunables import REFUSED

# A slice's numbers added to its pair's stats.
STATS = (
    "launches",
    "launch_seconds",
    "compiles",
    "compile_seconds",
    "cache_loads",
    "cache_load_seconds",
    "twin_launches",
    "twin_seconds",
    "shrink_seconds",
)
# Off the fuzzing path: a warm-up's numbers (its pair's setup) and a shrink-only slice's; their
# shrinking too (JAX's mha on an H200 had "0 s" of fuzzing, its ladder shrinking taken from it).
OFF_PATH = tuple(
    "compile_seconds seconds compiles cache_loads cache_load_seconds shrink_seconds".split()
)


def _end(pair: PairState, plan: SlicePlan, examples: int | None = None) -> tuple[int, float]:
    """Ends ``plan``'s slice of ``pair``: books ``examples`` (None: those it streamed); returns
    (examples, compile seconds) it streamed."""
    streamed, compiled = pair.live.pop(plan.id, [0, 0.0])
    pair.examples += streamed if examples is None else examples
    return streamed, compiled


def book_time(
    pair: PairState, plan: SlicePlan, summary: Mapping[str, Any], now: float
) -> tuple[float, Mapping[str, Any]]:
    """Books the examples and time of ``plan``'s slice from its ``summary``; returns its
    seconds on the fuzzing path and the summary whose counters the pair takes (a warm-up's are
    its setup: zero)."""
    _end(pair, plan, summary.get("examples", 0))
    secs = summary.get("seconds", now - plan.started)
    if plan.warm_up is not None:
        book_warm_up(pair, summary, secs)
    elif plan.shrink_only:
        book_shrink_only(pair, plan, secs, summary.get("compile_seconds", 0.0))
    if plan.warm_up is not None or plan.shrink_only:
        return 0.0, {**summary, **dict.fromkeys(OFF_PATH, 0.0)}
    pair.slices += 1
    pair.seconds += secs
    refused = (summary.get("events") or {}).get(REFUSED, 0)
    if not summary.get("examples") and (refused or summary.get("stopped") == "refused"):
        pair.refused_seconds += max(0.0, secs - summary.get("compile_seconds", 0.0))
    return secs, summary


def book_counters(pair: PairState, summary: Mapping[str, Any]) -> None:
    """Adds a slice's counters (launches, compiles, events, hits) to its pair's (after its
    findings are recorded: a smaller example of a bug takes the hits of the one it replaces),
    and what it found of the rows it took and left as they were (``resume_notes``) to them."""
    for k in STATS:
        pair.stats[k] += summary.get(k, 0)
    pair.events.update(summary.get("events", {}))
    pair.ledger.hit(summary.get("known_hits", {}))
    for said in summary.get("resume_notes", []):
        pair.ledger.note(str(said.get("resumes")), str(said.get("note")))
    pair.declared_hits.update(summary.get("declared_hits", {}))


def book_warm_up(pair: PairState, summary: Mapping[str, Any], secs: float) -> None:
    """A warm-up's time and compiles are its pair's setup, off the fuzzing path."""
    pair.warmth = Warmth.READY
    pair.warm_count += 1
    if pair.pending is not None:  # its widened choices are compiled: fuzzed from now
        pair.narrowing, pair.pending, pair.warm_count = pair.pending, None, 1
    pair.compile_at_warm = pair.stats["compile_seconds"]
    pair.refused_at_warm = pair.events[REFUSED]
    # What it compiled: the workers that fuzz the pair reuse these structures first.
    pair.structures = list(summary.get("structures") or pair.structures)
    pair.warm_seconds += secs
    compiled = summary.get("compile_seconds", 0.0)
    pair.stats["precompile_seconds"] += compiled
    if pair.first_warm_compile is None:
        pair.first_warm_compile = compiled
    pair.stats["precompiles"] += summary.get("compiles", 0) - summary.get("cache_loads", 0)


def book_shrink_only(pair: PairState, plan: SlicePlan, secs: float, compiled: float) -> None:
    """A slice that only shrinks (``SlicePlan.shrink_only``): a compile worker's shrinking of the
    pair's bugs through new variants (the compile ladder), or a slice past the budget shrinking
    rows left unshrunk (``finishing``); off the fuzzing path, neither fuzzing toward its floor
    nor its compile share."""
    kind = "ladder" if plan.ladder else "finishing"
    pair.stats[f"{kind}_seconds"] += secs
    pair.stats[f"{kind}_compile_seconds"] += compiled


def book_lost(pair: PairState, plan: SlicePlan, now: float, *, max_warms: int) -> None:
    """Books the examples and time of ``plan``'s slice, which ended without its summary (its
    worker died, hung or overran), from what it streamed."""
    _, compiled = _end(pair, plan)
    spent = now - plan.started
    if plan.shrink_only:
        book_shrink_only(pair, plan, spent, compiled)
        return
    if plan.warm_up is not None:  # a warm-up that died: its fuzz workers take it as it is
        pair.warmth = Warmth.READY
        pair.warm_count = max_warms  # and no warm-up again
        if pair.pending is not None:  # (its widened choices compile as they are drawn)
            pair.narrowing, pair.pending = pair.pending, None
        pair.warm_seconds += spent
        pair.stats["precompile_seconds"] += compiled
    else:
        pair.slices += 1
        pair.seconds += spent
        pair.stats["compile_seconds"] += compiled
        # Past its search's time limit (compiling not counted), a slice was shrinking what it
        # found or running over: not fuzzing toward the pair's floor. (An H100 campaign killed
        # a GLA mutant's slice while it shrank a second bug; its 111 s counted as fuzzing met
        # the floor with 5 examples.)
        over = spent - (plan.time_limit + compiled)
        pair.stats["shrink_seconds"] += max(0.0, over)


def unsent(pair: PairState, plan: SlicePlan, now: float) -> None:
    """Takes back ``plan``'s slice, which never reached its worker (the worker's process had
    ended after its last slice, and its pipe was closed: on an H200 the send raised, and the
    campaign ended there): nothing booked, the pair as before it, the bugs it took to shrink
    queued again."""
    pair.live.pop(plan.id, None)
    if plan.warm_up is not None and pair.warmth is Warmth.WARMING:
        pair.warmth = Warmth.COLD if pair.warm_count == 0 else Warmth.READY
    for e in plan.resume:
        pair.ledger.resumed[e.sighting] -= 1  # (not taken after all)
    pair.ledger.requeue(plan.resume)


def book_stopped(pair: PairState, plan: SlicePlan, now: float) -> None:
    """Books ``plan``'s slice cut short by the campaign's end (its examples and time so far)."""
    _, compiled = _end(pair, plan)
    if plan.shrink_only:
        book_shrink_only(pair, plan, now - plan.started, compiled)
    elif plan.warm_up is not None:
        pair.warm_seconds += now - plan.started
        pair.stats["precompile_seconds"] += compiled
    else:
        pair.seconds += now - plan.started
        pair.stats["compile_seconds"] += compiled
