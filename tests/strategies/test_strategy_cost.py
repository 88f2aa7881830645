"""Drawing an example builds no new strategy.

Hypothesis reads and parses a ``@st.composite`` function's source each time one is built. A
strategy factory called inside a draw without ``strategies._cache.cached_factory`` rebuilds its
composites on every example: on a GPU, where a launch takes microseconds, that cost more than
the kernel (the GLA decay and length factories were such a case: about a fifth of a hunt's time).
"""

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from fuzz.target import load_builtin, select

load_builtin()
STRATEGIES = {t.strategy for t in select("*")}  # the real targets' (mutants share them)


@pytest.mark.parametrize(
    "strategy_factory",
    sorted(STRATEGIES, key=lambda f: f.__qualname__),
    ids=lambda f: f.__qualname__,
)
def test_drawing_the_same_examples_again_builds_no_composite(strategy_factory, monkeypatch):
    strategy = strategy_factory("small")
    name = strategy_factory.__qualname__

    def draw_some(n: int) -> None:
        @seed(n)
        @settings(
            max_examples=25,
            database=None,
            deadline=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
            phases=["generate"],
        )
        @given(st.data())
        def run(data):
            data.draw(strategy)

        run()

    draw_some(0)  # builds the composites these examples need, once per distinct argument set
    built = []
    real_composite = st.composite

    def counting(f):
        built.append(f.__qualname__)
        return real_composite(f)

    monkeypatch.setattr(st, "composite", counting)
    draw_some(0)  # the same examples: every factory call is a cache hit
    assert built == [], f"{name}: composites built while drawing: {sorted(set(built))}"
