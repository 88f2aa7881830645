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

A server that does not answer (down, or frozen: a SIGSTOPped ``redis-server`` accepts
connections and answers nothing) costs one call of at most :data:`CALL_TIMEOUT` seconds: the
database is then taken as down for :data:`RETRY_AFTER` seconds, calls skip it, and a Redis
``--db`` falls back to a local folder (the campaign's ``OUT/examples``) meanwhile, so that its
findings are still saved. Entries of a folder database are written atomically (a temporary file
in the entry's folder, fsync, rename; removed when the write fails) with the mode the umask
gives, so that a shared folder is readable by teammates.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

from fuzz.hypothesis_internals import choices_from_bytes

# Seconds one call to a database server may take (connect, or wait for an answer).
CALL_TIMEOUT = 2.0
# Seconds a database that failed a call is left alone before it is tried again.
RETRY_AFTER = 30.0


class DatabaseWarning(UserWarning):
    """An example database entry or server could not be used; the campaign goes on."""


class _Directory(DirectoryBasedExampleDatabase):
    """The directory database, reporting entries it cannot read instead of skipping silently,
    and writing entries atomically in their own folder (Hypothesis writes a temporary file in the
    system's temporary folder, 0600, copies it across file systems, and swallows every error)."""

    def __init__(self, path: str, report: Callable[[str], None]) -> None:
        super().__init__(path)
        self._report = report

    def save(self, key: bytes, value: bytes) -> None:
        """Saves ``value`` under ``key``; raises what went wrong (``CheckedDatabase`` warns)."""
        from fuzz.files import new_file_mode

        key_path = self._key_path(key)
        if key_path.name != self._metakeys_hash:
            self.save(self._metakeys_name, key)  # as Hypothesis's: the index of keys
        key_path.mkdir(parents=True, exist_ok=True)
        path = self._value_path(key, value)
        if path.exists():
            return
        fd, tmp = tempfile.mkstemp(dir=key_path, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(value)
                f.flush()
                os.fsync(f.fileno())
                os.fchmod(f.fileno(), new_file_mode())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

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
    """Wraps a database: undecodable entries and failing operations become warnings.

    A database whose call failed is left alone for :data:`RETRY_AFTER` seconds (a server that
    does not answer costs each call its timeout otherwise); meanwhile calls go to ``fallback``
    (a local folder under a Redis ``--db``), or do nothing.
    """

    def __init__(
        self, inner: ExampleDatabase, name: str, fallback: CheckedDatabase | None = None
    ) -> None:
        super().__init__()
        self.inner = inner
        self.name = name
        self.fallback = fallback
        self.problems: list[str] = []
        self.down_until = 0.0  # time.monotonic() until which the database is left alone

    def _usable(self) -> bool:
        return time.monotonic() >= self.down_until

    def _failed(self, what: str, e: BaseException) -> None:
        """A call failed: warn (naming the fallback) and leave the database alone a while."""
        self.down_until = time.monotonic() + RETRY_AFTER
        instead = (
            f"; using the local database {self.fallback.name} instead"
            if self.fallback is not None
            else "; going on without it"
        )
        self.warn(
            f"{what} failed: {type(e).__name__}: {e}{instead} (tried again in {RETRY_AFTER:g} s)"
        )

    def _problems_of_fallback(self) -> list[str]:
        return self.fallback.problems if self.fallback is not None else []

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
        values: list[bytes] = []
        if self._usable():
            try:
                values = list(self.inner.fetch(key))
            except Exception as e:  # a server down or frozen, a folder gone: go on without it
                self._failed("fetch", e)
        if not self._usable() and self.fallback is not None:
            yield from self.fallback.fetch(key)
            return
        for value in values:
            if (
                not isinstance(value, (bytes, bytearray))
                or choices_from_bytes(bytes(value)) is None
            ):
                self.warn(f"skipped a corrupt entry ({len(value)} bytes) under key {key[:60]!r}")
                continue
            yield bytes(value)

    def _call(self, what: str, *args: bytes) -> None:
        """``inner.<what>(*args)``, or the fallback's while the database is left alone."""
        if self._usable():
            try:
                getattr(self.inner, what)(*args)
                return
            except Exception as e:
                self._failed(what, e)
        if self.fallback is not None:
            getattr(self.fallback, what)(*args)

    def save(self, key: bytes, value: bytes) -> None:
        self._call("save", key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        self._call("delete", key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._call("move", src, dest, value)


class CampaignDatabase(MultiplexedDatabase):
    """The local database with shared read-only ones under it; collects every part's warnings."""

    def __init__(self, local: CheckedDatabase, shared: Sequence[CheckedDatabase]) -> None:
        parts: list[ExampleDatabase] = [local, *(ReadOnlyDatabase(s) for s in shared)]
        super().__init__(*parts)
        self.local = local
        self.shared = list(shared)

    @property
    def problems(self) -> list[str]:
        parts = (self.local, *self.shared)
        return [p for db in parts for p in (*db.problems, *db._problems_of_fallback())]

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


def is_server(location: str) -> bool:
    """Whether ``location`` names a database server (Redis) rather than a folder."""
    return location.startswith(("redis://", "rediss://", "unix://"))


def _open_one(location: str, fallback: str | None = None) -> CheckedDatabase:
    holder: list[CheckedDatabase] = []

    def report(message: str) -> None:
        holder[0].warn(message)

    if location.startswith("ray-actor://"):  # the coordinator's, served over a cluster
        inner: ExampleDatabase = ActorDatabase(location.removeprefix("ray-actor://"))
    elif is_server(location):
        try:
            import redis
            from hypothesis.extra.redis import RedisExampleDatabase
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise ValueError(
                f"--db={location!r} needs the redis package: pip install 'kernel-fuzz[redis]'"
            ) from None
        client = redis.Redis.from_url(
            location,
            socket_timeout=CALL_TIMEOUT,
            socket_connect_timeout=CALL_TIMEOUT,
            retry=Retry(NoBackoff(), 0),  # one try: a frozen server costs one timeout
        )
        inner = RedisExampleDatabase(client)
    else:
        path = Path(location)
        if path.exists() and not path.is_dir():
            raise ValueError(f"--db={location!r} is a file, not a database folder")
        inner = _Directory(str(path), report)
    backup = _open_one(fallback) if fallback is not None and is_server(location) else None
    db = CheckedDatabase(inner, location, backup)
    holder.append(db)
    return db


def open_database(
    location: str | None, shared: Sequence[str] = (), *, fallback: str | None = None
) -> CampaignDatabase | None:
    """The campaign database at ``location`` with ``shared`` ones multiplexed read-only under it.

    ``location`` ``None``/``'none'`` means no database (shared ones are then ignored).
    ``fallback``: a folder that takes the saves and fetches of a server ``location`` while it
    does not answer.
    """
    if location is None or location == "none":
        return None
    return CampaignDatabase(_open_one(location, fallback), [_open_one(s) for s in shared])


# The coordinator's actors a worker on a Ray cluster was handed, by name: the example
# database's server (``fuzz.campaign.ray_worker.DatabaseServer``).
ACTORS: dict[str, Any] = {}


class ActorDatabase(ExampleDatabase):
    """A worker's view of the coordinator's example database (:class:`DatabaseServer`, by its
    actor's name): each call one round trip, within ``CALL_TIMEOUT`` seconds (the campaign's
    ``CheckedDatabase`` around it turns a failure into a warning)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        import ray

        self.name = name
        self.actor = ACTORS.get(name) or ray.get_actor(name)

    def _get(self, ref: Any) -> Any:
        import ray

        return ray.get(ref, timeout=CALL_TIMEOUT)

    def save(self, key: bytes, value: bytes) -> None:
        self._get(self.actor.save.remote(key, value))

    def fetch(self, key: bytes) -> Any:
        yield from self._get(self.actor.fetch.remote(key))

    def delete(self, key: bytes, value: bytes) -> None:
        self._get(self.actor.delete.remote(key, value))

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._get(self.actor.move.remote(src, dest, value))

    def __repr__(self) -> str:
        return f"ActorDatabase({self.name!r})"
