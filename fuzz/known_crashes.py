"""Crashes a child process shrinking a lost CUDA context's crash knows (``fuzz.isolated``).

A child starts from the smallest example known to lose the context the shrunk way, and must not
launch it again (its context would be lost before it shrank anything): the launch of a case
known so raises what it raised then (:func:`before_launch`, by the case's digest), which the
engine takes as a failure like any other, not as a lost context (:func:`replays_known`). A case
known to lose the context another way is declined. Outside such a child both tables are empty
and nothing changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fuzz.failures import Unsupported

if TYPE_CHECKING:
    from fuzz.case import Case

# case digest -> (exception type name, its text) of the crashes known to lose the context the
# way the shrunk bug does; the digests of cases that lose it another way.
KNOWN: dict[str, tuple[str, str]] = {}
AVOID: set[str] = set()
# Set in a child that replays a crash's example alone (``fuzz.isolated``): it launches every
# example for real, and a context it loses is the answer, not a crash to shrink in children.
ALONE: list[bool] = []


def active() -> bool:
    """Whether this process is such a child."""
    return bool(KNOWN or AVOID or ALONE)


def before_launch(case: Case) -> None:
    """Before a kernel launch of ``case``: a case known to lose the context the shrunk way
    raises what it raised then (without launching); one known to lose it another way is
    declined. Outside a child: nothing."""
    if not active():
        return
    digest = case.digest()
    if digest in AVOID:
        raise Unsupported("an example that lost a child's CUDA context with another bug")
    known = KNOWN.get(digest)
    if known is not None:
        name, text = known
        raise type(name, (RuntimeError,), {})(text)


def replays_known(case: Case) -> bool:
    """Whether ``case``'s crash was raised by :func:`before_launch` (a known crash replayed in a
    child: its context is intact)."""
    return active() and case.digest() in KNOWN
