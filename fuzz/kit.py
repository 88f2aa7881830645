"""What the built-in family modules (``fuzz/targets``) share.

Every family module reads in the same order, under the same section names (:data:`SECTIONS`):

    Contract: entry points, outputs,       what a kernel of the family is called with and returns,
      structure of a case                  and what a case means (its sequences, its logits)
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
from a case (:func:`per_case`), the case's inputs as torch tensors for the references
(:func:`torch_inputs`), and registering a real target's reformulations and mutants, each
``kernels._mutate`` record a target under the real target's contract (:func:`variant`).
What the families' properties share is in ``fuzz.properties`` (``Context.derived``,
``Context.memo``, ``compare_runs``).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import types
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from fuzz.target import MutantOf, register
from kernels._mutate import LANGUAGES, Mutant, Reformulation

if TYPE_CHECKING:
    from fuzz.case import Case
    from fuzz.target import KernelEntry, Target

SECTIONS = (
    "Contract: entry points, outputs, structure of a case",
    "Oracle and naive reference",
    "Error bound",
    "Hazards",
    "Poisoning and fixed outputs",
    "Properties",
    "Costs and baselines",
    "Real targets",
    "Reformulations",
    "Mutants",
)

F = TypeVar("F", bound=Callable[..., Any])
E = TypeVar("E", bound=Callable[..., Any])  # a family's entry point (``KernelEntry``)


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


# Contract: torch inputs for the references ---------------------------------------------------------


def torch_inputs(case: Case, device: str, *, skip: Collection[str] = ()) -> dict[str, Any]:
    """The case's inputs as torch tensors on ``device`` (for the oracle, the naive reference and
    the error analysis), those named in ``skip`` left out."""
    from fuzz.backends import TorchAdapter

    adapter = TorchAdapter(device)
    return {k: adapter.put(a) for k, a in case.inputs.items() if k not in skip}


def host(t: Any, device: str) -> np.ndarray:
    """Torch tensor ``t`` (on ``device``) as a host array of its dtype."""
    from fuzz.backends import TorchAdapter

    return TorchAdapter(device).get(t)


# Real targets, reformulations, mutants -------------------------------------------------------------


def real_modules(kernels: str) -> dict[str, types.ModuleType]:
    """The real kernel modules ``kernels`` names (``"kernels.softmax.{impl}"``), per language."""
    return {impl: importlib.import_module(kernels.format(impl=impl)) for impl in LANGUAGES}


def entries(
    entry: Callable[[types.ModuleType], E], modules: Mapping[str, types.ModuleType]
) -> dict[str, E]:
    """The family's ``entry`` point around each language's kernel module (``Target.kernels``)."""
    return {impl: entry(module) for impl, module in modules.items()}


def variant(
    real: Target,
    name: str,
    modules: Mapping[str, types.ModuleType],
    entry: Callable[[types.ModuleType], KernelEntry],
    **fields: Any,
) -> Target:
    """A target named ``name`` that runs other kernel modules (a reformulation's, a mutant's, a
    test's) under ``real``'s contract: its oracle, bound, hazards, poisoning, properties, costs
    and baselines, with ``fields`` replaced."""
    return dataclasses.replace(real, name=name, kernels=entries(entry, modules), **fields)


def register_reformulations(
    real: Target,
    kernels: str,
    entry: Callable[[types.ModuleType], KernelEntry],
    reformulations: Sequence[Reformulation],
) -> None:
    """Registers each reformulation of ``kernels`` (the modules ``real`` runs) as the real target
    ``<real>_<name>`` (no finding expected): the proof that ``real``'s error bound admits every
    correct implementation, not only the one it was written next to."""
    for r in reformulations:
        if r.real == kernels:
            modules = {impl: r.module(impl) for impl in r.languages}
            register(
                variant(
                    real,
                    f"{real.name}_{r.name}",
                    modules,
                    entry,
                    description=f"reformulation: {r.description}",
                )
            )


def register_mutants(
    real: Target,
    kernels: str,
    entry: Callable[[types.ModuleType], KernelEntry],
    mutants: Sequence[Mutant],
) -> None:
    """Registers each mutant expected on ``real`` as the target ``<real>_mutant_<name>``, with
    the class and shrink bound its record expects there (``kernels._mutate.Expect``)."""
    for m in mutants:
        expect = m.expected.get(real.name)
        if expect is None:
            continue
        if m.real != kernels:
            raise ValueError(
                f"mutant {m.name} rewrites {m.real!r}, but {real.name} runs {kernels!r}"
            )
        modules = {impl: m.module(impl) for impl in m.languages}
        register(
            variant(
                real,
                f"{real.name}_mutant_{m.name}",
                modules,
                entry,
                mutant=MutantOf(real.name, expect.cls, expect.shrink_bound),
                description=m.description,
            )
        )
