"""What a plugin kernel returns: a list of outputs is read as the tuple of outputs it is; a list or
tuple that is not the family's outputs (a list of rows, ``tolist()``) is refused with one message,
whatever the input's size: one crash bug, never one per number of rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fuzz
from fuzz.case import Case
from fuzz.engine import hunt
from fuzz.failures import bug_key
from fuzz.profiles import get_profile
from fuzz.properties import check_case
from fuzz.target import get

TRITON = fuzz.get_backend("triton-interpret")


def _softmax(x, scale):
    return torch.softmax(x.float() * (1.0 if scale is None else scale), -1).to(x.dtype)


def as_list(x, *, scale):
    return [_softmax(x, scale)]


def list_of_rows(x, *, scale):
    return list(_softmax(x, scale))


def nested_floats(x, *, scale):
    return _softmax(x, scale).tolist()


def attention_as_list(q, k, v, *, scale):
    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) * scale
    o = torch.einsum("bhqk,bhkd->bhqd", torch.softmax(s, -1), v.float()).to(q.dtype)
    return [o, torch.logsumexp(s, -1)]


@pytest.fixture(scope="module")
def targets():
    caps = fuzz.Capabilities(dtypes=("float32",), features={"scale"})
    for kernel in (as_list, list_of_rows, nested_floats):
        fuzz.fuzz_kernel(
            f"outputs_{kernel.__name__}", family="softmax", kernel=kernel, capabilities=caps
        )
    fuzz.fuzz_kernel(
        "outputs_attention_as_list",
        family="attention",
        kernel=attention_as_list,
        capabilities=fuzz.Capabilities(dtypes=("float32",), features={"scale"}),
    )


def _case(rows):
    x = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
    return Case({"x": x}, {"dtype": "float32", "scale": None, "block_m": 8, "block_n": 16})


def test_a_list_of_outputs_is_read_as_their_tuple(targets):
    out = check_case(get("outputs_as_list"), TRITON, _case(2), params={})
    assert out.finding is None, out.finding
    result = hunt(get("outputs_attention_as_list"), "triton-interpret", get_profile("ci"))
    assert result.error is None and not result.found, result.classes


@pytest.mark.parametrize(
    ("name", "holds"), [("list_of_rows", "torch.Tensor"), ("nested_floats", "list")]
)
def test_a_list_that_is_not_the_outputs_is_one_crash_whatever_the_rows(targets, name, holds):
    keys = set()
    for rows in (1, 2, 3):
        out = check_case(get(f"outputs_{name}"), TRITON, _case(rows), params={})
        f = out.finding
        assert f is not None and f.cls == "crash", f
        assert f.message == (
            f"TypeError: kernel {name}() returned a list of {rows} ({holds}), not the outputs of "
            "family 'softmax': y [R, C], as torch tensors in the kernel's layout: one alone, a "
            "tuple or list in this order, or a dict by name"
        )
        keys.add(bug_key(f))
    assert len(keys) == 1, keys
    result = hunt(get(f"outputs_{name}"), "triton-interpret", get_profile("ci"), database=None)
    assert list(result.found) == ["crash"], list(result.found)  # one bug, not one per size


def attention_off_by_half(q, k, v, *, scale):
    """Wrong on both outputs in every call, and on nothing else: each is 0.5 too high."""
    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) * scale
    o = torch.einsum("bhqk,bhkd->bhqd", torch.softmax(s, -1), v.float()) + 0.5
    return o.to(q.dtype), torch.logsumexp(s, -1) + 0.5


def test_a_call_failing_on_two_outputs_is_one_row_that_names_both():
    """The oracle check names the first output off its oracle and records the other outputs the
    same call failed on (``details["also_outputs"]``): the evidence that joins a row of ``lse``
    to the row of ``o`` (``fuzz.ledger.also_keys``); one hunt, one row."""
    name = "outputs_attention_off_by_half"
    fuzz.fuzz_kernel(
        name,
        family="attention",
        kernel=attention_off_by_half,
        capabilities=fuzz.Capabilities(dtypes=("float32",), features={"scale"}),
    )
    result = hunt(get(name), "triton-interpret", get_profile("ci"), database=None)
    assert result.error is None
    assert list(result.found) == ["accuracy"], result.classes
    found = result.found["accuracy"]
    other = "lse" if found.finding.output == "o" else "o"
    assert found.finding.details["also_outputs"] == {other: ["accuracy"]}
