"""What the planted rounds' tests (``test_planted*.py``) read from their plugins and records:
each planted kernel's docstring bullet, and the patterns a round's record file names. Loaded
with ``fuzz.load_beside`` (the tests are imported by path, not as a package)."""

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
