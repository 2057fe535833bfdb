"""The kernel's verdict on a plan: ``Evaluation`` (whole plan) and ``JobResult`` (one job).

This API is public (DESIGN.md §3): tools outside the repo read ``score``, ``objective``, ``valid``,
``reasons`` and the per-job fields, so names and meanings stay stable. ``reason_codes`` gives the code of
each reason (``fleet_rl/kernel/reasons.py``), so a tool can test a code instead of a string prefix.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from fleet_rl.kernel.reasons import ReasonCode


@dataclass(frozen=True, slots=True)
class JobResult:
    """One job under one plan. ``status`` is one of ``kernel.constants.STATUSES``: ok, oom, unsupported,
    unstable, invalid, unallocated, too_slow (placed and running, but under its ``min_tokens_per_s``)."""

    id: str
    status: str
    gpus: int
    tensor_parallel: int
    memory_per_gpu_gb: float  # what the job needs on each of its GPUs (0 when unallocated)
    memory_capacity_gb: float  # what each GPU of the cluster offers
    tokens_per_s: float  # trained or generated tokens/s across the job's GPUs; 0 unless ok or too_slow
    quality_loss: float  # fractional quality (≈ perplexity) loss from the chosen formats
    power_w: float  # draw of the job's GPUs; 0 unless ok
    value: float  # contribution to the cluster objective; unless ok, 0 or (with a floor) − its priority


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A plan scored against its scenario. Never produced by raising: bad plans have ``valid=False``."""

    score: float  # objective / optimal objective, in [0, 1]; 0 for an invalid plan
    objective: float  # Σ job values (priority-weighted normalised throughput, quality, power, missed floors);
    # an invalid plan runs nothing: 0 minus the priorities of the jobs with a floor
    valid: bool  # schema-valid and consistent with the scenario
    reasons: list[str] = field(default_factory=list)  # "code: human text", plan-level then per job
    jobs: list[JobResult] = field(default_factory=list)  # in scenario order
    optimal_objective: float = 0.0
    plan: dict | None = None  # the plan as a dict (set by ``solve``; ``None`` from ``evaluate``)
    reason_codes: list[ReasonCode] = field(default_factory=list)  # the code of each of ``reasons``, in order

    @property
    def statuses(self) -> dict[str, str]:
        return {job.id: job.status for job in self.jobs}

    def to_dict(self) -> dict:
        """JSON-ready form (what the OpenEnv server and eval reports emit)."""
        return asdict(self)
