"""Which construct of round 3's bug-free Triton attention (``tests/plugins/planted3.py``) goes
wrong when compiled, where its compiled-only rows came from (``lse = log 4`` for five equal
logits: a key dropped; head dim 1, a partial key tile of 32; the same wrong values outside the
harness, ``.ci/control_attention_diag.py REPRO``). The kernel's loop body, one construct changed
at a time, on one sequence of five equal logits and on random ones; prints each variant's error.

    python .ci/control_attention_ablate.py          (DIAG_DEVICE=cpu: Triton's interpreter)
"""

from __future__ import annotations

import itertools
import os
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, len_ptr, Tq, Tk, D, scale, w_left, w_right,
    KEY_PADDING: tl.constexpr, SEEN: tl.constexpr, IEEE: tl.constexpr, TRANS: tl.constexpr,
    WINDOW: tl.constexpr,
    BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    b = tl.program_id(1)
    k_len = Tk
    if KEY_PADDING:
        k_len = tl.load(len_ptr + b)
    offs_q = tl.program_id(0) * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    q_ok = offs_q < Tq
    d_ok = offs_d < D
    q_rows = b * Tq + offs_q
    q = tl.load(
        q_ptr + q_rows[:, None] * D + offs_d[None, :], mask=q_ok[:, None] & d_ok[None, :], other=0.0
    )
    m = tl.full([BLOCK_Q], float("-inf"), tl.float32)
    ell = tl.zeros([BLOCK_Q], tl.float32)
    acc = tl.zeros([BLOCK_Q, BLOCK_D], tl.float32)
    for k0 in range(0, k_len, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_ok = offs_k < k_len
        kv = (b * Tk + offs_k)[:, None] * D + offs_d[None, :]
        kv_mask = k_ok[:, None] & d_ok[None, :]
        v = tl.load(v_ptr + kv, mask=kv_mask, other=0.0)
        if TRANS:
            k = tl.load(k_ptr + kv, mask=kv_mask, other=0.0)
            kt = tl.trans(k)
        else:
            kvt = (b * Tk + offs_k)[None, :] * D + offs_d[:, None]
            kt = tl.load(k_ptr + kvt, mask=k_ok[None, :] & d_ok[:, None], other=0.0)
        if IEEE:
            s = tl.dot(q, kt, input_precision="ieee") * scale
        else:
            s = tl.dot(q, kt) * scale
        keep = q_ok[:, None] & k_ok[None, :]
        pos = offs_q + (k_len - Tq)
        if WINDOW == 1:  # the control's: runtime branches on the window's sides
            if w_left >= 0:
                keep = keep & (offs_k[None, :] >= pos[:, None] - w_left)
            if w_right >= 0:
                keep = keep & (offs_k[None, :] <= pos[:, None] + w_right)
        if WINDOW == 2:  # the same without branches
            keep = keep & ((offs_k[None, :] >= pos[:, None] - w_left) | (w_left < 0))
            keep = keep & ((offs_k[None, :] <= pos[:, None] + w_right) | (w_right < 0))
        s = tl.where(keep, s, float("-inf"))
        if SEEN:
            seen = tl.max(keep.to(tl.int32), 0) > 0
            v = tl.where(seen[:, None], v, 0.0)
        m_new = tl.maximum(m, tl.max(s, 1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - shift)
        p = tl.exp(s - shift[:, None])
        ell = ell * alpha + tl.sum(p, 1)
        if IEEE:
            acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p, v)
        m = m_new
    live = ell > 0.0
    o = acc / tl.where(live, ell, 1.0)[:, None]
    lse = tl.where(live, m + tl.log(tl.where(live, ell, 1.0)), float("-inf"))
    tl.store(o_ptr + q_rows[:, None] * D + offs_d[None, :], o, mask=q_ok[:, None] & d_ok[None, :])
    tl.store(lse_ptr + q_rows, lse, mask=q_ok)


def run(q, k, v, *, padding, seen, ieee, trans, bq, bk, warps, dev, window=0):
    b, tq, d = q.shape
    tk = k.shape[1]
    o = torch.zeros_like(q)
    lse = torch.full((b, tq), float("-inf"))
    q, k, v, o, lse = (t.to(dev) for t in (q, k, v, o, lse))
    lengths = torch.full((b,), tk, dtype=torch.int32, device=dev)
    _kernel[(triton.cdiv(tq, bq), b)](
        q, k, v, o, lse, lengths, tq, tk, d, d**-0.5, -1, -1, KEY_PADDING=padding, SEEN=seen,
        IEEE=ieee, TRANS=trans, WINDOW=window, BLOCK_Q=bq, BLOCK_K=bk,
        BLOCK_D=max(16, triton.next_power_of_2(d)), num_warps=warps,
    )  # fmt: skip
    return o.cpu().double(), lse.cpu().double()


def main() -> int:
    dev = os.environ.get("DIAG_DEVICE", "cuda")
    scope = None
    if dev == "cpu":
        from fuzz.triton_runtime import interpreting

        scope = interpreting()
        scope.__enter__()
    g = torch.Generator().manual_seed(0)
    cases = {
        "five equal logits": (
            torch.zeros(3, 1, 1),
            torch.randn(3, 5, 1, generator=g),
            torch.randn(3, 5, 1, generator=g),
        ),
        "random d=1 tk=5": tuple(torch.randn(3, n, 1, generator=g) for n in (1, 5, 5)),
        "random d=16 tk=33": tuple(torch.randn(2, n, 16, generator=g) for n in (3, 33, 33)),
    }  # fmt: skip
    print("case | padding seen ieee trans bq bk warps | max error o, lse")
    wrong = 0
    for name, (q, k, v) in cases.items():
        s = torch.einsum("bqd,bkd->bqk", q.double(), k.double()) * q.shape[-1] ** -0.5
        ro, rl = torch.softmax(s, -1) @ v.double(), torch.logsumexp(s, -1)
        grid = itertools.product((0, 1), (0, 1), (0, 1), (0, 1), (16,), (16, 32), (1, 4))
        if os.environ.get("ABLATE_WINDOW_ONLY"):
            grid = ()
        for padding, seen, ieee, trans, bq, bk, warps in grid:
            if dev == "cpu" and warps != 4:
                continue
            o, lse = run(q, k, v, padding=padding, seen=seen, ieee=ieee, trans=trans, bq=bq, bk=bk,
                         warps=warps, dev=dev)  # fmt: skip
            eo, el = (o - ro).abs().max().item(), (lse - rl).abs().max().item()
            bad = not max(eo, el) < (1e-4 if ieee else 1e-2)
            wrong += bad
            if bad or (padding, seen, ieee, trans, warps) == (1, 1, 1, 1, 4):
                print(f"{'WRONG' if bad else 'right'} {name} | {padding} {seen} {ieee} {trans} "
                      f"{bq} {bk} {warps} | {eo:.3g}, {el:.3g}")  # fmt: skip
    print("window (-1, -1): 0 none, 1 the control's runtime branches, 2 branch-free")
    for name, (q, k, v) in cases.items():
        s = torch.einsum("bqd,bkd->bqk", q.double(), k.double()) * q.shape[-1] ** -0.5
        ro, rl = torch.softmax(s, -1) @ v.double(), torch.logsumexp(s, -1)
        for window, padding, seen, bk in itertools.product((1, 2), (0, 1), (0, 1), (16, 32)):
            o, lse = run(q, k, v, padding=padding, seen=seen, ieee=1, trans=1, bq=16, bk=bk,
                         warps=4, dev=dev, window=window)  # fmt: skip
            eo, el = (o - ro).abs().max().item(), (lse - rl).abs().max().item()
            bad = not max(eo, el) < 1e-4
            wrong += bad
            print(f"{'WRONG' if bad else 'right'} {name} | window {window} padding {padding} "
                  f"seen {seen} bk {bk} | {eo:.3g}, {el:.3g}")  # fmt: skip
    print(f"{wrong} wrong variant(s)")
    return int(wrong > 0)


if __name__ == "__main__":
    sys.exit(main())
