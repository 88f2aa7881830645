"""References for attention, written for clarity, not speed.

For one sequence with ``Lq`` queries and ``Lk`` keys (head ``h``, GQA: kv head ``h // (Hq/Hkv)``)::

    s[i, j] = scale * q[i] . k[j]                           scale defaults to 1/sqrt(D)
    s[i, j] = cap * tanh(s[i, j] / cap)                     softcap
    s[i, j] = s[i, j] - slope[h] * |i + Lk - Lq - j|        ALiBi
    s[i, j] = -inf  unless key j is visible from query i
    lse[i]  = log sum_j exp(s[i, j])          (-inf for a query with no visible key)
    o[i]    = sum_j exp(s[i, j] - lse[i]) v[j] (zeros for a query with no visible key)

Visibility is a boolean matrix built from index rules, with query ``i`` at key position
``p = i + Lk - Lq`` (bottom-right alignment; ``p = i`` top-left, for kernels declaring it):
causal keeps ``j <= p``; a window ``(left, right)`` keeps ``p - left <= j <= p + right`` (-1:
unbounded side); ALiBi's distance is ``|p - j|``.
A batch is a list of such sequences: a dense batch element with ``key_lengths[b]`` valid keys is a
sequence of ``Tq`` queries and ``key_lengths[b]`` keys; packed sequences come from
``cu_seqlens_q/k``; a decode step is a sequence of one query against ``cache_len[b]`` keys.

``attention_reference`` (the oracle) computes in float64, one sequence at a time.
``attention_reference_packed`` reaches the same numbers by another route: one score matrix over
every (query, key) pair of the whole batch, with the sequence membership folded into the mask
(the "document mask" formulation). The tests check the two against each other and against mpmath.
``attention_naive`` is what eager PyTorch gives in the input dtype: scores materialised in that
dtype, softmax in float32, probabilities rounded to the input dtype before ``P . V``, output in the
input dtype. ``attention_error_bound`` is the error any fp32 implementation may have per output
element (the derivation: ``kernels/attention/README.md``, "Error bounds").
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Generic, NamedTuple, TypeVar

import torch

from oracles import error_model as em

__all__ = [
    "AttentionBound",
    "alibi_bias",
    "attention_error_bound",
    "attention_naive",
    "attention_reference",
    "attention_reference_packed",
    "sequences",
    "visible",
]


def visible(
    q_len: int,
    k_len: int,
    *,
    causal: bool = False,
    window: Sequence[int] | None = None,
    device: str | torch.device = "cpu",
    align: str = "bottom-right",
) -> torch.Tensor:
    """bool ``[q_len, k_len]``: whether key j is visible from query i (aligned as ``align``
    says, :func:`query_offset`)."""
    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    pos = i + query_offset(q_len, k_len, align)  # the key position query i sits at
    keep = torch.ones(q_len, k_len, dtype=torch.bool, device=device)
    if causal:
        keep &= j <= pos
    if window is not None:
        left, right = window
        if left >= 0:
            keep &= j >= pos - left
        if right >= 0:
            keep &= j <= pos + right
    return keep


ALIGNMENTS = ("bottom-right", "top-left")


def query_offset(q_len: int, k_len: int, align: str = "bottom-right") -> int:
    """The key position of query 0: ``k_len - q_len`` bottom-right aligned (FlashAttention 2.1+,
    this project's kernels: the last query sits at the last key), 0 top-left aligned (PyTorch's
    ``is_causal``: query i at key i). Causal masks, windows and ALiBi distances are measured from
    each query's position. An alignment may carry a shift, ``bottom-right+1`` or ``top-left-1``:
    every query that many keys later (earlier), what a kernel off by one computes (the duplicate
    check's hypotheses, ``fuzz.explain``; no kernel declares one)."""
    base, shift = split_alignment(align)
    return (k_len - q_len if base == "bottom-right" else 0) + shift


def split_alignment(align: str) -> tuple[str, int]:
    """``(alignment, shift)`` of ``align`` (``bottom-right+1`` -> ``("bottom-right", 1)``)."""
    m = re.fullmatch(r"(bottom-right|top-left)(?:([+-])(\d+))?", str(align))
    if m is None:
        raise ValueError(
            f"align={align!r} must be one of {ALIGNMENTS}, optionally shifted (+N or -N)"
        )
    shift = 0 if m.group(2) is None else int(m.group(3)) * (1 if m.group(2) == "+" else -1)
    return m.group(1), shift


def alibi_bias(
    slopes: torch.Tensor, q_len: int, k_len: int, align: str = "bottom-right"
) -> torch.Tensor:
    """float64 ``[H, q_len, k_len]``: ``-slope[h] * |i + offset - j|`` (:func:`query_offset`)."""
    device = slopes.device
    i = torch.arange(q_len, device=device, dtype=torch.float64)[:, None]
    j = torch.arange(k_len, device=device, dtype=torch.float64)[None, :]
    dist = (i + query_offset(q_len, k_len, align) - j).abs()
    return -slopes.to(torch.float64)[:, None, None] * dist


def sequences(
    batch: int,
    tq: int,
    tk: int,
    *,
    key_lengths: torch.Tensor | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
) -> list[tuple[int, int, int, int, int]]:
    """The sequences of a batch: ``(b, q_start, q_len, k_start, k_len)`` each."""
    if cu_seqlens_q is not None:
        assert cu_seqlens_k is not None and batch == 1
        cq = [int(x) for x in cu_seqlens_q.tolist()]
        ck = [int(x) for x in cu_seqlens_k.tolist()]
        return [(0, cq[n], cq[n + 1] - cq[n], ck[n], ck[n + 1] - ck[n]) for n in range(len(cq) - 1)]
    lens = [tk] * batch if key_lengths is None else [int(x) for x in key_lengths.tolist()]
    return [(b, 0, tq, 0, lens[b]) for b in range(batch)]


def _scores(q, k, scale, softcap, bias):
    """float64 ``[H, Lq, Lk]`` logits of one sequence (kv heads already repeated)."""
    s = (q @ k.transpose(-1, -2)) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if bias is not None:
        s = s + bias
    return s


def _softmax_rows(s: torch.Tensor, keep: torch.Tensor, v: torch.Tensor):
    """``(o, lse)`` of masked logits ``s`` [..., Lq, Lk]; rows without a visible key -> (0, -inf)."""
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # -inf for a row without a visible key
    empty = torch.isneginf(lse)
    p = torch.exp(s - torch.where(empty, 0.0, lse)[..., None])
    p = torch.where(empty[..., None], 0.0, p)
    return p @ v, lse


def _default_scale(scale: float | None, d: int) -> float:
    return 1.0 / math.sqrt(d) if scale is None else float(scale)


def attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    causal: bool = False,
    window: Sequence[int] | None = None,
    key_lengths: torch.Tensor | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    alibi_slopes: torch.Tensor | None = None,
    softcap: float | None = None,
    align: str = "bottom-right",
) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 attention, one sequence at a time.

    Args:
        q: ``[B, Hq, Tq, D]``; k, v: ``[B, Hkv, Tk, D]`` (any float dtype; computed in float64).
        key_lengths: int ``[B]``, valid keys per batch element.
        cu_seqlens_q, cu_seqlens_k: int ``[N + 1]``: packed sequences (``B == 1``).
        alibi_slopes: ``[Hq]``; softcap, scale, causal, window: as in the module docstring.

    Returns:
        ``(o [B, Hq, Tq, D], lse [B, Hq, Tq])`` in float64. Query rows that belong to no
        sequence (none, when ``cu_seqlens_q`` covers ``Tq``) are zeros and -inf.
    """
    batch, hq, tq, d = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    group = hq // hkv
    scale = _default_scale(scale, d)
    q64, k64, v64 = (t.to(torch.float64) for t in (q, k, v))
    o = torch.zeros(batch, hq, tq, d, dtype=torch.float64, device=q.device)
    lse = torch.full((batch, hq, tq), float("-inf"), dtype=torch.float64, device=q.device)
    for b, qs, lq, ks, lk in sequences(
        batch, tq, tk, key_lengths=key_lengths, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k
    ):
        qq = q64[b, :, qs : qs + lq]
        kk = k64[b, :, ks : ks + lk].repeat_interleave(group, dim=0)
        vv = v64[b, :, ks : ks + lk].repeat_interleave(group, dim=0)
        bias = None if alibi_slopes is None else alibi_bias(alibi_slopes, lq, lk, align)
        s = _scores(qq, kk, scale, softcap, bias)
        keep = visible(lq, lk, causal=causal, window=window, device=q.device, align=align)
        o[b, :, qs : qs + lq], lse[b, :, qs : qs + lq] = _softmax_rows(s, keep, vv)
    return o, lse


def attention_reference_packed(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    causal: bool = False,
    window: Sequence[int] | None = None,
    key_lengths: torch.Tensor | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    alibi_slopes: torch.Tensor | None = None,
    softcap: float | None = None,
    align: str = "bottom-right",
) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 attention through one ``[Hq, B*Tq, B*Tk]`` score matrix with a document mask.

    Every query row and key row of the batch gets a sequence id and a local index; key j is
    visible from query i iff both belong to the same sequence and the local indices pass the
    rules. ALiBi and the alignment use each sequence's own lengths. Same arguments and results as
    :func:`attention_reference`.
    """
    batch, hq, tq, d = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    group = hq // hkv
    scale = _default_scale(scale, d)
    dev = q.device
    seqs = sequences(
        batch, tq, tk, key_lengths=key_lengths, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k
    )
    # Flatten the batch: row r of the flat query axis is (b, t) = divmod(r, Tq); same for keys.
    qf = q.to(torch.float64).permute(1, 0, 2, 3).reshape(hq, batch * tq, d)
    kf = k.to(torch.float64).permute(1, 0, 2, 3).reshape(hkv, batch * tk, d)
    vf = v.to(torch.float64).permute(1, 0, 2, 3).reshape(hkv, batch * tk, d)
    kf, vf = kf.repeat_interleave(group, dim=0), vf.repeat_interleave(group, dim=0)
    q_seq = torch.full((batch * tq,), -1, dtype=torch.long, device=dev)
    k_seq = torch.full((batch * tk,), -2, dtype=torch.long, device=dev)
    q_idx = torch.zeros(batch * tq, dtype=torch.long, device=dev)
    k_idx = torch.zeros(batch * tk, dtype=torch.long, device=dev)
    q_lq = torch.zeros(batch * tq, dtype=torch.long, device=dev)  # its sequence's query count
    q_lk = torch.zeros(batch * tq, dtype=torch.long, device=dev)  # its sequence's key count
    for n, (b, qs, lq, ks, lk) in enumerate(seqs):
        rq = b * tq + qs + torch.arange(lq, device=dev)
        rk = b * tk + ks + torch.arange(lk, device=dev)
        q_seq[rq], q_idx[rq], q_lq[rq], q_lk[rq] = n, torch.arange(lq, device=dev), lq, lk
        k_seq[rk], k_idx[rk] = n, torch.arange(lk, device=dev)
    i = q_idx[:, None]
    j = k_idx[None, :]
    base, shift = split_alignment(align)
    pos = i + ((q_lk - q_lq)[:, None] if base == "bottom-right" else 0) + shift
    keep = q_seq[:, None] == k_seq[None, :]
    if causal:
        keep &= j <= pos
    if window is not None:
        left, right = window
        if left >= 0:
            keep &= j >= pos - left
        if right >= 0:
            keep &= j <= pos + right
    bias = None
    if alibi_slopes is not None:
        dist = (pos - j).abs().to(torch.float64)
        bias = -alibi_slopes.to(torch.float64)[:, None, None] * dist
    s = _scores(qf, kf, scale, softcap, bias)
    o, lse = _softmax_rows(s, keep, vf)
    o = o.reshape(hq, batch, tq, d).permute(1, 0, 2, 3)
    lse = lse.reshape(hq, batch, tq).permute(1, 0, 2)
    return o, lse


def attention_naive(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    causal: bool = False,
    window: Sequence[int] | None = None,
    key_lengths: torch.Tensor | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    alibi_slopes: torch.Tensor | None = None,
    softcap: float | None = None,
    align: str = "bottom-right",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager PyTorch attention in the input dtype, one sequence at a time.

    Scores ``q @ k^T * scale`` (and the soft cap and ALiBi bias) are materialised in the input
    dtype, the softmax and the log-sum-exp run in float32, the probabilities are rounded to the
    input dtype for ``P @ V``, and the output is in the input dtype. Returns ``(o, lse float32)``.
    """
    batch, hq, tq, d = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    group = hq // hkv
    dt = q.dtype
    scale = _default_scale(scale, d)
    o = torch.zeros(batch, hq, tq, d, dtype=dt, device=q.device)
    lse = torch.full((batch, hq, tq), float("-inf"), dtype=torch.float32, device=q.device)
    for b, qs, lq, ks, lk in sequences(
        batch, tq, tk, key_lengths=key_lengths, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k
    ):
        qq = q[b, :, qs : qs + lq]
        kk = k[b, :, ks : ks + lk].repeat_interleave(group, dim=0)
        vv = v[b, :, ks : ks + lk].repeat_interleave(group, dim=0)
        s = (qq @ kk.transpose(-1, -2)) * scale
        if softcap is not None:
            s = softcap * torch.tanh(s / softcap)
        if alibi_slopes is not None:
            s = s + alibi_bias(alibi_slopes, lq, lk, align).to(dt)
        keep = visible(lq, lk, causal=causal, window=window, device=q.device, align=align)
        s = s.float().masked_fill(~keep, float("-inf"))
        row_lse = torch.logsumexp(s, dim=-1)
        empty = torch.isneginf(row_lse)
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row without a key: 0/0, made 0
        out = p.to(dt) @ vv
        o[b, :, qs : qs + lq] = torch.where(empty[..., None], torch.zeros((), dtype=dt), out)
        lse[b, :, qs : qs + lq] = row_lse
    return o, lse


A = TypeVar("A")  # torch.Tensor here, NumPy arrays once on the host


class AttentionBound(NamedTuple, Generic[A]):
    """Per-element error bounds of attention outputs (float64).

    Attributes:
        o: ``[B, Hq, Tq, D]``: how far an output element of any fp32 implementation may be
            from the exact attention output.
        lse: ``[B, Hq, Tq]``: likewise for the log-sum-exp (0 for rows without a visible key).
        row_sum: ``[B, Hq, Tq]``: how far ``sum_j p_ij`` as a kernel forms it (``o`` with a
            value column of ones) may be from 1: the logits' own rounding cancels in it.
    """

    o: A
    lse: A
    row_sum: A


# Roundings of a dot product's result besides its D - 1 additions, relative to scale * sum |q k|:
# products (exact with fp16/bf16 operands, one rounding in fp32 or a 3xTF32 emulation's
# truncation), the scale rounded to fp32, its product, log2 e folded into it.
C_DOT = 4.0 + em.C_LOGIT


def attention_error_bound(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    causal: bool = False,
    window: Sequence[int] | None = None,
    key_lengths: torch.Tensor | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    alibi_slopes: torch.Tensor | None = None,
    softcap: float | None = None,
    align: str = "bottom-right",
    dtype: str,
    num_splits: int = 0,
    min_tile: int = 16,
    max_chunk: int = 1 << 21,
    dot_unit: float = 0.0,
) -> AttentionBound[torch.Tensor]:
    """The error bound of each output of attention computed with fp32 statistics.

    Arguments as :func:`attention_reference`, plus ``dtype`` (the inputs' and ``o``'s dtype
    name), ``num_splits`` (a split-KV decode merging that many partial results; 0: none) and
    ``min_tile`` (the fewest keys an implementation takes per online step). Computed in float64
    on the inputs' device, a block of query rows at a time (at most ``max_chunk`` scores).
    ``dot_unit``: for fp32 inputs, the relative error to which the operands of both dots are
    converted before their products (TF32: ``error_model.TF32_UNIT``; 0: fp32 operands as they
    are). Each product of two converted operands then moves by ``(2 c + c^2) |a b|`` (plus a
    subnormal step of either operand times the other), which the logit perturbation
    ``delta_ij`` takes for ``q . k`` and the output for ``P . V`` as it takes ``P`` rounded to a
    half input dtype.

    Per logit ``s_ij`` (row max ``m_i``, ``n_i`` visible keys) the perturbation of any fp32
    implementation is at most ``delta_ij``: the dot product ``(D + C_DOT) U scale sum_d |q_d k_d|``
    and flushed subnormal operands and products, through the soft cap (times ``sech^2``, plus its
    own rounding), ALiBi's product and sum, and the arguments of the exponentials
    ``C_ARG U |s - m|``; a split-KV merge adds its log-sum-exps' rounding. The consistently
    renormalized probabilities then move by ``w_ij`` (``error_model.softmax_spread``), so the
    output by ``sum_j w_ij |v_jd - c_d| + (sum_j w_ij) |o_id - c_d|`` for any ``c_d`` (the
    mid-range of the sequence's values: ``sum_j p'_ij = sum_j p_ij = 1``). Errors that need not
    cancel: the exponentials and their rescales (``eta``), the ``P . V`` accumulation and the
    rounding of ``P`` to the input dtype before it (FlashAttention's convention for fp16/bf16),
    times ``sum_j p_ij |v_jd|``; the row sum and the division, relative to ``|o_id|``: all of it
    times ``SAFETY``, plus flushed and underflowed terms absolutely. Exact conversions come on top
    (``error_model.conversion_error``): ``P`` rounded to the input dtype before ``P . V``
    (FlashAttention's convention for fp16/bf16) and the output stored in it.
    """
    batch, hq, tq, d = q.shape
    hkv, tk = k.shape[1], k.shape[2]
    group = hq // hkv
    scale = _default_scale(scale, d)
    dev = q.device
    f64 = torch.float64
    q64, k64, v64 = (t.to(f64) for t in (q, k, v))
    u_in = em.conversion_error(dtype) if dtype != "float32" else 0.0
    eta_in = em.subnormal_spacing(dtype) if dtype == "float16" else 0.0
    u_dot = float(dot_unit) if dtype == "float32" else 0.0
    bound_o = torch.zeros(batch, hq, tq, d, dtype=f64, device=dev)
    bound_lse = torch.zeros(batch, hq, tq, dtype=f64, device=dev)
    row_sum = torch.zeros(batch, hq, tq, dtype=f64, device=dev)
    slopes = None if alibi_slopes is None else alibi_slopes.to(f64).abs()
    for b, qs, lq, ks, lk in sequences(
        batch, tq, tk, key_lengths=key_lengths, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k
    ):
        if lq == 0 or lk == 0:
            continue
        qq = q64[b, :, qs : qs + lq]
        kk = k64[b, :, ks : ks + lk].repeat_interleave(group, dim=0)
        vv = v64[b, :, ks : ks + lk].repeat_interleave(group, dim=0)
        seq = _Sequence(qq, kk, vv, scale, softcap, slopes, dtype, query_offset(lq, lk, align))
        keep = visible(lq, lk, causal=causal, window=window, device=dev, align=align)
        step = max(1, max_chunk // max(1, hq * lk))
        for i0 in range(0, lq, step):
            i1 = min(lq, i0 + step)
            got = seq.rows(i0, i1, lq, keep[i0:i1], num_splits, min_tile, u_in, eta_in, u_dot)
            bound_o[b, :, qs + i0 : qs + i1] = got.o
            bound_lse[b, :, qs + i0 : qs + i1] = got.lse
            row_sum[b, :, qs + i0 : qs + i1] = got.row_sum
    return AttentionBound(bound_o, bound_lse, row_sum)


def _subnormal(a: torch.Tensor) -> torch.Tensor:
    """``|a|`` where ``a`` is an fp32 subnormal (what a flush to zero loses), else 0."""
    mag = a.abs()
    return torch.where(
        (mag > 0) & (mag < em.TINY), mag, torch.zeros((), dtype=a.dtype, device=a.device)
    )


class _Sequence:
    """One sequence's operands (float64, kv heads repeated) and what every block of its query
    rows shares: the values' range per column, the subnormal operands."""

    def __init__(self, q, k, v, scale, softcap, slopes, dtype, offset):
        self.offset = offset  # the key position of query 0 (query_offset)
        self.q, self.k, self.v = q, k, v
        self.scale, self.softcap, self.slopes, self.dtype = scale, softcap, slopes, dtype
        self.q_abs, self.k_abs, self.v_abs = q.abs(), k.abs(), v.abs()
        vmax, vmin = v.amax(dim=1, keepdim=True), v.amin(dim=1, keepdim=True)  # [H, 1, D]
        self.vmax, self.vmin = vmax, vmin
        self.center = 0.5 * (vmax + vmin)
        self.v_off = (v - self.center).abs()
        self.v_top = self.v_abs.amax(dim=1, keepdim=True)
        q_sub, k_sub = _subnormal(q), _subnormal(k)
        self.subnormal = bool(q_sub.any() or k_sub.any())
        self.q_sub, self.k_sub = q_sub, k_sub

    def rows(
        self, i0, i1, lq, keep, num_splits, min_tile, u_in, eta_in, u_dot=0.0
    ) -> AttentionBound[torch.Tensor]:
        """The bounds of query rows ``[i0, i1)`` (``keep``: their visibility ``[i1 - i0, Lk]``;
        ``u_dot``: the conversion error of fp32 dot operands, see ``attention_error_bound``)."""
        U = em.U
        q, qa = self.q[:, i0:i1], self.q_abs[:, i0:i1]
        lk, d = self.k.shape[1], self.q.shape[-1]
        s0 = (q @ self.k.transpose(-1, -2)) * self.scale
        delta = (d + C_DOT) * U * self.scale * (qa @ self.k_abs.transpose(-1, -2))
        if self.subnormal:  # flushed to zero: the product lost, scaled by what multiplies it
            delta += self.scale * (
                self.q_sub[:, i0:i1] @ self.k_abs.transpose(-1, -2)
                + qa @ self.k_sub.transpose(-1, -2)
            )
        delta += self.scale * d * em.TINY + em.TINY  # flushed products and the flushed sum
        g_dot = (1.0 + u_dot) ** 2 - 1.0  # a product of two converted operands, relative
        if u_dot:
            delta += self.scale * (
                g_dot * (qa @ self.k_abs.transpose(-1, -2))
                + em.TINY
                * u_dot
                * (1.0 + u_dot)
                * (qa.sum(-1)[..., None] + self.k_abs.sum(-1)[:, None, :])
            )
        s = s0
        if self.softcap is not None:
            cap = float(self.softcap)
            th = torch.tanh(s0 / cap)
            s = cap * th
            sech2 = 1.0 - th * th
            delta = delta * sech2 + U * (s0.abs() * sech2 + (em.C_TANH + 1.0) * s.abs())
        if self.slopes is not None:
            i = torch.arange(i0, i1, device=s.device, dtype=torch.float64)[:, None]
            j = torch.arange(lk, device=s.device, dtype=torch.float64)[None, :]
            dist = (i + self.offset - j).abs()
            bias = self.slopes[:, None, None] * dist
            # The oracle's slopes are the kernels' up to fp32 rounding (standard slopes computed
            # in each); the product and the sum round once each.
            s = s - bias
            delta = delta + U * (2.0 * bias + s.abs())
        s = s.masked_fill(~keep, float("-inf"))
        valid = keep.expand_as(s)
        zero = torch.zeros((), dtype=s.dtype, device=s.device)
        m = s.amax(dim=-1, keepdim=True)
        lse = torch.logsumexp(s, dim=-1, keepdim=True)
        empty = torch.isneginf(lse)
        logp = torch.where(valid, s - torch.where(empty, zero, lse), -torch.inf)
        spread_arg = torch.where(valid, (s - torch.where(empty, zero, m)).abs(), zero)
        delta = delta + em.C_ARG * U * spread_arg
        n = keep.sum(dim=-1).to(torch.float64)[None, :, None]  # [1, rows, 1]
        log_n = em.log_count(n)
        r = em.rescales(n, min_tile)
        splits = float(num_splits)
        if num_splits:
            r = r + splits
            # The merge rounds each split's log-sum-exp (|lse_s| <= |s| + |s - m| + log n) and
            # its distance to the largest one, whose exponential weighs the split.
            delta = (
                delta
                + U * torch.where(valid, s.abs(), zero)
                + U * (5.0 * spread_arg + (em.C_LOG + 5.0) * log_n + em.C_LOG + em.C_EXP)
            )
        delta = torch.where(valid, delta, zero)
        w, spread = em.softmax_spread(logp, delta)
        p = torch.exp(logp)
        o = p @ self.v
        # Centered: sum_j w_j |v_j - c| + (sum_j w_j) |o - c|, at most the distance from o to
        # the far end of the values' range (p' is a distribution over them).
        centered = w @ self.v_off + w.sum(dim=-1, keepdim=True) * (o - self.center).abs()
        centered = torch.minimum(centered, torch.maximum(self.vmax - o, o - self.vmin))
        eta = (em.C_EXP * (1.0 + r) + 2.0 * r) * U  # an exponential and its rescales
        eps_l = eta + (n - 1.0).clamp(min=0.0) * U  # the row sum of n of them
        acc = eta + (n + r) * U  # P . V's n terms and its rescales
        if num_splits:
            eps_l = eps_l + (splits + em.C_EXP) * U
            acc = acc + (splits + em.C_EXP + 4.0) * U
        rel_o = eps_l + 2.0 * U  # the row sum and the division
        if num_splits:
            # A merge may normalize through the merged log-sum-exp (weights exp(lse_s - lse), no
            # division by their sum): its rounding scales the output as a whole.
            lse_abs = torch.where(empty, zero, lse).abs()
            merge = U * (2.0 * lse_abs + em.C_LOG * (1.0 + math.log(splits)) + em.C_EXP + splits)
            rel_o = rel_o + merge
        pv = p @ self.v_abs
        flushed = em.TINY * (n * self.v_top + n + r + 5.0)  # underflowed p, flushed products
        comp = em.SAFETY * (centered + acc * pv + rel_o * o.abs()) + flushed
        # P rounded to the input dtype before P . V (FlashAttention's convention for fp16/bf16;
        # exact model: a faithful conversion of each p' = p + (p' - p), |p' - p| <= w).
        p_round = u_in * (pv + w @ self.v_abs) + eta_in * n * self.v_top
        if u_dot:  # P and V converted: p' v' - p v, with p' within w of p (as for P rounded)
            p_round = (
                p_round
                + g_dot * (pv + w @ self.v_abs)
                + 2.0 * em.TINY * u_dot * n * (self.v_top + 1.0)
            )
        err = comp + p_round
        u_out = em.conversion_error(self.dtype)
        bound_o = err + u_out * (o.abs() + err) + em.subnormal_spacing(self.dtype)
        top = torch.where(valid, delta, zero).amax(dim=-1, keepdim=True)
        lse_move = torch.minimum(spread, top) + eps_l / (1.0 - eps_l)
        lse_round = em.C_LOG * U * (1.0 + log_n) + 3.0 * U * torch.where(empty, zero, lse).abs()
        if num_splits:
            lse_round = lse_round + U * (em.C_LOG * (1.0 + math.log(splits)) + splits)
        bound_lse = em.SAFETY * (lse_move + lse_round) + (n + 1.0) * em.TINY
        per_elem = torch.where(valid, (2.0 * em.C_EXP + 2.0 * em.C_ARG * spread_arg) * U, zero)
        rows = (p * per_elem).sum(dim=-1, keepdim=True) + (
            2.0 * r * (em.C_EXP + 2.0) + 2.0 * (n + 1.0)
        ) * U
        if num_splits:
            rows = rows + (2.0 * splits + em.C_EXP) * U
            # The merge through the merged log-sum-exp scales the sum as a whole, as it does the
            # output (``rel_o``): weights exp(lse_s - lse), each lse rounded to |lse| u, need not
            # sum to 1 closer than that (a bug-free split-KV decode kernel of round 6's controls,
            # its logits near -1000, summed to 0.99998 against a bound of 1.3e-5).
            rows = rows + merge
        rows = em.SAFETY * rows
        rows = rows + u_in * (1.0 + rows)  # P rounded to the input dtype (a value column of 1)
        rows = rows + u_dot * (1.0 + rows) + n * em.TINY * u_dot  # P converted (1 is exact)
        row_sum = rows + u_out * (1.0 + rows) + n * (em.TINY + eta_in) + 2.0 * em.TINY
        row_sum = row_sum + em.subnormal_spacing(self.dtype)
        live = ~empty
        return AttentionBound(
            torch.where(live, bound_o, zero),
            torch.where(live, bound_lse, zero).squeeze(-1),
            torch.where(live, row_sum, zero).squeeze(-1),
        )
