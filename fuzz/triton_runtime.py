"""Third-party Triton kernels under the harness: Triton's interpreter, and autotune configs pinned.

A kernel library (fla, liger-kernel, a FlashAttention-style package) launches its own kernels from
its own Python code, through ``kernel[grid](...)``, ``triton.autotune`` and ``triton.heuristics``.
Two scopes reach those launches without touching the library:

- :func:`interpreting`: inside it, every launch this thread makes on CPU tensors runs in Triton's
  interpreter (no GPU, no driver: nothing asks ``triton.runtime.driver.active``), with bfloat16
  computed as bfloat16 numbers. Launches on GPU tensors compile as before, and outside the scope
  nothing changes, so one process holds compiled and interpreted runs side by side.
- :func:`pinned_configs`: inside it, an autotuned kernel never benchmarks and never reads or writes
  the autotuner's caches: a chooser picks one of its configs for each launch, and the scope
  records the choices, so that a reproducer replays them (:func:`replay`). That makes the config a
  fuzzed dimension: a bug that only one config has (the one the autotuner picks on another GPU or
  shape) becomes findable, and a fresh example pays no autotuning.

Example (the engine draws the configs: integers drawn with the example, or Hypothesis's
``st.data()`` at each question)::

    picks = data.draw(st.lists(st.integers(0, 2**16), max_size=8))  # shrinks to the first configs
    with interpreting(), pinned_configs(positions(picks)) as choices:
        out = library_op(x)
    saved = [c.record() for c in choices]  # [kernel, index, config text]: into the reproducer
    ...
    with interpreting(), pinned_configs(replay(saved)):
        out = library_op(x)  # the same configs again (checked against their text)

Library-specific adaptations (a library that asks the GPU something at call time) register a
context manager with :func:`interpreter_adapter`; it is entered around the outermost
:func:`interpreting` scope of a thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from triton.runtime.autotuner import Autotuner, Config
from triton.runtime.errors import AutotunerError

from kernels import _triton_interp as _interp

__all__ = [
    "Candidate",
    "Choice",
    "Chooser",
    "ReplayError",
    "autotuned_name",
    "first",
    "interpreter_adapter",
    "interpreting",
    "pinned_configs",
    "positions",
    "remove_interpreter_adapter",
    "replay",
    "spread",
]


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One config a launch may run with.

    Attributes:
        index: its position in the kernel's full config list (``triton.autotune(configs=...)``),
            stable across shapes and runs; configs an ``early_config_prune`` makes anew count on
            from ``len(configs)`` in the order the pruner returns them.
        config: the ``triton.Config``.
    """

    index: int
    config: Config


@dataclasses.dataclass(frozen=True)
class Choice:
    """One pick of :func:`pinned_configs`: kernel ``kernel`` ran with its config ``index``.

    Attributes:
        kernel: the autotuned kernel's stable name, ``module.qualname`` of its function.
        index: into the kernel's full config list (see :class:`Candidate`).
        config: the config itself, for reports (``str(config)``).
    """

    kernel: str
    index: int
    config: Config = dataclasses.field(compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.kernel}[{self.index}]: {self.config}"

    def record(self) -> list[Any]:
        """``[kernel, index, config text]``: JSON for a reproducer; :func:`replay` takes it."""
        return [self.kernel, self.index, str(self.config)]


Chooser = Callable[[str, Sequence[Candidate]], int]
"""``chooser(kernel, candidates) -> position``: the position in ``candidates`` (the configs left
after the kernel's ``early_config_prune``, in the kernel's order, at least two) to run."""


def first(kernel: str, candidates: Sequence[Candidate]) -> int:
    """The chooser that always takes the first candidate (what :func:`interpreting` does alone)."""
    return 0


def positions(picks: Sequence[int], among: Sequence[int] | None = None) -> Chooser:
    """A chooser that answers its n-th question with ``picks[n] % len(candidates)`` (0 once the
    picks run out): a list of integers drawn with the example is the whole config dimension,
    and it shrinks toward each kernel's first candidate.

    ``among`` narrows each kernel's candidates as a compiled backend's run narrows its tiles
    (``fuzz.narrowing``): ``0`` is the first candidate, and each other value a key that names
    one more (:func:`spread`), the same for a kernel's same candidates in every run with the
    same keys; the pick is then taken modulo those."""
    picks = list(picks)
    if not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in picks):
        raise ValueError(f"picks must be integers >= 0, got {picks!r}")
    keys = None if among is None else list(among)
    if keys is not None and not all(isinstance(k, int) and k >= 0 for k in keys):
        raise ValueError(f"among must be integers >= 0, got {among!r}")
    asked = iter(picks)

    def chooser(kernel: str, candidates: Sequence[Candidate]) -> int:
        pick, n = next(asked, 0), len(candidates)
        if keys is None:
            return pick % n
        allowed = spread(kernel, candidates, keys or [0])
        return allowed[pick % len(allowed)]

    return chooser


def _settings(config: Config) -> list[tuple[str, Any]]:
    """A config's meta-parameters: its warps, its stages and each of its keywords."""
    return [
        ("num_warps", config.num_warps),
        ("num_stages", config.num_stages),
        *sorted((k, repr(v)) for k, v in config.kwargs.items()),
    ]


def spread(kernel: str, candidates: Sequence[Candidate], keys: Sequence[int]) -> list[int]:
    """The positions among ``candidates`` that ``keys`` name, in their order: ``0`` the first
    candidate, each other key one more, picked (``crc32(key|kernel)``) among the candidates
    not yet named that share the fewest meta-parameter values (warps, stages, keywords) with
    those named before it. Two configs of a run then differ in their warps where the kernel
    has two warp counts: a miscompile that one warp count has (fla's dq kernel on Hopper: every
    ``num_warps=4`` config wrong, every ``num_warps=2`` right) is within every run's reach,
    where a key drawn at random named a config with the first one's warps in 40% of runs.
    A later key never changes what an earlier one named (a widening adds keys)."""
    named: list[int] = []
    held: dict[tuple[str, Any], int] = {}
    for key in keys:
        rest = [i for i in range(1, len(candidates)) if i not in named]
        if key == 0 or not rest:
            pos = 0
        else:
            shared = {i: sum(held.get(s, 0) for s in _settings(candidates[i].config)) for i in rest}
            pool = [i for i in rest if shared[i] == min(shared.values())]
            pos = pool[zlib.crc32(f"{key}|{kernel}".encode()) % len(pool)]
        if pos in named:
            continue
        named.append(pos)
        for s in _settings(candidates[pos].config):
            held[s] = held.get(s, 0) + 1
    return named


class ReplayError(RuntimeError):
    """A replayed launch found no recorded choice, or one its candidates do not hold."""


def replay(choices: Iterable[Choice | Sequence[Any]]) -> Chooser:
    """A chooser that picks, for the n-th choice of each kernel, the n-th recorded index.

    Args:
        choices: what :func:`pinned_configs` recorded: :class:`Choice` objects, their
            :meth:`Choice.record` lists ``[kernel, index, config text]``, or ``(kernel, index)``.
            Where the config's text is known it is checked too: a library may build its config
            list from the device it finds (fla: from the GPU's shared memory), so an index
            recorded on one machine may name another config on another.

    Returns:
        The chooser. It raises :class:`ReplayError` when a kernel asks more often than recorded,
        or when the recorded config is not among its candidates.
    """
    queues: dict[str, deque[tuple[int, str | None]]] = {}
    for choice in choices:
        kernel, index, text = _parse_choice(choice)
        queues.setdefault(kernel, deque()).append((index, text))

    def chooser(kernel: str, candidates: Sequence[Candidate]) -> int:
        queue = queues.get(kernel)
        if not queue:
            raise ReplayError(f"{kernel} asks for a config the recording does not have")
        index, text = queue.popleft()
        for position, candidate in enumerate(candidates):
            if candidate.index == index:
                if text is not None and str(candidate.config) != text:
                    raise ReplayError(
                        f"{kernel}: config {index} is {candidate.config} here, but was {text} "
                        "when recorded (the library's config list differs on this machine)"
                    )
                return position
        have = [c.index for c in candidates]
        raise ReplayError(f"{kernel}: the recorded config {index=} is not among {have=}")

    return chooser


def _parse_choice(choice: Any) -> tuple[str, int, str | None]:
    if isinstance(choice, Choice):
        return choice.kernel, choice.index, str(choice.config)
    parts = list(choice) if isinstance(choice, list | tuple) else []
    if len(parts) in (2, 3):
        kernel, index, *text = parts
        valid_text = not text or isinstance(text[0], str)
        if isinstance(kernel, str) and type(index) is int and index >= 0 and valid_text:
            return kernel, index, text[0] if text else None
    raise ValueError(
        f"a choice is a Choice, (kernel: str, index: int >= 0) or [kernel, index, config text], "
        f"got {choice!r}"
    )


# Interpreting ------------------------------------------------------------------------------------

_adapters: list[Callable[[], contextlib.AbstractContextManager[Any]]] = []


def interpreter_adapter(
    factory: Callable[[], contextlib.AbstractContextManager[Any]],
) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    """Register ``factory()`` (a context manager) to be entered around every outermost
    :func:`interpreting` scope of a thread; returns ``factory`` (use it as a decorator).

    For what a library needs on a CPU that no general rule gives it (a module flag computed from
    the GPU, a call that asks the driver); such an adapter belongs in the library's plugin module.
    It patches process-wide state, so it should not be used while other threads compile.
    """
    if not callable(factory):
        raise TypeError(f"factory must be callable, got {factory!r}")
    if factory not in _adapters:
        _adapters.append(factory)
    return factory


def remove_interpreter_adapter(
    factory: Callable[[], contextlib.AbstractContextManager[Any]],
) -> None:
    """Unregister an adapter :func:`interpreter_adapter` registered (no error if it is not)."""
    if factory in _adapters:
        _adapters.remove(factory)


@contextlib.contextmanager
def interpreting(*, debug: bool = False) -> Iterator[None]:
    """Run this thread's Triton launches on CPU tensors in Triton's interpreter.

    Inside: ``kernel[grid](...)`` of a ``@triton.jit`` function, also through ``triton.autotune``
    (each launch takes the first config that ``early_config_prune`` leaves, unless
    :func:`pinned_configs` chooses; it never benchmarks) and ``triton.heuristics``, runs in the
    interpreter when none of its tensor arguments lives off the CPU; nested ``@triton.jit``
    helpers and ``tl.*`` library functions run interpreted inside it. bfloat16 tensors compute as
    bfloat16 numbers (rounded to nearest even after each operation, as on a GPU), which Triton's
    interpreter alone does not do, and ``tl.sum`` of fp16/bf16 adds in the dtype along a tree, as
    a GPU does (NumPy sums fp16 in float32 and bf16 in sequence). Launches on GPU tensors compile
    as before. Scopes nest; other threads are not affected, except torch's autograd workers while
    they run a backward pass for this thread (``kernels._triton_interp.ThreadScopes``).
    Everything is restored on exit, also when the body raises.

    Loop variables of ``range``/``tl.range`` loops are integer tensors of the type the compiler
    gives them (Triton's interpreter alone makes them Python ints: ``i.to(tl.int64)`` fails there
    and ``i * BLOCK`` never wraps around in int32 as it does compiled).

    Args:
        debug: run every launch as ``debug=True`` (``TRITON_DEBUG=1``) compiles it:
            ``tl.device_assert`` checked and integer arithmetic checked for int32 overflow (each
            an ``InterpreterError``; slower). Without it, a kernel jit'ed with ``debug=True`` and
            ``TRITON_DEBUG=1`` still turn it on, as they do compiled.
    """
    if not isinstance(debug, bool):
        raise TypeError(f"debug must be a bool, got {debug!r}")
    options = _interp.LaunchOptions(
        fast=not debug, bf16=True, tensor_loops=True, tree_sums=True, debug=debug
    )
    outermost = _interp.scope_options() is None
    with contextlib.ExitStack() as stack:
        if outermost:
            for factory in list(_adapters):
                stack.enter_context(factory())
        _interp.push_scope(options)
        stack.callback(_interp.pop_scope, options)
        yield


# Pinned autotune configs -------------------------------------------------------------------------


@dataclasses.dataclass
class _Pins:
    chooser: Chooser
    first_launch: bool
    record: list[Choice] = dataclasses.field(default_factory=list)
    memo: dict[str, int] = dataclasses.field(default_factory=dict)
    tuned: set[tuple[str, tuple[Any, ...]]] = dataclasses.field(default_factory=set)
    # Configs the device could not run (kernel -> indices): skipped as the autotuner skips them.
    unfit: dict[str, set[int]] = dataclasses.field(default_factory=dict)


@contextlib.contextmanager
def pinned_configs(
    chooser: Chooser | None = None, *, first_launch: bool = False
) -> Iterator[list[Choice]]:
    """Pin the config of every autotuned launch of this thread to the one ``chooser`` picks.

    For each launch of a ``triton.autotune`` kernel with more than one config, the candidates are
    its configs left by its ``early_config_prune`` (its ``perf_model``/``top_k`` are not used).
    The first launch of a kernel in the scope asks ``chooser``; later launches of that kernel
    reuse the pick while their candidates hold it, and ask again otherwise. The launch then runs
    as the autotuner runs a config: the config's kwargs and options (num_warps, num_stages...), its
    ``pre_hook``, ``triton.heuristics`` computed as usual; never a benchmark, never the autotuner's
    memory or disk cache. Works compiled and inside :func:`interpreting`. Scopes nest (the
    innermost chooses and records); other threads are not affected, except torch's autograd
    workers while they run a backward pass for this thread (a CUDA backward runs there).

    Args:
        chooser: ``chooser(kernel, candidates) -> position`` (see :data:`Chooser`); None takes the
            first candidate.
        first_launch: run each (kernel, tuning key) the first time as the autotuner runs a key it
            has just tuned: ``reset_to_zero`` arguments zeroed first (the reset it makes after
            benchmarking). By default every launch runs as the autotuner runs a key tuned earlier
            in the process (a library that relies on that reset accumulates into stale memory
            there, and here).

    Yields:
        The list of :class:`Choice` made in the scope, in order (filled as launches happen).
    """
    if chooser is not None and not callable(chooser):
        raise TypeError(f"chooser must be callable as chooser(kernel, candidates), got {chooser!r}")
    pins = _Pins(chooser=chooser or first, first_launch=bool(first_launch))
    _pin_scopes.push(pins)
    try:
        yield pins.record
    finally:
        _pin_scopes.pop(pins)


_pin_scopes = _interp.ThreadScopes()


def _innermost_pins() -> _Pins | None:
    pins: _Pins | None = _pin_scopes.current()
    return pins


def autotuned_name(autotuner: Autotuner) -> str:
    """The stable name :func:`pinned_configs` gives an autotuned kernel: ``module.qualname``."""
    fn = autotuner.base_fn
    return f"{fn.__module__}.{fn.__qualname__}"


def _candidates(
    autotuner: Autotuner, nargs: dict[str, Any], kwargs: dict[str, Any]
) -> list[Candidate]:
    configs = autotuner.configs
    pruned = configs
    if autotuner.early_config_prune:
        pruned = autotuner.early_config_prune(configs, nargs, **kwargs)
        if not pruned:
            raise AutotunerError(
                f"{autotuned_name(autotuner)}: early_config_prune left no config for this launch"
            )
    if pruned is configs:
        return [Candidate(i, c) for i, c in enumerate(configs)]
    by_id = {id(c): i for i, c in enumerate(configs)}
    out = []
    made = len(configs)
    for config in pruned:
        index = by_id.get(id(config))
        if index is None:  # a pruner that copies configs: the equal one
            index = next((i for i, c in enumerate(configs) if c == config), None)
        if index is None:  # a config the pruner made
            index, made = made, made + 1
        out.append(Candidate(index, config))
    return out


def _choose(
    autotuner: Autotuner, pins: _Pins | None, nargs: dict[str, Any], kwargs: dict[str, Any]
) -> Config:
    candidates = _candidates(autotuner, nargs, kwargs)
    if pins is None or len(candidates) == 1:
        return candidates[0].config
    kernel = autotuned_name(autotuner)
    unfit = pins.unfit.get(kernel)
    if unfit:
        candidates = [c for c in candidates if c.index not in unfit]
        if len(candidates) == 1:
            return candidates[0].config
    held = pins.memo.get(kernel)
    for candidate in candidates:
        if candidate.index == held:
            return candidate.config
    position = pins.chooser(kernel, tuple(candidates))
    if isinstance(position, bool) or not isinstance(position, int):
        raise TypeError(f"the chooser must return an int position, got {position!r} for {kernel}")
    if not 0 <= position < len(candidates):
        raise ValueError(
            f"the chooser returned {position=} for {kernel}, which has {len(candidates)} candidates"
        )
    chosen = candidates[position]
    pins.memo[kernel] = chosen.index
    pins.record.append(Choice(kernel, chosen.index, chosen.config))
    return chosen.config


def _tuning_key(
    autotuner: Autotuner, nargs: dict[str, Any], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    """The key the autotuner tunes once for (its ``Autotuner.run``)."""
    args = {k: v for k, v in {**nargs, **kwargs}.items() if k in autotuner.arg_names}
    key = [args[k] for k in autotuner.keys if k in args]
    key += [str(v.dtype) for v in args.values() if hasattr(v, "dtype")]
    return tuple(key)


_original_autotuner_run = Autotuner.run


def _unfit_errors() -> tuple[type[BaseException], ...]:
    """What the autotuner takes as "this config cannot run on this device" while benchmarking
    (and skips the config): too much shared memory or registers, a failed ptxas, a
    compile-time assertion of the config."""
    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime import errors

    found = (getattr(errors, name, None) for name in ("OutOfResources", "PTXASError"))
    return (CompileTimeAssertionFailure, *(e for e in found if isinstance(e, type)))


def _autotuner_run(self: Autotuner, *args: Any, **kwargs: Any) -> Any:
    pins = _innermost_pins()
    if pins is None and _interp.routes(args, kwargs) is None:
        return _original_autotuner_run(self, *args, **kwargs)
    if pins is None or len(self.configs) == 1:
        return _run_config(self, pins, args, kwargs)
    # A pinned config the device cannot run is one the autotuner never picks (its benchmark
    # skips it): another is chosen among the rest, and only a launch that no candidate can run
    # fails (a library whose every config overflows the device has a bug).
    kernel = autotuned_name(self)
    while True:
        made = len(pins.record)
        try:
            return _run_config(self, pins, args, kwargs)
        except _unfit_errors():
            held = pins.memo.pop(kernel, None)
            rest = _candidates(self, dict(zip(self.arg_names, args, strict=False)), kwargs)
            unfit = pins.unfit.setdefault(kernel, set())
            if held is None or all(c.index in unfit | {held} for c in rest):
                raise
            unfit.add(held)
            del pins.record[made:]  # the record names the configs that ran


def _run_config(
    self: Autotuner, pins: _Pins | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    nargs = dict(zip(self.arg_names, args, strict=False))
    self.nargs = nargs
    try:
        if len(self.configs) == 1:  # the autotuner neither prunes nor tunes then
            config = self.configs[0]
        else:
            config = _choose(self, pins, nargs, kwargs)
        self.best_config = config
        full_nargs = {**nargs, **kwargs, **config.all_kwargs()}
        if pins is not None and pins.first_launch and len(self.configs) > 1:
            tuning_key = (autotuned_name(self), _tuning_key(self, nargs, kwargs))
            if tuning_key not in pins.tuned:
                pins.tuned.add(tuning_key)
                self.pre_hook(full_nargs, reset_only=True)
        if config.pre_hook is not None:
            config.pre_hook(full_nargs)
        return self.fn.run(*args, **kwargs, **config.all_kwargs())
    finally:
        self.nargs = None


Autotuner.run = _autotuner_run  # type: ignore[method-assign]
