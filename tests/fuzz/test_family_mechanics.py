"""What every family's properties share (``fuzz.properties``, ``fuzz.kit``): the per-example memo,
derived launches shared under the one crash policy, the comparison of two runs and the per-case
cache."""

import dataclasses
import gc
import os
import weakref

import numpy as np
import pytest

from fuzz.backends import get_backend
from fuzz.case import Case
from fuzz.kit import per_case
from fuzz.properties import Context, compare_runs, runs_agree
from fuzz.target import get


def _case():
    x = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    return Case({"x": x}, {"dtype": "float32"})


def _counting(target):
    calls = []
    entry = target.kernels["fake"]

    def run(*args, **kwargs):
        calls.append(1)
        return entry(*args, **kwargs)

    return dataclasses.replace(target, kernels={"fake": run}), calls


def test_memo_computes_once_per_context(fake_plugin):
    ctx = Context(get("fake_double"), get_backend("fake"), _case())
    calls = []
    assert ctx.memo(("test", 1), lambda: calls.append(1) or 5) == 5
    assert ctx.memo(("test", 1), lambda: calls.append(1) or 6) == 5
    assert ctx.memo(("test", 2), lambda: 7) == 7 and len(calls) == 1


def test_a_shared_derived_launch_runs_once_and_crashes_per_property(fake_plugin):
    target, calls = _counting(get("fake_double_crash"))  # raises for more than 3 columns
    ctx = Context(target, get_backend("fake"), _case())
    first = ctx.derived(ctx.case, prop="prop-a", what="the shared run", share=("test", "run"))
    second = ctx.derived(ctx.case, prop="prop-b", what="the shared run", share=("test", "run"))
    assert len(calls) == 1
    assert first.cls == second.cls == "crash"
    assert (first.prop, second.prop) == ("prop-a", "prop-b")
    assert "the shared run: RuntimeError: kernel fault" in second.message
    ctx.derived(ctx.case, prop="prop-a", what="not shared")
    assert len(calls) == 2


def test_compare_runs_bit_for_bit():
    a = np.array([1.0, -0.0, np.nan, 3.0], np.float32)
    assert compare_runs(a, a.copy()) is None
    payload = a.copy()
    payload.view(np.uint32)[2] |= 1  # another NaN
    assert compare_runs(payload, a) is None
    zero = a.copy()
    zero[1] = 0.0
    d = compare_runs(zero, a)
    assert d is not None and d.index == (1,) and d.count == 1 and not d.appeared
    both = zero.copy()
    both[3] = np.inf
    d = compare_runs(both, a)  # a NaN or Inf that appears is the element reported
    assert d is not None and d.index == (3,) and d.count == 2 and d.appeared


def test_compare_runs_within_a_tolerance():
    want = np.array([[1.0, 2.0], [3.0, np.inf]])
    got = np.array([[1.05, 2.5], [3.0, np.inf]])
    assert compare_runs(got, want, 0.5) is None
    d = compare_runs(got, want, np.array([0.1, 0.1]))
    assert d is not None and d.index == (0, 1) and d.count == 1
    assert d.difference == pytest.approx(0.5) and d.tolerance == pytest.approx(0.1)
    assert compare_runs(np.array([np.nan]), np.array([np.inf]), np.inf) is None
    d = compare_runs(np.array([np.nan, 9.0]), np.array([1.0, 1.0]), np.inf)
    assert d is not None and d.appeared and d.index == (0,)


def test_runs_agree_classes_what_appeared_and_maps_the_index(fake_plugin):
    ctx = Context(get("fake_double"), get_backend("fake"), _case())
    clean = ctx.clean.outputs["y"]
    got = clean[1:].copy()
    assert runs_agree(ctx, "p", "row 1 alone", "y", got, clean[1:], 0.0, "masking") is None
    got[0, 2] += 1
    f = runs_agree(
        ctx,
        "p",
        "row 1 alone",
        "y",
        got,
        clean[1:],
        0.5,
        "masking",
        where=lambda i: (1 + i[0], i[1]),
        extra=3,
    )
    assert f is not None and f.cls == "masking" and f.index == (1, 2)
    assert f.oracle_value == ctx.oracle["y"][1, 2] and f.details["extra"] == 3
    assert f.message.startswith("row 1 alone: y[1, 2] = ")
    got[0, 0] = np.nan
    f = runs_agree(ctx, "p", "row 1 alone", "y", got, clean[1:], 0.5, "masking")
    assert f is not None and f.cls == "nan" and f.index == (0, 0)


def test_per_case_computes_once_per_case_and_arguments_while_the_case_lives():
    calls = []

    @per_case
    def work(case, device="cpu", *, chunk=None):
        calls.append((device, chunk))
        return [device, chunk]

    case = _case()
    assert work(case) is work(case, "cpu") is work(case, device="cpu", chunk=None)
    assert work(case, chunk=16) is not work(case)
    assert len(calls) == 2
    other = _case()
    work(other)
    assert len(calls) == 3
    alive = weakref.ref(other)
    del other
    gc.collect()
    assert alive() is None  # the cache does not keep a case alive


@pytest.mark.parametrize("family", ["softmax", "jagged_softmax", "attention", "simple_gla"])
def test_every_family_module_has_the_skeleton_sections_in_order(family):
    import re

    from fuzz import kit

    path = os.path.join(os.path.dirname(kit.__file__), "targets", f"{family}.py")
    with open(path) as f:
        found = [m.group(1) for m in re.finditer(r"^# (.+?) -{5,}$", f.read(), re.MULTILINE)]
    assert tuple(found) == kit.SECTIONS


def test_a_mutant_registered_for_a_target_must_rewrite_its_kernels():
    from fuzz import kit
    from fuzz.targets import softmax as S
    from kernels._mutate import Expect, Mutant, rewrites_of

    (wrong,) = rewrites_of(
        "kernels.jagged_softmax.{impl}",
        Mutant("x", "y", {"softmax": Expect("nan", 2)}, triton=(), pallas=None),
    )
    with pytest.raises(ValueError, match=r"mutant x rewrites 'kernels\.jagged_softmax"):
        kit.register_mutants(S.SOFTMAX, S.KERNELS, S.entry, [wrong])
