"""The engine on fake CPU targets: each planted bug is found, classified and shrunk; a correct
target passes; the differential catches what only the twin backend does differently."""

import dataclasses

import pytest

from fuzz import engine, reproducer
from fuzz.engine import check, hunt
from fuzz.target import MutantOf, get


def test_correct_fake_target_passes(fake_plugin, fake_profile):
    result = check(get("fake_double"), "fake", fake_profile)
    assert result.examples == fake_profile.max_examples
    assert result.stats.launches >= 2 * result.examples  # the clean run and the repeat, at least


@pytest.mark.parametrize(
    "bug, cls, bound",
    [
        ("crash", "crash", 4),  # one row of 4 columns (the simulated fault needs > 3)
        ("oob", "out-of-bounds-write", 2),  # two rows of one column
        ("unwritten", "nan", 2),  # the last column of two is never written
        ("nondeterminism", "nondeterminism", 3),
        ("masking", "masking", 1),  # one masked element that x * mask turns into NaN
        ("accuracy", "accuracy", 2),
        ("nan", "nan", 2),
    ],
)
def test_planted_bug_is_found_classified_and_shrunk(
    fake_plugin, fake_profile, tmp_path, bug, cls, bound
):
    result = hunt(get(f"fake_double_{bug}"), "fake", fake_profile, repro_dir=tmp_path)
    assert result.error is None
    assert cls in result.found, result.classes
    found = result.found[cls]
    assert found.case.size <= bound, found.case
    assert found.reproducer is not None and found.reproducer.exists()
    assert result.status == "found"


def test_guard_band_finding_says_where(fake_plugin, fake_profile):
    result = hunt(get("fake_double_oob"), "fake", fake_profile)
    msg = result.found["out-of-bounds-write"].finding.message
    assert "past the end of row 0" in msg


def test_divergence_needs_the_differential(fake_plugin, fake_profile, fake_differential_profile):
    target = get("fake_double_divergence")
    assert hunt(target, "fake", fake_profile).status == "missed"
    result = hunt(target, "fake", fake_differential_profile)
    assert "backend-divergence" in result.found
    f = result.found["backend-divergence"].finding
    assert f.details["twin"] == "fake-compiled"
    assert result.found["backend-divergence"].case.inputs["x"].shape[0] == 3


def test_check_raises_a_readable_summary(fake_plugin, fake_profile, tmp_path):
    with pytest.raises(AssertionError) as info:
        check(get("fake_double_nan"), "fake", fake_profile, repro_dir=tmp_path)
    text = str(info.value)
    assert "nan (oracle)" in text and "reproducer:" in text and "minimal case:" in text


def test_hazards_are_recorded_as_events_and_on_findings(fake_plugin, fake_profile):
    result = hunt(get("fake_double_crash"), "fake", fake_profile)
    assert result.events["hazard wide"] > 0
    assert any(h.startswith("wide:") for h in result.found["crash"].finding.hazards)


def test_unavailable_backend_is_an_error_not_a_pass(fake_plugin, fake_profile):
    result = hunt(get("fake_double"), "triton", fake_profile)
    if result.error is None:
        pytest.skip("this machine has CUDA")  # pragma: no cover
    assert "not available" in result.error or "no triton kernel" in result.error
    assert result.failed


def test_time_limit_stops_generation(fake_plugin, fake_profile):
    result = hunt(
        get("fake_double"), "fake", fake_profile, max_examples=10**6, seed=1, time_limit=1.0
    )
    assert 0 < result.examples < 10**6
    assert result.seconds < 10


def _racy_target(base):
    """``fake_double`` with a "race": on every third launch of a case with 3+ columns, one output
    element comes out wrong -- so an example fails on some runs and passes on others, as a GPU
    race does."""
    import dataclasses
    import itertools

    run, launches = base.kernels["fake"], itertools.count()

    def racy(inputs, params, *, out, interpret):
        res = run(inputs, params, out=out, interpret=interpret)
        if inputs["x"].shape[1] >= 3 and next(launches) % 3 == 0:
            res["y"][0, 2] += 1.0
        return res

    return dataclasses.replace(
        base,
        name="fake_double_racy",
        kernels={"fake": racy},
        mutant=MutantOf("fake_double", "nondeterminism", shrink_bound=3),
    )


@pytest.mark.parametrize("seed", [0, 2, 3])
def test_a_flaky_failure_ends_shrunk_without_the_extra_determinism_runs(
    fake_plugin, fake_profile, seed, monkeypatch
):
    # Without the extra determinism runs (below), these seeds ended with the failure unshrunk
    # (Hypothesis stops at the first example that passes on replay) and were shrunk again from
    # where it gave up (FLAKY_RESHRINKS). An example whose runs differ is now the one flaky bug,
    # and once there is one every shrink step runs several times: Hypothesis does not give up.
    monkeypatch.setattr(reproducer, "RACE_REPEATS", 0)
    result = hunt(_racy_target(get("fake_double")), "fake", fake_profile, seed=seed, database=None)
    found = result.found["nondeterminism"]
    assert found.final, found.case
    assert found.case.inputs["x"].shape[0] == 1  # one row: what the race needs


def test_no_pareto_corpus_is_kept_and_hypothesis_is_left_as_it_was(fake_plugin, fake_profile):
    # Hypothesis keeps a Pareto front of target() scores whenever there is a database (8 ms of a
    # 20 ms example on a fast kernel); a hunt switches it off and puts it back afterwards.
    from hypothesis.database import InMemoryExampleDatabase
    from hypothesis.internal.conjecture import engine as conjecture

    before = conjecture.ParetoFront
    db = InMemoryExampleDatabase()
    result = hunt(get("fake_double_accuracy"), "fake", fake_profile, seed=0, database=db)
    assert "accuracy" in result.found and result.found["accuracy"].final
    assert conjecture.ParetoFront is before
    keys = list(db.data)
    assert keys and not [k for k in keys if k.endswith(b".pareto")], keys


@pytest.mark.parametrize("seed", range(6))
def test_once_a_race_shows_every_shrinking_step_runs_the_kernel_enough_times_to_see_it(
    fake_plugin, fake_profile, seed
):
    # The race shows on one launch in three: two runs miss it often, ten rarely. After the first
    # nondeterminism failure the determinism property runs the kernel RACE_REPEATS more times, so
    # Hypothesis shrinks without a flaky verdict.
    result = hunt(_racy_target(get("fake_double")), "fake", fake_profile, seed=seed, database=None)
    found = result.found["nondeterminism"]
    assert found.final and result.reshrinks == 0
    assert found.case.inputs["x"].shape == (1, 3)
    assert "runs differ" in found.finding.message


def test_the_profile_sets_how_long_hypothesis_may_shrink(fake_plugin, fake_profile):
    # A compiled backend pays a compile for each kernel variant a shrink step tries: the gpu
    # profiles give Hypothesis more than its own 300 s. With no time at all, shrinking stops at
    # the first failing example; the hunt puts Hypothesis's constant back afterwards.
    import dataclasses

    from hypothesis.internal.conjecture import engine as conjecture

    before = conjecture.MAX_SHRINKING_SECONDS
    target = get("fake_double_nan")
    full = hunt(target, "fake", fake_profile, seed=3, database=None)
    none = hunt(
        target, "fake", dataclasses.replace(fake_profile, shrink_seconds=0.0), seed=3, database=None
    )
    assert conjecture.MAX_SHRINKING_SECONDS == before
    assert full.found["nan"].case.size <= 2
    assert none.found["nan"].case.size > full.found["nan"].case.size


def test_a_lost_cuda_context_ends_the_hunt_and_later_gpu_hunts_refuse(
    fake_plugin, fake_profile, tmp_path
):
    # A sticky CUDA error (an illegal address) poisons every later launch in the process: the
    # hunt ends at the example that did it. Shrinking on in-process would walk down to the
    # simplest example (every launch fails now) and report that instead, as an H100 run showed
    # (in child processes it is: the next test; here there is no time for it).
    unshrunk = dataclasses.replace(fake_profile, shrink_seconds=0.0)
    result = hunt(get("fake_double_context"), "fake", unshrunk, repro_dir=tmp_path)
    assert result.error is None and result.stopped == "context-lost"
    found = result.found["crash"]
    assert found.first_example == result.examples  # nothing ran here after it
    assert found.case.inputs["x"].shape[1] > 3  # the example that did it
    assert reproducer.load(found.reproducer)[0]["isolate"] is True  # replays in a child process
    # The row says why it is not shrunk (an H200 row of 241,664 elements said nothing).
    notes = found.shrink_notes
    assert any("not shrunk: a sticky CUDA error" in n for n in notes), notes
    later = hunt(get("fake_double"), "fake-compiled", fake_profile)
    assert "lost its CUDA context earlier (fake_double_context on fake" in later.error
    assert later.examples == 0
    # Nothing on the CPU depends on the lost context.
    assert hunt(get("fake_double"), "fake", fake_profile).error is None


def test_a_crash_that_loses_the_context_is_shrunk_one_child_process_per_crash(
    fake_plugin, fake_profile
):
    """A crash whose process can launch nothing more (this fake kernel, as a lost CUDA context,
    fails every launch after its first crash) is shrunk in child processes: each starts from the
    smallest example known to crash (not launched again) and ends at the next smaller one that
    crashes; in-process, every step after the first would "crash" and the shrink would walk to
    the simplest example of all. A GPU campaign's fla-core row stayed at 241,664 elements."""
    result = hunt(get("fake_double_sticky"), "fake", fake_profile, database=None, seed=1)
    assert result.stopped == "context-lost" and result.error is None
    found = result.found["crash"]
    # The minimal crash: one row of 4 columns (the kernel crashes from 4 columns on).
    assert found.case.shapes() == {"x": [1, 4]}, found.case.shapes()
    assert found.final and found.shrink_path == "isolated"
    assert result.events["shrink: child processes"] >= 2  # the first crash ended one at least
    assert any("child process" in n and "-> 4 elements" in n for n in found.shrink_notes)
    # What the engine remembers: this process lost its context (the children's did not count).
    assert "fake_double_sticky on fake" in engine.context_lost()


@pytest.mark.parametrize("seed", range(3))
def test_a_hunt_reports_the_class_it_saw_never_the_one_a_mutant_expects(
    fake_plugin, fake_profile, seed
):
    """Hunting never prefers a mutant's expected class (only a replay prefers its recorded one):
    a racy kernel declared as an accuracy mutant, whose every failing example shows the race
    first, is reported as a race and scored as the wrong class."""
    import dataclasses

    racy = get("fake_double_nondeterminism")  # races and is off by ~1e-3: both on every example
    declared = dataclasses.replace(
        racy,
        name="fake_double_declared",
        mutant=dataclasses.replace(racy.mutant, expected_class="accuracy"),
    )
    result = hunt(declared, "fake", fake_profile, seed=seed, database=None)
    assert "nondeterminism" in result.found
    assert "accuracy" not in result.found
    assert result.status == "wrong-class"


@pytest.mark.parametrize(
    "expected, classes, error, status",
    [
        (None, [], None, "pass"),
        (None, ["nan"], None, "fail"),
        (None, [], "boom", "error"),  # the harness failed, not the kernel
        (None, ["nan"], "boom", "fail"),  # a failure found before the harness failed counts
        ("nan", ["nan", "inf"], None, "found"),
        ("nan", ["inf"], None, "wrong-class"),
        ("nan", [], None, "missed"),
        ("nan", [], "boom", "error"),
    ],
)
def test_one_status_for_a_hunt_and_a_campaign_pair(expected, classes, error, status):
    from types import SimpleNamespace

    from fuzz.campaign.pairs import PairState
    from fuzz.results import HuntResult, status_of

    assert status_of(expected, classes, error=error) == status
    hunt_result = HuntResult("t", "fake", None, expected, error=error)
    hunt_result.found = {  # type: ignore[misc]
        c: SimpleNamespace(finding=SimpleNamespace(cls=c), seen_as=[]) for c in classes
    }
    assert hunt_result.status == status
    pair = PairState(SimpleNamespace(expected_class=expected), "fake", error=error)  # type: ignore[arg-type]
    pair.ledger.found = {f"sig-{c}": {"class": c} for c in classes}
    assert pair.status == status


def test_hunt_options_are_a_profile_with_overrides():
    from fuzz.profiles import HuntOptions, get_profile

    ci = get_profile("ci")
    options = HuntOptions.of(ci, scale="large", shrink_seconds=5.0, differential=True)
    assert (options.name, options.scale, options.shrink_seconds) == ("ci", "large", 5.0)
    assert options.differential and not ci.differential
    assert options.max_examples == ci.max_examples and options.settings is ci.settings
    assert HuntOptions.of(options) == options  # options pass through every layer as they are
    assert HuntOptions.of(options, differential=False).check_kwargs() == {
        "ref_device": "cpu",
        "differential": False,
        "differential_max_cost": ci.differential_max_cost,
    }
    with pytest.raises(ValueError, match="scale='huge' must be one of"):
        HuntOptions.of(ci, scale="huge")


def test_a_hunt_runs_under_options_as_under_their_profile(fake_plugin, fake_profile):
    from fuzz.profiles import HuntOptions

    target = get("fake_double_nan")
    by_profile = hunt(target, "fake", fake_profile, seed=3, database=None)
    by_options = hunt(target, "fake", HuntOptions.of(fake_profile), seed=3, database=None)
    assert by_profile.examples == by_options.examples
    assert repr(by_profile.found["nan"].case) == repr(by_options.found["nan"].case)


def test_a_hunt_resumes_the_shrinking_of_a_bug_a_lost_slice_streamed(fake_plugin, fake_profile):
    """A campaign slice whose worker was lost leaves what it streamed unshrunk; the pair's next
    slice is given each such bug (``fuzz.results.Resume``: its key, its example's choices, the
    narrowing it was drawn under, its record's sighting) and shrinks it first, as its search
    shrinks what it finds, streaming the shrunk example as that sighting's."""
    from fuzz.engine import Hooks
    from fuzz.results import decode_choices, encode_choices
    from fuzz.signatures import Resume

    first_sights = []
    unshrunk = hunt(
        get("fake_double_nan"),
        "fake",
        fake_profile,
        seed=3,
        database=None,
        hooks=Hooks(on_found=lambda r, f: f.final or first_sights.append(f)),
    )
    big = first_sights[0]  # what a slice streams first: its first sight, unshrunk
    assert not big.final and big.case.size > unshrunk.found["nan"].case.size
    text = big.as_dict()["choices"]
    assert decode_choices(text) == tuple(big.choices)  # an unshrunk record keeps its choices
    entry = Resume(big.key, text, dict(unshrunk.variants), "3:0:" + big.key)
    streamed = []
    result = hunt(
        get("fake_double_nan"),
        "fake",
        fake_profile,
        database=None,
        max_examples=1,
        known=[big.finding.cls],  # (the search itself counts it as a hit)
        hooks=Hooks(on_found=lambda r, f: streamed.append(f)),
        resume=[entry],
    )
    shrunk = [f for f in streamed if f.resumes == entry.sighting]
    assert len(shrunk) == 1 and shrunk[0].final, streamed
    assert shrunk[0].case.size <= 2 and shrunk[0].key == big.key
    assert shrunk[0].as_dict()["choices"] is None and shrunk[0].as_dict()["resumes"]
    assert result.events["resumed: shrunk"] == 1 and result.shrink_examples > 0
    # Choices that do not replay under the narrowing, or do not decode, cost nothing more.
    bad = Resume(big.key, "not base64!", None, "x")
    assert (
        hunt(
            get("fake_double_nan"),
            "fake",
            fake_profile,
            database=None,
            max_examples=1,
            known=["nan"],
            resume=[bad],
        ).events["resumed: choices unreadable"]
        == 1
    )
    assert encode_choices(tuple(big.choices)) == text


def test_a_bug_whose_check_against_the_known_bugs_was_cut_is_checked_by_a_later_slice(
    fake_plugin, fake_profile, monkeypatch
):
    """A bug shrunk by a slice whose hard limit cut its check against the bugs found before
    (``details["unchecked"]``; a planted GLA kernel's one bug stayed two rows on an H200 so)
    keeps its choices; a later slice replays its minimal example and checks it against the
    bugs it knows but its own (``Resume.check``): a known bug seen another way is a duplicate
    of the row's sighting, else the row is streamed again, checked."""
    from fuzz import duplicates as D
    from fuzz.engine import Hooks
    from fuzz.results import encode_choices
    from fuzz.signatures import Bug, Resume

    mine = hunt(get("fake_double_nan"), "fake", fake_profile, seed=3, database=None)
    row = mine.found["nan"]
    row.finding.details["unchecked"] = True
    text = row.as_dict()["choices"]
    assert text == encode_choices(tuple(row.choices))  # (kept: a later slice replays it)
    own = Bug(row.key, frozenset(row.triggers), row.signature)
    other = Bug("accuracy|oracle|y|-", frozenset({"wide"}), "other")
    entry = Resume(row.key, text, dict(mine.variants), "3:0:" + row.key, signature=own.signature,
                   check=True)  # fmt: skip
    checked_against = []

    def of(self, f):
        checked_against.append({b.signature for b in self.known_bugs})
        return twin

    monkeypatch.setattr(D.Duplicates, "of", of)
    for twin in (None, (other, "property")):
        streamed = []
        result = hunt(
            get("fake_double_nan"),
            "fake",
            fake_profile,
            database=None,
            max_examples=1,
            known=[own, other],  # (the slice knows the row's own bug)
            hooks=Hooks(on_found=lambda r, f: streamed.append(f)),
            resume=[entry],
        )
        assert checked_against[-1] == {"other"}  # (not against its own bug)
        again = [f for f in streamed if f.resumes == entry.sighting]
        if twin is None:
            assert result.events["resumed check: a bug of its own"] == 1
            (f,) = again
            assert f.final and f.case.digest() == row.case.digest()
            assert not f.finding.details.get("unchecked") and f.as_dict()["choices"] is None
            assert f.shrink_notes[-1].startswith("checked against the bugs found before")
        else:
            assert not again and result.events["resumed check: a known bug seen another way"]
            (dup,) = [d for d in result.duplicates if d.get("resumes")]
            assert dup["twin"] == "other" and dup["resumes"] == entry.sighting


def test_a_flaky_failure_one_of_whose_runs_lost_the_context_ends_the_hunt(
    fake_plugin, fake_profile
):
    """fla's backward on an H200: one case gave a wrong dv on its first run and an illegal
    address on its replay. The flaky finding kept it, but the hunt went on shrinking in a
    process whose context was lost, each stage an error ("this process lost its CUDA context
    earlier"). A flaky failure one of whose runs lost the context is a lost context: the hunt
    ends there, the row says why it is not shrunk."""
    result = hunt(get("fake_double_flaky_sticky"), "fake", fake_profile, database=None, seed=1)
    assert result.stopped == "context-lost" and result.error is None
    (found,) = result.found.values()
    assert found.finding.cls == "nondeterminism" and found.finding.prop == "replays"
    assert "illegal memory access" in found.finding.details["lost_context"]
    assert reproducer.kills_context(found.finding)
    assert found.first_example == result.examples and result.shrink_examples == 0
    assert any("a flaky failure is not shrunk in child processes" in n for n in found.shrink_notes)
    # Not for another slice to resume (replayed there, it would lose that process's context too).
    assert not found.final and found.lost_context and found.as_dict()["choices"] is None
    assert "fake_double_flaky_sticky on fake" in engine.context_lost()


def test_shrink_steps_check_no_property_past_those_of_the_bugs_they_shrink(
    fake_plugin, fake_profile
):
    """While Hypothesis shrinks, a step is checked up to the last property a bug of the hunt
    failed (a case stops at its first failure, so a step that fails none of those is none of
    its bugs): most steps fail nothing and paid every later property's launches, most of the
    suite's mutant proofs' time. The later properties' parameters are still drawn (a step's
    choices are a full check's) and they are checked while the search generates; the bug
    shrinks to the same minimal example."""
    from hypothesis import strategies as st

    from fuzz.hypothesis_internals import in_shrink_phase
    from fuzz.properties import Property, properties_of
    from fuzz.target import get, register

    calls = {"generate": 0, "shrink": 0}

    def late(ctx, value):
        calls["shrink" if in_shrink_phase() else "generate"] += 1
        return None

    base = get("fake_double_nan")
    try:
        target = get("fake_double_nan_late_property")
    except Exception:
        target = dataclasses.replace(
            base,
            name="fake_double_nan_late_property",
            properties=(*base.properties, Property("late", late, st.integers(0, 3))),
        )
        register(target)
    names = [p.name for p in properties_of(target)]
    assert names.index("late") > names.index("oracle")
    result = hunt(target, "fake", fake_profile, seed=3, database=None)
    found = result.found["nan"]
    assert found.final and found.key.split("|")[1] == "oracle", found.key
    assert calls["generate"] > 0 and calls["shrink"] == 0, calls
    assert "late" in found.params  # drawn all the same
    plain = hunt(base, "fake", fake_profile, seed=3, database=None).found["nan"]
    assert found.case.size == plain.case.size


def test_a_resumed_row_whose_example_fails_as_a_known_bug_is_that_bug(fake_plugin, fake_profile):
    """A row a later slice took whose example, replayed, did not fail its own way but as a
    known bug is that bug seen another way (a duplicate with how "replay", its row taken into
    the bug's), not a row beside it with a note: a planted jagged kernel's race kept an
    accuracy row of 3,239 elements beside its out-of-bounds row on an H200, each replay of its
    example a hit of the out-of-bounds bug. Where no known bug was hit, the note stays."""
    from fuzz.engine import Hooks
    from fuzz.signatures import Bug, Resume

    first = []
    hunt(get("fake_double_nan"), "fake", fake_profile, seed=3, database=None,
         hooks=Hooks(on_found=lambda r, f: f.final or first.append(f)))  # fmt: skip
    big = first[0]
    rec = big.as_dict()
    other_key = "accuracy|oracle|y|-"  # what its first run failed: it does not come again
    entry = Resume(other_key, rec["choices"], None, "3:0:" + other_key, signature="acc")
    known = [Bug(big.key, frozenset(), "nanbug")]
    result = hunt(get("fake_double_nan"), "fake", fake_profile, database=None, max_examples=1,
                  known=known, resume=[entry])  # fmt: skip
    (dup,) = result.duplicates
    assert dup["twin"] == "nanbug" and dup["how"] == "replay", dup
    assert dup["resumes"] == entry.sighting and dup["bug_key"] == other_key
    assert result.resume_notes == [] and result.known_hits["nanbug"] >= 1
    # no known bug hit (the bug-free kernel passes): a note, no duplicate
    result = hunt(get("fake_double"), "fake", fake_profile, database=None, max_examples=1,
                  known=known, resume=[entry])  # fmt: skip
    assert result.duplicates == [] and len(result.resume_notes) == 1


def test_a_shrink_step_that_would_end_past_the_hard_limit_is_not_started(monkeypatch):
    """While shrinking, a step is not started where one as long as the longest example so far
    (its compiles left out) would end past the hunt's hard limit: the hunt stops there with what
    it shrank (``stopped`` "hard-limit"). On an H200 one step of a 63,600-element interpreted
    Pallas case ran past the limit and the campaign killed the worker. Fuzzing examples, and
    Hypothesis's final replay, are not held back so."""
    from types import SimpleNamespace

    me = object.__new__(engine._Hunter)
    me.hard_at, me.stop_at, me.longest = 100.0, None, 10.0
    me.result = SimpleNamespace(stats=SimpleNamespace(compile_seconds=0.0), stopped=None)
    monkeypatch.setattr(engine.time, "perf_counter", lambda: 95.0)
    shrinking = [True]
    monkeypatch.setattr(engine, "in_shrink_phase", lambda: shrinking[0])
    with pytest.raises(engine.OutOfTime):
        me._check_time(final=False)
    assert me.result.stopped == "hard-limit"
    me.result.stopped = None
    me._check_time(final=True)  # the final replay runs
    me.longest = 4.0
    me._check_time(final=False)  # 95 + 4 <= 100: started
    me.longest, shrinking[0] = 10.0, False
    me._check_time(final=False)  # fuzzing: its own time limits
    assert me.result.stopped is None


def test_a_resumed_row_whose_example_no_longer_fails_says_so_to_the_campaign(
    fake_plugin, fake_profile
):
    """A row a later slice took to shrink whose example passed when replayed (a GPU NaN of reads
    past the keys came and went between runs; its row of 393,216 elements said only that its
    slice had ended) gets a note saying so, for its report (``HuntResult.resume_notes``)."""
    from fuzz.engine import Hooks
    from fuzz.ledger import BugLedger
    from fuzz.results import not_shrunk_why
    from fuzz.signatures import Resume

    first = []
    hunt(get("fake_double_nan"), "fake", fake_profile, seed=3, database=None,
         hooks=Hooks(on_found=lambda r, f: f.final or first.append(f)))  # fmt: skip
    big = first[0]
    rec = big.as_dict()
    entry = Resume(big.key, rec["choices"], None, "3:0:" + big.key)
    # the same example on the bug-free kernel: it passes
    result = hunt(get("fake_double"), "fake", fake_profile, database=None, max_examples=1,
                  resume=[entry])  # fmt: skip
    assert result.events["resumed: did not fail so again"] == 1
    (said,) = result.resume_notes
    assert said["resumes"] == entry.sighting and "it passed" in said["note"], said
    assert "resume_notes" in result.as_dict()
    led = BugLedger()
    led.record({**rec, "signature": "big"}, sighting=entry.sighting)
    led.note(entry.sighting, said["note"])
    assert not_shrunk_why(led.found["big"]) == said["note"]
