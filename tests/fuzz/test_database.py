"""Example databases: replayed first, corrupt or unreadable entries skipped with a warning, shared
databases read-only, Redis against a real server on loopback."""

import shutil
import socket
import subprocess
import time
import warnings

import pytest

from fuzz.campaign.database import DatabaseWarning, open_database
from fuzz.engine import database_key, hunt
from fuzz.target import get


def _hunt(db, profile, seed=0):
    return hunt(get("fake_double_nan"), "fake", profile, database=db, seed=seed, max_examples=60)


def _entries(path):
    return sorted(p for p in path.rglob("*") if p.is_file())


def test_a_hunt_starts_by_replaying_the_database(fake_plugin, fake_profile, tmp_path):
    db = open_database(str(tmp_path / "db"))
    first = _hunt(db, fake_profile, seed=1)
    assert "nan" in first.found and first.found["nan"].first_example > 1
    again = _hunt(open_database(str(tmp_path / "db")), fake_profile, seed=2)
    assert again.found["nan"].first_example == 1  # the saved minimal example, replayed first
    assert again.found["nan"].case.size == first.found["nan"].case.size


def test_corrupt_and_unreadable_entries_are_skipped_with_a_warning(
    fake_plugin, fake_profile, tmp_path
):
    path = tmp_path / "db"
    db = open_database(str(path))
    _hunt(db, fake_profile, seed=1)
    key_dir = db.local.inner._key_path(database_key("fake_double_nan", "fake"))
    assert key_dir.is_dir() and _entries(key_dir)
    (key_dir / "0corrupt").write_bytes(b"\xff\xfe not a choice sequence")
    (key_dir / "0unreadable").mkdir()  # reading it as a file fails
    db = open_database(str(path))
    with pytest.warns(DatabaseWarning) as caught:
        result = _hunt(db, fake_profile, seed=2)
    assert result.error is None and result.found["nan"].first_example == 1
    text = "\n".join(db.problems)
    assert "skipped a corrupt entry" in text and "unreadable entry" in text
    # (other warnings may land here too: a ResourceWarning of another test's object, collected now)
    ours = [w for w in caught if issubclass(w.category, DatabaseWarning)]
    assert ours and all("example database" in str(w.message) for w in ours)


def test_a_shared_database_is_read_but_never_written(fake_plugin, fake_profile, tmp_path):
    shared = tmp_path / "team"
    _hunt(open_database(str(shared)), fake_profile, seed=1)
    before = [(p, p.read_bytes()) for p in _entries(shared)]
    local = tmp_path / "mine"
    result = _hunt(open_database(str(local), [str(shared)]), fake_profile, seed=3)
    assert result.found["nan"].first_example == 1
    assert [(p, p.read_bytes()) for p in _entries(shared)] == before
    assert _entries(local)  # this machine's own copy


def test_a_database_location_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match="is a file, not a database folder"):
        open_database(str(f))
    assert open_database("none") is None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_url(tmp_path):
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    redis = pytest.importorskip("redis")
    port = _free_port()
    proc = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(host="127.0.0.1", port=port)
    try:
        for _ in range(100):
            try:
                if client.ping():
                    break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        else:
            pytest.fail("redis-server did not answer")
        yield f"redis://127.0.0.1:{port}/0", client
    finally:
        proc.terminate()
        proc.wait(10)


def test_redis_database_shared_by_machines(fake_plugin, fake_profile, tmp_path, redis_url):
    url, client = redis_url
    first = _hunt(open_database(url), fake_profile, seed=1)
    assert "nan" in first.found
    keys = client.keys(b"hypothesis-example:kernel-fuzz:fake_double_nan|fake*")
    assert keys
    members = {k: client.smembers(k) for k in keys}
    # Another machine: its own local folder, the team's Redis read-only under it.
    other = open_database(str(tmp_path / "local"), [url])
    second = _hunt(other, fake_profile, seed=2)
    assert second.found["nan"].first_example == 1
    assert {k: client.smembers(k) for k in keys} == members  # read-only: nothing written
    # A corrupt entry in the shared database is skipped with a warning.
    primary = b"hypothesis-example:" + database_key("fake_double_nan", "fake")
    client.sadd(primary, b"\xff\xfe garbage")
    db = open_database(url)
    with pytest.warns(DatabaseWarning, match="corrupt entry"):
        third = _hunt(db, fake_profile, seed=3)
    assert third.found["nan"].first_example == 1


def test_an_unreachable_redis_is_a_warning_not_a_crash(fake_plugin, fake_profile):
    pytest.importorskip("redis")
    db = open_database(f"redis://127.0.0.1:{_free_port()}/0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _hunt(db, fake_profile, seed=1)
    assert result.error is None and "nan" in result.found
    assert any("fetch failed" in p for p in db.problems)
    assert any(issubclass(w.category, DatabaseWarning) for w in caught)
