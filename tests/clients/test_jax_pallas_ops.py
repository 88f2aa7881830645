"""JAX's Pallas GPU attention ops fuzzed through the bundled client (``fuzz.clients.jax_pallas_ops``)
in interpret mode: its declarations draw what the ops take (no false finding on the cases below),
and each finding its docstring records is found by the harness and confirmed against JAX's own
references (``mha_reference``, ``gqa_reference``) in float64."""

from __future__ import annotations

import ast
import contextlib
import math

import numpy as np
import pytest
from hypothesis import given, settings

pytest.importorskip("jax.experimental.pallas.ops.gpu.attention")

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.gpu import attention, decode_attention

import fuzz
from fuzz.case import Case
from fuzz.properties import check_case
from fuzz.target import get, load_plugin

PALLAS = fuzz.get_backend("pallas-interpret")


@pytest.fixture(scope="module", autouse=True)
def _plugin():
    load_plugin("fuzz.clients.jax_pallas_ops")


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """The direct calls below run where the ``pallas-interpret`` backend does (a GPU host too)."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def x64() -> contextlib.AbstractContextManager[None]:
    """JAX's float64 mode, where this JAX has it (``jax.enable_x64``, or the older
    ``jax.experimental.enable_x64``)."""
    scope = getattr(jax, "enable_x64", None)
    if scope is None:
        scope = jax.experimental.enable_x64  # type: ignore[attr-defined]
    return scope(True)


def f64(a: np.ndarray) -> jax.Array:
    with x64():
        return jnp.asarray(np.asarray(a, np.float64))


def _dense(q, k, v, **params):
    p = {"dtype": str(q.dtype), "causal": False, "window": None, "scale": None}
    p |= {"softcap": None, "alibi": None, "block_q": 16, "block_k": 16, "align": "top-left"}
    return Case({"q": q, "k": k, "v": v}, {**p, **params})


def _decode(q, k, v, cache_len, **params):
    p = {"dtype": str(q.dtype), "window": None, "scale": None, "softcap": None, "alibi": None}
    p |= {"block_k": 16, "num_splits": 1}
    return Case(
        {"q": q, "k": k, "v": v, "cache_len": np.array(cache_len, np.int32)}, {**p, **params}
    )


def test_the_client_is_at_most_sixty_lines_of_user_code():
    import fuzz.clients.jax_pallas_ops as client

    src = open(client.__file__).read()
    tree = ast.parse(src)
    doc = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef)) and ast.get_docstring(node):
            doc.update(range(node.body[0].lineno, node.body[0].end_lineno + 1))
    lines = [
        line
        for i, line in enumerate(src.splitlines(), 1)
        if i not in doc and line.strip() and not line.strip().startswith("#")
    ]
    assert len(lines) <= 60, len(lines)


def test_packed_sequences_through_segment_ids_run_clean():
    """Three sequences of as many keys as queries (one empty), guard rows after them, causal:
    within the bounds, and each sequence alone gives its rows of the batch."""
    rng = np.random.default_rng(0)
    cu = np.array([0, 5, 5, 16], np.int32)
    q = rng.standard_normal((1, 1, 16, 16)).astype(np.float32)
    k, v = (rng.standard_normal((1, 1, 32, 16)).astype(np.float32) for _ in range(2))
    case = _dense(q, k, v, causal=True).replace(inputs={"cu_seqlens_q": cu, "cu_seqlens_k": cu})
    params = {"masked-poison": "max", "varlen-equals-alone": 0}
    out = check_case(get("jax_mha_varlen"), PALLAS, case, params=params)
    assert out.finding is None, out.finding.summary()
    assert "varlen-equals-alone" in out.params and not out.declined, out.declined
    t = get("jax_mha_varlen")

    @settings(max_examples=40, database=None, derandomize=True, deadline=None)
    @given(t.strategy("small"))
    def draws(case):
        cq, ck = case.inputs["cu_seqlens_q"], case.inputs["cu_seqlens_k"]
        assert np.array_equal(cq, ck), (cq, ck)  # each sequence as many keys as queries

    draws()


def test_key_padding_and_the_decode_prefill_sibling_run_clean():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 1, n, 16)).astype(np.float32) for n in (16, 32, 32))
    case = _dense(q, k, v).replace(inputs={"key_lengths": np.array([16, 32], np.int32)})
    out = check_case(get("jax_mha"), PALLAS, case, params={"masked-poison": "max"})
    assert out.finding is None, out.finding.summary()
    q = rng.standard_normal((1, 2, 1, 16)).astype(np.float32)
    k, v = (rng.standard_normal((1, 1, 32, 16)).astype(np.float32) for _ in range(2))
    case = _decode(q, k, v, [32], num_splits=2)
    out = check_case(
        get("jax_gqa_decode"), PALLAS, case, params={"decode-equals-last-causal-row": 0}
    )
    assert out.finding is None, out.finding.summary()
    assert "decode-equals-last-causal-row" in out.params  # through jax_mha (top-left, GQA repeated)


def test_finding_1_mha_causal_with_more_queries_than_keys_reads_past_the_keys():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, n, 16)).astype(np.float32) for n in (2, 1, 1))
    out = check_case(get("jax_mha"), PALLAS, _dense(q, k, v, causal=True), params={})
    assert out.finding is not None and out.finding.cls == "nan", out.finding
    tr = lambda a: np.swapaxes(a, 1, 2)  # noqa: E731  [B, T, H, D]
    got = attention.mha(
        *(jnp.asarray(tr(a)) for a in (q, k, v)), None, sm_scale=0.25, causal=True, interpret=True
    )
    with x64():
        ref = attention.mha_reference(
            *(f64(tr(a)) for a in (q, k, v)), None, sm_scale=0.25, causal=True
        )
    assert np.isnan(np.asarray(got)).all()
    np.testing.assert_allclose(np.asarray(ref)[0, :, 0], np.repeat(tr(v)[0, :, 0], 2, axis=0))
    t = get("jax_mha")
    reached = []

    @settings(max_examples=60, database=None, derandomize=True, deadline=None)
    @given(t.strategy("small"))
    def draws(case):
        if case.params["causal"] and case.inputs["q"].shape[2] > case.inputs["k"].shape[2]:
            reached.append(case)

    draws()
    assert reached, "the client's strategy never draws a causal case with Tq > Tk"


def test_finding_2_mha_exponent_formed_by_an_fma_at_huge_logits():
    q = np.full((1, 1, 1, 1), 31616, np.float16)
    k = np.full((1, 1, 2, 1), -31616, np.float16)
    v = np.array([0.861, 2.902], np.float16).reshape(1, 1, 2, 1)
    out = check_case(get("jax_mha"), PALLAS, _dense(q, k, v, scale=1.0), params={})
    assert out.finding is not None and out.finding.cls == "inf", out.finding
    tr = lambda a: np.swapaxes(a, 1, 2)  # noqa: E731
    with x64():
        ref = attention.mha_reference(*(f64(tr(a)) for a in (q, k, v)), None, sm_scale=1.0)
    assert np.asarray(ref).ravel()[0] == pytest.approx(1.8815, abs=1e-3)
    # the mechanism: compiled, exp2(x c - max(x c)) is exp2 of the product's rounding error
    c = math.log2(math.e)
    x = jnp.asarray(np.full(2, -1e9, np.float32))
    jitted = np.asarray(jax.jit(lambda x: jnp.exp2(x * c - jnp.max(x * c)))(x))
    assert (jitted != 1.0).all(), jitted  # exactly 1 without the contraction


def test_finding_3_gqa_returns_float32_for_half_inputs():
    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.standard_normal((1, 1, 16)).astype(np.float16))
    k = jnp.asarray(rng.standard_normal((1, 16, 1, 16)).astype(np.float16))
    lens = jnp.array([16], jnp.int32)
    got = decode_attention.gqa(q, k, k, kv_seq_len=lens, block_k=16, k_splits=1, interpret=True)
    ref = decode_attention.gqa_reference(q, k, k, kv_seq_len=lens)
    assert (got.dtype, ref.dtype) == (jnp.float32, jnp.float16)


def test_finding_4_gqa_masked_cache_entries_enter_the_logits_additively():
    rng = np.random.default_rng(0)
    q = np.ones((1, 1, 1, 16), np.float32)
    k, v = (rng.standard_normal((1, 1, 16, 16)).astype(np.float32) for _ in range(2))
    case = _decode(q, k, v, [8])
    out = check_case(get("jax_gqa_decode"), PALLAS, case, params={"masked-poison": "max"})
    assert out.finding is not None and out.finding.cls == "masking", out.finding
    kk = np.swapaxes(k, 1, 2).copy()
    kk[0, 8:] = np.finfo(np.float32).max
    with x64():
        ref = decode_attention.gqa_reference(
            f64(q[:, :, 0]), f64(kk), f64(np.swapaxes(v, 1, 2)), kv_seq_len=jnp.array([8])
        )
    assert np.isnan(np.asarray(ref)).all()  # the reference does the same


def test_finding_5_gqa_stores_unnormalized_half_partials():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 1, 1, 1)).astype(np.float16)
    k = rng.standard_normal((1, 1, 16, 1)).astype(np.float16)
    v = (60000 + rng.standard_normal((1, 1, 16, 1))).astype(np.float16)
    out = check_case(get("jax_gqa_decode"), PALLAS, _decode(q, k, v, [16]), params={})
    assert out.finding is not None and out.finding.cls == "inf", out.finding
    with x64():
        ref = decode_attention.gqa_reference(
            f64(q[:, :, 0]),
            f64(np.swapaxes(k, 1, 2)),
            f64(np.swapaxes(v, 1, 2)),
            kv_seq_len=jnp.array([16]),
        )
    assert float(np.asarray(ref).ravel()[0]) == pytest.approx(60000, rel=1e-3)


def test_the_gpu_domain_takes_sequences_shorter_than_a_tile():
    """``mha`` clamps its blocks to the sequence length, so a sequence shorter than a tile is
    supported on the GPU too (as powers of two, Triton's lowering): the client declares what the
    library takes, not what avoids its bugs (finding 6 shows only below 16)."""
    import fuzz.clients.jax_pallas_ops as client
    from fuzz.target import get

    for caps in (client.dense_caps.for_kind("compiled"), client.dense_caps.for_kind("interpreted")):
        for axis in ("q", "k"):
            assert caps.lengths[axis].shorter, (axis, caps.lengths[axis])
    assert client.dense_caps.for_kind("compiled").lengths["q"].power_of_two
    assert get("jax_mha") is not None
