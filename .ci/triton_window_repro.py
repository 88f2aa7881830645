"""A standalone check of what ``.ci/control_attention_diag.py`` found on an H200 (Triton 3.6):
round 3's bug-free attention is wrong when compiled with a window whose bounds are -1 (both
``if`` bodies skipped at run time) and key blocks of 32, never with blocks of 16 or no window.
Here the kernel keeps only its mask: a key mask refined under a run-time ``if`` inside the key
loop, summed per query. Prints each variant's mismatches; nothing of the harness is used.

    python .ci/triton_window_repro.py
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _count(out_ptr, k_len, w_left, w_right, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
           WINDOW: tl.constexpr):  # fmt: skip
    offs_q = tl.arange(0, BLOCK_Q)
    total = tl.zeros([BLOCK_Q], tl.float32)
    for k0 in range(0, k_len, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        keep = (offs_q[:, None] < 1) & (offs_k[None, :] < k_len)
        if WINDOW:
            if w_left >= 0:
                keep = keep & (offs_k[None, :] >= offs_q[:, None] - w_left)
            if w_right >= 0:
                keep = keep & (offs_k[None, :] <= offs_q[:, None] + w_right)
        s = tl.where(keep, 0.0, float("-inf"))
        total += tl.sum(tl.exp(s), 1)
    tl.store(out_ptr + offs_q, total)


def main() -> None:
    for block_k in (16, 32, 64):
        for window in (False, True):
            for k_len in (5, 33):
                out = torch.full((16,), -1.0, device="cuda")
                _count[(1,)](out, k_len, -1, -1, BLOCK_Q=16, BLOCK_K=block_k, WINDOW=window)
                torch.cuda.synchronize()
                got = out[0].item()
                ok = got == k_len and (out[1:] == 0).all().item()
                print(f"block_k={block_k} window={window} k_len={k_len}: query 0 counts {got:g} "
                      f"keys (want {k_len}); {'ok' if ok else 'WRONG'}")  # fmt: skip


if __name__ == "__main__":
    main()
