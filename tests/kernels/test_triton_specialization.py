"""No length selects a new Triton binary: the keys Triton's CUDA backend would compile for each
launch (``fuzz.triton_keys``, no GPU needed) are the same for every case that differs
from another only in its lengths."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from fuzz.target import get
from fuzz.triton_keys import recording_keys, target_keys
from kernels._triton_jit import jit_any_size

FAMILY_TARGETS = (
    "softmax",
    "jagged_softmax",
    "attention",
    "attention_varlen",
    "attention_decode",
    "simple_gla_fwd",
    "simple_gla_bwd",
)


@pytest.mark.parametrize("name", FAMILY_TARGETS)
def test_no_length_selects_a_new_binary(name):
    keys = target_keys(get(name), scale="small", examples=120)
    assert not keys.recompiles(), "\n".join(keys.recompiles())
    assert keys.varied >= 5  # groups whose cases had several shapes: lengths were varied


def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


def _keys(kernel, lengths, offset=0):
    launches = []
    with recording_keys(launches):
        for n in lengths:
            x = torch.zeros(n + offset)[offset:]
            kernel[(1,)](x, torch.zeros(n), n, BLOCK=16)
    return {key for _, _, key in launches}


def test_the_recorder_sees_what_triton_specializes():
    """A plain ``triton.jit`` kernel compiles per length class (1, multiples of 16, others) and
    per pointer alignment; ``jit_any_size`` once."""
    plain = triton.jit(_copy)
    assert len(_keys(plain, (1, 5, 7, 16, 32))) == 3
    any_size = jit_any_size()(_copy)
    assert len(_keys(any_size, (1, 5, 7, 16, 32))) == 1
    assert len(_keys(any_size, (5,)) | _keys(any_size, (5,), offset=1)) == 2


@pytest.mark.parametrize("block_n", [2, 4, 8, 64])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_jagged_guard_views_start_aligned_whatever_the_columns(block_n, dtype):
    """The harness's poisoned buffer around jagged values: the view starts 16-byte aligned for
    every column count (it followed ``block_n * (M + 1)`` and compiled a binary per parity of
    ``M`` in half precision)."""
    from fuzz.targets.jagged_softmax import _guarded_torch

    offsets = torch.tensor([0, 2, 3], dtype=torch.int32)
    for m in range(0, 9):
        values = torch.arange(3 * m, dtype=torch.float32).reshape(3, m).to(dtype)
        view, offs = _guarded_torch(values, offsets, "nan", block_n)
        assert view.data_ptr() % 16 == 0
        assert torch.equal(view, values) and torch.equal(offs, offsets)
        assert view.stride() == (m + 1, 1)
        flat = view.as_strided((view.storage_offset() + (3 + block_n) * (m + 1),), (1,), 0)
        before = flat[: view.storage_offset()]
        assert before.numel() >= block_n * (m + 1) and before.float().isnan().all()
        after = flat[view.storage_offset() + 3 * (m + 1) :]
        assert after.numel() == block_n * (m + 1) and after.float().isnan().all()


@pytest.mark.parametrize("name", FAMILY_TARGETS)
def test_no_reused_variant_selects_a_new_binary(name):
    """Drawn as a campaign's fuzzing draws (``fuzz.triton_keys.reused_keys``: launched variants
    reused with fresh lengths and values), every launch of a variant has one key: a reuse
    compiles nothing. (An absent GLA initial state's stride, and the strides of a packed batch
    with no keys at all, each selected a binary of their own, and a GPU campaign's reuses of
    launched variants compiled them.)"""
    from fuzz.triton_keys import reused_keys

    keys = reused_keys(get(name), scale="small", examples=150)
    assert not keys.recompiles(), "\n".join(keys.recompiles())
    assert keys.varied >= 5
