"""The seed-004 project's Pallas simple GLA declared as that project's kernel needs
(``tests/plugins/seed004_gla.py``): its rules, a final state only for whole chunks and a backward
of whole chunks, said through ``fuzz.Constraint`` and ``fuzz.Lengths`` with no padding in the
plugin; declared, a hunt is clean; undeclared, each is a false finding."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings

import fuzz
from fuzz.case import Case
from fuzz.engine import hunt
from fuzz.profiles import get_profile
from fuzz.properties import check_case
from fuzz.target import get, load_plugin

pytest.importorskip("jax.experimental.pallas")

SEED004 = os.path.join(os.path.dirname(__file__), "..", "plugins", "seed004_gla.py")
PALLAS = fuzz.get_backend("pallas-interpret")


@pytest.fixture(scope="module", autouse=True)
def plugin():
    return load_plugin(SEED004)


def _case(t, *, grads):
    rng = np.random.default_rng(0)
    inputs = {n: rng.standard_normal((1, t, 1, 16)).astype(np.float32) for n in "qkv"}
    inputs["g_gamma"] = np.array([-0.5], np.float32)
    params = {"dtype": "float32", "chunk_size": 16, "scale": None}
    if grads:
        inputs["do"] = rng.standard_normal((1, t, 1, 16)).astype(np.float32)
    else:
        params["output_final_state"] = True
    return Case(inputs, params)


@pytest.mark.parametrize("name", ["seed004_gla_fwd", "seed004_gla_bwd"])
def test_declared_as_it_needs_a_hunt_is_clean(name):
    result = hunt(
        get(name),
        "pallas-interpret",
        get_profile("ci"),
        database=None,
        max_examples=8,
        narrowing={"head_dims": (16,)},
    )
    assert result.error is None, result.error
    assert not result.found, [f.finding.summary() for f in result.found.values()]
    finals = []

    @settings(max_examples=60, database=None, derandomize=True, deadline=None)
    @given(get(name).strategy("small"))
    def draws(case):
        whole = case.inputs["q"].shape[1] % case.params["chunk_size"] == 0
        if name.endswith("bwd"):
            assert whole, case
        elif case.params["output_final_state"]:
            assert whole, case
            finals.append(case)

    draws()
    assert finals or name.endswith("bwd"), "the final state was never drawn"


def test_undeclared_each_rule_is_a_false_finding():
    t = get("seed004_gla_fwd")
    kernel = t.kernels["pallas"].kernel
    caps = fuzz.Capabilities(
        features={"g_gamma", "initial_state", "scale", "final_state"}, tiles={"chunk_size": (16,)}
    )
    undeclared = fuzz.fuzz_kernel(
        "seed004_gla_fwd_undeclared",
        family="simple_gla_fwd",
        kernel=kernel,
        language="pallas",
        capabilities=caps,
    )
    out = check_case(undeclared, PALLAS, _case(5, grads=False), params={})
    assert out.finding is not None and out.finding.output == "ht", out.finding
    # declared: the strategy leaves the final state out there, the entry declines it if asked
    with pytest.raises(fuzz.Unsupported, match="final state of a partial chunk"):
        check_case(t, PALLAS, _case(5, grads=False), params={})
    backward = get("seed004_gla_bwd").kernels["pallas"].kernel
    caps = fuzz.Capabilities(
        features={"g_gamma", "initial_state", "scale", "dht"}, tiles={"chunk_size": (16,)}
    )
    undeclared = fuzz.fuzz_kernel(
        "seed004_gla_bwd_undeclared",
        family="simple_gla_bwd",
        kernel=backward,
        language="pallas",
        capabilities=caps,
    )
    out = check_case(undeclared, PALLAS, _case(5, grads=True), params={})
    assert out.finding is not None and out.finding.cls == "crash", out.finding
    assert "must be a multiple of chunk_size" in out.finding.message
