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


PARAMS = {"dtype": "float32", "scale": None, "block_m": 8, "block_n": 16}


def test_a_metamorphic_finding_is_pictured_by_its_failing_comparison():
    """A shift-invariance finding's heatmap showed the clean run against the oracle (all within
    tolerance), not the shifted run that differs from it."""
    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.properties import check_case
    from fuzz.target import get

    backend = get_backend("triton-interpret")
    case = Case({"x": np.array([[80.0, 80.5]], np.float32)}, PARAMS)  # exp overflows at 1080
    outcome = check_case(
        get("softmax_mutant_no_rowmax"), backend, case, params={"shift-invariance": 1000.0}
    )
    assert outcome.finding is not None and outcome.finding.prop == "shift-invariance"
    (m,) = plots.error_maps(outcome.context)
    assert m["compared"] == {
        "property": "shift-invariance",
        "run": "the run with 1000 added to x",
        "against": "the clean run",
    }
    assert m["output"] == "y" and m["shape"] == [1, 2]
    assert "shift-invariance: the run with 1000 added to x against the clean run" in m["reduced"]
    assert m["nonfinite"] == 2 and m["grid"] == [[plots.SPECIAL, plots.SPECIAL]]
    # A failure of the oracle is still pictured against the oracle.
    scaled = Case({"x": np.array([[1.0, 2.0, 3.0]], np.float32)}, {**PARAMS, "scale": 0.5})
    outcome = check_case(get("softmax_mutant_scale_twice"), backend, scaled)
    assert outcome.finding is not None and outcome.finding.prop == "oracle"
    (m,) = plots.error_maps(outcome.context)
    assert "compared" not in m and m["max_ratio"] > 1


def test_a_bit_for_bit_comparison_is_pictured_element_by_element(fake_plugin):
    # Masked-out inputs set to NaN leak through `x * mask`: the map shows where (NaN/Inf), and
    # the elements that kept their bits as exact.
    from fuzz.backends import get_backend
    from fuzz.case import Case
    from fuzz.properties import check_case
    from fuzz.target import get

    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    case = Case({"x": x, "mask": np.array([[True, False, True]])}, {"dtype": "float32"})
    outcome = check_case(
        get("fake_double_masking"), get_backend("fake"), case, params={"masked-poison": "nan"}
    )
    assert outcome.finding is not None and outcome.finding.prop == "masked-poison"
    (m,) = plots.error_maps(outcome.context)
    assert m["compared"]["property"] == "masked-poison"
    assert m["grid"] == [[0.0, plots.SPECIAL, 0.0]] and m["exact"] == 2
    small = np.array([1.0, 1e-40, 0.0], np.float32)
    one_ulp = np.nextafter(small, np.float32(np.inf))
    assert (plots.error_ratio(one_ulp, small, plots._bit_for_bit(small)) > 1).all()
