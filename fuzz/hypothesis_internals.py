"""Every use of Hypothesis's internals in the harness (``fuzz/`` and ``strategies/``), in one place.

The rest of the harness uses Hypothesis's public API only (``given``, ``settings``, strategies,
``event``, ``target``, ``reject``, ``seed``, ``Phase``, ``hypothesis.errors``, the public database
classes); ``tests/fuzz/test_layers.py`` checks that no other module reaches past it. What is
here, why, and what a Hypothesis without it does:

The runner (:mod:`fuzz.engine`):

* ``MAX_SHRINKING_SECONDS`` (:func:`shrink_budget`): Hypothesis's cap on the time spent
  shrinking one failure, a module constant meant to be patched; the profiles set it (a compiled
  backend pays a compile per kernel variant a shrink step tries). Without it: Hypothesis's own
  cap.
* ``ParetoFront`` (:func:`without_pareto_front`): switched off during a hunt (see
  :class:`_NoParetoFront`). Without it: nothing to switch off.
* ``ConjectureRunner._log_phase_statistics`` (:func:`track_phases`): wrapped to note the phase
  the runner enters, so that an example can tell a shrink step from a fresh one
  (:func:`in_shrink_phase`: shrinking may compile past a hunt's compile share). Without it: no
  example counts as a shrink step.
* ``hypothesis.statistics.collector`` (:func:`statistics`): the statistics of each run, which
  say whether Hypothesis stopped because its search space is exhausted; ``INVALID_PER_VALID``
  and ``INVALID_THRESHOLD_BASE`` (:func:`exhausted`): when it counts invalid examples as having
  ended a run. Without them: no run is taken as exhaustive.
* ``current_build_context()`` (:func:`current_choices`, :func:`is_final_replay`): the choices
  made for the running example (saved with a finding: replaying them gives its case), and
  whether the example is Hypothesis's final replay of a failure (which must reproduce it,
  whatever it compiles). Without them: no choices (a finding is kept, not replayable), and no
  example counts as the final replay.
* ``_hypothesis_internal_add_digest``, ``_hypothesis_internal_database_key`` and
  ``_hypothesis_internal_use_settings`` set on a test (:func:`add_digest`,
  :func:`set_database_key`, :func:`keep_database`): the database key and derandomized seed stay
  the same across harness versions (Hypothesis would hash the test function's source), and a
  seeded run keeps its database. Without them: Hypothesis's own key and seed (a database of an
  older harness version no longer replays), and a seeded run without a database.
* ``choices_to_bytes`` and ``choices_from_bytes``: how a choice sequence is stored in an example
  database (a shrink stage's start, a campaign's records). Hypothesis's own format, required:
  a Hypothesis without them does not run this harness (imported at load).

* ``hypothesis.reporting.with_reporter`` (:func:`reports_to`): what Hypothesis says while it
  runs a hunt (its falsifying examples, ``@seed(...)`` hints, its warning that shrinking took
  too long) goes to the harness, which says what applies in its own words; printed to stdout,
  it flooded a campaign's console. Without it: Hypothesis prints as it does.

Strategies that reuse structures (:mod:`strategies.reuse`), on the ConjectureData a composite's
``draw`` runs on:

* its choice nodes, provider, prefix and index (:func:`choice_data`, :func:`generating`,
  :func:`choice_count`, :func:`recorded_choices`, :func:`providing`): a reused structure is drawn
  by answering its draws from a record, through a provider that stands in for the data's own.
  Where something is missing, :func:`choice_data` gives None and the structure is drawn fresh.
* ``Spans.mutator_groups`` and ``Optimiser.run`` (:func:`spare_spans`): Hypothesis's mutations
  and hill climbing leave a reused structure alone but at the memo's explore rate. Without them:
  Hypothesis's own variations.

Elsewhere:

* ``hypothesis.configuration.set_hypothesis_home_dir`` (:func:`set_home_dir`): where Hypothesis
  keeps its own files, for this process (its workers read ``HYPOTHESIS_STORAGE_DIRECTORY``).
  Without it: the environment variable only.
* ``settings._profiles`` (:func:`registered_profiles`): the profiles registered, for a usage
  error's message. Without it: None (the caller names the harness's own).

Every patch of Hypothesis's classes is installed once and marked (``_kernel_fuzz``); the
context managers put what they changed back.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis.control import current_build_context
from hypothesis.database import choices_from_bytes, choices_to_bytes

__all__ = [
    "add_digest",
    "choice_count",
    "choice_data",
    "choices_from_bytes",
    "choices_to_bytes",
    "current_choices",
    "exhausted",
    "generating",
    "in_shrink_phase",
    "is_final_replay",
    "keep_database",
    "providing",
    "recorded_choices",
    "registered_profiles",
    "reports_to",
    "set_database_key",
    "set_home_dir",
    "shrink_budget",
    "spare_spans",
    "statistics",
    "track_phases",
    "without_pareto_front",
]


# The runner ----------------------------------------------------------------------------------


class _NoParetoFront:
    """Stands in for Hypothesis's Pareto front of ``target()`` scores during a hunt.

    With a database, Hypothesis keeps every example that is not dominated in score *and* in the
    strategy branches it took (nearly all of ours), sorts them by a shortlex key on every insert,
    saves them to the database and spends examples shortening them. Measured on a softmax target
    with a fast kernel: 8 ms of a 20 ms example, for a corpus a fuzzer does not use (failing
    examples are saved and shrunk as before; ``target()`` still drives the hill climbing).
    """

    def __init__(self, random: Any) -> None:
        pass

    def on_evict(self, f: Any) -> None:
        pass

    def add(self, data: Any) -> bool:
        return False

    def __contains__(self, data: Any) -> bool:
        return False

    def __len__(self) -> int:
        return 0

    def __getitem__(self, i: int) -> Any:
        raise IndexError(i)


@contextlib.contextmanager
def shrink_budget(seconds: float) -> Any:
    """Hypothesis's cap on the time spent shrinking one failure, set to ``seconds`` (its
    documented way: the module constant ``MAX_SHRINKING_SECONDS`` is meant to be patched)."""
    try:
        from hypothesis.internal.conjecture import engine as conjecture
    except ImportError:
        yield
        return
    saved = getattr(conjecture, "MAX_SHRINKING_SECONDS", None)
    if saved is None:
        yield
        return
    conjecture.MAX_SHRINKING_SECONDS = seconds  # type: ignore[attr-defined,assignment]
    try:
        yield
    finally:
        conjecture.MAX_SHRINKING_SECONDS = saved  # type: ignore[attr-defined]


# The phase of the Hypothesis run in progress in this thread ("generate", "shrink"...), where
# Hypothesis's runner says (``track_phases``); None elsewhere.
_phase = threading.local()


def track_phases() -> None:
    """Has Hypothesis's runner note the phase it enters (its ``_log_phase_statistics``), so that
    an example can tell a shrink step from a fresh one (idempotent; a Hypothesis without that
    method leaves every example unmarked)."""
    try:
        from hypothesis.internal.conjecture.engine import ConjectureRunner
    except ImportError:
        return
    logged = ConjectureRunner.__dict__.get("_log_phase_statistics")
    if logged is None or getattr(logged, "_kernel_fuzz", False):
        return

    @contextlib.contextmanager
    def noted(self: Any, phase: str) -> Any:
        before = getattr(_phase, "name", None)
        _phase.name = phase
        try:
            with logged(self, phase):
                yield
        finally:
            _phase.name = before

    noted._kernel_fuzz = True  # type: ignore[attr-defined]
    ConjectureRunner._log_phase_statistics = noted  # type: ignore[method-assign,assignment]


@contextlib.contextmanager
def reports_to(callback: Callable[[str], None]) -> Iterator[None]:
    """Inside it, what Hypothesis reports (its ``report()`` and verbose reports: a falsifying
    example, a ``@seed`` hint, "spent more than five minutes working to shrink") is handed to
    ``callback`` as text instead of being printed."""
    try:
        from hypothesis.reporting import with_reporter
    except ImportError:  # a Hypothesis without it prints as it does
        yield
        return

    def said(value: object) -> None:
        callback(value if isinstance(value, str) else str(value))

    with with_reporter(said):
        yield


def in_shrink_phase() -> bool:
    """Whether the example now running is a step of Hypothesis's shrinking."""
    return getattr(_phase, "name", None) == "shrink"


@contextlib.contextmanager
def without_pareto_front() -> Any:
    """Hypothesis's Pareto front of ``target()`` scores switched off (:class:`_NoParetoFront`)."""
    try:
        from hypothesis.internal.conjecture import engine as conjecture
    except ImportError:  # a Hypothesis without it: nothing to switch off
        yield
        return
    saved = getattr(conjecture, "ParetoFront", None)
    if saved is None:
        yield
        return
    conjecture.ParetoFront = _NoParetoFront  # type: ignore[attr-defined,misc,assignment]
    try:
        yield
    finally:
        conjecture.ParetoFront = saved  # type: ignore[attr-defined,misc]


@contextlib.contextmanager
def statistics(callback: Callable[[dict[str, Any]], None]) -> Any:
    """Hands Hypothesis's statistics of each run to ``callback`` (and to whoever collected them
    before: pytest's ``--hypothesis-show-statistics``)."""
    try:
        from hypothesis.statistics import collector
    except ImportError:  # a Hypothesis without it: no statistics, no exhaustion verdicts
        yield
        return
    outer = collector.value

    def both(stats: dict[str, Any]) -> None:
        callback(stats)
        if outer is not None:
            outer(stats)

    with collector.with_value(both):  # type: ignore[arg-type]
        yield


def exhausted(stats: list[dict[str, Any]], failed: bool) -> bool:
    """Whether Hypothesis stopped a run because every distinct example has been tried (its
    choice tree is exhausted), not at a limit or after a failure: a finished search space.
    ``stats``: the run's statistics (:func:`statistics`)."""
    if failed or not stats:
        return False
    last = stats[-1]
    if last.get("stopped-because") != "nothing left to do" or "shrink-phase" in last:
        return False
    generate = last.get("generate-phase")
    if not generate:
        return False
    statuses = [c.get("status") for c in generate.get("test-cases", [])]
    try:
        from hypothesis.internal.conjecture.engine import (
            INVALID_PER_VALID,
            INVALID_THRESHOLD_BASE,
        )
    except ImportError:
        return False
    valid = statuses.count("valid")
    invalid = len(statuses) - valid
    return invalid <= INVALID_THRESHOLD_BASE + INVALID_PER_VALID * valid


def current_choices() -> tuple[Any, ...]:
    """The choices Hypothesis has made for the running example so far (replaying them gives the
    same case and property parameters); empty where the running Hypothesis does not expose them."""
    try:
        return tuple(current_build_context().data.choices)
    except Exception:
        return ()


def is_final_replay() -> bool:
    """Whether the running example is Hypothesis's final replay of a failing example (the one
    that reports it); False where the running Hypothesis does not say."""
    return bool(getattr(current_build_context(), "is_final", False))


def add_digest(test: Any, digest: bytes) -> None:
    """Has Hypothesis derive ``test``'s derandomized seed from ``digest``, not from the source of
    the function it wraps (a test built by ``given``)."""
    test.hypothesis.inner_test._hypothesis_internal_add_digest = digest


def set_database_key(test: Any, key: bytes) -> None:
    """Has Hypothesis save and replay ``test``'s examples under ``key`` in its database."""
    test._hypothesis_internal_database_key = key


def keep_database(test: Any, database: Any) -> None:
    """Gives a seeded ``test`` (``hypothesis.seed``, which turns the database off: a seeded run
    is meant to be reproducible) its ``database`` back."""
    used = getattr(test, "_hypothesis_internal_use_settings", None)
    if used is not None:
        test._hypothesis_internal_use_settings = settings(used, database=database)


# Strategies that reuse structures --------------------------------------------------------------

# The kinds of choice a structure's record keeps (a provider's ``draw_<kind>``).
_KINDS = ("integer", "boolean", "float", "string", "bytes")


def choice_data(draw: Callable[..., Any]) -> Any:
    """The ConjectureData behind a composite's ``draw`` (None where it is not what reuse needs)."""
    data = getattr(draw, "__self__", None)
    needed = ("nodes", "provider", "prefix", "index")
    if data is None or not all(hasattr(data, a) for a in needed):
        return None
    return data


def data_of(data_object: Any) -> Any:
    """The ConjectureData behind ``st.data()``'s object (None where it has none): the choices a
    draw made through it are recorded there (``strategies.reuse``'s draws beside a structure).
    Hypothesis keeps it as the object's ``conjecture_data``; without it, such draws are not
    kept with their structure (they are drawn as any other)."""
    return getattr(data_object, "conjecture_data", None)


def generating(data: Any) -> bool:
    """Whether the next draws of ``data`` come from its provider (generation), not from a given
    choice sequence (a replay, a shrink step, a mutation of an earlier example)."""
    prefix = data.prefix
    return prefix is not None and data.index >= len(prefix)


def zero_extending(data: Any) -> bool:
    """Whether the next draws of ``data`` are the simplest choices past a given prefix: one of
    the zero-extensions Hypothesis runs early in a run (each novel prefix tried with the
    simplest rest, while ``max_examples // 10``, at most 50, examples are valid and no five of
    them in a row were invalid), not its first example (nothing but the simplest choices)."""
    try:
        from hypothesis.internal.conjecture.choice import ChoiceTemplate
    except ImportError:
        return False
    prefix = data.prefix
    if not prefix or len(prefix) < 2 or data.index < len(prefix) - 1:
        return False
    last = prefix[-1]
    return isinstance(last, ChoiceTemplate) and getattr(last, "type", None) == "simplest"


def end_invalid(data: Any, why: str) -> None:
    """Ends ``data``'s example as invalid from inside a draw, its choices so far its whole choice
    sequence (a conclusion Hypothesis's choice tree records where it stands), not as a rejected
    assumption: a ``.map()`` on the way catches that one, discards its span and draws again, and
    a span discarded at the start of the choice sequence left the tree with a branch Hypothesis's
    novel-prefix search then failed an assertion on (a campaign's harness error)."""
    mark = getattr(data, "mark_invalid", None)
    if mark is None:
        from hypothesis import reject

        reject()
    mark(why)


def choice_count(data: Any) -> int:
    """How many choices ``data`` holds so far (forced ones included): where the next one goes."""
    return len(data.nodes)


def _recorded(node: Any) -> bool:
    """Whether a choice node is one a structure's record keeps: the choices a provider makes,
    not the forced ones (a list's least length), which the strategy makes itself again."""
    return getattr(node, "type", None) in _KINDS and not getattr(node, "was_forced", False)


def recorded_count(data: Any, start: int) -> int:
    """How many choices :func:`recorded_choices` would give from ``start`` on."""
    return sum(1 for n in data.nodes[start:] if _recorded(n))


def recorded_choices(data: Any, start: int) -> tuple[tuple[str, Any, dict[str, Any]], ...]:
    """The choices ``data``'s provider made from choice ``start`` on, each as (kind, value,
    constraints): what a provider answering ``draw_<kind>(**constraints)`` with ``value`` makes
    again."""
    return tuple((n.type, n.value, dict(n.constraints)) for n in data.nodes[start:] if _recorded(n))


def draw_aside(
    strategy: Any, rng: Any, before: Callable[[Any], None] | None = None
) -> tuple[Any, Any]:
    """Draws ``strategy`` on a ConjectureData of its own, generated from ``rng`` (a
    ``random.Random``) by Hypothesis's own provider, outside any test: returns (its data, the
    value); ``before(data)`` is called before the draw. What it draws touches no running test's
    choices; its record (:func:`recorded_choices` from 0) makes the same value again through a
    replaying provider. Raises what the strategy raises (a filter's ``UnsatisfiedAssumption``), and
    ``ValueError`` where it ran out of choices."""
    from hypothesis.control import BuildContext
    from hypothesis.internal.conjecture.data import ConjectureData

    data = ConjectureData(random=rng)
    if before is not None:
        before(data)
    from hypothesis.errors import StopTest

    try:
        with BuildContext(data, is_final=False, wrapped_test=None):  # type: ignore[arg-type]
            value = data.draw(strategy)
    except StopTest:  # (a BaseException: it would pass through a caller's ``except``)
        raise ValueError("the strategy ran out of choices") from None
    return data, value


def provider_of(data: Any) -> Any:
    """The primitive provider ``data`` draws from now."""
    return data.provider


@contextlib.contextmanager
def providing(data: Any, provider: Any) -> Iterator[None]:
    """Inside it, ``data`` draws from ``provider`` (one with ``draw_integer``, ``draw_boolean``,
    ``draw_float``, ``draw_string`` and ``draw_bytes``, as Hypothesis's own)."""
    saved = data.provider
    data.provider = provider
    try:
        yield
    finally:
        data.provider = saved


def _span_ranges(spans: Any, label: str) -> list[tuple[int, int]]:
    """The choice index ranges of an example's spans drawn with ``label`` (empty where the spans
    are not what this reads)."""
    try:
        return [(span.start, span.end) for span in spans if span.label == label]
    except Exception:
        return []


def spare_spans(label: str, sparing: Callable[[], Callable[[], bool] | None]) -> None:
    """Has Hypothesis's own variations of an example leave the spans drawn with ``label`` alone,
    where ``sparing`` says: it gives None (vary as Hypothesis does) or a function asked, at each
    variation that would reach into such a span, whether to spare it this time.

    Mutations (a few copies of one span's choices over another span with the same label) leave
    out the spans that overlap one of ``label`` (``Spans.mutator_groups``); the hill climber's
    steps into one (on ``target()`` scores, one choice at a time) are refused as an overrun (it
    moves on to the next choice). Installed once (idempotent; a Hypothesis without these keeps
    its own)."""
    try:
        from hypothesis.internal.conjecture.data import Overrun, Spans
        from hypothesis.internal.conjecture.optimiser import Optimiser
    except ImportError:
        return
    _spare_mutations(Spans, label, sparing)
    _spare_hill_climbing(Optimiser, Overrun, label, sparing)


def _spare_mutations(
    spans_class: Any, label: str, sparing: Callable[[], Callable[[], bool] | None]
) -> None:
    original = spans_class.__dict__.get("mutator_groups")
    compute = getattr(original, "func", None)
    if compute is None or getattr(original, "_kernel_fuzz", False):
        return

    def mutator_groups(self: Any) -> Any:
        groups = compute(self)
        spare = sparing()
        if spare is None or not groups:
            return groups
        spared_ranges = _span_ranges(self, label)
        if not spared_ranges or not spare():
            return groups
        kept_groups = []
        for group in groups:
            kept = {
                (a, b)
                for a, b in group
                if not any(a < end and b > start for start, end in spared_ranges)
            }
            if len(kept) >= 2:
                kept_groups.append(kept)
        return kept_groups

    patched = functools.cached_property(mutator_groups)
    patched.__set_name__(spans_class, "mutator_groups")
    patched._kernel_fuzz = True  # type: ignore[attr-defined]
    spans_class.mutator_groups = patched


def _spare_hill_climbing(
    optimiser_class: Any,
    overrun: Any,
    label: str,
    sparing: Callable[[], Callable[[], bool] | None],
) -> None:
    run = optimiser_class.__dict__.get("run")
    if run is None or getattr(run, "_kernel_fuzz", False):
        return

    def guarded_run(self: Any) -> Any:
        spare = sparing()
        engine: Any = getattr(self, "engine", None)
        test = getattr(engine, "cached_test_function", None)
        if spare is None or engine is None or test is None:
            return run(self)

        def step(choices: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                base = self.current_data.choices
                spared_ranges = _span_ranges(self.current_data.spans, label)
                at = next(
                    (i for i, (a, b) in enumerate(zip(choices, base, strict=False)) if a != b),
                    min(len(choices), len(base)),
                )
            except Exception:
                return test(choices, *args, **kwargs)
            inside = any(start <= at < end for start, end in spared_ranges)
            if inside and spare():
                return overrun
            return test(choices, *args, **kwargs)

        engine.cached_test_function = step
        try:
            return run(self)
        finally:
            del engine.cached_test_function

    guarded_run._kernel_fuzz = True  # type: ignore[attr-defined]
    optimiser_class.run = guarded_run


# Elsewhere -------------------------------------------------------------------------------------


def set_home_dir(directory: str) -> None:
    """Has Hypothesis keep its own files (its database's default folder, its cache of the
    constants of the modules under the current folder) in ``directory``, in this process; a
    Hypothesis without the setting reads ``HYPOTHESIS_STORAGE_DIRECTORY`` only."""
    try:
        from hypothesis.configuration import set_hypothesis_home_dir
    except ImportError:
        return
    set_hypothesis_home_dir(directory)


def keep_hypothesis_files_out_of_cwd(out: Path) -> None:
    """Hypothesis's own files (its cache of the constants of the modules under the current
    folder, ``.hypothesis/``) go to the project's cache folder (``backends.cache_dir()``:
    ``$KERNEL_FUZZ_CACHE_DIR`` or ``~/.cache/kernel-fuzz``, shared by campaigns, which keeps it
    warm: half a second per fresh campaign here), or to ``out/.hypothesis`` where the cache is
    ``off``; never into the current folder. For this process and its workers; unless
    ``HYPOTHESIS_STORAGE_DIRECTORY`` says where already."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return
    from fuzz.backends import cache_dir

    off = os.environ.get("KERNEL_FUZZ_CACHE_DIR") == "off"
    home = str(out.absolute() / ".hypothesis") if off else os.path.join(cache_dir(), "hypothesis")
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = home  # the workers read it when they start
    set_home_dir(home)


def registered_profiles() -> list[str] | None:
    """The names of the Hypothesis settings profiles registered (None where Hypothesis does not
    say)."""
    profiles = getattr(settings, "_profiles", None)
    return None if not profiles else list(profiles)
