"""Where one replica of a job fits: per weight format, the smallest tensor parallelism that holds it.

The ``sized`` prompt style (``fleet_rl/prompts.py``) states these per job, so that a small policy compares
numbers the prompt already holds instead of doing the memory arithmetic of the rules (DESIGN.md §4,
"Memory per GPU") in its head. They are what an engineer reads off a memory calculator, nothing more: the
kernel's memory and quality verdict on one replica of the job alone on the cluster
(``gpus == tensor_parallel``), at the setting that needs least memory for that format. Nothing is read
from the optimum or from the kernel's throughput, so they say what crashes, never what is best.

A format here is a profile a plan can write directly:

- ``bf16`` (``fp16`` on a GPU without bf16): every module group and the KV cache at 16 bits;
- ``fp8`` (GPUs with fp8 only): attention and mlp in fp8, the other groups at 16 bits, an fp8 KV cache;
- ``int8`` / ``int4`` (serve and lora jobs, whose weights are frozen; ``int8`` only where the GPU lacks
  fp8, since fp8 holds the same bytes): attention and mlp weights at 8 or 4 bits, the other groups at 16
  bits, an 8-bit KV cache (fp8 where the GPU has it, else int8).

Training jobs (train, lora) are sized at micro-batch 1 with activation checkpointing, serve jobs with one
replica holding the whole batch's KV cache; more replicas never need more memory per GPU. At that tensor
parallelism a training job's verdict also names the largest micro-batch (up to its batch_size, beyond
which the kernel's micro-batch stops growing) at which the replica fits without activation checkpointing,
or ``None`` where it fits only with it: the ``sized_batching`` prompt states it (issue #68: an imitator of
the heuristic on ``sized`` wrote ``"activation_checkpointing": false`` at the stated tensor parallelism,
where the prompt promised a fit only with checkpointing, and crashed).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleet_rl.catalog import MODULE_GROUPS, GPUSpec
from fleet_rl.kernel import SolvedScenario, evaluate
from fleet_rl.plan_schema import MICRO_BATCH_SIZES, TENSOR_PARALLEL_SIZES
from fleet_rl.scenario import Job, Scenario
from fleet_rl.solved_scenarios import solved_scenario

__all__ = ["ReplicaFit", "fit_part", "part_status", "replica_fits", "tensor_parallel_sizes"]

_LOW_GROUPS = ("attention", "mlp")  # the groups a smaller format applies to; the rest stay at 16 bits


@dataclass(frozen=True, slots=True)
class ReplicaFit:
    """One format's verdict for one job: ``tensor_parallel`` is the smallest that holds one replica, or
    ``None`` with ``reason`` ``"oom"`` (no tensor parallelism on this cluster holds it) or ``"quality"``
    (the format's quality loss is over the job's ``max_quality_loss`` at every size that holds it).
    ``micro_batch_size`` (train and lora jobs with a ``tensor_parallel``): the largest micro-batch at which
    that replica fits without activation checkpointing, ``None`` where it fits only with it."""

    fmt: str
    tensor_parallel: int | None
    reason: str = ""
    micro_batch_size: int | None = None


def tensor_parallel_sizes(job: Job, gpu_count: int) -> list[int]:
    """The tensor parallel sizes a replica of ``job`` may use on ``gpu_count`` GPUs: at most the GPUs, and
    dividing the model's attention and KV heads (the rule the kernel checks)."""
    heads = (job.model_spec.num_attention_heads, job.model_spec.num_key_value_heads)
    return [tp for tp in TENSOR_PARALLEL_SIZES if tp <= gpu_count and all(h % tp == 0 for h in heads)]


def part_status(solved: SolvedScenario, part: dict) -> str:
    """The kernel's verdict on one job's part, alone on the cluster."""
    return evaluate(solved, {"jobs": [part]}).jobs[solved.job_index[part["id"]]].status


def _formats(job: Job, half: str, fp8: bool) -> list[str]:
    formats = [half, "fp8"] if fp8 else [half]
    if job.kind != "train":  # frozen weights may be stored weight-only
        formats += ["int4"] if fp8 else ["int8", "int4"]
    return formats


def _part(job: Job, fmt: str, tensor_parallel: int, half: str, fp8: bool) -> dict:
    """One replica of ``job`` at format profile ``fmt`` (see the module docstring)."""
    precision = dict.fromkeys(MODULE_GROUPS, half) | dict.fromkeys(_LOW_GROUPS, fmt)
    part = {"id": job.id, "gpus": tensor_parallel, "tensor_parallel": tensor_parallel, "precision": precision}
    if job.kind == "serve":
        return part | {"kv_cache": half if fmt == half else ("fp8" if fp8 else "int8")}
    return part | {"micro_batch_size": 1, "activation_checkpointing": True}


def fit_part(job: Job, fit: ReplicaFit, gpu: GPUSpec) -> dict:
    """The part a ``Fits`` entry stands for: one replica of ``job`` on ``gpu`` at ``fit``'s format and
    tensor parallelism, sized as this module sizes it (``fit.tensor_parallel`` must not be ``None``)."""
    if fit.tensor_parallel is None:
        raise ValueError(f"{fit.fmt} fits no replica of {job.id!r}: there is no part to write")
    half = "bf16" if gpu.supports("bf16") else "fp16"
    return _part(job, fit.fmt, fit.tensor_parallel, half, gpu.supports("fp8"))


def _largest_micro_batch(solved: SolvedScenario, part: dict) -> int | None:
    """The largest micro-batch at which a training ``part`` (sized with checkpointing) fits without it, up
    to its job's batch_size; ``None`` for a serve part or where none does. Memory grows with the
    micro-batch, so the search stops at the first that does not fit."""
    if "micro_batch_size" not in part:
        return None
    batch = solved.scenario.jobs[solved.job_index[part["id"]]].batch_size
    largest = None
    for micro_batch in (size for size in MICRO_BATCH_SIZES if size == 1 or size <= batch):
        candidate = part | {"micro_batch_size": micro_batch, "activation_checkpointing": False}
        if part_status(solved, candidate) not in ("ok", "too_slow"):
            break
        largest = micro_batch
    return largest


def _fit(solved: SolvedScenario, job: Job, fmt: str, half: str, fp8: bool) -> ReplicaFit:
    reason = "oom"
    for tensor_parallel in tensor_parallel_sizes(job, solved.gpu_count):
        part = _part(job, fmt, tensor_parallel, half, fp8)
        status = part_status(solved, part)
        # "fits" is about memory, not the job's floor: more replicas raise a training job's throughput, but
        # a serving job's fixed batch is split over its replicas, so more of them need not meet its floor
        if status in ("ok", "too_slow"):
            return ReplicaFit(fmt, tensor_parallel, micro_batch_size=_largest_micro_batch(solved, part))
        if status == "unstable":
            reason = "quality"
    return ReplicaFit(fmt, None, reason)


def replica_fits(scenario: Scenario | SolvedScenario) -> dict[str, list[ReplicaFit]]:
    """Per job id (scenario order), each format's smallest tensor parallelism that holds one replica."""
    solved = scenario if isinstance(scenario, SolvedScenario) else solved_scenario(scenario)
    gpu = solved.scenario.gpu
    half = "bf16" if gpu.supports("bf16") else "fp16"
    fp8 = gpu.supports("fp8")
    return {
        job.id: [_fit(solved, job, fmt, half, fp8) for fmt in _formats(job, half, fp8)]
        for job in solved.scenario.jobs
    }
