"""kernels._programs: one executable per program per process for the Pallas wrappers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fuzz import timing
from kernels import _programs
from kernels._programs import compiled_programs


@pytest.fixture
def lowerings():
    count = [0]

    def on_duration(event: str, duration: float, **_: object) -> None:
        if "to_mlir" in event:
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    yield count
    try:
        from jax._src import monitoring

        monitoring._unregister_event_duration_listener_by_callback(on_duration)
    except Exception:
        pass


@pytest.fixture(autouse=True)
def _hooked():
    timing.install()  # a compile inside no_new_compiles raises NewCompile


def _scaled(x, y, *, times: int):
    return x * times + y


def test_a_program_is_lowered_once_even_where_jax_drops_its_own_caches(lowerings):
    f = compiled_programs(_scaled, ("times",))
    x, y = jax.device_put(np.arange(4.0, dtype=np.float32)), jax.device_put(np.ones(4, np.float32))
    x5, y5 = (jax.device_put(a.astype(np.float32)) for a in (np.arange(5.0), np.ones(5)))
    h, hy = (jax.device_put(a.astype(np.float16)) for a in (np.arange(4.0), np.ones(4)))
    before = lowerings[0]
    np.testing.assert_allclose(f(x, y, times=3), np.arange(4.0) * 3 + 1)
    first = lowerings[0]
    assert first == before + 1
    jax.clear_caches()  # JAX forgets the program (on a GPU its caches missed on their own)
    np.testing.assert_allclose(f(x, y, times=3), np.arange(4.0) * 3 + 1)
    assert lowerings[0] == first
    # Another static argument, shape or dtype is another program.
    f(x, y, times=2)
    f(x5, y5, times=2)
    f(h, hy, times=2)
    assert lowerings[0] == first + 3


def test_a_new_tracing_context_is_a_new_program(lowerings):
    f = compiled_programs(_scaled, ("times",))
    x = jnp.arange(4, dtype=jnp.int32)
    f(x, x, times=2)
    before = lowerings[0]
    with jax.numpy_rank_promotion("raise"):  # a value of the tracing context
        f(x, x, times=2)
    assert lowerings[0] == before + 1


def test_what_it_cannot_key_goes_to_jax_jit(lowerings):
    seen = []

    def spy(x, *, times):
        seen.append(type(x).__name__)
        return x * times

    f = compiled_programs(spy, ("times",))
    f(jnp.ones(3), times=2)
    with jax.disable_jit():  # op by op: the NaN-origin search relies on it
        f(jnp.ones(3), times=2)
    assert len(seen) == 2 and "Tracer" not in seen[1]
    f(np.ones(3, np.float32), times=2)  # a NumPy array: jax.jit's own caching
    out = jax.jit(lambda x: f(x, times=2))(jnp.ones(3))  # a tracer: inlined in the outer trace
    np.testing.assert_allclose(out, 2.0)
    assert _programs.cached_executables() >= 1


def test_a_refused_compile_keeps_nothing_and_compiles_later():
    f = compiled_programs(_scaled, ("times",))
    x = jnp.arange(6.0)
    with timing.no_new_compiles(), pytest.raises(timing.NewCompile):
        f(x, x, times=7)
    n = _programs.cached_executables()
    np.testing.assert_allclose(f(x, x, times=7), np.arange(6.0) * 8)
    assert _programs.cached_executables() == n + 1
    with timing.no_new_compiles():  # kept: launching it again compiles nothing
        f(x, x, times=7)


def test_clear_drops_the_executables():
    f = compiled_programs(_scaled, ("times",))
    f(jnp.ones(2), jnp.ones(2), times=1)
    assert _programs.cached_executables() >= 1
    _programs.clear()
    assert _programs.cached_executables() == 0
    with timing.no_new_compiles(), pytest.raises(timing.NewCompile):
        jax.clear_caches()
        f(jnp.ones(2), jnp.ones(2), times=1)
