"""A compiled backend's run narrows the configs of autotuned kernels as it narrows tiles
(``fuzz.narrowing.AUTOTUNE``): each kernel's first config and those its keys name, so that the
examples of a run share their compiles; and every autotuned kernel of a launch draws its own
config (``fuzz.properties.AUTOTUNE_PICKS``). fla's backward launches five autotuned kernels of 3
to 48 configs: the list Hypothesis sized left its fourth kernel, the dq kernel with a
compiled-only bug at half its configs, without a pick of its own in 29% of examples; and each
config of each kernel is a compile, which a GPU campaign's compile share pays for."""

from __future__ import annotations

from pathlib import Path

import pytest
import triton

from fuzz.engine import hunt
from fuzz.narrowing import AUTOTUNE, AUTOTUNE_KEYS, run_narrowing, strategy_keywords
from fuzz.profiles import get_profile
from fuzz.target import get, load_plugin
from fuzz.triton_runtime import Candidate, autotuned_name, positions

PLUGIN = str(Path(__file__).parent.parent / "plugins" / "autotuned_config_bug.py")
SIX = [Candidate(i, triton.Config({}, num_warps=1)) for i in range(6)]


def reached(among, kernel="k", candidates=SIX, picks=range(40)):
    return {positions([p], among)(kernel, candidates) for p in picks}


def test_the_keys_name_the_configs_a_run_draws_from():
    assert reached(None) == set(range(6))
    assert reached((0,)) == {0}
    one = reached((0, 12345))
    assert len(one) == 2 and 0 in one
    assert reached((0, 12345)) == one  # the same keys, the same configs
    assert one <= reached((0, 12345, 777)) and len(reached((0, 12345, 777))) <= 3
    # Each kernel its own: one key names other configs of other kernels.
    assert len({frozenset(reached((0, 12345), kernel=f"k{i}")) for i in range(20)}) > 1
    # A kernel of one config (after its pruner) runs it; a pick past the list wraps.
    assert reached((0, 12345), candidates=SIX[:1]) == {0}
    with pytest.raises(ValueError, match="among"):
        positions([0], (-1,))


@pytest.fixture(scope="module")
def target():
    load_plugin(PLUGIN)
    return get("autotuned_config_bug")


def test_a_compiled_profile_narrows_the_configs_and_widens_them_prefix_first(target):
    gpu = get_profile("gpu")
    two = run_narrowing(target, gpu, 3)
    assert two[AUTOTUNE][0] == 0 and len(two[AUTOTUNE]) == gpu.variant_choices
    assert AUTOTUNE not in strategy_keywords(two)
    wider = run_narrowing(target, gpu, 3, widen=2)
    assert wider[AUTOTUNE][:2] == two[AUTOTUNE]
    most = run_narrowing(target, gpu, 3, widen=100)[AUTOTUNE]
    assert len(most) == 1 + AUTOTUNE_KEYS  # widening ends there
    assert run_narrowing(target, gpu, 3, widen=1000)[AUTOTUNE] == most
    assert AUTOTUNE not in run_narrowing(target, get_profile("ci"), 3)  # the CPU draws any
    assert AUTOTUNE not in run_narrowing(get("softmax"), gpu, 3)  # the project's: not autotuned


def _key(target, hits: bool) -> int:
    """A key under which the wrong config is (``hits``) or is not among the run's two."""
    import sys

    (module,) = [m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == PLUGIN]
    name = autotuned_name(module.softmax_kernel)
    for key in range(1, 10_000):
        configs = [Candidate(i, c) for i, c in enumerate(module.CONFIGS)]
        if (module.BAD in reached((0, key), kernel=name, candidates=configs)) == hits:
            return key
    raise AssertionError("no key")


@pytest.mark.parametrize("hits", [True, False])
def test_a_run_draws_only_its_configs(target, hits):
    """The wrong config is found where the run's keys name it, and never ran where they do
    not: 40 examples (each a drawn config among two) pass."""
    narrowing = {AUTOTUNE: (0, _key(target, hits))}
    result = hunt(
        target,
        "triton-interpret",
        get_profile("ci"),
        database=None,
        max_examples=40,
        seed=0,
        narrowing=narrowing,
    )
    assert result.error is None, result.error
    if hits:
        assert "accuracy" in result.found, result.found
        (record,) = result.found["accuracy"].params["autotune"]
        assert record[1] == 4 and "SKEW: 1" in record[2]
    else:
        assert result.found == {} and result.examples >= 40


def test_the_console_says_a_widening_of_the_configs_as_a_count():
    from fuzz.narrowing import said_added

    assert said_added(AUTOTUNE, [1423048526]) == "configs of each autotuned kernel + 1"
    assert said_added("head_dims", [256, 8]) == "head_dims + 256, 8"


def test_a_run_s_configs_differ_in_warps_and_stages_before_any_repeats():
    """fla's dq kernel on Hopper: six configs, two warp counts by three stage counts, every
    ``num_warps=4`` one miscompiled. Each run's second config has the other warp count (and
    other stages), whatever its key; a third adds the stage count not yet held; widening
    never changes what a run held before."""
    from fuzz.triton_runtime import spread

    hopper = [
        Candidate(i, triton.Config({}, num_warps=w, num_stages=s))
        for i, (w, s) in enumerate((w, s) for w in (2, 4) for s in (2, 3, 4))
    ]
    seconds = set()
    for key in range(1, 200):
        named = spread("dq", hopper, (0, key))
        assert named[0] == 0 and hopper[named[1]].config.num_warps == 4
        assert hopper[named[1]].config.num_stages != 2
        seconds.add(named[1])
        three = spread("dq", hopper, (0, key, key * 7 + 1))
        assert three[:2] == named and len(three) == 3
        stages = {hopper[i].config.num_stages for i in three}
        assert stages == {2, 3, 4}, three
        assert sorted(spread("dq", hopper, (0, key, 5, 6, 7, 8, 9))) == list(range(6))
    assert seconds == {4, 5}  # both such configs, by key
    # Keywords are meta-parameters too: a tile config unlike the first comes first.
    tiles = [
        Candidate(i, triton.Config({"BK": bk}, num_warps=4)) for i, bk in enumerate((32, 32, 64))
    ]
    assert {spread("o", tiles, (0, key))[1] for key in range(1, 50)} == {2}


def test_a_reused_structure_launches_the_configs_it_was_launched_with(target):
    """A hunt with a structure memo: an example that reuses a structure draws the configs its
    structure's example drew (``strategies.reuse.StructureMemo.draw_attached``): they are
    compiled already, where fresh configs would each be a compile (a GPU campaign's fla
    backward pair refused 4,454 examples that would have compiled, to check 109)."""
    import dataclasses

    from fuzz.engine import Hooks
    from strategies.reuse import StructureMemo

    profile = dataclasses.replace(get_profile("ci"), reuse_share=0.25)
    narrowing = {AUTOTUNE: (0, 12345, 777)}
    memo = StructureMemo(explore=1.0, seed=1)

    def picks_of(seed):
        drawn = []

        def on_draw(label, value):  # the picks drawn (the choices made are told too)
            if label == "autotune" and value and all(isinstance(v, int) for v in value):
                drawn.append(tuple(value))

        hooks = Hooks(on_draw=on_draw)
        hunt(
            target,
            "triton-interpret",
            profile,
            database=None,
            max_examples=30,
            seed=seed,
            narrowing=narrowing,
            memo=memo,
            hooks=hooks,
            known=["accuracy"],
        )
        return drawn

    first = picks_of(0)
    assert len(set(first)) > 10  # explorations draw them fresh
    memo.explore = 0.0  # from now on the memo reuses
    before = memo.counts["attached replayed"]
    again = picks_of(1)
    assert memo.counts["attached replayed"] - before >= 5, memo.counts
    assert sum(p in set(first) for p in again) >= memo.counts["attached replayed"] - before
