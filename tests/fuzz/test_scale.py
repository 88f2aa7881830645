"""Shape scale independent of the profile: ``--scale large`` (CLI) and ``--fuzz-scale large``
(pytest) let a CPU machine draw the GPU's chunk sizes, head counts and tiles."""

import subprocess
import sys

import pytest
from hypothesis import given, settings

from fuzz.profiles import get_profile, with_scale
from fuzz.target import get


def test_a_profile_at_another_scale_keeps_everything_else():
    ci = get_profile("ci")
    large = with_scale(ci, "large")
    assert large.scale == "large" and large.backends == ci.backends and large.name == "ci"
    assert with_scale(ci, None) is ci
    with pytest.raises(ValueError, match="scale='huge'"):
        with_scale(ci, "huge")


def test_the_large_scale_draws_long_gla_chunks_on_the_cpu():
    profile = with_scale(get_profile("ci"), "large")
    chunks = set()

    @settings(max_examples=60, database=None, derandomize=True, deadline=None)
    @given(get("simple_gla_fwd").strategy(profile.scale))
    def draw(case):
        chunks.add(case.params["chunk_size"])

    draw()
    assert chunks & {64, 128, 256}, chunks


@pytest.mark.parametrize("command", [["run", "--out", "x"], ["mutants"]])
def test_a_bad_scale_is_a_usage_error(command):
    done = subprocess.run(
        [sys.executable, "-m", "fuzz", *command, "--scale", "huge"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "--scale" in done.stderr and "large" in done.stderr


def test_pytest_takes_the_scale_too(pytester):
    pytester.makepyfile(
        """
        def test_scale(fuzz_profile):
            assert fuzz_profile.scale == "large"
        """
    )
    result = pytester.runpytest_subprocess("--fuzz-scale", "large")
    result.assert_outcomes(passed=1)
