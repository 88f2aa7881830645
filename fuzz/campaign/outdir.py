"""A campaign's output folder: its lock, the space kept for the final reports, the report
writes (atomic, throttled), the reproducers superseded by newer ones, and the signals that end a
campaign with a complete report."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from fuzz import reproducer
from fuzz.campaign import report_files, report_html
from fuzz.campaign.inflight import is_disk_full
from fuzz.campaign.process import STOP_SIGNALS

LOCK_FILE = ".campaign.lock"
RESERVE = ".campaign.reserve"
RESERVE_BYTES = 4 << 20  # kept free for the final reports (index.html is the largest)


def lock_output(out: Path, *, argv: Sequence[str] = ()) -> IO[str]:
    """Locks the output folder ``out`` for one campaign; returns the open lock file (closing it,
    or the process ending in any way, releases the lock).

    Two campaigns writing one folder would share the workers' in-flight records and overwrite each
    other's report.json (losing findings). The lock is ``flock`` on ``out/.campaign.lock``: the
    operating system drops it when its holder dies, even by SIGKILL, so a lock is never stale
    (worker processes do not inherit it). The file says who holds it, for the error message.

    Raises:
        ValueError: another campaign holds the lock (the message names it).
    """
    import fcntl
    import json
    import socket

    out.mkdir(parents=True, exist_ok=True)
    f = open(out / LOCK_FILE, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        try:
            h = json.loads(f.read())
            holder = f"pid {h['pid']} on {h['host']} since {h['started']}: {h['command']}"
        except (ValueError, KeyError, TypeError):
            holder = "a process that has not said which yet"
        f.close()
        raise ValueError(
            f"--out={str(out)!r} is in use by another campaign ({holder}); wait for it to end "
            "or choose another --out"
        ) from None
    f.seek(0)
    f.truncate()
    f.write(
        json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "command": " ".join(["python -m fuzz", *argv]),
            }
        )
        + "\n"
    )
    f.flush()
    return f


class OutputFolder:
    """The reports and reproducers of one campaign under ``out``.

    Args:
        out: the folder.
        argv: the command line (named in the lock).
        disk_full: called with what could not be written when the disk is full (the campaign
            stops: nothing more it finds could be kept).
    """

    def __init__(
        self, out: Path, *, argv: Sequence[str] = (), disk_full: Callable[[str], None]
    ) -> None:
        self.out = out
        self.argv = argv
        self.disk_full = disk_full
        self._lock: IO[str] | None = None
        self._last_write = 0.0
        self.dirty = False  # a report write was skipped (throttled): write it soon
        self.superseded: list[Path] = []
        self.unwritten: list[str] = []  # report files the final write could not write

    def lock(self) -> None:
        """Takes the folder's lock (:func:`lock_output`), if not held yet."""
        if self._lock is None:
            self._lock = lock_output(self.out, argv=self.argv)

    def unlock(self) -> None:
        """Releases the lock (it stays on disk, naming the last holder)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def reserve_space(self) -> str | None:
        """Keeps :data:`RESERVE_BYTES` of the folder's disk for the final reports: a disk that
        fills during the campaign still gets them (the space is given back first). Returns a
        note where it could not."""
        path = self.out / RESERVE
        try:
            with open(path, "wb") as f:
                os.posix_fallocate(f.fileno(), 0, RESERVE_BYTES)
        except (OSError, AttributeError) as e:
            path.unlink(missing_ok=True)
            return f"no space could be kept for the final reports under {self.out} ({e})"
        return None

    def release_space(self) -> None:
        (self.out / RESERVE).unlink(missing_ok=True)

    def supersede(self, paths: Sequence[str]) -> None:
        """Marks reproducers no record names any more for removal (once a report not naming
        them is written)."""
        self.superseded += [Path(p) for p in paths]

    def due(self) -> bool:
        """Whether a throttled write was skipped more than a second ago."""
        return self.dirty and time.perf_counter() - self._last_write >= 1.0

    def write(
        self, make: Callable[[], dict[str, Any]], *, throttle: bool = False, final: bool = False
    ) -> dict[str, Any]:
        """Writes ``report.json`` from ``make()`` (``final``: the whole report set, after giving
        back the space kept for it). A write skipped by ``throttle`` (within a second of the
        last) is made up for by :meth:`due`. A full disk stops the campaign; the final write
        still writes each file it can (the others are named in ``unwritten``), each atomically.
        Reproducers superseded by a finding's newer one are removed once a report not naming
        them is written."""
        now = time.perf_counter()
        if throttle and now - self._last_write < 1.0:
            self.dirty = True
            return {}
        self._last_write = now
        self.dirty = False
        if final:
            self.release_space()
        data = make()
        out = self.out
        writers: list[tuple[str, Callable[[], None]]] = [
            ("report.json", lambda: report_files.write_json(out / "report.json", data))
        ]
        if final:
            writers += [(name, write) for name, write in report_html.writers(out, data)]
        for name, write in writers:
            try:
                write()
            except OSError as e:
                if not is_disk_full(e):
                    raise
                self.disk_full(f"{out / name} could not be written ({e.strerror})")
                if not final:
                    return data
                self.unwritten.append(name)
            else:
                if name == "report.json":
                    self._drop_superseded(data)
        return data

    def _drop_superseded(self, data: dict[str, Any]) -> None:
        """Removes the reproducers of findings replaced by newer ones that the report just
        written (``data``) does not name (after a kill -9 none is left behind)."""
        named = {r for f in data.get("findings", []) for r in f.get("reproducers", [])}
        named |= {f.get("reproducer") for r in data.get("results", []) for f in r["findings"]}
        keep = []
        for p in self.superseded:
            if str(p) in named:
                keep.append(p)  # still someone's
            else:
                reproducer.remove(p)  # the script and its issue text
        self.superseded = keep


def install_signal_handlers(stop: Callable[[str], None]) -> Callable[[], None]:
    """SIGTERM, SIGINT and SIGHUP call ``stop(name)`` (the campaign ends with a complete
    report); returns an undo function. A signal the campaign was started ignoring (``nohup``, a
    background job's SIGINT) stays ignored."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    saved = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    saved = {s: h for s, h in saved.items() if h is not signal.SIG_IGN}

    def handler(signum: int, frame: Any) -> None:
        stop(signal.Signals(signum).name)

    for s in saved:
        signal.signal(s, handler)

    def undo() -> None:
        for s, h in saved.items():
            signal.signal(s, h)

    return undo
