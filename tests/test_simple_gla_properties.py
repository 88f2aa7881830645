"""The simple_gla family properties hold on the real kernels and each one fails on a planted
violation (a wrapper around the real kernel that breaks exactly the fact the property checks), on
both interpreters; and the per-element bound admits the kernels and catches a small planted error
(the bound itself: tests/test_simple_gla_bound.py)."""

import dataclasses

import numpy as np
import pytest
import torch

from fuzz.backends import get_backend
from fuzz.case import Case
from fuzz.properties import Context
from fuzz.target import get
from fuzz.targets import simple_gla as family
from kernels.simple_gla import alibi_g_gamma

PROPS = {p.name: p for p in family.PROPERTIES}
BACKENDS = ("triton-interpret", "pallas-interpret")


def _case(kind: str, *, varlen: bool = False, per_token: bool = False, seed: int = 0) -> Case:
    rng = np.random.default_rng(seed)
    b, t, h, k, v = (1, 23, 2, 16, 8) if varlen else (2, 21, 1, 16, 8)
    n = 3 if varlen else b
    f32 = np.float32
    inputs = {
        "q": rng.standard_normal((b, t, h, k)).astype(f32),
        "k": rng.standard_normal((b, t, h, k)).astype(f32),
        "v": rng.standard_normal((b, t, h, v)).astype(f32),
        "h0": rng.standard_normal((n, h, k, v)).astype(f32),
    }
    if per_token:
        inputs["g"] = (-np.logaddexp(0.0, -rng.standard_normal((b, t, h)))).astype(f32)
    else:
        inputs["g_gamma"] = np.array(alibi_g_gamma(h, 4.0), f32)
    if varlen:
        inputs["cu_seqlens"] = np.array([0, 7, 7, 23], np.int32)
    params = {"dtype": "float32", "chunk_size": 16, "scale": None}
    if kind == "fwd":
        params["output_final_state"] = True
    else:
        inputs["do"] = rng.standard_normal((b, t, h, v)).astype(f32)
        inputs["dht"] = rng.standard_normal((n, h, k, v)).astype(f32)
    return Case(inputs, params)


RUN = 0  # the selector that runs a family property on the interpreters


def _params(name: str):
    return {"state-continuation": (RUN, 0.5), "varlen-alone": (RUN, 0)}.get(name, RUN)


def _applicable(name: str, varlen: bool) -> bool:
    return {"state-continuation": not varlen, "varlen-alone": varlen}.get(name, True)


@pytest.mark.parametrize(
    "backend, kind, varlen, per_token",
    [
        ("triton-interpret", "fwd", False, False),
        ("pallas-interpret", "fwd", True, True),
        ("triton-interpret", "bwd", True, True),
        ("pallas-interpret", "bwd", False, False),
    ],
)
def test_properties_hold_on_the_real_kernels(backend, kind, varlen, per_token):
    target = get(f"simple_gla_{kind}")
    ctx = Context(target, get_backend(backend), _case(kind, varlen=varlen, per_token=per_token))
    for name, prop in PROPS.items():
        if _applicable(name, varlen):
            assert prop.applies(ctx), name
            assert prop.check(ctx, _params(name)) is None, name


def test_properties_sample_a_quarter_of_interpreter_examples():
    ctx = Context(get("simple_gla_fwd"), get_backend("triton-interpret"), _case("fwd"))
    assert family._skipped(ctx, 1) and family._skipped(ctx, 3) and not family._skipped(ctx, 0)
    # a skipped draw launches nothing
    assert PROPS["cross-implementation"].check(ctx, 1) is None
    assert ctx.stats.launches == 0


def _planted(kind: str, edit, impls=("triton", "pallas")):
    """The real target with every ``impl`` entry's outputs passed through ``edit``."""
    real = get(f"simple_gla_{kind}")

    def wrap(entry):
        def run(inputs, params, *, out, interpret):
            res = dict(entry(inputs, params, out=out, interpret=interpret))
            return edit(res, inputs, params)

        return run

    kernels = {i: wrap(e) if i in impls else e for i, e in real.kernels.items()}
    return dataclasses.replace(real, kernels=kernels)


def _nan_at_chunk_32(res, inputs, params):
    if params["chunk_size"] == 32:
        res = {k: v * float("nan") for k, v in res.items()}
    return res


def _chunk_dependent(res, inputs, params):
    return {k: v * (1 + 1e-3 * (params["chunk_size"] == 32)) for k, v in res.items()}


def _wrong_state(res, inputs, params):
    """The returned final state (forward) or initial-state gradient (backward) is 1% off: chaining
    two runs through it goes wrong, although each output of a single run but that one is right."""
    return {k: v * 1.01 if k in ("ht", "dh0") else v for k, v in res.items()}


def _packing_dependent(res, inputs, params):
    if "cu_seqlens" in inputs:
        res = {k: v + 1e-2 if k in ("o", "dq") else v for k, v in res.items()}
    return res


def _less_accurate(res, inputs, params):
    return {k: v * (1 + 1e-4) for k, v in res.items()}


PLANTED = [
    ("finite-every-chunk", _nan_at_chunk_32, False, "nan"),
    ("chunk-independence", _chunk_dependent, False, "accuracy"),
    ("state-continuation", _wrong_state, False, "accuracy"),
    ("varlen-alone", _packing_dependent, True, "accuracy"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["fwd", "bwd"])
@pytest.mark.parametrize("name, edit, varlen, cls", PLANTED, ids=[p[0] for p in PLANTED])
def test_each_property_fails_on_a_planted_violation(backend, kind, name, edit, varlen, cls):
    target = _planted(kind, edit)
    ctx = Context(target, get_backend(backend), _case(kind, varlen=varlen, per_token=varlen))
    finding = PROPS[name].check(ctx, _params(name))
    assert finding is not None and finding.prop == name and finding.cls == cls, finding


@pytest.mark.parametrize("kind", ["fwd", "bwd"])
def test_cross_implementation_fails_for_the_less_accurate_language_only(kind):
    target = _planted(kind, _less_accurate, impls=("pallas",))
    case = _case(kind)
    worse = Context(target, get_backend("pallas-interpret"), case)
    finding = PROPS["cross-implementation"].check(worse, RUN)
    assert (
        finding is not None
        and finding.cls == "accuracy"
        and finding.details["peer"] == "triton-interpret"
    )
    better = Context(target, get_backend("triton-interpret"), case)
    assert PROPS["cross-implementation"].check(better, RUN) is None


@pytest.mark.parametrize("dtype, planted", [("float32", 1e-3), ("bfloat16", 0.25)])
def test_tolerance_admits_the_kernels_and_rejects_a_small_planted_error(dtype, planted):
    """On a case with log-sigmoid gates the kernels pass; an error of ``planted`` x the largest
    output does not (fp32: the derived bound dominates; bf16: the matmul operands a kernel may
    round to bf16, 4 roundings of 2^-7 of an element's absolute terms, and the output's)."""
    target = get("simple_gla_fwd")
    case = _case("fwd", per_token=True)
    case = Case(
        {**case.inputs, **{k: case.inputs[k].astype(dtype) for k in ("q", "k", "v")}},
        {**case.params, "dtype": dtype},
    )
    for backend in BACKENDS:
        ctx = Context(target, get_backend(backend), case)
        for name in ctx.oracle:
            err = np.abs(ctx.clean.outputs[name].astype(np.float64) - ctx.oracle[name])
            assert (err <= ctx.bound(name)).all(), (backend, name)
            assert planted * np.abs(ctx.oracle[name]).max() > ctx.bound(name).max(), (backend, name)


@pytest.mark.parametrize("kind", ["fwd", "bwd"])
def test_baselines_are_well_formed_and_pass_on_the_real_kernels(kind):
    target = get(f"simple_gla_{kind}")
    grid = target.baselines.grid("small")
    assert {c.params["dtype"] for c in grid} == {"float32", "float16", "bfloat16"}
    assert {c.params["chunk_size"] for c in grid} == {64}
    assert any("g" in c.inputs for c in grid) and any("g_gamma" in c.inputs for c in grid)
    assert any(c.inputs["q"].shape[1] % 64 not in (0,) for c in grid)
    large = target.baselines.grid("large")
    assert max(c.inputs["q"].shape[1] for c in large) == 2048
    for seed in (0, 1):
        case = target.baselines.randn(seed, "small")
        assert ("g" in case.inputs) == (seed % 2 == 1)
        assert case.params["chunk_size"] == 64 and case.inputs["q"].dtype == np.float32
        ctx = Context(target, get_backend("triton-interpret"), case)
        for name in ctx.oracle:
            err = np.abs(ctx.clean.outputs[name].astype(np.float64) - ctx.oracle[name])
            assert (err <= ctx.bound(name)).all(), name


@pytest.mark.parametrize("kind", ["fwd", "bwd"])
@pytest.mark.parametrize("chunk", [128, 256])
def test_seed_004_alibi_long_chunks_are_finite(fuzz_require_backend, kind, chunk):
    """Seed 004's scenario on every backend of the profile: the standard ALiBi slopes (|gamma| up
    to 0.707 for 16 heads; the non-power-of-two rule for 20 and 48) with chunk 128 (0.707 x 127 =
    89.8 > 88.72) or 256: the real kernels stay finite and within tolerance. The interpreters run
    16 heads at a small head dim; compiled backends 16 to 64 heads at K = V = 64, two chunks and a
    tail."""
    backend = get_backend(fuzz_require_backend)
    heads = (16, 20, 32, 48, 64) if backend.compiled else (16,)
    b, t, d = (2, 2 * chunk + 5, 64) if backend.compiled else (1, chunk + 5, 16)
    target = get(f"simple_gla_{kind}")
    for h in heads:
        rng = np.random.default_rng(h)
        inputs = {n: rng.standard_normal((b, t, h, d)).astype(np.float32) for n in ("q", "k", "v")}
        inputs["g_gamma"] = np.array(alibi_g_gamma(h), np.float32)
        params = {"dtype": "float32", "chunk_size": chunk, "scale": None}
        if kind == "fwd":
            params["output_final_state"] = True
        else:
            inputs["do"] = rng.standard_normal((b, t, h, d)).astype(np.float32)
        case = Case(inputs, params)
        assert any(hz.startswith("chunk-exp-overflow") for hz in target.hazards_of(case))
        ctx = Context(target, backend, case)
        for name in ctx.oracle:
            got = ctx.clean.outputs[name].astype(np.float64)
            assert np.isfinite(got).all(), (h, name)
            assert (np.abs(got - ctx.oracle[name]) <= ctx.bound(name)).all(), (h, name)


def _padded_case(kind: str) -> Case:
    """A packed batch of three sequences (one empty) and 6 tokens of no sequence after them."""
    case = _case(kind, varlen=True, per_token=True)
    extra = {
        n: np.concatenate([a, a[:, :6]], axis=1)
        for n, a in case.inputs.items()
        if n in ("q", "k", "v", "g", "do")
    }
    return case.replace(inputs=extra)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", ["fwd", "bwd"])
def test_padding_past_cu_seqlens_is_poisoned_and_never_read(backend, kind):
    """Every input row past cu_seqlens[-1] is poisoned (NaN, Inf, huge): the real kernels'
    outputs keep every bit and their padding outputs are 0; a kernel that takes the padding into
    its last sequence is a masking failure, of the poison property and of the oracle's."""
    from fuzz.properties import GENERIC

    masked_poison = next(p for p in GENERIC if p.name == "masked-poison")
    oracle_prop = next(p for p in GENERIC if p.name == "oracle")
    case = _padded_case(kind)
    assert family.padding(case) == (23, 29)
    real = get(f"simple_gla_{kind}")
    assert family.poison(_case(kind, varlen=True), "nan") is None  # nothing to poison
    for value in ("nan", "inf", "-max"):
        ctx = Context(real, get_backend(backend), case)
        assert masked_poison.check(ctx, value) is None, value
    assert oracle_prop.check(ctx, None) is None
    assert all(
        (a[:, 23:] == 0).all() for n, a in ctx.clean.outputs.items() if n not in ("ht", "dh0")
    )

    def reading(entry):
        def run(inputs, params, *, out, interpret):
            cu = inputs["cu_seqlens"]
            end = inputs["q"].shape[1]
            if isinstance(cu, torch.Tensor):
                longer = cu.clone()
                longer[-1] = end
            else:  # JAX
                longer = cu.at[-1].set(end)
            return entry({**inputs, "cu_seqlens": longer}, params, out=out, interpret=interpret)

        return run

    wrong = dataclasses.replace(real, kernels={i: reading(e) for i, e in real.kernels.items()})
    ctx = Context(wrong, get_backend(backend), case)
    f = masked_poison.check(ctx, "nan")
    assert f is not None and f.cls == "masking", f
    f = oracle_prop.check(ctx, None)
    assert f is not None and f.cls == "masking", f


def _no_empty_call(res, inputs, params):
    """A kernel right on packed sequences, empty ones among them, that cannot take a call of no
    tokens (as a bug-free planted Pallas kernel could not)."""
    if inputs["q"].shape[1] == 0:
        raise ValueError("cannot reshape array of size 0")
    return res


@pytest.mark.parametrize("pick", [0, 1, 2])
def test_varlen_alone_runs_non_empty_sequences_alone(pick):
    """Sequence 1 of ``[0, 7, 7, 23]`` is empty: every pick runs a non-empty one alone, never a
    call of no tokens (an input of its own), so a kernel that cannot take one passes; a kernel
    whose packed sequences depend on the packing still fails, whichever the pick."""
    case = _case("fwd", varlen=True)
    ctx = Context(_planted("fwd", _no_empty_call), get_backend("triton-interpret"), case)
    assert PROPS["varlen-alone"].check(ctx, (RUN, pick)) is None
    wrong = Context(_planted("fwd", _packing_dependent), get_backend("triton-interpret"), case)
    f = PROPS["varlen-alone"].check(wrong, (RUN, pick))
    assert f is not None and f.cls == "accuracy", f
