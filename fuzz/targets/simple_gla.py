"""The simple_gla family: chunked simple GLA forward and backward, and their mutants.

Targets::

    simple_gla_fwd   outputs o [B, T, H, V] (input dtype) and, with output_final_state, ht
                     [N, H, K, V] (fp32)
    simple_gla_bwd   inputs also do (and maybe dht); outputs dq, dk, dv (input dtype), dg (fp32,
                     per-token form only) and dh0 (fp32, with an initial state)

The oracle is the float64 token recurrence (``oracles.simple_gla``), gradients by float64 autograd;
the naive reference is the chunked algorithm in eager torch in the input dtype (reported, not a
yardstick here). Each output element is checked against its own error bound (``Target.error_bound``,
:func:`error_bound`): what any correct fp32 implementation may lose on that element, from a forward
error analysis of the paths that make it up (``fuzz/targets/_simple_gla_bound.py``; the derivation
is in ``kernels/simple_gla/README.md``), plus the rounding to the output dtype.
"""

from __future__ import annotations

import dataclasses
import importlib
import types
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from hypothesis import strategies as st

from fuzz.arrays import dtype_name, finfo, special_value, to_float64
from fuzz.backends import Backend, get_backend
from fuzz.case import Case
from fuzz.compare import Tolerance
from fuzz.failures import ACCURACY, INF, NAN, Finding
from fuzz.kit import (
    entries,
    host,
    per_case,
    real_modules,
    register_mutants,
    torch_inputs,
    variant,
)
from fuzz.properties import Context, Launch, Property, excess, runs_agree
from fuzz.target import Baselines, Hazard, Search, Target, register
from fuzz.targets._simple_gla_bound import U32, cu_seqlens, error_model, propagated
from kernels.simple_gla.mutants import MUTANTS
from strategies.simple_gla import simple_gla_bwd_cases, simple_gla_fwd_cases

FP32_LOG_MAX = finfo("float32").log_max  # 88.72
FP16_LOG_MAX = finfo("float16").log_max  # 11.09
FP32_TINY_LOG = -float(np.log(finfo("float32").tiny))  # 87.34: exp(-x) is subnormal beyond
TILE = 64  # kernels.simple_gla._common.TILE: chunks longer than this are tiled
CHUNK_SIZES = (16, 32, 64, 128, 256)
INTERPRETER_CHUNKS = (16, 32)  # chunk sizes the chunk-size properties try on the interpreters
FWD_OUTPUTS = ("o", "ht")
BWD_OUTPUTS = ("dq", "dk", "dv", "dg", "dh0")


# Contract: entry points, outputs, structure of a case ---------------------------------------------


def kind_of(case: Case) -> str:
    return "bwd" if "do" in case.inputs else "fwd"


def fwd_entry(module: types.ModuleType):
    """The forward target's entry point for a kernel module (real or mutant, Triton or Pallas)."""

    def run(
        inputs: Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        out: Mapping[str, Any] | None,
        interpret: bool,
    ) -> dict[str, Any]:
        out = out or {}
        o, ht = module.chunk_simple_gla_fwd(
            inputs["q"],
            inputs["k"],
            inputs["v"],
            g=inputs.get("g"),
            g_gamma=inputs.get("g_gamma"),
            scale=params["scale"],
            initial_state=inputs.get("h0"),
            output_final_state=params["output_final_state"],
            cu_seqlens=inputs.get("cu_seqlens"),
            chunk_size=params["chunk_size"],
            out=out.get("o"),
            out_ht=out.get("ht"),
            interpret=interpret,
        )
        return {"o": o} if ht is None else {"o": o, "ht": ht}

    return run


def bwd_entry(module: types.ModuleType):
    """The backward target's entry point for a kernel module."""

    def run(
        inputs: Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        out: Mapping[str, Any] | None,
        interpret: bool,
    ) -> dict[str, Any]:
        out = out or {}
        dq, dk, dv, dg, dh0 = module.chunk_simple_gla_bwd(
            inputs["q"],
            inputs["k"],
            inputs["v"],
            inputs["do"],
            g=inputs.get("g"),
            g_gamma=inputs.get("g_gamma"),
            scale=params["scale"],
            initial_state=inputs.get("h0"),
            dht=inputs.get("dht"),
            cu_seqlens=inputs.get("cu_seqlens"),
            chunk_size=params["chunk_size"],
            out_dq=out.get("dq"),
            out_dk=out.get("dk"),
            out_dv=out.get("dv"),
            out_dg=out.get("dg"),
            out_dh0=out.get("dh0"),
            interpret=interpret,
        )
        res = {"dq": dq, "dk": dk, "dv": dv}
        if dg is not None:
            res["dg"] = dg
        if dh0 is not None:
            res["dh0"] = dh0
        return res

    return run


def seq_lengths(case: Case) -> list[int]:
    """The length of every sequence (batch rows, or ``cu_seqlens`` segments)."""
    batch, length = case.inputs["q"].shape[:2]
    cu = case.inputs.get("cu_seqlens")
    if cu is None:
        return [length] * batch
    return [int(cu[i + 1] - cu[i]) for i in range(len(cu) - 1)]


def padding(case: Case) -> tuple[int, int]:
    """``[start, T)``: the tokens of no sequence, past ``cu_seqlens[-1]`` (empty without)."""
    length = case.inputs["q"].shape[1]
    cu = case.inputs.get("cu_seqlens")
    return (length if cu is None else int(cu[-1])), length


def output_spec(case: Case) -> dict[str, tuple[tuple[int, ...], str]]:
    """Shape and dtype of every output of ``case`` (what the kernels return)."""
    q, v = case.inputs["q"], case.inputs["v"]
    b, t, h, k_dim = q.shape
    v_dim = v.shape[3]
    n = len(seq_lengths(case))
    dtype = dtype_name(q.dtype)
    state: tuple[tuple[int, ...], str] = ((n, h, k_dim, v_dim), "float32")
    spec: dict[str, tuple[tuple[int, ...], str]]
    if kind_of(case) == "fwd":
        spec = {"o": ((b, t, h, v_dim), dtype)}
        if case.params["output_final_state"]:
            spec["ht"] = state
        return spec
    spec = {
        "dq": ((b, t, h, k_dim), dtype),
        "dk": ((b, t, h, k_dim), dtype),
        "dv": ((b, t, h, v_dim), dtype),
    }
    if "g" in case.inputs:
        spec["dg"] = ((b, t, h), "float32")
    if "h0" in case.inputs:
        spec["dh0"] = state
    return spec


# Oracle and naive reference -----------------------------------------------------------------------


def reference_args(case: Case, device: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``case``'s tensors on ``device`` (``cu_seqlens`` left out), and the keywords the float64
    references (``oracles.simple_gla``) take besides q, k, v (and do, dht)."""
    t = torch_inputs(case, device, skip=("cu_seqlens",))
    args = dict(
        g=t.get("g"),
        g_gamma=t.get("g_gamma"),
        scale=case.params["scale"],
        initial_state=t.get("h0"),
        cu_seqlens=cu_seqlens(case),
    )
    return t, args


def oracle(case: Case, device: str) -> dict[str, np.ndarray]:
    """The float64 blocked form (forward), or float64 autograd through it (backward): the token
    recurrence's values, in operations that grow with the blocks, not the tokens
    (``oracles.simple_gla.simple_gla_blocked``; checked against the recurrence and mpmath by
    the tests). With the recurrence, a GPU campaign's GLA backward pairs ran 0.7-1.4 examples a
    second, mostly outside their launches: a few float64 operations per token forward and
    backward, each a launch on the GPU (on the CPU, 5-25x slower than the blocked form at the
    gpu profile's sizes)."""
    from oracles.simple_gla import simple_gla_blocked, simple_gla_blocked_grads

    t, args = reference_args(case, device)
    if kind_of(case) == "fwd":
        o, ht = simple_gla_blocked(t["q"], t["k"], t["v"], **args)
        res = {"o": host(o, device)}
        if case.params["output_final_state"]:
            res["ht"] = host(ht, device)
        return res
    grads = simple_gla_blocked_grads(t["q"], t["k"], t["v"], t["do"], dht=t.get("dht"), **args)
    return {k: host(v, device) for k, v in grads.as_dict().items()}


def naive(case: Case, device: str) -> dict[str, np.ndarray]:
    """The chunked algorithm in eager torch in the input dtype (``oracles.simple_gla``)."""
    from oracles.simple_gla import simple_gla_naive, simple_gla_naive_grads

    t, args = reference_args(case, device)
    args["chunk_size"] = case.params["chunk_size"]
    if kind_of(case) == "fwd":
        o, ht = simple_gla_naive(t["q"], t["k"], t["v"], **args)
        res = {"o": host(o, device)}
        if case.params["output_final_state"]:
            res["ht"] = host(ht, device)
        return res
    grads = simple_gla_naive_grads(t["q"], t["k"], t["v"], t["do"], dht=t.get("dht"), **args)
    return {k: host(v, device) for k, v in grads.as_dict().items()}


# Error bound --------------------------------------------------------------------------------------

# fuzz/targets/_simple_gla_bound.py holds the error model; kernels/simple_gla/README.md the
# derivation.


@per_case
def cached_oracle(case: Case, device: str) -> dict[str, np.ndarray]:
    """:func:`oracle`, computed once per case (and kept while it lives): the bound's
    store-rounding term uses the exact outputs."""
    return oracle(case, device)


def bounds(
    case: Case,
    *,
    chunk: int | None = None,
    device: str = "cpu",
    reference: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """The per-element error bound of every output of ``case`` run at ``chunk`` (default: its
    own): the fp32 arithmetic's bound plus the rounding to the output's dtype, ``|x|`` taken
    from ``reference`` (the oracle's outputs) where given, else from the magnitudes."""
    model = error_model(case, chunk, device)
    reference = reference or {}
    return {
        name: model.bound(name, dtype, reference.get(name))
        for name, (_, dtype) in output_spec(case).items()
    }


def error_bound(case: Case, device: str) -> dict[str, np.ndarray]:
    """``Target.error_bound``: :func:`bounds` of the case, relative to its oracle."""
    return bounds(case, device=device, reference=cached_oracle(case, device))


# The ratio rule (rho x the naive reference's error) is not applied on top of the analysis
# (ratio_caps_analysis=False): the naive chunked torch in fp32 rounds as often as the kernels, so
# its error is one rounding realization, lucky as often as not (exactly representable values make
# it exact), and a correct token recurrence takes longer paths than it; in fp16/bf16 it rounds
# every matmul to the input dtype and is far less accurate than any fp32-accumulating kernel, so
# the rule would never be the smaller one there.
TOLERANCE = Tolerance(rho=2.0, floor_ulps=2.0, ratio_caps_analysis=False)


# Hazards ------------------------------------------------------------------------------------------


def _chunk_exponents(case: Case, width: int) -> tuple[float, float]:
    """Over every window of ``width`` tokens starting at a chunk (tile) boundary: the largest
    masked exponent ``b_j - b_i`` (j > i) and the largest ``|b|`` from the window's start."""
    chunk = case.params["chunk_size"]
    if "g_gamma" in case.inputs:
        gam = float(np.abs(case.inputs["g_gamma"].astype(np.float64)).max(initial=0.0))
        return gam * (width - 1), gam * width
    g = np.abs(case.inputs["g"].astype(np.float64))
    cu = case.inputs.get("cu_seqlens")
    seqs = (
        [(b, 0, g.shape[1]) for b in range(g.shape[0])]
        if cu is None
        else [(0, int(cu[i]), int(cu[i + 1])) for i in range(len(cu) - 1)]
    )
    masked = total = 0.0
    for b, bos, eos in seqs:
        for t0 in range(bos, eos, chunk):
            for w0 in range(t0, min(t0 + chunk, eos), width):
                part = g[b, w0 : min(w0 + width, eos)]  # [w, H]
                s = part.sum(axis=0).max(initial=0.0)
                total = max(total, float(s))
                # b_j - b_i for j > i is the sum of |g| over (i, j]: largest when i is the first.
                masked = max(masked, float(part[1:].sum(axis=0).max(initial=0.0)))
    return masked, total


def _tile_overflow(case: Case) -> str | None:
    tile = min(case.params["chunk_size"], TILE)
    masked, _ = _chunk_exponents(case, tile)
    if masked > FP32_LOG_MAX:
        return (
            f"masked-region exponent {masked:.4g} > {FP32_LOG_MAX:.2f} within a {tile}-token "
            "tile: exp overflows unless the exponent is selected before exp"
        )
    return None


def _chunk_overflow(case: Case) -> str | None:
    chunk = case.params["chunk_size"]
    masked, _ = _chunk_exponents(case, chunk)
    if masked > FP32_LOG_MAX:
        return (
            f"masked-region exponent {masked:.4g} > {FP32_LOG_MAX:.2f} over a whole "
            f"{chunk}-token chunk (seed 004: a kernel forming the chunk's matrix overflows)"
        )
    return None


def _fp16_overflow(case: Case) -> str | None:
    masked, _ = _chunk_exponents(case, min(case.params["chunk_size"], TILE))
    if FP16_LOG_MAX < masked:
        return f"masked-region exponent {masked:.4g} > {FP16_LOG_MAX:.2f}: exp overflows in fp16"
    return None


def _anchor_overflow(case: Case) -> str | None:
    _, total = _chunk_exponents(case, min(case.params["chunk_size"], TILE))
    if total > FP32_TINY_LOG:
        return (
            f"cumulative decay {total:.4g} > {FP32_TINY_LOG:.2f} within a tile: exp(b) is "
            "subnormal or 0, an anchored factorisation exp(b_i) / exp(b_j) loses it"
        )
    return None


def _padded_row_overflow(case: Case) -> str | None:
    if "g_gamma" not in case.inputs:
        return None
    chunk = case.params["chunk_size"]
    tile = min(chunk, TILE)
    gam = float(np.abs(case.inputs["g_gamma"].astype(np.float64)).max(initial=0.0))
    # the padded rows of the last tile holding live tokens (the kernels skip the tiles after it)
    worst = max(((-(n % chunk)) % tile for n in seq_lengths(case) if n % chunk), default=0)
    if gam * worst > FP32_LOG_MAX:
        return (
            f"padded rows of a partial chunk reach exponent |gamma| x {worst} = "
            f"{gam * worst:.4g} > {FP32_LOG_MAX:.2f} unless masked before exp"
        )
    return None


def _partial_chunk(case: Case) -> str | None:
    chunk = case.params["chunk_size"]
    tails = sorted({n % chunk for n in seq_lengths(case) if n % chunk})
    return f"sequence lengths with tails {tails} (mod chunk {chunk})" if tails else None


def _multi_chunk(case: Case) -> str | None:
    chunk = case.params["chunk_size"]
    longest = max(seq_lengths(case), default=0)
    return (
        f"a sequence of {longest} tokens spans several {chunk}-token chunks"
        if longest > chunk
        else None
    )


def _empty_sequence(case: Case) -> str | None:
    empty = [i for i, n in enumerate(seq_lengths(case)) if n == 0]
    return f"empty sequence(s) {empty} in cu_seqlens" if empty else None


def _padding_tokens(case: Case) -> str | None:
    start, end = padding(case)
    return (
        f"{end - start} token(s) past cu_seqlens[-1]={start} (no sequence's)"
        if end > start
        else None
    )


def _extreme_gates(case: Case) -> str | None:
    if "g" not in case.inputs:
        return None
    g = case.inputs["g"].astype(np.float64)
    low = float(g.min(initial=0.0))
    zeros = int((g == 0).sum())
    parts = []
    if low < -FP32_LOG_MAX:
        parts.append(f"gate {low:.4g} < -88.72 (exp underflows: the state is reset)")
    if zeros:
        parts.append(f"{zeros} exact zero gate(s) (no decay)")
    return "; ".join(parts) or None


HAZARDS = (
    Hazard("tile-exp-overflow", _tile_overflow),
    Hazard("chunk-exp-overflow", _chunk_overflow),
    Hazard("fp16-exp-overflow", _fp16_overflow),
    Hazard("anchor-overflow", _anchor_overflow),
    Hazard("padded-row-overflow", _padded_row_overflow),
    Hazard("partial-chunk", _partial_chunk),
    Hazard("multi-chunk", _multi_chunk),
    Hazard("empty-sequence", _empty_sequence),
    Hazard("padding-tokens", _padding_tokens),
    Hazard("extreme-gates", _extreme_gates),
)


# Poisoning and fixed outputs ----------------------------------------------------------------------


def fixed_outputs(case: Case) -> dict[str, np.ndarray]:
    """Decided without arithmetic, so an error there is a masking error: an empty sequence's
    ``ht`` is its ``h0`` (zeros without one) and its ``dh0`` is its ``dht``; the outputs of
    tokens of no sequence (past ``cu_seqlens[-1]``) are 0."""
    spec = output_spec(case)
    empty = np.array([n == 0 for n in seq_lengths(case)])
    fixed: dict[str, np.ndarray] = {}
    for name in ("ht", "dh0"):
        if name in spec:
            shape = spec[name][0]
            fixed[name] = np.broadcast_to(empty[:, None, None, None], shape).copy()
    start, end = padding(case)
    if start < end:
        for name in ("o", "dq", "dk", "dv", "dg"):
            if name in spec:
                mask = np.zeros(spec[name][0], bool)
                mask[:, start:end] = True
                fixed[name] = mask
    return fixed


# Every input element no output can depend on: the token rows past cu_seqlens[-1] (q, k, v, g,
# do). Nothing else qualifies: every token of a sequence reaches an output through its own
# diagonal term, and every h0/dht entry through ht/dh0 (and o, dq). The gate of a sequence's
# first token without an initial state cancels from every exact output (only differences of
# prefix sums from it on appear), but every chunked implementation folds it into those prefix
# sums, where its value changes the rounding (a finite huge gate, the NaN of an infinite one):
# it can influence the outputs of a correct kernel, so it is not poisoned.
POISONED_ROWS = ("q", "k", "v", "g", "do")


def poison(case: Case, kind: str) -> Case | None:
    """``Target.poison``: the padding tokens' rows of every per-token input set to the poison;
    None when the case has no padding."""
    start, end = padding(case)
    if start >= end:
        return None
    new = {}
    for name in POISONED_ROWS:
        if name in case.inputs:
            a = case.inputs[name].copy()
            dtype = "float32" if name == "g" else case.params["dtype"]
            a[:, start:end] = special_value(kind, dtype)
            new[name] = a
    return case.replace(inputs=new)


# Properties ---------------------------------------------------------------------------------------

# On the interpreters each family property runs on a quarter of the examples (a drawn selector; 0
# runs it, and failures shrink toward 0), on compiled backends on every example.
SAMPLED = 4


def _skipped(ctx: Context, selector: int) -> bool:
    return ctx.backend.interpret and selector % SAMPLED != 0


def _nonfinite(ctx: Context, got: Mapping[str, np.ndarray], prop: str, what: str) -> Finding | None:
    for name, o in ctx.oracle.items():
        k = to_float64(got[name])
        bad = np.isfinite(o) & ~np.isfinite(k)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            cls = NAN if np.isnan(k[idx]) else INF
            return ctx.finding(
                cls,
                prop,
                f"{what}: {int(bad.sum())} non-finite element(s) of {name}, first "
                f"{name}[{', '.join(map(str, idx))}] = {k[idx]} (oracle {o[idx]:.6g})",
                output=name,
                index=idx,
                kernel_value=float(k[idx]),
                oracle_value=float(o[idx]),
            )
    return None


def _chunk_sizes(ctx: Context) -> tuple[int, ...]:
    """The other chunk sizes a case is run at: the backend's pool, of them those the kernel
    declares (a plugin's ``Capabilities.tiles["chunk_size"]``)."""
    own = ctx.case.params["chunk_size"]
    pool = INTERPRETER_CHUNKS if ctx.backend.interpret else CHUNK_SIZES
    declared = ctx.target.library.tiles("chunk_size", ctx.backend)
    return tuple(c for c in pool if c != own and (declared is None or c in declared))


def _chunk_runs(ctx: Context, selector: int, prop: str) -> dict[int, Launch] | Finding:
    """The case run at every other chunk size of the backend's pool (each launched once for the
    properties that compare with it), or the ``crash`` finding of ``prop`` for a run that raised
    (``Context.derived``)."""
    if _skipped(ctx, selector):
        return {}
    runs = {}
    for c in _chunk_sizes(ctx):
        run = ctx.derived(
            ctx.case.replace(chunk_size=c),
            prop=prop,
            what=f"with chunk_size={c}",
            share=("simple_gla", "chunk_size", c),
        )
        if isinstance(run, Finding):
            return run
        runs[c] = run
    return runs


def _finite_every_chunk(ctx: Context, selector: Any) -> Finding | None:
    """No NaN/Inf for finite inputs at any chunk size (where the oracle is finite)."""
    runs = _chunk_runs(ctx, selector, "finite-every-chunk")
    if isinstance(runs, Finding):
        return runs
    for c, run in runs.items():
        f = _nonfinite(ctx, run.outputs, "finite-every-chunk", f"with chunk_size={c}")
        if f is not None:
            f.details["chunk_size"] = c
            return f
    return None


def _chunk_independence(ctx: Context, selector: Any) -> Finding | None:
    """The result does not depend on the chunk size beyond both runs' per-element bounds (each
    run is within its own bound of the oracle)."""
    own = ctx.case.params["chunk_size"]
    runs = _chunk_runs(ctx, selector, "chunk-independence")
    if isinstance(runs, Finding):
        return runs
    mine = bounds(ctx.case, device=ctx.ref_device, reference=ctx.oracle)
    for c, run in runs.items():
        other = bounds(ctx.case, chunk=c, device=ctx.ref_device, reference=ctx.oracle)
        for name in ctx.oracle:
            f = runs_agree(
                ctx,
                "chunk-independence",
                f"chunk_size={c} vs {own}",
                name,
                run.outputs[name],
                ctx.clean.outputs[name],
                mine[name] + other[name],
                ACCURACY,
                chunk_size=c,
            )
            if f is not None:
                return f
    return None


def _slice_case(
    case: Case,
    rows: slice,
    t0: int,
    t1: int,
    *,
    h0: np.ndarray | None,
    dht: np.ndarray | None,
    final: bool,
) -> Case:
    """Tokens ``[t0, t1)`` of the batch ``rows`` as a case without ``cu_seqlens``, with the given
    initial state (and, for gradients, final-state gradient)."""
    inputs: dict[str, np.ndarray] = {}
    for name in ("q", "k", "v", "do", "g"):
        if name in case.inputs:
            inputs[name] = np.ascontiguousarray(case.inputs[name][rows, t0:t1])
    if "g_gamma" in case.inputs:
        inputs["g_gamma"] = case.inputs["g_gamma"]
    if h0 is not None:
        inputs["h0"] = np.ascontiguousarray(h0, np.float32)
    if dht is not None and "do" in case.inputs:
        inputs["dht"] = np.ascontiguousarray(dht, np.float32)
    params = dict(case.params)
    if "output_final_state" in params:
        params["output_final_state"] = final
    return Case(inputs, params, case.recipe)


def _state_continuation(ctx: Context, params: Any) -> Finding | None:
    """Running ``T1`` tokens and then the rest from the returned state equals running them all.

    Forward: ``o`` and ``ht`` of the two pieces (the second starting from the first's ``ht``).
    Backward: the second piece (from the exact state after ``T1``, rounded to fp32) returns
    ``dh0``, which is the first piece's ``dht``; the pieces' gradients are those of the whole.
    Each element may differ by the whole run's bound, its piece's bound, and what the error of
    the state handed over (the first piece's ``ht`` bound forward; the fp32 rounding of the state,
    and the second piece's ``dh0`` bound backward) does to it (:func:`propagated`).
    """
    selector, frac = params
    if _skipped(ctx, selector):
        return None
    length = ctx.case.inputs["q"].shape[1]
    t1 = max(1, min(length - 1, round(float(frac) * length)))
    pieces = _pieces_forward if kind_of(ctx.case) == "fwd" else _pieces_backward
    got = pieces(ctx, t1)
    if isinstance(got, Finding):
        return got
    return _pieces_agree(ctx, t1, got)


_PROP_CONTINUATION = "state-continuation"


def _continuable(ctx: Context) -> bool:
    """Whether the kernel can run the pieces of a state continuation on this backend: it takes
    an initial state, and returns the final state (forward) or takes its gradient (backward); a
    plugin's kernel may declare neither (``Library.capabilities``)."""
    needs = ("initial_state", "final_state" if kind_of(ctx.case) == "fwd" else "dht")
    return all(ctx.target.library.supports(f, ctx.backend) for f in needs)


@dataclasses.dataclass
class _Piece:
    """One piece of a split run: its outputs and what each may differ by beyond the whole run's
    bound (its own bound plus the handed-over state's error carried through it)."""

    outputs: Mapping[str, np.ndarray]
    allowance: dict[str, Any]


def _piece(run: Any, bound: Mapping[str, Any], carried: Mapping[str, Any]) -> _Piece:
    names = set(bound) | set(carried)
    return _Piece(run.outputs, {k: bound.get(k, 0.0) + carried.get(k, 0.0) for k in names})


def _pieces_forward(ctx: Context, t1: int) -> tuple[_Piece, _Piece] | Finding:
    """Tokens ``[0, t1)`` from the case's ``h0``, then the rest from the first piece's ``ht``."""
    case, dev, length = ctx.case, ctx.ref_device, ctx.case.inputs["q"].shape[1]
    first = _slice_case(case, slice(None), 0, t1, h0=case.inputs.get("h0"), dht=None, final=True)
    run1 = ctx.derived(first, prop=_PROP_CONTINUATION, what=f"tokens [0, {t1})")
    if isinstance(run1, Finding):
        return run1
    b1 = bounds(first, device=dev)
    final = case.params["output_final_state"]
    second = _slice_case(
        case, slice(None), t1, length, h0=run1.outputs["ht"], dht=None, final=final
    )
    run2 = ctx.derived(
        second, prop=_PROP_CONTINUATION, what=f"tokens [{t1}, {length}) from the state after {t1}"
    )
    if isinstance(run2, Finding):
        return run2
    carried = propagated(second, h0_error=b1["ht"], device=dev)
    return _piece(run1, b1, {}), _piece(run2, bounds(second, device=dev), carried)


def _pieces_backward(ctx: Context, t1: int) -> tuple[_Piece, _Piece] | Finding:
    """Tokens ``[t1, T)`` from the exact state after ``t1`` (rounded to fp32) first, then
    ``[0, t1)`` with the second piece's ``dh0`` as its ``dht``."""
    case, dev, length = ctx.case, ctx.ref_device, ctx.case.inputs["q"].shape[1]
    exact = _exact_state(case, t1)
    second = _slice_case(
        case,
        slice(None),
        t1,
        length,
        h0=exact.astype(np.float32),
        dht=case.inputs.get("dht"),
        final=False,
    )
    run2 = ctx.derived(
        second, prop=_PROP_CONTINUATION, what=f"tokens [{t1}, {length}) from the state after {t1}"
    )
    if isinstance(run2, Finding):
        return run2
    b2 = bounds(second, device=dev)
    # the handed-over state is the exact one rounded to fp32 once
    rounding = U32 * np.abs(exact) + 2.0**-149
    p2 = propagated(second, h0_error=rounding, device=dev)
    first = _slice_case(
        case, slice(None), 0, t1, h0=case.inputs.get("h0"), dht=run2.outputs["dh0"], final=False
    )
    run1 = ctx.derived(first, prop=_PROP_CONTINUATION, what=f"tokens [0, {t1})")
    if isinstance(run1, Finding):
        return run1
    p1 = propagated(first, dht_error=b2["dh0"], device=dev)
    return _piece(run1, bounds(first, device=dev), p1), _piece(run2, b2, p2)


def _pieces_agree(ctx: Context, t1: int, pieces: tuple[_Piece, _Piece]) -> Finding | None:
    """Each output of the two pieces against the whole run's: the final state from the piece
    that returns it (``ht`` the second, ``dh0`` the first), the rest joined along the tokens."""
    one, two = pieces
    length = ctx.case.inputs["q"].shape[1]
    whole = bounds(ctx.case, device=ctx.ref_device, reference=ctx.oracle)
    for name in ctx.oracle:
        if name in ("ht", "dh0"):
            piece = two if name == "ht" else one
            got, tol = piece.outputs[name], whole[name] + piece.allowance.get(name, 0.0)
        else:
            got = np.concatenate([one.outputs[name], two.outputs[name]], axis=1)
            tol = whole[name] + np.concatenate(
                [
                    np.broadcast_to(p.allowance.get(name, 0.0), p.outputs[name].shape)
                    for p in (one, two)
                ],
                axis=1,
            )
        f = runs_agree(
            ctx,
            _PROP_CONTINUATION,
            f"tokens [0, {t1}) then [{t1}, {length})",
            name,
            got,
            ctx.clean.outputs[name],
            tol,
            ACCURACY,
            split=t1,
        )
        if f is not None:
            return f
    return None


def _exact_state(case: Case, t1: int) -> np.ndarray:
    """The float64 state after ``t1`` tokens of every batch row ``[B, H, K, V]`` (the blocked
    form, as the oracle)."""
    import torch

    from oracles.simple_gla import simple_gla_blocked

    t = {
        k: torch.from_numpy(np.asarray(v[:, :t1], np.float64))
        for k, v in case.inputs.items()
        if k in ("q", "k", "v", "g")
    }
    h0 = case.inputs.get("h0")
    gamma = case.inputs.get("g_gamma")
    _, ht = simple_gla_blocked(
        t["q"],
        t["k"],
        t["v"],
        g=t.get("g"),
        g_gamma=None if gamma is None else torch.from_numpy(gamma.astype(np.float64)),
        scale=case.params["scale"],
        initial_state=None if h0 is None else torch.from_numpy(h0.astype(np.float64)),
    )
    return ht.numpy()


def _varlen_alone(ctx: Context, params: Any) -> Finding | None:
    """A packed non-empty sequence (drawn) gives what it gives run alone (its own h0/dht, no
    cu_seqlens): element by element within both runs' bounds (the same exact values, chunked
    alike). An empty sequence alone would be a call of no tokens, an input of its own (as the
    jagged family's ``segment-alone`` takes non-empty segments only): a bug-free planted
    kernel that handles empty sequences in a packed batch but not a call of none came as two
    ``crash`` rows on an H200 through it."""
    selector, pick = params
    if _skipped(ctx, selector):
        return None
    case = ctx.case
    cu = case.inputs["cu_seqlens"]
    nonempty = [j for j in range(len(cu) - 1) if int(cu[j + 1]) > int(cu[j])]
    if not nonempty:
        return None
    i = nonempty[int(pick) % len(nonempty)]
    bos, eos = int(cu[i]), int(cu[i + 1])
    h0 = case.inputs["h0"][i : i + 1] if "h0" in case.inputs else None
    dht = case.inputs["dht"][i : i + 1] if "dht" in case.inputs else None
    alone = _slice_case(
        case,
        slice(0, 1),
        bos,
        eos,
        h0=h0,
        dht=dht,
        final=bool(case.params.get("output_final_state")),
    )
    what = f"sequence {i} (tokens [{bos}, {eos})) alone"
    run = ctx.derived(alone, prop="varlen-alone", what=what)
    if isinstance(run, Finding):
        return run

    def part(a: np.ndarray, name: str) -> np.ndarray:
        return a[i : i + 1] if name in ("ht", "dh0") else a[:, bos:eos]

    def packed(name: str) -> Callable[[tuple[int, ...]], tuple[int, ...]]:
        """An index of the sequence alone -> the packed output's."""
        if name in ("ht", "dh0"):
            return lambda j: (i + j[0], *j[1:])
        return lambda j: (j[0], bos + j[1], *j[2:])

    packed_bound = bounds(case, device=ctx.ref_device, reference=ctx.oracle)
    ref = {name: part(o, name) for name, o in ctx.oracle.items()}
    alone_bound = bounds(alone, device=ctx.ref_device, reference=ref)
    for name in ctx.oracle:
        tol = part(packed_bound[name], name) + alone_bound[name]
        f = runs_agree(
            ctx,
            "varlen-alone",
            what,
            name,
            run.outputs[name],
            part(ctx.clean.outputs[name], name),
            tol,
            ACCURACY,
            where=packed(name),
            sequence=i,
        )
        if f is not None:
            return f
    return None


# The cross-implementation bound (seed 004, generalised): on the same inputs each language's error
# against fp64, in units of each element's fp32 bound, is at most CROSS_FACTOR times the other's
# worst plus a floor. Both kernels evaluate the same sums with fp32 products in different orders,
# so their errors are of one size, except where an implementation-dependent rounding dominates:
# the prefix sums of the log decays (the Triton kernel scans, the Pallas kernel sums each prefix
# as a masked row sum) differ in the exponents, which the floor allows (the exponent part of the
# element's bound, a MX + MB), plus CROSS_FLOOR u of the element's magnitude, both runs' output
# roundings and flushed subnormals. Measured: see kernels/simple_gla/README.md.
CROSS_FACTOR = 8.0


CROSS_FLOOR = 16.0


PEERS = {
    "triton": "pallas-gpu",
    "pallas-gpu": "triton",
    "triton-interpret": "pallas-interpret",
    "pallas-interpret": "triton-interpret",
}


def _peer(ctx: Context) -> Backend | None:
    """The other language's backend on this machine; None for a mutant (its peer carries the same
    planted bug, so comparing the two says nothing about either)."""
    if ctx.target.is_mutant:
        return None
    name = PEERS.get(ctx.backend.name)
    if name is None:
        return None
    try:
        peer = get_backend(name)
    except ValueError:
        return None
    if not peer.available or peer.impl not in ctx.target.kernels:
        return None
    return peer


def _cross_implementation(ctx: Context, selector: Any) -> Finding | None:
    """This language's error is at most c x the other language's (plus a floor), per element in
    units of the element's own bound."""
    if _skipped(ctx, selector):
        return None
    peer = _peer(ctx)
    assert peer is not None
    other = ctx.derived(
        None,
        backend=peer,
        prop="cross-implementation",
        what=f"the {peer.impl} kernel on {peer.name}, the peer compared with",
    )
    if isinstance(other, Finding):
        return other
    model = error_model(ctx.case, device=ctx.ref_device)
    spec = output_spec(ctx.case)
    for name, o in ctx.oracle.items():
        mine = to_float64(ctx.clean.outputs[name])
        theirs = to_float64(other.outputs[name])
        finite = np.isfinite(o)
        if not np.isfinite(theirs[finite]).all():
            continue  # the peer is broken here; its own run reports it
        with np.errstate(invalid="ignore"):
            err_mine = np.where(finite, np.abs(mine - o), 0.0)
        err_mine = np.where(np.isnan(err_mine), np.inf, err_mine)
        err_theirs = np.where(finite, np.abs(theirs - o), 0.0)
        terms = model.terms[name]
        unit = terms.fp32
        rho = float(excess(err_theirs, unit).max(initial=0.0))
        store = model.bound(name, spec[name][1], o) - terms.computed
        floor = CROSS_FLOOR * U32 * terms.m0 + terms.weights + terms.flush + 2 * store
        tol = CROSS_FACTOR * rho * unit + floor
        ratio = excess(err_mine, tol)
        if ratio.size and ratio.max() > 1.0:
            idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(ratio)), ratio.shape))
            return ctx.finding(
                ACCURACY,
                "cross-implementation",
                f"{ctx.backend.name} error {err_mine[idx]:.3g} at {name}[{', '.join(map(str, idx))}] "
                f"> {CROSS_FACTOR:g} x {peer.name}'s worst error ({rho:.3g} of its bound) x this "
                f"element's bound {unit[idx]:.3g} + floor {floor[idx]:.3g}",
                output=name,
                index=idx,
                kernel_value=float(mine[idx]),
                oracle_value=float(o[idx]),
                error=float(err_mine[idx]),
                tolerance=float(tol[idx]),
                details={"peer": peer.name, "peer_error_in_bounds": rho},
            )
    return None


_SELECTOR = st.integers(0, SAMPLED - 1)


PROPERTIES = (
    Property(
        "finite-every-chunk",
        _finite_every_chunk,
        _SELECTOR,
        description="no NaN/Inf for finite inputs at any chunk size",
    ),
    Property(
        "chunk-independence",
        _chunk_independence,
        _SELECTOR,
        description="the result does not depend on chunk_size beyond the derived bounds",
    ),
    Property(
        "state-continuation",
        _state_continuation,
        st.tuples(_SELECTOR, st.sampled_from((0.5, 0.25, 0.75))),
        applies=lambda ctx: (
            "cu_seqlens" not in ctx.case.inputs
            and ctx.case.inputs["q"].shape[1] >= 2
            and _continuable(ctx)
        ),
        description="running T1 then T2 from the returned state equals running T1 + T2",
    ),
    Property(
        "varlen-alone",
        _varlen_alone,
        st.tuples(_SELECTOR, st.integers(0, 7)),
        applies=lambda ctx: "cu_seqlens" in ctx.case.inputs,
        description="every packed sequence gives what it gives alone",
    ),
    Property(
        "cross-implementation",
        _cross_implementation,
        _SELECTOR,
        applies=lambda ctx: _peer(ctx) is not None,
        description="each language's error is at most c x the other's on the same inputs",
    ),
)


# Costs and baselines ------------------------------------------------------------------------------

# One (program, chunk, tile pair) step is ~60 interpreted tl operations, ~10 program-tiles of a
# row softmax (the unit of Search.interpret_cost).
INTERPRET_STEP_COST = 10.0


def interpret_cost(case: Case, *, tile: int = TILE) -> float:
    """Programs x chunks x tile pairs per chunk, in program-tile units: what the interpreters'
    time scales with (the backward does about three times the forward's work). ``tile``: the
    kernel's rows per tile (the fused kernels' 64; the split form's 16 or 32)."""
    chunk = case.params["chunk_size"]
    nb = max(1, chunk // tile)
    heads = case.inputs["q"].shape[2]
    chunks = sum(max(1, -(-n // chunk)) for n in seq_lengths(case))
    work = heads * chunks * nb * (nb + 1) / 2
    return INTERPRET_STEP_COST * work * (3.0 if kind_of(case) == "bwd" else 1.0)


# A token of the recurrence is ~8 interpreted tl operations forward, ~25 backward (its three
# passes), against ~60 for a tile pair of the chunked kernels.
RECURRENT_TOKEN_COST = 8.0 / 60.0


def recurrent_interpret_cost(case: Case) -> float:
    """Programs x tokens: the recurrence's interpreter time (in the units of
    :func:`interpret_cost`)."""
    heads = case.inputs["q"].shape[2]
    tokens = sum(max(1, n) for n in seq_lengths(case))
    return (
        INTERPRET_STEP_COST
        * RECURRENT_TOKEN_COST
        * heads
        * tokens
        * (3.0 if kind_of(case) == "bwd" else 1.0)
    )


def split_interpret_cost(case: Case) -> float:
    """:func:`interpret_cost` with the split form's tiles, plus its extra state passes."""
    from kernels.simple_gla.split import split_tile

    return 1.5 * interpret_cost(case, tile=split_tile(case.params["chunk_size"]))


def _baseline_case(
    seed: int,
    shape: tuple[int, int, int, int, int],
    dtype: str,
    chunk: int,
    gates: bool,
    kind: str,
    tag: dict[str, Any],
) -> Case:
    from fuzz.arrays import np_dtype
    from kernels.simple_gla import alibi_g_gamma

    b, t, h, k_dim, v_dim = shape
    rng = np.random.default_rng(seed)
    dt = np_dtype(dtype)
    inputs = {
        "q": rng.standard_normal((b, t, h, k_dim)).astype(dt),
        "k": rng.standard_normal((b, t, h, k_dim)).astype(dt),
        "v": rng.standard_normal((b, t, h, v_dim)).astype(dt),
    }
    if gates:
        x = rng.standard_normal((b, t, h))
        inputs["g"] = (-np.logaddexp(0.0, -x)).astype(np.float32)  # log(sigmoid(randn))
    else:
        inputs["g_gamma"] = np.array(alibi_g_gamma(h), np.float32)
    inputs["h0"] = rng.standard_normal((b, h, k_dim, v_dim)).astype(np.float32)
    params: dict[str, Any] = {"dtype": dtype, "chunk_size": chunk, "scale": None}
    if kind == "fwd":
        params["output_final_state"] = True
    else:
        inputs["do"] = rng.standard_normal((b, t, h, v_dim)).astype(dt)
        inputs["dht"] = rng.standard_normal((b, h, k_dim, v_dim)).astype(np.float32)
    return Case(inputs, params, {"baseline": tag, "seed": seed})


def baseline_randn(kind: str):
    def make(seed: int, scale: str) -> Case:
        """fla-test style: one default shape, randn values, ALiBi g_gamma (even seeds) or
        log-sigmoid gates (odd seeds), an initial state and the final state, chunk 64."""
        shape = (1, 100, 2, 16, 16) if scale == "small" else (2, 1024, 16, 64, 64)
        return _baseline_case(seed, shape, "float32", 64, seed % 2 == 1, kind, {"kind": "randn"})

    return make


def baseline_grid(kind: str):
    def make(scale: str) -> list[Case]:
        """fla's test grid for chunked simple GLA: a few (B, T, H, K, V) with T around and off
        multiples of the chunk, chunk 64, three dtypes, ALiBi g_gamma and log-sigmoid gates."""
        shapes = (
            [(1, 63, 1, 16, 16), (2, 100, 2, 16, 32), (1, 65, 2, 32, 16)]
            if scale == "small"
            else [
                (1, 63, 1, 64, 64),
                (2, 500, 3, 60, 64),
                (2, 1000, 3, 64, 64),
                (3, 1024, 4, 128, 128),
                (4, 2048, 8, 64, 64),
            ]
        )
        cases = []
        for dtype in ("float32", "float16", "bfloat16"):
            for shape in shapes:
                for gates in (False, True):
                    cases.append(_baseline_case(0, shape, dtype, 64, gates, kind, {"kind": "grid"}))
        return cases

    return make


# Real targets -------------------------------------------------------------------------------------

KERNELS = "kernels.simple_gla.{impl}"
SIMPLE_GLA_FWD = register(
    Target(
        name="simple_gla_fwd",
        family="simple_gla",
        kernels=entries(fwd_entry, real_modules(KERNELS)),
        oracle=oracle,
        naive=naive,
        strategy=simple_gla_fwd_cases,
        tolerance=TOLERANCE,
        error_bound=error_bound,
        hazards=HAZARDS,
        fixed_outputs=fixed_outputs,
        poison=poison,
        properties=PROPERTIES,
        outputs=output_spec,
        description="chunked simple GLA forward (o, ht), g_gamma or per-token gates, varlen",
        search=Search(targeting=False, interpret_cost=interpret_cost),
        baselines=Baselines(randn=baseline_randn("fwd"), grid=baseline_grid("fwd")),
    )
)
SIMPLE_GLA_BWD = register(
    dataclasses.replace(
        SIMPLE_GLA_FWD,
        name="simple_gla_bwd",
        kernels=entries(bwd_entry, real_modules(KERNELS)),
        strategy=simple_gla_bwd_cases,
        baselines=Baselines(randn=baseline_randn("bwd"), grid=baseline_grid("bwd")),
        description="chunked simple GLA backward (dq, dk, dv, dg, dh0)",
    )
)


# Reformulations -----------------------------------------------------------------------------------


def _register_reformulations() -> None:
    """Correct implementations computed another way (kernels/simple_gla/recurrent.py, split.py):
    real targets, so that every property (the per-element bound first) must hold for them too;
    Triton only (the fused Pallas kernel is already a second chunked implementation, with its
    own prefix sums, compared with Triton's by the cross-implementation property)."""
    forms = (
        (
            "recurrent",
            recurrent_interpret_cost,
            "the token recurrence (fp32 state, one exp per token)",
        ),
        (
            "split",
            split_interpret_cost,
            "chunked in passes (states, then chunks in parallel), 16/32-row tiles, other loop "
            "orders",
        ),
    )
    for form, cost, what in forms:
        module = importlib.import_module(f"kernels.simple_gla.{form}")
        for real, entry, kind in (
            (SIMPLE_GLA_FWD, fwd_entry, "forward"),
            (SIMPLE_GLA_BWD, bwd_entry, "backward"),
        ):
            register(
                variant(
                    real,
                    f"{real.name}_{form}",
                    {"triton": module},
                    entry,
                    search=dataclasses.replace(real.search, interpret_cost=cost),
                    description=f"reformulation: simple GLA {kind}, {what}",
                )
            )


_register_reformulations()


# Mutants ------------------------------------------------------------------------------------------

# kernels/simple_gla/mutants.py: simple_gla_{fwd,bwd}_mutant_<name>, each where its record
# expects it, with the class and shrink bound there.
register_mutants(SIMPLE_GLA_FWD, KERNELS, fwd_entry, MUTANTS)
register_mutants(SIMPLE_GLA_BWD, KERNELS, bwd_entry, MUTANTS)
