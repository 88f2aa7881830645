"""Why fuzzing workers miss JAX's persistent cache where a compile worker compiled: a short
campaign of Pallas pairs with ``JAX_LOG_COMPILES=1`` (every persistent-cache hit and miss is
logged with its key), then, per module, the keys each process looked up or wrote.

    JAX_LOG_COMPILES=1 python -m fuzz run --profile gpu --targets T --backends pallas-gpu \\
        --budget 90 --workers 2 --compile-workers 1 --seed 1 --out OUT
    python .ci/pallas_cache_diag.py OUT
"""

import collections
import json
import re
import sys
from pathlib import Path

out = Path(sys.argv[1])
pat = re.compile(r"Persistent compilation cache (hit|miss) for '([^']+)' with key '?([^' ]+)")
seen: dict[str, dict[str, collections.Counter]] = collections.defaultdict(
    lambda: collections.defaultdict(collections.Counter)
)
other = collections.Counter()
for log in sorted((out / "workers").glob("*.log")):
    for line in log.read_text(errors="replace").splitlines():
        m = pat.search(line)
        if m:
            seen[m.group(2)][log.stem][f"{m.group(1)} {m.group(3)[-12:]}"] += 1
        elif "Not writing persistent cache" in line or "cache is disabled" in line:
            other[line.strip()[:200]] += 1
# The programs each process lowered (a lowering is a lookup in the persistent cache): how many
# of a fuzzing worker's the others lowered too (so wrote to the cache, where they compiled).
comp = re.compile(r"Compiling (jit\([^)]*\)) with global shapes and types (.*)")
lowered: dict[str, dict[str, set[str]]] = collections.defaultdict(
    lambda: collections.defaultdict(set)
)
for log in sorted((out / "workers").glob("*.log")):
    for line in log.read_text(errors="replace").splitlines():
        m = comp.search(line)
        if m:
            lowered[m.group(1)][log.stem].add(m.group(2)[:600])
for fn, by_proc in sorted(lowered.items()):
    print(f"== lowered {fn}")
    for proc, sigs in sorted(by_proc.items()):
        others = set().union(*(v for k, v in by_proc.items() if k != proc))
        print(f"   {proc}: {len(sigs)} programs, {len(sigs & others)} also lowered elsewhere")
for module, by_proc in sorted(seen.items()):
    print(f"== {module}")
    for proc, keys in sorted(by_proc.items()):
        print(f"   {proc}: {dict(keys.most_common(6))}")
for line, n in other.most_common(10):
    print(f"{n:5} {line}")
report = json.loads((out / "report.json").read_text())
for r in report["results"]:
    ev = r["events"]
    print(
        f"{r['target']} on {r['backend']}: {r['examples']} examples, refused "
        f"{ev.get('rejected: would compile', 0)}, compiles {r['compiles']}, loads "
        f"{r['cache_loads']}, precompiles {r['precompiles']}, warm {r['warm_seconds']:.0f}s"
    )
    print("   ", {k: v for k, v in ev.items() if k.startswith("structures")})
