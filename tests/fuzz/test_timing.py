"""What ``fuzz.timing`` counts: a launch that compiled, and whether its compiles were answered
from a persistent cache (a kernel another process compiled, only loaded into this one: what a
campaign's fuzzing path pays for the kernels its compile workers compiled ahead)."""

from __future__ import annotations

import pytest

from fuzz import timing


def _triton_compile(hit):
    import triton.knobs as knobs

    timing.install()
    knobs.compilation.listener(src=None, metadata={}, metadata_group={}, times=None, cache_hit=hit)


def _jax_compile(hit):
    import jax.monitoring

    timing.install()
    jax.monitoring.record_event_duration_secs("/jax/core/compile/tracing_duration", 0.01)
    # JAX records the backend compile's duration for a persistent-cache hit too.
    jax.monitoring.record_event_duration_secs("/jax/core/compile/backend_compile_duration", 0.5)
    jax.monitoring.record_event(
        "/jax/compilation_cache/cache_hits" if hit else "/jax/compilation_cache/cache_misses"
    )


@pytest.mark.parametrize("compile_", [_triton_compile, _jax_compile])
def test_a_launch_that_only_loaded_from_a_cache_is_told_apart(compile_):
    with timing.LaunchTimer() as t:
        pass
    assert not t.compiled and not t.loaded
    with timing.LaunchTimer() as t:
        compile_(True)
    assert t.compiled and t.loaded
    with timing.LaunchTimer() as t:
        compile_(False)
    assert t.compiled and not t.loaded
    with timing.LaunchTimer() as t:  # one kernel loaded, another compiled: a compile
        compile_(True)
        compile_(False)
    assert t.compiled and not t.loaded


def test_stats_count_cache_loads_among_compiles():
    from fuzz.properties import Launch, Stats

    s = Stats()
    s.add(Launch(seconds=2.0, compiled=True))
    s.add(Launch(seconds=0.25, compiled=True, loaded=True))
    s.add(Launch(seconds=0.01))
    assert (s.compiles, s.compile_seconds) == (2, 2.25)
    assert (s.cache_loads, s.cache_load_seconds) == (1, 0.25)
    other = Stats()
    other.merge(s)
    assert (other.cache_loads, other.cache_load_seconds) == (1, 0.25)


_CACHE_PROBE = """
import sys
import jax
import jax.numpy as jnp
import numpy as np

from fuzz import timing
from fuzz.backends import enable_jax_compilation_cache

enable_jax_compilation_cache()  # as a campaign process on a GPU does (KERNEL_FUZZ_CACHE_DIR)
timing.install()
f = jax.jit(lambda x: jnp.sin(x) * 2 + 1)
x5 = jax.device_put(np.ones((5,), np.float32))
if sys.argv[2] == "compile":
    f(x5).block_until_ready()
    print("compiled")
    sys.exit(0)
try:
    with timing.no_new_compiles():
        f(x5).block_until_ready()
    print("loaded")
except timing.NewCompile:
    print("refused a load")
try:
    with timing.no_new_compiles():
        f(jax.device_put(np.ones((7,), np.float32))).block_until_ready()
    print("compiled a new shape")
except timing.NewCompile:
    print("refused a new shape")
"""


def test_a_program_another_process_compiled_loads_where_nothing_may_compile(tmp_path):
    """With JAX's persistent cache on, a program another process compiled is a load, not a
    compile: inside ``no_new_compiles`` it runs (a fresh campaign worker refused every load of
    what the warm-up compiled), and a program of a new shape is still refused, at the cache's
    miss, before XLA compiles it."""
    import os
    import subprocess
    import sys

    script = tmp_path / "probe.py"
    script.write_text(_CACHE_PROBE)
    cache = str(tmp_path / "cache")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {
        **os.environ,
        "PYTHONPATH": root,
        "KERNEL_FUZZ_CACHE_DIR": cache,
        timing.LOG_REFUSED_KEYS: "1",
    }
    said = []

    def run(mode):
        out = subprocess.run(
            [sys.executable, str(script), cache, mode],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        said.append(out.stderr)
        return out.stdout.split()

    assert run("compile") == ["compiled"]
    assert " ".join(run("check")) == "loaded refused a new shape"
    # The refused compile says which program and cache key (a diagnosis of keys that differ
    # between processes: .ci/pallas_cache_diag.py); the load said nothing.
    refused = [ln for ln in said[1].splitlines() if "refused at the persistent cache's miss" in ln]
    assert len(refused) == 1 and "module 'jit__lambda" in refused[0], said[1][-2000:]
    assert "key '" in refused[0] and "not found" not in refused[0]


def test_settling_jax_at_start_up_is_no_compile_of_a_kernel():
    """The harness lowers an interpreted ``pallas_call`` once at start-up (the JAX modules its
    first lowering imports add a value to JAX's tracing context: lowered later, between kernel
    launches, it made every program launched before it a new one). That lowering is the
    harness's own: no watcher hears of it, it is not counted, and inside ``no_new_compiles``
    it is not refused."""
    from fuzz.backends import settle_jax_tracing_context

    timing.install()
    heard: list[str] = []

    def start() -> None:
        heard.append("start")

    def end() -> None:
        heard.append("end")

    timing.watch_compiles(start, end)
    try:
        events = timing.events()
        with timing.no_new_compiles():
            settle_jax_tracing_context()
        assert heard == [] and timing.events() == events
        # Outside it, the same lowering is heard (the test would pass without the hooks).
        import jax
        import jax.numpy as jnp

        jax.jit(lambda x: x * 3).lower(jax.ShapeDtypeStruct((5,), jnp.float32))
        assert "start" in heard and timing.events() > events
    finally:
        timing._watchers.remove((start, end))
