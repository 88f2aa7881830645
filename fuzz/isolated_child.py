"""The child process of :func:`fuzz.isolated.shrink`: one life of a lost context's crash shrink.

Run as ``python -c "from fuzz.isolated_child import child_main; ..." SPEC OUT`` (nothing imports
this module: the engine, which it runs, imports :mod:`fuzz.isolated`).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import sys
from pathlib import Path
from typing import Any

from hypothesis import Phase

from fuzz import known_crashes
from fuzz.isolated import DONE, LOST
from fuzz.results import Found


def child_main(argv: list[str]) -> int:
    """A child of :func:`shrink`: ``SPEC OUT``. Shrinks from the spec's choices, writing each
    example of the bug it meets to ``OUT`` at once (a pickled list, replaced atomically)."""
    from fuzz.backends import get_backend
    from fuzz.engine import Hooks, hunt
    from fuzz.reproducer import load_plugins
    from fuzz.shrink import SHRINK_PHASES, Stage
    from fuzz.target import get

    spec_path, out_path = Path(argv[0]), Path(argv[1])
    spec = pickle.loads(spec_path.read_bytes())
    if spec["plugin"]:
        load_plugins([spec["plugin"]])
    target, backend = get(spec["target"]), get_backend(spec["backend"])
    if spec.get("check"):
        _check(spec, target, backend, out_path)
        sys.stdout.flush()
        os._exit(DONE)
    known_crashes.KNOWN.update(spec["known"])
    known_crashes.AVOID.update(spec["avoid"])
    if spec.get("alone"):
        known_crashes.ALONE.append(True)
    reports: list[dict[str, Any]] = []

    def keep(result: Any, found: Found) -> None:
        rec = dataclasses.replace(found, plots=[], seen_as=[], interpreted=None, reproducer=None)
        reports.append({"found": rec, "examples": result.examples})
        part = out_path.with_suffix(".part")
        part.write_bytes(pickle.dumps(reports))
        part.replace(out_path)

    seconds = float(spec["seconds"])
    start = (tuple(spec["choices"]),)
    if spec.get("alone"):  # its example replayed once, each way it fails kept
        stage = Stage(start=start, phases=(Phase.reuse,))
    else:
        stage = Stage(start=start, phases=SHRINK_PHASES, shrink_seconds=seconds, only=spec["key"])
    # Every step is a new shape: the stage's time bounds its compiles, not the compile share.
    options = dataclasses.replace(spec["options"], compile_share=None)
    run = hunt(
        target,
        backend,
        options,
        database=None,
        hard_limit=max(1.0, seconds),
        stage=stage,
        narrowing=spec["narrowing"],
        hooks=Hooks(on_found=keep),
    )
    final = run.of_key(spec["key"])
    if spec.get("alone"):
        for f in run.found.values():
            keep(run, f)
    elif final is not None:
        keep(run, final)
    sys.stdout.flush()
    # A child whose context is lost exits at once (nothing more may touch the device).
    os._exit(LOST if run.stopped == "context-lost" else DONE)


def _check(spec: dict[str, Any], target: Any, backend: Any, out_path: Path) -> None:
    """The spec's case checked once on its backend (an interpreter), written to ``out_path``:
    the key it failed as (None: it passed) and what held for it, or the check's error. Nothing
    runs on the compiled backend: no differential run."""
    from fuzz.failures import bug_key
    from fuzz.profiles import HuntOptions
    from fuzz.properties import check_case
    from fuzz.signatures import conditions

    case = spec["case"]
    # (no differential run: its twin is the compiled kernel whose launch lost a context)
    options = HuntOptions.of(spec["options"], differential=False)
    try:
        outcome = check_case(target, backend, case, params=spec["params"], **options.check_kwargs())
        f = outcome.finding
        rec: dict[str, Any] = {"key": None if f is None else bug_key(f)}
        if f is not None:
            rec["holds"] = sorted(conditions(target, case, f.hazards))
    except Exception as e:  # (what it said is kept: never the hunt's error)
        rec = {"error": f"the check raised {type(e).__name__}: {e}"[:300]}
    out_path.write_bytes(pickle.dumps([rec]))
