"""The mutant mechanism: exact single edits, loud failure when a kernel drifts."""

import inspect

import pytest

from kernels import _mutate
from kernels.softmax import triton as ktriton
from kernels.softmax.mutants import MUTANTS


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
@pytest.mark.parametrize("impl", ["triton", "pallas"])
def test_each_softmax_mutant_differs_from_the_real_kernel_by_its_edits(mutant, impl):
    module = mutant.module(impl)
    real = __import__(f"kernels.softmax.{impl}", fromlist=["_"])
    mutated = inspect.getsource(module)
    assert mutated != inspect.getsource(real)
    for edit in getattr(mutant, impl):
        assert edit.new in mutated


def test_edit_that_does_not_match_exactly_once_is_an_error():
    with pytest.raises(_mutate.MutationError, match="occurs 0 times"):
        _mutate.mutate(ktriton, "nothing", [_mutate.Edit("this text is not in the kernel", "x")])
    with pytest.raises(_mutate.MutationError, match=r"occurs \d+ times"):
        _mutate.mutate(ktriton, "many", [_mutate.Edit("tl.", "tl .")])


def test_a_copy_runs_its_code_at_its_first_use():
    # A process registers every mutant and runs few: the copy's code (a compile, its
    # @triton.jit functions) runs when the module is first used, once, and a copy that cannot
    # run says so there, each time it is used.
    module = _mutate.mutate(ktriton, "lazy_probe", [_mutate.Edit("y = tl.exp(", "y = tl.exp(")])
    assert "softmax" not in vars(module)
    assert module.softmax is module.softmax and "softmax" in vars(module)
    broken = _mutate.mutate(ktriton, "broken_probe", [_mutate.Edit("y = tl.exp(", "y = tl.exp((")])
    for _ in range(2):
        with pytest.raises(SyntaxError):
            broken.softmax  # noqa: B018


def test_mutant_source_is_visible_to_tracebacks():
    import linecache

    module = MUTANTS[0].module("triton")
    lines = linecache.getlines(module.__file__)
    assert any("tl.exp(s)" in line for line in lines)


def test_interpreted_launch_leaves_triton_language_unpatched():
    """An interpreted launch must not leave interpreter builtins in triton.language: a compiled
    launch in the same process (the differential on a GPU host) would trace them."""
    import torch
    import triton.language as tl

    def snapshot():
        names = ("load", "store", "exp", "reduce", "where", "maximum", "full", "arange")
        return {
            (m.__name__, n): getattr(m, n)
            for m in (tl, tl.core, tl.math)
            for n in names
            if hasattr(m, n)
        }

    before = snapshot()
    ktriton.softmax(torch.randn(3, 40), block_n=16, interpret=True)
    assert snapshot() == before


def _family_rewrites():
    from kernels.attention import mutants as am
    from kernels.attention import reformulations as ar
    from kernels.jagged_softmax import mutants as jm
    from kernels.jagged_softmax import reformulations as jr
    from kernels.simple_gla import mutants as gm
    from kernels.softmax import reformulations as sr

    return [*am.MUTANTS, *jm.MUTANTS, *gm.MUTANTS, *MUTANTS], [
        *ar.REFORMULATIONS,
        *jr.REFORMULATIONS,
        *sr.REFORMULATIONS,
    ]


def test_every_mutant_record_is_registered_with_its_class_bound_and_languages():
    from fuzz.target import all_targets, get

    mutants, reformulations = _family_rewrites()
    for m in mutants:
        assert m.expected, m.name
        for real, expect in m.expected.items():
            target = get(f"{real}_mutant_{m.name}")
            assert target.mutant_of == real and target.expected_class == expect.cls
            assert target.mutant.shrink_bound is expect.shrink_bound
            assert sorted(target.kernels) == sorted(m.languages)
            assert target.description == m.description
    real = {t.name for t in all_targets() if not t.is_mutant}
    for r in reformulations:
        assert any(name.endswith(f"_{r.name}") for name in real), r.name


def test_a_record_names_its_languages_and_its_real_module():
    mutant = next(m for m in _family_rewrites()[0] if m.name == "offsets_past_end")
    assert mutant.languages == ("triton",)
    with pytest.raises(ValueError, match=r"impl='pallas' must be one of \('triton',\)"):
        mutant.module("pallas")
    unbound = _mutate.Mutant("x", "y", {}, triton=(), pallas=None)
    with pytest.raises(ValueError, match="real='' must name the real module"):
        unbound.module("triton")
