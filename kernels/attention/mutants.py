"""Attention mutants: the real kernels with one known bug planted.

Each mutant exists for both kernel languages, as the same bug written the way that language's
kernel would have it, and names the failure class the harness must report for it. The edits are
exact text replacements of ``kernels/attention/triton.py`` and ``kernels/attention/pallas.py``
(decode mutants: ``triton_decode.py`` and ``pallas_decode.py``; ``kernels._mutate``): a
refactor of the real kernels that breaks an edit fails loudly. The precision losses (bug class
15: an fp32 kernel keeping an intermediate in half precision) break nothing but accuracy; the
per-element error bound must see them at the ci profile's sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernels._mutate import Edit, Expect, Mutant, rewrites_of


def _positions(n: int, per_key_tile: int = 0) -> Callable[[Any], int]:
    """A shrink bound of ``n + per_key_tile * block_k`` positions (``B * H * T`` of the largest
    input), in elements: times the head dim the case drew."""

    def bound(case: Any) -> int:
        return (n + per_key_tile * int(case.params["block_k"])) * int(case.inputs["q"].shape[-1])

    return bound


_T_SELECT = '        s = tl.where(valid, s, float("-inf"))\n'
_P_SELECT = "        s = jnp.where(valid, s, -jnp.inf)\n"

# Each mutant's shrink bound: the largest input its minimal reproducer may have, asserted by
# tests/test_mutants.py. Counted in positions (elements over the head dim: the shrinker goes to the
# profile's first head dim, 1 for the ci profile, 64 for the gpu profile) and in key tiles where
# the bug needs one. Every one shrinks to fp32, one head, no modifier; the comments give the
# minimal case each lands on under the ci profile (both interpreters), and under the gpu profile
# (triton, pallas-gpu) where it differs.
MUTANTS = rewrites_of(
    "kernels.attention.{impl}",
    Mutant(
        "mask_times_exp",
        "masked keys zeroed by multiplying exp(s - m) by the mask instead of selecting -inf "
        "before exp: a masked logit more than 88.7 above the row max overflows, and 0 * Inf = NaN",
        # q, k [1,1,1,1], logits near -100: the 15 padding lanes of the key tile get exp(0 + 100) =
        # inf, times the 0 of the mask: NaN. (Run inside the whole suite, where Hypothesis's pool
        # of constants from the project's modules differs, it has also stopped at one or two
        # queries over five keys, causal, with rising logits: a masked key 88.7 above the row
        # max.) gpu: two queries over one key, causal, level 100; since the switches became
        # runtime flags and counts are drawn log-uniformly, also 24 queries over one key, no
        # mask, D = 64, plain normal values: the 24th query is the seed's first whose logit is
        # below -88.7 (removing rows removes it, and the shrinker does not trade rows for a logit
        # level).
        {"attention": Expect("nan", shrink_bound=_positions(32))},
        triton=(
            Edit(
                _T_SELECT + "\n        m_new = tl.maximum(m_i, tl.max(s, 1))",
                '        s_masked = tl.where(valid, s, float("-inf"))\n\n'
                "        m_new = tl.maximum(m_i, tl.max(s_masked, 1))",
            ),
            Edit(
                "        p = tl.exp(s - m_shift[:, None])\n",
                "        p = tl.exp(s - m_shift[:, None]) * valid\n",
            ),
        ),
        pallas=(
            Edit(
                _P_SELECT + "\n        m_new = jnp.maximum(m_i, s.max(axis=1))",
                "        s_masked = jnp.where(valid, s, -jnp.inf)\n\n"
                "        m_new = jnp.maximum(m_i, s_masked.max(axis=1))",
            ),
            # A float 0/1 mask, as JAX code writes it: XLA rewrites a product with a converted
            # *boolean* into a select, which the interpreter would then compute without the NaN
            # (the GPU lowering keeps the product: the bool form diverges between the backends).
            Edit(
                "        p = jnp.exp(s - m_shift[:, None])\n",
                "        p = jnp.exp(s - m_shift[:, None]) * jnp.where(valid, 1.0, 0.0)\n",
            ),
        ),
    ),
    Mutant(
        "finite_sentinel",
        "masked logits set to -1e9 instead of -inf: a row with no visible key averages the "
        "values of the masked keys it loads instead of returning zeros",
        # q [1,1,2,1] over one key, causal: row 0 has no visible key and averages the masked one
        {"attention": Expect("masking", shrink_bound=_positions(2))},
        triton=(Edit(_T_SELECT, "        s = tl.where(valid, s, -1e9)\n"),),
        pallas=(Edit(_P_SELECT, "        s = jnp.where(valid, s, -1e9)\n"),),
    ),
    Mutant(
        "mask_before_scale",
        "the mask applied to the raw q.k with a finite sentinel, before the scale (and the soft "
        "cap): masked logits become -1e9 * scale, or -cap under a soft cap, instead of -inf",
        # the same fully masked row (the accuracy class it also shows: one key under a soft cap,
        # the padding lanes at -cap next to a saturated valid logit)
        {"attention": Expect("masking", shrink_bound=_positions(2))},
        triton=(
            Edit(
                "        s = s * scale\n",
                "        s = tl.where(valid, s, -1e9)\n        s = s * scale\n",
            ),
            Edit(_T_SELECT, ""),
        ),
        pallas=(
            Edit(
                "        s = s * scale\n",
                "        s = jnp.where(valid, s, -1e9)\n        s = s * scale\n",
            ),
            Edit(_P_SELECT, ""),
        ),
    ),
    Mutant(
        "scale_twice",
        "the softmax scale applied twice (once by the caller's convention, once in the kernel)",
        # q, k [1,1,1,1], D = 1 (default scale 1, invisible to the oracle): scale-applied-once
        {"attention": Expect("accuracy", shrink_bound=_positions(1))},
        triton=(Edit("        s = s * scale\n", "        s = s * scale * scale\n"),),
        pallas=(Edit("        s = s * scale\n", "        s = s * scale * scale\n"),),
    ),
    Mutant(
        "causal_diagonal",
        "causal mask off by one: key j visible only for j < i (aligned) instead of j <= i, so "
        "every query loses its own position",
        # causal, one query, one key: the query loses its own position
        {"attention": Expect("accuracy", shrink_bound=_positions(1))},
        triton=(
            Edit(
                "valid = valid & (cols[None, :] <= pos[:, None])\n",
                "valid = valid & (cols[None, :] < pos[:, None])\n",
            ),
        ),
        pallas=(
            Edit(
                "(~causal | (cols[None, :] <= pos[:, None]))",
                "(~causal | (cols[None, :] < pos[:, None]))",
            ),
        ),
    ),
    Mutant(
        "causal_loop_bound",
        "causal key loop bounded by start_q + 1 key blocks (correct only when block_q == "
        "block_k): with block_q > block_k the keys near the diagonal of a q block's last rows "
        "are never visited",
        # block_q 32 > block_k 16, causal, q [1,1,17,1] over one key: row 16 sits at position 0,
        # the loop bound stops at key 0 (gpu: block_q 128 > block_k 64, q [1,1,65,64]): block_k + 1
        # rows
        {"attention": Expect("accuracy", shrink_bound=_positions(1, per_key_tile=1))},
        triton=(
            Edit(
                "hi = tl.minimum(hi, (pid_q + 1) * BLOCK_Q + diag)\n",
                "hi = tl.minimum(hi, (pid_q + 1) * BLOCK_K + diag)\n",
            ),
        ),
        pallas=(
            Edit(
                "jnp.minimum(hi, (pid_q + 1) * block_q + diag), hi)",
                "jnp.minimum(hi, (pid_q + 1) * block_k + diag), hi)",
            ),
        ),
    ),
    Mutant(
        "no_rescale",
        "online softmax that forgets to rescale the accumulator when the row max grows: earlier "
        "tiles keep their old weights exp(s - m_old)",
        # one query over two key tiles of 16 whose max grows in the second: k [1,1,n,1] with
        # 17 <= n <= 31 (17 is the least that can fail; the shrinker lands within the two tiles)
        {"attention": Expect("accuracy", shrink_bound=_positions(0, per_key_tile=2))},
        triton=(Edit("        acc = acc * alpha[:, None]\n", ""),),
        pallas=(Edit("        acc = acc * alpha[:, None]\n", ""),),
    ),
    Mutant(
        "masked_row_nan",
        "no guard for a row without a visible key: its sum is 0 and acc / l = 0 / 0 = NaN",
        # two queries over one key, causal (row 0 sees no key), or one query over one key with
        # key_lengths [0]. (Key lengths are drawn as a list that sets the batch, so a padded batch
        # shrinks to its one element without keys; when the batch was drawn first and each length
        # after it, the shrinker kept two batch elements on the CPU and four on an H100.)
        {"attention": Expect("nan", shrink_bound=_positions(2))},
        triton=(Edit("o = acc / l_safe[:, None]", "o = acc / l_i[:, None]"),),
        pallas=(Edit("o = acc / l_safe[:, None]", "o = acc / l_i[:, None]"),),
    ),
    Mutant(
        "partial_tile_unmasked",
        "the last partial key tile not masked: lanes past the key count (loaded as 0) count as "
        "keys with logit 0 and value 0, diluting every row of a sequence whose length is not a "
        "multiple of block_k",
        # q, k [1,1,1,1], no mask: the 15 padding lanes count as keys with logit 0
        {"attention": Expect("accuracy", shrink_bound=_positions(1))},
        triton=(
            Edit(
                "valid = col_ok[None, :] & (rows[:, None] >= 0)",
                "valid = (cols[None, :] >= 0) & (rows[:, None] >= 0)",
            ),
        ),
        pallas=(
            Edit(
                "valid = col_ok[None, :] & (rows[:, None] >= 0)",
                "valid = (cols[None, :] >= 0) & (rows[:, None] >= 0)",
            ),
        ),
    ),
    Mutant(
        "p_bf16",
        "the probabilities rounded to bf16 before P . V whatever the input dtype (FlashAttention "
        "rounds P to the input dtype: legal for bf16 inputs, a precision loss for fp32 and fp16)",
        # a precision loss (fp32, one head) that needs two keys: with one, p = exp(0) = 1 is exact
        # in any dtype
        {"attention": Expect("accuracy", shrink_bound=_positions(2))},
        triton=(
            Edit(
                'acc += tl.dot(p, v, input_precision="ieee")',
                'acc += tl.dot(p.to(tl.bfloat16).to(tl.float32), v, input_precision="ieee")',
            ),
        ),
        pallas=(
            Edit(
                "acc = acc + jnp.dot(p, v,",
                "acc = acc + jnp.dot(p.astype(jnp.bfloat16).astype(jnp.float32), v,",
            ),
        ),
    ),
    Mutant(
        "l_bf16",
        "the running row sum kept in bf16 between key tiles (rounded once per tile): up to 2^-8 "
        "per tile on every output, more with more tiles",
        # two keys: with one, l = 1 is exact in any dtype
        {"attention": Expect("accuracy", shrink_bound=_positions(2))},
        triton=(
            Edit(
                "l_i = l_i * alpha + tl.sum(p, 1)",
                "l_i = (l_i * alpha + tl.sum(p, 1)).to(tl.bfloat16).to(tl.float32)",
            ),
        ),
        pallas=(
            Edit(
                "l_i = l_i * alpha + p.sum(axis=1)",
                "l_i = (l_i * alpha + p.sum(axis=1)).astype(jnp.bfloat16).astype(jnp.float32)",
            ),
        ),
    ),
    Mutant(
        "acc_bf16",
        "the output accumulator kept in bf16 between key tiles (rounded once per tile)",
        # one key: o = v (fp32 values inexact in bf16)
        {"attention": Expect("accuracy", shrink_bound=_positions(1))},
        triton=(
            Edit(
                '        acc += tl.dot(p, v, input_precision="ieee")\n',
                '        acc += tl.dot(p, v, input_precision="ieee")\n'
                "        acc = acc.to(tl.bfloat16).to(tl.float32)\n",
            ),
        ),
        pallas=(
            Edit(
                "        acc = acc + jnp.dot(p, v, precision=_HIGHEST, preferred_element_type=jnp.float32)\n",
                "        acc = acc + jnp.dot(p, v, precision=_HIGHEST, preferred_element_type=jnp.float32)\n"
                "        acc = acc.astype(jnp.bfloat16).astype(jnp.float32)\n",
            ),
        ),
    ),
    Mutant(
        "lse_fp16",
        "the log-sum-exp stored through fp16 (a half-precision LSE buffer): 2^-11 of |lse|",
        # one key: lse = scale q . k (inexact in fp16)
        {"attention": Expect("accuracy", shrink_bound=_positions(1))},
        triton=(
            Edit(
                "tl.store(lse_base + rows * stride_lt, lse, mask=row_ok)",
                "tl.store(lse_base + rows * stride_lt, lse.to(tl.float16).to(tl.float32), mask=row_ok)",
            ),
        ),
        pallas=(
            Edit(
                "    lse_ref[...] = lse\n",
                "    lse_ref[...] = lse.astype(jnp.float16).astype(jnp.float32)\n",
            ),
        ),
    ),
    Mutant(
        "qk_tf32",
        "q . k on TF32 operands (the 13 low mantissa bits of fp32 q and k dropped, as tensor "
        "cores do with TF32 left on): 2^-10 relative per product in fp32",
        # one key: lse = scale q . k, with q, k truncated to TF32
        {"attention": Expect("accuracy", shrink_bound=_positions(1))},
        triton=(
            Edit(
                's = tl.dot(q, tl.trans(k), input_precision="ieee")',
                "s = tl.dot((q.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True),\n"
                "                   tl.trans((k.to(tl.int32, bitcast=True) & -8192)"
                ".to(tl.float32, bitcast=True)),\n"
                '                   input_precision="ieee")',
            ),
        ),
        pallas=(
            Edit(
                "s = jnp.dot(q, k.T, precision=_HIGHEST",
                "tf32 = lambda a: jax.lax.bitcast_convert_type(\n"
                "            jax.lax.bitcast_convert_type(a, jnp.int32) & -8192, jnp.float32)\n"
                "        s = jnp.dot(tf32(q), tf32(k).T, precision=_HIGHEST",
            ),
        ),
    ),
)

# The decode kernels' mutants.
MUTANTS += rewrites_of(
    "kernels.attention.{impl}_decode",
    Mutant(
        "part_bf16",
        "split-KV partial outputs stored in bf16 before the merge (a half-precision scratch "
        "buffer in an fp32 kernel)",
        # one split over a cache of one key, o = v rounded to bf16
        {"attention_decode": Expect("accuracy", shrink_bound=_positions(1))},
        triton=(
            Edit(
                "tl.store(o_part_ptr + part[:, None] + dims[None, :], o, mask=g_ok[:, None])",
                "tl.store(o_part_ptr + part[:, None] + dims[None, :],\n"
                "             o.to(tl.bfloat16).to(tl.float32), mask=g_ok[:, None])",
            ),
        ),
        pallas=(
            Edit(
                "    o_ref[...] = acc / l_safe[:, None]\n",
                "    o_ref[...] = (acc / l_safe[:, None]).astype(jnp.bfloat16).astype(jnp.float32)\n",
            ),
        ),
    ),
)
