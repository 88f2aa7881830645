"""A plugin softmax, in plain torch, whose illegal memory access is reported at a later call than
the one that made it, as CUDA reports one (asynchronously, at the next call that synchronizes):
for testing that a crash which lost a process's context is replayed alone before it is reported
as its example's (``fuzz.isolated``).

``late_crash_softmax``: rows of at least :data:`WIDE` columns come out 1.5x too large (a bug of
its own, ``accuracy``) and leave the "device" damaged; every later call of another row length in
the process then raises an illegal memory access, as a lost CUDA context does. A call of the
damaging length does not: the damage shows only at a call that differs. In a fresh process an
example raises nothing unless an earlier call of the process damaged it.
``late_crash_wide_softmax``: the same, but only wide rows meet the damage (a narrow row's call
runs): a wide example that crashed, replayed alone, fails as the accuracy bug instead.
"""

from __future__ import annotations

import torch

import fuzz

WIDE = 5
# The row lengths whose calls damaged this process (empty: a fresh process).
DAMAGED: set[int] = set()


def _softmax(x, scale, *, narrow_too: bool):
    n = x.shape[-1]
    if DAMAGED and n not in DAMAGED and (narrow_too or n >= WIDE):
        raise RuntimeError(
            "CUDA error: an illegal memory access was encountered (an earlier call's, reported "
            "late)"
        )
    s = x.double() * (1.0 if scale is None else float(scale))
    e = torch.exp(s - s.amax(-1, keepdim=True))
    y = e / e.sum(-1, keepdim=True)
    if n >= WIDE:  # planted: wide rows scaled wrong, and the damage done
        DAMAGED.add(n)
        y = y * 1.5
    return y.to(x.dtype)


def late_crash_softmax(x, *, scale):
    return _softmax(x, scale, narrow_too=True)


def late_crash_wide_softmax(x, *, scale):
    return _softmax(x, scale, narrow_too=False)


CAPS = fuzz.Capabilities(dtypes=("float32",), features={"scale"})
fuzz.fuzz_kernel(
    "late_crash_softmax",
    family="softmax",
    kernel=late_crash_softmax,
    capabilities=CAPS,
    conventions=fuzz.Conventions(empty_rows="nan"),
    description="a torch softmax whose wide rows are wrong and damage later calls of the process",
)
fuzz.fuzz_kernel(
    "late_crash_wide_softmax",
    family="softmax",
    kernel=late_crash_wide_softmax,
    capabilities=CAPS,
    conventions=fuzz.Conventions(empty_rows="nan"),
    description="as late_crash_softmax, but only later calls of wide rows meet the damage",
)
