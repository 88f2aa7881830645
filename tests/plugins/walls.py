"""Kernels registered through the public plugin API, each planted with what a real library does
where the first round of the API had no way to say it (issue 27's walls): the plugin API's tests
fuzz them on the CPU (``tests/fuzz/test_plugin_walls.py``).

Softmax (torch; Triton kernels launched by the plugin's own code, run in Triton's interpreter):
a kernel that declines rows of an odd length (``fuzz.Unsupported``), one that stores one element
past the end of the output it allocates, one that leaves a column of it unwritten, and outputs
that break the family's contract (float64, NumPy, a tuple too long). Attention (plain torch):
lengths a multiple of the tile (raising otherwise, as JAX's ``mha`` does), key padding only
where every query sees keys, fp32 dots on TF32 (or bf16) operands, and a masked key's
probability 0 (or 2^-100) times its value. Pallas: a row softmax whose grid has one program past
the rows. Jagged softmax: a kernel that records the tensors it is given.
"""

from __future__ import annotations

import itertools
import math

import torch
import triton
import triton.language as tl

import fuzz

# Softmax -------------------------------------------------------------------------------------------


def softmax(x, *, scale):
    return torch.softmax(x.float() * scale, dim=-1).to(x.dtype)


def declines_odd_rows(x, *, scale):
    if x.shape[-1] % 2:
        raise fuzz.Unsupported("rows of an odd length")
    return softmax(x, scale=scale)


NAN_ROWS = fuzz.Conventions(empty_rows="nan")  # torch.softmax of a row of -inf, as liger's
SOFTMAX = dict(
    family="softmax", capabilities=fuzz.Capabilities(features={"scale"}), conventions=NAN_ROWS
)
fuzz.fuzz_kernel("walls_softmax_declines", kernel=declines_odd_rows, **SOFTMAX)


def raises_odd_rows(x, *, scale):
    """What a library's documented refusal is without ``fuzz.Unsupported``: a crash."""
    if x.shape[-1] % 2:
        raise RuntimeError("rows of an odd length are not supported")
    return softmax(x, scale=scale)


fuzz.fuzz_kernel("walls_softmax_raises", kernel=raises_odd_rows, **SOFTMAX)


@triton.jit
def _row_softmax(x_ptr, y_ptr, n_cols, scale, OVERRUN: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    s = x.to(tl.float32) * scale
    e = tl.exp(s - tl.max(s, axis=0))
    y = e / tl.sum(e, axis=0)
    # planted: OVERRUN stores one element past the row (the next row's first, overwritten by the
    # next program; past the last row, outside the output)
    tl.store(y_ptr + row * n_cols + cols, y, mask=cols < n_cols + OVERRUN)


def triton_softmax(x, *, scale, overrun=0):
    y = torch.empty_like(x, dtype=torch.float32)
    n = x.shape[-1]
    rows = x.numel() // max(n, 1)
    if rows and n:
        block = triton.next_power_of_2(n + overrun)
        _row_softmax[(rows,)](x.contiguous(), y, n, scale, OVERRUN=overrun, BLOCK=block)
    return y.to(x.dtype)


F32 = fuzz.Capabilities(dtypes=("float32",), features={"scale"})
TRITON = dict(family="softmax", capabilities=F32, conventions=NAN_ROWS)
fuzz.fuzz_kernel("walls_softmax_triton", kernel=triton_softmax, **TRITON)


def store_past_end(x, *, scale):
    return triton_softmax(x, scale=scale, overrun=1)


fuzz.fuzz_kernel("walls_softmax_store_past_end", kernel=store_past_end, **TRITON)


def unwritten_column(x, *, scale):
    y = torch.empty_like(x)
    y[..., :-1] = softmax(x, scale=scale)[..., :-1]  # planted: the last column never written
    return y


fuzz.fuzz_kernel("walls_softmax_unwritten", kernel=unwritten_column, **SOFTMAX)


def float64_output(x, *, scale):
    return torch.softmax(x.double() * scale, dim=-1)


def numpy_output(x, *, scale):
    return softmax(x, scale=scale).numpy()


def long_tuple(x, *, scale):
    y = softmax(x, scale=scale)
    return y, y


for name, kernel in (("f64", float64_output), ("numpy", numpy_output), ("tuple", long_tuple)):
    fuzz.fuzz_kernel(f"walls_softmax_{name}", kernel=kernel, **SOFTMAX)


# Attention (plain torch, fp32 math, the family's [B, H, T, D]) -------------------------------------


def _attention(q, k, v, scale, *, keep=None, dots=None, masked_weight=0.0):
    """o and lse of attention over the keys ``keep`` ([B, Tk] booleans, None: all), the dot
    operands passed through ``dots`` (None: as they are), a masked key's weight
    ``masked_weight`` times the largest visible one's."""
    dots = dots or (lambda t: t)
    q, k, v = (t.float() for t in (q, k, v))
    s = dots(q) @ dots(k).transpose(-1, -2) * scale
    if keep is not None:
        s = s.masked_fill(~keep[:, None, None, :], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.softmax(s, dim=-1)
    if keep is not None:  # a row whose every key is masked: o = 0 (lse = -inf)
        p = p.nan_to_num(nan=0.0)
    if keep is not None and masked_weight:
        p = p + masked_weight * (~keep)[:, None, None, :]
    return dots(p) @ dots(v), lse


def whole_tiles(q, k, v, *, scale, block_q, block_k):
    """Lengths must be multiples of the tiles, or shorter than one (JAX mha's rule)."""
    for name, n, b in (("q", q.shape[2], block_q), ("k", k.shape[2], block_k)):
        if n % b and n > b:
            raise ValueError(f"{name} length {n} must be a multiple of {b}")
    o, lse = _attention(q, k, v, scale)
    return o.to(q.dtype), lse


TILES = {"block_q": (16, 32), "block_k": (16, 32)}
RULES = {"q": fuzz.Lengths("block_q", shorter=True), "k": fuzz.Lengths("block_k", shorter=True)}
fuzz.fuzz_kernel(
    "walls_attention_tiles",
    family="attention",
    kernel=whole_tiles,
    capabilities=fuzz.Capabilities(features={"scale"}, tiles=TILES, lengths=RULES),
)


def tq_within_keys(case):
    return case.inputs["q"].shape[2] <= case.inputs["key_lengths"].min()


def padded_keys(q, k, v, *, scale, key_lengths):
    """Key padding only where every query sees keys: each key length at least Tq."""
    if key_lengths is not None and int(key_lengths.min()) < q.shape[2]:
        raise ValueError("a key length below the query count")
    o, lse = _attention(q, k, v, scale, keep=_keep(k, key_lengths))
    return o.to(q.dtype), lse


fuzz.fuzz_kernel(
    "walls_attention_padding",
    family="attention",
    kernel=padded_keys,
    capabilities=fuzz.Capabilities(
        features={"key_padding"},
        constraints=[fuzz.Constraint(tq_within_keys, "Tq above a key length", "key_padding")],
    ),
    conventions=fuzz.Conventions(masked_inputs="finite"),
)


def tf32(t):
    """fp32 operands as TF32 tensor cores take them: the 13 low mantissa bits dropped."""
    return (t.view(torch.int32) & ~0x1FFF).view(torch.float32)


def bf16(t):
    """fp32 operands cut to bfloat16's 7 mantissa bits: more precision lost than TF32."""
    return (t.view(torch.int32) & ~0xFFFF).view(torch.float32)


def dots_in(convert):
    def kernel(q, k, v, *, scale):
        return _attention(q, k, v, scale, dots=convert)

    kernel.__name__ = f"attention_{convert.__name__}_dots"
    return kernel


FP32 = fuzz.Capabilities(dtypes=("float32",), features={"scale"})
for name, convert, dots in (
    ("walls_attention_tf32", tf32, "tf32"),
    ("walls_attention_tf32_undeclared", tf32, "ieee"),
    ("walls_attention_bf16_dots", bf16, "tf32"),
):
    fuzz.fuzz_kernel(
        name,
        family="attention",
        kernel=dots_in(convert),
        capabilities=FP32,
        conventions=fuzz.Conventions(fp32_dots=dots),
    )


def _keep(k, key_lengths):
    if key_lengths is None:
        return None
    return torch.arange(k.shape[2])[None, :] < key_lengths[:, None].long()


def leaks_finite(q, k, v, *, scale, key_lengths):
    """Gives a masked key a weight of 2^-100 (not 0): finite masked values still move o."""
    o, lse = _attention(q, k, v, scale, keep=_keep(k, key_lengths), masked_weight=2.0**-100)
    return o.to(q.dtype), lse


def zero_times_masked(q, k, v, *, scale, key_lengths):
    """A masked key's probability 0 times its value (NaN there leaks; finite values do not)."""
    o, lse = _attention(q, k, v, scale, keep=_keep(k, key_lengths))
    return o.to(q.dtype), lse


PADDED = fuzz.Capabilities(dtypes=("float32",), features={"key_padding"})
for name, kernel in (("leaks_finite", leaks_finite), ("zero_times_masked", zero_times_masked)):
    fuzz.fuzz_kernel(
        f"walls_attention_{name}",
        family="attention",
        kernel=kernel,
        capabilities=PADDED,
        conventions=fuzz.Conventions(masked_inputs="finite"),
    )


def dense_top_left(q, k, v, *, scale, causal):
    """Attention with causal masking aligned top-left (query i sees keys up to i)."""
    keep = None
    if causal:
        keep = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril()
    q, k, v = (t.float() for t in (q, k, v))
    s = q @ k.transpose(-1, -2) * scale
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    return (s.softmax(-1) @ v).to(q.dtype), s.logsumexp(-1)


def decode(q, k, v, *, scale, cache_len):
    o, lse = _attention(q, k, v, scale, keep=_keep(k, cache_len))
    return o.to(q.dtype), lse


F32_ATTENTION = dict(dtypes=("float32",))
DENSE = fuzz.fuzz_kernel(
    "walls_dense_top_left",
    family="attention",
    kernel=dense_top_left,
    capabilities=fuzz.Capabilities(features={"causal"}, **F32_ATTENTION),
    conventions=fuzz.Conventions(causal="top-left"),
)
fuzz.fuzz_kernel(
    "walls_decode",
    family="attention_decode",
    kernel=decode,
    capabilities=fuzz.Capabilities(features=(), **F32_ATTENTION),
    siblings={"attention": DENSE},
)


# Simple GLA (plain torch, the token recurrence, fp32) ----------------------------------------------


def gla_dots_in(convert):
    """The recurrence ``h_t = exp(gamma) h_{t-1} + k_t^T v_t``, ``o_t = scale q_t h_t`` with the
    operands of its products (k and v, q and h) passed through ``convert``."""

    def kernel(q, k, v, *, g_gamma, scale, output_final_state):
        b, t, heads, kd = q.shape
        h = torch.zeros(b, heads, kd, v.shape[-1])
        o = torch.empty_like(v)
        decay = torch.exp(g_gamma)[None, :, None, None]
        for i in range(t):
            kv = convert(k[:, i, :, :, None]) * convert(v[:, i, :, None, :])
            h = decay * h + kv
            o[:, i] = scale * (convert(q[:, i, :, None, :]) @ convert(h))[:, :, 0]
        return o, h if output_final_state else None

    kernel.__name__ = f"gla_{convert.__name__}_dots"
    return kernel


GLA = fuzz.Capabilities(dtypes=("float32",), features={"g_gamma", "scale", "final_state"})
for name, convert, dots in (
    ("walls_gla_tf32", tf32, "tf32"),
    ("walls_gla_tf32_undeclared", tf32, "ieee"),
    ("walls_gla_bf16_dots", bf16, "tf32"),
):
    fuzz.fuzz_kernel(
        name,
        family="simple_gla_fwd",
        kernel=gla_dots_in(convert),
        capabilities=GLA,
        conventions=fuzz.Conventions(fp32_dots=dots),
    )


# Pallas ---------------------------------------------------------------------------------------------


def pallas_softmax(x, *, scale, interpret, extra_rows=0):
    """A row softmax, one program per row; ``extra_rows`` more programs than rows (planted: the
    last program's block lies past the output's end)."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    rows, cols = x.shape

    def kernel(x_ref, y_ref):
        s = x_ref[...].astype(jnp.float32) * scale
        e = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
        y_ref[...] = (e / jnp.sum(e, axis=-1, keepdims=True)).astype(y_ref.dtype)

    spec = pl.BlockSpec((1, cols), lambda i: (i, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(rows + extra_rows,),
        in_specs=[spec],
        out_specs=spec,
        interpret=interpret,
    )(x)


def pallas_block_past_end(x, *, scale, interpret):
    return pallas_softmax(x, scale=scale, interpret=interpret, extra_rows=1)


for name, kernel in (("", pallas_softmax), ("_block_past_end", pallas_block_past_end)):
    fuzz.fuzz_kernel(
        f"walls_pallas_softmax{name}",
        family="softmax",
        kernel=kernel,
        language="pallas",
        capabilities=F32,
        conventions=NAN_ROWS,
    )


# Jagged softmax -------------------------------------------------------------------------------------

SEEN: list[tuple[torch.Tensor, torch.Tensor]] = []  # (values, offsets) as the kernel got them


def jagged_softmax(values, *, offsets):
    SEEN.append((values, offsets))
    y = torch.zeros_like(values, dtype=torch.float32)
    o = [int(i) for i in offsets]
    for a, b in itertools.pairwise(o):
        if b > a:
            y[a:b] = torch.softmax(values[a:b].float(), dim=0)
    return y.to(values.dtype)


fuzz.fuzz_kernel("walls_jagged_softmax", family="jagged_softmax", kernel=jagged_softmax)


def _sanity() -> None:
    assert math.isclose(float(tf32(torch.tensor([1.0 + 2.0**-12]))[0]), 1.0)


_sanity()
