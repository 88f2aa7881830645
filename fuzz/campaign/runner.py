"""Fuzz campaigns: a time budget shared by many (target, backend) pairs, run in worker processes.

``python -m fuzz run`` builds a :class:`Campaign`, the coordinator. It ties together

* the scheduling policy (:mod:`fuzz.campaign.policy`: pure, no processes or clock): which pair
  each worker fuzzes next, floors, a bandit, warm-ups, retirement, widening, and each pair's
  bug ledger (:mod:`fuzz.ledger`);
* the worker processes (:mod:`fuzz.campaign.pool`, spread over the visible GPUs, each with its
  own ``CUDA_VISIBLE_DEVICES``) and *compile workers*, which warm each pair up (run its examples
  until a few in a row compile nothing new) so that its kernels are in the on-disk caches before
  a fuzzing worker takes it; the typed messages between them (:mod:`fuzz.campaign.messages`);
* what deaths, hangs and a dead campaign's leftovers are (:mod:`fuzz.campaign.faults`): a worker
  that dies (segfault, abort, lost CUDA context, OOM kill) is a ``crash`` finding and one whose
  example outlives ``example_timeout`` twice (the second time in a fresh worker with
  ``hang_confirm_factor`` times the time) a ``hang`` finding, each with a reproducer of the case
  the worker persisted before launching it; each worker's life from start to end, booked
  (:mod:`fuzz.campaign.lifecycle`: a death's job, a hang's replay, a fresh process in its place);
* the output folder (:mod:`fuzz.campaign.outdir`): its lock from start to end (a second
  campaign into the same folder stops at once, naming the one that holds it), ``report.json``
  written atomically whenever something is found and when a slice ends, the full report set
  (:mod:`fuzz.campaign.report`) at the end -- also on SIGTERM/SIGINT, with what was found so far.

It first replays the previous report's reproducers (triage: still failing or fixed), then hands
out *slices*: a few seconds of Hypothesis on one pair, compile time not counted. A pair's first
slice replays what the example database holds for it; later slices know the bugs found so far:
examples of them are hits, and the search goes on for other bugs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fuzz.backends import get_backend
from fuzz.campaign import console, estimates, report, report_files
from fuzz.campaign import messages as M
from fuzz.campaign.config import CampaignConfig, refund_cap, worker_configs
from fuzz.campaign.faults import Faults
from fuzz.campaign.lifecycle import WorkerLifeCycle
from fuzz.campaign.outdir import OutputFolder
from fuzz.campaign.pairs import PairState, Warmth, interleave
from fuzz.campaign.policy import SchedulingPolicy
from fuzz.campaign.pool import Arrived, Job, ProcessPool, WorkerHandle, overran, slice_deadline
from fuzz.campaign.process import map_limit
from fuzz.campaign.tunables import end_grace
from fuzz.engine import run_narrowing
from fuzz.target import Target


class Campaign(WorkerLifeCycle):
    """One campaign: its policy, its workers, its output folder (see the module's docstring)."""

    def __init__(
        self,
        config: CampaignConfig,
        *,
        log: Callable[[str], None] = print,
        progress: Any = None,
    ) -> None:
        self.config = config
        self.log = log
        self.progress = progress
        pairs = interleave(
            [PairState(t, b) for t in config.targets for b in config.backends if _runs(t, b)]
        )
        for p in pairs:
            # A few compile-time choices per pair (dtype, tiles, head dims: each a kernel
            # variant), compiled once (ahead, by a compile worker) and reused by every slice;
            # they grow each time the pair has had another floor's worth with them (widening).
            p.narrowing = run_narrowing(p.target, config.options, config.seed)
            if config.compile_workers and get_backend(p.backend).compiled:
                p.warmth = Warmth.COLD
        tunables, self.floors = estimates.fitted_floors(config, pairs)
        self.policy = SchedulingPolicy(pairs, tunables, widen=self._widened, floors=self.floors)
        self.pool: Any = ProcessPool([], [], share_cpus=config.workers)
        if config.cluster is not None:
            from fuzz.campaign.cluster import RayPool

            self.pool = RayPool(
                [], [], [], uid=f"{os.getpid()}-{int(time.time())}", repro_dir=config.repro_dir
            )
        self.faults = Faults(config, pool=self.pool, note=self._note, disk_full=self._disk_is_full)
        self.folder = OutputFolder(config.out, argv=config.argv, disk_full=self._disk_is_full)
        self.slice_ids = 0
        self.stop_reason: str | None = None
        self.started_wall = time.time()
        self.deadline = time.perf_counter() + config.budget
        self.latest_deadline = self.deadline + refund_cap(config.budget)
        self.fuzz_started: float | None = None
        self.restarts = 0
        self.db_problems: list[str] = []
        self.triage_results: dict[str, dict[str, Any]] = {}  # previous signature -> verdict
        self.previous: dict[str, Any] | None = None
        self.replay_queue: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.errors: list[str] = []  # the harness itself failed (not one target: the campaign)
        self.map_limit = map_limit()
        self.disk_full: str | None = None  # what could not be written: the campaign stopped

    @property
    def pairs(self) -> list[PairState]:
        return self.policy.pairs

    @property
    def workers(self) -> list[WorkerHandle]:
        return self.pool.workers

    @property
    def unwritten(self) -> list[str]:
        """Report files the final write could not write (the disk was full)."""
        return self.folder.unwritten

    def _widened(self, pair: PairState, level: int) -> dict[str, Any]:
        return run_narrowing(pair.target, self.config.options, self.config.seed, widen=level)

    # Workers -------------------------------------------------------------------------------------

    def _make_workers(self) -> None:
        c = self.config
        (c.out / "workers").mkdir(parents=True, exist_ok=True)
        configs = worker_configs(c, parent_pid=os.getpid())
        if c.cluster is not None:  # actors placed over the cluster's nodes, as it was planned
            from fuzz.campaign.cluster import place

            configs, self.pool.options = place(c, configs, uid=self.pool.uid)
        self.pool.configs = configs
        self.pool.roles = ["fuzz" if s < c.workers else "compile" for s in range(len(configs))]
        self.pool.start_all()
        for w in self.workers:
            self.policy.add_worker(w.slot, w.role)

    # Time ----------------------------------------------------------------------------------------

    def _refund(self, seconds: float) -> None:
        """Gives back time that was not fuzzing, up to ``refund_cap``: the budget stays a bound
        on the wall clock however often workers restart or hangs are confirmed."""
        self.deadline = min(self.deadline + seconds, self.latest_deadline)

    def remaining(self) -> float:
        return self.deadline - time.perf_counter()

    # Dispatch ------------------------------------------------------------------------------------

    def _dispatch(self, w: WorkerHandle) -> bool:
        """Gives idle worker ``w`` its next job: a replay first (triage, a hang to confirm),
        else the slice the policy plans. Returns whether it got one."""
        if self.replay_queue and w.role == "fuzz":
            self._dispatch_replay(w, self.replay_queue.pop(0))
            return True
        if self.stop_reason:
            return False
        now = time.perf_counter()
        plan = self.policy.next_slice(
            w.slot, slice_id=self.slice_ids + 1, now=now, left=self.remaining()
        )
        if plan is None:
            return False
        self.slice_ids += 1
        self.pool.begin(w, Job(plan.id, now, plan=plan, hard_deadline=plan.hard_deadline))
        if not self.pool.send(w, M.Hunt(plan)):
            # Its process ended after its last slice: the slice is taken back, and the
            # process's end is an idle worker's (told by the pool's next poll), no finding.
            self.policy.stopped(plan.id, now, sent=False)
            w.job = None
            return False
        return True

    def _dispatch_replay(self, w: WorkerHandle, item: dict[str, Any]) -> None:
        self.slice_ids += 1
        now = time.perf_counter()
        timeout = self.config.example_timeout
        if item.get("confirm_hang"):
            timeout *= self.config.hang_confirm_factor
        job = Job(
            self.slice_ids,
            now,
            replay_path=item["reproducer"],
            timeout=timeout,
            confirm=item if item.get("confirm_hang") else None,
            hard_deadline=now + timeout * 2 + 30,
        )
        self.pool.begin(w, job)
        if not self.pool.send(w, M.Replay(job.id, item["reproducer"])):
            self.replay_queue.insert(0, item)  # (for the next worker: this one's process ended)
            w.job = None

    # Messages ------------------------------------------------------------------------------------

    def note_db_problems(self, problems: Sequence[str]) -> None:
        """Keeps example database problems for the report and says each new one on the console
        (the first ten; a database that cannot be reached fails quietly otherwise)."""
        for p in problems:
            if p not in self.db_problems and len(set(self.db_problems)) < 10:
                self.log(f"WARNING {p}")
            self.db_problems.append(p)

    def _handle(self, w: WorkerHandle, msg: Any) -> None:
        """Routes one message of worker ``w`` to its handler."""
        if isinstance(msg, M.Ready):
            w.ready = True
            w.startup_failures = 0
        elif isinstance(msg, M.Fatal):
            w.fatal = msg.error
            self.log(f"worker {w.slot} could not start: {msg.error}\n{msg.traceback}")
        elif isinstance(msg, M.Replayed):
            self._replayed(w, msg.result)
        elif isinstance(msg, M.SLICE_MESSAGES):
            pair = self.policy.running(msg.slice)
            if pair is not None and w.job is not None and w.job.id == msg.slice:
                self._slice_message(w, pair, msg)

    def _slice_message(self, w: WorkerHandle, pair: PairState, msg: Any) -> None:
        if isinstance(msg, M.Progress):
            self.policy.progress(msg.slice, msg.examples, msg.compile_seconds)
            if w.job is not None and w.job.plan is not None:
                w.job.hard_deadline = slice_deadline(
                    w.job.hard_deadline, time.perf_counter() - msg.seconds, w.job.plan.hard_limit
                )
        elif isinstance(msg, M.Feature):
            self.policy.feature(msg.slice, msg.name)
        elif isinstance(msg, M.Found):
            out = self.policy.found(msg.slice, msg.record)
            if out is not None:
                self._recorded(pair, out)
                self._write_report(throttle=True)
        elif isinstance(msg, M.DiskFull):
            self._disk_is_full(msg.what)
        elif isinstance(msg, M.ContextLost):
            self.notes.append(
                f"{pair.target.name} on {pair.backend}: the CUDA context was lost "
                f"({msg.message[:200]}); worker restarted"
            )
        elif isinstance(msg, M.Done):
            self._slice_done(w, msg.slice, msg.summary)

    def _slice_done(self, w: WorkerHandle, sid: int, summary: dict[str, Any]) -> None:
        """Books slice ``sid``'s summary (the policy) and says what it found and decided."""
        w.job = None
        ended = self.policy.ended(sid, summary, time.perf_counter(), left=self.remaining())
        for out in [*(o for _, o in ended.found), *ended.withdrawn]:
            self.folder.supersede(out.superseded)  # (said below, with the slice's line)
        self.note_db_problems(summary.get("db_problems", []))
        if summary.get("recycle"):
            w.recycles += 1
        if summary.get("recycle") or summary.get("exits"):
            w.ready = False  # it exits now: no new slice for it (one sent would never arrive)
        for line in console.ended(ended, summary, slot=w.slot):
            self.log(line)
        self._write_report(throttle=True)

    # Triage --------------------------------------------------------------------------------------

    def _load_previous(self) -> None:
        prev, problem = report_files.read_previous(self.config.out / "report.json")
        if problem is not None:
            self._note(problem, say=True)
        if prev is None:
            return
        self.previous = prev
        names = {t.name for t in self.config.targets}
        for f in prev.get("findings", []):
            repro = f.get("reproducer")
            if f.get("target") in names and repro and Path(repro).exists():
                self.replay_queue.append(f)

    def _replayed(self, w: WorkerHandle, result: dict[str, Any]) -> None:
        job, w.job = w.job, None
        if job is not None and job.confirm is not None:
            # Settling a suspicion is not fuzzing: the budget gets this worker's time back.
            self._refund((time.perf_counter() - job.started) / max(1, len(self.workers)))
            self._hang_confirmed(job.confirm, result)
            return
        self.triage_results[result["path"]] = result

    # The loop ------------------------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.log(f"{reason}: stopping, writing the report of what was found so far")

    def lock(self) -> None:
        """Takes the output folder's lock (:func:`fuzz.campaign.outdir.lock_output`)."""
        self.folder.lock()

    def run(self) -> dict[str, Any]:
        """Runs the campaign to its budget (or a stop request); returns the final report."""
        self.lock()
        try:
            return self._run_locked()
        finally:
            self.folder.unlock()

    def _run_locked(self) -> dict[str, Any]:
        c = self.config
        c.repro_dir.mkdir(parents=True, exist_ok=True)
        if c.triage:
            self._load_previous()
            report_files.archive_previous(c.out)
        problem = self.folder.reserve_space()
        if problem is not None:
            self.notes.append(problem)
        # Before this campaign's workers write their own records:
        for item in self.faults.adopt_orphans(self.pairs):
            self.log(f"WARNING {item['confirm_hang']['message']}; replaying it first")
            self.replay_queue.insert(0, item)
        self._make_workers()
        try:
            self._loop()
        except KeyboardInterrupt:
            self.request_stop("interrupted")
        finally:
            self._shutdown()
        return self._write_report(final=True)

    def _loop(self) -> None:
        """Dispatches, polls and watches until the budget is spent, nothing is left to fuzz, or
        a stop is asked for. The budget counts fuzzing time: from the moment the first worker
        is ready, and not while every worker is (re)starting."""
        c = self.config
        waiting_since = last_tick = time.perf_counter()
        while True:
            now = time.perf_counter()
            started = self.fuzz_started is not None
            if started and not any(w.ready for w in self.workers):
                self._refund(now - last_tick)  # every worker (re)starting: not fuzzing
            last_tick = now
            if not started and (any(w.ready for w in self.workers) or now - waiting_since > 300):
                started = True
                self.deadline = now + c.budget
                self.latest_deadline = self.deadline + refund_cap(c.budget)
                self.fuzz_started = now
            if started and not self.stop_reason:
                for w in self.workers:
                    if w.ready and w.job is None and w.process is not None:
                        self._dispatch(w)
            busy = [w for w in self.workers if w.job is not None]
            if self._finished(started, busy):
                return
            if self.stop_reason and busy:
                self._drain(busy, grace=2.0)
                return
            if started and self.remaining() < -end_grace(c.budget):
                for w in busy:  # shrinking that would not end: keep what was streamed
                    self._kill(w, "budget")
                return
            if all(w.process is None for w in self.workers):
                if not self.stop_reason:  # (a stop ends its workers: not their failure)
                    self.errors.append("no worker could be started: nothing was fuzzed")
                return
            self._poll(0.2)
            if self.folder.due():
                self._write_report()  # what a throttled write skipped
            if self.progress is not None:
                self.progress(self)

    def _finished(self, started: bool, busy: list[WorkerHandle]) -> bool:
        """Whether the loop ends now: nothing runs and the budget is spent, nothing is left to
        fuzz, or a stop came (also while the workers were starting: an interruption)."""
        if self.stop_reason and not started:
            return True
        if not started or busy:
            return False
        return bool(self.stop_reason) or self.remaining() < 0.5 or not self._schedulable()

    def _schedulable(self) -> bool:
        return bool(self.replay_queue) or self.policy.schedulable()

    def _poll(self, timeout: float) -> None:
        for event in self.pool.poll(timeout):
            if isinstance(event, Arrived):
                self._handle(event.worker, event.message)
            else:
                self._worker_gone(event.worker, event.code)
        self._watch()

    def _watch(self) -> None:
        """Kills a worker whose example outlived its timeout (a compile, the compile timeout)
        or whose slice overran its hard limit."""
        now_wall = time.time()
        for w in self.workers:
            job = w.job
            if job is None or w.process is None:
                continue
            self.pool.sample_maps(w)
            start, compiling = self.pool.example_clock(w)
            if compiling is not None:  # compiling: the compile timeout applies
                limit = self.config.compile_timeout
            else:
                limit = job.timeout or self.config.example_timeout
            if start > 0 and now_wall - start > limit:
                self._kill(w, "hang")
            elif self._overran(job, compiling or 0.0, now_wall - start if start > 0 else None):
                self._kill(w, "overran")

    def _kill(self, w: WorkerHandle, reason: str) -> None:
        self.pool.kill(w, reason)
        self._worker_gone(w, self.pool.exit_code(w))

    def _overran(self, job: Job, compiling: float, example_age: float | None) -> bool:
        pair = self.policy.running(job.id)
        live, now = pair.live_compile if pair is not None else 0.0, time.perf_counter()
        since = 0.0 if example_age is None else now - example_age  # (on this clock)
        return overran(job, now=now, live_compile=live, compiling=compiling, example_since=since)

    def _drain(self, busy: list[WorkerHandle], grace: float) -> None:
        end = time.perf_counter() + grace
        while any(w.job is not None for w in busy) and time.perf_counter() < end:
            self._poll(0.1)

    def _shutdown(self) -> None:
        for w in self.workers:
            if w.process is None:
                continue
            job = w.job
            if job is not None:
                if job.confirm is not None:  # a suspected hang still being replayed
                    self._hang_confirmed(job.confirm, None)
                self.pool.kill(w, "shutdown")
                if job.plan is not None:
                    self.policy.stopped(job.id, time.perf_counter())
                w.job = None
            else:
                self.pool.stop(w)  # everything it found has arrived
            self.pool.clear_inflight(w)
            self._retire_worker(w)
        for item in [i for i in self.replay_queue if i.get("confirm_hang")]:
            self._hang_confirmed(item, None)  # never replayed: kept as an unconfirmed hang
        self.replay_queue = [i for i in self.replay_queue if not i.get("confirm_hang")]

    # Reports -------------------------------------------------------------------------------------

    def report_record(self) -> report.CampaignRecord:
        """The campaign as it stands, as the report reads it."""
        c = self.config
        return report.CampaignRecord(
            started_wall=self.started_wall,
            budget=c.budget,
            profile=c.profile.name,
            argv=list(c.argv),
            seed=c.seed,
            example_timeout=c.example_timeout,
            db=c.db,
            db_shared=list(c.db_shared),
            db_problems=list(self.db_problems),
            workers=[w.as_dict() for w in self.workers],
            sizing=None if c.host is None else {"said": c.host.describe(), **c.host.as_dict()},
            floors=self.floors,
            worker_restarts=self.restarts,
            rows=[
                p.as_dict() for p in sorted(self.pairs, key=lambda p: (p.target.name, p.backend))
            ],
            previous=self.previous,
            triage_results=self.triage_results,
            interrupted=self.stop_reason,
            errors=list(self.errors),
            notes=self.notes,
        )

    def _write_report(self, *, throttle: bool = False, final: bool = False) -> dict[str, Any]:
        """Writes ``report.json`` (``final``: the whole report set): see
        :meth:`fuzz.campaign.outdir.OutputFolder.write`. A write before the final one that
        fails is a harness error, said once, and the campaign goes on (its reproducers are
        kept): a fault of the report's own ended an H200 campaign at 281 s of 300."""
        try:
            return self.folder.write(
                lambda: report.campaign_report(self.report_record(), final=final),
                throttle=throttle,
                final=final,
            )
        except Exception as e:
            if final:
                raise
            said = f"the report could not be written: {type(e).__name__}: {str(e)[:200]}"
            if said not in self.errors:
                self.errors.append(said)
                self.log(f"ERROR {said}")
            return {}

    def _disk_is_full(self, what: str) -> None:
        """A file of the campaign could not be written, the disk being full: the campaign stops
        (nothing more it finds could be kept) and reports what it has, said in one line."""
        if self.disk_full is None:
            self.disk_full = what
            self.notes.append(f"the disk is full: {what}; the campaign stopped")
            self.log(f"ERROR the disk is full: {what}")
        self.request_stop("disk full")


def _runs(t: Target, backend: str) -> bool:
    b = get_backend(backend)
    return t.unsupported(b) is None and b.available


__all__ = ["Campaign", "CampaignConfig"]
