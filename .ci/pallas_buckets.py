"""The project's Pallas kernels, compiled: seconds and whether a launch compiled, at length 17 (its
buckets compile) and at 19 and 23 (the same buckets: nothing should compile). The CPU suite checks
the same launches interpreted (tests/kernels/test_pallas_buckets.py).

    python .ci/pallas_buckets.py
"""

import sys

sys.path.insert(0, ".")

from tests.kernels.test_pallas_buckets import LAUNCHES, new_lengths

bad = 0
for launch in LAUNCHES:
    rows = new_lengths(launch, interpret=False)
    bad += sum(compiled for _, _, compiled in rows[1:])
    cells = "  ".join(f"T={t}: {s:6.3f} s{' compiled' if c else ''}" for t, s, c in rows)
    print(f"{launch.__name__.lstrip('_'):8} {cells}", flush=True)
print(f"launches of a new length in a compiled bucket that compiled: {bad}")
sys.exit(1 if bad else 0)
