"""The client plugins (``fuzz.clients``) as a user runs them: fla-core's chunked simple GLA and
liger-kernel's softmax fuzzed through the public plugin API in Triton's interpreter, a bounded
number of examples each, with no harness error; what they find is what their docstrings record."""

from __future__ import annotations

import pytest

pytest.importorskip("fla.ops.simple_gla", reason="fla-core is not installed (extra 'clients')")
pytest.importorskip("liger_kernel.ops.softmax", reason="liger-kernel is not installed")

from fuzz import reproducer
from fuzz.engine import hunt
from fuzz.origin import trace_finding
from fuzz.profiles import get_profile
from fuzz.target import get, load_plugin

# The interpreter's time grows with the head dims; the suite draws the small ones fla supports.
SMALL = {"head_dims": (16, 8)}


@pytest.fixture(scope="module", autouse=True)
def _plugins():
    load_plugin("fuzz.clients.fla_simple_gla")
    load_plugin("fuzz.clients.liger_softmax")


def test_fla_forward_state_overflows_in_the_padded_rows_of_a_partial_chunk(tmp_path):
    """fla-core 0.6.0's forward with a per-head decay past 88.72 / 63 over a partial last chunk:
    the padded rows get exp2 of a positive exponent (Inf) times their zero values, NaN in the
    final state. Found, shrunk to one token, and traced to the kernel line."""
    t = get("fla_chunk_simple_gla_fwd")
    result = hunt(
        t,
        "triton-interpret",
        get_profile("ci"),
        database=None,
        max_examples=20,
        repro_dir=tmp_path,
        narrowing=SMALL,
    )
    assert result.error is None, result.error
    assert result.classes == ["nan"], result.classes
    # The NaN of the final state is a bug of its own (the output is part of a bug's key).
    states = [f for f in result.of_class("nan") if f.finding.output == "ht"]
    assert states, [f.key for f in result.found.values()]
    found = min(states, key=lambda f: f.case.size)  # (one per dtype the search met it in)
    assert found.case.size <= 1000
    assert found.case.inputs["q"].shape[1] % 64 != 0  # a partial chunk
    assert any(h.startswith("padded-row-overflow") for h in found.finding.hazards)
    origin = trace_finding(t, "triton-interpret", found.case, found.params)
    assert origin["found"] and origin["kind"] == "overflow"
    assert origin["caller"]["file"].endswith("chunk_h.py")
    assert "exp2(b_g_last - b_g)" in origin["caller"]["source"]
    meta, data = reproducer.load(found.reproducer)
    assert reproducer.replay(meta, data).finding.cls == "nan"


def test_fla_backward_runs_clean():
    result = hunt(
        get("fla_chunk_simple_gla_bwd"),
        "triton-interpret",
        get_profile("ci"),
        database=None,
        max_examples=10,
        narrowing=SMALL,
    )
    assert result.error is None, result.error
    assert not result.found, [f.finding.summary() for f in result.found.values()]


def test_liger_softmax_runs_clean_with_its_nan_rows_declared():
    result = hunt(
        get("liger_softmax"), "triton-interpret", get_profile("ci"), database=None, max_examples=40
    )
    assert result.error is None, result.error
    assert not result.found, [f.finding.summary() for f in result.found.values()]


def test_fla_refusal_of_the_gated_backward_on_hopper_is_declined_not_a_crash():
    """fla raises for the gated backward on Hopper with Triton 3.4..3.7.0 (#640): the client
    declines those cases (counted, never a finding). Simulated here: the interpreter adapter that
    lifts the guard where nothing compiles is taken off, and fla's Hopper and Triton flags set."""
    from unittest import mock

    import fla.ops.common.chunk_o as chunk_o
    import numpy as np

    import fuzz
    from fuzz.case import Case
    from fuzz.properties import check_case
    from fuzz.triton_runtime import interpreter_adapter, remove_interpreter_adapter

    client = __import__("fuzz.clients.fla_simple_gla", fromlist=["without_hopper_guard"])
    rng = np.random.default_rng(0)
    inputs = {
        n: rng.standard_normal((1, 5, 1, 16)).astype(np.float32) for n in ("q", "k", "v", "do")
    }
    inputs["g"] = -np.abs(rng.standard_normal((1, 5, 1))).astype(np.float32)
    case = Case(inputs, {"dtype": "float32", "chunk_size": 64, "scale": None})
    remove_interpreter_adapter(client.without_hopper_guard)
    try:
        flags = dict(IS_NVIDIA_HOPPER=True, TRITON_ABOVE_3_4_0=True, TRITON_ABOVE_3_7_1=False)
        with mock.patch.multiple(chunk_o, **flags):
            with pytest.raises(fuzz.Unsupported, match="#640"):
                check_case(
                    get("fla_chunk_simple_gla_bwd"),
                    fuzz.get_backend("triton-interpret"),
                    case,
                    params={},
                )
    finally:
        interpreter_adapter(client.without_hopper_guard)


def test_where_fla_refuses_the_gated_backward_the_compiled_backward_is_fuzzed_with_g_gamma():
    """On a host where fla's own guard refuses per-token gates in the backward (#640), the
    client's compiled backward declares the g_gamma form only (what fla supports there), so no
    compiled case is drawn only to be declined; the interpreted backward (the guard lifted) keeps
    both forms, and elsewhere nothing changes."""
    import importlib
    from unittest import mock

    import fla.ops.common.chunk_o as chunk_o

    import fuzz
    from fuzz.backends import get_backend
    from fuzz.target import unregister

    compiled, interpreted = get_backend("triton"), get_backend("triton-interpret")
    client = importlib.import_module("fuzz.clients.fla_simple_gla")
    assert not client.refuses_gated_backward()  # no Hopper GPU here
    assert get("fla_chunk_simple_gla_bwd").library.supports("g", compiled)
    flags = dict(IS_NVIDIA_HOPPER=True, TRITON_ABOVE_3_4_0=True, TRITON_ABOVE_3_7_1=False)
    with mock.patch.multiple(chunk_o, **flags):
        assert client.refuses_gated_backward()
    for refuses in (True, False):
        name = f"fla_bwd_where_gated_refused_{refuses}"
        target = fuzz.fuzz_kernel(
            name,
            family="simple_gla_bwd",
            kernel=client.refusing_hopper(fuzz.autograd_backward(client.forward)),
            capabilities=client.backward_capabilities(refuses),
        )
        try:
            lib = target.library
            assert lib.supports("g", compiled) is not refuses
            assert lib.supports("g_gamma", compiled) and lib.supports("dht", compiled)
            assert lib.supports("varlen", compiled) and lib.supports("g", interpreted)
        finally:
            unregister(name)
    # The kernel called as the harness calls it where per-token gates are not declared (here on
    # the interpreter: the compiled kind cannot run on this machine): no `g` keyword at all.
    name = "fla_bwd_without_gates"
    target = fuzz.fuzz_kernel(
        name,
        family="simple_gla_bwd",
        kernel=client.refusing_hopper(fuzz.autograd_backward(client.forward)),
        capabilities=fuzz.Capabilities(
            tiles=client.chunks, head_dims=(16, 8), features=(client.supported - {"g"}) | {"dht"}
        ),
    )
    try:
        result = hunt(target, "triton-interpret", get_profile("ci"), database=None, max_examples=4)
        assert result.error is None and result.examples >= 4, result.error
        assert not result.found, [f.finding.summary() for f in result.found.values()]
    finally:
        unregister(name)
