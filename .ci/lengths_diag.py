"""Per pair of a campaign's report.json: how its structures were drawn (reused, with fresh
lengths, refused), how many examples had a second key tile or chunk, and the events naming what a
reuse's new lengths compiled.

    python3 .ci/lengths_diag.py OUT/report.json
"""

from __future__ import annotations

import json
import sys


def main(path: str) -> None:
    report = json.load(open(path))
    for r in report["results"]:
        e = r.get("events", {})
        print(
            f"{r['target'][:44]:44} {r['backend']:10} ex {r['examples']:5} "
            f"fuzz {r.get('fuzz_seconds', 0):6.1f} c {r.get('compile_seconds', 0):5.1f} "
            f"reused {e.get('structures: reused', 0):4} "
            f"fresh-len {e.get('structures: reused with fresh lengths', 0):4} "
            f"refused {e.get('rejected: would compile', 0):4} "
            f"multi-kv {e.get('hazard multi-kv-tile', 0):4} "
            f"multi-chunk {e.get('hazard multi-chunk', 0):4}"
        )
        for k, n in sorted(e.items()):
            if k.startswith("lengths ") or k.startswith("spared: backend"):
                print(f"    {n:5}  {k}")


if __name__ == "__main__":
    main(sys.argv[1])
