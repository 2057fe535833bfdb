"""The scenario schema: one cluster of GPUs and the jobs that must share it (DESIGN.md §3).

A scenario is the input of every part of the pipeline: the prompt shows it to the model, the kernel scores a
plan against it, ``solve()`` caches its exact optimum keyed on it, and datasets store it as a JSON string in a
column named ``scenario``. So it is:

- strict: decoding goes through msgspec with unknown keys forbidden and no type coercion (``"2"`` is not an
  int, ``true`` is not an int); then semantic checks run in ``__post_init__``, so a scenario built directly in
  Python is validated exactly like one decoded from JSON. Every failure surfaces as a ``ValueError`` whose
  message names the offending field (``$.jobs[1].seq_len``) and, for unknown catalog keys, the valid keys.
- immutable and hashable: frozen structs and tuples, usable as a dict key or an ``lru_cache`` argument.
- round-trippable: ``Scenario.from_dict(sc.to_dict()) == sc`` and ``Scenario.from_json(sc.to_json()) == sc``;
  ``to_json`` is compact and deterministic (fields in declaration order, ``max_quality_loss`` omitted when
  unset), so equal scenarios serialise to identical strings.

Example::

    sc = Scenario.from_dict({"cluster": {"gpu": "h100-sxm", "count": 8}, "jobs": [
        {"id": "chat", "model": "llama-3.1-8b", "kind": "serve", "priority": 2, "seq_len": 4096,
         "batch_size": 32}]})
    sc.gpu.memory_gb, sc.job_ids        # (85.5..., ('chat',))

Simplifications: one homogeneous pool of at most 8 GPUs (a single node; multi-node and heterogeneous
clusters are not modelled yet). Whether a job *can* run on the cluster at all is not checked here: that is the
kernel's verdict (a job that fits nowhere is simply left unallocated by the optimum).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal

import msgspec
from msgspec.structs import force_setattr

from fleet_rl.catalog import GPUS, MODELS, GPUSpec, ModelSpec

__all__ = [
    "JOB_KINDS",
    "MAX_BATCH_SIZE",
    "MAX_GPUS",
    "MAX_JOBS",
    "MAX_PRIORITY",
    "MAX_SEQ_LEN",
    "MAX_TOKENS_PER_S",
    "Cluster",
    "Job",
    "JobKind",
    "Scenario",
]

JobKind = Literal["train", "lora", "serve"]
JOB_KINDS: tuple[str, ...] = ("train", "lora", "serve")
MAX_GPUS = 8  # one node; multi-node clusters are not modelled
MAX_JOBS = 8
MAX_PRIORITY = 100.0
MAX_SEQ_LEN = 131_072
MAX_BATCH_SIZE = 4096
MAX_TOKENS_PER_S = 1e8  # a throughput floor above any cluster's reach is a typo, not a request
_JOB_ID_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,31}")


def _is_int(value: object) -> bool:
    """A genuine integer: ``bool`` is an ``int`` subclass in Python but never a valid count."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return _is_int(value) or isinstance(value, float)


def _valid_keys(table: Mapping[str, object]) -> str:
    return ", ".join(table)


class Cluster(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A single node of ``count`` identical GPUs named by a ``fleet_rl.catalog.GPUS`` key."""

    gpu: str
    count: int

    def __post_init__(self) -> None:
        if not isinstance(self.gpu, str):
            raise ValueError(f"cluster.gpu must be a string, got {type(self.gpu).__name__}")
        if self.gpu not in GPUS:
            raise ValueError(f"unknown gpu {self.gpu!r}; valid gpus: {_valid_keys(GPUS)}")
        if not _is_int(self.count):
            raise ValueError(f"cluster.count must be an int, got {type(self.count).__name__}")
        if not 1 <= self.count <= MAX_GPUS:
            raise ValueError(f"cluster.count must be in 1..{MAX_GPUS} (one node), got {self.count}")


class Job(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One workload sharing the cluster.

    ``batch_size`` is sequences per optimizer step for ``train``/``lora`` and concurrent sequences for
    ``serve``. ``max_quality_loss`` is the tolerated fractional quality (perplexity) loss, in (0, 1]; ``None``
    leaves the trade-off to the objective's quality penalty. ``prompt_len`` (``serve`` only) is the tokens
    each request brings, prefilled before it generates ``seq_len − prompt_len``; 0 (the default, omitted
    from JSON) means a negligible prompt, decode only. ``min_tokens_per_s`` is a throughput floor (a serving
    SLO or a training deadline): a job placed below it is ``too_slow``, and one that misses it (too slow,
    crashed or idle) costs the objective its priority; ``None`` (the default, omitted from JSON) sets no
    floor.
    """

    id: str
    model: str
    kind: JobKind
    priority: float
    seq_len: int
    batch_size: int
    max_quality_loss: float | None = None
    prompt_len: int = 0
    min_tokens_per_s: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _JOB_ID_PATTERN.fullmatch(self.id):
            raise ValueError(
                f"job id {self.id!r} is invalid: use 1-32 characters from [a-z0-9_-], starting with a letter"
            )
        where = f"job {self.id!r}"
        if not isinstance(self.model, str) or self.model not in MODELS:
            raise ValueError(f"{where}: unknown model {self.model!r}; valid models: {_valid_keys(MODELS)}")
        if self.kind not in JOB_KINDS:
            raise ValueError(f"{where}: unknown kind {self.kind!r}; valid kinds: {', '.join(JOB_KINDS)}")
        if not _is_number(self.priority) or not 0 < self.priority <= MAX_PRIORITY:
            raise ValueError(
                f"{where}: priority must be a number in (0, {MAX_PRIORITY:g}], got {self.priority!r}"
            )
        force_setattr(self, "priority", float(self.priority))  # 2 and 2.0 must serialise identically
        if not _is_int(self.seq_len) or not 1 <= self.seq_len <= MAX_SEQ_LEN:
            raise ValueError(f"{where}: seq_len must be an int in 1..{MAX_SEQ_LEN}, got {self.seq_len!r}")
        limit = MODELS[self.model].max_position_embeddings
        if self.seq_len > limit:
            raise ValueError(
                f"{where}: seq_len {self.seq_len} exceeds the context window of {self.model} ({limit} tokens)"
            )
        if not _is_int(self.batch_size) or not 1 <= self.batch_size <= MAX_BATCH_SIZE:
            raise ValueError(
                f"{where}: batch_size must be an int in 1..{MAX_BATCH_SIZE}, got {self.batch_size!r}"
            )
        if not _is_int(self.prompt_len) or self.prompt_len < 0:
            raise ValueError(f"{where}: prompt_len must be an int >= 0, got {self.prompt_len!r}")
        if self.prompt_len and self.kind != "serve":
            raise ValueError(f"{where}: prompt_len is for serve jobs (a request's tokens), not {self.kind}")
        if self.prompt_len >= self.seq_len:
            raise ValueError(
                f"{where}: prompt_len {self.prompt_len} leaves no room to generate in seq_len {self.seq_len} "
                "(the context window holds the prompt and the generated tokens)"
            )
        if self.max_quality_loss is not None:
            loss = self.max_quality_loss
            if not _is_number(loss) or not (math.isfinite(loss) and 0 < loss <= 1):
                raise ValueError(f"{where}: max_quality_loss must be a number in (0, 1], got {loss!r}")
            force_setattr(self, "max_quality_loss", float(loss))
        if self.min_tokens_per_s is not None:
            floor = self.min_tokens_per_s
            if not _is_number(floor) or not (math.isfinite(floor) and 0 < floor <= MAX_TOKENS_PER_S):
                raise ValueError(
                    f"{where}: min_tokens_per_s must be a number in (0, {MAX_TOKENS_PER_S:g}], got {floor!r}"
                )
            force_setattr(self, "min_tokens_per_s", float(floor))

    @property
    def model_spec(self) -> ModelSpec:
        """The catalog entry of ``model``."""
        return MODELS[self.model]


class Scenario(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A cluster and 1..8 jobs with unique ids. Hashable; build with ``from_dict``/``from_json``."""

    cluster: Cluster
    jobs: tuple[Job, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.cluster, Cluster):
            raise ValueError(f"cluster must be a Cluster, got {type(self.cluster).__name__}")
        if isinstance(self.jobs, list):  # direct construction with a list: keep the struct hashable
            force_setattr(self, "jobs", tuple(self.jobs))
        if not isinstance(self.jobs, tuple) or not all(isinstance(job, Job) for job in self.jobs):
            raise ValueError("jobs must be a sequence of Job")
        if not 1 <= len(self.jobs) <= MAX_JOBS:
            raise ValueError(f"a scenario needs 1..{MAX_JOBS} jobs, got {len(self.jobs)}")
        duplicates = sorted(job_id for job_id, n in Counter(self.job_ids).items() if n > 1)
        if duplicates:
            raise ValueError(f"job ids must be unique; duplicated: {', '.join(duplicates)}")

    # Construction and serialisation.

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """Validate a JSON-shaped mapping (DESIGN.md §3). Raises ``ValueError`` naming the bad field."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a scenario must be a mapping, got {type(data).__name__}")
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as error:
            raise ValueError(f"invalid scenario: {error}") from error

    @classmethod
    def from_json(cls, text: str | bytes) -> Scenario:
        """Decode and validate a JSON document. Raises ``ValueError`` on malformed JSON or a bad field."""
        try:
            return msgspec.json.decode(text, type=cls)
        except msgspec.ValidationError as error:
            raise ValueError(f"invalid scenario: {error}") from error
        except msgspec.DecodeError as error:
            raise ValueError(f"scenario is not valid JSON: {error}") from error

    def to_dict(self) -> dict[str, Any]:
        """The DESIGN.md §3 shape: plain dicts, lists, strings and numbers (a fresh, mutable copy)."""
        return msgspec.json.decode(msgspec.json.encode(self))  # to_builtins would keep ``jobs`` a tuple

    def to_json(self) -> str:
        """Compact JSON, fields in declaration order; equal scenarios give identical strings."""
        return msgspec.json.encode(self).decode()

    # Convenience views.

    @property
    def gpu(self) -> GPUSpec:
        """The catalog entry of the cluster's GPU."""
        return GPUS[self.cluster.gpu]

    @property
    def job_ids(self) -> tuple[str, ...]:
        """Job ids in scenario order."""
        return tuple(job.id for job in self.jobs)
