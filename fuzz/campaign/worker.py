"""Campaign worker processes: kernels run here, so that no kernel can take the campaign down.

The coordinator (:mod:`fuzz.campaign.runner`, through :mod:`fuzz.campaign.pool`) starts one
worker per device slot (spread over the visible GPUs, with ``CUDA_VISIBLE_DEVICES`` set before
torch or JAX initialise) and sends it *slices* (:class:`fuzz.campaign.messages.Hunt`): fuzz one
target on one backend for so many seconds. The worker streams back what it finds as soon as it
finds it (with the reproducer already written), so a worker that dies loses nothing.

Before every example the worker persists the case it is about to run (the *in-flight record*,
:mod:`fuzz.campaign.inflight`) and stamps the start time in memory shared with the parent. If
the worker dies (a segfault, ``os.abort``, a lost CUDA context, the OOM killer) or an example
outlives the per-example timeout (the parent kills it), the parent turns the in-flight record
into a ``crash`` or ``hang`` finding with a reproducer and starts a fresh worker
(:mod:`fuzz.campaign.faults`).

A CUDA error that poisons the context (illegal address, launch failure) surfaces as a Python
exception; every later launch in that process would fail too, so the worker records the finding
and exits with :data:`fuzz.campaign.process.EXIT_CONTEXT_LOST` rather than let Hypothesis
"shrink" it. How a worker process keeps its memory maps under the limit, splits its GPU's memory
and dies with its campaign: :mod:`fuzz.campaign.process`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import os
import signal
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

from fuzz.campaign import messages as M
from fuzz.campaign.inflight import clear_inflight
from fuzz.campaign.messages import SlicePlan, WorkerConfig
from fuzz.campaign.process import (
    EXIT_CONTEXT_LOST,
    EXIT_DEVICE_MEMORY,
    EXIT_RECYCLE,
    MapBudget,
    cap_torch_memory,
    die_with_campaign,
    exit_worker,
    map_limit,
    share_gpu_memory,
)
from fuzz.campaign.slice_run import SliceRun

if TYPE_CHECKING:
    from fuzz.profiles import HuntOptions


def _setup(config: WorkerConfig) -> None:
    if config.cuda_device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = config.cuda_device
    torch_share = share_gpu_memory(config.gpu_share)
    # The parent handles Ctrl-C for the whole campaign; a worker finishes or is killed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    log = open(config.log, "a", buffering=1)
    # What libraries write to file descriptor 2 (LLVM's "Cannot allocate memory", XLA's and
    # Triton's warnings) goes to the log too: the parent reads it to tell why a worker died. So
    # does what a kernel prints (descriptor 1, Python's and C's): it flooded the campaign's
    # console, and its worker's log, where it belongs, stayed empty.
    if sys.stdout is not None:
        sys.stdout.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    faulthandler.enable(file=log, all_threads=True)
    _probe(log)
    sys.stdout = sys.stderr = log
    from fuzz.target import load_builtin, load_plugin

    load_builtin()
    for spec in config.plugins:
        load_plugin(spec)
    if torch_share is not None:
        cap_torch_memory(torch_share)


def _probe(log: Any) -> None:
    """The parent's hang probe: SIGUSR1 dumps every thread's stack into the log
    (``fuzz.campaign.pool.kill``). Registered again before each job: a library loaded since may
    have taken the signal (a GPU worker killed past its slice's hard limit left an empty log).
    Unregistered first: registering a signal faulthandler holds already does not take it back
    from whoever took it since."""
    faulthandler.unregister(signal.SIGUSR1)
    faulthandler.register(signal.SIGUSR1, file=log, all_threads=True)


def worker_main(conn: Any, config: WorkerConfig, started: Any) -> None:
    """Entry point of a worker process (``multiprocessing`` spawn)."""
    try:
        die_with_campaign(config.parent_pid)
        _setup(config)
        from fuzz.campaign.database import open_database

        db = open_database(config.db, config.db_shared, fallback=config.db_fallback)
        _pause_clock_while_compiling(started)
        maps = MapBudget(map_limit())
    except BaseException as e:
        conn.send(M.Fatal(f"{type(e).__name__}: {e}", traceback.format_exc()))
        return
    conn.send(M.Ready(os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if isinstance(msg, M.Stop):
            return
        _probe(sys.stderr)  # (the log: ``_setup`` made it the process's stderr)
        code = serve(conn, config, db, started, msg, maps)
        if code == EXIT_CONTEXT_LOST:  # its slice's summary is sent: a fresh process takes over
            exit_worker(code)
        if code is not None:
            sys.exit(code)


def serve(
    conn: Any, config: WorkerConfig, db: Any, started: Any, msg: Any, maps: Any
) -> int | None:
    """Runs a slice or a replay (a process worker's, or a Ray actor's); returns the exit code of
    a worker that must be replaced (a lost CUDA context: nothing more may run here; too many
    memory maps), else None."""
    from fuzz.engine import context_lost

    if isinstance(msg, M.Hunt):
        _hunt(conn, config, db, started, msg.plan, maps)
    elif isinstance(msg, M.Replay):
        _replay(conn, started, msg)
    if context_lost():
        return EXIT_CONTEXT_LOST
    return EXIT_RECYCLE if maps.recycle is not None else None


def _pause_clock_while_compiling(started: Any) -> None:
    """A running example's clock (``started``: the wall time it began, 0 when idle) stops while a
    kernel compiles: the value turns negative (minus the time compiling began; the campaign then
    applies its much longer compile timeout) and restarts from zero once the compile is done."""
    from fuzz.timing import watch_compiles

    def start() -> None:
        if started.value > 0:
            started.value = -time.time()

    def end() -> None:
        if started.value < 0:
            started.value = time.time()

    watch_compiles(start, end)


def _hunt(
    conn: Any,
    config: WorkerConfig,
    db: Any,
    started: Any,
    plan: SlicePlan,
    maps: MapBudget | None = None,
) -> None:
    """Runs one slice (``plan``): a hunt of one target on one backend for so many seconds,
    streaming to the parent what it finds as it finds it, then the slice's summary."""
    from fuzz.backends import get_backend
    from fuzz.target import get

    target = checked_strategy(get(plan.target))
    run = SliceRun(
        conn,
        config,
        started,
        plan,
        maps or MapBudget(None),
        target=target,
        backend=get_backend(plan.backend),
    )
    problems_before = len(db.problems) if db is not None else 0
    memo = _memo(config.options, plan.target, plan.backend)
    if memo is not None and plan.structures:
        memo.take_in(list(plan.structures))  # compiled ahead by a compile worker
    run.memo = memo
    counts_before = dict(memo.counts) if memo is not None else {}
    if memo is not None:
        run.relengthed = memo.counts["relengthed"]
    result = _run_hunt(conn, config, db, started, plan, run)
    if result is None:
        return
    started.value = 0.0
    clear_inflight(config.inflight)
    if result.stopped == "device-memory":
        # The harness's resources, not a finding: the parent books an exhaustion and starts a
        # fresh process (what this slice found was streamed already).
        print(f"device out of memory: {result.error}", file=sys.stderr, flush=True)
        exit_worker(EXIT_DEVICE_MEMORY)
    from fuzz.backends import release_device_memory

    release_device_memory()
    if memo is not None:
        # How this slice's structures were drawn, summed per pair in the report's events: how
        # many reused a compiled variant, and of them how many with fresh lengths.
        for count, event in (
            ("reused", "structures: reused"),
            ("relengthed", "structures: reused with fresh lengths"),
        ):
            if memo.counts[count] > counts_before.get(count, 0):
                result.events[event] += memo.counts[count] - counts_before.get(count, 0)
    summary = run.summary(result)
    if memo is not None and plan.warm_up is not None:
        summary["structures"] = memo.export()  # for the workers that fuzz the pair
    summary["db_problems"] = db.problems[problems_before:] if db is not None else []
    if run.maps.check(now=True):
        summary["recycle"] = {"maps": run.maps.recycle, "limit": run.maps.limit}
        summary["stopped"] = "recycle"  # not the search space running out
    if run.disk_was_full:
        summary["stopped"] = "disk full"  # neither
    from fuzz.engine import context_lost

    if context_lost():  # it exits after this (``serve``): no new slice for it
        summary["exits"] = "context lost"
    conn.send(M.Done(plan.id, summary))


def _run_hunt(
    conn: Any, config: WorkerConfig, db: Any, started: Any, plan: SlicePlan, run: SliceRun
) -> Any:
    """The engine's hunt of ``plan``; None where the harness itself failed (the slice's
    summary, an error, is sent: the worker lives on)."""
    from fuzz import engine

    memo = run.memo
    options = config.options
    explore = memo.explore if memo is not None else None
    warm = plan.warm_up
    if warm is not None or plan.shrink_only:  # there to compile: no compile share holds it back
        options = dataclasses.replace(options, compile_share=None)
    if warm is not None and memo is not None:  # and a warm-up's every example draws a fresh
        memo.explore = warm.explore  # structure (variants to compile)
    # A warm-up also compiles launched variants at fresh lengths, where lengths compile
    # (``StructureMemo.warming``: a Pallas kernel's shape buckets).
    warming = memo.warming() if memo is not None and warm else contextlib.nullcontext()
    try:
        with warming:
            return engine.hunt(
                run.target,
                plan.backend,
                options,
                max_examples=0 if plan.shrink_only else plan.max_examples or 10**9,
                seed=plan.seed,
                database=db,
                repro_dir=None,
                time_limit=plan.time_limit,
                hard_limit=plan.hard_limit,
                known=list(plan.known),
                narrowing=None if plan.narrowing is None else dict(plan.narrowing),
                memo=memo,
                compile_spent=plan.compile_spent,
                reuse=plan.reuse,
                hooks=run.hooks(),
                resume=plan.resume,
            )
    except BaseException as e:  # the harness itself: report, keep the worker alive
        started.value = 0.0
        from fuzz.reproducer import device_out_of_memory
        from fuzz.results import trace_of

        if isinstance(e, Exception) and device_out_of_memory(f"{type(e).__name__}: {e}"):
            # The GPU's memory ran out outside an example (a shrink stage's launch, a warm-up's):
            # the harness's resources, as in an example (``fuzz.engine``), not a harness error
            # that would retire the pair (on an H100 a GLA mutant's warm-up found and shrank its
            # bug, then ran out so, and its pair was retired as broken). What it found was
            # streamed already; a fresh process takes over.
            print(f"device out of memory: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            exit_worker(EXIT_DEVICE_MEMORY)
        error = {
            "error": f"{type(e).__name__}: {e}",
            "error_trace": trace_of(e),
            "examples": 0,
            "seconds": 0.0,
            "found": [],
        }
        conn.send(M.Done(plan.id, error))
        return None
    finally:
        if memo is not None:
            memo.explore = explore  # a warm-up's "every example explores" ends with it


_MEMOS: dict[tuple[str, str], Any] = {}


def _memo(options: HuntOptions, target: str, backend: str) -> Any:
    """The case structures this worker process reuses for one pair, kept across its slices
    (``strategies.reuse.StructureMemo``; None where the profile does not reuse them)."""
    if options.reuse_share is None:
        return None
    from strategies.reuse import StructureMemo

    key = (target, backend)
    if key not in _MEMOS:
        _MEMOS[key] = StructureMemo(target_share=options.reuse_share)
    return _MEMOS[key]


def checked_strategy(target: Any) -> Any:
    """``target`` whose strategy fails with a message naming the target when it is not a
    Hypothesis strategy or draws something other than a :class:`fuzz.case.Case` (a plugin's
    mistake, which would otherwise surface as an AttributeError deep in the properties)."""
    import dataclasses
    import functools

    from hypothesis.strategies import SearchStrategy

    from fuzz.case import Case

    build = target.strategy

    def check(value: Any) -> Any:
        if not isinstance(value, Case):
            raise TypeError(
                f"the strategy of target {target.name!r} drew a {type(value).__name__}; it must "
                "draw fuzz.Case objects"
            )
        return value

    # The wrapper takes what the target's strategy takes (a run's compile-time narrowing, see
    # ``fuzz.engine.run_narrowing``) and is known as it (``fuzz.families.family_of`` unwraps it).
    @functools.wraps(build)
    def strategy(scale: str, **narrowing: Any) -> Any:
        s = build(scale, **narrowing)
        if not isinstance(s, SearchStrategy):
            raise TypeError(
                f"the strategy of target {target.name!r} returned a {type(s).__name__} for "
                f"{scale=}; it must return a Hypothesis strategy of fuzz.Case"
            )
        return s.map(check)

    return dataclasses.replace(target, strategy=strategy)


def _replay(conn: Any, started: Any, task: M.Replay) -> None:
    """Replays a reproducer of an earlier campaign (triage: still failing, or fixed?)."""
    from fuzz import reproducer

    path = task.path
    try:
        meta, data = reproducer.load(path)
        started.value = time.time()
        outcome = reproducer.replay(meta, data, path=path)  # (a moved folder: its plugin beside it)
        f = outcome.finding
        if f is None:
            result = {"status": "pass", "verdict": "no longer reproduces"}
        else:
            result = {"status": "fail", "class": f.cls, "verdict": f.summary()[:300]}
    except Exception as e:
        result = {"status": "error", "verdict": f"{type(e).__name__}: {e}"[:300]}
    started.value = 0.0
    conn.send(M.Replayed(task.slice, {"path": path, **result}))
