"""The issue text beside each reproducer (``NAME.md``): what fails, the exact call with its inputs
as literals, hazards, where a NaN was born, versions and device; for every family, and for a
plugin's kernel in its own layout."""

import re

import ml_dtypes
import numpy as np
import pytest

from fuzz import reproducer
from fuzz.case import Case
from fuzz.failures import Finding, Unsupported
from fuzz.families import family_names, get_family
from fuzz.standalone import INLINE_LIMIT
from fuzz.target import draw_cases, get


def _write(tmp_path, target, case, finding, backend="triton-interpret", params=None):
    path = reproducer.write(
        tmp_path,
        target=target,
        backend=backend,
        case=case,
        params=params or {},
        finding=finding,
        ref_device="cpu",
        differential=False,
    )
    issue = reproducer.issue_path(path)
    assert issue.is_file() and issue.name == path.stem + ".md"
    return path, issue.read_text()


def _code(text):
    """The Python block of the issue text's call section: (the inputs' lines, the call's)."""
    block = text.split("## The call", 1)[1].split("```python\n", 1)[1].split("\n```", 1)[0]
    inputs, call = block.rsplit("\n\n", 1)
    return inputs, call


def _run_inputs(inputs):
    namespace = {}
    exec(inputs, namespace)
    return namespace


def _same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("family", family_names())
def test_the_issue_text_of_each_family_reads_without_running_anything(family, tmp_path):
    target, fam = get(family), get_family(family)
    case = draw_cases(target, "small", 3, 1)[-1]
    out = fam.outputs[0]
    finding = Finding(
        "accuracy",
        "oracle",
        f"{out}[0, 0] = 1.5, oracle 1.25",
        output=out,
        index=(0, 0),
        kernel_value=1.5,
        oracle_value=1.25,
        error=0.25,
        tolerance=1e-3,
        hazards=["partial-tile: a hazard that holds"],
    )
    path, text = _write(tmp_path, target, case, finding)
    assert text.startswith(f"# {family} on triton-interpret: accuracy (oracle)\n")
    assert "> " + finding.message in text
    assert "| worst element | `" + out + "[0, 0]` |" in text
    assert "| expected (fp64 oracle) | `1.25` |" in text and "| got (kernel) | `1.5` |" in text
    assert "| tolerance there | `0.001` |" in text
    assert "- partial-tile: a hazard that holds" in text
    assert "- device: " in text and "numpy " + np.__version__ in text
    assert f"python {path.name} --show" in text
    # The inputs as literals that give back the recorded arrays, bit for bit.
    inputs, call = _code(text)
    namespace = _run_inputs(inputs)
    for name, a in case.inputs.items():
        if a.size <= INLINE_LIMIT:
            assert _same_bits(namespace[name], a), name
        else:
            assert f"# {name}: " in inputs and name not in namespace
    # The call: the family's tensors in order, then every keyword its kernels take.
    lines = call.splitlines()
    assert lines[0] == f"{', '.join(fam.outputs)} = {family}(" and lines[-1] == ")"
    positional = [ln.strip().split(",")[0] for ln in lines[1 : 1 + len(fam.tensors)]]
    assert positional == [t if t in case.inputs else "None" for t in fam.tensors]
    keywords = [ln.strip().split("=")[0] for ln in lines[1 + len(fam.tensors) : -1]]
    assert keywords == list(fam.passed(frozenset(fam.features), frozenset(fam.tiles)))


def test_a_nan_names_where_it_was_born_and_a_crash_what_was_raised(tmp_path):
    target = get("softmax_mutant_no_rowmax")
    case = Case(
        {"x": np.array([[100.0, 1.0]], np.float32)},
        {"dtype": "float32", "scale": None, "block_m": 8, "block_n": 16},
    )
    origin = {
        "found": True,
        "kind": "overflow",
        "file": "<mutant no_rowmax of kernels.softmax.triton>",
        "line": 40,
        "function": "_kernel",
        "source": "l_i = l_i + tl.sum(tl.exp(s), 1)",
        "expression": "tl.exp(s)",
        "interpreter": "Triton interpreter, NumPy traps",
    }
    nan = Finding(
        "nan", "oracle", "y[0, 0] = nan", output="y", index=(0, 0), details={"origin": origin}
    )
    _, text = _write(tmp_path, target, case, nan, params={"shift-invariance": 64.0})
    assert "A planted bug: `softmax_mutant_no_rowmax` is a mutant of `softmax`" in text
    assert "| drawn for the properties | `shift-invariance` = 64.0 |" in text
    born = text.split("## Where the NaN is born\n\n```\n", 1)[1].split("\n```", 1)[0]
    assert born.startswith("origin: overflow in `tl.exp(s)` at <mutant no_rowmax of kernels")
    assert "l_i = l_i + tl.sum(tl.exp(s), 1)" in born
    crash = Finding(
        "crash",
        "crash",
        "the kernel raised ValueError",
        details={"exception": "ValueError", "text": "block_n=16 | rows: bad"},
    )
    _, text = _write(tmp_path, target, case, crash)
    assert "The kernel raised `ValueError`:\n\n```\nblock_n=16 | rows: bad\n```" in text
    assert "## Where the" not in text
    # Wrong values traced to their access: each kind its title; none where none was found.
    for kind, title in (
        ("load past a buffer", "Where it loads past the end"),
        ("store past a buffer", "Where it stores past the end"),
        ("store racing another program's", "Where its programs store over each other"),
    ):
        traced = {**origin, "kind": kind, "expression": None, "detail": "d"}
        wrong = Finding("masking", "oracle", "y[0, 0]", output="y", details={"origin": traced})
        _, text = _write(tmp_path, target, case, wrong)
        assert f"## {title}\n" in text, kind
    untraced = {"found": False, "note": "no load or store outside its launch's buffers"}
    wrong = Finding("accuracy", "oracle", "y[0, 0]", output="y", details={"origin": untraced})
    _, text = _write(tmp_path, target, case, wrong)
    assert "## Where" not in text


def test_large_inputs_are_summarized_and_bfloat16_written_exactly(tmp_path):
    target = get("softmax")
    big = np.linspace(-3, 3, INLINE_LIMIT + 1, dtype=np.float32).reshape(1, -1)
    case = Case({"x": big}, {"dtype": "float32", "scale": None, "block_m": 8, "block_n": 16}, {})
    _, text = _write(tmp_path, target, case, Finding("accuracy", "oracle", "off", output="y"))
    inputs, _ = _code(text)
    assert (
        f"# x: float32 [1, {INLINE_LIMIT + 1}], min -3, max 3: more than 4,096 elements" in inputs
    )
    assert "more than 4,096 elements each, not written out here" in text
    # bfloat16 (no NumPy dtype of its own) as float32 literals cast back, subnormals and
    # specials included; float16 values that a decimal read as a float64 first would round
    # differently are written in float64's exact form.
    x = np.array([[1.0, -np.inf, np.nan, 3e-39, -0.0, 65280.0]], ml_dtypes.bfloat16)
    case = Case({"x": x}, {"dtype": "bfloat16", "scale": 0.5, "block_m": 8, "block_n": 16}, {})
    _, text = _write(tmp_path, target, case, Finding("accuracy", "oracle", "off", output="y"))
    inputs, call = _code(text)
    assert ".astype(ml_dtypes.bfloat16)  # bfloat16 [1, 6]" in inputs
    assert _same_bits(_run_inputs(inputs)["x"], x)
    assert "    scale=0.5," in call.splitlines()
    h = np.array([0.1, 2049.0, 6.1e-05, 5.96e-08], np.float16)
    case = Case(
        {"x": h.reshape(1, -1)},
        {"dtype": "float16", "scale": None, "block_m": 8, "block_n": 16},
        {},
    )
    _, text = _write(tmp_path, target, case, Finding("accuracy", "oracle", "off", output="y"))
    assert _same_bits(_run_inputs(_code(text)[0])["x"], h.reshape(1, -1))


CAPTURE = """
import fuzz

CALLS = []


def my_attention(q, k, v, *, scale, causal, key_lengths):
    CALLS.append(((q, k, v), {"scale": scale, "causal": causal, "key_lengths": key_lengths}))
    raise fuzz.Unsupported("the call is captured, not run")


fuzz.fuzz_kernel(
    "issue_capture",
    family="attention",
    kernel=my_attention,
    capabilities=fuzz.Capabilities(
        dtypes=("float32",), features={"causal", "key_padding", "scale", "gqa"}
    ),
    layout=fuzz.Layout("BTHD"),
)
"""


def test_a_plugins_call_is_the_one_its_kernel_receives(tmp_path):
    """The call in a plugin kernel's issue text, evaluated, passes the kernel what the harness
    passes it: the tensors in its layout, the keywords its declarations pass, the same values."""
    import sys

    from fuzz.backends import get_backend
    from fuzz.properties import check_case
    from fuzz.target import load_plugin

    plugin = tmp_path / "capture_kernels.py"
    plugin.write_text(CAPTURE)
    load_plugin(str(plugin))
    module = next(m for n, m in sys.modules.items() if n.startswith("fuzz_plugin_capture_kernels"))
    target = get("issue_capture")
    case = next(  # (one whose tensors the text writes out: at most 4,096 elements each)
        c
        for c in draw_cases(target, "small", 40, 3)
        if "key_lengths" in c.inputs and max(a.size for a in c.inputs.values()) <= 4096
    )
    with pytest.raises(Unsupported):
        check_case(target, get_backend("triton-interpret"), case)
    (got_args, got_kw) = module.CALLS[-1]
    _, text = _write(tmp_path, target, case, Finding("accuracy", "oracle", "off", output="o"))
    assert "`my_attention()` of plugin `capture_kernels.py`" in text
    inputs, call = _code(text)
    assert call.splitlines()[0] == "outputs = my_attention("
    assert re.search(r"q\.transpose\(0, 2, 1, 3\),  # float32 \[\d+, \d+, \d+, \d+\] BTHD", call)
    seen = []
    namespace = _run_inputs(inputs)
    namespace["my_attention"] = lambda *args, **kw: seen.append((args, kw))
    exec(call, namespace)
    (args, kw) = seen[0]
    for mine, theirs in zip(args, got_args, strict=True):
        assert np.array_equal(mine, theirs.numpy()), (mine.shape, tuple(theirs.shape))
    assert kw.keys() == got_kw.keys() and kw["scale"] == got_kw["scale"]
    assert kw["causal"] == got_kw["causal"]
    assert np.array_equal(kw["key_lengths"], got_kw["key_lengths"].numpy())


def test_an_issue_text_that_cannot_be_made_never_costs_the_reproducer(tmp_path, monkeypatch):
    from fuzz import issue

    def broken(*args, **kwargs):
        raise RuntimeError("a family without values (injected fault)")

    monkeypatch.setattr(issue, "text", broken)
    case = Case(
        {"x": np.ones((1, 2), np.float32)},
        {"dtype": "float32", "scale": None, "block_m": 8, "block_n": 16},
    )
    path, text = _write(tmp_path, get("softmax"), case, Finding("accuracy", "oracle", "off"))
    assert path.is_file() and reproducer.load(path)[0]["target"] == "softmax"
    assert text.startswith("# softmax on triton-interpret: accuracy (oracle)\n\n> off\n")
    assert "the issue text could not be written: RuntimeError: a family without values" in text
