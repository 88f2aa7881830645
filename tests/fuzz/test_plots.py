"""Error maps: reduced to two axes, pooled, NaN/Inf marked; PNG and SVG renderings are valid."""

import base64
import struct
import zlib

import numpy as np

from fuzz.campaign import plots


def test_leading_axes_reduce_by_max_and_large_grids_pool():
    a = np.zeros((2, 3, 5, 7))
    a[1, 2, 4, 6] = 9.0
    r, described = plots.reduce_to_2d(a)
    assert r.shape == (5, 7) and r[4, 6] == 9.0 and "leading axes of [2, 3, 5, 7]" in described
    assert plots.reduce_to_2d(np.ones(4))[0].shape == (1, 4)
    big = np.zeros((300, 130))
    big[299, 0] = 1.0
    pooled, block = plots.pool(big)
    assert pooled.shape == (60, 44) and block == (5, 3) and pooled[59, 0] == 1.0


def test_error_map_marks_nonfinite_and_measures_against_the_tolerance():
    oracle = np.tril(np.ones((4, 4)))
    kernel = oracle.astype(np.float32).copy()
    kernel[3, 0] = np.nan  # where the oracle is finite
    kernel[0, 1] = 1e-3  # a masked element that should be 0
    m = plots.error_map("y", kernel, oracle, tolerance=1e-6)
    assert m["grid"][3][0] == plots.SPECIAL and m["nonfinite"] == 1
    assert m["grid"][0][1] == 1e3 and m["max_ratio"] == 1e3
    assert m["worst"] == [3, 0] and m["exact"] == 14 and sum(m["hist"]) == 1


def test_heatmap_is_a_valid_png_of_the_grid_size():
    uri = plots.heatmap_png([[0.0, 0.5, 2.0], [plots.SPECIAL, 1e-7, 1e4]])
    raw = base64.b64decode(uri.split(",", 1)[1])
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])
    assert (width, height) == (3, 2)
    idat = raw[raw.index(b"IDAT") + 4 :]
    assert len(
        zlib.decompress(
            idat[: struct.unpack(">I", raw[raw.index(b"IDAT") - 4 : raw.index(b"IDAT")])[0]]
        )
    ) == 2 * (1 + 3 * 3)


def test_svgs_are_well_formed():
    import xml.etree.ElementTree as ET

    m = plots.error_map("o", np.ones((2, 2), np.float32), np.ones((2, 2)), 1e-6)
    ET.fromstring(plots.histogram_svg(m))
    ET.fromstring(plots.bars_svg([("softmax [triton]", 123.4), ("a <b>", 0.0)]))
