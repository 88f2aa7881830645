"""``fuzz.influence.revalued``: the inputs a shrink left at one value, drawn again for the
influence evidence (``fuzz.duplicates.Duplicates.anomalies``)."""

from __future__ import annotations

import numpy as np

from fuzz.case import Case
from fuzz.influence import revalued


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
