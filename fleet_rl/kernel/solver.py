"""The exact optimum of a scenario: enumerate each job's options, prune dominated ones, knapsack over GPUs.

Why this is exact. The objective is a sum of per-job values, and a job's value depends only on its own
options and GPU count, so a knapsack DP over GPU counts across jobs is exact given each job's best value
per GPU count. Per job, we enumerate every (gpus, tensor_parallel, micro-batch, checkpointing, KV format)
of the schema, times precision maps. Precision maps are pruned per module group: a group's format enters
the simulation only through additive per-parameter costs (stored bytes, streamed bytes, seconds per GEMM
FLOP, weighted quality error, fp8 cache bytes), and the value never improves when any of these grows; so a
format that is no better on every cost than another format of the same group can never be needed in an
optimum (ties keep the first in ``PRECISIONS`` order, which gives identical results). Formats that can
never be ``ok`` (unsupported on the GPU, integer formats for trained weights, unstable groups) are
dropped too. ``tests/kernel/test_solver.py`` checks the result against brute force on small scenarios.

``solve_scenario`` is a pure function and keeps nothing: a cold solve costs ~2 ms (easy) to ~15 ms (hard)
on one core, scoring a plan against its result microseconds, so callers solve once and pass the
``SolvedScenario`` along (``fleet_rl/kernel/batch_scoring.py``, ``rewards/``). The one cache of solved
scenarios is at the boundary where scenario JSON from a dataset row meets the kernel:
``fleet_rl/solved_scenarios.py``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel.constants import (
    BYTES_PER_PARAM,
    FP8,
    INT8,
    KV_BYTES_PER_ELEMENT,
    KV_QUALITY_ERROR,
    NO_SHARDING,
    OK,
    QUALITY_ERROR,
    SERVE,
    STREAMED_BYTES_PER_PARAM,
    TRAIN,
    UNSTABLE_FORMAT,
)
from fleet_rl.kernel.encode import RowBuffer, encode_plan
from fleet_rl.kernel.job_table import JobTable, PackedJobTable, build_job_table
from fleet_rl.kernel.simulate import PlanRows, RowResults, job_values, missed_floor_value, simulate
from fleet_rl.plan_schema import (
    MICRO_BATCH_SIZES,
    SHARDINGS,
    TENSOR_PARALLEL_SIZES,
    JobPlan,
    plan_from_object,
)
from fleet_rl.scenario import Scenario


@dataclass(frozen=True)
class JobOptions:
    """Every undominated option of one job, simulated. Shape (R,) per field."""

    rows: PlanRows
    tokens_per_s: np.ndarray
    ok: np.ndarray


def _undominated(costs: np.ndarray) -> list[int]:
    """Rows of ``costs`` (N, K) that no other row beats or ties on every column (the first tie is kept)."""
    keep = []
    for i in range(costs.shape[0]):
        no_worse = (costs <= costs[i]).all(axis=1)
        strictly_better = no_worse & (costs < costs[i]).any(axis=1)
        earlier_tie = no_worse & ~strictly_better & (np.arange(costs.shape[0]) < i)
        if not (strictly_better.any() or earlier_tie.any()):
            keep.append(i)
    return keep


def group_candidates(table: JobTable, job: int) -> list[list[int]]:
    """Per module group, the precision codes that may appear in an optimal plan for ``job``."""
    kind = int(table.kind[job])
    candidates = []
    for group in range(len(MODULE_GROUPS)):
        codes = [
            p
            for p in range(len(PRECISIONS))
            if table.supported[job, p]
            and not (kind == TRAIN and p >= INT8)
            and not UNSTABLE_FORMAT[kind, group, p]
        ]
        stored = table.params_stored[job, group] > 0
        held = stored or table.params_gemm[job, group] > 0
        multiplied = table.params_gemm[job, group] > 0
        weighted = table.quality_weight[job, group] > 0
        costs = np.array(
            [
                [
                    float(p == FP8) * stored if kind == TRAIN else BYTES_PER_PARAM[p] * stored,
                    BYTES_PER_PARAM[p] * held,
                    STREAMED_BYTES_PER_PARAM[p] * held,
                    (1.0 / table.effective_flops[job, p]) * multiplied,
                    QUALITY_ERROR[kind, p] * weighted,
                ]
                for p in codes
            ]
        ).reshape(len(codes), 5)
        candidates.append([codes[i] for i in _undominated(costs)])
    return candidates


def kv_candidates(table: JobTable, job: int) -> list[int]:
    """KV-cache formats worth trying: only serving reads them; smaller and more exact is better."""
    if table.kind[job] != SERVE:
        return [int(table.default_kv[job])]
    codes = [p for p in range(len(PRECISIONS)) if table.supported[job, p]]
    costs = np.array([[KV_BYTES_PER_ELEMENT[p], KV_QUALITY_ERROR[p]] for p in codes])
    return [codes[i] for i in _undominated(costs)]


def enumerate_job_options(table: JobTable, job: int) -> tuple[JobOptions, RowResults]:
    """Simulate the product of all undominated choices for one job (vectorised)."""
    count = int(table.gpu_count[job])
    heads = int(table.num_heads[job])
    placements = [
        (g, tp)
        for g in range(1, count + 1)
        for tp in TENSOR_PARALLEL_SIZES
        if g % tp == 0 and heads % tp == 0
    ]
    serve = table.kind[job] == SERVE
    micro_batches = (1,) if serve else MICRO_BATCH_SIZES
    checkpointing = (False,) if serve else (False, True)
    shardings = (NO_SHARDING,) if serve else tuple(range(len(SHARDINGS)))
    precision_maps = np.array(list(itertools.product(*group_candidates(table, job))), dtype=np.int64)
    kvs = kv_candidates(table, job)
    # index grids over (placement, precision map, micro-batch, checkpointing, kv, sharding)
    shape = (len(placements), len(precision_maps), len(micro_batches), len(checkpointing), len(kvs))
    grid = np.indices((*shape, len(shardings))).reshape(len(shape) + 1, -1)
    placement = np.array(placements, dtype=np.int64)[grid[0]]
    sharding = np.array(shardings, dtype=np.int64)[grid[5]]
    # one replica has nothing to shard: every sharding is the same plan, so keep "none" only
    keep = (placement[:, 0] > placement[:, 1]) | (sharding == NO_SHARDING)
    grid, placement, sharding = grid[:, keep], placement[keep], sharding[keep]
    rows = PlanRows(
        job=np.full(grid.shape[1], job, dtype=np.int64),
        gpus=placement[:, 0],
        tensor_parallel=placement[:, 1],
        precision=precision_maps[grid[1]],
        micro_batch_size=np.array(micro_batches, dtype=np.int64)[grid[2]],
        activation_checkpointing=np.array(checkpointing, dtype=bool)[grid[3]],
        kv_cache=np.array(kvs, dtype=np.int64)[grid[4]],
        sharding=sharding,
        invalid=np.zeros(grid.shape[1], dtype=bool),
    )
    results = simulate(table, rows)
    return JobOptions(rows=rows, tokens_per_s=results.tokens_per_s, ok=results.status == OK), results


def _knapsack(best_value: np.ndarray, gpu_count: int) -> list[int]:
    """GPU counts per job maximising Σ best_value[j, g_j] with Σ g_j ≤ gpu_count (best_value[:, 0]: idle)."""
    num_jobs = best_value.shape[0]
    total = np.zeros((num_jobs + 1, gpu_count + 1))
    choice = np.zeros((num_jobs, gpu_count + 1), dtype=np.int64)
    for j in range(num_jobs):
        for capacity in range(gpu_count + 1):
            candidates = total[j, capacity - np.arange(capacity + 1)] + best_value[j, : capacity + 1]
            choice[j, capacity] = int(np.argmax(candidates))
            total[j + 1, capacity] = candidates[choice[j, capacity]]
    counts, capacity = [], gpu_count
    for j in reversed(range(num_jobs)):
        counts.append(int(choice[j, capacity]))
        capacity -= counts[-1]
    return counts[::-1]


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: its arrays have no hash
class SolvedScenario:
    """What scoring a plan needs about its scenario (``solve_scenario``): computed once, passed along."""

    scenario: Scenario
    table: JobTable
    packed_table: PackedJobTable  # the table as blocks of like fields, for stacking with other scenarios
    job_ids: tuple[str, ...]
    job_index: dict
    reference_tokens_per_s: np.ndarray  # (J,) best tokens/s of each job alone on the cluster (nan: never ok)
    optimal_plan: dict
    optimal_objective: float  # objective of optimal_plan, computed exactly as ``evaluate`` computes it
    optimal_value_by_gpus: np.ndarray  # (J, count+1) best value of each job per GPU count (-inf: none ok)
    # (J, count+1) best value of each job with at most that many GPUs: its best response to the GPUs left
    best_value_within_gpus: np.ndarray
    idle_objective: float  # the objective when every job is idle (0, minus the floors' missed-SLO costs)
    gpu_name: str
    gpu_count: int
    default_kv: list[int]  # per job: the KV format a plan gets when it names none
    optimal_gpus: np.ndarray  # (J,) GPUs the optimum gives each job
    optimal_parts: dict[str, JobPlan]  # the optimum's part of each job, by job id (typed optimal_plan)


def _row_to_job_plan(job_id: str, rows: PlanRows, i: int, serve: bool) -> dict:
    plan = {
        "id": job_id,
        "gpus": int(rows.gpus[i]),
        "tensor_parallel": int(rows.tensor_parallel[i]),
        "precision": {g: PRECISIONS[int(rows.precision[i, k])] for k, g in enumerate(MODULE_GROUPS)},
    }
    if serve:
        plan["kv_cache"] = PRECISIONS[int(rows.kv_cache[i])]
    else:
        plan["micro_batch_size"] = int(rows.micro_batch_size[i])
        plan["activation_checkpointing"] = bool(rows.activation_checkpointing[i])
        if rows.sharding[i] != NO_SHARDING:
            plan["sharding"] = SHARDINGS[int(rows.sharding[i])]
    return plan


def solve_scenario(scenario: Scenario) -> SolvedScenario:
    """Enumerate, prune and knapsack (see the module docstring). Pure: nothing is cached here."""
    table = build_job_table(scenario)
    count = scenario.cluster.count
    reference = np.full(table.num_jobs, np.nan)
    best_value = np.full((table.num_jobs, count + 1), -np.inf)
    best_value[:, 0] = missed_floor_value(table)  # idle: 0, or a floor job's missed-SLO cost
    best_row: list[dict[int, int]] = []
    simulated = [enumerate_job_options(table, j) for j in range(table.num_jobs)]
    for j, (job_options, _) in enumerate(simulated):
        if job_options.ok.any():
            reference[j] = job_options.tokens_per_s[job_options.ok].max()
    for j, (job_options, results) in enumerate(simulated):
        rows = job_options.rows
        values = job_values(table, rows, results, reference)
        rows_best: dict[int, int] = {}
        for g in range(1, count + 1):
            candidates = np.flatnonzero(job_options.ok & (rows.gpus == g))
            if candidates.size:
                rows_best[g] = int(candidates[np.argmax(values[candidates])])
                best_value[j, g] = values[rows_best[g]]
        best_row.append(rows_best)
    options = [job_options for job_options, _ in simulated]
    counts = _knapsack(best_value, count)
    jobs = []
    for j, g in enumerate(counts):
        job_id = scenario.jobs[j].id
        if g == 0:
            sixteen = PRECISIONS[int(table.default_kv[j])]
            jobs.append(
                {
                    "id": job_id,
                    "gpus": 0,
                    "tensor_parallel": 1,
                    "precision": dict.fromkeys(MODULE_GROUPS, sixteen),
                }
            )
        else:
            jobs.append(_row_to_job_plan(job_id, options[j].rows, best_row[j][g], table.kind[j] == SERVE))
    ids = tuple(job.id for job in scenario.jobs)
    job_index = {job_id: i for i, job_id in enumerate(ids)}
    default_kv = [int(code) for code in table.default_kv]
    optimal_plan = {"jobs": jobs}
    buffer = RowBuffer()
    reasons = encode_plan(optimal_plan, job_index, 0, count, default_kv, buffer)
    assert not reasons, reasons
    rows = buffer.to_rows()
    values = job_values(table, rows, simulate(table, rows), reference)
    optimal_objective = float(np.bincount(np.zeros(len(ids), dtype=np.int64), weights=values, minlength=1)[0])
    return SolvedScenario(
        scenario=scenario,
        table=table,
        packed_table=table.packed(),
        job_ids=ids,
        job_index=job_index,
        reference_tokens_per_s=reference,
        optimal_plan=optimal_plan,
        optimal_objective=optimal_objective,
        optimal_value_by_gpus=best_value,
        best_value_within_gpus=np.maximum.accumulate(best_value, axis=1),
        idle_objective=float(best_value[:, 0].sum()),
        gpu_name=scenario.cluster.gpu,
        gpu_count=count,
        default_kv=default_kv,
        optimal_gpus=np.array(counts, dtype=np.int64),
        optimal_parts={part.id: part for part in plan_from_object(optimal_plan).jobs},
    )
