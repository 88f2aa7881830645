"""``report.md``: the morning summary of a campaign's report (``fuzz.campaign.report``): new,
still failing and fixed findings, every (target, backend) pair, what was declined and why."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fuzz.campaign.report import (
    SEEN_HOW,
    also_seen_text,
    cell_text,
    matrix,
    starved,
)
from fuzz.failures import is_harness_limit
from fuzz.origin import describe, worth_showing
from fuzz.results import maybe_note, size_note

# Markdown ------------------------------------------------------------------------------------------------


def rel_path(path: str | None, out: Path) -> str:
    if not path:
        return ""
    try:
        return os.path.relpath(path, out)
    except ValueError:
        return path


def origin_text(f: dict[str, Any]) -> list[str]:
    """The lines of a row's traced origin; none for a row of wrong values whose trace found no
    load past a buffer (one cause among many: the report says nothing of it)."""
    o = f.get("details", {}).get("origin")
    return describe(o) if worth_showing(f.get("class"), o) else []


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
            + (f" {hosts_cell(r)} |" if data.get("merged") else "")
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


def hosts_cell(row: dict[str, Any]) -> str:
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
        for r in data["results"]:
            if r.get("error") and r.get("error_trace"):
                lines += [
                    f"<details><summary>traceback of {r['target']} on {r['backend']}'s "
                    "harness error</summary>",
                    "",
                    "```",
                    r["error_trace"].rstrip(),
                    "```",
                    "</details>",
                    "",
                ]
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
    if note := size_note(f):
        lines.append(f"- {note}")
    if maybe := maybe_note(f):
        lines.append(f"- {maybe}")
    small = f.get("interpreter_minimal")
    if small:
        repro = (
            f": `python {rel_path(small['reproducer'], out)}`" if small.get("reproducer") else ""
        )
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
            repro = f"`python {rel_path(s['reproducer'], out)}`" if s.get("reproducer") else "none"
            lines.append(
                f"  - `{s.get('class')}` ({s.get('property')}, {s.get('output')}), "
                f"{s.get('case_size')} elements, told by its {SEEN_HOW.get(s.get('how'), s.get('how'))}: "
                f"{repro}"
            )
    if f.get("hits"):
        lines.append(f"- hit again by {f['hits']} more example(s)")
    for o in origin_text(f):
        lines.append(f"- {o.strip()}")
    if f.get("replayed"):
        lines.append(f"- replayed at the start: {f['replayed']}")
    for r in f.get("reproducers", [f.get("reproducer")]):
        if r:
            lines.append(f"- reproducer: `python {rel_path(r, out)}`")
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
