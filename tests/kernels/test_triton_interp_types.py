"""The interpreter's types as values (``kernels._triton_interp``): an operation's block type is
shared by every value of its element type and shape, and a tensor's shape, numel and dtype are
those Triton gives it; results are unchanged (the kernels' own tests)."""

import triton.language as tl
import triton.runtime.interpreter as interpreter

import kernels._triton_interp  # noqa: F401 (its patches)


def test_block_types_are_shared_and_equal_to_triton_s():
    builder = interpreter.InterpreterBuilder()
    a = builder.get_block_ty(tl.float32, [4, 8])
    assert a is builder.get_block_ty(tl.float32, [4, 8])
    fresh = tl.core.block_type(tl.float32, [4, 8])
    assert a == fresh and a.name == fresh.name and a.numel == fresh.numel == 32
    b = a.with_element_ty(tl.int32)
    assert b is builder.get_block_ty(tl.int32, (4, 8)) and b.shape == (4, 8)
    assert b != a and b.element_ty == tl.int32


def test_a_tensor_takes_its_parts_from_its_type_once():
    ty = interpreter.InterpreterBuilder().get_block_ty(tl.float16, [2, 4])
    x, y = tl.tensor(None, ty), tl.tensor(None, ty)
    for t in (x, y):
        assert t.type is ty and t.dtype == tl.float16 and t.numel == 8
        assert [s.value for s in t.shape] == [2, 4]
    assert x.shape is y.shape  # built once for the type
    s = tl.tensor(None, tl.float32)
    assert s.numel == 1 and len(s.shape) == 0 and s.dtype == tl.float32
