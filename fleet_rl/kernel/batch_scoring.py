"""Batch scoring: ``score_batch`` (plans against their solved scenarios, as arrays: ``ScoredBatch``) and the
public entry points built on it, ``evaluate`` (one plan), ``evaluate_batch`` (many) and ``solve``, which turn
its arrays into ``Evaluation`` objects (``results.py``).

Both scoring paths encode plans to rows, run one vectorised ``simulate`` and one ``job_values``, and sum
job values per plan with ``np.bincount``, so a plan gets bit-identical results alone or in a batch.

A batch spanning several scenarios needs their job tables side by side. ``score_batch`` simulates it against
an arena (``_JobArena``): one capacity-sized ``JobTable`` holding the tables of every scenario scored and
still alive, each job in a slot filled on the scenario's first use, so no table is stacked per call; a
batch's rows are simulated with their jobs' slots in place of their batch-local indices (every operation
is per row, so the values are those against the stacked tables; ``tests/kernel/test_arena.py`` compares
them). ``ScoredBatch.table`` stacks the batch's tables only when asked for (``_concatenate``: one
``np.concatenate`` per group of like fields, each table's groups stacked once and kept while it lives; the
result is that of ``JobTable.concatenate``).
"""

from __future__ import annotations

import functools
import operator
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel.constants import (
    FP8,
    INT8,
    INVALID,
    OK,
    OOM,
    STATUSES,
    TRAIN,
    UNALLOCATED,
    UNSTABLE_FORMAT,
    UNSUPPORTED,
)
from fleet_rl.kernel.encode import RowBuffer, encode_plans
from fleet_rl.kernel.job_table import JobTable
from fleet_rl.kernel.reasons import Reason, ReasonCode
from fleet_rl.kernel.results import Evaluation, JobResult
from fleet_rl.kernel.simulate import PlanRows, RowResults, job_values, simulate
from fleet_rl.kernel.solver import SolvedScenario, solve_scenario


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

    @functools.cached_property
    def table(self) -> JobTable:
        """The batch's job table (the scenarios' tables stacked), built when first asked for."""
        tables = [solved.table for solved in self.solved]
        return tables[0] if len(tables) == 1 else _concatenate(tables)


_FIELDS = tuple(JobTable.__dataclass_fields__)
_get_fields = operator.attrgetter(*_FIELDS)
# id(table) -> (layout, blocks) for tables alive (a finalizer drops the entry with its table):
# layout groups the fields of one dtype and trailing shape; blocks[g] stacks group g's fields, (k, J, ...).
_PACKED: dict[int, tuple[tuple, tuple[np.ndarray, ...]]] = {}
_LAYOUTS: dict[tuple, tuple] = {}  # one shared object per layout, so layouts compare by identity


def _packed(table: JobTable) -> tuple[tuple, tuple[np.ndarray, ...]]:
    entry = _PACKED.get(id(table))
    if entry is None:
        groups: dict[tuple, list[int]] = {}
        values = _get_fields(table)
        for i, value in enumerate(values):
            groups.setdefault((value.dtype.str, value.shape[1:]), []).append(i)
        layout = tuple((key, tuple(indices)) for key, indices in groups.items())
        layout = _LAYOUTS.setdefault(layout, layout)
        blocks = tuple(np.stack([values[i] for i in indices]) for _, indices in layout)
        entry = _PACKED[id(table)] = (layout, blocks)
        weakref.finalize(table, _PACKED.pop, id(table), None)
    return entry


def _concatenate(tables: list[JobTable]) -> JobTable:
    """``JobTable.concatenate`` with one ``np.concatenate`` per group of like fields instead of one per
    field: each table's fields are stacked once, on first use (``_packed``). Same values, same dtypes and
    shapes, and every field C-contiguous, as ``JobTable.concatenate`` gives."""
    packs = [_packed(table) for table in tables]
    layout = packs[0][0]
    if any(pack[0] is not layout for pack in packs):
        return JobTable.concatenate(tables)
    fields: list = [None] * len(_FIELDS)
    for g, (_, indices) in enumerate(layout):
        block = np.concatenate([pack[1][g] for pack in packs], axis=1)
        for k, i in enumerate(indices):
            fields[i] = block[k]
    return JobTable(*fields)


class _JobArena:
    """The job tables of every scenario scored (and still alive) in one capacity-sized ``JobTable``, so that a
    batch spanning many scenarios is simulated against it in place, without stacking tables per call.

    Each job of a ``SolvedScenario`` gets a slot (a row of ``table``) on the scenario's first use; a
    batch's rows are simulated with their jobs' slots in place of their batch-local job indices (the same
    values, row by row). The slots return to a free list when the ``SolvedScenario`` is collected (it
    lives while it stays in ``solve_scenario``'s cache or a caller holds it), and the table grows by
    doubling, so it holds about as much as the live scenarios' own tables. One arena per ``layout`` (the
    dtype and trailing shape of every field; every ``build_job_table`` table has the same)."""

    def __init__(self, layout: tuple) -> None:
        self.layout = layout
        self.capacity = 0
        self.table = self._allocate(0)
        self.reference = np.empty(0)  # (capacity,) each slot's reference tokens/s (job_values)
        self.used = 0  # slots handed out so far; the free list holds the released ones below it
        self.free: list[int] = []

    def _allocate(self, capacity: int) -> JobTable:
        return JobTable(*(np.empty((capacity, *shape), dtype=dtype) for dtype, shape in self.layout))

    def add(self, solved: SolvedScenario) -> np.ndarray:
        """Slots for the jobs of ``solved``, filled with its table; they are freed with ``solved``."""
        count = solved.table.num_jobs
        reused = [self.free.pop() for _ in range(min(count, len(self.free)))]
        fresh = list(range(self.used, self.used + count - len(reused)))
        self.used += len(fresh)
        if self.used > self.capacity:
            self._grow(max(2 * self.capacity, self.used, 64))
        slots = np.array(reused + fresh, dtype=np.int64)
        for target, value in zip(_get_fields(self.table), _get_fields(solved.table), strict=True):
            target[slots] = value
        self.reference[slots] = solved.reference_tokens_per_s
        return slots

    def _grow(self, capacity: int) -> None:
        table, size = self._allocate(capacity), self.capacity
        for target, value in zip(_get_fields(table), _get_fields(self.table), strict=True):
            target[:size] = value
        reference = np.empty(capacity)
        reference[:size] = self.reference
        self.table, self.reference, self.capacity = table, reference, capacity


_ARENAS: dict[tuple, _JobArena] = {}  # by layout
_PLACED: dict[int, tuple[_JobArena, np.ndarray]] = {}  # id(solved) -> its arena and slots, while it lives
# Placing and releasing (reentrant: a release may run from a collection inside a placement); the lookup of
# a scenario already placed takes no lock, and its slots hold their values until it is collected.
_ARENA_LOCK = threading.RLock()


def _placed(solved: SolvedScenario) -> tuple[_JobArena, np.ndarray]:
    entry = _PLACED.get(id(solved))
    if entry is None:
        with _ARENA_LOCK:
            entry = _PLACED.get(id(solved))
            if entry is None:
                layout = tuple((value.dtype, value.shape[1:]) for value in _get_fields(solved.table))
                arena = _ARENAS.get(layout)
                if arena is None:
                    arena = _ARENAS[layout] = _JobArena(layout)
                entry = _PLACED[id(solved)] = (arena, arena.add(solved))
                weakref.finalize(solved, _release, id(solved)).atexit = False  # nothing to free at exit
    return entry


def _release(key: int) -> None:
    with _ARENA_LOCK:
        arena, slots = _PLACED.pop(key)
        arena.free.extend(slots.tolist())


def score_batch(solved_list: Sequence[SolvedScenario], plans: Sequence[object]) -> ScoredBatch:
    """Encode, simulate and score ``plans[i]`` against ``solved_list[i]`` (arrays only)."""
    offsets: dict[int, int] = {}  # id(solved) -> its first row in the batch's job table
    distinct, job_offsets, sizes, optimal = [], [], [], []
    offset = job_offset = size = best = 0
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
        job_offsets.append(job_offset)
        sizes.append(size)
        optimal.append(best)
    buffer = RowBuffer()
    plan_reasons = encode_plans(plans, solved_list, job_offsets, buffer)
    rows = buffer.to_rows()
    results, values = _simulate_in_arena(distinct, rows)
    plan_sizes = np.array(sizes, dtype=np.int64)
    plan_of_row = np.repeat(np.arange(len(sizes)), plan_sizes)
    objective = np.bincount(plan_of_row, weights=values, minlength=len(sizes))
    valid = np.fromiter(map(operator.not_, plan_reasons), dtype=bool, count=len(plan_reasons))
    objective = np.where(valid, objective, 0.0)
    optimal_objective = np.array(optimal, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(optimal_objective > 0, objective / optimal_objective, 1.0)
    score = np.where(valid, np.clip(ratio, 0.0, 1.0), 0.0)
    return ScoredBatch(
        rows, results, values, objective, valid, score, plan_reasons, plan_of_row, plan_sizes, tuple(distinct)
    )


def _simulate_in_arena(distinct: list[SolvedScenario], rows: PlanRows) -> tuple[RowResults, np.ndarray]:
    """``simulate`` and ``job_values`` of ``rows`` (whose jobs index the ``distinct`` scenarios' jobs, in
    order) against the arena holding their tables: the same values as against their stacked tables."""
    arena, slots = _placed(distinct[0])
    if len(distinct) > 1:
        placed = [_placed(solved) for solved in distinct]
        if len(_ARENAS) > 1 and any(other is not arena for other, _ in placed):  # tables of several layouts
            tables = [solved.table for solved in distinct]
            reference = np.concatenate([solved.reference_tokens_per_s for solved in distinct])
            table = JobTable.concatenate(tables)
            results = simulate(table, rows)
            return results, job_values(table, rows, results, reference)
        slots = np.concatenate([slots for _, slots in placed])
    rows = PlanRows(
        slots.take(rows.job),
        rows.gpus,
        rows.tensor_parallel,
        rows.precision,
        rows.micro_batch_size,
        rows.activation_checkpointing,
        rows.kv_cache,
        rows.invalid,
    )
    results = simulate(arena.table, rows)
    return results, job_values(arena.table, rows, results, arena.reference)


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


def _evaluations(solved_list: Sequence[SolvedScenario], scored: ScoredBatch) -> list[Evaluation]:
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


def evaluate(scenario, plan: object) -> Evaluation:
    """Score one plan (dict, JSON text, ``Plan``, or anything else) against ``scenario``. Never raises on
    a bad plan: it returns ``valid=False`` with reason codes."""
    solved = solve_scenario(scenario)
    return _evaluations([solved], score_batch([solved], [plan]))[0]


def evaluate_batch(scenarios_or_one, plans: Sequence[object]) -> list[Evaluation]:
    """Score many plans at once: one scenario for all, or one scenario per plan. Identical, item by item,
    to ``evaluate``."""
    plans = list(plans)
    if hasattr(scenarios_or_one, "jobs"):
        scenarios = [scenarios_or_one] * len(plans)
    else:
        scenarios = list(scenarios_or_one)
        if len(scenarios) != len(plans):
            raise ValueError(
                f"got {len(scenarios)} scenarios for {len(plans)} plans; pass one or one per plan"
            )
    solved_list = [solve_scenario(scenario) for scenario in scenarios]
    if not plans:
        return []
    return _evaluations(solved_list, score_batch(solved_list, plans))


def solve(scenario) -> Evaluation:
    """The exact optimum: an ``Evaluation`` of the best plan, with ``.plan`` set and ``.score == 1.0``."""
    solved = solve_scenario(scenario)
    return replace(evaluate(scenario, solved.optimal_plan), plan=solved.optimal_plan)
