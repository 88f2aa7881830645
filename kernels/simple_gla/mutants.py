"""Simple GLA mutants: the real kernels with one bug from the chunked-GLA checklist planted.

Each mutant exists for both kernel languages, written the way that language's kernel would have
it, and says which targets it is registered for (forward, backward or both) and the failure class
the harness must report there. The thresholds are those of the tiles the kernels compute: a chunk
of ``C <= 64`` tokens is one tile; longer chunks are 64-token tiles.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass

from kernels._mutate import Edit, mutate


@dataclass(frozen=True)
class Mutant:
    """A planted bug.

    Attributes:
        name: short name (the targets are ``simple_gla_<kind>_mutant_<name>``).
        description: what is wrong and why it fails.
        expected: failure class per target kind (``'fwd'``/``'bwd'``) it is registered for.
        triton, pallas: the text edits of ``kernels.simple_gla.triton`` / ``.pallas``.
    """

    name: str
    description: str
    expected: Mapping[str, str]
    triton: tuple[Edit, ...]
    pallas: tuple[Edit, ...]

    def module(self, impl: str) -> types.ModuleType:
        if impl == "triton":
            from kernels.simple_gla import triton as real
        elif impl == "pallas":
            from kernels.simple_gla import pallas as real  # type: ignore[no-redef]
        else:
            raise ValueError(f"impl={impl!r} must be 'triton' or 'pallas'")
        return mutate(real, self.name, getattr(self, impl))


MUTANTS = (
    Mutant(
        "mask_mul",
        "seed 004: exp over the whole tile, then multiplied by the causal mask; above the diagonal "
        "b_i - b_j = |gamma| (j - i) overflows once |gamma| (tile - 1) > 88.72 and 0 * Inf = NaN "
        "(in the forward and in the backward's recomputation of the weights)",
        {"fwd": "nan", "bwd": "nan"},
        triton=(
            Edit(
                '    return tl.exp(tl.where(causal, b_rows[:, None] - b_cols[None, :], float("-inf")))',
                "    return tl.exp(b_rows[:, None] - b_cols[None, :]) * causal.to(tl.float32)",
            ),
        ),
        pallas=(
            # XLA's algebraic simplifier rewrites exp(x) * convert(bool mask) into a select (so a
            # boolean mask multiply is harmless under XLA on the CPU, as seed 004's where was
            # harmful under XLA on the TPU); the mask here is numeric, built from the indices.
            Edit(
                "    return jnp.exp(jnp.where(causal, b_rows[:, None] - b_cols[None, :], -jnp.inf))",
                "    tri = jnp.clip(rows[:, None] - cols[None, :] + 1, 0, 1).astype(jnp.float32)\n"
                "    return jnp.exp(b_rows[:, None] - b_cols[None, :]) * tri",
            ),
        ),
    ),
    Mutant(
        "select_after_exp",
        "backward only: the weights' cotangent written as autodiff would derive it from "
        "where(mask, exp(b_i - b_j), 0): the upstream gradient is selected by the mask, then "
        "multiplied by the unmasked exp, so the overflowed upper triangle gives 0 * Inf = NaN in "
        "dq (the forward, which selects after exp, is fine)",
        {"bwd": "nan"},
        triton=(
            Edit(
                """                w_rec = _intra_weights(b, b_s, rows, cols)  # the forward's weights, recomputed
                da = tl.dot(do, tl.trans(v_s), input_precision="ieee") * w_rec * scale""",
                """                e_raw = tl.exp(b[:, None] - b_s[None, :])
                causal = rows[:, None] >= cols[None, :]
                da = tl.dot(do, tl.trans(v_s), input_precision="ieee")
                da = tl.where(causal, da, 0.0) * e_raw * scale""",
            ),
        ),
        pallas=(
            Edit(
                """                w_rec = _intra_weights(b, b_s, rows, cols)  # the forward's weights, recomputed
                da = _dot(do, v_s, tb=True) * w_rec * scale""",
                """                e_raw = jnp.exp(b[:, None] - b_s[None, :])
                causal = rows[:, None] >= cols[None, :]
                da = jnp.where(causal, _dot(do, v_s, tb=True), 0.0) * e_raw * scale""",
            ),
        ),
    ),
    Mutant(
        "anchor",
        "anchored factorisation: the decay ratio as a quotient of cumulative decays "
        "P_i / P_j with P = exp(b) (the cumulative product of the gates) instead of "
        "exp(b_i - b_j); P underflows to 0 once the chunk's cumulative decay passes 103.3 (87.3 "
        "where subnormals are flushed) and 0 / 0 = NaN, although every true ratio is <= 1 (and "
        "P is inaccurate subnormal before that)",
        {"fwd": "nan"},
        triton=(
            Edit(
                '    return tl.exp(tl.where(causal, b_rows[:, None] - b_cols[None, :], float("-inf")))',
                "    return tl.where(causal, tl.exp(b_rows)[:, None] / tl.exp(b_cols)[None, :], 0.0)",
            ),
        ),
        pallas=(
            Edit(
                "    return jnp.exp(jnp.where(causal, b_rows[:, None] - b_cols[None, :], -jnp.inf))",
                "    return jnp.where(causal, jnp.exp(b_rows)[:, None] / jnp.exp(b_cols)[None, :], 0.0)",
            ),
        ),
    ),
    Mutant(
        "pad_unmasked",
        "the padded tail rows of a partial chunk (past a sequence's end) are not masked before "
        "exp in the state update: in the g_gamma form their exponent b_last - b_j = |gamma| "
        "(j - last) > 0 overflows, and Inf times their zero keys gives NaN in the state",
        {"fwd": "nan"},
        triton=(
            Edit(
                '    return tl.exp(tl.where(valid, b_last - b, float("-inf")))',
                "    return tl.exp(b_last - b)",
            ),
        ),
        pallas=(
            Edit(
                "    return jnp.exp(jnp.where(valid, b_last - b, -jnp.inf))",
                "    return jnp.exp(b_last - b)",
            ),
        ),
    ),
    Mutant(
        "partial_decay",
        "the state update of a partial (last) chunk skips its decay: the carried state enters "
        "the next sequence step undecayed, so ht (and a later chunk's o) is too large",
        {"fwd": "accuracy"},
        triton=(
            Edit(
                "        decay_last = tl.exp(b_last)",
                "        decay_last = tl.where(n_valid == BT, tl.exp(b_last), 1.0)",
            ),
        ),
        pallas=(
            Edit(
                "        decay_last = jnp.exp(b_last)",
                "        decay_last = jnp.where(n_valid == bt, jnp.exp(b_last), 1.0)",
            ),
        ),
    ),
    # Precision losses (class accuracy): fp32 inputs, but a carried value kept in half precision
    # or a suffix sum that cancels. Each shows where the per-element bound is tight enough (an
    # element's bound comes from its own terms, not from the largest output).
    Mutant(
        "state_fp16",
        "the state carried from chunk to chunk is stored in float16 (a kernel that keeps its state "
        "in half precision to save registers): every chunk boundary rounds it to 11 bits, for fp32 "
        "inputs too (and it overflows past 65504)",
        {"fwd": "accuracy"},
        triton=(
            Edit(
                "        state = state * decay_last + kv",
                "        state = (state * decay_last + kv).to(tl.float16).to(tl.float32)",
            ),
        ),
        pallas=(
            Edit(
                "        return state * decay_last + kv",
                "        return (state * decay_last + kv).astype(jnp.float16).astype(F32)",
            ),
        ),
    ),
    Mutant(
        "dk_acc_bf16",
        "backward: the dk accumulator over the row tiles is kept in bfloat16 (8 bits): each tile's "
        "contribution rounds it, for fp32 inputs too",
        {"bwd": "accuracy"},
        triton=(
            Edit(
                '                dk += tl.dot(tl.trans(da_t), q_i, input_precision="ieee")',
                '                dk = (dk + tl.dot(tl.trans(da_t), q_i, input_precision="ieee"))'
                ".to(tl.bfloat16).to(tl.float32)",
            ),
        ),
        pallas=(
            Edit(
                "                return dk + _dot(da_t, q_j, ta=True), dv + _dot(a_t, do_j, ta=True)",
                "                dk = (dk + _dot(da_t, q_j, ta=True)).astype(jnp.bfloat16).astype(F32)\n"
                "                return dk, dv + _dot(a_t, do_j, ta=True)",
            ),
        ),
    ),
    Mutant(
        "dg_total_minus_prefix",
        "backward: dg's suffix sums within a tile computed as the tile's total minus the exclusive "
        "prefix sum: exact in real arithmetic, but after tokens whose terms are much larger than "
        "the later ones the difference cancels and keeps the large terms' rounding error",
        {"bwd": "accuracy"},
        triton=(
            Edit(
                "            suffix = tl.sum(tl.where(rows[None, :] >= rows[:, None], db[None, :], 0.0), "
                "axis=1)",
                "            suffix = tl.sum(db, axis=0) - tl.sum(\n"
                "                tl.where(rows[None, :] < rows[:, None], db[None, :], 0.0), axis=1)",
            ),
        ),
        pallas=(
            Edit(
                "                suffix = jnp.sum(jnp.where(upper, db[None, :], 0.0), axis=1)",
                "                suffix = jnp.sum(db) - jnp.sum(jnp.where(upper, 0.0, db[None, :]), "
                "axis=1)",
            ),
        ),
    ),
)
