"""Correct reformulations of the softmax kernels: the same function computed another way.

Each is a text edit of the real kernel (``kernels._mutate``, kind ``'reformulation'``) in both
languages and is registered as a real target (``softmax_<name>``): the harness must pass it on
every example, which is the evidence that its error bound (``oracles.softmax``) is loose enough
for any backward-stable fp32 implementation, not only for the one it was written next to.

    exp2        the FlashAttention way: log2 e folded into the scale (and the bias), exp2
                instead of exp; every logit is rounded once more, relative to its magnitude
    max_first   three passes instead of an online one: the row max, then the sum of
                exponentials against the final max (no rescaling), then the outputs
"""

from __future__ import annotations

from kernels._mutate import Edit, Reformulation, rewrites_of

LOG2_E = "1.4426950408889634"

_T_STATS = """        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row whose keys are all masked so far has max -inf; shift by 0 instead so that
        # exp(-inf - -inf) never happens.
        m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        l_i = l_i * tl.exp(m_i - m_shift) + tl.sum(tl.exp(s - m_shift[:, None]), 1)
        m_i = m_new
    m_shift = tl.where(m_i == float("-inf"), 0.0, m_i)
"""
_T_LOAD = """        s = _load_logits(
            x_ptr, mask_ptr, bias_ptr, rows, cols, n_rows, n_cols, scale,
            stride_xm, stride_xn, stride_maskm, stride_maskn, stride_biasm, stride_biasn,
            HAS_MASK, HAS_BIAS,
        )
"""
_P_STATS = """    def stats(j, carry):
        m_i, l_i = carry
        start = pl.multiple_of(j * block_n, block_n)
        s = _logits(x_ref, mask_ref, bias_ref, scale, n_cols, start, block_n)
        m_new = jnp.maximum(m_i, s.max(axis=1))
        # Shift a row that has no valid key yet by 0, never by -inf (exp(-inf - -inf) = NaN).
        m_shift = jnp.where(m_new == -jnp.inf, 0.0, m_new)
        l_i = l_i * jnp.exp(m_i - m_shift) + jnp.exp(s - m_shift[:, None]).sum(axis=1)
        return m_new, l_i

    init = (jnp.full((block_m,), -jnp.inf, jnp.float32), jnp.zeros((block_m,), jnp.float32))
    m_i, l_i = jax.lax.fori_loop(0, n_tiles, stats, init)
    m_shift = jnp.where(m_i == -jnp.inf, 0.0, m_i)
"""

REFORMULATIONS = rewrites_of(
    "kernels.softmax.{impl}",
    Reformulation(
        "exp2",
        "exp2-domain softmax: log2 e folded into the scale and the bias, exp2 for exp (as "
        "FlashAttention computes it)",
        triton=(
            Edit("    s = x * scale\n", f"    s = x * (scale * {LOG2_E})\n"),
            Edit("        s = s + b\n", f"        s = s + b * {LOG2_E}\n"),
            Edit(
                "l_i = l_i * tl.exp(m_i - m_shift) + tl.sum(tl.exp(s - m_shift[:, None]), 1)",
                "l_i = l_i * tl.exp2(m_i - m_shift) + tl.sum(tl.exp2(s - m_shift[:, None]), 1)",
            ),
            Edit(
                "y = tl.exp(s - m_shift[:, None]) * inv_l[:, None]",
                "y = tl.exp2(s - m_shift[:, None]) * inv_l[:, None]",
            ),
        ),
        pallas=(
            Edit(
                "s = x_ref[:, cols].astype(jnp.float32) * scale\n",
                f"s = x_ref[:, cols].astype(jnp.float32) * (scale * {LOG2_E})\n",
            ),
            Edit("s = s + bias_ref[:, cols]\n", f"s = s + bias_ref[:, cols] * {LOG2_E}\n"),
            Edit(
                "l_i = l_i * jnp.exp(m_i - m_shift) + jnp.exp(s - m_shift[:, None]).sum(axis=1)",
                "l_i = l_i * jnp.exp2(m_i - m_shift) + jnp.exp2(s - m_shift[:, None]).sum(axis=1)",
            ),
            Edit(
                "y = jnp.exp(s - m_shift[:, None]) * inv_l[:, None]",
                "y = jnp.exp2(s - m_shift[:, None]) * inv_l[:, None]",
            ),
        ),
    ),
    Reformulation(
        "max_first",
        "the classic safe softmax in three passes: the row max, the sum of exponentials against "
        "it (no online rescaling), then the outputs",
        triton=(
            Edit(
                _T_STATS,
                "        m_i = tl.maximum(m_i, tl.max(s, 1))\n"
                '    m_shift = tl.where(m_i == float("-inf"), 0.0, m_i)\n'
                "    for start in range(0, n_cols, BLOCK_N):\n"
                "        cols = start + tl.arange(0, BLOCK_N)\n"
                + _T_LOAD.replace("        s = _load", "        s_sum = _load")
                + "        l_i += tl.sum(tl.exp(s_sum - m_shift[:, None]), 1)\n",
            ),
        ),
        pallas=(
            Edit(
                _P_STATS,
                """    def row_max(j, m_i):
        start = pl.multiple_of(j * block_n, block_n)
        s = _logits(x_ref, mask_ref, bias_ref, scale, n_cols, start, block_n)
        return jnp.maximum(m_i, s.max(axis=1))

    m_i = jax.lax.fori_loop(0, n_tiles, row_max, jnp.full((block_m,), -jnp.inf, jnp.float32))
    m_shift = jnp.where(m_i == -jnp.inf, 0.0, m_i)

    def row_sum(j, l_i):
        start = pl.multiple_of(j * block_n, block_n)
        s = _logits(x_ref, mask_ref, bias_ref, scale, n_cols, start, block_n)
        return l_i + jnp.exp(s - m_shift[:, None]).sum(axis=1)

    l_i = jax.lax.fori_loop(0, n_tiles, row_sum, jnp.zeros((block_m,), jnp.float32))
""",
            ),
        ),
    ),
)
