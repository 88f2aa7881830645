import pytest
import triton.language as tl

from kernels._triton_jit import dynamic_params, jit_any_size


def _kernel(x_ptr, out_ptr, n_rows, n_cols, stride_xm, stride_xn, scale, BLOCK: tl.constexpr):
    pass


def test_lengths_and_outer_strides_are_runtime_values():
    assert dynamic_params(_kernel, specialize=("stride_xn",)) == [
        "n_rows",
        "n_cols",
        "stride_xm",
        "scale",
    ]
    jitted = jit_any_size(specialize=("stride_xn",))(_kernel)
    flags = {p.name: p.do_not_specialize for p in jitted.params}
    assert flags == {
        "x_ptr": False,
        "out_ptr": False,
        "n_rows": True,
        "n_cols": True,
        "stride_xm": True,
        "stride_xn": False,
        "scale": True,
        "BLOCK": False,
    }


def test_specialize_names_are_checked():
    with pytest.raises(ValueError, match=r"\['stride_q'\].*_kernel does not take"):
        dynamic_params(_kernel, specialize=("stride_q",))
    with pytest.raises(TypeError, match="sequence of names"):
        dynamic_params(_kernel, specialize="stride_xn")


def test_every_builtin_kernel_compiles_once_for_all_sizes():
    from kernels.attention import triton as attention
    from kernels.attention import triton_decode
    from kernels.jagged_softmax import triton as jagged
    from kernels.simple_gla import triton as gla
    from kernels.softmax import triton as softmax

    for kernel in (
        softmax._softmax_kernel,
        attention._attn_fwd_kernel,
        triton_decode._decode_split_kernel,
        triton_decode._decode_combine_kernel,
        jagged._jagged_softmax_kernel,
        gla._fwd_kernel,
        gla._bwd_kernel,
    ):
        specialized = [
            p.name
            for p in kernel.params
            if not p.do_not_specialize and not p.is_constexpr and not p.name.endswith("_ptr")
        ]
        # only unit strides of the innermost dimension select a binary
        assert all(name.startswith(("s_", "stride_")) for name in specialized), specialized


def _compile_sm90(fn, ptr_types, scalars, consts, options=None):
    """``fn`` compiled to a cubin for sm_90 (Triton needs no GPU for that): pointer arguments of
    the given types, float scalars as named, every other scalar int32, ``consts`` the constexprs."""
    pytest.importorskip("triton.backends.nvidia.compiler")
    import inspect

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {}
    for name, p in inspect.signature(fn.fn).parameters.items():
        if name.endswith("_ptr"):
            sig[name] = ptr_types[name]
        elif "constexpr" in str(p.annotation):
            sig[name] = "constexpr"
        else:
            sig[name] = scalars.get(name, "i32")
    names = list(sig)
    src = ASTSource(fn, sig, {(names.index(k),): v for k, v in consts.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def _gla_pointers(fn, dtype):
    """The GLA kernels' pointer types: data in ``dtype``, offsets int32, the rest float32."""
    data = {"q_ptr", "k_ptr", "v_ptr", "o_ptr", "do_ptr", "dq_ptr", "dk_ptr", "dv_ptr"}
    return {
        name: dtype if name in data else "*i32" if name == "cu_ptr" else "*fp32"
        for name in fn.arg_names
        if name.endswith("_ptr")
    }


@pytest.mark.parametrize(
    "dtype, varlen, tiles",
    [
        ("*fp32", False, (64, 32, 64)),
        ("*fp16", True, (32, 64, 128)),
        ("*bf16", False, (16, 16, 16)),
    ],
)
def test_attention_kernel_compiles_for_a_gpu_with_runtime_switches(dtype, varlen, tiles):
    """The compiled path, without a GPU: Triton compiles to a cubin for sm_90 on any machine. The
    interpreter accepts code the compiler rejects (a runtime ``if`` whose branches give a value
    different types or shapes), and the switches of the attention kernel are runtime flags."""
    from kernels.attention.triton import _attn_fwd_kernel as fn

    ints = ("key_len_ptr", "cu_q_ptr", "cu_k_ptr")
    ptrs = {n: "*i32" if n in ints else "*fp32" for n in ("slopes_ptr", "lse_ptr", *ints)}
    ptrs.update(q_ptr=dtype, k_ptr=dtype, v_ptr=dtype, o_ptr=dtype)
    bq, bk, bd = tiles
    const = {"IS_VARLEN": varlen, "BLOCK_Q": bq, "BLOCK_K": bk, "BLOCK_D": bd}
    compiled = _compile_sm90(fn, ptrs, {"scale": "fp32", "softcap": "fp32"}, const)
    assert compiled.asm["cubin"]


@pytest.mark.parametrize(
    "kernel, dtype, consts",
    [
        (
            "fwd",
            "*fp32",
            {"BT": 64, "BS": 64, "BK": 32, "BV": 16},
        ),
        (
            "fwd",
            "*bf16",
            {"BT": 128, "BS": 64, "BK": 16, "BV": 32},
        ),
        ("bwd", "*fp16", {"BT": 16, "BS": 16, "BK": 16, "BV": 32}),
        ("bwd", "*fp32", {"BT": 32, "BS": 32, "BK": 32, "BV": 16}),
    ],
)
def test_gla_kernels_compile_for_a_gpu_with_runtime_switches(kernel, dtype, consts):
    """As above for chunked GLA: per-token gates, initial/final states, their gradients and packed
    sequences and the forward's mode are runtime flags (one binary per dtype, chunk, tile and block
    sizes)."""
    from kernels.simple_gla import triton as gla

    fn = gla._fwd_kernel if kernel == "fwd" else gla._bwd_kernel
    compiled = _compile_sm90(fn, _gla_pointers(fn, dtype), {"scale": "fp32"}, consts)
    assert compiled.asm["cubin"]


# A Hopper SM gives one block at most 227 KiB of shared memory.
SM90_SHARED_BYTES = 227 * 1024


@pytest.mark.parametrize("kernel", ["fwd", "bwd"])
@pytest.mark.parametrize("block_k, block_v", [(128, 128), (128, 32)])
def test_gla_launch_fits_a_hopper_sm_at_the_largest_blocks(kernel, block_k, block_v):
    """The tile and stage count the wrapper launches with (``_launch_options``), compiled for
    sm_90 at chunk 256 in fp32: the shared memory the binary asks for fits the SM (a launch would
    fail with 'out of resources' on the GPU only)."""
    import types

    from kernels.simple_gla import triton as gla

    opts = gla._launch_options(types.SimpleNamespace(tile=64, block_k=block_k, block_v=block_v))
    fn = gla._fwd_kernel if kernel == "fwd" else gla._bwd_kernel
    consts = {"BT": 256, "BS": opts["BS"], "BK": block_k, "BV": block_v}
    options = {"num_warps": opts["num_warps"], "num_stages": opts["num_stages"]}
    compiled = _compile_sm90(fn, _gla_pointers(fn, "*fp32"), {"scale": "fp32"}, consts, options)
    assert compiled.metadata.shared <= SM90_SHARED_BYTES, (opts, compiled.metadata.shared)
