"""The plugin API's second round (issue 27): what a real kernel library needs to say, each said
through ``fuzz.fuzz_kernel`` alone by the planted kernels of ``tests/plugins/walls.py`` and
checked on the CPU interpreters: a kernel declining a case, rules the strategies draw within (per
backend kind), fp32 dots in TF32, masked inputs that must be finite, what the library allocates
guarded and poisoned, the family's output contract, and declarations found wrong at
registration."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings

import fuzz
from fuzz.case import Case
from fuzz.engine import hunt
from fuzz.profiles import get_profile
from fuzz.properties import check_case
from fuzz.target import get, load_plugin

HERE = os.path.dirname(__file__)
WALLS = os.path.join(HERE, "..", "plugins", "walls.py")
TRITON = fuzz.get_backend("triton-interpret")
PALLAS = fuzz.get_backend("pallas-interpret")


@pytest.fixture(scope="module", autouse=True)
def walls():
    return load_plugin(WALLS)


def _hunt(name, backend="triton-interpret", **kw):
    return hunt(get(name), backend, get_profile("ci"), database=None, **kw)


def _clean(result):
    assert result.error is None, result.error
    assert not result.found, [f.finding.summary() for f in result.found.values()]


def _rows(x, **params):
    return Case({"x": np.asarray(x, np.float32)}, {"dtype": "float32", "scale": None, **params})


def _softmax_case(rows=2, cols=3, seed=0):
    x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    return Case({"x": x}, {"dtype": "float32", "scale": 1.0, "block_m": 4, "block_n": 16})


# fuzz.Unsupported -----------------------------------------------------------------------------------


def test_a_declined_case_is_counted_per_reason_and_is_never_a_finding():
    result = _hunt("walls_softmax_declines", max_examples=30)
    _clean(result)
    assert result.events["unsupported: rows of an odd length"] > 0, dict(result.events)
    # the same refusal as an exception of the library's own: a crash on the first odd row
    crashed = _hunt("walls_softmax_raises", max_examples=30)
    assert set(crashed.found) == {"crash"}, crashed.classes  # one refusal: one bug, every dtype


def test_a_declined_derived_launch_skips_that_property_only():
    def small_scales_declined(q, k, v, *, scale):
        if scale < 0.2:
            raise fuzz.Unsupported("scale below 0.2")
        q, k, v = (t.double() for t in (q, k, v))
        s = q @ k.transpose(-1, -2) * scale
        return (s.softmax(-1) @ v).float(), s.logsumexp(-1).float()

    t = fuzz.fuzz_kernel(
        "walls_attention_small_scales",
        family="attention",
        kernel=small_scales_declined,
        capabilities=fuzz.Capabilities(dtypes=("float32",), features=()),
    )
    rng = np.random.default_rng(0)
    qkv = {n: rng.standard_normal((1, 1, 3, 16)).astype(np.float32) for n in "qkv"}
    params = {"dtype": "float32", "causal": False, "window": None, "scale": None}
    params |= {"softcap": None, "alibi": None, "block_q": 16, "block_k": 16}
    out = check_case(t, TRITON, Case(qkv, params), params={})  # scale 1/4; the gate's 1/8
    assert out.finding is None, out.finding and out.finding.summary()
    assert out.declined == [
        "scale below 0.2 (rows-sum-to-one)",
        "scale below 0.2 (scale-applied-once)",
    ], out.declined
    with pytest.raises(fuzz.Unsupported, match=r"scale below 0\.2"):
        check_case(t, TRITON, Case(qkv, {**params, "scale": 0.125}), params={})


@pytest.mark.parametrize("reason", ["", "   ", None])
def test_unsupported_needs_a_reason(reason):
    with pytest.raises(ValueError, match="reason"):
        fuzz.Unsupported(reason)


# Rules the strategies draw within -------------------------------------------------------------------


def test_lengths_are_drawn_within_the_rules_and_nothing_is_declined():
    t = get("walls_attention_tiles")
    seen = []

    @settings(max_examples=60, database=None, derandomize=True, deadline=None)
    @given(t.strategy("small"))
    def draws(case):
        for tensor, tile in (("q", "block_q"), ("k", "block_k")):
            n, b = case.inputs[tensor].shape[2], case.params[tile]
            assert n % b == 0 or n < b, (tensor, n, b)
        seen.append(case.inputs["q"].shape[2] > case.params["block_q"])

    draws()
    assert any(seen), "no case longer than one query tile was drawn"
    result = _hunt("walls_attention_tiles", max_examples=25)
    _clean(result)
    assert not any(k.startswith("unsupported") for k in result.events), dict(result.events)


def test_the_rules_of_a_backend_kind_replace_the_others_there():
    def plain(q, k, v, *, scale, block_q, block_k):
        s = q.double() @ k.double().transpose(-1, -2) * scale
        return (s.softmax(-1) @ v.double()).to(q.dtype), s.logsumexp(-1).float()

    pow2 = fuzz.Lengths("block_q", power_of_two=True)
    t = fuzz.fuzz_kernel(
        "walls_attention_per_kind",
        family="attention",
        kernel=plain,
        capabilities=fuzz.Capabilities(
            features=(),
            tiles={"block_q": (16,), "block_k": (16,)},
            compiled=fuzz.Capabilities(head_dims=(16,), lengths={"q": pow2, "k": pow2}),
        ),
    )
    drawn: dict[str, list[tuple[int, int, int]]] = {"compiled": [], "interpreted": []}
    for kind, into in drawn.items():

        @settings(max_examples=40, database=None, derandomize=True, deadline=None)
        @given(t.strategy("small", kind=(kind,)))
        def draws(case):
            q, k = case.inputs["q"].shape, case.inputs["k"].shape
            into.append((q[2], k[2], q[3]))

        draws()
    compiled, interpreted = drawn["compiled"], drawn["interpreted"]
    assert all(n & (n - 1) == 0 and m & (m - 1) == 0 and d == 16 for n, m, d in compiled), compiled
    assert any(n & (n - 1) for n, _, _ in interpreted), interpreted
    # the entry declines on the compiled kind what only the interpreted kind allows
    n = next(n for n, _, _ in interpreted if n & (n - 1))
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 1, n, 16)).astype(np.float32)
    params = {"dtype": "float32", "causal": False, "window": None, "scale": None}
    params |= {"softcap": None, "alibi": None, "block_q": 16, "block_k": 16}
    import torch

    inputs = {x: torch.from_numpy(q.copy()) for x in "qkv"}
    entry = t.kernels["triton"]
    assert set(entry(inputs, params, out=None, interpret=True)) >= {"o", "lse"}
    with pytest.raises(fuzz.Unsupported, match="q length not a multiple of block_q"):
        entry(inputs, params, out=None, interpret=False)


def test_a_feature_rule_drops_the_feature_where_it_fails_and_keeps_it_elsewhere():
    t = get("walls_attention_padding")
    padded = []

    @settings(max_examples=80, database=None, derandomize=True, deadline=None)
    @given(t.strategy("small"))
    def draws(case):
        if "key_lengths" in case.inputs:
            assert case.inputs["key_lengths"].min() >= case.inputs["q"].shape[2]
            padded.append(case)

    draws()
    assert padded, "key padding was never drawn"
    _clean(_hunt("walls_attention_padding", max_examples=25))


def test_a_rule_without_a_feature_declines_the_cases_where_it_fails():
    t = fuzz.fuzz_kernel(
        "walls_softmax_even_rule",
        family="softmax",
        kernel=get("walls_softmax_triton").kernels["triton"].kernel,
        capabilities=fuzz.Capabilities(
            dtypes=("float32",),
            features={"scale"},
            constraints=[fuzz.Constraint(lambda c: c.inputs["x"].shape[-1] % 2 == 0, "odd rows")],
        ),
        conventions=fuzz.Conventions(empty_rows="nan"),
    )
    result = hunt(t, "triton-interpret", get_profile("ci"), database=None, max_examples=20)
    _clean(result)
    assert result.events["unsupported: odd rows"] > 0, dict(result.events)


# fp32 dots in TF32 ----------------------------------------------------------------------------------


def test_tf32_dots_pass_with_the_convention_declared():
    _clean(_hunt("walls_attention_tf32", max_examples=25))


def test_tf32_dots_undeclared_fail_and_the_finding_names_tf32():
    result = _hunt("walls_attention_tf32_undeclared", max_examples=25)
    assert "accuracy" in result.found, result.classes
    f = result.found["accuracy"].finding
    assert "TF32" in f.message and "likely cause" in f.message, f.message
    assert f.details["likely_cause"] == "tf32"
    # The interpreter's dots are exact: only the kernel's own rounding (as here) is TF32.
    assert "computes fp32 dot products exactly" in f.message, f.message


def test_dots_losing_more_than_tf32_still_fail_with_tf32_declared():
    result = _hunt("walls_attention_bf16_dots", max_examples=25)
    assert "accuracy" in result.found, result.classes
    assert "likely cause" not in result.found["accuracy"].finding.message


@pytest.mark.parametrize(
    ("name", "verdict"),
    [
        ("walls_gla_tf32", None),
        ("walls_gla_tf32_undeclared", "tf32"),
        ("walls_gla_bf16_dots", "fails"),
    ],
)
def test_the_gla_bound_of_tf32_dots_both_ways(name, verdict):
    """The simple GLA bound with TF32 dot operands (fp32 inputs): a token recurrence whose
    products take TF32 operands passes declared, fails undeclared naming TF32, and one taking
    bf16 operands fails even declared."""
    result = _hunt(name, max_examples=15, narrowing={"head_dims": (16,)})
    if verdict is None:
        _clean(result)
        return
    assert "accuracy" in result.found, result.classes
    message = result.found["accuracy"].finding.message
    assert ("likely cause" in message) == (verdict == "tf32"), message


# Masked inputs that must be finite -----------------------------------------------------------------


def _padded_case(seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 1, 2, 4)).astype(np.float32)
    k, v = (rng.standard_normal((1, 1, 5, 4)).astype(np.float32) for _ in range(2))
    params = {"dtype": "float32", "causal": False, "window": None, "scale": None}
    params |= {"softcap": None, "alibi": None, "block_q": 16, "block_k": 16}
    return Case({"q": q, "k": k, "v": v, "key_lengths": np.array([3], np.int32)}, params)


def test_masked_inputs_declared_finite_are_poisoned_with_finite_values_only():
    t = get("walls_attention_zero_times_masked")
    masked = next(p for p in t.properties if p.name == "masked-poison")
    assert masked.params_strategy is not None
    kinds = []

    @settings(max_examples=30, database=None, derandomize=True, deadline=None)
    @given(masked.params_strategy)
    def draws(kind):
        kinds.append(kind)

    draws()
    assert set(kinds) == {"max", "-max"}, kinds
    assert check_case(t, TRITON, _padded_case(), params={"masked-poison": "max"}).finding is None
    _clean(_hunt("walls_attention_zero_times_masked", max_examples=20))
    # the same kernel, masked inputs any (NaN tried): 0 x NaN leaks
    any_inputs = fuzz.fuzz_kernel(
        "walls_attention_zero_times_masked_any",
        family="attention",
        kernel=t.kernels["triton"].kernel,
        capabilities=fuzz.Capabilities(dtypes=("float32",), features={"key_padding"}),
    )
    out = check_case(any_inputs, TRITON, _padded_case(), params={"masked-poison": "nan"})
    assert out.finding is not None and out.finding.prop == "masked-poison", out.finding


def test_finite_masked_inputs_are_still_checked():
    t = get("walls_attention_leaks_finite")
    out = check_case(t, TRITON, _padded_case(), params={"masked-poison": "max"})
    assert out.finding is not None, "a masked key weighted 2^-100 moves o by 2.7e8 x |v|"
    assert (out.finding.cls, out.finding.prop) == ("masking", "masked-poison"), out.finding


# What the library allocates -------------------------------------------------------------------------


def test_a_store_past_the_end_of_a_library_allocated_output_is_an_out_of_bounds_write():
    result = _hunt("walls_softmax_store_past_end", max_examples=20)
    assert "out-of-bounds-write" in result.found, result.classes
    f = result.found["out-of-bounds-write"].finding
    assert f.prop == "guard-bands" and "output y" in f.message and "past its end" in f.message
    assert result.found["out-of-bounds-write"].case.size <= 2, result.found[
        "out-of-bounds-write"
    ].case
    _clean(_hunt("walls_softmax_triton", max_examples=20))  # the same kernel, no overrun: clean


def test_an_output_element_the_library_never_writes_keeps_the_poison():
    out = check_case(get("walls_softmax_unwritten"), TRITON, _softmax_case(), params={})
    assert out.finding is not None
    assert (out.finding.cls, out.finding.prop) == ("nan", "poisoned-output"), out.finding
    assert "never written" in out.finding.message


def test_a_pallas_block_past_the_end_of_its_output_is_an_out_of_bounds_write():
    from fuzz import allocations

    case = _softmax_case(rows=3, cols=5)
    ok = check_case(get("walls_pallas_softmax"), PALLAS, case, params={})
    assert ok.finding is None, ok.finding.summary()
    if allocations._NAN_INIT != [True]:
        pytest.skip("this JAX's interpret mode does not start outputs as NaN: no guard to check")
    out = check_case(get("walls_pallas_softmax_block_past_end"), PALLAS, case, params={})
    assert out.finding is not None, "the fourth program's block lies past the three rows"
    assert (out.finding.cls, out.finding.prop) == ("out-of-bounds-write", "guard-bands")
    assert "pallas_call" in out.finding.message and "axis 0 at 3" in out.finding.message


def test_jagged_plugin_inputs_get_the_built_in_targets_guard_rows():
    t = get("walls_jagged_softmax")
    seen = t.kernels["triton"].kernel.__globals__["SEEN"]
    values = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    params = {"dtype": "float32", "block_n": 4, "block_m": 16, "num_programs": None, "guard": "nan"}
    case = Case({"values": values, "offsets": np.array([0, 2, 5], np.int32)}, params)
    seen.clear()
    out = check_case(t, TRITON, case, params={"masked-poison": "inf"})
    assert out.finding is None, out.finding.summary()
    kinds = []
    for v, o in seen:
        base, obase = v._base, o._base
        assert base is not None and obase is not None, "the inputs are views into guard buffers"
        # Everything of the buffer but the values' own elements is guard (at least block_n rows
        # before and after, a column after each row: fuzz.targets.jagged_softmax._guarded_torch).
        flat = base.reshape(-1).numpy()
        rows, cols = np.arange(v.shape[0])[:, None], np.arange(v.shape[1])[None, :]
        outside = np.ones(flat.shape, bool)
        outside[v.storage_offset() + rows * v.stride(0) + cols * v.stride(1)] = False
        assert outside.sum() >= 2 * 4 * v.shape[1] + v.shape[0]
        guard = flat[outside]
        kinds.append("nan" if np.isnan(guard).all() else "inf" if np.isinf(guard).all() else "?")
        assert [int(obase[0]), int(obase[-1])] == [-1, 6]
    assert set(kinds) == {"nan", "inf"}, kinds  # the clean runs' guard, the masked-poison run's


# The family's output contract -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("walls_softmax_f64", "output y has dtype float64, expected float32"),
        ("walls_softmax_numpy", "returned y as a numpy.ndarray: a triton kernel returns torch"),
        ("walls_softmax_tuple", "returned a tuple of 2 (torch.Tensor), not the outputs of"),
    ],
)
def test_outputs_outside_the_contract_are_a_crash_that_says_what_is_wrong(name, message):
    out = check_case(get(name), TRITON, _softmax_case(), params={})
    assert out.finding is not None and out.finding.cls == "crash", out.finding
    assert message in out.finding.message, out.finding.message


# Family properties that derive launches follow the declarations -------------------------------------


def _gla_case(*, grads, h0=True, t=20, k_dim=16):
    rng = np.random.default_rng(0)
    shape = (1, t, 1)
    inputs = {n: rng.standard_normal((*shape, k_dim)).astype(np.float32) for n in ("q", "k", "v")}
    inputs["g_gamma"] = np.array([-0.25], np.float32)
    if h0:
        inputs["h0"] = rng.standard_normal((1, 1, k_dim, k_dim)).astype(np.float32)
    params = {"dtype": "float32", "chunk_size": 16, "scale": None}
    if grads:
        inputs["do"] = rng.standard_normal((*shape, k_dim)).astype(np.float32)
    else:
        params["output_final_state"] = False
    return Case(inputs, params)


def _project_gla():
    from kernels.simple_gla import triton as gla

    def forward(q, k, v, *, g_gamma, scale, initial_state, chunk_size):
        return gla.chunk_simple_gla_fwd(
            q,
            k,
            v,
            g_gamma=g_gamma,
            scale=scale,
            initial_state=initial_state,
            chunk_size=chunk_size,
        )

    def backward(q, k, v, do, *, g_gamma, scale, initial_state, chunk_size):
        dq, dk, dv, _, dh0 = gla.chunk_simple_gla_bwd(
            q,
            k,
            v,
            do,
            g_gamma=g_gamma,
            scale=scale,
            initial_state=initial_state,
            chunk_size=chunk_size,
        )
        return {"dq": dq, "dk": dk, "dv": dv, "dh0": dh0}

    return forward, backward


def test_gla_state_continuation_runs_only_with_the_states_declared():
    """The project's own GLA kernels declared without the final state (forward) or its gradient
    (backward): the state continuation cannot run their pieces, and says nothing (it reported
    a crash, "expected outputs ['ht', 'o']", and dk 8.06 against 6.5e-4)."""
    forward, backward = _project_gla()
    feats = {"g_gamma", "initial_state", "scale"}
    caps = fuzz.Capabilities(features=feats, tiles={"chunk_size": (16,)})
    fwd = fuzz.fuzz_kernel(
        "walls_gla_fwd_no_ht", family="simple_gla_fwd", kernel=forward, capabilities=caps
    )
    bwd = fuzz.fuzz_kernel(
        "walls_gla_bwd_no_dht", family="simple_gla_bwd", kernel=backward, capabilities=caps
    )
    for t, grads in ((fwd, False), (bwd, True)):
        out = check_case(t, TRITON, _gla_case(grads=grads), params={"state-continuation": (0, 0.5)})
        assert out.finding is None, out.finding.summary()
        assert "state-continuation" not in out.params  # not applicable: never drawn


def test_pad_head_dim_pads_the_states_it_cuts_back():
    from kernels.simple_gla import triton as gla

    def needs_32(q, k, v, *, g_gamma, scale, initial_state, output_final_state, chunk_size):
        assert q.shape[-1] % 32 == 0 and initial_state.shape[-2:] == (32, 32), initial_state.shape
        return gla.chunk_simple_gla_fwd(
            q,
            k,
            v,
            g_gamma=g_gamma,
            scale=scale,
            initial_state=initial_state,
            output_final_state=output_final_state,
            chunk_size=chunk_size,
        )

    feats = {"g_gamma", "initial_state", "final_state", "scale"}
    t = fuzz.fuzz_kernel(
        "walls_gla_pad_32",
        family="simple_gla_fwd",
        kernel=needs_32,
        capabilities=fuzz.Capabilities(features=feats, tiles={"chunk_size": (16,)}),
        layout=fuzz.Layout(pad_head_dim=32),
    )
    case = _gla_case(grads=False, t=5).replace(output_final_state=True)
    out = check_case(t, TRITON, case, params={})
    assert out.finding is None, out.finding.summary()
    assert out.context.clean.outputs["ht"].shape == (1, 1, 16, 16)


def test_a_sibling_given_as_a_target_brings_its_own_conventions():
    """A decode kernel compared with its library's dense kernel aligned top-left: the prefill is
    the whole cache, run through the dense kernel's own target (its capabilities, conventions and
    layout); a dense kernel that is wrong there is caught by the comparison."""
    decode, dense = (
        get(n).kernels["triton"].kernel for n in ("walls_decode", "walls_dense_top_left")
    )

    def doubled(q, k, v, *, scale, causal):
        o, lse = dense(q, k, v, scale=scale, causal=causal)
        return 2 * o, lse

    broken = fuzz.fuzz_kernel(
        "walls_dense_doubled",
        family="attention",
        kernel=doubled,
        capabilities=fuzz.Capabilities(features={"causal"}, dtypes=("float32",)),
        conventions=fuzz.Conventions(causal="top-left"),
    )
    rng = np.random.default_rng(0)
    case = Case(
        {
            "q": rng.standard_normal((1, 1, 1, 8)).astype(np.float32),
            "k": rng.standard_normal((1, 1, 40, 8)).astype(np.float32),
            "v": rng.standard_normal((1, 1, 40, 8)).astype(np.float32),
            "cache_len": np.array([37], np.int32),
        },
        {"dtype": "float32", "window": None, "scale": None, "softcap": None, "alibi": None}
        | {"block_k": 16, "num_splits": 1},
    )
    prop = {"decode-equals-last-causal-row": 0}
    t = get("walls_decode")
    assert "decode-equals-last-causal-row" not in t.library.disabled
    out = check_case(t, TRITON, case, params=prop)
    assert out.finding is None and "decode-equals-last-causal-row" in out.params, out.finding
    wrong = fuzz.fuzz_kernel(
        "walls_decode_with_doubled",
        family="attention_decode",
        kernel=decode,
        capabilities=fuzz.Capabilities(features=(), dtypes=("float32",)),
        siblings={"attention": broken},
    )
    out = check_case(wrong, TRITON, case, params=prop)
    assert out.finding is not None and out.finding.prop == "decode-equals-last-causal-row"
    # The decode matched its oracle; the finding names the dense kernel as the one off it (a GPU
    # campaign blamed a decode kernel for its library's dense kernel's bug at a prefill of 1).
    assert "dense kernel (its attention sibling)" in out.finding.message, out.finding.message
    assert "oracle" in out.finding.message and "clean run" not in out.finding.message
    assert out.finding.details["wrong"] == "sibling"
    with pytest.raises(
        ValueError, match=r"siblings\['attention'\] is target 'walls_softmax_triton'"
    ):
        fuzz.fuzz_kernel(
            "walls_decode_bad_sibling",
            family="attention_decode",
            kernel=decode,
            capabilities=fuzz.Capabilities(features=(), dtypes=("float32",)),
            siblings={"attention": get("walls_softmax_triton")},
        )


# Declarations found wrong at registration ----------------------------------------------------------


def _softmax(x, *, mask, bias, scale):
    return x


def _attention_kernel(q, k, v, *, scale, causal):
    return q


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"kernel": lambda x, *, mask, bias, scale, causal: x},
            "requires 'causal' (family 'softmax' has no such argument)",
        ),
        (
            {
                "family": "attention",
                "kernel": _attention_kernel,
                "capabilities": fuzz.Capabilities(features=()),
            },
            "requires 'causal' (declare feature 'causal')",
        ),
        (
            {
                "family": "attention",
                "kernel": _attention_kernel,
                "capabilities": fuzz.Capabilities(lengths={"T": fuzz.Lengths(2)}),
            },
            "lengths names 'T'; family 'attention' has lengths ['q', 'k']",
        ),
        (
            {
                "family": "attention",
                "kernel": _attention_kernel,
                "capabilities": fuzz.Capabilities(lengths={"q": fuzz.Lengths("chunk_size")}),
            },
            "multiple_of names ['chunk_size']",
        ),
        (
            {
                "family": "attention_decode",
                "kernel": lambda q, k, v, *, scale, cache_len: q,
                "capabilities": fuzz.Capabilities(
                    features=(), lengths={"k": fuzz.Lengths(same_as="q")}
                ),
            },
            "same_as='q'",
        ),
        (
            {
                "family": "attention",
                "kernel": _attention_kernel,
                "capabilities": fuzz.Capabilities(constraints=[fuzz.Constraint(bool, "x", "gqa")]),
            },
            "feature 'gqa' cannot be left out of a drawn case",
        ),
        (
            {"capabilities": fuzz.Capabilities(constraints=[fuzz.Constraint(bool, "x", "causal")])},
            "feature 'causal' is not one of family 'softmax'",
        ),
        (
            {"capabilities": fuzz.Capabilities(compiled=fuzz.Capabilities(features={"causal"}))},
            "Capabilities.compiled.features has ['causal']",
        ),
        (
            {"conventions": fuzz.Conventions(fp32_dots="tf32")},
            "Conventions.fp32_dots='tf32' means nothing",
        ),
    ],
)
def test_bad_declarations_are_an_error_at_registration(kwargs, message):
    import re

    base = {"name": "walls_bad", "family": "softmax", "kernel": _softmax}
    with pytest.raises(ValueError, match=re.escape(message)):
        fuzz.fuzz_kernel(**{**base, **kwargs})


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: fuzz.Lengths(0), "Lengths.multiple_of=0"),
        (lambda: fuzz.Lengths(("block_q", 2.5)), "Lengths.multiple_of=('block_q', 2.5)"),
        (lambda: fuzz.Lengths(at_least=-1), "Lengths.at_least=-1"),
        (lambda: fuzz.Lengths(same_as=3), "Lengths.same_as=3"),
        (lambda: fuzz.Constraint("x > 1", "reason"), "Constraint.when='x > 1'"),
        (lambda: fuzz.Constraint(bool, ""), "Constraint.reason=''"),
        (lambda: fuzz.Capabilities(lengths={"q": 16}), "Capabilities.lengths['q']=16"),
        (lambda: fuzz.Capabilities(constraints=fuzz.Constraint(bool, "x")), "constraints="),
        (
            lambda: fuzz.Capabilities(compiled=fuzz.Capabilities(interpreted=fuzz.Capabilities())),
            "one level only",
        ),
        (lambda: fuzz.Conventions(fp32_dots="fp16"), "Conventions.fp32_dots='fp16'"),
        (lambda: fuzz.Conventions(masked_inputs="nan"), "Conventions.masked_inputs='nan'"),
    ],
)
def test_bad_rules_name_the_field(make, message):
    import re

    with pytest.raises(ValueError, match=re.escape(message)):
        make()


def test_one_name_registered_twice_by_a_plugin_is_an_error():
    with pytest.raises(ValueError, match="'duplicate_softmax' is registered twice by plugin"):
        load_plugin(os.path.join(HERE, "..", "plugins", "duplicate_names.py"))


def test_a_tile_a_kwargs_kernel_is_not_passed_is_said_at_registration():
    with pytest.warns(fuzz.PluginWarning, match=r"tile parameter\(s\) \['block_m', 'block_n'\]"):
        fuzz.fuzz_kernel(
            "walls_softmax_kwargs",
            family="softmax",
            kernel=lambda x, **kw: x,
            capabilities=fuzz.Capabilities(features=()),
        )


def test_fuzz_list_shows_conventions_siblings_disabled_properties_and_rules():
    env = {**os.environ, "COLUMNS": "400"}
    torch_kernels = os.path.join(HERE, "..", "plugins", "torch_kernels.py")
    got = subprocess.run(
        [sys.executable, "-m", "fuzz", "list", "--plugin", WALLS, "--plugin", torch_kernels],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert got.returncode == 0, got.stderr[-2000:]
    out = got.stdout
    assert "what plugins declare" in out
    for text in (
        "empty_rows=nan",
        "fp32_dots=tf32",
        "causal=top-left",
        "masked_inputs=finite",
        "attention: plugin entry of dense_top_left()",
        "masked-poison (torch's attention multiplies",
        "q: a multiple of block_q or shorter",
        "Tq above a key length (else no key_padding)",
    ):
        assert text in out, text


def test_the_markdown_report_lists_what_the_kernels_declined():
    from fuzz.campaign.report_md import _markdown_declined

    results = [
        {"target": "a", "backend": "b", "events": {"unsupported: odd rows": 3, "hazard x": 1}},
        {"target": "c", "backend": "b", "events": {"failure nan": 2}},
    ]
    lines = _markdown_declined(results)
    assert lines[0] == "## Declined by the kernels (fuzz.Unsupported)"
    assert "| a | b | odd rows | 3 |" in lines and not any("| c |" in x for x in lines)
    assert _markdown_declined(results[1:]) == []


def test_a_reproducer_the_kernel_now_declines_cannot_replay_and_says_why(tmp_path, capsys):
    from fuzz import reproducer
    from fuzz.failures import Finding

    t = get("walls_softmax_declines")
    path = reproducer.write(
        tmp_path,
        target=t,
        backend="triton-interpret",
        case=_softmax_case(rows=1, cols=3),
        params={},
        finding=Finding("crash", "crash", "recorded before the kernel declined such rows"),
        ref_device="cpu",
        differential=False,
    )
    meta, data = reproducer.load(path)
    assert reproducer.report_replay(meta, data) == 2
    out = capsys.readouterr().out
    assert (
        "cannot replay: the kernel declines this case (unsupported: rows of an odd length)" in out
    )


def test_a_masked_input_s_sign_of_zero_is_no_masking_change():
    """``masked-poison`` compares the poisoned run with the clean one value for value: a zero of
    the other sign (0 * a masked value of the other sign) is no change, any other difference
    is, and NaN stays NaN."""
    import numpy as np

    from fuzz.properties import masked_change

    clean = np.array([-0.0, 1.0, np.nan], np.float32)
    assert masked_change(np.array([0.0, 1.0, np.nan], np.float32), clean) is None
    d = masked_change(np.array([0.0, 1.0 + 2**-23, np.nan], np.float32), clean)
    assert d is not None and d.index == (1,) and d.count == 1
    d = masked_change(np.array([np.nan, 1.0, np.nan], np.float32), clean)
    assert d is not None and d.appeared
