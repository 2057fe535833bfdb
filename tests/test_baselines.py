"""Baseline planners: valid plans for every tier, deterministic, and the optimum scores 1."""

from __future__ import annotations

import json

import pytest

from fleet_rl import TASKS, make_scenario
from fleet_rl.baselines import BASELINES, even_bf16, optimal, random_feasible, random_plan, random_split
from fleet_rl.kernel import evaluate
from fleet_rl.scenario import Scenario
from fleet_rl.solved_scenarios import solved_scenario

BASELINE_NAMES = ("even_bf16", "heuristic", "random", "random_split", "random_feasible", "optimal")


@pytest.mark.parametrize("task", TASKS)
def test_even_bf16_is_valid_uses_every_gpu_and_never_a_format_the_gpu_lacks(task):
    for seed in range(10):
        scenario = make_scenario(task, seed)
        plan = even_bf16(scenario)
        result = evaluate(solved_scenario(scenario), plan)
        assert result.valid, result.reasons
        assert sum(job["gpus"] for job in plan["jobs"]) == scenario.cluster.count
        assert all(job.status != "unsupported" for job in result.jobs)


def test_even_bf16_hand_computed_split():
    scenario = Scenario.from_dict(
        {
            "cluster": {"gpu": "h100-sxm", "count": 5},
            "jobs": [
                {"id": "a", "model": "gpt2", "kind": "serve", "priority": 1, "seq_len": 512, "batch_size": 4},
                {"id": "b", "model": "gpt2", "kind": "lora", "priority": 2, "seq_len": 512, "batch_size": 4},
            ],
        }
    )
    plan = even_bf16(scenario)
    assert [job["gpus"] for job in plan["jobs"]] == [2, 3]  # the odd GPU to the higher priority
    assert [job["tensor_parallel"] for job in plan["jobs"]] == [2, 1]  # 3 GPUs: only TP 1 divides
    assert plan["jobs"][1]["precision"]["norm"] == "fp32"


def test_random_is_deterministic_and_schema_valid():
    scenario = make_scenario("hard", 0)
    assert random_plan(scenario, 3) == random_plan(scenario, 3)
    assert random_plan(scenario, 3) != random_plan(scenario, 4)
    assert sum(job["gpus"] for job in random_plan(scenario, 3)["jobs"]) <= scenario.cluster.count
    assert "schema" not in " ".join(evaluate(solved_scenario(scenario), random_plan(scenario, 3)).reasons)


@pytest.mark.parametrize("task", TASKS)
def test_random_split_places_every_job_on_all_gpus_with_dividing_tp_and_only_its_kinds_fields(task):
    for seed in range(20):
        scenario = make_scenario(task, seed)
        plan = random_split(scenario, seed)
        assert plan == random_split(scenario, seed)
        result = evaluate(solved_scenario(scenario), plan)
        assert result.valid, result.reasons
        shares = [part["gpus"] for part in plan["jobs"]]
        assert sum(shares) == scenario.cluster.count
        assert all(shares) or scenario.cluster.count < len(scenario.jobs)
        for job, part in zip(scenario.jobs, plan["jobs"], strict=True):
            assert part["gpus"] % part["tensor_parallel"] == 0
            assert job.model_spec.num_key_value_heads % part["tensor_parallel"] == 0
            assert ("kv_cache" in part) == (job.kind == "serve")
            assert ("micro_batch_size" in part) == (job.kind != "serve")


def test_random_split_draws_varied_splits_and_formats():
    scenario = make_scenario("hard", 0)
    plans = [random_split(scenario, seed) for seed in range(30)]
    assert len({tuple(part["gpus"] for part in plan["jobs"]) for plan in plans}) > 5
    assert len({part["precision"]["mlp"] for plan in plans for part in plan["jobs"]}) > 3


def test_random_feasible_is_a_seeded_random_split_draw_under_which_every_placed_job_runs():
    found = 0
    for task in ("easy", "medium"):
        for seed in range(12):
            scenario = make_scenario(task, seed)
            plan = random_feasible(scenario, seed)
            assert plan == random_feasible(scenario, seed)
            result = evaluate(solved_scenario(scenario), plan)
            assert result.valid, result.reasons
            assert sum(part["gpus"] for part in plan["jobs"]) == scenario.cluster.count  # a random_split draw
            statuses = set(result.statuses.values())
            if "ok" in statuses and statuses <= {"ok", "unallocated"}:
                found += 1
                assert result.score > 0.0  # a plan under which the placed jobs run has a value
    assert found >= 12  # most of these scenarios have a draw that runs (the rest fall back to the last draw)
    scenario = make_scenario("medium", 0)
    plans = {json.dumps(random_feasible(scenario, seed)) for seed in range(6)}
    assert len(plans) > 3  # random among the plans that run, not one fixed answer


def test_optimal_scores_one_and_registry():
    scenario = make_scenario("easy", 2)
    assert evaluate(solved_scenario(scenario), optimal(scenario)).score == pytest.approx(1.0)
    assert set(BASELINES) == set(BASELINE_NAMES)


def test_optimal_hands_out_a_copy_that_callers_may_edit():
    scenario = make_scenario("medium", 4)
    edited = optimal(scenario)
    edited["jobs"][0]["gpus"] = 0
    edited["jobs"].clear()
    assert optimal(scenario) == solved_scenario(scenario).optimal_plan
    assert evaluate(solved_scenario(scenario), optimal(scenario)).score == pytest.approx(1.0)
