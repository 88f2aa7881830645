"""What a hunt returns: the minimal example of each failure class, and the run's numbers.

:class:`HuntResult` is what :func:`fuzz.engine.hunt` returns and :class:`Found` one failure class
of it. :func:`status_of` is the one reading of an outcome as a status string, shared by a hunt and a
campaign's (target, backend) pair, which sums the hunts of many slices.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuzz.case import Case
from fuzz.failures import Finding, status_of
from fuzz.ledger import AFTER_ANOTHER, HOLDS, NOT_ALONE, ON_TWIN
from fuzz.properties import Stats

TRACE_CHARS = 6000  # of a harness error's traceback kept with it (its last frames)
# How a shrink note begins that says why a shrunk finding is no smaller (a crash shrunk to its
# end in child processes, ``fuzz.isolated``): the reports show it (:func:`not_smaller_why`).
NOT_SMALLER = "not smaller:"
# What a row left to the compile ladder says when the campaign ends before the ladder shrank it.
LADDER_UNFINISHED = (
    "shrunk through the shapes already compiled; its smaller shapes, each a compile, were left "
    "to the campaign's compile workers, which had not finished shrinking it when the campaign "
    "ended (a longer budget, or a campaign of this pair alone, takes it further)"
)


def trace_of(exc: BaseException) -> str:
    """The traceback of ``exc`` (its chained causes too) as a report keeps it with a harness
    error: the last ``TRACE_CHARS`` characters, where the error was raised. (A harness error
    on the GPU host, ``KeyError: 'o'`` after 109 examples, came with no traceback: where it
    came from could not be told.)"""
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text if len(text) <= TRACE_CHARS else "...\n" + text[-TRACE_CHARS:]


@dataclass
class Found:
    """The minimal example of one bug (one failure signature, ``fuzz.signatures``)."""

    finding: Finding
    case: Case
    params: dict[str, Any]
    first_example: int  # examples run when the class first appeared
    first_seconds: float  # seconds into the hunt when it first appeared
    minimal_seconds: float = 0.0  # seconds into the hunt when the minimal example was replayed
    reproducer: Path | None = None
    final: bool = False  # Hypothesis replayed it as the minimal example (else: the best so far)
    plots: list[dict[str, Any]] = field(
        default_factory=list
    )  # fuzz.campaign.plots.error_maps of it
    choices: tuple[Any, ...] = ()  # Hypothesis's choices for it (replaying them gives it back)
    # How it was shrunk, for a compiled backend's finding (fuzz.shrink): "interpreter" (shrunk
    # there, confirmed compiled), "compiled", or "" (by Hypothesis, where it was found); and what
    # each stage said.
    shrink_path: str = ""
    shrink_notes: list[str] = field(default_factory=list)
    key: str = ""  # its bug key (fuzz.signatures.bug_key)
    # A smaller minimal example of the same bug in the twin interpreter (same kernel source),
    # which the backend that found it did not confirm (a case outside what it runs): its own
    # reproducer, for that interpreter (``interpreted_on``).
    interpreted: Found | None = None
    interpreted_on: str = ""
    # The same bug seen other ways in this hunt (another class, property or output: the
    # duplicate check's evidence, ``fuzz.duplicates``), each its own minimal example.
    seen_as: list[Found] = field(default_factory=list)
    # A crash that lost its process's CUDA context, handed over while it is shrunk in child
    # processes (``fuzz.isolated``): the shrunk example follows.
    isolating: bool = False
    # Its example lost the process's CUDA context: replayed in a process that goes on, it would
    # lose that one's too (never resumed by another slice: ``resumes``).
    lost_context: bool = False
    # The sighting (``fuzz.ledger.sighting``) of the unshrunk record this example shrinks: a bug
    # streamed by a slice whose worker was lost before it was shrunk, taken up by a later slice
    # (``Resume``).
    resumes: str = ""
    # Shrunk on its compiled backend through the variants compiled there; its shrinking through
    # smaller variants, each a compile, is left to a campaign's compile worker (``fuzz.shrink``'s
    # compile ladder), which replaces it with what it shrinks to.
    ladder: bool = False

    @property
    def signature(self) -> str:
        return self.finding.details.get("signature", "")

    @property
    def triggers(self) -> list[str]:
        return list(self.finding.details.get("triggers", []))

    @property
    def shrink_seconds(self) -> float:
        return max(0.0, self.minimal_seconds - self.first_seconds)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.finding.as_dict(),
            "case": repr(self.case),
            "case_size": self.case.size,
            "case_digest": self.case.digest(),
            "shapes": self.case.shapes(),
            "params": self.case.params_json(),
            "first_example": self.first_example,
            "first_seconds": round(self.first_seconds, 3),
            "shrink_seconds": round(self.shrink_seconds, 3),
            "shrunk": self.final,
            "shrink_path": self.shrink_path,
            "shrink_notes": self.shrink_notes,
            "bug_key": self.key,
            "triggers": self.triggers,
            "reproducer": str(self.reproducer) if self.reproducer else None,
            # An example not shrunk yet keeps its choices: a later slice can take up its
            # shrinking where its own slice was lost (``Resume``).
            # So does a minimal example whose check against the known bugs was cut.
            "choices": None
            if (self.final and not self.ladder and not self.finding.details.get("unchecked"))
            or self.lost_context
            or not self.choices
            else encode_choices(self.choices),
            **({"resumes": self.resumes} if self.resumes else {}),
            **({"ladder": True} if self.ladder else {}),
            "plots": self.plots,
            "interpreter_minimal": None
            if self.interpreted is None
            else {
                "backend": self.interpreted_on,
                "case": repr(self.interpreted.case),
                "case_size": self.interpreted.case.size,
                "shrunk": self.interpreted.final,
                "reproducer": str(self.interpreted.reproducer)
                if self.interpreted.reproducer
                else None,
            },
        }


def not_shrunk_why(f: dict[str, Any]) -> str | None:
    """Why a finding was not shrunk, for the reports (None: it was): its shrinking's last note
    (what cut it, what the stages tried), else its slice having ended before it could be (a
    first sight streamed by a slice stopped or killed; the campaign's notes say which). A GPU
    campaign's unshrunk rows of 98,304-262,144 elements said nothing of why."""
    if f.get("shrunk", True):
        return None
    notes = [n for n in f.get("shrink_notes") or [] if n]
    if notes:
        return notes[-1]
    return "its slice ended before it was shrunk (stopped or killed: see the campaign's notes)"


def not_smaller_why(f: dict[str, Any]) -> str | None:
    """Why a shrunk finding is no smaller (None: nothing to say): a crash that loses its CUDA
    context, shrunk to its end in child processes none of whose smaller examples crashed so
    (``fuzz.isolated``); a row left to the compile ladder (``ladder``: each smaller shape a
    compile, shrunk by a campaign's compile workers) that the campaign ended before it got
    smaller. A GPU campaign's crash row of 196,608 elements said nothing of it, nor a NaN row
    of 1,572,864 elements found as the campaign's budget ran out."""
    if not f.get("shrunk", True):
        return None
    notes = [n for n in f.get("shrink_notes") or [] if n.startswith(NOT_SMALLER)]
    if notes:
        return notes[-1][len(NOT_SMALLER) :].strip()
    if f.get("ladder"):
        return LADDER_UNFINISHED
    return None


def size_note(f: dict[str, Any]) -> str | None:
    """What the reports say of a finding's size (None: nothing): why it was not shrunk
    (:func:`not_shrunk_why`, unless it may be a bug found before: ``maybe_of`` says so), else
    why a shrunk one is no smaller (:func:`not_smaller_why`)."""
    if (why := not_shrunk_why(f)) and not f.get("maybe_of"):
        return f"not shrunk: {why}"
    if why := not_smaller_why(f):
        return f"not smaller: {why}"
    return None


def maybe_note(f: dict[str, Any]) -> str | None:
    """What the reports say of a finding that may be a bug found before (``maybe_of``; None:
    none): not shrunk and failing as that bug does or was seen, or a crash whose example passed
    replayed alone in a fresh process while that bug's crashes alone."""
    if not f.get("maybe_of"):
        return None
    if f.get("maybe_why") == ON_TWIN:
        twin = (f.get("details") or {}).get("twin")
        twin = twin if isinstance(twin, Mapping) else {}
        return (
            f"its example, checked on {twin.get('backend')} (the interpreter of its kernel "
            f"source, where an access out of bounds does not fault), fails as bug "
            f"{f['maybe_of']} does or was seen ({twin.get('key')}, that way's conditions "
            "holding): maybe that bug, at a size where the device faults; not counted as a "
            "distinct one"
        )
    if f.get("maybe_why") == HOLDS:
        return (
            f"not shrunk; its example holds every condition of bug {f['maybe_of']} (or a way it "
            f"was seen), failing the same output as {f.get('class')} through another property: "
            "maybe that bug; not counted as a distinct one"
        )
    if f.get("maybe_why") in (NOT_ALONE, AFTER_ANOTHER):
        where = "" if f["maybe_why"] == NOT_ALONE else ", a kernel its process had run before,"
        return (
            f"its crash not reproduced alone (replayed in a fresh process, its example passed; "
            f"CUDA reports an illegal access at a later call than the launch that made it), "
            f"where bug {f['maybe_of']}'s example{where} crashes alone: maybe that bug's crash; "
            "not counted as a distinct one"
        )
    return (
        f"not shrunk (its slice ended first), failing as bug {f['maybe_of']} does or was seen "
        "(one class, property and output): maybe that bug; not counted as a distinct one"
    )


def encode_choices(choices: tuple[Any, ...]) -> str:
    """Hypothesis's choices for an example as text (base64 of the example database's bytes)."""
    import base64

    from fuzz.hypothesis_internals import choices_to_bytes

    return base64.b64encode(choices_to_bytes(choices)).decode("ascii")


def decode_choices(text: str) -> tuple[Any, ...]:
    """:func:`encode_choices`, read back; ValueError where ``text`` is not such choices."""
    import base64
    import binascii

    from fuzz.hypothesis_internals import choices_from_bytes

    try:
        choices = choices_from_bytes(base64.b64decode(text.encode("ascii"), validate=True))
    except (binascii.Error, UnicodeEncodeError) as e:
        raise ValueError(f"choices {text[:40]!r} are not base64: {e}") from None
    if choices is None:
        raise ValueError(f"choices {text[:40]!r} do not decode")
    return tuple(choices)


@dataclass
class HuntResult:
    target: str
    backend: str
    mutant_of: str | None
    expected_class: str | None
    # examples checked (refused or declined ones are events: "rejected: would compile",
    # "unsupported: <reason>")
    examples: int = 0
    seconds: float = 0.0
    stats: Stats = field(default_factory=Stats)
    # One entry per distinct bug: the first bug of each failure class under the class's name,
    # more bugs of a class under "CLASS@2", "CLASS@3", ...
    found: dict[str, Found] = field(default_factory=dict)
    error: str | None = None  # the harness itself failed (strategy error, health check...)
    # Where it failed: the error's traceback, its last frames (``fuzz.results.trace_of``).
    error_trace: str | None = None
    events: collections.Counter[str] = field(default_factory=collections.Counter)
    # examples that failed as a bug found before (by its signature, or a known class)
    known_hits: collections.Counter[str] = field(default_factory=collections.Counter)
    # examples that failed as a failure the library declared it knows (by its description)
    declared_hits: collections.Counter[str] = field(default_factory=collections.Counter)
    features: set[str] = field(default_factory=set)  # coverage: hazard combinations, events
    # why the hunt ended: "time", "examples", "exhausted", "hard-limit", "context-lost",
    # "refused" (every example it drew would have compiled past the compile share)
    stopped: str = ""
    reshrinks: int = 0  # times a flaky failure (a race) was shrunk again from where it stopped
    shrink_examples: int = 0  # examples run by shrink stages after the search (fuzz.shrink)
    shrink_seconds: float = 0.0  # their seconds, compiling not counted (shrinking, not fuzzing)
    variants: dict[str, list[Any]] = field(default_factory=dict)  # the run's compile-time choices
    # bugs first seen as new that shrank, with the known bugs of their key no longer excluded,
    # to one of those: {"round", "bug_key", "signature" (first seen as), "twin" (the known one)}
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    # what became of the rows a campaign slice took to shrink or check that it could not
    # (``fuzz.signatures.Resume``): {"resumes" (the row's sighting), "note"}, for the row's report
    resume_notes: list[dict[str, str]] = field(default_factory=list)
    # bugs a shrink stage met while it shrank another (by bug key, their first example there):
    # the hunt that ran the stage reports them (``fuzz.engine``)
    met_while_shrinking: dict[str, Found] = field(default_factory=dict)

    @property
    def classes(self) -> list[str]:
        """The failure classes found (several bugs may share one), each way a bug was seen."""
        return sorted(
            {f.finding.cls for f in self.found.values()}
            | {s.finding.cls for f in self.found.values() for s in f.seen_as}
        )

    def of_class(self, cls: str) -> list[Found]:
        """The minimal examples found of failure class ``cls``: a bug's own, or one it was seen
        as another way (``Found.seen_as``)."""
        every = [g for f in self.found.values() for g in [f, *f.seen_as]]
        return [f for f in every if f.finding.cls == cls]

    def of_key(self, key: str) -> Found | None:
        """The bug of key ``key`` (``fuzz.signatures.bug_key``) the hunt found, if it did (a
        shrink stage's run: whether it failed so)."""
        return next((f for f in self.found.values() if f.key == key), None)

    @property
    def failed(self) -> bool:
        return bool(self.found) or self.error is not None

    @property
    def status(self) -> str:
        """What the hunt says of its target (:func:`status_of`)."""
        return status_of(self.expected_class, self.classes, error=self.error)

    @property
    def examples_per_second(self) -> float:
        return self.examples / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "backend": self.backend,
            "mutant": self.mutant_of is not None,
            "mutant_of": self.mutant_of,
            "expected_class": self.expected_class,
            "status": self.status,
            "examples": self.examples,
            "seconds": round(self.seconds, 3),
            "examples_per_second": round(self.examples_per_second, 2),
            "launches": self.stats.launches,
            "launch_seconds": round(self.stats.launch_seconds, 3),
            "compiles": self.stats.compiles,
            "compile_seconds": round(self.stats.compile_seconds, 3),
            "compile_share": round(self.stats.compile_seconds / self.seconds, 3)
            if self.seconds
            else 0.0,
            "cache_loads": self.stats.cache_loads,
            "cache_load_seconds": round(self.stats.cache_load_seconds, 3),
            "twin_launches": self.stats.twin_launches,
            "twin_seconds": round(self.stats.twin_seconds, 3),
            "error": self.error,
            "error_trace": self.error_trace,
            "stopped": self.stopped,
            "shrink_examples": self.shrink_examples,
            "shrink_seconds": round(self.shrink_seconds, 3),
            "variants": self.variants,
            "events": dict(self.events),
            "known_hits": dict(self.known_hits),
            "declared_hits": dict(self.declared_hits),
            "duplicates": list(self.duplicates),
            "resume_notes": list(self.resume_notes),
            "findings": [f.as_dict() for f in self.found.values()],
        }
