"""Backends: where and how a kernel source runs, and how arrays get there and back.

Four built-in backends, two per kernel language; the compiled and interpreted backend of one
language run the same kernel source and are each other's *twin* (the in-process differential)::

    triton            compiled Triton, CUDA tensors
    triton-interpret  Triton's interpreter, CPU tensors (on a GPU host too)
    pallas-gpu        Pallas compiled for the GPU (Triton lowering)
    pallas-interpret  Pallas ``interpret=True`` on the CPU device

A backend also allocates the outputs a kernel writes into: poisoned, and for torch with guard bands
(memory before, between rows, and after the output) whose bits must survive the launch.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from fuzz.arrays import DTYPES, dtype_name, finfo, holds_nan, host_dtype, np_dtype, uint_of
from fuzz.failures import HarnessLimit

# JAX must not grab most of the GPU's memory: torch and the oracles share the device.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

GUARD_ELEMENTS = 64  # before and after the output
ROW_GAP = 3  # between consecutive rows of the output (an odd gap: misaligned on purpose)

# Guard fill: a quiet NaN with a payload no arithmetic produces; output poisons for the two runs.
_GUARD_BITS = {
    "float32": 0x7FC0DEAD,
    "float16": 0x7E5A,
    "bfloat16": 0x7FDA,
    "float64": 0x7FF8DEADBEEF0001,
}
_INT_GUARD = -0x5A5A  # a signed type too narrow for it (int8) takes -0x5B, an unsigned one 0xA5...
POISON_NAN = float("nan")
POISON_FINITE = -7.75  # exact in every float dtype; a kernel never writes it by chance twice


def guard_value(name: str) -> np.ndarray:
    """One element holding the guard fill of dtype ``name`` (any of ``fuzz.arrays.DTYPES``: a
    NaN with a payload of its own for the wide floats, the NaN of a narrow float that has one,
    an unlikely pattern for the rest).

    Raises:
        ValueError: ``name`` is not one of ``fuzz.arrays.DTYPES``.
    """
    dt = DTYPES.get(name)
    if dt is None:
        raise ValueError(f"dtype={name!r} has no guard fill; expected one of {sorted(DTYPES)}")
    if dt.kind == "float":
        if name in _GUARD_BITS:
            raw = np.array([_GUARD_BITS[name]], dtype=uint_of(dt.itemsize))
            return raw.view(dt.numpy)
        value = np.nan if holds_nan(name) else -finfo(name).max  # a narrow float's NaN
        return np.array([value]).astype(dt.numpy)
    if dt.kind == "bool":
        return np.array([True])
    info = ml_dtypes.iinfo(dt.numpy) if dt.kind in ("int", "uint") else None
    if info is not None and dt.kind == "int":
        value = next((v for v in (_INT_GUARD, -0x5B) if info.min <= v), info.min)
        return np.array([value]).astype(dt.numpy)
    if info is not None:
        pattern = 0xA5A5A5A5A5A5A5A5 & ((1 << (8 * dt.itemsize)) - 1)
        return np.array([min(pattern, info.max)], dtype=np.uint64).astype(dt.numpy)
    return np.array([complex(float("nan"), -0x5A5A)]).astype(dt.numpy)  # complex


_TORCH_INTS = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def _torch_guard(name: str) -> tuple[Any, Any]:
    """The guard fill of dtype ``name`` as a torch fill value, and the integer dtype to view a
    buffer of it as (so that a float's NaN payload is written and compared bit for bit), or None.

    Raises:
        HarnessLimit: a dtype the harness cannot guard (torch's complex, bit-container and
            quantized types): a buffer of it is left unguarded.
    """
    import torch

    dt = DTYPES.get(name)
    as_int = None if dt is None else _TORCH_INTS.get(dt.itemsize)
    if dt is None or as_int is None or dt.kind == "complex":
        raise HarnessLimit(f"a buffer of dtype {name} cannot be guarded")
    if dt.kind == "float" or not dt.native:  # compared as raw bits (NaN payloads, int4)
        raw = guard_value(name).view(np.dtype(as_int))[0]
        return int(raw), getattr(torch, as_int)
    return guard_value(name)[0].item(), None


def poison_tensor(t: Any, fill: float) -> Any:
    """``t`` (a torch tensor a library allocated) filled with the launch's poison, where its type
    holds it: ``fill`` for a float (NaN for the clean run, -7.75 for the repeat), -0x5A5A for a
    signed integer (-0x5B for int8), nothing for the rest (bool, uint8 and the other unsigned
    types, complex, torch's bit containers, packed and quantized types: the poison has no value
    there, or torch cannot fill them). Never raises for a type torch allocated."""
    import torch

    with torch.no_grad():
        try:
            if t.is_floating_point():
                t.fill_(fill)
            elif not t.is_complex() and t.dtype != torch.bool:
                info = torch.iinfo(t.dtype)
                if info.min < 0:  # signed
                    t.fill_(_INT_GUARD if info.min <= _INT_GUARD else -0x5B)
        except (TypeError, RuntimeError, NotImplementedError):
            pass  # a type torch cannot fill or describe (float4_e2m1fn_x2, bits8, uint3, qint8)
    return t


@dataclass
class OutBuffer:
    """An output the kernel writes into, and what it takes to check its surroundings."""

    array: Any  # what the kernel receives as ``out`` (a view, for torch)
    storage: Any | None = None  # the whole allocation, guards included (torch)
    outside: Any | None = None  # bool mask over ``storage``: True where ``array`` does not live


class Adapter:
    """Moves host arrays to one framework/device and back."""

    framework = ""
    guards = False

    def put(self, a: np.ndarray) -> Any:
        raise NotImplementedError

    def get(self, a: Any) -> np.ndarray:
        raise NotImplementedError

    def alloc(self, shape: tuple[int, ...], dtype: str, fill: float) -> OutBuffer:
        raise NotImplementedError

    def guard_violations(self, buf: OutBuffer) -> np.ndarray:
        """Offsets (relative to the output's first element) of guard elements that changed."""
        return np.zeros(0, np.int64)

    def synchronize(self) -> None:
        pass


class TorchAdapter(Adapter):
    framework = "torch"
    guards = True

    def __init__(self, device: str) -> None:
        self.device = device

    def put(self, a: np.ndarray) -> Any:
        import torch

        name = dtype_name(a.dtype)
        a = np.ascontiguousarray(a)
        if not a.flags.writeable:
            # A CPU tensor shares the array's memory: a read-only array (a cached case input) is
            # copied, so that a kernel writing into its inputs cannot change the case itself.
            a = a.copy()
        held = DTYPES.get(name)
        if held is not None and not held.native:  # ml_dtypes' (bfloat16, float8): by its bits
            tt = getattr(torch, name, None)
            as_int = _TORCH_INTS.get(a.dtype.itemsize)
            if not isinstance(tt, torch.dtype) or as_int is None or tt.itemsize != a.itemsize:
                raise HarnessLimit(f"an array of dtype {name}, which torch cannot hold")
            t = torch.from_numpy(a.view(np.dtype(as_int))).view(tt)
        else:
            t = torch.from_numpy(a)
        return t.to(self.device, non_blocking=False)

    def get(self, t: Any) -> np.ndarray:
        """The tensor on the host, of its own dtype: ``ml_dtypes``' for the types NumPy lacks
        (bfloat16, float8).

        Raises:
            HarnessLimit: a dtype NumPy and ``ml_dtypes`` have no type for (``complex32``,
                ``qint8``, ``bits16``...).
        """
        import torch

        t = t.detach()
        name = dtype_name(t.dtype)
        dt = host_dtype(name, "a torch tensor")
        if DTYPES[name].native:
            return t.cpu().numpy()
        as_int = _TORCH_INTS.get(dt.itemsize)
        if as_int is None or t.element_size() != dt.itemsize:
            raise HarnessLimit(f"a torch tensor of dtype {name}, which NumPy cannot hold")
        return t.view(getattr(torch, as_int)).cpu().numpy().view(dt)

    def alloc(self, shape: tuple[int, ...], dtype: str, fill: float) -> OutBuffer:
        """The output as a strided view into a larger buffer of guard elements, built on the
        device (no host array: outputs can be large and this runs for every launch)."""
        import torch

        n = shape[-1] if shape else 1
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        pitch = n + ROW_GAP
        total = 2 * GUARD_ELEMENTS + rows * pitch
        storage = torch.empty(total, dtype=getattr(torch, dtype), device=self.device)
        pattern, as_int = _torch_guard(dtype)
        (storage.view(as_int) if as_int is not None else storage).fill_(pattern)
        strides = [1] * len(shape)
        if len(shape) >= 2:
            strides[-2] = pitch
            for d in range(len(shape) - 3, -1, -1):
                strides[d] = strides[d + 1] * shape[d + 1]
        view = torch.as_strided(storage, shape, strides, GUARD_ELEMENTS)
        view.fill_(fill)
        outside = torch.ones(total, dtype=torch.bool, device=self.device)
        torch.as_strided(outside, shape, strides, GUARD_ELEMENTS).fill_(False)
        return OutBuffer(view, storage, outside)

    def guard_violations(self, buf: OutBuffer) -> np.ndarray:
        import torch

        assert buf.storage is not None and buf.outside is not None
        pattern, as_int = _torch_guard(dtype_name(buf.storage.dtype))
        now = buf.storage.view(as_int) if as_int is not None else buf.storage
        changed = (now != pattern) & buf.outside
        return torch.nonzero(changed).flatten().cpu().numpy() - GUARD_ELEMENTS

    def synchronize(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()


def release_device_memory() -> None:
    """Hands the GPU memory PyTorch's allocator holds cached back to the driver (after a slice,
    or an example that ran the GPU out of memory): a dozen processes share the GPU, and blocks
    one kept for its largest case ran another's kernel launches out of memory
    (CUDA_ERROR_OUT_OF_MEMORY on an H100). A courtesy: never fatal."""
    import sys

    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            import gc

            gc.collect()  # (the declined example's tensors, held by a frame or a cycle)
            torch.cuda.empty_cache()
    except Exception:
        pass


def cache_dir() -> str:
    """Where compiled kernels persist between runs: ``$KERNEL_FUZZ_CACHE_DIR`` or
    ``~/.cache/kernel-fuzz``. A nightly campaign meets the same kernel variants (dtype, block
    sizes, shape buckets) night after night; compiling each once is what keeps its throughput up.
    """
    return os.environ.get("KERNEL_FUZZ_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "kernel-fuzz"
    )


_jax_cache_on = False


def enable_jax_compilation_cache() -> None:
    """Turns on JAX's persistent compilation cache (idempotent; ``KERNEL_FUZZ_CACHE_DIR=off``
    leaves it off). Only a process that compiles for an accelerator turns it on: there a compile
    costs seconds, while loading a cached *CPU* executable can crash the process (XLA's CPU
    deserialisation segfaulted in CI on the interpreted Pallas kernels), and the interpreters
    compile quickly enough uncached. Triton keeps its own on-disk cache (``~/.triton/cache``).
    """
    global _jax_cache_on
    if _jax_cache_on or os.environ.get("KERNEL_FUZZ_CACHE_DIR") == "off":
        return
    _jax_cache_on = True
    import jax

    try:
        jax.config.update("jax_compilation_cache_dir", os.path.join(cache_dir(), "jax"))
        # Every compile, however short: a Pallas wrapper's eager ops (reshapes, pads, slices)
        # compile a small XLA program each per new shape, 9-15 of them per launch of the
        # attention kernel, each under JAX's default threshold; left out of the cache, every
        # campaign process compiled them again (0.4-0.7 s a structure on an H100, more with
        # the host's cores busy), on top of the kernel it loaded.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except Exception:  # an older or newer JAX without these options: run uncached
        return
    from fuzz import timing

    timing.note_jax_cache()  # a compile refused inside no_new_compiles waits for the cache's miss
    settle_jax_tracing_context()


def settle_jax_tracing_context() -> None:
    """Lowers (never compiles) an interpreted ``pallas_call`` once, unwatched, so that the JAX
    modules its first lowering imports are in before any kernel is lowered. One of them adds a
    value to JAX's tracing context (JAX 0.11.2 on an H100: 50 values, then 51 after the first
    interpreted launch, a twin's check on the GPU): every program a process had compiled was
    then lowered again, and missed in the persistent cache (``.ci/relower_probe.py``: a hunt
    over its compile share refused 372 launches of a program an earlier hunt of the process
    had compiled; settled first, the same hunt checked 60 examples, not 3)."""
    from fuzz import timing

    try:
        import jax
        import jax.numpy as jnp
        from jax.experimental import pallas as pl

        def copy(x_ref: Any, o_ref: Any) -> None:
            o_ref[...] = x_ref[...]

        def launch(x: Any) -> Any:
            out = jax.ShapeDtypeStruct(x.shape, x.dtype)
            return pl.pallas_call(copy, out_shape=out, interpret=True)(x)

        with timing.unwatched():
            jax.jit(launch).lower(jax.ShapeDtypeStruct((8,), jnp.float32))
    except Exception:  # a JAX without Pallas, or whose interpreter lowers otherwise: as before
        pass


class JaxAdapter(Adapter):
    framework = "jax"

    def __init__(self, platform: str) -> None:
        self.platform = platform

    @functools.cached_property
    def device(self) -> Any:
        import jax

        if self.platform != "cpu":
            enable_jax_compilation_cache()
        return jax.devices(self.platform)[0]

    def put(self, a: np.ndarray) -> Any:
        import jax

        return jax.device_put(np.ascontiguousarray(a), self.device)

    def get(self, a: Any) -> np.ndarray:
        return np.asarray(a)

    def alloc(self, shape: tuple[int, ...], dtype: str, fill: float) -> OutBuffer:
        return OutBuffer(self.put(np.full(shape, fill, np_dtype(dtype))))

    def synchronize(self) -> None:
        pass


@dataclass(frozen=True)
class Backend:
    """A way to run one kernel language.

    Attributes:
        name: backend name used on the command line and in reports.
        impl: which entry of ``Target.kernels`` it runs (``'triton'``, ``'pallas'``...).
        interpret: passed to the kernel entry point.
        compiled: True for a backend that needs an accelerator.
        twin: the backend running the same source the other way (compiled <-> interpreted).
        adapter: factory of the array adapter.
        probe: returns ``None`` if the backend can run here, else the reason it cannot.
        cost_speedup: for an interpreter, how many times faster than Triton's it runs a unit of
            ``Search.cost`` (a program instance over one tile): the profile's cost bounds
            (``Profile.interpreter_max_cost``) are in Triton-interpreter units and scale by it.
        exact_dots: whether the language's fp32 dot products are IEEE fp32 here, never TF32
            (Triton's interpreter multiplies with NumPy; Pallas's runs XLA on the CPU): a
            failure that reproduces here is not TF32's (``fuzz.shrink``).
    """

    name: str
    impl: str
    interpret: bool
    compiled: bool
    twin: str | None
    adapter: Callable[[], Adapter]
    probe: Callable[[], str | None]
    cost_speedup: float = 1.0
    exact_dots: bool = False

    def __post_init__(self) -> None:
        c = self.cost_speedup
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < float("inf"):
            raise ValueError(
                f"Backend {self.name!r}: cost_speedup={c!r} must be a positive finite number"
            )

    def unavailable_reason(self) -> str | None:
        return _probe_cached(self.name, self.probe)

    @property
    def available(self) -> bool:
        return self.unavailable_reason() is None


_probe_results: dict[str, str | None] = {}


def _probe_cached(name: str, probe: Callable[[], str | None]) -> str | None:
    if name not in _probe_results:
        try:
            _probe_results[name] = probe()
        except Exception as e:  # a probe must never take the harness down
            _probe_results[name] = f"probe failed: {type(e).__name__}: {e}"
    return _probe_results[name]


def _import_reason(module: str) -> str | None:
    try:
        __import__(module)
    except Exception as e:
        return f"cannot import {module}: {type(e).__name__}: {e}"
    return None


def cuda_reason() -> str | None:
    """None if torch sees a CUDA device, else why not."""
    reason = _import_reason("torch")
    if reason:
        return reason
    import torch

    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def _probe_triton() -> str | None:
    return _import_reason("triton") or cuda_reason()


def _probe_triton_interpret() -> str | None:
    return _import_reason("triton") or _import_reason("torch")


# A process that only coordinates (the campaign's parent) probes JAX's GPU backend in a child
# process: JAX's client opens a context on every visible GPU (~0.5 GiB each on an H200), which
# the coordinator would hold for the whole campaign while its workers do the GPU work.
PROBE_JAX_IN_SUBPROCESS = False


def coordinator_probes() -> None:
    """This process only coordinates: probe JAX's GPU backend in a child process."""
    global PROBE_JAX_IN_SUBPROCESS
    PROBE_JAX_IN_SUBPROCESS = True


_JAX_GPU_PROBE = """
import jax
try:
    jax.devices("gpu")
except RuntimeError:
    raise SystemExit(f"jax {jax.__version__} has no GPU backend here")
import jax.experimental.pallas.triton
"""


def _jax_gpu_reason() -> str | None:
    reason = _import_reason("jax")
    if reason:
        return reason
    if PROBE_JAX_IN_SUBPROCESS:
        import subprocess
        import sys

        try:
            done = subprocess.run(
                [sys.executable, "-c", _JAX_GPU_PROBE], capture_output=True, text=True, timeout=300
            )
        except subprocess.TimeoutExpired:
            return "probing JAX's GPU backend took more than 300 s"
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()]
            return lines[-1] if lines else f"JAX GPU probe exited with {done.returncode}"
        return None
    import jax

    try:
        jax.devices("gpu")
    except RuntimeError:
        return f"jax {jax.__version__} has no GPU backend here"
    return _import_reason("jax.experimental.pallas.triton")


def _probe_pallas_interpret() -> str | None:
    return _import_reason("jax") or _import_reason("jax.experimental.pallas")


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> Backend:
    """Adds a backend (plugins may add their own); names are unique."""
    old = _BACKENDS.get(backend.name)
    if old is not None and old != backend:
        raise ValueError(f"backend {backend.name!r} is already registered")
    _BACKENDS[backend.name] = backend
    return backend


for _b in (
    Backend(
        "triton",
        "triton",
        False,
        True,
        "triton-interpret",
        lambda: TorchAdapter("cuda"),
        _probe_triton,
    ),
    Backend(
        "triton-interpret",
        "triton",
        True,
        False,
        "triton",
        lambda: TorchAdapter("cpu"),
        _probe_triton_interpret,
        exact_dots=True,
    ),
    Backend(
        "pallas-gpu",
        "pallas",
        False,
        True,
        "pallas-interpret",
        lambda: JaxAdapter("gpu"),
        _jax_gpu_reason,
    ),
    Backend(
        "pallas-interpret",
        "pallas",
        True,
        False,
        "pallas-gpu",
        lambda: JaxAdapter("cpu"),
        _probe_pallas_interpret,
        # XLA runs the interpreted grid: attention cases of cost 256-1024 took 0.01-0.36 s a
        # launch on one CPU core, GLA forward cases of cost 160-2560 0.02-0.21 s (after a
        # compile of 0.3-1.1 s per bucket); Triton's interpreter takes about 10 ms a unit.
        cost_speedup=32.0,
        exact_dots=True,
    ),
):
    register_backend(_b)


def backends() -> Mapping[str, Backend]:
    return dict(_BACKENDS)


def get_backend(name: str) -> Backend:
    try:
        return _BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"backend={name!r} is unknown; known backends: {sorted(_BACKENDS)}"
        ) from None


_adapters: dict[str, Adapter] = {}


def adapter_for(backend: Backend) -> Adapter:
    if backend.name not in _adapters:
        _adapters[backend.name] = backend.adapter()
    return _adapters[backend.name]


def device_name() -> str:
    """The accelerator's name, or the CPU's, for reports and reproducers."""
    if cuda_reason() is None:
        import torch

        return torch.cuda.get_device_name(0)
    import platform

    return f"CPU ({platform.machine()}, {os.cpu_count()} cores)"
