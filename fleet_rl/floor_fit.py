"""How many GPUs a job with a throughput floor needs: per ``Fits`` entry, the fewest that meet it.

A job with ``min_tokens_per_s`` earns nothing below its floor, and missing the floor costs its priority, so
an engineer measures how many replicas meet the SLO before sharing out the rest of the cluster. The
``heuristic`` baseline does (``fleet_rl/heuristic.py``, step 3), and the ``sized_batching_floors`` prompt
style states the same measurement (issue #68): its imitator got the GPU split wrong more than any other
field, and part of the heuristic's split rested on this figure, which no other prompt states.

It is the kernel's throughput verdict, meets the floor or not, on the job alone on the cluster: the part a
``Fits`` entry stands for (``fleet_rl/replica_fit.py``) at the batching the entry states (a training job's
largest micro-batch without activation checkpointing, else micro-batch 1 with it), as whole replicas at
its tensor parallelism. It says how few GPUs a job may have, never how many it should get.
"""

from __future__ import annotations

from fleet_rl.kernel import SolvedScenario
from fleet_rl.replica_fit import ReplicaFit, fit_part, part_status
from fleet_rl.scenario import Job

__all__ = ["fewest_gpus_that_run", "floor_gpus"]


def fewest_gpus_that_run(solved: SolvedScenario, part: dict, free: int) -> int | None:
    """The fewest GPUs (whole replicas of ``part``, at most ``free``) at which the job runs: it fits and meets
    its ``min_tokens_per_s``, if it has one (kernel status ``ok``); None where no count up to ``free`` does.
    A serving job's batch is split over its replicas, so more GPUs need not raise its throughput: the search
    goes up one replica at a time rather than bisecting."""
    step = part["tensor_parallel"]
    for gpus in range(step, free + 1, step):
        if part_status(solved, part | {"gpus": gpus}) == "ok":
            return gpus
    return None


def _stated_part(job: Job, fit: ReplicaFit, solved: SolvedScenario) -> dict:
    """The part a ``sized_batching`` Fits entry states: its format and tensor parallelism, and for a
    training job the micro-batch it names without checkpointing, else micro-batch 1 with checkpointing."""
    part = fit_part(job, fit, solved.scenario.gpu)
    if job.kind != "serve" and fit.micro_batch_size is not None:
        part |= {"micro_batch_size": fit.micro_batch_size, "activation_checkpointing": False}
    return part


def floor_gpus(solved: SolvedScenario, job: Job, fits: list[ReplicaFit]) -> list[int | None]:
    """Per entry of ``fits`` (``replica_fits(...)[job.id]``), the fewest GPUs on the cluster at which that
    part of ``job`` meets its ``min_tokens_per_s``; None where the format fits no replica or no GPU count on
    the cluster meets the floor. ``job`` must have a floor."""
    if job.min_tokens_per_s is None:
        raise ValueError(f"job {job.id!r} has no min_tokens_per_s: there is no floor to meet")
    counts = []
    for fit in fits:
        part = None if fit.tensor_parallel is None else _stated_part(job, fit, solved)
        counts.append(None if part is None else fewest_gpus_that_run(solved, part, solved.gpu_count))
    return counts
