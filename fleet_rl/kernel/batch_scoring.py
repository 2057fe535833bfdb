"""Batch scoring: ``score_batch`` (plans against their solved scenarios, as arrays: ``ScoredBatch``) and the
public entry points built on it, ``evaluate`` (one plan), ``evaluate_batch`` (many) and ``solve``, which turn
its arrays into ``Evaluation`` objects (``results.py``).

Both scoring paths encode plans to rows, run one vectorised ``simulate`` and one ``job_values``, and sum
job values per plan with ``np.bincount``, so a plan gets bit-identical results alone or in a batch. A batch
spanning several scenarios is simulated against their job tables stacked once per call (from the blocks of
like fields each ``SolvedScenario`` carries, ``PackedJobTable.concatenate``: the values of
``JobTable.concatenate``); every operation is per row, so a row's values do not depend on the rest of the
batch.

Everything here takes the ``SolvedScenario`` as an argument and keeps nothing between calls. The public
entry points also accept a ``Scenario`` and then solve it (milliseconds): to score many plans of one
scenario, pass ``solve_scenario(scenario)`` once, or use ``evaluate_batch``, which solves each distinct
scenario of its call once.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel.constants import (
    FP8,
    INT8,
    INVALID,
    NO_SHARDING,
    OK,
    OOM,
    SERVE,
    STATUSES,
    TOO_SLOW,
    TRAIN,
    UNALLOCATED,
    UNSTABLE_FORMAT,
    UNSUPPORTED,
)
from fleet_rl.kernel.encode import RowBuffer, encode_plans
from fleet_rl.kernel.job_table import JobTable, PackedJobTable
from fleet_rl.kernel.reasons import Reason, ReasonCode
from fleet_rl.kernel.results import Evaluation, JobResult
from fleet_rl.kernel.simulate import PlanRows, RowResults, job_values, simulate
from fleet_rl.kernel.solver import SolvedScenario, solve_scenario
from fleet_rl.plan_schema import SHARDINGS
from fleet_rl.scenario import Scenario


@dataclass(frozen=True)
class ScoredBatch:
    """Array form of a batch's results, before ``Evaluation`` objects are built."""

    rows: PlanRows
    results: RowResults
    values: np.ndarray  # (R,)
    objective: np.ndarray  # (P,)
    valid: np.ndarray  # (P,) bool
    score: np.ndarray  # (P,)
    plan_reasons: list[list[Reason]]  # per plan: why it is invalid (empty when valid)
    plan_of_row: np.ndarray  # (R,) the plan each row belongs to
    plan_sizes: np.ndarray  # (P,) rows (scenario jobs) of each plan
    # the distinct scenarios, in job-table order: rows.job indexes their jobs, one scenario after another
    solved: tuple[SolvedScenario, ...]
    table: JobTable  # their job tables, stacked


def score_batch(solved_list: Sequence[SolvedScenario], plans: Sequence[object]) -> ScoredBatch:
    """Encode, simulate and score ``plans[i]`` against ``solved_list[i]`` (arrays only)."""
    offsets: dict[int, int] = {}  # id(solved) -> its first row in the batch's job table
    distinct, job_offsets, sizes, optimal, idle = [], [], [], [], []
    offset = job_offset = size = best = nothing = 0
    previous = None
    for solved in solved_list:
        if solved is not previous:  # plans of one scenario usually come together
            previous = solved
            job_offset = offsets.get(id(solved))
            if job_offset is None:
                job_offset = offsets[id(solved)] = offset
                distinct.append(solved)
                offset += len(solved.job_ids)
            size, best = len(solved.job_ids), solved.optimal_objective
            nothing = solved.idle_objective  # every job idle
        job_offsets.append(job_offset)
        sizes.append(size)
        optimal.append(best)
        idle.append(nothing)
    buffer = RowBuffer()
    plan_reasons = encode_plans(plans, solved_list, job_offsets, buffer)
    rows = buffer.to_rows()
    results, values, table = _simulate(distinct, rows)
    plan_sizes = np.array(sizes, dtype=np.int64)
    plan_of_row = np.repeat(np.arange(len(sizes)), plan_sizes)
    objective = np.bincount(plan_of_row, weights=values, minlength=len(sizes))
    valid = np.fromiter(map(operator.not_, plan_reasons), dtype=bool, count=len(plan_reasons))
    # a plan the kernel rejects runs nothing: 0, minus the missed floors of the jobs that have one
    objective = np.where(valid, objective, np.array(idle, dtype=np.float64))
    optimal_objective = np.array(optimal, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        # an optimum ≤ 0 (no job can run, or floors no plan meets): a plan as good as it scores 1, others 0
        ratio = np.where(
            optimal_objective > 0,
            objective / optimal_objective,
            (objective >= optimal_objective - 1e-9) * 1.0,
        )
    score = np.where(valid, np.clip(ratio, 0.0, 1.0), 0.0)
    return ScoredBatch(
        rows,
        results,
        values,
        objective,
        valid,
        score,
        plan_reasons,
        plan_of_row,
        plan_sizes,
        tuple(distinct),
        table,
    )


def _stacked_table(distinct: Sequence[SolvedScenario]) -> JobTable:
    if len(distinct) == 1:
        return distinct[0].table
    return PackedJobTable.concatenate([solved.packed_table for solved in distinct])


def _simulate(distinct: Sequence[SolvedScenario], rows: PlanRows) -> tuple[RowResults, np.ndarray, JobTable]:
    """``simulate`` and ``job_values`` of ``rows`` (whose jobs index the ``distinct`` scenarios' jobs, in
    order) against their stacked tables, which it also returns."""
    table = _stacked_table(distinct)
    if len(distinct) == 1:
        reference = distinct[0].reference_tokens_per_s
    else:
        reference = np.concatenate([solved.reference_tokens_per_s for solved in distinct])
    results = simulate(table, rows)
    return results, job_values(table, rows, results, reference), table


def _job_reason(solved: SolvedScenario, scored: ScoredBatch, row: int, job_id: str) -> Reason | None:
    """Why a job is not ok (None when ok or invalid, whose reason is plan-level)."""
    status = int(scored.results.status[row])
    table, rows = scored.table, scored.rows
    j = int(rows.job[row])
    gpu = solved.gpu_name
    if status in (OK, INVALID):
        return None
    if status == UNALLOCATED:
        return Reason(ReasonCode.UNALLOCATED, f"job '{job_id}' has no GPUs")
    if status == OOM:
        need = scored.results.memory_per_gpu_bytes[row] / 1e9
        have = table.memory_capacity_bytes[j] / 1e9
        text = f"job '{job_id}' needs {need:.1f} GB per GPU, a {gpu} has {have:.1f} GB"
        return Reason(ReasonCode.OOM, text)
    if status == TOO_SLOW:
        made, floor = scored.results.tokens_per_s[row], table.min_tokens_per_s[j]
        text = f"job '{job_id}' makes {made:,.0f} tokens/s, under its min_tokens_per_s {floor:,.0f}"
        return Reason(ReasonCode.TOO_SLOW, text)
    precision = [PRECISIONS[int(code)] for code in rows.precision[row]]
    kind = int(table.kind[j])
    if status == UNSUPPORTED:
        missing = sorted({p for p in precision if not table.supported[j, PRECISIONS.index(p)]})
        if kind == TRAIN and (rows.precision[row] >= INT8).any():
            text = f"job '{job_id}' trains weights in a weight-only integer format"
            return Reason(ReasonCode.UNSUPPORTED, text)
        if missing:
            text = f"the {gpu} has no native {', '.join(missing)} (job '{job_id}')"
            return Reason(ReasonCode.UNSUPPORTED, text)
        if kind == SERVE and rows.sharding[row] != NO_SHARDING:
            sharding = SHARDINGS[int(rows.sharding[row])]
            text = f"job '{job_id}' serves: sharding '{sharding}' is a training setting (optimizer states)"
            return Reason(ReasonCode.UNSUPPORTED, text)
        if int(table.num_heads[j]) % int(rows.tensor_parallel[row]):
            heads, tp = int(table.num_heads[j]), int(rows.tensor_parallel[row])
            text = f"job '{job_id}' cannot split {heads} attention heads over tensor_parallel {tp}"
            return Reason(ReasonCode.UNSUPPORTED, text)
        kv = PRECISIONS[int(rows.kv_cache[row])]
        return Reason(ReasonCode.UNSUPPORTED, f"the {gpu} has no native {kv} KV cache (job '{job_id}')")
    unstable_groups = [
        group
        for k, group in enumerate(MODULE_GROUPS)
        if UNSTABLE_FORMAT[kind, k, int(rows.precision[row, k])]
    ]
    if unstable_groups:
        names = ", ".join(f"{g}={precision[MODULE_GROUPS.index(g)]}" for g in unstable_groups)
        fp8_training = kind == TRAIN and FP8 in rows.precision[row]
        hint = " (fp8 is for attention/mlp GEMMs only)" if fp8_training else ""
        return Reason(ReasonCode.UNSTABLE, f"job '{job_id}' diverges with {names}{hint}")
    loss = scored.results.quality_loss[row]
    tolerance = table.max_quality_loss[j]
    text = f"job '{job_id}' loses {loss:.2%} quality, over its max_quality_loss {tolerance:.2%}"
    return Reason(ReasonCode.UNSTABLE, text)


def evaluations_from(solved_list: Sequence[SolvedScenario], scored: ScoredBatch) -> list[Evaluation]:
    """The ``Evaluation`` of each plan of ``scored`` (``score_batch(solved_list, plans)``), without
    simulating again: what ``evaluate_batch`` returns for the same plans."""
    out = []
    row = 0
    results = scored.results
    for i, solved in enumerate(solved_list):
        jobs, reasons = [], list(scored.plan_reasons[i])
        capacity_gb = solved.table.memory_capacity_bytes[0] / 1e9
        for job_id in solved.job_ids:
            reason = _job_reason(solved, scored, row, job_id)
            if reason is not None:
                reasons.append(reason)
            jobs.append(
                JobResult(
                    id=job_id,
                    status=STATUSES[int(results.status[row])],
                    gpus=int(scored.rows.gpus[row]),
                    tensor_parallel=int(scored.rows.tensor_parallel[row]),
                    memory_per_gpu_gb=float(results.memory_per_gpu_bytes[row] / 1e9),
                    memory_capacity_gb=float(capacity_gb),
                    tokens_per_s=float(results.tokens_per_s[row]),
                    quality_loss=float(results.quality_loss[row]),
                    power_w=float(results.power_w[row]),
                    value=float(scored.values[row]),
                )
            )
            row += 1
        out.append(
            Evaluation(
                score=float(scored.score[i]),
                objective=float(scored.objective[i]),
                valid=bool(scored.valid[i]),
                reasons=[str(reason) for reason in reasons],
                jobs=jobs,
                optimal_objective=float(solved.optimal_objective),
                reason_codes=[reason.code for reason in reasons],
            )
        )
    return out


def _solved(scenario: Scenario | SolvedScenario) -> SolvedScenario:
    return scenario if isinstance(scenario, SolvedScenario) else solve_scenario(scenario)


def evaluate(scenario: Scenario | SolvedScenario, plan: object) -> Evaluation:
    """Score one plan (dict, JSON text, ``Plan``, or anything else) against a scenario, or against its
    ``solve_scenario`` result (no solve: microseconds). Never raises on a bad plan: it returns
    ``valid=False`` with reason codes."""
    solved = _solved(scenario)
    return evaluations_from([solved], score_batch([solved], [plan]))[0]


def evaluate_batch(scenarios_or_one, plans: Sequence[object]) -> list[Evaluation]:
    """Score many plans at once: one scenario (or ``SolvedScenario``) for all, or one per plan; each
    distinct scenario is solved once. Identical, item by item, to ``evaluate``."""
    plans = list(plans)
    if isinstance(scenarios_or_one, Scenario | SolvedScenario):
        scenarios = [scenarios_or_one] * len(plans)
    else:
        scenarios = list(scenarios_or_one)
        if len(scenarios) != len(plans):
            raise ValueError(
                f"got {len(scenarios)} scenarios for {len(plans)} plans; pass one or one per plan"
            )
    if not plans:
        return []
    solved_by_scenario: dict[Scenario | SolvedScenario, SolvedScenario] = {}
    solved_list = []
    for scenario in scenarios:
        solved = solved_by_scenario.get(scenario)
        if solved is None:
            solved = solved_by_scenario[scenario] = _solved(scenario)
        solved_list.append(solved)
    return evaluations_from(solved_list, score_batch(solved_list, plans))


def solve(scenario: Scenario | SolvedScenario) -> Evaluation:
    """The exact optimum: an ``Evaluation`` of the best plan, with ``.plan`` set and ``.score == 1.0``."""
    solved = _solved(scenario)
    return replace(evaluate(solved, solved.optimal_plan), plan=solved.optimal_plan)
