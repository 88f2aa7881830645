"""Round 3's bug-free Triton attention (``control3_attention_triton``) on the GPU, outside the
harness: plain torch tensors against a float64 reference, over the choices its compiled-only
rows had (head dim 1, key blocks of 32, a partial key tile, a second batch element or head, a
window of (-1, -1)). Prints each choice's failing share and the first failures: whether the
rows are the kernel's (or the compiler's), or the harness's.

    python .ci/control_attention_diag.py
    python .ci/control_attention_diag.py REPRO.py ...   # the inputs of the harness's reproducers

With reproducers: each one's inputs (read with NumPy from its ``DATA``) run through the kernel's
own wrapper on plain tensors of ``DIAG_DEVICE`` (cuda), three times, and are compared with the
float64 reference (keys past ``key_lengths`` left out): a kernel (or compiler) fault fails here
too; a fault of the harness does not.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
spec = importlib.util.spec_from_file_location("planted3_diag", ROOT / "tests/plugins/planted3.py")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)


def reference(q, k, v, scale, hq, hkv):
    q, k, v = (t.double().cpu() for t in (q, k, v))
    k = k.repeat_interleave(hq // hkv, dim=1)
    v = v.repeat_interleave(hq // hkv, dim=1)
    s = torch.einsum("bhqd,bhkd->bhqk", q, k) * scale
    lse = torch.logsumexp(s, -1)
    return torch.softmax(s, -1) @ v, lse


def replay(paths: list[str], dev: str, scope) -> int:
    """The reproducers' inputs through the kernel alone; 1 where any run is wrong."""
    from fuzz.reproducer import load
    from fuzz.standalone import decode_for_reading

    wrong = 0
    for path in paths:
        meta, data = load(path)
        a = {
            n: torch.from_numpy(x.copy())
            for n, x in decode_for_reading(data, meta["dtypes"]).items()
        }
        p = meta["params"]
        q, k, v = a["q"], a["k"], a["v"]
        d, hq, hkv = q.shape[-1], q.shape[1], k.shape[1]
        scale = p.get("scale") or d**-0.5
        lengths = a.get("key_lengths")
        window = p.get("window")
        kw = {} if lengths is None else {"key_lengths": lengths.to(dev)}
        errs = []
        for _ in range(3):
            with scope():
                o, lse = mod.attention(
                    q.to(dev), k.to(dev), v.to(dev), scale=scale, block_q=p["block_q"],
                    block_k=p["block_k"], causal=bool(p.get("causal")),
                    window=None if window is None else tuple(window), **kw,
                )  # fmt: skip
            if dev == "cuda":
                torch.cuda.synchronize()
            err = 0.0
            for b in range(q.shape[0]):
                n = k.shape[2] if lengths is None else int(lengths[b])
                ro, rl = reference(
                    q[b : b + 1], k[b : b + 1, :, :n], v[b : b + 1, :, :n], scale, hq, hkv
                )
                err = max(err, (o[b : b + 1].double().cpu() - ro).abs().max().item(),
                          (lse[b : b + 1].double().cpu() - rl).abs().max().item())  # fmt: skip
            errs.append(err)
        bad = not max(errs) < 1e-4
        wrong += bad
        print(f"{'WRONG' if bad else 'right'} {Path(path).name}: {meta['message'][:90]}; "
              f"outside the harness, max errors {', '.join(f'{e:.3g}' for e in errs)}")  # fmt: skip
    return int(wrong > 0)


def main() -> int:
    import contextlib
    import os

    dev = os.environ.get("DIAG_DEVICE", "cuda")
    scope = contextlib.nullcontext
    if dev == "cpu":  # (a check of the script itself: Triton's interpreter)
        from fuzz.triton_runtime import interpreting

        scope = interpreting
    if sys.argv[1:]:
        return replay(sys.argv[1:], dev, scope)
    fails = defaultdict(lambda: [0, 0])
    shown = 0
    grid = itertools.product(
        *(
            ((1, 3), (1, 3), (1, 3), (5, 33), (1, 2, 16), (16, 32), (16, 32), (False, True), (0, 1))
            if dev == "cuda"
            else ((1, 3), (1,), (1,), (5,), (1,), (32,), (32,), (True,), (0,))
        )
    )
    for b, h, tq, tk, d, bq, bk, window, seed in grid:
        g = torch.Generator().manual_seed(seed + 7 * tk + d)
        q = torch.randn(b, h, tq, d, generator=g)
        k = torch.randn(b, h, tk, d, generator=g)
        v = torch.randn(b, h, tk, d, generator=g)
        scale = d**-0.5
        with scope():
            o, lse = mod.attention(
                q.to(dev), k.to(dev), v.to(dev), scale=scale, block_q=bq, block_k=bk,
                window=(-1, -1) if window else None,
            )  # fmt: skip
        if dev == "cuda":
            torch.cuda.synchronize()
        ro, rl = reference(q, k, v, scale, h, h)
        err = max(
            (o.double().cpu() - ro).abs().max().item(), (lse.double().cpu() - rl).abs().max().item()
        )
        bad = not err < 1e-4
        for key in (("b", b), ("h", h), ("tq", tq), ("tk", tk), ("d", d), ("bq", bq), ("bk", bk),
                    ("window", window)):  # fmt: skip
            fails[key][0] += bad
            fails[key][1] += 1
        if bad and shown < 12:
            shown += 1
            print(f"FAIL b={b} h={h} tq={tq} tk={tk} d={d} bq={bq} bk={bk} window={window}: "
                  f"max error {err:.3g}")  # fmt: skip
    print("choice: failing/total")
    for key, (n, total) in sorted(fails.items(), key=str):
        print(f"  {key[0]}={key[1]}: {n}/{total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
