"""The project's Pallas kernels compile once per shape bucket, not per length: a launch of a new
exact length in a bucket compiled already compiles nothing (no kernel, and no XLA program of the
wrapper's layout: that is done with NumPy wherever the arrays live, so the GPU path is the one
tested here). On a GPU every compile is seconds; a campaign draws a new length in most
structures it explores."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from fuzz.timing import LaunchTimer
from kernels.attention import pallas as attn
from kernels.attention import pallas_decode
from kernels.jagged_softmax import pallas as jagged
from kernels.simple_gla import pallas as gla
from kernels.softmax import pallas as softmax

RNG = np.random.default_rng(0)


def _a(*shape, dtype=np.float32):  # device_put: jnp.asarray compiles a program per shape
    return jax.device_put(RNG.standard_normal(shape).astype(dtype))


def _dense(t, interpret=True):
    return attn.attention(_a(1, 2, t, 16), _a(1, 2, t + 3, 16), _a(1, 2, t + 3, 16), causal=True,
                          block_q=16, block_k=16, interpret=interpret)  # fmt: skip


def _varlen(t, interpret=True):
    cu = jax.device_put(np.array([0, 5, t], np.int32))
    return attn.attention(_a(1, 2, t, 16), _a(1, 2, t, 16), _a(1, 2, t, 16), cu_seqlens_q=cu,
                          cu_seqlens_k=cu, block_q=16, block_k=16, interpret=interpret)  # fmt: skip


def _alibi(t, interpret=True):
    return attn.attention(_a(1, 2, t, 16), _a(1, 2, t, 16), _a(1, 2, t, 16),
                          alibi_slopes=_a(2), block_q=16, block_k=16, interpret=interpret)  # fmt: skip


def _decode(t, interpret=True):
    lens = jax.device_put(np.array([t, t - 4], np.int32))
    return pallas_decode.attention_decode(_a(2, 2, 1, 16), _a(2, 2, t, 16), _a(2, 2, t, 16), lens,
                                          num_splits=2, block_k=16, interpret=interpret)  # fmt: skip


def _gla_fwd(t, interpret=True):
    return gla.chunk_simple_gla_fwd(_a(1, t, 2, 16), _a(1, t, 2, 16), _a(1, t, 2, 16),
                                    g_gamma=jax.device_put(np.array([-0.5, -1.0], np.float32)),
                                    output_final_state=True, chunk_size=16, interpret=interpret)  # fmt: skip


def _gla_bwd(t, interpret=True):
    return gla.chunk_simple_gla_bwd(_a(1, t, 2, 16), _a(1, t, 2, 16), _a(1, t, 2, 16),
                                    _a(1, t, 2, 16), g=jax.device_put(-0.5 - 0.1 * RNG.random((1, t, 2), np.float32)),
                                    initial_state=_a(1, 2, 16, 16), dht=_a(1, 2, 16, 16),
                                    chunk_size=16, interpret=interpret)  # fmt: skip


def _softmax(t, interpret=True):
    return softmax.softmax(_a(3, t), interpret=interpret)


def _jagged(t, interpret=True):
    offsets = jax.device_put(np.array([0, 2, t], np.int32))
    return jagged.jagged_softmax(_a(t, 8), offsets, interpret=interpret)


LAUNCHES = (_dense, _varlen, _alibi, _decode, _gla_fwd, _gla_bwd, _softmax, _jagged)


def new_lengths(launch, interpret: bool = True) -> list[tuple[int, float, bool]]:
    """``launch`` at length 17 (compiling its buckets), then at 19 and 23 (same buckets):
    ``(length, seconds, compiled)`` for each (``.ci/pallas_buckets.py`` runs it compiled)."""
    rows = []
    for t in (17, 19, 23):
        with LaunchTimer() as timer:
            jax.block_until_ready(launch(t, interpret=interpret))
        rows.append((t, timer.seconds, timer.compiled))
    return rows


@pytest.mark.parametrize("launch", LAUNCHES, ids=lambda f: f.__name__)
def test_a_new_length_in_a_compiled_bucket_compiles_nothing(launch):
    for t, _, compiled in new_lengths(launch)[1:]:
        assert not compiled, f"length {t} compiled again"
