"""A campaign over a Ray cluster (``python -m fuzz run --cluster ray://HOST:PORT``, or
``--cluster auto`` inside a Ray job): this process is the Ray driver and runs the same
coordinator and scheduling policy as on one host; the workers are Ray actors.

* Every node is sized as a host is (:mod:`fuzz.campaign.cluster_plan`, with
  :func:`fuzz.campaign.hosts.plan_host`): a fuzzing actor holds a share of one GPU (``per_gpu``
  of them share a GPU, the compile actors of the node a tenth of each), a compile actor runs on
  each node with GPUs; a node without GPUs runs fuzzing actors of one CPU each.
* :class:`RayPool` is the worker pool the coordinator drives (:mod:`fuzz.campaign.runner`), as
  :class:`fuzz.campaign.pool.ProcessPool` is on one host: it starts actors, sends them slices,
  hands over what they stream (a Ray queue), sees them die, and reads the in-flight record and
  log of one that died through its node's agent (:class:`fuzz.campaign.ray_worker.NodeAgent`).
* A node lost mid-slice costs that slice only: what it streamed is kept, its pair is fuzzed
  again on another node, and the report's notes say so (:data:`EXIT_NODE_LOST`).
* The example database is this process's, served to every node by an actor on this node, or a
  Redis server the campaign shares (``--db redis://...``).
"""

from __future__ import annotations

import dataclasses
import re
import time
from dataclasses import dataclass, field
from typing import Any

from fuzz.campaign import messages as M
from fuzz.campaign.cluster_plan import ClusterPlan, Node, actor_options
from fuzz.campaign.messages import WorkerConfig
from fuzz.campaign.pool import Arrived, Exited, Job, WorkerHandle
from fuzz.campaign.process import EXIT_NODE_LOST

CALL_TIMEOUT = 30.0  # seconds a call to a node's agent may take
# How often the coordinator looks at the actors' queue and calls (a pipe wakes it at once; a
# slice's end waited 0.2 s for the next poll, a sixth of a GPU campaign's one-second slices).
POLL_EVERY = 0.01
# Seconds the cluster is given to mark an actor's node dead once the actor died unexpectedly.
NODE_DEATH_WAIT = 10.0
# How Ray says an actor died with its node.
_NODE_DIED = re.compile(r"node (has )?died|node .*(is )?dead|raylet", re.IGNORECASE)
# Every actor of a campaign runs at its node's priority, as a local worker runs at its campaign's:
# Ray adds 15 to its actors' nice value (RAY_worker_niceness), and beside other work the actors
# got what was left of the cores (0.19-0.51x a local campaign's examples on 2 cores; 0.99-1.63x).
ACTOR_ENV = {"RAY_worker_niceness": "0"}


def pinned(node: str, *, soft: bool) -> dict[str, Any]:
    """The options of an actor placed on ``node`` (``soft``: there where it can be) and run at its
    node's priority (:data:`ACTOR_ENV`; Ray merges the runtime environment with a Ray job's own)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node, soft=soft),
        "runtime_env": {"env_vars": dict(ACTOR_ENV)},
    }


def ray_module() -> Any:
    """Ray, or a clear error where it is not installed."""
    try:
        import ray
    except ImportError:
        raise ValueError(
            "--cluster needs Ray on this machine and every node: pip install 'kernel-fuzz[ray]'"
        ) from None
    return ray


def connect(address: str) -> None:
    """Joins the Ray cluster at ``address`` (``ray://HOST:PORT``, ``HOST:PORT``, or ``auto``:
    the cluster this process runs in) as its driver."""
    ray = ray_module()
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, log_to_driver=False, include_dashboard=False)
    except Exception as e:
        raise ValueError(
            f"--cluster={address!r}: no Ray cluster could be joined there ({type(e).__name__}: "
            f"{str(e)[:300]}); start one with 'ray start --head' and name its address"
        ) from None


def live_nodes() -> list[Node]:
    """The cluster's nodes that are alive, with their CPUs and GPUs."""
    ray = ray_module()
    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        res = n.get("Resources", {})
        out.append(
            Node(
                n["NodeID"],
                n.get("NodeManagerAddress", ""),
                int(res.get("CPU", 0)),
                int(res.get("GPU", 0)),
            )
        )
    return sorted(out, key=lambda n: n.id)


def place(
    config: Any, configs: list[WorkerConfig], *, uid: str
) -> tuple[list[WorkerConfig], list[dict[str, Any]]]:
    """The worker slots of a campaign over the cluster (``config.host``: its
    :class:`ClusterPlan`): each slot's config (the example database served from this node where
    it is a folder here) and its actor's options (its node's share of a GPU or a CPU, placed on
    that node while it lives). Fuzzing slots come first, as on one host."""
    plan: ClusterPlan = config.host
    db = config.db
    if db is not None and not db.startswith(("redis://", "rediss://", "unix://")):
        db = serve_database(db, uid)
    fuzz = [(n, p, "fuzz") for n, p in plan.nodes for _ in range(p.workers)]
    ahead = [(n, p, "compile") for n, p in plan.nodes for _ in range(p.compile_workers)]
    slots = fuzz + ahead
    if len(slots) != len(configs):
        raise ValueError(
            f"the cluster's plan has {len(slots)} actors and the campaign {len(configs)} slots"
        )
    out, options = [], []
    for cfg, (node, p, role) in zip(configs, slots, strict=True):
        share = p.per_gpu + -(-p.compile_workers // max(1, p.gpus)) if p.gpus else 1
        out.append(
            dataclasses.replace(cfg, db=db, db_fallback=None, cuda_device=None, gpu_share=share)
        )
        threads = max(1, p.cores // max(1, p.workers))  # as a host's worker processes get
        options.append({**actor_options(p, role), **pinned(node.id, soft=True), "threads": threads})
    return out, options


def serve_database(location: str, uid: str) -> str:
    """Serves the example database at ``location`` (a folder here) from an actor on this node:
    its ``--db`` for the workers of every node (``ray-actor://NAME``)."""
    from fuzz.campaign.ray_worker import DatabaseServer

    ray = ray_module()
    name = f"kernel-fuzz-db-{uid}"
    here = ray.get_runtime_context().get_node_id()
    server = ray.remote(num_cpus=0)(DatabaseServer)
    actor = server.options(name=name, **pinned(here, soft=False)).remote(location)
    ray.get(actor.fetch.remote(b"kernel-fuzz-probe"))  # up before any worker asks it
    SERVED[name] = actor  # handed to every worker actor (no lookup by name across namespaces)
    return f"ray-actor://{name}"


# The actors this coordinator serves its workers (name -> handle): the example database's.
SERVED: dict[str, Any] = {}


@dataclass
class _Actor:
    """What the pool knows of a worker's current actor."""

    node: str | None = None
    inflight: str | None = None
    log: str | None = None
    ready_ref: Any = None
    run_ref: Any = None
    clock: float = 0.0
    exit_code: int | None = None
    history: list[str] = field(default_factory=list)


class RayPool:
    """The campaign's workers as Ray actors (see the module's docstring); the same methods as
    :class:`fuzz.campaign.pool.ProcessPool`."""

    def __init__(
        self,
        configs: list[WorkerConfig],
        roles: list[str],
        options: list[dict[str, Any]],
        *,
        uid: str,
        repro_dir: Any,
    ) -> None:
        from fuzz.campaign.ray_worker import NodeAgent, WorkerActor

        ray = ray_module()
        from ray.util.queue import Queue

        self.ray = ray
        self.configs, self.roles, self.options = configs, roles, options
        self.uid, self.repro_dir = uid, repro_dir
        # On the coordinator's node: a lost node must not take the actors' messages with it (at
        # its priority too: every message and slice's end goes through it).
        here = ray.get_runtime_context().get_node_id()
        self.queue = Queue(actor_options={"num_cpus": 0, **pinned(here, soft=False)})
        self.workers: list[WorkerHandle] = []
        self.actors: dict[int, _Actor] = {}
        self.lost_nodes: list[str] = []
        self._worker_class = ray.remote(max_restarts=0)(WorkerActor)
        self._agent_class = ray.remote(num_cpus=0)(NodeAgent)
        self._agents: dict[str, Any] = {}

    # Workers ------------------------------------------------------------------------------

    def start_all(self) -> None:
        for cfg, role in zip(self.configs, self.roles, strict=True):
            w = WorkerHandle(cfg.slot, None, cfg, role=role)
            self.start(w)
            self.workers.append(w)

    def start(self, w: WorkerHandle) -> None:
        """A fresh actor for ``w`` (Ray places it where its resources are free)."""
        opts = dict(self.options[w.slot])
        threads = opts.pop("threads", 1)  # (the actor's own, not Ray's)
        actor = self._worker_class.options(**opts).remote(
            w.config, self.queue, self.uid, SERVED, threads
        )
        a = _Actor(ready_ref=actor.ready.remote())
        self.actors[w.slot] = a
        w.process = actor
        w.ready = False
        w.job = None
        w.kill_reason = None

    def send(self, w: WorkerHandle, message: Any) -> bool:
        a = self.actors[w.slot]
        if isinstance(message, M.Stop):
            self.ray.kill(w.process, no_restart=True)
            return True
        a.run_ref = w.process.run.remote(message)  # (an actor gone: told by its task's end)
        return True

    def begin(self, w: WorkerHandle, job: Job) -> None:
        a = self.actors[w.slot]
        if a.log and a.node:
            w.log_offset = self._call(a.node, "size", a.log, default=0)
        w.job = job

    def kill(self, w: WorkerHandle, reason: str) -> None:
        w.kill_reason = reason
        if w.process is not None:
            self.ray.kill(w.process, no_restart=True)
        a = self.actors.get(w.slot)
        if a is not None:
            a.run_ref = a.ready_ref = None

    def exit_code(self, w: WorkerHandle) -> int | None:
        a = self.actors.get(w.slot)
        return None if a is None else a.exit_code

    def closed(self, w: WorkerHandle) -> None:
        w.job = None
        w.ready = False
        a = self.actors.get(w.slot)
        if a is not None:
            a.run_ref = a.ready_ref = None

    def stop(self, w: WorkerHandle) -> None:
        if w.process is not None:
            self.ray.kill(w.process, no_restart=True)

    # What happened ------------------------------------------------------------------------

    def poll(self, timeout: float) -> list[Arrived | Exited]:
        """What the actors sent, and which of them ended, as soon as anything happened (within
        ``timeout`` seconds): an actor's end after the messages it sent before it (its calls
        that ended are taken first, then the queue drained, which holds all they sent)."""
        ray = self.ray
        end = time.monotonic() + timeout
        while True:
            refs = {a.ready_ref: (s, "ready") for s, a in self.actors.items() if a.ready_ref}
            refs |= {a.run_ref: (s, "run") for s, a in self.actors.items() if a.run_ref}
            done: list[Any] = []
            if refs:
                done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
            events: list[Arrived | Exited] = self._drain()
            ends = [self._outcome(self._by_slot(refs[r][0]), refs[r][1], r) for r in done]
            events += [e for e in ends if e is not None]
            if events or time.monotonic() >= end:
                return events
            time.sleep(POLL_EVERY)

    def _by_slot(self, slot: int) -> WorkerHandle:
        return next(w for w in self.workers if w.slot == slot)

    def _drain(self) -> list[Arrived | Exited]:
        out: list[Arrived | Exited] = []
        n = self.queue.qsize()
        for slot, message in self.queue.get_nowait_batch(n) if n else []:  # (in their order)
            w = self._by_slot(slot)
            a = self.actors.get(slot)
            if isinstance(message, tuple) and message[0] == "clock":
                if a is not None:
                    a.clock = message[1]
            elif isinstance(message, tuple) and message[0] == "exit":
                if a is not None:
                    a.exit_code = message[1]
            else:
                out.append(Arrived(w, self._localize(message)))
        return out

    def _outcome(self, w: WorkerHandle, kind: str, ref: Any) -> Arrived | Exited | None:
        """What a finished call of ``w``'s actor means: it is ready (a Ready message), it took
        its next job (nothing), or it ended (how: its code, a lost node)."""
        a = self.actors[w.slot]
        try:
            value = self.ray.get(ref)
        except Exception as e:
            a.ready_ref = a.run_ref = None
            if a.exit_code is None:
                a.exit_code = self._death_code(a, e)
            if kind == "ready" and a.exit_code != EXIT_NODE_LOST:
                # Its set-up raised (the same every time): said, as a process's.
                w.fatal = f"{type(e).__name__}: {str(e)[-1500:]}"
            return Exited(w, a.exit_code)
        if kind == "ready":
            a.ready_ref = None
            a.node, a.inflight, a.log = value["node"], value["inflight"], value["log"]
            w.host = a.node
            w.device = value.get("gpus")
            a.history.append(a.node)
            return Arrived(w, M.Ready(value["pid"]))
        a.run_ref = None
        if value is not None:  # it asks to be replaced (memory maps)
            a.exit_code = value
            self.ray.kill(w.process, no_restart=True)
            return Exited(w, value)
        return None

    def _death_code(self, a: _Actor, error: BaseException) -> int | None:
        """The exit code of an actor that died (``error``: Ray's): :data:`EXIT_NODE_LOST` where
        its node is gone (Ray says so, or it never started), else a signal or exit code Ray
        names (a process that died on a live node), else :data:`EXIT_NODE_LOST` where the
        cluster marks its node dead soon, else None."""
        text = str(error)
        lost = _NODE_DIED.search(text) or "never ran" in text
        code = None
        for name, signal_code in (
            ("SIGSEGV", -11),
            ("SIGABRT", -6),
            ("SIGBUS", -7),
            ("SIGKILL", -9),
        ):
            if name in text:
                code = signal_code
        m = re.search(r"exit code:? (-?\d+)", text, re.IGNORECASE)
        if code is None and m:
            code = int(m.group(1))
        if not lost and code is None and a.node is not None:
            lost = self._node_gone(a.node)
        if lost:
            if a.node is not None:
                self.lost_nodes.append(a.node)
            return EXIT_NODE_LOST
        return code

    def _node_gone(self, node: str) -> bool:
        """Whether ``node`` is gone: the cluster's control store marks it dead within
        ``NODE_DEATH_WAIT`` seconds (it notices a lost raylet late, and a worker of a lost node
        must not read as a crash of its kernel)."""
        end = time.monotonic() + NODE_DEATH_WAIT
        while node in {n.id for n in live_nodes()}:
            if time.monotonic() > end:
                return False
            time.sleep(0.5)
        return True

    def _localize(self, message: Any) -> Any:
        """A message whose records carry their reproducers' files (written on the actor's
        node): the files written here, the records naming them here."""
        if isinstance(message, M.Found):
            return M.Found(message.slice, self._local_record(message.record))
        if isinstance(message, M.Done) and message.summary.get("found"):
            found = [self._local_record(r) for r in message.summary["found"]]
            return M.Done(message.slice, {**message.summary, "found": found})
        return message

    def _local_record(self, record: dict[str, Any]) -> dict[str, Any]:
        from pathlib import Path

        files = record.pop("_files", None) or {}
        here = Path(self.repro_dir)
        here.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            tmp = here / f".{name}.tmp"
            tmp.write_bytes(data)
            tmp.replace(here / name)

        def moved(path: str | None) -> str | None:
            return None if not path else str(here / Path(path).name)

        out = {**record, "reproducer": moved(record.get("reproducer"))}
        small = record.get("interpreter_minimal")
        if small:
            out["interpreter_minimal"] = {**small, "reproducer": moved(small.get("reproducer"))}
        return out

    # Watching -----------------------------------------------------------------------------

    def sample_maps(self, w: WorkerHandle) -> None:
        """(Each actor watches its own memory maps and asks to be replaced.)"""

    def example_clock(self, w: WorkerHandle) -> tuple[float, float | None]:
        a = self.actors.get(w.slot)
        st = 0.0 if a is None else a.clock
        w.compiling = st < 0
        if st < 0:
            return -st, max(0.0, time.time() + st)
        return st, None

    # A dead worker's files, through its node's agent --------------------------------------

    def _agent(self, node: str) -> Any:
        if node not in self._agents:
            self._agents[node] = self._agent_class.options(**pinned(node, soft=False)).remote()
        return self._agents[node]

    def _call(self, node: str, method: str, *args: Any, default: Any = None) -> Any:
        if node in self.lost_nodes:
            return default
        try:
            ref = getattr(self._agent(node), method).remote(*args)
            return self.ray.get(ref, timeout=CALL_TIMEOUT)
        except Exception:
            return default

    def inflight(self, w: WorkerHandle) -> tuple[dict[str, Any], Any] | None:
        a = self.actors.get(w.slot)
        if a is None or not a.node or not a.inflight:
            return None
        return self._call(a.node, "inflight", a.inflight)

    def clear_inflight(self, w: WorkerHandle) -> None:
        a = self.actors.get(w.slot)
        if a is not None and a.node and a.inflight:
            self._call(a.node, "clear_inflight", a.inflight)

    def log_tail(self, w: WorkerHandle, n: int) -> str:
        a = self.actors.get(w.slot)
        if a is None or not a.node or not a.log:
            return ""
        return self._call(a.node, "tail", a.log, n, default="")

    def log_since_job(self, w: WorkerHandle) -> str | None:
        a = self.actors.get(w.slot)
        if a is None or not a.node or not a.log:
            return None
        return self._call(a.node, "since", a.log, w.log_offset)
