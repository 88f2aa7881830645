"""What a worker that died, hung or was left behind leaves: findings with reproducers, or notes.

A worker persists the example it is about to run (its *in-flight record*, see
:mod:`fuzz.campaign.worker`) before every launch, so whatever ends it -- a segfault, an abort, a
lost CUDA context, the OOM killer, a kill for a hang -- the example survives it:

* a death becomes a ``crash`` finding (:meth:`Faults.death_record`), with a reproducer that
  replays in a child process;
* an example that outlived the per-example timeout is a *suspected* hang: it is replayed in a
  fresh worker with ``hang_confirm_factor`` times the time (a first compilation of a large
  kernel outlasts a timeout as a hang does), and only a second timeout makes it a ``hang``
  (:meth:`Faults.hang_settled`); a compile past ``compile_timeout`` is a hang at once;
* the in-flight records a campaign that died in the same output folder left (``kill -9``, an
  OOM kill of the coordinator, a machine that went down) are replayed first by the next one
  (:meth:`Faults.adopt_orphans`, :meth:`Faults.orphan_settled`);
* a death of the harness's own resources (memory maps, memory, the GPU's memory) is no finding
  (:meth:`Faults.out_of_resources`).

This module decides what a death *is*; the scheduling policy books what it costs its pair.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fuzz import failures as F
from fuzz import reproducer
from fuzz.campaign.inflight import clear_inflight, is_disk_full, read_inflight
from fuzz.campaign.process import (
    EXIT_CONTEXT_LOST,
    EXIT_DEVICE_MEMORY,
    OUT_OF_MAPS_AT,
    exit_text,
)
from fuzz.failures import Finding
from fuzz.signatures import bug_key, signature
from fuzz.target import Target

# Signals of a process that faulted (a kernel's wild access, or LLVM out of memory maps).
FAULT_SIGNALS = {signal.SIGSEGV.value, signal.SIGBUS.value, signal.SIGABRT.value}

# The lines of a dead worker's log kept with its finding: faulthandler's dump of every thread,
# most recent call first (a hung kernel's frame is 50 lines down the main thread's stack, below
# Hypothesis's and the engine's frames: 40 lines kept it out).
DEATH_LOG_LINES = 150

# Out-of-resources messages of a process (LLVM, the C++ runtime, Python, the C library).
OUT_OF_RESOURCES_TEXTS = (
    "Cannot allocate memory",
    "LLVM ERROR: out of memory",
    "std::bad_alloc",
    "MemoryError",
)


_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def where_stuck(log: str, frames: int = 3) -> str:
    """Where a worker's main thread was, from faulthandler's last dump in ``log`` (most recent
    call first): its innermost frames in the harness (``fuzz``, ``strategies``, ``oracles``,
    ``kernels`` modules, named by module, not by a machine's path), ``a < b`` reading outwards;
    "" where the log has no dump."""
    at = log.rfind("Current thread")  # the thread the signal found: the main one
    dump = (log[at:] if at >= 0 else log).rsplit("most recent call first", 1)
    if len(dump) < 2:
        return ""
    stack = dump[1].split("\n\n", 1)[0]
    said: list[str] = []
    for m in _FRAME.finditer(stack):
        parts = m["path"].replace("\\", "/").removesuffix(".py").split("/")
        top = next((i for i, p in enumerate(parts) if p in _OURS), None)
        if top is None:
            continue
        said.append(f"{'.'.join(parts[top:])}:{m['line']} ({m['func']})")
        if len(said) == frames:
            break
    return " < ".join(said)


_OURS = ("fuzz", "strategies", "oracles", "kernels")


class Faults:
    """Turns deaths, hangs and orphans into findings and notes (see the module's docstring).

    Args:
        config: the campaign's :class:`fuzz.campaign.config.CampaignConfig`.
        note: keeps a note for the report (and says it on the console where asked).
        disk_full: called with what could not be written when the disk is full.
    """

    def __init__(
        self,
        config: Any,
        *,
        pool: Any,
        note: Callable[..., None],
        disk_full: Callable[[str], None],
    ) -> None:
        self.config = config
        self.pool = pool  # reads a dead worker's in-flight record and log where it ran
        self.note = note
        self.disk_full = disk_full

    # Deaths ------------------------------------------------------------------------------------

    def death_record(
        self, w: Any, pair: Any, cls: str, message: str, *, elapsed: float
    ) -> dict[str, Any] | None:
        """The finding of worker ``w`` that died or hung on its in-flight example of ``pair``,
        with its reproducer written (None: no example was in flight; noted)."""
        got = self.pool.inflight(w)
        if got is None:
            self.note(f"{pair.target.name} on {pair.backend}: {message} (no in-flight case)")
            return None
        meta, case = got
        rec = self.case_record(
            pair.target,
            pair.backend,
            case,
            meta.get("property_params", {}),
            cls,
            message,
            log=self.pool.log_tail(w, DEATH_LOG_LINES),
        )
        rec["first_example"] = pair.total_examples
        rec["first_seconds"] = round(pair.seconds + elapsed, 3)
        return rec

    def case_record(
        self,
        target: Target,
        backend: str,
        case: Any,
        params: dict[str, Any],
        cls: str,
        message: str,
        *,
        log: str | None = None,
    ) -> dict[str, Any]:
        """The finding record of a ``crash`` or ``hang`` of ``case`` that no worker could report,
        with its reproducer (replayed in a child process) written. A death cannot be shrunk in
        the worker: its conditions are those of whatever example died, so it is told apart by
        its key alone (one crash, one hang per pair)."""
        details: dict[str, Any] = {"process": message}
        if log is not None:
            details["log"] = log
        finding = Finding(
            cls,
            "process" if cls == F.CRASH else "timeout",
            message,
            hazards=target.hazards_of(case),
            details=details,
        )
        key = bug_key(finding)
        sig = signature(target.name, key, ())
        finding.details.update(signature=sig, bug_key=key, triggers=[])
        path = self.isolated_reproducer(target, backend, case, params, finding)
        return {
            **finding.as_dict(),
            "signature": sig,
            "bug_key": key,
            "triggers": [],
            "case": repr(case),
            "case_size": case.size,
            "shapes": case.shapes(),
            "params": case.params_json(),
            "first_example": 0,
            "first_seconds": 0.0,
            "shrink_seconds": 0.0,
            "shrunk": False,
            "reproducer": None if path is None else str(path),
            "plots": [],
        }

    def isolated_reproducer(
        self, target: Target, backend: str, case: Any, params: dict[str, Any], finding: Finding
    ) -> Path | None:
        """Writes the reproducer of a finding that killed or hung its process (it replays in a
        child process); None where the disk is full (the campaign then stops)."""
        c = self.config
        try:
            return reproducer.write(
                c.repro_dir,
                target=target,
                backend=backend,
                case=case,
                params=params,
                finding=finding,
                **c.options.check_kwargs(),
                isolate=True,
                timeout=c.example_timeout,
            )
        except OSError as e:
            if not is_disk_full(e):
                raise
            self.disk_full(
                f"a reproducer of {target.name} in {c.repro_dir} could not be written "
                f"({e.strerror})"
            )
            return None

    def loss(
        self,
        w: Any,
        pair: Any,
        code: int | None,
        reason: str | None,
        *,
        stopped: bool,
        elapsed: float,
    ) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
        """What the end of worker ``w`` in the middle of a slice of ``pair`` is (``reason``: why
        the campaign killed it, if it did; ``stopped``: a stop from outside): (how, in the
        scheduling policy's terms, a finding record of it, a suspected hang to replay).

        A first timeout is a suspicion, not yet a finding: a first compilation of a large
        kernel, or a machine busy with other work, outlasts the per-example timeout just as a
        hang does. The in-flight example is replayed next, in a fresh worker, with
        ``hang_confirm_factor`` times the timeout; only if it outlasts that too is it a ``hang``
        (its reproducer is written now, so nothing is lost if the campaign ends first)."""
        from fuzz.campaign import policy as P

        c = self.config
        if stopped or reason == "shutdown":
            return P.STOPPED, None, None  # its example was interrupted, not faulty
        if reason == "hang" and w.compiling:
            # A compile that outlasts --compile-timeout is a hang of the compiler on this case:
            # no second try (it would cost the timeout again), a finding with its reproducer.
            msg = (
                f"a kernel was still compiling after {c.compile_timeout:g} s (compile timeout); "
                "the worker was killed"
            )
            return P.DEATH, self.death_record(w, pair, F.HANG, msg, elapsed=elapsed), None
        if reason == "hang":
            msg = (
                f"an example did not finish within {c.example_timeout:g} s (per-example "
                "timeout, compile time not counted); the worker was killed"
            )
            rec = self.death_record(w, pair, F.HANG, msg, elapsed=elapsed)
            hang = None
            if rec is not None:
                hang = {"reproducer": rec["reproducer"], "confirm_hang": rec, "pair": pair}
            return P.SUSPECTED_HANG, None, hang
        if code == EXIT_CONTEXT_LOST:
            return P.CONTEXT_LOST, None, None
        if reason in ("overran", "budget"):
            why = "shrinking too slow" if pair.found else "its examples too slow"
            where = where_stuck(self.pool.log_since_job(w) or "")
            what = (
                f"a slice overran its hard limit ({why}); the worker was restarted"
                if reason == "overran"
                else "the campaign's time ran out while a slice still ran; it was stopped, what "
                "it streamed is kept"
            )
            self.note(
                f"{pair.target.name} on {pair.backend}: {what}"
                + (f"; it was in {where}" if where else "")
            )
            return P.OVERRAN, None, None
        msg = f"the worker {exit_text(code, reason)}"
        return P.DEATH, self.death_record(w, pair, F.CRASH, msg, elapsed=elapsed), None

    def out_of_resources(self, w: Any, code: int | None, map_limit: int | None) -> str | None:
        """Why the death of worker ``w`` (exit ``code``) was the harness process running out of
        memory maps or memory rather than a kernel crash, or None: killed by a fault signal with
        its memory maps near the limit, or after an out-of-resources message in its log."""
        if code == EXIT_DEVICE_MEMORY:
            return "the GPU ran out of memory"
        faulted = code is not None and code < 0 and -code in FAULT_SIGNALS
        if faulted and map_limit and w.maps >= OUT_OF_MAPS_AT * map_limit:
            return f"{w.maps} memory maps of the {map_limit} a process may have"
        text = self.pool.log_since_job(w)
        if text is None:
            return None
        said = next((t for t in OUT_OF_RESOURCES_TEXTS if t in text), None)
        return f"it said {said!r} first" if said and code != 0 else None

    # Hangs -------------------------------------------------------------------------------------

    def hang_settled(
        self, item: dict[str, Any], result: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """Settles a suspected hang (``item``: its provisional record and pair) with its replay's
        ``result`` (None: never replayed): the ``hang`` record to keep, or None where the second
        try finished (slow, not a hang: noted, its reproducer removed)."""
        rec, pair = item["confirm_hang"], item["pair"]
        c = self.config
        longer = c.example_timeout * c.hang_confirm_factor
        if result is not None and (
            result.get("status") == "pass" or (result.get("status") == "fail" and "class" in result)
        ):
            self.note(
                f"{pair.target.name} on {pair.backend}: an example outlasted the "
                f"{c.example_timeout:g} s per-example timeout once, then finished "
                f"within {longer:g} s on a second try ({result.get('verdict', '')[:120]}): slow "
                "(a first compilation?), not a hang",
                say=False,
            )
            reproducer.remove(rec["reproducer"])
            return None
        verdict = "" if result is None else str(result.get("verdict", ""))
        if result is None:
            why = "not confirmed: the campaign ended before the second try"
        elif "per-example timeout" in verdict:
            why = f"confirmed: the second try, with {longer:g} s, {verdict.removeprefix('the ')}"
        else:
            why = f"not confirmed: {verdict}"
        return {**rec, "message": f"{rec['message']} ({why})"}

    # Orphans -----------------------------------------------------------------------------------

    def adopt_orphans(self, pairs: list[Any]) -> list[dict[str, Any]]:
        """The replays of the in-flight records that a campaign which died in this output folder
        left: the example each of its workers was running then. Each becomes a reproducer,
        replayed first, in a fresh worker with ``hang_confirm_factor`` times the per-example
        timeout: a ``hang`` or ``crash`` finding if it hangs or kills the worker again, else a
        note that says what it did (:meth:`orphan_settled`). One whose target this campaign does
        not run is a note naming its reproducer; a record that cannot be read is kept aside and
        named. None is dropped silently."""
        from fuzz.target import get

        workdir = self.config.out / "workers"
        queue: list[dict[str, Any]] = []
        for meta_path in sorted(workdir.glob("inflight-*.json")):
            prefix = str(meta_path.with_suffix(""))
            got = read_inflight(prefix)
            target = None
            if got is not None:
                try:
                    target = get(got[0]["target"])
                except ValueError:
                    target = None
            if got is None or target is None:
                kept = workdir / f"orphaned-{int(time.time())}-{meta_path.stem}"
                for suffix in (".json", ".npz"):
                    src = Path(prefix + suffix)
                    if src.exists():
                        os.replace(src, str(kept) + suffix)
                what = "cannot be read" if got is None else f"is of target {got[0]['target']!r}"
                self.note(
                    f"an in-flight record left by an earlier campaign that died ({meta_path.name}) "
                    f"{what}, not loaded here; kept as {kept}.json/.npz",
                    say=True,
                )
                continue
            meta, case = got
            key = (meta["target"], meta["backend"])
            pair = next((p for p in pairs if (p.target.name, p.backend) == key), None)
            rec = self._orphan_record(target, meta, case)
            clear_inflight(prefix)
            if pair is None:
                self.note(
                    f"{rec['message']}; {meta['target']} on {meta['backend']} is not run by this "
                    f"campaign: not re-checked, reproducer {rec['reproducer']}",
                    say=True,
                )
                continue
            queue.append(
                {
                    "reproducer": rec["reproducer"],
                    "confirm_hang": rec,
                    "pair": pair,
                    "orphan": True,
                    "case": case,
                    "params": meta.get("property_params", {}),
                }
            )
        return queue

    def _orphan_record(self, target: Target, meta: dict[str, Any], case: Any) -> dict[str, Any]:
        """The provisional ``hang`` finding of an in-flight record a dead campaign left, with
        its reproducer written (:meth:`orphan_settled` decides what it is)."""
        who = meta.get("campaign_pid")
        began = meta.get("started")
        when = (
            time.strftime(" at %Y-%m-%dT%H:%M:%S%z", time.localtime(began))
            if isinstance(began, (int, float))
            else ""
        )
        message = (
            f"an example that began{when} was still running when its campaign"
            f"{f' (pid {who})' if who else ''} died"
        )
        return self.case_record(
            target, meta["backend"], case, meta.get("property_params", {}), F.HANG, message
        )

    def orphan_settled(
        self, item: dict[str, Any], result: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """What the replay of a dead campaign's in-flight example (``result``; None: never
        replayed) makes of it: the ``hang`` or ``crash`` record to keep, or None (a note)."""
        rec, pair = item["confirm_hang"], item["pair"]
        head = f"{pair.target.name} on {pair.backend}: {rec['message']}"
        if rec.get("reproducer") is None:
            self.note(f"{head}; not re-checked: its reproducer could not be written", say=True)
            return None
        path = Path(rec["reproducer"])
        c = self.config
        longer = c.example_timeout * c.hang_confirm_factor
        status = None if result is None else result.get("status")
        verdict = "" if result is None else str(result.get("verdict", ""))
        if result is None:
            self.note(
                f"{head}; not re-checked: this campaign ended before replaying it "
                f"(reproducer {path})",
                say=True,
            )
        elif status == "pass":
            reproducer.remove(path)
            self.note(
                f"{head}; it replays and passes within {longer:g} s ({verdict[:120]}): the "
                "campaign died, not the kernel",
                say=True,
            )
        elif status == "fail" and "class" in result:
            self.note(
                f"{head}; it replays as a {result['class']} failure ({verdict[:160]}); "
                f"reproducer {path}",
                say=True,
            )
        elif status == "fail" and "per-example timeout" in verdict:
            message = f"{rec['message']}; replayed first by the next campaign, it did not finish "
            return {**rec, "message": message + f"within {longer:g} s: a hang"}
        elif status == "fail":  # the replay killed its worker
            crash = self.case_record(
                pair.target,
                pair.backend,
                item["case"],
                item["params"],
                F.CRASH,
                f"{rec['message']}; replayed first by the next campaign, {verdict}",
            )
            if crash["reproducer"] != str(path):
                reproducer.remove(path)
            return crash
        else:
            self.note(
                f"{head}; it could not be re-checked ({verdict[:160]}); reproducer {path}",
                say=True,
            )
        return None
