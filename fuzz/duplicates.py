"""Whether a bug a hunt's round found is a known bug after all (the duplicate check).

A round's bugs are told apart by their failure keys and triggers (``fuzz.signatures``); a bug
found again through another property, under other incidental conditions, or born at the same
kernel expression is one bug met two ways. :class:`Duplicates` holds what the check needs from
the hunt (its target, backend and options, the bugs it settled and knew, and how it shrinks a
finding once more); ``fuzz.engine`` settles each bug it does not match as a new one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fuzz import origin
from fuzz.backends import Backend
from fuzz.profiles import HuntOptions
from fuzz.properties import check_case
from fuzz.results import Found
from fuzz.signatures import Bug, bug_key, key_class, same_bug, site
from fuzz.target import Target


def bug_of(f: Found) -> Bug:
    """The bug a finding is (its key, triggers and signature)."""
    return Bug(
        f.key or f.finding.cls,
        frozenset(f.triggers),
        f.signature,
        site(f.finding.details.get("origin")),
    )


def check_as(target: Target, backend: Backend, options: HuntOptions, f: Found, key: str) -> Any:
    """The outcome of ``f``'s example on ``backend``, the property of bug ``key`` checked first;
    None where the check raised (a check of a bug's identity: never the hunt's error, never the
    finding lost over it)."""
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


@dataclass
class Duplicates:
    """The known bugs of a hunt, and which of them a new bug is after all (:meth:`of`).

    Attributes:
        target, backend, options: the hunt's.
        found: the bugs the hunt has settled (``HuntResult.found``), by label.
        known_bugs: every bug the hunt knows (settled, or found before it); a known bug reached
            through other conditions gains them as another way to it (:meth:`same_site`).
        shrink_again: ``f`` shrunk once more with the known bugs' examples counted as failures
            (``fuzz.shrink.shrink_again`` as the hunt runs it), None where that ended nowhere.
    """

    target: Target
    backend: Backend
    options: HuntOptions
    found: Mapping[str, Found]
    known_bugs: list[Bug]
    shrink_again: Callable[[Found], Found | None]

    def of(self, f: Found) -> tuple[Bug, str] | None:
        """The known bug that new bug ``f`` is after all, and how that was told (``"case"``: its
        minimal example is a known bug's, failing another property; ``"property"``: its minimal
        example fails a known bug's property too, with that bug's triggers or under fewer of its
        own; ``"site"``: its NaN or Inf is born at the same kernel expression; ``"shrink"``:
        shrunk once more, it became the known bug's example), or None.

        An example of a known bug's key counts as a hit of it only where all of the bug's
        triggers hold, and a bug's triggers are those of its minimal example, some of them
        incidental (a partial tile from 33 columns where 32 fail too). An example of the same
        fault without one of them is new, and its shrinking cannot reach the known bug's examples
        (they are hits). So ``f``, where its key has known bugs whose triggers do not nest with
        its own, is shrunk once more with those bugs' examples counted as failures: if it ends
        as one of them it is that bug (a hit), else it is a bug of its own."""
        if not f.choices or not f.key:
            return None  # nothing to replay
        bug = bug_of(f)
        same_call = self.same_call(f)
        if same_call is not None:
            return same_call, "case"
        also = self.also_fails(f)
        if also is not None:
            return also, "property"
        twins = [b for b in self.known_bugs if b.key == bug.key and not same_bug(b, bug)]
        if not twins:
            return self._under_more(f)
        twin = self.same_site(f, twins)
        if twin is not None:
            return twin, "site"
        shrunk = self.shrink_again(f)
        if shrunk is None:
            return None
        end = bug_of(shrunk)
        twin = next((b for b in twins if same_bug(b, end)), None)
        return self._under_more(f) if twin is None else (twin, "shrink")

    def _under_more(self, f: Found) -> tuple[Bug, str] | None:
        """The last check of :meth:`of`, after those of ``f``'s own key: :meth:`also_fails` the
        other way round."""
        also = self.also_fails(f, under_more=True)
        return None if also is None else (also, "property")

    def same_call(self, f: Found) -> Bug | None:
        """The bug found before, of ``f``'s class and another key, whose minimal example is
        ``f``'s kernel call itself (``Case.digest``), or None: one call failing two properties
        is one bug. On an H100 two_bugs_softmax's rescale bug came back twice so, through the
        oracle and through ``rows-sum-to-one``, both shrunk to one 33-column row."""
        digest = f.case.digest()
        for old in self.found.values():
            if (
                old.finding.cls == f.finding.cls
                and old.key != f.key
                and old.case.digest() == digest
            ):
                return bug_of(old)
        return None

    def also_fails(self, f: Found, *, under_more: bool = False) -> Bug | None:
        """The known bug of ``f``'s class and another key whose property ``f``'s minimal example
        fails too, with every one of that bug's triggers holding for it, or None: ``f`` is an
        example of that bug that a search met through another property first (a metamorphic
        property on a large case, whose small cases fail the oracle as well). On an H100
        two_bugs_softmax's rescale bug came back through ``rows-sum-to-one`` so, shrunk to a
        33-column row that fails the oracle with the known rescale bug's conditions.

        ``under_more``: the other way round, a known bug whose triggers contain all of ``f``'s
        (and more) is the same bug met under more conditions (had ``f`` come first, it would
        have been a hit of it), where ``f``'s minimal example fails its property. On an H200 the
        rescale bug came first through ``rows-sum-to-one`` on values below the finite sentinel,
        then through the oracle on plain values, and was reported twice. (The weaker check:
        :meth:`of` makes it last, after those of ``f``'s own key.)"""
        holds = frozenset(f.triggers)
        mine = [
            b
            for b in self.known_bugs
            if b.key != f.key
            and key_class(b.key) == f.finding.cls
            and (holds < b.triggers if under_more else b.triggers <= holds)
        ]
        for key in sorted({b.key for b in mine}):
            outcome = check_as(self.target, self.backend, self.options, f, key)
            if (
                outcome is not None
                and outcome.finding is not None
                and bug_key(outcome.finding) == key
            ):
                return max((b for b in mine if b.key == key), key=lambda b: len(b.triggers))
        return None

    def same_site(self, f: Found, twins: list[Bug]) -> Bug | None:
        """The bug of ``twins`` whose NaN or Inf is born where ``f``'s is (``fuzz.signatures.site``),
        or None. Their origins are traced here where no one traced them yet (a campaign's slice
        traces each bug it sends, so a known bug of an earlier slice comes with its site). ``f``
        is then that bug reached through other conditions: they are kept as another way to it, so
        that later examples through them are hits, not shrunk again."""
        if f.finding.cls not in ("nan", "inf"):
            return None
        name = self.backend.name
        here = site(origin.of_finding(f, self.target, name))
        if here is None:
            return None
        for b in twins:
            there = b.site
            if there is None:
                old = next((o for o in self.found.values() if o.signature == b.signature), None)
                there = None if old is None else site(origin.of_finding(old, self.target, name))
            if there == here:
                self.known_bugs.append(Bug(b.key, frozenset(f.triggers), b.signature, here))
                return b
        return None
