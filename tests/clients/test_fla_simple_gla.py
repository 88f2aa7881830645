"""fla-core's ``chunk_simple_gla`` (Triton kernels behind ``triton.autotune`` and
``triton.heuristics``, launched by fla's own Python code) in Triton's interpreter on CPU tensors,
through ``fuzz.triton_runtime``, checked against the harness's simple GLA oracle and tolerance.

fla's layout is the project's: ``q, k [B, T, H, K]``, ``v [B, T, H, V]``, ``g [B, T, H]`` (natural
log decay), ``g_gamma [H]``, states ``[N, H, K, V]``, ``cu_seqlens [N + 1]`` with ``B == 1``; its
``scale`` multiplies ``q h`` as the oracle's does. Skipped when fla-core is not installed
(``pip install -e ".[clients]"``).
"""

from __future__ import annotations

import contextlib
from unittest import mock

import numpy as np
import pytest

pytest.importorskip("fla.ops.simple_gla", reason="fla-core is not installed (extra 'clients')")

from fla.ops.simple_gla import chunk_simple_gla

from fuzz.arrays import np_dtype
from fuzz.backends import TorchAdapter
from fuzz.case import Case
from fuzz.triton_runtime import (
    Candidate,
    interpreter_adapter,
    interpreting,
    pinned_configs,
    remove_interpreter_adapter,
)

CPU = TorchAdapter("cpu")


@contextlib.contextmanager
def fla_on_the_interpreter():
    """fla's adaptation to the interpreter (what its plugin would register): on a Hopper GPU host
    fla 0.6.0 refuses the gated backward under Triton < 3.7.1, whose compiler miscompiles
    ``chunk_bwd_kernel_dqkwg`` there (fla #640); the interpreter compiles nothing."""
    import fla.ops.common.chunk_o as chunk_o

    with mock.patch.object(chunk_o, "IS_NVIDIA_HOPPER", False):
        yield


@pytest.fixture(autouse=True)
def _adapted():
    interpreter_adapter(fla_on_the_interpreter)
    yield
    remove_interpreter_adapter(fla_on_the_interpreter)


def make_case(
    dtype: str, *, gates: bool, h0: bool, cu: list[int] | None, shape, chunk: int, seed: int
) -> Case:
    """A backward case of the harness's simple_gla targets (the forward's is it minus do, dht)."""
    b, t, h, k_dim, v_dim = shape
    rng = np.random.default_rng(seed)
    dt = np_dtype(dtype)
    n = b if cu is None else len(cu) - 1
    inputs = {
        "q": rng.standard_normal((b, t, h, k_dim)).astype(dt),
        "k": rng.standard_normal((b, t, h, k_dim)).astype(dt),
        "v": rng.standard_normal((b, t, h, v_dim)).astype(dt),
        "do": rng.standard_normal((b, t, h, v_dim)).astype(dt),
        "dht": rng.standard_normal((n, h, k_dim, v_dim)).astype(np.float32),
    }
    if gates:  # log(sigmoid(randn))
        inputs["g"] = (-np.logaddexp(0.0, -rng.standard_normal((b, t, h)))).astype(np.float32)
    else:
        inputs["g_gamma"] = (-rng.uniform(0.05, 1.0, h)).astype(np.float32)
    if h0:
        inputs["h0"] = rng.standard_normal((n, h, k_dim, v_dim)).astype(np.float32)
    if cu is not None:
        inputs["cu_seqlens"] = np.array(cu, np.int64)
    return Case(inputs, {"dtype": dtype, "chunk_size": chunk, "scale": None})


def forward_case(case: Case) -> Case:
    inputs = {k: v for k, v in case.inputs.items() if k not in ("do", "dht")}
    return Case(inputs, {**case.params, "output_final_state": True})


def run_fla(case: Case) -> dict[str, np.ndarray]:
    """fla forward and backward (loss ``sum(o * do) + sum(ht * dht)``) in the caller's scopes."""
    t = {k: CPU.put(v) for k, v in case.inputs.items()}
    leaves = {k: t[k].requires_grad_() for k in ("q", "k", "v", "g", "h0") if k in t}
    cu = t.get("cu_seqlens")
    o, ht = chunk_simple_gla(
        leaves["q"],
        leaves["k"],
        leaves["v"],
        g=leaves.get("g"),
        g_gamma=t.get("g_gamma"),
        initial_state=leaves.get("h0"),
        output_final_state=True,
        cu_seqlens=cu,
        chunk_size=case.params["chunk_size"],
    )
    ((o * t["do"]).sum() + (ht * t["dht"]).sum()).backward()
    got = {"o": o, "ht": ht, "dq": leaves["q"].grad, "dk": leaves["k"].grad, "dv": leaves["v"].grad}
    if "g" in leaves:
        got["dg"] = leaves["g"].grad
    if "h0" in leaves:
        got["dh0"] = leaves["h0"].grad
    return {k: CPU.get(v) for k, v in got.items()}


def check(case: Case, got: dict[str, np.ndarray], within_bounds) -> None:
    fwd = {k: got[k] for k in ("o", "ht")}
    within_bounds("simple_gla_fwd", forward_case(case), fwd)
    within_bounds("simple_gla_bwd", case, {k: v for k, v in got.items() if k not in fwd})


def _kwargs(candidate: Candidate) -> str:
    return repr(sorted(candidate.config.kwargs.items()))


def test_every_config_of_every_kernel(within_bounds):
    """Per-token gates, an initial and a final state, packed sequences (one empty) over three
    chunks of 16: each run picks, for every autotuned kernel, the run-th of its distinct config
    kwargs (num_warps, num_stages: nothing to the interpreter), until every one has run."""
    case = make_case(
        "float32", gates=True, h0=True, cu=[0, 5, 5, 40], shape=(1, 40, 2, 32, 32), chunk=16, seed=0
    )
    offered: dict[str, set[str]] = {}
    ran: dict[str, set[str]] = {}
    run = 0

    def chooser(kernel: str, candidates) -> int:
        kinds = list(dict.fromkeys(_kwargs(c) for c in candidates))
        offered.setdefault(kernel, set()).update(kinds)
        want = kinds[run % len(kinds)]
        return next(i for i, c in enumerate(candidates) if _kwargs(c) == want)

    while run == 0 or any(ran.get(k, set()) != v for k, v in offered.items()):
        with interpreting(), pinned_configs(chooser) as choices:
            got = run_fla(case)
        for c in choices:
            ran.setdefault(c.kernel, set()).add(repr(sorted(c.config.kwargs.items())))
        check(case, got, within_bounds)
        run += 1
        assert run <= 8, (offered, ran)
    # fla's forward state, output, cumsum, backward state and gradient kernels all took part
    assert len(offered) >= 6 and any(len(v) >= 3 for v in offered.values()), offered


@pytest.mark.parametrize(
    "dtype, gates, h0, cu",
    [
        ("float32", False, False, None),
        ("float16", True, True, None),
        ("bfloat16", False, True, [0, 17, 40]),
        ("bfloat16", True, False, None),
    ],
)
def test_dtypes_and_forms(dtype, gates, h0, cu, within_bounds):
    """fp32, fp16 and bf16 (bf16 computed as bf16 by the scope: Triton's interpreter alone would
    compute on raw bits), the per-head and per-token decay forms, the states, packed sequences;
    the first config of every kernel (what interpreting() alone runs)."""
    shape = (1 if cu else 2, 40, 2, 16, 32)
    case = make_case(dtype, gates=gates, h0=h0, cu=cu, shape=shape, chunk=16, seed=1)
    with interpreting():
        got = run_fla(case)
    check(case, got, within_bounds)


def test_side_by_side_with_the_harness_own_gla_kernel(within_bounds):
    """In one scope: fla's kernels (routed to the interpreter) and the harness's own Triton GLA
    kernel (its own interpreted twins), on the same case, both within the harness's bounds."""
    from kernels.simple_gla import triton as own

    case = make_case(
        "float32", gates=True, h0=True, cu=None, shape=(1, 24, 2, 16, 16), chunk=16, seed=2
    )
    fwd = forward_case(case)
    t = {k: CPU.put(v) for k, v in fwd.inputs.items()}
    with interpreting(), pinned_configs():
        got = run_fla(case)
        o, ht = own.chunk_simple_gla_fwd(
            t["q"],
            t["k"],
            t["v"],
            g=t["g"],
            initial_state=t["h0"],
            output_final_state=True,
            chunk_size=16,
            interpret=True,
        )
    check(case, got, within_bounds)
    within_bounds("simple_gla_fwd", fwd, {"o": CPU.get(o), "ht": CPU.get(ht)})


def test_on_a_hopper_host_the_gated_backward_needs_fla_adapter(monkeypatch):
    """What a Hopper GPU host sees at fla's import (IS_NVIDIA_HOPPER): without the adapter fla
    refuses the gated backward even in the interpreter; with it (the autouse fixture) it runs."""
    import fla.ops.common.chunk_o as chunk_o

    monkeypatch.setattr(chunk_o, "IS_NVIDIA_HOPPER", True)
    case = make_case(
        "float32", gates=True, h0=False, cu=None, shape=(1, 5, 1, 16, 16), chunk=16, seed=3
    )
    with interpreting():
        run_fla(case)
    assert chunk_o.IS_NVIDIA_HOPPER is True
    # No adapter at all (the client plugin fuzz.clients.fla_simple_gla registers the same one).
    import fuzz.triton_runtime as runtime

    monkeypatch.setattr(runtime, "_adapters", [])
    with interpreting(), pytest.raises(RuntimeError, match="Hopper"):
        run_fla(case)
