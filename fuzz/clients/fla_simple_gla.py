"""fla-core's chunked simple GLA (``fla.ops.simple_gla.chunk_simple_gla``): forward, and backward
through its autograd, against the simple_gla family; fla's own Triton kernels run compiled
(``triton``) or in Triton's interpreter (``triton-interpret``), autotuned ones with one drawn
config per example. ``--plugin fuzz.clients.fla_simple_gla``.

Findings (fla-core 0.6.0): on an H100, fp32 inputs give TF32 dot products (Triton's default
precision), up to 2.6x the fp32 error bound (e.g. ``ht`` -9.6404 against -9.6513): a convention
of the library, not a bug, and one its users should know; under ``TRITON_F32_DEFAULT=ieee`` those
cases pass. Declared (``fp32_dots="tf32-compiled"``): the bound of TF32 dot operands applies on
the compiled backend. The gated (per-token ``g``) backward refuses to run on Hopper with Triton
< 3.7.1 (fla #640, a miscompile): there the compiled backward's capabilities leave per-token
gates out (fla's own guard, read at import), a refused case that still comes is declined
(``fuzz.Unsupported``, counted), and the interpreter adapter below lifts the guard only where
nothing is compiled. In the CPU interpreter
every config of its six autotuned kernels stays within the bounds (fp32, fp16, bf16; both decay
forms; states; packed sequences), but for two findings:

- A bug (CPU interpreter and H100): the forward's final state is NaN when a sequence's last chunk
  is short and the per-head decay is strong, |g_gamma| (tail 1) > 88.72 / 63 = 1.408:
  ``chunk_fwd_kernel_h`` scales the chunk's padded rows by ``exp2(b_g_last - b_g)`` (chunk_h.py,
  the g_gamma branch) before they are masked, Inf times their zero values. Shrunk to one token
  (16 elements) on the H100 through the interpreter, its NaN traced to that line.
- Compiled only, on Hopper (H100 and H200, Triton 3.6): the backward's dq of one case is wrong
  by up to 450 (bf16, g_gamma = -8, four packed sequences of 65, 63, 13 and 79 tokens, key
  bursts of 2^8, an initial state): dq[0, 97, 1, 7] = 450 against 0.5043 in float64,
  dq[0, 32, 1, 1] = -65 against 0.00126.
  Not TF32 (it fails as well under ``TRITON_F32_DEFAULT=ieee``); the same case rebuilt from its
  recipe is right in the interpreter under three configs of the dq kernel (0.5039, 0.001259), so
  a compiled-only error, of the kind fla refuses on Hopper for the gated form (#640) but not
  for g_gamma. Which kernel and config (``python .ci/fla_evidence.py`` on an H200): every
  ``num_warps=4`` config of ``chunk_bwd_kernel_dqkwg`` (chunk_o.py) gives dq = 450 and -65 at
  those elements, whatever its stages; the ``num_warps=2`` configs give 0.5039 and 0.001259 there
  (their largest dq error, 376 on an element of -6.98e4, is 0.5%: bf16 rounding). dk and dv are
  right under every config. What it needs (``python .ci/fla_evidence.py --ablate`` on an H200,
  the case changed one choice at a time, the dq kernel at its first ``num_warps=4`` config): K =
  16 and V >= 64, in bf16 or fp16; neither packed sequences, an initial state, key bursts, a
  strong decay nor large values: one head, one sequence of 64 tokens, values of magnitude 1 give
  411 wrong elements of dq (18.1 for -6.89). Right with K = 64 or 128, with V = 16, in fp32, and
  at ``num_warps=2`` in every variant. Fuzzed unaided: where fla refuses the gated backward (the
  same kernel; #640), per-token gates are not declared on the compiled backend, so every
  compiled backward case draws the g_gamma form that reaches it (two thirds of a GPU campaign's
  backward cases had been drawn with per-token gates, only to be declined).
- Seen once, not localized: one sequence of 128 or 220 tokens (no packing) with every autotuned
  kernel but the dq kernel at its first config ended in an illegal memory access (the same case
  packed, or of 64 or 65 tokens, ran); fla's shipped configs and its autotuner may never pick
  that set.
- Found by a 400 s bundled campaign on an H200 (2026-11-29), compiled backward, both unshrunk:
  an illegal memory access (fp16, g_gamma, an initial state, five packed sequences of 118
  tokens in all, 64 heads, K = 32, V = 16: 241,664 elements; a context-killing crash was then
  kept as the example that did it; since, a crash that loses the context is shrunk in child
  processes, ``fuzz.isolated``, shown on an H200 with a planted wild store, not yet with
  fla's), and dv differing between
  runs of one case in 82,188 elements (fp16, g_gamma, one sequence of 193 tokens, 64 heads, K =
  32, V = 16: 395,264 elements). Both have 64 heads and the drawn configs of a half-precision
  case; whether they are the illegal access above, or one bug, is not known: a bug of fla's with
  evidence (a crash; runs that differ), not yet localized. The dq bug was not met in its 516
  examples (74 compiled structures explored; the report does not record which).
  Three more bundled campaigns on an H200 (2026-11-29, night, 360-380 s each): the two are one
  case. In the third, a bf16 case (one sequence of 193 tokens, 64 heads, K = 32, V = 16,
  395,264 elements) gave a wrong dv (-0.154 for -9.8e-6) on its first check and an illegal
  memory access on its replay: one flaky row, unshrunk (its shrink stages ran in the process
  whose context the replay had lost; such a row now ends its hunt as a lost context). The dq
  bug was not met (210-370 backward examples a campaign; the compile share refused 744-1,901
  new structures).
  Two more (2026-11-29, afternoon, 340-370 s): no backward row; the dq bug was not met in 210
  and 267 backward examples (the second with each autotuned kernel's config drawn on its own
  and the configs narrowed per run as tiles are; its head dims, (16, 32) with the campaign's
  seed, reached V >= 64 with the first widening, at 101 s).
  One more (2026-11-29, late, the bundled clients alone: ``bash .ci/gpu-session bundled 450``):
  one fla row, the forward's NaN final state above (16 elements, one token, also seen through
  ``state-continuation``); the backward passed 541 examples (98 compiled structures explored,
  3,112 examples refused by the compile share) and the dq bug was not met.
  Again (2026-11-30, the same command): the forward's NaN final state (16 elements), and the
  backward's illegal memory access once more, in a smaller case: fp16, g_gamma, ``dht``, four
  sequences of 21 tokens, 4 heads, K = 32, V = 16, chunk 64, scale 0.5 (10,752 elements; the
  child processes shrinking it found no smaller example that crashes so before their time ran
  out). A bug of fla's with evidence, not localized. The dq bug was not met (532 backward
  examples, 126 compiled structures explored, 2,791 examples refused by the compile share).
  Later the same day (``bash .ci/gpu-session side-by-side 380``, half the H200): the forward's
  NaN final state again (16 elements; its origin traced to ``chunk_fwd_kernel_h``'s
  ``exp2(b_g_last - b_g)`` of a padded row), no other fla row; the dq bug not met (345 backward
  examples, 2,437 refused).
  Again (2026-11-30, evening: ``bash .ci/gpu-session bundled 450`` on one H200 of a two-GPU
  host, 16 cores; a run's configs of each autotuned kernel now differ in warps first, so every
  kernel's ``num_warps=4`` configs are in reach from the start): the forward's NaN final state
  (16 elements, also seen through ``state-continuation``, 32), and a new backward row: a wrong
  dv, compiled only and flaky. bf16, g_gamma (ALiBi slopes), one sequence of 17 tokens, one
  head, K = 32, V = 16, ``chunk_bwd_kernel_dv`` at its config 4 (``num_warps=4``,
  ``num_stages=3``), the others at their first: dv of the last token is 0 where float64 gives
  -0.786 and -5.38 (the whole row); first seen at 4,096 elements (dv = -12,864 for 0.105),
  shrunk on a compile worker to 544, then a later slice's replay of it passed. Its interpreted
  replay passes and shows no access outside a buffer nor a racing store: a bug of fla's with
  evidence (a wrong row that comes and goes between runs), likely the dv rows that differed
  between runs above; not localized. Once more a backward launch lost the CUDA context
  (illegal memory access). The dq bug was not met: 109 backward examples checked, 4,454
  refused by the compile share (about 3,000 of them reuses of known structures whole, each
  with config picks of its own: since fb9da77 a reuse replays its structure's configs), head
  dims (16, 32) widened by 256, 8, 64 and 128 at 80-245 s.
  Twice more (2026-11-30, morning, the same command and host). At 77e43d9, configs replayed
  with reused structures: the backward checked 342 examples (109 before) and refused 3,318;
  the dv row again (bf16, g_gamma, an initial state, five packed sequences, 20 heads, K = 64,
  V = 8: dv -1.6e-4 for -3.1e-8, 3,512x its bound; also seen as runs that differ), met at
  434 s of a 450 s budget and left at 81,920 elements; the dq bug not met (head dims (16, 32)
  until 93 s). At 3401aef, a run's sizes spread over octaves (head dims (16, 256) from the
  start): **the dq bug, found and shrunk unaided**, 1 row: bf16, g_gamma (ALiBi slope), five
  packed sequences of 63, 1, 1, 1 and 1 tokens, one head, K = 16, V = 128: dq[0, 57, 0, 10] =
  49.25 against -32.63 in float64 (2.0x its bound at the minimal case; its first sight, at
  376 s, 8.3x: dq -0.00638 for 0.00627). Compiled only (the interpreted twin over its own
  variant space passes; no access outside a buffer in the interpreted replay), shrunk on the
  compiled backend to 10,240 elements, then by the compile ladder to 8,576 when the budget
  ran out (its time cut; a longer run shrinks on). 93 backward examples checked, 711 refused.
  At a1055c9 (the same command; 70 backward examples checked, 1,068 refused): the dq bug again,
  first seen at 362 s (dq 160 for -1.8e-4), as **two rows of 8,192 elements**, one head, one
  sequence of 64 tokens, K = 16, V = 128, g_gamma, wrong at one element, dq[0, 62, 0, 14]: one
  in fp16 (0.054 for -0.086, 22x its bound), one in bf16 with packed sequences and a final-state
  gradient (29.5 for -44.0, 1.9x). One bug (the ablation above: fp16 or bf16), two rows: the
  dtype is a trigger of each minimal example and shrinking moves it toward fp32 only. fcb3b38
  tells them apart by evidence: each minimal example cast to the other's dtype fails alike, so
  they are one row (``fuzz.duplicates.Duplicates.other_half``). Each was shrunk on the compiled
  backend (10,240 and 8,192) and the first by the compile ladder to 8,192 when its time ran out
  (22 compiles). The forward's NaN final state, 16 elements (one token, fp32): the bug above.
  Three more (2026-11-30, ``bash .ci/gpu-session two ... bund "bundled 450"``, one H200 of a
  two-GPU host each). At cc55922: the dq bug, found and shrunk unaided to **one row of 1,280
  elements** (fp16, g_gamma, a partial chunk: dq[0, 18, 0, 12] = -0.839 for -2.979, 36x its
  bound; compiled only: the interpreted twin over its own variant space passes), then "not
  shrunk" further: a later slice's replay gave runs that differ. The backward's illegal
  memory access twice (bf16, g_gamma, an initial state, packed sequences, one of them empty:
  16,512 elements; with ``dht`` and a scale: 327,680, no smaller example crashing so in the
  child processes): a bug of fla's with evidence, not localized; whether it is the wrong dv
  that comes and goes above is not known. The forward's worker ran the GPU out of memory
  twice and the pair was retired as a harness error: since 891f552 an example that runs the
  GPU out of memory is declined and the hunt goes on. At 891f552 the campaign ended at 233 s
  (the harness's own ``BrokenPipeError``, a slice sent to a worker whose process had ended:
  since 922a2be taken back). At 922a2be (``bundled 420``, 204 backward examples checked, 1,489
  refused): a wrong dq, compiled only, bf16, g_gamma, an initial state and ``dht``, five packed
  sequences (empty ones among them), K = 32, V = 128: dq[0, 34, 0, 24] = 18.9 for -15.6, 2.1x
  its bound, 20,480 elements (left to the compile ladder when the budget ran out); likely the
  dq bug (V >= 64, half precision), not confirmed at K = 32. And a flaky row: one bf16 case
  (three packed sequences of 245 tokens, 2 heads, K = 64, V = 8, an initial state) gave dv =
  -8.2e6 for -0.397, then an illegal memory access on its replay: the wrong dv and the illegal
  access above, one case (31,360 elements, unshrunk: a flaky failure that lost the context is
  not shrunk in child processes). The forward's NaN final state, 16 elements, again.
  At d19a317 (``bundled 450``, 135 backward examples checked, 1,885 refused): the wrong dq,
  compiled only (the interpreted twin over its own variant space passes), bf16, g_gamma, one
  packed sequence of 132 tokens (a partial chunk), K = 32, V = 128: dq[0, 52, 0, 13] = -22.1 for
  33.7, 2.3x its bound, 16,896 elements; its first sight (dq = -238,592 for -0.0004) came 449 s
  into the budget, when the autotuned kernels' configs had widened to the one that fails, and
  the compile ladder had no time left (the report says so since e65bf8c). The backward's
  illegal memory access (bf16, g_gamma, an initial state, ``dht``, one packed sequence of 193
  tokens, 64 heads, K = 64, V = 16: 790,528 elements; no smaller example crashed so in the two
  child processes, one killed when the time ran out). The forward's NaN final state, 16
  elements (one token, fp32), again. A profile of the backward on the H200 (``python
  .ci/profile_hunt.py fla_chunk_simple_gla_bwd triton 16 --plugin fuzz.clients.fla_simple_gla``:
  0.14 examples/s) put 58.7 s of 114 in the GLA error bound, 27 s of it NumPy arithmetic on
  outputs of a million elements: since 29b4634 done where the magnitudes are.
  At 1c26bd9 (``bundled 450``, one H200 of a two-GPU host): one fla row, the forward's NaN final
  state (16 elements, one token, fp32; also seen through ``state-continuation``): the bug above.
  The dq bug was not met: 103 backward examples checked, 1,213 refused by the compile share
  (head dims (16, 256), then + 64, 128, 32 and 8 at 80-354 s; bf16 from 80 s). The profile
  again (the same command): 0.34 examples/s, the error bound 8.8 s of 48.5 (a float64 pass of
  four magnitude variants on the GPU), the oracle comparison 14.3 s, compiling about 20 s; in
  the campaign its launches took 243 s of the pair's 250 (217 launches beside four other
  fuzzing processes and six compiling ones on the one GPU), where alone they are a small part.
  At 12b82ff (2026-12-01, ``bundled 450``, one H200): one fla row, the forward's NaN final state
  (16 elements, fp32, one token; also seen through ``state-continuation``): the bug above. The
  dq bug was not met: 88 backward examples checked, 1,132 refused by the compile share, its 221
  launches 291 s of the pair's 295 (about 1.3 s each beside ten other processes on the GPU).
  At 979d8f6 (2026-12-01, the next session, the same command): the forward's NaN final state
  (16 elements, fp32, one token, traced to ``chunk_h.py``'s ``exp2``): the bug above. The
  backward's illegal memory access once more (fp16, g_gamma, three sequences of 106 tokens, 64
  heads, K = 128, V = 16: 2,605,056 elements; it lost the context replayed alone in a fresh
  process too, and three child processes found no smaller example that crashes so): a bug of
  fla's with evidence, not localized. The dq bug was not met: 213 backward examples checked
  (439 launches, 230 s), 732 refused by the compile share.
"""

import contextlib
from unittest import mock

from fla.ops.simple_gla import chunk_simple_gla

import fuzz


def forward(
    q,
    k,
    v,
    *,
    scale,
    chunk_size,
    g=None,
    g_gamma=None,
    initial_state=None,
    cu_seqlens=None,
    output_final_state=False,
):
    """fla's call; a feature's keyword the harness leaves out (not declared on a backend kind,
    as per-token gates where fla refuses them) is fla's default."""
    return chunk_simple_gla(
        q,
        k,
        v,
        g=g,
        g_gamma=g_gamma,
        scale=scale,
        chunk_size=chunk_size,
        initial_state=initial_state,
        output_final_state=output_final_state,
        cu_seqlens=None if cu_seqlens is None else cu_seqlens.long(),
    )


@contextlib.contextmanager
def without_hopper_guard():
    """fla's guard against the Hopper miscompile has nothing to guard in the interpreter."""
    import fla.ops.common.chunk_o as chunk_o

    with mock.patch.object(chunk_o, "IS_NVIDIA_HOPPER", False):
        yield


def refusing_hopper(backward):
    """fla's refusal of the gated backward on Hopper (#640) as a declined case."""

    def run(*args, **kwargs):
        try:
            return backward(*args, **kwargs)
        except RuntimeError as e:
            if "#640" not in str(e):
                raise
            raise fuzz.Unsupported("fla refuses the gated backward on Hopper (#640)") from e

    return run


def refuses_gated_backward() -> bool:
    """Whether fla refuses the gated backward on this machine: its own guard (#640), read from
    fla (Hopper, Triton >= 3.4 and < 3.7.1)."""
    import fla.ops.common.chunk_o as chunk_o

    return bool(
        getattr(chunk_o, "IS_NVIDIA_HOPPER", False)
        and getattr(chunk_o, "TRITON_ABOVE_3_4_0", False)
        and not getattr(chunk_o, "TRITON_ABOVE_3_7_1", True)
    )


fuzz.interpreter_adapter(without_hopper_guard)
supported = {"g", "g_gamma", "initial_state", "varlen", "scale"}
chunks, dims = {"chunk_size": (64,)}, (16, 8, 32, 64, 128, 256)  # fp16 needs even K and V
fwd = fuzz.Capabilities(tiles=chunks, head_dims=dims, features=supported | {"final_state"})


def backward_capabilities(refuses_gated: bool) -> fuzz.Capabilities:
    """The backward's capabilities; where fla refuses the gated backward (``refuses_gated``), its
    compiled backward supports the g_gamma form only: every compiled case drawn with per-token
    gates would be declined (two thirds of a GPU campaign's backward cases were)."""
    compiled = fuzz.Capabilities(features=(supported - {"g"}) | {"dht"}) if refuses_gated else None
    return fuzz.Capabilities(
        tiles=chunks, head_dims=dims, features=supported | {"dht"}, compiled=compiled
    )


bwd = backward_capabilities(refuses_gated_backward())
tf32 = fuzz.Conventions(fp32_dots="tf32-compiled")
fuzz.fuzz_kernel(
    "fla_chunk_simple_gla_fwd",
    family="simple_gla_fwd",
    kernel=forward,
    capabilities=fwd,
    conventions=tf32,
)
fuzz.fuzz_kernel(
    "fla_chunk_simple_gla_bwd",
    family="simple_gla_bwd",
    kernel=refusing_hopper(fuzz.autograd_backward(forward)),
    capabilities=bwd,
    conventions=tf32,
)
