"""Plugin softmax kernels in plain torch whose bugs depend on the half-precision input dtype, for
telling one bug of both half dtypes from two bugs, one of each (``fuzz.duplicates``):

* ``half_one_bug_softmax``: one bug of every half-precision input (float16 or bfloat16): its
  normaliser is rounded to the input dtype and then scaled by 1 + 2^-5, as a kernel that folds
  a wrong constant into a half-precision reciprocal would. Shrinking moves a dtype toward
  float32 only, so this one bug met through float16 and through bfloat16 is two minimal examples
  apart by their dtype: one row each.
* ``half_two_bugs_softmax``: two independent bugs of one key: float16 outputs times 1.01 (any
  float16 row), and bfloat16 rows of odd length >= 3 times 0.97: two rows.
"""

from __future__ import annotations

import torch

import fuzz

HALF = (torch.float16, torch.bfloat16)


def _softmax(x: torch.Tensor, scale: float | None) -> torch.Tensor:
    s = x.double() * (1.0 if scale is None else float(scale))
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def half_one_bug_softmax(x, *, scale):
    y = _softmax(x, scale)
    if x.dtype in HALF:  # planted: a wrong constant in the half-precision normaliser
        y = y * (1.0 + 2.0**-5)
    return y.to(x.dtype)


def half_two_bugs_softmax(x, *, scale):
    y = _softmax(x, scale)
    n = x.shape[-1]
    if x.dtype == torch.float16:  # planted: every float16 output times 1.01
        y = y * 1.01
    if x.dtype == torch.bfloat16 and n % 2 == 1 and n >= 3:  # planted: odd bf16 rows x 0.97
        y = y * 0.97
    return y.to(x.dtype)


CAPS = fuzz.Capabilities(dtypes=("float32", "float16", "bfloat16"), features={"scale"})

fuzz.fuzz_kernel(
    "half_one_bug_softmax",
    family="softmax",
    kernel=half_one_bug_softmax,
    capabilities=CAPS,
    conventions=fuzz.Conventions(empty_rows="nan"),  # (torch's: a row of no finite logit)
    description="a torch softmax with one bug of every half-precision input",
)
fuzz.fuzz_kernel(
    "half_two_bugs_softmax",
    family="softmax",
    kernel=half_two_bugs_softmax,
    capabilities=CAPS,
    conventions=fuzz.Conventions(empty_rows="nan"),
    description="a torch softmax with a float16 bug and, apart, a bfloat16 odd-row bug",
)
