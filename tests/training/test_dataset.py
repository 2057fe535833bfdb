"""Training datasets: deterministic, held-out clean, the columns TRL and the rewards read, oracle answers."""

from __future__ import annotations

import json

import pytest

from fleet_rl import Scenario
from fleet_rl.scenario_generator import HELD_OUT_GPUS, HELD_OUT_MODELS
from fleet_rl.training.dataset import grpo_dataset, scenario_rows, sft_dataset
from rewards import fleet_reward

TASKS = ["easy", "medium", "hard", "multiagent"]


def test_same_arguments_same_rows_and_another_seed_other_rows():
    first = scenario_rows(TASKS, 12, dataset_seed=3)
    assert scenario_rows(TASKS, 12, dataset_seed=3) == first
    other = scenario_rows(TASKS, 12, dataset_seed=4)
    assert {(r["task"], r["seed"]) for r in first}.isdisjoint({(r["task"], r["seed"]) for r in other})


def test_columns_and_types():
    dataset = grpo_dataset(TASKS, 8, dataset_seed=1)
    assert set(dataset.column_names) == {"prompt", "scenario", "task", "seed", "agent", "given_plan"}
    row = dataset[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    Scenario.from_json(row["scenario"])  # decodes


def test_training_rows_never_contain_the_held_out_gpus_or_models():
    for row in scenario_rows(TASKS, 200, dataset_seed=0):
        scenario = Scenario.from_json(row["scenario"])
        assert scenario.cluster.gpu not in HELD_OUT_GPUS
        assert not {job.model for job in scenario.jobs} & set(HELD_OUT_MODELS)


def test_task_weights_and_curriculum_order():
    rows = scenario_rows(["easy", "hard"], 40, task_weights=[1.0, 0.0])
    assert {row["task"] for row in rows} == {"easy"}
    ordered = [row["task"] for row in scenario_rows(["easy", "medium", "hard"], 30, curriculum=True)]
    assert ordered == sorted(ordered, key=["easy", "medium", "hard"].index)


def test_multiagent_rows_carry_the_agent_and_the_given_parts():
    rows = [row for row in scenario_rows(["multiagent", "easy"], 10) if row["task"] == "multiagent"]
    assert rows
    for row in rows:
        given = json.loads(row["given_plan"])
        assert row["agent"] not in {job["id"] for job in given["jobs"]}
        assert f"You are the agent of job {row['agent']}." in row["prompt"][1]["content"]
    easy = next(row for row in scenario_rows(["easy"], 1))
    assert (easy["agent"], easy["given_plan"]) == ("", "")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tasks": ["expert"], "num_prompts": 4}, "unknown or no tasks"),
        ({"tasks": ["easy"], "num_prompts": 0}, "num_prompts must be positive"),
        ({"tasks": ["easy", "hard"], "num_prompts": 4, "task_weights": [1.0]}, "task_weights must be 2"),
        ({"tasks": ["easy"], "num_prompts": 4, "split": "test"}, "unknown split 'test'"),
    ],
)
def test_bad_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        scenario_rows(**kwargs)


def test_sft_answers_are_the_optimum_and_score_1():
    dataset = sft_dataset(TASKS, 8, dataset_seed=2)
    rows = scenario_rows(TASKS, 8, dataset_seed=2)
    completions = [example["completion"] for example in dataset]
    assert all(c[0]["role"] == "assistant" and c[0]["content"].startswith("```json\n") for c in completions)
    rewards = fleet_reward(
        completions,
        [row["scenario"] for row in rows],
        agent=[row["agent"] for row in rows],
        given_plan=[row["given_plan"] for row in rows],
    )
    assert rewards == pytest.approx([1.0] * 8)  # the optimum (merged with the given parts for agents)


def test_a_curriculum_keeps_its_order_in_training(tmp_path):
    from trl import GRPOConfig

    from fleet_rl.training.arguments import FleetScriptArguments
    from fleet_rl.training.checks import check_options

    training_args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    assert training_args.shuffle_dataset  # TRL's default: a random order
    check_options(FleetScriptArguments(curriculum=True), training_args, None, cuda_available=False)
    assert not training_args.shuffle_dataset  # easy before hard, as the rows are laid out
