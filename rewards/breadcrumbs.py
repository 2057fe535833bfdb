"""Breadcrumbs: the credit one job of an answer earns, graded by how close the physics says it came to run.

A weak policy's answers mostly fail. If every failing answer earned the same, a group of them would teach
GRPO nothing (its advantage is zero), so a job that does not run is graded by its distance from running,
measured by the kernel (``fleet_rl/kernel/distances.py``), never read from the answer's text:

=====================================================  =================================================
the job                                                credit
=====================================================  =================================================
runs (status ok)                                       1
near miss: placed, every setting can run, but over     1/3 + 1/6 × closeness, in (1/3, 1/2):
memory and/or under its ``min_tokens_per_s``            closeness = min(1, capacity ÷ memory needed)
                                                       × min(1, tokens/s ÷ floor)
idle (no GPUs)                                         1/3
categorical fault: n settings that cannot run at all   1/3 ÷ (1 + n) × (1 + closeness) / 2,
(a format the GPU lacks, integer trained weights,       at most 1/6
a format that diverges, too much quality loss...)
=====================================================  =================================================

Hence, for a job in a plan where others run: categorical fault < idle < near miss < runs; a near miss over
memory by 2 % earns more than one over by 300 %, one at 90 % of its floor more than one at 10 %; each
further fault costs (a broken setting, or memory and throughput further off); making a job run always
raises its credit. A plan's ``progress`` is the mean
credit over the author's jobs, so fewer faulted jobs beat more. Under a plan where nothing runs every credit
is below 1/2, which keeps such a plan in the lower half of ``fleet_reward``'s not-feasible band.

Why categorical faults earn less than idling: breaking a running job on purpose (an fp8 norm, a format the
GPU lacks) must never beat leaving it idle, or a policy could farm credit by placing jobs it knows fail.
A near miss earns more than idling because it is the step towards running: fewer GPUs' worth of memory, a
faster format; that is the breadcrumb trail.
"""

from __future__ import annotations

import numpy as np

from fleet_rl.kernel.distances import RowDistances

__all__ = ["IDLE_CREDIT", "NEAR_MISS_CREDIT", "closeness", "job_credit"]

IDLE_CREDIT = 1.0 / 3.0
NEAR_MISS_CREDIT = 0.5  # the limit of a near miss as its closeness goes to 1 (never reached: it fails)


def closeness(distances: RowDistances) -> np.ndarray:
    """(R,) in [0, 1]: 1 for a row within memory and at its floor, smaller the further over or under."""
    with np.errstate(divide="ignore", invalid="ignore"):
        memory = np.where(distances.memory_ratio > 1.0, 1.0 / distances.memory_ratio, 1.0)
    return memory * np.clip(distances.floor_ratio, 0.0, 1.0)


def job_credit(runs: np.ndarray, placed: np.ndarray, distances: RowDistances) -> np.ndarray:
    """(R,) each row's credit (module docstring): ``runs`` and ``placed`` are (R,) bools (placed: on GPUs)."""
    broken = distances.broken_settings
    near = closeness(distances)
    near_miss = IDLE_CREDIT + (NEAR_MISS_CREDIT - IDLE_CREDIT) * near
    categorical = IDLE_CREDIT / (1.0 + broken) * (1.0 + near) / 2.0
    failing = np.where(broken > 0, categorical, near_miss)
    return np.where(runs, 1.0, np.where(placed, failing, IDLE_CREDIT))
