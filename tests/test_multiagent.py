"""fleet_rl.multiagent: the agent and its given parts are deterministic, and the best response is optimal."""

from __future__ import annotations

import pytest

from fleet_rl import make_scenario
from fleet_rl.kernel import evaluate, solve
from fleet_rl.multiagent import agent_request, merge_answer, own_part
from fleet_rl.plan_schema import plan_from_object
from fleet_rl.solved_scenarios import solved_scenario


@pytest.mark.parametrize("seed", range(8))
def test_agent_is_a_running_job_and_the_given_parts_are_the_others_optimal_parts(seed):
    scenario = make_scenario("multiagent", seed)
    optimal = solve(solved_scenario(scenario)).plan
    agent, given = agent_request(scenario, seed)
    assert agent_request(scenario, seed) == (agent, given)  # same seed, same request
    assert next(job for job in optimal["jobs"] if job["id"] == agent)["gpus"] > 0
    assert [job["id"] for job in given["jobs"]] == [j for j in scenario.job_ids if j != agent]
    best_response = own_part(optimal, agent)
    assert best_response == {"jobs": [next(job for job in optimal["jobs"] if job["id"] == agent)]}
    merged = merge_answer(plan_from_object(given), plan_from_object(best_response))
    assert evaluate(solved_scenario(scenario), merged).score == pytest.approx(1.0)


def test_an_answer_that_rewrites_another_job_is_rejected_by_the_kernel():
    scenario = make_scenario("multiagent", 0)
    agent, given = agent_request(scenario, 0)
    other = given["jobs"][0]
    answer = {"jobs": [{**other, "gpus": 0}]}  # tries to take the other job's GPUs away
    merged = merge_answer(plan_from_object(given), plan_from_object(answer))
    result = evaluate(solved_scenario(scenario), merged)
    assert not result.valid
    assert any(reason.startswith("duplicate_job") for reason in result.reasons)


def test_own_part_is_the_whole_plan_without_an_agent():
    plan = solve(make_scenario("medium", 0)).plan
    assert own_part(plan, "") is plan and own_part(plan, None) is plan
    assert own_part(plan, "no-such-job") == {"jobs": []}
