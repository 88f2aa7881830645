"""Metrics measure, the tolerance bounds; neither asserts."""

import math

import ml_dtypes
import numpy as np
import pytest

from fuzz.arrays import finfo, ulp_distance
from fuzz.compare import Tolerance, measure


def test_metrics_on_a_known_error():
    oracle = np.array([[1.0, 0.5], [0.25, 0.0]])
    kernel = np.array([[1.0, 0.5 + 2**-20], [0.25, 0.0]], np.float32)
    m = measure(kernel, oracle)
    assert m.max_abs == 2**-20
    assert m.worst.index == (0, 1)
    assert m.max_rel == pytest.approx(2**-19)
    assert m.max_ulp == 2**-20 / 2**-24  # ulp of 0.5 in fp32 is 2^-24
    assert m.nonfinite_where_finite == 0


def test_nonfinite_where_oracle_is_finite_is_counted_and_located():
    m = measure(np.array([1.0, np.nan, np.inf], np.float32), np.array([1.0, 2.0, 3.0]))
    assert m.nonfinite_where_finite == 2
    assert m.first_nonfinite.index == (1,)


def test_matching_infinities_are_not_errors():
    m = measure(np.array([-np.inf, 1.0], np.float32), np.array([-np.inf, 1.0]))
    assert m.special_mismatch == 0 and m.max_abs == 0
    m = measure(np.array([-1e9, 1.0], np.float32), np.array([-np.inf, 1.0]))
    assert m.special_mismatch == 1


def test_rmse_ratio_against_naive():
    oracle = np.linspace(0, 1, 16)
    naive = (oracle + 1e-3).astype(np.float32)
    kernel = (oracle + 2e-3).astype(np.float32)
    m = measure(kernel, oracle, naive)
    assert m.rmse_ratio == pytest.approx(2.0, rel=1e-3)
    assert m.naive_max_abs == pytest.approx(1e-3, rel=1e-3)


def test_ulp_distance_across_zero_and_in_bfloat16():
    a = np.array([-0.0, 1.0], np.float32)
    assert list(ulp_distance(a, np.array([0.0, 1.0]), "float32")) == [0, 0]
    b = np.array([1.0 + 2**-7], ml_dtypes.bfloat16)
    assert ulp_distance(b, np.array([1.0]), "bfloat16")[0] == 1


def test_tolerance_is_rho_times_naive_plus_floor():
    tol = Tolerance(rho=3.0, floor_ulps=2.0)
    oracle = np.array([0.5, 2.0])
    assert tol.bound(oracle, 1e-3, "float16") == pytest.approx(
        3e-3 + 2 * finfo("float16").eps * 2.0
    )
    assert tol.bound(oracle, 0.0, "float32") == pytest.approx(2 * 2**-23 * 2.0)


@pytest.mark.parametrize(
    "field, value", [("rho", -1.0), ("floor_ulps", math.inf), ("atol", math.nan)]
)
def test_tolerance_rejects_bad_parameters(field, value):
    with pytest.raises(ValueError, match=f"Tolerance.{field}"):
        Tolerance(**{field: value})


def test_measure_rejects_shape_mismatch():
    with pytest.raises(ValueError, match="shape"):
        measure(np.zeros(3, np.float32), np.zeros(4))
