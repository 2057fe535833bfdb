"""FleetEnvironment: the same request and the same reward as training, episodes that cannot be gamed, and
precise errors for misuse."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict

import pytest

from fleet_rl import Scenario
from fleet_rl.baselines import even_bf16, heuristic, random_plan, random_split
from fleet_rl.env import EpisodeError, FleetAction, FleetEnvironment, episode_reward
from fleet_rl.kernel import evaluate
from fleet_rl.multiagent import merge_answer
from fleet_rl.prompts import format_answer
from fleet_rl.training.dataset import planner_answer, scenario_rows
from rewards import fleet_reward, parse_plan
from rewards.fleet_reward import OVER_ALLOCATED_BAND
from rewards.scoring import given_plan_from
from tests.design_example import SCENARIO_JSON

ROWS = scenario_rows(["easy", "medium", "hard", "multiagent"], 12, dataset_seed=3)


def _completions(row: dict) -> list[str]:
    """A spread of answers: good, mediocre, random, malformed, degenerate."""
    return [
        format_answer(planner_answer(heuristic, row)),
        json.dumps(planner_answer(even_bf16, row)),
        json.dumps(planner_answer(random_split, row)),
        format_answer(planner_answer(random_plan, row)),
        "I would give every job all the GPUs.",
        '{"jobs": [{"id": "nope", "gpus": 1}]}',
        '{"jobs": [',
    ]


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"{row['task']}-{row['seed']}")
def test_reset_is_the_training_request_and_step_is_the_training_reward(row):
    env = FleetEnvironment()
    for completion in _completions(row):
        observation = env.reset(task=row["task"], seed=row["seed"])
        assert observation.messages == row["prompt"]
        assert observation.scenario == row["scenario"]
        assert (observation.agent, observation.given_plan) == (row["agent"], row["given_plan"])
        assert observation.reward is None and not observation.done
        expected = fleet_reward(
            [completion], [row["scenario"]], agent=[row["agent"]], given_plan=[row["given_plan"]]
        )[0]
        result = env.step(FleetAction(plan=completion))
        assert result.reward == pytest.approx(expected, abs=1e-12)
        assert result.plan_reward == result.reward and result.done
        assert env.state.episode_reward == result.reward


@pytest.mark.parametrize("row", ROWS[::3], ids=lambda row: f"{row['task']}-{row['seed']}")
def test_the_feedback_is_the_kernels_own_evaluation_of_the_plan(row):
    """The step reads each job's results from the reward's scoring pass; they equal what the kernel's
    ``evaluate`` gives for the same plan (merged with the given parts for an agent), simulated on its own."""
    env = FleetEnvironment()
    for completion in _completions(row):
        env.reset(task=row["task"], seed=row["seed"])
        result = env.step(FleetAction(plan=completion))
        plan = parse_plan(completion).plan
        if plan is None:
            assert result.jobs == [] and result.reasons == [] and result.valid is None
            continue
        if row["agent"]:
            plan = merge_answer(given_plan_from(row["given_plan"]), plan)
        expected = evaluate(env.request.solved, plan)
        assert result.valid == expected.valid
        assert result.reasons == [str(reason) for reason in expected.reasons]
        assert [job.model_dump(exclude={"memory_headroom_gb"}) for job in result.jobs] == [
            asdict(job) for job in expected.jobs
        ]


@pytest.mark.parametrize("row", ROWS[:4], ids=lambda row: f"{row['task']}-{row['seed']}")
def test_the_servers_step_async_is_step(row):
    """openenv awaits ``step_async`` (run on the server's event loop); it is ``step``, unchanged."""
    completion = format_answer(planner_answer(heuristic, row))
    sync_env, async_env = FleetEnvironment(), FleetEnvironment()
    for env in (sync_env, async_env):
        env.reset(task=row["task"], seed=row["seed"], episode_id="same")
    expected = sync_env.step(FleetAction(plan=completion))
    observed = asyncio.run(async_env.step_async(FleetAction(plan=completion)))
    assert observed == expected and async_env.state == sync_env.state


def test_feedback_names_each_job_and_why():
    env = FleetEnvironment()
    env.reset(task="medium", seed=0, scenario=SCENARIO_JSON)
    plan = heuristic(Scenario.from_json(SCENARIO_JSON))
    for job in plan["jobs"]:
        job["gpus"], job["tensor_parallel"] = 8, 1  # 16 GPUs asked of 8
    result = env.step(FleetAction(plan=json.dumps(plan)))
    low, high = OVER_ALLOCATED_BAND  # above giving up, below every plan the cluster takes (breadcrumbs)
    assert result.valid is False and low < result.reward < high
    assert any(reason.startswith("over_allocated") for reason in result.reasons)
    assert "over_allocated" in result.feedback
    good = env.reset(task="medium", seed=0, scenario=SCENARIO_JSON)
    result = env.step(FleetAction(plan=json.dumps(heuristic(Scenario.from_json(good.scenario)))))
    assert [job.id for job in result.jobs] == ["chat", "tune"]
    for job in result.jobs:
        assert job.memory_headroom_gb == pytest.approx(
            job.memory_capacity_gb - job.memory_per_gpu_gb, abs=1e-3
        )
        assert f"- {job.id}: {job.status}" in result.feedback
    parsed = env.reset(task="easy", seed=1)
    result = env.step(FleetAction(plan="no plan here"))
    assert result.parse_error == "no_json" and result.jobs == [] and result.valid is None
    assert "No plan could be read" in result.feedback and parsed.turn == 0


def test_refinement_pays_increments_that_sum_to_the_episode_reward():
    env = FleetEnvironment()
    observation = env.reset(task="hard", seed=4, mode="refine", max_turns=4, turn_cost=0.02)
    scenario = Scenario.from_json(observation.scenario)
    answers = ["nonsense", json.dumps(even_bf16(scenario)), json.dumps(heuristic(scenario))]
    steps = [env.step(FleetAction(plan=answer)) for answer in answers]
    assert [step.turn for step in steps] == [1, 2, 3] and not any(step.done for step in steps)
    last = env.step(FleetAction(plan=answers[-1], final=True))
    assert last.done and env.state.done
    rewards = [*[step.reward for step in steps], last.reward]
    plan_rewards = env.state.plan_rewards
    assert sum(rewards) == pytest.approx(env.state.episode_reward)
    assert env.state.episode_reward == pytest.approx(plan_rewards[-1] - 0.02 * 3)
    assert episode_reward(plan_rewards, 0.02) == env.state.episode_reward


def test_stalling_and_probing_never_beat_submitting_the_best_plan_at_once():
    env = FleetEnvironment()
    observation = env.reset(task="medium", seed=2, mode="refine", max_turns=5)
    best = json.dumps(heuristic(Scenario.from_json(observation.scenario)))
    once = env.step(FleetAction(plan=best, final=True))
    direct = env.state.episode_reward
    assert once.done and direct == once.plan_reward
    env.reset(task="medium", seed=2, mode="refine", max_turns=5)
    for answer in ["{}", best, best, "{}", best]:  # probe, stall, regress, come back: the turns run out
        result = env.step(FleetAction(plan=answer))
    assert result.done and result.turn == 5 and result.plan_reward == direct
    assert env.state.episode_reward == pytest.approx(direct - 0.01 * 4)


def test_an_episode_ends_when_turns_run_out_or_the_optimum_is_reached():
    env = FleetEnvironment()
    env.reset(task="easy", seed=5, mode="refine", max_turns=2)
    assert not env.step(FleetAction(plan="{}")).done
    assert env.step(FleetAction(plan="{}")).done
    observation = env.reset(task="easy", seed=5, mode="refine", max_turns=8)
    from fleet_rl.kernel import solve

    optimum = solve(Scenario.from_json(observation.scenario)).plan
    result = env.step(FleetAction(plan=json.dumps(optimum)))
    assert result.plan_reward == pytest.approx(1.0) and result.done and result.turn == 1


def test_every_agent_of_a_multiagent_scenario_gets_its_own_request():
    env = FleetEnvironment()
    first = env.reset(task="multiagent", seed=11)
    scenario = Scenario.from_json(first.scenario)
    from fleet_rl.kernel import solve

    optimum = {job["id"]: job for job in solve(scenario).plan["jobs"]}
    for job_id in scenario.job_ids:
        observation = env.reset(task="multiagent", seed=11, agent=job_id)
        given_ids = [job["id"] for job in json.loads(observation.given_plan)["jobs"]]
        assert observation.agent == job_id and job_id not in given_ids
        assert f"You are the agent of job {job_id}" in observation.prompt
        result = env.step(FleetAction(plan=json.dumps({"jobs": [optimum[job_id]]})))
        assert result.plan_reward == pytest.approx(1.0)  # the best response beside the optimal parts


def test_sessions_do_not_share_state():
    one, two = FleetEnvironment(), FleetEnvironment()
    one.reset(task="easy", seed=1, mode="refine", max_turns=3)
    two.reset(task="hard", seed=2)
    two.step(FleetAction(plan="{}"))
    assert two.state.done and not one.state.done and one.state.plan_rewards == []
    one.step(FleetAction(plan="{}"))
    assert (one.state.task, one.state.seed, len(one.state.plan_rewards)) == ("easy", 1, 1)
    assert (two.state.task, two.state.seed, len(two.state.plan_rewards)) == ("hard", 2, 1)


def test_steps_out_of_turn_are_refused_with_409():
    env = FleetEnvironment()
    with pytest.raises(EpisodeError, match="call reset first") as error:
        env.step(FleetAction(plan="{}"))
    assert error.value.status_code == 409
    env.reset(task="easy", seed=0)
    env.step(FleetAction(plan="{}"))
    with pytest.raises(EpisodeError, match="episode is done") as error:
        env.step(FleetAction(plan="{}"))
    assert error.value.status_code == 409


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"task": "impossible"}, "unknown task 'impossible'; valid tasks: easy, medium, hard, multiagent"),
        ({"split": "test"}, "unknown split 'test'"),
        ({"mode": "forever"}, "unknown mode 'forever'; valid modes: single, refine"),
        ({"seed": -1}, r"seed must be an integer in \[0, 2147483647\], got -1"),
        ({"seed": True}, "seed must be an integer"),
        ({"seed": "7"}, "seed must be an integer"),
        ({"mode": "refine", "max_turns": 0}, r"max_turns must be an integer in \[1, 16\], got 0"),
        ({"mode": "refine", "max_turns": 17}, "max_turns must be an integer"),
        ({"mode": "refine", "turn_cost": -0.1}, r"turn_cost must be a number in \[0, 0.1\]"),
        ({"mode": "refine", "turn_cost": float("nan")}, "turn_cost must be a number"),
        ({"task": "multiagent", "agent": "ghost"}, "agent 'ghost' is not a job of the scenario"),
        ({"task": "easy", "agent": "chat"}, "agent is only for the 'multiagent' task"),
        ({"scenario": '{"cluster": 3}'}, "scenario is not valid"),
        ({"scenario": {"cluster": {}}}, "scenario must be the scenario's JSON text"),
        ({"temperature": 0.7}, r"unknown reset parameter\(s\) \['temperature'\]"),
    ],
)
def test_bad_reset_parameters_get_a_precise_400(kwargs, message):
    env = FleetEnvironment()
    with pytest.raises(EpisodeError, match=message) as error:
        env.reset(**{"seed": 1, **kwargs})
    assert error.value.status_code == 400
    env.reset(task="easy", seed=1)  # the environment still works
    assert env.step(FleetAction(plan="{}")).done


def test_a_random_seed_is_reported_so_the_episode_can_be_replayed():
    env = FleetEnvironment()
    first = env.reset(task="medium")
    again = env.reset(task="medium", seed=first.seed)
    assert first.scenario == again.scenario
