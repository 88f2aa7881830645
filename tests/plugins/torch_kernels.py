"""Kernels written in plain torch, registered through the public plugin API the way a user
registers a library's: the plugin API's own tests fuzz them on the CPU.

They carry real libraries' conventions: ``torch.softmax`` of a row with no finite logit is NaN,
``scaled_dot_product_attention`` returns no log-sum-exp and NaN for a query whose keys are all
masked, and takes ``[B, H, T, D]`` while many attention libraries take ``[B, T, H, D]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as tf

import fuzz


def softmax(x, *, mask, bias, scale):
    s = x.float() * scale
    if bias is not None:
        s = s + bias.float()
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1).to(x.dtype)


fuzz.fuzz_kernel(
    "torch_softmax",
    family="softmax",
    kernel=softmax,
    capabilities=fuzz.Capabilities(features={"mask", "bias", "scale"}),
    conventions=fuzz.Conventions(empty_rows="nan"),
    description="torch.softmax with a mask and a bias (NaN rows, as torch gives them)",
)


def no_rowmax_softmax(x, *, scale):
    """A planted bug: exp without subtracting the row max."""
    e = torch.exp(x.float() * scale)
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


fuzz.fuzz_kernel(
    "torch_softmax_no_rowmax",
    family="softmax",
    kernel=no_rowmax_softmax,
    capabilities=fuzz.Capabilities(features={"scale"}),
    description="a softmax with a planted bug: no row max (exp overflows)",
)


def sdpa(q, k, v, *, scale, key_lengths):
    """torch's attention, called from a [B, T, H, D] layout as FlashAttention-style libraries
    are."""
    dtype = q.dtype
    q, k, v = (t.transpose(1, 2).float() for t in (q, k, v))  # -> [B, H, T, D]
    mask = None
    if key_lengths is not None:
        keep = torch.arange(k.shape[2])[None, :] < key_lengths[:, None].long()  # [B, Tk]
        mask = keep[:, None, None, :]
    o = tf.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
    )
    return o.transpose(1, 2).to(dtype)


fuzz.fuzz_kernel(
    "torch_sdpa",
    family="attention",
    kernel=sdpa,
    capabilities=fuzz.Capabilities(dtypes=("float32",), features={"scale", "gqa", "key_padding"}),
    conventions=fuzz.Conventions(lse="none", empty_rows="nan"),
    layout=fuzz.Layout("BTHD"),
    description="torch.nn.functional.scaled_dot_product_attention with key padding, in [B, T, H, D]",
)


def dense_sdpa(q, k, v, *, scale):
    return sdpa(q, k, v, scale=scale, key_lengths=None)


fuzz.fuzz_kernel(
    "torch_sdpa_dense",
    family="attention",
    kernel=dense_sdpa,
    capabilities=fuzz.Capabilities(dtypes=("float32",), features={"scale", "gqa"}),
    conventions=fuzz.Conventions(lse="none"),
    layout=fuzz.Layout("BTHD"),
    description="scaled_dot_product_attention without a mask, in [B, T, H, D]",
)


def causal_sdpa(q, k, v, *, scale, causal):
    """torch's attention with ``is_causal``: top-left aligned (query i sees keys up to i)."""
    dtype = q.dtype
    q, k, v = (t.transpose(1, 2).float() for t in (q, k, v))
    o = tf.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    return o.transpose(1, 2).to(dtype)


for name, align in (("torch_sdpa_causal", "top-left"), ("torch_sdpa_causal_misdeclared", None)):
    fuzz.fuzz_kernel(
        name,
        family="attention",
        kernel=causal_sdpa,
        capabilities=fuzz.Capabilities(dtypes=("float32",), features={"scale", "causal"}),
        conventions=fuzz.Conventions(lse="none", causal=align or "bottom-right"),
        layout=fuzz.Layout("BTHD"),
        disable={
            "masked-poison": "torch's attention multiplies a masked key's probability (0) "
            "by its value: NaN there leaks, as torch_sdpa shows"
        },
        description=f"scaled_dot_product_attention(is_causal=...), declared {align or 'bottom-right'}",
    )
