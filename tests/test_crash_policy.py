"""One crash policy for every launch a property derives from a case: in every family, a derived
launch (a shifted, permuted, sliced, re-chunked or poisoned case, a sibling entry point, the other
language) that raises is a ``crash`` finding of that property, never silence."""

import dataclasses
import functools

import pytest
from hypothesis import find

from fuzz.backends import get_backend
from fuzz.properties import check_case
from fuzz.target import get

TARGETS = [
    "softmax",
    "jagged_softmax",
    "attention",
    "attention_decode",
    "simple_gla_fwd",
    "simple_gla_bwd",
]


def _raising_after(entry, clean_runs):
    """``entry``, raising from its ``clean_runs + 1``-th call on (the clean and the repeated run
    succeed; every launch a property derives after them raises)."""
    calls = [0]

    @functools.wraps(entry)
    def run(*args, **kwargs):
        calls[0] += 1
        if calls[0] > clean_runs:
            raise RuntimeError("planted: derived launches raise")
        return entry(*args, **kwargs)

    return run


@functools.cache
def _simplest(strategy):
    return find(strategy, lambda _: True)


@pytest.mark.parametrize("name", TARGETS)
def test_a_derived_launch_that_raises_is_a_crash_of_its_property(name):
    real = get(name)
    backend = get_backend("triton-interpret")
    target = dataclasses.replace(
        real, kernels={"triton": _raising_after(real.kernels["triton"], 2)}
    )
    case = real.baselines.randn(0, "small")
    # Minimal draws for the properties' parameters: sampled properties run, the differential off.
    out = check_case(target, backend, case, draw=lambda s, label: _simplest(s))
    f = out.finding
    assert f is not None, "a derived launch raised and nothing was reported"
    assert f.cls == "crash" and f.prop not in ("crash",), f.summary()
    assert "planted: derived launches raise" in f.message
