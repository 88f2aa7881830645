"""Per pair of one or more campaigns (report.json folders): examples checked, refused, fuzzing
and compile seconds, cache loads, the structures drawn. To set two campaigns side by side.

    python .ci/pair_rows.py OUT_A OUT_B ...
"""

import json
import sys
from pathlib import Path

for out in sys.argv[1:]:
    report = json.loads((Path(out) / "report.json").read_text())
    print(f"== {out}: {report['summary']['examples']} examples in {report['seconds']:.0f} s")
    for r in sorted(report["results"], key=lambda r: (r["target"], r["backend"])):
        ev = r["events"]
        drawn = {k.split()[1]: v for k, v in ev.items() if k.startswith("structures ")}
        print(
            f"  {r['target'][:34]:34} {r['backend']:10} checked {r['examples']:5} refused "
            f"{ev.get('rejected: would compile', 0):5} fuzz {r['fuzz_seconds']:6.1f}s compile "
            f"{r['compile_seconds']:5.1f}s loads {r['cache_loads']:3} warm {r['warm_seconds']:5.1f}s"
            + (f" drawn {drawn}" if drawn else "")
        )
