"""Runs Hypothesis over one target on one backend and collects minimal failures.

:func:`hunt` is the one loop every front end shares (pytest, ``python -m fuzz run``, the mutant
scoreboard): it draws cases from the target's strategy, checks every property, lets Hypothesis
shrink each failure class separately, and returns the minimal example of each class with its
reproducer. :func:`check` turns a hunt into a pytest-style assertion.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.control import current_build_context
from hypothesis.database import ExampleDatabase
from hypothesis.errors import HypothesisException

from fuzz import reproducer
from fuzz.backends import Backend, get_backend
from fuzz.case import Case
from fuzz.failures import Finding, KernelFailure, raise_for
from fuzz.profiles import Profile
from fuzz.properties import Stats, check_case
from fuzz.target import Target


@dataclass
class Found:
    """The minimal example of one failure class."""

    finding: Finding
    case: Case
    params: dict[str, Any]
    first_example: int  # examples run when the class first appeared
    first_seconds: float  # seconds into the hunt when it first appeared
    minimal_seconds: float = 0.0  # seconds into the hunt when the minimal example was replayed
    reproducer: Path | None = None

    @property
    def shrink_seconds(self) -> float:
        return max(0.0, self.minimal_seconds - self.first_seconds)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.finding.as_dict(),
            "case": repr(self.case),
            "case_size": self.case.size,
            "shapes": self.case.shapes(),
            "params": self.case.params_json(),
            "first_example": self.first_example,
            "first_seconds": round(self.first_seconds, 3),
            "shrink_seconds": round(self.shrink_seconds, 3),
            "reproducer": str(self.reproducer) if self.reproducer else None,
        }


@dataclass
class HuntResult:
    target: str
    backend: str
    mutant_of: str | None
    expected_class: str | None
    examples: int = 0
    seconds: float = 0.0
    stats: Stats = field(default_factory=Stats)
    found: dict[str, Found] = field(default_factory=dict)
    error: str | None = None  # the harness itself failed (strategy error, health check...)
    events: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def classes(self) -> list[str]:
        return sorted(self.found)

    @property
    def failed(self) -> bool:
        return bool(self.found) or self.error is not None

    @property
    def status(self) -> str:
        """``pass``/``fail`` for a real target; ``found``/``wrong-class``/``missed`` for a mutant."""
        if self.expected_class is None:
            return "fail" if self.failed else "pass"
        if self.expected_class in self.found:
            return "found"
        return "wrong-class" if self.found else "missed"

    @property
    def examples_per_second(self) -> float:
        return self.examples / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "backend": self.backend,
            "mutant": self.mutant_of is not None,
            "mutant_of": self.mutant_of,
            "expected_class": self.expected_class,
            "status": self.status,
            "examples": self.examples,
            "seconds": round(self.seconds, 3),
            "examples_per_second": round(self.examples_per_second, 2),
            "launches": self.stats.launches,
            "launch_seconds": round(self.stats.launch_seconds, 3),
            "compile_seconds": round(self.stats.compile_seconds, 3),
            "compile_share": round(self.stats.compile_seconds / self.seconds, 3)
            if self.seconds
            else 0.0,
            "twin_launches": self.stats.twin_launches,
            "twin_seconds": round(self.stats.twin_seconds, 3),
            "error": self.error,
            "events": dict(self.events),
            "findings": [f.as_dict() for f in self.found.values()],
        }


class _OutOfTime(BaseException):
    """Ends a hunt whose time is up (a BaseException: Hypothesis does not shrink it)."""


def _exceptions(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for e in exc.exceptions:
            out.extend(_exceptions(e))
        return out
    return [exc]


def hunt(
    target: Target,
    backend: Backend | str,
    profile: Profile,
    *,
    max_examples: int | None = None,
    seed: int | None = None,
    database: ExampleDatabase | str | None = "profile",
    repro_dir: str | Path | None = None,
    time_limit: float | None = None,
    min_examples: int = 1,
    on_example: Callable[[HuntResult], None] | None = None,
) -> HuntResult:
    """Fuzzes ``target`` on ``backend`` under ``profile``; returns minimal failures per class.

    Args:
        max_examples: overrides the profile's example count.
        seed: a fixed seed (the run is then not derandomized by the profile).
        database: a Hypothesis example database, None for none, ``'profile'`` for the profile's.
        repro_dir: where to write reproducer scripts (None: do not write them).
        time_limit: seconds after which no new examples are generated (shrinking of a failure
            already found still completes), once ``min_examples`` have run.
        on_example: called after every example (progress display).
    """
    b = get_backend(backend) if isinstance(backend, str) else backend
    reason = b.unavailable_reason()
    result = HuntResult(target.name, b.name, target.mutant_of, target.expected_class)
    if reason is not None:
        result.error = f"backend {b.name} is not available: {reason}"
        return result
    if b.impl not in target.kernels:
        result.error = f"target {target.name} has no {b.impl} kernel"
        return result
    strategy = target.strategy(profile.scale)
    t0 = time.perf_counter()
    stop_at = None if time_limit is None else t0 + time_limit
    last_seen: dict[str, Found] = {}
    minimal: dict[str, Found] = {}
    first: dict[str, tuple[int, float]] = {}

    def run_one(case: Case, data: st.DataObject) -> None:
        final = current_build_context().is_final
        if (
            stop_at is not None
            and not first
            and not final
            and result.examples >= min_examples
            and time.perf_counter() > stop_at
        ):
            raise _OutOfTime
        result.examples += 1
        outcome = check_case(
            target,
            b,
            case,
            draw=lambda s, label: data.draw(s, label=label),
            ref_device=profile.ref_device,
            differential=profile.differential,
            differential_max_cost=profile.differential_max_cost,
            differential_every=profile.differential_every,
            stats=result.stats,
        )
        for h in outcome.context.hazards:
            name = h.split(":", 1)[0]
            result.events[f"hazard {name}"] += 1
            event("hazard", name)
        f = outcome.finding
        if on_example is not None:
            on_example(result)
        if f is None:
            return
        now = time.perf_counter() - t0
        result.events[f"failure {f.cls}"] += 1
        event("failure", f.cls)
        if f.cls not in first:
            first[f.cls] = (result.examples, now)
        found = Found(f, case, outcome.params, *first[f.cls], minimal_seconds=now)
        (minimal if final else last_seen)[f.cls] = found
        raise_for(f)

    base = profile.settings
    overrides: dict[str, Any] = {
        "max_examples": profile.max_examples if max_examples is None else max_examples
    }
    if database != "profile":
        overrides["database"] = database
    if seed is not None:
        overrides["derandomize"] = False
    test = settings(base, **overrides)(given(case=strategy, data=st.data())(run_one))
    test.hypothesis.inner_test._hypothesis_internal_add_digest = f"{target.name}|{b.name}".encode()  # type: ignore[attr-defined]
    if seed is not None:
        from hypothesis import seed as hypothesis_seed

        test = hypothesis_seed(seed)(test)
    try:
        test()
    except _OutOfTime:
        pass
    except BaseException as exc:
        for e in _exceptions(exc):
            if isinstance(e, KeyboardInterrupt):
                raise e from exc
            if isinstance(e, KernelFailure):
                continue
            if isinstance(e, HypothesisException) and "Flaky" in type(e).__name__:
                continue  # a failure that did not replay: kept from last_seen below
            if result.error is None:
                result.error = f"{type(e).__name__}: {e}"[:2000]
    result.seconds = time.perf_counter() - t0
    for cls, f in {**last_seen, **minimal}.items():
        result.found[cls] = f
    if repro_dir is not None:
        for f in result.found.values():
            f.reproducer = reproducer.write(
                repro_dir,
                target=target,
                backend=b.name,
                case=f.case,
                params=f.params,
                finding=f.finding,
                ref_device=profile.ref_device,
                differential=profile.differential,
                differential_max_cost=profile.differential_max_cost,
            )
    return result


def check(
    target: Target,
    backend: Backend | str,
    profile: Profile,
    *,
    repro_dir: str | Path | None = None,
    **kw: Any,
) -> HuntResult:
    """Like :func:`hunt`, but raises ``AssertionError`` with a readable summary on any failure."""
    result = hunt(target, backend, profile, repro_dir=repro_dir, **kw)
    if result.error is not None:
        raise AssertionError(f"{target.name} on {result.backend}: harness error: {result.error}")
    if result.found:
        lines = [f"{target.name} on {result.backend}: {len(result.found)} failure class(es)"]
        for f in result.found.values():
            lines.append(f"  {f.finding.summary()}")
            lines.append(f"    minimal case: {f.case!r}"[:600])
            if f.finding.hazards:
                lines.append(f"    hazards: {'; '.join(f.finding.hazards)}")
            if f.reproducer:
                lines.append(f"    reproducer: {f.reproducer}")
        raise AssertionError("\n".join(lines))
    return result
