"""A campaign's workers from start to end, as its coordinator (:class:`fuzz.campaign.runner.
Campaign`) books them: a fresh worker (the policy told it has loaded nothing), a worker that
ended (died, hung and was killed, was stopped or recycled) with what that means for its job
(:mod:`fuzz.campaign.faults` says what a death is, the scheduling policy what it costs the pair),
a suspected hang settled by its replay, and a fresh process in its place unless the campaign is
ending or it cannot start. :class:`WorkerLifeCycle` is the part of the Campaign that does this;
the Campaign gives it its report writing, its triage and its clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fuzz.campaign import console
from fuzz.campaign.config import CampaignConfig
from fuzz.campaign.faults import Faults
from fuzz.campaign.outdir import OutputFolder
from fuzz.campaign.pairs import PairState
from fuzz.campaign.policy import Lost, SchedulingPolicy
from fuzz.campaign.pool import WorkerHandle
from fuzz.campaign.process import (
    EXIT_CONTEXT_LOST,
    EXIT_NODE_LOST,
    EXIT_RECYCLE,
    exit_text,
    stop_signal,
)
from fuzz.ledger import Recorded


class WorkerLifeCycle:
    """Starts, retires and replaces the campaign's workers, and books how each ended."""

    config: CampaignConfig
    log: Callable[[str], None]
    policy: SchedulingPolicy
    pool: Any  # fuzz.campaign.pool.ProcessPool, or a cluster's RayPool
    faults: Faults
    folder: OutputFolder
    replay_queue: list[dict[str, Any]]
    notes: list[str]
    errors: list[str]
    stop_reason: str | None
    fuzz_started: float | None
    restarts: int
    map_limit: int | None

    # What the Campaign gives it.

    def remaining(self) -> float:
        raise NotImplementedError

    def _write_report(self, *, throttle: bool = False, final: bool = False) -> dict[str, Any]:
        raise NotImplementedError

    def _replayed(self, w: WorkerHandle, result: dict[str, Any]) -> None:
        raise NotImplementedError

    # Workers -------------------------------------------------------------------------------------

    def _start(self, w: WorkerHandle) -> None:
        """A fresh process for ``w`` (it has loaded no pair's kernels)."""
        self.pool.start(w)
        self.policy.add_worker(w.slot, w.role)

    def _retire_worker(self, w: WorkerHandle) -> None:
        """``w`` takes no more work (the campaign is ending, or it cannot start)."""
        w.process = None
        self.policy.remove_worker(w.slot)

    def _recorded(self, pair: PairState, out: Recorded) -> None:
        """Says what the ledger did with a record of ``pair`` (``out``), and marks the
        reproducers it superseded for removal."""
        self.folder.supersede(out.superseded)
        for line in console.recorded(pair, out):
            self.log(line)

    # Deaths and hangs ----------------------------------------------------------------------------

    def _worker_gone(self, w: WorkerHandle, code: int | None) -> None:
        """Books a worker process that ended (died, hung and was killed, stopped, recycled): its
        job's outcome, then a fresh worker unless the campaign is ending or it cannot start."""
        job = w.job
        reason = w.kill_reason
        # A stop asked for from outside (timeout, systemd, kill -TERM -PGID) is never a finding,
        # nor a worker ending itself to be replaced (recycled), nor the harness running out of
        # memory maps or memory.
        stopped = reason is None and (
            stop_signal(code) is not None or code in (EXIT_RECYCLE, EXIT_NODE_LOST)
        )
        why = None
        if not (reason or stopped or job is None):
            why = self.faults.out_of_resources(w, code, self.map_limit)
        if job is not None and job.is_replay:
            status = "error" if stopped or why else "fail"
            verdict = f"the replay {exit_text(code, reason)}" + (f" ({why})" if why else "")
            self._replayed(w, {"path": job.replay_path, "status": status, "verdict": verdict})
        elif job is not None:
            lost = self.policy.lost(job.id, time.perf_counter())
            if why:
                self._out_of_resources(w, lost.pair, code, why)
            else:
                self._slice_lost(w, lost, code, reason, stopped=stopped)
            if code == EXIT_NODE_LOST:
                # What it streamed is kept; the pair is free again, for a worker elsewhere.
                self._note(
                    f"{lost.pair.target.name} on {lost.pair.backend}: worker {w.slot} was lost "
                    f"with its node ({w.host or 'unknown'}) mid-slice; the slice's findings "
                    "streamed before are kept and the pair is fuzzed on elsewhere",
                    say=True,
                )
        self.pool.clear_inflight(w)
        if not w.ready and code not in (EXIT_RECYCLE, EXIT_NODE_LOST, EXIT_CONTEXT_LOST):
            w.startup_failures += 1  # died before it could take any work
        self.pool.closed(w)
        self._replace(w, reason)

    def _slice_lost(
        self, w: WorkerHandle, lost: Lost, code: int | None, reason: str | None, *, stopped: bool
    ) -> None:
        """What the end of worker ``w`` in the middle of slice ``lost`` means
        (:meth:`fuzz.campaign.faults.Faults.loss`), booked as a death of its pair's."""
        pair = lost.pair
        elapsed = time.perf_counter() - lost.plan.started
        how, rec, hang = self.faults.loss(w, pair, code, reason, stopped=stopped, elapsed=elapsed)
        if hang is not None:  # a suspected hang: replayed next, in a fresh worker
            self.replay_queue.insert(0, hang)
        out = self.policy.died(lost, how, rec)
        if out is not None:
            self._recorded(pair, out)
            self._write_report(throttle=True)
        self.log(
            f"worker {w.slot} {exit_text(code, reason)} while fuzzing "
            f"{pair.target.name} on {pair.backend}"
        )

    def _hang_confirmed(self, item: dict[str, Any], result: dict[str, Any] | None) -> None:
        """Settles a suspected hang, or a dead campaign's in-flight example, with its replay's
        ``result`` (None: never replayed)."""
        pair = item["pair"]
        if item.get("orphan"):
            rec = self.faults.orphan_settled(item, result)
            out = None if rec is None else self.policy.record(pair, rec)
        else:
            rec = self.faults.hang_settled(item, result)
            out = None if rec is None else self.policy.death_record(pair, rec)
        if out is not None:
            self._recorded(pair, out)
            self._write_report(throttle=True)

    def _out_of_resources(
        self, w: WorkerHandle, pair: PairState, code: int | None, why: str
    ) -> None:
        """A worker that died of the harness's resources running out: no finding."""
        text = (
            f"worker {w.slot} {exit_text(code, None)} while fuzzing {pair.target.name} on "
            f"{pair.backend}: the harness ran out of resources ({why}), not a kernel crash"
        )
        self.notes.append(text)
        self.log(f"WARNING {text}; restarting it")
        self.policy.out_of_resources(pair, why)

    def _replace(self, w: WorkerHandle, reason: str | None) -> None:
        """Starts a fresh process for worker ``w`` unless the campaign is ending, or ``w``
        cannot start (then a harness error)."""
        out_of_time = self.fuzz_started is not None and self.remaining() < 0.5
        if self.stop_reason or reason == "shutdown" or (out_of_time and not self.replay_queue):
            self._retire_worker(w)
            return
        if w.fatal is not None or w.startup_failures >= 3:
            # An exception in the worker's set-up (a plugin that does not import there) is the
            # same every time; a start-up that dies outright is tried three times.
            why = w.fatal or f"it died 3 times while starting (see {w.config.log})"
            self.errors.append(f"worker {w.slot} could not start: {why}")
            self.log(f"ERROR worker {w.slot} could not start: {why}")
            self._retire_worker(w)
            return
        self.restarts += 1
        w.restarts += 1
        self._start(w)

    def _note(self, text: str, *, say: bool = False) -> None:
        self.notes.append(text)
        if say:
            self.log(f"WARNING {text}")
