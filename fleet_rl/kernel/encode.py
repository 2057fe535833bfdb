"""Turn plan objects (dicts, JSON text, ``Plan`` structs, or garbage) into ``PlanRows`` plus reasons.

This is the only per-plan Python in the kernel: strict schema validation by msgspec, then consistency with
the scenario (known and unique job ids, TP dividing the GPU count, the cluster not over-allocated).
It never raises on a bad plan; it records why as ``Reason``s (a ``ReasonCode`` and human text).

``encode_plans`` encodes a batch in one loop (``score_batch`` uses it; ``encode_plan`` is the one-plan
form). A ``Plan`` struct (what the reward parser produces) is taken as is; each row is one tuple of small
integers appended to a flat list, turned into the ``PlanRows`` arrays at the end (``RowBuffer.to_rows``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import msgspec
import numpy as np

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel.reasons import Reason, ReasonCode
from fleet_rl.kernel.simulate import PlanRows
from fleet_rl.plan_schema import SHARDINGS, Plan, plan_from_json, plan_from_object

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


_ROW_WIDTH = 12  # gpus, tp, 5 precision codes, micro_batch_size, checkpointing, kv, sharding, invalid
_PRECISION = slice(2, 2 + len(MODULE_GROUPS))
_GPUS, _TP, _MICRO_BATCH, _CHECKPOINTING, _KV, _SHARDING, _INVALID = 0, 1, 7, 8, 9, 10, 11
SHARDING_CODE = {name: code for code, name in enumerate(SHARDINGS)}


class _UnallocatedRows(dict):
    """The row of a job without GPUs, by its default KV format (built once per format)."""

    def __init__(self, invalid: bool) -> None:
        super().__init__()
        self.invalid = invalid

    def __missing__(self, kv: int) -> tuple:
        row = self[kv] = (0, 1, *_UNALLOCATED_PRECISION, 1, 0, kv, 0, int(self.invalid))
        return row


_UNALLOCATED_ROWS = _UnallocatedRows(invalid=False)  # a job the plan omits or gives no GPUs
_INVALID_ROWS = _UnallocatedRows(invalid=True)  # every job of a plan that is not one


@dataclass
class RowBuffer:
    """Rows of (plan, job) integers that grow one row per ``encode_plan`` job and become a ``PlanRows``.

    One flat list of ``_ROW_WIDTH`` small integers per row (appending a row is one ``list.extend``), and
    per plan the shift from its first row's position to its first job's index in the job table (rows are
    written in plan order, each plan's in scenario order), so the job column is ``arange + shift``.
    Every field of a schema-valid plan fits in a byte, so ``to_rows`` turns the list into bytes in one C
    call and the columns into arrays with one transposing copy; other values (a hand-built ``Plan`` is not
    validated) go through ``np.fromiter``."""

    data: list[int] = field(default_factory=list)
    shifts: list[int] = field(default_factory=list)  # per plan: index of its first job − its first row
    counts: list[int] = field(default_factory=list)  # per plan: its rows (the scenario's jobs)

    def to_rows(self) -> PlanRows:
        data = self.data
        try:
            flat = np.frombuffer(bytes(data), dtype=np.uint8)
        except (ValueError, TypeError):  # a value outside 0..255
            flat = np.fromiter(data, dtype=np.int64, count=len(data))
        table = flat.reshape(-1, _ROW_WIDTH)
        # one contiguous (_ROW_WIDTH, R) copy: every field below is contiguous
        columns = table.T.astype(np.int64, order="C")
        job = np.arange(table.shape[0], dtype=np.int64)
        job += np.repeat(np.array(self.shifts, dtype=np.int64), self.counts)
        return PlanRows(
            job=job,
            gpus=columns[_GPUS],
            tensor_parallel=columns[_TP],
            precision=table[:, _PRECISION].astype(np.int64, order="C"),
            micro_batch_size=columns[_MICRO_BATCH],
            activation_checkpointing=columns[_CHECKPOINTING].astype(bool),
            kv_cache=columns[_KV],
            sharding=columns[_SHARDING],
            invalid=columns[_INVALID].astype(bool),
        )


def parse_plan_object(plan: object) -> tuple[Plan | None, Reason | None]:
    """A ``Plan`` from a struct, JSON text or decoded JSON; ``(None, reason)`` when it is not one."""
    if isinstance(plan, Plan):
        return plan, None
    try:
        if isinstance(plan, (str, bytes, bytearray)):
            return plan_from_json(bytes(plan) if isinstance(plan, bytearray) else plan), None
        if not isinstance(plan, dict):
            text = f"a plan is a JSON object with a 'jobs' list, got {type(plan).__name__}"
            return None, Reason(ReasonCode.NOT_AN_OBJECT, text)
        return plan_from_object(plan), None
    except _PARSE_ERRORS as error:
        return None, Reason(ReasonCode.SCHEMA, str(error)[:300])


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
) -> list[Reason]:
    """Append one row per scenario job (in scenario order) to ``buffer``; return the plan-level reasons.

    ``job_index`` maps the scenario's job ids to 0..J-1; rows refer to table index ``job_offset + i``.
    A job the plan omits (or gives 0 GPUs) is unallocated. Any reason returned makes the plan invalid.
    """
    return encode_plans([plan], [ScenarioIndex(job_index, gpu_count, default_kv)], [job_offset], buffer)[0]


def encode_plans(
    plans: Sequence[object], scenarios: Sequence, job_offsets: Sequence[int], buffer: RowBuffer
) -> list[list[Reason]]:
    """``encode_plan`` for ``plans[i]`` against ``scenarios[i]`` (a ``ScenarioIndex`` or ``SolvedScenario``)
    with rows at ``job_offsets[i]``, in one loop; the reasons of each plan."""
    extend = buffer.data.extend
    add_shift, add_count = buffer.shifts.append, buffer.counts.append
    row = len(buffer.data) // _ROW_WIDTH
    code = PRECISION_CODE
    sharding_code = SHARDING_CODE
    out: list[list[Reason]] = []
    for plan, scenario, job_offset in zip(plans, scenarios, job_offsets, strict=True):
        job_index, default_kv = scenario.job_index, scenario.default_kv
        num_jobs = len(job_index)
        add_shift(job_offset - row)
        add_count(num_jobs)
        row += num_jobs
        if type(plan) is Plan:
            parsed = plan
        else:
            parsed, reason = parse_plan_object(plan)
            if parsed is None:
                for index in range(num_jobs):
                    extend(_INVALID_ROWS[default_kv[index]])
                out.append([reason])
                continue
        entries: list = [None] * num_jobs
        reasons: list[Reason] = []
        for job_plan in parsed.jobs:
            index = job_index.get(job_plan.id)
            if index is None:
                text = f"'{job_plan.id[:64]}' is not a job of this scenario"
                reasons.append(Reason(ReasonCode.UNKNOWN_JOB, text))
            elif entries[index] is not None:
                reasons.append(Reason(ReasonCode.DUPLICATE_JOB, f"'{job_plan.id}' appears more than once"))
            else:
                entries[index] = job_plan
        total_gpus = 0
        index = -1
        for entry in entries:
            index += 1
            if entry is None:
                extend(_UNALLOCATED_ROWS[default_kv[index]])
                continue
            gpus = entry.gpus
            tp = entry.tensor_parallel
            kv = entry.kv_cache
            precision = entry.precision
            total_gpus += gpus
            mismatch = gpus > 0 and gpus % tp != 0
            if mismatch:
                text = f"job '{entry.id}' has tensor_parallel {tp}, which does not divide gpus {gpus}"
                reasons.append(Reason(ReasonCode.TP_MISMATCH, text))
            extend(
                (
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
                    sharding_code[entry.sharding],
                    mismatch,
                )
            )
        if total_gpus > scenario.gpu_count:
            text = f"the plan uses {total_gpus} GPUs, the cluster has {scenario.gpu_count}"
            reasons.append(Reason(ReasonCode.OVER_ALLOCATED, text))
        out.append(reasons)
    return out
