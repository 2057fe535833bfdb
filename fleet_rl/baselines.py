"""Baseline planners: what a model has to beat, scored by the same kernel and rewards.

- ``even_bf16``: the plan a careful engineer writes without a simulator: GPUs split evenly (remainder to
  the highest priorities), the largest tensor parallelism that divides the share and the model's heads,
  16-bit everywhere (bf16, or fp16 where the GPU lacks bf16), norms in fp32, micro-batch 1 with activation
  checkpointing and no sharding for training. Safe, rarely optimal: it ignores memory headroom, FP8 and
  int4/int8 weights.
- ``random``: a schema-valid plan with every field drawn uniformly (GPU split included; ``sharding`` for
  training kinds only), from ``Random(seed)``; the floor any learning must clear.
- ``random_split``: every GPU handed out in a uniformly random split (each job at least one GPU while
  GPUs last), a random tensor parallelism that divides its share and the model's heads, every precision
  drawn uniformly, and only the fields the job's kind reads. Each job is placed, so the kernel says what
  went wrong (an unsupported format, memory, stability) instead of "idle": a warm-start target that
  teaches the answer format and leaves every planning decision to be learned (``sft_target: random_split``).
- ``random_feasible``: ``random_split`` drawn again (up to 256 draws, from ``Random(seed)``) until no job it
  places fails in the kernel (no unsupported format, no out-of-memory, no unstable numerics), the last draw
  if none does. A random plan among those that run: it knows what runs, not what runs well, so a warm start
  on it (``sft_target: random_feasible``) leaves GRPO the whole efficiency question with a reward that
  varies (on today's tiers nearly every ``random_split`` draw fails a job, so a policy that
  imitates it gets the same low reward for every answer and GRPO sees no signal).
- ``heuristic``: the plan a good engineer writes by hand from the prompt's facts (``fleet_rl/heuristic.py``):
  formats by job kind and GPU support, memory first, GPUs by priority.
- ``optimal``: the exact optimum (``solve``); 100 % by definition, a sanity check of the scoring path.

Each is ``fn(scenario, seed) -> plan dict`` for whole-plan scenarios; ``heuristic`` also takes the
``given_plan`` of a multi-agent request (the others' parts, which it keeps), the others plan blind to it.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.plan_schema import MICRO_BATCH_SIZES, SHARDINGS, TENSOR_PARALLEL_SIZES
from fleet_rl.scenario import Scenario

__all__ = ["BASELINES", "even_bf16", "heuristic", "optimal", "random_feasible", "random_plan", "random_split"]


def _dividing_tps(gpus: int, job) -> list[int]:
    """Tensor-parallel sizes that divide the job's GPU share and its model's attention and KV heads."""
    model = job.model_spec
    return [
        tp
        for tp in TENSOR_PARALLEL_SIZES
        if gpus % tp == 0 and model.num_attention_heads % tp == 0 and model.num_key_value_heads % tp == 0
    ]


def _largest_tp(gpus: int, job) -> int:
    return max(_dividing_tps(gpus, job))


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
        if job.kind != "serve":  # sharding is a training setting; a serving job would not run with one
            plan[-1]["sharding"] = rng.choice(SHARDINGS)
    return {"jobs": plan}


def _random_shares(count: int, jobs: int, rng: random.Random) -> list[int]:
    """``count`` GPUs split uniformly at random over ``jobs`` jobs, each at least one while GPUs last."""
    if count < jobs:
        shares = [1] * count + [0] * (jobs - count)
        rng.shuffle(shares)
        return shares
    cuts = sorted(rng.sample(range(1, count), jobs - 1))  # a uniform composition of count into jobs parts
    return [high - low for low, high in zip([0, *cuts], [*cuts, count], strict=True)]


def _random_split_plan(scenario: Scenario, rng: random.Random) -> dict:
    """One ``random_split`` draw from ``rng``."""
    plan = []
    for job, gpus in zip(
        scenario.jobs, _random_shares(scenario.cluster.count, len(scenario.jobs), rng), strict=True
    ):
        part = {
            "id": job.id,
            "gpus": gpus,
            "tensor_parallel": rng.choice(_dividing_tps(gpus, job)) if gpus else 1,
        }
        part["precision"] = {group: rng.choice(PRECISIONS) for group in MODULE_GROUPS}
        if job.kind == "serve":
            part["kv_cache"] = rng.choice(PRECISIONS)
        else:
            part |= {
                "micro_batch_size": rng.choice(MICRO_BATCH_SIZES),
                "activation_checkpointing": rng.random() < 0.5,
                "sharding": rng.choice(SHARDINGS),
            }
        plan.append(part)
    return {"jobs": plan}


def random_split(scenario: Scenario, seed: int = 0) -> dict:
    """All GPUs in a random split, random dividing TP and precisions, kind-relevant fields only."""
    return _random_split_plan(scenario, random.Random(f"fleet_rl/baselines/random_split/{seed}"))


RANDOM_FEASIBLE_DRAWS = 256


def random_feasible(scenario: Scenario, seed: int = 0) -> dict:
    """The first of up to ``RANDOM_FEASIBLE_DRAWS`` ``random_split`` draws under which no placed job fails
    (see the module docstring); the last draw when none is found."""
    from fleet_rl.kernel.batch_scoring import evaluate_batch  # the kernel imports scenarios
    from fleet_rl.solved_scenarios import solved_scenario

    rng = random.Random(f"fleet_rl/baselines/random_feasible/{seed}")
    solved = solved_scenario(scenario)
    plans = []
    for _ in range(RANDOM_FEASIBLE_DRAWS // 32):  # scored 32 at a time: the kernel is batched
        batch = [_random_split_plan(scenario, rng) for _ in range(32)]
        for plan, evaluation in zip(batch, evaluate_batch(solved, batch), strict=True):
            statuses = [job.status for job in evaluation.jobs]
            if evaluation.valid and "ok" in statuses and set(statuses) <= {"ok", "unallocated"}:
                return plan
        plans = batch
    return plans[-1]


def optimal(scenario: Scenario, seed: int = 0) -> dict:
    """The exact optimum: a copy, so a caller that edits it leaves the solved scenario's cached plan (which
    every later caller in the process reads) as it was."""
    from fleet_rl.solved_scenarios import solved_scenario

    return copy.deepcopy(solved_scenario(scenario).optimal_plan)


def heuristic(scenario: Scenario, seed: int = 0, given_plan: dict | None = None) -> dict:
    """Formats by kind and GPU, memory first, GPUs by priority (``fleet_rl/heuristic.py``); with
    ``given_plan``, around the other jobs' given parts."""
    from fleet_rl.heuristic import heuristic as plan  # it asks the kernel, which imports scenarios

    return plan(scenario, seed, given_plan=given_plan)


BASELINES: dict[str, Callable[..., dict]] = {
    "even_bf16": even_bf16,
    "heuristic": heuristic,
    "random": random_plan,
    "random_split": random_split,
    "random_feasible": random_feasible,
    "optimal": optimal,
}
