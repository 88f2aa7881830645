"""JAX's Pallas GPU attention ops (``jax.experimental.pallas.ops.gpu``): ``attention.mha``
(dense; key padding and packed sequences through ``segment_ids``) and ``decode_attention.gqa``,
compiled (``pallas-gpu``) or in interpret mode (``pallas-interpret``), against the attention
families. ``--plugin fuzz.clients.jax_pallas_ops``.

Declared from their signatures and source: ``mha`` aligns causal masking top-left (query i sees
keys up to i), returns a base-2 log-sum-exp (``m + log2 l`` of ``exp2`` logits), takes one
``segment_ids`` row per batch element that queries and keys share (so key padding only where
every query is in the first segment, Tq <= each key length, and packed sequences of as many keys
as queries), lengths that are multiples of their tile or shorter than one (``mha`` clamps its
blocks to the sequence; on the GPU: powers of two, Triton's lowering), no GQA; ``gqa`` takes a cache whose splits are whole key tiles and
returns the split form ``(l, m)``. Both multiply a masked key's probability 0 by its value (as
their references do): masked inputs are declared finite. fp32 dots are TF32 on the GPU.

Findings (JAX 0.10.2, interpret mode on the CPU; each against JAX's own references in float64,
``tests/clients/test_jax_pallas_ops.py``):

1. **Bug** (``mha``): causal with more queries than keys reads key blocks past the keys. The loop
   bound ``(block_q (i + 1) + block_k - 1) / block_k`` is not capped at the key blocks, so with
   ``Tq > Tk`` the last query blocks load blocks past ``Tk``: NaN in interpret mode (NaN
   padding), whatever memory lies there on a GPU. Tq = 2, Tk = 1: o is NaN in both rows;
   ``mha_reference`` (float64) gives v.
2. **Bug** (``mha``, low severity): at logits of magnitude 2^24 and more, the exponent
   ``qk * scale - m`` is formed by the compiler as one FMA (XLA's CPU backend does; Triton fuses
   by default too), so the largest key gets ``exp2`` of its scaled logit's rounding error (up to
   half an ulp: 2^64 at 1e9) instead of 1: the keys' weights are off by such factors, and P cast
   to fp16 overflows. fp16 q = 31616, k = -31616 (logit -1e9): o = inf, reference 1.88; the
   kernel's formulation (scale folded after the max) invites it.
3. **Bug** (``gqa``): the output is float32 for fp16/bf16 inputs (``o / (l + eps)`` promotes with
   a float32 ``eps``); ``gqa_reference`` returns the input dtype. The adapter casts it back so
   that the numerics are checked.
4. **Bug shared with its reference** (``gqa``): a cache entry past ``kv_seq_len`` enters the
   logits additively (``qk + (~mask) 0.7 min``): a finite key of fp32 or bf16 magnitude near the
   maximum overflows ``q . k`` to inf, which the mask does not cancel: o = NaN. ``gqa_reference``
   (even given float64 inputs: it casts to float32) does the same; the first keys alone give the
   right answer. Masked inputs must keep ``q . k`` finite, which no convention can declare.
5. **Bug** (``gqa``, fp16): each split's unnormalized output is stored in the input dtype before
   the merge divides it: values near fp16's largest (v = 6e4 + N(0, 1) over 16 keys, output 6e4)
   give inf; the reference gives 60000.

6. **Bug** (``mha``, compiled only, reported from outside the suite): on the GPU, sequences
   shorter than 16 give wrong values (T = 1: error 16.8 against ``mha_reference``, default
   blocks; T = 2: 5.5; T = 8 fp16: 1.16; T >= 16 right; an H100 and an H200). ``mha`` clamps its
   blocks to the sequence length, so short sequences are supported: the GPU domain declares them
   (it had declared multiples of the tile only, and a nightly run never drew one).

On an H200 (``pallas-gpu``, JAX 0.11.2, one 450 s campaign of the bundled clients: ``bash
.ci/gpu-session bundled 450``), every row and what it is:

- ``mha`` accuracy, 48 elements (and ``mha_varlen``, 48): finding 6, T = 1 (17.2 for 2.15).
- ``mha`` nan, nondeterminism and accuracy rows of 131,072 to 524,288 elements (causal, more
  queries than keys): finding 1, its reads past the keys; on the GPU what lies there varies
  between runs (NaN or not). The NaN row's case shrank to 2 elements in ``pallas-interpret``
  (Tq = 2, Tk = 1: finding 1 as on the CPU), which the GPU does not confirm at that size.
- ``gqa`` accuracy, 256 elements, through ``decode-equals-last-causal-row``: ``mha``'s finding 6
  (its prefill of 1 gives 25.1 where the decode and the oracle give 1.57), not a ``gqa`` bug: the
  property now names the dense kernel as the one off the oracle.
- ``gqa`` masking, 512 elements (16 in ``pallas-interpret``): finding 4.
- ``mha_varlen`` masking, 1,024 elements, compiled only (``pallas-interpret`` passes): keys past a
  sequence's end (``segment_ids``) set to float32's largest make o NaN, finding 4's kind for
  ``mha`` on the GPU: ``q . k`` overflows before the segment mask applies.

A second H200 campaign (400 s, 2026-11-29, diverse structure explorations) gave 6 rows, each one
of these: ``mha`` accuracy, 16 elements (finding 6, T = 1; its inf row of 16 merged into it);
``mha_varlen`` inf, 512 elements, and masking, 5,120 (both ``varlen-equals-alone``: a sequence
of one query and one key run alone gives inf in fp16 where the packed run gives 60,000, or a
wrong value: the run alone is the wrong one, finding 6 at T = 1);
``gqa`` inf, 256 (finding 5) and masking, 256 (finding 4). None is a harness error or a
convention.

Three more H200 campaigns (2026-11-29, night, 360-380 s, beside another campaign): ``mha``'s
rows of finding 1 (NaN, accuracy and nondeterminism of causal cases with more queries than
keys) stayed at 43,008-196,608 elements where the slices shrinking them were killed past their
hard limit (2-4 a campaign: a Pallas NaN-origin trace and checks outside any example, since
bounded); a later slice now resumes their shrinking, and in the third campaign its masking and
NaN rows came back at 384 and 1,024 elements. Not triaged row by row.

Two more bundled campaigns on an H200 (2026-11-29, afternoon, 340-370 s beside another
campaign: ``bash .ci/gpu-session side-by-side``), the second's rows each read from its case:

- ``mha`` accuracy, 48 elements (T = 1), and ``mha_varlen`` accuracy, 16: finding 6.
- ``mha`` accuracy (524,288 elements), inf (49,152), nondeterminism x3 (49,152-196,608), all
  unshrunk (a slice killed while shrinking, and the campaign's end): each causal with more
  queries than keys (Tq 256-2,048 against Tk 1-512), finding 1; nondeterminism ("NaN then 0")
  is what lies past the keys changing between runs.
- ``mha`` masking, 384 (causal, one query, 8 keys) and 16,384 (key padding): keys the mask
  hides, set to float32's largest, make o NaN: ``q . k`` overflows before the mask applies,
  finding 4's kind, as ``mha_varlen``'s masking row (128).
- ``gqa`` accuracy, 256, through ``decode-equals-last-causal-row``: ``mha``'s finding 6 (its
  prefill of one); ``gqa`` masking, 2,048: finding 4.
- ``mha_varlen`` inf, 256 (fp16, four packed sequences), not read further.

The bundled clients alone on an H200 (2026-11-29, late: ``bash .ci/gpu-session bundled 450``,
22,491 examples, 13 rows), each row read from its case:

- ``mha`` accuracy 16, ``mha_varlen`` accuracy 16 (T = 1) and ``mha_varlen`` masking 512
  (``varlen-equals-alone``: a sequence of 2 run alone is the wrong one): finding 6.
- ``gqa`` accuracy 256 (bf16) and 49,152 (fp16, 10 query heads on 2, D = 128; compiled only,
  left to the compile ladder, which did not reach it) and ``gqa`` inf 256, each through
  ``decode-equals-last-causal-row``: ``mha``'s finding 6 (its prefill of one; at values near
  6e4 its wrong sum overflows fp16), not a ``gqa`` bug; two rows of one key where the dtype,
  a free choice, keeps their conditions apart.
- ``gqa`` inf 256 (the oracle, fp16, o = inf for 60,000): finding 5; ``gqa`` masking 256:
  finding 4.
- ``mha`` accuracy 512 (causal, 32 queries on 16 keys) and NaN 393,216 (causal, 2,048 queries
  on one key; a later slice's replay passed: what lies past the keys varies between runs, and
  the row says so): finding 1.
- ``mha`` masking 21,504 (causal, compiled only: the interpreter passes) and ``mha_varlen``
  masking 128: keys the mask hides set to float32's largest make o NaN, finding 4's kind.

Again (2026-11-30, the same command, 21,027 examples, 15 JAX rows), each row read from its case:

- ``mha`` accuracy 16 (T = 1), ``mha_varlen`` accuracy 48 and inf 48 (fp16, a sequence of one
  query: inf where the oracle gives 60,000) and masking 512 (``varlen-equals-alone``): finding 6.
- ``mha`` masking 98,304 (``key-padding-equals-truncation``, bf16, compiled only: batch element
  1 padded to 8 of 512 keys against the kernel run on its 8 keys alone): the run on 8 keys is
  the wrong one, finding 6 (a sequence shorter than 16); shrunk on a compile worker from
  196,608, no further in its 21 examples.
- ``mha`` accuracy of ``lse`` 1,536 (causal, 32 queries on 16 keys), NaN 196,608 twice (fp16,
  causal, 1,024 queries on 1 and 64 keys) and nondeterminism 1,024 and 163,840 (causal, more
  queries than keys): finding 1; the NaN and 163,840 rows unshrunk, each replay of their
  examples a hit of the accuracy row of finding 6 or passing (what lies past the keys varies
  between runs). Such rows now join the row their replay hit (how "replay").
- ``mha`` masking 384 and ``mha_varlen`` masking 128 and 1,024 (keys the mask hides set to
  float32's largest make o NaN): finding 4's kind.
- ``gqa`` inf 256 (fp16, o = inf for 60,000) and NaN 512 (fp16, 5 query heads on one kv
  head, 32 keys: o = NaN for 60,000): finding 5, its overflowed split stored in fp16.

Again (2026-11-30, later: ``bash .ci/gpu-session side-by-side 380``, the bundled clients on half
the H200 beside another campaign, 9,525 examples, 11 JAX rows), each row read from its case:

- ``mha`` and ``mha_varlen`` accuracy 16 (T = 1), ``mha`` inf 196,608 (fp16, 1,024 queries on one
  key: inf where the oracle gives 60,000), ``mha_varlen`` inf 2,048 (fp16, eight sequences of one
  query) and inf 524,288 (``varlen-equals-alone``: a sequence of one query and one key run alone
  is the wrong one, -inf): finding 6, sequences shorter than 16. The two large rows were left
  unfinished by the compile ladder (the pairs' share of the GPU).
- ``mha`` accuracy of ``lse`` 8,192 and nondeterminism 8,192 (causal, 64 queries on 16 keys):
  finding 1, the reads past the keys.
- ``mha`` masking 21,504 and 384 (``masked-poison``, causal): keys the mask hides set to
  float32's largest make o NaN, finding 4's kind.
- ``gqa`` accuracy 256 (``decode-equals-last-causal-row``): ``mha``'s finding 6 (its prefill of
  one); ``gqa`` inf 49,152 (fp16, 30 query heads on 6 kv heads, 256 keys in 4 splits, o = inf for
  35,910, unshrunk): finding 5, its overflowed split stored in fp16.

Again (2026-11-30, evening: ``bash .ci/gpu-session bundled 450`` on one H200 of a two-GPU host,
16 cores, 23,044 examples, 7 JAX rows, none over 4,096), each row read from its case:

- ``mha`` accuracy 16 (T = 1), ``mha_varlen`` accuracy 48 (also seen through
  ``varlen-equals-alone`` and ``masked-poison``, 24,576 and 114,688) and inf 48 (fp16, a
  sequence of one query: inf where the oracle gives 60,000): finding 6.
- ``mha`` accuracy of ``lse`` 4,096 (causal, 256 queries on 32 keys: 159,728 for 3.81; also seen
  in ``o``, 98,304): finding 1, the reads past the keys; shrunk on compile workers from 196,608,
  their time ran out at 4,096.
- ``mha`` masking 384 (``masked-poison``, causal, one query on 8 keys): keys the mask hides set
  to float32's largest make o NaN, finding 4's kind.
- ``gqa`` inf 256 (fp16, one query on 16 keys: o = inf for 60,000; also seen through
  ``decode-equals-last-causal-row`` and as NaN, 512 and 4,096): finding 5; ``gqa`` masking 256:
  finding 4.

Twice more (2026-11-30, morning, the same command and host), each row read from its case:

- At 77e43d9 (18,223 examples, 7 JAX rows): ``mha`` and ``mha_varlen`` accuracy 16 (T = 1;
  ``mha_varlen`` also seen as inf 512, ``rows-sum-to-one`` 768-3,584 and ``varlen-equals-alone``
  4,096-24,576): finding 6. ``mha`` crash 196,608: an illegal memory access (fp16, causal,
  2,048 queries on 1,024 keys, block_q 64 over block_k 32; the context lost, shrunk in a child
  process to its end, where no smaller example crashed so): finding 1, its reads past the keys
  reaching far enough past the allocation to fault; the report now says why it is no smaller.
  ``mha_varlen`` masking 256: finding 4's kind. ``gqa`` accuracy 256
  (``decode-equals-last-causal-row``: ``mha``'s finding 6), inf 256 (finding 5), masking 256
  (finding 4).
- At 3401aef (21,038 examples, 7 JAX rows): ``mha`` inf 48 (fp16, three batch elements of
  T = 1: inf where the oracle gives 60,000) and ``mha_varlen`` accuracy 16: finding 6. ``mha``
  accuracy 1,024 (causal, 64 queries on 32 keys) and nondeterminism 172,032 (causal, 512
  queries on 16 keys, NaN then -0.319; unshrunk: its compile worker ran 4 examples and found
  none smaller): finding 1. ``gqa`` inf 256 twice (the oracle, and
  ``decode-equals-last-causal-row``) and masking 256: findings 5, 6 and 4. ``mha``'s accuracy
  16 (T = 1), found at 24 s, was missing from the report: a compile ladder's re-shrink of one
  of its sightings walked into finding 1 (1,024 elements) and took its row's place as its
  "smaller example" (fixed in 8d6b3e0: such a record is a row of its own).
- At a1055c9 (20,644 examples, 4 JAX rows, none over 4,096): ``mha`` and ``mha_varlen``
  accuracy 16 (T = 1, fp32): finding 6. ``mha``'s row holds finding 1's examples as "also seen"
  (causal, more queries than keys: accuracy 98,304, NaN and nondeterminism 147,456-786,432,
  some unshrunk): their triggers (a partial key tile, one visible key, and more) nest with
  the T = 1 row's (a partial key tile, one visible key), and their examples fail its way: one
  bug by the evidence. One cause would fit both (not checked): key positions past the keys
  inside a key block left unmasked; finding 1 loads whole blocks past Tk, and at T < 16 a GPU
  block of 16 keys would hold 16 - T such positions. ``mha`` masking 384 (``masked-poison``, key padding, one query on 8 keys of which 1-3 are valid: keys the mask
  hides set to float32's largest make o NaN): finding 4's kind. ``gqa`` masking 256 (also seen
  as inf 256 in fp16, NaN 2,048 and ``decode-equals-last-causal-row`` 5,120-49,152): findings 4,
  5 and 6.

Three more (2026-11-30, ``bash .ci/gpu-session two ... bund "bundled 450"``: the bundled clients
on one H200 of a two-GPU host, beside another campaign on the other), each row read from its
case:

- At cc55922 (18,324 examples, 11 JAX rows): ``mha`` accuracy 16 (T = 1) and ``mha_varlen``
  accuracy 48 (three heads, a sequence of one query), inf 512 (fp16, ``varlen-equals-alone``, 32
  tokens in two sequences) and accuracy 384 (bf16, two sequences of 8 tokens at most, a partial
  key tile; compiled only): finding 6, sequences shorter than 16. ``mha`` accuracy 2,048
  (causal, 128 queries on 64 keys): finding 1. ``gqa`` accuracy 256
  (``decode-equals-last-causal-row``), inf 256 and masking 256: findings 6, 5 and 4. And three
  ``mha`` crashes, the CUDA context lost by an illegal memory access: 16 elements (T = 1, the
  triggers of finding 6's row), 3,145,728 (causal, 1,024 queries on 64 keys: no smaller example
  lost its context so; finding 1's reads past the keys) and a worker killed by SIGSEGV,
  unshrunk (causal, 256 queries on 32 keys: 786,432). The 16-element one
  lost its context in ``jit_transpose``, a transpose of the harness's after the kernel: CUDA
  reports an illegal access at a later call than the launch that made it. Since d2b2c8b such a
  crash's example is replayed alone in a fresh process before it is reported as its own.
- At 891f552 the campaign ended at 233 s (the harness's own ``BrokenPipeError``, since 922a2be a
  slice taken back): rows as above, 4 over 4,096 unshrunk.
- At 922a2be (``bundled 420``, 18,660 examples, 7 JAX rows): ``mha`` accuracy 96 (three batch
  elements of one query on 2 keys) and ``mha_varlen`` accuracy 16 (T = 1): finding 6; ``mha``'s
  row holds as "also seen" finding 1's examples and two crash rows joined by their runs (an
  illegal access in one run, a wrong value in the other). ``mha`` masking 768 (causal, one
  query on 16 keys) and 384 (key padding, one query on 8 keys): keys the mask hides set to
  float32's largest make o NaN, finding 4's kind. ``mha`` crash 688,128 (causal, 256 queries on
  256 keys, 7 heads, D = 128): **replayed alone in a fresh process, it passed**: its report
  says so; the illegal access was an earlier launch's, likely finding 1's or 6's reads past
  the keys. ``gqa`` inf 256 (fp16, also seen as NaN 1,024 born at the same site) and masking
  256: findings 5 and 4.

Again (2026-11-30, at d19a317, ``bundled 450`` on one H200 of a two-GPU host, 18,706 examples,
6 JAX rows), each row read from its case:

- ``mha`` and ``mha_varlen`` accuracy 16 (T = 1: 1.19 for 0.149): finding 6; ``mha``'s row holds
  16 sightings by their evidence (finding 1's NaN, accuracy and nondeterminism examples among
  them). ``gqa`` inf 256 (``decode-equals-last-causal-row``: its dense sibling's prefill of one
  query in fp16, inf for 47,200): ``mha``'s finding 6.
- ``mha`` masking 768 (causal, three batch elements of one query on 16 keys) and 384 (key
  padding, one query on 8 keys): keys the mask hides set to float32's largest make o NaN,
  finding 4's kind; two rows, one per masking feature (free choices that do not nest).
- ``mha`` NaN 1,572,864 (fp16, causal, 2,048 queries on 32 keys, block_q 64 over block_k 16):
  finding 1, the reads past the keys; found 443 s into the 450 s budget, shrunk through the
  shapes already compiled only, its twin's 6,144-element case not confirmed on the GPU (what
  lies past the keys varies). Since 989a4f1 that case is kept beside the row with its
  reproducer, and since e65bf8c the report says why the row is no smaller.

Again (2026-11-30, night, at 1c26bd9: ``bash .ci/gpu-session two econ "economics 450 0" bund
"bundled 450"``, one H200 of a two-GPU host, 15,027 examples, 5 JAX rows, none over 4,096,
0 harness errors), each row read from its case:

- ``mha`` and ``mha_varlen`` accuracy 16 (T = 1: 1.19 for 0.149): finding 6. ``mha``'s row also
  holds finding 1's sightings (causal, more queries than keys: accuracy of ``lse`` 768 and
  1,024, nondeterminism 2,048 and 114,688, NaN 196,608, each joined by evidence: its minimal
  example, fewer than 16 keys, fails finding 6's way too). Two bugs in one row: finding 1 has
  no example of 16 keys or more here, where finding 6 would not hold. ``mha_varlen``'s row
  holds 14 sightings of ``varlen-equals-alone`` and ``masked-poison`` (a sequence shorter than
  16 run alone is the wrong one): finding 6.
- ``mha_varlen`` inf 16 (fp16, one query and one key: inf where the oracle gives 60,000; also
  seen through ``varlen-equals-alone``, 114,688): finding 6 at T = 1 in fp16.
- ``gqa`` inf 256 (fp16, o = inf for 60,000; also seen as NaN 1,024): finding 5. ``gqa``
  masking 256 (``masked-poison``: keys past ``kv_seq_len`` set to float32's largest make o NaN;
  also seen through ``decode-equals-last-causal-row``, 49,152 and 262,144): finding 4.

Again (2026-12-01, ``bash .ci/gpu-session bundled 450`` on one H200, 6 rows, 0 harness errors),
each row read from its case:

- ``mha`` and ``mha_varlen`` accuracy 16 (T = 1): finding 6; ``mha``'s row again also holds
  sightings of finding 1 (lse 1,024, nondeterminism 1,024, NaN 98,304), joined by their minimal
  examples failing finding 6's way too.
- ``mha`` accuracy of ``lse``, 1,024 (causal, 64 queries on 32 keys): finding 1.
- ``mha`` nondeterminism, 196,608 (causal, 1,024 queries on 512 keys): finding 1, its reads
  past the keys; not shrunk (its compiled shrink and the twin's own search met NaN first).
- ``gqa`` inf 256 (fp16, o = inf for 60,000; also seen as ``decode-equals-last-causal-row``,
  ``masked-poison`` and NaN): finding 5, with finding 4's sightings among its ways.

Again (2026-12-01, the next session, at 979d8f6, the same command and host: 7 rows of the
campaign, 5 of them JAX's, 0 harness errors), each row read from its case:

- ``mha`` and ``mha_varlen`` accuracy 16 (T = 1: 1.19 for 0.149, compiled only): finding 6.
  ``mha``'s row again holds finding 1's sightings (runs that differ, 1,024 and 786,432; lse
  1,024 and 786,432), joined by their evidence.
- ``mha`` masking 384 (``masked-poison``: keys past ``key_lengths`` set to float32's largest
  make o NaN; one query on 8 keys; ``pallas-interpret`` passes): finding 4's kind on ``mha``'s
  key padding on the GPU, as ``mha_varlen``'s masking row above.
- ``gqa`` masking 256 (``masked-poison``, the largest value past ``kv_seq_len``: NaN): finding 4.
- ``gqa`` accuracy 2,621,440 through ``decode-equals-last-causal-row``: the dense ``mha``
  sibling's prefill of 1 is the one off the oracle, finding 6, not a ``gqa`` bug; not shrunk
  further (its smaller shapes were left to the compile workers when the budget ended).

Within the bounds otherwise (fp32, fp16, bf16; causal, key padding, packed sequences, GQA,
splits). On an H100 (``pallas-gpu``, JAX 0.11.2, a 150 s campaign: ``bash .ci/gpu-session
plugins 150``) the same bugs show, no other: ``gqa``'s fp16 inf (5), its NaN from a finite key
near the maximum past ``kv_seq_len`` (4), and ``mha``'s reads past the keys (1), there as an
accuracy failure and nondeterminism (what lies past the keys changes between runs), not NaN.
"""

from typing import Any

import jax.numpy as jnp
from jax.experimental.pallas.ops.gpu import attention, decode_attention

import fuzz

SIZES, GPU_DIMS = (16, 32, 64), (16, 32, 64, 128)  # compiled: dots of sides >= 16
CONV: dict[str, Any] = dict(fp32_dots="tf32-compiled", masked_inputs="finite")
PALLAS: dict[str, Any] = dict(language="pallas", layout=fuzz.Layout("BTHD"))


def lengths(gpu, same=None):  # a multiple of the tile or shorter (blocks clamp); GPU: powers of two
    q, k = (fuzz.Lengths(f"block_{n}", True, gpu) for n in "qk")
    return {"q": q, "k": fuzz.Lengths(k.multiple_of, True, gpu, same_as=same)}


def caps(*feats, same=None, **kw):
    gpu = fuzz.Capabilities(head_dims=GPU_DIMS, lengths=lengths(True, same))
    tiles, feats = {"block_q": SIZES, "block_k": SIZES}, {"causal", "scale", *feats}
    return fuzz.Capabilities(
        tiles=tiles, features=feats, lengths=lengths(False, same), compiled=gpu, **kw
    )


def padded(case):  # key padding: every query in the first segment
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
    o, (l_sum, m) = decode_attention.gqa(
        q[:, :, 0], k, v, kv_seq_len=cache_len, return_residuals=True, **kw
    )
    return o[:, :, None].astype(q.dtype), m[:, :, None], l_sum[:, :, None]  # finding 3


mha_conv = fuzz.Conventions(causal="top-left", lse="base2", **CONV)
mha_kw: dict[str, Any] = dict(kernel=mha, conventions=mha_conv, **PALLAS)
dense_caps = caps(
    "key_padding", constraints=[fuzz.Constraint(padded, "Tq > a key length", "key_padding")]
)
dense = fuzz.fuzz_kernel("jax_mha", family="attention", capabilities=dense_caps, **mha_kw)
fuzz.fuzz_kernel("jax_mha_varlen", family="attention_varlen", capabilities=caps(same="q"), **mha_kw)
splits = [fuzz.Lengths(("num_splits", "block_k"), power_of_two=gpu) for gpu in (False, True)]
decode = fuzz.Capabilities(
    tiles={"block_k": SIZES, "num_splits": (1, 2, 4)},
    features={"gqa", "scale", "splits"},
    lengths={"k": splits[0]},  # each split of the cache whole key tiles
    compiled=fuzz.Capabilities(head_dims=GPU_DIMS, lengths={"k": splits[1]}),
)
gqa_kw: dict[str, Any] = dict(kernel=gqa, language="pallas", capabilities=decode)
gqa_conv = fuzz.Conventions(lse="split", **CONV)
layout = fuzz.Layout(k="BTHD", v="BTHD")
sibling = {"attention": dense}
fuzz.fuzz_kernel(
    "jax_gqa_decode",
    family="attention_decode",
    conventions=gqa_conv,
    layout=layout,
    siblings=sibling,
    **gqa_kw,
)
