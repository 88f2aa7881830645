"""The pytest plugin: profiles, --plugin, parametrization, and the GPU profile without a GPU."""

import os

import pytest

from fuzz.backends import cuda_reason

FAKE = os.path.join(os.path.dirname(__file__), "fake_targets.py")

TEST_FILE = """
from fuzz.engine import check

def test_target(fuzz_target, fuzz_require_backend, fuzz_profile, fuzz_repro_dir):
    check(fuzz_target, fuzz_require_backend, fuzz_profile, repro_dir=fuzz_repro_dir)
"""


@pytest.mark.skipif(cuda_reason() is None, reason="this machine has a GPU")
def test_gpu_profile_without_gpu_stops_with_one_clear_message(pytester):
    pytester.makepyfile(TEST_FILE)
    result = pytester.runpytest_subprocess("--hypothesis-profile=gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert (
        "'gpu' profile runs the compiled backends triton, pallas-gpu and needs a CUDA GPU" in text
    )
    assert "--hypothesis-profile=ci" in text
    assert "passed" not in text and "skipped" not in text


def test_plugin_targets_are_parametrized_and_failures_write_reproducers(pytester, tmp_path):
    pytester.makepyfile(TEST_FILE)
    repro = tmp_path / "repro"
    result = pytester.runpytest_subprocess(
        "--plugin",
        FAKE,
        "--fuzz-targets",
        "fake_double*",
        "--fuzz-backends",
        "fake",
        "--repro-dir",
        str(repro),
        "-v",
    )
    # Real targets only: fake_double passes; the planted-bug targets are mutants, not collected.
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*test_target?fake_double-fake? PASSED*"])


def test_mutant_fixture_collects_mutants(pytester):
    pytester.makepyfile(
        """
        def test_m(fuzz_mutant, fuzz_backend):
            assert fuzz_mutant.is_mutant
        """
    )
    result = pytester.runpytest_subprocess(
        "--plugin", FAKE, "--fuzz-targets", "fake_*", "--fuzz-backends", "fake"
    )
    result.assert_outcomes(passed=11)  # the fake plugin's 11 bugs (fake_targets.BUGS)


def test_failing_real_target_fails_with_the_finding(pytester, tmp_path):
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text(
        "import dataclasses\n"
        "from fuzz.target import load_plugin, register, get\n"
        f"load_plugin({FAKE!r})\n"
        "t = get('fake_double_oob')\n"
        "register(dataclasses.replace(t, name='fake_broken', mutant=None, source='builtin'))\n"
    )
    pytester.makepyfile(TEST_FILE)
    repro = tmp_path / "repro"
    result = pytester.runpytest_subprocess(
        "--plugin",
        str(plugin),
        "--fuzz-targets",
        "fake_broken",
        "--fuzz-backends",
        "fake",
        "--repro-dir",
        str(repro),
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*out-of-bounds-write (guard-bands)*", "*reproducer:*"])
    assert list(repro.glob("fake_broken__fake__out-of-bounds-write__*.py"))


def test_xdist_workers_are_mapped_to_gpus_round_robin(monkeypatch):
    from fuzz.pytest_plugin import device_for_xdist_worker, map_xdist_worker_to_gpu

    assert device_for_xdist_worker("gw0", ["0", "1"]) == "0"
    assert device_for_xdist_worker("gw3", ["4", "5"]) == "5"
    assert device_for_xdist_worker("gw1", ["0"]) is None  # one GPU: nothing to share out
    assert device_for_xdist_worker("master", ["0", "1"]) is None
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert map_xdist_worker_to_gpu() == "5"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "5"
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert map_xdist_worker_to_gpu() is None


def test_xdist_workers_sharing_a_gpu_split_its_memory(monkeypatch):
    from fuzz.campaign.threads import XLA_SHARE
    from fuzz.pytest_plugin import share_gpu_memory, workers_per_gpu

    assert workers_per_gpu(8, 1) == 8
    assert workers_per_gpu(8, 2) == 4
    assert workers_per_gpu(3, 2) == 2
    assert workers_per_gpu(1, 4) == 1
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert share_gpu_memory() is None  # not under xdist: the allocators are left alone
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "8")
    monkeypatch.setenv("KERNEL_FUZZ_VISIBLE_GPUS", "")
    assert share_gpu_memory() is None  # a CPU machine (CI's): no GPU, nothing to split
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in os.environ
    monkeypatch.setenv("KERNEL_FUZZ_VISIBLE_GPUS", "0,1")
    torch_fraction = share_gpu_memory()
    assert torch_fraction is not None and 0 < torch_fraction <= 0.25
    assert float(os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"]) == round(XLA_SHARE / 4, 4)
    assert torch_fraction + float(os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"]) <= 1 / 4
    monkeypatch.setenv("KERNEL_FUZZ_GPU_SHARE", "off")
    assert share_gpu_memory() is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["--fuzz-targets", "nomatch*"], "--fuzz-targets='nomatch*' matches no target; known:"),
        (["--fuzz-backends", "nomatch*"], "--fuzz-backends='nomatch*' matches no backend; known:"),
        (
            ["--fuzz-targets", "softmax", "--fuzz-backends", "fake"],
            "--fuzz-targets='softmax' has no kernel for the backends fake",
        ),
        (["--plugin", "no/such/plugin.py"], "--plugin='no/such/plugin.py': no such file"),
        (["--plugin", "{broken}"], "--plugin='{broken}' failed to import: SyntaxError"),
    ],
)
def test_a_selection_of_nothing_or_a_bad_plugin_is_a_usage_error(pytester, tmp_path, args, message):
    # These passed green having tested nothing, or stopped with an INTERNALERROR traceback.
    broken = tmp_path / "broken.py"
    broken.write_text("def broken(:\n")
    pytester.makepyfile(TEST_FILE)
    args = [a.replace("{broken}", str(broken)) for a in ["--plugin", FAKE, *args]]
    # In this process: the session stops in the plugin's pytest_configure, before any test (a
    # subprocess would pay a fresh interpreter's imports of torch, JAX and the kernels).
    result = pytester.runpytest_inprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + result.stderr.str()
    assert message.replace("{broken}", str(broken)) in text
    assert "INTERNALERROR" not in text and "Traceback" not in text and "passed" not in text


def test_jax_compile_caches_are_cleared_before_a_test_near_the_memory_map_limit(
    pytester, monkeypatch
):
    """One pytest process compiles an XLA program per new shape of every Pallas interpret test;
    at the memory-map limit LLVM dies by SIGSEGV (it did in CI), so the plugin clears JAX's
    caches before a test once the process holds 40% of its limit."""
    pytester.makepyfile(
        """
        import jax, jax.numpy as jnp

        def test_compiles():
            for n in range(1, 4):
                jax.jit(lambda x: x + 1)(jnp.ones(n))
        """
    )
    monkeypatch.setenv("KERNEL_FUZZ_MAP_LIMIT", "100")  # any process holds more than 40
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "after clearing the compile caches" in result.stderr.str()
