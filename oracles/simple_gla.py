"""References for simple gated linear attention (simple GLA), written for clarity.

The model, per sequence and head (``q_t, k_t`` rows of ``K``, ``v_t`` rows of ``V``, state ``h``
``[K, V]``, log decay ``g_t <= 0``, either per token or a per-head constant ``gamma``)::

    h_t = exp(g_t) * h_{t-1} + k_t^T v_t        h_{-1} = h0 (zeros when not given)
    o_t = scale * q_t h_t                       ht = h_{L-1} (h0 for an empty sequence)

Four routes, each for a different job:

* :func:`simple_gla_reference` — the **oracle**: the token-by-token recurrence above in float64.
  It never forms ``exp(g_i - g_j)`` and never chunks, so it shares no algorithm with the chunked
  kernels. :func:`simple_gla_reference_grads` differentiates it with torch float64 autograd (loss
  ``sum(o * do) + sum(ht * dht)``).
* :func:`simple_gla_parallel` — a second route to the same numbers: the quadratic (attention-like)
  form ``o = scale * ((Q K^T) * D) V + scale * exp(b) Q h0`` with ``D[t, s] = exp(b_t - b_s)`` for
  ``s <= t`` from the float64 prefix sums ``b``; checked against the recurrence (and both against
  mpmath) in ``tests/oracles``.
* :func:`simple_gla_naive` — what a user writes in eager PyTorch: the chunked algorithm in the
  input dtype (every matmul rounds its operands and its result to the input dtype, with fp32
  accumulation inside, as eager torch does; decays, cumulative sums and the state in fp32). Its
  error is what the tolerance is relative to; gradients by autograd through it, in the same dtype.
* :func:`simple_gla_magnitudes` — the float64 chunked computation on absolute values (``|q|``,
  ``|k|``, ``|v|``, ``|h0|``, ``|do|``, ``|dht|``) with every log decay scaled by ``decay_factor``:
  the sums of absolute terms that rounding-error bounds are proportional to (see the tolerance
  derivation in ``kernels/simple_gla/README.md``).

Variable-length batches (``cu_seqlens``, ``B == 1``) are handled by gathering each sequence into a
zero-padded ``[N, Lmax]`` layout; zero padding (``q = k = v = 0``, ``g = 0``) leaves the state
unchanged, so the padded steps are harmless and are dropped when scattering back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "MagnitudeVariant",
    "SimpleGLAGrads",
    "default_scale",
    "sequences",
    "simple_gla_magnitude_variants",
    "simple_gla_magnitudes",
    "simple_gla_naive",
    "simple_gla_naive_grads",
    "simple_gla_parallel",
    "simple_gla_parallel_grads",
    "simple_gla_reference",
    "simple_gla_reference_grads",
]

F64 = torch.float64


def default_scale(k_dim: int) -> float:
    return float(k_dim) ** -0.5


def sequences(
    batch: int, length: int, cu_seqlens: Sequence[int] | None
) -> list[tuple[int, int, int]]:
    """``(batch row, start, end)`` of every sequence: one per batch row, or one per varlen segment."""
    if cu_seqlens is None:
        return [(b, 0, length) for b in range(batch)]
    cu = [int(c) for c in cu_seqlens]
    return [(0, cu[n], cu[n + 1]) for n in range(len(cu) - 1)]


@dataclass
class _Padded:
    """Sequences gathered into ``[N, Lmax, H, ...]`` (zero padded) and how to scatter back."""

    seqs: list[tuple[int, int, int]]
    lmax: int

    def gather(self, x: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        n = len(self.seqs)
        out = x.new_zeros((n, self.lmax, *x.shape[2:]), dtype=dtype or x.dtype)
        parts = []
        for i, (b, bos, eos) in enumerate(self.seqs):
            parts.append((i, x[b, bos:eos].to(out.dtype)))
        # Built out of place so that autograd flows from the gathered tensor back to x.
        rows = []
        for i, part in parts:
            pad = out[i, part.shape[0] :]
            rows.append(torch.cat([part, pad], dim=0))
        return torch.stack(rows) if rows else out

    def scatter(self, y: torch.Tensor, batch: int, length: int) -> torch.Tensor:
        """``y [N, Lmax, ...]`` back to ``[B, T, ...]``; tokens of no sequence (past
        ``cu_seqlens[-1]``) are 0."""
        rows: list[list[torch.Tensor]] = [[] for _ in range(batch)]
        for i, (b, bos, eos) in enumerate(self.seqs):
            rows[b].append(y[i, : eos - bos])
        out = []
        for b in range(batch):
            used = sum(r.shape[0] for r in rows[b])
            if used < length:
                rows[b].append(y.new_zeros((length - used, *y.shape[2:])))
            out.append(torch.cat(rows[b], dim=0))
        return torch.stack(out)

    def live(self, device: torch.device | str) -> torch.Tensor:
        """``[N, Lmax, 1]`` float64: 1 on each sequence's tokens, 0 on the padding."""
        mask = torch.zeros((len(self.seqs), self.lmax, 1), dtype=F64, device=device)
        for i, (_, bos, eos) in enumerate(self.seqs):
            mask[i, : eos - bos] = 1.0
        return mask


def _padded(batch: int, length: int, cu_seqlens: Sequence[int] | None) -> _Padded:
    seqs = sequences(batch, length, cu_seqlens)
    lmax = max((eos - bos for _, bos, eos in seqs), default=0)
    return _Padded(seqs, lmax)


def _log_decay(
    g: torch.Tensor | None,
    g_gamma: torch.Tensor | None,
    pad: _Padded,
    heads: int,
    dtype: torch.dtype,
) -> torch.Tensor:
    """Per-token log decay ``[N, Lmax, H]`` (0 on padding) from ``g`` or ``g_gamma``."""
    if (g is None) == (g_gamma is None):
        raise ValueError("exactly one of g and g_gamma must be given")
    if g is not None:
        return pad.gather(g, dtype)
    n = len(pad.seqs)
    live = torch.zeros((n, pad.lmax, 1), dtype=dtype, device=g_gamma.device)  # type: ignore[union-attr]
    for i, (_, bos, eos) in enumerate(pad.seqs):
        live[i, : eos - bos] = 1.0
    return live * g_gamma.to(dtype).reshape(1, 1, heads)  # type: ignore[union-attr]


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens) -> None:
    if q.ndim != 4 or k.shape != q.shape or v.shape[:3] != q.shape[:3]:
        raise ValueError(
            f"q, k must be [B, T, H, K] and v [B, T, H, V]; got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(v.shape)}"
        )
    if cu_seqlens is not None and q.shape[0] != 1:
        raise ValueError(f"with cu_seqlens the batch must be 1, got B={q.shape[0]}")


def _h0(initial_state: torch.Tensor | None, n: int, q: torch.Tensor, v: torch.Tensor, dtype):
    heads, kd, vd = q.shape[2], q.shape[3], v.shape[3]
    if initial_state is None:
        return q.new_zeros((n, heads, kd, vd), dtype=dtype)
    return initial_state.to(dtype)


def simple_gla_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor | None = None,
    g_gamma: torch.Tensor | None = None,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    cu_seqlens: Sequence[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The float64 token-by-token recurrence (the oracle).

    Args:
        q, k: ``[B, T, H, K]``; v: ``[B, T, H, V]``; any float dtype (computed in float64).
        g: per-token log decay ``[B, T, H]``; or g_gamma: per-head log decay ``[H]``.
        scale: multiplies ``q h`` (default ``K ** -0.5``).
        initial_state: ``[N, H, K, V]`` (``N`` = B, or the number of varlen sequences).
        cu_seqlens: sequence boundaries ``[N + 1]`` into the T axis (then ``B == 1``).

    Returns:
        ``o [B, T, H, V]`` and the final states ``ht [N, H, K, V]``, both float64.
    """
    _check(q, k, v, cu_seqlens)
    batch, length, heads, kd = q.shape
    scale = default_scale(kd) if scale is None else float(scale)
    pad = _padded(batch, length, cu_seqlens)
    qp, kp, vp = (pad.gather(x, F64) for x in (q, k, v))
    decay = torch.exp(_log_decay(g, g_gamma, pad, heads, F64))
    h = _h0(initial_state, len(pad.seqs), q, v, F64)
    outs = []
    for t in range(pad.lmax):
        h = decay[:, t, :, None, None] * h + kp[:, t, :, :, None] * vp[:, t, :, None, :]
        outs.append(scale * torch.einsum("nhk,nhkv->nhv", qp[:, t], h))
    o_pad = torch.stack(outs, dim=1) if outs else vp.new_zeros(vp.shape)
    return pad.scatter(o_pad, batch, length), h


@dataclass
class SimpleGLAGrads:
    """Gradients of ``sum(o * do) + sum(ht * dht)``; ``dg`` is None for the g_gamma form and
    ``dh0`` None without an initial state."""

    dq: torch.Tensor
    dk: torch.Tensor
    dv: torch.Tensor
    dg: torch.Tensor | None
    dh0: torch.Tensor | None

    def as_dict(self) -> dict[str, torch.Tensor]:
        d = {"dq": self.dq, "dk": self.dk, "dv": self.dv}
        if self.dg is not None:
            d["dg"] = self.dg
        if self.dh0 is not None:
            d["dh0"] = self.dh0
        return d


def _grads(fn, q, k, v, do, g, g_gamma, scale, initial_state, dht, cu_seqlens, dtype):
    leaves = {
        "q": q.detach().to(dtype).requires_grad_(),
        "k": k.detach().to(dtype).requires_grad_(),
        "v": v.detach().to(dtype).requires_grad_(),
    }
    if g is not None:
        leaves["g"] = g.detach().to(g.dtype if dtype != F64 else F64).requires_grad_()
    if initial_state is not None:
        leaves["h0"] = (
            initial_state.detach().to(initial_state.dtype if dtype != F64 else F64).requires_grad_()
        )
    with torch.enable_grad():
        o, ht = fn(
            leaves["q"],
            leaves["k"],
            leaves["v"],
            leaves.get("g"),
            None if g_gamma is None else g_gamma.detach(),
            scale,
            leaves.get("h0"),
            cu_seqlens,
        )
        loss = (o * do.to(o.dtype)).sum()
        if dht is not None:
            loss = loss + (ht * dht.to(ht.dtype)).sum()
        names = list(leaves)
        if not loss.requires_grad:  # no token and no dht: nothing depends on the leaves
            grads = tuple(None for _ in names)
        else:
            grads = torch.autograd.grad(loss, [leaves[n] for n in names], allow_unused=True)
    got = {}
    for n, gr in zip(names, grads, strict=True):
        got[n] = torch.zeros_like(leaves[n]) if gr is None else gr
    return SimpleGLAGrads(got["q"], got["k"], got["v"], got.get("g"), got.get("h0"))


def simple_gla_reference_grads(
    q, k, v, do, g=None, g_gamma=None, scale=None, initial_state=None, dht=None, cu_seqlens=None
) -> SimpleGLAGrads:
    """float64 autograd through :func:`simple_gla_reference` (the gradient oracle).

    ``do [B, T, H, V]`` and ``dht [N, H, K, V]`` (optional) weight the outputs. No gradient is
    defined for ``g_gamma`` (a constant, as ALiBi slopes are).
    """
    return _grads(
        simple_gla_reference, q, k, v, do, g, g_gamma, scale, initial_state, dht, cu_seqlens, F64
    )


def simple_gla_parallel(
    q, k, v, g=None, g_gamma=None, scale=None, initial_state=None, cu_seqlens=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The quadratic parallel form in float64 (a second route to :func:`simple_gla_reference`).

    ``b_t = sum_{r <= t} g_r`` per sequence; ``o = scale * (((Q K^T) * D) V + exp(b) Q h0)`` with
    ``D[t, s] = exp(b_t - b_s)`` for ``s <= t`` (the exponent selected before exp), and
    ``ht = exp(b_last) h0 + sum_s exp(b_last - b_s) k_s^T v_s``.
    """
    _check(q, k, v, cu_seqlens)
    batch, length, heads, kd = q.shape
    scale = default_scale(kd) if scale is None else float(scale)
    pad = _padded(batch, length, cu_seqlens)
    qp, kp, vp = (pad.gather(x, F64) for x in (q, k, v))
    b = torch.cumsum(_log_decay(g, g_gamma, pad, heads, F64), dim=1)  # [N, L, H]
    h0 = _h0(initial_state, len(pad.seqs), q, v, F64)
    lm = pad.lmax
    idx = torch.arange(lm, device=q.device)
    causal = idx[:, None] >= idx[None, :]
    bt = b.permute(0, 2, 1)  # [N, H, L]
    diff = bt[:, :, :, None] - bt[:, :, None, :]
    d = torch.exp(torch.where(causal, diff, torch.full_like(diff, float("-inf"))))
    s = torch.einsum("nthk,nshk->nhts", qp, kp) * d
    o = torch.einsum("nhts,nshv->nthv", s, vp)
    o = o + torch.einsum("nthk,nhkv->nthv", qp * torch.exp(b)[..., None], h0)
    o = scale * o
    lengths = torch.tensor([eos - bos for _, bos, eos in pad.seqs], device=q.device)
    last = torch.clamp(lengths - 1, min=0)
    n_idx = torch.arange(len(pad.seqs), device=q.device)
    b_last = torch.where((lengths > 0)[:, None], b[n_idx, last], torch.zeros_like(b[:, 0]))
    live = (idx[None, :] < lengths[:, None])[..., None]  # [N, L, 1]
    w = torch.exp(torch.where(live, b_last[:, None, :] - b, torch.full_like(b, float("-inf"))))
    ht = torch.exp(b_last)[..., None, None] * h0 + torch.einsum(
        "nshk,nshv->nhkv", kp * w[..., None], vp
    )
    return pad.scatter(o, batch, length), ht


def simple_gla_parallel_grads(
    q, k, v, do, g=None, g_gamma=None, scale=None, initial_state=None, dht=None, cu_seqlens=None
) -> SimpleGLAGrads:
    """float64 autograd through :func:`simple_gla_parallel`."""
    return _grads(
        simple_gla_parallel, q, k, v, do, g, g_gamma, scale, initial_state, dht, cu_seqlens, F64
    )


# Blocks of the blocked float64 form: the parallel form inside a block, the exact state across.
BLOCK = 64


def simple_gla_blocked(
    q, k, v, g=None, g_gamma=None, scale=None, initial_state=None, cu_seqlens=None, block=BLOCK
) -> tuple[torch.Tensor, torch.Tensor]:
    """The blocked float64 form (a third route to :func:`simple_gla_reference`): the quadratic
    parallel form inside blocks of ``block`` tokens, the state carried exactly from block to
    block (every exponent non-positive, as in the parallel form). Its operations grow with
    ``T / block``, not with ``T`` (the token recurrence: a few per token, forward and
    backward: on a GPU each a launch) nor with ``T^2`` (the parallel form's memory); the
    campaign's oracle, checked against the recurrence and mpmath by the tests."""
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block={block!r} must be a positive number of tokens")
    _check(q, k, v, cu_seqlens)
    batch, length, heads, kd = q.shape
    scale = default_scale(kd) if scale is None else float(scale)
    pad = _padded(batch, length, cu_seqlens)
    qp, kp, vp = (pad.gather(x, F64) for x in (q, k, v))
    logd = _log_decay(g, g_gamma, pad, heads, F64)
    h0 = _h0(initial_state, len(pad.seqs), q, v, F64)
    o, ht, _ = _chunked(qp, kp, vp, logd, h0, scale, block, F64, F64)
    return pad.scatter(o, batch, length), ht


def simple_gla_blocked_grads(
    q, k, v, do, g=None, g_gamma=None, scale=None, initial_state=None, dht=None, cu_seqlens=None
) -> SimpleGLAGrads:
    """float64 autograd through :func:`simple_gla_blocked`."""
    return _grads(
        simple_gla_blocked, q, k, v, do, g, g_gamma, scale, initial_state, dht, cu_seqlens, F64
    )


# The chunked algorithm, shared by the naive reference (input dtype), the magnitudes and the
# blocked form (float64).


def _chunked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    logd: torch.Tensor,
    h0: torch.Tensor,
    scale: float,
    chunk: int,
    mm_dtype: torch.dtype,
    acc_dtype: torch.dtype,
    keep_states: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
    """Chunked simple GLA on padded ``[N, L, H, *]`` inputs.

    Matmuls take operands rounded to ``mm_dtype`` and round their result to it (eager torch);
    elementwise decay work and the state are in ``acc_dtype``. Returns ``o`` (``acc_dtype``),
    the final state and, with ``keep_states``, the state after every chunk.
    """
    length = q.shape[1]
    out = []
    h = h0.to(acc_dtype)
    states = []
    idx = torch.arange(chunk, device=q.device)
    causal = idx[:, None] >= idx[None, :]
    for t0 in range(0, length, chunk):
        t1 = min(t0 + chunk, length)
        c = t1 - t0
        qc = q[:, t0:t1].permute(0, 2, 1, 3)  # [N, H, c, K]
        kc = k[:, t0:t1].permute(0, 2, 1, 3)
        vc = v[:, t0:t1].permute(0, 2, 1, 3)
        b = torch.cumsum(logd[:, t0:t1].permute(0, 2, 1).to(acc_dtype), dim=-1)  # [N, H, c]
        diff = b[..., :, None] - b[..., None, :]
        w = torch.exp(torch.where(causal[:c, :c], diff, torch.full_like(diff, float("-inf"))))
        a = (qc.to(mm_dtype) @ kc.to(mm_dtype).transpose(-1, -2)).to(acc_dtype) * w * scale
        o_intra = (a.to(mm_dtype) @ vc.to(mm_dtype)).to(acc_dtype)
        o_inter = (qc.to(mm_dtype) @ h.to(mm_dtype)).to(acc_dtype) * (torch.exp(b) * scale)[
            ..., None
        ]
        out.append((o_intra + o_inter).permute(0, 2, 1, 3))
        b_last = b[..., -1:]  # [N, H, 1]; padding has log decay 0, so this is the last live token's
        ws = torch.exp(b_last - b)  # <= 1: b is non-increasing along the chunk
        kv = ((kc * ws[..., None]).to(mm_dtype).transpose(-1, -2) @ vc.to(mm_dtype)).to(acc_dtype)
        h = h * torch.exp(b_last)[..., None] + kv
        if keep_states:
            states.append(h)
    o = torch.cat(out, dim=1) if out else v.new_zeros(v.shape, dtype=acc_dtype)
    return o, h, states


def _dtype_of(name_or_dtype) -> torch.dtype:
    if isinstance(name_or_dtype, torch.dtype):
        return name_or_dtype
    return getattr(torch, str(name_or_dtype))


def simple_gla_naive(
    q, k, v, g=None, g_gamma=None, scale=None, initial_state=None, cu_seqlens=None, *, chunk_size
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager PyTorch in the input dtype: the chunked algorithm with ``chunk_size``.

    Every matmul (``q k^T``, ``A v``, ``q h``, ``k^T v``) rounds its operands and result to
    ``q.dtype`` (fp32 accumulation inside, as torch does); decays, cumulative sums and the state
    are fp32. Returns ``o`` in ``q.dtype`` and ``ht`` in float32. Differentiable (autograd).
    """
    _check(q, k, v, cu_seqlens)
    batch, length, heads, kd = q.shape
    scale = default_scale(kd) if scale is None else float(scale)
    dtype = q.dtype
    f32 = torch.float32
    pad = _padded(batch, length, cu_seqlens)
    qp, kp, vp = (pad.gather(x) for x in (q, k, v))
    logd = _log_decay(g, g_gamma, pad, heads, f32)
    h0 = _h0(initial_state, len(pad.seqs), q, v, f32)
    o, ht, _ = _chunked(qp, kp, vp, logd, h0, scale, chunk_size, dtype, f32)
    return pad.scatter(o.to(dtype), batch, length), ht


def simple_gla_naive_grads(
    q,
    k,
    v,
    do,
    g=None,
    g_gamma=None,
    scale=None,
    initial_state=None,
    dht=None,
    cu_seqlens=None,
    *,
    chunk_size,
) -> SimpleGLAGrads:
    """Autograd through :func:`simple_gla_naive` in the input dtype (``dg``, ``dh0`` in fp32)."""

    def fn(q, k, v, g, g_gamma, scale, h0, cu):
        return simple_gla_naive(q, k, v, g, g_gamma, scale, h0, cu, chunk_size=chunk_size)

    return _grads(fn, q, k, v, do, g, g_gamma, scale, initial_state, dht, cu_seqlens, q.dtype)


@dataclass
class Magnitudes:
    """Sums of absolute terms (float64), per output; see :func:`simple_gla_magnitudes`."""

    o: torch.Tensor
    ht: torch.Tensor
    dq: torch.Tensor | None = None
    dk: torch.Tensor | None = None
    dv: torch.Tensor | None = None
    dg: torch.Tensor | None = None
    dh0: torch.Tensor | None = None

    def as_dict(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class MagnitudeVariant:
    """One way to weight the terms of :func:`simple_gla_magnitude_variants`.

    Attributes:
        decay_factor: every log decay times this (``exp(f X)`` for a term of exponent ``X``).
        extra_decay: added to every live token's log decay after that (``exp(f X + e len)``,
            ``len`` the number of decays the term crosses).
        key_weight: ``[B, T, H]`` multiplying ``|k|`` per token (None: 1): a term's key factor
            is weighted by its key token's value (each term has at most one key).
        state_weight: multiplies ``|h0|`` (the terms that start from the initial state, which
            have no key).
    """

    decay_factor: float = 1.0
    extra_decay: float = 0.0
    key_weight: torch.Tensor | None = None
    state_weight: float = 1.0


def simple_gla_magnitudes(
    q,
    k,
    v,
    g=None,
    g_gamma=None,
    scale=None,
    initial_state=None,
    cu_seqlens=None,
    *,
    chunk_size,
    decay_factor=1.0,
    do=None,
    dht=None,
) -> Magnitudes:
    """The chunked computation in float64 on absolute values, log decays times ``decay_factor``.

    With every input replaced by its absolute value, every term of every output is non-negative,
    so each output equals the sum of the absolute values of its terms: the quantity that
    rounding-error bounds of sums are proportional to. With ``do`` (and optionally ``dht``) the
    gradient magnitudes come from float64 autograd of ``sum(|do| o) + sum(|dht| ht)``; ``dg``'s
    magnitude is the one of the chunked backward's formula ``dg = revcumsum(q.dq - k.dk)`` plus
    ``<dS_c, H_c>`` on each chunk's last token (see the README), which is larger than ``|dg|``
    itself (and than the magnitude of the token recurrence's ``exp(g_t) <dh_t, h_{t-1}>``).
    """
    (m,) = simple_gla_magnitude_variants(
        q,
        k,
        v,
        g,
        g_gamma,
        scale,
        initial_state,
        cu_seqlens,
        chunk_size=chunk_size,
        variants=(MagnitudeVariant(decay_factor),),
        do=do,
        dht=dht,
    )
    return m


def simple_gla_magnitude_variants(
    q,
    k,
    v,
    g=None,
    g_gamma=None,
    scale=None,
    initial_state=None,
    cu_seqlens=None,
    *,
    chunk_size,
    variants: Sequence[MagnitudeVariant],
    do=None,
    dht=None,
) -> list[Magnitudes]:
    """:func:`simple_gla_magnitudes` under several weightings (:class:`MagnitudeVariant`) in one
    batched float64 pass (the variants are stacked along the sequence axis).

    Every term of every output is ``weight x product of inputs`` with ``weight = exp(X)``; a
    variant replaces the weight by ``exp(f X + e len)`` and the key factor ``|k_j|`` by
    ``|k_j| w_j``. The results are sums of non-negative terms, so a difference quotient in ``f``
    or ``e`` of two variants bounds the derivative from above (each term is convex in them).
    """
    _check(q, k, v, cu_seqlens)
    batch, length, heads, kd = q.shape
    scale = abs(default_scale(kd) if scale is None else float(scale))
    pad = _padded(batch, length, cu_seqlens)
    n, reps = len(pad.seqs), len(variants)
    qa, ka, va = (pad.gather(x, F64).abs() for x in (q, k, v))
    logd = _log_decay(g, g_gamma, pad, heads, F64).detach()
    live = pad.live(q.device)
    ld = torch.cat([logd * var.decay_factor + var.extra_decay * live for var in variants])
    weights = []
    for var in variants:
        w = (
            torch.ones_like(logd)
            if var.key_weight is None
            else pad.gather(var.key_weight.detach(), F64)
        )
        weights.append(w[..., None])
    kw = torch.cat(weights)
    h0a = _h0(initial_state, n, q, v, F64).abs()

    def rep(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x.detach()] * reps)

    qp, kp, vp, h0 = rep(qa), rep(ka), rep(va), rep(h0a)
    want_grads = do is not None
    if want_grads:
        for t in (qp, kp, vp, h0):
            t.requires_grad_()
    h0w = torch.tensor(
        [var.state_weight for var in variants for _ in range(n)], dtype=F64, device=q.device
    )[:, None, None, None]
    with torch.set_grad_enabled(want_grads):
        o, ht, states = _chunked(
            qp, kp * kw, vp, ld, h0 * h0w, scale, chunk_size, F64, F64, keep_states=want_grads
        )
        for s in states:
            s.retain_grad()
        if not want_grads:
            return [
                Magnitudes(
                    pad.scatter(o[i * n : (i + 1) * n].detach(), batch, length),
                    ht[i * n : (i + 1) * n].detach(),
                )
                for i in range(reps)
            ]
        loss = (o * rep(pad.gather(do, F64).abs())).sum()
        if dht is not None:
            loss = loss + (ht * rep(dht.to(F64).abs())).sum()
        got: list[torch.Tensor | None]
        if loss.requires_grad:
            got = list(torch.autograd.grad(loss, [qp, kp, vp, h0, *states], allow_unused=True))
        else:  # no token and no dht: nothing depends on the inputs
            got = [None] * (4 + len(states))
    gq, gk, gv, gh0, *gs = got
    zeros = torch.zeros_like
    gq = zeros(qp) if gq is None else gq
    gk = zeros(kp) if gk is None else gk
    gv = zeros(vp) if gv is None else gv
    gh0 = zeros(h0) if gh0 is None else gh0
    lengths = torch.tensor([eos - bos for _, bos, eos in pad.seqs] * reps, device=q.device)
    # |k_i| d/d|k_i| = k'_i d/dk'_i with k' = |k| w: the key weight is in gk already
    dg = _dg_magnitudes(qp.detach() * gq, kp.detach() * gk, states, gs, lengths, chunk_size)
    out = []
    for i in range(reps):
        part = slice(i * n, (i + 1) * n)
        out.append(
            Magnitudes(
                o=pad.scatter(o[part].detach(), batch, length),
                ht=ht[part].detach(),
                dq=pad.scatter(gq[part], batch, length),
                dk=pad.scatter(gk[part], batch, length),
                dv=pad.scatter(gv[part], batch, length),
                dg=pad.scatter(dg[part], batch, length),
                dh0=gh0[part],
            )
        )
    return out


def _dg_magnitudes(q_dq, k_dk, states, d_states, lengths, chunk):
    """``dg``'s formula on magnitudes: the chunk-local suffix sums of ``|q|.MAG(dq) +
    |k|.MAG(dk)`` plus ``<MAG(dS_c), MAG(H_c)>`` on each chunk's last live token.

    ``q_dq``, ``k_dk``: ``[N, L, H, D]`` products (summed over D here); ``states[c]``, the state
    after chunk c, and ``d_states[c]``, its gradient ``[N, H, K, V]``; ``lengths [N]``."""
    terms = q_dq.sum(-1) + k_dk.sum(-1)  # [N, L, H]
    n_seq, length = terms.shape[:2]
    rows = torch.arange(n_seq, device=terms.device)
    for c, (s, gsc) in enumerate(zip(states, d_states, strict=True)):
        if gsc is None:
            continue
        last = torch.clamp(lengths.clamp(max=(c + 1) * chunk) - 1, min=0)
        live = (last >= c * chunk).to(terms.dtype)[:, None]  # the chunk holds live tokens
        boundary = (s.detach() * gsc).sum((-1, -2)) * live  # [N, H]
        terms = terms.index_put((rows, last), boundary, accumulate=True)
    n_chunks, heads = -(-length // chunk), terms.shape[2]
    padded = torch.nn.functional.pad(terms, (0, 0, 0, n_chunks * chunk - length))
    parts = padded.reshape(n_seq, n_chunks, chunk, heads)
    suffix = torch.flip(torch.cumsum(torch.flip(parts, [2]), 2), [2])
    return suffix.reshape(n_seq, n_chunks * chunk, heads)[:, :length]


def dtype_from_name(name: str) -> torch.dtype:
    """torch dtype for a dtype name (``'bfloat16'`` -> ``torch.bfloat16``)."""
    return _dtype_of(name)
