"""The planted one-bug kernels (``tests/plugins/planted.py``, Triton; ``planted_pallas.py``,
Pallas): each planted target registered through the public plugin API, with its bug in its
plugin's docstring and in the shared records (``_planted_bugs.py``), and a few of the bugs found
with their expected class by short hunts on the CPU interpreters (stopped by example counts).

How many rows each bug becomes is measured by ``.ci/planted_rows.py``, not asserted here: the
harness is being changed to improve it.
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
    "triton": os.path.join(HERE, "planted.py"),
    "pallas": os.path.join(HERE, "planted_pallas.py"),
}


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
    patterns = plugins["triton"].PATTERNS
    assert len(patterns) >= 10
    for language, module in plugins.items():
        # every pattern in both languages (none is left out today)
        assert len(module.PLANTED) == len(patterns), (language, sorted(module.PLANTED))
    for name, (language, record) in planted.items():
        assert name.startswith("planted_"), name
        target = get(name)  # registered through fuzz.fuzz_kernel by the plugin
        assert target.source == PLUGINS[language], (name, target.source)
        assert target.family == record.family, name
        assert set(target.kernels) == {language}, (name, sorted(target.kernels))
        assert target.mutant is None, name  # a real target to the harness, as a user's is


def test_every_record_names_a_family_a_class_and_a_trigger(plugins):
    for name, (_, record) in _planted(plugins).items():
        assert record.family in family_names(), name
        assert record.bugs, name
        for bug in record.bugs:
            assert bug.expected in CLASSES, (name, bug.expected)
            assert bug.what.strip() and bug.trigger.strip(), name
        # what the CPU campaigns found, in each language the pattern is written in
        assert {"triton", "pallas"} - set(record.not_in) <= set(record.cpu), name
    two = [n for n, (_, r) in _planted(plugins).items() if len(r.bugs) == 2]
    assert sorted(two) == ["planted_two_bugs_softmax", "planted_two_bugs_softmax_pallas"]


def test_every_planted_kernel_has_a_docstring_line_with_its_trigger_and_class(plugins):
    for language, module in plugins.items():
        entries = CHECKS.docstring_entries(module.__doc__, "planted_")
        assert set(entries) == set(module.PLANTED), (
            language,
            sorted(set(entries) ^ set(module.PLANTED)),
        )
        for name, record in module.PLANTED.items():
            text = entries[name]
            assert "Trigger" in text or "trigger" in text, name
            for bug in record.bugs:
                assert f"Expected: {bug.expected}" in text, (name, text)


# A sample quick to find: one per language and family kind, each a bug the harness finds within
# a few dozen examples (its trigger is near the simplest case the strategies draw). (The GLA
# pattern in Pallas, 90 s on a 2-core VM, was the suite's slowest test: its bugs are measured by
# .ci/planted_rows.py.)
SAMPLE = [
    ("planted_attention_lse_no_max_triton", "triton-interpret"),
    ("planted_softmax_bias_row0_triton", "triton-interpret"),
    ("planted_attention_alibi_kv_head_pallas", "pallas-interpret"),
]


@pytest.mark.parametrize(("name", "backend"), SAMPLE, ids=[n for n, _ in SAMPLE])
def test_a_sample_of_planted_bugs_is_found_with_its_class(plugins, name, backend):
    record = _planted(plugins)[name][1]
    result = hunt(get(name), backend, get_profile("ci"), database=None, max_examples=60, seed=1)
    assert result.error is None, result.error
    rows = [f.as_dict() for f in result.found.values()]
    for bug in record.bugs:
        assert any(bug.matches(r) for r in rows), (
            f"{name}: {bug.expected} ({bug.trigger}) not found; found "
            f"{[(r['class'], r['property']) for r in rows]}"
        )


# One bug, several rows: the duplicate check's evidence on the planted kernels' minimal examples
# (hand-written as a campaign shrank them). Each row is a Found as a hunt settles it: its key and
# triggers as the hunt computes them.


_as_found = CHECKS.as_found
_options = CHECKS.options


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


def _softmax_case(x, bias):
    import numpy as np

    from fuzz.case import Case

    params = {"dtype": "float32", "scale": None, "block_m": 8, "block_n": 16}
    return Case({"x": np.asarray(x, np.float32), "bias": np.asarray(bias, np.float32)}, params)


def _jagged_case(values, offsets):
    import numpy as np

    from fuzz.case import Case

    params = {"dtype": "float32", "block_n": 4, "block_m": 4, "num_programs": None, "guard": "nan"}
    inputs = {"values": np.asarray(values, np.float32), "offsets": np.asarray(offsets, np.int32)}
    return Case(inputs, params)


INF = float("inf")
# (target, the accuracy row's minimal example, the masking row's), as a 480 s CPU campaign
# reported them: neither fails the other's way.
ONE_BUG_TWO_CLASSES = {
    # every row reads row 0's bias: two rows of two columns (accuracy); one column, row 1's bias
    # -inf (masking: the row has no valid key, its output is fixed at 0, and is 1)
    "planted_softmax_bias_row0_triton": (
        _softmax_case([[0.5, -0.3], [0.2, 0.9]], [[0.0, 1.0], [1.5, -0.5]]),
        _softmax_case([[0.3], [0.7]], [[0.4], [-INF]]),
    ),
    # row tiles masked against the whole array: a segment of two rows reads the next one's
    # (accuracy); a segment of one row, whose output is fixed at 1, does too (masking)
    "planted_jagged_read_next_segment_triton": (
        _jagged_case([[0.1], [-0.4], [0.8], [1.2]], [0, 2, 4]),
        _jagged_case([[0.1, 0.2, -0.3, 0.4], [0.9, -1.0, 0.5, 1.5]], [0, 1, 2]),
    ),
}


@pytest.mark.parametrize("name", sorted(ONE_BUG_TWO_CLASSES))
def test_one_bug_seen_as_accuracy_and_masking_is_one_bug_by_what_its_rows_read(plugins, name):
    """One planted bug came as two rows, ``accuracy`` and ``masking`` of one output, whose
    minimal examples do not fail each other's way. In both, the wrong elements read (or ignore)
    an input as their reference does not (``fuzz.influence``): one bug, whichever came first."""
    from fuzz import influence
    from fuzz.backends import get_backend
    from fuzz.duplicates import bug_of

    target, backend = get(name), get_backend("triton-interpret")
    accuracy, masking = (_as_found(target, backend, c) for c in ONE_BUG_TWO_CLASSES[name])
    assert (accuracy.finding.cls, masking.finding.cls) == ("accuracy", "masking")
    for new, old in ((masking, accuracy), (accuracy, masking)):
        me = _duplicates(target, backend, {old.finding.cls: old})
        if target.family != "jagged_softmax":
            # (a jagged one-row example given a second row fails the accuracy row's way:
            # ``Family.grow``, evidence the check reaches before the influence analysis)
            assert me.also_fails(new) is None and me.shown_by_known(new) is None
        assert me.reads_alike(new) == bug_of(old), (new.key, old.key)
        assert me.of(new)[0] == bug_of(old), (new.key, old.key)
    for f in (accuracy, masking):
        assert influence.anomalies(target, backend, _options(), f.case), f.key


def test_the_influence_launches_stop_when_the_duplicate_checks_time_is_up(plugins):
    """Each probe launch of the influence analysis asks its caller's clock first: a GPU
    campaign's slice overran its hard limit inside these launches (an interpreted GLA kernel)
    and its worker was killed. Past the duplicate check's deadline the check is undecided (a
    row of its own, counted as cut), not a killed slice."""
    from fuzz import influence
    from fuzz.backends import get_backend

    name = "planted_softmax_bias_row0_triton"
    target, backend = get(name), get_backend("triton-interpret")
    accuracy, masking = (_as_found(target, backend, c) for c in ONE_BUG_TWO_CLASSES[name])
    calls = []

    class Late(Exception):
        pass

    def in_time():
        calls.append(1)
        if len(calls) > 2:
            raise Late

    with pytest.raises(Late):
        influence.anomalies(target, backend, _options(), accuracy.case, in_time)
    assert len(calls) == 3
    # The duplicate check that reaches the influence analysis: its clock runs out inside it.
    ticks, entered = [], []
    real = influence.anomalies

    def spy(*args, **kwargs):
        entered.append(len(ticks))
        return real(*args, **kwargs)

    def clock():
        ticks.append(1)
        return 0.0 if not entered or len(ticks) <= entered[0] + 1 else 100.0

    me = _duplicates(target, backend, {"accuracy": accuracy})
    me.clock, me.deadline = clock, 50.0
    import unittest.mock

    with unittest.mock.patch.object(influence, "anomalies", spy):
        assert me.of(masking) is None  # undecided: a row of its own, in time
    assert entered and me.cut == 1


def test_the_influence_analysis_fits_its_launches_to_the_time_it_has(plugins):
    """Each change of an input is a launch and a reference: where one launch (timed by the
    first) is slow, each input is changed in fewer, coarser runs of elements, and where not even
    two runs of each fit the analysis does not start (an interpreted GLA kernel's 80 launches
    took a GPU slice's whole time on a duplicate check that was then cut, twice)."""
    from fuzz import influence
    from fuzz.backends import get_backend

    name = "planted_softmax_bias_row0_triton"
    target, backend = get(name), get_backend("triton-interpret")
    accuracy, _ = (_as_found(target, backend, c) for c in ONE_BUG_TWO_CLASSES[name])
    case = accuracy.case
    inputs = len({n for n, _ in influence._probes(case, 1)})
    assert inputs >= 2
    assert influence._fitting(case, 1.0, None) == influence.PER_INPUT
    assert influence._fitting(case, 1.0, 1000.0) == influence.PER_INPUT
    assert influence._fitting(case, 1.0, 3.0 * inputs) == 3
    assert influence._fitting(case, 1.0, 1.0 * inputs) == 0
    full = influence.anomalies(target, backend, _options(), case)
    assert full
    assert influence.anomalies(target, backend, _options(), case, seconds=1e-9) is None
    coarse = influence._probes(case, 2)
    assert len(coarse) == 2 * inputs  # every input still changed, in two runs


def test_two_independent_bugs_of_one_key_are_not_one_by_what_they_read(plugins):
    """The planted two-bug softmax: float16 outputs times 1.01, bfloat16 rows of odd length >= 3
    times 0.97. Both only scale what the references compute: no influence anomaly, and free
    choices that do not nest (fp16, bf16): two bugs."""
    import numpy as np

    from fuzz import influence
    from fuzz.arrays import np_dtype
    from fuzz.backends import get_backend
    from fuzz.case import Case

    target, backend = get("planted_two_bugs_softmax"), get_backend("triton-interpret")

    def case(x, dtype):
        params = {"dtype": dtype, "scale": None, "block_m": 8, "block_n": 16}
        return Case({"x": np.asarray(x, np.float32).astype(np_dtype(dtype))}, params)

    fp16 = _as_found(target, backend, case([[0.5]], "float16"))
    bf16 = _as_found(target, backend, case([[0.5, -1.0, 0.25]], "bfloat16"))
    assert fp16.key == bf16.key == "accuracy|oracle|y|-"
    for f in (fp16, bf16):
        assert not influence.anomalies(target, backend, _options(), f.case)
    assert _duplicates(target, backend, {"accuracy": fp16}).of(bf16) is None
    assert _duplicates(target, backend, {"accuracy": bf16}).of(fp16) is None


def test_a_metamorphic_row_whose_derived_call_fails_a_known_bugs_way_is_that_bug(plugins):
    """The planted GLA kernel that starts a one-chunk sequence from a zero state came as two
    rows: the oracle with an initial state (T = 1), and ``state-continuation`` without one
    (T = 2 cut in two: the second half is a one-chunk call given the first half's state). That
    example does not fail the oracle, but the call its check derived does, with the oracle
    row's triggers: one bug, whichever came first."""
    import numpy as np

    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.duplicates import bug_of

    target, backend = get("planted_gla_h0_one_chunk_triton"), get_backend("triton-interpret")
    rng = np.random.default_rng(0)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    params = {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": False}
    gate = np.array([-0.5], np.float32)
    split = Case({"q": arr(1, 2, 1, 16), "k": arr(1, 2, 1, 16), "v": arr(1, 2, 1, 16)}, params)
    split = split.replace(inputs={"g_gamma": gate})
    one = Case(
        {"q": arr(1, 1, 1, 16), "k": arr(1, 1, 1, 16), "v": arr(1, 1, 1, 16), "g_gamma": gate},
        params,
    ).replace(inputs={"h0": arr(1, 1, 16, 16)})
    carried = _as_found(target, backend, split, {"state-continuation": [0, 0.5]})
    oracle = _as_found(target, backend, one)
    assert carried.key == "accuracy|state-continuation|o|-" and oracle.key == "accuracy|oracle|o|-"
    assert "feature initial_state" not in carried.triggers
    assert "feature initial_state" in oracle.triggers
    # the oracle row settled first: the state-continuation row's derived call fails its way
    assert _duplicates(target, backend, {"accuracy": oracle}).of(carried) == (
        bug_of(oracle),
        "property",
    )
    # the other way round: the settled state-continuation row's derived call fails the oracle
    # with the oracle row's free choices (its initial state) holding for that call
    assert _duplicates(target, backend, {"accuracy": carried}).of(oracle) == (
        bug_of(carried),
        "property",
    )


def test_a_derived_call_two_properties_share_is_each_ones(plugins):
    """``chunk-independence`` runs the case again with chunks of 32, a launch it shares with
    ``finite-every-chunk``, which launched it first: a 17-token sequence with an initial state is
    one chunk there, whose state the planted kernel drops. The shared call is the failing
    property's too, and it fails the oracle as the known bug does (a 480 s CPU campaign left
    this row beside the oracle's while the call was taken as the other property's only)."""
    import numpy as np

    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.duplicates import bug_of

    target, backend = get("planted_gla_h0_one_chunk_triton"), get_backend("triton-interpret")
    rng = np.random.default_rng(2)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    params = {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": False}
    inputs = {"q": arr(1, 17, 1, 16), "k": arr(1, 17, 1, 16), "v": arr(1, 17, 1, 16)}
    inputs |= {"g_gamma": np.array([-0.5], np.float32), "h0": arr(1, 1, 16, 16)}
    chunks = _as_found(
        target, backend, Case(inputs, params), {"finite-every-chunk": 0, "chunk-independence": 0}
    )
    one = Case({k: v[:, :1] if v.ndim == 4 and k != "h0" else v for k, v in inputs.items()}, params)
    oracle = _as_found(target, backend, one)
    assert chunks.key == "accuracy|chunk-independence|o|-" and oracle.key == "accuracy|oracle|o|-"
    assert _duplicates(target, backend, {"accuracy": oracle}).of(chunks) == (
        bug_of(oracle),
        "property",
    )


def test_one_bug_seen_through_two_outputs_is_one_bug_by_what_both_ignore(plugins):
    """The planted GLA kernel that drops the initial state of a one-chunk sequence: its final
    state ``ht`` is wrong (a minimal example with zero queries, whose ``o`` is 0 and right) and
    its ``o`` is wrong (a minimal example without the final state). Neither fails the other's
    way as drawn; both ignore the initial state (an input of 256 elements: changed in runs). The
    ``o`` example asking for the final state fails the ``ht`` row's way too (``Family.requests``),
    which the duplicate check tries first."""
    import numpy as np

    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.duplicates import bug_of

    target, backend = get("planted_gla_h0_one_chunk_triton"), get_backend("triton-interpret")
    rng = np.random.default_rng(1)

    def arr(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def case(q, final):
        params = {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": final}
        inputs = {"q": q, "k": arr(1, 1, 1, 16), "v": arr(1, 1, 1, 16)}
        inputs |= {"g_gamma": np.array([-0.5], np.float32), "h0": arr(1, 1, 16, 16)}
        return Case(inputs, params)

    ht = _as_found(target, backend, case(np.zeros((1, 1, 1, 16), np.float32), True))
    o = _as_found(target, backend, case(arr(1, 1, 1, 16), False))
    assert (ht.key, o.key) == ("accuracy|oracle|ht|-", "accuracy|oracle|o|-")
    me = _duplicates(target, backend, {"accuracy": ht})
    assert me.shown_by_known(o) is None  # (zero queries: o is 0, and right)
    assert me.of(o) == (bug_of(ht), "property")
    assert me.reads_alike(o) == bug_of(ht)


def test_an_example_larger_than_a_reproducer_is_not_analysed(plugins, monkeypatch):
    """Influence is evidence from minimal examples: a case over ``MAX_ELEMENTS`` (an unshrunk GPU
    case, analysed past a slice's hard limit, would outlast the slice) is not launched at all."""
    import numpy as np

    from fuzz import influence, properties
    from fuzz.backends import get_backend
    from fuzz.case import Case

    def launched(*a, **k):
        raise AssertionError("an example over MAX_ELEMENTS was launched")

    monkeypatch.setattr(properties, "Context", launched)
    target, backend = get("planted_two_bugs_softmax"), get_backend("triton-interpret")
    params = {"dtype": "float32", "scale": None, "block_m": 8, "block_n": 16}
    big = Case({"x": np.ones((2, influence.MAX_ELEMENTS), np.float32)}, params)
    assert influence.anomalies(target, backend, _options(), big) is None
