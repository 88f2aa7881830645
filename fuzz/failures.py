"""Failure classes and findings.

Every failing example gets exactly one class; each class is raised as its own exception type, so
Hypothesis treats two classes as two distinct bugs and shrinks each one separately.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from typing import Any

NAN = "nan"
INF = "inf"
MASKING = "masking"
OOB_WRITE = "out-of-bounds-write"
OOB_READ = "out-of-bounds-read"
ACCURACY = "accuracy"
NONDETERMINISM = "nondeterminism"
DIVERGENCE = "backend-divergence"
CRASH = "crash"
HANG = "hang"
INPUT_WRITE = "input-write"

CLASSES = (
    CRASH,
    HANG,
    OOB_WRITE,
    OOB_READ,
    INPUT_WRITE,
    NAN,
    INF,
    NONDETERMINISM,
    MASKING,
    ACCURACY,
    DIVERGENCE,
)

DESCRIPTIONS = {
    CRASH: "the kernel or its wrapper raised",
    HANG: "the launch did not finish within the per-example timeout",
    OOB_WRITE: "memory around the output (guard bands) changed",
    OOB_READ: "a load outside every buffer of the launch (Triton's interpreter; on a GPU garbage "
    "or an illegal address)",
    INPUT_WRITE: "the kernel wrote into its inputs (each run gets its own copy, checked after)",
    NAN: "NaN where the oracle is finite (including output never written)",
    INF: "Inf where the oracle is finite",
    NONDETERMINISM: "two runs on the same inputs gave different bits",
    MASKING: "masked-out inputs changed the output, or masked outputs are wrong",
    ACCURACY: "error above the tolerance",
    DIVERGENCE: "compiled and interpreted runs of one kernel disagree beyond tolerance",
}


@dataclass
class Finding:
    """One failure of one example.

    Attributes:
        cls: the failure class (one of ``CLASSES``).
        prop: the property that failed.
        message: one line a human reads first.
        output: the output it concerns, if any.
        index: where the worst element is.
        kernel_value, oracle_value, error, tolerance: the worst element's numbers.
        details: anything else (metrics, backend names, counts).
        hazards: the declared input hazards that hold for the example.
    """

    cls: str
    prop: str
    message: str
    output: str | None = None
    index: tuple[int, ...] | None = None
    kernel_value: float | None = None
    oracle_value: float | None = None
    error: float | None = None
    tolerance: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    hazards: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.cls not in CLASSES:
            raise ValueError(f"Finding.cls={self.cls!r} must be one of {CLASSES}")

    @property
    def where(self) -> str:
        if self.output is None:
            return ""
        if self.index is None:
            return self.output
        return f"{self.output}[{', '.join(str(i) for i in self.index)}]"

    def summary(self) -> str:
        return f"{self.cls} ({self.prop}): {self.message}"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["class"] = d.pop("cls")
        d["property"] = d.pop("prop")
        d["index"] = list(self.index) if self.index is not None else None
        d["where"] = self.where
        return d


class KernelFailure(AssertionError):
    """Raised by a failing example; the subclass names the failure class."""

    cls = ""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.summary())
        self.finding = finding


def _exception_type(cls: str) -> type[KernelFailure]:
    name = "".join(part.capitalize() for part in cls.split("-")) + "Failure"
    return type(name, (KernelFailure,), {"cls": cls, "__module__": __name__})


FAILURE_TYPES: dict[str, type[KernelFailure]] = {c: _exception_type(c) for c in CLASSES}


_KEYED: dict[str, type[KernelFailure]] = {}


def failure_type(cls: str, key: str | None = None) -> type[KernelFailure]:
    """The exception type of failure class ``cls``, or of one bug ``key`` of it
    (``fuzz.signatures.bug_key``): a subclass per key, so that Hypothesis, which tells bugs apart
    by their exception type and place, shrinks two keys as two bugs."""
    base = FAILURE_TYPES[cls]
    if key is None:
        return base
    t = _KEYED.get(key)
    if t is None:
        t = _KEYED[key] = type(base.__name__, (base,), {"key": key, "__module__": __name__})
    return t


def raise_for(finding: Finding, key: str | None = None) -> None:
    raise failure_type(finding.cls, key)(finding)


class Unsupported(Exception):
    """Raised by a kernel (a plugin's, or the harness's check of its declarations) that declines a
    case: a documented refusal ("Pallas Triton lowering needs power-of-two shapes", a library's
    guard against a known miscompile). Never a finding: a declined example is counted per reason
    (``unsupported: <reason>`` in a hunt's events and Hypothesis's statistics) and Hypothesis draws
    another; a launch a property derives from the case that is declined skips that property for
    the example (counted the same way).

    Args:
        reason: why, in a few words (the counter's key: keep it free of case-specific numbers).
    """

    def __init__(self, reason: str) -> None:
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"Unsupported(reason={reason!r}): give the reason as a non-empty str")
        super().__init__(reason)
        self.reason = reason.strip()


HARNESS_LIMIT = "harness limit: "


class HarnessLimit(Unsupported):
    """Raised by the harness where *it* cannot check what a kernel did (a tensor of a dtype NumPy
    has no type for, a buffer it cannot guard): declined as :class:`Unsupported` is, its reason
    starting ``harness limit:`` so that reports list it apart from the kernels' own refusals.
    Never a finding: the kernel did nothing wrong.

    Args:
        reason: what the harness cannot do, in a few words (no case-specific numbers).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = HARNESS_LIMIT + self.reason
        self.args = (self.reason,)


def is_harness_limit(reason: str) -> bool:
    """Whether a declined example's ``reason`` is the harness's limit, not the kernel's."""
    return reason.startswith(HARNESS_LIMIT)


def bug_key(finding: Finding) -> str:
    """The key of a failing example (see ``fuzz.signatures``): class, property, output, and
    for a kernel that raised, what it raised (its exception type and message, numbers left
    out): one refusal met in every dtype is one bug, two exceptions are two. The input dtype is
    a condition (``fuzz.signatures.conditions``), not part of the key: Hypothesis shrinks a bug toward
    float32 where it fails there too, and a bug of half precision only keeps its dtype as a
    trigger."""
    last = "-"
    if finding.cls == CRASH and finding.details.get("exception"):
        text = str(finding.details.get("text", ""))
        sticky = sticky_error_name(text)
        text = f"sticky CUDA error: {sticky}" if sticky else re.sub(r"\d+", "#", text)[:80]
        last = f"{finding.details['exception']}: {text}"
    return "|".join((finding.cls, finding.prop, finding.output or "-", last))


# Sticky CUDA errors (after which a process's CUDA context is unusable) by name, with the words
# each is reported in (the driver's, the runtime's, PyTorch's, XLA's); ``fuzz.reproducer``
# detects them by these words too.
STICKY_NAMES = (
    (
        "illegal memory access",
        ("CUDA_ERROR_ILLEGAL_ADDRESS", "illegal memory access", "illegal address"),
    ),
    ("misaligned address", ("misaligned address",)),
    ("illegal instruction", ("CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction")),
    ("launch failure", ("CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure")),
    ("device-side assert", ("device-side assert",)),
)


def sticky_error_name(text: str) -> str | None:
    """The sticky CUDA error ``text`` (an exception's message) reports, by name, or None. CUDA
    reports one at whichever call next asks the device, so the rest of the message names that
    call, not the fault: a planted Pallas kernel's out-of-bounds reads on an H200 came as crash
    rows "Error recording CUDA event: CUDA_ERROR_ILLEGAL_ADDRESS" and "Failed to check stream
    capturing status: CUDA_ERROR_ILLEGAL_ADDRESS", one fault. Its key is the name alone."""
    low = text.lower()
    for name, words in STICKY_NAMES:
        if any(w.lower() in low for w in words):
            return name
    return None


def raised_at(e: BaseException) -> str | None:
    """Where exception ``e`` was raised in the kernel's own code: the innermost frame of its
    traceback outside the harness and the libraries it runs kernels on (Triton, JAX, PyTorch,
    NumPy, the standard library...), as ``file:line: source``, or None (no such frame: it was
    raised by the harness, or by a library called from it). Two examples of one exception raised
    at one line of the kernel's wrapper are one bug, whatever each held (``fuzz.signatures``:
    round 13's jagged slab filled from its end raised one ``ValueError`` of a broadcast at one
    line for a leading and for a trailing empty segment, two rows on an H200)."""
    import traceback

    try:
        frames = traceback.extract_tb(e.__traceback__)
    except Exception:
        return None
    outside = _outside()
    for frame in reversed(frames):
        path = os.path.abspath(frame.filename)
        if frame.filename.startswith("<") or path.startswith(outside[0]):
            continue
        if path.startswith(outside[1]) and not path.startswith(outside[2]):
            continue  # (the harness's own code; its bundled clients are kernels' code)
        return f"{os.path.basename(path)}:{frame.lineno}: {(frame.line or '').strip()}"
    return None


@functools.cache
def _outside() -> tuple[tuple[str, ...], str, str]:
    """The folders of the libraries a kernel runs on, the harness's, and its bundled clients'."""
    import importlib.util
    import sysconfig

    folders = [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")]
    for name in ("triton", "jax", "jaxlib", "torch", "numpy", "hypothesis", "_pytest", "pytest"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            folders += list(spec.submodule_search_locations)
        elif spec is not None and spec.origin:
            folders.append(spec.origin)
    harness = os.path.dirname(os.path.abspath(__file__))
    own = tuple(os.path.join(os.path.abspath(f), "") for f in folders)
    return own, os.path.join(harness, ""), os.path.join(harness, "clients", "")


def status_of(expected_class: str | None, classes: Collection[str], *, error: str | None) -> str:
    """The status of a target after fuzzing: ``error`` where the harness failed (``error``) and
    no failure class was found (the harness failed there, not the kernel); else ``pass``/``fail``
    for a real target, and ``found``/``wrong-class``/``missed`` for a mutant (its
    ``expected_class`` among ``classes``, other classes only, none)."""
    if error and not classes:
        return "error"
    if expected_class is None:
        return "fail" if classes else "pass"
    if expected_class in classes:
        return "found"
    return "wrong-class" if classes else "missed"
