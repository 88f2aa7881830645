"""The jagged softmax family (seed 000): the real kernels and their mutants.

Inputs: ``values [N, M]`` and ``offsets [B+1]``; output ``y [N, M]``, the softmax over each
segment's rows, per column. Parameters: ``dtype``, ``block_n`` (rows per tile), ``block_m``
(columns per program), ``num_programs`` (``None``: one per segment) and ``guard``, the poison the
rows around ``values`` hold (see below).

Guard rows. What a kernel reads outside its input must not matter, and a kernel must not read it
in a way that could. The Triton entry point passes ``values`` as a view into a larger buffer:
``block_n`` rows before and after, and one column after every row, hold the ``guard`` poison
(a tile that starts inside ``[0, N)`` ends inside the buffer, so a stray read stays in allocated
memory). ``offsets`` is a view too: the entry before it holds -1 and the entry after it ``N + 1``,
so a kernel that reads one past either end as a segment bound processes a phantom row outside
``[0, N)``: it reads a guard row and writes outside the output, into the harness's guard band.
The Pallas wrapper pads on the host anyway; its padding holds the same poison (``pad_value``).
The clean runs use NaN; ``poison`` swaps in the other poisons, so the generic masked-poison
property checks that no output bit depends on them.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Mapping
from typing import Any

import numpy as np
from hypothesis import strategies as st

from fuzz.arrays import finfo, np_dtype, special_value
from fuzz.case import Case
from fuzz.compare import Tolerance
from fuzz.failures import MASKING, NONDETERMINISM, Finding
from fuzz.kit import (
    entries,
    host,
    real_modules,
    register_mutants,
    register_reformulations,
    torch_inputs,
)
from fuzz.properties import Context, Property, compare_runs
from fuzz.target import Baselines, Hazard, Search, Target, register
from kernels.jagged_softmax.mutants import MUTANTS
from kernels.jagged_softmax.reformulations import REFORMULATIONS
from oracles.jagged_softmax import (
    jagged_softmax_error_bound,
    jagged_softmax_naive,
    jagged_softmax_reference,
)
from strategies.jagged import offsets_from_lengths
from strategies.jagged_softmax import jagged_softmax_cases

# Verdicts use the per-element analytic bound (``error_bound``); the same-dtype naive ratio rule
# is not applied: in fp32 the naive softmax rounds like a kernel (its error is lucky or not), and
# it is never tighter in fp16/bf16 (see ``fuzz/targets/softmax.py``).
TOLERANCE = Tolerance()
MIN_TILE = 2  # the fewest rows a jagged kernel takes per step (block_n >= 2): its rescale count
FP32_EXP_MAX = finfo("float32").log_max  # 88.72
FP32_EXP_MIN_NORMAL = float(np.log(np.finfo(np.float32).tiny))  # -87.34: exp below is subnormal


# Contract: entry points, outputs, structure of a case ---------------------------------------------


def _guarded_torch(values: Any, offsets: Any, guard: str, block_n: int) -> tuple[Any, Any]:
    """``values`` and ``offsets`` as views into larger buffers whose extra elements are poison:
    at least ``block_n`` rows before and after the values and a column after each row. The
    values start 64 bytes into an allocation's alignment whatever their shape: Triton compiles
    a binary per 16-byte alignment of a pointer, and a start ``block_n * (M + 1)`` elements in
    (half precision, ``block_n`` 4) compiled one per parity of ``M``."""
    import torch

    n, m = values.shape
    fill = special_value(guard, str(values.dtype).replace("torch.", ""))
    pitch, per_64 = m + 1, max(1, 64 // values.element_size())
    front = -(-block_n * pitch // per_64) * per_64
    buf = torch.full(
        (front + (n + block_n) * pitch,), fill, dtype=values.dtype, device=values.device
    )
    view = torch.as_strided(buf, (n, m), (pitch, 1), front)
    view.copy_(values)
    obuf = torch.empty(offsets.shape[0] + 2, dtype=offsets.dtype, device=offsets.device)
    obuf[0] = -1
    obuf[1:-1] = offsets
    obuf[-1] = n + 1
    return view, obuf[1:-1]


def write_back(inputs: Mapping[str, Any], given: Mapping[str, Any]) -> None:
    """What a launch wrote into the guarded copies of its inputs it was ``given``, written into
    the launch's own ``inputs`` (torch tensors), where ``inputs-unchanged`` looks: a kernel that
    sanitized its values in place was never seen writing into them (round 13's planted jagged
    kernel, ``values.nan_to_num_()``)."""
    for name, copy in given.items():
        mine: Any = inputs.get(name)
        if (
            copy is not mine
            and hasattr(mine, "copy_")
            and getattr(copy, "shape", None) == mine.shape
        ):
            mine.copy_(copy)


def entry(module: types.ModuleType):
    """The target entry point of a jagged softmax module (real or mutant, Triton or Pallas): the
    Triton wrapper gets ``values`` and ``offsets`` as views into poisoned buffers, the Pallas
    wrapper (JAX arrays) pads on the host with the poison."""

    def run(
        inputs: Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        out: Mapping[str, Any] | None,
        interpret: bool,
    ) -> dict[str, Any]:
        values, offsets = inputs["values"], inputs["offsets"]
        kw = {
            "out": None if out is None else out["y"],
            "block_n": params["block_n"],
            "block_m": params["block_m"],
            "num_programs": params["num_programs"],
            "interpret": interpret,
        }
        if type(values).__module__.split(".")[0] != "torch":
            kw["pad_value"] = special_value(params["guard"], params["dtype"])
            return {"y": module.jagged_softmax(values, offsets, **kw)}
        guarded = _guarded_torch(values, offsets, params["guard"], params["block_n"])
        y = module.jagged_softmax(*guarded, **kw)
        write_back(inputs, dict(zip(("values", "offsets"), guarded, strict=True)))
        return {"y": y}

    return run


def output_spec(case: Case) -> dict[str, tuple[tuple[int, ...], str]]:
    """``y``: the shape and dtype of ``values``."""
    return {"y": (tuple(case.inputs["values"].shape), case.params["dtype"])}


def _bounds(case: Case) -> list[tuple[int, int]]:
    o = [int(v) for v in case.inputs["offsets"]]
    return list(itertools.pairwise(o))


def _lengths(case: Case) -> np.ndarray:
    return np.diff(case.inputs["offsets"].astype(np.int64))


def _segment_of(case: Case, row: int) -> int:
    o = case.inputs["offsets"].astype(np.int64)
    return int(np.searchsorted(o, row, side="right") - 1)


def _n_segments(ctx: Context) -> int:
    return len(ctx.case.inputs["offsets"]) - 1


# Oracle and naive reference -----------------------------------------------------------------------


def oracle(case: Case, device: str) -> dict[str, np.ndarray]:
    t = torch_inputs(case, device)
    return {"y": host(jagged_softmax_reference(t["values"], t["offsets"]), device)}


def naive(case: Case, device: str) -> dict[str, np.ndarray]:
    t = torch_inputs(case, device)
    return {"y": host(jagged_softmax_naive(t["values"], t["offsets"]), device)}


# Error bound --------------------------------------------------------------------------------------


def error_bound(case: Case, device: str) -> dict[str, np.ndarray]:
    """``Target.error_bound``: each output element's bound, a segment column being a row softmax
    of its values (``oracles.jagged_softmax.jagged_softmax_error_bound``)."""
    t = torch_inputs(case, device)
    got = jagged_softmax_error_bound(
        t["values"], t["offsets"], out_dtype=case.params["dtype"], min_tile=MIN_TILE
    )
    return {"y": got.cpu().numpy()}


# Hazards ------------------------------------------------------------------------------------------


def _empty_segments(case: Case) -> str | None:
    lengths = _lengths(case)
    empty = np.flatnonzero(lengths == 0)
    if not empty.size:
        return None
    where = []
    if lengths[0] == 0:
        where.append("leading")
    if lengths[-1] == 0:
        where.append("trailing")
    if (np.diff(empty) == 1).any():
        where.append("consecutive")
    return f"{empty.size} empty segment(s) of {lengths.size}" + (
        f" ({', '.join(where)})" if where else ""
    )


def _single_row(case: Case) -> str | None:
    n = int((_lengths(case) == 1).sum())
    return f"{n} one-row segment(s) (softmax 1.0)" if n else None


def _multi_tile(case: Case) -> str | None:
    lengths, block = _lengths(case), case.params["block_n"]
    longest = int(lengths.max(initial=0))
    if longest > block:
        return f"max_seqlen {longest} > block_n={block}: the running max and sum cross tiles"
    return None


def _tile_overhang(case: Case) -> str | None:
    """Segments whose last tile covers rows of the following segment(s)."""
    block = case.params["block_n"]
    n = int(case.inputs["offsets"][-1])
    hits = []
    for b, (start, end) in enumerate(_bounds(case)):
        if end > start and (end - start) % block:
            covered = min(start + -(-(end - start) // block) * block, n) - end
            if covered > 0:
                hits.append((b, covered))
    if not hits:
        return None
    b, k = hits[0]
    return f"{len(hits)} segment(s) whose last tile covers rows of the next (first: segment {b}, {k} row(s))"


def _shared_programs(case: Case) -> str | None:
    b = len(case.inputs["offsets"]) - 1
    p = case.params["num_programs"]
    if p is not None and 1 <= p < b:
        return f"num_programs={p} < {b} segments: each program takes several, out of segment order"
    return None


def _no_finite_value(case: Case) -> str | None:
    x = case.inputs["values"].astype(np.float64)
    count = 0
    for a, b in _bounds(case):
        if b > a:
            count += int((~np.isfinite(x[a:b]).any(axis=0)).sum())
    return f"{count} segment column(s) with no finite value (all -inf)" if count else None


def _exp_overflow(case: Case) -> str | None:
    """A value whose exp leaves fp32's normal range unless the max is subtracted: above 88.72 it
    overflows; below -87.34 it is subnormal, and 0 where subnormals are flushed (XLA on the CPU
    flushes them: a column whose running max started at 0 summed to 0 at -88.1)."""
    x = case.inputs["values"].astype(np.float64)
    finite = x[np.isfinite(x)]
    top, low = finite.max(initial=0.0), finite.min(initial=0.0)
    if top > FP32_EXP_MAX:
        return (
            f"value {top:.4g} > {FP32_EXP_MAX:.2f}: exp overflows fp32 unless the max is subtracted"
        )
    if low < FP32_EXP_MIN_NORMAL:
        return (
            f"value {low:.4g} < {FP32_EXP_MIN_NORMAL:.2f}: exp underflows fp32's normal range "
            "unless the max is subtracted"
        )
    return None


def _partial_columns(case: Case) -> str | None:
    m, block = case.inputs["values"].shape[1], case.params["block_m"]
    return f"M={m} is not a multiple of block_m={block}" if m % block else None


HAZARDS = (
    Hazard("empty-segments", _empty_segments),
    Hazard("single-row-segments", _single_row),
    Hazard("multi-tile-segment", _multi_tile),
    Hazard("tile-overhang", _tile_overhang),
    Hazard("shared-programs", _shared_programs),
    Hazard("no-finite-value", _no_finite_value),
    Hazard("exp-overflow", _exp_overflow),
    Hazard("partial-column-block", _partial_columns),
)


# Poisoning and fixed outputs ----------------------------------------------------------------------


def poison(case: Case, kind: str) -> Case | None:
    """The case with every guard row (and the Pallas padding) holding ``kind``."""
    if kind == case.params["guard"] or case.inputs["values"].size == 0:
        return None
    return case.replace(guard=kind)


def fixed_outputs(case: Case) -> dict[str, np.ndarray]:
    """Outputs decided without arithmetic: 0 for a -inf value (and for every value of a column of
    a segment with no finite value), 1 for the only finite value of a segment's column (every
    one-row segment)."""
    x = case.inputs["values"].astype(np.float64)
    finite = np.isfinite(x)
    fixed = ~finite
    for a, b in _bounds(case):
        if b > a:
            count = finite[a:b].sum(axis=0)
            fixed[a:b] |= (count <= 1)[None, :]
    return {"y": fixed}


# Properties ---------------------------------------------------------------------------------------


def _rearranged(case: Case, order: list[int]) -> tuple[Case, np.ndarray]:
    """The case with its segments in ``order``, and the row map new row -> old row."""
    bounds = _bounds(case)
    rows = np.concatenate(
        [np.arange(*bounds[b], dtype=np.int64) for b in order] or [np.zeros(0, np.int64)]
    )
    lengths = [bounds[b][1] - bounds[b][0] for b in order]
    offsets = offsets_from_lengths(lengths, case.inputs["offsets"].dtype)
    return case.replace(inputs={"values": case.inputs["values"][rows], "offsets": offsets}), rows


def _compare_rows(ctx: Context, got: np.ndarray, rows: np.ndarray) -> tuple[int, ...] | None:
    """Where ``got`` (a run of the case's rows ``rows``, its segments moved) differs from the
    clean run by more than both runs' error bounds, or None. A segment moved in the array meets
    the kernel's tiles elsewhere where a kernel tiles rows from the array's start rather than
    the segment's: its sums add in another order, a last-bit difference within the bound (a
    bug-free Triton kernel of a planted round came as two ``masking`` rows on an H200 so), where
    a segment that reads its neighbours' rows is off by their values. Bit for bit first (the
    usual case, and no bound needed)."""
    want = ctx.clean.outputs["y"][rows]
    if compare_runs(got, want) is None:
        return None
    tol = 2 * np.broadcast_to(np.asarray(ctx.bound("y"), np.float64), ctx.oracle["y"].shape)[rows]
    d = compare_runs(got, want, tol)
    return None if d is None else d.index


def _permutation(ctx: Context, which: Any) -> Finding | None:
    """Reordering the segments reorders the output rows (within both runs' bounds)."""
    b = _n_segments(ctx)
    if which == "reverse":
        order = list(range(b))[::-1]
    else:
        order = [int(i) for i in np.random.default_rng(int(which)).permutation(b)]
    if order == list(range(b)):
        return None
    case, rows = _rearranged(ctx.case, order)
    launch = ctx.derived(
        case, prop="segment-permutation", what=f"with the segments in order {order}"
    )
    if isinstance(launch, Finding):
        return launch
    idx = _compare_rows(ctx, launch.outputs["y"], rows)
    if idx is None:
        return None
    old = int(rows[idx[0]])
    seg = _segment_of(ctx.case, old)
    got, want = float(launch.outputs["y"][idx]), float(ctx.clean.outputs["y"][old, idx[1]])
    return ctx.finding(
        MASKING,
        "segment-permutation",
        f"segments in order {order} change segment {seg}'s output: y[{old}, {idx[1]}] = {want:.6g} "
        f"in place, {got:.6g} after reordering (a segment's result depends on its neighbours)",
        output="y",
        index=(old, idx[1]),
        kernel_value=got,
        oracle_value=float(ctx.oracle["y"][old, idx[1]]),
        details={"order": order, "in_place_value": want},
    )


def _alone(ctx: Context, pick: Any) -> Finding | None:
    """A segment computed on its own gives what it gets among the others (within both runs' bounds)."""
    nonempty = [i for i, (a, b) in enumerate(_bounds(ctx.case)) if b > a]
    if not nonempty:
        return None
    seg = nonempty[int(pick) % len(nonempty)]
    case, rows = _rearranged(ctx.case, [seg])
    launch = ctx.derived(case, prop="segment-alone", what=f"segment {seg} alone")
    if isinstance(launch, Finding):
        return launch
    idx = _compare_rows(ctx, launch.outputs["y"], rows)
    if idx is None:
        return None
    old = int(rows[idx[0]])
    got, want = float(launch.outputs["y"][idx]), float(ctx.clean.outputs["y"][old, idx[1]])
    return ctx.finding(
        MASKING,
        "segment-alone",
        f"segment {seg} computed alone gives y[{old}, {idx[1]}] = {got:.6g}, among the others "
        f"{want:.6g} (a segment's result depends on its neighbours)",
        output="y",
        index=(old, idx[1]),
        kernel_value=want,
        oracle_value=float(ctx.oracle["y"][old, idx[1]]),
        details={"segment": seg, "alone_value": got},
    )


def _effective_programs(p: int | None, b: int) -> int:
    return max(b, 1) if p is None else min(p, max(b, 1))


def _schedule(ctx: Context, programs: Any) -> Finding | None:
    """The number of programs, hence the order in which segments are processed, changes no bit.

    On a sequential interpreter one program per segment runs the segments in order, so a write
    past a segment's end is always overwritten later by the next segment's own program; with
    ``P = 2`` program 0 takes segments 0, 2, 4... before program 1 takes 1, 3, 5..., so every odd
    segment runs after the even one that follows it. ``programs`` is the alternative P (2 or 3);
    where it equals the case's own, one program per segment instead.
    """
    b = _n_segments(ctx)
    mine = ctx.case.params["num_programs"]
    if _effective_programs(programs, b) == _effective_programs(mine, b):
        programs = None
    if _effective_programs(programs, b) == _effective_programs(mine, b):
        return None
    launch = ctx.derived(
        ctx.case.replace(num_programs=programs),
        prop="schedule-invariance",
        what=f"with num_programs={programs}",
    )
    if isinstance(launch, Finding):
        return launch
    d = compare_runs(launch.outputs["y"], ctx.clean.outputs["y"])
    if d is None:
        return None
    row, col = d.index
    return ctx.finding(
        NONDETERMINISM,
        "schedule-invariance",
        f"num_programs={programs} instead of {mine} changes y[{row}, {col}] "
        f"(segment {_segment_of(ctx.case, row)}) from {d.want:.6g} to {d.got:.6g}: the "
        f"result depends on the order in which programs run",
        output="y",
        index=d.index,
        kernel_value=d.got,
        oracle_value=float(ctx.oracle["y"][d.index]),
        details={"num_programs": programs, "clean_num_programs": mine, "clean_value": d.want},
    )


def _several_segments(ctx: Context) -> bool:
    return _n_segments(ctx) >= 2 and ctx.case.inputs["values"].size > 0


PROPERTIES = (
    Property(
        "schedule-invariance",
        _schedule,
        st.sampled_from((2, 3)),
        applies=_several_segments,
        description="the output does not depend on num_programs (the order segments are processed in)",
    ),
    Property(
        "segment-permutation",
        _permutation,
        st.one_of(st.just("reverse"), st.integers(0, 2**16)),
        applies=_several_segments,
        description="permuting the segments permutes the output rows (within both runs' bounds)",
    ),
    Property(
        "segment-alone",
        _alone,
        st.integers(0, 2**16),
        applies=_several_segments,
        description="each segment computed alone gives what it gets in context (within both runs' bounds)",
    ),
)


# Costs and baselines ------------------------------------------------------------------------------


def interpret_cost(case: Case) -> float:
    """Program-tiles: per column block, one unit per segment plus two per tile (stats, write)."""
    block_n, block_m = case.params["block_n"], case.params["block_m"]
    lengths = _lengths(case)
    tiles = -(-lengths // block_n)
    col_blocks = -(-case.inputs["values"].shape[1] // block_m)
    return float((lengths.size + 2 * tiles.sum()) * col_blocks)


_DEFAULT_BLOCKS = {"block_n": 32, "block_m": 32}  # the kernels' defaults


def _case(lengths: list[int], m: int, dtype: str, seed: int, recipe: dict[str, Any]) -> Case:
    offsets = offsets_from_lengths(lengths)
    n = int(offsets[-1])
    x = np.random.default_rng(seed).standard_normal((n, m)).astype(np_dtype(dtype))
    params = {"dtype": dtype, **_DEFAULT_BLOCKS, "num_programs": None, "guard": "nan"}
    return Case({"values": x, "offsets": offsets}, params, {"lengths": lengths, **recipe})


def baseline_randn(seed: int, scale: str) -> Case:
    """The seed's check: its offsets (segments of 6, 2 and 4 rows) and 4 columns, standard-normal
    values, the kernels' default tiles; ``large``: eight segments up to 511 rows, 96 columns."""
    if scale == "small":
        return _case([6, 2, 4], 4, "float32", seed, {"baseline": "randn", "seed": seed})
    lengths = [300, 17, 1, 128, 511, 64, 0, 33]
    return _case(lengths, 96, "float32", seed, {"baseline": "randn", "seed": seed})


def baseline_grid(scale: str) -> list[Case]:
    """An upstream-style test grid: batch sizes x maximum lengths x column counts x dtypes, with
    random lengths in ``[0, max_len]`` (seed 0), ``randn`` values, the kernels' default tiles."""
    batches: tuple[int, ...]
    max_lens: tuple[int, ...]
    cols: tuple[int, ...]
    if scale == "small":
        batches, max_lens, cols = (1, 4), (1, 20), (1, 5, 16)
    else:
        batches, max_lens, cols = (1, 8, 64), (1, 128, 1000), (1, 32, 129)
    cases = []
    for dtype in ("float32", "float16", "bfloat16"):
        for b in batches:
            for max_len in max_lens:
                lengths = [int(v) for v in np.random.default_rng(0).integers(0, max_len + 1, b)]
                for m in cols:
                    cases.append(_case(lengths, m, dtype, 0, {"baseline": "grid"}))
    return cases


# Real targets -------------------------------------------------------------------------------------

KERNELS = "kernels.jagged_softmax.{impl}"
JAGGED_SOFTMAX = register(
    Target(
        name="jagged_softmax",
        family="jagged_softmax",
        kernels=entries(entry, real_modules(KERNELS)),
        oracle=oracle,
        naive=naive,
        strategy=jagged_softmax_cases,
        tolerance=TOLERANCE,
        error_bound=error_bound,
        hazards=HAZARDS,
        poison=poison,
        fixed_outputs=fixed_outputs,
        properties=PROPERTIES,
        outputs=output_spec,
        description="softmax over each segment's rows of a jagged tensor, per column (tiled)",
        # The family's bugs hide in structure (tiles, segment boundaries, program order): fresh
        # examples find them. Climbing on error / bound (Search.targeting) spent half a run on
        # bf16 examples, whose outputs' own rounding keeps every correct kernel near its bound.
        search=Search(targeting=False, interpret_cost=interpret_cost),
        baselines=Baselines(randn=baseline_randn, grid=baseline_grid),
    )
)


# Reformulations -----------------------------------------------------------------------------------

# kernels/jagged_softmax/reformulations.py: each a real target, jagged_softmax_<name>.
register_reformulations(JAGGED_SOFTMAX, KERNELS, entry, REFORMULATIONS)


# Mutants ------------------------------------------------------------------------------------------

# kernels/jagged_softmax/mutants.py: jagged_softmax_mutant_<name>, with the class and shrink
# bound of each (a Triton-only mutant runs on the Triton backends only).
register_mutants(JAGGED_SOFTMAX, KERNELS, entry, MUTANTS)
