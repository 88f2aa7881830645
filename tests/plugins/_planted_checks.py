"""What the planted rounds' tests (``test_planted*.py``) read from their plugins and records:
each planted kernel's docstring bullet, and the patterns a round's record file names; and a
check of one case as a hunt settles its finding. Loaded with ``fuzz.load_beside`` (the tests are
imported by path, not as a package)."""

from __future__ import annotations

import ast
import re


def docstring_entries(doc: str, prefix: str) -> dict[str, str]:
    """The docstring's ``- ``name``: ...`` bullets whose target name starts with ``prefix``
    (``planted3_``), by target name, each on one line."""
    entries = {}
    for bullet in re.split(r"\n(?=- ``)", doc):
        m = re.match(rf"- ``({re.escape(prefix)}\w+)``", bullet)
        if m:
            entries[m.group(1)] = " ".join(bullet.split())
    return entries


def record_keys(path: str) -> set[str]:
    """The string keys of every dict literal in the file at ``path`` (a record file's patterns)."""
    tree = ast.parse(open(path).read())
    return {
        k.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Dict)
        for k in node.keys
        if isinstance(k, ast.Constant) and isinstance(k.value, str)
    }


def options():
    """The hunt options of the ci profile."""
    from fuzz.profiles import HuntOptions, get_profile

    return HuntOptions.of(get_profile("ci"))


def as_found(target, backend, case, params=None):
    """``case`` checked on ``backend`` as a Found, as a hunt settles it: its key and triggers
    as the hunt computes them (the case must fail)."""
    from fuzz.failures import bug_key
    from fuzz.properties import check_case
    from fuzz.results import Found
    from fuzz.signatures import conditions, signature

    outcome = check_case(target, backend, case, params=params or {}, **options().check_kwargs())
    f = outcome.finding
    assert f is not None, case
    key, holds = bug_key(f), sorted(conditions(target, case, outcome.context.hazards))
    f.details.update(bug_key=key, triggers=holds, signature=signature(target.name, key, holds))
    return Found(f, case, dict(outcome.params), 1, 0.0, choices=(1,), key=key, final=True)
