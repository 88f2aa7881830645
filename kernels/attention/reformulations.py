"""Correct reformulations of the attention kernels: the same function computed another way.

Each is a text edit of a real kernel (``kernels._mutate``, kind ``'reformulation'``) in both
languages and is registered as a real target (``attention_<name>``, ``attention_decode_<name>``):
the harness must pass it on every example, the evidence that the error bound
(``oracles.attention.attention_error_bound``) admits any backward-stable fp32 implementation, not
only the one it was written next to.

    exp2        (dense) FlashAttention 2/3's domain: log2 e folded into the scale, the soft cap and
                the ALiBi slopes, exp2 for exp, the log-sum-exp converted back from base 2
    two_pass    (dense) the row max and sum first (online, without the accumulator), then P . V
                against the final max: no rescaling of the accumulator
    reverse_kv  (dense) the key tiles walked from the last to the first: another order of every
                sum and other rescales
    lse_merge   (decode) the split-KV merge weighs each split by exp(lse_split - lse) through the
                merged log-sum-exp instead of dividing by the sum of the weights, the exponent
                formed as (lse_split - max) - log(sum). Formed as lse_split - lse from the two
                log-sum-exps, it is not backward stable: at logits near -1e9 (a finite mask
                level) one fp32 ulp of either is 64, the weights no longer sum to 1, and a
                campaign found outputs of 2 and inf where every value is 1 (pallas-interpret,
                fp16, two splits of 16 and 1 keys)
"""

from __future__ import annotations

import inspect

from kernels._mutate import Edit, Reformulation, rewrites_of

LOG2_E = "1.4426950408889634"
LN_2 = "0.6931471805599453"


def _replaced(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise ValueError(f"reformulation edit: {old!r} occurs {text.count(old)} times")
    return text.replace(old, new)


def _triton_two_pass() -> Edit:
    """The key loop of ``kernels.attention.triton`` split into a statistics pass and a ``P . V``
    pass, built from the loop's own text (a refactor of the kernel keeps the two in step)."""
    from kernels.attention import triton

    src = inspect.getsource(triton)
    head = "    for start in range(lo, hi, BLOCK_K):\n"
    tail = "        m_i = m_new\n"
    begin = src.index(head)
    loop = src[begin : src.index(tail, begin) + len(tail)]
    online = loop[loop.index("        m_new = tl.maximum") :]
    stats = _replaced(loop, "        acc = acc * alpha[:, None]\n", "")
    stats = _replaced(stats, '        acc += tl.dot(p, v, input_precision="ieee")\n', "")
    second = _replaced(
        loop,
        online,
        "        p = tl.exp(s - m_fin[:, None])\n"
        '        acc += tl.dot(p, v, input_precision="ieee")\n',
    )
    final_max = '    m_fin = tl.where(m_i == float("-inf"), 0.0, m_i)\n'
    return Edit(loop, stats + final_max + second)


_P_ONLINE = """        m_new = jnp.maximum(m_i, s.max(axis=1))
        # A row with no visible key so far has max -inf: shift it by 0 instead, so that
        # exp(-inf - -inf) = NaN never happens.
        m_shift = jnp.where(m_new == -jnp.inf, 0.0, m_new)
        alpha = jnp.exp(m_i - m_shift)
        p = jnp.exp(s - m_shift[:, None])
        l_i = l_i * alpha + p.sum(axis=1)
        acc = acc * alpha[:, None]
        acc = acc + jnp.dot(p, v, precision=_HIGHEST, preferred_element_type=jnp.float32)
        return m_new, l_i, acc
"""

REFORMULATIONS = rewrites_of(
    "kernels.attention.{impl}",
    Reformulation(
        "exp2",
        "exp2-domain attention (FlashAttention 2/3): log2 e folded into the scale, soft cap and "
        "ALiBi slopes, exp2 for exp, the LSE converted back from base 2",
        triton=(
            Edit("        s = s * scale\n", f"        s = s * (scale * {LOG2_E})\n"),
            Edit(
                "s = softcap * _tanh(s / softcap)",
                f"s = (softcap * {LOG2_E}) * _tanh(s / (softcap * {LOG2_E}))",
            ),
            Edit("s = s - slope * tl.abs(", f"s = s - (slope * {LOG2_E}) * tl.abs("),
            Edit("alpha = tl.exp(m_i - m_shift)", "alpha = tl.exp2(m_i - m_shift)"),
            Edit("p = tl.exp(s - m_shift[:, None])", "p = tl.exp2(s - m_shift[:, None])"),
            Edit(
                "m_i + tl.log(l_safe), float(",
                f"(m_i + tl.log2(l_safe)) * {LN_2}, float(",
            ),
        ),
        pallas=(
            Edit("        s = s * scale\n", f"        s = s * (scale * {LOG2_E})\n"),
            Edit(
                "softcap * _tanh(s / softcap), s)",
                f"(softcap * {LOG2_E}) * _tanh(s / (softcap * {LOG2_E})), s)",
            ),
            Edit("s = s - slope * jnp.abs(", f"s = s - (slope * {LOG2_E}) * jnp.abs("),
            Edit("alpha = jnp.exp(m_i - m_shift)", "alpha = jnp.exp2(m_i - m_shift)"),
            Edit("p = jnp.exp(s - m_shift[:, None])", "p = jnp.exp2(s - m_shift[:, None])"),
            Edit(
                "m_i + jnp.log(l_safe), -jnp.inf)", f"(m_i + jnp.log2(l_safe)) * {LN_2}, -jnp.inf)"
            ),
        ),
    ),
    Reformulation(
        "two_pass",
        "two passes over the keys: the row max and sum (online, no accumulator), then P . V "
        "against the final max, without rescaling",
        triton=(_triton_two_pass(),),
        pallas=(
            Edit(
                "    def body(j, carry):\n        m_i, l_i, acc = carry\n",
                "    def body(j, carry, m_fin=None):\n        m_i, l_i, acc = carry\n",
            ),
            Edit(
                _P_ONLINE,
                """        if m_fin is not None:  # the second pass: the final max, no rescaling
            p = jnp.exp(s - m_fin[:, None])
            acc = acc + jnp.dot(p, v, precision=_HIGHEST, preferred_element_type=jnp.float32)
            return m_i, l_i, acc
        m_new = jnp.maximum(m_i, s.max(axis=1))
        m_shift = jnp.where(m_new == -jnp.inf, 0.0, m_new)
        alpha = jnp.exp(m_i - m_shift)
        p = jnp.exp(s - m_shift[:, None])
        l_i = l_i * alpha + p.sum(axis=1)
        return m_new, l_i, acc
""",
            ),
            Edit(
                "    m_i, l_i, acc = jax.lax.fori_loop(first, last, body, init)\n",
                "    m_i, l_i, acc = jax.lax.fori_loop(first, last, body, init)\n"
                "    m_fin = jnp.where(m_i == -jnp.inf, 0.0, m_i)\n"
                "    m_i, l_i, acc = jax.lax.fori_loop(\n"
                "        first, last, functools.partial(body, m_fin=m_fin), (m_i, l_i, acc)\n"
                "    )\n",
            ),
        ),
    ),
    Reformulation(
        "reverse_kv",
        "the key tiles walked from the last to the first (other sums, other rescales)",
        triton=(
            Edit(
                "    for start in range(lo, hi, BLOCK_K):\n",
                "    n_tiles = (tl.maximum(hi - lo, 0) + BLOCK_K - 1) // BLOCK_K\n"
                "    for t in range(0, n_tiles):\n"
                "        start = lo + (n_tiles - 1 - t) * BLOCK_K\n",
            ),
        ),
        pallas=(
            Edit(
                "        start = pl.multiple_of(j * block_k, block_k)\n        k = k_ref",
                "        start = pl.multiple_of((first + last - 1 - j) * block_k, block_k)\n"
                "        k = k_ref",
            ),
        ),
    ),
)

# The decode kernels' reformulations.
REFORMULATIONS += rewrites_of(
    "kernels.attention.{impl}_decode",
    Reformulation(
        "lse_merge",
        "split-KV merge through the merged log-sum-exp: each split weighs "
        "exp((lse_split - max) - log(sum)), no division by the sum of the weights",
        triton=(
            Edit(
                """    o = tl.sum(w[:, None] * o_s, 0) / total_safe
    lse = tl.where(total > 0.0, m_shift + tl.log(total_safe), float("-inf"))
""",
                """    lse = tl.where(total > 0.0, m_shift + tl.log(total_safe), float("-inf"))
    w_n = tl.exp((lse_s - m_shift) - tl.log(total_safe))
    o = tl.sum(w_n[:, None] * o_s, 0)
""",
            ),
        ),
        pallas=(
            Edit(
                """    o_ref[...] = (acc / total_safe[:, None]).astype(o_ref.dtype)
    lse_ref[...] = jnp.where(total > 0.0, m_shift + jnp.log(total_safe), -jnp.inf)
""",
                """    log_total = jnp.log(total_safe)
    acc = jnp.zeros(o_ref.shape, jnp.float32)
    for s in range(static.num_splits):
        acc = acc + jnp.exp((lse_s[s] - m_shift) - log_total)[:, None] * o_part_ref[s, :, :]
    o_ref[...] = acc.astype(o_ref.dtype)
    lse_ref[...] = jnp.where(total > 0.0, m_shift + log_total, -jnp.inf)
""",
            ),
        ),
    ),
)
