"""How far each plan row is from running: the physics the rewards' breadcrumbs grade a failing job by.

``simulate`` says *whether* a job runs (its status) and counts its faults; a policy that is learning also
needs to know *how close* it came. ``row_distances`` reads what the simulation already computed, and changes
none of it:

- ``memory_ratio``: memory needed per GPU ÷ the GPU's capacity (> 1: over memory; 1.02 is a near miss,
  4.0 is far off);
- ``floor_ratio``: the tokens/s the row's physics gives ÷ the job's ``min_tokens_per_s`` (< 1: under its
  floor), computed also for a job that fails for another reason (over memory, say); 1 for a job without
  a floor, 0 where a format the GPU lacks leaves no figure;
- ``broken_settings``: how many of the row's settings cannot run in any amount: each module group in a
  format the GPU lacks, a trained group in an integer format or a format that diverges (``UNSTABLE_FORMAT``),
  a KV-cache format the GPU lacks, a tensor parallelism that does not divide the attention heads,
  optimizer sharding on a serving job, and a total quality loss over the job's ``max_quality_loss``.
  These are categorical faults: no more memory or GPUs fixes them, only changing the setting.

A placed, valid row has a categorical fault (``unsupported`` or ``unstable`` among its faults) exactly when
``broken_settings > 0``; it is over memory exactly when ``memory_ratio > 1`` and too slow exactly when
``floor_ratio < 1`` (tests/kernel/test_distances.py checks both against ``RowResults.faults``). Unplaced
and invalid rows get 0 broken settings, like their 0 faults.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet_rl.kernel.constants import NO_SHARDING, SERVE, TRAIN, UNSTABLE_FORMAT
from fleet_rl.kernel.job_table import JobTable, format_unsupported
from fleet_rl.kernel.simulate import PlanRows, RowResults

__all__ = ["RowDistances", "row_distances"]


@dataclass(frozen=True)
class RowDistances:
    """Per row, shape (R,): see the module docstring."""

    memory_ratio: np.ndarray  # float, needed ÷ capacity per GPU; 0 for an unplaced row
    floor_ratio: np.ndarray  # float, modelled tokens/s ÷ min_tokens_per_s; 1 without a floor
    broken_settings: np.ndarray  # int, settings in a form that cannot run at all


def row_distances(table: JobTable, rows: PlanRows, results: RowResults) -> RowDistances:
    """The distance measures of every row (module docstring); ``results`` is ``simulate(table, rows)``."""
    j = rows.job
    kind = table.kind[j]
    is_serve = kind == SERVE
    precision = rows.precision  # (R, 5)
    groups = np.arange(precision.shape[1])
    gpu_supports = table.supported[j[:, None], precision]  # (R, 5)
    broken_groups = format_unsupported(gpu_supports, (kind == TRAIN)[:, None], precision)
    broken_groups |= UNSTABLE_FORMAT[kind[:, None], groups[None, :], precision]
    broken = broken_groups.sum(axis=1)
    broken += is_serve & ~table.supported[j, rows.kv_cache]
    broken += (table.num_heads[j] % rows.tensor_parallel) != 0
    broken += is_serve & (rows.sharding != NO_SHARDING)
    broken += results.quality_loss > table.max_quality_loss[j]
    placed = (rows.gpus > 0) & ~rows.invalid
    floor = table.min_tokens_per_s[j]
    with np.errstate(divide="ignore", invalid="ignore"):
        floor_ratio = np.where(floor > 0, np.nan_to_num(results.modelled_tokens_per_s) / floor, 1.0)
    return RowDistances(
        memory_ratio=results.memory_per_gpu_bytes / table.memory_capacity_bytes[j],
        floor_ratio=floor_ratio,
        broken_settings=np.where(placed, broken, 0),
    )
