"""A one-row jagged segment's output is fixed by the mask alone (1), so a fault there is classed
``masking`` and the same fault in a longer segment ``accuracy``: three planted jagged kernels
(rounds 5, 9 and 10, written apart) came as those two rows. The duplicate check runs the
masking example with each one-row segment given a second row (``Family.grow``): there it fails
the accuracy row's way, one bug. A fault of one-row segments alone passes so, and stays its
own."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fuzz.backends import get_backend
from fuzz.case import Case
from fuzz.duplicates import Duplicates, bug_of, fails_as
from fuzz.families import get_family
from fuzz.target import get, load_beside, load_plugin

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = load_beside(__file__, "_planted_checks.py", "kernel_fuzz_planted_checks")


@pytest.fixture(scope="module", autouse=True)
def plugins():
    for name in ("planted5.py", "planted10.py", "planted7_pallas.py"):
        load_plugin(os.path.join(HERE, name))


def _jagged(lengths, columns, *, block_n=8, seed=0):
    values = np.random.default_rng(seed).standard_normal((sum(lengths), columns))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    params = {"dtype": "float32", "block_n": block_n, "block_m": 4, "num_programs": None}
    return Case(
        {"values": values.astype(np.float32), "offsets": offsets}, {**params, "guard": "nan"}
    )


def test_grow_repeats_each_one_row_segment_and_keeps_the_others():
    case = _jagged([1, 3, 0, 1], 2)
    grown = get_family("jagged_softmax").grow(case)
    assert grown.inputs["offsets"].tolist() == [0, 2, 5, 5, 7]
    v, g = case.inputs["values"], grown.inputs["values"]
    assert np.array_equal(g, v[[0, 0, 1, 2, 3, 4, 4]])
    assert get_family("jagged_softmax").grow(_jagged([2, 3], 2)) is None


@pytest.mark.parametrize(
    ("name", "columns", "block_n"),
    [
        ("planted10_jagged_column_grid_of_row_tile_triton", 5, 8),
        ("planted5_jagged_sum_all_columns_triton", 4, 4),
    ],
)
def test_a_one_row_masking_row_and_its_accuracy_row_are_one_bug(name, columns, block_n):
    target, backend = get(name), get_backend("triton-interpret")
    one = CHECKS.as_found(target, backend, _jagged([1], columns, block_n=block_n))
    two = CHECKS.as_found(target, backend, _jagged([2], columns, block_n=block_n, seed=1))
    assert (one.key, two.key) == ("masking|oracle|y|-", "accuracy|oracle|y|-")
    assert "single-row-segments" in one.triggers
    for new, old in ((one, two), (two, one)):
        me = Duplicates(target, backend, CHECKS.options(), found={"o": old}, known_bugs=[])
        me.known_bugs = [bug_of(old)]
        assert me.of(new) == (bug_of(old), "property")


def test_a_fault_of_one_row_segments_alone_is_not_grown_into_another():
    """Round 7's one-row fast path (it ignores its row's value): its masking example, grown to
    two rows, passes, so it fails no accuracy row's way."""
    target = get("planted7_jagged_single_row_fast_path_pallas")
    backend = get_backend("pallas-interpret")
    case = _jagged([1], 1).replace(inputs={"values": np.full((1, 1), -np.inf, np.float32)})
    one = CHECKS.as_found(target, backend, case)
    assert one.key == "masking|oracle|y|-"
    assert fails_as(target, backend, CHECKS.options(), one, "accuracy|oracle|y|-", one.key) is None
