"""The public plugin API (``fuzz.fuzz_kernel``): a user's kernel fuzzed against a built-in family,
drawing only what its capabilities allow, checked under its declared conventions and layout; bad
plugin input is a clear error naming the field."""

import dataclasses
import os

import numpy as np
import pytest

import fuzz
from fuzz.engine import hunt
from fuzz.profiles import get_profile
from fuzz.properties import Context
from fuzz.target import get, load_plugin

TORCH_KERNELS = os.path.join(os.path.dirname(__file__), "..", "plugins", "torch_kernels.py")


@pytest.fixture(scope="module")
def plugin():
    return load_plugin(TORCH_KERNELS)


def test_a_correct_torch_softmax_passes_with_its_nan_rows_declared(plugin):
    result = hunt(get("torch_softmax"), "triton-interpret", get_profile("ci"), database=None)
    assert result.error is None and not result.found, [
        f.finding.summary() for f in result.found.values()
    ]
    assert result.events["hazard row-without-valid-key"] > 0  # the convention was exercised


def test_the_declared_nan_rows_are_checked(plugin):
    """A kernel declared to return NaN for an empty row but returning zeros there is caught."""
    import dataclasses

    from fuzz.case import Case

    t = get("torch_softmax")
    zeros = dataclasses.replace(t, kernels={"triton": _zero_rows(t.kernels["triton"])})
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    case = Case(
        {"x": x, "mask": np.array([[True, True], [False, False]])},
        {"dtype": "float32", "scale": None, "block_m": 4, "block_n": 16},
    )
    from fuzz.properties import check_case

    out = check_case(
        zeros,
        fuzz.get_backend("triton-interpret"),
        case,
        params={"masked-poison": "nan", "shift-invariance": 64.0},
    )
    assert out.finding is not None and out.finding.prop == "empty-rows-convention"
    assert out.finding.cls == "masking"


def _zero_rows(entry):
    def run(inputs, params, *, out, interpret):
        got = entry(inputs, params, out=out, interpret=interpret)
        got["y"] = got["y"].nan_to_num(0.0)
        return got

    return run


def test_a_planted_bug_in_a_plugin_kernel_is_found_and_shrunk(plugin):
    result = hunt(
        get("torch_softmax_no_rowmax"), "triton-interpret", get_profile("ci"), database=None
    )
    assert "nan" in result.found or "accuracy" in result.found, result.classes
    found = next(iter(result.found.values()))
    assert found.case.size <= 2, found.case


def test_torch_attention_leaks_nan_from_masked_values(plugin):
    """torch's attention with a boolean key mask computes every key's probability (0 for a masked
    one) times its value: a NaN in a masked-out value row turns the output NaN (0 x NaN). The
    masked-poison property finds it, on one query over one masked key."""
    result = hunt(get("torch_sdpa"), "triton-interpret", get_profile("ci"), database=None)
    assert result.error is None
    found = result.found.get("masking")
    assert found is not None and found.finding.prop == "masked-poison", result.classes
    assert found.case.size <= 4, found.case


def test_torch_attention_in_its_own_layout_passes_and_draws_only_its_features(plugin):
    t = get("torch_sdpa_dense")
    result = hunt(t, "triton-interpret", get_profile("ci"), database=None, max_examples=25)
    assert result.error is None and not result.found, [
        f.finding.summary() for f in result.found.values()
    ]
    from hypothesis import given, settings

    seen = []

    @settings(max_examples=30, database=None, derandomize=True, deadline=None)
    @given(t.strategy("small"))
    def draws(case):
        assert case.params["causal"] is False and case.params["window"] is None
        assert case.params["softcap"] is None and case.params["alibi"] is None
        assert case.inputs["q"].dtype == np.float32
        seen.append(case)

    draws()
    assert seen


def test_a_kernel_runs_only_on_the_backends_it_declares(plugin):
    t = fuzz.fuzz_kernel(
        "torch_softmax_compiled_only",
        family="softmax",
        kernel=lambda x, **kw: x.softmax(-1),
        capabilities=fuzz.Capabilities(features=(), backends=("compiled",)),
    )
    result = hunt(t, "triton-interpret", get_profile("ci"))
    assert result.error is not None and "declared to run on triton only" in result.error


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"family": "softmaxx"}, "family='softmaxx'"),
        ({"capabilities": fuzz.Capabilities(features={"causal"})}, "features has ['causal']"),
        ({"capabilities": fuzz.Capabilities(tiles={"block_q": (16,)})}, "tiles has ['block_q']"),
        ({"capabilities": fuzz.Capabilities(head_dims=(64,))}, "head_dims"),
        ({"conventions": fuzz.Conventions(lse="base2")}, "Conventions.lse='base2'"),
        ({"layout": fuzz.Layout(x="CR", z="AB")}, "['z']"),
        ({"layout": fuzz.Layout(x="RCX")}, "order the family's axes"),
        ({"language": "cuda"}, "language='cuda'"),
        ({"name": "bad/name"}, "name='bad/name'"),
        ({"kernel": lambda x: x}, "takes no ['bias', 'mask', 'scale']"),
        ({"kernel": lambda x, y, *, mask, bias, scale: x}, "requires positional arguments"),
        ({"capabilities": "all"}, "capabilities='all' must be a fuzz.Capabilities"),
    ],
)
def test_bad_plugin_input_is_an_error_naming_the_field(kwargs, message):
    base = {"name": "bad_softmax", "family": "softmax", "kernel": lambda x, *, mask, bias, scale: x}
    with pytest.raises(
        ValueError,
        match=message.replace("[", r"\[")
        .replace("]", r"\]")
        .replace("(", r"\(")
        .replace(")", r"\)"),
    ):
        fuzz.fuzz_kernel(**{**base, **kwargs})


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: fuzz.Capabilities(dtypes=("float8",)), "Capabilities.dtypes has ['float8']"),
        (lambda: fuzz.Capabilities(dtypes=()), "must not be empty"),
        (lambda: fuzz.Capabilities(features="causal"), "must be a set of names"),
        (lambda: fuzz.Capabilities(backends=("gpu",)), "choose from"),
        (lambda: fuzz.Capabilities(tiles={"block_q": (0,)}), "positive ints"),
        (lambda: fuzz.Conventions(causal="top-right"), "Conventions.causal='top-right'"),
        (lambda: fuzz.Layout(pad_head_dim=0), "pad_head_dim=0"),
    ],
)
def test_bad_capabilities_conventions_and_layouts_name_the_field(make, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        make()


def test_layout_conversion_round_trips(plugin):
    """An input permuted to the kernel's layout and its output permuted back give the family's
    layout: the torch attention in [B, T, H, D] matches the oracle on a case with B, H, T all
    different."""
    t = get("torch_sdpa")
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    k = rng.standard_normal((2, 3, 7, 4)).astype(np.float32)
    v = rng.standard_normal((2, 3, 7, 4)).astype(np.float32)
    from fuzz.case import Case

    case = Case(
        {"q": q, "k": k, "v": v},
        {
            "dtype": "float32",
            "causal": False,
            "window": None,
            "scale": None,
            "softcap": None,
            "alibi": None,
            "block_q": 16,
            "block_k": 16,
        },
    )
    ctx = Context(t, fuzz.get_backend("triton-interpret"), case)
    got = ctx.clean.outputs["o"]
    assert got.shape == q.shape
    assert np.abs(got - ctx.oracle["o"]).max() < 1e-5


def test_causal_alignment_is_checked_as_declared(plugin):
    """torch's ``is_causal`` is top-left aligned: declared so, it passes; declared bottom-right
    (the default) it is wrong wherever a causal sequence has Tq != Tk, and the hunt says so."""
    ok = hunt(get("torch_sdpa_causal"), "triton-interpret", get_profile("ci"), database=None)
    assert ok.error is None and not ok.found, [f.finding.summary() for f in ok.found.values()]
    wrong = hunt(
        get("torch_sdpa_causal_misdeclared"), "triton-interpret", get_profile("ci"), database=None
    )
    assert wrong.found, "a top-left kernel checked as bottom-right must fail"
    case = next(iter(wrong.found.values())).case
    assert case.params["causal"] and case.inputs["q"].shape[2] != case.inputs["k"].shape[2]


def test_a_decode_kernel_without_its_dense_sibling_does_not_compare_with_the_project(plugin):
    from oracles.attention import attention_reference  # noqa: F401

    def decode(q, k, v, *, scale, cache_len):
        raise AssertionError("not called")

    t = fuzz.fuzz_kernel(
        "lonely_decode",
        family="attention_decode",
        kernel=decode,
        capabilities=fuzz.Capabilities(features=()),
    )
    assert "decode-equals-last-causal-row" in t.library.disabled
    assert t.library.siblings == {"attention": None}
    with pytest.raises(ValueError, match=r"siblings names \['softmax'\]"):
        fuzz.fuzz_kernel(
            "bad_decode",
            family="attention_decode",
            kernel=decode,
            capabilities=fuzz.Capabilities(features=()),
            siblings={"softmax": decode},
        )


def test_a_kernel_declared_for_some_backends_is_never_run_on_another_as_a_twin(monkeypatch):
    """A Pallas plugin declared interpreted-only: on a GPU host its pallas-interpret pairs must
    not compare it with pallas-gpu (they reported Pallas's missing GPU lowering of
    ``reduce_or`` as the kernel's backend divergence)."""
    import types

    import fuzz.properties as P
    from fuzz.target import get

    gpu = types.SimpleNamespace(name="pallas-gpu", impl="pallas", available=True)
    monkeypatch.setattr(P, "get_backend", lambda name: gpu)
    interp = types.SimpleNamespace(name="pallas-interpret", impl="pallas", twin="pallas-gpu")
    base = get("softmax")
    declared = dataclasses.replace(
        base, library=dataclasses.replace(base.library, backends=("pallas-interpret",))
    )

    def ctx(target):
        return types.SimpleNamespace(
            differential=True,
            backend=interp,
            target=target,
            case=None,
            differential_max_cost=float("inf"),
        )

    monkeypatch.setattr(type(base.search), "cost", lambda self, case: 0.0)
    assert P._twin(ctx(base)) is gpu
    assert P._twin(ctx(declared)) is None


def test_a_plugin_loads_a_file_beside_it_once(tmp_path):
    """``fuzz.load_beside``: a plugin loaded by path imports a module beside it (its records, its
    shared kernels) by path, once; a file that raises leaves nothing of its name behind."""
    import sys

    (tmp_path / "records.py").write_text("COUNT = [0]\nCOUNT[0] += 1\n")
    (tmp_path / "broken.py").write_text("raise RuntimeError('no')\n")
    me = str(tmp_path / "plugin.py")
    try:
        first = fuzz.load_beside(me, "records.py", "kernel_fuzz_test_records")
        assert fuzz.load_beside(me, "records.py", "kernel_fuzz_test_records") is first
        assert first.COUNT == [1]
        with pytest.raises(RuntimeError, match="no"):
            fuzz.load_beside(me, "broken.py", "kernel_fuzz_test_broken")
        assert "kernel_fuzz_test_broken" not in sys.modules
    finally:
        sys.modules.pop("kernel_fuzz_test_records", None)
