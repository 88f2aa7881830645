"""Flash-attention forward in JAX Pallas (compiled for GPU through the Triton lowering, or
interpreted).

Same semantics as ``kernels.attention.triton`` (see its docstring and
``kernels/attention/README.md``): scale once, optional softcap, optional ALiBi, masks by
bottom-right aligned index rules, zeros and LSE -inf for a query with no visible key.

GPU lowering constraints shape the wrapper. Every array the kernel sees has power-of-two sizes and
no block may overhang its array, so the wrapper lays the problem out on the host as a padded batch
of sequences ``[N, H, T_pad, D_pad]`` (``T_pad`` a power of two >= the block, ``D_pad`` a power
of two >= 16, zeros in the padding) and passes every sequence's true query and key counts as data:
one compiled kernel serves every length in a bucket. Packed variable-length sequences
(``cu_seqlens``) are gathered into that layout and the outputs scattered back, so the kernel has
one code path; dense key padding keeps the caller's keys (the kernel masks keys past the length
itself). The kernel zeroes values past a sequence's key count before the ``P . V`` product, so
whatever those rows hold (NaN included) never reaches an output.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

try:  # the Triton lowering's options (pallas on GPU); the interpreter ignores them
    from jax.experimental.pallas import triton as _pl_triton
except ImportError:  # pragma: no cover - a JAX without the Triton backend
    _pl_triton = None  # type: ignore[assignment]

from kernels._programs import compiled_programs
from kernels._validate import grown_bucket, next_pow2
from kernels.alibi import alibi_slopes as standard_alibi_slopes
from kernels.attention._common import (
    check_blocks,
    check_cu_seqlens,
    check_dtypes,
    check_lengths,
    check_options,
    check_shapes,
    padded_head_dim,
    to_host,
)

DTYPES = (jnp.dtype(jnp.float32), jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16))
_HIGHEST = jax.lax.Precision.HIGHEST
MIN_BUCKET = 64  # smallest padded length: short sequences share one compiled kernel
MIN_HEAD_BUCKET = 32  # smallest padded head dim: small head dims share one compiled kernel

# Coefficients of tanh(x) / x as a polynomial in x^2 (Taylor series; |x| < 0.55 keeps the
# truncation below 2e-8 relative). The same formula as the Triton kernel, so that both kernels
# compute the soft cap alike on every backend.
_T = (
    -1 / 3,
    2 / 15,
    -17 / 315,
    62 / 2835,
    -1382 / 155925,
    21844 / 6081075,
    -929569 / 638512875,
    6404582 / 10854718875,
)


def _tanh(x):
    a = jnp.abs(x)
    z = x * x
    poly = jnp.float32(_T[-1])
    for c in _T[-2::-1]:
        poly = c + z * poly
    series = x * (1.0 + z * poly)
    big = 1.0 - 2.0 / (jnp.exp(2.0 * jnp.minimum(a, 20.0)) + 1.0)
    return jnp.where(a < 0.55, series, jnp.where(x < 0, -big, big))


def key_tiles(pid_q, q_len, k_len, causal, window_left, window_right, *, block_q, block_k):
    """The key tiles ``[first, last)`` that some query of query block ``pid_q`` can see (jnp
    scalars in, jnp scalars out). Every tile lies within the sequence's keys: a block past the
    sequence's end (there are many: lengths are padded to buckets, and whole rows of padding have
    no queries) gets no tile at all. Reading past the keys is no error in the interpreter, which
    clamps the slice, but an illegal address on a GPU.
    """
    # Query i of the sequence sits at key position i + diag (bottom-right alignment); the block's
    # last query sees keys up to position (pid_q + 1) * block_q - 1 + diag.
    diag = k_len - q_len
    hi = k_len
    hi = jnp.where(causal, jnp.minimum(hi, (pid_q + 1) * block_q + diag), hi)
    hi = jnp.where(
        window_right >= 0, jnp.minimum(hi, (pid_q + 1) * block_q + diag + window_right), hi
    )
    hi = jnp.where(pid_q * block_q < q_len, jnp.maximum(hi, 0), 0)  # past the end: no work
    lo = jnp.where(window_left >= 0, jnp.maximum(0, pid_q * block_q + diag - window_left), 0)
    lo = jnp.minimum(lo, hi)
    first = lo // block_k
    last = jnp.maximum(first, (hi + block_k - 1) // block_k)
    return first, last


@dataclass(frozen=True)
class _Static:
    block_q: int
    block_k: int


def _attn_kernel(
    qlen_ref,
    klen_ref,
    fparams_ref,
    iparams_ref,
    slope_ref,
    q_ref,
    k_ref,
    v_ref,
    o_init_ref,
    lse_init_ref,
    o_ref,
    lse_ref,
    *,
    static: _Static,
):
    del o_init_ref, lse_init_ref  # the aliased initial contents of the outputs: never read
    block_q, block_k = static.block_q, static.block_k
    q_len = qlen_ref[0]
    k_len = klen_ref[0]
    scale = fparams_ref[0]
    softcap = fparams_ref[1]
    # Masks and modifiers are data, not compile-time flags: one compiled kernel per shape bucket.
    causal = iparams_ref[0] != 0
    window_left = iparams_ref[1]  # -1: unbounded
    window_right = iparams_ref[2]  # -1: unbounded
    has_softcap = iparams_ref[3] != 0
    slope = slope_ref[0]  # 0 without ALiBi: s - 0 * |i - j| == s exactly
    pid_q = pl.program_id(1)
    # Query i of this sequence sits at key position i + diag (bottom-right alignment).
    diag = k_len - q_len
    rows = pid_q * block_q + jax.lax.broadcasted_iota(jnp.int32, (block_q,), 0)
    pos = rows + diag
    q = q_ref[...].astype(jnp.float32)

    first, last = key_tiles(
        pid_q, q_len, k_len, causal, window_left, window_right, block_q=block_q, block_k=block_k
    )

    def body(j, carry):
        m_i, l_i, acc = carry
        start = pl.multiple_of(j * block_k, block_k)
        k = k_ref[pl.ds(start, block_k), :].astype(jnp.float32)
        v = v_ref[pl.ds(start, block_k), :].astype(jnp.float32)
        cols = start + jax.lax.broadcasted_iota(jnp.int32, (block_k,), 0)
        col_ok = cols < k_len
        valid = col_ok[None, :] & (rows[:, None] >= 0)
        valid = valid & (~causal | (cols[None, :] <= pos[:, None]))
        valid = valid & ((window_left < 0) | (cols[None, :] >= pos[:, None] - window_left))
        valid = valid & ((window_right < 0) | (cols[None, :] <= pos[:, None] + window_right))
        # Value rows no query of the block sees (past the key count: padding or the caller's
        # masked-out keys; before a window's reach) are never used: 0 * NaN would be NaN.
        # (A max over 0/1, not any(): the GPU lowering has no boolean reduction.)
        seen = jnp.where(valid & (rows[:, None] < q_len), 1.0, 0.0).max(axis=0)
        v = jnp.where(seen[:, None] > 0.0, v, 0.0)

        s = jnp.dot(q, k.T, precision=_HIGHEST, preferred_element_type=jnp.float32)
        s = s * scale
        s = jnp.where(has_softcap, softcap * _tanh(s / softcap), s)
        s = s - slope * jnp.abs(pos[:, None] - cols[None, :]).astype(jnp.float32)
        s = jnp.where(valid, s, -jnp.inf)

        m_new = jnp.maximum(m_i, s.max(axis=1))
        # A row with no visible key so far has max -inf: shift it by 0 instead, so that
        # exp(-inf - -inf) = NaN never happens.
        m_shift = jnp.where(m_new == -jnp.inf, 0.0, m_new)
        alpha = jnp.exp(m_i - m_shift)
        p = jnp.exp(s - m_shift[:, None])
        l_i = l_i * alpha + p.sum(axis=1)
        acc = acc * alpha[:, None]
        acc = acc + jnp.dot(p, v, precision=_HIGHEST, preferred_element_type=jnp.float32)
        return m_new, l_i, acc

    init = (
        jnp.full((block_q,), -jnp.inf, jnp.float32),
        jnp.zeros((block_q,), jnp.float32),
        jnp.zeros((block_q, q_ref.shape[-1]), jnp.float32),
    )
    m_i, l_i, acc = jax.lax.fori_loop(first, last, body, init)

    # l_i >= 1 for a row with a visible key (its max contributes exp(0)), 0 for a row without.
    l_safe = jnp.where(l_i > 0.0, l_i, 1.0)
    o = acc / l_safe[:, None]
    lse = jnp.where(l_i > 0.0, m_i + jnp.log(l_safe), -jnp.inf)
    o_ref[...] = o.astype(o_ref.dtype)
    lse_ref[...] = lse


# XLA compiles the interpreter's program for the CPU in ~1 s with its default options, and each new
# shape bucket compiles again; without the fusion emitters and LLVM's optimizations it takes ~0.2 s
# and computes the same IEEE fp32 operations (no fast math either way). Only interpreted calls
# use these options; a JAX version that does not know one of them gets the defaults.
INTERPRET_COMPILER_OPTIONS = {
    "xla_cpu_use_fusion_emitters": False,
    "xla_backend_optimization_level": 0,
}
_options_ok = [True]


def jit_twins(fn, static_argnames: tuple[str, ...]):
    """``fn`` jitted twice: for compiled calls, and with ``INTERPRET_COMPILER_OPTIONS`` for
    ``interpret=True`` calls; returns a function that picks by its ``interpret`` argument."""
    plain = compiled_programs(fn, static_argnames)
    quick = compiled_programs(fn, static_argnames, compiler_options=INTERPRET_COMPILER_OPTIONS)

    @functools.wraps(fn)
    def call(*args, interpret: bool, **kw):
        if interpret and _options_ok[0]:
            try:
                return quick(*args, interpret=interpret, **kw)
            except Exception as e:  # an option this JAX/XLA does not know
                if not any(name in str(e) for name in INTERPRET_COMPILER_OPTIONS):
                    raise
                _options_ok[0] = False
        return plain(*args, interpret=interpret, **kw)

    return call


# A GPU program's shared memory holds, per software-pipeline stage of the key loop, a k and a v
# tile, and besides them the q tile and the fp32 score tile (the Triton lowering stages dot
# operands through shared memory). Hopper gives a block 227 KiB: fp32 tiles of 128 x 128 at head
# dim 64 need 256 KiB at the default three stages. Fewer stages where the tiles are large.
SMEM_BUDGET = 160 * 1024


def gpu_compiler_params(rows: int, block_k: int, head_dim: int, itemsize: int):
    """Triton-lowering options for a program of ``rows`` queries over key tiles of ``block_k``."""
    if _pl_triton is None:
        return None
    stages = 1
    for s in (3, 2):
        if s * 2 * block_k * head_dim * itemsize + rows * (head_dim * itemsize + block_k * 4) <= (
            SMEM_BUDGET
        ):
            stages = s
            break
    return _pl_triton.CompilerParams(num_stages=stages)


def _attention_padded(
    q_lens, k_lens, fparams, iparams, slopes, q, k, v, o_init, lse_init, *, static, group, interpret
):
    rows, tq, dp = q.shape
    tk = k.shape[1]
    bq = static.block_q
    per_row = pl.BlockSpec((1,), lambda r, i: (r,))
    q_block = pl.BlockSpec((None, bq, dp), lambda r, i: (r, i, 0))
    # Row r = n * Hq + h reads kv row n * Hkv + h // group, which is r // group (Hq = Hkv * group).
    kv_block = pl.BlockSpec((None, tk, dp), lambda r, i: (r // group, 0, 0))
    lse_block = pl.BlockSpec((None, bq), lambda r, i: (r, i))
    return pl.pallas_call(
        functools.partial(_attn_kernel, static=static),
        grid=(rows, tq // bq),
        in_specs=[
            per_row,
            per_row,
            pl.BlockSpec((2,), lambda r, i: (0,)),
            pl.BlockSpec((4,), lambda r, i: (0,)),
            per_row,
            q_block,
            kv_block,
            kv_block,
            q_block,
            lse_block,
        ],
        out_specs=[q_block, lse_block],
        out_shape=[
            jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct((rows, tq), jnp.float32),
        ],
        input_output_aliases={8: 0, 9: 1},
        interpret=interpret,
        compiler_params=None
        if interpret
        else gpu_compiler_params(bq, static.block_k, dp, q.dtype.itemsize),
    )(q_lens, k_lens, fparams, iparams, slopes, q, k, v, o_init, lse_init)


_attention_padded = jit_twins(_attention_padded, ("static", "group", "interpret"))


# Host-side layout. The kernel needs padded power-of-two arrays; building them with jnp ops costs
# an XLA compilation per exact input shape (9-15 small programs a launch, tens of ms each on a
# GPU, loaded again from the persistent cache in every process), so the layout is done with
# NumPy wherever the arrays live, and only the kernel itself is compiled, once per shape bucket:
# a new length in a known bucket compiles nothing. On a GPU that costs a copy of the inputs to the
# host and of the padded arrays back.


def _put(a, like: jax.Array) -> jax.Array:
    return jax.device_put(a, next(iter(like.devices()))) if isinstance(a, np.ndarray) else a


def _pad_to(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if tuple(a.shape) == tuple(shape):
        return a
    return np.pad(a, [(0, s - d) for s, d in zip(shape, a.shape, strict=True)])


def _gather_rows(x: np.ndarray, index: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Packed ``x [1, H, T, ...]`` -> ``[N, H, L, ...]``: row ``index[n, r]`` where ``ok``, else 0."""
    if x.shape[2] == 0:  # nothing packed (every sequence empty): all padding
        return np.zeros((index.shape[0], x.shape[1], index.shape[1], *x.shape[3:]), x.dtype)
    g = np.moveaxis(x[0][:, index], 0, 1)  # [N, H, L, ...]
    keep = ok.reshape(ok.shape[:1] + (1,) + ok.shape[1:] + (1,) * (g.ndim - 3))
    return np.where(keep, g, np.zeros((), g.dtype))


def _check_array(name: str, a) -> jax.Array:
    if not isinstance(a, jax.Array):
        raise TypeError(f"{name} must be a jax.Array, got {type(a).__name__}")
    return a


def _index_array(name: str, a) -> np.ndarray:
    a = _check_array(name, a)
    if a.dtype not in (jnp.int32, jnp.int64):
        raise ValueError(f"{name}.dtype={a.dtype} must be int32 or int64")
    return to_host(name, a)


def _slopes(alibi_slopes, n_heads: int) -> np.ndarray | None:
    """The ALiBi slopes as a host array (checked there: no XLA program per head count)."""
    if alibi_slopes is None:
        return None
    if isinstance(alibi_slopes, str):
        if alibi_slopes != "standard":
            raise ValueError(f"alibi_slopes={alibi_slopes!r} must be 'standard', an array or None")
        return np.asarray(standard_alibi_slopes(n_heads), np.float32)
    a = _check_array("alibi_slopes", alibi_slopes)
    if tuple(a.shape) != (n_heads,):
        raise ValueError(
            f"alibi_slopes.shape={tuple(a.shape)} must be ({n_heads},), one per q head"
        )
    if not jnp.issubdtype(a.dtype, jnp.floating):
        raise ValueError(f"alibi_slopes.dtype={a.dtype} must be a floating dtype")
    host = np.asarray(a)
    if not np.isfinite(host.astype(np.float64)).all():
        raise ValueError("alibi_slopes must be finite")
    return host.astype(np.float32)


def _check_out(name: str, a, shape: tuple[int, ...], dtype) -> jax.Array | None:
    if a is None:
        return None
    a = _check_array(name, a)
    if tuple(a.shape) != tuple(shape) or a.dtype != dtype:
        raise ValueError(f"{name} is {a.dtype}{list(a.shape)}; expected {dtype}{list(shape)}")
    return a


def _seq_index(cu: np.ndarray, n_pad: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Row ``cu[n] + r`` of sequence n at ``[n, r]`` and whether it exists."""
    lens = np.diff(cu)
    r = np.arange(length)[None, :]
    starts = np.zeros(n_pad, np.int64)
    starts[: lens.size] = cu[:-1]
    lens_p = np.zeros(n_pad, np.int64)
    lens_p[: lens.size] = lens
    ok = r < lens_p[:, None]
    return np.where(ok, starts[:, None] + r, 0).astype(np.int32), ok


def bucket(n: int, block: int, interpret: bool) -> int:
    """The padded length of ``n`` rows: at least one block and at least 64, times a power of 2
    (interpreted: each padded tile is interpreted work) or of 4 (compiled: each bucket is a
    compile of several seconds, while the GPU skips tiles past a sequence's length)."""
    return grown_bucket(n, max(block, MIN_BUCKET), 2 if interpret else 4)


def attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    *,
    scale: float | None = None,
    causal: bool = False,
    window: tuple[int, int] | None = None,
    key_lengths: jax.Array | None = None,
    cu_seqlens_q: jax.Array | None = None,
    cu_seqlens_k: jax.Array | None = None,
    alibi_slopes: jax.Array | str | None = None,
    softcap: float | None = None,
    block_q: int = 64,
    block_k: int = 64,
    out: jax.Array | None = None,
    lse_out: jax.Array | None = None,
    interpret: bool = False,
) -> tuple[jax.Array, jax.Array]:
    """Attention forward with the online softmax; returns the output and the log-sum-exp.

    Arguments and results as ``kernels.attention.triton.attention`` (JAX arrays instead of torch
    tensors), except ``out`` and ``lse_out``: arrays whose contents the kernel's output buffers
    start from (aliased), so that an element the kernel never writes keeps its value there.
    """
    for name, a in (("q", q), ("k", k), ("v", v)):
        _check_array(name, a)
    batch, hq, hkv, tq, tk, d = check_shapes(q.shape, k.shape, v.shape)
    check_dtypes(q.dtype, k.dtype, v.dtype, DTYPES)
    opts = check_options(
        head_dim=d,
        scale=scale,
        causal=causal,
        window=window,
        softcap=softcap,
        has_alibi=alibi_slopes is not None,
    )
    block_q, block_k = check_blocks(block_q, block_k)
    out = _check_out("out", out, (batch, hq, tq, d), q.dtype)
    lse_out = _check_out("lse_out", lse_out, (batch, hq, tq), jnp.dtype(jnp.float32))
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen:
        if cu_seqlens_q is None or cu_seqlens_k is None:
            raise ValueError("cu_seqlens_q and cu_seqlens_k must be given together")
        if key_lengths is not None:
            raise ValueError("key_lengths cannot be combined with cu_seqlens_q/cu_seqlens_k")
        if batch != 1:
            raise ValueError(f"with cu_seqlens the batch q.shape[0]={batch} must be 1 (packed)")
        cu_q = check_cu_seqlens(
            "cu_seqlens_q", _index_array("cu_seqlens_q", cu_seqlens_q), tq, exact=True
        )
        cu_k = check_cu_seqlens(
            "cu_seqlens_k", _index_array("cu_seqlens_k", cu_seqlens_k), tk, exact=False
        )
        if cu_q.shape != cu_k.shape:
            raise ValueError(
                f"cu_seqlens_q.shape={cu_q.shape} and cu_seqlens_k.shape={cu_k.shape} must "
                "be equal (one entry per sequence, plus one)"
            )
        n = cu_q.shape[0] - 1
        q_lens, k_lens = np.diff(cu_q), np.diff(cu_k)
    else:
        n = batch
        q_lens = np.full(batch, tq, np.int32)
        k_lens = np.full(batch, tk, np.int32)
        if key_lengths is not None:
            k_lens = check_lengths(
                "key_lengths", _index_array("key_lengths", key_lengths), batch, tk
            )
    slopes = _slopes(alibi_slopes, hq)
    if tq == 0:
        o_empty = out if out is not None else jnp.zeros(q.shape, q.dtype)
        return o_empty, lse_out if lse_out is not None else jnp.zeros((batch, hq, 0), jnp.float32)

    qx, kx, vx = np.asarray(q), np.asarray(k), np.asarray(v)
    ox = np.zeros(q.shape, q.dtype) if out is None else np.asarray(out)
    lx = np.zeros((batch, hq, tq), jnp.float32) if lse_out is None else np.asarray(lse_out)
    # Buckets: lengths and the head dim are padded to powers of two; sequences x heads are
    # flattened into rows (q row n * Hq + h reads kv row n * Hkv + h // group) and the kv rows
    # padded to a power of two, so batch and head counts do not each need their own kernel.
    group = hq // hkv
    rows_q = n * hq
    rows_kv_p = next_pow2(n * hkv)
    rows_q_p = rows_kv_p * group
    dp = padded_head_dim(d, MIN_HEAD_BUCKET)
    tq_p = bucket(int(q_lens.max()) if n else 0, block_q, interpret)
    if varlen:
        tk_p = bucket(int(k_lens.max()) if n else 0, block_k, interpret)
        qi, q_ok = _seq_index(cu_q, n, tq_p)
        ki, k_ok = _seq_index(cu_k, n, tk_p)
        qx, ox = _gather_rows(qx, qi, q_ok), _gather_rows(ox, qi, q_ok)
        lx = _gather_rows(lx[..., None], qi, q_ok)[..., 0]
        kx, vx = _gather_rows(kx, ki, k_ok), _gather_rows(vx, ki, k_ok)
    else:
        # Dense keys keep the caller's rows (the kernel masks those past a key length itself).
        tk_p = bucket(tk, block_k, interpret)

    def rows(a, n_rows: int, length: int, width: int | None = None):
        flat = a.reshape((a.shape[0] * a.shape[1], *a.shape[2:]))
        return _pad_to(flat, (n_rows, length) + ((width,) if width else ()))

    qx, ox = rows(qx, rows_q_p, tq_p, dp), rows(ox, rows_q_p, tq_p, dp)
    lx = rows(lx, rows_q_p, tq_p)
    kx, vx = rows(kx, rows_kv_p, tk_p, dp), rows(vx, rows_kv_p, tk_p, dp)
    lens_q = np.zeros(rows_q_p, np.int32)
    lens_q[:rows_q] = np.repeat(q_lens, hq)
    lens_k = np.zeros(rows_q_p, np.int32)
    lens_k[:rows_q] = np.repeat(k_lens, hq)
    row_slopes = np.zeros(rows_q_p, np.float32)
    if slopes is not None:
        row_slopes[:rows_q] = np.tile(np.asarray(slopes, np.float32), n)
    iparams = [int(opts.causal), opts.window_left, opts.window_right, int(opts.softcap is not None)]
    operands = [
        _put(a, q)
        for a in (
            lens_q,
            lens_k,
            np.array([opts.scale, opts.softcap or 1.0], np.float32),
            np.array(iparams, np.int32),
            row_slopes,
        )
    ]
    operands += [_put(a, q) for a in (qx, kx, vx, ox, lx)]
    o_pad, lse_pad = _attention_padded(
        *operands,
        static=_Static(block_q, block_k),
        group=group,
        interpret=interpret,
    )
    o_pad = np.asarray(o_pad)[:rows_q].reshape(n, hq, tq_p, dp)
    lse_pad = np.asarray(lse_pad)[:rows_q].reshape(n, hq, tq_p)
    if not varlen:
        return _put(o_pad[:batch, :, :tq, :d], q), _put(lse_pad[:batch, :, :tq], q)
    # Scatter back: packed row t belongs to sequence seq[t], at offset t - cu_q[seq[t]].
    seq = np.searchsorted(cu_q, np.arange(tq), side="right") - 1
    off = np.arange(tq) - cu_q[seq]
    o = np.moveaxis(o_pad[seq, :, off, :d], 0, 1)[None]  # [1, Hq, Tq, D]
    lse = np.moveaxis(lse_pad[seq, :, off], 0, 1)[None]  # [1, Hq, Tq]
    return _put(o, q), _put(lse, q)
