"""The default training reward: parse → batched kernel → breadcrumbs → IRD override, in [0, 1].

TRL signature: ``fleet_reward(completions, scenario, **kwargs) -> list[float]``; ``scenario`` is the dataset
column of scenario JSON strings (one per completion); ``log_metric`` (if TRL passes it) receives rates.

Reward levels (the ordering DESIGN.md §5 requires; tests/rewards/test_fleet_reward.py checks it):
- malformed: 0.0 (no JSON / not text / too large / too deep), 0.002 (JSON that does not decode),
  0.005 (decodes but is not a valid plan);
- degenerate (IRD, ``rewards/ird.py``): exactly 0.01;
- schema-valid plan inconsistent with the cluster (over-allocated, TP not dividing GPUs): 0.015;
- infeasible (some placed job does not run, or none runs): 0.02 + breadcrumbs ≤ 0.25, with breadcrumbs
  0.08 × share of jobs placed + 0.08 × share placed that fit in memory + 0.07 × share that run (ok);
- feasible (every placed job runs and the objective is positive): 0.3 + 0.7 × kernel score, so the optimum
  gets 1.0 and the reward rises with the score.
"""

from __future__ import annotations

import functools

import numpy as np

from fleet_rl.kernel.constants import INVALID, OK, OOM, STATUSES, UNALLOCATED, UNSTABLE, UNSUPPORTED
from fleet_rl.kernel.evaluate import score_batch
from fleet_rl.kernel.solver import solve_scenario
from fleet_rl.scenario import Scenario
from rewards.ird import IRD_REWARD, degenerate_plans
from rewards.parsing import BAD_JSON, SCHEMA, SEVERAL_PLANS, parse_plan

MALFORMED_REWARD = {BAD_JSON: 0.002, SCHEMA: 0.005}  # every other parse error: 0.0
INCONSISTENT_REWARD = 0.015
INFEASIBLE_BASE, PLACED_CREDIT, FITS_CREDIT, RUNS_CREDIT = 0.02, 0.08, 0.08, 0.07
FEASIBLE_BASE = 0.3


@functools.lru_cache(maxsize=4096)
def scenario_from_json(text: str) -> Scenario:
    """Decoded scenarios are cached: a GRPO group shares one scenario across its completions."""
    return Scenario.from_json(text)


def _as_scenario(value) -> Scenario:
    return value if isinstance(value, Scenario) else scenario_from_json(value)


def fleet_reward(completions, scenario, **kwargs) -> list[float]:
    """Composite reward in [0, 1] for each completion (see the module docstring)."""
    scenarios = [_as_scenario(value) for value in scenario]
    parsed = [parse_plan(completion) for completion in completions]
    solved = [solve_scenario(s) for s in scenarios]
    rewards = np.zeros(len(parsed))
    ird = np.array([result.error == SEVERAL_PLANS for result in parsed], dtype=bool)
    valid_index = [i for i, result in enumerate(parsed) if result.plan is not None]
    for i, result in enumerate(parsed):
        if result.plan is None:
            rewards[i] = MALFORMED_REWARD.get(result.error, 0.0)
    percent_of_optimum = np.zeros(len(parsed))
    status_counts = np.zeros(len(STATUSES))
    if valid_index:
        scored = score_batch([solved[i] for i in valid_index], [parsed[i].plan for i in valid_index])
        sizes = np.array([solved[i].table.num_jobs for i in valid_index])
        plan_of_row = np.repeat(np.arange(len(valid_index)), sizes)
        status = scored.results.status
        status_counts = np.bincount(status, minlength=len(STATUSES))

        def count(mask):
            return np.bincount(plan_of_row, weights=mask.astype(float), minlength=len(valid_index))

        placed = (status != UNALLOCATED) & (status != INVALID)
        runs = status == OK
        placed_count = count(placed)
        all_placed_run = count(placed & ~runs) == 0
        feasible = scored.valid & all_placed_run & (placed_count > 0) & (scored.objective > 0)
        infeasible = (
            INFEASIBLE_BASE
            + PLACED_CREDIT * placed_count / sizes
            + FITS_CREDIT * count(placed & (status != OOM)) / np.maximum(placed_count, 1)
            + RUNS_CREDIT * count(runs) / sizes
        )
        value = np.where(feasible, FEASIBLE_BASE + (1.0 - FEASIBLE_BASE) * scored.score, infeasible)
        value = np.where(scored.valid, value, INCONSISTENT_REWARD)
        rewards[valid_index] = value
        optimal_gpus = np.concatenate([solved[i].optimal_gpus for i in valid_index])
        ird[valid_index] = degenerate_plans(scored, optimal_gpus, plan_of_row)
        percent_of_optimum[valid_index] = 100.0 * scored.score
    rewards[ird] = IRD_REWARD
    log_metric = kwargs.get("log_metric")
    if callable(log_metric) and len(parsed):
        rows = max(status_counts.sum(), 1.0)
        log_metric("kernel/valid_json_rate", float(np.mean([r.plan is not None for r in parsed])))
        log_metric("kernel/oom_rate", float(status_counts[OOM] / rows))
        log_metric("kernel/unstable_rate", float(status_counts[UNSTABLE] / rows))
        log_metric("kernel/unsupported_rate", float(status_counts[UNSUPPORTED] / rows))
        log_metric("kernel/ird_rate", float(ird.mean()))
        log_metric("kernel/percent_of_optimum", float(percent_of_optimum.mean()))
    return [float(r) for r in rewards]


REWARD_FUNCS = {"fleet_reward": fleet_reward}
"""Reward functions by name, for configs (``reward_funcs: [fleet_reward]``)."""
