"""The bug ledger: which failing examples of one (target, backend) pair are one bug.

A pair's search meets the same bug many times: a slice's first sight of it and then its minimal
example, another slice's example of it, an example under more conditions, a death on it. The
ledger keeps one record per distinct bug (a finding record, as a campaign's report holds it:
``signature``, ``class``, ``bug_key``, ``triggers``, ``shrunk``, ``case_digest``, ``details``,
``reproducer``...) and counts the rest as *hits* of it. It decides with
``fuzz.signatures.same_bug`` (one key, nesting triggers, or a NaN born at one site) and one
kernel call failing two properties (their minimal examples' ``case_digest``), and keeps the
record that needs the fewest conditions.

It logs nothing and removes no file: each operation returns what happened (:class:`Recorded`):
whether the record is a new bug, the records a bug first seen as new was merged into, the
reproducers no record names any more, and whether the stream a record came from (its
*sighting*: one slice's first sight and minimal example of one bug) turned out to be a bug found
before. The campaign's scheduler turns that into gains and console lines; the engine uses the
same rule (:func:`placement`) when it settles a hunt's bugs.

Four operations:

* :meth:`BugLedger.record` -- a finding record: a new bug, a smaller example of a bug (it takes
  the bug's place: *supersede*), or an example of a known bug (a *hit*);
* :meth:`BugLedger.hit` -- examples counted as hits of known bugs (a slice's summary);
* :meth:`BugLedger.withdraw` -- a bug a slice streamed as new that its duplicate check found to
  be a known one after all (``fuzz.engine``'s duplicate check);
* :meth:`BugLedger.current` -- the record that stands for a bug now (a record replaced by a
  smaller one, or merged into another, forwards to it).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fuzz import failures as F
from fuzz.signatures import Bug, Resume, finding_site, same_bug, site

NEW = "new"
RESUMES = 3  # the slices that may take one bug left unshrunk to shrink it (BugLedger.requeue)
RECHECKS = 2  # the checks again of one row against the bugs found since (queue_rechecks)
COVERED = "covered"  # a known bug with no more triggers covers it: a hit of that bug
REPLACES = "replaces"  # it is a known bug with fewer triggers: it takes the known one's place


# How a record was told to be a bug seen another way (``fuzz.duplicates``).
SEEN_HOW = {
    "case": "minimal example, the bug's own kernel call",
    "property": "minimal example failing the bug's way too",
    "site": "NaN/Inf born, or a load or store past a buffer, at the bug's kernel line",
    "influence": "wrong elements reading (or ignoring) the inputs the bug's do, unlike the oracle",
    "shared": "a way of the bug seen by each of the two rows (one key, one set of conditions)",
    "replay": "example, replayed, failing as the bug (its first failure did not come again)",
    "runs": "flaky example, its runs failing as the bug does",
    "backend": "the kernel's bug on another backend (one key, conditions that nest)",
    "conditions": "minimal example failing alike with its incidental conditions taken away",
    "dtype": "minimal examples each failing the other's way in the other's half-precision dtype",
    "same": "minimal example of the bug's key, under fewer conditions than that way",
    "explained": "minimal examples both matching the oracle under one mix-up (fuzz.explain)",
    "bridge": "a third minimal example that is each of the two rows' bug by its evidence",
}


def placement(bug: Bug, known: Iterable[tuple[str, Bug]]) -> tuple[str, str | None]:
    """Where ``bug`` goes among ``known`` bugs (label, bug): :data:`NEW`; :data:`COVERED` by the
    first known bug that is the same bug (``fuzz.signatures.same_bug``) with no more triggers;
    or :data:`REPLACES` the first one that is the same bug with more triggers (the example that
    needs the fewest conditions stands for the bug). Returns (kind, the known bug's label)."""
    for label, other in known:
        if same_bug(bug, other):
            if len(bug.triggers) < len(other.triggers):
                return REPLACES, label
            return COVERED, label
    return NEW, None


def bug_of_record(rec: Mapping[str, Any], triggers: Any = None) -> Bug:
    """The bug a finding record is (reached through ``triggers``: its own by default)."""
    return Bug(
        rec.get("bug_key") or rec["class"],
        frozenset(rec.get("triggers", ()) if triggers is None else triggers),
        rec["signature"],
        finding_site(rec.get("details")),
        example=rec.get("reproducer") if rec.get("shrunk") else None,
    )


def same_site(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two finding records of two keys are one bug by where it happens in the kernel
    (``fuzz.origin``): a NaN or Inf born at one expression, a store or a load past a buffer at
    one line (a planted varlen kernel's one wild load gave GPU rows of four classes)."""
    if a.get("bug_key") == b.get("bug_key"):
        return False  # (one key: ``fuzz.signatures.same_bug`` compares their sites)
    here = site((a.get("details") or {}).get("origin"))
    return here is not None and here == site((b.get("details") or {}).get("origin"))


def same_call(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two finding records of one class are one kernel call (their minimal examples'
    ``case_digest``), failing two properties."""
    return (
        a.get("class") == b.get("class")
        and bool(a.get("shrunk"))
        and bool(b.get("shrunk"))
        and a.get("case_digest") is not None
        and a.get("case_digest") == b.get("case_digest")
    )


def keys_of(rec: Mapping[str, Any]) -> list[str | None]:
    """A record's failure key, then the keys of the ways its bug was seen: those its minimal
    example also failed with (:func:`also_keys`) and its ``also_seen`` records' (None where a
    record has none)."""
    seen = [s.get("bug_key") for s in rec.get("also_seen") or []]
    return [rec.get("bug_key"), *also_keys(rec), *seen]


def also_keys(rec: Mapping[str, Any]) -> list[str]:
    """The failure keys a record's minimal example also failed with: its key with each class of
    its output's other elements in its own's place (``details["also_fails"]``), and each class
    of the other outputs the same call failed (``details["also_outputs"]``; ``fuzz.properties``)."""
    key = rec.get("bug_key")
    details = rec.get("details") or {}
    also = details.get("also_fails") or {}
    outputs = details.get("also_outputs") or {}
    if not key or not rec.get("shrunk") or not isinstance(also, Mapping):
        return []
    _cls, rest = str(key).split("|", 1) if "|" in str(key) else (key, "")
    keys = [f"{c}|{rest}" for c in sorted(also)]
    prop, _out, last = [*rest.split("|", 2), "", ""][:3] if rest else ("", "", "")
    if isinstance(outputs, Mapping) and prop:
        # Other outputs of the same call (``fuzz.properties``' oracle check): each class there.
        keys += [f"{c}|{prop}|{o}|{last or '-'}" for o in sorted(outputs) for c in outputs[o]]
    return keys


def linked(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two records of two keys are one bug by their minimal examples: one of them also
    failed the other's way (another class on other elements of the same output, or another
    output of the same call: ``also_keys``) under triggers that nest, or each failed the other's
    way. (A masking row of a planted jagged kernel, its fixed element wrong,
    and an accuracy row, the same bug where no element is fixed, were two rows: the masking
    row's example was wrong on its other elements too.)"""
    ab, ba = b.get("bug_key") in also_keys(a), a.get("bug_key") in also_keys(b)
    if ab and ba:
        # Each minimal example failed the other's way: one bug, whatever triggers each shrink
        # kept (a planted varlen bug's ``o`` row held a causal fp32 case, its ``lse`` row an
        # fp16 one, and each failed on both outputs).
        return True
    ta, tb = set(a.get("triggers") or ()), set(b.get("triggers") or ())
    if not (ta <= tb or tb <= ta):
        return False
    return ab or ba


# What a record of a bug seen another way keeps of itself beside the bug's record.
SEEN_FIELDS = (
    "signature",
    "class",
    "bug_key",
    "property",
    "output",
    "triggers",
    "case_size",
    "shrunk",
    "reproducer",
    "message",
    "also_triggers",
    "params",
)


def seen_as(keep: dict[str, Any], rec: Mapping[str, Any], how: str) -> list[str]:
    """Notes on record ``keep`` that its bug was also seen as ``rec`` (another key: another
    class, property or output of the same root cause, told by ``how``), with ``rec``'s
    reproducer, and what ``rec`` was seen as before; the smallest first. Returns the
    reproducers of those already noted (superseded)."""
    seen = list(keep.get("also_seen", []))
    mine = {s["signature"]: s for s in seen}
    dropped = []
    for s in [{**{k: rec.get(k) for k in SEEN_FIELDS}, "how": how}, *rec.get("also_seen", [])]:
        if s.get("signature") == keep.get("signature"):
            continue
        if s.get("signature") in mine:
            if s.get("reproducer") and s["reproducer"] != mine[s["signature"]].get("reproducer"):
                dropped.append(str(s["reproducer"]))
            continue
        seen.append(s)
        mine[s["signature"]] = s
    keep["also_seen"] = sorted(seen, key=lambda s: (s.get("case_size") or 0, s["signature"]))
    return dropped


def also(keep: dict[str, Any], triggers: Any) -> None:
    """Notes on record ``keep`` that its bug is also reached through ``triggers`` (the conditions
    of another minimal example of it, with its NaN born at the same site), where examples with
    them would not already be hits of it."""
    t = sorted(triggers or ())
    if set(keep.get("triggers", ())) <= set(t) or t in keep.get("also_triggers", []):
        return
    keep["also_triggers"] = [*keep.get("also_triggers", []), t]


@dataclass
class Recorded:
    """What one ledger operation did.

    Attributes:
        new: the record is a bug not known before.
        signature: the record that stands for the bug now (None: nothing was recorded).
        unnew: the sighting the record came from was streamed as a new bug and is a known bug
            after all (no gain of its slice).
        merged: (signature first seen as new, signature of the known bug it is, how, its class)
            for each record taken back into a known bug: ``"same"`` (an example of it),
            ``"shrank"`` (the engine's duplicate check), ``"also"`` (the bug seen another way,
            kept beside it), ``"stands"`` (the same, with a smaller minimal example: it stands
            for the bug, the bug's record kept beside it).
        superseded: reproducers of records no longer standing for a bug (removed once a report
            not naming them is written).
        maybe_of: for a new record not shrunk, a known bug with its failure key (shrinking
            tells whether it is another).
        settled: the record is a bug's minimal example taking the place of the first sight its
            sighting streamed (the bug, as it will be reported).
    """

    new: bool = False
    signature: str | None = None
    unnew: bool = False
    merged: list[tuple[str, str, str, str]] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    maybe_of: str | None = None
    settled: bool = False


@dataclass
class BugLedger:
    """The distinct bugs of one pair, their hits, and which record stands for which sighting.

    Attributes:
        found: signature -> the finding record standing for a distinct bug.
        sightings: "slice:round:key" (:func:`sighting`) -> the signature its records went to.
        replaced: signature -> the record that took its place (a smaller example, a merge).
        known_hits: signature -> examples counted as hits of that bug.
        resume: the bugs left unshrunk that the pair's next fuzzing slices shrink first.
        resumed: sighting -> how many slices took it to shrink (:meth:`requeue`).
    """

    found: dict[str, dict[str, Any]] = field(default_factory=dict)
    sightings: dict[str, str] = field(default_factory=dict)
    replaced: dict[str, str] = field(default_factory=dict)
    known_hits: Counter[str] = field(default_factory=Counter)
    resume: list[Resume] = field(default_factory=list)
    resumed: Counter[str] = field(default_factory=Counter)
    # signature -> the signatures (rows and the ways they were seen) a check of the row was
    # queued against (``queue_rechecks``).
    checked: dict[str, frozenset[str]] = field(default_factory=dict)

    def record(self, rec: dict[str, Any], *, sighting: str | None = None) -> Recorded:
        """Keeps finding ``rec``: a new bug, a later (smaller) example of the bug its
        ``sighting`` streamed first, or an example of a bug found before (the one with fewer
        triggers is kept and the other counted as a hit of it)."""
        prev = None if sighting is None else self.sightings.get(sighting)
        if (
            prev is not None
            and prev != rec["signature"]
            and (self._stands_elsewhere(prev, rec) or self._another_bug(prev, rec))
        ):
            # The sighting's record is a minimal example already, and this one is a bug with a
            # row of its own (a resumed shrink that walked into it), or another bug than the
            # sighting's: a hit of that row, or a bug of its own, and the sighting's row stays.
            # Taken as the first one's smaller example, a GPU campaign's two-bug softmax lost
            # one of its two rows.
            sighting = None
        out = self._record(rec, sighting)
        self._join_shared(out)
        self._join_ways(out)
        self._join_flaky(out)
        return out

    def _join_shared(self, out: Recorded) -> None:
        """Joins rows that hold one signature, each as its own or a way it was also seen (one
        key and one set of triggers: one bug, ``fuzz.signatures.same_bug``): each was taken
        into a row by its own evidence (one kernel call, a site), and a planted varlen kernel's
        bug kept two rows on an H200, each also seen as one accuracy signature. The row of the
        smaller minimal example stands, the other kept beside it."""
        while True:
            owner: dict[str, str] = {}
            pair = None
            for sig, rec in self.found.items():
                for way in [sig, *(w.get("signature") for w in rec.get("also_seen", []))]:
                    if way in owner and owner[way] != sig:
                        pair = (owner[way], sig)
                        break
                    if way:
                        owner.setdefault(way, sig)
                if pair:
                    break
            if pair is None:
                return
            a, b = pair
            keep, other = (b, a) if smaller(self.found[b], self.found[a]) else (a, b)
            self._fold(out, other, keep, "shared")

    def _join_ways(self, out: Recorded) -> None:
        """Joins each shrunk row that is a way another row was seen (its key, triggers that nest:
        ``same_bug``), as a record met after that way is (:meth:`_way_of`), whichever came first:
        a planted varlen kernel's ``accuracy`` row of ``o`` stayed a row of its own on the CPU
        when the ``inf`` row of ``lse`` was later seen as that way, under one condition more.
        The row of the smaller minimal example stands, the other kept beside it."""
        while True:
            pair = next(
                (
                    (sig, other)
                    for sig, rec in self.found.items()
                    if rec.get("shrunk") and rec.get("bug_key")
                    for other, row in self.found.items()
                    if other != sig
                    and {_alone(rec), _alone(row)} != {True, False}
                    and any(
                        w.get("bug_key")
                        and same_bug(
                            bug_of_record(rec),
                            Bug(w["bug_key"], frozenset(w.get("triggers") or ()), other),
                        )
                        for w in row.get("also_seen", [])
                    )
                ),
                None,
            )
            if pair is None:
                return
            a, b = pair
            keep, other = (a, b) if smaller(self.found[a], self.found[b]) else (b, a)
            self._fold(out, other, keep, "same")

    def _join_flaky(self, out: Recorded) -> None:
        """Joins each flaky row (an example whose runs differ: ``details["run_keys"]``, how its
        runs failed) into a row, not flaky, of one of those keys, its own or a way it was also
        seen: that bug is what makes the example flaky (a planted jagged kernel's race on an
        H200 gave a flaky row, its runs failing as the race's masking and nondeterminism ways,
        beside its out-of-bounds row)."""
        for sig, rec in list(self.found.items()):
            keys = set((rec.get("details") or {}).get("run_keys") or ())
            if not keys or sig not in self.found:
                continue
            for other_sig, other in self.found.items():
                ways = {
                    other.get("bug_key"),
                    *(w.get("bug_key") for w in other.get("also_seen", [])),
                }
                if other_sig != sig and not (other.get("details") or {}).get("run_keys"):
                    if keys & ways:
                        self._fold(out, sig, other_sig, "runs")
                        out.new = out.new and out.signature != other_sig
                        break

    def _fold(self, out: Recorded, other: str, keep: str, how: str) -> None:
        """Takes row ``other`` into row ``keep`` as a way it was also seen (told by ``how``)."""
        rec = self.found.pop(other)
        out.superseded += seen_as(self.found[keep], rec, how)
        self.replaced[other] = keep
        self.known_hits[keep] += self.known_hits.pop(other, 0)
        self.sightings = {k: keep if v == other else v for k, v in self.sightings.items()}
        out.merged.append((other, keep, "also", str(rec.get("class"))))
        if out.signature == other:
            out.signature = keep

    def _record(self, rec: dict[str, Any], sighting: str | None) -> Recorded:
        out = Recorded()
        sig = rec["signature"]
        seen = False  # an earlier record of the same bug was kept or replaced
        matched = False  # a bug's record was the same bug (kept, or replaced by this one)
        prev = None
        if sighting is not None:
            prev = self.sightings.get(sighting)
            self.sightings[sighting] = sig
            old = self.found.pop(prev, None) if prev is not None and prev != sig else None
            seen = prev is not None
            if old is not None:
                self.replaced[str(prev)] = sig
                out.settled = True
                _supersede(out, old, rec)
                _carry_seen(rec, old)
                rec["first_example"] = old.get("first_example", rec.get("first_example"))
                rec["first_seconds"] = old.get("first_seconds", rec.get("first_seconds"))
                rec["first_triggers"] = old.get("first_triggers", old.get("triggers", []))
        standing = self.current(sig)
        if prev is None and sig not in self.found and standing in self.found:
            # A first sight of a signature taken into a bug before (its minimal example, a bug
            # seen another way): that bug again, not a new row (a GPU campaign reported a
            # nondeterminism merged at 79 s as a new bug when another slice met it at 381 s).
            self._hit_by(out, rec, standing, streamed=False, sighting=sighting)
            return out
        bug = bug_of_record(rec)
        for other_sig, other in list(self.found.items()):
            if other_sig != sig and (
                same_call(rec, other) or linked(rec, other) or same_site(rec, other)
            ):
                # Its minimal example is a bug's found before, failing another way: one kernel
                # call, one bug (the engine's ``same_call``, across slices), seen another way;
                # or one of the two minimal examples failed the other's way too (``linked``).
                self._hit_by(
                    out, rec, other_sig, streamed=prev == sig, sighting=sighting, seen=True
                )
                return out
            if other_sig == sig or not same_bug(bug, bug_of_record(other)):
                continue
            if {_alone(rec), _alone(other)} == {True, False}:
                # One crashed replayed alone in a fresh process, the other passed: no example of
                # each other (the smaller took the place of the one that crashed alone, its
                # reproducer removed, on an H200), but maybe its crash (``maybe_known``).
                continue
            seen = matched = True
            if len(bug.triggers) >= len(other.get("triggers", ())) or smaller(other, rec):
                # An example of a bug found before; one of fewer conditions but larger leaves
                # the smaller reproducer standing, its conditions another way to the bug (a GPU
                # row of a planted GLA kernel grew from 16 elements to 256 so).
                also(other, rec.get("triggers"))
                self._hit_by(out, rec, other_sig, streamed=prev == sig, sighting=sighting)
                return out
            self.found.pop(other_sig)  # this example of it needs fewer conditions: keep it
            self.replaced[other_sig] = sig
            out.unnew = sighting is not None  # (a bug found before, all the same)
            _supersede(out, other, rec)
            rec = {**rec, "also_triggers": list(other.get("also_triggers", []))}
            also(rec, other.get("triggers"))
            _carry_seen(rec, other)
            self.known_hits[sig] += 1 + self.known_hits.pop(other_sig, 0)
        if not matched and sig not in self.found and rec.get("shrunk"):
            # (an unshrunk record of a known key stays a bug of its own for now: ``maybe_of``)
            way = self._way_of(bug)
            if way is not None:
                self._seen_way(out, rec, way, prev)
                return out
        old = self.found.get(sig)
        if old is not None and prev is None:  # the same bug from another slice or death: a hit
            self.known_hits[sig] += 1
            _supersede(out, rec, old)
            out.signature = sig
            return out
        if old is not None:
            _supersede(out, old, rec)
            # The minimal example of the first sight its sighting streamed, of one signature
            # (a bug without triggers: a flaky kernel's): the bug is settled as well.
            out.settled = out.settled or (
                prev == sig and bool(rec.get("shrunk")) and not old.get("shrunk")
            )
            if prev is not None and prev != sig:  # its minimal example is a bug found before
                out.unnew = out.unnew or sighting is not None
        out.new = old is None and not seen
        if out.new and not rec.get("shrunk") and rec.get("bug_key"):
            out.maybe_of = next(
                (
                    s
                    for s, f in self.found.items()
                    if s != sig and f.get("bug_key") == rec["bug_key"]
                ),
                None,
            )
        self.found[sig] = rec
        out.signature = sig
        return out

    def _way_of(self, bug: Bug) -> tuple[str, dict[str, Any]] | None:
        """The bug (its record's signature) one of whose ways it was also seen (another key) is
        ``bug`` (``same_bug``: that key, nesting triggers), and that way's entry; or None. Later
        slices know those ways as the bug's (:meth:`bugs`), and so does a shrunk record of one: a
        planted GLA kernel's ``state-continuation`` row, also seen as the oracle with an initial
        state, got a second row when a later slice's oracle example needed a condition fewer."""
        for other_sig, other in self.found.items():
            for s in other.get("also_seen", []):
                if s.get("bug_key") and same_bug(
                    bug, Bug(s["bug_key"], frozenset(s.get("triggers") or ()), other_sig)
                ):
                    return other_sig, s
        return None

    def _seen_way(
        self, out: Recorded, rec: dict[str, Any], way: tuple[str, dict[str, Any]], prev: Any
    ) -> None:
        """``rec`` is the bug of record ``way[0]``, met the way it was also seen (``way[1]``):
        kept beside it where it needs fewer conditions than that way (in that way's place where
        it is that way's record: its minimal example), else an example of it; a first sight of its
        sighting kept beside it before (``prev``) goes. Its sighting keeps its own signature:
        the record standing for the bug is not a first sight its minimal example replaces."""
        other_sig, entry = way
        sig = rec["signature"]
        keep = self.found[other_sig]
        # (no hit counted here: a slice counts its examples of a known bug as hits of it, and
        # its duplicate check, where it tells the two apart, would count this one again)
        self.replaced[sig] = other_sig
        out.unnew = prev is not None
        out.settled = False  # (the bug's record is not this one: nothing to say FOUND of)
        if prev is not None and prev != sig:  # its first sight, kept beside the bug before
            for s in keep.get("also_seen", []):
                if s.get("signature") == prev:
                    _supersede(out, s, rec)
            keep["also_seen"] = [s for s in keep.get("also_seen", []) if s.get("signature") != prev]
        if entry.get("signature") == sig:  # that way's own record again (its minimal example)
            _supersede(out, entry, rec)
            entry.update({k: rec.get(k) for k in SEEN_FIELDS})
        elif len(rec.get("triggers") or ()) < len(entry.get("triggers") or ()):
            out.superseded += seen_as(keep, rec, "same")
        else:
            _supersede(out, rec, keep)
        _carry_seen(keep, rec)  # (the ways a first sight it replaced was seen)
        out.merged.append((sig, other_sig, "also", str(rec.get("class"))))
        out.signature = other_sig

    def _hit_by(
        self,
        out: Recorded,
        rec: dict[str, Any],
        other_sig: str,
        *,
        streamed: bool,
        sighting: str | None,
        seen: bool = False,
    ) -> None:
        """Counts ``rec`` as a hit of the bug recorded as ``other_sig``. ``streamed``: its
        sighting streamed its first sight as new, whose record (and hits) go to that bug.
        ``seen``: ``rec`` is that bug seen another way (another key): it is kept beside the
        bug's record, with its reproducer (:func:`seen_as`)."""
        sig, other = rec["signature"], self.found[other_sig]
        self.known_hits[other_sig] += 1
        out.unnew = sighting is not None
        if streamed and sig in self.found:
            first = self.found.pop(sig)
            _supersede(out, first, rec if seen else other)  # (seen: its minimal example stays)
            self.replaced[sig] = other_sig
            self.known_hits[other_sig] += self.known_hits.pop(sig, 0)
            out.merged.append((sig, other_sig, "also" if seen else "same", str(rec.get("class"))))
        if seen:
            out.superseded += seen_as(other, rec, "case")
        else:
            _supersede(out, rec, other)
        if sighting is not None:
            self.sightings[sighting] = other_sig
        out.signature = other_sig

    def withdraw(self, sighting: str, dup: Mapping[str, Any]) -> Recorded:
        """A bug ``sighting`` streamed as new turned out to be known bug ``dup["twin"]`` (the
        engine's duplicate check: shrunk once more, it became the twin's example, or its NaN is
        born at the twin's site): its record goes, its example counts as a hit of the twin (in
        the slice's hits), and a twin by site notes its conditions as another way to it."""
        out = self._withdraw(sighting, dup)
        self._bridge(out, dup)
        self._join_shared(out)
        self._join_ways(out)
        self._join_flaky(out)
        return out

    def _bridge(self, out: Recorded, dup: Mapping[str, Any]) -> None:
        """Joins the rows a withdrawn record is as well as its twin (``dup["also"]``: the
        engine's duplicate check found its minimal example to be each of them, by evidence
        that bridges): one example is one bug, so they are one. The row of the smallest minimal
        example stands, the others kept beside it."""
        rows = [self.current(str(s)) for s in [dup["twin"], *(dup.get("also") or ())]]
        rows = list(dict.fromkeys(r for r in rows if r in self.found))
        if len(rows) < 2:
            return
        keep = rows[0]
        for r in rows[1:]:
            if smaller(self.found[r], self.found[keep]):
                keep = r
        for r in rows:
            if r != keep:
                self._fold(out, r, keep, "bridge")

    def _withdraw(self, sighting: str, dup: Mapping[str, Any]) -> Recorded:
        out = Recorded()
        sig, twin = self.sightings.get(sighting), self.current(dup["twin"])
        if sig is None or sig == twin or sig not in self.found or twin not in self.found:
            return out
        rec = self.found.pop(sig)
        self.replaced[sig] = twin
        out.unnew = True
        keep = self.found[twin]
        self.sightings[sighting] = twin
        out.signature = twin
        if rec.get("bug_key") != keep.get("bug_key") or dup.get("recheck"):
            # The bug seen another way, or a row that stood, checked again: kept beside the
            # bug's record (the smaller minimal example stands for it), with its reproducer.
            if smaller(rec, keep):
                self._promote(out, sig, twin, rec, str(dup.get("how")))
                out.merged.append((sig, twin, "stands", str(rec.get("class"))))
            else:
                out.superseded += seen_as(keep, rec, str(dup.get("how")))
                out.merged.append((sig, twin, "also", str(rec.get("class"))))
            return out
        _supersede(out, rec, keep)
        if dup.get("how") in ("site", "conditions", "influence", "dtype", "explained"):
            also(keep, dup.get("triggers"))
        # The conditions it was first seen with lead to the twin: later examples with all of
        # them are its hits, not shrunk again (a GPU plugin campaign shrank examples with one
        # set of conditions into one known bug in three slices, each reporting it first as new).
        also(keep, rec.get("first_triggers", rec.get("triggers")))
        out.merged.append((sig, twin, "shrank", str(rec.get("class"))))
        return out

    def _promote(self, out: Recorded, sig: str, twin: str, rec: dict[str, Any], how: str) -> None:
        """``rec``, bug ``twin`` seen another way (its key another) with a smaller minimal
        example, stands for the bug from now on (the smallest reproducer first): the bug's
        record so far is kept beside it, as a way it was also seen, with the ways it was seen
        before. The bug was first seen when its first record was."""
        keep = self.found.pop(twin)
        new = {**rec, "also_seen": list(rec.get("also_seen", []))}
        for k in ("first_example", "first_seconds"):
            if k in keep:
                new[k] = keep[k]
        out.superseded += seen_as(new, keep, how)
        self.found[sig] = new
        self.replaced.pop(sig, None)
        self.replaced[twin] = sig
        self.known_hits[sig] += self.known_hits.pop(twin, 0)
        self.sightings = {k: sig if v == twin else v for k, v in self.sightings.items()}
        out.signature = sig

    def hit(self, hits: Mapping[str, int]) -> None:
        """Counts examples as hits of known bugs (signature -> count)."""
        self.known_hits.update(hits)

    def current(self, sig: str) -> str:
        """The signature of the record that stands for bug ``sig`` now: a record found again with
        fewer conditions, or merged into another, was replaced. On an H100 a slice's duplicate
        check named a twin whose record had been replaced meanwhile, and the duplicate stayed in
        the report."""
        seen = {sig}
        while sig not in self.found and sig in self.replaced and self.replaced[sig] not in seen:
            sig = self.replaced[sig]
            seen.add(sig)
        return sig

    def queue_resumes(self, slice_id: int, narrowing: Mapping[str, Any] | None) -> None:
        """Queues the bugs slice ``slice_id`` streamed that stand unshrunk once it ended (under
        its ``narrowing``), each for the pair's next fuzzing slice to shrink
        (``SlicePlan.resume``), once: JAX's ``mha`` on pallas-gpu kept rows of 196,608 elements
        on an H200 because the slice shrinking them was killed, and a planted kernel's rows of
        6,288 and 9,632 elements stayed so where the slices' hard limits cut their shrinking.
        Not a bug whose shrinking was resumed already (a slice's shrunk example of an earlier
        slice's bug stands under that slice's sighting), nor one a worker's death itself was
        (no choices), nor a row queued already (several slices streamed it). A bug shrunk
        through compiled variants only (``Found.ladder``) is queued for a compile worker
        (``ladder``)."""
        prefix = f"{slice_id}:"
        for seen, sig in self.sightings.items():
            rec = self.found.get(sig)
            if not (seen.startswith(prefix) and rec and rec.get("choices")):
                continue
            if any(self.sightings.get(e.sighting) == sig for e in self.resume):
                continue  # (its row is queued already, streamed by another slice too)
            ladder = bool(rec.get("ladder"))
            check = _unchecked(rec)
            if self.pending(seen, ladder=ladder, check=check):
                key, choices = str(rec.get("bug_key") or ""), str(rec["choices"])
                self.resume.append(
                    Resume(
                        key,
                        choices,
                        None if narrowing is None else dict(narrowing),
                        seen,
                        ladder=ladder,
                        notes=tuple(rec.get("shrink_notes") or ()),
                        signature=sig,
                        check=check,
                    )
                )
        self.queue_rechecks()

    def queue_rechecks(self) -> None:
        """Queues each row, shrunk and checked, whose check did not know every other row and way
        standing now, to be checked again against them (``Resume.example``: read back from its
        reproducer), :data:`RECHECKS` times at most. A slice checks its bugs against those
        known when it began: rows met in slices that ran side by side, or whose evidence (a
        way a bug was also seen) came later, were never checked against each other, and a
        planted softmax's one bug stayed three rows on an H200 although each of their minimal
        examples failed, with every poison tried, as a way the smallest was also seen."""
        ways = {  # (the rows shrunk and checked: the others are shrunk or checked first)
            sig: {sig} | {str(w.get("signature")) for w in rec.get("also_seen", [])}
            for sig, rec in self.found.items()
            if rec.get("shrunk") and not _unchecked(rec)
        }
        queued = {e.signature for e in self.resume}
        for sig, rec in self.found.items():
            if sig in queued or not _recheckable(rec):
                continue
            others = frozenset(s for o, w in ways.items() if o != sig for s in w)
            if not others or others <= self.checked.get(sig, frozenset()):
                continue
            if self.resumed[f"recheck:{sig}"] >= RECHECKS:
                continue
            seen = next((k for k, v in self.sightings.items() if v == sig), None)
            if seen is None:
                continue
            self.checked[sig] = others
            self.resumed[f"recheck:{sig}"] += 1
            self.resume.append(
                Resume(
                    str(rec["bug_key"]),
                    "",
                    None,
                    seen,
                    notes=tuple(rec.get("shrink_notes") or ()),
                    signature=sig,
                    check=True,
                    example=str(rec["reproducer"]),
                )
            )

    def take_resumes(self, most: int, *, ladder: bool = False) -> tuple[Resume, ...]:
        """The queued bugs (:meth:`queue_resumes`) a fuzzing slice shrinks first (``ladder``: a
        compile worker's slice), ``most`` at most: those whose record still stands unshrunk."""
        taken: list[Resume] = []
        kept: list[Resume] = []
        while self.resume:
            entry = self.resume.pop(0)
            if entry.ladder != ladder or len(taken) >= most:
                kept.append(entry)
            elif self._pending(entry):
                # The signature standing for its row now (a record merged or replaced since it
                # was queued): the slice leaves its own bug out of those it knows.
                now = self.sightings.get(entry.sighting, entry.signature)
                taken.append(dataclasses.replace(entry, signature=now))
                self.resumed[entry.sighting] += 1
        self.resume = kept
        return tuple(taken)

    def requeue(self, taken: Iterable[Resume]) -> None:
        """Queues again the bugs a slice took to shrink (``SlicePlan.resume``) whose rows still
        stand with shrinking left to do once it ended (its time ran out before their turn, or
        it was lost), each taken :data:`RESUMES` times at most: a planted kernel's row of 536
        elements stayed unshrunk, and without a note, after the slice that took it ended."""
        queued = {e.sighting for e in self.resume}
        for e in taken:
            if (
                e.sighting not in queued
                and not e.example  # (a check again is queued again when more is known)
                and self.resumed[e.sighting] < RESUMES
                and self._pending(e)
            ):
                rec = self._row(e.sighting) or {}
                if e.ladder and rec.get("choices"):  # (from where the last one got to)
                    e = dataclasses.replace(
                        e, choices=str(rec["choices"]), notes=tuple(rec.get("shrink_notes") or ())
                    )
                self.resume.append(e)
                queued.add(e.sighting)

    def resumable(self, *, ladder: bool = False, rechecks: bool = True) -> bool:
        """Whether a queued bug (of a compile worker's, ``ladder``) still stands unshrunk, or
        (``rechecks``) a row is queued to be checked again."""
        return any(
            e.ladder == ladder and (rechecks or not e.example) and self._pending(e)
            for e in self.resume
        )

    def _pending(self, entry: Resume) -> bool:
        """Whether queued ``entry`` still has its work to do (:meth:`pending`; a check again:
        its row still stands, under its signature)."""
        if entry.example:
            sig = self.sightings.get(entry.sighting)
            return sig == entry.signature and sig in self.found
        return self.pending(entry.sighting, ladder=entry.ladder, check=entry.check)

    def _stands_elsewhere(self, prev: str, rec: Mapping[str, Any]) -> bool:
        """Whether ``rec``, a shrunk record streamed under the sighting whose shrunk record is
        ``prev``, is a bug with a row of its own besides ``prev``'s (its signature, or the same
        bug: ``fuzz.signatures.same_bug``)."""
        old = self.found.get(prev)
        if old is None or not old.get("shrunk") or not rec.get("shrunk"):
            return False
        bug = bug_of_record(rec)
        return any(
            other_sig != prev
            and (other_sig == rec["signature"] or same_bug(bug, bug_of_record(other)))
            for other_sig, other in self.found.items()
        )

    def _another_bug(self, prev: str, rec: Mapping[str, Any]) -> bool:
        """Whether ``rec``, a shrunk record streamed under the sighting whose shrunk record is
        ``prev``, is not that bug's smaller example: no smaller (:func:`smaller`) and not the
        same bug (``fuzz.signatures.same_bug``: another key, or triggers that do not nest). On
        an H200, a slice's compile ladder shrank a sighting of JAX ``mha``'s short-sequence
        bug (its row: 16 elements, one token) into the bug of causal rows with more queries
        than keys (1,024 elements): taken as the first one's smaller example, it took that
        row's place and the short-sequence bug was gone from the report."""
        old = self.found.get(prev)
        if old is None or not old.get("shrunk") or not rec.get("shrunk") or smaller(rec, old):
            return False
        return not same_bug(bug_of_record(rec), bug_of_record(old))

    def note(self, sighting: str, note: str) -> None:
        """Notes on the row ``sighting`` stands for what a later slice that took it found
        (``fuzz.results.HuntResult.resume_notes``): the report says why it is left so."""
        rec = self._row(sighting)
        if rec is not None and note and note not in (rec.get("shrink_notes") or []):
            rec["shrink_notes"] = [*(rec.get("shrink_notes") or []), note]

    def _row(self, sighting: str) -> dict[str, Any] | None:
        """The record standing for the bug ``sighting`` streamed (None: none stands for it)."""
        sig = self.sightings.get(sighting)
        return None if sig is None else self.found.get(sig)

    def unshrunk(self, sighting: str) -> bool:
        """Whether the record streamed as ``sighting`` stands as its bug's row, unshrunk (no
        smaller example of it since, nor merged into another)."""
        rec = self._row(sighting)
        return rec is not None and not rec.get("shrunk")

    def pending(self, sighting: str, *, ladder: bool = False, check: bool = False) -> bool:
        """Whether the record streamed as ``sighting`` stands as its bug's row with shrinking
        left to do: unshrunk (:meth:`unshrunk`), or (``ladder``) shrunk through compiled
        variants only (``Found.ladder``), its shrinking through new ones a compile worker's;
        or (``check``) shrunk with its check against the known bugs still to do."""
        if check:
            rec = self._row(sighting)
            return rec is not None and _unchecked(rec)
        if not ladder:
            return self.unshrunk(sighting)
        rec = self._row(sighting)
        return rec is not None and bool(rec.get("ladder"))

    def bugs(self) -> list[Bug]:
        """The distinct bugs, once per way to each: its triggers and its ``also_triggers``, and
        each way it was also seen (another key: its examples are hits of the bug too), and each
        key its minimal example also failed with (``also_keys``)."""
        out = [
            bug_of_record(rec, t)
            for rec in self.found.values()
            for t in [rec.get("triggers", ()), *rec.get("also_triggers", [])]
        ]
        for rec in self.found.values():
            # The ways its minimal example also failed (another class on other elements).
            out += [
                Bug(k, frozenset(rec.get("triggers", ())), rec["signature"]) for k in also_keys(rec)
            ]
            for s in rec.get("also_seen", []):
                if s.get("bug_key"):
                    example = s.get("reproducer") if s.get("shrunk") else None
                    out += [
                        Bug(s["bug_key"], frozenset(t or ()), rec["signature"], example=example)
                        for t in [s.get("triggers"), *(s.get("also_triggers") or [])]
                    ]
        return out

    def hits(self) -> Counter[str]:
        """Examples that hit a bug found before, by the record that stands for the bug now
        (hits counted under a record since replaced go to the one in its place)."""
        out: Counter[str] = Counter()
        for sig, n in self.known_hits.items():
            out[self.current(sig)] += n
        return out

    def maybe_known(self) -> dict[str, str]:
        """Records not shrunk (their slice ended first: a campaign's budget, a killed worker)
        whose failure key is a shrunk bug's, its own or one of the ways it was seen too (its
        ``also_seen`` records, the keys its minimal example also failed with): signature ->
        that bug's. Their conditions were not taken down to what the bug needs, so they may be
        that bug (a GPU campaign's last slice streamed a 6,789-element NaN example and was
        killed shrinking it: its shrunk twin had 1 element; on an H200 a planted jagged
        kernel's Inf row of 60 elements, unshrunk, had the key its shrunk accuracy row had
        also been seen as). And crashes whose example passed replayed alone in a fresh process,
        where one of the pair crashed alone: that crash's (``mark_maybe_of``); and crashes whose
        example fails on the kernel's interpreter as a bug does (:func:`_fails_on_twin_as`); and
        records whose example holds every condition of a shrunk bug's way of its class and
        output (:func:`_holds_conditions_of`). Kept, with their reproducers, and not counted as
        distinct bugs."""
        shrunk: dict[str, str] = {}
        records = [(sig, f) for sig, f in self.found.items() if f.get("shrunk")]
        for first in (True, False):  # (a bug's own key first, then the ways it was seen)
            for sig, f in records:
                own, *ways = keys_of(f)
                for key in [own] if first else ways:
                    if key:
                        shrunk.setdefault(key, sig)
        maybe = {
            sig: shrunk[f["bug_key"]]
            for sig, f in self.found.items()
            if not f.get("shrunk")
            and f.get("class") not in (F.CRASH, F.HANG)
            and f.get("bug_key") in shrunk
        }
        crashes = _crashed_elsewhere(self.found.items()) | _fails_on_twin_as(self.found)
        return maybe | _holds_conditions_of(self.found, maybe) | crashes

    @property
    def classes(self) -> set[str]:
        """The failure classes its bugs were found with, each way they were seen."""
        return {rec["class"] for rec in self.found.values()} | {
            s["class"] for rec in self.found.values() for s in rec.get("also_seen", [])
        }

    def absorbed(self, sig: str) -> list[str]:
        """The signatures of the records row ``sig`` took in (replaced by a smaller example of
        its bug, folded into it, or judged its bug seen another way): each is this row's bug by
        the evidence the pair had. The report reads them across backends
        (:func:`backend_twins`)."""
        return sorted(s for s in self.replaced if s != sig and self.current(s) == sig)

    def records(self) -> list[Mapping[str, Any]]:
        """Every record kept: each bug's, and each way it was also seen."""
        return [r for rec in self.found.values() for r in [rec, *rec.get("also_seen", [])]]


def _recheckable(rec: Mapping[str, Any]) -> bool:
    """Whether a row can be checked again from its reproducer: shrunk, of a key, neither a
    crash nor a hang (a launch that may lose the process's context or hang) nor flaky, nor
    with shrinking or a check left to do."""
    details = rec.get("details") or {}
    return bool(
        rec.get("shrunk")
        and rec.get("reproducer")
        and rec.get("bug_key")
        and rec.get("class") not in (F.CRASH, F.HANG)
        and not details.get("run_keys")
        and not rec.get("ladder")
        and not _unchecked(rec)
    )


def _unchecked(rec: Mapping[str, Any]) -> bool:
    """Whether ``rec`` is a minimal example whose check against the bugs found before was cut
    (its slice's hard limit), with the choices a later slice replays it from."""
    details = rec.get("details") or {}
    return bool(rec.get("shrunk") and details.get("unchecked") and rec.get("choices"))


def bugs_of_record(rec: Mapping[str, Any]) -> list[Bug]:
    """The bug a finding record is, once per set of conditions it is reached through (its
    ``triggers`` and ``also_triggers``); none for a record without a bug key (an old report's)."""
    if not isinstance(rec.get("bug_key"), str) or not rec["bug_key"] or not rec.get("signature"):
        return []
    sets = [rec.get("triggers") or [], *(rec.get("also_triggers") or [])]
    return [
        bug_of_record(rec, t)
        for t in sets
        if isinstance(t, list) and all(isinstance(x, str) for x in t)
    ]


def ways_of(rec: Mapping[str, Any]) -> list[Bug]:
    """A report's finding record's bug through each way it was seen: its own record and its
    also-seen ones (:func:`bugs_of_record` of each)."""
    return [b for r in [rec, *(rec.get("also_seen") or [])] for b in bugs_of_record(r)]


def mark_maybe_of(findings: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``findings`` (a report's, by signature), each not shrunk marked as maybe a bug of its
    target shrunk on another backend (``maybe_of``), where that bug has its failure key, its own or a way it was seen: what each
    pair's ledger says of its own records (``BugLedger.maybe_known``), across the backends
    whose findings the report joined. On an H200 a planted Pallas kernel's shrunk row (GPU) had
    been seen as ``accuracy`` of ``lse``, and the interpreter's own unshrunk ``accuracy`` of
    ``lse`` (4,018 elements) came as a row of its own. A crash whose example passed replayed
    alone in a fresh process, where a crash of its target crashed alone, is maybe that one
    (``maybe_why``: CUDA reports an illegal access at a later call than the launch that made
    it): a planted Pallas kernel's out-of-bounds reads on an H200 came as a 2-element crash row
    that passed alone beside a 66,600-element one that crashed alone."""
    for target in {f.get("target") for f in findings.values()}:
        mine = [(sig, f) for sig, f in findings.items() if f.get("target") == target]
        for sig, twin in _crashed_elsewhere(mine).items():
            findings[sig]["maybe_of"] = findings[twin].get("signature")
            findings[sig]["maybe_why"] = NOT_ALONE
    for sig, twin in _crashed_before(findings).items():
        findings[sig]["maybe_of"] = findings[twin].get("signature")
        findings[sig]["maybe_why"] = AFTER_ANOTHER
    for sig, twin in _fails_on_twin_as(findings).items():
        findings[sig]["maybe_of"] = findings[twin].get("signature")
        findings[sig]["maybe_why"] = ON_TWIN
    shrunk = [(f, set(keys_of(f))) for f in findings.values() if f.get("shrunk")]
    told = {sig for sig, f in findings.items() if f.get("maybe_why")}
    for sig, f in findings.items():
        if f.get("shrunk") is not False or sig in told or f.get("class") in (F.CRASH, F.HANG):
            continue
        for g, keys in shrunk:
            if g.get("target") == f.get("target") and f.get("bug_key") in keys - {None}:
                f["maybe_of"] = f.get("maybe_of") or g.get("signature")
                told.add(sig)  # (its key: a pair's ledger may have marked it already)
                break
    for sig, twin in _holds_conditions_of(findings, told).items():
        findings[sig]["maybe_of"] = findings[twin].get("signature")
        findings[sig]["maybe_why"] = HOLDS
    return findings


# ``maybe_why`` of a record not shrunk whose example holds every condition of a shrunk bug's
# way of its class and output (:func:`_holds_conditions_of`).
HOLDS = "holds that bug's conditions"


def _holds_conditions_of(
    findings: Mapping[str, Mapping[str, Any]], marked: Collection[str]
) -> dict[str, str]:
    """Records not shrunk, no crash nor hang, not ``marked`` (by another rule), whose example
    holds every condition of a way a shrunk record of its target was seen (or its own) that
    fails the same output as the same class, through another property -> that record's
    signature. A property checked on a large example fails where the bug it holds is
    (a planted GLA kernel's clamped decay, shrunk to an ``ht`` row also seen as ``accuracy`` of
    ``o``, came on an H200 as an unshrunk ``chunk-independence`` row of ``o`` found 58 s before
    the budget's end, all of that way's conditions among its ten)."""
    out: dict[str, str] = {}
    for sig, f in findings.items():
        if f.get("shrunk") is not False or f.get("class") in (F.CRASH, F.HANG):
            continue
        if sig in marked or not f.get("bug_key"):
            continue
        cls, _prop, output, *_ = [*str(f["bug_key"]).split("|"), "", "", ""]
        holds = set(f.get("triggers") or ())
        for other, g in findings.items():
            if other == sig or not g.get("shrunk") or g.get("target") != f.get("target"):
                continue
            for key, triggers in _ways(g):
                parts = str(key or "").split("|")
                if len(parts) >= 3 and (parts[0], parts[2]) == (cls, output) and triggers <= holds:
                    out[sig] = other
                    break
            if sig in out:
                break
    return out


# ``maybe_why`` of a crash whose example did not crash replayed alone (:func:`mark_maybe_of`),
# beside a crash of its own kernel that did; or beside one of a kernel its process ran before.
NOT_ALONE = "not reproduced alone"
AFTER_ANOTHER = "not reproduced alone, after another kernel's crash in its process"
# ... of a crash whose example fails on the interpreter of its kernel source as a bug does.
ON_TWIN = "fails as that bug on its interpreter"


def _fails_on_twin_as(findings: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Crash records (by signature), not marked yet, whose example checked on the interpreter of
    its kernel source (``details["twin"]``, ``fuzz.isolated``) failed as a shrunk record of its
    target does, or was seen: that way's key, its triggers holding there (what the duplicate
    check asks of a new bug's example, ``fuzz.duplicates``) -> that record's signature. A GPU
    faults on reads far past an allocation only: a planted Pallas jagged kernel's out-of-bounds
    reads crashed at 50,880 elements on an H200 alone, beside their 5-element ``masking`` row."""
    out = {}
    for sig, f in findings.items():
        twin = (f.get("details") or {}).get("twin")
        if f.get("class") != F.CRASH or not isinstance(twin, Mapping) or f.get("maybe_of"):
            continue  # (a backend-divergence finding's ``twin`` names the backend it differs from)
        key, holds = twin.get("key"), set(twin.get("holds") or ())
        if not key:
            continue
        for other, g in findings.items():
            if g.get("target") != f.get("target") or g.get("class") == F.CRASH:
                continue
            if g.get("shrunk") and any(k == key and t <= holds for k, t in _ways(g)):
                out[sig] = other
                break
    return out


def _ways(rec: Mapping[str, Any]) -> list[tuple[str | None, set[str]]]:
    """A record's failure keys (:func:`keys_of`), each with the triggers it was seen with."""
    own = set(rec.get("triggers") or ())
    seen = [(s.get("bug_key"), set(s.get("triggers") or ())) for s in rec.get("also_seen") or []]
    return [(rec.get("bug_key"), own), *((k, own) for k in also_keys(rec)), *seen]


def _crashed_elsewhere(records: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    """Of one target's crash records (signature, record), each whose example passed replayed
    alone in a fresh process -> the signature of one that crashed alone (none without it)."""
    records = list(records)
    alone = next((sig for sig, f in records if _alone(f) is True), None)
    if alone is None:
        return {}
    return {sig: alone for sig, f in records if f.get("class") == F.CRASH and _alone(f) is False}


def _crashed_before(findings: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Crash records (by signature) whose example passed replayed alone in a fresh process, not
    marked yet, -> a crash that crashed alone of a kernel their process had run before on their
    backend (``details["ran_before"]``, ``fuzz.campaign.slice_run``). On an H200 a planted GLA
    kernel's first example of a slice (16 elements, 19 ms in) lost the context of a worker that
    had fuzzed a planted jagged kernel whose out-of-bounds reads crash alone."""
    out = {}
    for sig, f in findings.items():
        before = set((f.get("details") or {}).get("ran_before") or ()) - {f.get("target")}
        if f.get("class") != F.CRASH or _alone(f) is not False or f.get("maybe_of") or not before:
            continue
        for other, g in findings.items():
            if g.get("target") in before and g.get("backend") == f.get("backend"):
                if g.get("class") == F.CRASH and _alone(g) is True:
                    out[sig] = other
                    break
    return out


def _alone(f: dict[str, Any]) -> bool | None:
    """Whether a crash record's example, replayed alone in a fresh process, crashed so again
    (None: not replayed)."""
    alone = (f.get("details") or {}).get("alone")
    return None if alone is None else f.get("bug_key") in alone


def after_their_bugs(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``findings`` (a report's, in its order) with each one not shrunk that may be a bug found
    before (``maybe_of``) moved right after that bug's: what may be one more way to it, not a
    bug of its own (:meth:`BugLedger.maybe_known`, :func:`mark_maybe_of`)."""
    sigs = {f.get("signature") for f in findings}
    maybe = [f for f in findings if f.get("maybe_of") in sigs - {f.get("signature")}]
    out: list[dict[str, Any]] = []
    for f in findings:
        if not any(f is m for m in maybe):
            out += [f, *(m for m in maybe if m["maybe_of"] == f.get("signature"))]
    return out


def join_backend_twins(rows: dict[str, dict[str, Any]], impl: Callable[[str], str]) -> None:
    """Joins, until none are left, each two report rows (``rows``: by key, each with the
    ``backends`` it was found on) that are one bug of one kernel (:func:`backend_twins`): the
    row of the smaller minimal example stands, with both rows' backends and reproducers, the
    other kept beside it (``backend``). Each backend's pair shrinks its bug to its own minimal
    example: a planted Pallas kernel's one bug on an H200 came as a row on each backend. Until
    none are left, whatever the rows' order: a row joined with a third takes that row's ways
    and signatures, which may make it another row's (on an H200 a planted decode kernel's
    pallas-gpu Inf row took in, from pallas-interpret, a signature a second pallas-gpu row
    had taken in, and the two stayed apart)."""
    while True:
        pair = next(
            (
                (a, b)
                for a, b in itertools.combinations(list(rows), 2)
                if rows[a]["target"] == rows[b]["target"] and backend_twins(rows[a], rows[b], impl)
            ),
            None,
        )
        if pair is None:
            return
        first, second = rows[pair[0]], rows[pair[1]]  # (their backends in that order)
        keep, other = pair if not smaller(second, first) else pair[::-1]
        k, o = rows[keep], rows.pop(other)
        # Each backend once (two rows of one backend are joined by a signature they hold).
        both = [*zip(first["backends"], first["reproducers"], strict=True)]
        both += [
            (b, r)
            for b, r in zip(second["backends"], second["reproducers"], strict=True)
            if b not in first["backends"]
        ]
        merged = {**k, "backends": [b for b, _ in both], "reproducers": [r for _, r in both]}
        absorb(merged, o)
        seen_as(merged, o, "backend")
        rows[keep] = merged


def backend_twins(a: Mapping[str, Any], b: Mapping[str, Any], impl: Callable[[str], str]) -> bool:
    """Whether report rows ``a`` and ``b`` are one bug of their target's kernel: on backends of
    one implementation (``impl``: a backend's ``Target.kernels`` entry; ``pallas-gpu`` and
    ``pallas-interpret``, not another language's kernel of the target), and either holding one
    signature (their own, a way they were seen, one their pairs took in: ``absorbed``; one
    signature is one bug, as :meth:`BugLedger._join_shared` says within a pair), or of no
    backend in common with one way of each one bug (``fuzz.signatures.same_bug``: one key,
    triggers that nest, or a NaN born at one site). A row that holds a signature the other
    backend's pair took in, by evidence there (a NaN's site traced on the interpreter), is
    that row's bug: on an H200 a planted GLA kernel's Inf row on pallas-gpu, its site not
    traced in time, stayed beside the pallas-interpret row that had taken its signature in."""
    if not {impl(x) for x in a["backends"]} & {impl(x) for x in b["backends"]}:
        return False
    if _signatures(a) & _signatures(b):
        return True
    if set(a["backends"]) & set(b["backends"]):
        return False  # (two rows of one backend: its pair's ledger kept them apart)
    return any(same_bug(x, y) for x in ways_of(a) for y in ways_of(b))


def absorb(row: dict[str, Any], other: Mapping[str, Any]) -> None:
    """The signatures ``other``'s pair took into it, into report row ``row``'s (one row now)."""
    if other.get("absorbed"):
        row["absorbed"] = sorted({*(row.get("absorbed") or []), *other["absorbed"]})


def _signatures(rec: Mapping[str, Any]) -> set[str]:
    """A report row's signature, its ways' and those its pair's ledger took into it
    (``absorbed``: :meth:`BugLedger.absorbed`)."""
    ways = [rec.get("signature"), *(w.get("signature") for w in rec.get("also_seen") or [])]
    return {str(s) for s in [*ways, *(rec.get("absorbed") or [])] if s}


def smaller(rec: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
    """Whether ``rec``'s minimal example is smaller than ``than``'s (shrunk, where ``than`` is
    not, or of fewer elements)."""
    if not rec.get("shrunk"):
        return False
    size, other = rec.get("case_size"), than.get("case_size")
    if not than.get("shrunk"):
        return True
    return isinstance(size, int) and isinstance(other, int) and size < other


def sighting(slice_id: int, rec: Mapping[str, Any]) -> str:
    """Which bug of a slice a streamed finding record is (its first sight and its minimal
    example are records of one bug): a key is one bug per Hypothesis run of the slice's hunt."""
    return f"{slice_id}:{(rec.get('details') or {}).get('round', 0)}:{rec.get('bug_key')}"


def _carry_seen(rec: dict[str, Any], old: Mapping[str, Any]) -> None:
    """The ways ``old``'s bug was also seen, onto ``rec``, which takes its place (a smaller
    example of the bug, or its first sight's minimal example): the ways stay the bug's."""
    ways = {
        s["signature"]: s
        for s in [*old.get("also_seen", []), *rec.get("also_seen", [])]
        if s.get("signature") and s.get("signature") != rec.get("signature")
    }
    if ways:
        rec["also_seen"] = sorted(
            ways.values(), key=lambda s: (s.get("case_size") or 0, s["signature"])
        )


def _supersede(out: Recorded, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Notes ``old``'s reproducer as superseded, unless ``new`` uses the same file."""
    if old.get("reproducer") and old.get("reproducer") != new.get("reproducer"):
        out.superseded.append(str(old["reproducer"]))


__all__ = [
    "COVERED",
    "NEW",
    "REPLACES",
    "BugLedger",
    "Recorded",
    "also",
    "bug_of_record",
    "bugs_of_record",
    "placement",
    "same_call",
    "sighting",
]
