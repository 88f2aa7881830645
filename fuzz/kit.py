"""What the built-in family modules (``fuzz/targets``) share.

Every family module reads in the same order, with the same section names:

    Contract: entry points and outputs     what a kernel of the family is called with and returns
    Oracle and naive reference             the fp64 oracle and the same-dtype naive reference
    Error bound                            each output element's bound (``Target.error_bound``)
    Hazards                                input conditions reported with findings
    Poisoning and fixed outputs            inputs that must not matter, outputs the mask decides
    Properties                             the family's own properties
    Costs and baselines                    interpreter cost, the scoreboard's baseline cases
    Real targets                           the family's targets, registered
    Reformulations                         correct rewrites, registered as real targets
    Mutants                                planted bugs, registered as mutant targets

This module holds what those sections would otherwise repeat: the one cache for data computed
from a case (:func:`per_case`).
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from fuzz.case import Case

F = TypeVar("F", bound=Callable[..., Any])


def per_case(fn: F) -> F:
    """``fn(case, *args)`` computed once per case and arguments, and kept while the case lives.

    The one cache for data a family computes from a case alone (its structure, its oracle, its
    error analysis): the hazards, the poisoning, the bound and the properties of one example all
    ask for it, and a case is not kept alive by its cache (it is keyed weakly, by identity). The
    arguments after the case (defaults filled in, so ``f(case)`` and ``f(case, "cpu")`` are one
    entry when ``"cpu"`` is the default) must be hashable. What depends on a run (a launch, the
    backend) is kept per example by ``Context.memo`` instead.
    """
    signature = inspect.signature(fn)
    cache: weakref.WeakKeyDictionary[Case, dict[tuple[Any, ...], Any]] = weakref.WeakKeyDictionary()

    @functools.wraps(fn)
    def cached(case: Case, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(case, *args, **kwargs)
        bound.apply_defaults()
        key = tuple(bound.arguments.values())[1:]
        entries = cache.setdefault(case, {})
        if key not in entries:
            entries[key] = fn(case, *args, **kwargs)
        return entries[key]

    return cached  # type: ignore[return-value]
