"""IRD rule "copied example": a plan that takes the prompt's worked example answer (DESIGN.md §5).

The system prompt shows one worked example, ``fleet_rl.prompts.EXAMPLE_SCENARIO`` and its exact optimum
``example_plan()``: a serve job and a lora job, each with its GPU count, tensor parallelism, formats and
batching. A policy can reuse those numbers for the jobs of another scenario instead of planning; copied
verbatim, the answer names the example's job ids, which the invented-id rule catches, so the copy to catch
here is the one under the scenario's own ids.

The rule compares jobs, not plans, on what the kernel reads for the job's kind (``fleet_rl/kernel``:
``encode.py`` builds the rows, ``simulate.py`` reads them):

- every kind: ``gpus``, ``tensor_parallel`` and the precision map;
- train and lora (``_training``): ``activation_checkpointing``, the micro-batch the kernel runs,
  ``min(micro_batch_size, ceil(batch_size / data_parallel))`` with data parallelism
  ``max(gpus // tensor_parallel, 1)``, and ``sharding`` ("none" with one replica); ``kv_cache`` is ignored;
- serve (``_decode``): ``kv_cache``, ``None`` meaning the GPU's 16-bit format (bf16, or fp16 where bf16 is
  unsupported); ``micro_batch_size`` and ``activation_checkpointing`` are ignored.

A job takes an example job's settings when its settings, so read, equal those of the example job's part
written for it (the example job's fields read the same way, for this job). So the order of the jobs, an
ignored field, a default spelled out or a micro-batch the job's batch caps anyway changes nothing, and one
copied job in an otherwise honest plan is found. A job with 0 GPUs does not run and copies nothing.

A plan copies the example when some job of it takes an example job's settings (whole) and those are not
what the optimum does for that job: a job planned as the optimum plans it is right, whatever the example
says (so answering the example scenario itself with its answer is no copy). A job whose id is not the
scenario's is left to the invented-id rule.

To keep honest plans clear of the rule, only an example job's *distinctive* settings count: the ones that
differ, for the job they are compared on, from the plain 16-bit part a careful engineer writes without a
simulator (every module group at the GPU's 16-bit format, norms in it or in fp32, micro-batch 1 with or
without checkpointing and no sharding for training, the 16-bit KV cache for serving). The example's lora
part read as a serve job (2 GPUs, TP 2, all bf16) is such a plain part, so it is not held against serve
jobs.

Cost: the reward path asks this of every parsed plan; the first tests per job are whether its GPU count,
then its (GPU count, tensor parallelism, precision map), are an example job's (two lookups), where most
plans stop; the optimum (``SolvedScenario.optimal_parts``) is read only for a job that takes an example
job's settings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import msgspec

from fleet_rl.catalog import GPUS, MODULE_GROUPS
from fleet_rl.kernel.solver import SolvedScenario
from fleet_rl.plan_schema import JobPlan, Plan, PrecisionMap, plan_from_object
from fleet_rl.prompts import example_plan
from fleet_rl.scenario import Job, Scenario

__all__ = ["copies_example", "job_settings"]


def _sixteen_bit(scenario: Scenario) -> str:
    """The KV format a serve job gets when its part names none (``JobTable.default_kv``)."""
    return "bf16" if GPUS[scenario.cluster.gpu].supports("bf16") else "fp16"


def job_settings(part: JobPlan, job: Job, sixteen_bit: str) -> tuple | None:
    """What the kernel reads of ``part`` for ``job`` (see the module docstring), or None when it does not run.

    ``sixteen_bit`` is the scenario GPU's 16-bit format (the default KV cache)."""
    gpus, tp = part.gpus, part.tensor_parallel
    if gpus <= 0:
        return None
    if job.kind == "serve":
        kv = part.kv_cache
        return (gpus, tp, part.precision, sixteen_bit if kv is None else kv)
    data_parallel = max(gpus // tp, 1)
    micro_batch = min(part.micro_batch_size, math.ceil(job.batch_size / data_parallel))
    sharding = part.sharding if data_parallel > 1 else "none"  # one replica has nothing to shard
    return (gpus, tp, part.precision, micro_batch, part.activation_checkpointing, sharding)


def _plain_settings(settings: tuple, job: Job, sixteen_bit: str) -> bool:
    """Whether ``settings`` (of ``job_settings``) are a plain 16-bit part: nothing in them is distinctive."""
    precision: PrecisionMap = settings[2]
    for group in MODULE_GROUPS:
        value = getattr(precision, group)
        if value != sixteen_bit and not (group == "norm" and value == "fp32"):
            return False
    if job.kind == "serve":
        return settings[3] == sixteen_bit
    return settings[3] == 1 and settings[5] == "none"


def _example_index() -> tuple[frozenset[int], dict[tuple[int, int, PrecisionMap], tuple[JobPlan, ...]]]:
    """The early exit: the example jobs' GPU counts, and the example parts by (GPU count, tensor
    parallelism, precision map), which a part that takes an example job's settings shares with it."""
    parts = plan_from_object(example_plan()).jobs
    index: dict[tuple[int, int, PrecisionMap], tuple[JobPlan, ...]] = {}
    for part in parts:
        key = (part.gpus, part.tensor_parallel, part.precision)
        index[key] = (*index.get(key, ()), part)
    return frozenset(part.gpus for part in parts), index


_EXAMPLE_GPU_COUNTS, _EXAMPLE_PARTS = _example_index()  # constants: the example is fixed


def _parts(plan: Plan | Mapping) -> tuple | list | None:
    """A plan's job parts; None for a mapping that is not a valid plan."""
    if isinstance(plan, Plan):
        return plan.jobs
    try:
        return plan_from_object(plan).jobs
    except msgspec.ValidationError:
        return None


def _copied_parts(plan: Plan | Mapping, scenario: Scenario) -> list[tuple[JobPlan, Job, tuple, str]]:
    """The parts of ``plan`` that take an example job's distinctive settings, each with its scenario job, its
    settings and the scenario's 16-bit format (the optimum not yet asked)."""
    parts = _parts(plan)
    if not parts:
        return []
    copied = []
    for part in parts:
        if part.gpus not in _EXAMPLE_GPU_COUNTS:  # most parts stop here, nearly all others at the next test
            continue
        examples = _EXAMPLE_PARTS.get((part.gpus, part.tensor_parallel, part.precision))
        if examples is None:
            continue
        for job in scenario.jobs:
            if job.id == part.id:
                break
        else:
            continue  # an invented id: the invented-id rule's
        sixteen_bit = _sixteen_bit(scenario)
        settings = job_settings(part, job, sixteen_bit)
        for example in examples:
            if settings == job_settings(example, job, sixteen_bit):
                if not _plain_settings(settings, job, sixteen_bit):
                    copied.append((part, job, settings, sixteen_bit))
                break
    return copied


def copies_example(plan: Plan | Mapping, solved: SolvedScenario) -> bool:
    """Whether some job of ``plan`` takes an example job's distinctive settings where the optimum of
    ``solved`` (its scenario, solved: ``fleet_rl.kernel.solve_scenario``) does not. A mapping that is not a
    valid plan copies nothing. See the module docstring for the rule."""
    for part, job, settings, sixteen_bit in _copied_parts(plan, solved.scenario):
        best = solved.optimal_parts.get(part.id)
        if best is None or job_settings(best, job, sixteen_bit) != settings:
            return True
    return False
