"""JAX's Pallas GPU attention ops (``jax.experimental.pallas.ops.gpu``): ``attention.mha``
(dense; key padding and packed sequences through ``segment_ids``) and ``decode_attention.gqa``,
compiled (``pallas-gpu``) or in interpret mode (``pallas-interpret``), against the attention
families. ``--plugin fuzz.clients.jax_pallas_ops``.

Findings: see the triage below (filled in from the campaigns).
"""

import jax.numpy as jnp
from jax.experimental.pallas.ops.gpu import attention, decode_attention

import fuzz

SIZES, GPU_DIMS = (16, 32, 64), (16, 32, 64, 128)  # compiled: dots of sides >= 16


def rules(shorter, same=None):
    """mha's lengths: multiples of the tile, or (interpreted) shorter than one: the tile is then
    the length; compiled, every array is a power of two (Triton's lowering)."""
    q, k = fuzz.Lengths("block_q", shorter), fuzz.Lengths("block_k", shorter, same_as=same)
    return {"q": q, "k": k}


def caps(*feats, same=None, **kw):
    gpu = fuzz.Capabilities(head_dims=GPU_DIMS, lengths=rules(False, same))
    tiles = {"block_q": SIZES, "block_k": SIZES}
    feats = {"causal", "scale", *feats}
    return fuzz.Capabilities(
        tiles=tiles, features=feats, lengths=rules(True, same), compiled=gpu, **kw
    )


# segment ids are one [B, Tk] row that queries read too: key padding with every query in the first
# segment (Tq <= each key length), packed sequences with as many keys as queries
def padded(case):
    return case.inputs["q"].shape[2] <= case.inputs["key_lengths"].min()


def mha(q, k, v, *, scale, causal, block_q, block_k, interpret, key_lengths=None, **varlen):
    seg, cu = None, varlen.get("cu_seqlens_k")
    if key_lengths is not None:  # keys of segment 1, padding 0
        seg = (jnp.arange(k.shape[1]) < key_lengths[:, None]).astype(jnp.int32)
    elif cu is not None:  # a key's sequence; the guard rows after the last one
        seg = jnp.searchsorted(cu, jnp.arange(k.shape[1]), side="right")[None]
    sizes = attention.BlockSizes(block_q=block_q, block_k=block_k)
    kw = dict(sm_scale=scale, causal=causal, block_sizes=sizes, interpret=interpret)
    return attention.mha(q, k, v, seg, return_residuals=True, **kw)


def gqa(q, k, v, *, scale, cache_len, block_k, num_splits, interpret):
    kw = dict(sm_scale=scale, block_k=block_k, k_splits=num_splits, interpret=interpret)
    o, (sums, m) = decode_attention.gqa(
        q[:, :, 0], k, v, kv_seq_len=cache_len, return_residuals=True, **kw
    )
    return o[:, :, None].astype(q.dtype), m[:, :, None], sums[:, :, None]  # finding 3


common = dict(kernel=mha, language="pallas", layout=fuzz.Layout("BTHD"))
conv = dict(fp32_dots="tf32-compiled", masked_inputs="finite")  # JAX's references: 0 x value
mha_conv = fuzz.Conventions(causal="top-left", lse="base2", **conv)
rule = fuzz.Constraint(padded, "Tq > a key length", feature="key_padding")
dense = fuzz.fuzz_kernel(
    "jax_mha",
    family="attention",
    capabilities=caps("key_padding", constraints=[rule]),
    conventions=mha_conv,
    **common,
)
varlen = caps(same="q")  # each sequence as many keys as queries
fuzz.fuzz_kernel(
    "jax_mha_varlen", family="attention_varlen", capabilities=varlen, conventions=mha_conv, **common
)
# gqa: each of the cache's splits a whole number of key tiles (of >= 16)
decode = fuzz.Capabilities(
    tiles={"block_k": SIZES, "num_splits": (1, 2, 4)},
    features={"gqa", "scale", "splits"},
    lengths={"k": fuzz.Lengths(("num_splits", "block_k"))},
    compiled=fuzz.Capabilities(head_dims=GPU_DIMS),
)
fuzz.fuzz_kernel(
    "jax_gqa_decode",
    family="attention_decode",
    kernel=gqa,
    language="pallas",
    capabilities=decode,
    conventions=fuzz.Conventions(lse="split", **conv),
    layout=fuzz.Layout(k="BTHD", v="BTHD"),
    siblings={"attention": dense},
)
