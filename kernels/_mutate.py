"""Mutants: copies of a kernel module with one real bug planted.

A mutant is the real module's source with a few exact text edits, executed as a module of its own
(its source registered with ``linecache``, so that ``@triton.jit`` can read it back and tracebacks
and NaN-origin reports point at the mutated line). Nothing in the real kernels knows about
mutants, and an edit whose text no longer occurs exactly once in the real source is an error:
a kernel refactor cannot silently turn a mutant into a copy of the real kernel.
"""

from __future__ import annotations

import inspect
import linecache
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass


class MutationError(ValueError):
    pass


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (which must occur exactly once) by ``new``."""

    old: str
    new: str


_cache: dict[tuple[str, str], types.ModuleType] = {}


def mutate(
    module: types.ModuleType, name: str, edits: Sequence[Edit], *, kind: str = "mutant"
) -> types.ModuleType:
    """Returns ``module`` re-executed with ``edits`` applied, as module ``<module>__<kind>_<name>``.

    ``kind`` names what the copy is in module names, tracebacks and NaN-origin reports:
    ``'mutant'`` (a planted bug) or ``'reformulation'`` (a correct rewrite of the computation).
    """
    key = (module.__name__, f"{kind}_{name}")
    if key in _cache:
        return _cache[key]
    if not edits:
        raise MutationError(f"{kind} {name!r} of {module.__name__} has no edits")
    src = inspect.getsource(module)
    for edit in edits:
        count = src.count(edit.old)
        if count != 1:
            raise MutationError(
                f"{kind} {name!r}: the text to replace occurs {count} times in {module.__name__} "
                f"(expected exactly once):\n{edit.old}"
            )
        src = src.replace(edit.old, edit.new)
    mod_name = f"{module.__name__}__{kind}_{name}"
    filename = f"<{kind} {name} of {module.__name__}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    mod = types.ModuleType(mod_name, module.__doc__)
    mod.__file__ = filename
    mod.__package__ = module.__package__
    sys.modules[mod_name] = mod
    try:
        exec(compile(src, filename, "exec"), mod.__dict__)
    except BaseException:
        del sys.modules[mod_name]
        raise
    _cache[key] = mod
    return mod
