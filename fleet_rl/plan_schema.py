"""The plan schema: what the LLM answers with, validated strictly by msgspec.

A plan assigns each job of a scenario a GPU count, a tensor-parallel degree, a precision per module group,
a micro-batch size, activation checkpointing and a KV-cache precision (see DESIGN.md §3). The same schema
serves the kernel (``evaluate``), the reward parser and the prompt (``PLAN_JSON_SCHEMA``), so the three can
never disagree about what a valid plan is.

The structs are not tracked by the cyclic garbage collector (``gc=False``): they hold strings, numbers and
other plan structs (a plan's list holds its jobs), so they form no reference cycle, and the reward decodes
every completion of every batch into them, whose tracking would trigger collections.

Bounds (documented, and the solver's search space):
- ``tensor_parallel`` in {1, 2, 4, 8}; it must divide ``gpus`` (checked against the scenario by the kernel).
- ``micro_batch_size`` in {1, 2, 4, ..., 64} (powers of two; per GPU, per forward pass; training kinds only).
- ``kv_cache`` (serving only) defaults to the GPU's 16-bit compute format (bf16, or fp16 where bf16 is
  unsupported); training kinds ignore it, serving ignores ``micro_batch_size``/``activation_checkpointing``.
- ``sharding`` (training kinds only) shards model states across the job's data-parallel replicas:
  ``"none"`` (plain data parallelism, the default), ``"optimizer"`` (optimizer states and gradients: ZeRO-2,
  FSDP ``SHARD_GRAD_OP``) or ``"full"`` (weights too: ZeRO-3, FSDP ``FULL_SHARD``). A serving job that
  names a sharding other than ``"none"`` does not run (the kernel says why).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS

Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
Sharding = Literal["none", "optimizer", "full"]
SHARDINGS: tuple[str, ...] = ("none", "optimizer", "full")
TENSOR_PARALLEL_SIZES: tuple[int, ...] = (1, 2, 4, 8)
MICRO_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
MAX_JOBS_PER_PLAN = 16
MAX_GPUS_PER_JOB = 64


class PrecisionMap(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """Numeric format per module group; every group is required."""

    embedding: Precision
    attention: Precision
    mlp: Precision
    norm: Precision
    lm_head: Precision


class JobPlan(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """One job's part of the plan."""

    id: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    gpus: Annotated[int, msgspec.Meta(ge=0, le=MAX_GPUS_PER_JOB)]
    tensor_parallel: Literal[1, 2, 4, 8]
    precision: PrecisionMap
    micro_batch_size: Literal[1, 2, 4, 8, 16, 32, 64] = 1
    activation_checkpointing: bool = False
    kv_cache: Precision | None = None
    sharding: Sharding = "none"


class Plan(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A whole plan: one entry per job of the scenario (a missing job is left unallocated)."""

    jobs: Annotated[list[JobPlan], msgspec.Meta(max_length=MAX_JOBS_PER_PLAN)]


assert tuple(PrecisionMap.__struct_fields__) == MODULE_GROUPS
assert Precision.__args__ == PRECISIONS  # type: ignore[attr-defined]
assert Sharding.__args__ == SHARDINGS  # type: ignore[attr-defined]

PLAN_JSON_SCHEMA: dict = msgspec.json.schema(Plan)
"""JSON Schema (draft 2020-12) of a plan, for prompts and constrained decoders."""


def plan_from_object(obj: object) -> Plan:
    """Strictly convert a decoded JSON object to a ``Plan``; raises ``msgspec.ValidationError``."""
    return msgspec.convert(obj, Plan, strict=True)


def plan_from_json(text: str | bytes) -> Plan:
    """Strictly decode JSON text to a ``Plan``; raises ``msgspec.DecodeError``/``ValidationError``."""
    return msgspec.json.decode(text, type=Plan, strict=True)


def plan_to_dict(plan: Plan) -> dict:
    """A plain-dict copy of a plan (defaults omitted), as the LLM would write it."""
    return msgspec.to_builtins(plan)
