"""``fuzz.influence.revalued``: the inputs a shrink left at one value, drawn again for the
influence evidence (``fuzz.duplicates.Duplicates.anomalies``); ``fuzz.influence.finite``: the
non-finite inputs made finite, and ``fuzz.influence.tamed``: the inputs scaled down, for the
duplicate check's ``fails_as``."""

from __future__ import annotations

import numpy as np

from fuzz.arrays import cast
from fuzz.case import Case
from fuzz.influence import finite, revalued, tamed


def _case(**inputs):
    return Case(inputs, {"dtype": "float32"})


def test_only_inputs_of_one_finite_value_are_drawn_again_their_masks_kept():
    q = np.zeros((1, 1, 2, 2), np.float32)
    k = np.array([3.0, 3.0, -np.inf, 3.0], np.float32)  # one finite value, a mask written as -inf
    v = np.array([1.0, 2.0], np.float32)  # values of its own: kept
    lens = np.array([0, 2], np.int32)  # not floating: kept
    got = revalued(_case(q=q, k=k, v=v, lens=lens))
    assert got is not None
    assert np.unique(got.inputs["q"]).size == 4 and got.inputs["q"].dtype == np.float32
    assert np.isneginf(got.inputs["k"][2]) and np.unique(got.inputs["k"][[0, 1, 3]]).size == 3
    assert got.inputs["v"] is v and got.inputs["lens"] is lens
    again = revalued(_case(q=q, k=k, v=v, lens=lens))
    assert all(np.array_equal(again.inputs[n], got.inputs[n]) for n in got.inputs)  # seeded


def test_a_case_whose_inputs_all_vary_or_are_not_finite_has_nothing_to_draw():
    assert revalued(_case(v=np.array([1.0, 2.0], np.float32))) is None
    assert revalued(_case(k=np.full(3, -np.inf, np.float32))) is None
    assert revalued(_case(e=np.zeros(0, np.float32))) is None


def test_non_finite_inputs_are_made_finite_past_their_inputs_largest_magnitude():
    x = np.array([[-np.inf, 0.5, -3.0, np.inf, np.nan]], np.float32)
    lens = np.array([0, 5], np.int32)
    got = finite(_case(x=x, lens=lens, v=np.ones(2, np.float32)))
    assert got is not None and got.inputs["x"].dtype == np.float32
    assert got.inputs["x"].tolist() == [[-19.0, 0.5, -3.0, 19.0, 0.0]]
    assert got.inputs["lens"] is lens and np.array_equal(got.inputs["v"], np.ones(2))
    half = cast(np.array([-np.inf, 1.0, 2.0]), "bfloat16")
    made = finite(_case(k=half)).inputs["k"]
    assert made.dtype == half.dtype and made.astype(np.float64).tolist() == [-18.0, 1.0, 2.0]
    only = finite(_case(k=np.full(3, -np.inf, np.float32))).inputs["k"]
    assert only.tolist() == [-16.0] * 3


def test_a_case_with_finite_inputs_has_nothing_to_make_finite():
    assert finite(_case(v=np.array([1.0, 2.0], np.float32), n=np.array([1], np.int32))) is None
    assert finite(_case(e=np.zeros(0, np.float32))) is None


def test_taming_scales_the_finite_floating_inputs_and_keeps_masks():
    x = np.array([[-np.inf, 0.5, -3.0, 0.0]], np.float32)
    g = cast(np.array([-6.0]), "bfloat16")
    lens = np.array([0, 4], np.int32)
    got = tamed(_case(x=x, g=g, lens=lens), 0.25)
    assert got.inputs["x"].tolist() == [[-np.inf, 0.125, -0.75, 0.0]]
    assert got.inputs["g"].dtype == g.dtype and float(got.inputs["g"][0]) == -1.5
    assert got.inputs["lens"] is lens
    assert tamed(_case(z=np.zeros(3, np.float32), m=np.full(2, -np.inf, np.float32)), 0.5) is None
