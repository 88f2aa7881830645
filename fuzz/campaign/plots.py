"""Pictures of findings and campaigns, for reports that need no network and no plotting library.

:func:`error_maps` turns one checked example into small, JSON-ready summaries of each output's
error against the fp64 oracle: a grid of ``error / tolerance`` (reduced to two axes and pooled to
at most :data:`MAX_CELLS` a side, so masked, diagonal and tail structure shows at a glance) and a
histogram of ``log10(error / tolerance)``. The report renders them as embedded PNG heatmaps and
inline SVG histograms (:func:`heatmap_png`, :func:`histogram_svg`, :func:`bars_svg`).
"""

from __future__ import annotations

import base64
import html
import math
import struct
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from fuzz.arrays import to_float64

if TYPE_CHECKING:
    from fuzz.properties import Context, RunsCompared

MAX_CELLS = 64  # heatmap cells per side (blocks are max-pooled)
SPECIAL = -1.0  # grid value of a cell holding NaN/Inf where the oracle differs
HIST_EDGES = tuple(float(e) for e in range(-8, 5))  # log10(error / tolerance) bin edges


def reduce_to_2d(a: np.ndarray) -> tuple[np.ndarray, str]:
    """``a`` as ``[rows, cols]``: the max over every axis but the last two (described)."""
    if a.ndim == 0:
        return a.reshape(1, 1), "scalar"
    if a.ndim == 1:
        return a.reshape(1, -1), f"[{a.shape[0]}] as one row"
    if a.ndim == 2:
        return a, f"[{a.shape[0]}, {a.shape[1]}]"
    lead = tuple(range(a.ndim - 2))
    shape = ", ".join(map(str, a.shape))
    return a.max(axis=lead), f"max over the leading axes of [{shape}]"


def pool(a: np.ndarray, cells: int = MAX_CELLS) -> tuple[np.ndarray, tuple[int, int]]:
    """Max-pools a 2-D array to at most ``cells`` x ``cells``; returns it and the block size."""
    r, c = a.shape
    br, bc = max(1, math.ceil(r / cells)), max(1, math.ceil(c / cells))
    if (br, bc) == (1, 1):
        return a, (1, 1)
    pr, pc = math.ceil(r / br) * br, math.ceil(c / bc) * bc
    padded = np.full((pr, pc), -np.inf)
    padded[:r, :c] = a
    return padded.reshape(pr // br, br, pc // bc, bc).max(axis=(1, 3)), (br, bc)


def error_ratio(kernel: np.ndarray, oracle: np.ndarray, tolerance: Any) -> np.ndarray:
    """Elementwise ``|kernel - oracle| / tolerance``; ``inf`` where one is NaN/Inf and the other
    is not the same special value."""
    k = to_float64(kernel)
    o = np.asarray(oracle, np.float64)
    with np.errstate(all="ignore"):
        err = np.where(np.isfinite(k) & np.isfinite(o), np.abs(k - o), 0.0)
        special = (np.isfinite(o) != np.isfinite(k)) | (~np.isfinite(o) & ~np.isnan(o) & (k != o))
        special |= np.isnan(k) & ~np.isnan(o)
        tol = np.broadcast_to(np.asarray(tolerance, np.float64), err.shape)
        ratio = np.where(tol > 0, err / np.where(tol > 0, tol, 1.0), err)
    return np.where(special, np.inf, ratio)


def error_map(name: str, kernel: np.ndarray, oracle: np.ndarray, tolerance: Any) -> dict[str, Any]:
    """The JSON summary of one output's error (see the module docstring)."""
    ratio = error_ratio(kernel, oracle, tolerance)
    flat = ratio.ravel()
    finite = flat[np.isfinite(flat)]
    positive = finite[finite > 0]
    logs = np.log10(positive) if positive.size else np.zeros(0)
    counts = np.histogram(np.clip(logs, HIST_EDGES[0], HIST_EDGES[-1]), bins=HIST_EDGES)[0]
    grid2, described = reduce_to_2d(ratio)
    pooled, block = pool(grid2)
    cells = np.where(np.isinf(pooled), SPECIAL, pooled)
    worst = None
    if flat.size:
        order = np.where(np.isinf(flat), np.inf, np.nan_to_num(flat, nan=np.inf))
        i = int(np.argmax(order))
        worst = [int(v) for v in np.unravel_index(i, ratio.shape)]
    return {
        "output": name,
        "shape": list(ratio.shape),
        "reduced": described,
        "block": list(block),
        "tolerance": float(np.min(tolerance)) if np.size(tolerance) else 0.0,
        "tolerance_max": float(np.max(tolerance)) if np.size(tolerance) else 0.0,
        "grid": [[_round(v) for v in row] for row in cells.tolist()],
        "hist_edges": list(HIST_EDGES),
        "hist": [int(c) for c in counts],
        "exact": int((finite == 0).sum()),
        "nonfinite": int(np.isinf(flat).sum()),
        "elements": int(flat.size),
        "max_ratio": _round(float(finite.max())) if finite.size else None,
        "worst": worst,
    }


def _round(v: float) -> float:
    if v == 0 or not math.isfinite(v):
        return v
    return float(f"{v:.3g}")


def error_maps(ctx: Context) -> list[dict[str, Any]]:
    """Error maps of the failure of the check in ``ctx``: where it compared two runs (a
    metamorphic property: shift invariance, GQA = repeated heads...), the derived run against
    the clean one within the property's tolerance; else every output of the clean launch
    against the oracle (none if it crashed)."""
    compared = ctx.failed_comparison()
    if compared is not None:
        return [_comparison_map(compared)]
    out: list[dict[str, Any]] = []
    launch = ctx.clean
    if launch.error is not None:
        return out
    for name in ctx.oracle:
        got = launch.outputs.get(name)
        if got is None or got.shape != ctx.oracle[name].shape:
            continue
        tol: Any
        try:
            tol = ctx.bound(name)
        except Exception:
            tol = 0.0
        out.append(error_map(name, got, ctx.oracle[name], tol))
    return out


def _comparison_map(c: RunsCompared) -> dict[str, Any]:
    """The error map of two runs a property found apart: ``|got - want| / tolerance``."""
    tol = _bit_for_bit(c.want) if c.tolerance is None else c.tolerance
    m = error_map(c.output, c.got, c.want, tol)
    m["reduced"] += f"; {c.prop}: {c.what} against the clean run"
    m["compared"] = {"property": c.prop, "run": c.what, "against": "the clean run"}
    return m


def _bit_for_bit(want: np.ndarray) -> np.ndarray:
    """The tolerance a map of two runs compared bit for bit is drawn with: a quarter of the
    output dtype's eps relative to the clean value (its smallest normal number at least), so
    that an element that differs by one unit in the last place is above it (red) and an equal
    one exact (white)."""
    from fuzz.arrays import dtype_name, finfo

    w = to_float64(want)
    try:
        info = finfo(dtype_name(want.dtype))
        eps, tiny = info.eps, info.tiny
    except (ValueError, KeyError):  # not a float output
        eps, tiny = float(np.finfo(np.float64).eps), float(np.finfo(np.float64).tiny)
    with np.errstate(invalid="ignore"):
        scale = np.where(np.isfinite(w), np.maximum(np.abs(w), tiny), tiny)
    return eps / 4 * scale


# Rendering ------------------------------------------------------------------------------------------


def _colour(v: float) -> tuple[int, int, int]:
    """Cell colour: white for exact, blues below the tolerance, yellow to red above, magenta for
    NaN/Inf."""
    if v == SPECIAL:
        return (220, 0, 220)
    if v <= 0:
        return (255, 255, 255)
    t = max(-6.0, min(3.0, math.log10(v)))
    if t < 0:  # within tolerance: pale (1e-6) to mid blue (just under 1)
        f = (t + 6) / 6
        return (int(235 - 170 * f), int(242 - 120 * f), 255)
    f = t / 3  # above: yellow (1x) to dark red (1000x)
    return (int(255 - 90 * f), int(210 - 210 * f), int(60 - 60 * f))


def _png(rgb: np.ndarray) -> bytes:
    """A minimal PNG encoder (8-bit RGB, one IDAT)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].astype(np.uint8).tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        body = tag + data
        return (
            struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
        )

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 9))
        + chunk(b"IEND", b"")
    )


def heatmap_png(grid: Sequence[Sequence[float]]) -> str:
    """A ``data:`` URI of the heatmap (one pixel per cell; scale it up with CSS)."""
    rows = [[_colour(float(v)) for v in row] for row in grid] or [[(255, 255, 255)]]
    rgb = np.array(rows, np.uint8)
    return "data:image/png;base64," + base64.b64encode(_png(rgb)).decode("ascii")


def legend_png() -> str:
    """The colour scale, 1e-6 to 1e3 times the tolerance, then NaN/Inf."""
    values = [10.0**e for e in np.linspace(-6, 3, 90)] + [SPECIAL] * 10
    return heatmap_png([values])


def histogram_svg(m: dict[str, Any], *, width: int = 320, height: int = 120) -> str:
    """Inline SVG bar chart of ``log10(error / tolerance)`` counts; the 1x-tolerance edge marked."""
    edges, counts = m["hist_edges"], m["hist"]
    bars = [*counts, m["nonfinite"]]
    labels = [f"1e{int(e)}" for e in edges[:-1]] + ["NaN/Inf"]
    top = max(max(bars, default=0), 1)
    n = len(bars)
    bw = (width - 40) / n
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="hist" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="error histogram of {html.escape(m["output"])}">'
    ]
    for i, c in enumerate(bars):
        h = (height - 30) * (math.log1p(c) / math.log1p(top))
        x = 30 + i * bw
        above = i >= edges.index(0.0) if 0.0 in edges else False
        fill = "#c03" if i == n - 1 else ("#e90" if above else "#48c")
        parts.append(
            f'<rect x="{x:.1f}" y="{height - 20 - h:.1f}" width="{bw - 1:.1f}" height="{h:.1f}" '
            f'fill="{fill}"><title>{labels[i]}: {c}</title></rect>'
        )
    zero = 30 + edges.index(0.0) * bw if 0.0 in edges else None
    if zero is not None:
        parts.append(
            f'<line x1="{zero:.1f}" x2="{zero:.1f}" y1="0" y2="{height - 20}" stroke="#000" '
            'stroke-dasharray="3,2"/>'
        )
    parts.append(
        f'<text x="30" y="{height - 5}" font-size="10">1e-8</text>'
        f'<text x="{width - 60}" y="{height - 5}" font-size="10">NaN/Inf</text>'
        f'<text x="{(zero or 30) + 2:.1f}" y="10" font-size="10">tolerance</text>'
        f'<text x="0" y="12" font-size="10">{top}</text></svg>'
    )
    return "".join(parts)


def bars_svg(rows: Sequence[tuple[str, float]], *, unit: str = "", width: int = 560) -> str:
    """Horizontal bars, one per ``(label, value)``, log-free (throughput per target)."""
    height = 18 * len(rows) + 10
    top = max((v for _, v in rows), default=0.0) or 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="bars" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="throughput">'
    ]
    for i, (label, v) in enumerate(rows):
        y = 5 + 18 * i
        w = (width - 330) * v / top
        parts.append(
            f'<text x="0" y="{y + 12}" font-size="11">{html.escape(label)}</text>'
            f'<rect x="260" y="{y}" width="{w:.1f}" height="14" fill="#48c"/>'
            f'<text x="{264 + w:.1f}" y="{y + 12}" font-size="11">{v:.3g}{unit}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
