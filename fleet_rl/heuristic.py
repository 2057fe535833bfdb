"""The ``heuristic`` baseline: the plan a good engineer writes by hand from the prompt's facts.

It knows what the prompt says (``fleet_rl/prompts.py``: the rules, the memory formulas, the objective) and
nothing the kernel computes about speed:

1. **Formats by job kind and GPU support.** Training is compute-bound: fp8 GEMMs (attention, mlp) where the
   GPU has fp8, the 16-bit format (bf16, or fp16 where the GPU lacks bf16) elsewhere, norms in fp32. A lora
   job trains the same way; its frozen base may drop to int8, then int4 (attention, mlp) when it would not
   fit otherwise. Decoding is memory-bound, so a serve job streams fewer weight bytes: fp8 weights and KV
   cache where the GPU has fp8, else int8 weight-only attention and mlp with an int8 KV cache; embedding,
   norms and lm_head (the most quality-sensitive group) stay 16-bit; all 16-bit if the job's
   ``max_quality_loss`` does not allow that.
2. **Memory first.** Per job, the first of those formats, then the smallest tensor parallelism (dividing the
   model's heads), then for training the largest micro-batch (4, 2, 1) without activation checkpointing,
   else micro-batch 1 with it, at which one replica fits. "Fits" is the kernel's memory and quality verdict
   on that part (status ``ok``), used as an engineer uses a memory calculator; the throughput it computes is
   never read. More replicas never need more memory per GPU (a replica's share of the batch only shrinks).
3. **The split.** Each job that can run gets one replica (a job with a ``min_tokens_per_s`` gets the fewest
   replicas at which the kernel says it meets it, as an engineer measures an SLO before committing to it),
   jobs with a floor first (missing one costs its priority), then by priority; when they do not all fit,
   the rest wait (0 GPUs). The other GPUs go out one replica at a
   time to the job whose priority × GPUs^0.75 grows most (the prompt's objective: priority × throughput
   share^0.75, throughput roughly proportional to GPUs).

On a multi-agent request it is given the other jobs' parts (``given_plan``), as the prompt gives them: it
keeps them and plans the rest within the GPUs they leave (``fleet_rl.training.dataset.planner_answer``).

``heuristic(scenario, seed)`` is deterministic (the seed is unused). It is the bar between ``even_bf16``
(an even split in 16 bits) and ``optimal``: what learning must win beyond it needs reasoning about this
cluster and these jobs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from fleet_rl.catalog import MODULE_GROUPS
from fleet_rl.floor_fit import fewest_gpus_that_run
from fleet_rl.kernel import SolvedScenario
from fleet_rl.kernel.constants import UTILITY_EXPONENT
from fleet_rl.replica_fit import part_status, tensor_parallel_sizes
from fleet_rl.scenario import Job, Scenario
from fleet_rl.solved_scenarios import solved_scenario

__all__ = ["heuristic"]

TRAINING_BATCHING = ((4, False), (2, False), (1, False), (1, True))  # (micro-batch, checkpointing)


def _formats(job: Job, half: str, fp8: bool) -> list[tuple[dict, str | None]]:
    """(precision map, KV format) candidates for ``job``, most preferred first."""
    sixteen = dict.fromkeys(MODULE_GROUPS, half)
    if job.kind == "serve":
        low = "fp8" if fp8 else "int8"
        return [(sixteen | {"attention": low, "mlp": low}, low), (sixteen, half)]
    gemm = "fp8" if fp8 else half
    trained = sixteen | {"attention": gemm, "mlp": gemm, "norm": "fp32"}
    if job.kind == "train":
        return [(trained, None)]
    frozen = [trained | {"attention": low, "mlp": low} for low in ("int8", "int4")]
    return [(trained, None), *((precision, None) for precision in frozen)]


def _replicas(solved: SolvedScenario, job: Job, half: str, fp8: bool) -> Iterator[dict]:
    """The job's parts on the fewest GPUs at which they fit (one replica), most preferred first: formats,
    then tensor parallelism, then (training) micro-batch and checkpointing; "fits" ignores the job's floor,
    which step 3 measures."""
    tps = tensor_parallel_sizes(job, solved.gpu_count)
    for precision, kv in _formats(job, half, fp8):
        for tp in tps:
            part = {"id": job.id, "gpus": tp, "tensor_parallel": tp, "precision": precision}
            if job.kind == "serve":
                candidates = [part | {"kv_cache": kv}]
            else:
                candidates = [
                    part | {"micro_batch_size": micro, "activation_checkpointing": checkpointing}
                    for micro, checkpointing in TRAINING_BATCHING
                ]
            for candidate in candidates:
                if part_status(solved, candidate) in ("ok", "too_slow"):
                    yield candidate


def heuristic(scenario: Scenario, seed: int = 0, given_plan: Mapping | None = None) -> dict:
    """Formats by kind, memory first, GPUs by priority (see the module docstring).

    With ``given_plan`` (a multi-agent request: the other jobs' parts, as the prompt shows them), those
    parts stay as given and only the other jobs are planned, within the GPUs the given parts leave."""
    solved = solved_scenario(scenario)
    half = "bf16" if scenario.gpu.supports("bf16") else "fp16"
    fp8 = scenario.gpu.supports("fp8")
    given = {part["id"]: dict(part) for part in (given_plan or {}).get("jobs", [])}
    planned = [job for job in scenario.jobs if job.id not in given]
    parts: dict[str, dict] = {}  # the placed jobs' parts
    priority = {job.id: job.priority for job in planned}
    free = scenario.cluster.count - sum(int(part.get("gpus", 0)) for part in given.values())
    placed: dict[str, int] = {}
    # one replica each: jobs with a floor first (missing one costs its priority), then by priority; a job
    # without a floor takes its first part that fits, one with a floor its first that meets the floor
    for job in sorted(planned, key=lambda job: (job.min_tokens_per_s is None, -job.priority)):
        for part in _replicas(solved, job, half, fp8):
            gpus = fewest_gpus_that_run(solved, part, free)
            if gpus is not None:
                parts[job.id], placed[job.id] = part, gpus
                free -= gpus
                break
            if job.min_tokens_per_s is None:
                break  # more GPUs would not make it fit

    def gain(job_id: str) -> float:
        gpus, step = placed[job_id], parts[job_id]["tensor_parallel"]
        return priority[job_id] * ((gpus + step) ** UTILITY_EXPONENT - gpus**UTILITY_EXPONENT)

    while True:
        growable = [job_id for job_id in placed if parts[job_id]["tensor_parallel"] <= free]
        if not growable:
            break
        best = max(growable, key=gain)
        placed[best] += parts[best]["tensor_parallel"]
        free -= parts[best]["tensor_parallel"]
    plan = []
    for job in scenario.jobs:
        if job.id in given:
            plan.append(given[job.id])
            continue
        if job.id in placed:
            plan.append(parts[job.id] | {"gpus": placed[job.id]})
        else:  # waits: no GPUs
            idle = {"id": job.id, "gpus": 0, "tensor_parallel": 1}
            plan.append(idle | {"precision": dict.fromkeys(MODULE_GROUPS, half)})
    return {"jobs": plan}
