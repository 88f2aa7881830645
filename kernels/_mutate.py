"""Mutants: copies of a kernel module with one real bug planted.

A mutant is the real module's source with a few exact text edits, executed as a module of its own
(its source registered with ``linecache``, so that ``@triton.jit`` can read it back and tracebacks
and NaN-origin reports point at the mutated line). Nothing in the real kernels knows about
mutants, and an edit whose text no longer occurs exactly once in the real source is an error:
a kernel refactor cannot silently turn a mutant into a copy of the real kernel.

The records: a :class:`Mutant` (a planted bug, with what the harness must report for it on each
target it is registered for: :class:`Expect`) and a :class:`Reformulation` (a correct rewrite,
registered as a real target that must pass), both a :class:`Rewrite` of a real kernel module
per kernel language. A family's ``kernels/<family>/mutants.py`` and ``reformulations.py`` hold
only their tuples, built by :func:`rewrites_of`, which names the real module once.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import linecache
import sys
import threading
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

LANGUAGES = ("triton", "pallas")


class MutationError(ValueError):
    pass


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (which must occur exactly once) by ``new``."""

    old: str
    new: str


_cache: dict[tuple[str, str], types.ModuleType] = {}
_running = threading.RLock()  # one thread runs a copy's code; the others wait for it


def mutate(
    module: types.ModuleType, name: str, edits: Sequence[Edit], *, kind: str = "mutant"
) -> types.ModuleType:
    """Returns ``module`` re-executed with ``edits`` applied, as module ``<module>__<kind>_<name>``.

    The edits are checked here; the copy's code runs when the module is first used.

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
    # The copy's code runs when it is first used (an attribute it does not have yet is asked
    # for: PEP 562's module __getattr__), not here: a process registers every mutant but runs
    # few of them, and running one (compiling it, building its @triton.jit functions) costs
    # ~20 ms, ~1.7 s for all of them at each process start.
    initial = dict(mod.__dict__)

    def run_once(attr: str) -> Any:
        with _running:
            if mod.__dict__.get("__getattr__") is run_once:
                del mod.__dict__["__getattr__"]
                try:
                    exec(compile(src, filename, "exec"), mod.__dict__)
                except BaseException:
                    mod.__dict__.clear()
                    mod.__dict__.update(initial)
                    raise
        return object.__getattribute__(mod, attr)

    mod.__dict__["__getattr__"] = run_once
    initial["__getattr__"] = run_once
    _cache[key] = mod
    return mod


@dataclass(frozen=True)
class Rewrite:
    """A real kernel module rewritten by exact text edits, once per kernel language.

    Attributes:
        name: short name; the copy is the module ``<real module>__<kind>_<name>``.
        description: what the rewrite changes (for a language without edits: why it has none).
        triton, pallas: the edits of that language's real module; None where the rewrite has no
            copy in that language (a bug that cannot show there).
        real: the real module, ``{impl}`` standing for the language (``"kernels.softmax.{impl}"``);
            set for a family's records at once by :func:`rewrites_of`.
    """

    kind: ClassVar[str] = "rewrite"

    name: str
    description: str
    triton: tuple[Edit, ...] | None = field(kw_only=True)
    pallas: tuple[Edit, ...] | None = field(kw_only=True)
    real: str = field(default="", kw_only=True)

    @property
    def languages(self) -> tuple[str, ...]:
        """The kernel languages the rewrite has a copy in."""
        return tuple(impl for impl in LANGUAGES if getattr(self, impl) is not None)

    def module(self, impl: str) -> types.ModuleType:
        """The rewritten module of kernel language ``impl`` (created once, then cached)."""
        if impl not in self.languages:
            raise ValueError(
                f"impl={impl!r} must be one of {self.languages} for {self.kind} {self.name}"
            )
        if "{impl}" not in self.real:
            raise ValueError(
                f"{self.kind} {self.name}: real={self.real!r} must name the real module with "
                "'{impl}' for the language (build the tuple with rewrites_of)"
            )
        edits = getattr(self, impl)
        return mutate(
            importlib.import_module(self.real.format(impl=impl)), self.name, edits, kind=self.kind
        )


@dataclass(frozen=True)
class Expect:
    """What a mutant must produce on one target.

    Attributes:
        cls: the failure class (``nan``, ``masking``, ``accuracy``...; see ``fuzz.failures``).
        shrink_bound: the largest input (elements: the harness's ``Case.size``) its minimal
            reproducer may have; the test suite asserts it. An int, or ``shrink_bound(case) ->
            int`` where the least failing input depends on geometry the profile draws (tile
            sizes, head dims: the GPU profile's simplest tiles and head dim are larger).
    """

    cls: str
    shrink_bound: int | Callable[[Any], int]


@dataclass(frozen=True)
class Mutant(Rewrite):
    """A planted bug: the real module with one bug written in, per kernel language.

    Attributes:
        expected: by the real target it is registered as a mutant of (``softmax``,
            ``simple_gla_fwd``...): what it must produce there (the target is
            ``<real target>_mutant_<name>``).
    """

    kind: ClassVar[str] = "mutant"

    expected: Mapping[str, Expect]


@dataclass(frozen=True)
class Reformulation(Rewrite):
    """A correct rewrite of the computation (another order, domain or number of passes),
    registered as a real target (``<real target>_<name>``) of every target that runs ``real``:
    the harness must pass it on every example."""

    kind: ClassVar[str] = "reformulation"


R = TypeVar("R", bound=Rewrite)


def rewrites_of(real: str, *rewrites: R) -> tuple[R, ...]:
    """``rewrites`` as rewrites of the real module ``real`` (``"kernels.softmax.{impl}"``)."""
    return tuple(dataclasses.replace(r, real=real) for r in rewrites)
