"""What a campaign says about the harness itself (issue "no harness fault reaches a report").

Reads a campaign folder's ``report.json`` and its console log and prints: harness errors (each with
the last line of its traceback), worker restarts and notes of slices killed or overrunning their
limit, ``crash`` rows whose message points into the harness's own code, Hypothesis's own warnings
on the console, and the rows over 4,096 elements (each with its class, target and backend).

    python .ci/faults_summary.py OUT [CONSOLE_LOG]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

LARGE = 4096
KILLED = re.compile(r"overran|killed|restarted|hard limit|too slow", re.I)
HYPOTHESIS = re.compile(
    r"PLEASE REPORT THIS|exited early because|@seed\(|Hypothesis has spent", re.I
)
HARNESS = re.compile(
    r"fuzz[/.](arrays|engine|properties|campaign|backends|shrink|narrowing)|NewCompile"
)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    out = Path(argv[0])
    path = out / "report.json" if out.is_dir() else out
    if not path.is_file():
        print(f"{path}: no report.json")
        return 2
    r = json.loads(path.read_text())
    rows, findings = r["results"], r["findings"]
    errors = r["summary"].get("harness_errors", [])
    print(
        f"{r['summary']['examples']} examples, {len(rows)} pairs, {len(findings)} rows, "
        f"complete={r['complete']}, worker restarts={r.get('worker_restarts')}"
    )
    print(f"harness errors: {len(errors)}")
    for e in errors:
        print(f"  {e[:300]}")
    for row in rows:
        if row.get("error_trace"):
            last = [x for x in row["error_trace"].splitlines() if x.strip()][-3:]
            print(f"  trace of {row['target']} on {row['backend']}: " + " | ".join(last)[:400])
    killed = [n for n in r.get("notes", []) if KILLED.search(n)]
    print(f"notes of killed or overrunning slices: {len(killed)}")
    for n in killed:
        print(f"  {n[:300]}")
    harness_crashes = [
        f for f in findings if f["class"] == "crash" and HARNESS.search(json.dumps(f))
    ]
    print(f"crash rows that name the harness's code: {len(harness_crashes)}")
    for f in harness_crashes:
        print(f"  {f['target']} on {f['backend']}: {str(f.get('message', ''))[:200]}")
    if len(argv) > 1 and Path(argv[1]).is_file():
        text = Path(argv[1]).read_text(errors="replace")
        print(f"Hypothesis's own warnings on the console: {len(HYPOTHESIS.findall(text))}")
    large = sorted(
        (f for f in findings if f.get("case_size", 0) > LARGE), key=lambda f: -f["case_size"]
    )
    sizes = sorted(f.get("case_size", 0) for f in findings)
    median = sizes[len(sizes) // 2] if sizes else 0
    print(f"rows: {len(findings)}, median {median} elements, over {LARGE}: {len(large)}")
    # A row whose bug the interpreted twin reproduced smaller carries that reproducer too (a case
    # the compiled backend did not confirm): the smallest reproducer a maintainer can run.
    smallest = sorted(min(f.get("case_size", 0), _twin_size(f)) for f in findings)
    over = sum(1 for n in smallest if n > LARGE)
    median = smallest[len(smallest) // 2] if smallest else 0
    print(
        f"smallest reproducer per row (the twin's where smaller): median {median}, over {LARGE}: {over}"
    )
    for f in large:
        twin = _twin_size(f)
        print(
            f"  {f['case_size']:8} {f['class']:15} {f['target']} on {f['backend']} "
            f"shrunk={f.get('shrunk')} {str(f.get('shrink_path') or '')[:60]}"
            + (f" (twin: {twin})" if twin < f["case_size"] else "")
        )
    return 0


def _twin_size(f) -> float:
    small = f.get("interpreter_minimal") or {}
    return small.get("case_size") or float("inf")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
