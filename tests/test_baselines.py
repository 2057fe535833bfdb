"""Baseline planners: valid plans for every tier, deterministic, and the optimum scores 1."""

from __future__ import annotations

import pytest

from fleet_rl import TASKS, make_scenario
from fleet_rl.baselines import BASELINES, even_bf16, optimal, random_plan
from fleet_rl.kernel import evaluate


@pytest.mark.parametrize("task", TASKS)
def test_even_bf16_is_valid_uses_every_gpu_and_never_a_format_the_gpu_lacks(task):
    for seed in range(10):
        scenario = make_scenario(task, seed)
        plan = even_bf16(scenario)
        result = evaluate(scenario, plan)
        assert result.valid, result.reasons
        assert sum(job["gpus"] for job in plan["jobs"]) == scenario.cluster.count
        assert all(job.status != "unsupported" for job in result.jobs)


def test_even_bf16_hand_computed_split():
    scenario = make_scenario("medium", 1)  # 4 x h100-sxm, two jobs
    plan = even_bf16(scenario)
    assert [job["gpus"] for job in plan["jobs"]] == [2, 2]
    assert plan["jobs"][0]["precision"]["norm"] == "fp32"


def test_random_is_deterministic_and_schema_valid():
    scenario = make_scenario("hard", 0)
    assert random_plan(scenario, 3) == random_plan(scenario, 3)
    assert random_plan(scenario, 3) != random_plan(scenario, 4)
    assert sum(job["gpus"] for job in random_plan(scenario, 3)["jobs"]) <= scenario.cluster.count
    assert "schema" not in " ".join(evaluate(scenario, random_plan(scenario, 3)).reasons)


def test_optimal_scores_one_and_registry():
    scenario = make_scenario("easy", 2)
    assert evaluate(scenario, optimal(scenario)).score == pytest.approx(1.0)
    assert set(BASELINES) == {"even_bf16", "random", "optimal"}
