"""Softmax mutants: the real kernels with one bug from the softmax-pipeline checklist planted.

Each mutant exists for both kernel languages, as the same bug written the way that language's
kernel would have it, and names the failure class the harness must report for it, with its shrink
bound: the largest input (elements) its minimal reproducer may have, asserted by
``tests/test_mutants.py``, and the minimal case it shrinks to. The last ones lose precision
without breaking anything (bug class 15): an fp32 kernel that keeps an intermediate in half
precision; the per-element error bound must see them at the ci profile's sizes.
"""

from __future__ import annotations

from kernels._mutate import Edit, Expect, Mutant, rewrites_of

MUTANTS = rewrites_of(
    "kernels.softmax.{impl}",
    Mutant(
        "no_rowmax",
        "exp(s) without subtracting the row max: overflows to Inf above 88.7, then Inf/Inf = NaN",
        # one or two logits above 88.72
        {"softmax": Expect("nan", shrink_bound=2)},
        triton=(
            Edit(
                """        m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        l_i = l_i * tl.exp(m_i - m_shift) + tl.sum(tl.exp(s - m_shift[:, None]), 1)""",
                """        l_i = l_i + tl.sum(tl.exp(s), 1)""",
            ),
            Edit(
                """    m_shift = tl.where(m_i == float("-inf"), 0.0, m_i)
    # l_i""",
                """    m_shift = tl.zeros_like(m_i)
    # l_i""",
            ),
        ),
        pallas=(
            Edit(
                """        m_shift = jnp.where(m_new == -jnp.inf, 0.0, m_new)
        l_i = l_i * jnp.exp(m_i - m_shift) + jnp.exp(s - m_shift[:, None]).sum(axis=1)""",
                """        l_i = l_i + jnp.exp(s).sum(axis=1)""",
            ),
            Edit(
                """    m_shift = jnp.where(m_i == -jnp.inf, 0.0, m_i)
    # l_i""",
                """    m_shift = jnp.zeros_like(m_i)
    # l_i""",
            ),
        ),
    ),
    Mutant(
        "finite_sentinel",
        "masked keys set to -1e9 instead of -inf: a fully masked row becomes uniform, and a masked "
        "key wins over valid logits below -1e9",
        # one fully masked row of one or two keys
        {"softmax": Expect("masking", shrink_bound=2)},
        triton=(
            Edit('s = tl.where(keep != 0, s, float("-inf"))', "s = tl.where(keep != 0, s, -1e9)"),
        ),
        pallas=(
            Edit(
                "return jnp.where(mask_ref[:, cols] != 0, s, -jnp.inf)",
                "return jnp.where(mask_ref[:, cols] != 0, s, -1e9)",
            ),
        ),
    ),
    Mutant(
        "scale_twice",
        "the scale applied twice (once by the caller's convention, once in the kernel)",
        # one row of two keys (one key gives 1.0 at any scale)
        {"softmax": Expect("accuracy", shrink_bound=2)},
        triton=(Edit("    s = x * scale\n", "    s = x * scale * scale\n"),),
        pallas=(
            Edit(
                "s = x_ref[:, cols].astype(jnp.float32) * scale",
                "s = x_ref[:, cols].astype(jnp.float32) * scale * scale",
            ),
        ),
    ),
    Mutant(
        "masked_row_nan",
        "no guard for a row without a valid key: its sum is 0 and 0 * (1/0) gives NaN",
        # one fully masked row; up to 4 since Hypothesis orders an explicit-values list shortlex,
        # which keeps the -inf last, and a shorter array keeps the list's first values: the
        # pallas-interpret run can end at rows [0, 0, 0, -inf] instead of [-inf] (a
        # seed-dependent local minimum).
        {"softmax": Expect("nan", shrink_bound=4)},
        triton=(
            Edit(
                "inv_l = tl.where(l_i > 0.0, 1.0 / tl.where(l_i > 0.0, l_i, 1.0), 0.0)",
                "inv_l = 1.0 / l_i",
            ),
        ),
        pallas=(
            Edit(
                "inv_l = jnp.where(l_i > 0.0, 1.0 / jnp.where(l_i > 0.0, l_i, 1.0), 0.0)",
                "inv_l = 1.0 / l_i",
            ),
        ),
    ),
    Mutant(
        "pad_zero",
        "the row's padding lanes loaded as 0 instead of -inf: with no mask, a partial last tile adds "
        "exp(0 - max) per padding lane to the row sum",
        # one row shorter than its tile, no mask
        {"softmax": Expect("accuracy", shrink_bound=2)},
        triton=(
            Edit(
                """        mask=in_bounds,
        other=float("-inf"),""",
                """        mask=in_bounds,
        other=0.0,""",
            ),
        ),
        pallas=(
            Edit("s = jnp.where(col < n_cols, s, -jnp.inf)", "s = jnp.where(col < n_cols, s, 0.0)"),
        ),
    ),
    Mutant(
        "sum_fp16",
        "the running row sum kept in fp16 between column tiles (rounded once per tile): every "
        "output is off by up to 2^-11 per tile, an error that grows with the row length",
        # a precision loss: one row of two keys (one key gives exp(0) = 1 and a sum of 1, exact
        # in any dtype; a second key makes the sum 1 + exp(s2 - s1) and its exponential inexact)
        {"softmax": Expect("accuracy", shrink_bound=2)},
        triton=(
            Edit(
                "l_i = l_i * tl.exp(m_i - m_shift) + tl.sum(tl.exp(s - m_shift[:, None]), 1)",
                "l_i = (l_i * tl.exp(m_i - m_shift) + tl.sum(tl.exp(s - m_shift[:, None]), 1))"
                ".to(tl.float16).to(tl.float32)",
            ),
        ),
        pallas=(
            Edit(
                "l_i = l_i * jnp.exp(m_i - m_shift) + jnp.exp(s - m_shift[:, None]).sum(axis=1)",
                "l_i = (l_i * jnp.exp(m_i - m_shift) + jnp.exp(s - m_shift[:, None]).sum(axis=1))"
                ".astype(jnp.float16).astype(jnp.float32)",
            ),
        ),
    ),
    Mutant(
        "exp_bf16",
        "the exponentials rounded to bf16 before they are summed and normalized, whatever the "
        "input dtype: fp32 outputs carry bf16's 2^-8 relative error",
        # one row of two keys, as sum_fp16
        {"softmax": Expect("accuracy", shrink_bound=2)},
        triton=(
            Edit(
                "tl.sum(tl.exp(s - m_shift[:, None]), 1)",
                "tl.sum(tl.exp(s - m_shift[:, None]).to(tl.bfloat16).to(tl.float32), 1)",
            ),
            Edit(
                "y = tl.exp(s - m_shift[:, None]) * inv_l[:, None]",
                "y = tl.exp(s - m_shift[:, None]).to(tl.bfloat16).to(tl.float32) * inv_l[:, None]",
            ),
        ),
        pallas=(
            Edit(
                "jnp.exp(s - m_shift[:, None]).sum(axis=1)",
                "jnp.exp(s - m_shift[:, None]).astype(jnp.bfloat16).astype(jnp.float32).sum(axis=1)",
            ),
            Edit(
                "y = jnp.exp(s - m_shift[:, None]) * inv_l[:, None]",
                "y = jnp.exp(s - m_shift[:, None]).astype(jnp.bfloat16).astype(jnp.float32)"
                " * inv_l[:, None]",
            ),
        ),
    ),
)
