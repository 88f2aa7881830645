import os

import pytest

from fuzz.profiles import Profile
from fuzz.target import load_plugin

FAKE = os.path.join(os.path.dirname(__file__), "fake_targets.py")


@pytest.fixture(scope="session")
def fake_plugin():
    return load_plugin(FAKE)


@pytest.fixture
def fake_profile():
    return Profile("ci", ("fake",), "small", False, "cpu", False, 60)


@pytest.fixture
def fake_differential_profile():
    return Profile("ci", ("fake",), "small", True, "cpu", False, 60)
