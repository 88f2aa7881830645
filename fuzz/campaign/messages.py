"""The messages between a campaign's coordinator and its workers (processes or actors), typed.

Coordinator to worker: :class:`Hunt` (a slice: ``fuzz.campaign.policy.SlicePlan``),
:class:`Replay` (a reproducer of an earlier campaign, or a suspected hang to confirm),
:class:`Stop`. Worker to coordinator: :class:`Ready`, :class:`Fatal` (its set-up failed),
then per slice :class:`Progress`, :class:`Feature`, :class:`Found` (streamed as it happens, so a
worker that dies loses nothing), :class:`DiskFull`, :class:`ContextLost`, and its end:
:class:`Done` (the slice's summary) or :class:`Replayed`. Every message is a small frozen
record that pickles (a pipe, a Ray object).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fuzz.campaign.policy import SlicePlan


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
