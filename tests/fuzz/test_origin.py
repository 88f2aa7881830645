"""NaN/Inf origin: the kernel line (and expression) of the first overflow, invalid operation or
division by zero, in Triton's interpreter (NumPy traps) and Pallas interpret mode (primitive
checks); mutants are traced to their mutated line."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from fuzz import origin, reproducer
from fuzz.backends import get_backend
from fuzz.case import Case
from fuzz.properties import check_case
from fuzz.target import get

PARAMS = {"dtype": "float32", "scale": None, "block_m": 8, "block_n": 16}
OVERFLOW = Case({"x": np.array([[100.0, 1.0]], np.float32)}, PARAMS)
EMPTY_ROW = Case({"x": np.array([[1.0]], np.float32), "mask": np.array([[False]])}, PARAMS)


@pytest.mark.parametrize(
    "backend, expression, source",
    [
        ("triton-interpret", "tl.exp(s)", "l_i = l_i + tl.sum(tl.exp(s), 1)"),
        ("pallas-interpret", "jnp.exp(s)", "l_i = l_i + jnp.exp(s).sum(axis=1)"),
    ],
)
def test_no_rowmax_overflow_is_traced_to_the_mutated_exp(backend, expression, source):
    o = origin.trace(get("softmax_mutant_no_rowmax"), backend, OVERFLOW)
    assert o["found"] and o["kind"] == "overflow", o
    assert o["expression"] == expression and o["source"].strip() == source
    language = get_backend(backend).impl
    assert o["file"] == f"<mutant no_rowmax of kernels.softmax.{language}>"


@pytest.mark.parametrize("backend", ["triton-interpret", "pallas-interpret"])
def test_a_row_without_keys_divides_by_zero_in_the_mutant(backend):
    o = origin.trace(get("softmax_mutant_masked_row_nan"), backend, EMPTY_ROW)
    assert o["found"] and o["kind"] == "division by zero", o
    assert o["expression"] == "1.0 / l_i" and o["source"].strip() == "inv_l = 1.0 / l_i"


@pytest.mark.parametrize("backend", ["triton-interpret", "pallas-interpret"])
def test_the_real_kernel_has_no_origin_on_the_same_inputs(backend):
    for case in (OVERFLOW, EMPTY_ROW):
        o = origin.trace(get("softmax"), backend, case)
        assert not o["found"], o


def test_a_birth_in_a_discarded_where_branch_is_not_the_origin():
    """The attention Pallas kernel evaluates its soft-cap polynomial with the cap off (both sides
    of a ``jnp.where``), which overflows at a score of -1e5; the Inf in ``lse`` is born where the
    mutant stores it through fp16. The first-birth rule named ``_tanh`` (a campaign's reproducer)."""
    params = {
        "dtype": "float32",
        "causal": False,
        "window": None,
        "scale": None,
        "softcap": None,
        "alibi": None,
        "block_q": 16,
        "block_k": 16,
    }
    one = lambda x: np.array([[[[x]]]], np.float32)  # noqa: E731
    case = Case({"q": one(314.95633), "k": one(-317.35681), "v": one(-0.1389835)}, params)
    o = origin.trace(get("attention_mutant_lse_fp16"), "pallas-interpret", case)
    assert o["found"] and o["kind"] == "overflow" and o["function"] != "_tanh", o
    assert o["expression"] == "lse.astype(jnp.float16)", o
    real = origin.trace(get("attention"), "pallas-interpret", case)
    assert not real["found"] and "(the first, discarded: overflow in `z * poly`" in real["note"]
    # a replay that raises after its births has no outputs to follow them to: the first birth
    entry = get("attention").kernels["pallas"]

    def raising(*args, **kwargs):
        entry(*args, **kwargs)
        raise RuntimeError("after the kernel")

    broken = dataclasses.replace(get("attention"), kernels={"pallas": raising})
    o = origin.trace(broken, "pallas-interpret", case)
    assert o["found"] and o["function"] == "_tanh", o
    assert (
        o["note"] == "the first birth; the interpreted replay raised RuntimeError: after the kernel"
    )


def test_replay_prints_the_origin_and_the_hazards(tmp_path, capsys):
    target = get("softmax_mutant_no_rowmax")
    outcome = check_case(target, get_backend("triton-interpret"), OVERFLOW)
    assert outcome.finding is not None and outcome.finding.cls == "nan"
    outcome.finding.details["origin"] = origin.trace(target, "triton-interpret", OVERFLOW)
    path = reproducer.write(
        tmp_path,
        target=target,
        backend="triton-interpret",
        case=OVERFLOW,
        params=outcome.params,
        finding=outcome.finding,
        ref_device="cpu",
        differential=False,
    )
    text = path.read_text()
    assert "origin: overflow in `tl.exp(s)` at <mutant no_rowmax of kernels.softmax.triton>" in text
    issue = reproducer.issue_path(path).read_text()  # the issue text beside it names it too
    assert "## Where the NaN is born\n\n```\norigin: overflow in `tl.exp(s)` at <mutant" in issue
    meta, data = reproducer.load(path)
    assert reproducer.report_replay(meta, data) == 1
    out = capsys.readouterr().out
    assert "origin: overflow in `tl.exp(s)` at <mutant no_rowmax of kernels.softmax.triton>" in out
    assert "hazard: exp-overflow: logit 100 > 88.72" in out
    assert reproducer.report_replay(meta, data, backend="pallas-interpret") == 1
    out = capsys.readouterr().out
    assert "origin: overflow in `jnp.exp(s)` at <mutant no_rowmax of kernels.softmax.pallas>" in out


def test_describe_covers_every_outcome():
    assert origin.describe(None) == []
    assert origin.describe({"error": "boom"}) == ["origin: not traced (boom)"]
    assert origin.describe({"found": False, "note": "n"}) == ["origin: n"]
    assert origin.trace(get("softmax"), "triton", OVERFLOW)["found"] in (True, False)


def test_a_nan_born_in_a_derived_launch_is_traced_there():
    """no_rowmax on logits near 80: the example itself passes the oracle, but adding 1000 to x
    (the shift-invariance property) overflows exp; the origin names that launch and its hazard."""
    target = get("softmax_mutant_no_rowmax")
    case = Case({"x": np.array([[80.0, 80.5]], np.float32)}, PARAMS)
    o = origin.trace_finding(target, "triton-interpret", case, {"shift-invariance": 1000.0})
    assert o["found"] and o["expression"] == "tl.exp(s)"
    assert "derived from the example (x changed)" in o["launch"]
    assert any(h.startswith("exp-overflow: logit 1080") for h in o["launch_hazards"])


def test_an_overflowing_row_sum_points_at_the_sum_in_the_kernel():
    case = Case({"x": np.array([[88.0, 88.5]], np.float32)}, PARAMS)  # each exp fits, the sum not
    o = origin.trace(get("softmax_mutant_no_rowmax"), "triton-interpret", case)
    assert o["found"] and o["kind"] == "overflow"
    assert o["file"] == "<mutant no_rowmax of kernels.softmax.triton>"
    assert o["expression"] == "tl.sum(tl.exp(s), 1)"


_MIXED_DEVICES = r"""
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, jax.numpy as jnp
from fuzz import origin
cpu0, cpu1 = jax.devices("cpu")
# A primitive whose operands are committed to two devices fails: on a GPU host the interpreted
# Pallas replay met CPU inputs and arrays committed to the GPU, JAX's default device.
a, b = jax.device_put(jnp.ones(3), cpu0), jax.device_put(jnp.full(3, 2.0), cpu1)
closed = jax.make_jaxpr(lambda x, y: x * y)(a, b)
origin._FLOWS.append(origin._Flow())
try:
    origin._eval(closed.jaxpr, list(closed.consts), [a, b])
except ValueError as e:
    assert "incompatible devices" in str(e), e
else:
    raise SystemExit("expected the mixed-device failure outside a replay")
origin._TRACE_DEVICE.append(cpu0)
(out,), _ = origin._eval(closed.jaxpr, list(closed.consts), [a, b])
assert out.devices() == {cpu0} and out.tolist() == [2.0, 2.0, 2.0], out
print("ok")
"""


def test_an_interpreted_pallas_replay_keeps_every_array_on_its_device():
    """The NaN-origin replay of a pallas-interpret finding on a GPU host failed with "Received
    incompatible devices for jitted computation": inputs on the CPU device, arrays the replay made
    on the default device (the GPU). Two CPU devices stand in for them here."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _MIXED_DEVICES], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_finding_traced_inside_the_hypothesis_test_that_found_it_is_traced():
    """A campaign traces a NaN as it streams the finding, inside the Hypothesis test whose
    example found it; that example's oracle check had reported ``y: error / tolerance`` to
    ``hypothesis.target``, and the tracer's own check of it reported it again, which Hypothesis
    refuses ("origin: not traced (InvalidArgument: Calling target(..., label='y: error /
    tolerance') would overwrite ...)"), while the same reproducer replayed alone traced it."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    target = get("softmax_mutant_no_rowmax")
    assert target.search.targeting
    case = Case({"x": np.array([[80.0, 80.5]], np.float32)}, PARAMS)  # y within the oracle's bound
    traced = []

    @settings(max_examples=1, database=None, derandomize=True)
    @given(st.just(case))
    def search(c):
        outcome = check_case(
            target, get_backend("triton-interpret"), c, params={"shift-invariance": 1000.0}
        )
        assert outcome.finding is not None and outcome.finding.prop == "shift-invariance"
        found = SimpleNamespace(finding=outcome.finding, case=c, params=outcome.params)
        traced.append(origin.of_finding(found, target, "triton-interpret"))

    search()
    assert traced[0].get("found") and traced[0]["expression"] == "tl.exp(s)", traced[0]


def test_a_compiled_backends_costly_case_is_not_traced_in_a_slice(fake_plugin, monkeypatch):
    """A slice traces a compiled backend's NaN in the interpreter only where the case costs no
    more than the interpreter is given (``Profile.interpreter_max_cost``): an unshrunk GPU case
    stepped through the interpreter outlasted the time the slice had past its hard limit, and
    the worker was killed with the slice's findings. Its reproducer's replay still traces it;
    an interpreter's own finding is traced whatever it costs (it ran that case already)."""
    target = get("fake_exact_twin_compiles")
    traced: list[str] = []
    monkeypatch.setattr(
        origin, "trace_finding", lambda t, b, c, p=None: traced.append(b) or {"found": False}
    )

    def found(n: int) -> SimpleNamespace:
        case = Case({"x": np.ones((n, 1024), np.float32)}, {"dtype": "float32"}, {"seed": 0})
        return SimpleNamespace(finding=SimpleNamespace(details={}), case=case, params={})

    large = found(40)  # cost 40 > 16
    o = origin.of_finding(large, target, "fake-compiled", max_cost=16.0)
    assert o is not None and not o["found"] and "not traced here" in o["note"], o
    assert traced == [] and "origin" not in large.finding.details
    origin.of_finding(found(8), target, "fake-compiled", max_cost=16.0)
    origin.of_finding(found(40), target, "fake", max_cost=16.0)  # the interpreter's own
    origin.of_finding(found(40), target, "fake-compiled")  # no bound given: traced
    assert traced == ["fake-compiled", "fake", "fake-compiled"]
    # A Triton kernel's case, traced in one interpreted check: up to TRACE_COST_FACTOR times
    # the bound (four GPU rows of one wild load, costs 25 to 192, went untraced at 1x).
    traced.clear()
    limit = 16.0 * origin.TRACE_COST_FACTOR
    origin.of_finding(found(40), target, "triton", max_cost=16.0)
    o = origin.of_finding(found(int(limit) + 8), target, "triton", max_cost=16.0)
    assert traced == ["triton"] and o is not None and "not traced here" in o["note"], o


def test_a_trace_past_its_seconds_is_cut_and_not_kept(monkeypatch):
    """A Pallas trace evaluates the interpreted kernel one primitive at a time; on a GPU host a
    case of 196,608 elements kept a worker in one past its slice's hard limit, and the campaign
    killed it with what the slice was shrinking. A trace stops at its time (``seconds``), says
    so and keeps nothing (a smaller example may be traced later); in time, it traces."""
    target = get("softmax_mutant_no_rowmax")
    outcome = check_case(target, get_backend("pallas-interpret"), OVERFLOW)
    assert outcome.finding is not None and outcome.finding.cls in origin.BIRTH_CLASSES

    def found() -> SimpleNamespace:
        return SimpleNamespace(
            finding=dataclasses.replace(outcome.finding, details={}),
            case=OVERFLOW,
            params=outcome.params,
        )

    evaluated = []
    real = origin._eval_eqn

    def slow(*args):  # the third primitive takes the trace past its time (a clock, not a wait)
        evaluated.append(1)
        if len(evaluated) == 3 and expire:
            origin._DEADLINES[-1] = float("-inf")
        return real(*args)

    monkeypatch.setattr(origin, "_eval_eqn", slow)
    expire = True
    late = found()
    o = origin.of_finding(late, target, "pallas-interpret", seconds=600.0)
    assert o == {"found": False, "note": "not traced: the trace ran past its 600 s"}, o
    assert "origin" not in late.finding.details and len(evaluated) == 3
    expire = False
    in_time = found()
    o = origin.of_finding(in_time, target, "pallas-interpret")
    assert o["found"] and o["expression"] == "jnp.exp(s)", o
    assert len(evaluated) > 6 and in_time.finding.details["origin"] is o


def test_a_triton_trace_stops_at_its_time_inside_the_interpreter(monkeypatch):
    """Triton's interpreter checks a trace's time at every program, load and store: on an H200
    a trace of a large case ran on in the interpreter past its slice's hard limit (a NaN birth,
    a store and a load past a buffer are traced there alike), and the campaign killed the
    worker with what its slice was shrinking. Past its time each stops inside the launch, not
    as the kernel's crash or an interpreter error; in time, each traces."""
    target = get("softmax_mutant_no_rowmax")
    case = Case({"x": np.full((4, 64), 100.0, np.float32)}, PARAMS)
    tracers = {
        "birth": lambda: origin.trace(target, "triton-interpret", case),
        "store": lambda: origin.trace_stores(target, "triton-interpret", case),
        "load": lambda: origin.trace_loads(target, "triton-interpret", case),
    }
    import triton.runtime.interpreter as ti

    steps = []
    real = ti.interpreter_builder.create_masked_load

    def counted(*args):
        steps.append(1)
        return real(*args)

    for name, run in tracers.items():
        monkeypatch.setattr(ti.interpreter_builder, "create_masked_load", counted)
        steps.clear()
        origin._DEADLINES.append(float("-inf"))  # already past: the first program stops
        try:
            with pytest.raises(origin.TraceCut):
                run()
        finally:
            origin._DEADLINES.pop()
        assert not steps, name  # (stopped before the first load)
        monkeypatch.undo()
        assert ti.interpreter_builder.create_masked_load == real, name  # (the clock is gone)
        o = run()
        assert o["found"] == (name == "birth"), (name, o)


def test_a_row_of_wrong_values_names_its_origin_only_where_a_load_past_a_buffer_was_found():
    """Rows of wrong values are traced for a load past a buffer (``origin.trace_loads``); where
    none was found the report says nothing of it (one cause among many), while a NaN row says
    why its birth was not found."""
    from fuzz.campaign.report_md import origin_text

    none = {
        "found": False,
        "note": "no load outside its launch's buffers in the interpreted replay",
    }
    load = {
        "found": True, "kind": "load past a buffer", "interpreter": "Triton interpreter",
        "file": "k.py", "line": 3, "function": "f", "source": "x = tl.load(p)",
        "expression": None, "detail": "1 of 8 element(s) of one load outside every buffer",
    }  # fmt: skip
    assert origin_text({"class": "accuracy", "details": {"origin": none}}) == []
    assert origin_text({"class": "nondeterminism", "details": {"origin": load}})[0].startswith(
        "origin: load past a buffer at k.py:3"
    )
    assert origin_text({"class": "nan", "details": {"origin": none}}) == [f"origin: {none['note']}"]


def test_a_call_of_the_same_inputs_under_another_chunk_size_is_traced_on_its_own():
    """``finite-every-chunk`` launches the same inputs under another chunk size: another kernel
    call, traced as such. A planted GLA kernel whose prefix sum restarts every 16 tokens is
    finite under chunks of 16 and overflows under 32: its NaN/Inf rows through that property
    had no birth site (the chunk-32 call was taken for the case's own and not traced), and
    stayed apart from its rows through the oracle, born at the same ``exp``."""
    from pathlib import Path

    from fuzz.target import load_plugin

    load_plugin(str(Path(__file__).parent.parent / "plugins" / "planted5_pallas.py"))
    rng = np.random.default_rng(0)
    qkv = {n: rng.standard_normal((1, 17, 1, 16)).astype(np.float32) for n in "qkv"}
    case = Case(
        {**qkv, "g_gamma": np.array([-5.92], np.float32)},
        {"dtype": "float32", "chunk_size": 16, "scale": None, "output_final_state": False},
    )
    target = get("planted5_gla_cumsum_per_tile_pallas")
    params = {"finite-every-chunk": 0}
    checked = check_case(target, get_backend("pallas-interpret"), case, params=params)
    assert checked.finding is not None and checked.finding.prop == "finite-every-chunk"
    o = origin.trace_finding(target, "pallas-interpret", case, params)
    assert o.get("found"), o
    assert "jnp.exp(jnp.where(causal" in str(o.get("expression") or o.get("source")), o


def test_an_overflow_of_an_exponentials_value_in_a_product_is_born_at_that_exponential(tmp_path):
    """A kernel rescaling by the tile's max instead of the running one came as three GPU rows
    (round 12), each an overflow born at another line of one rescale: the exponential itself,
    and the products its huge value overflowed. Their sites are that exponential's; an overflow
    of an expression reading no exponential's value, or two, keeps its own."""
    from fuzz.origin import _exp_root, describe
    from fuzz.signatures import site

    src = tmp_path / "k.py"
    src.write_text(
        "def rescale(m, shift, s, ell, acc):\n"
        "    alpha = tl.exp(m - shift)\n"
        "    p = tl.exp(s - shift)\n"
        "    ell = ell * alpha + tl.sum(p, 1)\n"
        "    acc = acc * alpha[:, None]\n"
        "    both = alpha * p\n"
        "    return ell * 2.0\n"
    )

    def born(line, expression):
        rec = {"found": True, "file": str(src), "line": line, "expression": expression}
        return {**rec, **_exp_root("overflow", rec)}

    at_exp = born(2, "tl.exp(m - shift)")
    assert "root" not in at_exp
    for line, expression in ((4, "ell * alpha"), (5, "acc * alpha[:, None]")):
        assert site(born(line, expression)) == site(at_exp), (line, expression)
    assert site(born(4, "tl.sum(p, 1)")) == f"{src}:3: tl.exp(s - shift)"
    said = describe(
        {
            **born(5, "acc * alpha[:, None]"),
            "kind": "overflow",
            "function": "f",
            "source": "",
            "interpreter": "i",
        }
    )
    assert any("of the value of `tl.exp(m - shift)` at line 2" in line for line in said), said
    assert "root" not in born(6, "alpha * p")  # (two exponentials: neither is the cause)
    assert "root" not in born(7, "ell * 2.0")  # (ell is a sum, not an exponential)
    assert (
        _exp_root("invalid operation", {"file": str(src), "line": 4, "expression": "ell * alpha"})
        == {}
    )


def _attention(tq, tk, window=None):
    rng = np.random.default_rng(0)
    inputs = {n: rng.standard_normal((1, 1, t, 1)).astype(np.float32) for n, t in
              (("q", tq), ("k", tk), ("v", tk))}  # fmt: skip
    params = {
        "dtype": "float32", "causal": False, "window": window, "scale": None, "softcap": None,
        "alibi": None, "block_q": 16, "block_k": 16,
    }  # fmt: skip
    return Case(inputs, params)


def test_a_masked_poison_failure_is_traced_to_the_load_that_lacks_its_mask():
    """Round 13's attention kernel loads its value tile without the key mask: a key outside a
    window or padded out, poisoned, reaches ``o`` through that load (a masked key's zero weight
    times NaN), and a tile past the keys reads outside the buffer there. Each row's site is that
    load (one bug, ``fuzz.signatures.site``). Put back to its clean values, only that load
    gives the clean outputs; the keys, poisoned alone, move nothing (the scores' masks hold).
    Where the one input poisoned moves the outputs, or every input does, where the poison
    enters names no fault: no site. The bug-free control's poison moves nothing."""
    import os

    from fuzz.signatures import site
    from fuzz.target import load_plugin

    plugins = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugins")
    load_plugin(os.path.join(plugins, "planted13.py"))
    target = get("planted13_attention_values_loaded_without_key_mask_triton")
    nan = {"masked-poison": "nan"}
    windowed = _attention(1, 16, window=[0, 0])  # (a whole tile: nothing read past it)
    f = check_case(target, get_backend("triton-interpret"), windowed, params=nan).finding
    assert f is not None and (f.cls, f.prop) == ("masking", "masked-poison"), f
    got = origin.trace_poison_loads(target, "triton-interpret", windowed, nan)
    assert got["found"] and got["kind"] == "load of masked-out elements", got
    assert "tl.load(v_ptr" in got["source"] and "only v moves" in got["detail"]
    past = origin.trace_loads(target, "triton-interpret", _attention(1, 1), {})
    assert past["found"] and site(past) == site(got)  # (the out-of-bounds read's load)
    found = SimpleNamespace(finding=f, case=windowed, params=nan)
    assert site(origin.of_finding(found, target, "triton-interpret")) == site(got)
    control = get("control13_attention_triton")
    said = origin.trace_poison_loads(control, "triton-interpret", windowed, nan)
    assert not said["found"] and "0 inputs of 2" in said["note"], said
    only_v = dataclasses.replace(
        target, poison=lambda c, k: c.replace(inputs={"v": target.poison(c, k).inputs["v"]})
    )
    said = origin.trace_poison_loads(only_v, "triton-interpret", windowed, nan)
    assert not said["found"] and "the one input poisoned" in said["note"], said

    def seen_keys_too(c, k):  # (a key every query sees, poisoned as well: both inputs move)
        p = target.poison(c, k)
        keys = p.inputs["k"].copy()
        keys[..., -1, :] = np.nan
        return p.replace(inputs={"k": keys})

    both = dataclasses.replace(target, poison=seen_keys_too)
    said = origin.trace_poison_loads(both, "triton-interpret", windowed, nan)
    assert not said["found"] and "2 inputs of 2" in said["note"], said
