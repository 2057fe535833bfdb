"""Why the kernel rejects a plan or a job does not run: a typed ``ReasonCode`` with the text a user reads.

The encoder (``encode.py``) gives the plan-level reasons, any of which makes a plan invalid; batch scoring
(``batch_scoring.py``) adds one reason per job that does not run, named after its status. ``Evaluation``
carries both forms in the same order: ``reasons`` the strings ``"code: human text"`` (``str(reason)``), for
people and for tools that read them, and ``reason_codes`` the codes, so code tests a code and never a string
prefix (``rewards/ird.py``).
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

__all__ = ["Reason", "ReasonCode"]


class ReasonCode(StrEnum):
    """Machine-readable reason codes; each value is the prefix of its reason's text."""

    # plan-level: the plan is invalid and scores 0
    NOT_AN_OBJECT = "not_an_object"  # not a plan object at all (a number, a list, None...)
    SCHEMA = "schema"  # fails the strict plan schema (fleet_rl/plan_schema.py)
    UNKNOWN_JOB = "unknown_job"  # plans a job id the scenario does not have
    DUPLICATE_JOB = "duplicate_job"  # plans a job id twice
    TP_MISMATCH = "tp_mismatch"  # a job's tensor_parallel does not divide its GPU count
    OVER_ALLOCATED = "over_allocated"  # more GPUs than the cluster has
    # job-level: the job does not run (the code equals its status)
    UNALLOCATED = "unallocated"
    OOM = "oom"
    UNSUPPORTED = "unsupported"
    UNSTABLE = "unstable"
    TOO_SLOW = "too_slow"  # runs, but under the job's min_tokens_per_s


class Reason(msgspec.Struct, frozen=True, gc=False):
    """One reason: its code and the human text after it. Not tracked by the cyclic garbage collector (it
    holds no containers): a batch of 200,000 plans builds one per rejected plan, and that many tracked
    objects set off collections that halved ``score_batch``'s throughput (``benchmarks/kernel/speed.py``)."""

    code: ReasonCode
    text: str

    def __str__(self) -> str:
        return f"{self.code}: {self.text}"
