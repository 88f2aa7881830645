"""ALiBi slopes: the kernels' helper and the strategies' independent formula agree with the
published values, and the slope strategy shrinks toward the standard slopes."""

import math

import numpy as np
import pytest
from hypothesis import find
from hypothesis.errors import InvalidArgument

from kernels.alibi import alibi_slopes
from strategies.alibi import alibi_slopes as slope_strategy
from strategies.alibi import slope_recipes, standard_slopes

# Written out by hand from the rule in the ALiBi paper (8 heads: 1/2 ... 1/256; 12 heads: the 8,
# then the odd powers of 2**-0.5 of the 16-head sequence).
TABLE = {
    1: [2**-8],
    2: [2**-4, 2**-8],
    4: [2**-2, 2**-4, 2**-6, 2**-8],
    8: [2.0**-k for k in range(1, 9)],
    12: [2.0**-k for k in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5],
    6: [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3],
}


@pytest.mark.parametrize("n", sorted(TABLE))
def test_standard_slopes_match_the_published_rule(n):
    assert np.allclose(alibi_slopes(n), TABLE[n], rtol=1e-15)
    assert np.allclose(standard_slopes(n), TABLE[n], rtol=1e-15)


def test_kernel_helper_and_strategy_agree_for_every_head_count():
    for n in range(1, 130):
        assert np.allclose(alibi_slopes(n), standard_slopes(n), rtol=1e-15), n
        assert len(alibi_slopes(n)) == n


def test_16_heads_first_slope_overflows_a_chunk_of_128():
    # The seed-004 condition: |gamma| * 127 > log(fp32 max) for the largest slope of 16 heads.
    assert standard_slopes(16)[0] * 127 > math.log(np.finfo(np.float32).max)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: alibi_slopes(0), "n_heads=0 must be >= 1"),
        (lambda: alibi_slopes(2.0), "n_heads must be an int"),
    ],
)
def test_kernel_helper_rejects_bad_head_counts(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: standard_slopes(0), "n_heads=0 must be >= 1"),
        (lambda: slope_recipes(3, kinds=("geometric",)), "kinds contains"),
        (lambda: slope_recipes(0), "n_heads=0 must be >= 1"),
    ],
)
def test_strategy_rejects_bad_arguments(call, message):
    with pytest.raises(InvalidArgument, match=message):
        call()


def test_slopes_shrink_to_the_standard_ones():
    got = find(slope_strategy(5), lambda s: True)
    assert np.array_equal(got, standard_slopes(5))


def test_a_zero_slope_is_reachable_and_minimal():
    got = find(slope_strategy(4), lambda s: (s == 0).any())
    assert np.array_equal(got, np.zeros(4))
