"""Two optional parts of a Target: ``error_bound`` (a per-element allowance that replaces the
ratio rule) and ``Search.targeting`` (whether the oracle comparison feeds ``hypothesis.target``)."""

import dataclasses

import hypothesis
import numpy as np
import pytest

from fuzz.backends import get_backend
from fuzz.case import Case
from fuzz.engine import hunt
from fuzz.properties import Context, check_case
from fuzz.target import Search, get


def _case():
    x = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    return Case({"x": x}, {"dtype": "float32"})


def test_error_bound_is_checked_element_by_element(fake_plugin):
    """An analytic per-element bound replaces the ratio rule: an error is judged against the
    bound of its own element, not the largest one."""
    buggy = get("fake_double_accuracy")  # y[:, 1] is 1% off
    backend = get_backend("fake")
    case = _case()
    got = Context(buggy, backend, case).clean.outputs["y"].astype(np.float64)
    err = np.abs(got - 2 * case.inputs["x"])
    # a huge bound where the kernel is exact, half the error where it is not
    loose_elsewhere = np.where(err > 0, 0.5 * err, 1e6)
    bounded = dataclasses.replace(buggy, error_bound=lambda case, device: {"y": loose_elsewhere})
    ctx = Context(bounded, backend, case)
    assert np.array_equal(ctx.bound("y"), loose_elsewhere)
    f = check_case(bounded, backend, case, params={"masked-poison": "nan"}).finding
    assert f is not None and f.cls == "accuracy" and f.index[1] == 1
    assert f.tolerance == pytest.approx(float(loose_elsewhere[f.index]))
    generous = dataclasses.replace(buggy, error_bound=lambda case, device: {"y": 2 * err})
    assert check_case(generous, backend, case, params={"masked-poison": "nan"}).finding is None


def test_targeting_off_never_calls_hypothesis_target(fake_plugin, fake_profile, monkeypatch):
    calls = []
    monkeypatch.setattr(hypothesis, "target", lambda score, label="": calls.append(label) or score)
    real = get("fake_double")
    hunt(real, "fake", fake_profile, max_examples=5)
    assert calls, "targeting on (the default): the oracle comparison reports its score"
    calls.clear()
    hunt(
        dataclasses.replace(real, search=Search(targeting=False)),
        "fake",
        fake_profile,
        max_examples=5,
    )
    assert calls == []


def test_the_records_beside_the_contract_are_checked_when_a_target_is_made(fake_plugin):
    """``library``, ``search``, ``baselines`` and ``mutant`` take their own records: anything else
    is a clear error naming the field, as is a mutant's unknown class."""
    from fuzz.target import Library, MutantOf

    real = get("fake_double")
    with pytest.raises(TypeError, match=r"search must be a fuzz.target.Search, got dict"):
        dataclasses.replace(real, search={"targeting": False})
    with pytest.raises(TypeError, match=r"mutant must be a fuzz.target.MutantOf, got str"):
        dataclasses.replace(real, mutant="fake_double")
    with pytest.raises(ValueError, match=r"expected_class='wrong' is not one of"):
        MutantOf("fake_double", "wrong")
    declared = dataclasses.replace(real, library=Library(backends=("nowhere",)))
    assert declared.library.backends == ("nowhere",) and not declared.is_mutant
    mutant = dataclasses.replace(real, mutant=MutantOf("fake_double", "nan", shrink_bound=3))
    assert (mutant.mutant_of, mutant.expected_class, mutant.shrink_limit(_case())) == (
        "fake_double",
        "nan",
        3,
    )
