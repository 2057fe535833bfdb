"""The ``heuristic`` baseline (``fleet_rl/heuristic.py``): valid, within the GPU budget, every job it places
runs, formats by kind and GPU, deterministic, clear of every IRD rule but an empty plan where no format it
tries meets a floor, and between ``even_bf16`` and ``optimal`` on every whole-plan tier."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from fleet_rl import TASKS, make_scenario
from fleet_rl.baselines import BASELINES, even_bf16
from fleet_rl.heuristic import heuristic
from fleet_rl.kernel import evaluate
from fleet_rl.scenario import Scenario
from fleet_rl.solved_scenarios import solved_scenario
from rewards import score_completions
from rewards.ird import IRD_RULES, NOT_DEGENERATE, PLACES_NOTHING


@pytest.mark.parametrize("task", TASKS)
def test_every_placed_job_runs_within_the_gpu_budget(task):
    for seed in range(12):
        scenario = make_scenario(task, seed, split="eval")
        plan = heuristic(scenario, seed)
        result = evaluate(solved_scenario(scenario), plan)
        assert result.valid, result.reasons
        assert sum(part["gpus"] for part in plan["jobs"]) <= scenario.cluster.count
        placed = {part["id"] for part in plan["jobs"] if part["gpus"] > 0}
        # every generated job can run on the whole cluster, but maybe not at its floor with these formats
        assert placed or all(job.min_tokens_per_s is not None for job in scenario.jobs)
        for job in result.jobs:
            assert job.status == ("ok" if job.id in placed else "unallocated"), (job.id, job.status)
        assert heuristic(scenario, seed) == plan and heuristic(scenario, seed + 1) == plan  # seed unused


def test_formats_follow_the_job_kind_and_the_gpu():
    for seed in range(40):
        scenario = make_scenario("hard", seed)
        fp8 = scenario.gpu.supports("fp8")
        for part, job in zip(heuristic(scenario)["jobs"], scenario.jobs, strict=True):
            if part["gpus"] == 0:
                continue
            precision = part["precision"]
            assert {precision["embedding"], precision["lm_head"]} <= {"bf16", "fp16"}
            if job.kind == "train":
                assert precision["norm"] == "fp32" and precision["mlp"] == (
                    "fp8" if fp8 else precision["embedding"]
                )
            if job.kind == "serve":
                assert precision["mlp"] in ({"fp8", "bf16", "fp16"} if fp8 else {"int8", "bf16", "fp16"})


def test_it_is_clear_of_every_ird_rule():
    for task in TASKS:
        scenarios = [make_scenario(task, seed, split="eval") for seed in range(16)]
        columns = {"scenario": [s.to_json() for s in scenarios], "agent": [""] * 16, "given_plan": [""] * 16}
        scores = score_completions([json.dumps(heuristic(s)) for s in scenarios], **columns)
        assert scores.has_plan.all()
        for scenario, rule in zip(scenarios, scores.ird_rule, strict=True):
            # only an empty plan, when no format it tries meets the floors of every job (idling costs the
            # same as running too slowly, and leaves the GPUs free)
            assert rule in (NOT_DEGENERATE, PLACES_NOTHING), IRD_RULES[rule]
            assert rule == NOT_DEGENERATE or all(job.min_tokens_per_s is not None for job in scenario.jobs)
        assert (scores.ird_rule == NOT_DEGENERATE).mean() >= 0.75


@pytest.mark.parametrize("task", ["easy", "medium", "hard"])
def test_it_sits_between_even_bf16_and_the_optimum(task):
    scenarios = [make_scenario(task, seed, split="eval") for seed in range(30)]
    heuristic_scores = [evaluate(solved_scenario(s), heuristic(s)).score for s in scenarios]
    even_scores = [evaluate(solved_scenario(s), even_bf16(s)).score for s in scenarios]
    assert np.mean(even_scores) + 0.1 < np.mean(heuristic_scores) < 1.0
    assert max(heuristic_scores) <= 1.0


def test_on_a_multi_agent_request_it_keeps_the_given_parts_and_plans_within_the_gpus_they_leave():
    """The prompt shows the agent the others' parts; the heuristic answers around them (through the same
    ``planner_answer`` that eval.py's baselines use), so the merged plan never takes GPUs the others hold."""
    from fleet_rl.training.dataset import planner_answer, scenario_rows

    for row in scenario_rows(["multiagent"], 30, split="eval"):
        given = json.loads(row["given_plan"])
        scenario = Scenario.from_json(row["scenario"])
        whole = heuristic(scenario, row["seed"], given_plan=given)
        assert [part for part in whole["jobs"] if part["id"] != row["agent"]] == given["jobs"]
        answer = planner_answer(BASELINES["heuristic"], row)
        assert [part["id"] for part in answer["jobs"]] == [row["agent"]]
        merged = {"jobs": [*given["jobs"], *answer["jobs"]]}
        result = evaluate(solved_scenario(scenario), merged)
        assert result.valid, result.reasons


def test_a_job_with_a_floor_gets_the_replicas_that_meet_it():
    from tests.kernel.test_solver import SMALL
    from tests.kernel.test_throughput_floor import with_floor

    data = copy.deepcopy(SMALL[0])  # chat (8B serve, priority 2) and a gpt2 training job on 2 H100s
    data["jobs"][0]["batch_size"] = 256  # enough sequences that a second replica adds throughput
    base = Scenario.from_dict(data)
    solved = solved_scenario(base)
    one_replica = next(part for part in heuristic(base)["jobs"] if part["id"] == "chat")
    made = evaluate(solved, {"jobs": [one_replica | {"gpus": one_replica["tensor_parallel"]}]}).jobs[0]
    floored = with_floor(base, 0, made.tokens_per_s * 1.2)  # one replica no longer meets it
    plan = heuristic(floored)
    result = evaluate(solved_scenario(floored), plan)
    chat = result.jobs[0]
    assert chat.status == "ok" and chat.gpus > one_replica["tensor_parallel"], (chat, result.reasons)
    assert chat.tokens_per_s >= made.tokens_per_s * 1.2
    assert all(job.status in ("ok", "unallocated") for job in result.jobs)
