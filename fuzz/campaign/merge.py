"""``python -m fuzz merge DIR... --out DIR``: one morning summary from the campaigns of many hosts.

Several GPU hosts run campaigns at night (against one shared example database, each into its own
output folder); their folders are gathered (copied, or on a shared file system) and merged into
one report set, written as a campaign writes its own (``report.{json,md,xml}``, ``index.html``):

* findings deduplicated by ``signature`` (target, class, property, output, location pattern),
  each naming the hosts that found it, its reproducers copied into ``OUT/reproducers/`` (so the
  summary stands on its own; a reproducer is looked for where its report says, else under its
  folder's ``reproducers/``);
* the pair matrix across hosts: per (target, backend) the examples and seconds summed, the status
  over all hosts (a real target fails if any host found a failure; ``unrun`` where no host ran an
  example) and, per host, what it ran;
* triage against the previous merged report in ``OUT`` (moved to ``OUT/history/`` as a campaign
  does): *new*, *still failing*; a previous finding no host saw again is *fixed* where a host's
  own triage replayed it and it passed, else *not re-checked*. Merging runs no kernel.

Each folder's report is read as triage reads a previous report (malformed findings are left out,
with a note; its reproducers looked for beside it); a folder without a campaign report is a usage
error. Hosts are labelled by their names, two folders of one host by as much of their paths as
tells them apart (``vm/hA/out``, ``vm/hC/out``). A folder whose campaign has not ended (still
running, or killed before its final report) is merged as it stands, said on the console
(:func:`warnings`) and in the merged report's state and hosts table.
"""

from __future__ import annotations

import functools
import os
import shutil
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fuzz import reproducer
from fuzz.campaign import report, report_files, report_html
from fuzz.results import status_of

# Row fields summed over hosts.
_SUMMED = (
    "examples",
    "slices",
    "worker_deaths",
    "resource_exhaustions",
    "launches",
    "cache_loads",
    "precompiles",
    "twin_launches",
)
_SUMMED_SECONDS = (
    "seconds",
    "fuzz_seconds",
    "launch_seconds",
    "compile_seconds",
    "cache_load_seconds",
    "precompile_seconds",
    "warm_seconds",
    "refused_seconds",
    "shrink_seconds",
)


@dataclass
class Source:
    """One campaign folder being merged."""

    folder: Path
    data: dict[str, Any]
    label: str = ""  # its host's name in the merged report

    @property
    def host(self) -> str:
        host = self.data.get("host")
        return host if isinstance(host, str) and host else self.folder.name

    @functools.cached_property
    def state(self) -> str | None:
        """Why its campaign's report is not complete, in a few words (None: it is); looked at
        once, so that the merged report says one thing of it throughout."""
        d = self.data
        if d.get("complete"):
            return None
        if d.get("interrupted"):
            return f"interrupted: {d['interrupted']}"
        if d.get("errors"):
            return "ended with harness errors"
        holder = campaign_holding(self.folder)
        if holder is not None:
            return f"still running ({holder})"
        return "ended without its final report (killed?)"


def campaign_holding(folder: Path) -> str | None:
    """Who holds ``folder``'s campaign lock now (``fuzz.campaign.outdir.lock_output``), as far as
    this host can tell without taking the lock (a campaign starting then would fail to): the
    process the lock file names, where it is of this host and alive; None otherwise."""
    import json
    import socket

    from fuzz.campaign.outdir import LOCK_FILE

    try:
        holder = json.loads((folder / LOCK_FILE).read_text())
        pid, host = int(holder["pid"]), str(holder["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if host != socket.gethostname() or pid == os.getpid():
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None  # gone (or no /proc to tell)
    if b"fuzz" not in cmdline:
        return None  # a process of that number, not the campaign (the number was reused)
    return f"pid {pid} on {host}"


def read_sources(folders: Sequence[str], out: Path) -> tuple[list[Source], list[str]]:
    """The campaign reports of ``folders`` (each labelled by its host, or ``host/folder`` where
    two share a host), and notes on what of them was left out.

    Raises:
        ValueError: a folder that is ``out``, that does not exist, or holds no campaign report.
    """
    sources, notes = [], []
    seen: set[Path] = set()
    for name in folders:
        folder = Path(name)
        if folder.resolve() == out.resolve():
            raise ValueError(f"--out={str(out)!r} is one of the folders merged; merge into another")
        if not folder.is_dir():
            raise ValueError(f"{name!r} is not a folder (a campaign's --out)")
        if folder.resolve() in seen:
            raise ValueError(f"{name!r} is named twice")
        seen.add(folder.resolve())
        data, problem = report_files.read_report(folder / "report.json")
        if data is None:
            raise ValueError(
                f"{name!r} holds no campaign report: {problem or 'there is no report.json'}"
            )
        if not isinstance(data.get("results"), list):
            raise ValueError(f"{name!r}: its report.json has no results; not a campaign report")
        if problem is not None:
            notes.append(problem)
        sources.append(Source(folder, data))
    for s, label in zip(sources, _labels(sources), strict=True):
        s.label = label
    return sources, notes


def _labels(sources: Sequence[Source]) -> list[str]:
    """Each source's label: its host's name, or for folders of one host, the host's name and
    the shortest ends of their paths that tell them apart (``vm/hA/out``, ``vm/hC/out``)."""
    by_host: dict[str, list[int]] = {}
    for i, s in enumerate(sources):
        by_host.setdefault(s.host, []).append(i)
    labels = [s.host for s in sources]
    for host, group in by_host.items():
        if len(group) == 1:
            continue
        parts = [sources[i].folder.resolve().parts for i in group]
        for k in range(1, max(len(p) for p in parts) + 1):
            ends = [str(Path(*p[-k:])) for p in parts]
            if len(set(ends)) == len(ends):
                break
        for i, end in zip(group, ends, strict=True):
            labels[i] = f"{host}/{end}"
    return labels


def warnings(data: dict[str, Any]) -> list[str]:
    """What the console should say of a merged report (:func:`merge`'s): each host whose
    campaign had not ended, merged as it stood."""
    return [
        f"{h['host']}: its campaign is not complete ({h['state']}); merged as its report stands"
        for h in data.get("merged", {}).get("hosts", [])
        if h.get("state")
    ]


def _reproducer_of(source: Source, path: str | None) -> Path | None:
    """Where the reproducer a report names is: as named, else in the folder's reproducers/."""
    if not path:
        return None
    named = Path(path)
    if named.is_file():
        return named
    here = source.folder / "reproducers" / named.name
    return here if here.is_file() else None


def _copy(src: Path, dest_dir: Path) -> Path:
    """Reproducer ``src`` and its companions (its issue text) copied into ``dest_dir``."""
    for extra in reproducer.companions(src):
        _copy_file(extra, dest_dir)
    return _copy_file(src, dest_dir)


def _copy_file(src: Path, dest_dir: Path) -> Path:
    """``src`` copied into ``dest_dir`` (atomically; kept where a file of its name is there)."""
    dest = dest_dir / src.name
    if dest.exists():
        return dest
    dest_dir.mkdir(parents=True, exist_ok=True)
    tmp = dest_dir / f".{src.name}.{os.getpid()}.tmp"
    try:
        shutil.copy2(src, tmp)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


def _merged_row(
    key: tuple[str, str], parts: list[tuple[Source, dict[str, Any]]], repro_dir: Path
) -> tuple[dict[str, Any], dict[str, set[str]]]:
    """One (target, backend) row over the hosts that ran it, and signature -> hosts of its
    findings."""
    first = parts[0][1]
    row: dict[str, Any] = {k: first.get(k) for k in first if k not in ("findings", "hosts")}
    for k in _SUMMED:
        row[k] = sum(int(r.get(k) or 0) for _, r in parts)
    row["compiles"] = sum(int(r.get("compiles") or 0) for _, r in parts)
    for k in _SUMMED_SECONDS:
        row[k] = round(sum(float(r.get(k) or 0.0) for _, r in parts), 3)
    secs = row["seconds"]
    fuzz = row["fuzz_seconds"] or secs  # a report from before compile time was set apart: all
    row["examples_per_second"] = round(row["examples"] / fuzz, 2) if fuzz > 0 else 0.0
    row["compile_share"] = round(row["compile_seconds"] / secs, 3) if secs > 0 else 0.0
    row["coverage_features"] = max(int(r.get("coverage_features") or 0) for _, r in parts)
    row["structures"] = max(int(r.get("structures") or 0) for _, r in parts)
    for k in ("events", "known_hits", "declared_hits"):
        total: Counter[str] = Counter()
        for _, r in parts:
            total.update(r.get(k) or {})
        row[k] = dict(total)
    errors = [f"{s.label}: {r['error']}" for s, r in parts if r.get("error")]
    retired = [f"{s.label}: {r['retired']}" for s, r in parts if r.get("retired")]
    row["error"] = "; ".join(errors) or None
    traces = [f"{s.label}:\n{r['error_trace']}" for s, r in parts if r.get("error_trace")]
    row["error_trace"] = "\n".join(traces) or None
    row["retired"] = "; ".join(retired) or None
    findings: dict[str, dict[str, Any]] = {}
    hosts: dict[str, set[str]] = {}
    for s, r in parts:
        for f in r.get("findings", []):
            sig = f.get("signature") or f"{key[0]}|{f.get('class')}"
            hosts.setdefault(sig, set()).add(s.label)
            if sig in findings:
                continue
            findings[sig] = {**_with_copied_reproducers(s, f, repro_dir), "host": s.label}
    row["findings"] = sorted(findings.values(), key=lambda f: (f["class"], f["signature"]))
    row["bugs"] = len(row["findings"])
    classes = {f["class"] for f in row["findings"]} | {
        s.get("class") for f in row["findings"] for s in f.get("also_seen", [])
    }
    row["status"] = status_of(first.get("expected_class"), classes, error=row["error"])
    row["hosts"] = {
        s.label: {
            "examples": r.get("examples", 0),
            "seconds": r.get("seconds", 0.0),
            "status": r.get("status"),
        }
        for s, r in parts
    }
    return row, hosts


def _with_copied_reproducers(source: Source, f: dict[str, Any], repro_dir: Path) -> dict[str, Any]:
    """A host's finding record with its reproducers copied into ``repro_dir`` (None: not
    found)."""

    def copied(path: str | None) -> str | None:
        src = _reproducer_of(source, path)
        return None if src is None else str(_copy(src, repro_dir))

    out = {**f, "reproducer": copied(f.get("reproducer"))}
    if isinstance(f.get("reproducers"), list):
        out["reproducers"] = [copied(p) for p in f["reproducers"]]
    if isinstance(f.get("also_seen"), list):  # the ways its bug was also seen, each reproducer
        out["also_seen"] = [
            {**s, "reproducer": copied(s.get("reproducer"))}
            for s in f["also_seen"]
            if isinstance(s, dict)
        ]
    return out


def _fixed_by_hosts(sources: list[Source]) -> set[str]:
    """Signatures a host's own triage replayed and found to pass."""
    return {
        str(f["signature"])
        for s in sources
        for f in (s.data.get("triage") or {}).get("fixed", [])
        if isinstance(f, dict) and f.get("signature")
    }


def merge(folders: Sequence[str], out: Path, *, argv: Sequence[str] = ()) -> dict[str, Any]:
    """Merges the campaign folders ``folders`` into ``out`` (see the module docstring); returns
    the merged report. The caller holds ``out``'s lock."""
    sources, notes = read_sources(folders, out)
    repro_dir = out / "reproducers"
    previous, problem = report_files.read_previous(out / "report.json")
    if problem is not None:
        notes.append(problem)
    report_files.archive_previous(out)
    by_pair: dict[tuple[str, str], list[tuple[Source, dict[str, Any]]]] = {}
    for s in sources:
        for r in s.data["results"]:
            if isinstance(r, dict) and "target" in r and "backend" in r:
                by_pair.setdefault((r["target"], r["backend"]), []).append((s, r))
    rows: list[dict[str, Any]] = []
    hosts_of: dict[str, set[str]] = {}
    for key in sorted(by_pair):
        row, hosts = _merged_row(key, by_pair[key], repro_dir)
        rows.append(row)
        for sig, hs in hosts.items():
            hosts_of.setdefault(sig, set()).update(hs)
    # What the hosts report failing now: their own findings, and those of their previous reports
    # their triage replayed and found still failing (in no row: not seen while fuzzing).
    current: dict[str, dict[str, Any]] = {}
    for s in sources:
        for f in s.data.get("findings", []):
            sig = f["signature"]
            hosts_of.setdefault(sig, set()).add(s.label)
            if sig not in current:
                current[sig] = _with_copied_reproducers(s, f, repro_dir)
    verdicts = _verdicts(previous, current, hosts_of, _fixed_by_hosts(sources))
    starts = [_started(s.data) for s in sources]
    # Why the merged report is not complete: each host that had not ended (an interrupted one,
    # one still running, one killed before its final report), never "running" for the merge.
    interrupted = [f"{s.label}: {s.state}" for s in sources if s.state is not None]
    record = report.CampaignRecord(
        started_wall=min((t for t in starts if t is not None), default=time.time()),
        budget=sum(float(s.data.get("budget") or 0.0) for s in sources),
        profile="+".join(sorted({str(s.data.get("profile")) for s in sources})),
        argv=list(argv),
        seed=0,
        example_timeout=max(float(s.data.get("example_timeout") or 0.0) for s in sources),
        db=None,
        db_shared=[],
        db_problems=[
            f"{s.label}: {p}"
            for s in sources
            for p in (s.data.get("database") or {}).get("problems", [])
        ],
        workers=[
            {**w, "host": s.label}
            for s in sources
            for w in s.data.get("workers", [])
            if isinstance(w, dict)
        ],
        worker_restarts=sum(int(s.data.get("worker_restarts") or 0) for s in sources),
        rows=rows,
        previous=previous,
        triage_results=verdicts,
        interrupted="; ".join(interrupted) or None,
        errors=[f"{s.label}: {e}" for s in sources for e in s.data.get("errors", [])],
        notes=[*notes, *(f"{s.label}: {n}" for s in sources for n in s.data.get("notes", []))],
    )
    data = report.campaign_report(record, final=True)
    # Findings a host replayed as still failing that neither a row nor the previous merged
    # report holds: new to this summary.
    present = {f.get("signature") for f in data["findings"]}
    extra = [{**f, "triage": "new"} for sig, f in current.items() if sig not in present]
    if extra:
        data["findings"] = report.ordered_findings([*data["findings"], *extra], rows)
        data["summary"] = report.summary_of(
            data["results"], data["findings"], data["triage"]["fixed"], data["errors"]
        )
    data["complete"] = data["complete"] and all(s.data.get("complete") for s in sources)
    data["seconds"] = max(float(s.data.get("seconds") or 0.0) for s in sources)
    data["device"] = ", ".join(f"{s.label}: {s.data.get('device')}" for s in sources)
    data["host"] = None
    data["merged"] = {
        "hosts": [
            {
                "host": s.label,
                "folder": str(s.folder),
                "started": s.data.get("started"),
                "device": s.data.get("device"),
                "examples": (s.data.get("summary") or {}).get("examples", 0),
                "complete": bool(s.data.get("complete")),
                "interrupted": s.state,  # why not complete (the hosts table's state)
                "state": s.state,
            }
            for s in sources
        ]
    }
    for f in data["findings"]:
        f["hosts"] = sorted(hosts_of.get(f.get("signature"), ()))
    report_files.write_json(out / "report.json", data)
    for _, write in report_html.writers(out, data):
        write()
    return data


def _verdicts(
    previous: dict[str, Any] | None,
    current: dict[str, dict[str, Any]],
    hosts_of: dict[str, set[str]],
    fixed: set[str],
) -> dict[str, dict[str, Any]]:
    """Each previous finding's verdict (by its reproducer): still failing where a host reports
    it (``current``: its signature, or one bug with it); fixed where a host's triage replayed it
    and it passed (``fixed``); else not re-checked (merging runs no kernel)."""
    verdicts: dict[str, dict[str, Any]] = {}
    for f in (previous or {}).get("findings", []):
        now = report.same_bug_in(f, current.values())
        if now is not None:
            on = ", ".join(sorted(hosts_of[now["signature"]]))
            verdict = {"status": "fail", "verdict": f"reported failing by {on}"}
        elif f.get("signature") in fixed:
            verdict = {"status": "pass", "verdict": "a host's replay of it passes now"}
        else:
            verdict = {"status": "error", "verdict": "no host found it or re-checked it"}
        verdicts[f.get("reproducer") or ""] = verdict
    return verdicts


def _started(data: dict[str, Any]) -> float | None:
    try:
        return time.mktime(time.strptime(str(data.get("started")), "%Y-%m-%dT%H:%M:%S%z"))
    except (ValueError, OverflowError):
        return None
