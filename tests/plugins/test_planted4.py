"""The planted one-bug kernels of round 4 (``tests/plugins/planted4.py``, Triton): each target
registered through the public plugin API, its bug in the plugin's docstring and in the records
(``_planted4_bugs.py``), each bug's documented trigger failing with its expected class (and a
near miss of it passing: the kernel is right where the trigger does not hold), the bug-free
controls clean on short seeded hunts, and a sample of the bugs found with their expected class
by short hunts on Triton's interpreter (stopped by example counts, never by seconds).

How many rows each bug becomes is measured by ``.ci/planted_rows.py --round 4``, not asserted
here.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from fuzz.case import Case
from fuzz.engine import hunt
from fuzz.failures import CLASSES
from fuzz.families import family_names
from fuzz.profiles import get_profile
from fuzz.target import get, load_beside, load_plugin

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKS = load_beside(__file__, "_planted_checks.py", "kernel_fuzz_planted_checks")
PLUGIN = os.path.join(HERE, "planted4.py")
BACKEND = "triton-interpret"
# The families the round covers (attention: dense or packed).
FAMILIES = ("softmax", "jagged_softmax", "attention", "simple_gla_fwd")


def _module(path: str):
    """The plugin module ``load_plugin`` imported from ``path``."""
    for module in list(sys.modules.values()):
        if os.path.abspath(getattr(module, "__file__", None) or "") == path:
            return module
    raise AssertionError(f"no module imported from {path}")


@pytest.fixture(scope="module")
def plugin():
    """The plugin module, loaded as ``--plugin`` loads it."""
    load_plugin(PLUGIN)
    return _module(PLUGIN)


def test_every_planted_kernel_is_a_registered_plugin_target(plugin):
    assert len(plugin.PLANTED) == 6
    assert set(plugin.PLANTED) == {plugin.target_name(p) for p in plugin.PATTERNS}
    for name, record in plugin.PLANTED.items():
        assert name.startswith("planted4_") and name.endswith("_triton"), name
        target = get(name)  # registered through fuzz.fuzz_kernel by the plugin
        assert target.source == PLUGIN, (name, target.source)
        assert target.family == record.family, name
        assert set(target.kernels) == {"triton"}, (name, sorted(target.kernels))
        assert target.mutant is None, name  # a real target to the harness, as a user's is
    families = {r.family.replace("_varlen", "") for r in plugin.PLANTED.values()}
    assert set(FAMILIES) <= families, sorted(families)


def test_every_control_is_a_registered_bug_free_target(plugin):
    kernel_families = {r.family for r in plugin.PLANTED.values()}
    # every kernel a planted target runs has its control, one per family
    assert {get(n).family for n in plugin.CONTROLS} == kernel_families
    for name in plugin.CONTROLS:
        target = get(name)
        assert name == f"control4_{target.family}_triton", name
        assert target.source == PLUGIN and target.mutant is None, name


def test_every_record_names_a_family_a_class_and_a_trigger(plugin):
    rounds = sys.modules["kernel_fuzz_planted3_bugs"]
    for name, record in plugin.PLANTED.items():
        # round 3's record classes, loaded from its file, not copied
        assert type(record) is rounds.Pattern and type(record.bugs[0]) is rounds.Bug, name
        assert record.family in family_names(), name
        assert record.languages == ("triton",), name
        assert len(record.bugs) == 1, name  # one planted bug per target
        bug = record.bugs[0]
        assert bug.expected in CLASSES, (name, bug.expected)
        assert bug.what.strip() and bug.trigger.strip(), name
        assert set(record.cpu) <= {"triton"}, name  # filled in from a campaign, or empty


def test_the_patterns_are_new(plugin):
    """No pattern of the earlier rounds' records, nor a mutant of the same family and name, is
    planted again (the patterns were checked against the mutants' and the other test plugins'
    descriptions when they were written; names are what a test can hold)."""
    from fuzz.target import all_targets

    old = CHECKS.record_keys(os.path.join(HERE, "_planted_bugs.py"))
    old |= CHECKS.record_keys(os.path.join(HERE, "_planted3_bugs.py"))
    assert {"softmax_frozen_max", "attention_window_right"} <= old  # (both rounds read)
    mutants = {t.name.replace("_mutant_", "_") for t in all_targets() if "_mutant_" in t.name}
    assert "softmax_scale_twice" in mutants  # (what the names look like)
    for pattern in plugin.PATTERNS:
        assert pattern not in old and pattern not in mutants, pattern


def test_every_planted_kernel_has_a_docstring_line_with_its_trigger_and_class(plugin):
    entries = CHECKS.docstring_entries(plugin.__doc__, "planted4_")
    assert set(entries) == set(plugin.PLANTED), sorted(set(entries) ^ set(plugin.PLANTED))
    for name, record in plugin.PLANTED.items():
        text = entries[name]
        assert "Trigger:" in text, name
        assert f"Expected: {record.bugs[0].expected}" in text, (name, text)


# Each bug's documented trigger, and a near miss of it ----------------------------------------------


def _arr(x):
    return np.asarray(x, np.float32).reshape(1, 1, -1, 1)


def _softmax_case(x, keep=None):
    inputs = {"x": np.asarray([x], np.float32)}
    if keep is not None:
        inputs["mask"] = np.asarray([keep])
    return Case(inputs, {"dtype": "float32", "scale": None, "block_m": 2, "block_n": 16})


def _jagged_case(rows, cols):
    values = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    return Case(
        {"values": values, "offsets": np.array([0, rows], np.int32)},
        {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None, "guard": "nan"},
        {"lengths": [rows]},
    )


def _attention_case(q, k, v, *, causal=False, slopes=None):
    params = {
        "dtype": "float32", "causal": causal, "window": None, "scale": None, "softcap": None,
        "alibi": None if slopes is None else "user", "block_q": 16, "block_k": 16,
    }  # fmt: skip
    inputs = {"q": _arr(q), "k": _arr(k), "v": _arr(v)}
    if slopes is not None:
        inputs["alibi_slopes"] = np.asarray(slopes, np.float32)
    return Case(inputs, params)


def _varlen_case(q, k, v, cu_q, cu_k):
    case = _attention_case(q, k, v)
    cu = {
        "cu_seqlens_q": np.asarray(cu_q, np.int32),
        "cu_seqlens_k": np.asarray(cu_k, np.int32),
    }
    return case.replace(inputs=cu)


def _gla_case(tokens, decay, *, h0=False, final=True):
    rng = np.random.default_rng(0)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    inputs = {"q": arr(1, tokens, 1, 16), "k": arr(1, tokens, 1, 16), "v": arr(1, tokens, 1, 16)}
    inputs |= decay
    if h0:
        inputs["h0"] = arr(1, 1, 16, 16)
    params = {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": final}
    return Case(inputs, params)


def _gate(value):
    return {"g": np.full((1, 1, 1), value, np.float32)}


# pattern -> (its trigger, a near miss: the same kernel right where the trigger does not hold)
TRIGGERS = {
    # one row of two keys, key 1 masked out | no mask
    "softmax_mask_not_in_output": (
        lambda: _softmax_case([0.5, 0.25], [True, False]),
        lambda: _softmax_case([0.5, 0.25]),
    ),
    # one segment of 2 rows (one column) | one row of 4 columns
    "jagged_out_stride_of_input": (lambda: _jagged_case(2, 1), lambda: _jagged_case(1, 4)),
    # one query, one key, a logit of 0.75 | a logit of 0 (lse 0 in any base)
    "attention_lse_log2": (
        lambda: _attention_case([0.5], [1.5], [1.0]),
        lambda: _attention_case([0.0], [1.5], [1.0]),
    ),
    # ALiBi, Tq = Tk = 2, no causal mask (query 0 sees key 1) | causal (no key right of p)
    "attention_alibi_signed": (
        lambda: _attention_case([0.5, -1.0], [0.3, 1.5], [1.0, -2.0], slopes=[0.5]),
        lambda: _attention_case([0.5, -1.0], [0.3, 1.5], [1.0, -2.0], slopes=[0.5], causal=True),
    ),
    # one sequence of one query and one key, one guard row | two sequences, no guard row
    "varlen_last_len_from_total": (
        lambda: _varlen_case([0.5], [0.3, 1.5], [1.0, -2.0], [0, 1], [0, 1]),
        lambda: _varlen_case([0.5, 0.2], [0.3, 1.5], [1.0, -2.0], [0, 1, 2], [0, 1, 2]),
    ),
    # the final state of one token of gate -0.3 | a gate of 0
    "gla_key_decay_from_start": (
        lambda: _gla_case(1, _gate(-0.3)),
        lambda: _gla_case(1, _gate(0.0)),
    ),
}


def _check(name, case):
    """The finding of ``check_case`` on ``case`` (None: it passes), as a hunt checks it."""
    from fuzz.backends import get_backend
    from fuzz.profiles import HuntOptions
    from fuzz.properties import check_case

    options = HuntOptions.of(get_profile("ci"))
    return check_case(get(name), get_backend(BACKEND), case, **options.check_kwargs()).finding


def test_every_pattern_has_a_trigger_here(plugin):
    assert set(TRIGGERS) == set(plugin.PATTERNS)


@pytest.mark.parametrize("pattern", sorted(TRIGGERS))
def test_a_bugs_trigger_fails_with_its_class_and_a_near_miss_passes(plugin, pattern):
    record = plugin.PATTERNS[pattern]
    trigger, near_miss = (make() for make in TRIGGERS[pattern])
    finding = _check(plugin.target_name(pattern), trigger)
    assert finding is not None, f"{pattern}: its trigger passes ({record.bugs[0].trigger})"
    assert finding.cls == record.bugs[0].expected, (pattern, finding.cls, finding.message)
    # the bug-free kernel of the family passes the trigger: the planted line is what fails
    control = f"control4_{record.family}_triton"
    found = _check(control, trigger)
    assert found is None, (control, found.cls, found.message)
    found = _check(plugin.target_name(pattern), near_miss)
    assert found is None, (pattern, "near miss", found.cls, found.message)


# Short seeded hunts ------------------------------------------------------------------------------


def _hunt(name: str, examples: int):
    result = hunt(
        get(name),
        BACKEND,
        get_profile("ci"),
        database=None,
        max_examples=examples,
        seed=1,
        time_limit=10**6,  # (stopped by its examples, never by the clock)
    )
    assert result.error is None, result.error
    return [f.as_dict() for f in result.found.values()]


CONTROLS = [f"control4_{family}_triton" for family in (*FAMILIES, "attention_varlen")]


@pytest.mark.parametrize("name", CONTROLS)
def test_a_control_is_clean_on_a_short_seeded_hunt(plugin, name):
    rows = _hunt(name, 15)
    assert not rows, [(r["class"], r["property"], r.get("output"), r.get("message")) for r in rows]


# A sample quick to find (within 5 examples under seed 1, each of its expected class; the packed
# attention's bug comes as masking first there, a sequence with no key reading a guard row).
SAMPLE = [
    ("softmax_mask_not_in_output", 10),
    ("jagged_out_stride_of_input", 10),
    ("attention_lse_log2", 10),
    ("attention_alibi_signed", 10),
    ("gla_key_decay_from_start", 10),
]


@pytest.mark.parametrize(("pattern", "examples"), SAMPLE, ids=[p for p, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugin, pattern, examples):
    bug = plugin.PATTERNS[pattern].bugs[0]
    rows = _hunt(plugin.target_name(pattern), examples)
    assert any(r["class"] == bug.expected for r in rows), (
        f"{pattern}: {bug.expected} ({bug.trigger}) not found; found "
        f"{[(r['class'], r['property']) for r in rows]}"
    )


def test_an_inf_written_for_a_masked_key_is_that_bugs_masking_row_seen_another_way(plugin):
    """The mask left out of the output: a masked key of a large logit is written as Inf (an
    ``inf`` finding), one of a small logit as a wrong finite value (``masking``). The Inf sits
    on a masked element, so the inf finding keeps ``masking`` in ``also_fails`` and the ledger
    joins the two rows (an H200 campaign reported them as two)."""
    from fuzz.ledger import linked

    name = plugin.target_name("softmax_mask_not_in_output")
    inf = _check(name, _softmax_case([0.0, 1.0, 200.0], [True, True, False]))
    masking = _check(name, _softmax_case([0.0, 1.0, 0.5], [True, True, False]))
    assert inf is not None and inf.cls == "inf", inf
    assert masking is not None and masking.cls == "masking", masking
    assert inf.details.get("also_fails") == {"masking": 1}, inf.details.get("also_fails")

    def record(f, triggers):
        key = f"{f.cls}|{f.prop}|{f.output}|-"
        return {"bug_key": key, "shrunk": True, "triggers": triggers, "details": f.details}

    assert linked(record(inf, ["exp-overflow", "feature mask"]), record(masking, ["feature mask"]))


def test_an_output_wrong_past_a_chunk_is_the_final_state_bug_with_the_state_asked_for(
    plugin, monkeypatch
):
    """The key decay taken from the chunk's start: on an H200 its final-state row had one token
    (where ``o`` has no decay to get wrong) and the per-head decay ``g_gamma``, its ``o`` row
    several chunks, a per-token decay ``g`` and no final state asked for: two rows. The ``o``
    example asking for the final state fails the ``ht`` row's way, the two decay forms being
    one meaning: one bug, found from either row first."""
    from fuzz.backends import get_backend
    from fuzz.duplicates import Duplicates, bug_of

    target, backend = get(plugin.target_name("gla_key_decay_from_start")), get_backend(BACKEND)
    tokens = 20  # (a chunk of 16 and 4 tokens after it)
    decays = np.linspace(-0.1, -0.5, tokens, dtype=np.float32).reshape(1, tokens, 1)
    ht_case = _gla_case(1, {"g_gamma": np.full((1,), -0.3, np.float32)})
    o_case = _gla_case(tokens, {"g": decays}, final=False)
    ht = CHECKS.as_found(target, backend, ht_case)
    o = CHECKS.as_found(target, backend, o_case)
    assert (ht.finding.output, o.finding.output) == ("ht", "o")
    assert "feature g_gamma" in ht.triggers and "feature g" in o.triggers
    assert not o.finding.details.get("also_outputs")  # (no state asked for: none checked)

    def duplicate(new, old):
        check = Duplicates(target, backend, CHECKS.options(), found={}, known_bugs=[])
        check.found, check.known_bugs = {old.signature: old}, [bug_of(old)]
        return check.of(new)

    assert duplicate(o, ht) == (bug_of(ht), "property")
    assert duplicate(ht, o) == (bug_of(o), "property")
    # What joins them is that call: without it, the two rows stand.
    import dataclasses

    import fuzz.families

    unasked = dataclasses.replace(fuzz.families.family_of(target), requests={})
    monkeypatch.setattr(fuzz.families, "family_of", lambda t: unasked)
    assert duplicate(o, ht) is None and duplicate(ht, o) is None
