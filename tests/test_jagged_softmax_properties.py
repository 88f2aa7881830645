"""The jagged softmax family's own properties, hooks and baselines.

Every property must be able to fail: each is checked against a planted violation (a copy of the
real kernel with one deliberate defect, made with ``kernels._mutate``) and must pass on the real
kernel, on both interpreters.
"""

import itertools

import numpy as np
import pytest

from fuzz.backends import get_backend
from fuzz.case import Case
from fuzz.failures import MASKING, NONDETERMINISM, OOB_WRITE
from fuzz.kit import variant
from fuzz.properties import Context, check_case
from fuzz.target import get
from fuzz.targets import jagged_softmax as fam
from kernels._mutate import Edit, mutate
from kernels.jagged_softmax import pallas as kpallas
from kernels.jagged_softmax import triton as ktriton
from strategies.jagged import offsets_from_lengths

BACKENDS = ["triton-interpret", "pallas-interpret"]


def case(lengths, m=1, *, block_n=4, num_programs=None, seed=0, dtype="float32"):
    offsets = offsets_from_lengths(lengths)
    n = int(offsets[-1])
    values = np.random.default_rng(seed).standard_normal((n, m)).astype(dtype)
    params = {
        "dtype": dtype,
        "block_n": block_n,
        "block_m": 4,
        "num_programs": num_programs,
        "guard": "nan",
    }
    return Case({"values": values, "offsets": offsets}, params, {"lengths": list(lengths)})


def ctx_for(target, backend, c):
    return Context(target, get_backend(backend), c)


def planted(name, triton_edits, pallas_edits):
    """A target whose kernels are the real ones with the given edits (a planted violation)."""
    return variant(
        fam.JAGGED_SOFTMAX,
        f"jagged_softmax_planted_{name}",
        {
            "triton": mutate(ktriton, f"planted_{name}", triton_edits),
            "pallas": mutate(kpallas, f"planted_{name}", pallas_edits),
        },
        fam.entry,
    )


REAL = get("jagged_softmax")

# The stats pass starts one row early: every segment's max and sum include the row before it
# (the previous segment's last row, or the guard row before the first).
READS_BEFORE_START = planted(
    "reads_before_start",
    [
        Edit(
            "        for row0 in range(start, end, BLOCK_N):\n            # Rows at or past",
            "        for row0 in range(start - 1, end, BLOCK_N):\n            # Rows at or past",
        )
    ],
    [
        Edit(
            "x, _, _ = _load_tile(values_ref, start + t * block_n, end, col_ok, block_n)",
            "x, _, _ = _load_tile(values_ref, start - 1 + t * block_n, end, col_ok, block_n)",
        ),
        Edit(
            "n_tiles = (end - start + block_n - 1) // block_n",
            "n_tiles = (end - start + block_n) // block_n",
        ),
    ],
)

# Every load reads one row past the segment's end: the last segment reads the guard row after the
# values (Triton) or the first padding row (Pallas).
READS_PAST_END = planted(
    "reads_past_end",
    [
        Edit(
            '            ok = (tile_rows < end - row0) & col_ok\n            x = tl.load(values_ptr + row0 * stride_vn + v_tile, mask=ok, other=float("-inf"))\n            x = x.to(tl.float32)\n            m_new',
            '            ok = (tile_rows < end + 1 - row0) & col_ok\n            x = tl.load(values_ptr + row0 * stride_vn + v_tile, mask=ok, other=float("-inf"))\n            x = x.to(tl.float32)\n            m_new',
        )
    ],
    [
        Edit(
            "    x, _, _ = _load_tile(values_ref, start + t * block_n, end, col_ok, block_n)",
            "    x, _, _ = _load_tile(values_ref, start + t * block_n, end + 1, col_ok, block_n)",
        )
    ],
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_schedule_invariance_fails_for_a_store_past_the_segment_end(backend):
    # One program per segment runs them in order: segment 1's last tile overhangs into segment
    # 2, whose own program overwrites it later. With two programs, program 0 takes segments 0
    # and 2 before program 1 takes segment 1, whose overhang then zeroes segment 2's only row.
    mutant = get("jagged_softmax_mutant_store_past_end")
    c = case([0, 1, 2])
    ctx = ctx_for(mutant, backend, c)
    assert fam._schedule(ctx, 3) is None  # three programs: still in segment order
    f = fam._schedule(ctx, 2)
    assert f is not None and f.cls == NONDETERMINISM and f.index == (1, 0)
    assert "depends on the order in which programs run" in f.message
    assert (
        check_case(mutant, get_backend(backend), c, params={"schedule-invariance": 2}).finding.cls
        == NONDETERMINISM
    )
    for p in (2, 3):
        assert fam._schedule(ctx_for(REAL, backend, c), p) is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_segment_permutation_and_alone_fail_for_a_neighbour_dependent_kernel(backend):
    c = case([2, 3], m=2)
    ctx = ctx_for(READS_BEFORE_START, backend, c)
    f = fam._permutation(ctx, "reverse")
    assert f is not None and f.cls == MASKING and "depends on its neighbours" in f.message
    f = fam._alone(ctx, 1)
    assert f is not None and f.cls == MASKING and "computed alone" in f.message
    real = ctx_for(REAL, backend, c)
    assert fam._permutation(real, "reverse") is None and fam._permutation(real, 7) is None
    assert fam._alone(real, 0) is None and fam._alone(real, 1) is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_guard_rows_fail_for_a_kernel_that_reads_past_the_values(backend):
    # The generic masked-poison property with this family's poison hook: the guard rows (Triton)
    # or padding (Pallas) after the values hold another poison, and no output bit may move.
    from fuzz.properties import _masked_poison

    c = case([2, 3], m=2)
    ctx = ctx_for(READS_PAST_END, backend, c)
    f = _masked_poison(ctx, "-inf")
    assert f is not None and f.cls == MASKING and f.index[0] >= 2  # the last segment's rows
    real = ctx_for(REAL, backend, c)
    for kind in ("inf", "-inf", "max", "-max"):
        assert _masked_poison(real, kind) is None


def test_offsets_are_guarded_on_both_sides():
    # A kernel that runs one segment too many reads the entry after offsets (N + 1) as its end:
    # a phantom row past the output, which lands in the harness's guard band.
    mutant = get("jagged_softmax_mutant_offsets_past_end")
    f = check_case(mutant, get_backend("triton-interpret"), case([2, 1], m=3)).finding
    assert f is not None and f.cls == OOB_WRITE and "past the output's end" in f.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_real_kernel_passes_every_property_on_the_edge_layouts(backend):
    for lengths in ([0, 0, 3, 0, 5, 0], [1, 1, 1], [4, 5, 9, 1]):
        c = case(lengths, m=5, seed=len(lengths))
        params = {
            "masked-poison": "max",
            "schedule-invariance": 2,
            "segment-permutation": "reverse",
            "segment-alone": 2,
        }
        outcome = check_case(REAL, get_backend(backend), c, params=params)
        assert outcome.finding is None, outcome.finding.summary()


def test_fixed_outputs_mark_one_row_segments_and_empty_columns():
    c = case([1, 2, 1], m=2)
    x = c.inputs["values"]
    x[1, 0] = -np.inf
    x[3, 1] = -np.inf
    fixed = fam.fixed_outputs(c)["y"]
    assert fixed[0].all() and fixed[3].all()  # one-row segments: 1.0 (or 0 for -inf)
    assert fixed[1, 0] and fixed[2, 0]  # one finite value in the column: 0 and 1.0
    assert not fixed[1, 1] and not fixed[2, 1]


def test_hazards_describe_the_layout():
    c = case([0, 5, 0, 0, 1, 2, 0], num_programs=2)
    c.inputs["values"][0, 0] = 100.0
    got = dict(h.split(":", 1) for h in REAL.hazards_of(c))
    assert "leading, trailing, consecutive" in got["empty-segments"]
    assert "max_seqlen 5 > block_n=4" in got["multi-tile-segment"]
    assert "segment 1, 3 row(s)" in got["tile-overhang"]
    assert "num_programs=2 < 7 segments" in got["shared-programs"]
    assert "exp overflows" in got["exp-overflow"]
    assert (
        "single-row-segments" in got
        and "M=1 is not a multiple of block_m=4" in got["partial-column-block"]
    )


@pytest.mark.parametrize(
    "value, holds", [(-88.1, True), (-87.4, True), (-87.3, False), (88.7, False)]
)
def test_the_exp_hazard_starts_where_exp_leaves_the_normal_range(value, holds):
    """exp of a value below log(FLT_MIN) = -87.34 is subnormal (0 where subnormals flush: XLA on
    the CPU): the hazard holds there, not only past the overflow threshold's mirror, -88.72."""
    c = case([2], m=1)
    c.inputs["values"][0, 0] = value
    got = dict(h.split(":", 1) for h in REAL.hazards_of(c))
    assert ("exp-overflow" in got) == holds, got
    if holds:
        assert "underflows" in got["exp-overflow"]


def test_interpret_cost_counts_segments_and_tiles():
    assert fam.interpret_cost(case([5, 0, 1], m=5)) == (3 + 2 * (2 + 0 + 1)) * 2


def test_baselines_are_valid_cases_the_real_kernel_passes():
    small = fam.baseline_randn(0, "small")
    assert small.inputs["offsets"].tolist() == [0, 6, 8, 12] and small.inputs["values"].shape == (
        12,
        4,
    )
    assert not np.array_equal(
        small.inputs["values"], fam.baseline_randn(1, "small").inputs["values"]
    )
    large = fam.baseline_randn(0, "large")
    assert large.inputs["values"].shape == (int(large.inputs["offsets"][-1]), 96)
    for scale in ("small", "large"):
        grid = fam.baseline_grid(scale)
        assert len(grid) >= 18 and {c.params["dtype"] for c in grid} == {
            "float32",
            "float16",
            "bfloat16",
        }
        for c in grid:
            o = c.inputs["offsets"]
            assert o[0] == 0 and (np.diff(o) >= 0).all() and o[-1] == c.inputs["values"].shape[0]
    for c in (small, fam.baseline_grid("small")[-1]):
        assert check_case(REAL, get_backend("triton-interpret"), c, params={}).finding is None


def _array_tiled(values, *, offsets, neighbour=False):
    """A plain-torch jagged softmax whose sums add the rows in tiles of 4 aligned to the array's
    start, not the segment's: right, but a segment moved in the array sums in another order.
    ``neighbour``: each segment's sum also takes the row after it (the next segment's first)."""
    import torch

    x, out = values.float(), torch.zeros_like(values, dtype=torch.float32)
    bounds = offsets.tolist()
    for a, b in itertools.pairwise(bounds):
        if b <= a:
            continue
        m = x[a:b].amax(0)
        total = torch.zeros_like(m)
        for t in range(a - a % 4, b, 4):
            total = total + torch.exp(x[max(t, a) : min(t + 4, b)] - m).sum(0)
        if neighbour and b < x.shape[0]:
            total = total + torch.exp(x[b] - m)
        out[a:b] = torch.exp(x[a:b] - m) / total
    return out.to(values.dtype)


def test_moved_segments_may_differ_in_their_last_bits_but_not_by_their_neighbours_values():
    """A segment moved in the array (reversed, or alone) meets the tiles of a kernel tiled from
    the array's start elsewhere: its sums round otherwise, within both runs' bounds (a bug-free
    Triton kernel of a planted round came as two ``masking`` rows on an H200 so). A segment
    whose sum takes its neighbour's row fails both properties."""
    from fuzz import plugin

    right = plugin.fuzz_kernel(
        "jagged_array_tiled_test", family="jagged_softmax", kernel=_array_tiled
    )
    wrong = plugin.fuzz_kernel(
        "jagged_array_tiled_neighbour_test",
        family="jagged_softmax",
        kernel=lambda values, *, offsets: _array_tiled(values, offsets=offsets, neighbour=True),
    )
    c = case([3, 9, 6], m=8, seed=3)
    params = {"segment-permutation": "reverse", "segment-alone": 1}
    backend = get_backend("triton-interpret")
    only = ("segment-permutation", "segment-alone")
    moved = fam._rearranged(c, [2, 1, 0])[0]
    here = check_case(right, backend, c, only=("oracle",)).context.clean.outputs["y"]
    there = check_case(right, backend, moved, only=("oracle",)).context.clean.outputs["y"]
    rows = fam._rearranged(c, [2, 1, 0])[1]
    assert not np.array_equal(here[rows], there)  # (the bits differ: the test tells)
    assert check_case(right, backend, c, params=params, only=only).finding is None
    f = check_case(wrong, backend, c, params=params, only=only).finding
    assert f is not None and f.cls == MASKING and f.prop in only, f


def test_a_kernel_that_writes_into_its_guarded_values_is_an_input_write():
    """The Triton wrapper gets ``values`` as a view into a guarded copy: a kernel that
    sanitizes its values in place (round 13's planted jagged kernel, ``values.nan_to_num_()``)
    wrote into that copy, never into the launch's own inputs, and no property saw it. What it
    wrote is written back into the launch's inputs: an ``input-write``, through the family's
    own entry point and through the plugin API alike; the real kernel passes."""
    import torch

    import fuzz

    sanitizing = planted(
        "sanitized_in_place",
        [
            Edit(
                "    n_rows, n_cols = values.shape\n",
                "    values.nan_to_num_()\n    n_rows, n_cols = values.shape\n",
            )
        ],
        [Edit("def jagged_softmax(", "def jagged_softmax(")],  # (the Pallas one as it is)
    )
    c = case([2])
    c.inputs["values"][0, 0] = -np.inf
    backend = get_backend("triton-interpret")
    f = check_case(sanitizing, backend, c).finding
    assert f is not None and (f.cls, f.prop) == ("input-write", "inputs-unchanged"), f
    assert "values[0, 0]: -inf ->" in f.message
    assert check_case(REAL, backend, c).finding is None

    def sanitize(values, *, offsets, block_n, block_m):
        values.nan_to_num_()
        return ktriton.jagged_softmax(
            values, offsets, block_n=block_n, block_m=block_m, interpret=True
        )

    name = "jagged_sanitizing_in_place"
    if name not in {t.name for t in fuzz.all_targets()}:
        fuzz.fuzz_kernel(
            name,
            family="jagged_softmax",
            kernel=sanitize,
            capabilities=fuzz.Capabilities(tiles={"block_n": (4,), "block_m": (4,)}),
            description="a jagged softmax that sanitizes its values in place",
        )
    f = check_case(fuzz.get(name), backend, c).finding
    assert f is not None and f.cls == "input-write", f
    assert torch.isinf(torch.tensor(c.inputs["values"])).any()  # (the case's own, untouched)


def test_two_input_writes_of_one_wrapper_are_one_bug_by_what_they_write():
    """Round 13's wrapper sanitizing its values in place came as two ``input-write`` rows of
    conditions that do not nest (a segment of two rows in one column; one row of four columns):
    both turn -inf into the lowest finite value. Each finding says what kinds of value it wrote
    over what kinds (``details["writes"]``), its site (``fuzz.signatures.write_site``), and the
    duplicate check takes a known bug of its key written alike for the same bug. A kernel that
    wrote finite values over finite ones has no such site: that says nothing of which write."""
    from fuzz.duplicates import Duplicates, bug_of
    from fuzz.profiles import HuntOptions, get_profile
    from fuzz.results import Found
    from fuzz.signatures import write_site

    sanitizing = planted(
        "sanitized_in_place",
        [
            Edit(
                "    n_rows, n_cols = values.shape\n",
                "    values.nan_to_num_()\n    n_rows, n_cols = values.shape\n",
            )
        ],
        [Edit("def jagged_softmax(", "def jagged_softmax(")],  # (the Pallas one as it is)
    )
    backend = get_backend("triton-interpret")
    two_rows, four_columns = case([2]), case([1], m=4)
    two_rows.inputs["values"][0, 0] = -np.inf
    four_columns.inputs["values"][0, 3] = -np.inf
    found = {}
    for label, c in (("two rows", two_rows), ("four columns", four_columns)):
        outcome = check_case(sanitizing, backend, c)
        f = outcome.finding
        assert f.cls == "input-write" and f.details["writes"] == {
            "values": ["-inf -> lowest finite"]
        }
        f.details["triggers"] = [label]  # (conditions that do not nest)
        f.details["signature"] = label
        found[label] = Found(
            f, c, dict(outcome.params), 1, 0.0, choices=(1,), key="input-write|inputs-unchanged|-|-"
        )
    assert (
        write_site(found["two rows"].finding.details) == "writes into values: -inf -> lowest finite"
    )
    options = HuntOptions.of(get_profile("ci"))
    me = Duplicates(sanitizing, backend, options, found={}, known_bugs=[bug_of(found["two rows"])])
    assert me.of(found["four columns"]) == (bug_of(found["two rows"]), "site")
    assert write_site({"writes": {"values": ["finite -> finite"]}}) is None
    import ml_dtypes

    from fuzz.properties import write_kinds

    for dtype in (np.float16, ml_dtypes.bfloat16):  # (every float dtype's own largest)
        low = -ml_dtypes.finfo(dtype).max
        kinds = write_kinds(np.array([-np.inf], dtype), np.array([low], dtype))
        assert kinds == ["-inf -> lowest finite"], (dtype, kinds)
    assert write_site({"inputs": {"values": "..."}}) is None
