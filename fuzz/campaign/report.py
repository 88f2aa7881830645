"""Campaign reports: what the user reads in the morning, and what CI systems parse.

Written into the campaign's output folder, each atomically (a reader sees the old file or the
new one, never half):

    report.json   machine-readable: versions, device, per target/backend examples, time,
                  throughput, findings (class, signature, reproducer, origin, hazards, plots data),
                  triage against the previous report; rewritten whenever something is found
    report.md     the morning summary: new, still failing, fixed; then every finding
    report.xml    JUnit XML: one test case per target and backend
    index.html    the same with plots, self-contained (no network): per finding a heatmap of the
                  error of the minimal example's outputs against the oracle and an error
                  histogram; throughput per target

The previous campaign's reports in the same folder move to ``history/<its start time>/``; its
findings are triaged: *new* (first seen now), *still failing* (seen again, or its reproducer still
fails when replayed at the start of this campaign), *fixed* (its reproducer passes now).
Findings are deduplicated by signature (target, and the bug's key and triggers:
``fuzz.signatures``); a finding found on several backends is one finding.

This module builds the report's data and ``report.json``; ``fuzz.campaign.report_md`` writes
``report.md`` from it, ``fuzz.campaign.report_html`` the JUnit XML and the HTML page
(``report_html.writers``: the three).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fuzz.backends import backends, device_name
from fuzz.ledger import SEEN_HOW as SEEN_HOW  # (the report writers read it here)
from fuzz.ledger import absorb, after_their_bugs, bugs_of_record, join_backend_twins, mark_maybe_of
from fuzz.reproducer import versions
from fuzz.signatures import same_bug

REPORT_VERSION = 2


# Building ------------------------------------------------------------------------------------------


@dataclass
class CampaignRecord:
    """What a campaign report is made of: plain data, handed over by the campaign
    (``fuzz.campaign.runner.Campaign.report_record``) whenever the report is written.

    Attributes:
        rows: one record per (target, backend) pair, sorted (the report's ``results``).
        previous: the previous campaign's report, as far as triage reads it (None: none).
        triage_results: reproducer path of a previous finding -> its replay's verdict.
        interrupted: the stop that ended the campaign early (None: it ran to its budget).
        errors: the harness itself failed (not one target: the campaign).
        workers: per worker slot: ``slot``, ``device``, ``restarts``, ``recycles``.
    """

    started_wall: float
    budget: float
    profile: str
    argv: list[str]
    seed: int
    example_timeout: float
    db: str | None
    db_shared: list[str]
    db_problems: list[str]
    workers: list[dict[str, Any]]
    worker_restarts: int
    rows: list[dict[str, Any]]
    previous: dict[str, Any] | None
    triage_results: dict[str, dict[str, Any]]
    interrupted: str | None
    errors: list[str]
    notes: list[str]
    # How its workers were sized: the host's GPUs, their memory, its cores, the workers per
    # GPU (or each node of a cluster); None: not said.
    sizing: dict[str, Any] | None = None
    # Its floors (examples, seconds, a real target's seconds), what the full ones need, and
    # the factor they were scaled by to fit the budget; None: not said.
    floors: dict[str, Any] | None = None


def _dedupe(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One finding per bug (signature) over the backends that found it, with every way it was
    also seen on any of them (``also_seen``: another class, property or output). Findings of
    one kernel on backends of one implementation (compiled and interpreted) whose minimal
    examples differ are then one where the ledger says so (``fuzz.ledger.join_backend_twins``):
    kept beside it, the smaller standing for both."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        sig = r.get("signature") or f"{r['target']}|{r['class']}"
        if sig not in out:
            out[sig] = {**r, "backends": [r["backend"]], "reproducers": [r.get("reproducer")]}
            continue
        d = out[sig]
        if r["backend"] not in d["backends"]:
            d["backends"].append(r["backend"])
            d["reproducers"].append(r.get("reproducer"))
        known = {s.get("signature") for s in d.get("also_seen", [])}
        extra = [s for s in r.get("also_seen", []) if s.get("signature") not in known]
        if extra:
            d["also_seen"] = [*d.get("also_seen", []), *extra]
        absorb(d, r)
    join_backend_twins(out, _implementation)
    return mark_maybe_of(out)


def _implementation(backend: str) -> str:
    known = backends().get(backend)  # (one this process does not know: its name's language)
    return backend.split("-", 1)[0] if known is None else str(known.impl)


def also_seen_text(f: dict[str, Any]) -> str:
    """How a finding's bug was also seen ("" where it was not): each other class, property
    and output, with how many records and the smallest case."""
    seen = f.get("also_seen") or []
    if not seen:
        return ""
    by: dict[str, list[dict[str, Any]]] = {}
    for s in seen:
        by.setdefault(f"{s.get('class')} ({s.get('property')}, {s.get('output')})", []).append(s)
    parts = []
    for way, recs in by.items():
        least = min(int(s.get("case_size") or 0) for s in recs)
        parts.append(f"{way}" + (f" x{len(recs)}" if len(recs) > 1 else "") + f", {least} el.")
    return "also seen as: " + "; ".join(parts)


def smallest_reproducer(f: dict[str, Any]) -> tuple[int | None, str | None]:
    """(elements, reproducer) of a finding's smallest example, its own or one it was also
    seen as."""
    options = [(f.get("case_size"), f.get("reproducer"))] + [
        (s.get("case_size"), s.get("reproducer")) for s in f.get("also_seen") or []
    ]
    options = [(n, r) for n, r in options if r and isinstance(n, int)]
    return min(options, default=(f.get("case_size"), f.get("reproducer")))


UNRUN = "unrun"


def settle_unrun(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with the status ``unrun`` where a pair ran no example and found nothing (never
    scheduled, or the campaign stopped or ran out of budget first): neither a pass nor a missed
    mutant. JUnit marks them skipped."""
    return [
        {**r, "status": UNRUN}
        if r["examples"] == 0 and not r["findings"] and not r.get("error")
        else r
        for r in rows
    ]


def existing_reproducers(record: dict[str, Any]) -> dict[str, Any]:
    """A finding ``record`` whose reproducer paths (``reproducer``, ``reproducers``) all exist:
    one that does not (never written on a full disk, removed since) becomes None, its path kept
    as ``reproducer_missing``. A report never points at a file that is not there."""
    paths = [record.get("reproducer"), *record.get("reproducers", [])]
    gone = {p for p in paths if p and not os.path.exists(p)}
    if not gone:
        return record
    fixed = {**record, "reproducer_missing": sorted(gone)}
    if record.get("reproducer") in gone:
        fixed["reproducer"] = None
    if "reproducers" in record:
        fixed["reproducers"] = [None if p in gone else p for p in record["reproducers"]]
    return fixed


def campaign_report(c: CampaignRecord, *, final: bool = False) -> dict[str, Any]:
    """The report dict of a campaign as it stands (``c``); ``final``: it has ended."""
    rows = [
        {**r, "findings": [existing_reproducers(f) for f in r["findings"]]}
        for r in settle_unrun(c.rows)
    ]
    findings, fixed, unconfirmed = _triage(rows, c.previous, c.triage_results)
    findings = [existing_reproducers(f) for f in findings]  # previous ones' too
    now = time.time()
    return {
        "version": REPORT_VERSION,
        # Every pair ran (a budget too short for them leaves some unrun: not a complete run).
        "complete": final
        and c.interrupted is None
        and not c.errors
        and not any(r["status"] == UNRUN for r in rows),
        "interrupted": c.interrupted,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(c.started_wall)),
        "host": socket.gethostname(),
        "seconds": round(now - c.started_wall, 3),
        "budget": c.budget,
        "profile": c.profile,
        "argv": list(c.argv),
        "seed": c.seed,
        "versions": versions(),
        "device": device_name(),
        "workers": c.workers,
        "sizing": c.sizing,
        "floors": c.floors,
        "worker_restarts": c.worker_restarts,
        "example_timeout": c.example_timeout,
        "database": {
            "local": c.db,
            "shared": list(c.db_shared),
            "problems": sorted(set(c.db_problems))[:200],
        },
        "summary": _summary(rows, findings, fixed, c.errors, c.floors),
        "triage": {
            "previous": (c.previous or {}).get("started"),
            "fixed": fixed,
            "not_rechecked": unconfirmed,
        },
        "errors": list(c.errors),
        "notes": c.notes,
        "results": rows,
        "findings": findings,
    }


def _triage(
    rows: list[dict[str, Any]],
    previous: dict[str, Any] | None,
    verdicts: dict[str, dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(findings, fixed, not re-checked): this campaign's findings deduplicated and marked
    ``new`` or ``still failing`` against the ``previous`` report (the same bug: one signature,
    or :func:`same_bug_in`), with the previous findings not seen again that their replay
    (``verdicts``) says still fail; those it says pass (fixed); and those without a verdict."""
    current = _dedupe(f for r in rows for f in r["findings"])
    prev_findings = {
        f.get("signature"): f for f in (previous or {}).get("findings", []) if f.get("signature")
    }
    fixed, unconfirmed = [], []
    seen: set[str] = set()
    for sig, f in current.items():
        before = same_bug_in(f, prev_findings.values())
        f["triage"] = "new" if before is None else "still failing"
        if before is not None:
            seen.add(before["signature"])
            if before["signature"] != sig:  # one bug, its minimal example's conditions moved
                f["previous_signature"] = before["signature"]
    for sig, f in prev_findings.items():
        if sig in seen:
            continue
        verdict = verdicts.get(f.get("reproducer", ""))
        slim = {
            k: f.get(k)
            for k in ("signature", "target", "class", "message", "reproducer", "backends")
        }
        if verdict is None or verdict.get("status") == "error":
            unconfirmed.append({**slim, "why": (verdict or {}).get("verdict", "not replayed")})
        elif verdict["status"] == "pass":
            fixed.append(slim)
        else:
            current[sig] = {**f, "triage": "still failing", "replayed": verdict.get("verdict")}
    return _ordered(current.values(), rows), fixed, unconfirmed


def same_bug_in(
    finding: dict[str, Any], records: Iterable[dict[str, Any]]
) -> dict[str, Any] | None:
    """The record of ``records`` (findings of another report) that is the same bug as finding
    record ``finding``: the one of its signature, else one of its target that
    ``fuzz.signatures.same_bug`` says is one bug with it (one key, triggers that nest, or a NaN
    born at one site: a mutant's minimal example found with ``[feature scale]`` tonight and
    ``[feature scale, partial-tile]`` last night is one bug, still failing). None: no such
    record."""
    records = list(records)
    exact = next((r for r in records if r.get("signature") == finding.get("signature")), None)
    if exact is not None:
        return exact
    # A bug seen another way under either signature (its record may stand for it now).
    ways = {finding.get("signature")} | {s.get("signature") for s in finding.get("also_seen", [])}
    for r in records:
        theirs = {r.get("signature")} | {s.get("signature") for s in r.get("also_seen", [])}
        if r.get("target") == finding.get("target") and ways & theirs - {None}:
            return r
    mine = bugs_of_record(finding)
    for r in records:
        if r.get("target") != finding.get("target"):
            continue
        if any(same_bug(a, b) for a in mine for b in bugs_of_record(r)):
            return r
    return None


def _ordered(
    findings: Iterable[dict[str, Any]], rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``findings`` in the report's order (real targets first, new first), each marked with its
    target's mutant fields (from its row; a previous finding's own where no row has its target)."""
    ordered = sorted(
        findings,
        key=lambda f: (
            f.get("mutant_of") is not None,
            f["triage"] != "new",
            f["target"],
            f["class"],
        ),
    )
    for f in ordered:
        r = next((r for r in rows if r["target"] == f["target"]), None)
        f["mutant"] = bool(r and r["mutant"])
        f["mutant_of"] = r["mutant_of"] if r else f.get("mutant_of")
        f["expected_class"] = r["expected_class"] if r else f.get("expected_class")
    return after_their_bugs(ordered)


def ordered_findings(
    findings: Iterable[dict[str, Any]], rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``findings`` in the report's order, marked with their targets' mutant fields."""
    return _ordered(findings, rows)


def summary_of(
    rows: list[dict[str, Any]],
    findings: list[dict[str, Any]],
    fixed: list[dict[str, Any]],
    errors: list[str],
) -> dict[str, Any]:
    """The report's ``summary`` of ``rows`` and ``findings`` (after triage)."""
    return _summary(rows, findings, fixed, errors)


def short_of_floor(rows: list[dict[str, Any]], floors: dict[str, Any] | None) -> list[str]:
    """The pairs (``TARGET on BACKEND``) that ran but were not fuzzed to their floor (its
    examples or its fuzzing seconds) and are not finished: read as a pass, they were not
    fuzzed enough to say so."""
    if not floors:
        return []
    out = []
    for r in rows:
        seconds = floors["seconds"] if r.get("mutant") else floors["real_seconds"]
        if (
            r["status"] != UNRUN
            and not r.get("retired")
            and r["examples"] < floors["examples"]
            and r.get("fuzz_seconds", 0.0) < seconds
        ):
            out.append(f"{r['target']} on {r['backend']}")
    return out


def _summary(
    rows: list[dict[str, Any]],
    findings: list[dict[str, Any]],
    fixed: list[dict[str, Any]],
    errors: list[str],
    floors: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The report's ``summary``: counts, failing real targets, mutants found, pairs unrun or
    short of their floor, harness errors."""
    real = [r for r in rows if not r["mutant"]]
    mutants = [r for r in rows if r["mutant"]]
    real_failed = sorted(
        {r["target"] for r in real if r["status"] == "fail"}
        | {f["target"] for f in findings if not f["mutant"]}
    )
    return {
        "runs": len(rows),
        "examples": sum(r["examples"] for r in rows),
        "findings": len(findings),
        "new": sum(f["triage"] == "new" for f in findings),
        "still_failing": sum(f["triage"] == "still failing" for f in findings),
        "fixed": len(fixed),
        # Of the findings, those not shrunk whose failure key is a shrunk bug's (they may be it).
        "maybe_known": sum(1 for f in findings if f.get("maybe_of")),
        "real_failed": real_failed,
        "mutants_found": sum(1 for r in mutants if r["status"] == "found"),
        "mutants_total": len(mutants),
        "unrun": [f"{r['target']} on {r['backend']}" for r in rows if r["status"] == UNRUN],
        "short_of_floor": short_of_floor(rows, floors),
        "harness_errors": [
            *errors,
            *(f"{r['target']} on {r['backend']}: {r['error']}" for r in rows if r["error"]),
        ],
    }


def matrix(rows: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, dict[str, Any]]]]:
    """The target x backend matrix every report opens with: (backends, [(target, {backend:
    row})]), real targets first, then mutants, each by name."""
    backends = sorted({r["backend"] for r in rows})
    by_target: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (r["mutant"], r["target"])):
        by_target.setdefault(r["target"], {})[r["backend"]] = r
    return backends, list(by_target.items())


def cell_text(r: dict[str, Any] | None) -> str:
    """One cell of the matrix: status, examples, fuzzing and compile seconds, distinct bugs."""
    if r is None:
        return "-"
    bugs = r.get("bugs", len(r["findings"]))
    fuzz = r.get("fuzz_seconds", r["seconds"])
    return (
        f"{r['status']}: {r['examples']} ex, {fuzz:.0f}s fuzz + "
        f"{r.get('compile_seconds', 0.0):.0f}s compile, {bugs} bug{'s' if bugs != 1 else ''}"
        + (f" (+{m} not shrunk)" if (m := r.get("unshrunk_maybe_known")) else "")
    )


def starved(rows: list[dict[str, Any]], floor: int = 200) -> list[dict[str, Any]]:
    """Pairs that ran fewer than ``floor`` examples and were not retired (they were not fuzzed)."""
    return [r for r in rows if r["examples"] < floor and not r.get("retired")]
