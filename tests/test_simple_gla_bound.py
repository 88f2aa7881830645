"""The simple GLA per-element error bound (fuzz/targets/_simple_gla_bound.py): its magnitudes are
the path sums the derivation says, an element's bound depends on that element's terms only, and
the dg bound catches an error that a bound scaled by the largest |dg| lets through."""

import dataclasses

import numpy as np
import pytest
import torch

from fuzz.backends import get_backend
from fuzz.case import Case
from fuzz.properties import Context, compare_to_oracle
from fuzz.target import get
from fuzz.targets import _simple_gla_bound as B
from fuzz.targets import simple_gla as family
from oracles.simple_gla import simple_gla_magnitudes

F32 = np.float32


def _case(*, t=21, k=3, v=2, chunk=16, batch=1, h0=False, kind="fwd", gates=3.0, seed=1) -> Case:
    rng = np.random.default_rng(seed)
    inputs = {
        "q": rng.standard_normal((batch, t, 1, k)).astype(F32),
        "k": rng.standard_normal((batch, t, 1, k)).astype(F32),
        "v": rng.standard_normal((batch, t, 1, v)).astype(F32),
        "g": (-np.abs(rng.standard_normal((batch, t, 1))) * gates).astype(F32),
    }
    if h0:
        inputs["h0"] = rng.standard_normal((batch, 1, k, v)).astype(F32)
    params = {"dtype": "float32", "chunk_size": chunk, "scale": 0.5}
    if kind == "fwd":
        params["output_final_state"] = True
    else:
        inputs["do"] = rng.standard_normal((batch, t, 1, v)).astype(F32)
    return Case(inputs, params)


def _explicit_o_sums(case: Case, lam: float, beta: np.ndarray):
    """Per ``o[t, v]``: the four sums of step 4 of the README's derivation, path by path."""
    x = {n: np.abs(case.inputs[n][0, :, 0].astype(np.float64)) for n in ("q", "k", "v")}
    g = case.inputs["g"][0, :, 0].astype(np.float64)
    h0 = case.inputs.get("h0")
    t_len, v_dim = x["v"].shape
    sums = np.zeros((4, t_len, v_dim))  # M0, ML, MX, MB
    for i in range(t_len):
        paths = [(j, g[j + 1 : i + 1].sum(), i - j) for j in range(i + 1)]
        for j, xp, length in paths:
            term = 0.5 * (x["q"][i] @ x["k"][j]) * x["v"][j] * np.exp(lam * xp) * np.exp(beta[j])
            sums[:, i] += np.stack([term, length * term, abs(xp) * term, beta[j] * term])
        if h0 is not None:  # from the initial state: no key, no beta
            xp = g[: i + 1].sum()
            term = 0.5 * (x["q"][i] @ np.abs(h0[0, 0].astype(np.float64))) * np.exp(lam * xp)
            sums[:3, i] += np.stack([term, (i + 1) * term, abs(xp) * term])
    return sums


@pytest.mark.parametrize("h0", [False, True])
def test_magnitudes_are_the_explicit_path_sums(h0):
    """M0, ML, MX, MB (difference quotients and weighted keys in one batched fp64 pass) equal the
    path sums of the derivation; the quotients overestimate by at most their step's factor."""
    case = _case(h0=h0)
    model = B.error_model(case)
    beta = 2 * B.exponent_errors(case, 16)[1] * B.chunk_local_decay(case, 16)[0, :, 0]
    m0, ml, mx, mb = _explicit_o_sums(case, 1 - model.a, beta)
    kappa = 1 / (1 - model.n_max * B.U32)
    arith = kappa * B.U32 * (model.n0 * m0 + B.PER_TOKEN * ml) + B.U64 * model.n_max * m0
    weights = (1 + kappa * B.U32 * model.n_max) * (model.a * mx + mb)
    terms = model.terms["o"]
    assert np.allclose(terms.m0[0, :, 0], m0, rtol=1e-12)
    ratio = terms.arithmetic[0, :, 0] / arith
    assert ratio.min() >= 1 - 1e-9 and ratio.max() <= np.exp(1 / B.EPS_DIV)
    ratio = terms.weights[0, :, 0] / weights
    assert ratio.min() >= 1 - 1e-9 and ratio.max() <= 1.05


def test_an_elements_bound_depends_on_its_own_terms_only():
    """A batch row of huge values leaves the bound of the other row as it is alone (a bound
    scaled by the largest magnitude of the output would grow 1e12 times), and elements later in
    a sequence without decay (more roundings on their paths) get larger bounds."""
    case = _case(batch=2, gates=0.0, k=4, v=4)
    big = {n: a.copy() for n, a in case.inputs.items()}
    for n in ("q", "k", "v"):
        big[n][1] *= F32(1e4)
    both = family.bounds(Case(big, case.params))["o"][0]
    alone = family.bounds(Case({n: a[:1] for n, a in case.inputs.items()}, case.params))["o"][0]
    assert np.allclose(both, alone, rtol=1e-9)
    ones = Case(
        {n: np.ones_like(a) if n != "g" else a for n, a in case.inputs.items()}, case.params
    )
    per_token = family.bounds(ones)["o"][0, :, 0, 0] / (np.arange(21) + 1.0)  # o_t = (t+1) * 1.5
    assert (np.diff(per_token) > 0).all()


def _recurrent_dg_magnitude(case: Case) -> np.ndarray:
    """``exp(g_t) <|dh_t|, |h_{t-1}|>`` on magnitudes: the terms of the recurrence's dg."""
    x = {n: np.abs(case.inputs[n][0, :, 0].astype(np.float64)) for n in ("q", "k", "v", "do")}
    g = case.inputs["g"][0, :, 0].astype(np.float64)
    t_len = g.shape[0]
    states = [np.abs(case.inputs["h0"][0, 0].astype(np.float64))]
    for t in range(t_len):
        states.append(np.exp(g[t]) * states[-1] + np.outer(x["k"][t], x["v"][t]))
    dh = np.zeros_like(states[0])
    out = np.zeros(t_len)
    for t in reversed(range(t_len)):
        dh = dh + 0.5 * np.outer(x["q"][t], x["do"][t])
        out[t] = np.exp(g[t]) * np.sum(dh * states[t])
        dh = np.exp(g[t]) * dh
    return out


@pytest.mark.parametrize("chunk", [16, 32, 64])
def test_the_recurrences_dg_terms_are_among_the_chunked_formulas(chunk):
    """Every term of the recurrence's dg is a term of the chunked formula's, whatever the chunk:
    the dg bound at any chunk size covers a token recurrence."""
    case = _case(t=50, kind="bwd", h0=True, gates=0.3)
    t = {n: torch.from_numpy(a) for n, a in case.inputs.items()}
    m = simple_gla_magnitudes(
        t["q"],
        t["k"],
        t["v"],
        g=t["g"],
        scale=0.5,
        initial_state=t["h0"],
        chunk_size=chunk,
        do=t["do"],
    )
    rec = _recurrent_dg_magnitude(case)
    chunked = m.dg[0, :, 0].numpy()
    assert (rec <= chunked * (1 + 1e-12)).all()
    assert (rec < 0.9 * chunked).any()  # the chunked formula also holds pairs that cancel


def _burst_case() -> Case:
    """Per-token gates; the queries and output gradients of the chunk's first tokens 2^10 times
    larger than the rest: the largest |dg| is ~1e6, the last tokens' dg are of order 1."""
    case = _case(t=16, k=4, v=4, kind="bwd", gates=0.1, seed=3)
    inputs = dict(case.inputs)
    for n in ("q", "do"):
        a = inputs[n].copy()
        a[:, :4] *= F32(1024.0)
        inputs[n] = a
    return Case(inputs, case.params)


@pytest.mark.parametrize("backend", ["triton-interpret", "pallas-interpret"])
def test_dg_bound_catches_an_error_on_a_small_entry_next_to_a_large_one(backend):
    """The issue's case: an error of 1.5 on a dg entry of size ~1 passes a bound scaled by the
    largest |dg| (~1e7) but not this one; the real kernels pass it."""
    case = _burst_case()
    real = get("simple_gla_bwd")
    ctx = Context(real, get_backend(backend), case)
    dg = ctx.oracle["dg"]
    assert np.abs(dg).max() > 5e5 and np.abs(dg[0, -1, 0]) < 10
    assert compare_to_oracle(ctx, "dg", ctx.clean.outputs["dg"], "oracle") is None
    assert ctx.bound("dg")[0, -1, 0] < 1e-3

    def planted(inputs, params, *, out, interpret):
        res = dict(
            real.kernels[get_backend(backend).impl](inputs, params, out=out, interpret=interpret)
        )
        dg = res["dg"]
        res["dg"] = (
            dg + (torch.arange(dg.shape[1]) == dg.shape[1] - 1)[None, :, None] * 1.5
            if isinstance(dg, torch.Tensor)
            else dg.at[:, -1].add(1.5)
        )
        return res

    wrong = dataclasses.replace(real, kernels={get_backend(backend).impl: planted})
    ctx = Context(wrong, get_backend(backend), case)
    f = compare_to_oracle(ctx, "dg", ctx.clean.outputs["dg"], "oracle")
    assert f is not None and f.cls == "accuracy" and f.index == (0, 15, 0)


@pytest.mark.parametrize("kind", ["fwd", "bwd"])
def test_bounds_of_an_empty_sequence(kind):
    """A sequence of no token (a call of none; varlen-alone takes non-empty sequences only): the
    state passes through and its bound is its own rounding-free magnitude's."""
    case = _case(t=0, kind=kind, h0=True)
    if kind == "bwd":
        case = Case({**case.inputs, "dht": np.ones((1, 1, 3, 2), F32)}, case.params)
    got = family.bounds(case)
    name = "ht" if kind == "fwd" else "dh0"
    assert got[name].shape == (1, 1, 3, 2) and (got[name] < 1e-3).all()


def test_matmul_operands_rounded_to_a_half_input_dtype_widen_the_bound_by_a_constant_count():
    """fp32 inputs: no operand term. bf16 inputs: ``gamma_in(r) (M0 + fp32 bound)`` and more,
    with ``r`` the dots a path crosses (4 forward, 6 backward), independent of the length, so a
    state rounded once per chunk (a count that grows with the length) is not covered."""
    import ml_dtypes

    case = _case(kind="bwd")
    model = B.error_model(case)
    assert all(np.all(np.asarray(t.operands) == 0.0) for t in model.terms.values())
    half = {
        n: (a.astype(ml_dtypes.bfloat16) if n in ("q", "k", "v", "do") else a)
        for n, a in case.inputs.items()
    }
    case16 = Case(half, {**case.params, "dtype": "bfloat16"})
    model16 = B.error_model(case16)
    u = B.STORE_UNIT["bfloat16"]
    for name, t in model16.terms.items():
        r = B.OPERAND_ROUNDINGS[name]
        assert np.all(t.operands >= ((1 + u) ** r - 1) * (t.m0 + t.fp32)), name
        assert np.all(t.operands <= ((1 + u) ** r - 1) * (t.m0 + t.fp32) + 1e-3 * (1 + t.m0))
