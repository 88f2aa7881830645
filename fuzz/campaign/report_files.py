"""The campaign report's files: reading a report.json (the previous campaign's, a merged host's)
tolerantly, writing JSON atomically, and moving the previous campaign's reports to ``history/``
(``fuzz.campaign.report`` builds what is written)."""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

from fuzz.files import atomic_write_text

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
