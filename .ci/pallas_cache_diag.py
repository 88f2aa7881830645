"""Why fuzzing workers miss JAX's persistent cache where a compile worker compiled: a short
campaign of Pallas pairs with every persistent-cache hit logged (``JAX_LOG_COMPILES=1``), every
compiled miss with its key (``JAX_EXPLAIN_CACHE_MISSES=1``) and every compile refused at the
cache's miss with its key (``KERNEL_FUZZ_LOG_REFUSED_KEYS=1``); then, per module, how many
refused keys some process compiled (the same key: its entry was not there when looked up, or
not written) and the programs each process lowered.

    JAX_LOG_COMPILES=1 JAX_EXPLAIN_CACHE_MISSES=1 KERNEL_FUZZ_LOG_REFUSED_KEYS=1 \
        python -m fuzz run --profile gpu --targets T --backends pallas-gpu \
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
# Keys: compiled (a miss JAX compiled and wrote) and refused (a miss the harness refused).
key_pat = re.compile(
    r"(PERSISTENT COMPILATION CACHE MISS for|refused at the persistent cache's miss: module) "
    r"'([^']+)'(?: with)? key '([^']+)'"
)
compiled_keys: dict[str, set[str]] = collections.defaultdict(set)
refused_keys: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
for log in sorted((out / "workers").glob("*.log")):
    for line in log.read_text(errors="replace").splitlines():
        m = key_pat.search(line)
        if m and m.group(1).startswith("PERSISTENT"):
            compiled_keys[m.group(2)].add(m.group(3))
        elif m:
            refused_keys[m.group(2)][m.group(3)] += 1
for module in sorted(set(compiled_keys) | set(refused_keys)):
    refused = refused_keys[module]
    same = sum(n for k, n in refused.items() if k in compiled_keys[module])
    print(
        f"== keys of {module}: {len(compiled_keys[module])} compiled; refused "
        f"{sum(refused.values())} lookups of {len(refused)} keys, {same} of them with a key "
        "some process compiled"
    )
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
