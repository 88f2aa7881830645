import os

import pytest

pytest_plugins = ["pytester"]

# The order in which `pytest -n 2` hands tests to its workers (``--dist loadgroup``, set in
# pyproject.toml, hands them out one at a time as the workers free up): the slowest first, so
# that the two workers finish together instead of one running a minute-long test while the
# other has nothing left. (A module-scoped fixture whose tests land on both workers is set up
# on each; the expensive one, test_campaign's fault_campaign, runs once per session.)
# Seconds each took on a 2-core VM (`--durations`), by test name (a parametrized test by its id in
# brackets); a module's entry stands for each of its tests not named. Only the order depends on
# these numbers: a stale one costs balance, never a result. Tests not listed keep their
# collection order, after the listed ones.
MODULE_COST = {
    "tests/test_mutants.py": 7,
    "tests/test_targets.py": 6,
    "tests/fuzz/test_campaign.py": 7,
    "tests/fuzz/test_faults_round2.py": 4,
}
COST = {
    "test_a_campaign_reports_both_bugs_each_with_its_own_reproducer": 59,
    "test_faults_are_reported_with_their_class_and_the_campaign_goes_on": 59,  # + its campaign
    "simple_gla_bwd_mutant_dg_total_minus_prefix-triton-interpret": 59,
    "simple_gla_bwd_mutant_mask_mul-triton-interpret": 40,
    "test_merge_two_hosts_then_triage_the_next_night": 32,
    "jagged_softmax_mutant_store_past_end-triton-interpret": 32,
    "test_death_reproducers_of_autotuned_plugin_targets_replay": 27,
    "simple_gla_bwd_recurrent-triton-interpret": 24,
    "test_memory_maps_recycle_workers_and_exhaustion_is_no_kernel_crash": 23,
    "softmax_mutant_scale_twice-triton-interpret": 22,
    "attention_mutant_causal_loop_bound-pallas-interpret": 22,
    "softmax_mutant_sum_fp16-triton-interpret": 22,
    "attention_mutant_finite_sentinel-triton-interpret": 22,
    "test_workers_die_with_their_campaign_and_the_next_one_replays_what_was_in_flight": 20,
    "test_replay_in_parallel_processes_gives_every_verdict": 19,
    "test_fla_forward_state_overflows_in_the_padded_rows_of_a_partial_chunk": 17,
    "test_a_real_mutant_narrowed_as_a_gpu_pair_shrinks_to_its_interpreter_bound": 17,
    "test_compile_workers_compile_ahead_and_the_fuzzing_path_does_not_pay": 17,
    "test_a_bug_that_shrinks_into_a_known_one_is_that_bug": 16,
    "test_a_compile_past_the_compile_timeout_is_a_hang_finding": 16,
    "simple_gla_bwd-triton-interpret": 15,
    "attention_mutant_finite_sentinel-pallas-interpret": 15,
    "simple_gla_bwd-pallas-interpret": 14,
    "simple_gla_bwd_mutant_select_after_exp-triton-interpret": 14,
    "test_every_saved_reproducer_replays_and_crashes_do_not_kill_the_replayer": 14,
    "test_kernel_faults_in_a_campaign_with_short_slices_are_findings": 14,
    "simple_gla_bwd_mutant_dg_total_minus_prefix-pallas-interpret": 14,
    "test_a_first_slow_example_is_not_a_hang_once_a_second_try_finishes": 13,
    "simple_gla_fwd_mutant_state_fp16-triton-interpret": 13,
    "test_scale_twice_is_missed_by_randn_and_found_by_the_harness_and_the_grid": 13,
    "jagged_softmax-triton-interpret": 13,
    "test_triage_against_the_previous_report": 12,
    "softmax_mutant_scale_twice-pallas-interpret": 12,
    "simple_gla_fwd_recurrent-triton-interpret": 12,
    "test_xdist_workers_start_with_their_share": 12,
    "jagged_softmax_mutant_sum_bf16-triton-interpret": 12,
    "test_a_hunt_reports_two_bugs_of_one_class_each_with_its_own_minimal_example": 12,
}


def _cost(item: pytest.Item) -> float:
    name = item.nodeid.split("::")[-1]
    param = name[name.find("[") + 1 : -1] if name.endswith("]") else None
    for key in (name, param):
        if key in COST:
            return COST[key]
    return MODULE_COST.get(item.nodeid.split("::")[0], 0)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist: the slowest tests first (``COST``); the others keep their order."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: -_cost(item))
