"""Campaign reports: ``report.json``, written atomically after every target/backend run."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fuzz.engine import HuntResult

REPORT_VERSION = 1


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Writes ``text`` to ``path`` so that a reader sees the old or the new file, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def build(
    results: Iterable[HuntResult],
    *,
    profile: str,
    budget: float | None,
    started: float,
    argv: list[str] | None = None,
    complete: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from fuzz.backends import device_name
    from fuzz.reproducer import versions

    rows = [r.as_dict() for r in results]
    real = [r for r in rows if not r["mutant"]]
    mutants = [r for r in rows if r["mutant"]]
    return {
        "version": REPORT_VERSION,
        "complete": complete,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "seconds": round(time.time() - started, 3),
        "budget": budget,
        "profile": profile,
        "argv": argv or [],
        "versions": versions(),
        "device": device_name(),
        "summary": {
            "runs": len(rows),
            "examples": sum(r["examples"] for r in rows),
            "real_failed": sorted({r["target"] for r in real if r["status"] == "fail"}),
            "mutants_found": sum(1 for r in mutants if r["status"] == "found"),
            "mutants_total": len(mutants),
            "harness_errors": [
                f"{r['target']} on {r['backend']}: {r['error']}" for r in rows if r["error"]
            ],
        },
        "results": rows,
        **(extra or {}),
    }


def write(path: str | os.PathLike[str], report: dict[str, Any]) -> None:
    atomic_write_text(path, json.dumps(report, indent=2, default=str, allow_nan=True) + "\n")
