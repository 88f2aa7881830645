"""pytest integration: ``pytest --hypothesis-profile=gpu [--plugin FILE]``.

Registered as a ``pytest11`` entry point, so installing the package is enough. It

* registers the harness profiles with Hypothesis before Hypothesis's own plugin loads one;
* adds ``--plugin`` (targets from a file or module), ``--fuzz-targets``/``--fuzz-backends`` (globs)
  and ``--repro-dir`` (where failing examples' reproducer scripts go);
* stops the session with one clear message when a GPU profile is asked for without a GPU;
* parametrizes any test that asks for ``fuzz_target`` (real targets) or ``fuzz_mutant`` (mutants),
  together with ``fuzz_backend``, over the registry and the profile's backends, ids like
  ``softmax-triton-interpret``;
* under ``pytest -n N`` (xdist) on a machine with several GPUs, gives each xdist worker one GPU:
  worker ``gwK`` sets ``CUDA_VISIBLE_DEVICES`` to the K-th visible device (round robin) when this
  module is imported, before torch or JAX initialise CUDA;
* when several xdist workers share one GPU, caps each worker's share of that GPU's memory (torch's
  caching allocator and XLA's), so that one worker's cached blocks do not starve the others
  into out-of-memory "crashes" (``KERNEL_FUZZ_GPU_SHARE=off`` leaves the allocators alone);
* before each test, clears JAX's compile caches once the process holds 40% of its memory-map
  limit (``fuzz.campaign.process.MapBudget``): one pytest process compiles an XLA program per new shape
  of every Pallas ``interpret=True`` test, and at the limit LLVM's JIT dies by SIGSEGV.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any

import pytest

from fuzz.campaign.threads import gpu_share, split_gpu_memory


def _nvidia_smi_gpus() -> list[str]:
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def device_for_xdist_worker(worker: str, devices: list[str]) -> str | None:
    """The device of xdist worker ``gwK`` (round robin over ``devices``); None if not mapped."""
    if not worker.startswith("gw") or not worker[2:].isdigit() or len(devices) < 2:
        return None
    return devices[int(worker[2:]) % len(devices)]


def map_xdist_worker_to_gpu() -> str | None:
    """Sets ``CUDA_VISIBLE_DEVICES`` for this xdist worker; returns the device chosen."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or os.environ.get("KERNEL_FUZZ_XDIST_GPU") == "off":
        return None
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    devices = [d.strip() for d in env.split(",") if d.strip()] if env else _nvidia_smi_gpus()
    os.environ.setdefault("KERNEL_FUZZ_VISIBLE_GPUS", ",".join(devices))
    device = device_for_xdist_worker(worker, devices)
    if device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    return device


def workers_per_gpu(workers: int, devices: int) -> int:
    """How many of ``workers`` xdist workers share one GPU when spread over ``devices`` GPUs."""
    return max(1, -(-workers // max(devices, 1)))


def share_gpu_memory() -> float | None:
    """XLA's memory fraction for this worker, set before JAX starts; returns torch's fraction,
    applied in ``pytest_configure`` (None when this worker has the GPU to itself).
    ``KERNEL_FUZZ_GPU_SHARE`` as for a campaign (``fuzz.campaign.threads.gpu_share``)."""
    share = gpu_share()  # (checked first: a bad value is a usage error on any machine)
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not os.environ.get("PYTEST_XDIST_WORKER") or not count.isdigit():
        return None
    env = os.environ.get("KERNEL_FUZZ_VISIBLE_GPUS", "")  # as seen before the worker's mapping
    gpus = len([d for d in env.split(",") if d])
    if gpus == 0:  # a CPU machine: nothing to share
        return None
    return split_gpu_memory(workers_per_gpu(int(count), gpus), share)


def share_cpus_among_xdist_workers(config: pytest.Config) -> int | None:
    """Each of ``pytest -n k``'s workers gets ``cores // k`` threads for NumPy, torch and OpenMP
    (see :mod:`fuzz.campaign.threads`): set in the controller before it starts the workers, which inherit
    the setting before they load NumPy (xdist has resolved ``-n auto`` to a number by then)."""
    from fuzz.campaign.threads import share_cpus

    count = getattr(config.option, "numprocesses", None)
    return share_cpus(count) if isinstance(count, int) and count > 1 else None


_XDIST_DEVICE = map_xdist_worker_to_gpu()  # at import: before any test module touches CUDA
try:
    _TORCH_FRACTION, _GPU_SHARE_ERROR = share_gpu_memory(), None
except ValueError as _e:  # KERNEL_FUZZ_GPU_SHARE: a usage error once pytest can say one
    _TORCH_FRACTION, _GPU_SHARE_ERROR = None, str(_e)

import fuzz.profiles  # noqa: E402
from fuzz.profiles import Profile, get_profile, gpu_missing_message, with_scale  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fuzz", "kernel fuzzing harness")
    group.addoption(
        "--plugin",
        action="append",
        default=[],
        metavar="FILE_OR_MODULE",
        help="register extra fuzz targets from a .py file or a module (repeatable)",
    )
    group.addoption(
        "--fuzz-targets", default="*", help="comma-separated globs of target names to test"
    )
    group.addoption(
        "--fuzz-backends",
        default="*",
        help="comma-separated globs of backends (default: the profile's)",
    )
    group.addoption(
        "--fuzz-scale",
        default=None,
        choices=("small", "large"),
        help="shape scale independent of the profile (large: the GPU's chunk sizes, "
        "head counts and tiles on the CPU interpreters too)",
    )
    group.addoption(
        "--repro-dir",
        default=None,
        help="where reproducer scripts of failing examples go (default .fuzz-reproducers)",
    )


def _profile(config: pytest.Config) -> Profile:
    name = config.getoption("hypothesis_profile", default=None) or "ci"
    try:
        profile = get_profile(name)
    except ValueError:
        profile = get_profile("ci")  # a profile of the user's own: the harness side defaults to ci
    return with_scale(profile, config.getoption("fuzz_scale", default=None))


def _check_hypothesis_profile(config: pytest.Config) -> None:
    """``--hypothesis-profile`` naming no registered profile is a usage error (one line, exit
    status 4) before Hypothesis's own plugin loads it (an INTERNALERROR traceback)."""
    from hypothesis import settings
    from hypothesis.errors import InvalidArgument

    from fuzz.hypothesis_internals import registered_profiles

    name = config.getoption("hypothesis_profile", default=None)
    if name is None:
        return
    try:
        settings.get_profile(name)
    except InvalidArgument:
        known = sorted(registered_profiles() or fuzz.profiles.PROFILES)
        raise pytest.UsageError(
            f"--hypothesis-profile={name!r} is not a registered profile; choose one of "
            f"{', '.join(known)} (or register it in a conftest.py)"
        ) from None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    _check_hypothesis_profile(config)
    if _GPU_SHARE_ERROR is not None:
        raise pytest.UsageError(_GPU_SHARE_ERROR)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        try:
            share_cpus_among_xdist_workers(config)
        except ValueError as e:  # KERNEL_FUZZ_THREADS
            raise pytest.UsageError(str(e)) from None
    name = config.getoption("hypothesis_profile", default=None)
    if name is None:
        from hypothesis import settings

        settings.load_profile("ci")  # plain `pytest` is the CI run: derandomized, no database
    if name in fuzz.profiles.PROFILES:
        message = gpu_missing_message(get_profile(name))
        if message is not None:
            pytest.exit(message, returncode=pytest.ExitCode.USAGE_ERROR)
        if _TORCH_FRACTION is not None and get_profile(name).ref_device == "cuda":
            import torch

            torch.cuda.set_per_process_memory_fraction(_TORCH_FRACTION)
    from fuzz.target import load_builtin, load_plugin_checked

    load_builtin()
    try:
        for spec in config.getoption("plugin", default=[]) or []:
            load_plugin_checked(spec)
        _check_selection(config)
    except ValueError as e:  # a usage error: one line, exit status 4, not an INTERNALERROR
        raise pytest.UsageError(str(e)) from None


def _check_selection(config: pytest.Config) -> None:
    """``--fuzz-targets``/``--fuzz-backends`` that select nothing are a usage error: the session
    would pass green having tested nothing."""
    from fuzz.backends import backends, get_backend
    from fuzz.target import all_targets, select

    targets, names = config.getoption("fuzz_targets"), config.getoption("fuzz_backends")
    chosen = select(targets, mutants=None)
    if not chosen:
        known = ", ".join(t.name for t in all_targets())
        raise ValueError(f"--fuzz-targets={targets!r} matches no target; known: {known}")
    runs_on = _backends(config, _profile(config))
    if not runs_on:
        raise ValueError(
            f"--fuzz-backends={names!r} matches no backend; known: {', '.join(backends())}"
        )
    if not any(t.unsupported(get_backend(b)) is None for t in chosen for b in runs_on):
        raise ValueError(
            f"--fuzz-targets={targets!r} has no kernel for the backends {', '.join(runs_on)} "
            f"(--fuzz-backends={names!r}); nothing would be tested"
        )


def _backends(config: pytest.Config, profile: Profile) -> list[str]:
    pattern = config.getoption("fuzz_backends")
    if pattern == "*":
        return list(profile.backends)
    from fuzz.backends import backends

    pats = [p.strip() for p in pattern.split(",") if p.strip()]
    return [n for n in backends() if any(fnmatch.fnmatchcase(n, p) for p in pats)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    kind = (
        "fuzz_target"
        if "fuzz_target" in names
        else "fuzz_mutant"
        if "fuzz_mutant" in names
        else None
    )
    if "fuzz_backend" not in names:
        return
    from fuzz.backends import get_backend
    from fuzz.target import select

    config = metafunc.config
    profile = _profile(config)
    if kind is None:  # a test of its own over the profile's backends (--fuzz-backends narrows)
        metafunc.parametrize("fuzz_backend", _backends(config, profile))
        return
    targets = select(config.getoption("fuzz_targets"), mutants=kind == "fuzz_mutant")
    params = []
    for t in targets:
        for b in _backends(config, profile):
            if t.unsupported(get_backend(b)) is not None:
                continue  # declared or structural: `python -m fuzz list` says why
            params.append(pytest.param(t, b, id=f"{t.name}-{b}"))
    metafunc.parametrize((kind, "fuzz_backend"), params)


_MAP_BUDGET: Any = None


def pytest_runtest_setup(item: pytest.Item) -> None:
    from fuzz.campaign.process import MapBudget, map_limit

    global _MAP_BUDGET
    if _MAP_BUDGET is None:
        _MAP_BUDGET = MapBudget(map_limit())
    _MAP_BUDGET.clear_if_due()  # a pytest process is never recycled: clearing is what it can do


@pytest.fixture
def fuzz_profile(request: pytest.FixtureRequest) -> Profile:
    """The harness profile matching ``--hypothesis-profile`` (``ci`` by default)."""
    return _profile(request.config)


@pytest.fixture
def fuzz_repro_dir(request: pytest.FixtureRequest) -> Path:
    """Where reproducer scripts of failures found in this session go."""
    opt = request.config.getoption("repro_dir")
    return Path(opt) if opt else Path(os.getcwd()) / ".fuzz-reproducers"


@pytest.fixture(autouse=False)
def fuzz_require_backend(fuzz_backend: str) -> Any:
    """Fails (never skips) a test whose backend cannot run here, naming the reason."""
    from fuzz.backends import get_backend

    reason = get_backend(fuzz_backend).unavailable_reason()
    if reason is not None:
        pytest.fail(f"backend {fuzz_backend} cannot run here: {reason}", pytrace=False)
    return fuzz_backend
