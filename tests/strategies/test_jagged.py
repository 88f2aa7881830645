"""Jagged offsets and jagged softmax cases: invalid arguments, bounds, the corners they must reach,
and what they shrink to."""

import itertools

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from strategies.jagged import jagged_offsets, offsets_from_lengths, segment_lengths
from strategies.jagged_softmax import LIMITS, jagged_softmax_cases


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"block": 0, "max_total": 10}, "block=0 must be >= 1"),
        ({"block": 4, "max_total": -1}, "max_total=-1 must be >= 0"),
        ({"block": 4, "max_total": 10, "max_segments": 0}, "max_segments=0 must be >= 1"),
        ({"block": 4, "max_total": 10, "max_tiles": 0}, "max_tiles=0 must be >= 1"),
        ({"block": 4, "max_total": 10, "max_many": -2}, "max_many=-2 must be >= 0"),
        ({"block": 4.0, "max_total": 10}, "block=4.0 must be an int"),
    ],
)
def test_invalid_arguments_name_the_argument(kwargs, message):
    with pytest.raises(InvalidArgument) as info:
        segment_lengths(**kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"scale": "huge"}, "scale='huge' must be one of ('small', 'large')"),
        ({"dtypes": ("float64",)}, "dtypes contains ['float64']"),
    ],
)
def test_case_factory_rejects_bad_arguments(kwargs, message):
    with pytest.raises(InvalidArgument) as info:
        jagged_softmax_cases(**kwargs)
    assert message in str(info.value)


def test_offsets_from_lengths():
    assert offsets_from_lengths([0, 3, 0, 2]).tolist() == [0, 0, 3, 3, 5]
    assert offsets_from_lengths([]).tolist() == [0]
    assert offsets_from_lengths([1], np.int64).dtype == np.int64


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_lengths_respect_the_total(data):
    total = data.draw(st.integers(0, 40))
    lengths = data.draw(segment_lengths(block=4, max_total=total, max_many=5))
    assert len(lengths) >= 1 and min(lengths) >= 0 and sum(lengths) <= total
    offsets = offsets_from_lengths(lengths)
    assert offsets[0] == 0 and (np.diff(offsets) >= 0).all() and offsets[-1] == sum(lengths)


def test_lengths_shrink_to_one_row():
    assert find(segment_lengths(block=4, max_total=50), lambda ls: True) == (1,)


def test_lengths_shrink_to_one_segment_just_past_the_tile():
    # The seed's sum bug needs a segment longer than one tile: the minimal layout is exactly that.
    assert find(segment_lengths(block=4, max_total=50), lambda ls: max(ls) > 4) == (5,)


def test_lengths_shrink_toward_few_short_segments():
    # Edge empties are the cheapest extra segments (one choice each), then one-row segments.
    got = find(segment_lengths(block=4, max_total=50), lambda ls: len(ls) >= 3)
    assert got == (0, 0, 1)
    got = find(segment_lengths(block=4, max_total=50), lambda ls: sum(n > 0 for n in ls) >= 3)
    assert got == (1, 1, 1)
    got = find(segment_lengths(block=4, max_total=50), lambda ls: 0 in ls)
    assert len(got) <= 2 and 0 in got


def test_offsets_strategy_shrinks_to_a_single_row():
    assert find(jagged_offsets(block=4, max_total=50), lambda o: True).tolist() == [0, 1]


def test_lengths_reach_the_jagged_corners():
    seen = set()

    @settings(max_examples=250, database=None, deadline=None)
    @given(segment_lengths(block=4, max_total=40, max_segments=5, max_tiles=3, max_many=8))
    def collect(ls):
        ls = list(ls)
        empties = [i for i, n in enumerate(ls) if n == 0]
        if ls[0] == 0 and len(ls) > 1:
            seen.add("leading empty")
        if ls[-1] == 0 and len(ls) > 1:
            seen.add("trailing empty")
        if any(b - a == 1 for a, b in itertools.pairwise(empties)):
            seen.add("consecutive empties")
        if 1 in ls:
            seen.add("one row")
        top = max(ls)
        for name, v in (("below", 3), ("at", 4), ("above", 5), ("2 tiles", 8), ("2 tiles + 1", 9)):
            if top == v:
                seen.add(f"max_seqlen {name}")
        short = [n for n in ls if n <= 3]
        if top > 8 and len(short) >= 2:
            seen.add("one long among short")
        if len(ls) > 10:
            seen.add("many segments")

    collect()
    expected = {
        "leading empty",
        "trailing empty",
        "consecutive empties",
        "one row",
        "max_seqlen below",
        "max_seqlen at",
        "max_seqlen above",
        "max_seqlen 2 tiles",
        "max_seqlen 2 tiles + 1",
        "one long among short",
        "many segments",
    }
    assert expected <= seen, expected - seen


def test_cases_shrink_to_one_float32_row():
    case = find(jagged_softmax_cases("small"), lambda c: True)
    assert case.inputs["values"].shape == (1, 1)
    assert case.inputs["offsets"].tolist() == [0, 1]
    assert case.params == {
        "dtype": "float32",
        "block_n": LIMITS["small"].block_n[0],
        "block_m": LIMITS["small"].block_m[0],
        "num_programs": None,
        "guard": "nan",
    }


@pytest.mark.parametrize("scale", ["small", "large"])
def test_cases_respect_the_bounds_and_reach_the_column_corners(scale):
    lim = LIMITS[scale]
    cols = set()

    @settings(max_examples=60, database=None, deadline=None)
    @given(jagged_softmax_cases(scale))
    def check(case):
        values, offsets = case.inputs["values"], case.inputs["offsets"]
        n, m = values.shape
        assert offsets.dtype == np.int32 and offsets[0] == 0 and offsets[-1] == n
        assert (np.diff(offsets) >= 0).all()
        assert n <= lim.max_rows and 1 <= m <= lim.max_cols and n * m <= max(lim.max_elements, m)
        assert values.dtype.name == case.params["dtype"] or case.params["dtype"] == "bfloat16"
        cols.add(m)
        cols.add("wider than a column block" if m > case.params["block_m"] else "one block")

    check()
    assert 1 in cols and "wider than a column block" in cols
    assert {3, 5} & cols or {31, 33} & cols  # powers of two plus or minus one
