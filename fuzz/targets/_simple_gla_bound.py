"""The per-element error bound of simple GLA (``Target.error_bound`` of the simple_gla family).

What any correct implementation of the computation in fp32 arithmetic may lose against the fp64
oracle, element by element: the chunked kernels (any chunk-local prefix sums, tile split and
summation order) and the token recurrence. The derivation is in ``kernels/simple_gla/README.md``
("Error analysis"); in short, for an output element that is a sum over paths ``p`` of
``exp(X_p) x product of inputs``::

    |computed - exact| <= kappa u (N0 M0 + c_len ML) + (1 + kappa u n_max) (a MX + MB)
                          + u64 n_max M0 + flush

(then, for fp16/bf16 inputs, matmul operands rounded to the input dtype, and the store rounding)

with four sums of absolute path terms, each an fp64 run of the chunked algorithm on absolute
inputs (``oracles.simple_gla.simple_gla_magnitude_variants``), every log decay times
``lambda0 = 1 - a`` and every key ``|k_j|`` times ``exp(beta_j)``:

    M0  sum |term|                      ML  sum len_p |term|   (len_p: decays the path crosses)
    MX  sum |X_p| |term|                MB  sum beta_j |term|  (beta_j of the path's key token)

``ML`` and ``MX`` are difference quotients of two such runs (each term is convex in the extra
decay, so the quotient bounds the derivative from above).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fuzz.arrays import dtype_name, finfo
from fuzz.case import Case
from fuzz.kit import per_case, torch_inputs
from oracles.error_model import TF32_UNIT

U32 = 2.0**-24  # fp32 unit roundoff
U64 = 2.0**-53
TINY32 = 2.0**-126  # the smallest normal float32
# Roundings per decay a path crosses: the token recurrence multiplies by exp(g_t) (4 ulps for a
# hardware exp, 1 for the product) and adds (1); a chunk crossing of the chunked form costs the
# same (exp(b_last), product, sum) and a path crosses at most one chunk boundary per decay.
PER_TOKEN = 6
# Difference quotient steps: ML with an extra decay of 1 / (EPS_DIV (L + 1)) per token (the
# quotient overestimates len by at most exp(1 / EPS_DIV)), MX with the decays times 1 - H_STEP.
EPS_DIV = 8.0
H_STEP = 1.0 / 128
FD_SLACK = 2.0**-40  # relative slack on a difference quotient (fp64 rounding of the two runs)
# The rounding of a store to the output dtype, relative: half an ulp (round to nearest even), but a
# whole ulp for bfloat16, which Triton's interpreter converts by truncation (measured: 1 + 2^-8 +
# 2^-10 stored as 1.0); the compiled kernels and the Pallas wrapper round to nearest.
STORE_UNIT = {"float32": 0.0, "float16": 2.0**-11, "bfloat16": 2.0**-7}
# Matmul operands rounded to the input dtype (tensor-core dots; FlashAttention's convention for P):
# a chunked kernel in fp16/bf16 may round the intermediate operands of its dots (the attention
# matrix, the stored chunk states, decayed keys/values/queries, the state gradients) to the input
# dtype. A forward output is at most two dots deep and a gradient three, two operands each: at
# most this many such roundings along any path. A state carried across chunks in the input dtype
# rounds once per chunk, which no constant covers: a precision loss the bound reports.
OPERAND_ROUNDINGS = {"o": 4, "ht": 4, "dq": 6, "dk": 6, "dv": 6, "dg": 6, "dh0": 6}


def gamma(n: float) -> float:
    """``gamma_n = n u / (1 - n u)``: the relative error of ``n`` fp32 roundings."""
    return n * U32 / (1.0 - n * U32)


@dataclass(frozen=True)
class Terms:
    """The fp32 bound of one output, per element, and its parts (float64 arrays)."""

    m0: np.ndarray  # sum of |terms| (the condition of the element)
    arithmetic: np.ndarray  # kappa u (N0 M0 + c_len ML) + u64 n_max M0
    weights: np.ndarray  # (1 + kappa u n_max) (a MX + MB): the exponents' errors
    flush: float  # subnormal intermediates flushed to zero
    operands: np.ndarray | float = 0.0  # matmul operands rounded to a half input dtype

    @property
    def fp32(self) -> np.ndarray:
        """The bound of fp32 arithmetic on the inputs (before any rounding to a half dtype)."""
        return self.arithmetic + self.weights + self.flush

    @property
    def computed(self) -> np.ndarray:
        """The bound of the computed value before the store: fp32 arithmetic and operands
        rounded to the input dtype."""
        return self.fp32 + self.operands


@dataclass(frozen=True)
class ErrorModel:
    """The error bound of one case at one chunk size.

    Attributes:
        chunk: the chunk size the prefix sums restart at.
        n0: roundings of a path besides its per-decay part: ``2 (K + V) + 3 C + 32``.
        n_max: the longest path's roundings, ``n0 + PER_TOKEN (L + 1)``.
        a: an exponent's error per unit of ``|X|`` (:func:`exponent_errors`).
        terms: per output.
    """

    chunk: int
    n0: int
    n_max: int
    a: float
    terms: dict[str, Terms]

    def fp32(self, output: str) -> np.ndarray:
        return self.terms[output].fp32

    def bound(self, output: str, dtype: str, reference: np.ndarray | None = None) -> np.ndarray:
        """The bound of ``output`` stored in ``dtype``: the computed value's bound plus the
        store's rounding ``u_out (|x| + that bound) + eta_out`` (``|x|`` from ``reference``, the
        oracle, else ``M0 >= |x|``; ``eta_out = tiny u_out``: half the dtype's smallest
        subnormal)."""
        t = self.terms[output]
        b = t.computed
        unit = STORE_UNIT[dtype]
        if unit:
            x = t.m0 if reference is None else np.abs(np.asarray(reference, np.float64))
            b = b + unit * (np.where(np.isfinite(x), x, 0.0) + b) + finfo(dtype).tiny * unit
        return b


def seq_bounds(case: Case) -> list[tuple[int, int, int]]:
    """``(batch row, start, end)`` of every sequence."""
    batch, length = case.inputs["q"].shape[:2]
    cu = case.inputs.get("cu_seqlens")
    if cu is None:
        return [(b, 0, length) for b in range(batch)]
    return [(0, int(cu[i]), int(cu[i + 1])) for i in range(len(cu) - 1)]


def exponent_errors(case: Case, chunk: int) -> tuple[float, float]:
    """``(a, e_b)``: an exponent's error per unit of ``|X|`` and the relative error of a chunk-local
    cumulative decay ``b_j``. Per-token gates: ``b_j`` is a prefix sum of up to ``C`` gates of one
    sign in any order, ``e_b = gamma_{C+1}``; a per-head decay: ``b_j = gamma (j + 1)``, one
    product, ``e_b = 2 u`` (a kernel that sums ``gamma`` ``C`` times loses up to ``C`` ulps of
    ``b_j`` that it need not: a precision loss the bound reports). ``a = e_b + 4 u``: the difference
    ``b_i - b_j`` (``|b_i| = |b_j| + |X|``), the exp's argument scaling and its constant."""
    e_b = gamma(chunk + 1) if "g" in case.inputs else 2.0 * U32
    return e_b + 4.0 * U32, e_b


def chunk_local_decay(case: Case, chunk: int) -> np.ndarray:
    """``|b_j|`` per token ``[B, T, H]`` (float64): the total |log decay| from the start of the
    token's chunk to the token, inclusive (0 on tokens of no sequence)."""
    b, t, h = case.inputs["q"].shape[:3]
    out = np.zeros((b, t, h))
    g = None if "g" not in case.inputs else np.abs(case.inputs["g"].astype(np.float64))
    gam = None if g is not None else np.abs(case.inputs["g_gamma"].astype(np.float64))
    for row, bos, eos in seq_bounds(case):
        n = eos - bos
        if n == 0:
            continue
        nt = -(-n // chunk)
        if gam is not None:
            out[row, bos:eos] = (np.arange(n) % chunk + 1.0)[:, None] * gam[None, :]
            continue
        part = np.zeros((nt * chunk, h))
        part[:n] = g[row, bos:eos]  # type: ignore[index]
        out[row, bos:eos] = np.cumsum(part.reshape(nt, chunk, h), axis=1).reshape(-1, h)[:n]
    return out


@dataclass(frozen=True)
class Sizes:
    """What the crude sensitivities below are made of: ``K``, ``V``, the longest sequence ``L``,
    ``max(1, scale)`` and ``m = max(1, max |input|)``."""

    k_dim: int
    v_dim: int
    length: int
    scale: float
    m: float

    @classmethod
    def of(cls, case: Case) -> Sizes:
        """The sizes of ``case``, computed once per case (each output's bound asks for them;
        an input's largest magnitude is a pass over it: 7 s of a GPU profile's 114, fla's
        backward)."""
        return _sizes(case)

    @classmethod
    def _of(cls, case: Case) -> Sizes:
        k_dim, v_dim = case.inputs["q"].shape[3], case.inputs["v"].shape[3]
        scale = case.params.get("scale")
        scale = k_dim**-0.5 if scale is None else float(scale)
        m = 1.0
        for name in ("q", "k", "v", "do", "h0", "dht"):
            if name in case.inputs and case.inputs[name].size:
                m = max(m, float(np.abs(case.inputs[name].astype(np.float64)).max()))
        length = max((e - s for _, s, e in seq_bounds(case)), default=0)
        return cls(k_dim, v_dim, length, max(1.0, scale), m)

    @property
    def paths(self) -> int:
        """``(L + 1)(K + V)``: the most path sums an output element is made of."""
        return (self.length + 1) * (self.k_dim + self.v_dim)


@per_case
def _sizes(case: Case) -> Sizes:
    return Sizes._of(case)


def _crude_sensitivity(case: Case) -> float:
    """An upper bound of how much any output element moves per unit change of any intermediate:
    ``max(1, scale) ((L + 1)(K + V))^2 m^4`` (an output is a sum of at most ``(L + 1)(K + V)``
    path sums, each a product of at most four inputs and weights <= 1, and a gradient one more
    such sum)."""
    z = Sizes.of(case)
    return z.scale * z.paths**2 * z.m**4


def operand_sensitivity(case: Case, output: str) -> float:
    """How much ``output``'s element moves when every rounded matmul operand entry moves by 1,
    summed over the entries: ``max(1, scale) (L + 1)(K + V) m^2`` (an entry reaches the element
    through at most ``(L + 1)(K + V)`` products of at most two other inputs with weights <= 1),
    times ``C K m`` for ``dg`` (its suffix sums of ``q . dq`` over a chunk)."""
    z = Sizes.of(case)
    s = z.scale * z.paths * z.m**2
    return s * case.params["chunk_size"] * z.k_dim * z.m if output == "dg" else s


def operand_rounding(case: Case, output: str, m0: Any, fp32: Any) -> Any:
    """What rounding the matmul operands to a half input dtype may add (``OPERAND_ROUNDINGS``
    along a path, each ``u_in`` relative or ``eta_in`` below the dtype's normal range):
    ``gamma_in (M0 + fp32 bound) + r eta_in S`` (``S``: :func:`operand_sensitivity`; ``m0`` and
    ``fp32`` NumPy arrays or float64 tensors, the answer of their kind). Zero for fp32 inputs, whose operands are already fp32, unless the case's ``fp32_dots`` is ``tf32``
    (a plugin's ``Conventions(fp32_dots=...)``): then the same with the operands converted to
    TF32 (``oracles.error_model.TF32_UNIT``)."""
    dtype = dtype_name(case.inputs["q"].dtype)
    u_in = STORE_UNIT.get(dtype, 0.0)
    eta_in = finfo(dtype).tiny * u_in
    if dtype == "float32" and case.params.get("fp32_dots") == "tf32":
        # fp32 operands converted to TF32 (fp32's exponent range, one TF32 ulp relative)
        u_in, eta_in = TF32_UNIT, TINY32 * TF32_UNIT
    if not u_in:
        return 0.0
    r = OPERAND_ROUNDINGS[output]
    g_in = (1.0 + u_in) ** r - 1.0
    return g_in * (m0 + fp32) + r * eta_in * operand_sensitivity(case, output)


def error_model(case: Case, chunk: int | None = None, device: str = "cpu") -> ErrorModel:
    """The error model of ``case`` at ``chunk`` (default: its own), cached per case, chunk and
    device."""
    return _error_model(case, case.params["chunk_size"] if chunk is None else chunk, device)


def cu_seqlens(case: Case) -> list[int] | None:
    """The case's ``cu_seqlens`` as a list (None without), as the references take it."""
    cu = case.inputs.get("cu_seqlens")
    return None if cu is None else [int(c) for c in cu]


@per_case
def _error_model(case: Case, chunk: int, device: str) -> ErrorModel:
    import torch

    from oracles.simple_gla import MagnitudeVariant, simple_gla_magnitude_variants

    k_dim, v_dim = case.inputs["q"].shape[3], case.inputs["v"].shape[3]
    longest = max((e - s for _, s, e in seq_bounds(case)), default=0)
    n0 = 2 * (k_dim + v_dim) + 3 * chunk + 32
    n_max = n0 + PER_TOKEN * (longest + 1)
    a, b_err = exponent_errors(case, chunk)
    lam = 1.0 - a
    beta = 2.0 * b_err * chunk_local_decay(case, chunk)
    with np.errstate(over="ignore"):
        inflate = np.exp(np.minimum(beta, 700.0))
    eps = 1.0 / (EPS_DIV * (longest + 1))
    t = torch_inputs(case, device, skip=("cu_seqlens",))
    to = lambda x: torch.as_tensor(x, dtype=torch.float64, device=t["q"].device)  # noqa: E731
    variants = (
        MagnitudeVariant(lam, 0.0, to(inflate)),
        MagnitudeVariant(lam, eps, to(inflate)),
        MagnitudeVariant(lam - H_STEP, 0.0, to(inflate)),
        MagnitudeVariant(lam, 0.0, to(beta * inflate), state_weight=0.0),
    )
    mags = simple_gla_magnitude_variants(
        t["q"],
        t["k"],
        t["v"],
        g=t.get("g"),
        g_gamma=t.get("g_gamma"),
        scale=case.params["scale"],
        initial_state=t.get("h0"),
        cu_seqlens=cu_seqlens(case),
        chunk_size=chunk,
        variants=variants,
        do=t.get("do"),
        dht=t.get("dht"),
    )
    kappa = 1.0 / (1.0 - n_max * U32)
    flush = 2.0 * n_max * TINY32 * (1.0 + _crude_sensitivity(case))
    terms = {}
    # The terms are float64 arithmetic on the magnitudes where they were computed (on a GPU, in
    # NumPy after the copy it was 27 s of a 114 s profile of fla's backward, its outputs of a
    # million elements and more); the same operations in the same order, each correctly
    # rounded, so the same values.
    host = lambda x: x.cpu().numpy() if isinstance(x, torch.Tensor) else x  # noqa: E731
    for name in mags[0].as_dict():
        m0, m_len, m_x, m_b = (m.as_dict()[name].detach() for m in mags)
        ml = torch.clamp_min(m_len - m0, 0.0) / eps + FD_SLACK * m0 / eps
        mx = torch.clamp_min(m_x - m0, 0.0) / H_STEP + FD_SLACK * m0 / H_STEP
        arith = kappa * U32 * (n0 * m0 + PER_TOKEN * ml) + U64 * n_max * m0
        weights = (1.0 + kappa * U32 * n_max) * (a * mx + m_b)
        fp32 = arith + weights + flush
        operands = operand_rounding(case, name, m0, fp32)
        terms[name] = Terms(host(m0), host(arith), host(weights), flush, host(operands))
    return ErrorModel(chunk, n0, n_max, a, terms)


def propagated(
    piece: Case,
    *,
    h0_error: np.ndarray | None = None,
    dht_error: np.ndarray | None = None,
    device: str = "cpu",
) -> dict[str, np.ndarray]:
    """How far ``piece``'s exact outputs move when its initial state (``h0_error``) or its final
    state's gradient (``dht_error``) moves by at most the given amounts, element by element: the
    outputs are linear in each, so it is the magnitude of the outputs with the perturbation as
    the only source (exact decays; keys and values zero for an ``h0`` perturbation, ``do`` zero
    for a ``dht`` one)."""
    import torch

    from oracles.simple_gla import simple_gla_magnitudes

    t = torch_inputs(piece, device, skip=("cu_seqlens",))
    dev = t["q"].device
    as_t = lambda x: torch.as_tensor(np.asarray(x, np.float64), device=dev)  # noqa: E731
    q, k, v = t["q"], t["k"], t["v"]
    h0, do, dht = t.get("h0"), t.get("do"), t.get("dht")
    if h0_error is not None:
        k, v, h0 = torch.zeros_like(k), torch.zeros_like(v), as_t(h0_error)
    if dht_error is not None:
        do, dht = (None if do is None else torch.zeros_like(do)), as_t(dht_error)
    m = simple_gla_magnitudes(
        q,
        k,
        v,
        g=t.get("g"),
        g_gamma=t.get("g_gamma"),
        scale=piece.params["scale"],
        initial_state=h0,
        cu_seqlens=cu_seqlens(piece),
        chunk_size=piece.params["chunk_size"],
        do=do,
        dht=dht,
    )
    return {n: a.detach().cpu().numpy() for n, a in m.as_dict().items()}
