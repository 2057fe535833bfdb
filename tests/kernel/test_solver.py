"""solve(): exact against brute force, and the optimum varies with the scenario."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from fleet_rl import Scenario, make_scenario
from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel import evaluate, solve
from fleet_rl.kernel.constants import OK
from fleet_rl.kernel.simulate import PlanRows, job_values, simulate
from fleet_rl.kernel.solver import solve_scenario
from fleet_rl.plan_schema import MICRO_BATCH_SIZES, TENSOR_PARALLEL_SIZES


def brute_force_best_value(scenario: Scenario) -> float:
    """Enumerate every schema-valid option of every job (no pruning), then every GPU split."""
    solved = solve_scenario(scenario)
    table, count = solved.table, scenario.cluster.count
    precision_maps = np.array(list(itertools.product(range(len(PRECISIONS)), repeat=len(MODULE_GROUPS))))
    placements = [(g, tp) for g in range(1, count + 1) for tp in TENSOR_PARALLEL_SIZES if g % tp == 0]
    best = np.full((table.num_jobs, count + 1), -np.inf)
    best[:, 0] = np.where(table.min_tokens_per_s > 0, -table.priority, 0.0)  # idle: a missed floor costs
    reference = np.zeros(table.num_jobs)
    per_job = []
    for j in range(table.num_jobs):
        shape = (len(placements), len(precision_maps), len(MICRO_BATCH_SIZES), 2, len(PRECISIONS), 3)
        grid = np.indices(shape).reshape(len(shape), -1)
        placement = np.array(placements)[grid[0]]
        rows = PlanRows(
            job=np.full(grid.shape[1], j),
            gpus=placement[:, 0],
            tensor_parallel=placement[:, 1],
            precision=precision_maps[grid[1]],
            micro_batch_size=np.array(MICRO_BATCH_SIZES)[grid[2]],
            activation_checkpointing=grid[3].astype(bool),
            kv_cache=grid[4],
            sharding=grid[5],  # none, optimizer, full
            invalid=np.zeros(grid.shape[1], dtype=bool),
        )
        results = simulate(table, rows)
        ok = results.status == OK
        reference[j] = results.tokens_per_s[ok].max() if ok.any() else np.nan
        per_job.append((rows, results, ok))
    np.testing.assert_array_equal(reference, solved.reference_tokens_per_s)  # pruning keeps the best
    for j, (rows, results, ok) in enumerate(per_job):
        values = job_values(table, rows, results, reference)
        for g in range(1, count + 1):
            mask = ok & (rows.gpus == g)
            if mask.any():
                best[j, g] = values[mask].max()
    total = -np.inf
    for split in itertools.product(range(count + 1), repeat=table.num_jobs):
        if sum(split) <= count:
            total = max(total, sum(best[j, g] for j, g in enumerate(split)))
    return float(total)


SMALL = [
    {
        "cluster": {"gpu": "h100-sxm", "count": 2},
        "jobs": [
            {
                "id": "chat",
                "model": "llama-3.1-8b",
                "kind": "serve",
                "priority": 2,
                "seq_len": 4096,
                "batch_size": 16,
            },
            {"id": "tune", "model": "gpt2", "kind": "train", "priority": 1, "seq_len": 1024, "batch_size": 8},
        ],
    },
    {
        "cluster": {"gpu": "t4", "count": 3},
        "jobs": [
            {"id": "small", "model": "gpt2", "kind": "lora", "priority": 1, "seq_len": 512, "batch_size": 32},
            {
                "id": "serve",
                "model": "mistral-7b",
                "kind": "serve",
                "priority": 3,
                "seq_len": 2048,
                "batch_size": 4,
                "max_quality_loss": 0.02,
            },
        ],
    },
    {
        "cluster": {"gpu": "a100-40gb", "count": 4},
        "jobs": [
            {
                "id": "moe",
                "model": "mixtral-8x7b",
                "kind": "serve",
                "priority": 1,
                "seq_len": 1024,
                "batch_size": 8,
            }
        ],
    },
]


@pytest.mark.slow
@pytest.mark.parametrize("scenario_dict", SMALL, ids=["h100x2", "t4x3", "a100x4-moe"])
def test_solver_matches_brute_force(scenario_dict):
    scenario = Scenario.from_dict(scenario_dict)
    best = solve(scenario)
    assert best.objective == pytest.approx(brute_force_best_value(scenario), rel=1e-12, abs=1e-12)
    assert best.score == 1.0


@pytest.mark.parametrize("task", ["easy", "medium"])
@pytest.mark.parametrize("seed", [0, 1])
def test_solver_matches_brute_force_on_generated_scenarios(task, seed):
    """Generated scenarios shrunk to ≤ 2 GPUs and 2 jobs so brute force stays fast."""
    data = make_scenario(task, seed).to_dict()
    data["cluster"]["count"] = min(data["cluster"]["count"], 2)
    data["jobs"] = data["jobs"][:2]
    scenario = Scenario.from_dict(data)
    assert solve(scenario).objective == pytest.approx(brute_force_best_value(scenario), rel=1e-12, abs=1e-12)


def test_the_optimal_plan_varies_across_seeds():
    """At least 15 distinct optimal plans (GPU split, TP, precision maps) over 60 scenarios."""
    signatures = set()
    for task in ("easy", "medium", "hard"):
        for seed in range(20):
            plan = solve(make_scenario(task, seed)).plan
            signatures.add(
                json.dumps(
                    [(job["gpus"], job["tensor_parallel"], job["precision"]) for job in plan["jobs"]],
                    sort_keys=True,
                )
            )
    assert len(signatures) >= 15


def test_no_fixed_answer_is_near_optimal_everywhere():
    """Take the optimum of one scenario, transplant its per-kind choices into others: it must lose."""
    scores = []
    for seed in range(30):
        scenario = make_scenario("medium", seed)
        donor = solve(make_scenario("medium", seed + 1000)).plan["jobs"][0]
        share = scenario.cluster.count // len(scenario.jobs)
        tp = max(t for t in (1, 2, 4, 8) if share % t == 0) if share else 1
        plan = {
            "jobs": [{**donor, "id": job.id, "gpus": share, "tensor_parallel": tp} for job in scenario.jobs]
        }
        scores.append(evaluate(scenario, plan).score)
    assert np.mean(scores) < 0.7


def test_solve_is_deterministic_and_keeps_nothing():
    scenario = make_scenario("hard", 3)
    first, second = solve_scenario(scenario), solve_scenario(scenario)
    assert first is not second  # a pure function: solved again, not looked up
    assert solve(first) == solve(second) == solve(scenario)
    assert first.optimal_plan == second.optimal_plan and first.optimal_objective == second.optimal_objective
