"""References for attention, written for clarity, not speed.

For one sequence with ``Lq`` queries and ``Lk`` keys (head ``h``, GQA: kv head ``h // (Hq/Hkv)``)::

    s[i, j] = scale * q[i] . k[j]                           scale defaults to 1/sqrt(D)
    s[i, j] = cap * tanh(s[i, j] / cap)                     softcap
    s[i, j] = s[i, j] - slope[h] * |i + Lk - Lq - j|        ALiBi
    s[i, j] = -inf  unless key j is visible from query i
    lse[i]  = log sum_j exp(s[i, j])          (-inf for a query with no visible key)
    o[i]    = sum_j exp(s[i, j] - lse[i]) v[j] (zeros for a query with no visible key)

Visibility is a boolean matrix built from index rules, with query ``i`` at key position
``i + Lk - Lq`` (bottom-right alignment): causal keeps ``j <= i + Lk - Lq``; a window
``(left, right)`` keeps ``i + Lk - Lq - left <= j <= i + Lk - Lq + right`` (-1: unbounded side).
A batch is a list of such sequences: a dense batch element with ``key_lengths[b]`` valid keys is a
sequence of ``Tq`` queries and ``key_lengths[b]`` keys; packed sequences come from
``cu_seqlens_q/k``; a decode step is a sequence of one query against ``cache_len[b]`` keys.

``attention_reference`` (the oracle) computes in float64, one sequence at a time.
``attention_reference_packed`` reaches the same numbers by another route: one score matrix over
every (query, key) pair of the whole batch, with the sequence membership folded into the mask
(the "document mask" formulation). The tests check the two against each other and against mpmath.
``attention_naive`` is what eager PyTorch gives in the input dtype: scores materialised in that
dtype, softmax in float32, probabilities rounded to the input dtype before ``P . V``, output in the
input dtype; the tolerance policy is relative to its error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

__all__ = [
    "alibi_bias",
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
) -> torch.Tensor:
    """bool ``[q_len, k_len]``: whether key j is visible from query i (bottom-right aligned)."""
    i = torch.arange(q_len, device=device)[:, None]
    j = torch.arange(k_len, device=device)[None, :]
    pos = i + (k_len - q_len)  # the key position query i sits at
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


def alibi_bias(slopes: torch.Tensor, q_len: int, k_len: int) -> torch.Tensor:
    """float64 ``[H, q_len, k_len]``: ``-slope[h] * |i + k_len - q_len - j|``."""
    device = slopes.device
    i = torch.arange(q_len, device=device, dtype=torch.float64)[:, None]
    j = torch.arange(k_len, device=device, dtype=torch.float64)[None, :]
    dist = (i + (k_len - q_len) - j).abs()
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
        bias = None if alibi_slopes is None else alibi_bias(alibi_slopes, lq, lk)
        s = _scores(qq, kk, scale, softcap, bias)
        keep = visible(lq, lk, causal=causal, window=window, device=q.device)
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
    pos = i + (q_lk - q_lq)[:, None]
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
            s = s + alibi_bias(alibi_slopes, lq, lk).to(dt)
        keep = visible(lq, lk, causal=causal, window=window, device=q.device)
        s = s.float().masked_fill(~keep, float("-inf"))
        row_lse = torch.logsumexp(s, dim=-1)
        empty = torch.isneginf(row_lse)
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row without a key: 0/0, made 0
        out = p.to(dt) @ vv
        o[b, :, qs : qs + lq] = torch.where(empty[..., None], torch.zeros((), dtype=dt), out)
        lse[b, :, qs : qs + lq] = row_lse
    return o, lse
