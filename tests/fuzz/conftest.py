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


@pytest.fixture(autouse=True)
def _cuda_context_state_per_test():
    """The fake ``context`` bug simulates a lost CUDA context, which the engine remembers for the
    rest of the process (later GPU hunts refuse); each test here starts from a clean slate."""
    from fuzz import engine

    yield
    engine._context_lost.clear()
