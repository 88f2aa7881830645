"""The actor side of a campaign on a Ray cluster (``python -m fuzz run --cluster``).

A fuzzing or compile worker is a Ray actor (:class:`WorkerActor`) that runs the same slices as
a worker process (:mod:`fuzz.campaign.worker`): its messages go to the coordinator through a
Ray queue instead of a pipe (:class:`QueueConn`), its example clock through the same queue
(:class:`QueueClock`), and the files it writes on its node -- reproducers, the in-flight record,
its log -- come back with its messages (reproducers) or through its node's agent
(:class:`NodeAgent`: the in-flight record and log of a worker that died). The example database
is the coordinator's, served by an actor on the coordinator's node (:class:`DatabaseServer`)
unless the campaign shares a Redis one.

Only this module and :mod:`fuzz.campaign.cluster` import Ray; without it nothing else changes.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fuzz.campaign import database
from fuzz.campaign import messages as M
from fuzz.campaign.messages import WorkerConfig
from fuzz.campaign.threads import POOL_VARIABLES

# How often a worker's example clock is sent to the coordinator (where it changed).
CLOCK_EVERY = 0.25


def node_dir(uid: str) -> Path:
    """This node's folder for a campaign's worker files (in-flight records, logs, reproducers
    before they are sent)."""
    path = Path(tempfile.gettempdir()) / f"kernel-fuzz-{uid}"
    (path / "reproducers").mkdir(parents=True, exist_ok=True)
    return path


class QueueConn:
    """A worker's pipe to the coordinator, over a Ray queue: each message goes with its
    worker's slot, and a finding's reproducers (written on this node) with their contents.
    Progress and coverage are sent without waiting (Ray keeps one caller's calls to one actor
    in order); what must not be lost if the worker dies next -- a finding, a slice's end -- is
    sent and waited on."""

    def __init__(self, queue: Any, slot: int) -> None:
        self.queue, self.slot = queue, slot

    def send(self, message: Any) -> None:
        if isinstance(message, (M.Progress, M.Feature)):
            self.queue.actor.put_nowait.remote((self.slot, message))
            return
        if isinstance(message, M.Found):
            message = M.Found(message.slice, with_files(message.record))
        elif isinstance(message, M.Done) and message.summary.get("found"):
            found = [with_files(r) for r in message.summary["found"]]
            message = M.Done(message.slice, {**message.summary, "found": found})
        self.queue.put((self.slot, message))


def with_files(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with the files its reproducers name on this node (the script, its companions,
    the interpreter's smaller one), as ``_files``: name -> bytes."""
    from fuzz import reproducer

    paths = [record.get("reproducer"), (record.get("interpreter_minimal") or {}).get("reproducer")]
    files: dict[str, bytes] = {}
    for p in [Path(p) for p in paths if p]:
        for f in [p, *reproducer.companions(p)]:
            try:
                files[f.name] = f.read_bytes()
            except OSError:
                pass
    return {**record, "_files": files} if files else record


class QueueClock:
    """A worker's example clock (0: idle; the start of the example in flight; minus the start
    of a compile in flight), as a process's shared double is: set by the worker at every
    example, read by the coordinator's watchdog. A thread sends it to the coordinator every
    ``CLOCK_EVERY`` seconds where it changed (a message per example, each waited on, cost a GPU
    campaign's actors 40% of their examples)."""

    def __init__(self, queue: Any, slot: int) -> None:
        import threading

        self.queue, self.slot = queue, slot
        self.value = 0.0
        threading.Thread(target=self._send, name="kernel-fuzz-clock", daemon=True).start()

    def _send(self) -> None:
        sent = 0.0
        while True:
            time.sleep(CLOCK_EVERY)
            v = self.value
            if v != sent:
                sent = v
                self.queue.actor.put_nowait.remote((self.slot, ("clock", v)))


class WorkerActor:
    """One campaign worker as a Ray actor (the class is made remote by
    :func:`fuzz.campaign.cluster.actor_classes`)."""

    def __init__(
        self,
        config: WorkerConfig,
        queue: Any,
        uid: str,
        actors: dict[str, Any] | None = None,
        threads: int = 1,
    ) -> None:
        from fuzz.campaign import process
        from fuzz.campaign.database import open_database
        from fuzz.campaign.worker import _pause_clock_while_compiling, _setup

        here = node_dir(uid)
        self.config = dataclasses.replace(
            config,
            repro_dir=str(here / "reproducers"),
            inflight=str(here / f"inflight-{config.slot}"),
            log=str(here / f"worker-{config.slot}.log"),
            cuda_device=None,  # Ray set CUDA_VISIBLE_DEVICES for the GPU it gave the actor
        )
        self.conn = QueueConn(queue, config.slot)
        self.clock = QueueClock(queue, config.slot)
        slot = config.slot

        def exit_with(code: int) -> None:  # said first: the coordinator cannot read it after
            queue.put((slot, ("exit", code)))
            os._exit(code)

        process.EXIT_HOOK = exit_with
        # Its thread pools' share of its node's cores (Ray gives an actor of no CPU one).
        for var in POOL_VARIABLES:
            os.environ[var] = str(threads)
        # Hypothesis's files in the node's cache (an actor has its raylet's environment, not the
        # campaign's); after the pools: it loads NumPy.
        from fuzz.hypothesis_internals import keep_hypothesis_files_out_of_cwd

        keep_hypothesis_files_out_of_cwd(node_dir(uid))
        database.ACTORS.update(actors or {})  # (the coordinator's database server, by name)
        _setup(self.config)
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(threads)
        self.db = open_database(self.config.db, self.config.db_shared)
        _pause_clock_while_compiling(self.clock)
        self.maps = process.MapBudget(process.map_limit())

    def ready(self) -> dict[str, Any]:
        """Where it runs: its node, process, and the paths of its files there."""
        import ray

        return {
            "node": ray.get_runtime_context().get_node_id(),
            "pid": os.getpid(),
            "inflight": self.config.inflight,
            "log": self.config.log,
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }

    def run(self, message: Any) -> int | None:
        """Runs a slice or a replay; returns the exit code of a worker that must be replaced
        (too many memory maps, a lost CUDA context: a fresh one takes over), else None."""
        from fuzz.campaign import worker

        return worker.serve(self.conn, self.config, self.db, self.clock, message, self.maps)


class NodeAgent:
    """Reads, on its node, the files of a worker that died there: its in-flight record and its
    log (the class is made remote by :func:`fuzz.campaign.cluster.actor_classes`)."""

    def inflight(self, prefix: str) -> tuple[dict[str, Any], Any] | None:
        from fuzz.campaign.inflight import read_inflight

        return read_inflight(prefix)

    def clear_inflight(self, prefix: str) -> None:
        from fuzz.campaign.inflight import clear_inflight

        clear_inflight(prefix)

    def tail(self, path: str, n: int) -> str:
        from fuzz.campaign.process import tail

        return tail(path, n)

    def since(self, path: str, offset: int) -> str:
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def size(self, path: str) -> int:
        try:
            return os.path.getsize(path)
        except OSError:
            return 0


class DatabaseServer:
    """The coordinator's example database, served to the workers of every node (the class is
    made remote by :func:`fuzz.campaign.cluster.actor_classes`)."""

    def __init__(self, location: str) -> None:
        from fuzz.campaign.database import open_database

        self.db = open_database(location)

    def save(self, key: bytes, value: bytes) -> None:
        if self.db is not None:
            self.db.save(key, value)

    def fetch(self, key: bytes) -> list[bytes]:
        return [] if self.db is None else list(self.db.fetch(key))

    def delete(self, key: bytes, value: bytes) -> None:
        if self.db is not None:
            self.db.delete(key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        if self.db is not None:
            self.db.move(src, dest, value)
