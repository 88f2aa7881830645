"""Triage against the previous report of an output folder that was copied or moved, and of a bug
found again under other conditions: a campaign into a copy replays and names its own
reproducers (not the original folder's), one into a moved folder finds its reproducers beside
its report, and two findings of one bug whose triggers nest are one bug, still failing.
Campaigns are stopped by their example count, each run from the folder above its ``--out`` with a
relative ``--out``, as a nightly job is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz.campaign import report

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
FAKE = str(HERE / "fake_targets.py")

TOGGLE = """
import os, dataclasses
from fuzz.target import load_plugin, get, register
load_plugin({fake!r})
buggy = os.environ.get("FAKE_TOGGLE_BUG") == "1"
t = get("fake_double_nan" if buggy else "fake_double")
register(dataclasses.replace(t, name="fake_toggle", mutant=None, source="builtin"))
"""


def campaign(where: Path, out: str, *, bug: bool, examples: int, db: bool = True) -> dict:
    """A campaign over ``fake_toggle`` (the plugin in ``where``'s parent: the one every night
    loads, as its reproducers name it) into ``where/out`` (``out`` relative, run from ``where``);
    its report."""
    env = {
        **os.environ,
        "FAKE_TOGGLE_BUG": "1" if bug else "0",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    args = [
        "--profile",
        "ci",
        "--plugin",
        str(where.parent / "toggle.py"),
        "--targets",
        "fake_toggle",
    ]
    args += ["--backends", "fake", "--examples", str(examples), "--budget", "600", "--seed", "2"]
    if not db:
        args += ["--db", "none"]  # nothing found again from the copied database: only replays
    proc = subprocess.run(
        [sys.executable, "-m", "fuzz", "run", *args, "--out", out],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return json.loads((where / out / "report.json").read_text())


@pytest.fixture(scope="module")
def night_one(tmp_path_factory):
    """A first night's folder ``c6``: fake_toggle's NaN bug found, its reproducer in
    ``c6/reproducers``, the path in its report relative to where the campaign ran."""
    base = tmp_path_factory.mktemp("nights")
    (base / "toggle.py").write_text(TOGGLE.format(fake=FAKE))
    where = base / "one"
    where.mkdir()
    r = campaign(where, "c6", bug=True, examples=20)
    [f] = r["findings"]
    assert f["reproducer"] == f"c6/reproducers/{Path(f['reproducer']).name}"
    return where


def _copy(night_one: Path) -> Path:
    """A folder of its own beside the first night's (its plugin shared), holding a copy of it."""
    n = 1
    while (night_one.parent / f"copy{n}").exists():
        n += 1
    shutil.copytree(night_one, night_one.parent / f"copy{n}")
    return night_one.parent / f"copy{n}"


def test_a_campaign_into_a_copy_names_and_keeps_its_own_reproducer(night_one):
    where = _copy(night_one)
    shutil.copytree(where / "c6", where / "c7")
    r = campaign(where, "c7", bug=True, examples=1, db=False)
    [f] = r["findings"]
    assert f["triage"] == "still failing" and f.get("replayed"), f
    name = Path(f["reproducer"]).name
    assert f["reproducer"] == f"c7/reproducers/{name}"  # its own copy, not ../c6's
    assert f["reproducers"] == [f["reproducer"]]
    shutil.rmtree(where / "c6")  # the original goes: nothing of the copy's is lost
    assert (where / "c7" / "reproducers" / name).is_file()
    md = (where / "c7" / "report.md").read_text()
    assert f"`python reproducers/{name}`" in md and "c6" not in md  # relative to the report


def test_a_moved_folder_with_the_bug_fixed_finds_its_reproducer_and_reports_it_fixed(night_one):
    where = _copy(night_one)
    (where / "c6").rename(where / "moved")
    r = campaign(where, "moved", bug=False, examples=1)
    assert [f["target"] for f in r["triage"]["fixed"]] == ["fake_toggle"]
    assert r["triage"]["not_rechecked"] == [] and r["findings"] == []
    assert r["triage"]["fixed"][0]["reproducer"].startswith("moved/reproducers/")


def test_a_bug_found_again_with_fewer_triggers_is_one_bug_still_failing(night_one):
    """Last night's minimal example had one more condition (``wide``) than tonight's: one key,
    nesting triggers, one bug (``fuzz.signatures.same_bug``), still failing, listed once."""
    where = _copy(night_one)
    path = where / "c6" / "report.json"
    data = json.loads(path.read_text())
    [f] = data["findings"]
    assert f["triggers"] == [] and f["bug_key"] == "nan|oracle|y|-"
    tonight = f["signature"]
    data["findings"] = [{**f, "signature": "feedfacecafe", "triggers": ["wide"]}]
    path.write_text(json.dumps(data))
    r = campaign(where, "c6", bug=True, examples=20)
    assert [(g["signature"], g["triage"]) for g in r["findings"]] == [(tonight, "still failing")]
    assert r["findings"][0]["previous_signature"] == "feedfacecafe"
    assert r["triage"]["fixed"] == [] and r["triage"]["not_rechecked"] == []
    assert "**0 new, 1 still failing, 0 fixed**" in (where / "c6" / "report.md").read_text()


def _finding(sig, triggers, **more):
    return {
        "signature": sig,
        "target": "t",
        "class": "accuracy",
        "message": "m",
        "backend": "b",
        "backends": ["b"],
        "bug_key": "accuracy|oracle|y|-",
        "triggers": triggers,
        "reproducer": None,
        **more,
    }


def test_triage_matches_a_previous_finding_as_the_campaign_matches_its_own():
    row = {"target": "t", "mutant": True, "mutant_of": "u", "expected_class": "accuracy"}
    now = _finding("aaa", ["feature scale"])
    previous = {
        "started": "x",
        "findings": [
            _finding("bbb", ["feature scale", "partial-tile"]),  # nests: the same bug
            _finding("ccc", ["dtype float16"]),  # does not nest: another bug
            _finding("ddd", ["feature scale"], bug_key="nan|oracle|y|-"),  # another key
            _finding("eee", ["feature scale"], target="other"),  # another target
        ],
    }
    findings, fixed, unconfirmed = report._triage(
        [{**row, "findings": [now]}], previous, verdicts={}
    )
    assert [(f["signature"], f["triage"]) for f in findings] == [("aaa", "still failing")]
    assert findings[0]["previous_signature"] == "bbb"
    assert fixed == [] and [f["signature"] for f in unconfirmed] == ["ccc", "ddd", "eee"]
    assert report.same_bug_in(now, [_finding("fff", [], bug_key=None)]) is None  # an old record


def test_a_merge_matches_the_previous_merged_report_the_same_way(night_one):
    """A host's finding of a bug the previous merged report holds under more triggers: still
    failing, reported failing by that host, not 'not re-checked'."""
    from fuzz.campaign.merge import merge

    where = _copy(night_one)
    [f] = json.loads((where / "c6" / "report.json").read_text())["findings"]
    merged = where / "merged"
    merged.mkdir()
    before = {**f, "signature": "feedfacecafe", "triggers": ["wide"], "reproducer": None}
    (merged / "report.json").write_text(json.dumps({"started": "x", "findings": [before]}))
    data = merge([str(where / "c6")], merged)
    assert [(g["signature"], g["triage"]) for g in data["findings"]] == [
        (f["signature"], "still failing")
    ]
    assert data["triage"]["not_rechecked"] == [] and data["triage"]["fixed"] == []
