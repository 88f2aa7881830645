"""Simple GLA mutants: the real kernels with one bug from the chunked-GLA checklist planted.

Each mutant exists for both kernel languages, written the way that language's kernel would have
it, and says which targets it is registered for (``simple_gla_fwd``, ``simple_gla_bwd`` or both)
and the failure class the harness must report there, with its shrink bound. The thresholds are
those of the tiles the kernels compute: a chunk of ``C <= 64`` tokens is one tile; longer chunks
are 64-token tiles.
"""

from __future__ import annotations

from typing import Any

from kernels._mutate import Edit, Expect, Mutant, rewrites_of


def _anchor_bound(case: Any) -> int:
    """``anchor``'s shrink bound: the threshold decay's 33 tokens x 16 lanes, or a chunk of 128
    with 32 heads where the standard ALiBi slopes found it (see the mutant)."""
    alibi = case.recipe.get("decay", {}).get("kind") == "alibi"
    return 128 * 32 * 16 if alibi else 33 * 16


# Each mutant's shrink bound: the largest input (elements) its minimal reproducer may have,
# asserted by tests/test_mutants.py, with the minimal reproducers (CI profile, both interpreters).
MUTANTS = rewrites_of(
    "kernels.simple_gla.{impl}",
    Mutant(
        "mask_mul",
        "seed 004: exp over the whole tile, then multiplied by the causal mask; above the diagonal "
        "b_i - b_j = |gamma| (j - i) overflows once |gamma| (tile - 1) > 88.72 and 0 * Inf = NaN "
        "(in the forward and in the backward's recomputation of the weights)",
        # chunk 16, two routes to the masked triangle's overflow, both minimal for the shrinker:
        # g_gamma with |gamma| just above 88.72/15 = 5.915 (threshold kind, fp32, margin 2^-10)
        # and T = 1 (the padded rows of the one partial chunk already span 15 steps above the
        # diagonal; q, k, v of 1 x 1 x 1 x 16: 16 elements), or per-token gates (strong
        # log-sigmoid gates, scale 16) and T = 16, where the 15 gates above the diagonal sum past
        # 88.72 (256 elements).
        {
            "simple_gla_fwd": Expect("nan", shrink_bound=256),
            "simple_gla_bwd": Expect("nan", shrink_bound=256),
        },
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
        # as mask_mul
        {"simple_gla_bwd": Expect("nan", shrink_bound=256)},
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
        # a cumulative decay past the point where exp(b) underflows to 0 inside one chunk
        # (0 / 0): past 103.3 with subnormals, 87.3 where XLA flushes them. With |gamma| just
        # above 88.72/15 that takes 18+ tokens of a chunk, so the minimal reproducer is T = 17..31
        # at chunk 16, found through finite-every-chunk's rerun at chunk 32 (Triton's
        # interpreter: T = 31, 496 elements; Pallas: T = 17 with strong log-sigmoid gates, 272
        # elements). T = 1 with a slope of 1000 also fails (16 elements) but is further from the
        # simplest decays. On an H100 (pallas-gpu) the same threshold decay landed at T = 33 over
        # chunks of 32 (one chunk and a token: 528 elements), hence 33 tokens x 16 lanes. Under
        # the gpu profile the first failure can instead be the standard ALiBi slopes themselves
        # (seed 004's case), and the shrinker stays with them (fewer heads have no slope steep
        # enough): one chunk of 128 with 16 to 32 heads, whose steepest slopes 2^-0.5 .. 2^-0.25
        # (the extra slopes of a head count that is not a power of two) span more than 88.72
        # within it (H100, triton: T = 128, 20 heads, K = 16: 40960 elements).
        {"simple_gla_fwd": Expect("nan", shrink_bound=_anchor_bound)},
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
        # chunk 16, |gamma| above 88.72/15 (threshold kind), T = 1 with the final state: the
        # padded rows' state weights overflow; 16 elements.
        {"simple_gla_fwd": Expect("nan", shrink_bound=16)},
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
        # chunk 16, the standard slope of one head (1/256), the final state, and something to
        # carry into the partial chunk: T = 17 (one full chunk, then one token; 272 elements) or
        # T = 1 with an initial state (h0: 16 x 16 = 256 elements).
        {"simple_gla_fwd": Expect("accuracy", shrink_bound=272)},
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
        # the final state of T = 1 (16 elements), or T = 17 at chunk 16 without it (the 17th
        # output reads the rounded state: 272 elements)
        {"simple_gla_fwd": Expect("accuracy", shrink_bound=272)},
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
        # dk rounded to bf16 when the row tiles are accumulated: one token's dk already (16)
        {"simple_gla_bwd": Expect("accuracy", shrink_bound=16)},
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
        # total - prefix cancels after a token whose dg terms are far larger than a later token's:
        # a query burst (q and do times 2^12, the shrink target) on the first of two tokens with
        # an initial state, whose terms with the burst make every partial sum of the chunk's dg
        # large while the second token's dg stays small (h0: 16 x 16 = 256 elements). Without a
        # state entering the chunk the burst's terms cancel exactly: with itself within its own
        # q.dq - k.dk, with an earlier key in the prefix (two fp32 numbers within a factor of two
        # subtract exactly). The state may also come from a first chunk instead of h0: T = 17 at
        # chunk 16 (272 elements).
        {"simple_gla_bwd": Expect("accuracy", shrink_bound=272)},
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
