"""Strategy factories: a table of invalid arguments, and shrink targets."""

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from strategies import (
    MaskRecipe,
    ValueRecipe,
    boundary_values,
    build_mask,
    few,
    float_dtypes,
    mask_recipes,
    materialize,
    sizes,
    softmax_cases,
    tiled_sizes,
    value_recipes,
)
from strategies.shapes import FEW_SPAN


@pytest.mark.parametrize(
    "factory, kwargs, message",
    [
        (sizes, {"max_size": 0, "min_size": 3}, "min_size=3 is larger than max_size=0"),
        (sizes, {"max_size": -1}, "max_size=-1 must be >= 0"),
        (sizes, {"max_size": 2.5}, "max_size=2.5 must be an int"),
        (sizes, {"max_size": 10, "blocks": (0,)}, "blocks[...]=0 must be >= 1"),
        (tiled_sizes, {"block": 0, "max_size": 10}, "block=0 must be >= 1"),
        (
            tiled_sizes,
            {"block": 16, "max_size": 4, "min_size": 5},
            "min_size=5 is larger than max_size=4",
        ),
        (value_recipes, {"numel": -1}, "numel=-1 must be >= 0"),
        (
            value_recipes,
            {"numel": 4, "distributions": ("gauss",)},
            "distributions contains ['gauss']",
        ),
        (value_recipes, {"numel": 4, "specials": ()}, "specials must not be empty"),
        (float_dtypes, {"allowed": ("float64",)}, "allowed contains ['float64']"),
        (mask_recipes, {"kinds": ("triangle",)}, "kinds contains ['triangle']"),
        (softmax_cases, {"scale": "huge"}, "scale='huge' must be one of ('small', 'large')"),
        (softmax_cases, {"dtypes": "float32"}, "dtypes='float32' must be a sequence"),
    ],
)
def test_invalid_arguments_name_the_argument(factory, kwargs, message):
    with pytest.raises(InvalidArgument) as info:
        factory(**kwargs).example() if factory is not tiled_sizes else factory(**kwargs)
    assert message in str(info.value)


def test_boundary_values_hit_pow2_and_block_edges():
    vals = boundary_values(300, blocks=(16,))
    for v in (
        1,
        2,
        3,
        15,
        16,
        17,
        31,
        32,
        33,
        47,
        48,
        49,
        63,
        64,
        65,
        127,
        128,
        129,
        255,
        256,
        257,
    ):
        assert v in vals
    assert max(vals) <= 300


@settings(max_examples=200)
@given(st.data())
def test_sizes_stay_in_bounds(data):
    lo = data.draw(st.integers(0, 5))
    hi = data.draw(st.integers(lo, 400))
    n = data.draw(sizes(min_size=lo, max_size=hi, blocks=(16,)))
    assert lo <= n <= hi


def test_sizes_shrink_to_min():
    assert find(sizes(max_size=1000, min_size=1), lambda n: True) == 1
    assert find(sizes(max_size=1000, min_size=1), lambda n: n > 100) == 101


@settings(max_examples=200)
@given(st.data())
def test_few_stays_in_bounds(data):
    lo = data.draw(st.integers(0, 5))
    hi = data.draw(st.integers(lo, 5000))
    assert lo <= data.draw(few(lo, hi)) <= hi


def test_few_shrinks_to_lo_and_to_the_least_failing_value():
    assert find(few(3, 1000), lambda n: True) == 3
    assert find(few(0, 1000), lambda n: n >= 700) == 700


def test_few_draws_small_values_mostly_and_the_top_sometimes():
    seen = []

    @settings(max_examples=400, database=None)
    @given(few(0, 1000))
    def collect(n):
        seen.append(n)

    collect()
    # Log-uniform over nested ranges: a uniform draw would have a median near 500.
    assert np.median(seen) < 100
    assert max(seen) > 500
    # Narrow ranges are plain uniform draws (what the CPU profiles' small shapes use).
    assert repr(few(0, FEW_SPAN)) == repr(st.integers(0, FEW_SPAN))


def test_tiled_sizes_shrink_tile_count_then_tail():
    assert find(tiled_sizes(16, max_size=100), lambda n: True) == 1
    # A bug needing a partial tile of at least 2: the tail shrinks to exactly that.
    assert find(tiled_sizes(16, max_size=100), lambda n: n % 16 >= 2) == 2
    # A bug needing more than one tile: one full tile plus the smallest tail.
    assert find(tiled_sizes(16, max_size=100), lambda n: n > 16) == 17


def test_tiled_sizes_reach_the_boundary_remainders():
    seen = set()

    @settings(max_examples=300, database=None)
    @given(tiled_sizes(16, max_size=200))
    def collect(n):
        seen.add(n % 16)

    collect()
    assert {0, 1, 15} <= seen


def test_value_recipe_shrinks_to_plain_values():
    r = find(value_recipes(numel=100), lambda r: True)
    assert r == ValueRecipe(seed=0, distribution="normal", magnitude=1.0, offset=0.0)


def test_value_recipe_shrinks_to_the_exp_overflow_boundary_for_tiny_arrays():
    # Searching for a logit above fp32's exp overflow lands on a plain recipe with that offset.
    r = find(value_recipes(numel=1), lambda r: materialize(r, (1,), "float32")[0] > 88.72)
    assert materialize(r, (1,), "float32")[0] > 88.72
    assert r.specials == "none"


def test_materialize_is_deterministic_and_in_range():
    r = ValueRecipe(seed=3, distribution="normal", magnitude=1e4, offset=6e4)
    a = materialize(r, (4, 5), "float16")
    b = materialize(r, (4, 5), "float16")
    assert a.dtype.name == "float16" and np.array_equal(a, b)
    assert np.isfinite(a.astype(np.float32)).all()  # clipped to fp16's range, not overflowed to inf


def test_materialize_injects_specials():
    a = materialize(ValueRecipe(specials="-inf", density=0.5), (8, 8), "float32")
    assert np.isneginf(a).any() and np.isfinite(a).any()
    s = materialize(ValueRecipe(specials="subnormal", density=1.0), (64,), "float32")
    assert ((np.abs(s) < np.finfo(np.float32).tiny) & (s != 0)).any()


@pytest.mark.parametrize("kind", ["full", "random", "causal", "masked_rows", "single_valid"])
def test_mask_kinds(kind):
    m = build_mask(MaskRecipe(kind, 0.5, 7), 5, 3)
    assert m.shape == (5, 3) and m.dtype == bool
    if kind == "causal":  # bottom-right aligned: 5 rows over 3 keys leave the top 2 rows empty
        assert not m[:2].any() and m[4].all()
    if kind == "masked_rows":
        assert (~m.any(axis=1)).any()
    if kind == "single_valid":
        assert (m.sum(axis=1) == 1).all()


def test_mask_recipe_shrinks_to_no_mask():
    assert find(mask_recipes(), lambda r: True).kind == "none"


def test_softmax_cases_shrink_to_one_float32_element():
    case = find(softmax_cases("small"), lambda c: True)
    assert case.inputs["x"].shape == (1, 1)
    assert case.params["dtype"] == "float32" and case.params["scale"] is None
    assert set(case.inputs) == {"x"}


@settings(max_examples=50)
@given(softmax_cases("large"))
def test_softmax_cases_respect_large_bounds(case):
    x = case.inputs["x"]
    assert 1 <= x.shape[0] <= 300 and x.size <= 1 << 18
    for k in ("mask", "bias"):
        if k in case.inputs:
            assert case.inputs[k].shape == x.shape
