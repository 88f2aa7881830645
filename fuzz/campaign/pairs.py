"""One (target, backend) pair of a campaign, as its scheduling policy keeps it.

:class:`PairState` is the policy's record of a pair over the whole campaign: what it has run
(examples, seconds, compiles), where its compile-time choices stand (warm-ups, widening), its
rate of gain, and its bugs (a :class:`fuzz.ledger.BugLedger`). It is plain data: the policy
(:mod:`fuzz.campaign.policy`) changes it, the report reads it (:meth:`PairState.as_dict`).
"""

from __future__ import annotations

import enum
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fuzz.failures import status_of
from fuzz.ledger import BugLedger
from fuzz.signatures import Bug

if TYPE_CHECKING:
    from fuzz.target import Target


class Warmth(enum.Enum):
    """Where a pair's compiling ahead stands: ``COLD`` until a compile worker has run its
    warm-up, ``WARMING`` meanwhile, ``READY`` after (and from the start where nothing compiles
    ahead)."""

    COLD = "cold"
    WARMING = "warming"
    READY = "ready"


@dataclass
class PairState:
    """One (target, backend) pair over the whole campaign."""

    target: Target
    backend: str
    examples: int = 0
    seconds: float = 0.0  # wall time of its slices, compiling included
    slices: int = 0
    deaths: int = 0
    repeat_deaths: int = 0  # deaths that only hit a known bug again (no new finding)
    # Its worker died of the harness's resources running out (memory maps, memory, the GPU's
    # memory): not counted as deaths.
    out_of_resources: int = 0
    rate: float = 0.0  # recent gain per fuzzing second (new bugs x 10 + new features)
    # Its slices in flight: slice id -> [examples, compile seconds] so far (progress messages).
    # More than one where workers that would idle share the pair (``Tunables.share_pairs``).
    live: dict[int, list[Any]] = field(default_factory=dict)
    retired: str = ""
    error: str | None = None
    error_trace: str | None = None  # the harness error's traceback (``fuzz.results.trace_of``)
    ledger: BugLedger = field(default_factory=BugLedger)
    features: set[str] = field(default_factory=set)
    events: Counter[str] = field(default_factory=Counter)
    declared_hits: Counter[str] = field(default_factory=Counter)  # declared failure -> examples
    stats: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    slice_new: float = 0.0
    # Its slice's bugs streamed as new so far (sightings): one that turns out to be a bug found
    # before no longer counts toward the slice's gain.
    new_sightings: set[str] = field(default_factory=set)
    warmth: Warmth = Warmth.READY
    warm_seconds: float = 0.0  # wall time of its warm-up slices (off the fuzzing path)
    warm_count: int = 0  # warm-ups run
    first_warm_compile: float | None = None  # compile seconds of its first warm-up
    compile_at_warm: float = 0.0  # its fuzzing path's compile seconds at its last warm-up
    refused_at_warm: int = 0  # its examples refused for their compile at its last warm-up
    narrowing: dict[str, Any] | None = None  # its compile-time choices (kernel variants) now
    refused_seconds: float = 0.0  # seconds of its slices that checked nothing, all refused
    widened: int = 0  # times its choices grew (the policy's widening)
    # Its widened choices while a compile worker has not yet warmed them up: its fuzzing goes on
    # with the choices compiled (``narrowing``) until then.
    pending: dict[str, Any] | None = None
    # Unshrunk bugs its lost slices streamed, for its next fuzzing slices to shrink first.
    pending_since: float = 0.0  # when it was widened (the earliest are warmed up first)
    widened_at: tuple[int, float] = (0, 0.0)  # its examples and fuzzing seconds then
    structures: list[Any] = field(default_factory=list)  # its warm-ups' (strategies.reuse)

    @property
    def key(self) -> str:
        return f"{self.target.name}|{self.backend}"

    @property
    def found(self) -> dict[str, dict[str, Any]]:
        """Signature -> the finding record standing for each distinct bug."""
        return self.ledger.found

    @property
    def running(self) -> bool:
        """Whether a slice of it is in flight."""
        return bool(self.live)

    @property
    def live_examples(self) -> int:
        """Examples of its slices in flight."""
        return sum(v[0] for v in self.live.values())

    @property
    def live_compile(self) -> float:
        """Compile seconds of its slices in flight."""
        return sum(v[1] for v in self.live.values())

    @property
    def total_examples(self) -> int:
        return self.examples + self.live_examples

    @property
    def compile_seconds(self) -> float:
        return self.stats["compile_seconds"] + self.live_compile

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
        return self.ledger.classes

    @property
    def status(self) -> str:
        """What the campaign says of the pair so far (``fuzz.results.status_of``)."""
        return status_of(self.target.expected_class, self.classes, error=self.error)

    def bugs(self) -> list[Bug]:
        """The distinct bugs found so far (known to its next slices)."""
        return self.ledger.bugs()

    def mutant_done(self) -> bool:
        """A mutant whose expected class was found and shrunk: the harness proved itself on it."""
        expected = self.target.expected_class
        return expected is not None and any(
            rec["class"] == expected and rec.get("shrunk") for rec in self.ledger.records()
        )

    def as_dict(self) -> dict[str, Any]:
        """The pair's row of the report (``results``)."""
        t = self.target
        secs = self.seconds
        ex = self.total_examples
        fuzz = self.fuzz_seconds
        hits, maybe = self.ledger.hits(), self.ledger.maybe_known()
        st = self.stats
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
            "shrink_seconds": round(st["shrink_seconds"], 3),
            "examples_per_second": round(ex / fuzz, 2) if fuzz > 0 else 0.0,
            "slices": self.slices,
            "worker_deaths": self.deaths,
            "resource_exhaustions": self.out_of_resources,
            "retired": self.retired or None,
            "launches": int(st["launches"]),
            "launch_seconds": round(st["launch_seconds"], 3),
            "compiles": int(st["compiles"]),
            "compile_seconds": round(st["compile_seconds"], 3),
            # Of those, launches that only loaded kernels another process had compiled.
            "cache_loads": int(st["cache_loads"]),
            "cache_load_seconds": round(st["cache_load_seconds"], 3),
            "precompiles": int(st["precompiles"]),  # compiles of its warm-ups
            "precompile_seconds": round(st["precompile_seconds"], 3),
            "warm_seconds": round(self.warm_seconds, 3),
            "warm": self.warmth.value,
            "variants": self.narrowing or {},
            "variants_widened": self.widened,
            "structures": len(self.structures),  # its last warm-up's, for its fuzzing to reuse
            "compile_share": round(st["compile_seconds"] / secs, 3) if secs > 0 else 0.0,
            "twin_launches": int(st["twin_launches"]),
            "error": self.error,
            "error_trace": self.error_trace,
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
                        **({"absorbed": a} if (a := self.ledger.absorbed(sig)) else {}),
                    }
                    for sig, f in self.found.items()
                ),
                key=lambda f: (f["class"], f.get("first_example", 0)),
            ),
        }


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
