"""The planted one-bug kernels of round 3 (``tests/plugins/planted3.py``, Triton;
``planted3_pallas.py``, Pallas): each target registered through the public plugin API, its bug
in its plugin's docstring and in the shared records (``_planted3_bugs.py``), the bug-free
controls clean on short seeded hunts, and a few of the bugs found with their expected class by
short hunts on the CPU interpreters (stopped by example counts, never by seconds).

How many rows each bug becomes is measured by ``.ci/planted_rows.py --round 3``, not asserted
here.
"""

from __future__ import annotations

import os
import sys

import pytest

from fuzz.engine import hunt
from fuzz.failures import CLASSES
from fuzz.families import family_names
from fuzz.profiles import get_profile
from fuzz.target import get, load_beside, load_plugin

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = load_beside(__file__, "_planted_checks.py", "kernel_fuzz_planted_checks")
PLUGINS = {
    "triton": os.path.join(HERE, "planted3.py"),
    "pallas": os.path.join(HERE, "planted3_pallas.py"),
}
BACKENDS = {"triton": "triton-interpret", "pallas": "pallas-interpret"}
# The families the round must cover (attention: dense, packed or decode).
FAMILIES = ("softmax", "jagged_softmax", "attention", "simple_gla_fwd")


def _module(path: str):
    """The plugin module ``load_plugin`` imported from ``path``."""
    for module in list(sys.modules.values()):
        if os.path.abspath(getattr(module, "__file__", None) or "") == path:
            return module
    raise AssertionError(f"no module imported from {path}")


@pytest.fixture(scope="module")
def plugins():
    """Each language's plugin module, loaded as ``--plugin`` loads it."""
    out = {}
    for language, path in PLUGINS.items():
        load_plugin(path)
        out[language] = _module(path)
    return out


def _planted(plugins):
    return {
        name: (language, record)
        for language, module in plugins.items()
        for name, record in module.PLANTED.items()
    }


def test_every_planted_kernel_is_a_registered_plugin_target(plugins):
    planted = _planted(plugins)
    assert len(planted) >= 10
    patterns = plugins["triton"].PATTERNS
    for language, module in plugins.items():
        assert len(module.PLANTED) >= 4, language
        # each pattern is written in the languages its record names, and nowhere else
        mine = {p for p, r in patterns.items() if language in r.languages}
        assert set(module.PLANTED) == {module.target_name(p) for p in mine}, language
    for name, (language, record) in planted.items():
        assert name.startswith("planted3_") and name.endswith(f"_{language}"), name
        target = get(name)  # registered through fuzz.fuzz_kernel by the plugin
        assert target.source == PLUGINS[language], (name, target.source)
        assert target.family == record.family, name
        assert set(target.kernels) == {language}, (name, sorted(target.kernels))
        assert target.mutant is None, name  # a real target to the harness, as a user's is
    families = {r.family.replace("_varlen", "").replace("_decode", "") for _, r in planted.values()}
    assert set(FAMILIES) <= families, sorted(families)


def test_every_control_is_a_registered_bug_free_target(plugins):
    for language, module in plugins.items():
        assert module.CONTROLS, language
        kernel_families = {r.family for r in module.PLANTED.values()}
        # every kernel a planted target runs has its control
        assert kernel_families <= {get(n).family for n in module.CONTROLS}, language
        for name in module.CONTROLS:
            target = get(name)
            assert name.startswith("control3_") and name.endswith(f"_{language}"), name
            assert target.source == PLUGINS[language] and target.mutant is None, name


def test_every_record_names_a_family_a_class_and_a_trigger(plugins):
    for name, (_, record) in _planted(plugins).items():
        assert record.family in family_names(), name
        assert len(record.bugs) == 1, name  # one planted bug per target
        bug = record.bugs[0]
        assert bug.expected in CLASSES, (name, bug.expected)
        assert bug.what.strip() and bug.trigger.strip(), name
        # what the CPU campaigns found, in the language the pattern is written in
        assert set(record.languages) <= set(record.cpu), name


def test_the_patterns_are_new(plugins):
    """No pattern of the earlier round's records, nor a mutant of the same family and name, is
    planted again (the patterns were checked against the mutants' descriptions when they were
    written: ``softmax_masked_scale_twice`` scales twice only on the masked path, where the
    mutant ``softmax_mutant_scale_twice`` does everywhere; names are what a test can hold)."""
    from fuzz.target import all_targets

    old = CHECKS.record_keys(os.path.join(HERE, "_planted_bugs.py"))
    mutants = {t.name.replace("_mutant_", "_") for t in all_targets() if "_mutant_" in t.name}
    assert "softmax_scale_twice" in mutants  # (what the names look like)
    for pattern in plugins["triton"].PATTERNS:
        assert pattern not in old and pattern not in mutants, pattern


def test_every_planted_kernel_has_a_docstring_line_with_its_trigger_and_class(plugins):
    for language, module in plugins.items():
        entries = CHECKS.docstring_entries(module.__doc__, "planted3_")
        assert set(entries) == set(module.PLANTED), (
            language,
            sorted(set(entries) ^ set(module.PLANTED)),
        )
        for name, record in module.PLANTED.items():
            text = entries[name]
            assert "Trigger:" in text, name
            assert f"Expected: {record.bugs[0].expected}" in text, (name, text)
    assert "interpreted" in plugins["pallas"].__doc__.split("\n\n")[0]


def _hunt(name: str, examples: int):
    backend = BACKENDS["pallas" if name.endswith("_pallas") else "triton"]
    result = hunt(
        get(name), backend, get_profile("ci"), database=None, max_examples=examples, seed=1
    )
    assert result.error is None, result.error
    return [f.as_dict() for f in result.found.values()]


# Controls quick to hunt (the Pallas attention, decode and GLA controls compile a program per
# case structure: the campaign of .ci/planted_rows.py --round 3 runs them).
CONTROLS = [
    "control3_softmax_triton",
    "control3_jagged_softmax_triton",
    "control3_attention_triton",
    "control3_softmax_pallas",
]


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_is_clean_on_a_short_seeded_hunt(plugins, name):
    rows = _hunt(name, 15)
    assert not rows, [(r["class"], r["property"], r.get("output"), r.get("message")) for r in rows]


# A sample quick to find (within 10-20 examples under seed 1), of both languages.
SAMPLE = [
    ("planted3_jagged_store_inclusive_end_triton", 10),
    ("planted3_softmax_masked_scale_twice_triton", 20),
    ("planted3_attention_gqa_v_head_pallas", 10),
]


@pytest.mark.parametrize(("name", "examples"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, examples):
    bug = _planted(plugins)[name][1].bugs[0]
    rows = _hunt(name, examples)
    assert any(r["class"] == bug.expected for r in rows), (
        f"{name}: {bug.expected} ({bug.trigger}) not found; found "
        f"{[(r['class'], r['property']) for r in rows]}"
    )


# One bug, several rows: the duplicate check's evidence on round 3's minimal examples. Each row is
# a Found as a hunt settles it: its key and triggers as the hunt computes them.


def _options():
    return CHECKS.options()


_as_found = CHECKS.as_found


def _varlen_case(q, k, v, cu_q, cu_k):
    import numpy as np

    from fuzz.case import Case

    def arr(x):
        return np.asarray(x, np.float32).reshape(1, 1, -1, 1)

    params = {
        "dtype": "float32", "causal": False, "window": None, "scale": None, "softcap": None,
        "alibi": None, "block_q": 16, "block_k": 16,
    }  # fmt: skip
    inputs = {"q": arr(q), "k": arr(k), "v": arr(v)}
    inputs |= {
        "cu_seqlens_q": np.asarray(cu_q, np.int32),
        "cu_seqlens_k": np.asarray(cu_k, np.int32),
    }
    return Case(inputs, params)


def test_a_masked_poison_row_is_the_bug_whose_wrong_elements_read_what_its_poison_moved(plugins):
    """The planted packed attention kernel that reads a sequence's keys from its query offset came
    as two rows (a CPU campaign of 900 s): ``accuracy`` of ``o`` (the second sequence reads the
    first one's key), and ``masked-poison`` of ``o`` (the second sequence reads a guard row after
    the data, which the poison sets to NaN; its clean values equal the right key's, so no oracle
    fails). Neither example fails the other's way and the second has no wrong element to analyse;
    but its poison is evidence of its own: the poisoned key and value rows, which no output may
    depend on, moved ``o``: the inputs its wrong elements read as their reference does not
    (``fuzz.influence.poison_reads``), as the accuracy row's do."""
    from fuzz import influence
    from fuzz.backends import get_backend
    from fuzz.duplicates import bug_of

    target, backend = (
        get("planted3_varlen_key_start_of_query_triton"),
        get_backend("triton-interpret"),
    )
    # query lengths 1, 1 and key lengths 2, 1: the second sequence reads key 1, not key 2
    accuracy = _as_found(
        target,
        backend,
        _varlen_case([0.5, -1.0], [0.3, 1.5, -0.7], [1.0, -2.0, 0.5], [0, 1, 2], [0, 2, 3]),
    )
    # query lengths 2, 1 and key lengths 1, 1, a guard row after them: the second sequence reads
    # the guard row (row 2), whose key and value equal its own key's (row 1)
    poisoned = _as_found(
        target,
        backend,
        _varlen_case([0.5, -1.0, 0.8], [0.3, 1.5, 1.5], [1.0, -2.0, -2.0], [0, 2, 3], [0, 1, 2]),
        {"masked-poison": "nan"},
    )
    assert accuracy.key == "accuracy|oracle|o|-"
    assert poisoned.key == "masking|masked-poison|o|-"
    options = _options()
    assert influence.anomalies(target, backend, options, poisoned.case) is None  # no wrong element
    assert influence.poison_reads(target, backend, options, poisoned.case, "nan") == {
        ("k", influence.READS),
        ("v", influence.READS),
    }
    for new, old in ((poisoned, accuracy), (accuracy, poisoned)):
        me = _duplicates(target, backend, {old.finding.cls: old})
        assert me.also_fails(new) is None and me.shown_by_known(new) is None
        assert me.of(new) == (bug_of(old), "influence"), (new.key, old.key)


def _duplicates(target, backend, settled):
    """The duplicate check of a hunt that settled ``settled`` (label -> Found)."""
    from fuzz.duplicates import Duplicates, bug_of

    return Duplicates(
        target,
        backend,
        _options(),
        found=dict(settled),
        known_bugs=[bug_of(f) for f in settled.values()],
    )


def _attention_case(q, k, v, window):
    import numpy as np

    from fuzz.case import Case

    def arr(x):
        return np.asarray(x, np.float32).reshape(1, 1, -1, 1)

    params = {
        "dtype": "float32", "causal": False, "window": list(window), "scale": None,
        "softcap": None, "alibi": None, "block_q": 16, "block_k": 16,
    }  # fmt: skip
    return Case({"q": arr(q), "k": arr(k), "v": arr(v)}, params)


def test_a_bug_seen_another_way_lends_its_example_to_the_duplicate_check(plugins):
    """The planted attention kernel whose window's right bound lets one key too many in came as
    three rows of one hunt (a CPU campaign of 900 s), its minimal examples two queries under a
    window (-1, 0): ``masking`` of ``o`` (one key: query 0, whose window holds none, sees it),
    ``accuracy`` of ``o`` (two keys: query 0 sees both) and ``accuracy`` of ``lse`` (two keys
    whose values are equal: ``o`` is right). The ``o`` rows read alike (influence): one bug, the
    masking example standing for it. The ``lse`` row fails neither way of the masking example
    and reads other inputs (the key; the masking one's wrong element reads the value), but
    both match the oracle with each query one key late (``fuzz.explain``); and the accuracy
    example of ``o`` fails ``lse`` as it does: the bug seen another way is the bug's example
    too, as the campaign's ledger keeps it for later slices."""
    import dataclasses

    from fuzz.backends import get_backend
    from fuzz.duplicates import bug_of
    from fuzz.signatures import Bug

    target, backend = get("planted3_attention_window_right_triton"), get_backend("triton-interpret")
    q, k = [-1.2714454, -1.4785151], [-1.1290556, -0.084017724]
    masking = _as_found(target, backend, _attention_case(q, k[:1], [-0.13898355], (-1, 0)))
    o_row = _as_found(target, backend, _attention_case(q, k, [-0.13898355, 1.9015169], (-1, 0)))
    lse_row = _as_found(target, backend, _attention_case(q, k, [60000.0, 60000.02], (-1, 0)))
    assert (masking.key, o_row.key, lse_row.key) == (
        "masking|oracle|o|-",
        "accuracy|oracle|o|-",
        "accuracy|oracle|lse|-",
    )
    assert _duplicates(target, backend, {"masking": masking}).reads_alike(o_row) == bug_of(masking)
    # Both also match the oracle under one mix-up (``fuzz.explain``), evidence checked first.
    assert _duplicates(target, backend, {"masking": masking}).of(o_row) == (
        bug_of(masking),
        "explained",
    )
    # The lse row fails neither way and reads other inputs; it matches the oracle under the
    # masking row's mix-ups (each query one key late, or the window's sides swapped): joined.
    assert _duplicates(target, backend, {"masking": masking}).of(lse_row) == (
        bug_of(masking),
        "explained",
    )
    # the hunt settled the masking row and saw the o row as it (as fuzz.engine records it)
    settled = dataclasses.replace(masking, seen_as=[o_row])
    me = _duplicates(target, backend, {"masking": settled})
    me.known_bugs.append(Bug(o_row.key, frozenset(o_row.triggers), masking.signature))
    twin, how = me.of(lse_row)
    assert (twin.signature, twin.key, how) == (masking.signature, o_row.key, "property")


def test_a_finding_keeps_the_other_classes_its_example_failed_with(plugins):
    """The running max from 0: in one segment of two rows, a column with one finite value (its
    output fixed at 1) and columns of two values below -104 are all wrong. The finding is
    ``masking`` (a fixed element) and keeps ``accuracy`` (the others) in ``also_fails``: the
    evidence that joins the accuracy row of the same bug (``fuzz.ledger.linked``)."""
    import numpy as np

    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.properties import check_case
    from fuzz.target import get

    target = get(plugins["pallas"].target_name("jagged_max_from_zero"))
    values = np.full((2, 4), -120.0, np.float32)
    values[1, 1:] = -121.0
    values[0, 3] = -np.inf
    case = Case(
        {"values": values, "offsets": np.array([0, 2], np.int32)},
        {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None, "guard": "nan"},
        {"lengths": [2]},
    )
    finding = check_case(target, get_backend("pallas-interpret"), case).finding
    assert finding is not None and finding.cls == "masking", finding
    assert finding.details["also_fails"] == {"accuracy": 6}, finding.details.get("also_fails")


def _jagged_case(rows, cols, seed=0):
    import numpy as np

    from fuzz.case import Case

    values = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    return Case(
        {"values": values, "offsets": np.array([0, rows], np.int32)},
        {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None, "guard": "nan"},
        {"lengths": [rows]},
    )


def test_a_store_past_the_end_is_traced_to_its_kernel_line(plugins):
    """The inclusive segment end: a one-row segment of four columns and a two-row segment of one
    column write past the output through one ``tl.store``; their minimal examples share no
    trigger, and the store site makes them one bug (``fuzz.signatures.same_bug``). The bug-free
    control stores nothing outside its buffers."""
    from fuzz import origin
    from fuzz.signatures import Bug, same_bug, site
    from fuzz.target import get

    target = get(plugins["triton"].target_name("jagged_store_inclusive_end"))
    sites = []
    for rows, cols in ((1, 4), (2, 1)):
        o = origin.trace_stores(target, "triton-interpret", _jagged_case(rows, cols))
        assert o["found"] and "tl.store(" in o["source"], o
        assert o["file"].endswith("planted3.py") and "outside every buffer" in o["detail"]
        sites.append(site(o))
    assert sites[0] == sites[1]
    key = "out-of-bounds-write|guard-bands|-|-"
    a = Bug(key, frozenset({"single-row-segments"}), "a", sites[0])
    b = Bug(key, frozenset({"partial-column-block"}), "b", sites[1])
    assert same_bug(a, b)
    control = get("control3_jagged_softmax_triton")
    for rows, cols in ((1, 4), (2, 1), (5, 7)):
        o = origin.trace_stores(control, "triton-interpret", _jagged_case(rows, cols))
        assert not o["found"], o


def test_a_store_into_the_next_segment_races_its_program_at_the_same_site(plugins):
    """The inclusive segment end stores one row past each segment: into the next segment's first
    row, which that segment's program stores too. On a GPU either value may stay (an H200 gave
    two masking rows beside the out-of-bounds one); the interpreter, one program after another,
    passes. The access trace (``fuzz.origin.trace_accesses``, rows of wrong values) names the
    racing store, the line of the store past the end: one site, one bug
    (``fuzz.ledger.same_site``). The control's programs store apart."""
    import numpy as np

    from fuzz import origin
    from fuzz.case import Case
    from fuzz.signatures import site
    from fuzz.target import get

    def case(rows, offsets):
        values = np.random.default_rng(0).standard_normal((rows, 4)).astype(np.float32)
        return Case(
            {"values": values, "offsets": np.array(offsets, np.int32)},
            {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None, "guard": "nan"},
            {"lengths": list(np.diff(offsets))},
        )

    target = get(plugins["triton"].target_name("jagged_store_inclusive_end"))
    # segments of rows [0, 2) and [2, 4) of 5: the first stores row 2, the second's first row
    raced = origin.trace_accesses(target, "triton-interpret", case(5, [0, 2, 4]))
    assert raced["found"] and raced["kind"] == "store racing another program's", raced
    assert "(0, 0, 0)" in raced["detail"] and "this one (1, 0, 0)" in raced["detail"]
    past = origin.trace_stores(target, "triton-interpret", _jagged_case(1, 4))
    assert site(raced) == site(past) and "tl.store(" in raced["source"]
    control = get("control3_jagged_softmax_triton")
    for rows, offsets in ((5, [0, 2, 4]), (6, [0, 1, 3, 6])):
        o = origin.trace_accesses(control, "triton-interpret", case(rows, offsets))
        assert not o["found"], o
        assert "nor a store racing another program's" in o["note"]


def test_a_hunts_duplicate_check_joins_two_stores_past_the_end_by_their_site(plugins):
    """The duplicate check of a hunt (``fuzz.duplicates.Duplicates.same_site``): a new
    out-of-bounds write of the inclusive-end kernel, under triggers that do not nest with the
    known one's, stores through the known one's line: that bug, reached through other
    conditions. Its site is traced for both (the known one's from its kept example)."""
    from fuzz import failures as F
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates
    from fuzz.failures import Finding, bug_key
    from fuzz.profiles import HuntOptions, get_profile
    from fuzz.results import Found
    from fuzz.signatures import Bug
    from fuzz.target import get

    target = get(plugins["triton"].target_name("jagged_store_inclusive_end"))

    def found(case, triggers, sig):
        f = Finding(F.OOB_WRITE, "guard-bands", "written outside output y")
        f.details.update(triggers=sorted(triggers), signature=sig)
        return Found(f, case, {}, 1, 0.1, choices=(1,), key=bug_key(f), final=True)

    old = found(_jagged_case(1, 4), {"single-row-segments"}, "old")
    new = found(_jagged_case(2, 1), {"partial-column-block"}, "new")
    known = Bug(old.key, frozenset(old.triggers), "old")
    me = Duplicates(
        target,
        get_backend("triton-interpret"),
        HuntOptions.of(get_profile("ci")),
        found={old.key: old},
        known_bugs=[known],
    )
    assert me.same_site(new, [known]) is known
    assert "tl.store(" in new.finding.details["origin"]["source"]


def test_a_load_past_the_keys_is_the_site_of_every_row_it_gives(plugins):
    """The packed attention kernel that reads a sequence's keys from its query offset: where the
    last sequence's queries start past the last key, it loads past the end of ``k`` and ``v``.
    On a GPU that load reads whatever lies there, and one bug gave rows of four classes (NaN,
    Inf, wrong values, runs that differ); in the interpreted replay the load names its line
    (``fuzz.origin.trace_loads``), the site that makes those rows one bug
    (``fuzz.ledger.same_site``). A wrong key read inside the buffer, and the bug-free control,
    load nothing past an end."""
    from fuzz import origin
    from fuzz.ledger import BugLedger
    from fuzz.signatures import site

    target = get("planted3_varlen_key_start_of_query_triton")
    # query lengths 2, 1 and key lengths 1, 1: the second sequence reads key row 2 of 2
    past = _varlen_case([0.5, -1.0, 0.8], [0.3, 1.5], [1.0, -2.0], [0, 2, 3], [0, 1, 2])
    o = origin.trace_loads(target, "triton-interpret", past)
    assert o["found"] and "tl.load(" in o["source"] and o["kind"] == "load past a buffer", o
    assert o["file"].endswith("planted3.py") and "outside every buffer" in o["detail"]
    inside = _varlen_case([0.5, -1.0], [0.3, 1.5, -0.7], [1.0, -2.0, 0.5], [0, 1, 2], [0, 2, 3])
    assert not origin.trace_loads(target, "triton-interpret", inside)["found"]
    control = get("control3_attention_varlen_triton")
    assert not origin.trace_loads(control, "triton-interpret", past)["found"]
    # Two rows of two classes from that one load: one bug.
    led = BugLedger()
    for sig, key in (("a", "nan|oracle|o|-"), ("b", "accuracy|oracle|lse|-")):
        rec = {
            "signature": sig, "class": key.split("|")[0], "bug_key": key,
            "triggers": [sig], "case_size": 8, "shrunk": True, "message": "m",
            "reproducer": f"/nowhere/{sig}.py", "details": {"origin": o},
        }  # fmt: skip
        led.record(rec, sighting=f"1:0:{sig}")
    assert list(led.found) == ["a"] and site(o) is not None
    assert [s["signature"] for s in led.found["a"]["also_seen"]] == ["b"]


def test_a_bugs_way_is_its_property_with_the_parameter_that_showed_it(plugins):
    """The planted softmax that takes the row max over masked keys came as a masking row (masked
    NaNs moved the output by an ulp) and an accuracy row (a masked logit 1e4 above the valid
    one underflows it), each its own row on an H200. The accuracy example fails
    ``masked-poison`` with NaNs or -inf in the masked key, not with the poison its own check
    drew (the largest finite value, which leaves the bug's output as it is): a way of a bug is
    its property with a parameter that shows it, each of the few tried."""
    import numpy as np

    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.duplicates import bug_of

    target, backend = get("planted3_softmax_masked_max_triton"), get_backend("triton-interpret")
    params = {"dtype": "float32", "scale": None, "block_m": 2, "block_n": 16}

    def case(x, keep):
        return Case({"x": np.asarray([x], np.float32), "mask": np.asarray([keep])}, dict(params))

    masked_first = [False, True]  # key 0 masked out, key 1 valid
    accuracy = _as_found(
        target, backend, case([0.0, -10000.0], masked_first), {"masked-poison": "max"}
    )
    masking = _as_found(target, backend, case([0.5, 0.25], masked_first), {"masked-poison": "max"})
    assert accuracy.key == "accuracy|oracle|y|-", accuracy.key
    assert masking.key == "masking|masked-poison|y|-", masking.key
    me = _duplicates(target, backend, {"masking": masking})
    assert me.fails_as(accuracy, accuracy.key, masking.key) is None  # its own poison: nothing
    assert me.also_fails(accuracy) == bug_of(masking)


def test_a_trigger_that_is_only_a_decay_form_is_recast_by_the_duplicate_check(plugins):
    """The planted GLA kernel that leaves the inter-chunk term unscaled came as two rows on an
    H200, one per decay form the search drew (per-token ``g``, one token; per-head
    ``g_gamma``, 16 tokens), each with an initial state. The second's form is recast into the
    first's (``Family.recast``: ``g_gamma`` as a ``g`` equal over the tokens, the same decays)
    and it still fails, under conditions that nest with the first's: the same bug. A bug of
    the ``g_gamma`` path alone would pass once recast, and stay a row of its own."""
    import numpy as np

    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.duplicates import bug_of
    from fuzz.families import get_family

    target, backend = get("planted3_gla_inter_unscaled_triton"), get_backend("triton-interpret")
    rng = np.random.default_rng(0)

    def case(tokens, decay):
        def arr(*shape):
            return rng.standard_normal(shape).astype(np.float32)

        params = {"dtype": "float32", "chunk_size": 16, "scale": None,
                  "output_final_state": False}  # fmt: skip
        inputs = {"q": arr(1, tokens, 1, 16), "k": arr(1, tokens, 1, 16), "v": arr(1, tokens, 1, 16),
                  "h0": arr(1, 1, 16, 16), **decay}  # fmt: skip
        return Case(inputs, params)

    per_token = _as_found(target, backend, case(1, {"g": np.full((1, 1, 1), -0.3, np.float32)}))
    per_head = _as_found(target, backend, case(16, {"g_gamma": np.full(1, -0.3, np.float32)}))
    assert per_token.key == per_head.key == "accuracy|oracle|o|-"
    assert "feature g" in per_token.triggers and "feature g_gamma" in per_head.triggers
    me = _duplicates(target, backend, {"g": per_token})
    assert me.needs_fewer(per_head, [bug_of(per_token)]) == bug_of(per_token)
    # the other way round, as the H200 met them: the per-token row, with a partial chunk (one
    # token) that the family cannot take away, recast: its conditions hold the other's
    assert "partial-chunk" in per_token.triggers and "partial-chunk" not in per_head.triggers
    me = _duplicates(target, backend, {"g_gamma": per_head})
    assert me.needs_fewer(per_token, [bug_of(per_head)]) == bug_of(per_head)
    # the recast goes both ways, and only where g is equal over the tokens
    recast = get_family("simple_gla_fwd").recast["g_gamma"][1](per_head.case)
    assert recast.inputs["g"].shape == (1, 16, 1) and "g_gamma" not in recast.inputs
    back = get_family("simple_gla_fwd").recast["g"][1](recast)
    assert np.array_equal(back.inputs["g_gamma"], per_head.case.inputs["g_gamma"])
    ragged = recast.replace(
        inputs={**recast.inputs, "g": recast.inputs["g"] * np.arange(16)[None, :, None]}
    )
    assert get_family("simple_gla_fwd").recast["g"][1](ragged) is None


def test_a_row_is_checked_again_against_the_bugs_found_since(plugins, tmp_path):
    """A slice checks its bugs against those known when it began: rows met in slices that ran
    side by side, or whose evidence (a way a bug was also seen) came later, were never checked
    against each other (the planted softmax's masked max stayed three accuracy rows on an
    H200). A later slice takes such a row (``Resume.example``: its reproducer), reads its
    minimal example back, checks it on its backend and against the bugs known now: a known
    bug seen another way is a duplicate marked ``recheck``, which the campaign takes into it."""
    import numpy as np

    from fuzz import reproducer
    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.duplicates import bug_of
    from fuzz.signatures import Resume

    target, backend = get("planted3_softmax_masked_max_triton"), get_backend("triton-interpret")
    params = {"dtype": "float32", "scale": None, "block_m": 2, "block_n": 16}

    def case(x, keep):
        return Case({"x": np.asarray([x], np.float32), "mask": np.asarray([keep])}, dict(params))

    row = _as_found(target, backend, case([0.0, -10000.0], [False, True]), {"masked-poison": "max"})
    path = reproducer.write(tmp_path, target=target, backend="triton-interpret", case=row.case,
                            params=row.params, finding=row.finding, ref_device="cpu",
                            differential=False)  # fmt: skip
    masking = _as_found(target, backend, case([0.5, 0.25], [False, True]), {"masked-poison": "max"})
    way = bug_of(masking)  # a way a bug standing now was also seen
    entry = Resume(row.key, "", None, "3:0:" + row.key, signature="row", check=True,
                   example=str(path))  # fmt: skip
    result = hunt(target, "triton-interpret", get_profile("ci"), database=None, max_examples=1,
                  known=[way], resume=[entry])  # fmt: skip
    (dup,) = result.duplicates
    assert dup["twin"] == way.signature and dup["recheck"] and dup["resumes"] == entry.sighting
    assert dup["how"] == "property"
    # against nothing it is: a bug of its own, nothing streamed, no note
    result = hunt(target, "triton-interpret", get_profile("ci"), database=None, max_examples=1,
                  resume=[entry])  # fmt: skip
    assert result.duplicates == [] and result.resume_notes == []
    assert result.events["checked again: a bug of its own"] == 1


def test_a_multi_chunk_gla_case_is_cut_to_its_last_chunk_with_its_carried_state(plugins):
    """The planted GLA kernel's unscaled inter-chunk term came as a row with a state carried
    across chunks (17 tokens, no initial state) beside its row with an initial state (an H200).
    ``multi-chunk`` is taken away by cutting the case to its last chunk, the state the float64
    recurrence carries into it given as the initial state: the same outputs for those tokens,
    and the cut case fails as the initial-state row does, under its conditions."""
    import numpy as np
    import torch

    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.duplicates import bug_of
    from fuzz.families import get_family
    from oracles.simple_gla import simple_gla_reference

    target, backend = get("planted3_gla_inter_unscaled_triton"), get_backend("triton-interpret")
    rng = np.random.default_rng(1)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    params = {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": False}
    gamma = np.full(1, -0.3, np.float32)
    carried = Case({"q": arr(1, 17, 1, 16), "k": arr(1, 17, 1, 16), "v": arr(1, 17, 1, 16),
                    "g_gamma": gamma}, dict(params))  # fmt: skip
    initial = Case({"q": arr(1, 16, 1, 16), "k": arr(1, 16, 1, 16), "v": arr(1, 16, 1, 16),
                    "g_gamma": gamma, "h0": arr(1, 1, 16, 16)}, dict(params))  # fmt: skip
    cut = get_family("simple_gla_fwd").reduce["multi-chunk"](carried)
    assert cut.inputs["q"].shape == (1, 1, 1, 16) and cut.inputs["h0"].shape == (1, 1, 16, 16)
    whole, _ = simple_gla_reference(*(torch.from_numpy(carried.inputs[n]) for n in "qkv"),
                                    g_gamma=torch.from_numpy(gamma))  # fmt: skip
    last, _ = simple_gla_reference(*(torch.from_numpy(cut.inputs[n]) for n in "qkv"),
                                   g_gamma=torch.from_numpy(gamma),
                                   initial_state=torch.from_numpy(cut.inputs["h0"]))  # fmt: skip
    assert torch.allclose(whole[:, 16:], last, rtol=1e-6, atol=1e-6)
    multi = _as_found(target, backend, carried)
    state = _as_found(target, backend, initial)
    assert "multi-chunk" in multi.triggers and "feature initial_state" in state.triggers
    me = _duplicates(target, backend, {"state": state})
    assert me.needs_fewer(multi, [bug_of(state)]) == bug_of(state)
    assert get_family("simple_gla_fwd").reduce["multi-chunk"](initial) is None  # one chunk
