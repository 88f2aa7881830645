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
# Seconds of a shrink's kept back for replaying its example alone at its end (:func:`_alone`),
# and for checking it on the interpreter of its kernel source (:func:`_on_twin`).
ALONE_SECONDS = IMPORT_SECONDS + MIN_SECONDS
TWIN_SECONDS = IMPORT_SECONDS + MIN_SECONDS
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
    # Its example replayed alone in a fresh process (:func:`_alone`), where no child launched it:
    # None (not replayed), or the keys (``fuzz.signatures.bug_key``) it failed as there, its
    # own where it lost that process's context too (empty: it passed).
    alone: list[str] | None = None
    # Its example checked on the interpreter of its kernel source (:func:`_on_twin`): None (not
    # checked), else the interpreter's name, and the key it failed as there and what held for it
    # (``key`` None: it passed; ``error``: the check raised).
    twin: dict[str, Any] | None = None

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

    def twin_note(self) -> str:
        """What its example did on the interpreter of its kernel source ("": not checked)."""
        twin = self.twin
        if twin is None:
            return ""
        said = twin.get("error") or (
            f"it fails as {twin['key']}" if twin.get("key") else "it passes"
        )
        return (
            f"checked on {twin['backend']} (the interpreter of its kernel source, where an access "
            f"out of bounds does not fault), in a fresh process: {said}"
        )

    def alone_note(self, key: str) -> str:
        """What its example did replayed alone in a fresh process ("": not replayed)."""
        if self.alone is None:
            return ""
        if key in self.alone:
            return "replayed alone in a fresh process: it lost that process's context too"
        said = ", ".join(self.alone) if self.alone else "it passed"
        return (
            f"not reproduced alone: replayed in a fresh process, {said}. CUDA reports an "
            "illegal access at a later call than the launch that made it: the crash may be an "
            "earlier example's of the process that met it"
        )


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
    out = Isolated(found)
    known = _known_crash(found)
    if known is None or not found.choices or not found.key:
        out.stopped = "no exception or choices recorded to start from"
        return out
    deadline = time.monotonic() + seconds
    spec = _spec(target, backend, options, found, narrowing, known)
    twin = _twin_of(backend)
    with tempfile.TemporaryDirectory(prefix="kernel-fuzz-isolated-") as tmp:
        kept = ALONE_SECONDS + (TWIN_SECONDS if twin else 0)
        _shrink(Path(tmp), out, found, spec, deadline - kept)
        if deadline - time.monotonic() >= MIN_SECONDS:
            # Does it crash on its own? No child launched the first example (each started from
            # it as known), and a child's smaller crash may be its own earlier example's.
            out.alone = _alone(Path(tmp), out, spec, deadline)  # (a replay: it ends early)
        if twin and deadline - time.monotonic() >= MIN_SECONDS:
            out.twin = _on_twin(Path(tmp), out, {**spec, "backend": twin}, deadline)
    return out


def _twin_of(backend: Backend) -> str | None:
    """The name of the interpreter of ``backend``'s kernel source, where it runs here."""
    from fuzz.backends import get_backend

    if backend.interpret or backend.twin is None:
        return None
    try:
        return backend.twin if get_backend(backend.twin).available else None
    except Exception:
        return None


def _on_twin(tmp: Path, out: Isolated, spec: dict[str, Any], deadline: float) -> dict[str, Any]:
    """``out.found``'s example checked once on the interpreter of its kernel source (the spec's
    ``backend``), in a fresh child: what it failed as there and what held for it. A GPU faults
    on a read far past an allocation only, so an out-of-bounds read crashes large examples
    alone (a planted Pallas jagged kernel's crash on an H200 stayed at 50,880 elements beside
    its 5-element ``masking`` row): on the interpreter, where nothing faults, the same example
    shows what the kernel computed (``fuzz.ledger`` weighs it against the rows of its kernel)."""
    left = deadline - time.monotonic()
    check = {**spec, "check": True, "case": out.found.case, "params": out.found.params}
    code, reports, tail = _run_child(tmp, out.children, check, left)
    out.children += 1
    if code != DONE or not reports:
        return {"backend": spec["backend"], "error": f"the check did not end ({tail})"[:300]}
    return {"backend": spec["backend"], **reports[0]}


def _spec(
    target: Target,
    backend: Backend,
    options: HuntOptions,
    found: Found,
    narrowing: dict[str, tuple[Any, ...]],
    known: tuple[str, str],
) -> dict[str, Any]:
    """A child's spec for ``found``, a crash that lost the context raising ``known``."""
    from fuzz.target import target_plugin

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
    return spec


def _shrink(tmp: Path, out: Isolated, found: Found, spec: dict[str, Any], deadline: float) -> None:
    """The children of :func:`shrink`, one after the other, until one shrinks to the end, two in
    a row bring nothing smaller, or ``deadline`` (``time.monotonic()``) comes."""
    from fuzz.reproducer import kills_context

    stalls = 0
    while True:
        left = deadline - time.monotonic()
        if left < MIN_SECONDS:
            out.stopped = out.stopped or "its time ran out"
            return
        spec.update(choices=out.found.choices, seconds=max(1.0, left - IMPORT_SECONDS))
        code, reports, tail = _run_child(tmp, out.children, spec, left)
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
            return
        if code == _KILLED:
            out.stopped = "a child did not end within the time left; killed"
            return
        if code != LOST:
            out.stopped = f"a child ended with status {code}: {tail}"[:400]
            return
        stalls = 0 if progress else stalls + 1
        if stalls >= STALLS:
            out.stopped = f"{STALLS} children in a row found nothing smaller"
            return


def _alone(tmp: Path, out: Isolated, spec: dict[str, Any], deadline: float) -> list[str] | None:
    """``out.found``'s example replayed once, alone, in a fresh child that launches it for
    real: the keys it failed as there (its own where it lost that child's context), or None
    where the child did not end in the time left. The example that lost a process's context
    may not be the launch that did the damage: CUDA reports an illegal access at a later call
    (on an H200 JAX's ``mha`` lost its context in a transpose of the harness's own,
    ``jit_transpose``), and a child's smaller crash may be its own earlier example's."""
    left = deadline - time.monotonic()
    alone = {
        **spec,
        "known": {},
        "avoid": set(),
        "alone": True,
        "choices": out.found.choices,
        "seconds": max(1.0, left - IMPORT_SECONDS),
    }
    code, reports, _ = _run_child(tmp, out.children, alone, left)
    out.children += 1
    if code not in (DONE, LOST):
        return None
    keys = {str(rec["found"].key) for rec in reports if rec["found"].key}
    if code == LOST:
        keys.add(str(out.found.key))
    return sorted(keys)


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
