"""``fuzz.triton_runtime`` on a third-party-style kernel package (the top of this file: jit kernels,
a jit helper, ``triton.autotune`` with three configs over ``triton.heuristics``, a ``reset_to_zero``
atomic accumulation, an ``early_config_prune``) launched through its own Python wrappers, as a
library launches its kernels: the harness reaches them only through the scopes."""

from __future__ import annotations

import json
import re
import threading

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime.autotuner import Autotuner

from fuzz.triton_runtime import (
    ReplayError,
    autotuned_name,
    interpreting,
    pinned_configs,
    positions,
    replay,
)
from kernels import _triton_interp

# The package ---------------------------------------------------------------------------------------

BLOCKS = (16, 32, 64)
CONFIGS = [
    triton.Config({"BLOCK": b}, num_warps=w, num_stages=s)
    for b, w, s in ((16, 1, 2), (32, 2, 3), (64, 4, 4))
]


def _prune(configs, nargs, **kwargs):
    """Blocks no wider than the input needs (at least 16)."""
    width = max(16, triton.next_power_of_2(nargs["n"]))
    return [c for c in configs if c.kwargs["BLOCK"] <= width]


@triton.jit
def _scaled(x, scale):
    return x * scale


@triton.autotune(
    configs=CONFIGS,
    key=["n"],
    reset_to_zero=["out_ptr"],
    prune_configs_by={"early_config_prune": _prune},
)
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def _sum_kernel(
    x_ptr,
    out_ptr,
    block_ptr,
    n,
    scale,
    BLOCK: tl.constexpr,
    EVEN: tl.constexpr,
    PLANTED: tl.constexpr,
):
    """``out += scale * sum(x)`` by atomics over programs of BLOCK elements; ``block`` gets BLOCK
    and EVEN. PLANTED: a bug of the BLOCK=64 config only (it drops the last element)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    if PLANTED and BLOCK == 64:
        x = tl.where(offs == n - 1, 0.0, x)
    tl.atomic_add(out_ptr, tl.sum(_scaled(x, scale), axis=0))
    tl.store(block_ptr, BLOCK)
    tl.store(block_ptr + 1, EVEN)


@triton.jit
def _loop_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """One program: a runtime loop whose variable the body widens to int64, as compiled code may."""
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start.to(tl.int64) + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def library_sum(x, scale=1.0, *, planted=False, out=None):
    """The library's entry point: ``scale * x.sum()``; also returns (BLOCK, EVEN) of the launch."""
    n = x.numel()
    out = torch.zeros(1, dtype=torch.float32, device=x.device) if out is None else out
    block = torch.zeros(2, dtype=torch.int32, device=x.device)
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    _sum_kernel[grid](x, out, block, n, scale, PLANTED=planted)
    return out, tuple(block.tolist())


def library_loop_sum(x, block=16):
    out = torch.empty(1, dtype=torch.float32, device=x.device)
    _loop_kernel[(1,)](x, out, x.numel(), BLOCK=block)
    return out


SUM = autotuned_name(_sum_kernel)
# What a compiled launch of CPU tensors raises: without a GPU, that there is no driver; with one,
# that the pointers are not device memory.
COMPILED_ON_CPU = r"0 active drivers|cannot be accessed from Triton|cpu tensor|Pointer argument"


# Interpreting ---------------------------------------------------------------------------------------


def test_name_of_the_autotuned_kernel():
    assert SUM.endswith("._sum_kernel") and isinstance(_sum_kernel, Autotuner)


def test_library_runs_in_scope_and_only_there():
    x = torch.arange(100, dtype=torch.float32) / 7
    with pytest.raises((RuntimeError, ValueError), match=COMPILED_ON_CPU):
        library_sum(x)
    with interpreting():
        out, (block, even) = library_sum(x, 0.5)
        loop = library_loop_sum(x)
    assert torch.allclose(out, 0.5 * x.sum()) and torch.allclose(loop, x.sum())
    assert (block, even) == (16, 0)  # the first config the pruner leaves (it leaves all three)
    with pytest.raises((RuntimeError, ValueError), match=COMPILED_ON_CPU):  # nothing changed
        library_sum(x)


def test_a_launch_on_non_cpu_tensors_compiles_as_before_inside_the_scope(monkeypatch):
    """Inside the scope only launches on CPU tensors are interpreted: the harness's compiled
    targets (GPU tensors) compile. With a GPU: a CUDA launch runs compiled; without one, a meta
    tensor reaches the compiled launch path (which finds no driver)."""
    monkeypatch.setattr(_triton_interp, "_interpreted_with", lambda *a: pytest.fail("interpreted"))
    if torch.cuda.is_available():
        x = torch.ones(40, device="cuda")
        with interpreting():
            assert library_loop_sum(x).item() == 40.0
        return
    x = torch.empty(8, device="meta")
    with interpreting(), pytest.raises((RuntimeError, ValueError), match=COMPILED_ON_CPU):
        _loop_kernel[(1,)](x, x, 8, BLOCK=16)


def test_loop_variables_are_tensors_of_the_compiled_type():
    """Compiled, ``range`` loop variables are int32 tensors (``.to`` works); the interpreter alone
    gives Python ints, on which ``start.to(tl.int64)`` raises."""
    x = torch.ones(40)
    legacy = _triton_interp.interpreted(_loop_kernel)
    with pytest.raises(Exception, match="has no attribute 'to'"):
        legacy[(1,)](x, torch.empty(1), 40, BLOCK=16)
    with interpreting():
        assert library_loop_sum(x, block=16).item() == 40.0


@triton.jit
def _overflow_kernel(out_ptr, n):
    for i in range(0, n, 1024):
        tl.store(out_ptr + i // 1024, i * 1048576)


def test_int32_loop_arithmetic_wraps_as_compiled_and_debug_finds_the_overflow():
    """``i * 2**20`` of an int32 loop variable wraps around when compiled (3072 * 2**20 > 2**31):
    so it does in the scope (on a Python int it could not), and ``debug=True`` reports it as
    ``TRITON_DEBUG=1`` does compiled."""
    out = torch.zeros(4, dtype=torch.int32)
    with interpreting():
        _overflow_kernel[(1,)](out, 4096)
    want = (torch.arange(4, dtype=torch.int64) * 1024 * 2**20 + 2**31) % 2**32 - 2**31
    assert out.tolist() == want.tolist() and out[3].item() < 0
    with interpreting(debug=True), pytest.raises(Exception, match="int32 overflow"):
        _overflow_kernel[(1,)](out, 4096)


def test_threads_outside_the_scope_are_not_affected():
    x = torch.ones(16)
    inside, done = threading.Event(), threading.Event()
    seen: list[BaseException] = []

    def other():
        inside.wait()
        try:
            library_sum(x)
        except BaseException as e:
            seen.append(e)
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with interpreting():
        inside.set()
        done.wait(timeout=60)
        assert library_sum(x)[0].item() == 16.0
    thread.join()
    assert len(seen) == 1 and re.search(COMPILED_ON_CPU, str(seen[0]))


def test_scopes_nest_and_restore_after_an_exception():
    x = torch.ones(16)
    before = _lang_snapshot()
    with pytest.raises(ZeroDivisionError), interpreting():
        with interpreting(debug=True):
            library_sum(x)
        library_sum(x)
        raise ZeroDivisionError
    assert _triton_interp.scope_options() is None
    with pytest.raises(Exception, match="int32 overflow"), interpreting(debug=True):
        _overflow_kernel[(1,)](torch.zeros(4, dtype=torch.int32), 4096)
    assert _triton_interp.scope_options() is None
    assert _lang_snapshot() == before
    with pytest.raises((RuntimeError, ValueError), match=COMPILED_ON_CPU):
        library_sum(x)


def _lang_snapshot():
    import inspect

    import triton.runtime.interpreter as interp

    objs = (
        tl,
        tl.core,
        tl.math,
        tl.core.tensor,
        tl.core.tensor_descriptor_base,
        interp,
        interp.InterpreterBuilder,
    )
    return {(id(o), n): m for o in objs for n, m in inspect.getmembers(o)}


# Pinned configs ------------------------------------------------------------------------------------


def test_every_config_is_reachable_and_pinned():
    x = torch.arange(100, dtype=torch.float32)
    for position, block in enumerate(BLOCKS):
        with interpreting(), pinned_configs(positions([position])) as choices:
            out, (got, even) = library_sum(x)
        assert got == block and even == (100 % block == 0)
        assert torch.equal(out, x.sum().reshape(1))
        assert [(c.kernel, c.index, c.config.kwargs) for c in choices] == [
            (SUM, position, {"BLOCK": block})
        ]


def test_the_candidates_are_the_pruned_configs_and_the_index_the_full_one():
    asked = []

    def chooser(kernel, candidates):
        asked.append((kernel, [c.index for c in candidates]))
        return len(candidates) - 1

    with interpreting(), pinned_configs(chooser) as choices:
        assert library_sum(torch.ones(20))[1][0] == 32  # 20 needs 32: BLOCK 64 is pruned
        library_sum(torch.ones(5))  # one candidate (16): nobody is asked
    assert asked == [(SUM, [0, 1])] and [c.index for c in choices] == [1]
    with interpreting(), pinned_configs(positions([0])):
        # the first candidate without a chooser's say: interpreting() alone does the same
        assert library_sum(torch.ones(20))[1][0] == 16


def test_a_pick_holds_for_the_kernel_within_a_scope_while_its_candidates_allow():
    with interpreting(), pinned_configs(positions([2, 0])) as choices:
        assert library_sum(torch.ones(100))[1][0] == 64
        assert library_sum(torch.ones(90))[1][0] == 64  # held: same config for the same kernel
        assert library_sum(torch.ones(20))[1][0] == 16  # 64 is pruned: asked again (pick 0)
    assert [c.index for c in choices] == [2, 0]


def test_the_recorded_choices_replay():
    x = torch.linspace(-1, 1, 77)
    with interpreting(), pinned_configs(positions([1])) as choices:
        first = library_sum(x)
    saved = json.loads(json.dumps([c.record() for c in choices]))  # as a reproducer keeps them
    with interpreting(), pinned_configs(replay(saved)) as again:
        assert library_sum(x) == first
    assert again == choices
    with interpreting(), pinned_configs(replay([(c.kernel, c.index) for c in choices])):
        assert library_sum(x) == first


def test_a_replay_that_does_not_fit_is_a_clear_error():
    with interpreting(), pinned_configs(replay([(SUM, 2)])):
        with pytest.raises(ReplayError, match=r"index=2 is not among have=\[0, 1\]"):
            library_sum(torch.ones(20))  # 20 elements: BLOCK 64 (index 2) is pruned
    with interpreting(), pinned_configs(replay([])):
        with pytest.raises(ReplayError, match="recording does not have"):
            library_sum(torch.ones(20))
    other_machine = [SUM, 1, "BLOCK: 64, num_warps: 4, num_ctas: 1, num_stages: 4, maxnreg: None"]
    with interpreting(), pinned_configs(replay([other_machine])):
        with pytest.raises(ReplayError, match="config list differs on this machine"):
            library_sum(torch.ones(100))


def test_a_config_specific_bug_is_found_only_by_pinning_its_config():
    x = torch.ones(100)
    with interpreting():  # interpreting() alone takes the first config, as a GPU may
        assert library_sum(x, planted=True)[0].item() == 100.0
    wrong = []
    for position in range(3):
        with interpreting(), pinned_configs(positions([position])) as choices:
            if library_sum(x, planted=True)[0].item() != 100.0:
                wrong.append(choices[0].config.kwargs["BLOCK"])
    assert wrong == [64]


def test_nothing_benchmarks_or_asks_the_driver(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("benchmarked or asked the driver")

    import triton.testing
    from triton.runtime.driver import DriverConfig

    monkeypatch.setattr(Autotuner, "_bench", forbidden)
    monkeypatch.setattr(Autotuner, "check_disk_cache", forbidden)
    monkeypatch.setattr(triton.testing, "do_bench", forbidden)
    monkeypatch.setattr(DriverConfig, "active", property(forbidden))
    x = torch.ones(100)
    with interpreting():
        library_sum(x)
    with interpreting(), pinned_configs(positions([1])):
        library_sum(x)
    assert _sum_kernel.cache == {}  # the autotuner's memory cache stays untouched too


def test_a_compiled_launch_gets_the_configs_kwargs_and_options(monkeypatch):
    """The compiled path (what a GPU runs): pinned_configs hands JITFunction.run the config's
    kwargs, num_warps and num_stages, the heuristics' values, and never tunes."""
    launched = []
    monkeypatch.setattr(
        _triton_interp, "_original_run", lambda self, *a, grid, warmup, **kw: launched.append(kw)
    )
    monkeypatch.setattr(Autotuner, "_bench", lambda *a, **k: pytest.fail("benchmarked"))
    with pinned_configs(positions([2])) as choices:
        library_sum(torch.ones(64))
    assert len(choices) == 1 and len(launched) == 1
    got = {k: launched[0][k] for k in ("BLOCK", "EVEN", "num_warps", "num_stages", "PLANTED")}
    assert got == {"BLOCK": 64, "EVEN": True, "num_warps": 4, "num_stages": 4, "PLANTED": False}


def test_reset_to_zero_as_the_autotuner_applies_it():
    """A library that leaves its accumulator to the autotuner's reset (allocated with stale
    contents) is right on a key's first launch, after tuning, and wrong on every launch after:
    pinned_configs runs launches as later launches by default, and as first ones on request."""
    x = torch.ones(100)

    def stale():
        return torch.full((1,), 5.0)

    with interpreting(), pinned_configs():
        assert library_sum(x, out=stale())[0].item() == 105.0
    with interpreting(), pinned_configs(first_launch=True):
        assert library_sum(x, out=stale())[0].item() == 100.0
        assert library_sum(x, out=stale())[0].item() == 105.0  # the same key again: no reset


def test_config_pre_hooks_run_before_the_launch():
    seen = []
    hooked = [
        triton.Config(c.kwargs, num_warps=c.num_warps, pre_hook=lambda a: seen.append(a["n"]))
        for c in CONFIGS
    ]
    original = _sum_kernel.configs
    _sum_kernel.configs = hooked
    try:
        with interpreting(), pinned_configs(positions([1])):
            library_sum(torch.ones(33))
    finally:
        _sum_kernel.configs = original
    assert seen == [33]


def _unfit_on_device(blocks):
    """Configs whose launch fails as one the device cannot hold does (Triton's OutOfResources
    before anything runs), for the BLOCKs given."""
    from triton.runtime.errors import OutOfResources

    def hook(block):
        def check(args):
            if block in blocks:
                raise OutOfResources(393216, 232448, "shared memory")

        return check

    return [
        triton.Config(c.kwargs, num_warps=c.num_warps, pre_hook=hook(c.kwargs["BLOCK"]))
        for c in CONFIGS
    ]


def test_a_pinned_config_the_device_cannot_run_is_skipped_as_the_autotuner_skips_it():
    from triton.runtime.errors import OutOfResources

    original = _sum_kernel.configs
    try:
        _sum_kernel.configs = _unfit_on_device({64})
        x = torch.ones(100)
        with interpreting(), pinned_configs(positions([2, 1])) as choices:
            out, (block, _) = library_sum(x)
            assert block == 32 and out.item() == 100.0  # 64 cannot run: the next pick, 32
            assert library_sum(x)[1][0] == 32  # held for the kernel, 64 never tried again
        assert [c.index for c in choices] == [1]  # the record names the config that ran
        with interpreting(), pinned_configs(replay([c.record() for c in choices])):
            assert library_sum(x)[1][0] == 32
        _sum_kernel.configs = _unfit_on_device({16, 32, 64})
        with interpreting(), pinned_configs(positions([2])):
            with pytest.raises(OutOfResources):  # no config fits: the library's bug to report
                library_sum(x)
    finally:
        _sum_kernel.configs = original


@pytest.mark.parametrize(
    "chooser, error",
    [
        (lambda k, c: 3, "returned position=3"),
        (lambda k, c: "0", "must return an int"),
        (lambda k, c: True, "must return an int"),
    ],
)
def test_a_bad_chooser_is_a_clear_error(chooser, error):
    with (
        interpreting(),
        pinned_configs(chooser),
        pytest.raises((ValueError, TypeError), match=error),
    ):
        library_sum(torch.ones(100))


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="chooser must be callable"), pinned_configs(3):  # type: ignore[arg-type]
        pass
    with pytest.raises(TypeError, match="debug must be a bool"), interpreting(debug=1):  # type: ignore[arg-type]
        pass
    with pytest.raises(ValueError, match="picks must be integers >= 0"):
        positions([-1])
    for bad in (("k", -1), ("k",), ("k", 1.0), ["k", 1, 2], "k1"):
        with pytest.raises(ValueError, match="a choice is"):
            replay([bad])


# Side by side with the harness's own targets -------------------------------------------------------


def _own_interpreted():
    """The harness's softmax target, interpreted (its own twins, not the scope's routing)."""
    from kernels.softmax.triton import softmax

    x = torch.linspace(-3, 3, 2 * 40).reshape(2, 40)
    return softmax(x, interpret=True)


def _own_compiled(monkeypatch, tmp_path, tag):
    """The harness's softmax kernel compiled for sm_90 (no GPU needed), bypassing Triton's
    cache so that every call traces the source: a patched ``triton.language`` left behind by an
    interpreted launch would show in (or break) the compiled code."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernels.softmax.triton import _softmax_kernel as fn

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / tag))
    sig = {}
    for name in fn.arg_names:
        p = fn.params[fn.arg_names.index(name)]
        sig[name] = (
            "constexpr"
            if p.is_constexpr
            else "*u8"
            if name == "mask_ptr"
            else "*fp32"
            if name.endswith("_ptr")
            else "fp32"
            if name == "scale"
            else "i32"
        )
    consts = {
        (i,): 16 if "BLOCK" in n else False
        for i, n in enumerate(fn.arg_names)
        if fn.params[i].is_constexpr
    }
    return triton.compile(ASTSource(fn, sig, consts), target=GPUTarget("cuda", 90, 32)).asm["ttir"]


def test_own_targets_work_before_during_and_after_a_scope(monkeypatch, tmp_path):
    x = torch.ones(100)
    interpreted_before = _own_interpreted()
    compiled_before = _own_compiled(monkeypatch, tmp_path, "before")
    with interpreting(), pinned_configs(positions([2])):
        library_sum(x)
        assert torch.equal(_own_interpreted(), interpreted_before)
        assert _own_compiled(monkeypatch, tmp_path, "during") == compiled_before
        assert library_sum(x)[0].item() == 100.0
    assert torch.equal(_own_interpreted(), interpreted_before)
    assert _own_compiled(monkeypatch, tmp_path, "after") == compiled_before
    with interpreting():  # and a scope after all of that
        assert library_sum(x)[0].item() == 100.0


def test_autograd_workers_follow_the_scopes_of_the_one_scoped_thread(monkeypatch):
    """A CUDA backward pass runs on torch's autograd device thread: while it runs a graph task,
    a thread without scopes of its own follows those of the one thread that has any (with two
    scoped threads it cannot tell whose backward it runs, and follows none)."""
    from fuzz import triton_runtime

    seen = []

    def look():
        seen.append((_triton_interp.scope_options(), triton_runtime._innermost_pins()))

    def in_thread(fn):
        thread = threading.Thread(target=fn)
        thread.start()
        thread.join()

    monkeypatch.setattr(_triton_interp, "_in_autograd_task", lambda: True)
    with interpreting(debug=True), pinned_configs() as choices:
        in_thread(look)  # a backward of this thread's
        ready, release = threading.Event(), threading.Event()

        def other_scoped():
            with interpreting():
                ready.set()
                release.wait(timeout=60)

        other = threading.Thread(target=other_scoped)
        other.start()
        ready.wait(timeout=60)
        in_thread(look)  # two threads with scopes: whose backward?
        release.set()
        other.join()
    monkeypatch.setattr(_triton_interp, "_in_autograd_task", lambda: False)
    with interpreting():
        in_thread(look)  # not a backward pass: its own (no) scope
    (options, pins), (options_two, _), (options_three, _) = seen
    assert options.debug and pins is not None and pins.record is choices
    assert options_two is None and options_three is None


def test_adapters_are_entered_around_the_outermost_scope():
    import contextlib

    from fuzz.triton_runtime import interpreter_adapter, remove_interpreter_adapter

    events = []

    @contextlib.contextmanager
    def adapter():
        events.append("enter")
        try:
            yield
        finally:
            events.append("exit")

    interpreter_adapter(adapter)
    try:
        with pytest.raises(ZeroDivisionError), interpreting():
            with interpreting():
                events.append("inner")
            raise ZeroDivisionError
    finally:
        remove_interpreter_adapter(adapter)
    with interpreting():
        pass
    assert events == ["enter", "inner", "exit"]
    with pytest.raises(TypeError, match="factory must be callable"):
        interpreter_adapter(3)  # type: ignore[arg-type]


def test_configs_a_pruner_copies_or_makes_keep_stable_indices(monkeypatch):
    """A pruner may return copies of configs (equal to the originals: their indices) or new ones
    (numbered from len(configs) in the order it returns them)."""

    def prune(configs, nargs, **kwargs):
        copies = [
            triton.Config(dict(c.kwargs), num_warps=c.num_warps, num_stages=c.num_stages)
            for c in configs[1:]
        ]
        return [*copies, triton.Config({"BLOCK": 128}, num_warps=4)]

    monkeypatch.setattr(_sum_kernel, "early_config_prune", prune)
    asked = []

    def chooser(kernel, candidates):
        asked.append([c.index for c in candidates])
        return 2

    with interpreting(), pinned_configs(chooser) as choices:
        assert library_sum(torch.ones(300))[1][0] == 128
    assert asked == [[1, 2, 3]] and choices[0].index == 3
    with interpreting(), pinned_configs(replay(choices)):
        assert library_sum(torch.ones(300))[1][0] == 128
