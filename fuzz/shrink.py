"""Shrinking a compiled backend's finding where shrinking is cheap.

On a GPU every kernel variant a shrink step tries (a dtype, a tile size, a head dim, a shape
bucket) is a compile of seconds, and Hypothesis's shrinker tries hundreds: shrinking in place left
GPU reproducers of millions of elements, cut at the time limit. So a compiled backend's search
hands a new failure over unshrunk (``fuzz.engine.Stage.hand_off``), and :func:`shrink_compiled`
shrinks it in stages, each a Hypothesis run that replays the failing example and shrinks it::

    cut          the interpreter would take too long on the case (``Target.interpreter_cost``
                 above ``Profile.interpreter_max_cost``): shrink on the compiled backend, through
                 kernel variants compiled already, until it would not
    interpreter  the same kernel source in its interpreter (the backend's twin, on the GPU host
                 too): if the case fails there with the same class, shrink it there, where a new
                 variant costs no compile
    confirm      the interpreter's minimal case on the compiled backend, same class: the
                 reproducer is written for the backend that found it
    compiled     otherwise (races, TF32 or fast exp, compiled-only divergence, illegal addresses,
                 or the minimal case did not confirm): shrink on the compiled backend, through
                 compiled variants first, then any, within what is left of the time

The finding records the path taken and what each stage said (``Found.shrink_path``,
``Found.shrink_notes``).
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from fuzz.backends import Backend, get_backend
from fuzz.failures import CLASSES
from fuzz.properties import check_case

if TYPE_CHECKING:
    from fuzz.engine import Found, HuntResult, _Hunter
    from fuzz.profiles import Profile
    from fuzz.target import Target


def hands_off(backend: Backend, profile: Profile) -> bool:
    """Whether a search on ``backend`` hands its failures to :func:`shrink_compiled`."""
    return profile.interpreter_shrink and not backend.interpret


def _twin(backend: Backend) -> Backend | None:
    """The interpreter of the backend's kernel source, if it runs here."""
    if backend.twin is None:
        return None
    try:
        twin = get_backend(backend.twin)
    except ValueError:
        return None
    return twin if twin.interpret and twin.available else None


def _stage(
    target: Target,
    backend: Backend,
    profile: Profile,
    found: Found,
    *,
    seconds: float,
    narrowing: dict[str, Any],
    only_compiled: bool = False,
    goal: Any = None,
) -> tuple[Found | None, HuntResult]:
    """Replays ``found`` on ``backend`` and shrinks it (its class only) for at most ``seconds``;
    returns the smallest failing example of the class (None if it did not fail so) and the run."""
    from fuzz.engine import SHRINK_PHASES, Stage, hunt

    cls = found.finding.cls
    stage = Stage(start=(found.choices,), phases=SHRINK_PHASES, only_compiled=only_compiled,
                  goal=goal, shrink_seconds=seconds)  # fmt: skip
    run = hunt(target, backend, profile, database=None, known=set(CLASSES) - {cls},
               hard_limit=max(1.0, seconds), stage=stage, narrowing=narrowing)  # fmt: skip
    return run.found.get(cls), run


def _said(run: HuntResult, cls: str) -> str:
    """What a stage's backend said about the example (for the notes)."""
    if run.error is not None:
        return f"error: {run.error[:200]}"
    if cls in run.found:
        return f"{cls} (reproduced)"
    other = sorted(run.known_hits)
    return f"{', '.join(other)} instead of {cls}" if other else "passes"


def _confirm(target: Target, backend: Backend, profile: Profile, small: Found) -> Found | None:
    """``small`` (shrunk elsewhere) checked on ``backend``: the finding there if its class is the
    same, else None."""
    outcome = check_case(target, backend, small.case, params=small.params,
                         ref_device=profile.ref_device, differential=profile.differential,
                         differential_max_cost=profile.differential_max_cost,
                         prefer=small.finding.cls)  # fmt: skip
    f = outcome.finding
    if f is None or f.cls != small.finding.cls:
        return None
    f.details["signature"] = small.finding.details.get("signature", "")
    return dataclasses.replace(small, finding=f, params=outcome.params, final=True)


def shrink_compiled(
    target: Target, backend: Backend, profile: Profile, found: Found, *, hunter: _Hunter
) -> Found:
    """Shrinks ``found`` (a failure ``backend``, a compiled backend, found and handed over
    unshrunk) in the stages of the module docstring, within ``profile.shrink_seconds``."""
    t0 = time.perf_counter()
    deadline = t0 + profile.shrink_seconds
    if hunter.hard_at is not None:
        deadline = min(deadline, hunter.hard_at)
    cls = found.finding.cls
    notes: list[str] = []
    cost = target.interpreter_cost
    max_cost = profile.interpreter_max_cost
    twin = _twin(backend)
    plain = dataclasses.replace(profile, differential=False)  # an interpreter has no twin to run
    current = found
    narrow = hunter.narrowing  # the search's strategy: its examples replay under no other

    def left() -> float:
        return deadline - time.perf_counter()

    def absorb(run: HuntResult) -> None:
        main = hunter.result
        main.stats.merge(run.stats)
        main.shrink_examples += run.examples
        for key, count in run.events.items():
            main.events[f"shrink: {key}"] += count

    for only_compiled in (True, False):  # compiled variants first; new ones if that is not enough
        if twin is None or cost(current.case) <= max_cost or left() <= 0:
            break
        cut, run = _stage(target, backend, profile, current, seconds=left() / 2, narrowing=narrow,
                          only_compiled=only_compiled, goal=lambda c: cost(c) <= max_cost)  # fmt: skip
        absorb(run)
        if cut is not None:
            current = cut
        which = "compiled variants" if only_compiled else "any variant"
        notes.append(f"cut on {backend.name} through {which}: {run.examples} examples, "
                     f"{run.stats.compiles} compiles, {current.case.size} elements, interpreter "
                     f"cost {cost(current.case):.3g}")  # fmt: skip
    if twin is None:
        notes.append(f"no interpreter of {backend.name}'s kernel source runs here")
    elif cost(current.case) > max_cost:
        notes.append(f"interpreter not tried: cost {cost(current.case):.3g} > {max_cost:g}")
    else:
        small, run = _stage(target, twin, plain, current, seconds=left(), narrowing=narrow)
        absorb(run)
        notes.append(f"{twin.name} said: {_said(run, cls)}")
        if small is not None:
            confirmed = _confirm(target, backend, profile, small)
            if confirmed is not None:
                notes.append(f"confirmed on {backend.name}: {small.case.size} elements")
                return _finish(confirmed, found, "interpreter", notes, t0)
            notes.append(f"{twin.name}'s minimal case ({small.case.size} elements) does not "
                         f"fail with {cls} on {backend.name}")  # fmt: skip
    for only_compiled in (True, False):
        if left() <= 0:
            break
        best, run = _stage(target, backend, profile, current, seconds=left(), narrowing=narrow,
                           only_compiled=only_compiled)  # fmt: skip
        absorb(run)
        if best is not None:
            current = best
        which = "compiled variants only" if only_compiled else "any variant"
        notes.append(f"{backend.name}, {which}: {run.examples} examples, {run.stats.compiles} "
                     f"compiles, {current.case.size} elements ({_said(run, cls)})")  # fmt: skip
    return _finish(current, found, "compiled", notes, t0)


def _finish(best: Found, found: Found, path: str, notes: list[str], t0: float) -> Found:
    """``best`` as the minimal example of the finding first seen as ``found``."""
    return dataclasses.replace(
        best,
        first_example=found.first_example,
        first_seconds=found.first_seconds,
        minimal_seconds=found.minimal_seconds + (time.perf_counter() - t0),
        final=best.final or path == "interpreter",
        shrink_path=path,
        shrink_notes=notes,
    )
