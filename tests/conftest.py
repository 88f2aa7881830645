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
    "tests/test_mutants.py": 12,
    "tests/test_targets.py": 8,
    "tests/fuzz/test_campaign.py": 10,
    "tests/fuzz/test_faults_round2.py": 6,
}
COST = {
    "test_merge_two_hosts_then_triage_the_next_night": 80,
    "test_a_campaign_runs_on_every_node_and_finds_what_a_local_one_finds": 60,  # with its cluster
    "test_a_node_killed_mid_campaign_loses_nothing": 28,
    "planted_attention_alibi_kv_head_pallas": 25,
    "softmax_mutant_scale_twice-triton-interpret": 27,
    "test_a_declared_known_failure_never_ends_the_hunt_for_the_other_bug": 25,
    "test_faults_are_reported_with_their_class_and_the_campaign_goes_on": 75,  # its campaign
    "test_a_campaign_reports_both_bugs_each_with_its_own_reproducer": 62,
    "simple_gla_bwd_mutant_dg_total_minus_prefix-pallas-interpret": 46,
    "simple_gla_bwd_mutant_dg_total_minus_prefix-triton-interpret": 60,
    "simple_gla_bwd_recurrent-triton-interpret": 52,
    "simple_gla_bwd_mutant_mask_mul-triton-interpret": 48,
    "test_memory_maps_recycle_workers_and_exhaustion_is_no_kernel_crash": 46,
    "jagged_softmax_mutant_store_past_end-triton-interpret": 40,
    "test_death_reproducers_of_autotuned_plugin_targets_replay": 38,
    "attention_mutant_causal_loop_bound-triton-interpret": 37,
    "test_replay_in_parallel_processes_gives_every_verdict": 36,
    "simple_gla_fwd_mutant_state_fp16-triton-interpret": 34,
    "attention_mutant_causal_loop_bound-pallas-interpret": 34,
    "test_a_campaign_worker_out_of_gpu_memory_is_an_exhaustion_not_a_crash": 33,
    "attention_mutant_finite_sentinel-triton-interpret": 33,
    "simple_gla_bwd_mutant_select_after_exp-triton-interpret": 31,
    "test_workers_die_with_their_campaign_and_the_next_one_replays_what_was_in_flight": 28,
    "simple_gla_fwd_mutant_pad_unmasked-triton-interpret": 28,
    "test_triage_against_the_previous_report": 26,
    "simple_gla_bwd_split-triton-interpret": 25,
    "simple_gla_fwd_mutant_anchor-triton-interpret": 25,
    "test_a_reproducer_edited_outside_the_contract_cannot_replay": 25,
    "attention_mutant_mask_before_scale-pallas-interpret": 24,
    "simple_gla_fwd_recurrent-triton-interpret": 24,
    "test_run_writes_report_and_reproducers_and_fails_on_a_real_target": 22,
    "test_softmax_reproducer_runs_as_a_script": 20,
    "simple_gla_bwd_mutant_mask_mul-pallas-interpret": 20,
    "test_every_saved_reproducer_replays_and_crashes_do_not_kill_the_replayer": 19,
    "simple_gla_fwd_mutant_pad_unmasked-pallas-interpret": 19,
    "test_sigterm_ends_the_campaign_with_a_complete_report": 18,
    "jagged_softmax-triton-interpret": 18,
    "simple_gla_bwd-pallas-interpret": 18,
    "test_fla_forward_state_overflows_in_the_padded_rows_of_a_partial_chunk": 17,
    "test_compile_workers_compile_ahead_and_the_fuzzing_path_does_not_pay": 17,
    "test_replay_gives_every_file_its_own_verdict": 16,
    "test_kernel_faults_in_a_campaign_with_short_slices_are_findings": 15,
    "test_xdist_workers_start_with_their_share": 14,
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
