"""Whether a bug a hunt's round found is a known bug after all (the duplicate check).

A round's bugs are told apart by their failure keys and triggers (``fuzz.signatures``). Where
the evidence says a new bug is a known one met another way, it is that bug: its minimal example
is the known bug's kernel call (``case``), fails the known bug's way too, with the known bug's
conditions holding (``property``: of any class and output, the known bug's property checked on
the new example, or on the kernel call its failing metamorphic property derived from it: the
second half of a sequence cut in two; or on the same call with its non-finite inputs made
finite or, for a NaN or Inf, on smaller values: what a special input or an overflow hid), its NaN or Inf is born at the same kernel expression
(``site``, whatever its key), or the wrong elements of both minimal examples read, or ignore,
the same inputs as their references do not (``influence``: ``fuzz.influence``; a bias row read
for every row shows as ``accuracy`` with two columns and as ``masking`` with one, and neither
example fails the other's way; a ``masked-poison`` failure reads the inputs whose poison moved
an output). A known bug of another key met so is one bug seen another way
(the campaign keeps the new record beside it as "also seen as", with its reproducer, the smaller
minimal example standing for the bug); of the same key, one bug reached through other
conditions. Distinctness is never decided by shrinking through the union of the
known and the new failure: two independent bugs whose triggers are free choices (a softmax wrong
for every fp16 input and, apart, for bf16 rows of odd length) walked from one into the other so
and were reported as one. :class:`Duplicates` holds what the check needs from the hunt (its
target, backend and options, the bugs it settled and knew); ``fuzz.engine`` settles each bug it
does not match as a new one.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from fuzz import origin
from fuzz.backends import Backend, get_backend
from fuzz.profiles import HuntOptions
from fuzz.properties import check_case, properties_of
from fuzz.results import Found
from fuzz.signatures import (
    NOT_TRACED,
    Bug,
    bug_key,
    conditions,
    finding_site,
    key_class,
    same_bug,
    site,
)
from fuzz.target import Target


def bug_of(f: Found) -> Bug:
    """The bug a finding is (its key, triggers and signature)."""
    return Bug(
        f.key or f.finding.cls,
        frozenset(f.triggers),
        f.signature,
        finding_site(f.finding.details),
    )


def _without(target: Target, case: Any, drop: Collection[str]) -> Any:
    """``case`` without those of the conditions ``drop`` that can be taken away without
    changing its other draws (``feature NAME``: its family's ``drop``, or its ``recast``
    through another feature of the same meaning; ``dtype NAME``: its floating inputs in
    float32; a shape hazard its family can take away: its ``reduce``), the others kept (a
    hazard of its values, a shape hazard without a reduction: what still holds is compared by
    the caller); None where none can be taken away or nothing is to drop. (A planted GLA
    kernel's one bug stayed two rows on an H200: one form of the decay with a partial chunk,
    the other form without, and the partial chunk, which the family cannot take away, kept
    the recast from being tried.)"""
    import numpy as np

    family = _family(target)
    changed = False
    for c in sorted(drop):
        name = c[8:] if c.startswith("feature ") else None
        if name is not None and family is not None and name in family.drop:
            case, changed = family.drop[name](case), True
        elif name is not None and family is not None and name in family.recast:
            recast = family.recast[name][1](case)  # (the same meaning, another form)
            if recast is not None:
                case, changed = recast, True
        elif c.startswith("dtype "):
            inputs = {k: v.astype(np.float32) if _half(v) else v for k, v in case.inputs.items()}
            case, changed = case.replace(inputs=inputs, dtype="float32"), True
        elif family is not None and c in family.reduce:  # a shape hazard: the case cut
            cut = family.reduce[c](case)
            if cut is not None:
                case, changed = cut, True
    return case if changed else None


def _family(target: Target) -> Any:
    """``target``'s family (``fuzz.families.family_of``), or None where it has none or the
    lookup fails (evidence: never the hunt's error)."""
    from fuzz.families import family_of

    try:
        return family_of(target)
    except Exception:
        return None


def _half(a: Any) -> bool:
    from fuzz.arrays import dtype_name

    return dtype_name(a.dtype) in ("float16", "bfloat16")


# Kernel calls a check derived from an example, checked again as examples of a bug (each is a
# check of its own): at most this many per example and key.
DERIVED_CHECKS = 6


def fails_as(
    target: Target, backend: Backend, options: HuntOptions, f: Any, key: str, own: str = ""
) -> tuple[Any, bool] | None:
    """Whether ``f``'s example (a :class:`Found`, or anything with its ``case`` and ``params``)
    fails the way of bug ``key``: its own check, ``key`` preferred, or else one of the kernel
    calls that its own failing property (that of ``own``, its bug key) derived from it (a
    metamorphic property's: a sequence cut in two with the state carried on, segments
    permuted, a constant added), checked as an example of its own with ``key``'s property
    alone: the call whose result made that property fail. Returns (the failing check's outcome,
    whether it was a derived call's), or None. A planted GLA kernel that dropped the initial
    state of a one-chunk sequence came as two rows: the oracle with an initial state, and
    ``state-continuation`` without one, whose second half is a one-chunk call with the first
    half's state: that call fails the oracle. (Calls derived by other properties than the one
    that failed say nothing of its failure: not taken.) Last, the calls :func:`_remade` makes of
    the example: asking for an optional output it did not, its non-finite inputs made finite,
    and for a NaN or Inf bug its values made smaller."""
    outcome = check_as(target, backend, options, f, key)
    if outcome is None:
        return None
    if _fails(outcome, key):
        return outcome, False
    prop = own.split("|")[1] if own.count("|") >= 1 else None
    seen: set[str] = {f.case.digest()}
    for by, case in outcome.context.derived_cases:
        digest = case.digest()
        if by != prop or digest in seen:
            continue
        seen.add(digest)
        if len(seen) > 1 + DERIVED_CHECKS:
            break
        derived = _check_alone(target, backend, options, case, {}, key)
        if _fails(derived, key):
            return derived, True
    for case in _remade(target, f, key, own):
        remade = _check_alone(target, backend, options, case, f.params, key)
        if _fails(remade, key):
            return remade, True
    return None


def _check_alone(
    target: Target, backend: Backend, options: HuntOptions, case: Any, params: Any, key: str
) -> Any:
    """The outcome of kernel call ``case`` checked as an example of its own with the property
    of bug ``key`` alone, or None where the check raised."""
    try:
        return check_case(
            target,
            backend,
            case,
            params=params,
            **options.check_kwargs(),
            prefer=key,
            only=key.split("|")[1:2],
        )
    except Exception:
        return None


def _remade(target: Target, f: Any, key: str, own: str) -> Iterator[Any]:
    """The calls made of ``f``'s example that :func:`fails_as` checks last, each a call of its
    own (what holds is its conditions, the known bug's triggers among them):

    - for a bug ``key`` of an optional output the example did not ask for (its family's
      ``requests``), the example asking for it. A planted GLA kernel that decayed each key from
      the chunk's start came as two rows: the final state ``ht`` of one token, and ``o`` of
      several chunks, whose example asked for no final state; with it, that state is wrong too.
    - for an example with non-finite inputs, the same call with them made finite
      (:func:`fuzz.influence.finite`). A planted Pallas softmax that truncated its scale to an
      integer came as two rows on the CPU and on an H200: every key of a row weighted alike
      (``accuracy``), and ``-inf * 0`` = NaN where a key was -inf (``nan``); with that key a
      finite one far below the others, the NaN example weights it as the others. A bug that
      needs the special value (a fully masked row's ``-inf - -inf``) does not fail so.
    - for an example of a NaN or Inf bug (``own``), the same call on smaller values (its
      floating inputs scaled by each of :data:`fuzz.influence.TAME_FACTORS` in turn). A
      planted GLA kernel that restarted its gates' prefix sum at every 16-token tile of a
      32-token chunk came as ``inf`` (strong gates: the decay across the tile boundary grows to
      exp(183)) and ``accuracy`` (weaker ones); a quarter of the Inf example's gates gives the
      accuracy row's failure. A bug exact but for its overflow (a softmax shifted by the wrong
      maximum) passes on smaller values: nothing is told.
    - for an example with reductions of one element (its family's ``grow``: a jagged segment
      of one row, whose output the mask alone fixes at 1), the same call with each given a
      second: a planted jagged kernel that left a column unwritten came as ``masking`` (one
      row, 0 for 1) and ``accuracy`` (two rows); with its row repeated, the one-row example
      fails the accuracy row's way. A fault of one-row segments alone passes so."""
    from fuzz import influence

    family, parts = _family(target), key.split("|")
    request = family.requests.get(parts[2]) if family is not None and len(parts) > 2 else None
    if request is not None:
        case = request(f.case)
        if case.digest() != f.case.digest():  # (not asked for already)
            yield case
    finite = influence.finite(f.case)
    if finite is not None:
        yield finite
    if key_class(own) in ("nan", "inf"):
        for factor in influence.TAME_FACTORS:
            tamed = influence.tamed(f.case, factor)
            if tamed is not None:
                yield tamed
    grown = None if family is None or family.grow is None else family.grow(f.case)
    if grown is not None:
        yield grown


def _fails(outcome: Any, key: str) -> bool:
    return outcome is not None and outcome.finding is not None and bug_key(outcome.finding) == key


def check_as(target: Target, backend: Backend, options: HuntOptions, f: Any, key: str) -> Any:
    """The outcome of ``f``'s example (a :class:`Found`, or anything with its ``case`` and
    ``params``) on ``backend``, the property of bug ``key`` checked first; None where the check
    raised (a check of a bug's identity: never the hunt's error, never the finding lost over
    it)."""
    try:
        return check_case(
            target,
            backend,
            f.case,
            params=f.params,
            **options.check_kwargs(),
            prefer=key,
        )
    except Exception:
        return None


class _OutOfTime(Exception):
    """The duplicate check's :attr:`Duplicates.deadline` has passed."""


@dataclass(frozen=True)
class _Example:
    """A known bug's minimal example read back from its reproducer (``Bug.example``)."""

    bug: Bug
    case: Any
    params: dict[str, Any]


def _example_of(bug: Bug, target: Target) -> _Example | None:
    """``bug``'s minimal example from its reproducer, where it is one of ``target``'s and can be
    read here (a cluster's worker on another node cannot: None)."""
    from fuzz import reproducer

    if not bug.example:
        return None
    try:
        meta, data = reproducer.load(bug.example)
        if meta.get("target") != target.name:
            return None
        return _Example(bug, reproducer.recorded_case(meta, data), reproducer.recorded_params(meta))
    except Exception:
        return None


@dataclass
class Duplicates:
    """The known bugs of a hunt, and which of them a new bug is after all (:meth:`of`).

    Attributes:
        target, backend, options: the hunt's.
        found: the bugs the hunt has settled (``HuntResult.found``), by label.
        known_bugs: every bug the hunt knows (settled, or found before it); a known bug reached
            through other conditions gains them as another way to it (:meth:`same_site`).

    One instance may serve a hunt's successive checks (``fuzz.engine``): what it computed of an
    example (its failures another way, its influence anomalies) is kept by the example's call.
    """

    target: Target
    backend: Backend
    options: HuntOptions
    found: Mapping[str, Found]
    known_bugs: list[Bug]
    # Known bugs' examples read back from their reproducers, by path (None: unreadable here).
    _examples: dict[str, _Example | None] = field(default_factory=dict)
    # fails_as of an example (its call and parameters) and a key.
    _failing: dict[tuple[str, str, str], tuple[Any, bool] | None] = field(default_factory=dict)
    # influence.anomalies of an example's call (with the poison_reads of a masked-poison
    # failure's poison), by the call and the poison.
    _anomalies: dict[tuple[str, str | None], frozenset[tuple[str, str]] | None] = field(
        default_factory=dict
    )
    # fuzz.explain's explanation of an example's call, by the call.
    _explained: dict[str, Any] = field(default_factory=dict)
    # ``time.perf_counter()`` past which no more evidence is gathered (None: no limit), and how
    # many checks it cut (:meth:`of`).
    deadline: float | None = None
    cut: int = 0
    clock: Callable[[], float] = time.perf_counter  # (the hunt's: its deadline's clock)

    def of(self, f: Found) -> tuple[Bug, str] | None:
        """The known bug that new bug ``f`` is after all, and how that was told (``"case"``: its
        minimal example is a known bug's kernel call, failing another way; ``"property"``: its
        minimal example fails a known bug's way too, with that bug's triggers or under fewer of
        its own, or a settled bug's minimal example fails ``f``'s way with ``f``'s triggers, the
        example itself or a kernel call its check derived; ``"site"``: its NaN or Inf is born at
        a known bug's kernel expression; ``"influence"``: the wrong elements of both minimal
        examples read, or ignore, one input as their references do not), or None: a bug of its
        own.

        An example of a known bug's key counts as a hit of it only where all of the bug's
        triggers hold, and a bug's triggers are those of its minimal example, some of them
        incidental (a partial tile from 33 columns where 32 fail too). An example of the same
        fault without one of them is new; only evidence makes it the known bug (its NaN's birth
        site), never shrinking it again through the known bug's examples (see the module's
        docstring)."""
        try:
            self.name(f)
            if not f.choices or not f.key:
                return None  # nothing to replay
            return self._of(f)
        except _OutOfTime:
            # Each piece of evidence is a kernel call, a new shape a compile on a GPU: for a
            # pair of many bugs, unbounded, they can take a slice past its hard limit outside
            # any example, where the campaign kills its worker with what it was shrinking.
            # Undecided: a bug of its own (a row too many, never a bug lost).
            self.cut += 1
            return None

    def bridges(self, f: Found, twin: tuple[Bug, str]) -> list[Bug]:
        """The other known rows (bugs of other signatures than ``twin``'s and ``f``'s own) that
        ``f``, found to be ``twin`` (:meth:`of`), is as well, each by evidence of
        :data:`BRIDGING` (as ``twin`` must be): ``f`` is one bug, so they are the twin's bug.
        A record joins one row, and two rows of one key whose conditions do not nest, each failing
        no way of the other, stayed two although a third minimal example was each of them (a
        planted Pallas kernel's reshape bug, two rows on the CPU). Evidence of likeness alone
        (``influence``, ``explained``) bridges nothing: a small example of one of two positional
        bugs reads as the other too; nor do two rows of free choices apart (:func:`_independent`:
        an example holding both bugs' conditions, which shrinking could not take apart, fails
        each way). Stops at :attr:`deadline` with what it found."""
        if twin[1] not in BRIDGING:
            return []
        known, found = self.known_bugs, self.found
        out: list[Bug] = []
        apart = {twin[0].signature, f.signature}
        try:
            while True:
                self.known_bugs = [b for b in known if b.signature not in apart]
                self.found = {k: v for k, v in found.items() if v.signature not in apart}
                got = self._of(f) if self.known_bugs or self.found else None
                if got is None:
                    return out
                apart.add(got[0].signature)  # (a row not bridged: the others still asked)
                if got[1] in BRIDGING and not _independent(twin[0], got[0]):
                    out.append(got[0])
        except _OutOfTime:
            return out
        finally:
            self.known_bugs, self.found = known, found

    def _in_time(self) -> None:
        """Raises :class:`_OutOfTime` once :attr:`deadline` has passed."""
        if self.deadline is not None and self.clock() > self.deadline:
            raise _OutOfTime

    def _trace_seconds(self) -> float:
        """The seconds a trace of the check may take: what is left before :attr:`deadline`."""
        if self.deadline is None:
            return origin.TRACE_SECONDS
        return min(origin.TRACE_SECONDS, max(0.0, self.deadline - self.clock()))

    def _of(self, f: Found) -> tuple[Bug, str] | None:
        bug = bug_of(f)
        same_call = self.same_call(f)
        if same_call is not None:
            return same_call, "case"
        also = self.also_fails(f)
        if also is not None:
            return also, "property"
        shown = self.shown_by_known(f)
        if shown is not None:
            return shown, "property"
        alike = self.explained_alike(f)
        if alike is not None:
            return alike, "explained"
        # (a known bug of its key written alike, or raised at one line of the kernel's code:
        # ``fuzz.signatures.write_site``, ``raise_site``)
        written = next(
            (b for b in self.known_bugs if b.key == bug.key and _written_alike(b, bug)), None
        )
        if written is not None:  # (its conditions another way to it: later examples are hits)
            self.known_bugs.append(Bug(bug.key, bug.triggers, written.signature, bug.site))
            return written, "site"
        others = [b for b in self.known_bugs if b.key != bug.key]
        twins = [b for b in self.known_bugs if b.key == bug.key and not same_bug(b, bug)]
        twin = self.same_site(f, twins + others)
        if twin is not None:
            return twin, "site"
        twin = self.needs_fewer(f, twins)
        if twin is not None:
            return twin, "conditions"
        twin = self.other_half(f, twins + others)
        if twin is not None:
            return twin, "dtype"
        under_more = self._under_more(f)
        if under_more is not None:
            return under_more
        twin = self.reads_alike(f)
        return None if twin is None else (twin, "influence")

    def needs_fewer(self, f: Found, twins: list[Bug]) -> Bug | None:
        """The bug of ``twins`` (of ``f``'s key, triggers that do not nest with ``f``'s) that
        ``f`` is once its incidental conditions are taken away, or None. A trigger of a minimal
        example should be one its failure needs, but some are incidental (a bias drawn beside a
        wrong rescale across tiles: an H100 campaign reported the rescale bug a second time with
        a bias and no partial tile). Each of ``f``'s conditions a twin lacks that the case can
        drop without changing its other draws (an optional feature: its family's ``drop``; a
        half-precision dtype: the inputs in float32; a shape hazard: its family's ``reduce``, a
        softmax row cut to its first tile) is dropped from ``f``'s minimal example;
        where it still fails with ``f``'s key and its conditions then nest with the twin's, it is
        that bug. Nothing is searched: a condition its failure needs keeps it apart (two bugs of
        one key whose triggers are free choices, fp16 inputs for one and bf16 for the other,
        stay two)."""
        for b in twins:
            self._in_time()
            case = _without(self.target, f.case, frozenset(f.triggers) - b.triggers)
            if case is None:
                continue
            example = dataclasses.replace(f, case=case)
            outcome = check_as(self.target, self.backend, self.options, example, f.key)
            if outcome is None or outcome.finding is None or bug_key(outcome.finding) != f.key:
                continue  # what was dropped is needed: its own conditions
            holds = conditions(self.target, case, outcome.context.hazards)
            if b.triggers <= holds or holds <= b.triggers:
                return b
        return None

    def other_half(self, f: Found, twins: list[Bug]) -> Bug | None:
        """The bug of ``twins`` (known bugs of any key) of the other half dtype (float16 for
        one, bfloat16 for the other) where each minimal example, its inputs cast to the other's
        dtype (kept within its range), fails the other's way with conditions that nest with the
        other's triggers; or None. Shrinking moves a dtype toward float32 only, so a bug
        of both half dtypes, met through each, ends in two minimal examples apart by their
        dtype (fla's dq bug on an H200: a float16 row and a bfloat16 row of 8,192 elements,
        wrong at one element). Both ways are asked: two independent bugs of one key, one of
        every float16 input and one of bfloat16 rows of odd length, stay two, since the first's
        minimal example passes in bfloat16 (the second's fails in float16, through the first)."""
        mine = _half_of(f.triggers)
        if mine is None:
            return None
        halves = []  # (conditions of a dtype, fp16's exp overflow, are read again once cast)
        for b in twins:
            theirs = _half_of(b.triggers)
            if theirs is not None and theirs != mine:
                halves.append((b, theirs))
        if not halves:
            return None
        # Each known bug's minimal example, by signature or by its key and triggers (a way a
        # bug was seen keeps its own example under the bug's signature).
        examples = self._known_examples(f, twins=True)
        for b, theirs in halves:
            example = next(
                (
                    ex
                    for k, ex in examples
                    if k.signature == b.signature or (k.key, k.triggers) == (b.key, b.triggers)
                ),
                None,
            )
            if (
                example is not None
                and self._fails_in(f, theirs, b.triggers, key=b.key)
                and self._fails_in(example, mine, frozenset(f.triggers), key=f.key)
            ):
                return b
        return None

    def _fails_in(
        self, example: Any, dtype: str, triggers: frozenset[str], key: str | None = None
    ) -> bool:
        """Whether ``example`` (a :class:`Found`, or a known bug's read back), its half inputs
        cast to ``dtype`` (a ``dtype NAME`` condition), fails the way of ``key`` (its own by
        default) with conditions that nest with ``triggers``."""
        import numpy as np

        from fuzz.arrays import cast, finfo

        self._in_time()
        name = dtype[6:]
        top = finfo(name).max  # (bf16's range is fp16's and more: kept finite, not made inf)
        inputs = {
            k: cast(np.clip(v.astype(np.float64), -top, top), name) if _half(v) else v
            for k, v in example.case.inputs.items()
        }
        case = example.case.replace(inputs=inputs, dtype=name)
        key = key or example.key
        example = dataclasses.replace(example, case=case)  # (a Found, or a known bug's example)
        outcome = check_as(self.target, self.backend, self.options, example, key)
        if not _fails(outcome, key):
            return False
        holds = conditions(self.target, case, outcome.context.hazards)
        return triggers <= holds or holds <= triggers

    def _under_more(self, f: Found) -> tuple[Bug, str] | None:
        """A check of :meth:`of`, after those of ``f``'s own key: :meth:`also_fails` the
        other way round."""
        also = self.also_fails(f, under_more=True)
        return None if also is None else (also, "property")

    def same_call(self, f: Found) -> Bug | None:
        """The bug found before, of another key (any class), whose minimal example is ``f``'s
        kernel call itself (``Case.digest``), or None: one call failing two ways is one bug. On
        an H100 two_bugs_softmax's rescale bug came back twice so, through the oracle and
        through ``rows-sum-to-one``, both shrunk to one 33-column row."""
        digest = f.case.digest()
        for old in self.found.values():
            if old.key != f.key and old.case.digest() == digest:
                return bug_of(old)
        return None

    def fails_as(self, example: Any, own: str, key: str) -> tuple[Any, bool] | None:
        """:func:`fails_as` of an example of bug key ``own``, computed once per example (its
        call and parameters) and key."""
        self._in_time()
        memo = (example.case.digest(), json.dumps(example.params, sort_keys=True, default=str), key)
        if memo not in self._failing:
            self._failing[memo] = fails_as(
                self.target, self.backend, self.options, example, key, own
            )
        return self._failing[memo]

    def _drawn(self, f: Found) -> dict[str, list[Any]]:
        """Bug key -> the parameters the known bugs' minimal examples of that key drew for its
        property (a ``masked-poison`` bug's poison), each once."""
        out: dict[str, list[Any]] = {}
        for bug, example in self._known_examples(f):
            value = _param_of(example, bug.key)
            if value is not None and value not in out.setdefault(bug.key, []):
                out[bug.key].append(value)
        return out

    def _fails_as_drawn(
        self, example: Any, own: str, key: str, drawn: Any
    ) -> tuple[Any, bool] | None:
        """:meth:`fails_as`, and where the example does not fail ``key``'s way under the
        parameter it drew for ``key``'s property, under each of ``drawn`` (those the bug's own
        minimal examples drew), then each other value of the property's few
        (``Property.values``): a bug's way is its property with what showed it. A planted
        softmax that took the row max over masked keys came as a masking row (masked NaNs move
        the output) and an accuracy row whose example failed ``masked-poison`` with NaNs, not
        with the poison it had drawn (the largest finite value, which the bug leaves alone)."""
        failing = self.fails_as(example, own, key)
        prop = key.split("|")[1] if key.count("|") >= 1 else ""
        if failing is not None or not prop or prop not in (example.params or {}):
            return failing
        few = next((p.values for p in properties_of(self.target) if p.name == prop), ())
        for value in [*drawn, *(v for v in few if v not in drawn)]:
            if failing is not None or not prop or example.params.get(prop, value) == value:
                continue
            again = dataclasses.replace(example, params={**example.params, prop: value})
            failing = self.fails_as(again, own, key)
        return failing

    def _holds(self, failing: tuple[Any, bool], own: frozenset[str]) -> frozenset[str]:
        """What holds for the call that failed (``fails_as``): ``own`` (the example's triggers)
        where it is the example itself, else that derived call's conditions."""
        outcome, derived = failing
        if not derived:
            return own
        return conditions(self.target, outcome.context.case, outcome.context.hazards)

    def _forms(self, holds: Collection[str]) -> frozenset[str]:
        """``holds`` and, for each feature in it that its family can give through another of the
        same meaning (``Family.recast``: simple GLA's decay per token ``g`` or per head
        ``g_gamma``), that one: a form a free choice drew is no condition of a bug seen another
        way (a planted GLA kernel's ``ht`` row had the per-head form, its ``o`` row the other,
        and the ``o`` example failed the ``ht`` row's way)."""
        family = _family(self.target)
        recast = family.recast if family is not None else {}
        names = [t[8:] for t in holds if t.startswith("feature ")]
        more = {f"feature {recast[n][0]}" for n in names if n in recast}
        return frozenset(holds) | more

    def also_fails(self, f: Found, *, under_more: bool = False) -> Bug | None:
        """The known bug of another key (any class, any output) whose way ``f``'s minimal
        example fails too, with every one of that bug's triggers holding for it, or None: ``f``
        is that bug seen another way, met through another property, class or output first (a
        metamorphic property on a large case, whose small cases fail the oracle as well; a NaN
        that a masked poison also shows). On an H100 two_bugs_softmax's rescale bug came back
        through ``rows-sum-to-one`` so, shrunk to a 33-column row that fails the oracle with the
        known rescale bug's conditions; a planted Triton kernel's one NaN bug came back as 12
        rows of four classes. Where ``f``'s example does not fail that way itself, a kernel call
        its check derived from it may, with the triggers holding for that call (:func:`fails_as`:
        the second half of a ``state-continuation`` failure, a one-chunk call with a state).

        ``under_more``: the other way round, a known bug whose triggers contain all of ``f``'s
        (and more) is the same bug met under more conditions (had ``f`` come first, it would
        have been a hit of it), where ``f``'s minimal example fails its property. On an H200 the
        rescale bug came first through ``rows-sum-to-one`` on values below the finite sentinel,
        then through the oracle on plain values, and was reported twice. (The weaker check:
        :meth:`of` makes it last, after those of ``f``'s own key.)"""
        own = frozenset(f.triggers)
        others = [b for b in self.known_bugs if b.key != f.key]
        drawn = self._drawn(f)
        for key in sorted({b.key for b in others}):
            failing = self._fails_as_drawn(f, f.key, key, drawn.get(key, ()))
            if failing is None:
                continue
            holds = self._holds(failing, own)
            forms = self._forms(holds)
            mine = [
                b
                for b in others
                if b.key == key
                and (
                    holds < b.triggers and self._nests(forms, b)
                    if under_more
                    else b.triggers <= forms
                )
            ]
            if mine:
                return max(mine, key=lambda b: len(b.triggers))
        return None

    def _known_examples(self, f: Found, *, twins: bool = False) -> list[tuple[Bug, Any]]:
        """The minimal examples of the known bugs of another key than ``f``'s (``twins``: and
        of its key, other bugs than ``f``): those this hunt settled and the ways it saw each
        of them too (``Found.seen_as``: a bug's example met another way is as much its example,
        as the campaign's ledger keeps it), and an earlier slice's read back from their
        reproducers (``Bug.example``). A planted attention kernel whose window let one key too
        many in came as three rows of one hunt: ``masking`` of ``o`` (a query whose window holds
        no key sees one), ``accuracy`` of ``o`` (one with a key sees two: its wrong elements read
        what the masking row's do, so it was seen as that bug) and ``accuracy`` of ``lse``, on
        which only the second's example fails too."""
        me = bug_of(f)

        def other(b: Bug) -> bool:
            return b.key != f.key or (twins and not same_bug(b, me))

        examples: list[tuple[Bug, Any]] = [
            (bug_of(old), old)
            for old in self.found.values()
            if old.choices and old.key and other(bug_of(old))
        ]
        examples += [
            (dataclasses.replace(bug_of(seen), signature=old.signature), seen)
            for old in self.found.values()
            for seen in old.seen_as
            if seen.choices and seen.key and other(bug_of(seen))
        ]
        mine = {b.signature for b, _ in examples}  # (their examples are here already)
        read: set[str] = set()
        for b in self.known_bugs:
            if other(b) and b.example and b.signature not in mine and b.example not in read:
                read.add(b.example)
                if b.example not in self._examples:
                    self._examples[b.example] = _example_of(b, self.target)
                example = self._examples[b.example]
                if example is not None:
                    examples.append((b, example))
        return examples

    def shown_by_known(self, f: Found) -> Bug | None:
        """The bug this hunt settled, of another key, whose minimal example fails ``f``'s way
        too, with ``f``'s features and dtype holding for it, or None: ``f`` is that bug seen another
        way, its own minimal example smaller than what the other way needs (:meth:`also_fails`
        the other way round). A planted attention kernel that applied its soft cap unscaled
        came as two rows: ``o`` wrong for two keys, and ``lse`` wrong already for one key (where
        ``o`` is the one value, right whatever the logits); the two-key example fails ``lse``
        too. Of ``f``'s triggers, its free choices must hold for that example (the optional
        features and half dtypes: two independent bugs differ so, fp16 inputs for one and
        bf16 for the other), not the hazards of its shape or values, which its minimal example
        may hold only for being the smallest (one visible key: the ``lse`` row's). The example
        itself or a kernel call its check derived (:func:`fails_as`). Two bugs of one key are
        never told apart here (see :meth:`needs_fewer`)."""
        holds = _free(f.triggers)
        mine = _param_of(f, f.key)
        for bug, old in self._known_examples(f):
            if not self._nests(self._forms(holds), bug):
                continue  # (a way of a row whose example holds another bug's choices too)
            failing = self._fails_as_drawn(old, bug.key, f.key, () if mine is None else [mine])
            if failing is None:
                continue
            outcome = failing[0]
            if holds <= self._forms(
                conditions(self.target, outcome.context.case, outcome.context.hazards)
            ):
                return bug
        return None

    def anomalies(self, example: Any, key: str = "") -> frozenset[tuple[str, str]] | None:
        """:func:`fuzz.influence.anomalies` of an example's call, with those of the call with
        the values its shrink left at one value drawn again where that call fails ``key``'s way
        too (:meth:`_revalued_anomalies`: each a read or an ignore of the bug's, seen on one
        call or the other), and where the example is of a ``masked-poison`` bug (``key``), the
        inputs its poison showed read (:func:`fuzz.influence.poison_reads`), computed once."""
        from fuzz import influence

        self._in_time()
        poison = _poison_of(example, key)
        memo = (example.case.digest(), poison)
        if memo not in self._anomalies:
            try:
                found = self._influence(example.case)
                if key:
                    more = self._revalued_anomalies(example, key)
                    if more:
                        found = (found or frozenset()) | more
                if poison is not None:
                    reads = influence.poison_reads(
                        self.target, self.backend, self.options, example.case, poison, self._in_time
                    )
                    if reads:
                        found = (found or frozenset()) | reads
                self._anomalies[memo] = found
            except _OutOfTime:
                raise  # (undecided: the check says so, see ``of``)
            except Exception:  # evidence, never the hunt's error
                self._anomalies[memo] = None
        return self._anomalies[memo]

    def _revalued_anomalies(self, example: Any, key: str) -> frozenset[tuple[str, str]] | None:
        """The anomalies of ``example``'s call with the inputs its shrink left at one value
        (:func:`fuzz.influence.revalued`) drawn again, where that call still fails ``key``'s
        way; None otherwise. A shrink takes every value its failure does not need to zero, and
        a wrong element that no longer depends on its inputs tells nothing of what it reads: a
        planted decode kernel that placed its query one key late came as an ``inf`` row (a
        window of one key: the kernel sees none; its ``o`` ignores ``v``) and an ``accuracy``
        row (a window of two: it sees one), whose minimal example's query was zero, its
        ``lse`` log 1 for log 2 whatever the keys; drawn again, its wrong elements ignore ``q``
        and ``v``, as the first row's do. Where the wrong elements read some inputs already, the
        ones left at one value may hide more: a causal mask applied as the key loop's bound
        only (round 6) came as ``accuracy`` (two queries on two keys: query 0 sees key 1; its
        values zero, so it read ``k`` alone) and ``masking`` (two on one: query 0, whose keys
        are none, sees key 0; its ``o`` reads ``v``)."""
        from fuzz import influence

        case = influence.revalued(example.case)
        if case is None:
            return None
        self._in_time()
        outcome = _check_alone(
            self.target, self.backend, self.options, case, getattr(example, "params", {}), key
        )
        if not _fails(outcome, key):
            return None  # (its failure needs the values the shrink left)
        return self._influence(case)

    def _influence(self, case: Any) -> frozenset[tuple[str, str]] | None:
        """:func:`fuzz.influence.anomalies` of ``case``'s call, within half the check's time left
        (two examples analysed at most per known bug)."""
        from fuzz import influence

        left = None if self.deadline is None else self.deadline - self.clock()
        return influence.anomalies(
            self.target,
            self.backend,
            self.options,
            case,
            self._in_time,
            seconds=None if left is None else left / 2,
        )

    def name(self, f: Found) -> None:
        """What the kernel computed instead of ``f``'s minimal example's oracle, where a
        hypothesis of :mod:`fuzz.explain` matches: on its finding (``details["explained"]`` and
        its message, what a maintainer reads first), whether ``f`` stands as a row or joins one."""
        try:
            mine = self.explained(f)
        except _OutOfTime:
            return  # (a name, never a reason to leave the bug unchecked)
        if mine is not None and "explained" not in f.finding.details:
            f.finding.details["explained"] = mine.text
            f.finding.message += f"; {mine.text}"

    def explained(self, example: Any) -> Any:
        """:func:`fuzz.explain.explain` of an example's call (its oracle check: what the kernel
        computed instead), its hypotheses narrowed to those that also hold on the example's
        neighbours (the family's ``vary``: a small example matches several), computed once;
        None where no hypothesis holds or the call cannot be checked so. A plain-torch kernel
        with its causal mask aligned top-left and its window's sides swapped (independent
        triggers) came as two rows whose minimal examples both matched a top-left alignment
        (two queries on one key under a window ``(-1, 0)`` read so); with one key more, only
        the swapped window holds there: two bugs."""
        from fuzz import explain

        if example.case.size > explain.MAX_ELEMENTS:
            return None  # (not explained: no kernel call and oracle run for nothing)
        memo = example.case.digest()
        if memo not in self._explained:
            self._in_time()
            try:
                got = self._oracle_call(example, example.case)
                found = None if got is None else explain.explain(*got)
                family = _family(self.target)
                vary = None if family is None else family.vary
                where = self._neighbours_on(example.case)
                for case in [] if vary is None or where is None else vary(example.case):
                    if found is None:
                        break
                    self._in_time()
                    got = self._oracle_call(example, case, where)
                    if got is not None:  # (a neighbour the kernel declines tells nothing)
                        found = explain.narrowed(found, explain.holds(*got, found.keys))
                self._explained[memo] = found
            except _OutOfTime:
                raise  # (undecided: the check says so, see ``of``)
            except Exception:  # evidence, never the hunt's error
                self._explained[memo] = None
        return self._explained[memo]

    def _neighbours_on(self, case: Any) -> Backend | None:
        """Where an example's neighbours run (``explained``): its own backend where it
        interprets, else the interpreter of its kernel source within the profile's interpreter
        cost (a neighbour's new shape is a compile on a GPU, and a kernel reading out of bounds
        there can lose the process's CUDA context); None where neither (the explanation is then
        left as the example alone gives it)."""
        if self.backend.interpret:
            return self.backend
        try:
            twin = None if self.backend.twin is None else get_backend(self.backend.twin)
        except ValueError:
            return None
        if twin is None or not twin.interpret or not twin.available:
            return None
        fits = self.target.search.cost(case) <= self.options.interpreter_max_cost
        return twin if fits else None

    def _oracle_call(
        self, example: Any, case: Any, backend: Backend | None = None
    ) -> tuple[Any, Any] | None:
        """The oracle check's context of ``case`` called with ``example``'s parameters on
        ``backend`` (default: the check's) and the kernel's outputs, or None where the call
        failed to run."""
        outcome = check_case(
            self.target,
            backend or self.backend,
            case,
            params=getattr(example, "params", {}),
            **self.options.check_kwargs(),
            only=("oracle",),
        )
        clean = outcome.context.clean
        return None if clean.error is not None else (outcome.context, clean.outputs)

    def explained_alike(self, f: Found) -> Bug | None:
        """The known bug (of any key, with a minimal example here) whose minimal example is
        explained as ``f``'s is (:mod:`fuzz.explain`: one hypothesis of what the kernel computed
        instead matching every output of both), or None. One mistake is one bug whatever free
        choices reached it: a planted varlen kernel that stored its log-sum-exps token-major
        came as three ``inf`` rows on an H200 (a query with no key under a causal mask, under a
        window, in an empty sequence: choices that do not nest) and an ``accuracy`` row, each
        the oracle's lse transposed. Two bugs that each scale values their own way (the
        two-bug softmax) match no hypothesis."""
        mine = self.explained(f)
        if mine is None:
            return None
        for bug, old in self._known_examples(f, twins=True):
            theirs = self.explained(old)
            if theirs is not None and theirs.keys & mine.keys:
                return bug
        return None

    def reads_alike(self, f: Found) -> Bug | None:
        """The known bug (of any key, with a minimal example here) whose minimal example's wrong
        elements read, or ignore, the same inputs as ``f``'s do where their references do not
        (:func:`fuzz.influence.anomalies`: the anomalies of one contain the other's), with free
        choices (features, half dtypes) that nest, or None. A planted softmax that read row 0's
        bias for every row came as two rows: ``accuracy`` (two rows of two columns, the bias
        differing) and ``masking`` (one column, row 1's bias -inf): neither example fails the
        other's way (one column is 1 whatever its bias), and in both the wrong row ignores its
        own bias. A planted jagged softmax that read the next segment's rows did the same
        (``masking`` for a one-row segment, ``accuracy`` for two rows): both read the next
        segment's values. A ``masked-poison`` example reads the inputs whose poison moved an
        output: a planted packed attention kernel that read a sequence's keys from its query
        offset came as ``accuracy`` (its wrong elements read keys and values their references
        do not) and as ``masked-poison`` (the keys it read past the data, poisoned; no oracle
        failure). Two bugs that only scale values read what their references read: no
        evidence (the two-bug softmax's fp16 and bf16 bugs stay two); free choices that do not
        nest (a causal mask for one, a window for the other) keep two bugs apart."""
        mine = self.anomalies(f, f.key or "")
        if not mine:
            return None
        free = _free(f.triggers)
        for bug, old in self._known_examples(f, twins=True):
            theirs = self._needs(bug)
            if not (free <= theirs or theirs <= free):
                continue
            other = self.anomalies(old, bug.key)
            if other and (mine <= other or other <= mine):
                return bug
        return None

    def _nests(self, forms: frozenset[str], bug: Bug) -> bool:
        """Whether the free choices among ``forms`` (an example's conditions and their recast
        forms, :meth:`_forms`) nest with those known bug ``bug`` needs (:meth:`_needs`). Under
        more conditions, a way's example may hold another bug's choices: the two-positional-bugs
        kernel's causal example failed, under fewer conditions, a way of its window row whose
        example held a causal mask and a window, and the two rows became one on the CPU."""
        free, needs = _free(forms), self._needs(bug)
        return free <= needs or needs <= free

    def _needs(self, bug: Bug) -> frozenset[str]:
        """The free choices (:func:`_free`) of every way known bug ``bug``'s row was seen (its
        signature's): those the bug needs. A way's example may hold another bug's choices too:
        on the CPU a two-positional-bugs kernel's window row took in an example with a causal
        mask and a window, and through that way a causal row whose wrong elements read alike."""
        ways = [_free(b.triggers) for b in self.known_bugs if b.signature == bug.signature]
        return frozenset.intersection(_free(bug.triggers), *ways)

    def same_site(self, f: Found, twins: list[Bug]) -> Bug | None:
        """The bug of ``twins`` (NaN or Inf bugs: of ``f``'s key, or another) whose NaN or Inf
        is born where ``f``'s is (``fuzz.signatures.site``), or None. Their origins are traced
        here where no one traced them yet (a campaign's slice traces each bug it sends, so a
        known bug of an earlier slice comes with its site). ``f`` is then that bug reached
        through other conditions (of its key: kept as another way to it, so that later examples
        through them are hits, not shrunk again), or seen another way (another key: a NaN
        through the oracle and through shift invariance, both born at one ``exp``). A load past
        a buffer's end is a site too (``fuzz.origin.trace_loads``), of any class it may explain:
        garbage read on a GPU showed as wrong values, a NaN, an Inf and runs that differ."""
        group = next(
            (
                g
                for g in (origin.BIRTH_CLASSES + origin.LOAD_CLASSES, origin.STORE_CLASSES)
                if f.finding.cls in g
            ),
            (),
        )
        twins = [b for b in twins if key_class(b.key) in group]
        if not group or not twins:
            return None
        name = self.backend.name
        cost = self.options.interpreter_max_cost
        self._in_time()
        here = site(origin.of_finding(f, self.target, name, cost, seconds=self._trace_seconds()))
        if here is None:
            return None
        for b in twins:
            there = None if b.site is None or b.site.startswith(NOT_TRACED) else b.site
            if there is None:
                old = next((o for o in self.found.values() if o.signature == b.signature), None)
                there = (
                    None
                    if old is None
                    else site(
                        origin.of_finding(
                            old, self.target, name, cost, seconds=self._trace_seconds()
                        )
                    )
                )
            if there == here:
                if b.key == f.key:
                    self.known_bugs.append(Bug(b.key, frozenset(f.triggers), b.signature, here))
                return b
        return None


# The evidence by which one record bridges two rows (:meth:`Duplicates.bridges`): one kernel
# call, a way failed with the row's conditions, one birth site or write, one example once its
# incidental conditions are gone, each example in the other's half dtype.
BRIDGING = frozenset({"case", "property", "site", "conditions", "dtype"})


def _independent(a: Bug, b: Bug) -> bool:
    """Whether two bugs are reached through free choices apart (each needs an optional feature
    or half dtype, and they share none): two independent bugs look so, fp16 inputs for one and
    bf16 for the other, a causal mask for one and a window for the other."""
    mine, theirs = _free(a.triggers), _free(b.triggers)
    return bool(mine and theirs and not mine & theirs)


def _written_alike(a: Bug, b: Bug) -> bool:
    """Whether two bugs are input writes of the same kinds of value, exceptions raised at one
    line of the kernel's code, or outputs left unwritten alike (their sites, both
    :func:`fuzz.signatures.write_site`'s, :func:`~fuzz.signatures.raise_site`'s or
    :func:`~fuzz.signatures.unwritten_site`'s)."""
    return bool(a.site and a.site.startswith(NOT_TRACED) and a.site == b.site)


def _half_of(triggers: Collection[str]) -> str | None:
    """The one half-precision dtype condition among ``triggers`` (None: none, or several)."""
    halves = [t for t in triggers if t in ("dtype float16", "dtype bfloat16")]
    return halves[0] if len(halves) == 1 else None


def _param_of(example: Any, key: str) -> Any:
    """The parameter ``example`` drew for the property of bug ``key`` (None: none)."""
    prop = key.split("|")[1] if key.count("|") >= 1 else ""
    params = getattr(example, "params", None) or {}
    return params.get(prop) if prop else None


def _poison_of(example: Any, key: str) -> str | None:
    """The poison of an example of a ``masked-poison`` bug (``key``: its bug key), as its check
    drew it (``masked-poison``'s parameter), or None."""
    if key.split("|")[1:2] != ["masked-poison"]:
        return None
    kind = (getattr(example, "params", None) or {}).get("masked-poison")
    if kind is None and getattr(example, "finding", None) is not None:
        kind = example.finding.details.get("poison")
    return None if kind is None else str(kind)


def _free(triggers: Any) -> frozenset[str]:
    """The free choices among ``triggers``: the optional features and half dtypes (two
    independent bugs differ so), not the hazards of a shape or of values."""
    return frozenset(t for t in triggers if t.startswith(("feature ", "dtype ")))
