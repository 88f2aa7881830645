"""Example databases: where failing examples (and the coverage corpus) persist between runs.

``open_database(location, shared=...)`` understands:

    DIR                      a local directory (Hypothesis's directory database)
    redis://HOST:PORT[/N]    a Redis server shared by many machines (``pip install
                             kernel-fuzz[redis]``; Hypothesis's ``RedisExampleDatabase``)
    none                     no database

and multiplexes any number of *shared* databases, read-only, under the local one: a machine
replays what the team's database holds but writes only its own findings. Every database is
wrapped in :class:`CheckedDatabase`: an entry that cannot be read or decoded, or a server that
cannot be reached, is skipped with a warning (recorded in the campaign report), never a crash.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
    choices_from_bytes,
)


class DatabaseWarning(UserWarning):
    """An example database entry or server could not be used; the campaign goes on."""


class _Directory(DirectoryBasedExampleDatabase):
    """The directory database, reporting entries it cannot read instead of skipping silently."""

    def __init__(self, path: str, report: Callable[[str], None]) -> None:
        super().__init__(path)
        self._report = report

    def fetch(self, key: bytes) -> Iterable[bytes]:
        kp = self._key_path(key)
        if not kp.is_dir():
            return
        try:
            names = sorted(os.listdir(kp))
        except OSError as e:
            self._report(f"cannot list {kp}: {e}")
            return
        for name in names:
            try:
                yield (kp / name).read_bytes()
            except OSError as e:
                self._report(f"unreadable entry {kp / name}: {type(e).__name__}: {e}")


class CheckedDatabase(ExampleDatabase):
    """Wraps a database: undecodable entries and failing operations become warnings."""

    def __init__(self, inner: ExampleDatabase, name: str) -> None:
        super().__init__()
        self.inner = inner
        self.name = name
        self.problems: list[str] = []

    def __repr__(self) -> str:
        return f"CheckedDatabase({self.inner!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CheckedDatabase) and self.inner == other.inner

    def __hash__(self) -> int:
        return hash(self.name)

    def warn(self, message: str) -> None:
        text = f"example database {self.name}: {message}"
        if len(self.problems) < 200:
            self.problems.append(text)
        warnings.warn(text, DatabaseWarning, stacklevel=3)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        try:
            values = list(self.inner.fetch(key))
        except Exception as e:  # a server down, a folder gone: replay nothing, go on
            self.warn(f"fetch failed: {type(e).__name__}: {e}")
            return
        for value in values:
            if (
                not isinstance(value, (bytes, bytearray))
                or choices_from_bytes(bytes(value)) is None
            ):
                self.warn(f"skipped a corrupt entry ({len(value)} bytes) under key {key[:60]!r}")
                continue
            yield bytes(value)

    def save(self, key: bytes, value: bytes) -> None:
        try:
            self.inner.save(key, value)
        except Exception as e:
            self.warn(f"save failed: {type(e).__name__}: {e}")

    def delete(self, key: bytes, value: bytes) -> None:
        try:
            self.inner.delete(key, value)
        except Exception as e:
            self.warn(f"delete failed: {type(e).__name__}: {e}")

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        try:
            self.inner.move(src, dest, value)
        except Exception as e:
            self.warn(f"move failed: {type(e).__name__}: {e}")


class CampaignDatabase(MultiplexedDatabase):
    """The local database with shared read-only ones under it; collects every part's warnings."""

    def __init__(self, local: CheckedDatabase, shared: Sequence[CheckedDatabase]) -> None:
        parts: list[ExampleDatabase] = [local, *(ReadOnlyDatabase(s) for s in shared)]
        super().__init__(*parts)
        self.local = local
        self.shared = list(shared)

    @property
    def problems(self) -> list[str]:
        return [p for db in (self.local, *self.shared) for p in db.problems]

    def check(self) -> list[str]:
        """Tries every part once (a fetch of a key nothing is saved under); returns the problems
        met, so that a server that cannot be reached is said at the start, not only in a report."""
        before = len(self.problems)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DatabaseWarning)
            for db in (self.local, *self.shared):
                list(db.fetch(b"kernel-fuzz: can this database be reached?"))
        return self.problems[before:]

    def describe(self) -> dict[str, object]:
        return {"local": self.local.name, "shared": [s.name for s in self.shared]}


def _open_one(location: str) -> CheckedDatabase:
    holder: list[CheckedDatabase] = []

    def report(message: str) -> None:
        holder[0].warn(message)

    if location.startswith(("redis://", "rediss://", "unix://")):
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
        except ImportError:
            raise ValueError(
                f"--db={location!r} needs the redis package: pip install 'kernel-fuzz[redis]'"
            ) from None
        client = redis.Redis.from_url(location, socket_timeout=10, socket_connect_timeout=5)
        inner: ExampleDatabase = RedisExampleDatabase(client)
    else:
        path = Path(location)
        if path.exists() and not path.is_dir():
            raise ValueError(f"--db={location!r} is a file, not a database folder")
        inner = _Directory(str(path), report)
    db = CheckedDatabase(inner, location)
    holder.append(db)
    return db


def open_database(location: str | None, shared: Sequence[str] = ()) -> CampaignDatabase | None:
    """The campaign database at ``location`` with ``shared`` ones multiplexed read-only under it.

    ``location`` ``None``/``'none'`` means no database (shared ones are then ignored).
    """
    if location is None or location == "none":
        return None
    return CampaignDatabase(_open_one(location), [_open_one(s) for s in shared])
