"""Shrinking a failure that kills its process's CUDA context: one child process per crash.

A sticky CUDA error (an illegal address, a launch failure) poisons the process that met it: every
later launch there fails, so the engine cannot shrink such a crash where it found it (shrinking
on would walk to the simplest example, every launch failing now). A GPU campaign's fla-core
backward row stayed at 241,664 elements for that reason. Here the crash is shrunk in child
processes, each a shrink stage of :func:`fuzz.engine.hunt` on the same target and backend:

* the child (``fuzz.isolated_child``) starts from the smallest example known to crash so (its
  Hypothesis choices), and does not launch it again (``fuzz.known_crashes``): Hypothesis
  shrinks from it;
* a smaller example that crashes the same way for real loses the child's context: the engine
  reports it (the child writes it down at once) and ends the child's hunt. The next child starts
  from it, that example now known;
* an example that loses the context with another bug ends a child too; the next one declines
  it (``fuzz.known_crashes.AVOID``), so that the shrink cannot meet it again;
* a child that shrinks to the end without losing its context, a stall (two children without
  progress) or the time given ends the shrink.

A child costs its imports and its compiles (a few seconds each on a GPU host); each step of
progress ends one. The parent (the process that lost its context) launches nothing: it only
waits.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fuzz.results import NOT_SMALLER

if TYPE_CHECKING:
    from fuzz.backends import Backend
    from fuzz.profiles import HuntOptions
    from fuzz.results import Found
    from fuzz.target import Target

# Seconds a child is given at least, beyond its imports; below it no child is started. A
# child's shrink is given what is left less IMPORT_SECONDS (torch, JAX, Triton and the plugin
# load first); past what is left and GRACE_SECONDS it is killed (a child that hangs: the slice
# that started it must end in its time, or the campaign kills it past its hard limit).
MIN_SECONDS = 8.0
IMPORT_SECONDS = 8.0
GRACE_SECONDS = 5.0
# Children in a row that brought no progress before the shrink gives up.
STALLS = 2
# Why a shrink stopped where its last child shrank to the end without losing its context.
NOTHING_SMALLER = "nothing smaller crashes so"
# Exit statuses of a child: its shrink ran to the end; an example lost its context.
DONE, LOST = 0, 3
_KILLED = -9  # (this process killed it: its time was up)
_CHILD = (
    "import sys; from fuzz.isolated_child import child_main; sys.exit(child_main(sys.argv[1:]))"
)


def _known_crash(found: Found) -> tuple[str, str] | None:
    details = found.finding.details
    name, text = details.get("exception"), details.get("text")
    if not isinstance(name, str) or not name.isidentifier() or not isinstance(text, str):
        return None
    return name, text


@dataclasses.dataclass
class Isolated:
    """What :func:`shrink` did: its best example (``found``), how many children it started, the
    examples they ran and why it stopped."""

    found: Found
    children: int = 0
    examples: int = 0
    stopped: str = ""

    def note(self, start_size: int) -> str:
        size = self.found.case.size
        done = (
            f"shrunk in {self.children} child process(es), one per crash (a sticky CUDA error "
            f"loses a process's context): {start_size:,} -> {size:,} elements"
        )
        if size >= start_size and self.stopped == NOTHING_SMALLER:
            # Shrunk to its end: its smaller examples ran and kept their context (an illegal
            # access can need a read or write far past an allocation to fault).
            return (
                f"{NOT_SMALLER} {self.children} child process(es) shrank from it to the end and "
                "no smaller example they ran lost its context so (a sticky CUDA error loses a "
                "process's context: one child per crash)"
            )
        if size >= start_size:
            done = (
                f"not shrunk: a sticky CUDA error lost the process's context; "
                f"{self.children} child process(es) found no smaller example that crashes so"
            )
        return f"{done} ({self.stopped})" if self.stopped else done


def shrink(
    target: Target,
    backend: Backend,
    options: HuntOptions,
    found: Found,
    *,
    narrowing: dict[str, tuple[Any, ...]],
    seconds: float,
) -> Isolated:
    """Shrinks ``found`` (a crash that lost this process's CUDA context) in child processes for
    at most ``seconds`` (see the module docstring); returns the smallest example that crashed so
    and what it took. Nothing here launches a kernel."""
    from fuzz.reproducer import kills_context
    from fuzz.target import target_plugin

    out = Isolated(found)
    known = _known_crash(found)
    if known is None or not found.choices or not found.key:
        out.stopped = "no exception or choices recorded to start from"
        return out
    deadline = time.monotonic() + seconds
    spec: dict[str, Any] = {
        "target": target.name,
        "plugin": target_plugin(target),
        "backend": backend.name,
        "options": options,
        "narrowing": narrowing,
        "key": found.key,
        "known": {found.case.digest(): known},
        "avoid": set(),
    }
    stalls = 0
    with tempfile.TemporaryDirectory(prefix="kernel-fuzz-isolated-") as tmp:
        while True:
            left = deadline - time.monotonic()
            if left < MIN_SECONDS:
                out.stopped = out.stopped or f"its {seconds:.0f} s spent"
                return out
            spec.update(choices=out.found.choices, seconds=max(1.0, left - IMPORT_SECONDS))
            code, reports, tail = _run_child(Path(tmp), out.children, spec, left)
            out.children += 1
            progress = False
            for rec in reports:
                out.examples = max(out.examples, rec["examples"])
                f: Found = rec["found"]
                digest = f.case.digest()
                if f.key != found.key:
                    if kills_context(f.finding):
                        spec["avoid"].add(digest)
                    continue
                crash = _known_crash(f)
                if crash is not None and kills_context(f.finding):
                    spec["known"][digest] = crash
                if f.case.size < out.found.case.size or (
                    f.case.size == out.found.case.size and len(f.choices) < len(out.found.choices)
                ):
                    out.found, progress = f, True
            if code == DONE:
                out.stopped = NOTHING_SMALLER
                return out
            if code == _KILLED:
                out.stopped = "a child did not end within the time left; killed"
                return out
            if code != LOST:
                out.stopped = f"a child ended with status {code}: {tail}"[:400]
                return out
            stalls = 0 if progress else stalls + 1
            if stalls >= STALLS:
                out.stopped = f"{STALLS} children in a row found nothing smaller"
                return out


def _run_child(
    tmp: Path, n: int, spec: dict[str, Any], seconds: float
) -> tuple[int, list[dict[str, Any]], str]:
    """Runs one child on ``spec``; (its exit status, what it reported, its output's last
    lines)."""
    spec_path, out_path, log_path = (tmp / f"{n}.{x}" for x in ("spec", "out", "log"))
    spec_path.write_bytes(pickle.dumps(spec))
    root = str(Path(__file__).resolve().parent.parent)  # the fuzz package's, for the child
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(spec_path), str(out_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:  # its imports, then its shrink (bounded by its own hard limit), then a margin
            code = proc.wait(seconds + GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            code = _KILLED
        finally:  # also when this process is stopped: the child never outlives it
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    reports: list[dict[str, Any]] = []
    if out_path.exists():
        try:
            reports = pickle.loads(out_path.read_bytes())
        except Exception:  # a child killed mid-write: its earlier file was replaced atomically
            reports = []
    lines = log_path.read_text(errors="replace").strip().splitlines()
    return code, reports, " | ".join(lines[-3:])
