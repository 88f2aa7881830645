"""The attention family: dense, packed variable-length and decode attention, and the mutants.

Targets (each in Triton and Pallas):

    attention          dense batches: causal, window, key padding, ALiBi, softcap, GQA, any mix
    attention_varlen   packed sequences (cu_seqlens, empty and length-1 sequences, guard rows)
    attention_decode   one query per sequence against a cache (cache_len), split-KV

Outputs ``o`` (the input dtype) and ``lse`` (float32). Besides the generic properties, every target
checks the seed-003 gates and the structural equivalences that apply to it (see ``PROPERTIES``).
The conventions are documented in ``kernels/attention/README.md``.

Verdicts against the fp64 oracle use a per-element error bound (``error_bound``, computed by
``oracles.attention.attention_error_bound``): what any implementation with fp32 statistics may
lose at that element, from the dot products' worst case, the condition of the softmax at the
element (``oracles.error_model.softmax_spread``), the exponentials and their rescales, the sums,
a split-KV merge and the conversions to the input dtype; derived in the README's "Error bounds".
Correct reformulations (``kernels/attention/reformulations.py``: exp2 domain, two passes, reversed
key order, a merge through the LSE) are real targets and must pass; precision-loss mutants must
be found.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from hypothesis import strategies as st

from fuzz import failures as F
from fuzz.arrays import finfo, np_dtype, special_value, to_float64
from fuzz.case import Case
from fuzz.compare import Tolerance
from fuzz.failures import Finding
from fuzz.kit import (
    entries,
    host,
    per_case,
    real_modules,
    register_mutants,
    register_reformulations,
    torch_inputs,
)
from fuzz.properties import Context, FirstOutput, Launch, Property, excess, runs_agree
from fuzz.target import Baselines, Hazard, Search, Target, register
from kernels.attention.mutants import MUTANTS
from kernels.attention.reformulations import REFORMULATIONS
from oracles.attention import (
    AttentionBound,
    attention_error_bound,
    attention_naive,
    attention_reference,
    query_offset,
    sequences,
)
from oracles.error_model import TF32_UNIT
from strategies.attention import attention_cases, decode_cases, varlen_cases

FP32_EXP_MAX = finfo("float32").log_max  # 88.72
# Verdicts use the per-element analytic bound (``error_bound``); the ratio rule is not applied
# (``ratio_caps_analysis`` off): in fp32 the naive reference rounds its dot products as much as a
# kernel does, so its error is as often lucky as not, and in fp16/bf16 it rounds the scores to
# the input dtype, which no kernel here does. Compiled and interpreted twins may differ by twice
# the bound.
TOLERANCE = {"o": Tolerance(), "lse": Tolerance()}
MIN_TILE = 16  # the fewest keys an attention kernel of this family takes per step (tiles >= 16)


KernelRun = Callable[..., dict[str, Any]]


# Contract: entry points, outputs, structure of a case ---------------------------------------------


def _window(params: Mapping[str, Any]) -> tuple[int, int] | None:
    w = params.get("window")
    return None if w is None else (int(w[0]), int(w[1]))


def _alibi(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Any:
    if params.get("alibi") is None:
        return None
    # 'standard': the kernel computes the standard slopes itself (kernels.alibi); the oracle uses
    # the strategy's independently computed ones (inputs["alibi_slopes"]).
    return "standard" if params["alibi"] == "standard" else inputs["alibi_slopes"]


def dense_entry(module: types.ModuleType) -> KernelRun:
    """The entry point of a dense/varlen attention module (real or mutant, Triton or Pallas)."""

    def run(
        inputs: Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        out: Mapping[str, Any] | None,
        interpret: bool,
    ) -> dict[str, Any]:
        o, lse = module.attention(
            inputs["q"],
            inputs["k"],
            inputs["v"],
            scale=params.get("scale"),
            causal=bool(params.get("causal", False)),
            window=_window(params),
            key_lengths=inputs.get("key_lengths"),
            cu_seqlens_q=inputs.get("cu_seqlens_q"),
            cu_seqlens_k=inputs.get("cu_seqlens_k"),
            alibi_slopes=_alibi(inputs, params),
            softcap=params.get("softcap"),
            block_q=params["block_q"],
            block_k=params["block_k"],
            out=None if out is None else out["o"],
            lse_out=None if out is None else out["lse"],
            interpret=interpret,
        )
        return {"o": o, "lse": lse}

    return run


def decode_entry(module: types.ModuleType) -> KernelRun:
    """The entry point of a decode attention module (Triton or Pallas)."""

    def run(
        inputs: Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        out: Mapping[str, Any] | None,
        interpret: bool,
    ) -> dict[str, Any]:
        o, lse = module.attention_decode(
            inputs["q"],
            inputs["k"],
            inputs["v"],
            inputs["cache_len"],
            scale=params.get("scale"),
            window=_window(params),
            alibi_slopes=_alibi(inputs, params),
            softcap=params.get("softcap"),
            num_splits=params["num_splits"],
            block_k=params["block_k"],
            out=None if out is None else out["o"],
            lse_out=None if out is None else out["lse"],
            interpret=interpret,
        )
        return {"o": o, "lse": lse}

    return run


def output_spec(case: Case) -> dict[str, tuple[tuple[int, ...], str]]:
    """The outputs of ``case``: ``o`` like ``q`` in the input dtype, ``lse [B, Hq, Tq]`` fp32."""
    q = case.inputs["q"]
    return {"o": (tuple(q.shape), case.params["dtype"]), "lse": (tuple(q.shape[:3]), "float32")}


def _align(case: Case) -> str:
    """Where the case's queries sit among its keys: ``bottom-right`` (this project's kernels), or
    a plugin kernel's declared convention (``Conventions.causal``: the case's ``align``)."""
    return str(case.params.get("align", "bottom-right"))


def visible_count(
    q_len: int,
    k_len: int,
    *,
    causal: bool,
    window: tuple[int, int] | None,
    align: str = "bottom-right",
) -> np.ndarray:
    """int ``[q_len]``: how many keys each query row sees, in closed form (the count of
    :func:`oracles.attention.visible`'s rows, without its ``q_len x k_len`` matrix: the host
    asks for it on every example, at every length). Query ``i`` sits at key position
    ``p = i + k_len - q_len`` (bottom-right; ``p = i`` top-left) and sees the keys ``j`` in
    ``[0, k_len)`` with ``j <= p`` (causal) and ``p - left <= j <= p + right`` (a window side < 0
    is unbounded)."""
    pos = np.arange(q_len, dtype=np.int64) + query_offset(q_len, k_len, align)
    lo = np.zeros(q_len, np.int64)
    hi = np.full(q_len, k_len - 1, np.int64)
    if causal:
        hi = np.minimum(hi, pos)
    if window is not None:
        left, right = window
        if left >= 0:
            lo = np.maximum(lo, pos - left)
        if right >= 0:
            hi = np.minimum(hi, pos + right)
    return np.maximum(hi - lo + 1, 0)


Structure = tuple[list[tuple[int, int, int, int, int]], np.ndarray]


@per_case
def _structure(case: Case) -> Structure:
    """The case's sequences and each query row's visible-key count (cached per case: the
    hazards, properties and fixed outputs of one example all ask)."""
    import torch

    q, k = case.inputs["q"], case.inputs["k"]
    t = {n: torch.from_numpy(np.asarray(a)) for n, a in case.inputs.items() if a.dtype.kind in "iu"}
    lengths = t.get("key_lengths", t.get("cache_len"))
    found = sequences(
        q.shape[0],
        q.shape[2],
        k.shape[2],
        key_lengths=lengths,
        cu_seqlens_q=t.get("cu_seqlens_q"),
        cu_seqlens_k=t.get("cu_seqlens_k"),
    )
    counts = np.zeros((q.shape[0], q.shape[2]), np.int64)
    causal, window = bool(case.params.get("causal", False)), _window(case.params)
    for b, qs, lq, _, lk in found:
        counts[b, qs : qs + lq] = visible_count(
            lq, lk, causal=causal, window=window, align=_align(case)
        )
    return found, counts


def seqs(case: Case) -> list[tuple[int, int, int, int, int]]:
    """``(b, q_start, q_len, k_start, k_len)`` of every sequence of a case."""
    return _structure(case)[0]


def _causal(case: Case) -> bool:
    return bool(case.params.get("causal", False))


def visible_counts(case: Case) -> np.ndarray:
    """int ``[B, Tq]``: visible keys of each query row."""
    return _structure(case)[1]


def no_key_rows(case: Case) -> np.ndarray:
    """bool ``[B, Tq]``: query rows with no visible key."""
    return visible_counts(case) == 0


def _masked_key_rows(case: Case) -> np.ndarray:
    """bool ``[B, Tk]``: key rows outside the data (past a key length / cache length, or after
    the last packed sequence): no query may see them."""
    k = case.inputs["k"]
    outside = np.ones((k.shape[0], k.shape[2]), bool)
    for b, _, _, ks, lk in seqs(case):
        outside[b, ks : ks + lk] = False
    return outside


def unseen_key_rows(case: Case) -> np.ndarray:
    """bool ``[B, Tk]``: key rows no query of the case can see: outside the data
    (``_masked_key_rows``), the keys of a sequence without queries, and the keys the oracle's
    visibility rules (``oracles.attention.visible``: causal, window, bottom-right alignment) hide
    from every query of their sequence (before a left window's reach)."""
    from oracles.attention import visible

    outside = _masked_key_rows(case)
    causal, window = _causal(case), _window(case.params)
    for b, _, lq, ks, lk in seqs(case):
        if lk == 0:
            continue
        if lq == 0:
            outside[b, ks : ks + lk] = True
            continue
        if not causal and window is None:
            continue  # every query sees every key of its sequence
        keep = visible(lq, lk, causal=causal, window=window, align=_align(case))
        seen = keep.any(dim=0).numpy()
        outside[b, ks : ks + lk] |= ~seen
    return outside


# Oracle and naive reference -----------------------------------------------------------------------


def _reference_kwargs(case: Case, t: Mapping[str, Any]) -> dict[str, Any]:
    p = case.params
    lengths = t.get("key_lengths", t.get("cache_len"))
    return {
        "scale": p.get("scale"),
        "causal": bool(p.get("causal", False)),
        "window": _window(p),
        "key_lengths": lengths,
        "cu_seqlens_q": t.get("cu_seqlens_q"),
        "cu_seqlens_k": t.get("cu_seqlens_k"),
        "alibi_slopes": t.get("alibi_slopes"),
        "softcap": p.get("softcap"),
        "align": _align(case),
    }


def oracle(case: Case, device: str) -> dict[str, np.ndarray]:
    t = torch_inputs(case, device)
    o, lse = attention_reference(t["q"], t["k"], t["v"], **_reference_kwargs(case, t))
    return {"o": host(o, device), "lse": host(lse, device)}


def naive(case: Case, device: str) -> dict[str, np.ndarray]:
    t = torch_inputs(case, device)
    o, lse = attention_naive(t["q"], t["k"], t["v"], **_reference_kwargs(case, t))
    return {"o": host(o, device), "lse": host(lse, device)}


# Error bound --------------------------------------------------------------------------------------


@per_case
def analysis(case: Case, device: str = "cpu") -> AttentionBound[np.ndarray]:
    """The case's error bounds (``oracles.attention.attention_error_bound``: the derivation is in
    ``kernels/attention/README.md``), as NumPy arrays; cached per case and device. A case whose
    ``fp32_dots`` param is ``tf32`` (a plugin's ``Conventions(fp32_dots=...)``) gets the bound of
    fp32 dots on TF32 operands."""
    t = torch_inputs(case, device)
    got = attention_error_bound(
        t["q"],
        t["k"],
        t["v"],
        **_reference_kwargs(case, t),
        dtype=case.params["dtype"],
        num_splits=int(case.params.get("num_splits") or 0),
        min_tile=MIN_TILE,
        dot_unit=TF32_UNIT if case.params.get("fp32_dots") == "tf32" else 0.0,
    )
    return AttentionBound(*(a.cpu().numpy() for a in got))


def error_bound(case: Case, device: str) -> dict[str, np.ndarray]:
    """``Target.error_bound``: each element's bound of ``o`` and ``lse`` (``analysis``)."""
    got = analysis(case, device)
    return {"o": got.o, "lse": got.lse}


# Hazards ------------------------------------------------------------------------------------------

_HAZARD_MAX_SCORES = 1 << 16


@per_case
def _lse64(case: Case) -> np.ndarray | None:
    """The fp64 log-sum-exp of a small case (None for cases too big to recompute on the CPU)."""
    q, k = case.inputs["q"], case.inputs["k"]
    work = q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2]
    return oracle(case, "cpu")["lse"] if work <= _HAZARD_MAX_SCORES else None


def _lse_high(case: Case) -> str | None:
    lse = _lse64(case)
    top = lse[np.isfinite(lse)].max(initial=-np.inf) if lse is not None else -np.inf
    if top > FP32_EXP_MAX:
        return f"log-sum-exp {top:.4g} > {FP32_EXP_MAX:.2f}: exp(s) overflows fp32 unless the max is subtracted"
    return None


def _lse_low(case: Case) -> str | None:
    lse = _lse64(case)
    low = lse[np.isfinite(lse)].min(initial=np.inf) if lse is not None else np.inf
    if low < -FP32_EXP_MAX:
        return f"log-sum-exp {low:.4g} < -{FP32_EXP_MAX:.2f}: sum(exp(s)) underflows fp32 without the max"
    return None


SENTINELS = (-1e4, -5e4, -6e4, -1e9)  # finite mask values seen in kernels (bug class 8)


def _lse_below_sentinel(case: Case) -> str | None:
    lse = _lse64(case)
    low = lse[np.isfinite(lse)].min(initial=np.inf) if lse is not None else np.inf
    below = [f"{v:g}" for v in SENTINELS if low <= v]
    if below:
        return (
            f"log-sum-exp {low:.4g}: every visible logit of a row is at or below the finite "
            f"sentinel(s) {', '.join(below)}; a key masked with one would outrank them all"
        )
    return None


def _no_key(case: Case) -> str | None:
    empty = no_key_rows(case)
    if empty.any():
        b, i = (int(x) for x in np.argwhere(empty)[0])
        return f"{int(empty.sum())} query row(s) with no visible key (first: batch {b}, row {i})"
    return None


def _single_key(case: Case) -> str | None:
    n = int((visible_counts(case) == 1).sum())
    return f"{n} query row(s) with exactly one visible key" if n else None


def _partial_tile(case: Case) -> str | None:
    bk = case.params["block_k"]
    tails = sorted({lk % bk for *_, lk in seqs(case) if lk % bk})
    if tails:
        return f"key counts leave partial last tiles of {tails} keys (block_k={bk})"
    return None


def _multi_tile(case: Case) -> str | None:
    bk = case.params["block_k"]
    n = max((lk for *_, lk in seqs(case)), default=0)
    return f"up to {n} keys > block_k={bk}: the running max crosses tiles" if n > bk else None


def _causal_bound(case: Case) -> str | None:
    bq, bk = case.params.get("block_q"), case.params["block_k"]
    if not _causal(case) or bq is None or bq <= bk:
        return None
    if max((lq for _, _, lq, _, _ in seqs(case)), default=0) > bk:
        return f"causal with block_q={bq} > block_k={bk}: a q block's keys span several k tiles"
    return None


def _q_longer(case: Case) -> str | None:
    if not _causal(case):
        return None
    n = sum(lq > lk for _, _, lq, _, lk in seqs(case))
    return f"{n} causal sequence(s) with more queries than keys ({_align(case)})" if n else None


def _gqa(case: Case) -> str | None:
    hq, hkv = case.inputs["q"].shape[1], case.inputs["k"].shape[1]
    return f"GQA: {hq} query heads share {hkv} kv head(s)" if hq != hkv else None


def _empty_seq(case: Case) -> str | None:
    s = seqs(case)
    n = sum(lk == 0 for *_, lk in s)
    return f"{n} sequence(s) with no key (length 0)" if n else None


def _alibi_range(case: Case) -> str | None:
    if "alibi_slopes" not in case.inputs:
        return None
    top = float(np.abs(case.inputs["alibi_slopes"].astype(np.float64)).max(initial=0.0))
    span = max((max(lq, lk) for _, _, lq, _, lk in seqs(case)), default=0)
    bias = top * max(span - 1, 0)
    if bias > FP32_EXP_MAX:
        return f"ALiBi bias reaches {bias:.4g} > {FP32_EXP_MAX:.2f} (slope {top:.3g})"
    return None


def _softcap_low(case: Case) -> str | None:
    cap = case.params.get("softcap")
    return f"softcap {cap:g} < 5: logits saturate at +-cap" if cap is not None and cap < 5 else None


def _guard_rows(case: Case) -> str | None:
    n = int(_masked_key_rows(case).sum())
    return (
        f"{n} key row(s) outside the data (past a length or after the last sequence)" if n else None
    )


def _empty_splits(case: Case) -> str | None:
    splits = case.params.get("num_splits")
    if splits is None:
        return None
    bk = case.params["block_k"]
    tiles = min((math.ceil(lk / bk) for *_, lk in seqs(case)), default=0)
    return (
        f"{splits} splits over as few as {tiles} key tile(s): splits without keys"
        if splits > tiles
        else None
    )


HAZARDS = (
    Hazard("lse-above-exp-range", _lse_high),
    Hazard("lse-below-exp-range", _lse_low),
    Hazard("below-finite-sentinel", _lse_below_sentinel),
    Hazard("row-without-visible-key", _no_key),
    Hazard("single-visible-key", _single_key),
    Hazard("partial-kv-tile", _partial_tile),
    Hazard("multi-kv-tile", _multi_tile),
    Hazard("causal-block-q-over-block-k", _causal_bound),
    Hazard("causal-more-queries-than-keys", _q_longer),
    Hazard("gqa", _gqa),
    Hazard("sequence-without-keys", _empty_seq),
    Hazard("alibi-beyond-exp-range", _alibi_range),
    Hazard("softcap-saturating", _softcap_low),
    Hazard("keys-outside-data", _guard_rows),
    Hazard("splits-without-keys", _empty_splits),
)


# Poisoning and fixed outputs ----------------------------------------------------------------------


def poison(case: Case, kind: str) -> Case | None:
    """Every input element no output can depend on set to the poison: the keys and values no
    query can see (``unseen_key_rows``), and the queries of rows without a visible key (their
    outputs are 0 and -inf whatever they hold). None if there is none."""
    unseen = unseen_key_rows(case)
    blind = no_key_rows(case)  # [B, Tq]
    if not unseen.any() and not blind.any():
        return None
    value = special_value(kind, case.params["dtype"])
    new = {}
    for name, rows in (("k", unseen), ("v", unseen), ("q", blind)):
        if rows.any():
            a = case.inputs[name].copy()
            a[np.broadcast_to(rows[:, None, :, None], a.shape)] = value
            new[name] = a
    return case.replace(inputs=new)


def fixed_outputs(case: Case) -> dict[str, np.ndarray]:
    """Rows with no visible key: ``o = 0`` and ``lse = -inf`` whatever the values."""
    empty = no_key_rows(case)  # [B, Tq]
    q = case.inputs["q"]
    lse = np.broadcast_to(empty[:, None, :], (q.shape[0], q.shape[1], q.shape[2]))
    return {"o": np.broadcast_to(lse[..., None], q.shape), "lse": lse}


# Properties ---------------------------------------------------------------------------------------


def _idx(index: tuple[int, ...]) -> str:
    return ", ".join(map(str, index))


def _equivalent(
    ctx: Context,
    prop: str,
    what: str,
    got: Mapping[str, np.ndarray],
    select: Callable[[np.ndarray], np.ndarray],
    cls: str,
    where: Callable[[tuple[int, ...]], tuple[int, ...]] | None = None,
) -> Finding | None:
    """Both outputs of a transformed run against the matching part of the clean run.

    The fp64 oracle gives the same numbers for both computations, and each run is within its
    tolerance of it, so they may differ by at most twice the tolerance (the kernels here agree
    bit for bit; ``tests/kernels`` checks that)."""
    first = FirstOutput(ctx, prop)
    for name in ("o", "lse"):
        if name not in ctx.oracle:
            continue  # a plugin kernel without a log-sum-exp (Conventions(lse="none"))
        tol = 2.0 * select(ctx.bound(name))
        first.add(
            runs_agree(
                ctx,
                prop,
                what,
                name,
                got[name],
                select(ctx.clean.outputs[name]),
                tol,
                cls,
                where=where,
            )
        )
    return first.finding


GATE_C = 2.0  # the power of two q is scaled by (and the scale divided by) in the gate launch


def _gate_case(case: Case) -> tuple[Case, bool]:
    """The case of the one launch the two seed-003 gates share: ``q * 2`` with ``scale / 2``
    (when both are exact: else ``q`` and ``scale`` as they are), and ``v`` with its last column set
    to 1. Output columns are independent sums ``sum_j p_j v[j, c]``, so column ``D - 1`` is then
    each row's probability sum, and the other columns must not move. Returns the case and whether
    q and the scale were scaled."""
    q = case.inputs["q"]
    d = q.shape[-1]
    scale = case.params.get("scale")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    with np.errstate(over="ignore"):
        cq = (q.astype(np.float64) * GATE_C).astype(q.dtype)
    new_scale = float(np.float32(scale) / np.float32(GATE_C))
    scaled = (
        np.array_equal(cq.astype(np.float64) / GATE_C, q.astype(np.float64))
        and float(np.float32(new_scale) * np.float32(GATE_C)) == float(np.float32(scale))
        and new_scale > finfo("float32").tiny
    )
    v = case.inputs["v"].copy()
    v[..., -1] = 1
    inputs = {**case.inputs, "v": v}
    params = dict(case.params)
    if scaled:
        inputs["q"] = cq
        params["scale"] = new_scale
    return Case(inputs, params, case.recipe), scaled


def _gate_launch(ctx: Context, prop: str) -> tuple[Launch | Finding, bool]:
    """The gate launch (:func:`_gate_case`), launched once for both gates, or the ``crash``
    finding of ``prop``; and whether q and the scale were scaled."""
    case, scaled = _gate_case(ctx.case)
    what = "with v[:, -1] = 1" + (f", q * {GATE_C:g} and scale / {GATE_C:g}" if scaled else "")
    return ctx.derived(case, prop=prop, what=what, share=("attention", "gate")), scaled


def _rows_sum_to_one(ctx: Context, _: Any) -> Finding | None:
    """Every row with a visible key has probabilities that sum to 1 (seed 003's gate 4): with
    ``v[:, D - 1] = 1`` the output's last column is that sum.

    Tolerance: ``AttentionBound.row_sum`` (``analysis``): the kernel forms ``sum_j p_j * 1`` and
    ``sum_j p_j`` from the same logits, so their rounding cancels; what remains are the
    exponentials (recomputed or rescaled apart), their arguments, the two sums of ``n`` terms,
    ``P`` rounded to the input dtype, a split-KV merge, the division and the output rounding.
    """
    launch, _ = _gate_launch(ctx, "rows-sum-to-one")
    if isinstance(launch, Finding):
        return launch
    o = to_float64(launch.outputs["o"][..., -1])  # [B, Hq, Tq]
    counts = np.broadcast_to(visible_counts(ctx.case)[:, None, :], o.shape)
    tol = analysis(ctx.case, ctx.ref_device).row_sum
    with np.errstate(invalid="ignore"):
        dev = np.where(counts > 0, np.abs(o - 1.0), 0.0)
    dev = np.where(np.isnan(dev), np.inf, dev)
    ratio = excess(dev, tol)
    if ratio.max(initial=0.0) <= 1.0:
        return None
    i = tuple(int(x) for x in np.unravel_index(int(np.argmax(ratio)), o.shape))
    cls = F.NAN if np.isnan(o[i]) else F.INF if np.isinf(o[i]) else F.ACCURACY
    where = (*i, ctx.case.inputs["q"].shape[-1] - 1)
    return ctx.finding(
        cls,
        "rows-sum-to-one",
        f"with v[:, -1] = 1, o[{_idx(where)}] = {o[i]:.8g}: the probabilities of row {i[2]} sum to "
        f"it, not 1 (tolerance {tol[i]:.3g})",
        output="o",
        index=where,
        kernel_value=float(o[i]),
        oracle_value=1.0,
        error=float(dev[i]),
        tolerance=float(tol[i]),
    )


def _scale_once(ctx: Context, _: Any) -> Finding | None:
    """Scaling ``q`` by 2 and ``scale`` by 1/2 changes nothing (seed 003's gate 1).

    Checked on the gate launch (``_gate_launch``): its output columns ``0 .. D-2`` and its LSE
    against the clean run; skipped where ``2 q`` or ``scale / 2`` would not be exact (overflow,
    underflow) and for ``D = 1`` (no column left but the LSE). Exact operands leave the oracle
    unchanged and make every logit the same real number: rounding commutes with power-of-two
    scaling, so a kernel that applies the scale once (before or after the product, folded with
    log2(e) or not) gives the same bits up to underflowing products, while one that applies it
    twice, or ignores an explicit one, moves every logit by a factor 2. Tolerance: twice the
    oracle tolerance (both runs are within it of the same oracle).
    """
    launch, scaled = _gate_launch(ctx, "scale-applied-once")
    if not scaled:
        return None  # 2 q or scale / 2 would not be exact: not an instance of the invariance
    if isinstance(launch, Finding):
        return launch
    what = f"with q * {GATE_C:g} and scale / {GATE_C:g}"
    first = FirstOutput(ctx, "scale-applied-once")
    for name in ("o", "lse"):
        if name not in ctx.oracle:
            continue
        got, want, tol = launch.outputs[name], ctx.clean.outputs[name], 2.0 * ctx.bound(name)
        if name == "o":
            got, want, tol = got[..., :-1], want[..., :-1], tol[..., :-1]
        first.add(runs_agree(ctx, "scale-applied-once", what, name, got, want, tol, F.ACCURACY))
    return first.finding


def _is_gqa(ctx: Context) -> bool:
    return ctx.case.inputs["q"].shape[1] != ctx.case.inputs["k"].shape[1]


def _gqa_mha(ctx: Context, _: Any) -> Finding | None:
    """GQA equals MHA with each kv head repeated for the query heads that share it."""
    case = ctx.case
    group = case.inputs["q"].shape[1] // case.inputs["k"].shape[1]
    rep = {n: np.repeat(case.inputs[n], group, axis=1) for n in ("k", "v")}
    run = ctx.derived(
        case.replace(inputs=rep), prop="gqa-equals-mha", what="with kv heads repeated"
    )
    if isinstance(run, Finding):
        return run
    return _equivalent(
        ctx,
        "gqa-equals-mha",
        f"MHA with kv heads repeated x{group}",
        run.outputs,
        lambda a: a,
        F.ACCURACY,
    )


def _has_padding(ctx: Context) -> bool:
    return "key_lengths" in ctx.case.inputs


def _padding_truncation(ctx: Context, pick: Any) -> Finding | None:
    """Key padding equals truncating the keys: batch element b alone, with its first
    ``key_lengths[b]`` keys and no padding, gives the padded batch's rows for b."""
    case = ctx.case
    lens = case.inputs["key_lengths"]
    b = int(pick) % lens.shape[0]
    n = int(lens[b])
    inputs = {k: v for k, v in case.inputs.items() if k != "key_lengths"}
    inputs["q"] = case.inputs["q"][b : b + 1]
    inputs["k"] = case.inputs["k"][b : b + 1, :, :n]
    inputs["v"] = case.inputs["v"][b : b + 1, :, :n]
    run = ctx.derived(
        Case(inputs, case.params, case.recipe),
        prop="key-padding-equals-truncation",
        what=f"batch {b} with its {n} keys alone",
    )
    if isinstance(run, Finding):
        return run
    return _equivalent(
        ctx,
        "key-padding-equals-truncation",
        f"batch element {b} truncated to its {n} keys",
        run.outputs,
        lambda a: a[b : b + 1],
        F.MASKING,
        lambda i: (b, *i[1:]),
    )


def _is_varlen(ctx: Context) -> bool:
    return "cu_seqlens_q" in ctx.case.inputs


def _varlen_alone(ctx: Context, pick: Any) -> Finding | None:
    """A packed sequence gives the same rows as that sequence run alone (dense, unpadded)."""
    case = ctx.case
    cq, ck = case.inputs["cu_seqlens_q"], case.inputs["cu_seqlens_k"]
    n_seq = cq.shape[0] - 1
    order = [(int(pick) + i) % n_seq for i in range(n_seq)]
    live = [n for n in order if cq[n + 1] > cq[n]]
    if not live:
        return None  # no sequence has a query
    n = live[0]
    q0, q1, k0, k1 = int(cq[n]), int(cq[n + 1]), int(ck[n]), int(ck[n + 1])
    inputs = {k: v for k, v in case.inputs.items() if not k.startswith("cu_seqlens")}
    inputs["q"] = case.inputs["q"][:, :, q0:q1]
    inputs["k"] = case.inputs["k"][:, :, k0:k1]
    inputs["v"] = case.inputs["v"][:, :, k0:k1]
    run = ctx.derived(
        Case(inputs, case.params, case.recipe),
        prop="varlen-equals-alone",
        what=f"sequence {n} alone",
    )
    if isinstance(run, Finding):
        return run
    return _equivalent(
        ctx,
        "varlen-equals-alone",
        f"sequence {n} ({q1 - q0} queries, {k1 - k0} keys) alone",
        run.outputs,
        lambda a: a[:, :, q0:q1],
        F.MASKING,
        lambda i: (i[0], i[1], q0 + i[2], *i[3:]),
    )


def _dense_entry(ctx: Context) -> KernelRun | None:
    """The dense attention kernel a decode step is compared with: the same library's (a plugin's
    ``siblings["attention"]``, None when it gave none), or the project's own."""
    if "attention" in ctx.target.library.siblings:
        return ctx.target.library.siblings["attention"]
    return DENSE_ENTRIES[ctx.backend.impl]


def _is_decode(ctx: Context) -> bool:
    return "cache_len" in ctx.case.inputs and _dense_entry(ctx) is not None


def _decode_last_row(ctx: Context, pick: Any) -> Finding | None:
    """A decode step equals the last row of the full causal computation: sequence b's query
    repeated against its cached keys, causal, through the dense kernel of the same language.

    The last ``min(cache_len[b], block_k)`` queries of the prefill only: bottom-right alignment
    puts them at the cache's last positions whatever the query count, so their rows are the full
    prefill's last rows, and a cache of thousands of keys costs one query tile, not a prefill.
    A sibling aligned top-left (a plugin's, ``Conventions(causal="top-left")``) runs the whole
    prefill: ``cache_len[b]`` queries, the last one at the last key."""
    case = ctx.case
    lens = case.inputs["cache_len"]
    batch = lens.shape[0]
    live = [b for b in ((int(pick) + i) % batch for i in range(batch)) if lens[b] > 0]
    if not live:
        return None  # every cache is empty
    b = live[0]
    n = int(lens[b])
    bk = case.params["block_k"]
    entry = _dense_entry(ctx)
    assert entry is not None
    top_left = getattr(getattr(entry, "conventions", None), "causal", None) == "top-left"
    rows = n if top_left else min(n, bk)
    inputs = {k: v for k, v in case.inputs.items() if k != "cache_len"}
    inputs["q"] = np.repeat(case.inputs["q"][b : b + 1], rows, axis=2)
    inputs["k"] = case.inputs["k"][b : b + 1, :, :n]
    inputs["v"] = case.inputs["v"][b : b + 1, :, :n]
    supports = getattr(entry, "supports", None)  # a plugin's sibling: what it declares
    if supports is not None and not supports("gqa", ctx.backend.interpret):
        group = case.inputs["q"].shape[1] // case.inputs["k"].shape[1]  # GQA = heads repeated
        inputs["k"], inputs["v"] = (np.repeat(inputs[t], group, axis=1) for t in ("k", "v"))
    params = {k: v for k, v in case.params.items() if k != "num_splits"}
    params.update(causal=True, block_q=bk, block_k=bk)
    run = ctx.derived(
        Case(inputs, params, case.recipe),
        prop="decode-equals-last-causal-row",
        what=f"batch {b} as the last {rows} rows of a causal prefill of {n}",
        entry=entry,
    )
    if isinstance(run, Finding):
        return run
    last = {k: v[:, :, rows - 1 :] for k, v in run.outputs.items() if k in ctx.oracle}
    # The prefill's last row has the decode's oracle: where the dense kernel is off it, the
    # finding is the dense kernel's, and says so (a GPU campaign reported a decode kernel that
    # matched its oracle as wrong, where the library's dense kernel was wrong for a prefill of 1).
    if entry is not DENSE_ENTRIES.get(ctx.backend.impl):
        for name in ("o", "lse"):
            if name not in last:
                continue
            f = runs_agree(
                ctx,
                "decode-equals-last-causal-row",
                f"the library's dense kernel (its attention sibling), last row of a causal "
                f"prefill of {n}, against the float64 oracle",
                name,
                last[name],
                ctx.oracle[name][b : b + 1],
                np.broadcast_to(ctx.bound(name), ctx.oracle[name].shape)[b : b + 1],
                F.ACCURACY,
                where=lambda i: (b, *i[1:]),
                against="oracle",
                wrong="sibling",
            )
            if f is not None:
                return f
    return _equivalent(
        ctx,
        "decode-equals-last-causal-row",
        f"last row of a causal prefill of {n}",
        last,
        lambda a: a[b : b + 1],
        F.ACCURACY,
        lambda i: (b, *i[1:]),
    )


PICK = st.integers(0, 7)


ROWS_SUM_TO_ONE = Property(
    "rows-sum-to-one",
    _rows_sum_to_one,
    description="the probabilities of every row with a visible key sum to 1 (v[:, -1] = 1)",
)


SCALE_APPLIED_ONCE = Property(
    "scale-applied-once",
    _scale_once,
    description="q * 2 with scale / 2 gives the same output and LSE",
)


GQA_EQUALS_MHA = Property(
    "gqa-equals-mha",
    _gqa_mha,
    applies=_is_gqa,
    description="GQA equals MHA with the kv heads repeated",
)


KEY_PADDING_EQUALS_TRUNCATION = Property(
    "key-padding-equals-truncation",
    _padding_truncation,
    PICK,
    applies=_has_padding,
    description="a padded batch element equals that element with its keys truncated",
)


VARLEN_EQUALS_ALONE = Property(
    "varlen-equals-alone",
    _varlen_alone,
    PICK,
    applies=_is_varlen,
    description="a packed sequence equals the same sequence run alone",
)


DECODE_EQUALS_LAST_ROW = Property(
    "decode-equals-last-causal-row",
    _decode_last_row,
    PICK,
    applies=_is_decode,
    description="a decode step equals the last row of the causal prefill of its cache",
)


PROPERTIES = (
    ROWS_SUM_TO_ONE,
    SCALE_APPLIED_ONCE,
    GQA_EQUALS_MHA,
    KEY_PADDING_EQUALS_TRUNCATION,
    VARLEN_EQUALS_ALONE,
    DECODE_EQUALS_LAST_ROW,
)


# Costs and baselines ------------------------------------------------------------------------------


def interpret_cost(case: Case) -> float:
    """Program instances x key tiles: what the Triton interpreter's time scales with (about 10 ms
    each on a CPU core; the Pallas interpreter is cheaper per tile but compiles per shape bucket)."""
    p = case.params
    bk = p["block_k"]
    hq, hkv = case.inputs["q"].shape[1], case.inputs["k"].shape[1]
    if "num_splits" in p:  # decode: split programs, then one combine program per query head
        batch = case.inputs["q"].shape[0]
        tiles = max((math.ceil(lk / bk) for *_, lk in seqs(case)), default=0)
        return batch * hkv * (p["num_splits"] + tiles) + batch * hq / 4
    bq = p["block_q"]
    return float(
        sum(
            hq * max(1, math.ceil(lq / bq)) * max(1, math.ceil(lk / bk))
            for _, _, lq, _, lk in seqs(case)
        )
    )


def _randn_case(
    rng: np.random.Generator,
    b: int,
    hq: int,
    hkv: int,
    tq: int,
    tk: int,
    d: int,
    dtype: str,
    **params: Any,
) -> dict[str, np.ndarray]:
    return {
        "q": rng.standard_normal((b, hq, tq, d)).astype(np_dtype(dtype)),
        "k": rng.standard_normal((b, hkv, tk, d)).astype(np_dtype(dtype)),
        "v": rng.standard_normal((b, hkv, tk, d)).astype(np_dtype(dtype)),
    }


def _dense_params(dtype: str, causal: bool, block: int) -> dict[str, Any]:
    return {
        "dtype": dtype,
        "causal": causal,
        "window": None,
        "scale": None,
        "softcap": None,
        "alibi": None,
        "block_q": block,
        "block_k": block,
    }


def baseline_randn(seed: int, scale: str) -> Case:
    """KernelBench-style: one default shape, standard-normal q/k/v, fp32, default scale; odd
    seeds causal, even seeds unmasked."""
    b, h, t, d, block = (1, 2, 48, 16, 16) if scale == "small" else (2, 8, 1024, 64, 64)
    rng = np.random.default_rng(seed)
    causal = seed % 2 == 1
    inputs = _randn_case(rng, b, h, h, t, t, d, "float32")
    return Case(
        inputs, _dense_params("float32", causal, block), {"baseline": "randn", "seed": seed}
    )


# flash-attention's test grid: (Tq, Tk) pairs around tile sizes, both ways.
GRID_LENGTHS = {
    "small": ((1, 1), (3, 7), (17, 33), (33, 17), (64, 64)),
    "large": (
        (113, 203),
        (128, 217),
        (113, 211),
        (108, 256),
        (256, 512),
        (512, 256),
        (1023, 1024),
        (1024, 1023),
        (2048, 2048),
    ),
}


GRID_HEAD_DIMS = {"small": (16, 32), "large": (32, 64, 128)}


def baseline_grid(scale: str) -> list[Case]:
    """A flash-attention-test-style grid: (Tq, Tk) pairs, head dims, causal on and off, fp16 and
    bf16, ``randn`` values (seed 0), default scale, one tile size."""
    block = 16 if scale == "small" else 64
    b, h = (1, 2) if scale == "small" else (2, 4)
    cases = []
    for dtype in ("float16", "bfloat16"):
        for tq, tk in GRID_LENGTHS[scale]:
            for d in GRID_HEAD_DIMS[scale]:
                for causal in (False, True):
                    inputs = _randn_case(np.random.default_rng(0), b, h, h, tq, tk, d, dtype)
                    cases.append(
                        Case(inputs, _dense_params(dtype, causal, block), {"baseline": "grid"})
                    )
    return cases


def _varlen_baseline(
    rng: np.random.Generator,
    lens: list[tuple[int, int]],
    h: int,
    d: int,
    dtype: str,
    causal: bool,
    block: int,
    recipe: dict[str, Any],
) -> Case:
    cu_q = np.concatenate([[0], np.cumsum([a for a, _ in lens])]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum([b for _, b in lens])]).astype(np.int32)
    inputs = _randn_case(rng, 1, h, h, int(cu_q[-1]), int(cu_k[-1]), d, dtype)
    inputs.update(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
    return Case(inputs, _dense_params(dtype, causal, block), recipe)


def varlen_baseline_randn(seed: int, scale: str) -> Case:
    """Random sequence lengths (as flash-attention's varlen tests draw them), randn values."""
    rng = np.random.default_rng(seed)
    n, top, h, d, block = (3, 40, 2, 16, 16) if scale == "small" else (8, 1024, 8, 64, 64)
    lens = [(int(a), int(a)) for a in rng.integers(1, top, n)]
    return _varlen_baseline(
        rng, lens, h, d, "float32", seed % 2 == 1, block, {"baseline": "randn", "seed": seed}
    )


def varlen_baseline_grid(scale: str) -> list[Case]:
    """Packed batches of the grid's (Tq, Tk) pairs, fp16 and bf16, causal on and off."""
    block = 16 if scale == "small" else 64
    h, d = (2, 16) if scale == "small" else (4, 64)
    pairs = list(GRID_LENGTHS[scale])
    cases = []
    for dtype in ("float16", "bfloat16"):
        for causal in (False, True):
            rng = np.random.default_rng(0)
            cases.append(
                _varlen_baseline(rng, pairs, h, d, dtype, causal, block, {"baseline": "grid"})
            )
    return cases


def _decode_case(
    rng: np.random.Generator,
    b: int,
    hq: int,
    hkv: int,
    tmax: int,
    d: int,
    cache_len: np.ndarray,
    dtype: str,
    splits: int,
    block: int,
    recipe: dict[str, Any],
) -> Case:
    inputs = _randn_case(rng, b, hq, hkv, 1, tmax, d, dtype)
    inputs["cache_len"] = cache_len.astype(np.int32)
    params = {
        "dtype": dtype,
        "window": None,
        "scale": None,
        "softcap": None,
        "alibi": None,
        "block_k": block,
        "num_splits": splits,
    }
    return Case(inputs, params, recipe)


def decode_baseline_randn(seed: int, scale: str) -> Case:
    """A full cache of the default length for every sequence, randn values, fp32."""
    rng = np.random.default_rng(seed)
    b, hq, hkv, t, d, splits, block = (
        (2, 4, 2, 48, 16, 2, 16) if scale == "small" else (4, 32, 8, 2048, 128, 8, 64)
    )
    return _decode_case(
        rng,
        b,
        hq,
        hkv,
        t,
        d,
        np.full(b, t),
        "float32",
        splits,
        block,
        {"baseline": "randn", "seed": seed},
    )


def decode_baseline_grid(scale: str) -> list[Case]:
    """flash-attention's kv-cache test style: cache lengths drawn at random below the cache size,
    head dims, GQA ratios, fp16 and bf16, split counts."""
    block = 16 if scale == "small" else 64
    tmaxes = (33, 64) if scale == "small" else (128, 339, 1024, 4096)
    cases = []
    for dtype in ("float16", "bfloat16"):
        for tmax in tmaxes:
            for hq, hkv in ((2, 2), (4, 1)):
                for splits in (1, 4):
                    rng = np.random.default_rng(0)
                    lens = rng.integers(1, tmax + 1, 2)
                    cases.append(
                        _decode_case(
                            rng,
                            2,
                            hq,
                            hkv,
                            tmax,
                            GRID_HEAD_DIMS[scale][-1],
                            lens,
                            dtype,
                            splits,
                            block,
                            {"baseline": "grid"},
                        )
                    )
    return cases


# Real targets -------------------------------------------------------------------------------------

DENSE = "kernels.attention.{impl}"
DECODE = "kernels.attention.{impl}_decode"
DENSE_ENTRIES: dict[str, KernelRun] = entries(dense_entry, real_modules(DENSE))
ATTENTION = register(
    Target(
        name="attention",
        family="attention",
        kernels=DENSE_ENTRIES,
        oracle=oracle,
        naive=naive,
        strategy=attention_cases,
        tolerance=TOLERANCE,
        hazards=HAZARDS,
        poison=poison,
        fixed_outputs=fixed_outputs,
        error_bound=error_bound,
        properties=PROPERTIES,
        outputs=output_spec,
        description="dense attention: causal, window, key padding, ALiBi, softcap, GQA, mixed",
        # Attention's bugs hide in structure (tiles, masks, alignments): fresh examples find them,
        # climbing on the error of one example does not (see Search.targeting).
        search=Search(targeting=False, interpret_cost=interpret_cost),
        baselines=Baselines(randn=baseline_randn, grid=baseline_grid),
    )
)
ATTENTION_VARLEN = register(
    dataclasses.replace(
        ATTENTION,
        name="attention_varlen",
        strategy=varlen_cases,
        baselines=Baselines(randn=varlen_baseline_randn, grid=varlen_baseline_grid),
        description="packed variable-length attention (cu_seqlens, empty sequences, guard rows)",
    )
)
ATTENTION_DECODE = register(
    dataclasses.replace(
        ATTENTION,
        name="attention_decode",
        kernels=entries(decode_entry, real_modules(DECODE)),
        strategy=decode_cases,
        baselines=Baselines(randn=decode_baseline_randn, grid=decode_baseline_grid),
        description="split-KV decode: one query per sequence against a cache (cache_len)",
    )
)


# Reformulations -----------------------------------------------------------------------------------

# kernels/attention/reformulations.py: each a real target, <real target>_<name>; the dense ones
# also run packed batches (the kernels' IS_VARLEN path).
register_reformulations(ATTENTION, DENSE, dense_entry, REFORMULATIONS)
register_reformulations(ATTENTION_VARLEN, DENSE, dense_entry, REFORMULATIONS)
register_reformulations(ATTENTION_DECODE, DECODE, decode_entry, REFORMULATIONS)


# Mutants ------------------------------------------------------------------------------------------

# kernels/attention/mutants.py: attention_mutant_<name> and attention_decode_mutant_<name>, with
# the class and shrink bound of each.
register_mutants(ATTENTION, DENSE, dense_entry, MUTANTS)
register_mutants(ATTENTION_DECODE, DECODE, decode_entry, MUTANTS)
