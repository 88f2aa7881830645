"""Attention mutants: the real dense/varlen kernels with one known bug planted.

Each mutant exists for both kernel languages, as the same bug written the way that language's
kernel would have it, and names the failure class the harness must report for it. The edits are
exact text replacements of ``kernels/attention/triton.py`` and ``kernels/attention/pallas.py``
(``kernels._mutate``): a refactor of the real kernels that breaks an edit fails loudly.
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

    def module(self, impl: str) -> types.ModuleType:
        if impl == "triton":
            from kernels.attention import triton as real
        elif impl == "pallas":
            from kernels.attention import pallas as real  # type: ignore[no-redef]
        else:
            raise ValueError(f"impl={impl!r} must be 'triton' or 'pallas'")
        return mutate(real, self.name, getattr(self, impl))


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
)
