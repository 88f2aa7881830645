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
"""

from __future__ import annotations

import html
import json
import math
import os
import shutil
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from fuzz.backends import device_name
from fuzz.campaign import plots
from fuzz.failures import is_harness_limit
from fuzz.files import atomic_write_text
from fuzz.origin import describe
from fuzz.reproducer import versions
from fuzz.signatures import Bug, same_bug, site

REPORT_VERSION = 2
REPORT_FILES = ("report.json", "report.md", "report.xml", "index.html")


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float as the string ``'nan'``, ``'inf'`` or ``'-inf'``
    (what ``float()`` reads back): bare ``NaN``/``Infinity`` are not JSON, and strict parsers
    (JavaScript's ``JSON.parse``, jq) reject the whole file."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """``data`` as strict JSON (see :func:`json_safe`), written atomically."""
    text = json.dumps(json_safe(data), indent=2, default=str, allow_nan=False)
    atomic_write_text(path, text + "\n")


def _read(path: Path) -> tuple[dict[str, Any] | None, str | None, int]:
    """(report or None, why it cannot be used or None, how many malformed findings were left
    out): what :func:`read_report` and :func:`read_previous` say, each in its own words."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None, None, 0
    except (OSError, ValueError) as e:
        return None, f"cannot be read ({e})", 0
    if not isinstance(data, dict) or not isinstance(data.get("findings", []), list):
        return None, "is not a campaign report", 0
    findings = [
        resolve_reproducers(f, path.parent)
        for f in data.get("findings", [])
        if _is_finding_record(f)
    ]
    skipped = len(data.get("findings", [])) - len(findings)
    started = data.get("started")
    data = {**data, "findings": findings, "started": started if isinstance(started, str) else None}
    return data, None, skipped


def read_report(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The campaign report at ``path``, for reading on its own (a merge's input): (report or
    None, what is wrong with the file or what of it was left out, or None). Findings that are
    not records of a finding (another tool's report.json, a hand edit) are left out, never a
    crash; each finding's reproducers are looked for in the folder the report now lives in
    (:func:`resolve_reproducers`)."""
    data, why, skipped = _read(path)
    if why is not None:
        return None, f"{path} {why}"
    if skipped:
        return data, f"{skipped} finding(s) of {path} are malformed; left out"
    return data, None


def read_previous(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The previous campaign's report at ``path``, as far as triage needs it (read as
    :func:`read_report` reads it, its reproducers in the folder it now lives in): (report or
    None, why it is not used or what of it was skipped, or None)."""
    data, why, skipped = _read(path)
    if why is not None:
        return None, f"the previous {path.name} {why}; not triaged against"
    if skipped:
        return data, f"{skipped} finding(s) of the previous {path.name} are malformed; skipped"
    return data, None


def resolve_reproducers(finding: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``finding`` (a record of a report now in ``folder``) with each reproducer path pointing
    at the folder's own copy (``folder/reproducers/<name>``) where there is one, else as
    recorded. A report records paths as its campaign saw them; a copied or moved ``--out`` has
    its reproducers beside it: a campaign into the copy must replay and name its own copy (not
    the original folder's, which may be deleted), and one into a moved folder finds them."""

    def resolved(path: Any) -> Any:
        if not isinstance(path, str) or not path:
            return path
        own = folder / "reproducers" / Path(path).name
        return str(own) if own.is_file() else path

    out = dict(finding)
    if "reproducer" in finding:
        out["reproducer"] = resolved(finding["reproducer"])
    if isinstance(finding.get("reproducers"), list):
        out["reproducers"] = [resolved(p) for p in finding["reproducers"]]
    return out


def _is_finding_record(f: Any) -> bool:
    """Whether ``f`` has the fields triage and the reports read, of the right types."""
    return (
        isinstance(f, dict)
        and all(isinstance(f.get(k), str) for k in ("signature", "target", "class", "message"))
        and isinstance(f.get("reproducer") or "", str)
        and isinstance(f.get("backends"), list)
        and all(isinstance(b, str) for b in f["backends"])
    )


def archive_previous(out: Path) -> Path | None:
    """Moves the previous campaign's reports to ``out/history/<its start>/``."""
    prev = out / "report.json"
    if not prev.exists():
        return None
    try:
        data = json.loads(prev.read_text())
        stamp = data.get("started", "") if isinstance(data, dict) else ""
        stamp = stamp if isinstance(stamp, str) else ""
    except (OSError, ValueError):
        stamp = ""
    stamp = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in stamp) or str(
        int(time.time())
    )
    dest = out / "history" / stamp
    n = 1
    while dest.exists():
        n += 1
        dest = out / "history" / f"{stamp}-{n}"
    dest.mkdir(parents=True)
    for name in REPORT_FILES:
        if (out / name).exists():
            shutil.move(str(out / name), dest / name)
    return dest


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
    also seen on any of them (``also_seen``: another class, property or output)."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        sig = r.get("signature") or f"{r['target']}|{r['class']}"
        if sig not in out:
            out[sig] = {**r, "backends": [r["backend"]], "reproducers": [r.get("reproducer")]}
        else:
            d = out[sig]
            if r["backend"] not in d["backends"]:
                d["backends"].append(r["backend"])
                d["reproducers"].append(r.get("reproducer"))
            known = {s.get("signature") for s in d.get("also_seen", [])}
            extra = [s for s in r.get("also_seen", []) if s.get("signature") not in known]
            if extra:
                d["also_seen"] = [*d.get("also_seen", []), *extra]
    return out


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

# How a record was told to be a bug seen another way (``fuzz.duplicates``).
_HOW = {
    "case": "minimal example, the bug's own kernel call",
    "property": "minimal example failing the bug's way too",
    "site": "NaN/Inf born at the bug's kernel expression",
}


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


def _bugs_of(f: dict[str, Any]) -> list[Bug]:
    """The bug a finding record is, once per set of conditions it is reached through (its
    ``triggers`` and ``also_triggers``); none for a record without a bug key (an old report's)."""
    key = f.get("bug_key")
    if not isinstance(key, str) or not key:
        return []
    details = f.get("details")
    where = site(details.get("origin")) if isinstance(details, dict) else None
    sets = [f.get("triggers") or [], *(f.get("also_triggers") or [])]
    return [
        Bug(key, frozenset(t), str(f.get("signature")), where)
        for t in sets
        if isinstance(t, list) and all(isinstance(x, str) for x in t)
    ]


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
    mine = _bugs_of(finding)
    for r in records:
        if r.get("target") != finding.get("target"):
            continue
        if any(same_bug(a, b) for a in mine for b in _bugs_of(r)):
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
    return ordered


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


def writers(out: Path, data: dict[str, Any]) -> list[tuple[str, Any]]:
    """(file name, function writing it) of ``report.md``, ``report.xml`` and ``index.html``,
    each written atomically: a caller can go on with the next when one fails."""
    return [
        ("report.md", lambda: atomic_write_text(out / "report.md", markdown(data, out))),
        ("report.xml", lambda: atomic_write_text(out / "report.xml", junit(data))),
        ("index.html", lambda: atomic_write_text(out / "index.html", html_report(data, out))),
    ]


def write_all(out: Path, data: dict[str, Any]) -> None:
    for _, write in writers(out, data):
        write()


# Markdown ------------------------------------------------------------------------------------------------


def _rel(path: str | None, out: Path) -> str:
    if not path:
        return ""
    try:
        return os.path.relpath(path, out)
    except ValueError:
        return path


def _origin_text(f: dict[str, Any]) -> list[str]:
    return describe(f.get("details", {}).get("origin"))


def markdown(data: dict[str, Any], out: Path) -> str:
    """``report.md``: the summary, the new and still failing findings, what was fixed or not
    re-checked, every (target, backend) pair, warnings."""
    lines = _markdown_summary(data)
    lines += _markdown_matrix(data["results"])
    for title, pick in (("New", "new"), ("Still failing", "still failing")):
        group = [f for f in data["findings"] if f["triage"] == pick]
        if not group:
            continue
        lines += [f"## {title}", ""]
        for f in group:
            lines += _markdown_finding(f, out)
    lines += _markdown_triage(data["triage"])
    lines += _markdown_declared(data["results"])
    lines += [
        *_markdown_hosts(data),
        "## Pairs",
        "",
        "| target | backend | status | examples | ex/s | fuzz s | compile s | bugs | hits |"
        + (" hosts |" if data.get("merged") else ""),
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |"
        + (" --- |" if data.get("merged") else ""),
    ]
    for r in data["results"]:
        classes = ", ".join(f["class"] for f in r["findings"]) or "-"
        hits = sum(r.get("known_hits", {}).values())
        lines.append(
            f"| {r['target']} | {r['backend']} | {r['status']}{' (' + r['retired'] + ')' if r['retired'] else ''} "
            f"| {r['examples']} | {r['examples_per_second']:.1f} | {r.get('fuzz_seconds', r['seconds']):.1f} "
            f"| {r.get('compile_seconds', 0.0):.1f} | {classes} | {hits} |"
            + (f" {_hosts_cell(r)} |" if data.get("merged") else "")
        )
    lines.append("")
    lines += _markdown_declined(data["results"])
    problems = data["database"]["problems"]
    if problems or data["notes"]:
        lines += ["## Warnings", ""] + [f"- {p}" for p in [*data["notes"], *problems]] + [""]
    v = data["versions"]
    lines.append("Versions: " + ", ".join(f"{k} {x}" for k, x in v.items()) + ".")
    return "\n".join(lines) + "\n"


def _markdown_matrix(rows: list[dict[str, Any]]) -> list[str]:
    """The target x backend matrix (``matrix``), and the pairs that were not fuzzed."""
    if not rows:
        return []
    backends, table = matrix(rows)
    lines = [
        "## Matrix",
        "",
        "| target | " + " | ".join(backends) + " |",
        "| --- |" + " --- |" * len(backends),
    ]
    for target, cells in table:
        lines.append(
            f"| {target} | " + " | ".join(cell_text(cells.get(b)) for b in backends) + " |"
        )
    lines.append("")
    few = starved(rows)
    if few:
        names = ", ".join(f"{r['target']} on {r['backend']} ({r['examples']})" for r in few[:20])
        more = f" and {len(few) - 20} more" if len(few) > 20 else ""
        lines += [f"**Not fuzzed** (fewer than 200 examples): {names}{more}.", ""]
    return lines


def _markdown_declared(rows: list[dict[str, Any]]) -> list[str]:
    """Failures the libraries declared they know, with the examples that hit them."""
    hits = [(r, k, n) for r in rows for k, n in (r.get("declared_hits") or {}).items()]
    if not hits:
        return []
    lines = ["## Known failures (declared by the library)", ""]
    for r, known, n in hits:
        lines.append(f"- {r['target']} on {r['backend']}: {known} ({n} examples)")
    return [*lines, ""]


def _hosts_cell(row: dict[str, Any]) -> str:
    """What each host ran of a merged report's pair: ``host: examples (status)``."""
    return "; ".join(
        f"{h}: {v.get('examples', 0)} ({v.get('status')})" for h, v in row.get("hosts", {}).items()
    )


def _markdown_hosts(data: dict[str, Any]) -> list[str]:
    """A merged report's hosts (``python -m fuzz merge``); nothing for a campaign's."""
    merged = data.get("merged")
    if not merged:
        return []
    lines = [
        "## Hosts",
        "",
        "| host | device | started | examples | state | folder |",
        "| --- | --- | --- | ---: | --- | --- |",
    ]
    for h in merged["hosts"]:
        state = "complete" if h["complete"] else f"INCOMPLETE ({h.get('interrupted') or 'error'})"
        lines.append(
            f"| {h['host']} | {h['device']} | {h['started']} | {h['examples']} | {state} "
            f"| {h['folder']} |"
        )
    return [*lines, ""]


def _markdown_declined(results: list[dict[str, Any]]) -> list[str]:
    """The examples (and derived launches) each pair's kernel declined (``fuzz.Unsupported``,
    counted as ``unsupported: <reason>`` events), by reason: never findings, but what was not
    checked; those the harness declined as its own limit (``fuzz.failures.HarnessLimit``) apart."""
    kernels: list[str] = []
    harness: list[str] = []
    for r in results:
        for key, n in sorted(r.get("events", {}).items()):
            if not key.startswith("unsupported: "):
                continue
            reason = key.split(": ", 1)[1]
            row = f"| {r['target']} | {r['backend']} | {reason} | {n} |"
            (harness if is_harness_limit(reason) else kernels).append(row)
    lines: list[str] = []
    for title, rows in (
        ("Declined by the kernels (fuzz.Unsupported)", kernels),
        ("Not checked: the harness's own limits (not the kernels')", harness),
    ):
        if rows:
            lines += [f"## {title}", "", "| target | backend | reason | count |"]
            lines += ["| --- | --- | --- | ---: |", *rows, ""]
    return lines


def _markdown_summary(data: dict[str, Any]) -> list[str]:
    s = data["summary"]
    state = (
        "complete" if data["complete"] else f"INCOMPLETE ({data.get('interrupted') or 'running'})"
    )
    title = "Merged fuzz campaigns" if data.get("merged") else "Fuzz campaign"
    lines = [
        f"# {title} {data['started']}",
        "",
        f"{state}; profile `{data['profile']}`, budget {data['budget']:g} s, ran {data['seconds']:.0f} s "
        f"on {data['device']}; {s['examples']} examples over {s['runs']} target/backend pairs; "
        f"{len(data['workers'])} worker(s), {data['worker_restarts']} restart(s).",
        "",
        f"**{s['new']} new, {s['still_failing']} still failing, {s['fixed']} fixed** "
        f"(previous report: {data['triage']['previous'] or 'none'}).",
        "",
    ]
    if s["real_failed"]:
        lines += [f"Failing real targets: {', '.join(s['real_failed'])}.", ""]
    else:
        lines += ["No real target failed.", ""]
    if s["harness_errors"]:
        lines += ["**Harness errors** (the harness failed, not a kernel):", ""]
        lines += [f"- {e}" for e in s["harness_errors"]] + [""]
    if s["mutants_total"]:
        lines += [
            f"Mutants found with the expected class: {s['mutants_found']}/{s['mutants_total']}.",
            "",
        ]
    unrun = s.get("unrun", [])
    if unrun:
        lines += [f"Not run (no example): {len(unrun)} pair(s): {', '.join(unrun)}.", ""]
    return lines


def _markdown_finding(f: dict[str, Any], out: Path) -> list[str]:
    mark = ""
    if f.get("mutant"):
        mark = " (mutant, expected)" if f["class"] == f.get("expected_class") else " (mutant)"
    lines = [f"### `{f['class']}` in {f['target']}{mark} on {', '.join(f['backends'])}", ""]
    if f.get("hosts"):
        lines.append(f"- found on: {', '.join(f['hosts'])}")
    lines.append(f"- {f['message']}")
    if f.get("case"):
        lines.append(
            f"- minimal case ({f.get('case_size')} elements{'' if f.get('shrunk', True) else ', not shrunk'}): `{f['case'][:300]}`"
        )
    if f.get("maybe_of"):
        lines.append(
            f"- not shrunk (its slice ended first) and failing as bug `{f['maybe_of']}` does "
            "(one class, property and output): it may be that bug; not counted as a distinct one"
        )
    small = f.get("interpreter_minimal")
    if small:
        repro = f": `python {_rel(small['reproducer'], out)}`" if small.get("reproducer") else ""
        lines.append(
            f"- smaller in {small['backend']} (the same kernel source; a case "
            f"{f.get('backends', ['its backend'])[0]} did not confirm): "
            f"{small['case_size']} elements{repro}"
        )
    for h in f.get("hazards", []):
        lines.append(f"- hazard: {h}")
    if f.get("triggers"):
        lines.append(f"- what sets it apart: {', '.join(f['triggers'])}")
    for t in f.get("also_triggers", []):
        said = ", ".join(t) or "no condition"
        lines.append(f"- also reached through: {said} (its NaN/Inf born at the same line)")
    if f.get("also_seen"):
        lines.append(f"- {also_seen_text(f)}; the same bug by its evidence, each reproducer:")
        for s in f["also_seen"]:
            repro = f"`python {_rel(s['reproducer'], out)}`" if s.get("reproducer") else "none"
            lines.append(
                f"  - `{s.get('class')}` ({s.get('property')}, {s.get('output')}), "
                f"{s.get('case_size')} elements, told by its {_HOW.get(s.get('how'), s.get('how'))}: "
                f"{repro}"
            )
    if f.get("hits"):
        lines.append(f"- hit again by {f['hits']} more example(s)")
    for o in _origin_text(f):
        lines.append(f"- {o.strip()}")
    if f.get("replayed"):
        lines.append(f"- replayed at the start: {f['replayed']}")
    for r in f.get("reproducers", [f.get("reproducer")]):
        if r:
            lines.append(f"- reproducer: `python {_rel(r, out)}`")
    if not any(f.get("reproducers", [f.get("reproducer")])):
        lines.append("- no reproducer: it could not be written (a full disk?), or is gone")
    lines.append(f"- signature `{f.get('signature')}`")
    lines.append("")
    return lines


def _markdown_triage(triage: dict[str, Any]) -> list[str]:
    lines = []
    if triage["fixed"]:
        lines += ["## Fixed", ""]
        for f in triage["fixed"]:
            lines.append(
                f"- `{f['class']}` in {f['target']} (signature `{f['signature']}`): its reproducer passes now"
            )
        lines.append("")
    if triage["not_rechecked"]:
        lines += ["## Not re-checked", ""]
        for f in triage["not_rechecked"]:
            lines.append(f"- `{f['class']}` in {f['target']}: {f['why']}")
        lines.append("")
    return lines


# JUnit ---------------------------------------------------------------------------------------------------


def junit(data: dict[str, Any]) -> str:
    """One test case per target and backend: real failures fail, harness errors error, mutants
    pass when found with their expected class and are skipped (with the reason) otherwise."""
    cases = []
    failures = errors = skipped = 0
    for r in data["results"]:
        name = quoteattr(f"{r['target']}[{r['backend']}]")
        cls = quoteattr(f"kernel_fuzz.{r['family']}")
        body = ""
        text = "\n".join(
            f"{f['class']} ({f.get('property')}): {f['message']}\n  reproducer: {f.get('reproducer')}"
            for f in r["findings"]
        )
        if r["error"]:
            errors += 1
            body = f"<error message={quoteattr(r['error'][:500])}/>"
        elif not r["mutant"] and r["findings"]:
            failures += 1
            msg = ", ".join(f["class"] for f in r["findings"])
            body = f'<failure message={quoteattr(msg)} type="kernel-fuzz">{html.escape(text)}</failure>'
        elif r["status"] == UNRUN:
            skipped += 1
            why = "not run: no example ran (the campaign stopped or its budget ran out first)"
            body = f"<skipped message={quoteattr(why)}/>"
        elif r["mutant"] and r["status"] != "found":
            skipped += 1
            why = f"mutant {r['status']}: expected {r['expected_class']}"
            body = f"<skipped message={quoteattr(why)}/>"
        stats = f"{r['examples']} examples, {r['examples_per_second']} ex/s"
        out = f"<system-out>{html.escape(stats)}</system-out>"
        cases.append(
            f'  <testcase classname={cls} name={name} time="{r["seconds"]}">{body}{out}</testcase>'
        )
    if data.get("errors"):  # the campaign itself (no worker could start...)
        errors += 1
        text = "; ".join(data["errors"])
        cases.append(
            '  <testcase classname="kernel_fuzz.campaign" name="harness">'
            f"<error message={quoteattr(text[:500])}>{html.escape(text)}</error></testcase>"
        )
    if data.get("interrupted"):  # stopped before its end: what it says is what it found so far
        errors += 1
        text = (
            f"the campaign was interrupted ({data['interrupted']}): it reports what it found "
            "until then"
        )
        cases.append(
            '  <testcase classname="kernel_fuzz.campaign" name="interrupted">'
            f"<error message={quoteattr(text)} type={quoteattr(str(data['interrupted']))}/>"
            "</testcase>"
        )
    props = (
        "<properties>"
        f'<property name="complete" value="{str(bool(data.get("complete"))).lower()}"/>'
        f'<property name="interrupted" value={quoteattr(str(data.get("interrupted") or ""))}/>'
        "</properties>"
    )
    head = (
        f'<testsuite name="kernel-fuzz campaign" tests="{len(cases)}" failures="{failures}" '
        f'errors="{errors}" skipped="{skipped}" time="{data["seconds"]}" timestamp={quoteattr(data["started"])}>'
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>\n'
        + head
        + "\n  "
        + props
        + "\n"
        + "\n".join(cases)
        + "\n</testsuite>\n</testsuites>\n"
    )


# HTML ----------------------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
h1{font-size:1.5em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em}
table{border-collapse:collapse;font-size:.9em} td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}
.finding{border:1px solid #ccc;border-radius:6px;padding:.6em 1em;margin:1em 0}
.new{border-left:6px solid #c03} .still{border-left:6px solid #e90}
.maps{display:flex;flex-wrap:wrap;gap:1.5em}
.map img{image-rendering:pixelated;border:1px solid #999;display:block}
.legend{width:320px;height:10px;image-rendering:pixelated;display:block}
code,pre{background:#f4f4f4;padding:1px 3px} pre{padding:.5em;white-space:pre-wrap;overflow-wrap:anywhere}
.tag{display:inline-block;padding:0 .4em;border-radius:3px;background:#eee;margin-right:.3em}
"""

_SELFCHECK = """
<script>
window.addEventListener('load', function () {
  var bad = [];
  var imgs = document.querySelectorAll('img');
  imgs.forEach(function (im, i) { if (!(im.complete && im.naturalWidth > 0)) bad.push('img' + i); });
  var svgs = document.querySelectorAll('svg');
  svgs.forEach(function (s, i) { var b = s.getBoundingClientRect(); if (!(b.width > 0 && b.height > 0)) bad.push('svg' + i); });
  document.body.setAttribute('data-selfcheck', bad.length ? 'fail ' + bad.join(',')
    : 'ok ' + imgs.length + ' images ' + svgs.length + ' svgs');
});
</script>
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _finding_html(f: dict[str, Any], out: Path) -> str:
    cls = "new" if f["triage"] == "new" else "still"
    tags = [f["triage"], f["class"]] + (["mutant"] if f.get("mutant") else [])
    parts = [
        f'<section class="finding {cls}" id="f-{_e(f.get("signature"))}">',
        f"<h3>{''.join(f'<span class=tag>{_e(t)}</span>' for t in tags)}"
        f"{_e(f['target'])} on {_e(', '.join(f['backends']))}</h3>",
        f"<p>{_e(f['message'])}</p>",
    ]
    if f.get("case"):
        parts.append(
            f"<p>minimal case ({_e(f.get('case_size'))} elements): <code>{_e(f['case'][:400])}</code></p>"
        )
    if f.get("maybe_of"):
        parts.append(
            f"<p>not shrunk (its slice ended first) and failing as bug {_e(f['maybe_of'])} does: "
            "it may be that bug; not counted as a distinct one</p>"
        )
    small = f.get("interpreter_minimal")
    if small:
        parts.append(
            f"<p>smaller in {_e(small['backend'])} (the same kernel source): "
            f"{_e(small['case_size'])} elements: <code>{_e(small['case'][:400])}</code></p>"
        )
    for h in f.get("hazards", []):
        parts.append(f"<p>hazard: {_e(h)}</p>")
    if f.get("also_seen"):
        items = "".join(
            f"<li>{_e(s.get('class'))} ({_e(s.get('property'))}, {_e(s.get('output'))}), "
            f"{_e(s.get('case_size'))} elements, told by its "
            f"{_e(_HOW.get(s.get('how'), s.get('how')))}"
            + (
                f": <code>python {_e(_rel(s['reproducer'], out))}</code>"
                if s.get("reproducer")
                else ""
            )
            + "</li>"
            for s in f["also_seen"]
        )
        parts.append(
            f"<details open><summary>{_e(also_seen_text(f))}</summary><ul>{items}</ul></details>"
        )
    origin = _origin_text(f)
    if origin:
        parts.append("<pre class=origin>" + _e("\n".join(origin)) + "</pre>")
    log = f.get("details", {}).get("log")
    if log:
        parts.append(
            f"<details><summary>worker log</summary><pre>{_e(log[-3000:])}</pre></details>"
        )
    maps = f.get("plots") or []
    if maps:
        parts.append('<div class="maps">')
        for m in maps:
            rows, cols = len(m["grid"]), len(m["grid"][0]) if m["grid"] else 1
            cell = min(320 / max(cols, 1), 320 / max(rows, 1), 40.0)
            parts.append(
                f'<figure class="map"><img alt="error map of {_e(m["output"])}" src="{plots.heatmap_png(m["grid"])}" '
                f'style="width:{cols * cell:.0f}px;height:{rows * cell:.0f}px">'
                f'<img class="legend" alt="scale" src="{plots.legend_png()}">'
                f"<figcaption><b>{_e(m['output'])}</b> {_e(m['reduced'])}; error / tolerance "
                f"(tolerance {_tolerance_range(m)}; cells are max over {m['block'][0]}x{m['block'][1]} blocks): white exact, "
                f"blue within tolerance, yellow-red above, magenta NaN/Inf; worst at {_e(m['worst'])}</figcaption></figure>"
                f"<figure>{plots.histogram_svg(m)}<figcaption>{_e(m['output'])}: log10(error / tolerance), "
                f"{m['exact']} exact, {m['nonfinite']} NaN/Inf of {m['elements']}</figcaption></figure>"
            )
        parts.append("</div>")
    elif f["class"] in ("crash", "hang"):
        parts.append("<p><i>no output to plot: the kernel did not return</i></p>")
    for r in f.get("reproducers", [f.get("reproducer")]):
        if r:
            parts.append(f"<p>reproducer: <code>python {_e(_rel(r, out))}</code></p>")
    parts.append(f"<p><small>signature {_e(f.get('signature'))}</small></p></section>")
    return "\n".join(parts)


def html_report(data: dict[str, Any], out: Path) -> str:
    """``index.html``: the summary, each new and still failing finding with its error maps,
    what was fixed, throughput, every (target, backend) pair, warnings; self-contained."""
    body = _html_summary(data)
    body += _html_matrix(data["results"])
    for title, pick in (("New findings", "new"), ("Still failing", "still failing")):
        group = [f for f in data["findings"] if f["triage"] == pick]
        if group:
            body.append(f"<h2>{title}</h2>")
            body.extend(_finding_html(f, out) for f in group)
    if data["triage"]["fixed"]:
        body.append("<h2>Fixed</h2><ul>")
        body.extend(
            f"<li><code>{_e(f['class'])}</code> in {_e(f['target'])}</li>"
            for f in data["triage"]["fixed"]
        )
        body.append("</ul>")
    body += _html_hosts(data)
    body += _html_targets(data["results"], merged=bool(data.get("merged")))
    warnings = [*data["notes"], *data["database"]["problems"]]
    if warnings:
        body.append(
            "<h2>Warnings</h2><ul>" + "".join(f"<li>{_e(w)}</li>" for w in warnings) + "</ul>"
        )
    body.append(
        "<p><small>"
        + _e(", ".join(f"{k} {v}" for k, v in data["versions"].items()))
        + "</small></p>"
    )
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f"<title>kernel-fuzz campaign {_e(data['started'])}</title><style>{_CSS}</style></head>"
        "<body>\n" + "\n".join(body) + _SELFCHECK + "</body></html>\n"
    )


def _html_summary(data: dict[str, Any]) -> list[str]:
    s = data["summary"]
    state = (
        "complete"
        if data["complete"]
        else f"incomplete ({_e(data.get('interrupted') or 'running')})"
    )
    body = [
        f"<h1>{'Merged fuzz campaigns' if data.get('merged') else 'Fuzz campaign'} "
        f"{_e(data['started'])}</h1>",
        f"<p>{state}; profile <code>{_e(data['profile'])}</code>, budget {data['budget']:g} s, "
        f"ran {data['seconds']:.0f} s on {_e(data['device'])}; {s['examples']} examples; "
        f"{len(data['workers'])} worker(s), {data['worker_restarts']} restart(s).</p>",
        f"<p><b>{s['new']} new, {s['still_failing']} still failing, {s['fixed']} fixed</b>; "
        + (
            f"failing real targets: {_e(', '.join(s['real_failed']))}"
            if s["real_failed"]
            else "no real target failed"
        )
        + (
            f"; mutants found {s['mutants_found']}/{s['mutants_total']}"
            if s["mutants_total"]
            else ""
        )
        + "</p>",
    ]
    if s["harness_errors"]:
        body.append(
            "<h2>Harness errors</h2><ul>"
            + "".join(f"<li>{_e(e)}</li>" for e in s["harness_errors"])
            + "</ul>"
        )
    return body


def _html_matrix(rows: list[dict[str, Any]]) -> list[str]:
    """The target x backend matrix (``matrix``); a pair with fewer than 200 examples is marked."""
    if not rows:
        return []
    backends, table = matrix(rows)
    body = [
        "<h2>Matrix</h2><table class=matrix><tr><th>target</th>"
        + "".join(f"<th>{_e(b)}</th>" for b in backends)
        + "</tr>"
    ]
    for target, cells in table:
        tds = []
        for b in backends:
            r = cells.get(b)
            few = r is not None and r["examples"] < 200 and not r.get("retired")
            style = ' style="background:#fdd"' if few else ""
            tds.append(f"<td{style}>{_e(cell_text(r))}</td>")
        body.append(f"<tr><td>{_e(target)}</td>{''.join(tds)}</tr>")
    body.append("</table><p><small>red: fewer than 200 examples (not fuzzed)</small></p>")
    return body


def _html_hosts(data: dict[str, Any]) -> list[str]:
    merged = data.get("merged")
    if not merged:
        return []
    body = [
        "<h2>Hosts</h2><table><tr><th>host</th><th>device</th><th>started</th><th>examples</th>"
        "<th>state</th><th>folder</th></tr>"
    ]
    for h in merged["hosts"]:
        state = "complete" if h["complete"] else f"incomplete ({h.get('interrupted') or 'error'})"
        body.append(
            f"<tr><td>{_e(h['host'])}</td><td>{_e(h['device'])}</td><td>{_e(h['started'])}</td>"
            f"<td>{h['examples']}</td><td>{_e(state)}</td><td>{_e(h['folder'])}</td></tr>"
        )
    body.append("</table>")
    return body


def _html_targets(results: list[dict[str, Any]], *, merged: bool = False) -> list[str]:
    body = ["<h2>Throughput</h2>"]
    body.append(
        plots.bars_svg(
            [(f"{r['target']} [{r['backend']}]", r["examples_per_second"]) for r in results],
            unit=" ex/s",
        )
    )
    body.append(
        "<h2>Pairs</h2><table><tr><th>target</th><th>backend</th><th>status</th><th>examples</th>"
        "<th>ex/s</th><th>seconds</th><th>compile share</th><th>classes</th>"
        + ("<th>hosts</th>" if merged else "")
        + "</tr>"
    )
    for r in results:
        body.append(
            f"<tr><td>{_e(r['target'])}</td><td>{_e(r['backend'])}</td><td>{_e(r['status'])}"
            f"{' (' + _e(r['retired']) + ')' if r['retired'] else ''}</td><td>{r['examples']}</td>"
            f"<td>{r['examples_per_second']:.1f}</td><td>{r['seconds']:.1f}</td><td>{r['compile_share']:.0%}</td>"
            f"<td>{_e(', '.join(f['class'] for f in r['findings']) or '-')}</td>"
            + (f"<td>{_e(_hosts_cell(r))}</td>" if merged else "")
            + "</tr>"
        )
    body.append("</table>")
    return body


def _tolerance_range(m: dict[str, Any]) -> str:
    """The per-element tolerance of an error map: one number, or its range."""
    lo, hi = m["tolerance"], m.get("tolerance_max", m["tolerance"])
    return f"{lo:.3g}" if hi == lo else f"{lo:.3g} to {hi:.3g} per element"
