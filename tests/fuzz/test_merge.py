"""``python -m fuzz merge``: the campaigns of several hosts as one morning summary (findings
deduplicated by signature, the pair matrix across hosts, triage against the previous merged
report), tested with real campaigns on one machine, each stopped by its example count."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

HERE = Path(__file__).parent
FAKE = str(HERE / "fake_targets.py")

TOGGLE = """
import os, dataclasses
from fuzz.target import load_plugin, get, register
load_plugin({fake!r})
buggy = os.environ.get("FAKE_TOGGLE_BUG") == "1"
t = get("fake_double_nan" if buggy else "fake_double")
register(dataclasses.replace(t, name="fake_toggle", mutant=None, source="builtin"))
"""


def fuzz_cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "fuzz", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def campaign(plugin, out, targets, seed, bug):
    proc = fuzz_cli(
        "run",
        "--profile",
        "ci",
        "--plugin",
        str(plugin),
        "--mutants",
        "--targets",
        targets,
        "--backends",
        "fake",
        "--examples",
        "20",
        "--budget",
        "600",
        "--seed",
        str(seed),
        "--out",
        str(out),
        env={"FAKE_TOGGLE_BUG": "1" if bug else "0"},
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


def test_merge_two_hosts_then_triage_the_next_night(tmp_path):
    plugin = tmp_path / "toggle.py"
    plugin.write_text(TOGGLE.format(fake=FAKE))
    host_a, host_b, merged = tmp_path / "hostA", tmp_path / "hostB", tmp_path / "merged"
    # Night 1: host A has the bug in fake_toggle; both find the NaN mutant, B the OOB one too.
    a1 = campaign(plugin, host_a, "fake_toggle,fake_double_nan", 1, bug=True)
    campaign(plugin, host_b, "fake_toggle,fake_double_nan,fake_double_oob", 2, bug=False)
    first = fuzz_cli("merge", str(host_a), str(host_b), "--out", str(merged))
    assert first.returncode == 1, first.stderr  # a real target fails on a host
    r1 = json.loads((merged / "report.json").read_text())
    hosts = [h["host"] for h in r1["merged"]["hosts"]]
    assert len(hosts) == 2 and hosts[0].endswith("/hostA") and hosts[1].endswith("/hostB")
    found = {(f["target"], f["class"]): f for f in r1["findings"]}
    assert set(found) == {
        ("fake_toggle", "nan"),
        ("fake_double_nan", "nan"),
        ("fake_double_oob", "out-of-bounds-write"),
    }
    assert len(r1["findings"]) == len({f["signature"] for f in r1["findings"]})  # deduplicated
    assert found[("fake_double_nan", "nan")]["hosts"] == hosts  # one finding, both hosts
    assert found[("fake_toggle", "nan")]["hosts"] == [hosts[0]]
    for f in r1["findings"]:
        assert f["triage"] == "new" and Path(f["reproducer"]).parent == merged / "reproducers"
        assert Path(f["reproducer"]).exists()
    rows = {r["target"]: r for r in r1["results"]}
    assert rows["fake_toggle"]["status"] == "fail" and rows["fake_double_nan"]["status"] == "found"
    assert rows["fake_toggle"]["examples"] == sum(
        h["examples"] for h in rows["fake_toggle"]["hosts"].values()
    )
    assert set(rows["fake_toggle"]["hosts"]) == set(hosts)
    assert list(rows["fake_double_oob"]["hosts"]) == [hosts[1]]  # which host ran what
    assert r1["summary"]["real_failed"] == ["fake_toggle"]
    md = (merged / "report.md").read_text()
    assert md.startswith("# Merged fuzz campaigns") and "## Hosts" in md
    assert "**3 new, 0 still failing, 0 fixed**" in md
    suite = ET.parse(merged / "report.xml").getroot().find("testsuite")
    assert int(suite.get("tests")) == 3 and int(suite.get("failures")) == 1
    assert "Hosts" in (merged / "index.html").read_text()
    assert a1["host"]  # each campaign report names its host

    # Night 2: the bug is fixed on A (its triage replays the reproducer: it passes); B finds
    # the OOB again. The merge is triaged against night 1's merged report, kept in history/.
    a2 = campaign(plugin, host_a, "fake_toggle,fake_double_nan", 3, bug=False)
    assert [f["target"] for f in a2["triage"]["fixed"]] == ["fake_toggle"]
    campaign(plugin, host_b, "fake_toggle,fake_double_nan,fake_double_oob", 4, bug=False)
    second = fuzz_cli("merge", str(host_a), str(host_b), "--out", str(merged))
    assert second.returncode == 0, second.stderr
    r2 = json.loads((merged / "report.json").read_text())
    assert {(f["target"], f["triage"]) for f in r2["findings"]} == {
        ("fake_double_nan", "still failing"),
        ("fake_double_oob", "still failing"),
    }
    assert [f["target"] for f in r2["triage"]["fixed"]] == ["fake_toggle"]
    assert r2["triage"]["previous"] == r1["started"]
    history = list((merged / "history").iterdir())
    assert len(history) == 1 and json.loads((history[0] / "report.json").read_text()) == r1


def test_merge_refuses_what_it_cannot_merge(tmp_path):
    (tmp_path / "empty").mkdir()
    no_report = fuzz_cli("merge", str(tmp_path / "empty"), "--out", str(tmp_path / "m"))
    assert no_report.returncode == 2 and "holds no campaign report" in no_report.stderr
    missing = fuzz_cli("merge", str(tmp_path / "nope"), "--out", str(tmp_path / "m"))
    assert missing.returncode == 2 and "is not a folder" in missing.stderr
    into_itself = fuzz_cli("merge", str(tmp_path / "empty"), "--out", str(tmp_path / "empty"))
    assert into_itself.returncode == 2 and "is one of the folders merged" in into_itself.stderr
    assert not (tmp_path / "m").exists() and "Traceback" not in no_report.stderr


@pytest.fixture(scope="module")
def one_campaign(tmp_path_factory):
    """One small campaign's folder (fake_toggle with its bug, found), copied by the tests below
    into hosts' folders."""
    base = tmp_path_factory.mktemp("one-campaign")
    plugin = base / "toggle.py"
    plugin.write_text(TOGGLE.format(fake=FAKE))
    campaign(plugin, base / "out", "fake_toggle", 1, bug=True)
    return base / "out"


def _host_folder(one_campaign, folder, **changes):
    """A copy of ``one_campaign`` at ``folder``, its report.json's top-level fields and its
    results' examples changed as given (``examples=N``)."""
    shutil.copytree(one_campaign, folder)
    data = json.loads((folder / "report.json").read_text())
    examples = changes.pop("examples", None)
    if examples is not None:
        for r in data["results"]:
            r["examples"] = examples
        data["summary"]["examples"] = examples * len(data["results"])
    data.update(changes)
    (folder / "report.json").write_text(json.dumps(data))
    return folder


def test_two_folders_of_one_name_on_one_host_keep_their_own_figures(one_campaign, tmp_path):
    a = _host_folder(one_campaign, tmp_path / "hA" / "out", examples=7)
    c = _host_folder(one_campaign, tmp_path / "hC" / "out", examples=11)
    done = fuzz_cli("merge", str(a), str(c), "--out", str(tmp_path / "merged"))
    assert done.returncode in (0, 1), done.stderr
    r = json.loads((tmp_path / "merged" / "report.json").read_text())
    host = r["merged"]["hosts"][0]["host"].split("/")[0]
    labels = [h["host"] for h in r["merged"]["hosts"]]
    assert labels == [f"{host}/hA/out", f"{host}/hC/out"]
    [row] = r["results"]
    assert {k: v["examples"] for k, v in row["hosts"].items()} == {labels[0]: 7, labels[1]: 11}
    assert row["examples"] == 18


def _hold_lock(folder):
    """A live process holding ``folder``'s campaign lock, as a running campaign does."""
    code = (
        "import sys, time; from pathlib import Path; from fuzz.campaign.outdir import lock_output; "
        "lock = lock_output(Path(sys.argv[1])); print('held', flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_campaign_still_running_is_merged_as_it_stands_and_said_so(one_campaign, tmp_path):
    a = _host_folder(one_campaign, tmp_path / "hA")
    running = _host_folder(one_campaign, tmp_path / "hB", complete=False, interrupted=None)
    killed = _host_folder(one_campaign, tmp_path / "hC", complete=False, interrupted=None)
    (killed / ".campaign.lock").write_text(
        json.dumps({"pid": 2**22 + 1, "host": "?", "started": "x", "command": "python -m fuzz"})
    )
    holder = _hold_lock(running)
    try:
        done = fuzz_cli("merge", str(a), str(running), str(killed), "--out", str(tmp_path / "m"))
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 1, done.stderr  # a real target fails (else 2: incomplete)
    r = json.loads((tmp_path / "m" / "report.json").read_text())
    host = r["merged"]["hosts"][0]["host"].split("/")[0]
    for name in ("hB", "hC"):
        assert f"WARNING {host}/{name}: its campaign is not complete (" in done.stderr
    md = (tmp_path / "m" / "report.md").read_text()
    head = md.splitlines()[2]
    assert head.startswith("INCOMPLETE (") and "hB: still running" in head, head
    assert "(running)" not in md and "INCOMPLETE (error)" not in md
    assert "| INCOMPLETE (still running (pid" in md
    assert "| INCOMPLETE (ended without its final report (killed?)) |" in md
    states = {h["host"].removeprefix(f"{host}/"): h["state"] for h in r["merged"]["hosts"]}
    assert states["hA"] is None
    assert states["hB"] == f"still running (pid {holder.pid} on {host})"
    assert states["hC"] == "ended without its final report (killed?)"


def test_a_folder_whose_report_cannot_be_read_is_said_so_not_in_triage_words(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "report.json").write_text("{not json")
    done = fuzz_cli("merge", str(bad), "--out", str(tmp_path / "m"))
    assert done.returncode == 2
    assert (
        f"'{bad}' holds no campaign report: {bad / 'report.json'} cannot be read (" in done.stderr
    )
    assert "previous" not in done.stderr and "triaged" not in done.stderr
