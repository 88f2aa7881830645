"""The softmax family: the real masked row softmax, its correct reformulations and its mutants.

Verdicts against the fp64 oracle use a per-element error bound (``Target.error_bound``): what any
backward-stable fp32 implementation may lose at that element, from the condition of the softmax
at it, fp32 rounding and the row length (``oracles.softmax.softmax_error_bound``; the derivation is
in ``kernels/softmax/README.md``). The same-dtype naive ratio rule is not used: in fp32 the naive
softmax rounds exactly like a kernel, so its error is as often lucky (exact, with a power-of-two
scale) as not, and in fp16/bf16 it rounds the logits to the input dtype, which no kernel here
does, so it is never the tighter of the two.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

import numpy as np
from hypothesis import strategies as st

from fuzz.arrays import finfo, special_value
from fuzz.case import Case
from fuzz.compare import Tolerance
from fuzz.failures import ACCURACY, Finding
from fuzz.kit import (
    entries,
    host,
    per_case,
    real_modules,
    register_mutants,
    register_reformulations,
    torch_inputs,
)
from fuzz.properties import Context, Property, excess, runs_agree
from fuzz.target import Baselines, Hazard, Search, Target, register
from kernels.softmax.mutants import MUTANTS
from kernels.softmax.reformulations import REFORMULATIONS
from oracles.softmax import SoftmaxBound, softmax_error_bound, softmax_naive, softmax_reference
from strategies.softmax import softmax_cases

# The per-element analytic bound decides; the ratio rule is not applied (ratio_caps_analysis is
# off, see the module docstring). What remains of the policy: compiled and interpreted twins may
# differ by twice the bound.
TOLERANCE = Tolerance()
FP32_EXP_MAX = finfo("float32").log_max  # 88.72
MIN_TILE = 16  # the fewest columns a softmax kernel of this family takes per step (block_n >= 16)


# Contract: entry points, outputs, structure of a case ---------------------------------------------


def entry(module: types.ModuleType):
    """The target entry point of a softmax kernel module (real or mutant, Triton or Pallas)."""

    def run(
        inputs: Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        out: Mapping[str, Any] | None,
        interpret: bool,
    ) -> dict[str, Any]:
        y = module.softmax(
            inputs["x"],
            mask=inputs.get("mask"),
            bias=inputs.get("bias"),
            scale=params["scale"],
            out=None if out is None else out["y"],
            block_m=params["block_m"],
            block_n=params["block_n"],
            interpret=interpret,
        )
        return {"y": y}

    return run


def output_spec(case: Case) -> dict[str, tuple[tuple[int, ...], str]]:
    """``y``: the shape and dtype of ``x``."""
    return {"y": (tuple(case.inputs["x"].shape), case.params["dtype"])}


@per_case
def logits64(case: Case) -> np.ndarray:
    """``scale * x + bias`` in float64 with masked keys at -inf (read-only; cached per case:
    the hazards and properties of one example all start from it)."""
    s = case.inputs["x"].astype(np.float64) * (case.params["scale"] or 1.0)
    if "bias" in case.inputs:
        s = s + case.inputs["bias"].astype(np.float64)
    if "mask" in case.inputs:
        s = np.where(case.inputs["mask"], s, -np.inf)
    s.setflags(write=False)
    return s


def _valid(case: Case) -> np.ndarray:
    return np.isfinite(logits64(case))


# Oracle and naive reference -----------------------------------------------------------------------


def oracle(case: Case, device: str) -> dict[str, np.ndarray]:
    t = torch_inputs(case, device)
    y = softmax_reference(t["x"], t.get("mask"), t.get("bias"), case.params["scale"])
    return {"y": host(y, device)}


def naive(case: Case, device: str) -> dict[str, np.ndarray]:
    t = torch_inputs(case, device)
    y = softmax_naive(t["x"], t.get("mask"), t.get("bias"), case.params["scale"])
    return {"y": host(y, device)}


# Error bound --------------------------------------------------------------------------------------


@per_case
def analysis(case: Case, device: str = "cpu") -> SoftmaxBound[np.ndarray]:
    """The case's error bounds (``oracles.softmax.softmax_error_bound``), as NumPy arrays."""
    return perturbed_analysis(case, device, None)


def perturbed_analysis(
    case: Case, device: str, extra_delta: np.ndarray | None
) -> SoftmaxBound[np.ndarray]:
    """:func:`analysis` with each logit perturbed by up to ``extra_delta`` more (not cached)."""
    import torch

    t = torch_inputs(case, device)
    extra = None if extra_delta is None else torch.as_tensor(extra_delta, device=device)
    got = softmax_error_bound(
        t["x"],
        t.get("mask"),
        t.get("bias"),
        case.params["scale"],
        out_dtype=case.params["dtype"],
        min_tile=MIN_TILE,
        extra_delta=extra,
    )
    return SoftmaxBound(*(a.cpu().numpy() for a in got))


def error_bound(case: Case, device: str) -> dict[str, np.ndarray]:
    """``Target.error_bound``: each output element's bound (``analysis``)."""
    return {"y": analysis(case, device).y}


# Hazards ------------------------------------------------------------------------------------------


def _exp_overflow(case: Case) -> str | None:
    s = logits64(case)
    top = s[np.isfinite(s)].max(initial=-np.inf)
    if top > FP32_EXP_MAX:
        return f"logit {top:.4g} > {FP32_EXP_MAX:.2f}: exp overflows fp32 unless the row max is subtracted"
    return None


def _low_precision_exp(case: Case) -> str | None:
    s = logits64(case)
    lim = finfo("float16").log_max
    spread = np.where(np.isfinite(s), np.abs(s), 0.0).max(initial=0.0)
    if case.params["dtype"] == "float16" and spread > lim:
        return f"|logit| {spread:.4g} > {lim:.2f}: exp overflows if computed in float16"
    return None


def _no_valid_key(case: Case) -> str | None:
    empty = ~_valid(case).any(axis=-1)
    if empty.any():
        return f"{int(empty.sum())} row(s) with no valid key (first: row {int(np.flatnonzero(empty)[0])})"
    return None


def _single_valid(case: Case) -> str | None:
    single = _valid(case).sum(axis=-1) == 1
    return f"{int(single.sum())} row(s) with exactly one valid key" if single.any() else None


SENTINELS = (-1e4, -5e4, -6e4, -1e9)  # finite mask values seen in kernels (bug class 8)


def _below_sentinel(case: Case) -> str | None:
    s = logits64(case)
    low = s[np.isfinite(s)].min(initial=np.inf)
    below = [f"{v:g}" for v in SENTINELS if low <= v]
    if below:
        return (
            f"valid logit {low:.4g} at or below the finite sentinel(s) {', '.join(below)}: a "
            "key masked with one would tie with or outrank it"
        )
    return None


def _neg_inf(case: Case) -> str | None:
    x = case.inputs["x"].astype(np.float64)
    keep = case.inputs.get("mask", np.ones(x.shape, bool))
    n = int((np.isneginf(x) & keep).sum())
    if "bias" in case.inputs:
        n += int((np.isneginf(case.inputs["bias"].astype(np.float64)) & keep).sum())
    return f"{n} unmasked -inf input(s)" if n else None


def _partial_tile(case: Case) -> str | None:
    n, b = case.inputs["x"].shape[-1], case.params["block_n"]
    return f"row length {n} is not a multiple of block_n={b} (partial last tile)" if n % b else None


def _multi_tile(case: Case) -> str | None:
    n, b = case.inputs["x"].shape[-1], case.params["block_n"]
    return f"row length {n} > block_n={b}: the running max and sum cross tiles" if n > b else None


def _subnormal(case: Case) -> str | None:
    x = case.inputs["x"].astype(np.float64)
    tiny = finfo(case.params["dtype"]).tiny
    n = int(((x != 0) & (np.abs(x) < tiny)).sum())
    return f"{n} subnormal input(s)" if n else None


HAZARDS = (
    Hazard("exp-overflow", _exp_overflow),
    Hazard("fp16-exp-overflow", _low_precision_exp),
    Hazard("row-without-valid-key", _no_valid_key),
    Hazard("single-valid-key", _single_valid),
    Hazard("below-finite-sentinel", _below_sentinel),
    Hazard("unmasked-neg-inf", _neg_inf),
    Hazard("partial-tile", _partial_tile),
    Hazard("multi-tile", _multi_tile),
    Hazard("subnormal", _subnormal),
)


# Poisoning and fixed outputs ----------------------------------------------------------------------


def poison(case: Case, kind: str) -> Case | None:
    """Masked-out keys of ``x`` and ``bias`` set to the poison; None if nothing is masked."""
    mask = case.inputs.get("mask")
    if mask is None or mask.all():
        return None
    x = case.inputs["x"].copy()
    x[~mask] = special_value(kind, case.params["dtype"])
    new = {"x": x}
    if "bias" in case.inputs:
        b = case.inputs["bias"].copy()
        b[~mask] = special_value(kind, case.params["dtype"])
        new["bias"] = b
    return case.replace(inputs=new)


def fixed_outputs(case: Case) -> dict[str, np.ndarray]:
    """Outputs decided without arithmetic: 0 for masked keys and -inf logits; rows with no valid key."""
    s = logits64(case)
    fixed = ~np.isfinite(s)
    fixed |= ~np.isfinite(s).any(axis=-1, keepdims=True)
    return {"y": fixed}


# Properties ---------------------------------------------------------------------------------------


def _rows_sum_to_one(ctx: Context, _: Any) -> Finding | None:
    """Rows with a valid key sum to 1 (seed 003's gate 4), within ``SoftmaxBound.row_sum``: the
    rounding of the exponentials, their sum, the division and the outputs (the logits' own
    rounding cancels in a sum of outputs normalized by the same logits)."""
    y = ctx.clean.outputs["y"].astype(np.float64)
    live = _valid(ctx.case).any(axis=-1)
    if not live.any():
        return None
    tol = analysis(ctx.case, ctx.ref_device).row_sum
    sums = y.sum(axis=-1)
    dev = np.where(live, np.abs(sums - 1.0), 0.0)
    dev = np.where(np.isnan(dev), np.inf, dev)
    ratio = excess(dev, tol)
    if ratio.max() <= 1.0:
        return None
    r = int(np.argmax(ratio))
    return ctx.finding(
        ACCURACY,
        "rows-sum-to-one",
        f"row {r} sums to {sums[r]:.8g}, not 1 (tolerance {tol[r]:.3g})",
        output="y",
        index=(r,),
        kernel_value=float(sums[r]),
        oracle_value=1.0,
        error=float(dev[r]),
        tolerance=float(tol[r]),
    )


def _shift_invariance(ctx: Context, c: Any) -> Finding | None:
    """softmax(x + c) == softmax(x): adding a constant to every logit of a row changes nothing.

    Only up to rounding, which the tolerance derives per element: the clean run is within its
    bound of the exact softmax; the shifted run is within the shifted case's bound of the exact
    softmax of its own logits, whose inputs ``fl(x + c)`` differ from ``x + c`` by the rounding
    to the input dtype: a logit perturbation ``scale |fl(x + c) - (x + c)|`` that the shifted
    bound takes as ``extra_delta``. The two runs may differ by the sum of the two bounds.
    """
    c = float(c)
    case = ctx.case
    x = case.inputs["x"]
    x64 = x.astype(np.float64)
    finite = np.isfinite(x64)
    with np.errstate(over="ignore"):
        shifted = np.where(finite, x64 + c, x64).astype(x.dtype)
    s64 = shifted.astype(np.float64)
    if not np.isfinite(s64[finite]).all():
        return None  # the shift leaves the dtype's range: not a valid input
    launch = ctx.derived(
        case.replace(inputs={"x": shifted}), prop="shift-invariance", what=f"with {c:g} added to x"
    )
    if isinstance(launch, Finding):
        return launch
    scale = abs(case.params["scale"] or 1.0)
    with np.errstate(invalid="ignore"):
        d = np.abs(np.where(finite, s64 - x64 - c, 0.0)) * scale
    moved = perturbed_analysis(case.replace(inputs={"x": shifted}), ctx.ref_device, d).y
    return runs_agree(
        ctx,
        "shift-invariance",
        f"with {c:g} added to x",
        "y",
        launch.outputs["y"],
        ctx.clean.outputs["y"],
        ctx.bound("y") + moved,
        ACCURACY,
        shift=c,
    )


PROPERTIES = (
    Property("rows-sum-to-one", _rows_sum_to_one, description="rows with a valid key sum to 1"),
    Property(
        "shift-invariance",
        _shift_invariance,
        st.sampled_from((64.0, -64.0, 1000.0, 0.5)),
        description="adding a constant to x leaves the output unchanged",
    ),
)


# Costs and baselines ------------------------------------------------------------------------------


def interpret_cost(case: Case) -> float:
    """Program instances x column tiles: what the Triton interpreter's time scales with."""
    rows, cols = case.inputs["x"].shape
    return -(-rows // case.params["block_m"]) * -(-cols // case.params["block_n"])


def baseline_randn(seed: int, scale: str) -> Case:
    """KernelBench-style: one default shape, standard-normal logits, no mask, no bias, no scale."""
    rows, cols = (16, 1000) if scale == "small" else (256, 4096)
    x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    params = {"dtype": "float32", "scale": None, "block_m": 16, "block_n": 128}
    return Case({"x": x}, params, {"baseline": "randn", "seed": seed})


def baseline_grid(scale: str) -> list[Case]:
    """A Triton-tutorial-style grid: a few row lengths around the tile, three dtypes, with and
    without a random mask and a scale, ``randn`` values (seed 0)."""
    from fuzz.arrays import np_dtype

    cols_list = (1, 17, 128, 129, 1000) if scale == "small" else (1, 127, 128, 129, 1000, 4097)
    rows = 4 if scale == "small" else 64
    cases = []
    for dtype in ("float32", "float16", "bfloat16"):
        for cols in cols_list:
            for masked in (False, True):
                rng = np.random.default_rng(0)
                x = rng.standard_normal((rows, cols)).astype(np_dtype(dtype))
                inputs = {"x": x}
                if masked:
                    inputs["mask"] = rng.random((rows, cols)) < 0.5
                params = {
                    "dtype": dtype,
                    "scale": 0.125 if masked else None,
                    "block_m": 16,
                    "block_n": 128,
                }
                cases.append(Case(inputs, params, {"baseline": "grid"}))
    return cases


# Real targets -------------------------------------------------------------------------------------

KERNELS = "kernels.softmax.{impl}"
SOFTMAX = register(
    Target(
        name="softmax",
        family="softmax",
        kernels=entries(entry, real_modules(KERNELS)),
        oracle=oracle,
        naive=naive,
        strategy=softmax_cases,
        tolerance=TOLERANCE,
        error_bound=error_bound,
        hazards=HAZARDS,
        poison=poison,
        fixed_outputs=fixed_outputs,
        properties=PROPERTIES,
        outputs=output_spec,
        description="masked row softmax with scale and bias (online, multi-tile rows)",
        search=Search(interpret_cost=interpret_cost),
        baselines=Baselines(randn=baseline_randn, grid=baseline_grid),
    )
)


# Reformulations -----------------------------------------------------------------------------------

# kernels/softmax/reformulations.py: each a real target, softmax_<name>.
register_reformulations(SOFTMAX, KERNELS, entry, REFORMULATIONS)


# Mutants ------------------------------------------------------------------------------------------

# kernels/softmax/mutants.py: softmax_mutant_<name>, with the class and shrink bound of each.
register_mutants(SOFTMAX, KERNELS, entry, MUTANTS)
