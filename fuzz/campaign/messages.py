"""The messages between a campaign's coordinator and its workers (processes or actors), typed.

Coordinator to worker: :class:`Hunt` (a slice: a :class:`SlicePlan` of the scheduling policy's),
:class:`Replay` (a reproducer of an earlier campaign, or a suspected hang to confirm),
:class:`Stop`. Worker to coordinator: :class:`Ready`, :class:`Fatal` (its set-up failed),
then per slice :class:`Progress`, :class:`Feature`, :class:`Found` (streamed as it happens, so a
worker that dies loses nothing), :class:`DiskFull`, :class:`ContextLost`, and its end:
:class:`Done` (the slice's summary) or :class:`Replayed`. Every message is a small frozen
record that pickles (a pipe, a Ray object). What a worker is started with, before any message:
:class:`WorkerConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fuzz.signatures import Bug, Resume

if TYPE_CHECKING:
    from fuzz.profiles import HuntOptions


@dataclass(frozen=True)
class WarmUp:
    """How a compile worker's warm-up of a pair ends: once ``quiet`` examples in a row compiled
    nothing new (the variants its fuzzing draws are compiled, in the caches on disk), or after
    ``limit`` seconds, compiling included (the pair is not fuzzed while it warms up, and a kernel
    with hundreds of variants would keep it from its fuzzing for minutes; the next warm-up, if
    its fuzzing calls for one, compiles on). Every example of a warm-up draws a fresh structure
    (``explore``: the variants to compile)."""

    quiet: int
    limit: float
    explore: float = 1.0

    def calm(self, calm: int, *, compiled: bool, same_variant: bool) -> int:
        """The count of examples in a row that compiled nothing, after one more example: reset
        by a compile; a launched variant reused with fresh lengths that compiled nothing says
        nothing of the variants left to compile, and neither ends the calm nor counts toward
        it."""
        if compiled:
            return 0
        return calm if same_variant else calm + 1

    def done(self, calm: int, elapsed: float) -> bool:
        return calm >= self.quiet or elapsed > self.limit


@dataclass(frozen=True)
class SlicePlan:
    """One slice the policy gives a worker: fuzz ``target`` on ``backend`` for ``time_limit``
    seconds (compiling not counted), ``hard_limit`` in all (shrinking what it finds included).

    Attributes:
        id: the slice's id (its seed derives from it).
        started: when it was planned (the caller's clock).
        known: the pair's bugs found so far (examples of them are hits).
        reuse: replay the example database first (a pair's first slice).
        narrowing: the compile-time choices (kernel variants) to draw from.
        warm_up: a compile worker's warm-up (:class:`WarmUp`), or None: a fuzzing slice.
        structures: the case structures its pair's warm-up compiled (``strategies.reuse``).
        compile_spent: (compile seconds, seconds, seconds per compile) of the pair's fuzzing
            so far: its compile share holds over the whole campaign.
        resume: unshrunk bugs a lost slice of the pair streamed, shrunk first
            (:class:`fuzz.results.Resume`).
        ladder: a compile worker's slice of the compile ladder: it only shrinks ``resume``
            (bugs shrunk through compiled variants, ``Found.ladder``) through new variants,
            compiling what their steps need, off the fuzzing path; no search.
        finishing: a slice past the campaign's budget, within its end grace: it only shrinks
            ``resume`` (rows still unshrunk, of either kind), off the fuzzing path; no search.
    """

    id: int
    target: str
    backend: str
    started: float
    time_limit: float
    hard_limit: float
    seed: int
    max_examples: int | None
    known: tuple[Bug, ...]
    reuse: bool
    narrowing: Mapping[str, Any] | None
    warm_up: WarmUp | None
    structures: tuple[Any, ...]
    compile_spent: tuple[float, float, float]
    resume: tuple[Resume, ...] = ()
    ladder: bool = False
    finishing: bool = False

    @property
    def shrink_only(self) -> bool:
        """Whether the slice only shrinks what it resumes (no search, off the fuzzing path)."""
        return self.ladder or self.finishing

    @property
    def pair(self) -> str:
        return f"{self.target}|{self.backend}"

    @property
    def hard_deadline(self) -> float:
        return self.started + self.hard_limit


@dataclass(frozen=True)
class Hunt:
    plan: SlicePlan


@dataclass(frozen=True)
class Replay:
    slice: int
    path: str


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class Ready:
    pid: int


@dataclass(frozen=True)
class Fatal:
    """The worker's set-up raised (the same every time: a plugin that does not import there)."""

    error: str
    traceback: str


@dataclass(frozen=True)
class Progress:
    slice: int
    examples: int
    seconds: float
    compile_seconds: float


@dataclass(frozen=True)
class Feature:
    slice: int
    name: str


@dataclass(frozen=True)
class Found:
    """A finding record (``fuzz.results.Found.as_dict`` with its signature and reproducer)."""

    slice: int
    record: dict[str, Any]


@dataclass(frozen=True)
class DiskFull:
    slice: int
    what: str


@dataclass(frozen=True)
class ContextLost:
    slice: int
    message: str


@dataclass(frozen=True)
class Done:
    """A slice's summary: ``fuzz.results.HuntResult.as_dict`` with its findings as records
    (``found``), its coverage ``features``, and the worker's additions (``structures`` of a
    warm-up, ``db_problems``, ``recycle``)."""

    slice: int
    summary: dict[str, Any]


@dataclass(frozen=True)
class Replayed:
    """A replay's verdict: ``path``, ``status`` (pass, fail, error), ``verdict``, ``class``."""

    slice: int
    result: dict[str, Any]


# What a worker streams while a slice runs, and how it ends.
SLICE_MESSAGES = (Progress, Feature, Found, DiskFull, ContextLost, Done)


@dataclass
class WorkerConfig:
    """What a worker needs to rebuild the parent's world (everything picklable)."""

    slot: int
    plugins: list[str]
    options: HuntOptions  # what every hunt of the campaign runs under
    repro_dir: str
    inflight: str  # path prefix of the in-flight record
    log: str  # faulthandler output (tracebacks of a crash or a hang)
    db: str | None = None
    db_shared: list[str] = field(default_factory=list)
    db_fallback: str | None = None  # a folder for a server ``db`` while it does not answer
    cuda_device: str | None = None  # CUDA_VISIBLE_DEVICES for this worker
    gpu_share: int = 1  # processes of the campaign on this worker's GPU (its memory is split)
    parent_pid: int | None = None  # the campaign's process: the worker dies with it
