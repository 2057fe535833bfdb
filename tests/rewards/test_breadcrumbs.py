"""Breadcrumbs: an answer that fails earns credit graded by how close the kernel says it came,
and no exploit closed before opens again.

- the credit of one job (``rewards.breadcrumbs.job_credit``) is monotone in each distance and keeps the
  order categorical fault < idle < near miss < runs;
- the issue's one-job examples, through ``fleet_reward``: over memory by a little beats over by a lot, near
  the floor beats far under it, a format that breaks ranks below idle, and giving up ranks below all;
- an over-allocated whole plan ranks above giving up, graded by how far over it asks;
- over generated scenarios and plans: making any one job run never lowers the reward, a plan under which
  nothing runs stays in the lower half of the not-feasible band, an honest attempt that places jobs ranks
  above giving up, and any feasible plan beats any infeasible one.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rl import Scenario, make_scenario
from fleet_rl.baselines import random_plan, random_split
from fleet_rl.kernel import evaluate, solve
from fleet_rl.kernel.distances import RowDistances
from fleet_rl.solved_scenarios import solved_scenario
from rewards import IRD_REWARD, fleet_reward, score_completions
from rewards.breadcrumbs import IDLE_CREDIT, NEAR_MISS_CREDIT, job_credit
from rewards.fleet_reward import FEASIBLE_BASE, INFEASIBLE_BASE, PROGRESS_CREDIT

LOWER_HALF_TOP = INFEASIBLE_BASE + PROGRESS_CREDIT / 2  # the middle of the not-feasible band: 0.135
WHOLE_PLAN_TASKS = ("easy", "medium", "hard")
BF16 = {"embedding": "bf16", "attention": "bf16", "mlp": "bf16", "norm": "fp32", "lm_head": "bf16"}


def credit(memory_ratio: float, floor_ratio: float, broken: int, runs=False, placed=True) -> float:
    distances = RowDistances(np.array([memory_ratio]), np.array([floor_ratio]), np.array([broken]))
    return float(job_credit(np.array([runs]), np.array([placed]), distances)[0])


distance = st.tuples(
    st.floats(0.05, 20.0), st.floats(0.0, 1.5), st.integers(0, 6)
)  # memory ratio, floor ratio, broken settings


@settings(max_examples=300, deadline=None)
@given(distance, distance)
def test_job_credit_is_monotone_in_each_distance(a, b):
    memory_a, floor_a, broken_a = a
    memory_b, floor_b, broken_b = b
    # b is at least as far from running as a in every measure: its credit is no higher
    worse = (max(memory_a, memory_b), min(floor_a, floor_b), max(broken_a, broken_b))
    assert credit(*worse) <= credit(*a) + 1e-15


@settings(max_examples=300, deadline=None)
@given(distance)
def test_categorical_fault_below_idle_below_near_miss_below_runs(case):
    memory_ratio, floor_ratio, broken = case
    failing = credit(memory_ratio, floor_ratio, broken)
    idle = credit(0.0, 1.0, 0, placed=False)
    assert idle == pytest.approx(IDLE_CREDIT)
    if broken:
        assert failing <= IDLE_CREDIT / 2  # a categorical fault: at most half of idling
    elif memory_ratio > 1 or floor_ratio < 1:  # a near miss
        assert IDLE_CREDIT <= failing < NEAR_MISS_CREDIT
        if floor_ratio > 1e-9:  # closeness above rounding: strictly above idling
            assert failing > IDLE_CREDIT
    assert credit(memory_ratio, floor_ratio, broken, runs=True) == 1.0


def test_a_near_miss_is_graded_by_its_distance():
    assert credit(1.02, 1.0, 0) > credit(4.0, 1.0, 0) > IDLE_CREDIT  # over memory by 2 % vs 300 %
    assert credit(0.5, 0.9, 0) > credit(0.5, 0.1, 0) > IDLE_CREDIT  # at 90 % of the floor vs 10 %
    assert credit(0.5, 1.0, 1) > credit(0.5, 1.0, 2) > credit(3.0, 1.0, 2) > 0  # each further fault costs


# --- the one-job scenario, through fleet_reward -------------------------------------------------


def serve_scenario(batch_size: int, min_tokens_per_s: float | None = None) -> Scenario:
    job = {"id": "chat", "model": "llama-3.1-8b", "kind": "serve", "priority": 1, "seq_len": 4096}
    job["batch_size"] = batch_size
    if min_tokens_per_s is not None:
        job["min_tokens_per_s"] = min_tokens_per_s
    return Scenario.from_dict({"cluster": {"gpu": "l4", "count": 1}, "jobs": [job]})


def serve_plan(**changes) -> dict:
    return {"jobs": [{"id": "chat", "gpus": 1, "tensor_parallel": 1, "precision": BF16, **changes}]}


def reward(scenario: Scenario, plan: dict | str) -> float:
    text = plan if isinstance(plan, str) else json.dumps(plan)
    return fleet_reward([text], [scenario.to_json()])[0]


def test_over_memory_by_a_little_beats_over_by_a_lot():
    ratios, rewards = [], []
    for batch_size in (16, 32, 64, 128):  # 16 GB of bf16 weights + 0.5 GB of KV cache per sequence
        scenario = serve_scenario(batch_size)
        job = evaluate(solved_scenario(scenario), serve_plan()).jobs[0]
        assert job.status == "oom"
        ratios.append(job.memory_per_gpu_gb / job.memory_capacity_gb)
        rewards.append(reward(scenario, serve_plan()))
    assert ratios == sorted(ratios) and ratios[0] < 1.5 and ratios[-1] > 3.0
    assert rewards == sorted(rewards, reverse=True) and len(set(rewards)) == len(rewards)
    assert all(IRD_REWARD < value < LOWER_HALF_TOP for value in rewards)


def test_near_the_floor_beats_far_under_it_and_giving_up_ranks_last():
    tokens_per_s = evaluate(solved_scenario(serve_scenario(4)), serve_plan()).jobs[0].tokens_per_s
    assert tokens_per_s > 0
    by_share = {}
    for share in (0.95, 0.9, 0.5, 0.1):  # the plan makes this share of the job's floor
        scenario = serve_scenario(4, tokens_per_s / share)
        assert evaluate(solved_scenario(scenario), serve_plan()).jobs[0].status == "too_slow"
        by_share[share] = reward(scenario, serve_plan())
    assert by_share[0.95] > by_share[0.9] > by_share[0.5] > by_share[0.1]
    scenario = serve_scenario(4, tokens_per_s / 0.9)
    unstable = reward(scenario, serve_plan(precision={**BF16, "norm": "int4"}))  # a format that diverges
    over_memory = reward(serve_scenario(128, tokens_per_s / 0.9), serve_plan())
    gave_up = reward(scenario, {"jobs": []})
    assert gave_up == IRD_REWARD < unstable < over_memory < by_share[0.9] < LOWER_HALF_TOP


def test_an_over_allocated_plan_ranks_above_giving_up_graded_by_how_far_over():
    scenario = make_scenario("medium", 3)
    optimal = solve(solved_scenario(scenario)).plan
    placed = next(job for job in optimal["jobs"] if job["gpus"] > 0)
    rewards = []
    for extra in (1, 4, 20):
        gpus = placed["gpus"] + extra * placed["tensor_parallel"]
        plan = {"jobs": [{**job, "gpus": gpus} if job is placed else job for job in optimal["jobs"]]}
        assert not evaluate(solved_scenario(scenario), plan).valid
        rewards.append(reward(scenario, plan))
    assert IRD_REWARD < rewards[2] < rewards[1] < rewards[0] < INFEASIBLE_BASE


# --- properties over generated scenarios ----------------------------------------------------------------


def break_job(scenario, job: dict) -> dict:
    """A part of ``job`` that cannot run: an fp8 norm diverges in every kind."""
    return {**job, "precision": {**job["precision"], "norm": "fp8"}}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(WHOLE_PLAN_TASKS), st.integers(0, 10_000), st.integers(0, 2**16))
def test_making_any_one_job_run_never_lowers_the_reward(task, seed, mask):
    """Closeness cannot be farmed: from the optimum with some jobs broken, restoring any one raises it."""
    scenario = make_scenario(task, seed)
    optimal = solve(solved_scenario(scenario)).plan
    running = [job["id"] for job in optimal["jobs"] if job["gpus"] > 0]
    broken_ids = {job_id for k, job_id in enumerate(running) if mask >> k & 1} or set(running[:1])
    broken = {"jobs": [break_job(scenario, j) if j["id"] in broken_ids else j for j in optimal["jobs"]]}
    before = reward(scenario, broken)
    for job_id in broken_ids:
        restored = {
            "jobs": [
                j if j["id"] == job_id or j["id"] not in broken_ids else break_job(scenario, j)
                for j in optimal["jobs"]
            ]
        }
        assert reward(scenario, restored) >= before


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(WHOLE_PLAN_TASKS), st.integers(0, 10_000))
def test_honest_attempts_rank_above_giving_up_and_nothing_running_stays_in_the_lower_half(task, seed):
    scenario = make_scenario(task, seed)
    plans = [random_split(scenario, k) for k in range(8)] + [random_plan(scenario, k) for k in range(8)]
    texts = [json.dumps(plan) for plan in plans]
    rewards = fleet_reward(texts, [scenario.to_json()] * len(texts))
    scores = score_completions(texts, [scenario.to_json()] * len(texts))
    gave_up = reward(scenario, {"jobs": []})
    for i, plan in enumerate(plans):
        places = any(job["gpus"] > 0 for job in plan["jobs"])
        if scores.valid[i] and places and not scores.ird[i]:
            assert rewards[i] > gave_up == IRD_REWARD
        if scores.valid[i] and scores.runs_share[i] == 0:
            assert rewards[i] < LOWER_HALF_TOP


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(WHOLE_PLAN_TASKS), st.integers(0, 10_000))
def test_any_feasible_plan_beats_any_infeasible_one(task, seed):
    scenario = make_scenario(task, seed)
    optimal = solve(solved_scenario(scenario)).plan
    plans = [
        optimal,
        *(random_split(scenario, k) for k in range(12)),
        *(random_plan(scenario, k) for k in range(12)),
    ]
    texts = [json.dumps(plan) for plan in plans]
    rewards = np.array(fleet_reward(texts, [scenario.to_json()] * len(texts)))
    feasible = score_completions(texts, [scenario.to_json()] * len(texts)).feasible
    assert feasible[0] and rewards[0] == pytest.approx(1.0)
    assert rewards[feasible].min() >= FEASIBLE_BASE > rewards[~feasible].max(initial=0.0)
