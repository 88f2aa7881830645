"""The fence around Triton's interpreter's stores (``fuzz.store_fence``): a store outside every
buffer of its launch is dropped and said, never written into the process's heap."""

import pytest
import torch
import triton
import triton.language as tl

from fuzz import store_fence
from kernels._triton_interp import interpreted


@triton.jit
def _store_at(x_ptr, y_ptr, offset, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    ok = cols < n
    x = tl.load(x_ptr + cols, mask=ok, other=0.0)
    tl.store(y_ptr + offset + cols, x * 2.0, mask=ok)


@triton.jit
def _store_through_address(x_ptr, address, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    ok = cols < n
    y_ptr = address.to(tl.pointer_type(tl.float32))  # a buffer the launch was given as a number
    tl.store(y_ptr + cols, tl.load(x_ptr + cols, mask=ok, other=0.0) * 2.0, mask=ok)


@triton.jit
def _store_through_table(x_ptr, table_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    ok = cols < n
    y_ptr = tl.load(table_ptr).to(tl.pointer_type(tl.float32))
    tl.store(y_ptr + cols, tl.load(x_ptr + cols, mask=ok, other=0.0) * 2.0, mask=ok)


def test_a_store_through_a_pointer_the_fence_cannot_see_is_written():
    """A kernel may store through a pointer made from an integer (an address passed as a
    number) or loaded from a table of pointers (grouped kernels): the buffers behind them are
    not the launch's arguments, and the store is no bug of the kernel's. The fence stands aside
    for the rest of such a launch."""
    store_fence.install()
    x = torch.arange(16, dtype=torch.float32)
    for kernel in (_store_through_address, _store_through_table):
        y = torch.zeros(16)
        arg = y.data_ptr()
        if kernel is _store_through_table:
            arg = torch.tensor([y.data_ptr()], dtype=torch.int64)
        store_fence.reset()
        interpreted(kernel)[(1,)](x, arg, 16, BLOCK=16)
        assert store_fence.take() == [], kernel
        assert torch.equal(y, x * 2), kernel


def _launch(offset: int) -> tuple[torch.Tensor, list[str]]:
    store_fence.install()
    # One allocation holds both buffers: the one nearest a wild store is known whatever the
    # heap's layout (x apart, a store 64 MB past big was "before" x in one run of the suite).
    storage = torch.zeros(4096 + 16)
    x = storage[4096:]
    x.copy_(torch.arange(16, dtype=torch.float32))
    big = storage[:4096]
    y = big[:16]  # a view: its allocation (the storage) is the 4,112 elements
    store_fence.reset()
    interpreted(_store_at)[(1,)](x, y, offset, 16, BLOCK=16)
    return big, store_fence.take()


def test_a_store_inside_the_launchs_allocations_is_written():
    big, dropped = _launch(100)
    assert dropped == []
    assert torch.equal(big[100:116], torch.arange(16, dtype=torch.float32) * 2)


@pytest.mark.parametrize("offset", [1 << 24, -(1 << 24)])
def test_a_store_outside_every_buffer_is_dropped_and_said(offset):
    # 64 MB past (or before) a 16 KB allocation: unfenced, the interpreter writes there (a
    # segmentation fault, or a heap the allocator later aborts on).
    big, dropped = _launch(offset)
    assert len(dropped) == 1, dropped
    assert dropped[0].startswith("16 of 16 element(s) of one store outside every buffer")
    where = "past the end of the nearest buffer" if offset > 0 else "before it"
    assert where in dropped[0], dropped[0]
    assert not big.any()  # nothing written anywhere it could be seen either
    assert store_fence.take() == []  # said once


def _hunt(name: str, wild, access: str):
    """A seeded hunt of ``wild``, a softmax with a wild ``access`` (registered once), on
    Triton's interpreter; it ends without a harness error."""
    import fuzz

    if name not in {t.name for t in fuzz.all_targets()}:
        fuzz.fuzz_kernel(
            name,
            family="softmax",
            kernel=wild,
            capabilities=fuzz.Capabilities(features={"scale"}),
            description=f"a softmax with a wild {access} from 3 columns on (the fence's test)",
        )
    result = fuzz.hunt(
        fuzz.get(name), "triton-interpret", fuzz.get_profile("ci"), database=None, seed=1
    )
    assert result.error is None
    return result


def test_a_kernel_that_stores_outside_its_buffers_is_an_out_of_bounds_write_not_a_crash():
    """Through the plugin API, a softmax whose Triton launch stores one element 64 MB past its
    output from three columns on. Unfenced, Triton's interpreter writes there: a segmentation
    fault, or a corrupt heap that aborts the process later, somewhere else (a GPU campaign's
    worker died of SIGABRT in ``inspect.getmembers`` while it shrank a jagged kernel's
    out-of-bounds store in the interpreter, and the report had a ``crash`` row whose stack named
    the harness). Fenced, it is the kernel's out-of-bounds write, shrunk to its three columns."""

    def wild(x, *, scale):
        y = torch.softmax(x.float() * scale, dim=-1).to(x.dtype)
        if x.shape[-1] >= 3:
            flat = y.reshape(-1)
            _store_at[(1,)](flat, flat, 1 << 24, 1, BLOCK=16)
        return y

    result = _hunt("fence_test_wild_softmax", wild, "store")
    # (torch.softmax's NaN for a row of infinities is this toy kernel's other bug)
    assert "crash" not in {f.finding.cls for f in result.found.values()}
    found = next(f for f in result.found.values() if f.finding.cls == "out-of-bounds-write")
    assert "stored outside every buffer of the launch" in found.finding.message, found.finding
    assert found.case.inputs["x"].shape == (1, 3), found.case.shapes()


@triton.jit
def _load_at(x_ptr, y_ptr, offset, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    ok = cols < n
    x = tl.load(x_ptr + offset + cols, mask=ok, other=-1.0)
    tl.store(y_ptr + cols, x * 2.0, mask=ok)


@pytest.mark.parametrize("offset", [0, 100, 1 << 24, -(1 << 24)])
def test_a_load_outside_every_buffer_reads_its_other_value_and_is_said(offset):
    """A load 64 MB past (or before) every buffer of its launch reads the heap or faults
    (round 12's jagged kernel reading row 0 of a values array of no rows killed its CPU worker
    with SIGSEGV in the interpreter's load): fenced, its lanes read the load's ``other`` value
    and the load is said. Loads inside the launch's allocations read what is there."""
    store_fence.install()
    storage = torch.zeros(4096 + 32)
    storage[:16] = torch.arange(16, dtype=torch.float32)
    storage[100:116] = torch.arange(16, dtype=torch.float32) + 100
    x, y = storage[:4096], storage[4096:4112]
    store_fence.reset()
    interpreted(_load_at)[(1,)](x, y, offset, 16, BLOCK=16)
    wild = store_fence.take_loads()
    if offset in (0, 100):
        assert wild == [] and torch.equal(y, storage[offset : offset + 16] * 2)
        return
    assert len(wild) == 1 and wild[0].startswith("16 of 16 element(s) of one load outside"), wild
    assert torch.equal(y, torch.full((16,), -2.0))
    assert store_fence.take_loads() == []  # said once


def test_a_kernel_that_loads_outside_its_buffers_is_an_out_of_bounds_read_not_a_crash():
    """Through the plugin API, a softmax whose Triton launch also loads 64 MB past its input
    from three columns on: an ``out-of-bounds-read`` of the guard-bands property, shrunk to its
    three columns; no process dies of it."""

    def wild(x, *, scale):
        y = torch.softmax(x.float() * scale, dim=-1).to(x.dtype)
        if x.shape[-1] >= 3:
            flat = x.reshape(-1).float().contiguous()
            _load_at[(1,)](flat, torch.empty(16), 1 << 24, 1, BLOCK=16)
        return y

    result = _hunt("fence_test_wild_load_softmax", wild, "load")
    found = next(f for f in result.found.values() if f.finding.cls == "out-of-bounds-read")
    assert "loaded outside every buffer of the launch" in found.finding.message, found.finding
    assert found.case.inputs["x"].shape == (1, 3), found.case.shapes()
