"""job_credits: each job's own breadcrumb credit in a whole plan, and None where the reward is not theirs."""

from __future__ import annotations

import copy
import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rl import make_scenario
from fleet_rl.baselines import even_bf16, optimal
from fleet_rl.multiagent import agent_request, own_part
from rewards import fleet_reward
from rewards.breadcrumbs import IDLE_CREDIT
from rewards.fleet_reward import INFEASIBLE_BASE, PROGRESS_CREDIT
from rewards.job_credits import job_credits


def _scenario_with_an_oom_job():
    """A medium scenario whose even bf16 split runs one job and leaves another out of memory."""
    for seed in range(100):
        scenario = make_scenario("medium", seed)
        credits = job_credits([json.dumps(even_bf16(scenario))], [msgspec.json.encode(scenario).decode()])[0]
        if credits and 1.0 in credits.values() and min(credits.values()) < 1.0:
            return scenario
    raise AssertionError("no medium scenario has an even bf16 plan that runs one job and breaks another")


SCENARIO = _scenario_with_an_oom_job()
SCENARIO_JSON = msgspec.json.encode(SCENARIO).decode()
JOB_IDS = [job.id for job in SCENARIO.jobs]


def test_every_job_of_the_optimum_runs():
    (credits,) = job_credits([json.dumps(optimal(SCENARIO))], [SCENARIO_JSON])
    assert credits == dict.fromkeys(JOB_IDS, 1.0)


def test_the_credits_are_the_ones_the_reward_averages():
    plan = json.dumps(even_bf16(SCENARIO))
    (credits,) = job_credits([plan], [SCENARIO_JSON])
    assert list(credits) == JOB_IDS  # every job of the scenario, in its order
    assert 1.0 in credits.values() and min(credits.values()) < 1.0  # one runs, one does not
    progress = sum(credits.values()) / len(credits)
    assert fleet_reward([plan], [SCENARIO_JSON])[0] == pytest.approx(
        INFEASIBLE_BASE + PROGRESS_CREDIT * progress
    )


def test_a_job_left_out_is_idle():
    plan = copy.deepcopy(optimal(SCENARIO))  # optimal() hands out the solved scenario's cached plan
    plan["jobs"] = plan["jobs"][1:]
    (credits,) = job_credits([json.dumps(plan)], [SCENARIO_JSON])
    assert credits[JOB_IDS[0]] == pytest.approx(IDLE_CREDIT) and credits[JOB_IDS[1]] == 1.0


def test_answers_whose_reward_is_not_their_jobs_credits_get_none():
    placed_nothing = {"jobs": [{**job, "gpus": 0} for job in optimal(SCENARIO)["jobs"]]}  # IRD: giving up
    indivisible = copy.deepcopy(optimal(SCENARIO))
    indivisible["jobs"][0] |= {"gpus": 3, "tensor_parallel": 2}  # rejected by the kernel: nothing simulated
    answers = ["no plan here", "{", json.dumps(placed_nothing), json.dumps(indivisible), "x" * 10**6]
    assert job_credits(answers, [SCENARIO_JSON] * len(answers)) == [None] * len(answers)


def test_a_multi_agent_answer_gets_none():
    scenario = make_scenario("multiagent", 3)
    agent, given = agent_request(scenario, 3)
    answer = json.dumps(own_part(optimal(scenario), agent))
    credits = job_credits(
        [answer], [msgspec.json.encode(scenario).decode()], agent=[agent], given_plan=[json.dumps(given)]
    )
    assert credits == [None]


@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=400), task=st.sampled_from(["easy", "medium", "hard"]), seed=st.integers(0, 50))
def test_any_text_gets_credits_in_range_or_none_without_raising(text, task, seed):
    scenario = make_scenario(task, seed)
    for answer in (text, json.dumps(optimal(scenario)) + text, json.dumps(even_bf16(scenario))):
        (credits,) = job_credits([answer], [msgspec.json.encode(scenario).decode()])
        assert credits is None or all(0.0 < value <= 1.0 for value in credits.values())
