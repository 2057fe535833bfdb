"""Turn plan objects (dicts, JSON text, ``Plan`` structs, or garbage) into ``PlanRows`` plus reason codes.

This is the only per-plan Python in the kernel: strict schema validation by msgspec, then consistency with
the scenario (known and unique job ids, TP dividing the GPU count, the cluster not over-allocated).
It never raises on a bad plan; it records reasons as ``"code: human text"`` strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import numpy as np

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel.simulate import PlanRows
from fleet_rl.plan_schema import Plan, plan_from_json, plan_from_object

PRECISION_CODE = {name: code for code, name in enumerate(PRECISIONS)}
_PARSE_ERRORS = (
    msgspec.ValidationError,
    msgspec.DecodeError,
    RecursionError,
    TypeError,
    ValueError,
    OverflowError,
)


@dataclass
class RowBuffer:
    """Python lists that grow one row per (plan, job) and become a ``PlanRows`` at the end."""

    job: list[int] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    tensor_parallel: list[int] = field(default_factory=list)
    precision: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    micro_batch_size: list[int] = field(default_factory=list)
    activation_checkpointing: list[bool] = field(default_factory=list)
    kv_cache: list[int] = field(default_factory=list)
    invalid: list[bool] = field(default_factory=list)

    def to_rows(self) -> PlanRows:
        return PlanRows(
            job=np.array(self.job, dtype=np.int64),
            gpus=np.array(self.gpus, dtype=np.int64),
            tensor_parallel=np.array(self.tensor_parallel, dtype=np.int64),
            precision=np.array(self.precision, dtype=np.int64).reshape(-1, len(MODULE_GROUPS)),
            micro_batch_size=np.array(self.micro_batch_size, dtype=np.int64),
            activation_checkpointing=np.array(self.activation_checkpointing, dtype=bool),
            kv_cache=np.array(self.kv_cache, dtype=np.int64),
            invalid=np.array(self.invalid, dtype=bool),
        )


def parse_plan_object(plan: object) -> tuple[Plan | None, str | None]:
    """A ``Plan`` from a struct, JSON text or decoded JSON; ``(None, reason)`` when it is not one."""
    if isinstance(plan, Plan):
        return plan, None
    try:
        if isinstance(plan, (str, bytes, bytearray)):
            return plan_from_json(bytes(plan) if isinstance(plan, bytearray) else plan), None
        if not isinstance(plan, dict):
            return (
                None,
                f"not_an_object: a plan is a JSON object with a 'jobs' list, got {type(plan).__name__}",
            )
        return plan_from_object(plan), None
    except _PARSE_ERRORS as error:
        return None, f"schema: {str(error)[:300]}"


def encode_plan(
    plan: object,
    job_index: dict[str, int],
    job_offset: int,
    gpu_count: int,
    default_kv: list[int],
    buffer: RowBuffer,
) -> list[str]:
    """Append one row per scenario job (in scenario order) to ``buffer``; return the plan-level reasons.

    ``job_index`` maps the scenario's job ids to 0..J-1; rows refer to table index ``job_offset + i``.
    A job the plan omits (or gives 0 GPUs) is unallocated. Any reason returned makes the plan invalid.
    """
    parsed, reason = parse_plan_object(plan)
    num_jobs = len(job_index)
    entries: list = [None] * num_jobs
    reasons: list[str] = []
    if parsed is None:
        reasons.append(reason)
    else:
        for job_plan in parsed.jobs:
            index = job_index.get(job_plan.id)
            if index is None:
                reasons.append(f"unknown_job: '{job_plan.id[:64]}' is not a job of this scenario")
            elif entries[index] is not None:
                reasons.append(f"duplicate_job: '{job_plan.id}' appears more than once")
            else:
                entries[index] = job_plan
    total_gpus = 0
    for index, entry in enumerate(entries):
        buffer.job.append(job_offset + index)
        if entry is None:
            buffer.gpus.append(0)
            buffer.tensor_parallel.append(1)
            buffer.precision.append((1, 1, 1, 1, 1))
            buffer.micro_batch_size.append(1)
            buffer.activation_checkpointing.append(False)
            buffer.kv_cache.append(default_kv[index])
            buffer.invalid.append(parsed is None)
            continue
        gpus, tp = entry.gpus, entry.tensor_parallel
        total_gpus += gpus
        mismatch = gpus > 0 and gpus % tp != 0
        if mismatch:
            reasons.append(
                f"tp_mismatch: job '{entry.id}' has tensor_parallel {tp}, which does not divide gpus {gpus}"
            )
        p = entry.precision
        buffer.gpus.append(gpus)
        buffer.tensor_parallel.append(tp)
        buffer.precision.append(
            (
                PRECISION_CODE[p.embedding],
                PRECISION_CODE[p.attention],
                PRECISION_CODE[p.mlp],
                PRECISION_CODE[p.norm],
                PRECISION_CODE[p.lm_head],
            )
        )
        buffer.micro_batch_size.append(entry.micro_batch_size)
        buffer.activation_checkpointing.append(entry.activation_checkpointing)
        buffer.kv_cache.append(
            default_kv[index] if entry.kv_cache is None else PRECISION_CODE[entry.kv_cache]
        )
        buffer.invalid.append(mismatch)
    if total_gpus > gpu_count:
        reasons.append(f"over_allocated: the plan uses {total_gpus} GPUs, the cluster has {gpu_count}")
    return reasons
