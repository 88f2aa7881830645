"""Fuzz campaigns: a time budget shared by many (target, backend) pairs, run in worker processes.

``python -m fuzz run`` builds a :class:`Campaign`. It

* starts the worker processes (:mod:`fuzz.campaign.worker`; spread over the visible GPUs, each
  with its own ``CUDA_VISIBLE_DEVICES``), and a fresh one whenever a worker dies or hangs; and
  *compile workers*, which warm each pair up (run its examples until a few in a row compile
  nothing new) so that its kernels are in the on-disk caches before a fuzzing worker takes it;
* first replays the previous report's reproducers (triage: still failing or fixed), then hands
  out *slices*: a few seconds of Hypothesis on one pair, compile time not counted. A pair's first
  slice replays what the example database holds for it; later slices know the bugs found so far
  (``fuzz.signatures``): examples of them are hits, and the search goes on for other bugs;
* schedules by floors and a bandit: every pair once (real targets before mutants), then every
  pair to its floor (``floor_examples`` examples or ``floor_seconds`` of fuzzing, a real target
  ``real_floor_seconds``), then the pairs
  whose recent slices found new bugs or coverage features per fuzzing second, with an
  exploration bonus (UCB). A pair is retired only when finished: a harness error, a search space
  Hypothesis reports exhausted, a mutant found with its class and shrunk, or deaths that only
  repeat bugs found before;
* turns a worker that dies (segfault, abort, lost CUDA context, OOM kill) into a ``crash``
  finding and one whose example outlives ``example_timeout`` into a ``hang`` finding, each with a
  reproducer of the case the worker persisted before launching it; a timeout is first replayed in
  a fresh worker with ``hang_confirm_factor`` times the time (a first compilation of a large
  kernel outlasts a timeout as a hang does) and only a second timeout makes it a hang;
* writes ``report.json`` (atomically) whenever something is found and when a slice ends, and the
  full report set (``fuzz.campaign.report``) at the end -- also on SIGTERM/SIGINT, with what was found so
  far;
* holds a lock on its output folder (:func:`lock_output`) from start to end: a second campaign
  into the same folder stops at once, naming the one that holds it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from fuzz import failures as F
from fuzz import reproducer
from fuzz.backends import get_backend
from fuzz.campaign import report
from fuzz.campaign.threads import children_share_cpus
from fuzz.campaign.worker import (
    EXHAUSTED_AT,
    EXIT_CONTEXT_LOST,
    EXIT_DEVICE_MEMORY,
    EXIT_RECYCLE,
    WorkerConfig,
    clear_inflight,
    count_maps,
    is_disk_full,
    map_limit,
    read_inflight,
    worker_main,
)
from fuzz.engine import run_narrowing
from fuzz.failures import Finding
from fuzz.profiles import HuntOptions, Profile
from fuzz.results import status_of
from fuzz.signatures import Bug, bug_key, same_bug, signature, site
from fuzz.target import Target, plugins, target_plugin

NEW_CLASS_WEIGHT = 10.0  # a new bug counts as much as ten new coverage features
CAMPAIGN_COMPILE_SHARE = 0.25  # where a profile sets no share of its own (the CPU profiles)
MAX_WARMS = 4  # warm-ups of one pair at most (each draws twice as long as the one before)
COLD_WAIT = 30.0  # a fuzzing worker takes a cold pair whose warm-up is further away than this
COLD_COMPILE_FACTOR = 3.0  # ... and than this many times the compile seconds of its warm-up
SHRINK_COMPILES = 12  # a slice's time to shrink a new bug is at least this many of its compiles
SHRINK_MAX = 90.0  # ... up to this many seconds
WARM_SECONDS = 8.0  # a pair's first warm-up ends after this many seconds (the next, twice as many)
EXAMPLES_FLOOR_FACTOR = 3.0  # a pair short of the floor's examples: fuzzed to this x its seconds
AFFINITY = 0.8  # the weight of a pair another worker has loaded, once every floor is met
REWARM_AFTER = 2.0  # seconds its fuzzing compiled since its last warm-up that call for another
# ...or examples of new structures it refused since (its compile share spent: they would have
# compiled on the fuzzing path), which call for another warm-up to compile them ahead.
REWARM_REFUSED = 10
REFUSED = "rejected: would compile"


@dataclass
class PairState:
    """One (target, backend) pair over the whole campaign."""

    target: Target
    backend: str
    examples: int = 0
    live_examples: int = 0  # examples of the slice in flight (progress messages)
    seconds: float = 0.0  # wall time of its slices, compiling included
    live_compile: float = 0.0  # compile seconds of the slice in flight (progress messages)
    slices: int = 0
    deaths: int = 0
    repeat_deaths: int = 0  # deaths that only hit a known bug again (no new finding)
    exhaustions: int = 0  # its worker died of a resource exhaustion (not counted as deaths)
    rate: float = 0.0  # recent gain per fuzzing second (new bugs x 10 + new features)
    running: bool = False
    retired: str = ""
    error: str | None = None
    found: dict[str, dict[str, Any]] = field(default_factory=dict)  # signature -> finding record
    origins: dict[str, str] = field(default_factory=dict)  # "slice:bug key" -> its signature
    replaced: dict[str, str] = field(default_factory=dict)  # signature -> the record in its place
    features: set[str] = field(default_factory=set)
    events: Counter[str] = field(default_factory=Counter)
    known_hits: Counter[str] = field(default_factory=Counter)  # signature -> examples hitting it
    declared_hits: Counter[str] = field(default_factory=Counter)  # declared failure -> examples
    stats: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    slice_new: float = 0.0
    # Its slice's bugs streamed as new so far ("slice:round:key" origins): one that turns out to
    # be a bug found before no longer counts toward the slice's gain (``Campaign._unnew``).
    new_origins: set[str] = field(default_factory=set)
    # Compiling ahead (compile workers): "cold" until a compile worker has run its warm-up,
    # "warming" meanwhile, "ready" after (and from the start where nothing compiles ahead).
    warm: str = "ready"
    warm_seconds: float = 0.0  # wall time of its warm-up slices (off the fuzzing path)
    warm_count: int = 0  # warm-ups run
    first_warm_compile: float | None = None  # compile seconds of its first warm-up
    compile_at_warm: float = 0.0  # its fuzzing path's compile seconds at its last warm-up
    refused_at_warm: int = 0  # its examples refused for their compile at its last warm-up
    narrowing: dict[str, Any] | None = None  # its compile-time choices (kernel variants) now
    refused_seconds: float = 0.0  # seconds of its slices that checked nothing, all refused
    widened: int = 0  # times its choices grew (``Campaign._widen``)
    # Its widened choices while a compile worker has not yet warmed them up: its fuzzing goes on
    # with the choices compiled (``narrowing``) until then (``Campaign._widen``).
    pending: dict[str, Any] | None = None
    pending_since: float = 0.0  # when it was widened (the earliest are warmed up first)
    widened_at: tuple[int, float] = (0, 0.0)  # its examples and fuzzing seconds then
    structures: list[Any] = field(default_factory=list)  # its warm-ups' (strategies.reuse)

    @property
    def key(self) -> str:
        return f"{self.target.name}|{self.backend}"

    @property
    def total_examples(self) -> int:
        return self.examples + (self.live_examples if self.running else 0)

    @property
    def compile_seconds(self) -> float:
        return self.stats["compile_seconds"] + (self.live_compile if self.running else 0.0)

    @property
    def fuzz_seconds(self) -> float:
        """Seconds it was fuzzed, compiling not counted (a setup cost, not held against it), nor
        slices whose every example was refused for its compile (they fuzzed nothing: a GPU
        campaign's Pallas pair met its 30 s floor with 16 examples so), nor shrinking its bugs
        after the search (a GPU pair met it with 42 examples so)."""
        return max(
            0.0,
            self.seconds
            - self.stats["compile_seconds"]
            - self.refused_seconds
            - self.stats["shrink_seconds"],
        )

    @property
    def classes(self) -> set[str]:
        return {rec["class"] for rec in self.found.values()}

    @property
    def status(self) -> str:
        """What the campaign says of the pair so far (``fuzz.results.status_of``)."""
        return status_of(self.target.expected_class, self.classes, error=self.error)

    def bugs(self) -> list[Bug]:
        """The distinct bugs found so far (known to its next slices)."""
        return [
            _bug(rec, t)
            for rec in self.found.values()
            for t in [rec.get("triggers", ()), *rec.get("also_triggers", [])]
        ]

    def mutant_done(self) -> bool:
        """A mutant whose expected class was found and shrunk: the harness proved itself on it."""
        expected = self.target.expected_class
        return expected is not None and any(
            rec["class"] == expected and rec.get("shrunk") for rec in self.found.values()
        )

    def as_dict(self) -> dict[str, Any]:
        """The pair's row of the report (``results``)."""
        t = self.target
        secs = self.seconds
        ex = self.total_examples
        fuzz = self.fuzz_seconds
        hits, maybe = self.hits(), self.maybe_known()
        return {
            "target": t.name,
            "backend": self.backend,
            "family": t.family,
            "mutant": t.is_mutant,
            "mutant_of": t.mutant_of,
            "expected_class": t.expected_class,
            "status": self.status,
            "examples": ex,
            "seconds": round(secs, 3),
            "fuzz_seconds": round(fuzz, 3),
            "refused_seconds": round(self.refused_seconds, 3),
            "shrink_seconds": round(self.stats["shrink_seconds"], 3),
            "examples_per_second": round(ex / fuzz, 2) if fuzz > 0 else 0.0,
            "slices": self.slices,
            "worker_deaths": self.deaths,
            "resource_exhaustions": self.exhaustions,
            "retired": self.retired or None,
            "launches": int(self.stats["launches"]),
            "launch_seconds": round(self.stats["launch_seconds"], 3),
            "compiles": int(self.stats["compiles"]),
            "compile_seconds": round(self.stats["compile_seconds"], 3),
            # Of those, launches that only loaded kernels another process had compiled.
            "cache_loads": int(self.stats["cache_loads"]),
            "cache_load_seconds": round(self.stats["cache_load_seconds"], 3),
            "precompiles": int(self.stats["precompiles"]),  # compiles of its warm-ups
            "precompile_seconds": round(self.stats["precompile_seconds"], 3),
            "warm_seconds": round(self.warm_seconds, 3),
            "warm": self.warm,
            "variants": self.narrowing or {},
            "variants_widened": self.widened,
            "structures": len(self.structures),  # its last warm-up's, for its fuzzing to reuse
            "compile_share": round(self.stats["compile_seconds"] / secs, 3) if secs > 0 else 0.0,
            "twin_launches": int(self.stats["twin_launches"]),
            "error": self.error,
            "events": dict(self.events),
            "bugs": len(self.found) - len(maybe),
            "unshrunk_maybe_known": len(maybe),
            "known_hits": dict(hits),
            "declared_hits": dict(self.declared_hits),
            "coverage_features": len(self.features),
            "findings": sorted(
                (
                    {
                        **f,
                        "hits": hits.get(sig, 0),
                        **({"maybe_of": maybe[sig]} if sig in maybe else {}),
                    }
                    for sig, f in self.found.items()
                ),
                key=lambda f: (f["class"], f.get("first_example", 0)),
            ),
        }

    def hits(self) -> Counter[str]:
        """Its examples that hit a bug found before, by the record that stands for the bug now
        (hits counted under a record since replaced go to the one in its place)."""
        out: Counter[str] = Counter()
        for sig, n in self.known_hits.items():
            out[_current(self, sig)] += n
        return out

    def maybe_known(self) -> dict[str, str]:
        """Its records not shrunk (their slice ended first: a campaign's budget, a killed
        worker) whose failure key is a shrunk bug's: signature -> that bug's. Their conditions
        were not taken down to what the bug needs, so they may be that bug (a GPU campaign's
        last slice streamed a 6,789-element NaN example and was killed shrinking it: its
        shrunk twin had 1 element). Kept in the report, with their reproducers, and not counted
        as distinct bugs."""
        shrunk = {
            f.get("bug_key"): sig
            for sig, f in self.found.items()
            if f.get("shrunk") and f.get("bug_key")
        }
        return {
            sig: shrunk[f["bug_key"]]
            for sig, f in self.found.items()
            if not f.get("shrunk")
            and f.get("class") not in (F.CRASH, F.HANG)
            and f.get("bug_key") in shrunk
        }


def _origin(slice_id: int, rec: dict[str, Any]) -> str:
    """Which bug of a slice a streamed finding record is (its first sight and its minimal example
    are records of one bug): a key is one bug per Hypothesis run of the slice's hunt."""
    return f"{slice_id}:{rec.get('details', {}).get('round', 0)}:{rec.get('bug_key')}"


def _bug(rec: dict[str, Any], triggers: Any = None) -> Bug:
    """The bug a finding record is (reached through ``triggers``: its own by default)."""
    return Bug(
        rec.get("bug_key") or rec["class"],
        frozenset(rec.get("triggers", ()) if triggers is None else triggers),
        rec["signature"],
        site((rec.get("details") or {}).get("origin")),
    )


def _same_call(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two finding records of one class are one kernel call (their minimal examples'
    ``case_digest``), failing two properties."""
    return (
        a.get("class") == b.get("class")
        and bool(a.get("shrunk"))
        and bool(b.get("shrunk"))
        and a.get("case_digest") is not None
        and a.get("case_digest") == b.get("case_digest")
    )


def _current(pair: PairState, sig: str) -> str:
    """The signature of the record that stands for bug ``sig`` of ``pair`` now: a record found
    again with fewer conditions, or merged into another, was replaced (``PairState.replaced``).
    On an H100 a slice's duplicate check named a twin whose record had been replaced meanwhile,
    and the duplicate stayed in the report."""
    seen = {sig}
    while sig not in pair.found and sig in pair.replaced and pair.replaced[sig] not in seen:
        sig = pair.replaced[sig]
        seen.add(sig)
    return sig


def _also(keep: dict[str, Any], triggers: Any) -> None:
    """Notes on record ``keep`` that its bug is also reached through ``triggers`` (the conditions
    of another minimal example of it, with its NaN born at the same site), where examples with
    them would not already be hits of it."""
    t = sorted(triggers or ())
    if set(keep.get("triggers", ())) <= set(t) or t in keep.get("also_triggers", []):
        return
    keep["also_triggers"] = [*keep.get("also_triggers", []), t]


def interleave(pairs: list[PairState]) -> list[PairState]:
    """``pairs`` in the order the first round visits them: round robin over families, and within
    a family the real targets first, then the mutants, backends alternating. A campaign too short
    for one slice per pair still samples every family instead of spending itself on the first."""
    by_family: dict[str, list[PairState]] = {}
    for p in sorted(pairs, key=lambda p: (p.target.is_mutant, p.target.name, p.backend)):
        by_family.setdefault(p.target.family, []).append(p)
    queues = [by_family[f] for f in sorted(by_family)]
    out: list[PairState] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


@dataclass
class Slice:
    id: int
    pair: PairState | None
    started: float
    time_limit: float
    hard_deadline: float
    kind: str = "hunt"  # or "replay"
    replay_path: str | None = None
    timeout: float | None = None  # per-example timeout of this slice (None: the campaign's)
    confirm: dict[str, Any] | None = None  # a suspected hang this replay confirms or clears
    found_new: bool = False  # a new bug was streamed from it
    warm: bool = False  # a compile worker's warm-up of its pair


@dataclass
class WorkerHandle:
    slot: int
    device: str | None
    config: WorkerConfig
    process: Any = None
    conn: Any = None
    started: Any = None  # shared double: start time of the example in flight (0: none; minus
    # the time a compile began while one runs)
    compiling: bool = False  # the watchdog last saw it compiling
    ready: bool = False
    busy: Slice | None = None
    kill_reason: str | None = None
    restarts: int = 0
    startup_failures: int = 0
    fatal: str | None = None  # why its set-up failed (an exception: the same every time)
    maps: int = 0  # its memory maps, last sampled (see fuzz.campaign.worker.MapBudget)
    maps_sampled: float = 0.0
    log_offset: int = 0  # the size of its log when its current slice began
    recycles: int = 0
    role: str = "fuzz"  # or "compile": warms pairs up (compiles their variants) ahead
    # Pairs its process has fuzzed: their kernels are loaded in it (a slice of one of them costs
    # no compile, where another worker would load or trace them again).
    loaded: set[str] = field(default_factory=set)


def refund_cap(budget: float) -> float:
    """The most a campaign's deadline moves for time that was not fuzzing (worker restarts, hang
    confirmations): a quarter of the budget, at least a minute."""
    return max(60.0, 0.25 * budget)


@dataclass
class CampaignConfig:
    """Everything a campaign needs; built by ``python -m fuzz run``."""

    targets: Sequence[Target]
    backends: Sequence[str]
    profile: Profile
    budget: float
    out: Path
    repro_dir: Path
    db: str | None
    db_shared: Sequence[str] = ()
    db_fallback: str | None = None  # a folder for a server --db while it does not answer
    seed: int = 0
    workers: int = 1
    devices: Sequence[str | None] = (None,)
    example_timeout: float = 120.0
    compile_timeout: float = 900.0  # a kernel still compiling after this long is a hang too
    hang_confirm_factor: float = 4.0
    floor_examples: int = 200  # every pair is fuzzed this many examples...
    floor_seconds: float = 30.0  # ... or this many seconds (compiling not counted) first
    # A real target's seconds floor: what the nightly job is for gets more before the bandit
    # (a GPU campaign's real Pallas attention pair met a 30 s floor at 164 examples).
    real_floor_seconds: float = 60.0
    slice_seconds: float | None = None
    examples: int | None = None  # a pair is done once it has run this many examples
    compile_workers: int = 0  # processes that compile pairs' kernel variants ahead
    warm_quiet: int = 8  # a warm-up ends after this many examples in a row compiled nothing
    max_deaths: int = 2  # deaths on bugs found before that retire a pair
    argv: Sequence[str] = ()
    plugins: Sequence[str] = ()
    triage: bool = True

    @functools.cached_property
    def options(self) -> HuntOptions:
        """What every hunt of the campaign runs under (its workers', its reproducers'). A
        campaign is not a derandomized CI run: whatever its profile, its hunts reuse case
        structures (``strategies.reuse``) and keep compiling to ``CAMPAIGN_COMPILE_SHARE`` of
        their time, unless the profile sets its own shares."""
        options = HuntOptions.of(self.profile)
        return dataclasses.replace(
            options,
            reuse_share=options.reuse_share or CAMPAIGN_COMPILE_SHARE,
            compile_share=options.compile_share or CAMPAIGN_COMPILE_SHARE,
        )


def visible_gpus() -> list[str]:
    """The GPUs a campaign can put one worker on each (``CUDA_VISIBLE_DEVICES`` entries)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:
        return []


class Campaign:
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
        self.pairs = interleave(
            [PairState(t, b) for t in config.targets for b in config.backends if self._runs(t, b)]
        )
        for p in self.pairs:
            # A few compile-time choices per pair (dtype, tiles, head dims: each a kernel
            # variant), compiled once (ahead, by a compile worker) and reused by every slice;
            # they grow each time the pair has had another floor's worth with them (_widen).
            p.narrowing = run_narrowing(p.target, config.options, config.seed)
            if config.compile_workers and get_backend(p.backend).compiled:
                p.warm = "cold"
        self.workers: list[WorkerHandle] = []
        self.slice_ids = 0
        self.stop_reason: str | None = None
        self.started_wall = time.time()
        self.t0 = time.perf_counter()
        self.deadline = self.t0 + config.budget
        self.latest_deadline = self.deadline + refund_cap(config.budget)
        self.fuzz_started: float | None = None
        self.restarts = 0
        self.db_problems: list[str] = []
        self.triage_results: dict[str, dict[str, Any]] = {}  # previous signature -> replay verdict
        self.previous: dict[str, Any] | None = None
        self.replay_queue: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.errors: list[str] = []  # the harness itself failed (not one target: the campaign)
        self.map_limit = map_limit()
        self._last_write = 0.0
        self._dirty = False  # a report write was skipped (throttled): write it soon
        self._lock: IO[str] | None = None
        self._superseded: list[Path] = []
        self.disk_full: str | None = None  # what could not be written: the campaign stopped
        self.unwritten: list[str] = []  # report files the final write could not write
        n = max(len(self.pairs), 1)
        # A quarter of an even split, at least 3 s (less when the budget cannot give every pair
        # one slice of 3 s), at most 60 s; fuzzing seconds (compiling is not counted).
        low = min(3.0, max(0.5, config.budget / n))
        self.slice_seconds = config.slice_seconds or min(60.0, max(low, config.budget / (4 * n)))

    @staticmethod
    def _runs(t: Target, backend: str) -> bool:
        b = get_backend(backend)
        return t.unsupported(b) is None and b.available

    # Workers ---------------------------------------------------------------------------------------

    def _start_worker(self, w: WorkerHandle) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        w.started = ctx.Value("d", 0.0, lock=False)
        w.process = ctx.Process(
            target=worker_main,
            args=(child, w.config, w.started),
            name=f"fuzz-worker-{w.slot}",
            daemon=True,
        )
        with children_share_cpus(self.config.workers):  # before the worker loads NumPy, torch
            w.process.start()
        child.close()
        w.conn = parent
        w.ready = False
        w.busy = None
        w.kill_reason = None
        w.maps, w.maps_sampled = 0, 0.0  # the new process's own, from its first sample on
        w.loaded = set()  # a new process has loaded nothing

    def _make_workers(self) -> None:
        c = self.config
        workdir = c.out / "workers"
        workdir.mkdir(parents=True, exist_ok=True)
        for slot in range(c.workers + c.compile_workers):
            device = c.devices[slot % len(c.devices)] if c.devices else None
            wc = WorkerConfig(
                slot=slot,
                plugins=list(c.plugins),
                options=c.options,
                repro_dir=str(c.repro_dir),
                inflight=str(workdir / f"inflight-{slot}"),
                log=str(workdir / f"worker-{slot}.log"),
                db=c.db,
                db_shared=list(c.db_shared),
                db_fallback=c.db_fallback,
                cuda_device=device,
                gpu_share=self._sharing(device),
                parent_pid=os.getpid(),
            )
            w = WorkerHandle(slot, device, wc, role="fuzz" if slot < c.workers else "compile")
            self._start_worker(w)
            self.workers.append(w)

    def _sharing(self, device: str | None) -> int:
        """How many of the campaign's processes (fuzzing and compile workers) run on ``device``
        (1 off a GPU: nothing to split)."""
        c = self.config
        if device is None:
            return 1
        slots = range(c.workers + c.compile_workers)
        return sum(1 for s in slots if c.devices[s % len(c.devices)] == device)

    def _kill(self, w: WorkerHandle, reason: str) -> None:
        w.kill_reason = reason
        if w.process is not None and w.process.is_alive():
            if reason == "hang":
                try:  # ask faulthandler for every thread's stack, for the finding
                    os.kill(w.process.pid, signal.SIGUSR1)
                    time.sleep(0.3)
                except OSError:
                    pass
            w.process.kill()
            w.process.join(5)

    # Scheduling ------------------------------------------------------------------------------------

    def _refund(self, seconds: float) -> None:
        """Gives back time that was not fuzzing, up to ``refund_cap``: the budget stays a bound
        on the wall clock however often workers restart or hangs are confirmed."""
        self.deadline = min(self.deadline + seconds, self.latest_deadline)

    def remaining(self) -> float:
        return self.deadline - time.perf_counter()

    def floor_progress(self, pair: PairState) -> float:
        """How much of its floor ``pair`` has had: the larger of its examples over
        ``floor_examples`` and its fuzzing seconds over ``floor_seconds`` (a real target's over
        ``real_floor_seconds``; 1: the floor is met)."""
        c = self.config
        return max(
            pair.total_examples / max(1, c.floor_examples),
            pair.fuzz_seconds / max(1e-9, self._floor_seconds(pair)),
        )

    def _floor_seconds(self, pair: PairState) -> float:
        """The fuzzing seconds of ``pair``'s floor: a mutant's, or a real target's (longer)."""
        c = self.config
        return c.floor_seconds if pair.target.is_mutant else c.real_floor_seconds

    def _pick_cold(self) -> PairState | None:
        """The pair a compile worker warms up next: one not compiled yet, real targets first,
        in the first round's order (``interleave``); then a pair whose kernel variants were
        widened (``_widen``), real targets first, the earliest widened first; then again the one
        whose fuzzing paid the most compile seconds since its last warm-up, or refused the most
        examples that would have compiled (its variants are not all compiled: the next warm-up
        draws more of them), up to ``MAX_WARMS`` times."""
        cold = self._cold_queue()
        if cold:
            return cold[0]
        wider = [
            p
            for p in self.pairs
            if p.pending is not None
            and p.warm == "ready"
            and not p.retired
            and not p.running
            and not self._done(p)
        ]
        if wider:  # widened choices, compiled ahead before they are fuzzed (``_widen``)
            return min(wider, key=lambda p: (p.target.is_mutant, p.pending_since))
        again = [
            p
            for p in self.pairs
            if p.warm == "ready"
            and 0 < p.warm_count < MAX_WARMS
            and not p.retired
            and not p.running
            and not self._done(p)
            and (
                p.stats["compile_seconds"] - p.compile_at_warm >= REWARM_AFTER
                or p.events[REFUSED] - p.refused_at_warm >= REWARM_REFUSED
            )
        ]
        return max(
            again,
            key=lambda p: (
                p.stats["compile_seconds"] - p.compile_at_warm,
                p.events[REFUSED] - p.refused_at_warm,
            ),
            default=None,
        )

    def _cold_queue(self) -> list[PairState]:
        """The pairs not warmed up yet, in the order the compile workers take them: real targets
        first, then the costliest to compile (``compile_cost``: their family's compiles on their
        backend so far; of a family none has compiled yet, first) first, else the first round's
        order (``interleave``). A pair far down the queue may be fuzzed cold
        (``_far_from_warm``), compiling on the fuzzing path, so it is best one whose compiles
        are cheap: a GPU campaign that warmed its pairs in the first round's order left ten GLA
        mutant pairs (20-60 s of compiles each) to fuzzing workers, a third of its compile
        seconds on the fuzzing path."""
        cold = [p for p in self.pairs if p.warm == "cold" and not p.retired and not p.running]
        return sorted(cold, key=lambda p: (p.target.is_mutant, -self.compile_cost(p, math.inf)))

    def _compiling_ahead(self) -> bool:
        """Whether a compile worker is there to warm pairs up (else fuzz workers compile)."""
        return any(w.role == "compile" and w.process is not None for w in self.workers)

    def _pick(self, w: WorkerHandle | None = None) -> PairState | None:
        """The pair the next slice fuzzes: every pair compiled ahead once (real targets before
        mutants), then every pair to its floor (real targets first, then those worker ``w`` has
        fuzzed before, the least fuzzed first; pairs not compiled ahead last, those that compile
        cheapest first), then those that met it by seconds short of its examples (for up to
        ``EXAMPLES_FLOOR_FACTOR`` times its seconds), then the pairs that found new bugs or coverage lately, per
        fuzzing second, with an exploration bonus (UCB; a pair another worker has loaded counts
        at ``AFFINITY``). Compile time is a setup cost: it counts neither toward a floor nor
        against a pair's rate. Where a pair's slices run matters on a compiled backend: a
        process that fuzzed the pair has its kernels loaded, another loads them again from the
        caches on disk (JAX traces and lowers them again), which is compile time on the fuzzing
        path."""
        loaded = w.loaded if w is not None else set()
        ahead = self._compiling_ahead()
        free = [p for p in self.pairs if not p.retired and not p.running and not self._done(p)]
        active = [p for p in free if p.warm == "ready" or not ahead]
        if ahead:  # and the cold pairs whose warm-up is far away: none waits for its turn
            active += self._far_from_warm(free)
        if not active:
            return None
        under = [p for p in active if self.floor_progress(p) < 1.0]
        if under:
            return min(
                under,
                key=lambda p: (
                    # A cold pair compiles as it goes, on the fuzzing path: it comes after the
                    # first slice of every pair compiled ahead, and among the pairs under their
                    # floor after the real targets and the warmed-up mutants, the cheapest first
                    # (on an H100, GLA mutant pairs taken cold while warmed-up pairs were under
                    # their floor paid a third of the campaign's compiles on the fuzzing path).
                    p.slices > 0 or p.warm == "cold",
                    p.target.is_mutant,
                    self.compile_cost(p, math.inf) if p.warm == "cold" else 0.0,
                    p.slices > 0 and p.key not in loaded,
                    self.floor_progress(p),
                    p.slices,
                ),
            )
        # Then the pairs that met their floor by seconds, short of its examples (a slow pair:
        # GPU campaign after GPU campaign left a missed GLA mutant pair on Pallas at 130 of 200
        # examples), up to EXAMPLES_FLOOR_FACTOR times their floor's seconds.
        short = [p for p in active if self._short_of_examples(p)]
        if short:
            return min(
                short,
                key=lambda p: (
                    p.warm == "cold",
                    p.target.is_mutant,
                    p.key not in loaded,
                    p.total_examples,
                ),
            )
        total = sum(p.slices for p in self.pairs) + 1
        return max(
            active,
            key=lambda p: (
                (1.0 if p.key in loaded else AFFINITY)
                * (p.rate + 0.5 * math.sqrt(math.log(total + 1) / (p.slices + 1)))
            ),
        )

    def _short_of_examples(self, pair: PairState) -> bool:
        """Whether ``pair`` met its floor by fuzzing seconds with fewer than ``floor_examples``
        examples, and has had less than ``EXAMPLES_FLOOR_FACTOR`` times the floor's seconds: it
        is fuzzed on to the examples before the productive pairs are favoured."""
        return (
            pair.total_examples < self.config.floor_examples
            and pair.fuzz_seconds < EXAMPLES_FLOOR_FACTOR * self._floor_seconds(pair)
        )

    def compile_cost(self, pair: PairState, unknown: float = 0.0) -> float:
        """The seconds one compile of ``pair``'s kernels is expected to take: the mean of its
        compiles so far (warm-ups included; loads of kernels compiled elsewhere not), else of
        the pairs of its family on its backend (a mutant's kernels are its target's, edited);
        ``unknown`` where nothing is known."""

        def totals(ps: Iterable[PairState]) -> tuple[float, float]:
            secs = n = 0.0
            for p in ps:
                st = p.stats
                secs += st["compile_seconds"] - st["cache_load_seconds"] + st["precompile_seconds"]
                n += st["compiles"] - st["cache_loads"] + st["precompiles"]
            return secs, n

        secs, n = totals([pair])
        if n <= 0:
            secs, n = totals(
                p
                for p in self.pairs
                if p.backend == pair.backend and p.target.family == pair.target.family
            )
        return secs / n if n > 0 else unknown

    def _far_from_warm(self, free: list[PairState]) -> list[PairState]:
        """The cold pairs of ``free`` whose warm-up is more than ``COLD_WAIT`` seconds away, and
        more than ``COLD_COMPILE_FACTOR`` times the compile seconds of its family's warm-ups,
        by their place in the compile workers' queue and the warm-ups measured so far (none
        before one has ended): a fuzzing worker may take one (after the warmed-up pairs under
        their floor, see ``_pick``) and compiles what it draws, within the compile share, rather than leave it unfuzzed until
        the compile workers reach it (an H200 campaign left 40 mutant pairs unfuzzed so). A
        pair that compiles dear waits longer: on an H100, GLA mutant pairs taken cold paid
        20-60 s of compiles each on the fuzzing path, a third of the campaign's there."""
        done = [p.warm_seconds / p.warm_count for p in self.pairs if p.warm_count]
        n = sum(1 for x in self.workers if x.role == "compile" and x.process is not None)
        if not done or not n:
            return []
        mean = sum(done) / len(done)
        queue = self._cold_queue()  # _pick_cold's order
        far = {
            p.key
            for k, p in enumerate(queue)
            if (k // n + 1) * mean > max(COLD_WAIT, COLD_COMPILE_FACTOR * self._warm_compile(p))
        }
        return [p for p in free if p.key in far]

    def _warm_compile(self, pair: PairState) -> float:
        """The compile seconds a warm-up of ``pair`` is expected to take: the mean of the first
        warm-ups of its family's pairs on its backend (what fuzzing it cold would compile on the
        fuzzing path); infinite where none has ended (it may be dear: it waits its turn)."""
        firsts = [
            p.first_warm_compile
            for p in self.pairs
            if p.backend == pair.backend
            and p.target.family == pair.target.family
            and p.first_warm_compile is not None
        ]
        return sum(firsts) / len(firsts) if firsts else math.inf

    def _done(self, pair: PairState) -> bool:
        """Whether ``pair`` has run the examples the campaign asked of each pair (``--examples``)."""
        quota = self.config.examples
        return quota is not None and pair.examples >= quota

    def _dispatch(self, w: WorkerHandle) -> bool:
        try:
            w.log_offset = os.path.getsize(w.config.log)
        except OSError:
            w.log_offset = 0
        if self.replay_queue and w.role == "fuzz":
            item = self.replay_queue.pop(0)
            self.slice_ids += 1
            now = time.perf_counter()
            timeout = self.config.example_timeout
            if item.get("confirm_hang"):
                timeout *= self.config.hang_confirm_factor
            w.busy = Slice(
                self.slice_ids,
                None,
                now,
                0.0,
                now + timeout * 2 + 30,
                kind="replay",
                replay_path=item["reproducer"],
                timeout=timeout,
                confirm=item if item.get("confirm_hang") else None,
            )
            w.conn.send(("replay", {"slice": self.slice_ids, "path": item["reproducer"]}))
            return True
        left = self.remaining()
        if left < 0.5 or self.stop_reason:
            return False
        warm = w.role == "compile"
        pair = self._pick_cold() if warm else self._pick(w)
        if pair is None:
            return False
        if not warm:
            w.loaded.add(pair.key)
        self.slice_ids += 1
        limit = min(self.slice_seconds, left)
        # Shrinking a new bug may take a while, and longer where each new shape compiles: a
        # GLA pair (5 s a compile on an H100) spent its 30 s in two cut stages on the compiled
        # backend and left none for the interpreter's search (665,600 elements, CPU: 272).
        shrink = max(
            30.0, 2 * self.slice_seconds, min(SHRINK_MAX, SHRINK_COMPILES * self.compile_cost(pair))
        )
        now = time.perf_counter()
        sl = Slice(self.slice_ids, pair, now, limit, now + limit + shrink, warm=warm)
        if warm:
            pair.warm = "warming"
        pair.running = True
        pair.live_examples = 0
        pair.live_compile = 0.0
        pair.slice_new = 0.0
        pair.new_origins = set()
        w.busy = sl
        # A warm-up of widened choices is a first warm-up of them.
        level = 0 if warm and pair.pending is not None else pair.warm_count
        task = {
            "slice": sl.id,
            "target": pair.target.name,
            "backend": pair.backend,
            "seed": (self.config.seed * 1_000_003 + sl.id) % 2**32,
            "time_limit": limit,
            "hard_limit": limit + shrink,
            "max_examples": None
            if self.config.examples is None
            else self.config.examples - pair.examples,
            "known": [b.as_dict() for b in pair.bugs()],
            "reuse": pair.slices == 0 and not warm,
            "narrowing": pair.pending if warm and pair.pending is not None else pair.narrowing,
            "warm": warm,
            "quiet": self.config.warm_quiet * 2**level,  # each warm-up draws longer
            "warm_limit": WARM_SECONDS * 2**level,
            "structures": [] if warm else pair.structures,
            # The pair's fuzzing so far: its compile share holds over the whole campaign.
            "compile_spent": [0.0, 0.0, 0.0]
            if warm
            else [pair.stats["compile_seconds"], pair.seconds, self.compile_cost(pair)],
        }
        w.conn.send(("hunt", task))
        return True

    # Messages --------------------------------------------------------------------------------------

    def note_db_problems(self, problems: Sequence[str]) -> None:
        """Keeps example database problems for the report and says each new one on the console
        (the first ten; a database that cannot be reached fails quietly otherwise)."""
        for p in problems:
            if p not in self.db_problems and len(set(self.db_problems)) < 10:
                self.log(f"WARNING {p}")
            self.db_problems.append(p)

    def _pair_of(self, w: WorkerHandle, sid: int) -> PairState | None:
        if w.busy is not None and w.busy.id == sid:
            return w.busy.pair
        return None

    def _record(self, pair: PairState, rec: dict[str, Any], *, origin: str | None = None) -> bool:
        """Keeps finding ``rec`` of ``pair``: a new bug, or a later (smaller) example of the bug
        ``origin`` first streamed (a slice's first sight of a bug, then its minimal example), or
        an example of a bug found before (``fuzz.signatures.same_bug``: the one with fewer
        triggers is kept and the other counted as a hit of it). Returns whether it is a new bug."""
        sig = rec["signature"]
        rec = {**rec, "target": pair.target.name, "backend": pair.backend}
        seen = False  # an earlier record of the same bug was kept or replaced
        prev = None
        if origin is not None:
            prev = pair.origins.get(origin)
            pair.origins[origin] = sig
            old = pair.found.pop(prev, None) if prev is not None and prev != sig else None
            seen = prev is not None
            if old is not None:
                pair.replaced[str(prev)] = sig
                self._supersede(old, rec)
                rec["first_example"] = old.get("first_example", rec.get("first_example"))
                rec["first_seconds"] = old.get("first_seconds", rec.get("first_seconds"))
                rec["first_triggers"] = old.get("first_triggers", old.get("triggers", []))
        bug = _bug(rec)
        for other_sig, other in list(pair.found.items()):
            if other_sig != sig and _same_call(rec, other):
                # Its minimal example is a bug's found before, failing another property: one
                # kernel call, one bug (``fuzz.engine``'s ``same_call``, across slices).
                self._hit(pair, rec, other_sig, streamed=prev == sig, origin=origin)
                return False
            if other_sig == sig or not same_bug(bug, _bug(other)):
                continue
            seen = True
            if len(bug.triggers) >= len(other.get("triggers", ())):
                _also(other, rec.get("triggers"))  # an example of a bug found before
                self._hit(pair, rec, other_sig, streamed=prev == sig, origin=origin)
                return False
            pair.found.pop(other_sig)  # this example of it needs fewer conditions: keep it
            pair.replaced[other_sig] = sig
            self._unnew(pair, origin)  # (a bug found before, all the same)
            self._supersede(other, rec)
            rec = {**rec, "also_triggers": list(other.get("also_triggers", []))}
            _also(rec, other.get("triggers"))
            pair.known_hits[sig] += 1 + pair.known_hits.pop(other_sig, 0)
        old = pair.found.get(sig)
        if old is not None and prev is None:  # the same bug from another slice or death: a hit
            pair.known_hits[sig] += 1
            self._supersede(rec, old)
            self._write_report(throttle=True)
            return False
        if old is not None:
            self._supersede(old, rec)
            if prev is not None and prev != sig:  # its minimal example is a bug found before
                self._unnew(pair, origin)
        new = old is None and not seen
        if new:
            pair.slice_new += NEW_CLASS_WEIGHT
            if origin is not None:
                pair.new_origins.add(origin)
            # A first sight with a known bug's key may shrink into that bug: said so.
            maybe = next(
                (
                    s
                    for s, f in pair.found.items()
                    if s != sig and rec.get("bug_key") and f.get("bug_key") == rec.get("bug_key")
                ),
                None,
            )
            self.log(
                f"FOUND {rec['class']} in {pair.target.name} on {pair.backend}: "
                f"{rec['message'][:160]}"
                + (f" -> {rec['reproducer']}" if rec.get("reproducer") else "")
                + (
                    f" (bug {maybe} has its failure key: shrinking tells whether it is another)"
                    if maybe and not rec.get("shrunk")
                    else ""
                )
            )
        pair.found[sig] = rec
        self._write_report(throttle=True)
        return new

    def _hit(
        self,
        pair: PairState,
        rec: dict[str, Any],
        other_sig: str,
        *,
        streamed: bool,
        origin: str | None,
    ) -> None:
        """Counts finding ``rec`` of ``pair`` as a hit of the bug recorded as ``other_sig``.
        ``streamed``: its slice streamed its first sight as new, whose record (and hits) go to
        that bug."""
        sig, other = rec["signature"], pair.found[other_sig]
        pair.known_hits[other_sig] += 1
        self._unnew(pair, origin)
        if streamed and sig in pair.found:
            self._supersede(pair.found.pop(sig), other)
            pair.replaced[sig] = other_sig
            pair.known_hits[other_sig] += pair.known_hits.pop(sig, 0)
            self.log(
                f"{pair.target.name} on {pair.backend}: the {rec['class']} first seen as "
                f"new ({sig}) is the bug found before ({other_sig}): one bug"
            )
        self._supersede(rec, other)
        if origin is not None:
            pair.origins[origin] = other_sig
        self._write_report(throttle=True)

    @staticmethod
    def _unnew(pair: PairState, origin: str | None) -> None:
        """A bug its slice streamed as new (``origin``) is a bug found before: it no longer
        counts toward the slice's gain (a pair that found one bug again in every slice, each
        time first as new, was favoured as productive)."""
        if origin is not None and origin in pair.new_origins:
            pair.new_origins.discard(origin)
            pair.slice_new = max(0.0, pair.slice_new - NEW_CLASS_WEIGHT)

    def _retract(self, pair: PairState, origin: str, dup: dict[str, Any]) -> None:
        """A bug the slice streamed as new (``origin``) turned out to be known bug
        ``dup["twin"]`` (``fuzz.engine``'s duplicate check: shrunk once more, it became the
        twin's example, or its NaN is born at the twin's site): its record goes, its example
        counts as a hit of the twin (in the slice's ``known_hits``), and a twin by site notes its
        conditions as another way to it (``also_triggers``: passed on as known)."""
        sig, twin = pair.origins.get(origin), _current(pair, dup["twin"])
        if sig is None or sig == twin or sig not in pair.found or twin not in pair.found:
            return
        rec = pair.found.pop(sig)
        pair.replaced[sig] = twin
        self._unnew(pair, origin)
        self._supersede(rec, pair.found[twin])
        if dup.get("how") == "site":  # (a shrunk twin's first conditions may hold for others)
            _also(pair.found[twin], dup.get("triggers"))
        # The conditions it was first seen with lead to the twin: later examples with all of
        # them are its hits, not shrunk again (a GPU plugin campaign shrank examples with one
        # set of conditions into one known bug in three slices, each reporting it first as new).
        _also(pair.found[twin], rec.get("first_triggers", rec.get("triggers")))
        pair.origins[origin] = twin
        self.log(
            f"{pair.target.name} on {pair.backend}: the {rec['class']} first seen as new "
            f"({sig}) shrank to the bug found before ({twin}): one bug"
        )
        self._write_report(throttle=True)

    def _supersede(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Marks ``old``'s reproducer for removal at the end, unless ``new`` uses the same file."""
        if old.get("reproducer") and old.get("reproducer") != new.get("reproducer"):
            self._superseded.append(Path(old["reproducer"]))

    def _handle(self, w: WorkerHandle, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "ready":
            w.ready = True
            w.startup_failures = 0
            return
        if kind == "fatal":
            w.fatal = msg[1]
            self.log(f"worker {w.slot} could not start: {msg[1]}\n{msg[2]}")
            return
        sid = msg[1]
        if kind == "replayed":
            self._replayed(w, msg[2])
            return
        pair = self._pair_of(w, sid)
        if pair is None:
            return
        if kind == "progress":
            pair.live_examples = msg[2]
            if len(msg) > 4:
                pair.live_compile = msg[4]
        elif kind == "feature":
            if msg[2] not in pair.features:
                pair.features.add(msg[2])
                pair.slice_new += 1.0
        elif kind == "found":
            if self._record(pair, msg[2], origin=_origin(sid, msg[2])):
                w.busy.found_new = True  # type: ignore[union-attr]
        elif kind == "disk-full":
            self._disk_is_full(msg[2])
        elif kind == "context-lost":
            self.notes.append(
                f"{pair.target.name} on {pair.backend}: the CUDA context was lost ({msg[2][:200]}); "
                "worker restarted"
            )
        elif kind == "done":
            self._slice_done(w, pair, msg[2])

    def _slice_done(self, w: WorkerHandle, pair: PairState, summary: dict[str, Any]) -> None:
        sl = w.busy
        assert sl is not None
        w.busy = None
        pair.running = False
        pair.examples += summary.get("examples", 0)
        pair.live_examples = 0
        pair.live_compile = 0.0
        secs = summary.get("seconds", time.perf_counter() - sl.started)
        if sl.warm:  # off the fuzzing path: its time and compiles are the pair's setup
            pair.warm = "ready"
            pair.warm_count += 1
            if pair.pending is not None:  # its widened choices are compiled: fuzzed from now
                pair.narrowing, pair.pending, pair.warm_count = pair.pending, None, 1
            pair.compile_at_warm = pair.stats["compile_seconds"]
            pair.refused_at_warm = pair.events[REFUSED]
            # What it compiled: the workers that fuzz the pair reuse these structures first.
            pair.structures = list(summary.get("structures") or pair.structures)
            pair.warm_seconds += secs
            pair.stats["precompile_seconds"] += summary.get("compile_seconds", 0.0)
            if pair.first_warm_compile is None:
                pair.first_warm_compile = summary.get("compile_seconds", 0.0)
            pair.stats["precompiles"] += summary.get("compiles", 0) - summary.get("cache_loads", 0)
            summary = {
                **summary,
                "compile_seconds": 0.0,
                "seconds": 0.0,
                "compiles": 0,
                "cache_loads": 0,
                "cache_load_seconds": 0.0,
            }
            secs = 0.0
        else:
            pair.slices += 1
            pair.seconds += secs
            refused = (summary.get("events") or {}).get(REFUSED, 0)
            if not summary.get("examples") and (refused or summary.get("stopped") == "refused"):
                pair.refused_seconds += max(0.0, secs - summary.get("compile_seconds", 0.0))
        for rec in summary.get("found", []):
            self._record(pair, rec, origin=_origin(sl.id, rec))
        for dup in summary.get("duplicates", []):
            self._retract(pair, _origin(sl.id, {"details": dup, "bug_key": dup["bug_key"]}), dup)
        for k in (
            "launches",
            "launch_seconds",
            "compiles",
            "compile_seconds",
            "cache_loads",
            "cache_load_seconds",
            "twin_launches",
            "twin_seconds",
            "shrink_seconds",
        ):
            pair.stats[k] += summary.get(k, 0)
        pair.events.update(summary.get("events", {}))
        pair.known_hits.update(summary.get("known_hits", {}))
        pair.declared_hits.update(summary.get("declared_hits", {}))
        for feat in summary.get("features", []):
            if feat not in pair.features:
                pair.features.add(feat)
                pair.slice_new += 1.0
        self.note_db_problems(summary.get("db_problems", []))
        self._retire(pair, summary)
        if not sl.warm:
            self._widen(pair)
        if summary.get("recycle"):
            r = summary["recycle"]
            w.recycles += 1
            w.ready = False  # it exits now: no new slice for it
            self.log(
                f"worker {w.slot} is recycled: its process holds {r['maps']} memory maps of "
                f"the {r['limit']} it may have; a fresh one takes over"
            )
        fuzz = max(secs - summary.get("compile_seconds", 0.0), 0.1)
        if not sl.warm:
            pair.rate = 0.5 * pair.rate + 0.5 * pair.slice_new / fuzz
        n = summary.get("examples", 0)
        compiling = summary.get("compile_seconds", 0.0)
        if sl.warm:
            self.log(
                f"{pair.target.name} on {pair.backend}: warmed up (compiled ahead) in "
                f"{pair.warm_seconds:.1f}s, {pair.stats['precompile_seconds']:.1f}s of it "
                f"compiling, {n} examples"
            )
        else:
            self.log(
                f"{pair.target.name} on {pair.backend}: +{n} examples in {secs:.1f}s"
                + (f" ({compiling:.1f}s compiling)" if compiling >= 0.05 else "")
                + f" ({n / fuzz:.1f}/s), total {pair.examples}; bugs: {len(pair.found)}"
                + (f" ({', '.join(sorted(pair.classes))})" if pair.found else "")
                + (f" [{pair.retired}]" if pair.retired else "")
            )
        self._write_report(throttle=True)

    def _retire(self, pair: PairState, summary: dict[str, Any]) -> None:
        """Retires ``pair`` when it is finished, and only then: a harness error, a search space
        Hypothesis says is exhausted, or (a mutant) its expected class found and shrunk. A pair
        is never retired for running fast or for finding something: it keeps hunting for more
        bugs, the ones found counting as hits."""
        if pair.retired:
            return
        if summary.get("error"):
            source = pair.target.source
            where = "" if source == "builtin" else f" (target from plugin {source})"
            pair.error = f"{summary['error']}{where}"
            pair.retired = "harness error"
            self.log(f"ERROR {pair.target.name} on {pair.backend}: {pair.error[:400]}")
        elif summary.get("stopped") == "exhausted":
            pair.retired = "search space exhausted"
        elif pair.mutant_done():
            pair.retired = "mutant found and shrunk"

    def _widen(self, pair: PairState) -> None:
        """Adds one more value per compile-time dimension to ``pair``'s choices once it has had
        another floor's worth of fuzzing (examples or seconds, as ``floor_progress``) with the
        ones it has: a bug that needs a variant the first choices lack (a causal loop bound
        wrong only where block_q > block_k) was otherwise never met, campaign after campaign
        with the same seed. The choices it had stay first among them (a recorded choice keeps
        its meaning; the kernels compiled for them stay in the caches, and the structure memos
        reuse the structures launched before, borrowed from the narrower strategy's pool:
        ``strategies.reuse.StructureMemo``). Where compiling goes ahead, a compile worker warms
        the pair up again for the new variants, after the first warm-ups of every pair (``_pick_cold``),
        and its fuzzing goes on with the variants compiled till then (``pending``): in a GPU
        campaign that stopped fuzzing a widened pair until its new variants were compiled, and
        put those warm-ups first, the widened real targets took 1,164 s of the compile workers'
        2,200, the first warm-ups of 25 of 73 mutant pairs never came, and those pairs compiled
        on the fuzzing path (a compile share of 27%)."""
        c = self.config
        if pair.retired or not pair.narrowing or pair.pending is not None:
            return
        examples, seconds = pair.widened_at
        if (
            pair.examples - examples < c.floor_examples
            and pair.fuzz_seconds - seconds < c.floor_seconds
        ):
            return
        wider = run_narrowing(pair.target, c.options, c.seed, widen=pair.widened + 1)
        if wider == pair.narrowing:
            return  # every value of every dimension already
        added = {dim: values[len(pair.narrowing[dim]) :] for dim, values in wider.items()}
        pair.widened += 1
        pair.widened_at = (pair.examples, pair.fuzz_seconds)
        if pair.warm == "ready" and self.config.compile_workers and pair.warm_count:
            pair.pending = wider  # a compile worker compiles the new variants ahead
            pair.pending_since = time.perf_counter()
        else:
            pair.narrowing = wider
        said = "; ".join(f"{d} + {', '.join(map(str, v))}" for d, v in added.items() if v)
        self.log(
            f"{pair.target.name} on {pair.backend}: kernel variants widened ({pair.widened}): "
            f"{said or 'nothing new'}"
        )

    # Deaths and hangs ------------------------------------------------------------------------------

    def _check_deaths(self, pair: PairState) -> None:
        """Retires a pair whose worker died ``max_deaths`` times on bugs it had found before:
        each such death costs a worker's restart and tells nothing new."""
        if pair.repeat_deaths >= self.config.max_deaths and not pair.retired:
            pair.retired = f"killed its worker {pair.repeat_deaths} more times on bugs found before"

    def _death_finding(self, w: WorkerHandle, pair: PairState, cls: str, message: str) -> None:
        rec = self._death_record(w, pair, cls, message)
        if rec is not None and not self._record(pair, rec):
            pair.repeat_deaths += 1

    def _suspect_hang(self, w: WorkerHandle, pair: PairState, message: str) -> None:
        """A first timeout is a suspicion, not yet a finding: a first compilation of a large
        kernel, or a machine busy with other work, outlasts the per-example timeout just as a
        hang does. The in-flight example is replayed next, in a fresh worker, with
        ``hang_confirm_factor`` times the timeout; only if it outlasts that too is it a ``hang``
        (its reproducer is written now, so nothing is lost if the campaign ends first)."""
        rec = self._death_record(w, pair, F.HANG, message)
        if rec is not None:
            self.replay_queue.insert(
                0, {"reproducer": rec["reproducer"], "confirm_hang": rec, "pair": pair}
            )

    def _hang_confirmed(self, item: dict[str, Any], result: dict[str, Any] | None) -> None:
        """Settles a suspected hang with its replay's ``result`` (None: never replayed)."""
        if item.get("orphan"):
            self._orphan_settled(item, result)
            return
        rec, pair = item["confirm_hang"], item["pair"]
        longer = self.config.example_timeout * self.config.hang_confirm_factor
        if result is not None and (
            result.get("status") == "pass" or (result.get("status") == "fail" and "class" in result)
        ):
            self.notes.append(
                f"{pair.target.name} on {pair.backend}: an example outlasted the "
                f"{self.config.example_timeout:g} s per-example timeout once, then finished "
                f"within {longer:g} s on a second try ({result.get('verdict', '')[:120]}): slow "
                "(a first compilation?), not a hang"
            )
            Path(rec["reproducer"]).unlink(missing_ok=True)
            return
        verdict = "" if result is None else str(result.get("verdict", ""))
        if result is None:
            why = "not confirmed: the campaign ended before the second try"
        elif "per-example timeout" in verdict:
            why = f"confirmed: the second try, with {longer:g} s, {verdict.removeprefix('the ')}"
        else:
            why = f"not confirmed: {verdict}"
        if not self._record(pair, {**rec, "message": f"{rec['message']} ({why})"}):
            pair.repeat_deaths += 1
            self._check_deaths(pair)

    def _death_record(
        self, w: WorkerHandle, pair: PairState, cls: str, message: str
    ) -> dict[str, Any] | None:
        """The finding of a worker that died or hung on its in-flight example, with its
        reproducer written (None: no example was in flight)."""
        got = read_inflight(w.config.inflight)
        log_tail = _tail(w.config.log, 40)
        if got is None:
            self.notes.append(
                f"{pair.target.name} on {pair.backend}: {message} (no in-flight case)"
            )
            return None
        meta, case = got
        finding = Finding(
            cls,
            "process" if cls == F.CRASH else "timeout",
            message,
            hazards=pair.target.hazards_of(case),
            details={"process": message, "log": log_tail},
        )
        key = bug_key(finding)
        # A death cannot be shrunk in the worker: its conditions are those of whatever example
        # died, so it is told apart by its key alone (one crash, one hang per pair).
        sig = signature(pair.target.name, key, ())
        finding.details.update(signature=sig, bug_key=key, triggers=[])
        path = self._isolated_reproducer(
            pair.target, pair.backend, case, meta.get("property_params", {}), finding
        )
        rec = {
            **finding.as_dict(),
            "signature": sig,
            "bug_key": key,
            "triggers": [],
            "case": repr(case),
            "case_size": case.size,
            "shapes": case.shapes(),
            "params": case.params_json(),
            "first_example": pair.total_examples,
            "first_seconds": round(pair.seconds + time.perf_counter() - w.busy.started, 3)
            if w.busy
            else 0.0,
            "shrink_seconds": 0.0,
            "shrunk": False,
            "reproducer": None if path is None else str(path),
            "plots": [],
        }
        return rec

    def _isolated_reproducer(
        self, target: Target, backend: str, case: Any, params: dict[str, Any], finding: Finding
    ) -> Path | None:
        """Writes the reproducer of a finding that killed or hung its process (it replays in a
        child process); None where the disk is full (the campaign then stops)."""
        try:
            return reproducer.write(
                self.config.repro_dir,
                target=target,
                backend=backend,
                case=case,
                params=params,
                finding=finding,
                **self.config.options.check_kwargs(),
                isolate=True,
                timeout=self.config.example_timeout,
            )
        except OSError as e:
            if not is_disk_full(e):
                raise
            self._disk_is_full(
                f"a reproducer of {target.name} in {self.config.repro_dir} could not be "
                f"written ({e.strerror})"
            )
            return None

    def _book_slice(self, sl: Slice) -> None:
        """Books the examples and time of a slice that ended without its summary."""
        pair = sl.pair
        assert pair is not None
        pair.running = False
        pair.examples += pair.live_examples
        if sl.warm:  # a warm-up that died: its fuzz workers take it as it is
            pair.warm = "ready"
            pair.warm_count = MAX_WARMS  # and no warm-up again
            if pair.pending is not None:  # (its widened choices compile as they are drawn)
                pair.narrowing, pair.pending = pair.pending, None
            pair.warm_seconds += time.perf_counter() - sl.started
            pair.stats["precompile_seconds"] += pair.live_compile
        else:
            pair.slices += 1
            spent = time.perf_counter() - sl.started
            pair.seconds += spent
            pair.stats["compile_seconds"] += pair.live_compile
            # Past its search's time limit (compiling not counted), a slice was shrinking what
            # it found or running over: not fuzzing toward the pair's floor. (An H100 campaign
            # killed a GLA mutant's slice while it shrank a second bug; its 111 s counted as
            # fuzzing met the floor with 5 examples.)
            over = spent - (sl.time_limit + pair.live_compile)
            pair.stats["shrink_seconds"] += max(0.0, over)
        pair.live_examples = 0
        pair.live_compile = 0.0
        # What it streamed stays: a mutant whose expected bug came shrunk is finished (the
        # same H100 campaign left such a pair unretired, and unfuzzed, after the kill).
        self._retire(pair, {})

    # Out-of-resources messages of a process (LLVM, the C++ runtime, Python, the C library).
    EXHAUSTION_TEXTS = (
        "Cannot allocate memory",
        "LLVM ERROR: out of memory",
        "std::bad_alloc",
        "MemoryError",
    )

    def _exhausted(self, w: WorkerHandle, code: int | None) -> str | None:
        """Why the death of worker ``w`` (exit ``code``) was the harness process running out of
        memory maps or memory rather than a kernel crash, or None: killed by a fault signal with
        its memory maps near the limit, or after an out-of-resources message in its log."""
        if code == EXIT_DEVICE_MEMORY:
            return "the GPU ran out of memory"
        limit = self.map_limit
        faulted = code is not None and code < 0 and -code in FAULT_SIGNALS
        if faulted and limit and w.maps >= EXHAUSTED_AT * limit:
            return f"{w.maps} memory maps of the {limit} a process may have"
        try:
            with open(w.config.log, "rb") as f:
                f.seek(w.log_offset)
                text = f.read().decode(errors="replace")
        except OSError:
            return None
        said = next((t for t in self.EXHAUSTION_TEXTS if t in text), None)
        return f"it said {said!r} first" if said and code != 0 else None

    def _exhaustion(self, w: WorkerHandle, pair: PairState, code: int | None, why: str) -> None:
        """Books a worker that died of a resource exhaustion of the harness: no finding; a pair
        whose worker dies so twice is a harness error (its examples cannot run here)."""
        pair.exhaustions += 1
        text = (
            f"worker {w.slot} {_exit_text(code, None)} while fuzzing {pair.target.name} on "
            f"{pair.backend}: the harness ran out of resources ({why}), not a kernel crash"
        )
        self.notes.append(text)
        self.log(f"WARNING {text}; restarting it")
        self._retire(pair, {})  # what it streamed before may have finished it (a mutant)
        if pair.exhaustions >= 2 and not pair.retired:
            pair.error = f"its worker ran out of resources {pair.exhaustions} times (last: {why})"
            pair.retired = "resource exhaustion"

    def _worker_gone(self, w: WorkerHandle) -> None:
        """Books a worker process that ended (died, hung and was killed, stopped, recycled): its
        slice's outcome, then a fresh worker unless the campaign is ending or it cannot start."""
        code = w.process.exitcode if w.process is not None else None
        sl = w.busy
        reason = w.kill_reason
        if code is None and w.process is not None:
            w.process.join(1)
            code = w.process.exitcode
        # A stop asked for from outside (timeout, systemd, kill -TERM -PGID) is never a finding,
        # nor a worker ending itself to be replaced (recycled), nor the harness running out of
        # memory maps or memory.
        stopped = reason is None and (_stop_signal(code) is not None or code == EXIT_RECYCLE)
        exhausted = None if reason or stopped or sl is None else self._exhausted(w, code)
        if sl is not None and sl.kind == "replay":
            status = "error" if stopped or exhausted else "fail"
            verdict = f"the replay {_exit_text(code, reason)}" + (
                f" ({exhausted})" if exhausted else ""
            )
            self._replayed(w, {"path": sl.replay_path, "status": status, "verdict": verdict})
        elif sl is not None and sl.pair is not None and exhausted:
            self._book_slice(sl)
            self._exhaustion(w, sl.pair, code, exhausted)
        elif sl is not None and sl.pair is not None:
            self._book_slice(sl)
            self._slice_lost(w, sl.pair, code, reason, stopped=stopped)
        clear_inflight(w.config.inflight)
        if not w.ready and code != EXIT_RECYCLE:
            w.startup_failures += 1  # died before it could take any work
        w.busy = None
        w.ready = False
        if w.conn is not None:
            w.conn.close()
            w.conn = None
        self._replace(w, reason)

    def _slice_lost(
        self,
        w: WorkerHandle,
        pair: PairState,
        code: int | None,
        reason: str | None,
        *,
        stopped: bool,
    ) -> None:
        """What the end of worker ``w`` in the middle of a slice of ``pair`` means: a suspected
        hang, a crash finding, a note, or nothing (a stop); and a death of the pair's."""
        if stopped:
            pass  # its example was interrupted, not faulty: no finding, no death
        elif reason == "hang" and w.compiling:
            # A compile that outlasts --compile-timeout is a hang of the compiler on this case:
            # no second try (it would cost the timeout again), a finding with its reproducer.
            msg = (
                f"a kernel was still compiling after {self.config.compile_timeout:g} s "
                "(compile timeout); the worker was killed"
            )
            self._death_finding(w, pair, F.HANG, msg)
        elif reason == "hang":
            msg = (
                f"an example did not finish within {self.config.example_timeout:g} s "
                "(per-example timeout, compile time not counted); the worker was killed"
            )
            self._suspect_hang(w, pair, msg)
        elif code == EXIT_CONTEXT_LOST:
            # The finding came over the pipe before the worker exited; a bug found before,
            # again, is a death that tells nothing new.
            if w.busy is None or not w.busy.found_new:
                pair.repeat_deaths += 1
        elif reason == "overran":
            why = "shrinking too slow" if pair.found else "its examples too slow"
            self.notes.append(
                f"{pair.target.name} on {pair.backend}: a slice overran its hard "
                f"limit ({why}); the worker was restarted"
            )
        elif reason != "shutdown":
            self._death_finding(w, pair, F.CRASH, f"the worker {_exit_text(code, reason)}")
        pair.deaths += reason != "overran" and not stopped
        self._check_deaths(pair)
        self.log(
            f"worker {w.slot} {_exit_text(code, reason)} while fuzzing "
            f"{pair.target.name} on {pair.backend}"
        )

    def _replace(self, w: WorkerHandle, reason: str | None) -> None:
        """Starts a fresh process for worker ``w`` unless the campaign is ending, or ``w``
        cannot start (then a harness error)."""
        out_of_time = self.fuzz_started is not None and self.remaining() < 0.5
        if self.stop_reason or reason == "shutdown" or (out_of_time and not self.replay_queue):
            w.process = None
            return
        if w.fatal is not None or w.startup_failures >= 3:
            # An exception in the worker's set-up (a plugin that does not import there) is the
            # same every time; a start-up that dies outright is tried three times.
            why = w.fatal or f"it died 3 times while starting (see {w.config.log})"
            self.errors.append(f"worker {w.slot} could not start: {why}")
            self.log(f"ERROR worker {w.slot} could not start: {why}")
            w.process = None
            return
        self.restarts += 1
        w.restarts += 1
        self._start_worker(w)

    # Orphans ---------------------------------------------------------------------------------------

    def _adopt_orphans(self) -> None:
        """Picks up the in-flight records that a campaign which died in this output folder left
        (``kill -9``, an OOM kill of the coordinator, a machine that went down): the example
        each of its workers was running then. Each becomes a reproducer and is replayed first,
        in a fresh worker with ``hang_confirm_factor`` times the per-example timeout: a ``hang``
        or ``crash`` finding if it hangs or kills the worker again, else a note that says what
        it did. One whose target this campaign does not run is a note naming its reproducer;
        a record that cannot be read is kept aside and named. None is dropped silently."""
        from fuzz.target import get

        workdir = self.config.out / "workers"
        for meta_path in sorted(workdir.glob("inflight-*.json")):
            prefix = str(meta_path.with_suffix(""))
            got = read_inflight(prefix)
            target = None
            if got is not None:
                try:
                    target = get(got[0]["target"])
                except ValueError:
                    target = None
            if got is None or target is None:
                kept = workdir / f"orphaned-{int(time.time())}-{meta_path.stem}"
                for suffix in (".json", ".npz"):
                    src = Path(prefix + suffix)
                    if src.exists():
                        os.replace(src, str(kept) + suffix)
                what = "cannot be read" if got is None else f"is of target {got[0]['target']!r}"
                self._orphan_note(
                    f"an in-flight record left by an earlier campaign that died ({meta_path.name}) "
                    f"{what}, not loaded here; kept as {kept}.json/.npz"
                )
                continue
            meta, case = got
            pair = next(
                (
                    p
                    for p in self.pairs
                    if p.target.name == meta["target"] and p.backend == meta["backend"]
                ),
                None,
            )
            rec = self._orphan_record(target, meta, case)
            clear_inflight(prefix)
            if pair is None:
                self._orphan_note(
                    f"{rec['message']}; {meta['target']} on {meta['backend']} is not run by this "
                    f"campaign: not re-checked, reproducer {rec['reproducer']}"
                )
                continue
            self.log(f"WARNING {rec['message']}; replaying it first")
            self.replay_queue.insert(
                0,
                {
                    "reproducer": rec["reproducer"],
                    "confirm_hang": rec,
                    "pair": pair,
                    "orphan": True,
                    "case": case,
                    "params": meta.get("property_params", {}),
                },
            )

    def _orphan_note(self, text: str) -> None:
        self.notes.append(text)
        self.log(f"WARNING {text}")

    def _orphan_record(self, target: Target, meta: dict[str, Any], case: Any) -> dict[str, Any]:
        """The provisional ``hang`` finding of an in-flight record a dead campaign left, with
        its reproducer written (``_orphan_settled`` decides what it is)."""
        who = meta.get("campaign_pid")
        began = meta.get("started")
        when = (
            time.strftime(" at %Y-%m-%dT%H:%M:%S%z", time.localtime(began))
            if isinstance(began, (int, float))
            else ""
        )
        message = (
            f"an example that began{when} was still running when its campaign"
            f"{f' (pid {who})' if who else ''} died"
        )
        return self._case_record(
            target, meta["backend"], case, meta.get("property_params", {}), F.HANG, message
        )

    def _case_record(
        self,
        target: Target,
        backend: str,
        case: Any,
        params: dict[str, Any],
        cls: str,
        message: str,
    ) -> dict[str, Any]:
        """The finding record of a ``crash`` or ``hang`` of ``case`` that no worker could report,
        with its reproducer (replayed in a child process) written."""
        finding = Finding(
            cls,
            "process" if cls == F.CRASH else "timeout",
            message,
            hazards=target.hazards_of(case),
            details={"process": message},
        )
        key = bug_key(finding)
        sig = signature(target.name, key, ())  # as a death's (see _death_record)
        finding.details.update(signature=sig, bug_key=key, triggers=[])
        path = self._isolated_reproducer(target, backend, case, params, finding)
        return {
            **finding.as_dict(),
            "signature": sig,
            "bug_key": key,
            "triggers": [],
            "case": repr(case),
            "case_size": case.size,
            "shapes": case.shapes(),
            "params": case.params_json(),
            "first_example": 0,
            "first_seconds": 0.0,
            "shrink_seconds": 0.0,
            "shrunk": False,
            "reproducer": None if path is None else str(path),
            "plots": [],
        }

    def _orphan_settled(self, item: dict[str, Any], result: dict[str, Any] | None) -> None:
        """What the replay of a dead campaign's in-flight example (``result``; None: never
        replayed) makes of it: a ``hang`` or ``crash`` finding, or a note."""
        rec, pair = item["confirm_hang"], item["pair"]
        head = f"{pair.target.name} on {pair.backend}: {rec['message']}"
        if rec.get("reproducer") is None:
            self._orphan_note(f"{head}; not re-checked: its reproducer could not be written")
            return
        path = Path(rec["reproducer"])
        longer = self.config.example_timeout * self.config.hang_confirm_factor
        status = None if result is None else result.get("status")
        verdict = "" if result is None else str(result.get("verdict", ""))
        if result is None:
            self._orphan_note(
                f"{head}; not re-checked: this campaign ended before replaying it "
                f"(reproducer {path})"
            )
        elif status == "pass":
            path.unlink(missing_ok=True)
            self._orphan_note(
                f"{head}; it replays and passes within {longer:g} s ({verdict[:120]}): the "
                "campaign died, not the kernel"
            )
        elif status == "fail" and "class" in result:
            self._orphan_note(
                f"{head}; it replays as a {result['class']} failure ({verdict[:160]}); "
                f"reproducer {path}"
            )
        elif status == "fail" and "per-example timeout" in verdict:
            message = f"{rec['message']}; replayed first by the next campaign, it did not finish "
            self._record(pair, {**rec, "message": message + f"within {longer:g} s: a hang"})
        elif status == "fail":  # the replay killed its worker
            crash = self._case_record(
                pair.target,
                pair.backend,
                item["case"],
                item["params"],
                F.CRASH,
                f"{rec['message']}; replayed first by the next campaign, {verdict}",
            )
            if crash["reproducer"] != str(path):
                path.unlink(missing_ok=True)
            self._record(pair, crash)
        else:
            self._orphan_note(
                f"{head}; it could not be re-checked ({verdict[:160]}); reproducer {path}"
            )

    # Triage ----------------------------------------------------------------------------------------

    def _load_previous(self) -> None:
        prev, problem = report.read_previous(self.config.out / "report.json")
        if problem is not None:
            self.notes.append(problem)
            self.log(f"WARNING {problem}")
        if prev is None:
            return
        self.previous = prev
        names = {t.name for t in self.config.targets}
        for f in prev.get("findings", []):
            repro = f.get("reproducer")
            if f.get("target") in names and repro and Path(repro).exists():
                self.replay_queue.append(f)

    def _replayed(self, w: WorkerHandle, result: dict[str, Any]) -> None:
        sl, w.busy = w.busy, None
        if sl is not None and sl.confirm is not None:
            # Settling a suspicion is not fuzzing: the budget gets this worker's time back.
            self._refund((time.perf_counter() - sl.started) / max(1, len(self.workers)))
            self._hang_confirmed(sl.confirm, result)
            return
        self.triage_results[result["path"]] = result

    # The loop --------------------------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.log(f"{reason}: stopping, writing the report of what was found so far")

    def lock(self) -> None:
        """Takes the output folder's lock (:func:`lock_output`), if not held yet."""
        if self._lock is None:
            self._lock = lock_output(self.config.out, argv=self.config.argv)

    def run(self) -> dict[str, Any]:
        """Runs the campaign to its budget (or a stop request); returns the final report."""
        self.lock()
        try:
            return self._run_locked()
        finally:
            assert self._lock is not None
            self._lock.close()  # releases the lock (it stays on disk, naming the last holder)
            self._lock = None

    def _run_locked(self) -> dict[str, Any]:
        c = self.config
        c.repro_dir.mkdir(parents=True, exist_ok=True)
        if c.triage:
            self._load_previous()
            report.archive_previous(c.out)
        self._reserve_space()
        self._adopt_orphans()  # before this campaign's workers write their own records
        self._make_workers()
        # The budget counts fuzzing time: from the moment the first worker is ready, and not while
        # every worker is (re)starting.
        waiting_since = time.perf_counter()
        budget_started = False
        last_tick = time.perf_counter()
        try:
            while True:
                now = time.perf_counter()
                if budget_started and not any(w.ready for w in self.workers):
                    self._refund(now - last_tick)  # every worker (re)starting: not fuzzing
                last_tick = now
                if not budget_started and (
                    any(w.ready for w in self.workers) or now - waiting_since > 300
                ):
                    budget_started = True
                    self.deadline = now + c.budget
                    self.latest_deadline = self.deadline + refund_cap(c.budget)
                    self.fuzz_started = now
                if budget_started and not self.stop_reason:
                    for w in self.workers:
                        if w.ready and w.busy is None and w.process is not None:
                            self._dispatch(w)
                busy = [w for w in self.workers if w.busy is not None]
                if (
                    budget_started
                    and not busy
                    and (self.stop_reason or self.remaining() < 0.5 or not self._schedulable())
                ):
                    break
                if self.stop_reason and busy:
                    self._drain(busy, grace=2.0)
                    break
                if self.stop_reason and not budget_started:
                    break  # stopped while its workers were starting: an interruption
                if budget_started and self.remaining() < -max(15.0, 0.1 * c.budget):
                    for w in busy:  # shrinking that would not end: keep what was streamed
                        self._kill(w, "overran")
                        self._worker_gone(w)
                    break
                if all(w.process is None for w in self.workers):
                    if not self.stop_reason:  # (a stop ends its workers: not their failure)
                        self.errors.append("no worker could be started: nothing was fuzzed")
                    break
                self._poll(0.2)
                if self._dirty and time.perf_counter() - self._last_write >= 1.0:
                    self._write_report()  # what a throttled write skipped
                if self.progress is not None:
                    self.progress(self)
        except KeyboardInterrupt:
            self.request_stop("interrupted")
        finally:
            self._shutdown()
        return self._write_report(final=True)

    def _schedulable(self) -> bool:
        return bool(self.replay_queue) or any(
            not p.retired and not self._done(p) for p in self.pairs
        )

    def _poll(self, timeout: float) -> None:
        live = [w for w in self.workers if w.process is not None and w.conn is not None]
        objs: list[Any] = [w.conn for w in live] + [w.process.sentinel for w in live]
        try:
            ready = multiprocessing.connection.wait(objs, timeout=timeout)
        except InterruptedError:
            ready = []
        for w in live:
            if w.conn is not None and w.conn in ready:
                try:
                    while w.conn is not None and w.conn.poll():
                        self._handle(w, w.conn.recv())
                except (EOFError, OSError):
                    pass
            if w.process is not None and w.process.sentinel in ready and not w.process.is_alive():
                try:  # messages sent just before dying
                    while w.conn is not None and w.conn.poll():
                        self._handle(w, w.conn.recv())
                except (EOFError, OSError):
                    pass
                self._worker_gone(w)
        now_wall = time.time()
        for w in self.workers:
            if w.busy is None or w.process is None:
                continue
            if time.monotonic() - w.maps_sampled >= 1.0:  # what its death would be put down to
                w.maps_sampled = time.monotonic()
                w.maps = count_maps(w.process.pid) or w.maps
            st = w.started.value if w.started is not None else 0.0
            limit = w.busy.timeout or self.config.example_timeout
            w.compiling = st < 0
            compiling = 0.0  # seconds of a compile in flight (not yet in its live_compile)
            if st < 0:  # compiling since -st: the compile timeout applies
                st, limit = -st, self.config.compile_timeout
                compiling = max(0.0, now_wall - st)
            if st > 0 and now_wall - st > limit:
                self._kill(w, "hang")
                self._worker_gone(w)
            elif self._overran(w.busy, compiling):
                self._kill(w, "overran")
                self._worker_gone(w)

    @staticmethod
    def _overran(sl: Slice, compiling: float) -> bool:
        """Whether hunt slice ``sl`` is 30 s past its hard limit, compiling not counted (a
        setup cost, as in its time limits): neither its compiles so far nor the one in flight,
        ``compiling`` seconds long (an H100 campaign killed a Pallas GLA pair's slices twice
        while they compiled, and the pair ran 19 examples in 188 s)."""
        live = sl.pair.live_compile if sl.pair is not None else 0.0
        return sl.kind == "hunt" and time.perf_counter() > sl.hard_deadline + 30 + live + compiling

    def _drain(self, busy: list[WorkerHandle], grace: float) -> None:
        end = time.perf_counter() + grace
        while any(w.busy is not None for w in busy) and time.perf_counter() < end:
            self._poll(0.1)

    def _shutdown(self) -> None:
        for w in self.workers:
            if w.process is None:
                continue
            if w.busy is not None:
                pair = w.busy.pair
                if w.busy.confirm is not None:  # a suspected hang still being replayed
                    self._hang_confirmed(w.busy.confirm, None)
                self._kill(w, "shutdown")
                if pair is not None:
                    pair.running = False
                    pair.examples += pair.live_examples
                    if w.busy.warm:
                        pair.warm_seconds += time.perf_counter() - w.busy.started
                        pair.stats["precompile_seconds"] += pair.live_compile
                    else:
                        pair.seconds += time.perf_counter() - w.busy.started
                        pair.stats["compile_seconds"] += pair.live_compile
                    pair.live_examples = 0
                    pair.live_compile = 0.0
                w.busy = None
            else:
                try:
                    w.conn.send(("stop",))
                except (OSError, AttributeError):
                    pass
                w.process.join(1)  # everything it found has arrived; do not wait on its teardown
                if w.process.is_alive():
                    w.process.kill()
                    w.process.join(3)
            clear_inflight(w.config.inflight)
            w.process = None
        for item in [i for i in self.replay_queue if i.get("confirm_hang")]:
            self._hang_confirmed(item, None)  # never replayed: kept as an unconfirmed hang
        self.replay_queue = [i for i in self.replay_queue if not i.get("confirm_hang")]

    # Reports ---------------------------------------------------------------------------------------

    def record(self) -> report.CampaignRecord:
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
            workers=[
                {"slot": w.slot, "device": w.device, "restarts": w.restarts, "recycles": w.recycles}
                for w in self.workers
            ],
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
        """Writes ``report.json`` (``final``: the whole report set, after giving back the space
        kept for it). A write skipped by ``throttle`` is made up for by the loop within a second.
        A full disk stops the campaign (:meth:`_disk_is_full`); the final write still writes
        each file it can (the others are named in ``unwritten``), each atomically. Reproducers
        superseded by a finding's newer one are removed once a report not naming them is
        written."""
        now = time.perf_counter()
        if throttle and now - self._last_write < 1.0:
            self._dirty = True
            return {}
        self._last_write = now
        self._dirty = False
        if final:
            self._release_space()
        data = report.campaign_report(self.record(), final=final)
        out = self.config.out
        writers: list[tuple[str, Callable[[], None]]] = [
            ("report.json", lambda: report.write_json(out / "report.json", data))
        ]
        if final:
            writers += [(name, write) for name, write in report.writers(out, data)]
        for name, write in writers:
            try:
                write()
            except OSError as e:
                if not is_disk_full(e):
                    raise
                self._disk_is_full(f"{out / name} could not be written ({e.strerror})")
                if not final:
                    return data
                self.unwritten.append(name)
            else:
                if name == "report.json":
                    self._drop_superseded(data)
        return data

    def _drop_superseded(self, data: dict[str, Any]) -> None:
        """Removes the reproducers of findings replaced by newer ones that the report just
        written (``data``) does not name (after a kill -9 none is left behind)."""
        named = {r for f in data.get("findings", []) for r in f.get("reproducers", [])}
        named |= {f.get("reproducer") for r in data.get("results", []) for f in r["findings"]}
        keep = []
        for p in self._superseded:
            if str(p) in named:
                keep.append(p)  # still someone's
            else:
                p.unlink(missing_ok=True)
        self._superseded = keep

    # A full disk -----------------------------------------------------------------------------------

    RESERVE = ".campaign.reserve"
    RESERVE_BYTES = 4 << 20  # kept free for the final reports (index.html is the largest)

    def _reserve_space(self) -> None:
        """Keeps :data:`RESERVE_BYTES` of the output folder's disk for the final reports: a disk
        that fills during the campaign still gets them (the space is given back first)."""
        path = self.config.out / self.RESERVE
        try:
            with open(path, "wb") as f:
                os.posix_fallocate(f.fileno(), 0, self.RESERVE_BYTES)
        except (OSError, AttributeError) as e:
            path.unlink(missing_ok=True)
            self.notes.append(
                f"no space could be kept for the final reports under {self.config.out} ({e})"
            )

    def _release_space(self) -> None:
        (self.config.out / self.RESERVE).unlink(missing_ok=True)

    def _disk_is_full(self, what: str) -> None:
        """A file of the campaign could not be written, the disk being full: the campaign stops
        (nothing more it finds could be kept) and reports what it has, said in one line."""
        if self.disk_full is None:
            self.disk_full = what
            self.notes.append(f"the disk is full: {what}; the campaign stopped")
            self.log(f"ERROR the disk is full: {what}")
        self.request_stop("disk full")


# Signals of a process that faulted (a kernel's wild access, or LLVM out of memory maps).
FAULT_SIGNALS = {signal.SIGSEGV.value, signal.SIGBUS.value, signal.SIGABRT.value}

# Signals that ask a process to stop (timeout, systemd, a CI runner, Ctrl-C, a closed terminal):
# a worker ended by one of them was stopped, it did not crash.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _stop_signal(code: int | None) -> str | None:
    """The name of the stop signal that ended a process with exit ``code``, else None."""
    if code is None or code >= 0 or -code not in {s.value for s in STOP_SIGNALS}:
        return None
    return signal.Signals(-code).name


LOCK_FILE = ".campaign.lock"


def lock_output(out: Path, *, argv: Sequence[str] = ()) -> IO[str]:
    """Locks the output folder ``out`` for one campaign; returns the open lock file (closing it,
    or the process ending in any way, releases the lock).

    Two campaigns writing one folder would share the workers' in-flight records and overwrite each
    other's report.json (losing findings). The lock is ``flock`` on ``out/.campaign.lock``: the
    operating system drops it when its holder dies, even by SIGKILL, so a lock is never stale
    (worker processes do not inherit it). The file says who holds it, for the error message.

    Raises:
        ValueError: another campaign holds the lock (the message names it).
    """
    import fcntl
    import json
    import socket

    out.mkdir(parents=True, exist_ok=True)
    f = open(out / LOCK_FILE, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        try:
            h = json.loads(f.read())
            holder = f"pid {h['pid']} on {h['host']} since {h['started']}: {h['command']}"
        except (ValueError, KeyError, TypeError):
            holder = "a process that has not said which yet"
        f.close()
        raise ValueError(
            f"--out={str(out)!r} is in use by another campaign ({holder}); wait for it to end "
            "or choose another --out"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(
        json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "command": " ".join(["python -m fuzz", *argv]),
            }
        )
        + "\n"
    )
    f.flush()
    return f


def _exit_text(code: int | None, reason: str | None) -> str:
    if reason == "hang":
        return "was killed after the per-example timeout"
    if reason == "overran":
        return "was killed: its slice overran"
    if reason == "shutdown":
        return "was stopped at the end of the campaign"
    if code is None:
        return "vanished"
    if code == EXIT_CONTEXT_LOST:
        return "exited after losing its CUDA context"
    if code == EXIT_RECYCLE:
        return "was recycled (too many memory maps)"
    if code == EXIT_DEVICE_MEMORY:
        return "exited after the GPU ran out of memory"
    if _stop_signal(code):
        return f"was stopped by {_stop_signal(code)}"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        extra = {
            "SIGSEGV": " (segmentation fault)",
            "SIGABRT": " (abort)",
            "SIGKILL": " (out of memory? the kernel's OOM killer sends SIGKILL)",
            "SIGBUS": " (bus error)",
            "SIGFPE": " (arithmetic fault)",
        }.get(name, "")
        return f"was killed by {name}{extra}"
    return f"exited with status {code}"


def _tail(path: str, n: int) -> str:
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return ""
    return "".join(lines[-n:])[-6000:]


def plugin_specs(targets: Sequence[Target]) -> list[str]:
    specs = list(plugins())
    for t in targets:
        spec = target_plugin(t)
        if spec and spec not in specs:
            specs.append(spec)
    return specs


def install_signal_handlers(campaign: Campaign) -> Callable[[], None]:
    """SIGTERM, SIGINT and SIGHUP end the campaign with a complete report; returns an undo
    function. A signal the campaign was started ignoring (``nohup``, a background job's SIGINT)
    stays ignored."""
    if threading_is_main() is False:
        return lambda: None
    saved = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    saved = {s: h for s, h in saved.items() if h is not signal.SIG_IGN}

    def handler(signum: int, frame: Any) -> None:
        campaign.request_stop(signal.Signals(signum).name)

    for s in saved:
        signal.signal(s, handler)

    def undo() -> None:
        for s, h in saved.items():
            signal.signal(s, h)

    return undo


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


__all__ = ["Campaign", "CampaignConfig", "install_signal_handlers", "plugin_specs", "visible_gpus"]
_ = sys  # (kept for debugging hooks)
