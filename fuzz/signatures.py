"""Failure signatures: when two failing examples are the same bug.

A kernel can have several bugs, and a hunt reports each once, with its own minimal reproducer. What
identifies a bug is its **key** -- the failure class, the property that failed and the output it
concerns (for a kernel that raised, what it raised) -- and its **triggers**: the conditions of its
minimal example (the declared input hazards that hold there, a half-precision input dtype, and the
optional features it uses), which shrinking could not take away. The key is stable while
Hypothesis shrinks an example (each key is an exception type of its own, so Hypothesis shrinks two
keys as two bugs, each toward float32 where it fails there too); the triggers are read once the
example is minimal.

A failing example is a *hit* of a known bug when it has the bug's key and every one of its
triggers holds for it: it is counted, not shrunk again, and the search goes on. An example whose
key is known but that lacks a trigger of every known bug of that key is a new bug: it is shrunk
with the known ones counted as hits, so its minimal example avoids their triggers. Two bugs of one
key whose trigger sets nest are one bug (the smaller set is kept: :func:`same_bug`), and so are two
NaN or Inf bugs of one key whose non-finite values are born at the same kernel expression
(:func:`site`, from ``fuzz.origin``): a row with no valid key reached through ``-inf`` inputs in
one minimal example and through a mask in another is one division ``0 / 0``, whatever the
conditions of each. The other trigger sets of such a bug are kept with it (``Bug`` records with
its signature), so that later examples through them are hits.

A plugin declares failures it knows about (:class:`KnownFailure`: fp32 dot products computed in
TF32, say); examples matching one are counted under its reason and never shrunk nor reported as
new, and the hunt goes on looking for other bugs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fuzz.failures import CLASSES, Finding, bug_key, sticky_error_name

if TYPE_CHECKING:
    from fuzz.case import Case
    from fuzz.target import Target


def key_class(key: str) -> str:
    """The failure class of a bug key."""
    return key.split("|", 1)[0]


def conditions(target: Target | None, case: Case, hazards: Iterable[str]) -> frozenset[str]:
    """What holds for ``case``: the names of the declared hazards (``hazards``: ``"name:
    detail"`` strings, as a finding carries them), ``dtype NAME`` for a half-precision input
    dtype (float32 is the simplest: no condition) and, for a family kernel, ``feature NAME`` for
    each optional feature the case uses (a non-empty value of one of the feature's keywords as
    drawn, or of a parameter named as the feature)."""
    out = {h.split(":", 1)[0].strip() for h in hazards}
    dtype = case.params.get("dtype")
    if isinstance(dtype, str) and dtype != "float32":  # float32: the simplest, no condition
        out.add(f"dtype {dtype}")
    fam = _family(target)
    if fam is not None:
        try:
            values = fam.values(case)
        except Exception:  # a case the family cannot read (a hand-written target's): no features
            values = {}

        def raw(kw: str) -> Any:  # as drawn (a default scale is None), else as passed
            if kw in case.params:
                return case.params[kw]
            return case.inputs[kw] if kw in case.inputs else values.get(kw)

        for feat in fam.features:
            kws = fam.keywords.get(feat, ())
            if any(_used(raw(kw)) for kw in kws) or _used(case.params.get(feat)):
                out.add(f"feature {feat}")
    return frozenset(out)


def _family(target: Target | None) -> Any:
    if target is None:
        return None
    try:
        from fuzz.families import family_of

        return family_of(target)
    except Exception:
        return None


def _used(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value != 0
    return True


def site(origin: Mapping[str, Any] | None) -> str | None:
    """Where a NaN or Inf was born (``fuzz.origin``'s trace of a finding): the kernel file, line
    and expression (the line's source where the column range is unknown), or for an overflow of an
    exponential's value in a product, that exponential's (``root``, ``fuzz.origin``); None where
    the trace found nothing or did not run. The kind of the birth is left out: ``0 / 0`` and
    ``1 / 0`` at one division are one bug's examples."""
    if not isinstance(origin, Mapping) or not origin.get("found"):
        return None
    root = origin.get("root")
    if isinstance(root, Mapping) and root.get("line"):  # (an overflow of an exponential's value)
        return f"{origin.get('file')}:{root['line']}: {root.get('expression')}"
    expr = origin.get("expression") or str(origin.get("source", "")).strip()
    return f"{origin.get('file')}:{origin.get('line')}: {expr}"


def write_site(details: Mapping[str, Any] | None) -> str | None:
    """What an ``input-write`` finding wrote into its inputs, as a site (``details["writes"]``:
    per input, the kinds of value written over the kinds held, ``fuzz.properties.write_kinds``):
    one kernel's write turns the same special values into the same values whatever else its
    examples hold (round 13's jagged wrapper sanitizing its values in place came as two rows,
    -inf made the lowest finite in both, of conditions that do not nest). None where it wrote
    only finite values over finite ones: that says nothing of which write it was."""
    writes = (details or {}).get("writes")
    if not isinstance(writes, Mapping) or not writes:
        return None
    said = [
        f"{name}: {', '.join(kinds)}"
        for name, kinds in sorted(writes.items())
        if isinstance(kinds, list) and any(k != "finite -> finite" for k in kinds)
    ]
    return f"writes into {'; '.join(said)}" if said else None


def unwritten_site(details: Mapping[str, Any] | None) -> str | None:
    """Which elements of an output a launch left unwritten, against those its family decides
    without arithmetic (``details["unwritten"]``, ``fuzz.properties.unwritten_kind``), as a
    site: one missing store leaves the same kind unwritten whatever else its examples hold."""
    which = (details or {}).get("unwritten")
    return f"leaves unwritten: {which}" if isinstance(which, str) and which else None


def raise_site(details: Mapping[str, Any] | None) -> str | None:
    """Where a crash's exception was raised in the kernel's own code (``details["raised_at"]``,
    ``fuzz.failures.raised_at``), as a site; None for a sticky CUDA error, which the next call
    that asks the device reports wherever it is (the fault is elsewhere), and for none."""
    details = details or {}
    at = details.get("raised_at")
    if not isinstance(at, str) or not at or sticky_error_name(str(details.get("text", ""))):
        return None
    return f"raised at {at}"


# The sites a finding has without a trace (what it wrote into its inputs, where it raised,
# what it left unwritten): a traced origin may still name a kernel line beside them.
NOT_TRACED = ("writes into ", "raised at ", "leaves unwritten: ")


def finding_site(details: Mapping[str, Any] | None) -> str | None:
    """A finding's site (its ``details``): where its NaN or Inf was born or its wild access was
    (:func:`site` of its traced origin), else what it wrote into its inputs, where it raised,
    or what it left unwritten; None for none of these."""
    details = details or {}
    return (
        site(details.get("origin"))
        or write_site(details)
        or raise_site(details)
        or unwritten_site(details)
    )


def signature(target: str, key: str, triggers: Collection[str]) -> str:
    """The identifier of one bug of ``target`` (stable across runs and hosts: reports deduplicate
    and triage by it)."""
    text = f"{target}|{key}|{','.join(sorted(triggers))}"
    return hashlib.sha1(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Resume:
    """An unshrunk bug a lost slice streamed, for a later slice of its pair to shrink: its bug
    key, its example's choices (``fuzz.results.encode_choices``), the compile-time choices its slice drew
    from (its example replays under them only) and its record's sighting, which the shrunk
    example replaces (``fuzz.ledger.BugLedger.record``)."""

    key: str
    choices: str
    narrowing: dict[str, Any] | None
    sighting: str
    # Its record was shrunk through compiled variants only (``Found.ladder``): a compile
    # worker shrinks it on through new ones, with the notes of its shrinking so far.
    ladder: bool = False
    notes: tuple[str, ...] = ()
    # Its record's signature when queued: the bug the shrink resumes, which the slice knows as
    # found (its other known bugs' examples are hits in that shrink, not this one's).
    signature: str = field(default="", compare=False)
    # Its record is shrunk and its check against the bugs found before was cut at its slice's
    # hard limit (``details["unchecked"]``): a later slice replays its minimal example and
    # checks it (``fuzz.engine``), a known bug seen another way or a bug of its own.
    check: bool = False
    # A row, shrunk and checked, to check again against the bugs found since (its reproducer's
    # path: its minimal example is read back from it, not replayed from choices): rows met in
    # other slices were checked against the bugs known when they were found, and a bug met in
    # three slices stayed three rows (``fuzz.ledger.BugLedger.queue_rechecks``).
    example: str = ""


@dataclass(frozen=True)
class Bug:
    """A distinct bug found earlier: its key, its triggers and its signature, and for a NaN or Inf
    bug whose origin was traced, its :func:`site`. One bug reached through other conditions too
    is several of these with one signature."""

    key: str
    triggers: frozenset[str]
    signature: str
    site: str | None = None
    # Its minimal example's reproducer, where a campaign wrote one (a later slice's duplicate
    # check replays it: ``fuzz.duplicates.Duplicates.shown_by_known``); not part of its identity.
    example: str | None = field(default=None, compare=False)

    def covers(self, key: str, holds: Collection[str]) -> bool:
        """Whether an example of ``key`` for which ``holds`` hold is a hit of this bug."""
        return key == self.key and self.triggers <= frozenset(holds)

    def as_dict(self) -> dict[str, Any]:
        d = {"key": self.key, "triggers": sorted(self.triggers), "signature": self.signature}
        return d if self.site is None else {**d, "site": self.site}

    @classmethod
    def of(cls, d: Mapping[str, Any]) -> Bug:
        site = d.get("site")
        return cls(
            str(d["key"]),
            frozenset(d.get("triggers", ())),
            str(d.get("signature", "")),
            None if site is None else str(site),
        )


def same_bug(a: Bug, b: Bug) -> bool:
    """Whether two bugs are one: one key, and one's triggers contain the other's (an example of
    the bug with fewer triggers that happened to have more conditions, or the other way round),
    or their NaN or Inf is born at one :func:`site`."""
    if a.key != b.key:
        return False
    if a.site is not None and a.site == b.site:
        return True
    return a.triggers <= b.triggers or b.triggers <= a.triggers


def covering(bugs: Iterable[Bug], key: str, holds: Collection[str]) -> Bug | None:
    """The known bug an example of ``key`` for which ``holds`` hold is a hit of (the one with
    the most triggers), or None: it is new."""
    hits = [b for b in bugs if b.covers(key, holds)]
    return max(hits, key=lambda b: len(b.triggers)) if hits else None


def _names(field_name: str, value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, (Sequence, set, frozenset)) or not all(
        isinstance(v, str) for v in value
    ):
        raise ValueError(f"KnownFailure.{field_name}={value!r} must be a string or strings")
    value = tuple(value)
    if not value:
        raise ValueError(f"KnownFailure.{field_name} must not be empty (None: any)")
    return value


@dataclass(frozen=True)
class KnownFailure:
    """A failure a kernel's library knows about and accepts (``fuzz.fuzz_kernel(...,
    known_failures=[...])``): examples that match it are counted under ``reason``, reported as
    known, and never end a hunt nor count as a bug.

    Every field given must match (None: any):

    Attributes:
        reason: why it is accepted (shown in reports), e.g. ``"fp32 dots run in TF32"``.
        classes: failure classes (``accuracy``, ``nan``, ...).
        dtypes: input dtypes (``float32``, ``float16``, ``bfloat16``).
        properties: the properties that fail (``oracle``, ``determinism``, ...).
        outputs: the outputs concerned (``o``, ``lse``, ...).
        hazards: hazard or feature names (``feature causal``) that must all hold.
    """

    reason: str
    classes: Sequence[str] | None = None
    dtypes: Sequence[str] | None = None
    properties: Sequence[str] | None = None
    outputs: Sequence[str] | None = None
    hazards: Sequence[str] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        from fuzz.arrays import FLOAT_DTYPES

        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValueError(f"KnownFailure.reason={self.reason!r} must say why (a non-empty str)")
        classes = _names("classes", self.classes)
        bad = sorted(set(classes or ()) - set(CLASSES))
        if bad:
            raise ValueError(f"KnownFailure.classes has {bad}; choose from {list(CLASSES)}")
        dtypes = _names("dtypes", self.dtypes)
        bad = sorted(set(dtypes or ()) - set(FLOAT_DTYPES))
        if bad:
            raise ValueError(f"KnownFailure.dtypes has {bad}; choose from {list(FLOAT_DTYPES)}")
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "dtypes", dtypes)
        object.__setattr__(self, "properties", _names("properties", self.properties))
        object.__setattr__(self, "outputs", _names("outputs", self.outputs))
        object.__setattr__(self, "hazards", _names("hazards", self.hazards or None) or ())

    def matches(self, finding: Finding, dtype: str | None, holds: Collection[str]) -> bool:
        """Whether a failing example (its ``finding``, input ``dtype`` and the conditions that
        ``holds``) is this known failure."""
        return (
            (self.classes is None or finding.cls in self.classes)
            and (self.dtypes is None or dtype in self.dtypes)
            and (self.properties is None or finding.prop in self.properties)
            and (self.outputs is None or finding.output in self.outputs)
            and set(self.hazards) <= set(holds)
        )

    def check(self, target: Target) -> None:
        """Raises ``ValueError`` naming the field where this declaration cannot match ``target``'s
        failures (an output or hazard it does not have)."""
        fam = _family(target)
        outs = set(fam.outputs) if fam is not None else set()
        bad = sorted(set(self.outputs or ()) - outs) if outs else []
        if bad:
            raise ValueError(
                f"KnownFailure.outputs has {bad}; target {target.name!r} has outputs {sorted(outs)}"
            )
        names = {h.name for h in target.hazards}
        names |= {f"feature {f}" for f in (fam.features if fam is not None else ())}
        bad = sorted(set(self.hazards) - names)
        if bad:
            raise ValueError(
                f"KnownFailure.hazards has {bad}; target {target.name!r} knows {sorted(names)}"
            )

    def describe(self) -> str:
        parts = [
            f"{name}={'/'.join(v)}"
            for name, v in (
                ("class", self.classes),
                ("dtype", self.dtypes),
                ("property", self.properties),
                ("output", self.outputs),
            )
            if v
        ]
        if self.hazards:
            parts.append("with " + " + ".join(self.hazards))
        return f"{' '.join(parts) or 'any failure'}: {self.reason}"


def declared(known: Sequence[KnownFailure], finding: Finding, dtype: str | None, holds: Any) -> Any:
    """The first of ``known`` that a failing example matches, or None."""
    return next((k for k in known if k.matches(finding, dtype, holds)), None)


__all__ = [
    "Bug",
    "KnownFailure",
    "bug_key",
    "conditions",
    "covering",
    "declared",
    "key_class",
    "same_bug",
    "signature",
    "site",
]
