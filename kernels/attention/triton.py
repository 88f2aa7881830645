"""Flash-attention forward in Triton (compiled on CUDA, or Triton's interpreter on CPU tensors).

Semantics (shared with ``kernels.attention.pallas``; the math is in ``kernels/attention/README.md``)::

    s[i, j] = scale * q[i] . k[j]                        scale defaults to 1/sqrt(D)
    s[i, j] = cap * tanh(s[i, j] / cap)                  if softcap
    s[i, j] = s[i, j] - slope[h] * |i + Lk - Lq - j|     if ALiBi
    s[i, j] = -inf where key j is not visible from query i
    o[i] = sum_j softmax(s[i])[j] v[j] ;  lse[i] = log sum_j exp(s[i, j])

Query ``i`` of a sequence with ``Lq`` queries and ``Lk`` valid keys sits at key position
``i + Lk - Lq`` (bottom-right alignment). Causal keeps ``j <= i + Lk - Lq``; a window
``(left, right)`` keeps ``i + Lk - Lq - left <= j <= i + Lk - Lq + right`` (-1: unbounded); key
padding makes ``Lk`` the batch element's ``key_lengths[b]``; packed sequences take ``Lq``, ``Lk``
and their offsets from ``cu_seqlens_q/k``. A row with no visible key returns zeros and LSE -inf.

Each program owns ``BLOCK_Q`` queries of one (sequence, head) and walks only the key tiles that
some of its queries can see (causal and window bounds), with the online softmax: running max
``m``, running sum ``l``, and an fp32 accumulator rescaled whenever ``m`` grows. Statistics and
products are fp32 whatever the input dtype (inputs are converted right after loading: the
interpreter cannot do arithmetic on bfloat16); fp32 products are exact (``input_precision="ieee"``,
no TF32). The head dim is padded to a power of two >= 16 by masked loads.

The switches (causal, window sides, soft cap, ALiBi, key padding) are runtime flags, not
``tl.constexpr``: one binary per (dtype, varlen, BLOCK_Q, BLOCK_K, BLOCK_D) instead of 64 times
as many. A fuzzer draws the switches independently, so as constexprs nearly every example was a
new compile (on an H100, 100 examples of the gpu profile had not finished compiling in 280 s).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._triton_interp import interpreted
from kernels._triton_jit import jit_any_size, placeholders
from kernels.alibi import alibi_slopes as standard_alibi_slopes
from kernels.attention._common import (
    check_blocks,
    check_cu_seqlens,
    check_dtypes,
    check_lengths,
    check_options,
    check_shapes,
    padded_head_dim,
    to_host,
)

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def _tanh(x):
    # Accurate to a few ulps everywhere (neither triton.language nor the interpreter has tanh):
    # a series near 0, where 1 - 2 / (exp(2|x|) + 1) would cancel, and that formula elsewhere.
    a = tl.abs(x)
    z = x * x
    # Taylor series of tanh(x) / x in x^2, written out: compiled Triton reads no global floats
    # (|x| < 0.55 keeps the truncation below 2e-8 relative).
    series = x * (
        1.0
        + z
        * (
            -0.3333333333333333
            + z
            * (
                0.13333333333333333
                + z
                * (
                    -0.05396825396825397
                    + z
                    * (
                        0.021869488536155203
                        + z
                        * (
                            -0.008863235529902197
                            + z
                            * (
                                0.003592128036572481
                                + z * (-0.0014558343870513183 + z * 0.000590027440945586)
                            )
                        )
                    )
                )
            )
        )
    )
    big = 1.0 - 2.0 / (tl.exp(2.0 * tl.minimum(a, 20.0)) + 1.0)
    return tl.where(a < 0.55, series, tl.where(x < 0, -big, big))


@jit_any_size(specialize=("stride_qd", "stride_kd", "stride_vd", "stride_od"))
def _attn_fwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    lse_ptr,
    slopes_ptr,
    key_len_ptr,
    cu_q_ptr,
    cu_k_ptr,
    scale,
    softcap,
    window_left,
    window_right,
    seq_q,
    seq_k,
    head_dim,
    n_heads,
    group,
    stride_qb,
    stride_qh,
    stride_qt,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kt,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vt,
    stride_vd,
    stride_ob,
    stride_oh,
    stride_ot,
    stride_od,
    stride_lb,
    stride_lh,
    stride_lt,
    is_causal,
    has_left,
    has_right,
    has_softcap,
    has_alibi,
    has_key_len,
    IS_VARLEN: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid_q = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // n_heads
    h = pid_bh % n_heads
    hk = h // group
    if IS_VARLEN:
        # Sequence b of the packed batch (of one): its rows start at cu_q[b] (queries) and
        # cu_k[b] (keys).
        q_start = tl.load(cu_q_ptr + b)
        q_len = tl.load(cu_q_ptr + b + 1) - q_start
        k_start = tl.load(cu_k_ptr + b)
        k_len = tl.load(cu_k_ptr + b + 1) - k_start
        q_base = q_ptr + h * stride_qh + q_start * stride_qt
        k_base = k_ptr + hk * stride_kh + k_start * stride_kt
        v_base = v_ptr + hk * stride_vh + k_start * stride_vt
        o_base = o_ptr + h * stride_oh + q_start * stride_ot
        lse_base = lse_ptr + h * stride_lh + q_start * stride_lt
    else:
        q_len = seq_q
        k_len = seq_k
        if has_key_len:
            k_len = tl.load(key_len_ptr + b)
        b64 = b.to(tl.int64)
        q_base = q_ptr + b64 * stride_qb + h * stride_qh
        k_base = k_ptr + b64 * stride_kb + hk * stride_kh
        v_base = v_ptr + b64 * stride_vb + hk * stride_vh
        o_base = o_ptr + b64 * stride_ob + h * stride_oh
        lse_base = lse_ptr + b64 * stride_lb + h * stride_lh
    # Query i of this sequence sits at key position i + diag (bottom-right alignment).
    diag = k_len - q_len

    rows = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    dims = tl.arange(0, BLOCK_D)
    row_ok = rows < q_len
    dim_ok = dims < head_dim
    pos = rows + diag
    q = tl.load(
        q_base + rows[:, None] * stride_qt + dims[None, :] * stride_qd,
        mask=row_ok[:, None] & dim_ok[None, :],
        other=0.0,
    ).to(tl.float32)
    slope = tl.load(slopes_ptr + h, mask=has_alibi != 0, other=0.0).to(tl.float32)

    # Key tiles some query of this block can see: [lo, hi).
    lo = k_len * 0  # an int32 zero: the runtime ifs below need one type in both branches
    hi = k_len
    if is_causal:
        # The block's last query sees keys up to position (pid_q + 1) * BLOCK_Q - 1 + diag.
        hi = tl.minimum(hi, (pid_q + 1) * BLOCK_Q + diag)
    if has_right:
        hi = tl.minimum(hi, (pid_q + 1) * BLOCK_Q + diag + window_right)
    if has_left:
        lo = tl.maximum(lo, pid_q * BLOCK_Q + diag - window_left)
    # Keys in [seen_lo, hi) are visible to some query of this block; the others of a tile are
    # seen by none of them and never loaded (a NaN there times a zero probability is NaN).
    seen_lo = lo
    lo = (lo // BLOCK_K) * BLOCK_K
    hi = tl.where(pid_q * BLOCK_Q < q_len, hi, lo)  # a block past the sequence's end: no work

    m_i = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_Q], tl.float32)
    acc = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)
    offs_k = tl.arange(0, BLOCK_K)
    k_ptrs = k_base + offs_k[:, None] * stride_kt + dims[None, :] * stride_kd
    v_ptrs = v_base + offs_k[:, None] * stride_vt + dims[None, :] * stride_vd
    for start in range(lo, hi, BLOCK_K):
        cols = start + offs_k
        col_ok = (cols >= seen_lo) & (cols < hi)
        # Keys past the sequence's key count, or visible to no query of the block, are never
        # read (zeros instead).
        kv_mask = col_ok[:, None] & dim_ok[None, :]
        k = tl.load(k_ptrs + start * stride_kt, mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_ptrs + start * stride_vt, mask=kv_mask, other=0.0).to(tl.float32)
        valid = col_ok[None, :] & (rows[:, None] >= 0)
        if is_causal:
            valid = valid & (cols[None, :] <= pos[:, None])
        if has_left:
            valid = valid & (cols[None, :] >= pos[:, None] - window_left)
        if has_right:
            valid = valid & (cols[None, :] <= pos[:, None] + window_right)

        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        s = s * scale
        if has_softcap:
            s = softcap * _tanh(s / softcap)
        if has_alibi:
            s = s - slope * tl.abs(pos[:, None] - cols[None, :]).to(tl.float32)
        s = tl.where(valid, s, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row with no visible key so far has max -inf: shift it by 0 instead, so that
        # exp(-inf - -inf) = NaN never happens.
        m_shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_shift)
        p = tl.exp(s - m_shift[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc += tl.dot(p, v, input_precision="ieee")
        m_i = m_new

    # l_i >= 1 for a row with a visible key (its max contributes exp(0)), 0 for a row without.
    l_safe = tl.where(l_i > 0.0, l_i, 1.0)
    o = acc / l_safe[:, None]
    lse = tl.where(l_i > 0.0, m_i + tl.log(l_safe), float("-inf"))
    tl.store(
        o_base + rows[:, None] * stride_ot + dims[None, :] * stride_od,
        o.to(o_ptr.dtype.element_ty),
        mask=row_ok[:, None] & dim_ok[None, :],
    )
    tl.store(lse_base + rows * stride_lt, lse, mask=row_ok)


def _strides(t: torch.Tensor) -> tuple[int, ...]:
    """``t``'s strides, or for a tensor of no elements (a packed batch with no keys at all) those
    of its shape laid out contiguously: never read, and with the unit innermost stride the
    kernel specializes on (torch gave such a tensor other strides, and it selected a binary of
    its own)."""
    if t.numel():
        return tuple(t.stride())
    strides, step = [], 1
    for n in reversed(t.shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _kernel(interpret: bool):
    return interpreted(_attn_fwd_kernel, fast=True) if interpret else _attn_fwd_kernel


def _check_tensor(name: str, t, *, device: torch.device) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device} but q is on {device}")
    return t


def _index_tensor(name: str, t, device: torch.device) -> torch.Tensor:
    t = _check_tensor(name, t, device=device)
    if t.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name}.dtype={t.dtype} must be torch.int32 or torch.int64")
    return t.to(torch.int32).contiguous()


def _slopes(alibi_slopes, n_heads: int, device: torch.device) -> torch.Tensor | None:
    if alibi_slopes is None:
        return None
    if isinstance(alibi_slopes, str):
        if alibi_slopes != "standard":
            raise ValueError(f"alibi_slopes={alibi_slopes!r} must be 'standard', a tensor or None")
        return torch.tensor(standard_alibi_slopes(n_heads), dtype=torch.float32, device=device)
    t = _check_tensor("alibi_slopes", alibi_slopes, device=device)
    if tuple(t.shape) != (n_heads,):
        raise ValueError(
            f"alibi_slopes.shape={tuple(t.shape)} must be ({n_heads},), one per q head"
        )
    if not t.is_floating_point():
        raise ValueError(f"alibi_slopes.dtype={t.dtype} must be a floating dtype")
    if not torch.isfinite(t).all():
        raise ValueError("alibi_slopes must be finite")
    return t.to(torch.float32).contiguous()


def _outputs(out, lse_out, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    b, hq, tq, _ = q.shape
    if out is None:
        out = torch.empty_like(q)
    else:
        _check_tensor("out", out, device=q.device)
        if tuple(out.shape) != tuple(q.shape) or out.dtype != q.dtype:
            raise ValueError(
                f"out is {out.dtype}{list(out.shape)}; expected q's {q.dtype}{list(q.shape)}"
            )
    if lse_out is None:
        lse_out = torch.empty((b, hq, tq), dtype=torch.float32, device=q.device)
    else:
        _check_tensor("lse_out", lse_out, device=q.device)
        if tuple(lse_out.shape) != (b, hq, tq) or lse_out.dtype != torch.float32:
            raise ValueError(
                f"lse_out is {lse_out.dtype}{list(lse_out.shape)}; expected torch.float32"
                f"{[b, hq, tq]}"
            )
    return out, lse_out


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    causal: bool = False,
    window: tuple[int, int] | None = None,
    key_lengths: torch.Tensor | None = None,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    alibi_slopes: torch.Tensor | str | None = None,
    softcap: float | None = None,
    block_q: int = 64,
    block_k: int = 64,
    out: torch.Tensor | None = None,
    lse_out: torch.Tensor | None = None,
    interpret: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention forward with the online softmax; returns the output and the log-sum-exp.

    Args:
        q: queries ``[B, Hq, Tq, D]``, float32/float16/bfloat16, ``1 <= D <= 256``.
        k, v: keys and values ``[B, Hkv, Tk, D]``, q's dtype; ``Hq % Hkv == 0`` (GQA/MQA).
        scale: positive multiplier of ``q . k``, applied once (default ``1/sqrt(D)``).
        causal: key j visible from query i iff ``j <= i + Lk - Lq`` (bottom-right aligned).
        window: ``(left, right)``: visible iff ``i + Lk - Lq - left <= j <= i + Lk - Lq + right``;
            -1 leaves a side unbounded. Combines with ``causal``.
        key_lengths: int ``[B]``: batch element b has ``Lk = key_lengths[b] <= Tk`` valid keys;
            keys past it are never read.
        cu_seqlens_q, cu_seqlens_k: int ``[N + 1]``, together: ``N`` packed sequences in a batch
            of one (``B == 1``); sequence n owns query rows ``cu_seqlens_q[n]:cu_seqlens_q[n+1]``
            (they must cover ``Tq``) and key rows ``cu_seqlens_k[n]:cu_seqlens_k[n+1]`` (keys
            past ``cu_seqlens_k[-1]`` are never read). Zero-length sequences are allowed.
        alibi_slopes: ``'standard'`` (``kernels.alibi``), float ``[Hq]``, or None; adds
            ``-slope[h] * |i + Lk - Lq - j|`` to the (soft-capped) logit.
        softcap: ``cap`` of ``cap * tanh(s / cap)`` applied after the scale, before ALiBi.
        block_q, block_k: tile sizes, powers of two in [16, 256].
        out: optional ``[B, Hq, Tq, D]`` output of q's dtype, any strides; written in place.
        lse_out: optional ``[B, Hq, Tq]`` float32 output, any strides; written in place.
        interpret: run Triton's interpreter (CPU tensors) instead of the compiled kernel.

    Returns:
        ``(o [B, Hq, Tq, D] in q's dtype, lse [B, Hq, Tq] float32)``; a query with no visible key
        gets ``o = 0`` and ``lse = -inf``.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    batch, hq, hkv, tq, tk, d = check_shapes(q.shape, k.shape, v.shape)
    check_dtypes(q.dtype, k.dtype, v.dtype, DTYPES)
    for name, t in (("k", k), ("v", v)):
        _check_tensor(name, t, device=q.device)
    opts = check_options(
        head_dim=d,
        scale=scale,
        causal=causal,
        window=window,
        softcap=softcap,
        has_alibi=alibi_slopes is not None,
    )
    block_q, block_k = check_blocks(block_q, block_k)
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise ValueError("cu_seqlens_q and cu_seqlens_k must be given together")
        if key_lengths is not None:
            raise ValueError("key_lengths cannot be combined with cu_seqlens_q/cu_seqlens_k")
        if batch != 1:
            raise ValueError(f"with cu_seqlens the batch q.shape[0]={batch} must be 1 (packed)")
        cu_q = _index_tensor("cu_seqlens_q", cu_seqlens_q, q.device)
        cu_k = _index_tensor("cu_seqlens_k", cu_seqlens_k, q.device)
        host_q = check_cu_seqlens("cu_seqlens_q", to_host("cu_seqlens_q", cu_q), tq, exact=True)
        host_k = check_cu_seqlens("cu_seqlens_k", to_host("cu_seqlens_k", cu_k), tk, exact=False)
        if host_q.shape != host_k.shape:
            raise ValueError(
                f"cu_seqlens_q.shape={host_q.shape} and cu_seqlens_k.shape={host_k.shape} must "
                "be equal (one entry per sequence, plus one)"
            )
        n_seq = host_q.shape[0] - 1
        max_q = int((host_q[1:] - host_q[:-1]).max())
    else:
        cu_q = cu_k = None  # type: ignore[assignment]
        n_seq = batch
        max_q = tq
    key_len: torch.Tensor | None = None
    if key_lengths is not None:
        key_len = _index_tensor("key_lengths", key_lengths, q.device)
        check_lengths("key_lengths", to_host("key_lengths", key_len), batch, tk)
    slopes = _slopes(alibi_slopes, hq, q.device)
    out, lse_out = _outputs(out, lse_out, q)
    if max_q == 0 or hq == 0:
        return out, lse_out
    f32, i32 = placeholders(q.device)
    grid = (triton.cdiv(max_q, block_q), n_seq * hq)
    _kernel(interpret)[grid](
        q,
        k,
        v,
        out,
        lse_out,
        slopes if slopes is not None else f32,
        key_len if key_len is not None else i32,
        cu_q if cu_q is not None else i32,
        cu_k if cu_k is not None else i32,
        opts.scale,
        opts.softcap if opts.softcap is not None else 1.0,
        opts.window_left,
        opts.window_right,
        tq,
        tk,
        d,
        hq,
        hq // hkv,
        *_strides(q),
        *_strides(k),
        *_strides(v),
        *_strides(out),
        *_strides(lse_out),
        int(opts.causal),
        int(opts.window_left >= 0),
        int(opts.window_right >= 0),
        int(opts.softcap is not None),
        int(slopes is not None),
        int(key_len is not None),
        IS_VARLEN=varlen,
        BLOCK_Q=block_q,
        BLOCK_K=block_k,
        BLOCK_D=padded_head_dim(d),
    )
    return out, lse_out
