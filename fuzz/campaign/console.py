"""What a campaign says on its console about what its policy and ledger decided: pure functions
from their outcomes to lines (the coordinator prints them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fuzz.campaign.pairs import PairState
from fuzz.campaign.policy import Ended
from fuzz.ledger import Recorded
from fuzz.narrowing import said_added


def recorded(pair: PairState, out: Recorded) -> list[str]:
    """A new bug: its first sight (``seen ...``, being shrunk: no reproducer named, it is
    replaced), then the bug as it will be reported (``FOUND ...``, its minimal example and
    reproducer); and each record first seen as new that was one found before. (A 90 s campaign
    printed 41 FOUND lines for one bug, 37 naming reproducers deleted later.)"""
    name = f"{pair.target.name} on {pair.backend}"
    lines = []
    for sig, into, how, cls in out.merged:
        if how in ("also", "stands"):
            lines.append(
                f"{name}: the {cls} first seen as new ({sig}) is the bug found before ({into}) "
                "seen another way: one bug, one row "
                + (
                    "(its reproducer kept beside it)"
                    if how == "also"
                    else "(its smaller example stands for it, the other kept beside it)"
                )
            )
            continue
        what = "shrank to" if how == "shrank" else "is"
        lines.append(
            f"{name}: the {cls} first seen as new ({sig}) {what} the bug found before "
            f"({into}): one bug"
        )
    if out.signature is None or out.signature not in pair.found:
        return lines
    rec = pair.found[out.signature]
    if out.new and not rec.get("shrunk"):  # a first sight: its reproducer is not the bug's yet
        lines.append(
            f"seen {rec['class']} in {name} ({out.signature}), shrinking it: "
            f"{rec['message'][:120]}"
            + (
                f" (bug {out.maybe_of} has its failure key: shrinking tells whether it is another)"
                if out.maybe_of
                else ""
            )
        )
    elif (out.new or out.settled) and rec.get("shrunk"):  # the bug, as it will be reported
        lines.append(
            f"FOUND {rec['class']} in {name}: {rec['message'][:160]}"
            + (f" -> {rec['reproducer']}" if rec.get("reproducer") else "")
            + (f" ({rec['case_size']} elements)" if rec.get("case_size") else "")
        )
    return lines


def ended(out: Ended, summary: Mapping[str, Any], *, slot: int) -> list[str]:
    """What the end of a slice on worker ``slot`` decided, and its numbers."""
    pair = out.pair
    name = f"{pair.target.name} on {pair.backend}"
    lines = [line for _, rec in out.found for line in recorded(pair, rec)]
    lines += [line for rec in out.withdrawn for line in recorded(pair, rec)]
    if out.retired == "harness error":
        lines.append(f"ERROR {name}: {str(pair.error)[:400]}")
    if out.widened is not None:
        said = "; ".join(said_added(d, v) for d, v in out.widened.items() if v)
        lines.append(f"{name}: kernel variants widened ({pair.widened}): {said or 'nothing new'}")
    if summary.get("recycle"):
        r = summary["recycle"]
        lines.append(
            f"worker {slot} is recycled: its process holds {r['maps']} memory maps of the "
            f"{r['limit']} it may have; a fresh one takes over"
        )
    if out.plan.shrink_only:
        lines.append(ladder_line(pair, summary, out.plan.ladder))
    else:
        lines.append(slice_line(pair, out.plan.warm_up is not None, summary, out.seconds))
    if out.floors is not None:
        lines.append(out.floors)
    return lines


def ladder_line(pair: PairState, summary: Mapping[str, Any], ladder: bool = True) -> str:
    """The console line of a slice that only shrank (``SlicePlan.shrink_only``): a compile
    worker's slice of the compile ladder, or (``ladder`` False) one past the budget."""
    events = summary.get("events") or {}
    what = "compile ladder" if ladder else "past the budget, rows left unshrunk"
    how = " through new variants" if ladder else ""
    return (
        f"{pair.target.name} on {pair.backend}: {what}: "
        f"{events.get('resumed: shrunk', 0)} bug(s) shrunk{how}, "
        f"{summary.get('shrink_examples', 0)} examples, {summary.get('compiles', 0)} compiles"
    )


def slice_line(pair: PairState, warm: bool, summary: Mapping[str, Any], secs: float) -> str:
    """The console line of a slice that ended."""
    name = f"{pair.target.name} on {pair.backend}"
    n = summary.get("examples", 0)
    if warm:
        return (
            f"{name}: warmed up (compiled ahead) in {pair.warm_seconds:.1f}s, "
            f"{pair.stats['precompile_seconds']:.1f}s of it compiling, {n} examples"
        )
    compiling = summary.get("compile_seconds", 0.0)
    fuzz = max(secs - compiling, 0.1)
    return (
        f"{name}: +{n} examples in {secs:.1f}s"
        + (f" ({compiling:.1f}s compiling)" if compiling >= 0.05 else "")
        + f" ({n / fuzz:.1f}/s), total {pair.examples}; bugs: {len(pair.found)}"
        + (f" ({', '.join(sorted(pair.classes))})" if pair.found else "")
        + (f" [{pair.retired}]" if pair.retired else "")
    )
