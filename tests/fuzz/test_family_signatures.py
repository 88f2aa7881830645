"""Each built-in family's kernel signature (``fuzz.families.signature``): what ``python -m fuzz
list --families`` and the README's table show is what a plugin's kernel receives and returns."""

import re
from pathlib import Path

import pytest

import fuzz
from fuzz.arrays import FLOAT_DTYPES
from fuzz.cli import main
from fuzz.engine import hunt
from fuzz.families import SIGNATURE_COLUMNS, family_names, get_family, signature
from fuzz.profiles import get_profile
from fuzz.target import unregister

README = Path(__file__).resolve().parents[2] / "README.md"


def _names(items):
    """The argument names of a signature column's items (``name [..] dtype``, ``name: type``,
    ``name (feature): type``)."""
    return [re.split(r"[ :]", item, maxsplit=1)[0] for item in items]


def _axes(text):
    """The axis letters of a type's shape: ``[B=1, Hq, Tq, D] dtype`` -> ``BHTD``."""
    shape = re.match(r"\[([^\]]*)\]", text)
    assert shape, text
    return "".join(a.strip()[0] for a in shape.group(1).split(","))


def test_list_families_shows_every_family(capsys):
    assert main(["list", "--families"]) == 0
    out = capsys.readouterr().out
    for name in family_names():
        assert name in out
    assert "block_q: int" in out and "cu_seqlens_q: [N + 1] int32" in out
    assert "targets" not in out  # the families alone


@pytest.mark.parametrize("name", family_names())
def test_every_argument_and_output_has_a_type_with_the_layouts_axes(name):
    fam = get_family(name)
    sig = signature(fam)
    keywords = [kw for names in fam.keywords.values() for kw in names]
    for arg in (*fam.tensors, *keywords, *fam.outputs):
        assert arg in fam.types, f"{name}: {arg} has no type"
    for arg, layout in fam.layouts.items():
        if arg in fam.types:
            assert _axes(fam.types[arg]) == layout, (name, arg, fam.types[arg], layout)
    assert _names(sig["positional inputs"]) == list(fam.tensors)
    assert _names(sig["outputs (a tuple in this order, or a dict)"]) == list(fam.outputs)
    listed = [
        *sig["keywords always passed"],
        *sig["keywords passed with a feature the kernel supports"],
        *sig["keywords passed with a tile its function takes"],
    ]
    assert sorted(_names(listed)) == sorted(keywords)


def test_a_softmax_kernel_is_called_as_the_table_says():
    """A plugin kernel that records its calls: its positional inputs, keywords and their types
    are the table's, with every feature and tile declared."""
    sig = signature(get_family("softmax"))
    calls = []

    def kernel(x, *, mask, bias, scale, block_m, block_n):
        import torch

        calls.append((x, {"mask": mask, "bias": bias, "scale": scale, "bm": block_m}))
        s = x.double() * scale + (0 if bias is None else bias.double())
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        return torch.softmax(s, dim=-1).nan_to_num(0.0).to(x.dtype)

    t = fuzz.fuzz_kernel(
        "signature_recording_softmax",
        family="softmax",
        kernel=kernel,
        capabilities=fuzz.Capabilities(tiles={"block_m": (4,), "block_n": (16,)}),
    )
    try:
        result = hunt(t, "triton-interpret", get_profile("ci"), database=None, max_examples=40)
    finally:
        unregister(t.name)
    assert result.error is None, result.error
    assert calls
    assert _names(sig["positional inputs"]) == ["x"]
    assert sorted(_names(sig["keywords passed with a feature the kernel supports"])) == [
        "bias",
        "mask",
        "scale",
    ]
    assert _names(sig["keywords passed with a tile its function takes"]) == ["block_m", "block_n"]
    assert sig["keywords always passed"] == ()
    for x, kw in calls:
        assert x.ndim == 2 and str(x.dtype).removeprefix("torch.") in FLOAT_DTYPES
        assert isinstance(kw["scale"], float) and kw["bm"] == 4
        if kw["mask"] is not None:
            assert str(kw["mask"].dtype) == "torch.bool" and kw["mask"].shape == x.shape
        if kw["bias"] is not None:
            assert kw["bias"].dtype == x.dtype and kw["bias"].shape == x.shape
    assert any(kw["mask"] is not None for _, kw in calls)
    assert any(kw["bias"] is not None for _, kw in calls)
    assert any(kw["mask"] is None for _, kw in calls)


def test_the_readme_table_is_the_listing():
    rows = [
        "| " + " | ".join("; ".join(sig[c]) or "-" for c in SIGNATURE_COLUMNS) + " |"
        for sig in (signature(get_family(n)) for n in family_names())
    ]
    header = "| " + " | ".join(SIGNATURE_COLUMNS) + " |"
    readme = README.read_text()
    table = "\n".join([header, "|" + " --- |" * len(SIGNATURE_COLUMNS), *rows])
    assert table in readme, "README.md's family table differs from:\n" + table
