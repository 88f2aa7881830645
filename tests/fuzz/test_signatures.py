"""Failure signatures: one bug is one key (class, property, output, dtype) and its triggers; a
hunt reports every distinct bug of a kernel with its own minimal example, counts examples of
known bugs as hits, and looks past failures a library declares it knows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fuzz
from fuzz.case import Case
from fuzz.failures import Finding
from fuzz.signatures import Bug, KnownFailure, bug_key, conditions, covering, same_bug, signature
from fuzz.target import get, load_builtin, load_plugin

PLUGINS = Path(__file__).parent.parent / "plugins"
TWO_BUGS = str(PLUGINS / "two_bugs.py")


@pytest.fixture(scope="module", autouse=True)
def _registry():
    load_builtin()
    load_plugin(TWO_BUGS)


def test_a_key_is_class_property_and_output_and_a_dtype_is_a_condition():
    f = Finding("nan", "oracle", "m", output="y")
    assert bug_key(f) == "nan|oracle|y|-"
    raised = Finding("crash", "crash", "m", details={"exception": "ValueError", "text": "row 3"})
    assert bug_key(raised) == "crash|crash|-|ValueError: row #"  # what it raised, not a number
    softmax = get("softmax")
    case = Case({"x": np.zeros((1, 2), np.float16)}, {"dtype": "float16", "scale": None}, {})
    assert "dtype float16" in conditions(softmax, case, [])  # a half dtype separates bugs
    assert not any(
        c.startswith("dtype") for c in conditions(softmax, case.replace(dtype="float32"), [])
    )


def test_conditions_are_hazard_names_and_the_features_a_case_uses():
    softmax = get("softmax")
    x = np.zeros((2, 20), np.float32)
    case = Case({"x": x}, {"dtype": "float32", "scale": 0.5, "block_m": 1, "block_n": 16}, {})
    holds = conditions(softmax, case, ["multi-tile: 20 columns over 16", "partial-tile: 4 of 16"])
    assert holds == {"multi-tile", "partial-tile", "feature scale"}  # float32: no condition
    with_bias = case.replace(inputs={"x": x, "bias": np.ones_like(x)})
    assert "feature bias" in conditions(softmax, with_bias, [])
    no_scale = case.replace(scale=None)
    assert "feature scale" not in conditions(softmax, no_scale, [])


def test_an_example_is_a_hit_of_a_bug_whose_every_trigger_holds():
    a = Bug("accuracy|oracle|y|-", frozenset({"feature bias"}), "a")
    b = Bug("accuracy|oracle|y|-", frozenset({"multi-tile"}), "b")
    key = "accuracy|oracle|y|-"
    assert covering([a, b], key, {"feature bias", "partial-tile"}) is a
    assert covering([a, b], key, {"multi-tile"}) is b
    assert covering([a, b], key, {"partial-tile"}) is None  # neither: a new bug
    assert covering([a, b], "nan|oracle|y|-", {"feature bias"}) is None  # another key
    both = covering(
        [a, b, Bug(key, frozenset({"feature bias", "multi-tile"}), "c")],
        key,
        {
            "feature bias",
            "multi-tile",
        },
    )
    assert both is not None and both.signature == "c"  # the most specific
    assert same_bug(a, Bug(key, frozenset({"feature bias", "partial-tile"}), "d"))
    assert not same_bug(a, b)
    assert (
        signature("t", key, ["x", "y"])
        == signature("t", key, ["y", "x"])
        != signature("t", key, ["x"])
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"reason": ""}, "KnownFailure.reason"),
        ({"reason": "r", "classes": "wrong"}, "KnownFailure.classes has \\['wrong'\\]"),
        ({"reason": "r", "dtypes": ["float64"]}, "KnownFailure.dtypes has \\['float64'\\]"),
        ({"reason": "r", "outputs": 3}, "KnownFailure.outputs=3"),
        ({"reason": "r", "dtypes": []}, "KnownFailure.dtypes must not be empty"),
    ],
)
def test_bad_known_failures_name_the_field(kwargs, match):
    with pytest.raises(ValueError, match=match):
        KnownFailure(**kwargs)


def test_known_failures_are_checked_against_the_kernel_at_registration():
    def kernel(x, *, scale):
        return x

    with pytest.raises(ValueError, match=r"KnownFailure.outputs has \['o'\]"):
        fuzz.fuzz_kernel(
            "bad_known_output",
            family="softmax",
            kernel=kernel,
            capabilities=fuzz.Capabilities(features={"scale"}),
            known_failures=[KnownFailure("r", outputs="o")],
        )
    with pytest.raises(ValueError, match=r"KnownFailure.hazards has \['nope'\]"):
        fuzz.fuzz_kernel(
            "bad_known_hazard",
            family="softmax",
            kernel=kernel,
            capabilities=fuzz.Capabilities(features={"scale"}),
            known_failures=[KnownFailure("r", hazards="nope")],
        )
    with pytest.raises(ValueError, match="known_failures has 'tf32'"):
        fuzz.fuzz_kernel(
            "bad_known_type",
            family="softmax",
            kernel=kernel,
            capabilities=fuzz.Capabilities(features={"scale"}),
            known_failures=["tf32"],
        )


def test_a_known_failure_matches_every_field_it_gives():
    k = KnownFailure("tf32", classes="accuracy", dtypes="float32", hazards="multi-tile")
    acc = Finding("accuracy", "oracle", "m", output="y")
    assert k.matches(acc, "float32", {"multi-tile", "feature scale"})
    assert not k.matches(acc, "float16", {"multi-tile"})
    assert not k.matches(acc, "float32", {"partial-tile"})
    assert not k.matches(Finding("nan", "oracle", "m", output="y"), "float32", {"multi-tile"})
    assert "tf32" in k.describe() and "dtype=float32" in k.describe()


def _found_both(r):
    keys = [f.triggers for f in r.found.values() if f.finding.cls == "accuracy"]
    return any("feature bias" in t for t in keys) and any("multi-tile" in t for t in keys)


def test_a_hunt_reports_two_bugs_of_one_class_each_with_its_own_minimal_example(tmp_path):
    """two_bugs_softmax has two independent accuracy bugs in y (a scaled bias; a wrong rescale
    across tiles): one class, one output, one dtype. Keyed by class, the second would be a hit of
    the first and never reported."""
    r = fuzz.hunt(
        get("two_bugs_softmax"),
        "triton-interpret",
        fuzz.get_profile("ci"),
        max_examples=3000,
        seed=2,
        database=None,
        time_limit=10**6,  # stopped by the event below or by its examples, not by the clock
        stop_when=_found_both,
        repro_dir=tmp_path,
    )
    assert r.error is None
    bugs = [f for f in r.found.values() if f.finding.cls == "accuracy"]
    assert len(bugs) == 2, [(f.key, f.triggers) for f in r.found.values()]
    bias = next(f for f in bugs if "feature bias" in f.triggers)
    rescale = next(f for f in bugs if "multi-tile" in f.triggers)
    assert "multi-tile" not in bias.triggers and "feature bias" not in rescale.triggers
    assert bias.final and rescale.final  # each shrunk by Hypothesis as a bug of its own
    assert bias.case.size <= 4  # a row of one or two keys with a bias
    assert rescale.case.inputs["x"].shape[-1] > 16 and rescale.case.size <= 2 * 33
    assert bias.signature != rescale.signature
    assert bias.reproducer != rescale.reproducer and bias.reproducer.exists()
    assert r.known_hits  # later examples of either were counted, not shrunk again


def test_a_bug_met_under_an_incidental_condition_is_the_known_one_once_it_is_dropped():
    """A known bug (the wrong rescale across tiles, with a partial tile) met again through an
    example with a bias and no partial tile: trigger sets that do not nest, and no NaN site to
    tell. The new example's condition the known bug lacks, its bias, is dropped from it: it
    still fails the same way, under conditions that nest with the known bug's: the same bug
    (on an H100 a campaign reported the rescale bug twice so). Nothing is searched: the bias
    bug's own bias cannot be dropped (it passes without it), and it stays a bug of its own."""
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates
    from fuzz.profiles import HuntOptions

    row = np.zeros((1, 32), np.float32)
    row[0, 20] = 50.0  # the second tile's max far above the first's: the wrong rescale shows
    params = {"dtype": "float32", "scale": None, "block_m": 16, "block_n": 16}
    bias = np.full((1, 32), 0.5, np.float32)
    case = Case({"x": row, "bias": bias}, dict(params))
    f = _found("accuracy", "oracle", case, triggers=("feature bias", "multi-tile"))
    rescale = Bug("accuracy|oracle|y|-", frozenset({"multi-tile", "partial-tile"}), "rescale")
    me = Duplicates(
        get("two_bugs_softmax"),
        get_backend("triton-interpret"),
        HuntOptions.of(fuzz.get_profile("ci")),
        found={},
        known_bugs=[rescale],
    )
    assert me.needs_fewer(f, [rescale]) is rescale
    assert me.of(f) == (rescale, "conditions")
    # The bias bug: one tile, a bias; without the bias it passes: its bias is needed.
    one_tile = Case({"x": np.zeros((1, 8), np.float32) + 1.0, "bias": bias[:, :8]}, dict(params))
    g = _found("accuracy", "oracle", one_tile, triggers=("feature bias",))
    assert me.needs_fewer(g, [rescale]) is None and me.of(g) is None


def test_the_duplicate_check_gathers_no_evidence_past_its_deadline(monkeypatch):
    """Each piece of the duplicate check's evidence is a kernel call, and on a GPU a new shape is
    a compile: for a pair of many bugs (JAX's ``mha`` on pallas-gpu has ten), unbounded, they
    can take a slice past its hard limit outside any example, where the campaign kills its
    worker with what it was shrinking. Past its deadline the check runs nothing and leaves the
    bug undecided (a bug of its own: a row too many, never a bug lost); before it, the same
    check decides."""
    import time

    from fuzz import duplicates
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates
    from fuzz.profiles import HuntOptions

    row = np.zeros((1, 32), np.float32)
    row[0, 20] = 50.0
    params = {"dtype": "float32", "scale": None, "block_m": 16, "block_n": 16}
    bias = np.full((1, 32), 0.5, np.float32)
    case = Case({"x": row, "bias": bias}, dict(params))
    f = _found("accuracy", "oracle", case, triggers=("feature bias", "multi-tile"))
    rescale = Bug("accuracy|oracle|y|-", frozenset({"multi-tile", "partial-tile"}), "rescale")

    def checker():
        return Duplicates(
            get("two_bugs_softmax"),
            get_backend("triton-interpret"),
            HuntOptions.of(fuzz.get_profile("ci")),
            found={},
            known_bugs=[rescale],
        )

    calls = []
    real = duplicates.check_case
    monkeypatch.setattr(duplicates, "check_case", lambda *a, **k: calls.append(1) or real(*a, **k))
    late = checker()
    late.deadline = time.perf_counter() - 1.0
    assert late.of(f) is None and late.cut == 1
    assert calls == []  # nothing ran
    in_time = checker()
    in_time.deadline = time.perf_counter() + 600.0
    assert in_time.of(f) == (rescale, "conditions") and in_time.cut == 0 and calls


def test_the_duplicate_check_has_its_own_seconds_past_the_settling_within_the_kill_margin():
    """The duplicate check comes after a hunt settles the bugs its hard limit cut (shrinking
    them again for SETTLE_SECONDS): with its deadline at the settling's end, a 300 s CPU
    campaign of the planted round 3 had 7 checks cut and 1.78 rows per bug found; with
    DUPLICATE_SECONDS more, 1.44, the window bug one row again (3 before). They lie inside the
    30 s the campaign gives a slice past that before it kills it
    (``fuzz.campaign.pool.overran``), the rest for the slice's summary."""
    import inspect

    from fuzz.campaign import pool
    from fuzz.engine import DUPLICATE_SECONDS, SETTLE_SECONDS, duplicate_deadline

    assert duplicate_deadline(None, None) is None
    assert duplicate_deadline(None, 100.0) == 100.0 + SETTLE_SECONDS + DUPLICATE_SECONDS
    assert duplicate_deadline(130.0, 100.0) == 130.0 + DUPLICATE_SECONDS
    assert "SETTLE_SECONDS + 30 +" in inspect.getsource(pool.overran)
    assert 0 < DUPLICATE_SECONDS <= 30 - 5  # (5 s at least for the summary)


def test_a_shape_trigger_is_dropped_by_cutting_the_row_where_the_family_can():
    """A known bias bug (one partial tile) met again through an example of three whole tiles
    (48 columns, equal logits: no rescale shows), a row the shrinker could not cut past the known
    bug's partial tiles (an H200 campaign reported a planted Pallas bias bug twice so, 2 and 48
    elements). ``multi-tile`` is a shape hazard the softmax family takes away by cutting the row
    to its first tile: the cut example fails alike under nesting conditions, the same bug. The
    rescale bug needs its second tile: cut to one, it passes, and stays a bug of its own."""
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates
    from fuzz.profiles import HuntOptions

    params = {"dtype": "float32", "scale": 0.5, "block_m": 16, "block_n": 16}
    bias = np.linspace(-1.0, 1.0, 48, dtype=np.float32)[None, :]
    case = Case({"x": np.zeros((1, 48), np.float32), "bias": bias}, dict(params))
    f = _found("accuracy", "oracle", case, triggers=("feature bias", "feature scale", "multi-tile"))
    known = Bug(
        "accuracy|oracle|y|-",
        frozenset({"feature bias", "feature scale", "partial-tile"}),
        "bias",
    )
    me = Duplicates(
        get("two_bugs_softmax"),
        get_backend("triton-interpret"),
        HuntOptions.of(fuzz.get_profile("ci")),
        found={},
        known_bugs=[known],
    )
    assert me.needs_fewer(f, [known]) is known
    row = np.zeros((1, 32), np.float32)
    row[0, 20] = 50.0
    rescale = Case({"x": row}, {**params, "scale": None})
    g = _found("accuracy", "oracle", rescale, triggers=("multi-tile",))
    assert me.needs_fewer(g, [known]) is None


def test_a_declared_known_failure_never_ends_the_hunt_for_the_other_bug():
    """tf32_softmax fails every float32 case (inputs rounded to TF32), which its library
    declares; its other bug (NaN for a row with no valid key) is still found, and the accuracy
    failures are counted under the declaration, not reported as a bug."""
    r = fuzz.hunt(
        get("tf32_softmax"),
        "triton-interpret",
        fuzz.get_profile("ci"),
        max_examples=3000,
        seed=1,
        database=None,
        time_limit=10**6,
        stop_when=lambda r: "nan" in r.classes and sum(r.declared_hits.values()) >= 5,
    )
    assert r.error is None
    assert "nan" in r.classes and "accuracy" not in r.classes, r.classes
    (reason, hits), *_ = r.declared_hits.items()
    assert "TF32" in reason and hits >= 5
    nan = r.of_class("nan")[0]
    assert "row-without-valid-key" in nan.triggers and nan.case.size <= 16


def test_a_campaign_reports_both_bugs_each_with_its_own_reproducer(tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fuzz",
            "run",
            "--profile",
            "ci",
            "--plugin",
            TWO_BUGS,
            "--targets",
            "two_bugs_softmax",
            "--backends",
            "triton-interpret",
            "--examples",
            "300",
            "--budget",
            "1200",  # a safety net: the campaign ends at its examples
            "--seed",
            "3",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # a real (non-mutant) target fails
    report = json.loads((out / "report.json").read_text())
    (row,) = report["results"]
    assert row["status"] == "fail" and row["bugs"] == 2 and not row["retired"], row
    found = report["findings"]
    assert sorted(f["class"] for f in found) == ["accuracy", "accuracy"]
    assert len({f["signature"] for f in found}) == 2
    assert len({f["reproducer"] for f in found}) == 2
    assert any("feature bias" in f["triggers"] for f in found)
    assert any("multi-tile" in f["triggers"] for f in found)
    for f in found:
        assert f["shrunk"] and (Path(f["reproducer"])).exists()
    md = (out / "report.md").read_text()
    assert md.index("## Matrix") < md.index("## New")  # the matrix opens the report
    assert "| two_bugs_softmax | fail: " in md and "2 bugs |" in md
    replay = subprocess.run(
        [sys.executable, "-m", "fuzz", "replay", "--plugin", TWO_BUGS, str(out / "reproducers")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert replay.returncode == 1 and replay.stdout.count("FAIL accuracy") == 2, replay.stdout


def test_fuzz_list_shows_the_known_failures_a_plugin_declares():
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "fuzz", "list", "--plugin", TWO_BUGS],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "COLUMNS": "400"},
    )
    assert proc.returncode == 0, proc.stderr
    said = "class=accuracy dtype=float32: float32 inputs are rounded to TF32"
    assert any(ln.startswith("│ tf32_softmax ") and said in ln for ln in proc.stdout.splitlines())


def _tf32_case(**inputs):
    params = {"dtype": "float32", "scale": None, "block_m": 16, "block_n": 16}
    return Case({k: np.asarray(v) for k, v in inputs.items()}, params)


def test_a_nan_born_at_a_known_bugs_site_is_that_bug_whatever_its_conditions():
    """tf32_softmax divides 0 / 0 for a row with no valid key. Its minimal example with ``-inf``
    inputs needs no mask; one with a mask needs no ``-inf``: trigger sets that do not nest, and a
    mask cannot be shrunk away into ``-inf`` inputs. On an H100 a campaign reported the NaN twice
    so. Born at one kernel expression, it is one bug: the mask's examples are hits of the known
    one, and their conditions are kept as another way to it."""
    from fuzz import origin
    from fuzz.signatures import site

    target = get("tf32_softmax")
    neg_inf = origin.trace(target, "triton-interpret", _tf32_case(x=[[-np.inf]]))
    masked = origin.trace(
        target, "triton-interpret", _tf32_case(x=np.ones((1, 1), np.float32), mask=[[False]])
    )
    assert site(neg_inf) is not None and site(neg_inf) == site(masked)  # one division
    assert site({"found": False, "note": "none"}) is None and site(None) is None
    key = "nan|oracle|y|-"
    known = Bug(
        key,
        frozenset({"partial-tile", "row-without-valid-key", "unmasked-neg-inf"}),
        "known-nan",
        site(neg_inf),
    )
    assert Bug.of(known.as_dict()) == known
    r = fuzz.hunt(
        target,
        "triton-interpret",
        fuzz.get_profile("ci"),
        max_examples=400,
        seed=1,
        database=None,
        known=[known],
    )
    assert r.error is None
    assert not [f.triggers for f in r.found.values() if f.key == key]  # no second NaN bug
    by_site = [d for d in r.duplicates if d["how"] == "site"]
    assert by_site and all(d["twin"] == "known-nan" for d in by_site), r.duplicates
    assert any("unmasked-neg-inf" not in d["triggers"] for d in by_site)
    assert r.known_hits["known-nan"] > len(r.duplicates)  # later ones were hits, not shrunk


def test_bugs_of_one_key_are_one_where_their_nan_is_born_at_one_site():
    key = "nan|oracle|y|-"
    a = Bug(key, frozenset({"feature mask"}), "a", "k.py:76: x / l")
    b = Bug(key, frozenset({"unmasked-neg-inf"}), "b", "k.py:76: x / l")
    assert same_bug(a, b) and same_bug(b, a)
    assert not same_bug(a, Bug(key, frozenset({"unmasked-neg-inf"}), "c", "k.py:80: y / l"))
    assert not same_bug(a, Bug(key, frozenset({"unmasked-neg-inf"}), "c"))  # untraced
    assert same_bug(a, Bug(key, frozenset({"feature mask", "x"}), "d", "k.py:80: y"))  # nested
    assert not same_bug(a, Bug("inf|oracle|y|-", b.triggers, "e", b.site))  # another key


def _found(cls, prop, case, key_output="y", triggers=()):
    from fuzz.results import Found

    f = Finding(cls, prop, "m", output=key_output)
    key = bug_key(f)
    f.details.update(bug_key=key, triggers=sorted(triggers), signature=f"{prop}-sig")
    return Found(f, case, {}, 1, 0.1, choices=(1,), key=key, final=True)


def test_one_kernel_call_failing_two_properties_is_one_bug():
    """A minimal example failing the oracle and ``rows-sum-to-one`` is one bug, whichever
    property a search met first (on an H100 two_bugs_softmax's rescale bug came back twice so,
    both records shrunk to one 33-column row). The same shape with other values is not."""
    from fuzz.duplicates import Duplicates

    row = np.linspace(-1, 1, 33, dtype=np.float32)[None]
    case = Case({"x": row}, {"dtype": "float32", "block_n": 16})
    assert case.digest() == Case({"x": row.copy()}, dict(case.params)).digest()
    assert case.digest() != Case({"x": row + 1}, dict(case.params)).digest()
    assert case.digest() != case.replace(block_n=32).digest()
    oracle = _found("accuracy", "oracle", case)
    # (no known bug: nothing to check on a backend, nothing to shrink again)
    me = Duplicates(None, None, None, {"accuracy": oracle}, known_bugs=[])
    again = _found("accuracy", "rows-sum-to-one", Case({"x": row.copy()}, dict(case.params)))
    twin, how = me.of(again)
    assert how == "case" and twin.key == oracle.key
    other = _found("accuracy", "rows-sum-to-one", Case({"x": row + 1}, dict(case.params)))
    assert me.of(other) is None  # its own call: a bug of its own (no twin)


def test_a_bug_met_through_another_property_whose_minimal_example_fails_a_known_ones_is_it():
    """A large case may fail ``rows-sum-to-one`` while the oracle passes it; its minimal example
    fails the oracle too, with the known rescale bug's conditions (a second tile, a partial
    one): an example of that bug, not a bug of its own (on an H100 two_bugs_softmax's rescale bug
    was reported a second time so). A known bug whose conditions do not hold is not it."""
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates
    from fuzz.profiles import HuntOptions

    row = np.zeros((1, 33), np.float32)
    row[0, 20] = 50.0  # the second tile's max far above the first's: the wrong rescale shows
    case = Case({"x": row}, {"dtype": "float32", "scale": None, "block_m": 16, "block_n": 16})
    f = _found("accuracy", "rows-sum-to-one", case, triggers=("multi-tile", "partial-tile"))
    rescale = Bug("accuracy|oracle|y|-", frozenset({"multi-tile", "partial-tile"}), "rescale")
    bias = Bug("accuracy|oracle|y|-", frozenset({"feature bias", "partial-tile"}), "bias")
    me = Duplicates(
        get("two_bugs_softmax"),
        get_backend("triton-interpret"),
        HuntOptions.of(fuzz.get_profile("ci")),
        found={},
        known_bugs=[bias, rescale],
    )
    assert me.also_fails(f) is rescale
    me.known_bugs = [bias]  # its conditions do not hold: not this example's bug
    assert me.also_fails(f) is None
    fine = Case({"x": np.zeros((1, 33), np.float32)}, dict(case.params))  # one max: no failure
    me.known_bugs = [rescale]
    g = _found("accuracy", "rows-sum-to-one", fine, triggers=("multi-tile", "partial-tile"))
    assert me.also_fails(g) is None
    # The other way round: the bug known first needs more conditions (met through the oracle on
    # values below the finite sentinel); this example, under fewer, fails its property too.
    special = Bug(
        "accuracy|oracle|y|-",
        frozenset({"below-finite-sentinel", "multi-tile", "partial-tile"}),
        "rescale, under more conditions",
    )
    me.known_bugs = [bias, special]
    assert me.also_fails(f) is None  # not the forward check's
    assert me.also_fails(f, under_more=True) is special
    me.known_bugs = [bias]
    assert me.also_fails(f, under_more=True) is None


def test_a_bug_whose_way_a_settled_bugs_minimal_example_fails_too_is_that_bug():
    """The other way round from :meth:`Duplicates.also_fails`: a new bug whose own minimal example
    does not fail a settled bug's way (the smaller example the new way needs) is that bug where
    the settled bug's minimal example fails the new way too, with the new bug's triggers holding
    for it (a planted attention kernel applying its soft cap unscaled came as two rows: ``o``
    wrong with two keys, ``lse`` wrong already with one). Not where the new bug's features or
    dtype are not that example's, nor where that example passes the new way."""
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates
    from fuzz.profiles import HuntOptions

    row = np.zeros((1, 33), np.float32)
    row[0, 20] = 50.0  # the second tile's max far above the first's: the wrong rescale shows
    params = {"dtype": "float32", "scale": None, "block_m": 16, "block_n": 16}
    settled = _found(
        "accuracy", "oracle", Case({"x": row}, params), triggers=("multi-tile", "partial-tile")
    )
    elsewhere = Case({"x": np.ones((1, 3), np.float32)}, dict(params))  # not the settled call

    def duplicates(found):
        return Duplicates(
            get("two_bugs_softmax"),
            get_backend("triton-interpret"),
            HuntOptions.of(fuzz.get_profile("ci")),
            found={"accuracy": found},
            known_bugs=[bug_of(found)],
        )

    from fuzz.duplicates import bug_of

    me = duplicates(settled)
    new = _found("accuracy", "rows-sum-to-one", elsewhere, triggers=("partial-tile",))
    assert me.shown_by_known(new) == bug_of(settled)
    assert me.of(new) == (bug_of(settled), "property")
    biased = _found(
        "accuracy", "rows-sum-to-one", elsewhere, triggers=("feature bias", "partial-tile")
    )
    assert me.shown_by_known(biased) is None  # its feature is not that example's
    # A hazard of the new bug's own minimal example (the smallest it could be) need not hold.
    single = _found("accuracy", "rows-sum-to-one", elsewhere, triggers=("single-valid-key",))
    assert me.shown_by_known(single) == bug_of(settled)
    half = _found("accuracy", "rows-sum-to-one", elsewhere, triggers=("dtype float16",))
    assert me.shown_by_known(half) is None  # its dtype is not that example's
    fine = _found(
        "accuracy",
        "oracle",
        Case({"x": np.zeros((1, 33), np.float32)}, dict(params)),
        triggers=("multi-tile", "partial-tile"),
    )
    assert duplicates(fine).shown_by_known(new) is None  # that example passes the new way


def test_an_earlier_slices_bug_is_checked_on_its_example_read_from_its_reproducer(tmp_path):
    """Across a campaign's slices the settled bug comes as a known bug (its key, triggers and
    signature) with its reproducer (``Bug.example``): its minimal example is read back from it
    and checked the new way, as a bug settled in the same hunt is. Without a readable
    reproducer nothing is decided so."""
    from fuzz import reproducer
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates
    from fuzz.profiles import HuntOptions

    row = np.zeros((1, 33), np.float32)
    row[0, 20] = 50.0
    params = {"dtype": "float32", "scale": None, "block_m": 16, "block_n": 16}
    settled = _found(
        "accuracy", "oracle", Case({"x": row}, params), triggers=("multi-tile", "partial-tile")
    )
    target, backend = get("two_bugs_softmax"), get_backend("triton-interpret")
    options = HuntOptions.of(fuzz.get_profile("ci"))
    path = reproducer.write(
        tmp_path,
        target=target,
        backend=backend.name,
        case=settled.case,
        params={},
        finding=settled.finding,
        **options.check_kwargs(),
    )
    elsewhere = Case({"x": np.ones((1, 3), np.float32)}, dict(params))
    new = _found("accuracy", "rows-sum-to-one", elsewhere, triggers=("partial-tile",))
    for example, expected in ((str(path), True), (None, False), (str(tmp_path / "gone.py"), False)):
        known = Bug(settled.key, frozenset(settled.triggers), "earlier", example=example)
        me = Duplicates(target, backend, options, found={}, known_bugs=[known])
        assert (me.shown_by_known(new) == known) is expected, example


HALF_BUGS = str(PLUGINS / "half_bugs.py")


def _half_duplicates(name, settled):
    """The duplicate check of a hunt of plugin kernel ``name`` that settled ``settled``."""
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates, bug_of
    from fuzz.profiles import HuntOptions

    load_plugin(HALF_BUGS)
    return Duplicates(
        get(name),
        get_backend("triton-interpret"),
        HuntOptions.of(fuzz.get_profile("ci")),
        found={"settled": settled},
        known_bugs=[bug_of(settled)],
    )


def _row(n, dtype):
    from fuzz.arrays import cast

    x = cast(np.linspace(-1.0, 1.0, n, dtype=np.float32)[None, :], dtype)
    return Case({"x": x}, {"dtype": dtype, "scale": None, "block_m": 16, "block_n": 16})


def test_one_bug_of_both_half_dtypes_met_through_each_is_one_bug():
    """Shrinking moves a dtype toward float32 only: a bug of every half-precision input met
    through float16 and then through bfloat16 ends in two minimal examples apart by their
    dtype, triggers that do not nest (fla's dq bug came so as two rows of 8,192 elements on an
    H200). Each minimal example, cast to the other's dtype, fails the same way: one bug."""
    from fuzz.duplicates import bug_of

    fp16 = _found("accuracy", "oracle", _row(2, "float16"), triggers=("dtype float16",))
    me = _half_duplicates("half_one_bug_softmax", fp16)
    bf16 = _found("accuracy", "oracle", _row(3, "bfloat16"), triggers=("dtype bfloat16",))
    known = bug_of(fp16)
    assert not same_bug(known, bug_of(bf16))  # by their triggers, two
    assert me.other_half(bf16, [known]) == known
    assert me.of(bf16) == (known, "dtype")


def test_two_bugs_of_one_key_one_in_each_half_dtype_stay_two():
    """A float16 bug of every row and, apart, a bfloat16 bug of odd rows: the bfloat16 bug's
    minimal example fails in float16 too (through the other bug), but the float16 bug's passes
    in bfloat16: two bugs, whichever came first."""
    from fuzz.duplicates import bug_of

    fp16 = _found("accuracy", "oracle", _row(2, "float16"), triggers=("dtype float16",))
    bf16 = _found("accuracy", "oracle", _row(3, "bfloat16"), triggers=("dtype bfloat16",))
    for settled, new in ((fp16, bf16), (bf16, fp16)):
        me = _half_duplicates("half_two_bugs_softmax", settled)
        assert me.other_half(new, [bug_of(settled)]) is None
        assert me.of(new) is None


@pytest.mark.parametrize("name, bugs", [("half_one_bug_softmax", 1), ("half_two_bugs_softmax", 2)])
def test_a_hunt_reports_a_bug_of_both_half_dtypes_once_and_two_bugs_twice(name, bugs):
    """End to end, one hunt stopped by its examples: the bug of both half dtypes is one row (its
    other dtype's example told to be it, or a hit of it), the two dtype bugs are two."""
    load_plugin(HALF_BUGS)
    r = fuzz.hunt(
        get(name),
        "triton-interpret",
        fuzz.get_profile("ci"),
        max_examples=400,
        seed=3,
        database=None,
        time_limit=10**6,  # stopped by its examples, not by the clock
    )
    assert r.error is None
    found = [f for f in r.found.values() if f.finding.cls == "accuracy"]
    assert len(found) == bugs, [(f.key, f.triggers, f.case.size) for f in found]
    dtypes = {t for f in found for t in f.triggers if t.startswith("dtype ")}
    assert len(dtypes) == bugs


def test_a_campaign_reports_a_bug_of_both_half_dtypes_once_and_two_dtype_bugs_twice(tmp_path):
    """Across a campaign's slices (the known bugs read back from their reproducers): the bug of
    every half-precision input is one row, its other dtype's minimal example beside it
    (``dtype``); the float16 bug and the bfloat16 odd-row bug are two. Stopped by examples."""
    import json
    import subprocess
    import sys

    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable, "-m", "fuzz", "run", "--profile", "ci", "--plugin", HALF_BUGS,
            "--targets", "half_*", "--backends", "triton-interpret", "--examples", "600",
            "--budget", "1200",  # a safety net: the campaign ends at its examples
            "--seed", "1", "--db", "none", "--out", str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-3000:]
    found = json.loads((out / "report.json").read_text())["findings"]
    one = [f for f in found if f["target"] == "half_one_bug_softmax"]
    two = [f for f in found if f["target"] == "half_two_bugs_softmax"]
    assert [f["class"] for f in one] == ["accuracy"], [(f["class"], f["triggers"]) for f in one]
    dtypes = {t for s in [one[0], *one[0].get("also_seen", [])] for t in s["triggers"]}
    assert {"dtype float16", "dtype bfloat16"} <= dtypes, one[0]
    assert sorted(f["class"] for f in two) == ["accuracy", "accuracy"], two
    assert len({t for f in two for t in f["triggers"] if t.startswith("dtype ")}) == 2


def test_a_sticky_cuda_error_is_keyed_by_its_name_not_by_the_call_that_reported_it():
    """CUDA reports a sticky error at whichever call next asks the device: two crashes of one
    out-of-bounds read, reported by two calls, are one key; another sticky error, or another
    exception, is another."""
    from fuzz.failures import CRASH, Finding

    def crash(exception, text):
        return Finding(CRASH, "crash", text, details={"exception": exception, "text": text})

    xla = "INTERNAL: CUDA error: {}: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"
    one = bug_key(crash("JaxRuntimeError", xla.format("Error recording CUDA event")))
    two = bug_key(crash("JaxRuntimeError", xla.format("Failed to check stream capturing status")))
    assert one == two == "crash|crash|-|JaxRuntimeError: sticky CUDA error: illegal memory access"
    torch_text = (
        "CUDA error: misaligned address\nCUDA kernel errors might be asynchronously reported"
    )
    assert bug_key(crash("RuntimeError", torch_text)).endswith("misaligned address")
    assert (
        bug_key(crash("RuntimeError", "row 3 out of range"))
        == "crash|crash|-|RuntimeError: row # out of range"
    )


def test_an_example_that_is_two_rows_of_one_key_bridges_them_unless_free_choices_part_them():
    """Two rows of one key whose conditions do not nest (the rescale bug's, met under a partial
    tile and under a scale) and an example of it under a bias: once its bias is dropped it fails
    alike under conditions that nest with each row's, so it is each of them, and they are one
    bug (``Duplicates.bridges``; the campaign's ledger joins them). Rows of half dtypes apart,
    fp16 for one and bf16 for the other, are reached through free choices apart: two bugs may
    look so, and nothing bridges them. Past its deadline the check bridges nothing."""
    import time

    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates
    from fuzz.profiles import HuntOptions

    row = np.zeros((1, 32), np.float32)
    row[0, 20] = 50.0
    params = {"dtype": "float32", "scale": None, "block_m": 16, "block_n": 16}
    bias = np.full((1, 32), 0.5, np.float32)
    f = _found(
        "accuracy",
        "oracle",
        Case({"x": row, "bias": bias}, dict(params)),
        triggers=("feature bias", "multi-tile"),
    )
    key = "accuracy|oracle|y|-"

    def checker(*known):
        return Duplicates(
            get("two_bugs_softmax"),
            get_backend("triton-interpret"),
            HuntOptions.of(fuzz.get_profile("ci")),
            found={},
            known_bugs=list(known),
        )

    tile = Bug(key, frozenset({"multi-tile", "partial-tile"}), "tile")
    scaled = Bug(key, frozenset({"multi-tile", "feature scale"}), "scaled")
    me = checker(tile, scaled)
    got = me.of(f)
    assert got == (tile, "conditions")
    assert me.bridges(f, got) == [scaled]
    assert me.known_bugs == [tile, scaled]  # (as it was)
    fp16 = Bug(key, frozenset({"multi-tile", "dtype float16"}), "fp16")
    bf16 = Bug(key, frozenset({"multi-tile", "dtype bfloat16"}), "bf16")
    me = checker(fp16, bf16)
    got = me.of(f)
    assert got == (fp16, "conditions")
    assert me.needs_fewer(f, [bf16]) is bf16  # (each alone: the check would say so)
    assert me.bridges(f, got) == []
    assert checker(tile, scaled).bridges(f, (tile, "influence")) == []  # (likeness: nothing)
    me = checker(tile, scaled)
    me.deadline = time.perf_counter() - 1.0
    assert me.bridges(f, (tile, "conditions")) == []


def test_one_exception_raised_at_one_line_of_a_kernels_code_is_one_bug():
    """Round 13's jagged slab filled from its end raises one broadcast ``ValueError`` at one
    line of its wrapper for a trailing and for a leading empty segment: conditions that do not
    nest, two crash rows on an H200. Where a crash was raised in the kernel's own code (the
    innermost frame outside the harness and the libraries it runs on) is its site: one bug,
    in the ledger and in the duplicate check. Another line is another site; a sticky CUDA
    error, reported wherever the next call asks the device, has none; a library's frames are
    passed over for the line of the kernel's code that called it."""
    from fuzz.backends import get_backend
    from fuzz.failures import raised_at
    from fuzz.ledger import BugLedger, bug_of_record
    from fuzz.properties import check_case
    from fuzz.signatures import raise_site

    load_plugin(str(PLUGINS / "planted13_pallas.py"))
    target = get("planted13_jagged_slab_filled_from_its_end_pallas")

    def crash(lengths, columns):
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
        values = np.ones((sum(lengths), columns), np.float32)
        params = {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None}
        case = Case({"values": values, "offsets": offsets}, {**params, "guard": "nan"})
        f = check_case(target, get_backend("pallas-interpret"), case).finding
        assert f is not None and f.cls == "crash", f
        return f

    trailing, leading = crash([1, 0], 4), crash([0, 2], 1)
    here = raise_site(trailing.details)
    assert here is not None and here.startswith("raised at planted13_pallas.py:")
    assert raise_site(leading.details) == here and bug_key(trailing) == bug_key(leading)
    led = BugLedger()
    for sig, f, triggers in (("t", trailing, ["single-row-segments"]), ("l", leading, ["x"])):
        rec = {
            "signature": sig,
            "class": "crash",
            "bug_key": bug_key(f),
            "triggers": ["empty-segments", *triggers],
            "case_size": 4,
            "shrunk": True,
            "message": f.message,
            "details": dict(f.details),
            "reproducer": f"/nowhere/{sig}.py",
        }
        led.record(rec, sighting=f"{sig}:0:{sig}")
    assert len(led.found) == 1
    # another line, a sticky CUDA error, the harness's own exception: no such site
    other = dict(trailing.details, raised_at="planted13_pallas.py:300: x = y")
    assert raise_site(other) != here
    sticky = dict(trailing.details, text="CUDA error: an illegal memory access was encountered")
    assert raise_site(sticky) is None
    rec = {"signature": "s", "class": "crash", "bug_key": "k", "details": sticky}
    assert bug_of_record(rec).site is None
    try:
        np.linalg.inv(np.zeros((2, 2)))
    except np.linalg.LinAlgError as e:  # (raised in NumPy's code: the line that called it)
        assert raised_at(e).startswith("test_signatures.py:") and "np.linalg.inv" in raised_at(e)


def test_outputs_left_unwritten_alike_are_one_bug():
    """Round 15's softmax stored its kept keys only: a row whose one key is masked and a row of
    a kept and a masked key left, each, every element the family fixes (masked-out keys, rows
    with none) unwritten and no other: two rows of triggers that do not nest on the CPU, one
    missing store. What is left unwritten is their site (``unwritten_site``), and the ledger
    joins them; a kernel that leaves an element it computes unwritten has no such site."""
    from fuzz.backends import get_backend
    from fuzz.ledger import BugLedger
    from fuzz.properties import check_case, unwritten_kind
    from fuzz.signatures import unwritten_site

    load_plugin(str(PLUGINS / "planted15.py"))
    target = get("planted15_softmax_store_masked_by_keep_triton")

    def unwritten(mask):
        x = np.zeros((1, len(mask)), np.float32)
        case = Case({"x": x, "mask": np.asarray([mask], bool)},
                    {"dtype": "float32", "scale": None, "block_m": 4, "block_n": 16})  # fmt: skip
        f = check_case(
            target, get_backend("triton-interpret"), case, only=("poisoned-output",)
        ).finding
        assert f is not None and (f.cls, f.prop) == ("nan", "poisoned-output"), f
        return f

    alone, beside = unwritten([False]), unwritten([True, False])
    here = unwritten_site(alone.details)
    assert here == "leaves unwritten: every fixed element and no other"
    assert unwritten_site(beside.details) == here
    led = BugLedger()
    for sig, f, triggers in (("a", alone, ["row-without-valid-key"]), ("b", beside, ["x"])):
        rec = {
            "signature": sig, "class": f.cls, "bug_key": bug_key(f), "triggers": triggers,
            "case_size": 2, "shrunk": True, "message": f.message, "details": dict(f.details),
            "reproducer": f"/nowhere/{sig}.py",
        }  # fmt: skip
        led.record(rec, sighting=f"{sig}:0:{sig}")
    assert len(led.found) == 1
    fixed = np.array([[True, True, False]])
    assert unwritten_kind(np.array([[True, False, False]]), fixed) == "fixed only"
    assert unwritten_kind(np.array([[True, True, True]]), fixed) is None  # (a computed one)
    assert unwritten_kind(np.array([[True, False, False]]), fixed & False) is None
