"""One slice running in a worker process (:mod:`fuzz.campaign.worker`): the engine's hooks, which
persist each example before it runs (the in-flight record, :mod:`fuzz.campaign.inflight`) and
stream progress, coverage and findings to the coordinator as they come, a warm-up's end, and the
slice's summary (each finding with its pictures, a NaN's origin and its reproducer)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fuzz.campaign import messages as M
from fuzz.campaign.inflight import (
    clear_inflight,
    is_disk_full,
    note_inflight_param,
    write_inflight_case,
)
from fuzz.campaign.messages import SlicePlan, WorkerConfig
from fuzz.campaign.process import EXIT_CONTEXT_LOST, MapBudget, exit_worker
from fuzz.failures import CRASH

# The kernels whose slices this process ran: a crash names those before its own (``ran_before``):
# CUDA reports an illegal access at a later call than its launch, maybe theirs (``fuzz.ledger``).
_RAN: set[str] = set()


def _found_dict(found: Any) -> dict[str, Any]:
    return {**found.as_dict(), "signature": found.signature}


class SliceRun:
    """One slice running in a worker: the engine's hooks, which persist each example before it
    runs and stream progress, coverage and findings to the parent, and the slice's summary."""

    def __init__(
        self,
        conn: Any,
        config: WorkerConfig,
        started: Any,
        plan: SlicePlan,
        maps: MapBudget,
        *,
        target: Any,
        backend: Any,
    ) -> None:
        self.conn, self.config, self.started, self.maps = conn, config, started, maps
        self.id, self.hard_limit = plan.id, plan.hard_limit
        self.target, self.backend, self.ran_before = target, backend, sorted(_RAN - {plan.target})
        _RAN.add(plan.target)
        self.last_progress, self.t0 = 0.0, time.perf_counter()
        self.warm_up = plan.warm_up  # (a compile worker's warm-up ends as planned: ``WarmUp``)
        self.compiles, self.calm, self.warmed = 0, 0, False
        self.memo: Any = None  # the pair's structure memo (set by ``_hunt``), if any
        self.relengthed = 0  # (its count of reuses with fresh lengths, after the last example)
        self.disk_was_full = False  # a file could not be written: the slice ended for it

    def hooks(self) -> Any:
        from fuzz import engine
        from fuzz.campaign.plots import error_maps

        return engine.Hooks(
            before_example=self.before_example,
            on_draw=self.on_draw,
            after_example=self.after_example,
            on_found=self.on_found,
            on_feature=self.on_feature,
            error_maps=error_maps,
            progress=self.progress,
        )

    def before_example(self, case: Any) -> None:
        from fuzz.engine import OutOfTime, in_stage
        from fuzz.hypothesis_internals import is_final_replay

        warmed = self.warmed and not in_stage()  # (what the warm-up found is still shrunk)
        if (self.maps.check() or warmed) and not is_final_replay():
            # Too many memory maps, or a warm-up done: end the slice as its time limit would
            # (the engine's own stop, which Hypothesis does not take for a failure), before this
            # example runs.
            raise OutOfTime
        try:
            write_inflight_case(self.config.inflight, self.target.name, self.backend.name, case)
        except OSError as e:  # no example runs without its record: a crash would lose it
            self.disk_full(e, f"the in-flight record {self.config.inflight}.*")
            raise OutOfTime from None
        self.started.value = time.time()

    def on_draw(self, name: str, value: Any) -> None:
        from fuzz.engine import OutOfTime

        try:
            note_inflight_param(self.config.inflight, name, value)
        except OSError as e:
            self.disk_full(e, f"the in-flight record {self.config.inflight}.json")
            raise OutOfTime from None

    def disk_full(self, e: OSError, what: str) -> None:
        """Tells the campaign that ``what`` could not be written because the disk is full (it
        stops: nothing more could be kept); any other error goes on up."""
        if not is_disk_full(e):
            raise e
        self.disk_was_full = True
        self.conn.send(M.DiskFull(self.id, f"{what} could not be written ({e.strerror})"))

    def progress(self, examples: int, compile_seconds: float) -> None:
        """After an example (a shrink stage's too): none in flight, and the slice's examples
        and compile seconds so far, which move its hard limit (``fuzz.campaign.pool.overran``),
        sent at most every 0.25 s."""
        self.started.value = 0.0
        now = time.perf_counter()
        if now - self.last_progress > 0.25:
            self.last_progress = now
            self.conn.send(M.Progress(self.id, examples, now - self.t0, compile_seconds))

    def after_example(self, result: Any) -> None:
        warm = self.warm_up
        if warm is not None:
            compiled = result.stats.compiles > self.compiles
            self.compiles = result.stats.compiles
            relengthed = self.memo.counts["relengthed"] if self.memo is not None else 0
            same_variant = relengthed > self.relengthed
            self.relengthed = relengthed
            self.calm = warm.calm(self.calm, compiled=compiled, same_variant=same_variant)
            if warm.done(self.calm, time.perf_counter() - self.t0):
                self.warmed = True
                result.stopped = "warmed"
        self.progress(result.examples, result.stats.compile_seconds)

    def on_feature(self, name: str) -> None:
        self.conn.send(M.Feature(self.id, name))

    @property
    def _trace_cost(self) -> float:
        """The costliest case of a compiled backend's finding a slice traces (``fuzz.origin``)."""
        return float(self.config.options.interpreter_max_cost)

    def _trace_seconds(self) -> float:
        """The seconds a trace may take: at most ``origin.TRACE_SECONDS``, and none past the
        slice's hard limit and the time given to settle its bugs (the campaign kills a slice
        some seconds after that: a worker was killed so in a Pallas trace on an H200)."""
        from fuzz import origin
        from fuzz.engine import SETTLE_SECONDS

        left = self.t0 + self.hard_limit + SETTLE_SECONDS - time.perf_counter()
        return min(origin.TRACE_SECONDS, max(0.0, left))

    def _trace(self, found: Any) -> None:
        """The origin of ``found``'s NaN or store past a buffer (``fuzz.origin``), within the
        slice's cost bound and the seconds it has left."""
        from fuzz import origin

        origin.of_finding(
            found, self.target, self.backend.name, self._trace_cost, seconds=self._trace_seconds()
        )

    def on_found(self, result: Any, found: Any) -> None:
        from fuzz import origin
        from fuzz.reproducer import kills_context

        if found.final and found.finding.cls in origin.TRACED_CLASSES:
            # Its site (a NaN's birth, a store past a buffer) tells the campaign at once whether
            # it is a known bug reached otherwise (``signatures.same_bug``), whatever comes next.
            self._trace(found)
        f = found.finding
        if f.cls == CRASH and self.ran_before:
            f.details.setdefault("ran_before", self.ran_before)
        found.reproducer = self.try_reproducer(found)
        self.conn.send(M.Found(self.id, _found_dict(found)))
        if kills_context(f) and found.isolating:
            # Kept (sent, its reproducer written) while child processes shrink it: nothing
            # runs here meanwhile, so no example is in flight (fuzz.isolated).
            self.started.value = 0.0
            clear_inflight(self.config.inflight)
        elif kills_context(f):
            self.conn.send(M.ContextLost(self.id, f.message))
            exit_worker(EXIT_CONTEXT_LOST)

    def write_reproducer(self, found: Any) -> Path:
        from fuzz.engine import write_reproducer

        return write_reproducer(
            self.config.repro_dir, self.target, self.backend.name, found, self.config.options
        )

    def try_reproducer(self, found: Any) -> Path | None:
        """:meth:`write_reproducer`; None where the disk is full (the finding is still sent,
        and the campaign told)."""
        try:
            return self.write_reproducer(found)
        except OSError as e:
            self.disk_full(e, f"a reproducer of {self.target.name} in {self.config.repro_dir}")
            return None

    def summary(self, result: Any) -> dict[str, Any]:
        """The slice's summary: the hunt's numbers, and each finding with its pictures, the
        origin of a NaN or Inf, and its reproducer written again (its final minimal example)."""
        from fuzz import origin

        found = []
        for f in result.found.values():
            # The best example so far when shrinking was cut short: plot it too, if the slice has
            # time left (a plot checks the case again: past the hard limit, a large case on a
            # GPU is how a slice gets killed with what it found).
            if not f.plots and self._trace_seconds() > 0:
                f.plots = _plots(self.target, self.backend, f)
            if f.finding.cls in origin.TRACED_CLASSES:
                self._trace(f)
            f.reproducer = self.try_reproducer(f) or f.reproducer
            found.append(_found_dict(f))
        summary: dict[str, Any] = result.as_dict()
        summary.pop("findings")  # sent as "found" (with origins and fresh reproducer paths)
        return {**summary, "found": found, "features": sorted(result.features)}


def _plots(target: Any, backend: Any, found: Any) -> list[dict[str, Any]]:
    from fuzz.campaign.plots import error_maps
    from fuzz.engine import context_lost
    from fuzz.properties import check_case

    if context_lost() is not None and not backend.interpret:
        return []  # nothing may launch in this process any more
    try:
        outcome = check_case(target, backend, found.case, params=found.params)
        return error_maps(outcome.context)
    except Exception:  # a picture is never worth losing the finding
        return []
