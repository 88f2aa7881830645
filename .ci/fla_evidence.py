"""Evidence for fla-core's chunked simple GLA findings (fuzz.clients.fla_simple_gla's docstring).

    python .ci/fla_evidence.py          on a GPU: compiled (Triton); without one: Triton's interpreter

1. The forward's final state is NaN when a sequence's last chunk is short and |g_gamma| is large:
   ``chunk_fwd_kernel_h`` scales the padded rows of the chunk by exp2(b_g_last - b_g) before they
   are masked (b_g = gamma * (row + 1) for every row, b_v = 0 there): inf * 0.
2. The backward's case from an H100 campaign (rebuilt from its recipe: bf16, 16 heads, K 16, V 128,
   g_gamma = -8, four packed sequences of 65, 63, 13 and 79 tokens, key bursts of 2^8, an initial
   state), its gradients against the float64 oracle, with each config of the dq kernel pinned.
3. What that case needs (``--ablate``): the dq kernel pinned to a ``num_warps=4`` config, the case
   changed one choice at a time (no initial state, one sequence, another dtype, no key bursts, a
   milder decay, fewer heads, other head dims, shorter sequences), dq's largest error for each.
"""

import concurrent.futures
import contextlib
import os
import subprocess
import sys
import traceback

import numpy as np
import torch

sys.path.insert(0, ".")
from fla.ops.simple_gla import chunk_simple_gla

import fuzz.clients.fla_simple_gla  # noqa: F401  (the interpreter adapter)
from fuzz import triton_runtime as tr
from oracles.simple_gla import simple_gla_reference, simple_gla_reference_grads
from strategies.simple_gla import TokenRecipe, _reseed
from strategies.values import ValueRecipe, materialize

GPU = torch.cuda.is_available()
DEV = "cuda" if GPU else "cpu"
WHERE = f"compiled on {torch.cuda.get_device_name()}" if GPU else "Triton's interpreter"


def scope():
    return tr.interpreting() if not GPU else _null()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def forward_nan():
    print(f"1. forward, final state, one 64-token chunk ({WHERE})")
    torch.manual_seed(0)
    for length in (1, 63, 65):
        for gamma in (-1.40, -1.41, -5.0):
            q, k, v = (torch.randn(1, length, 1, 16, device=DEV) for _ in range(3))
            with scope():
                _, ht = chunk_simple_gla(
                    q,
                    k,
                    v,
                    g_gamma=torch.tensor([gamma], device=DEV),
                    output_final_state=True,
                    chunk_size=64,
                )
            _, want = simple_gla_reference(q.cpu(), k.cpu(), v.cpu(), g_gamma=torch.tensor([gamma]))
            bad = int((~torch.isfinite(ht)).sum())
            err = (ht.cpu().double() - want).abs().max().item()
            tail = length % 64
            print(
                f"   T={length:3} (tail {tail:2}) g_gamma={gamma:5}: exponent of the padded rows "
                f"{abs(gamma) * (64 - tail) if tail else 0:6.2f} (overflow > 88.72): "
                f"non-finite {bad:3}/256, max error {err:.3g}"
            )


def backward_case(
    heads=16,
    kd=16,
    vd=128,
    dtype="bfloat16",
    lengths=(65, 63, 13, 79),
    gamma=-8.0,
    burst=8,
    h0=True,
    magnitude=3.0,
):
    lengths = list(lengths)
    length = sum(lengths)
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    recipe = ValueRecipe(seed=63618893, distribution="normal", magnitude=magnitude)
    shape = (1, length, heads)
    arrays = {
        n: materialize(_reseed(recipe, i), (*shape, d), dtype)
        for i, (n, d) in enumerate((("q", kd), ("k", kd), ("v", vd), ("do", vd)))
    }
    bounds = [(int(cu[i]), int(cu[i + 1])) for i in range(len(lengths))]
    if burst:
        arrays = TokenRecipe("key_burst", burst, 0).apply(arrays, bounds, length)
    t = {
        n: torch.from_numpy(np.asarray(a, np.float32)).to(getattr(torch, dtype))
        for n, a in arrays.items()
    }
    state = materialize(_reseed(recipe, 4), (len(lengths), heads, kd, vd), "float32")
    h0 = torch.from_numpy(state) if h0 else None
    return t, h0, torch.full((heads,), gamma), torch.from_numpy(cu)


# dq elements the H100 campaign reported wrong (the worst, and the first it printed)
SEEN = ((0, 97, 1, 7), (0, 32, 1, 1))


def backward(picks_for_dq):
    t, h0, gg, cu = backward_case()
    ref = simple_gla_reference_grads(
        t["q"], t["k"], t["v"], t["do"], g_gamma=gg, initial_state=h0, cu_seqlens=cu.tolist()
    )
    dq_kernel = "fla.ops.common.chunk_o.chunk_bwd_kernel_dqkwg"
    print(f"2. backward of the H100 campaign's case ({WHERE}), by config of {dq_kernel}")
    for pick in picks_for_dq:

        def chooser(kernel, candidates, pick=pick):
            return pick % len(candidates) if kernel == dq_kernel else 0

        leaves = [t[n].to(DEV).clone().requires_grad_() for n in ("q", "k", "v")]
        with scope(), tr.pinned_configs(chooser) as choices:
            o, _ = chunk_simple_gla(
                *leaves,
                g_gamma=gg.to(DEV),
                initial_state=h0.to(DEV),
                cu_seqlens=cu.to(DEV),
                chunk_size=64,
            )
            o.backward(t["do"].to(DEV))
        config = next((str(c.config) for c in choices if c.kernel == dq_kernel), "(one config)")
        errs = []
        for name, got, want in zip(
            "qkv", (x.grad for x in leaves), (ref.dq, ref.dk, ref.dv), strict=True
        ):
            e = (got.cpu().double() - want).abs()
            i = int(e.argmax())
            errs.append(
                f"d{name} {e.max().item():9.3g} (got {got.flatten()[i].item():.4g}, "
                f"want {want.flatten()[i].item():.4g})"
            )
        print(f"   [{config}] " + "; ".join(errs))
        dq = leaves[0].grad.cpu().double()
        at = "; ".join(
            f"dq{list(i)} = {dq[i].item():.4g} (oracle {ref.dq[i].item():.4g})" for i in SEEN
        )
        print(f"      where the H100 campaign saw dq wrong: {at}")


def dq_error(case, warps, others=0):
    """dq against the float64 oracle for ``case`` (backward_case's keywords), the dq kernel pinned
    to its first config of ``warps`` warps and every other autotuned kernel to its candidate
    ``others`` (taken modulo their number; -1: nothing pinned, fla's autotuner picks): the elements wrong beyond bf16 rounding of the sums
    (error > 1 + 2% of the oracle's value), the worst of them, the largest |dq|, the config."""
    t, h0, gg, cu = backward_case(**case)
    single = len(case.get("lengths", (0, 0, 0, 0))) == 1
    ref = simple_gla_reference_grads(
        t["q"],
        t["k"],
        t["v"],
        t["do"],
        g_gamma=gg,
        initial_state=h0,
        cu_seqlens=None if single else cu.tolist(),
    )
    dq_kernel = "fla.ops.common.chunk_o.chunk_bwd_kernel_dqkwg"

    def chooser(kernel, candidates):
        if kernel != dq_kernel:
            return others % len(candidates)
        fits = [i for i, c in enumerate(candidates) if c.config.num_warps == warps]
        return fits[0] if fits else 0

    leaves = [t[n].to(DEV).clone().requires_grad_() for n in ("q", "k", "v")]
    pins = tr.pinned_configs(chooser) if others >= 0 else contextlib.nullcontext([])
    with scope(), pins as choices:
        o, _ = chunk_simple_gla(
            *leaves,
            g_gamma=gg.to(DEV),
            initial_state=None if h0 is None else h0.to(DEV),
            cu_seqlens=None if single else cu.to(DEV),
            chunk_size=64,
        )
        o.backward(t["do"].to(DEV))
    config = next((str(c.config) for c in choices if c.kernel == dq_kernel), "(one config)")
    got = leaves[0].grad.cpu().double()
    err = (got - ref.dq).abs()
    bad = err > 1 + 0.02 * ref.dq.abs()
    worst = ""
    if bad.any():
        i = int(torch.where(bad, err, torch.zeros_like(err)).argmax())
        worst = f" e.g. {got.flatten()[i].item():.4g} for {ref.dq.flatten()[i].item():.4g}"
    return int(bad.sum()), worst, ref.dq.abs().max().item(), config


def variant(index, others=0):
    """One line for ``ABLATIONS[index]`` (run in a process of its own: a CUDA fault ends it)."""
    name, case = ABLATIONS[index]
    row, peak = [], 0.0
    for warps in (4, 2) if others >= 0 else (0,):
        try:
            bad, worst, peak, config = dq_error(case, warps, others)
        except Exception as e:
            frames = [f for f in traceback.extract_tb(e.__traceback__) if "fla" in f.filename]
            where = f" in {frames[-1].name}" if frames else ""
            row.append(f"w{warps} {type(e).__name__}{where}: {str(e).splitlines()[0][:60]}")
            break
        pinned = others < 0 or f"num_warps: {warps}," in config
        row.append(f"w{warps} {bad:5} bad{worst}" + ("" if pinned else f" ({config})"))
    print(f"   {name:48} |dq| <= {peak:8.3g}: " + "; ".join(row), flush=True)


ABLATIONS = (
    ("the campaign's case", {}),
    ("no initial state", {"h0": False}),
    ("one sequence of 220", {"lengths": (220,)}),
    ("one sequence of 65", {"lengths": (65,)}),
    ("one sequence of 64", {"lengths": (64,)}),
    ("one sequence of 128", {"lengths": (128,)}),
    ("two sequences 65, 63", {"lengths": (65, 63)}),
    ("float16", {"dtype": "float16"}),
    ("float32", {"dtype": "float32"}),
    ("no key bursts", {"burst": 0}),
    ("magnitude 1, no bursts", {"burst": 0, "magnitude": 1.0}),
    ("g_gamma -1", {"gamma": -1.0}),
    ("g_gamma -0.05", {"gamma": -0.05}),
    ("one head", {"heads": 1}),
    ("K 64", {"kd": 64}),
    ("K 128", {"kd": 128}),
    ("V 16", {"vd": 16}),
    ("V 64", {"vd": 64}),
    (
        "one head, one sequence of 64, no state, no bursts, magnitude 1",
        {"heads": 1, "lengths": (64,), "h0": False, "burst": 0, "magnitude": 1.0},
    ),
)


def ablate(others=0, jobs=8):
    """Each variant in a process of its own (CUDA_LAUNCH_BLOCKING: a fault names its kernel)."""
    print(
        f"3. what the backward's case needs ({WHERE}): dq elements wrong beyond bf16 rounding, "
        f"the dq kernel at num_warps 4, then 2; the other kernels at candidate {others}"
    )
    env = {**os.environ, "CUDA_LAUNCH_BLOCKING": "1"}
    run = [sys.executable, __file__, "--variant"]
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        outs = pool.map(
            lambda i: subprocess.run(
                [*run, str(i), str(others)], env=env, capture_output=True, text=True, timeout=600
            ),
            range(len(ABLATIONS)),
        )
        for i, p in enumerate(outs):
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("   ")]
            tail = (p.stderr.strip().splitlines() or ["?"])[-1][:100]
            print(lines[-1] if lines else f"   {ABLATIONS[i][0]:48} exit {p.returncode}: {tail}")


if __name__ == "__main__":
    if "--variant" in sys.argv:
        at = sys.argv.index("--variant")
        variant(int(sys.argv[at + 1]), int(sys.argv[at + 2]))
        sys.exit(0)
    if "--ablate" in sys.argv:
        ablate(0)
        ablate(1)
        ablate(-1)
        sys.exit(0)
    forward_nan()
    backward(range(8) if GPU else (0, 3))
