"""Baseline planners: what a model has to beat, scored by the same kernel and rewards.

- ``even_bf16``: the plan a careful engineer writes without a simulator: GPUs split evenly (remainder to
  the highest priorities), the largest tensor parallelism that divides the share and the model's heads,
  16-bit everywhere (bf16, or fp16 where the GPU lacks bf16), norms in fp32, micro-batch 1 with activation
  checkpointing for training. Safe, rarely optimal: it ignores memory headroom, FP8 and int4/int8 weights.
- ``random``: a schema-valid plan with every field drawn uniformly (GPU split included), from
  ``Random(seed)``; the floor any learning must clear.
- ``optimal``: the exact optimum (``solve``); 100 % by definition, a sanity check of the scoring path.

Each is ``fn(scenario, seed) -> plan dict`` for whole-plan scenarios.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.plan_schema import MICRO_BATCH_SIZES, TENSOR_PARALLEL_SIZES
from fleet_rl.scenario import Scenario

__all__ = ["BASELINES", "even_bf16", "optimal", "random_plan"]


def _largest_tp(gpus: int, job) -> int:
    model = job.model_spec
    return max(
        tp
        for tp in TENSOR_PARALLEL_SIZES
        if gpus % tp == 0 and model.num_attention_heads % tp == 0 and model.num_key_value_heads % tp == 0
    )


def even_bf16(scenario: Scenario, seed: int = 0) -> dict:
    """Even GPU split, largest dividing TP, 16-bit formats with fp32 norms (see the module docstring)."""
    count, jobs = scenario.cluster.count, scenario.jobs
    share = [count // len(jobs)] * len(jobs)
    by_priority = sorted(range(len(jobs)), key=lambda i: -jobs[i].priority)
    for i in by_priority[: count % len(jobs)]:
        share[i] += 1
    half = "bf16" if scenario.gpu.supports("bf16") else "fp16"
    plan = []
    for job, gpus in zip(jobs, share, strict=True):
        precision = {group: half for group in MODULE_GROUPS} | {"norm": "fp32"}
        part = {"id": job.id, "gpus": gpus, "tensor_parallel": _largest_tp(gpus, job) if gpus else 1}
        part["precision"] = precision
        if job.kind == "serve":
            part["kv_cache"] = half
        else:
            part |= {"micro_batch_size": 1, "activation_checkpointing": True}
        plan.append(part)
    return {"jobs": plan}


def random_plan(scenario: Scenario, seed: int = 0) -> dict:
    """Every field uniform at random (schema-valid; may be infeasible), from ``Random(seed)``."""
    rng = random.Random(f"fleet_rl/baselines/random/{seed}")
    left = scenario.cluster.count
    plan = []
    for job in scenario.jobs:
        gpus = rng.randint(0, left)
        left -= gpus
        plan.append(
            {
                "id": job.id,
                "gpus": gpus,
                "tensor_parallel": rng.choice([tp for tp in TENSOR_PARALLEL_SIZES if gpus % tp == 0] or [1]),
                "precision": {group: rng.choice(PRECISIONS) for group in MODULE_GROUPS},
                "micro_batch_size": rng.choice(MICRO_BATCH_SIZES),
                "activation_checkpointing": rng.random() < 0.5,
                "kv_cache": rng.choice(PRECISIONS),
            }
        )
    return {"jobs": plan}


def optimal(scenario: Scenario, seed: int = 0) -> dict:
    """The exact optimum."""
    from fleet_rl.kernel.solver import solve_scenario

    return solve_scenario(scenario).optimal_plan


BASELINES: dict[str, Callable[[Scenario, int], dict]] = {
    "even_bf16": even_bf16,
    "random": random_plan,
    "optimal": optimal,
}
