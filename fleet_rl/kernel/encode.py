"""Turn plan objects (dicts, JSON text, ``Plan`` structs, or garbage) into ``PlanRows`` plus reason codes.

This is the only per-plan Python in the kernel: strict schema validation by msgspec, then consistency with
the scenario (known and unique job ids, TP dividing the GPU count, the cluster not over-allocated).
It never raises on a bad plan; it records reasons as ``"code: human text"`` strings.

``encode_plans`` encodes a batch in one loop (``score_batch`` uses it; ``encode_plan`` is the one-plan
form). A ``Plan`` struct (what the reward parser produces) is taken as is; each row is one tuple of integers
appended to a flat list, turned into the ``PlanRows`` arrays by one ``np.fromiter`` at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import msgspec
import numpy as np

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel.simulate import PlanRows
from fleet_rl.plan_schema import Plan, plan_from_json, plan_from_object

PRECISION_CODE = {name: code for code, name in enumerate(PRECISIONS)}
_UNALLOCATED_PRECISION = (1, 1, 1, 1, 1)  # a job without GPUs: bf16 placeholders (never simulated as ok)
_PARSE_ERRORS = (
    msgspec.ValidationError,
    msgspec.DecodeError,
    RecursionError,
    TypeError,
    ValueError,
    OverflowError,
)


_ROW_WIDTH = 12  # job, gpus, tensor_parallel, 5 precision codes, micro_batch_size, checkpointing, kv, invalid
_PRECISION = slice(3, 3 + len(MODULE_GROUPS))


@dataclass
class RowBuffer:
    """Rows of (plan, job) integers that grow one row per ``encode_plan`` job and become a ``PlanRows``.

    One flat list of ``_ROW_WIDTH`` integers per row: appending a row is one ``list.extend``, and
    ``to_rows`` is one ``np.fromiter`` plus a transpose, not a list-to-array conversion per field."""

    data: list[int] = field(default_factory=list)

    def to_rows(self) -> PlanRows:
        data = self.data
        table = np.fromiter(data, dtype=np.int64, count=len(data)).reshape(-1, _ROW_WIDTH)
        columns = table.T.copy()  # one contiguous (_ROW_WIDTH, R) copy: every field below is contiguous
        return PlanRows(
            job=columns[0],
            gpus=columns[1],
            tensor_parallel=columns[2],
            precision=np.ascontiguousarray(table[:, _PRECISION]),
            micro_batch_size=columns[8],
            activation_checkpointing=columns[9].astype(bool),
            kv_cache=columns[10],
            invalid=columns[11].astype(bool),
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


class ScenarioIndex(NamedTuple):
    """What encoding needs of a scenario (``SolvedScenario`` has the same attributes)."""

    job_index: dict[str, int]  # the scenario's job ids -> 0..J-1, in scenario order
    gpu_count: int
    default_kv: list[int]  # per job: the KV format a plan gets when it names none


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
    return encode_plans([plan], [ScenarioIndex(job_index, gpu_count, default_kv)], [job_offset], buffer)[0]


def encode_plans(
    plans: Sequence[object], scenarios: Sequence, job_offsets: Sequence[int], buffer: RowBuffer
) -> list[list[str]]:
    """``encode_plan`` for ``plans[i]`` against ``scenarios[i]`` (a ``ScenarioIndex`` or ``SolvedScenario``)
    with rows at ``job_offsets[i]``, in one loop; the reasons of each plan."""
    extend = buffer.data.extend
    code = PRECISION_CODE
    out: list[list[str]] = []
    for plan, scenario, job_offset in zip(plans, scenarios, job_offsets, strict=True):
        job_index, default_kv = scenario.job_index, scenario.default_kv
        num_jobs = len(job_index)
        parsed, reason = (plan, None) if type(plan) is Plan else parse_plan_object(plan)
        if parsed is None:
            for index in range(num_jobs):
                extend((job_offset + index, 0, 1, *_UNALLOCATED_PRECISION, 1, 0, default_kv[index], 1))
            out.append([reason])
            continue
        entries: list = [None] * num_jobs
        reasons: list[str] = []
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
            if entry is None:
                extend((job_offset + index, 0, 1, *_UNALLOCATED_PRECISION, 1, 0, default_kv[index], 0))
                continue
            gpus, tp, kv, precision = entry.gpus, entry.tensor_parallel, entry.kv_cache, entry.precision
            total_gpus += gpus
            mismatch = gpus > 0 and gpus % tp != 0
            if mismatch:
                reasons.append(
                    f"tp_mismatch: job '{entry.id}' has tensor_parallel {tp}, "
                    f"which does not divide gpus {gpus}"
                )
            extend(
                (
                    job_offset + index,
                    gpus,
                    tp,
                    code[precision.embedding],
                    code[precision.attention],
                    code[precision.mlp],
                    code[precision.norm],
                    code[precision.lm_head],
                    entry.micro_batch_size,
                    entry.activation_checkpointing,
                    default_kv[index] if kv is None else code[kv],
                    mismatch,
                )
            )
        if total_gpus > scenario.gpu_count:
            reasons.append(
                f"over_allocated: the plan uses {total_gpus} GPUs, the cluster has {scenario.gpu_count}"
            )
        out.append(reasons)
    return out
