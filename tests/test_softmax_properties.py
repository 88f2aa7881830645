"""The softmax family's own properties and tolerances: each must be able to fail.

A small broken kernel (one planted bug, as a text edit of the real kernel) makes the property
report on a case where the real kernel and its correct reformulations pass it. The properties are
called directly, so each is shown to fail on its own.
"""

import numpy as np
import pytest

from fuzz import failures as F
from fuzz.backends import get_backend
from fuzz.case import Case
from fuzz.kit import variant
from fuzz.properties import Context
from fuzz.target import get
from fuzz.targets import softmax as S
from kernels._mutate import Edit, mutate
from kernels.softmax import triton as ktriton

BACKEND = get_backend("triton-interpret")
ROWS_SUM = next(p for p in S.PROPERTIES if p.name == "rows-sum-to-one")
SHIFT = next(p for p in S.PROPERTIES if p.name == "shift-invariance")


def target(module, name="softmax_test"):
    return variant(S.SOFTMAX, name, {"triton": module}, S.entry)


def case(x, dtype="float32", scale=None, block_n=16, **inputs):
    return Case(
        {"x": x.astype(dtype), **inputs},
        {"dtype": dtype, "scale": scale, "block_m": 4, "block_n": block_n},
    )


def check(prop, tgt, c, param=None):
    return prop.check(Context(tgt, BACKEND, c), param)


def test_rows_sum_to_one_catches_a_sum_that_misses_the_rescale():
    broken = mutate(
        ktriton,
        "test_sum_not_rescaled",
        [
            Edit(
                "l_i = l_i * tl.exp(m_i - m_shift) + tl.sum(",
                "l_i = l_i + tl.sum(",
            )
        ],
    )
    x = np.zeros((2, 40), np.float32)
    x[:, 35] = 0.5  # the max grows in the last tile: the first tiles' sum is not rescaled
    f = check(ROWS_SUM, target(broken), case(x))
    assert f is not None and f.cls == F.ACCURACY and f.prop == "rows-sum-to-one"
    for name in ("softmax", "softmax_exp2", "softmax_max_first"):
        assert check(ROWS_SUM, get(name), case(x)) is None


def test_shift_invariance_catches_a_clamped_logit():
    # Logits clamped from below at -30: right while every logit is above it, wrong once adding a
    # constant pushes some below.
    broken = mutate(
        ktriton,
        "test_clamped",
        [Edit("    s = x * scale\n", "    s = tl.maximum(x * scale, -30.0)\n")],
    )
    x = np.random.default_rng(0).standard_normal((2, 20)).astype(np.float32)
    f = check(SHIFT, target(broken), case(x), -64.0)
    assert f is not None and f.cls == F.ACCURACY and f.prop == "shift-invariance"
    assert check(SHIFT, target(ktriton), case(x), -64.0) is None


@pytest.mark.parametrize("name", ["softmax", "softmax_exp2", "softmax_max_first"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_shift_tolerance_covers_the_rounding_of_the_shifted_inputs(name, dtype):
    """x + 1000 rounds to the input dtype (fp16: to multiples of 0.5 near 1000): the shifted run is
    judged against the exact softmax of x with that rounding as a perturbation of each logit."""
    x = np.random.default_rng(1).standard_normal((3, 50)).astype(np.float32)
    c = case(x, dtype=dtype, scale=0.125)
    assert check(SHIFT, get(name), c, 1000.0) is None
    assert check(SHIFT, get(name), c, 0.5) is None


def test_the_issue_exp2_case_passes_on_both_interpreters():
    """FlashAttention's exp2 softmax, logits -1e4 + 3 N(0, 1) at scale 0.125, fp32: every property
    passes (the old ratio rule failed it 50x at every seed: tests/oracles/test_error_bounds.py)."""
    from fuzz.properties import check_case

    t = get("softmax_exp2")
    for backend in ("triton-interpret", "pallas-interpret"):
        for seed in range(3):
            x = (-1e4 + 3 * np.random.default_rng(seed).standard_normal((4, 100))).astype(
                np.float32
            )
            out = check_case(
                t,
                get_backend(backend),
                case(x, scale=0.125, block_n=32),
                params={"masked-poison": "nan", "shift-invariance": 64.0},
            )
            assert out.finding is None, out.finding
