"""A kernel's bug on two backends of one implementation (compiled and interpreted) is one row of
the report, whatever minimal example each backend's pair shrank it to: one key and triggers
that nest (``fuzz.signatures.same_bug``), through any way each was seen. Another language's
kernel of the same target is another implementation: its bugs stay its own rows."""

from __future__ import annotations

from fuzz.campaign.report import SEEN_HOW, _dedupe


def _rec(sig, backend, triggers, size, key="accuracy|oracle|y|-", **kw):
    cls, prop, out, _ = key.split("|")
    return {
        "target": "k",
        "backend": backend,
        "signature": sig,
        "bug_key": key,
        "class": cls,
        "property": prop,
        "output": out,
        "triggers": list(triggers),
        "case_size": size,
        "shrunk": True,
        "reproducer": f"{sig}.py",
        "message": "m",
        **kw,
    }


def test_one_bug_on_the_compiled_and_the_interpreted_backend_is_one_row():
    gpu = _rec("a", "pallas-gpu", ["feature scale"], 48)
    interp = _rec("b", "pallas-interpret", ["feature scale", "partial-tile"], 9)
    again = _rec("a", "pallas-gpu", ["feature scale"], 48)  # the same bug, another record
    out = _dedupe([gpu, interp, again])
    assert len(out) == 1, out
    (f,) = out.values()
    assert f["signature"] == "b" and f["case_size"] == 9  # the smaller stands for the bug
    assert f["backends"] == ["pallas-gpu", "pallas-interpret"]
    assert [s["signature"] for s in f["also_seen"]] == ["a"]
    assert f["also_seen"][0]["how"] == "backend" and "backend" in SEEN_HOW


def test_a_way_seen_on_one_backend_links_the_other_backends_row():
    """The interpreted row is the GPU row's also-seen way (another property): one bug."""
    seen = _rec("c", "pallas-gpu", ["multi-tile"], 16, key="accuracy|oracle|y|-")
    gpu = _rec("a", "pallas-gpu", ["feature bias"], 9, key="accuracy|shift-invariance|y|-")
    gpu["also_seen"] = [{**seen, "how": "property"}]
    interp = _rec("b", "pallas-interpret", ["multi-tile", "feature scale"], 48)
    (f,) = _dedupe([gpu, interp]).values()
    assert f["signature"] == "a" and f["backends"] == ["pallas-gpu", "pallas-interpret"]


def test_bugs_whose_triggers_do_not_nest_or_of_another_language_stay_rows():
    fp16 = _rec("a", "pallas-gpu", ["dtype float16"], 16)
    bf16 = _rec("b", "pallas-interpret", ["dtype bfloat16"], 3)
    assert len(_dedupe([fp16, bf16])) == 2  # independent triggers: two bugs
    triton = _rec("c", "triton", ["feature scale"], 16)
    pallas = _rec("d", "pallas-gpu", ["feature scale"], 16)
    assert len(_dedupe([triton, pallas])) == 2  # two kernels of one target, two languages


def test_a_row_whose_signature_the_other_backends_pair_took_in_is_that_rows_bug():
    """On an H200 a planted GLA kernel's Inf row on pallas-gpu (its NaN site not traced: the
    trace ran out of time) stayed beside the pallas-interpret row whose pair had taken in that
    very signature, by the site traced there (its ledger's ``absorbed``). One signature is one
    bug: one row. A signature taken in by a row of the same backend, or of another language's
    kernel, links nothing."""
    from fuzz.ledger import BugLedger

    gpu = _rec("a", "pallas-gpu", ["chunk-exp-overflow"], 272, key="inf|finite-every-chunk|o|-")
    interp = _rec("b", "pallas-interpret", ["multi-chunk"], 272, key="inf|chunk-independence|o|-")
    assert len(_dedupe([gpu, interp])) == 2  # keys differ, no site: nothing links them
    for order in ((gpu, {**interp, "absorbed": ["a"]}), ({**interp, "absorbed": ["a"]}, gpu)):
        (f,) = _dedupe(order).values()
        assert sorted(f["backends"]) == ["pallas-gpu", "pallas-interpret"], f
    triton = _rec("c", "triton", ["multi-chunk"], 8, key="inf|chunk-independence|o|-")
    assert len(_dedupe([gpu, {**triton, "absorbed": ["a"]}])) == 2  # another language's kernel
    # the ledger's side: the signatures a row took in, through chains of replacements
    ledger = BugLedger()
    ledger.found["z"] = {"signature": "z"}
    ledger.replaced.update({"x": "y", "y": "z", "w": "gone"})
    assert ledger.absorbed("z") == ["x", "y"]


def test_rows_are_joined_whatever_their_order():
    """A row joined with a third takes its ways: on an H200 a planted decode kernel's pallas-gpu
    Inf row took in, from its pallas-interpret record, a signature another pallas-gpu row had
    taken in; met in that order, the two stayed apart."""
    inf_gpu = _rec("d", "pallas-gpu", ["window"], 1, key="inf|oracle|lse|-")
    acc_gpu = _rec("e", "pallas-gpu", ["window"], 2, key="accuracy|oracle|o|-", absorbed=["f"])
    seen = _rec("f", "pallas-interpret", ["window"], 2, key="accuracy|oracle|o|-")
    inf_interp = {**inf_gpu, "backend": "pallas-interpret", "also_seen": [{**seen, "how": "case"}]}
    for order in ([acc_gpu, inf_gpu, inf_interp], [inf_interp, inf_gpu, acc_gpu]):
        (f,) = _dedupe(order).values()
        assert f["signature"] == "d" and sorted(f["backends"]) == ["pallas-gpu", "pallas-interpret"]


def test_two_rows_that_hold_one_signature_are_one_even_with_a_backend_in_common():
    """The pallas-gpu row took in a pallas-interpret row first; the other pallas-interpret row
    holds the gpu row's very signature as a way it was seen: one bug, one row. Rows of one
    backend in common that hold no signature in common stay apart."""
    gpu = _rec("a", "pallas-gpu", ["exp-overflow"], 272, key="inf|finite-every-chunk|o|-")
    first = _rec("b", "pallas-interpret", ["exp-overflow"], 300, key="inf|finite-every-chunk|o|-")
    seen = _rec("a", "pallas-interpret", ["exp-overflow"], 272, key="inf|finite-every-chunk|o|-")
    other = _rec("c", "pallas-interpret", ["multi-chunk"], 200, key="inf|chunk-independence|o|-")
    (f,) = _dedupe([gpu, first, {**other, "also_seen": [{**seen, "how": "case"}]}]).values()
    assert f["backends"] == ["pallas-gpu", "pallas-interpret"], f["backends"]
    assert f["reproducers"] == ["a.py", "b.py"], f["reproducers"]
    assert len(_dedupe([gpu, first, other])) == 2


def test_an_unshrunk_finding_of_a_key_its_targets_bug_was_seen_as_on_another_backend():
    """A pair's ledger marks an unshrunk record that may be one of its own shrunk bugs
    (``maybe_of``); across backends the report does: on an H200 a planted Pallas kernel's
    shrunk masking row (GPU) had been seen as accuracy of ``lse``, and the interpreter's own
    unshrunk accuracy of ``lse`` (4,018 elements) came as a row of its own. A key no shrunk
    bug of the target has, or another target's, keeps it a bug of its own."""
    way = {"signature": "w", "bug_key": "accuracy|oracle|lse|-", "class": "accuracy"}
    way["triggers"] = ["feature causal", "single-visible-key"]  # (not nesting with u's)
    shrunk = _rec("s", "pallas-gpu", ["feature causal"], 17, "masking|oracle|o|-", also_seen=[way])
    big = _rec("u", "pallas-interpret", ["gqa"], 4018, "accuracy|oracle|lse|-", shrunk=False)
    other = _rec("v", "pallas-interpret", [], 99, "nan|oracle|o|-", shrunk=False)
    elsewhere = {
        **_rec("x", "pallas-gpu", [], 5, "accuracy|oracle|lse|-", shrunk=False),
        "target": "j",
    }
    out = _dedupe([shrunk, big, other, elsewhere])
    assert out["u"]["maybe_of"] == "s"
    assert all("maybe_of" not in out[s] for s in ("s", "v", "x"))
