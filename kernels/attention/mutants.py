"""Attention mutants: the real kernels with one known bug planted.

Each mutant exists for both kernel languages, as the same bug written the way that language's
kernel would have it, and names the failure class the harness must report for it. The edits are
exact text replacements of ``kernels/attention/triton.py`` and ``kernels/attention/pallas.py``
(``DECODE_MUTANTS``: ``triton_decode.py`` and ``pallas_decode.py``; ``kernels._mutate``): a
refactor of the real kernels that breaks an edit fails loudly. The precision losses (bug class
15: an fp32 kernel keeping an intermediate in half precision) break nothing but accuracy; the
per-element error bound must see them at the ci profile's sizes.
"""

from __future__ import annotations

import types
from dataclasses import dataclass

from kernels._mutate import Edit, mutate


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    expected_class: str
    triton: tuple[Edit, ...]
    pallas: tuple[Edit, ...]
    decode: bool = False  # a mutant of the decode kernels

    def module(self, impl: str) -> types.ModuleType:
        from kernels.attention import pallas, pallas_decode, triton, triton_decode

        if impl not in ("triton", "pallas"):
            raise ValueError(f"impl={impl!r} must be 'triton' or 'pallas'")
        real = {
            ("triton", False): triton,
            ("pallas", False): pallas,
            ("triton", True): triton_decode,
            ("pallas", True): pallas_decode,
        }[(impl, self.decode)]
        name = f"decode_{self.name}" if self.decode else self.name
        return mutate(real, name, getattr(self, impl))


_T_SELECT = '        s = tl.where(valid, s, float("-inf"))\n'
_P_SELECT = "        s = jnp.where(valid, s, -jnp.inf)\n"

MUTANTS = (
    Mutant(
        "mask_times_exp",
        "masked keys zeroed by multiplying exp(s - m) by the mask instead of selecting -inf "
        "before exp: a masked logit more than 88.7 above the row max overflows, and 0 * Inf = NaN",
        "nan",
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
        "masking",
        triton=(Edit(_T_SELECT, "        s = tl.where(valid, s, -1e9)\n"),),
        pallas=(Edit(_P_SELECT, "        s = jnp.where(valid, s, -1e9)\n"),),
    ),
    Mutant(
        "mask_before_scale",
        "the mask applied to the raw q.k with a finite sentinel, before the scale (and the soft "
        "cap): masked logits become -1e9 * scale, or -cap under a soft cap, instead of -inf",
        "masking",
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
        "accuracy",
        triton=(Edit("        s = s * scale\n", "        s = s * scale * scale\n"),),
        pallas=(Edit("        s = s * scale\n", "        s = s * scale * scale\n"),),
    ),
    Mutant(
        "causal_diagonal",
        "causal mask off by one: key j visible only for j < i (aligned) instead of j <= i, so "
        "every query loses its own position",
        "accuracy",
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
        "accuracy",
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
        "accuracy",
        triton=(Edit("        acc = acc * alpha[:, None]\n", ""),),
        pallas=(Edit("        acc = acc * alpha[:, None]\n", ""),),
    ),
    Mutant(
        "masked_row_nan",
        "no guard for a row without a visible key: its sum is 0 and acc / l = 0 / 0 = NaN",
        "nan",
        triton=(Edit("o = acc / l_safe[:, None]", "o = acc / l_i[:, None]"),),
        pallas=(Edit("o = acc / l_safe[:, None]", "o = acc / l_i[:, None]"),),
    ),
    Mutant(
        "partial_tile_unmasked",
        "the last partial key tile not masked: lanes past the key count (loaded as 0) count as "
        "keys with logit 0 and value 0, diluting every row of a sequence whose length is not a "
        "multiple of block_k",
        "accuracy",
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
        "accuracy",
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
        "accuracy",
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
        "accuracy",
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
        "accuracy",
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
        "accuracy",
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

DECODE_MUTANTS = (
    Mutant(
        "part_bf16",
        "split-KV partial outputs stored in bf16 before the merge (a half-precision scratch "
        "buffer in an fp32 kernel)",
        "accuracy",
        decode=True,
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
