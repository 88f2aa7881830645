"""A campaign's worker processes on one host: start, send, poll, watch, kill, replace.

Each worker is a ``multiprocessing`` spawn process (:func:`fuzz.campaign.worker.worker_main`)
with a pipe for the typed messages (:mod:`fuzz.campaign.messages`) and a shared double, the
clock of its example in flight (0: none; minus the time a compile began while one compiles).
:meth:`ProcessPool.poll` hands the coordinator what arrived (:class:`Arrived`) and which
processes ended (:class:`Ended`); :meth:`ProcessPool.watch` says which worker's example outlived
its timeout or is compiling past the compile timeout. What those events mean (a finding, a
suspected hang, a slice to book) is the coordinator's and the policy's.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fuzz.campaign.inflight import clear_inflight, read_inflight
from fuzz.campaign.messages import Stop, WorkerConfig
from fuzz.campaign.process import count_maps
from fuzz.campaign.threads import children_share_cpus
from fuzz.campaign.worker import worker_main


@dataclass
class Job:
    """What a worker is doing: a slice of the policy's (``plan``), or a replay of a reproducer
    (``replay_path``: triage, or ``confirm`` a suspected hang with a longer ``timeout``)."""

    id: int
    started: float
    plan: Any = None  # fuzz.campaign.policy.SlicePlan
    replay_path: str | None = None
    timeout: float | None = None  # the per-example timeout of a replay (None: the campaign's)
    confirm: dict[str, Any] | None = None  # a suspected hang this replay confirms or clears
    hard_deadline: float = float("inf")

    @property
    def is_replay(self) -> bool:
        return self.plan is None


@dataclass
class WorkerHandle:
    slot: int
    device: str | None
    config: WorkerConfig
    role: str = "fuzz"  # or "compile": warms pairs up (compiles their variants) ahead
    process: Any = None
    conn: Any = None
    clock: Any = None  # the shared double: start time of the example in flight (see module)
    compiling: bool = False  # the watchdog last saw it compiling
    ready: bool = False
    job: Job | None = None
    kill_reason: str | None = None
    restarts: int = 0
    startup_failures: int = 0
    fatal: str | None = None  # why its set-up failed (an exception: the same every time)
    maps: int = 0  # its memory maps, last sampled (see fuzz.campaign.process.MapBudget)
    maps_sampled: float = 0.0
    log_offset: int = 0  # the size of its log when its current job began
    recycles: int = 0
    host: str = ""  # where it runs (a cluster's node; "" on this host)

    @property
    def alive(self) -> bool:
        return self.process is not None

    def as_dict(self) -> dict[str, Any]:
        """The worker as the report lists it."""
        node = {"node": self.host} if self.host else {}
        return {
            "slot": self.slot,
            "role": self.role,
            "device": self.device,
            **node,
            "restarts": self.restarts,
            "recycles": self.recycles,
        }


@dataclass(frozen=True)
class Arrived:
    worker: WorkerHandle
    message: Any


@dataclass(frozen=True)
class Exited:
    worker: WorkerHandle
    code: int | None


@dataclass
class ProcessPool:
    """The worker processes of one host (``slots`` configs: fuzzing workers first)."""

    configs: Sequence[WorkerConfig]
    roles: Sequence[str]
    share_cpus: int = 1  # processes that share this host's CPUs (thread pools sized to it)
    workers: list[WorkerHandle] = field(default_factory=list)

    def start_all(self) -> None:
        for cfg, role in zip(self.configs, self.roles, strict=True):
            w = WorkerHandle(cfg.slot, cfg.cuda_device, cfg, role=role)
            self.start(w)
            self.workers.append(w)

    def start(self, w: WorkerHandle) -> None:
        """Starts a fresh process for ``w``."""
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        w.clock = ctx.Value("d", 0.0, lock=False)
        w.process = ctx.Process(
            target=worker_main,
            args=(child, w.config, w.clock),
            name=f"fuzz-worker-{w.slot}",
            daemon=True,
        )
        with children_share_cpus(self.share_cpus):  # before the worker loads NumPy, torch
            w.process.start()
        child.close()
        w.conn = parent
        w.ready = False
        w.job = None
        w.kill_reason = None
        w.maps, w.maps_sampled = 0, 0.0  # the new process's own, from its first sample on

    def send(self, w: WorkerHandle, message: Any) -> bool:
        """Sends ``message`` to ``w``; False where its process has ended (its pipe is closed:
        the message never arrives, and its end is told by :meth:`poll`)."""
        try:
            w.conn.send(message)
        except OSError:  # (BrokenPipeError, ConnectionResetError)
            return False
        return True

    def begin(self, w: WorkerHandle, job: Job) -> None:
        """Notes that ``w`` starts ``job`` (where its log stood: what it says from now on is
        the job's)."""
        try:
            w.log_offset = os.path.getsize(w.config.log)
        except OSError:
            w.log_offset = 0
        w.job = job

    def kill(self, w: WorkerHandle, reason: str) -> None:
        w.kill_reason = reason
        if w.process is not None and w.process.is_alive():
            if reason in ("hang", "overran", "budget"):
                try:  # ask faulthandler for every thread's stack, for the finding or the note
                    before = _size(w.config.log)
                    os.kill(w.process.pid, signal.SIGUSR1)
                    # Until the dump has come (a signal to a process inside a system call is
                    # handled when it returns: 0.3 s left GPU workers' logs empty), 3 s at most.
                    time.sleep(0.3)
                    end = time.monotonic() + 2.7
                    while _size(w.config.log) == before and time.monotonic() < end:
                        time.sleep(0.1)
                    time.sleep(0.1)  # (the rest of the dump)
                except OSError:
                    pass
            w.process.kill()
            w.process.join(5)

    def exit_code(self, w: WorkerHandle) -> int | None:
        """The exit status of ``w``'s process once it has ended (None: it vanished)."""
        if w.process is None:
            return None
        code = w.process.exitcode
        if code is None:
            w.process.join(1)
            code = w.process.exitcode
        return code

    def closed(self, w: WorkerHandle) -> None:
        """``w``'s process is gone: its pipe is closed."""
        w.job = None
        w.ready = False
        if w.conn is not None:
            w.conn.close()
            w.conn = None

    def poll(self, timeout: float) -> list[Arrived | Exited]:
        """What the workers sent within ``timeout`` seconds, and which of them ended (after
        the messages they sent just before)."""
        live = [w for w in self.workers if w.process is not None and w.conn is not None]
        objs: list[Any] = [w.conn for w in live] + [w.process.sentinel for w in live]
        try:
            ready = multiprocessing.connection.wait(objs, timeout=timeout)
        except InterruptedError:
            ready = []
        events: list[Arrived | Exited] = []
        for w in live:
            ended = w.process.sentinel in ready and not w.process.is_alive()
            if w.conn in ready or ended:
                try:
                    while w.conn is not None and w.conn.poll():
                        events.append(Arrived(w, w.conn.recv()))
                except (EOFError, OSError):
                    pass
            if ended:
                events.append(Exited(w, w.process.exitcode))
        return events

    def stop(self, w: WorkerHandle) -> None:
        """Asks idle worker ``w`` to stop (everything it found has arrived), and kills it if it
        does not within a second (its teardown is not waited on)."""
        try:
            self.send(w, Stop())
        except (OSError, AttributeError):
            pass
        w.process.join(1)
        if w.process.is_alive():
            w.process.kill()
            w.process.join(3)

    # A dead worker's files (on this host) ---------------------------------------------------

    def inflight(self, w: WorkerHandle) -> tuple[dict[str, Any], Any] | None:
        """The example ``w`` was running when it ended (None: none, or unreadable)."""
        return read_inflight(w.config.inflight)

    def clear_inflight(self, w: WorkerHandle) -> None:
        clear_inflight(w.config.inflight)

    def log_tail(self, w: WorkerHandle, n: int) -> str:
        """The last ``n`` lines of ``w``'s log (faulthandler's tracebacks of a crash or hang)."""
        from fuzz.campaign.process import tail

        return tail(w.config.log, n)

    def log_since_job(self, w: WorkerHandle) -> str | None:
        """What ``w`` logged since its job began (None: unreadable)."""
        try:
            with open(w.config.log, "rb") as f:
                f.seek(w.log_offset)
                return f.read().decode(errors="replace")
        except OSError:
            return None

    def sample_maps(self, w: WorkerHandle) -> None:
        """Counts ``w``'s memory maps once a second (what its death would be put down to)."""
        if w.process is not None and time.monotonic() - w.maps_sampled >= 1.0:
            w.maps_sampled = time.monotonic()
            w.maps = count_maps(w.process.pid) or w.maps

    def example_clock(self, w: WorkerHandle) -> tuple[float, float | None]:
        """(When ``w``'s example in flight began, 0 if none; the seconds a compile in flight has
        run, None if none): the worker's clock stops while a kernel compiles."""
        st = w.clock.value if w.clock is not None else 0.0
        w.compiling = st < 0
        if st < 0:
            return -st, max(0.0, time.time() + st)
        return st, None


def slice_deadline(deadline: float, began: float, hard_limit: float) -> float:
    """A slice's hard deadline once its worker said when it began (``began``: a progress
    message's arrival less the seconds the worker has spent on the slice): a worker that starts
    the slice late (a fresh process importing torch, JAX and Triton, a loaded machine) stops its
    hunt by its own clock, and a deadline counted from the dispatch killed such slices while
    they settled their bugs. Never earlier than the dispatch's deadline."""
    return max(deadline, began + hard_limit)


def overran(
    job: Job, *, now: float, live_compile: float, compiling: float, example_since: float = 0.0
) -> bool:
    """Whether slice ``job`` is 30 s past its hard limit and the time to settle its bugs
    (``fuzz.engine.SETTLE_SECONDS``), compiling not counted (a setup cost,
    as in its time limits): neither its compiles so far (``live_compile``) nor the one in
    flight, ``compiling`` seconds long (an H100 campaign killed a Pallas GLA pair's slices twice
    while they compiled, and the pair ran 19 examples in 188 s). An example in flight that began
    before that point (``example_since``, on the same clock; 0: none) is left to its own
    timeout, which tells a hang from a slow example: the slice stops at its end (slices of
    GLA's backward on triton were killed mid-example, "its examples too slow", and their
    examples lost). A replay never overruns (its example timeout bounds it)."""
    if job.is_replay:
        return False
    from fuzz.engine import SETTLE_SECONDS

    # The hunt is given SETTLE_SECONDS past its hard limit to shrink what the limit cut, then
    # checks its bugs against the known ones: 30 s more for that and the slice's summary. (With
    # the settling inside the 30 s, a CPU slice ended 20 s past its limit on a quiet machine
    # and was killed on a loaded one.)
    limit = job.hard_deadline + SETTLE_SECONDS + 30 + live_compile + compiling
    if 0.0 < example_since <= limit:
        return False
    return now > limit


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return -1
