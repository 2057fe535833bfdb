"""The faster kernel batch path gives the arrays the original one gave, bit for bit.

``score_batch`` encodes every plan in one loop into one flat row buffer (``encode_plans``, turned into
arrays through bytes when every value fits in one) and simulates against the kernel's arena of job tables
instead of stacking them per call (``tests/kernel/test_arena.py``; ``_concatenate`` still stacks them
when ``ScoredBatch.table`` is asked for). Each is compared here with the code it replaced, kept below as
the reference, on the benchmark's realistic GRPO batches. (The scoring pass's reference copy went with
issue #9, which changed what the pass computes: tests/rewards/test_reward_properties.py states it.)"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

import rewards.scoring as scoring
from benchmarks import speed
from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel import batch_scoring
from fleet_rl.kernel.encode import RowBuffer, encode_plan, encode_plans, parse_plan_object
from fleet_rl.kernel.job_table import JobTable
from fleet_rl.kernel.simulate import PlanRows, job_values, simulate
from fleet_rl.kernel.solver import solve_scenario
from fleet_rl.plan_schema import JobPlan, Plan, PrecisionMap
from fleet_rl.prompts import example_plan
from fleet_rl.scenario_generator import make_scenario
from rewards import fleet_reward
from rewards.copied_example import copies_example
from rewards.parsing import parse_plan

# --- The replaced code, verbatim but for names


def reference_encode(plan, job_index, job_offset, gpu_count, default_kv, rows: dict) -> list[str]:
    code = {name: c for c, name in enumerate(PRECISIONS)}
    parsed, reason = parse_plan_object(plan)
    entries: list = [None] * len(job_index)
    reasons: list[str] = []
    if parsed is None:
        reasons.append(str(reason))
    else:
        for job_plan in parsed.jobs:
            index = job_index.get(job_plan.id)
            if index is None:
                reasons.append(f"unknown_job: '{job_plan.id[:64]}' is not a job of this scenario")
            elif entries[index] is not None:
                reasons.append(f"duplicate_job: '{job_plan.id}' appears more than once")
            else:
                entries[index] = job_plan
    total_gpus = 0
    for index, entry in enumerate(entries):
        rows["job"].append(job_offset + index)
        if entry is None:
            rows["gpus"].append(0)
            rows["tensor_parallel"].append(1)
            rows["precision"].append((1, 1, 1, 1, 1))
            rows["micro_batch_size"].append(1)
            rows["activation_checkpointing"].append(False)
            rows["kv_cache"].append(default_kv[index])
            rows["invalid"].append(parsed is None)
            continue
        gpus, tp = entry.gpus, entry.tensor_parallel
        total_gpus += gpus
        mismatch = gpus > 0 and gpus % tp != 0
        if mismatch:
            reasons.append(
                f"tp_mismatch: job '{entry.id}' has tensor_parallel {tp}, which does not divide gpus {gpus}"
            )
        p = entry.precision
        rows["gpus"].append(gpus)
        rows["tensor_parallel"].append(tp)
        rows["precision"].append(tuple(code[getattr(p, group)] for group in MODULE_GROUPS))
        rows["micro_batch_size"].append(entry.micro_batch_size)
        rows["activation_checkpointing"].append(entry.activation_checkpointing)
        rows["kv_cache"].append(default_kv[index] if entry.kv_cache is None else code[entry.kv_cache])
        rows["invalid"].append(mismatch)
    if total_gpus > gpu_count:
        reasons.append(f"over_allocated: the plan uses {total_gpus} GPUs, the cluster has {gpu_count}")
    return reasons


def reference_rows(rows: dict) -> PlanRows:
    return PlanRows(
        job=np.array(rows["job"], dtype=np.int64),
        gpus=np.array(rows["gpus"], dtype=np.int64),
        tensor_parallel=np.array(rows["tensor_parallel"], dtype=np.int64),
        precision=np.array(rows["precision"], dtype=np.int64).reshape(-1, len(MODULE_GROUPS)),
        micro_batch_size=np.array(rows["micro_batch_size"], dtype=np.int64),
        activation_checkpointing=np.array(rows["activation_checkpointing"], dtype=bool),
        kv_cache=np.array(rows["kv_cache"], dtype=np.int64),
        invalid=np.array(rows["invalid"], dtype=bool),
    )


def reference_score_batch(solved_list, plans) -> dict:
    distinct: dict[int, int] = {}
    tables, references, offsets, optimal = [], [], [], []
    offset = 0
    for solved in solved_list:
        if id(solved) not in distinct:
            distinct[id(solved)] = len(tables)
            tables.append(solved.table)
            references.append(solved.reference_tokens_per_s)
            offsets.append(offset)
            offset += solved.table.num_jobs
    columns = {name: [] for name in PlanRows.__dataclass_fields__}
    plan_reasons = []
    for solved, plan in zip(solved_list, plans, strict=True):
        k = distinct[id(solved)]
        optimal.append(solved.optimal_objective)
        plan_reasons.append(
            reference_encode(plan, solved.job_index, offsets[k], solved.gpu_count, solved.default_kv, columns)
        )
    table = tables[0] if len(tables) == 1 else JobTable.concatenate(tables)
    reference = np.concatenate(references)
    rows = reference_rows(columns)
    results = simulate(table, rows)
    values = job_values(table, rows, results, reference)
    sizes = [solved.table.num_jobs for solved in solved_list]
    plan_of_row = np.repeat(np.arange(len(sizes)), sizes)
    objective = np.bincount(plan_of_row, weights=values, minlength=len(sizes))
    valid = np.array([not reasons for reasons in plan_reasons], dtype=bool)
    objective = np.where(valid, objective, 0.0)
    optimal_objective = np.array(optimal, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(optimal_objective > 0, objective / optimal_objective, 1.0)
    score = np.where(valid, np.clip(ratio, 0.0, 1.0), 0.0)
    return {"rows": rows, "results": results, "values": values, "objective": objective, "valid": valid,
            "score": score, "plan_reasons": plan_reasons}  # fmt: skip


def assert_same_array(actual: np.ndarray, expected: np.ndarray, name: str) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, name
    assert np.array_equal(actual, expected, equal_nan=actual.dtype.kind == "f"), name


@pytest.fixture(scope="module")
def batches():
    calls, _, _ = speed.reward_batches(12, seed=5)
    return calls


# --- Scoring pass


def test_copied_example_is_still_caught():
    # The GPU-count pre-filter must not hide the copied-example rule: the example's answer under the ids of
    # a scenario with the same number of jobs.
    scenario = next(
        s
        for s in (make_scenario("medium", seed) for seed in range(50))
        if len(s.jobs) == len(example_plan()["jobs"])
    )
    jobs = [
        {**job, "id": job_id} for job, job_id in zip(example_plan()["jobs"], scenario.job_ids, strict=True)
    ]
    text = json.dumps({"jobs": jobs})
    scores = scoring.score_completions([text], [scenario.to_json()])
    assert copies_example(parse_plan(text).plan, scenario, solve_scenario(scenario).optimal_plan)
    assert scores.ird.tolist() == [True]
    assert fleet_reward([text], [scenario.to_json()]) == [0.01]


def test_cache_key_keeps_the_one_entry_cache_working(batches):
    completions, scenario_column, kwargs = batches[0]
    first = scoring.score_completions(completions, scenario_column, **kwargs)
    assert scoring.score_completions(list(completions), list(scenario_column), **kwargs) is first
    assert scoring.score_completions(completions[:-1], scenario_column[:-1]) is not first
    unhashable = [{"jobs": []}] * len(completions)  # given_plan as dicts: not cached, still scored
    scoring.score_completions(completions, scenario_column, given_plan=unhashable)


# --- Kernel batch: encoding and table stacking


def test_score_batch_matches_the_original(batches):
    rng = random.Random(2)
    for completions, scenario_column, _ in batches:
        parsed = [parse_plan(completion) for completion in completions]
        rows = [i for i, result in enumerate(parsed) if result.plan is not None]
        solved = [solve_scenario(scoring.scenario_from_json(scenario_column[i])) for i in rows]
        plans: list[object] = [parsed[i].plan for i in rows]
        # other plan forms score_batch accepts: dicts, JSON text, garbage
        for k in rng.sample(range(len(plans)), 6):
            plans[k] = rng.choice([json.dumps(solved[k].optimal_plan), solved[k].optimal_plan, None, "{", 7])
        scored = batch_scoring.score_batch(solved, plans)
        expected = reference_score_batch(solved, plans)
        assert [list(map(str, reasons)) for reasons in scored.plan_reasons] == expected["plan_reasons"]
        for name in PlanRows.__dataclass_fields__:
            assert_same_array(getattr(scored.rows, name), getattr(expected["rows"], name), name)
            assert getattr(scored.rows, name).flags.c_contiguous, name
        for name in ("status", "memory_per_gpu_bytes", "tokens_per_s", "quality_loss", "power_w"):
            assert_same_array(getattr(scored.results, name), getattr(expected["results"], name), name)
        for name in ("values", "objective", "valid", "score"):
            assert_same_array(getattr(scored, name), expected[name], name)


@pytest.mark.parametrize("count", [2, 3, 16])
def test_stacked_tables_equal_job_table_concatenate(count):
    tables = [
        solve_scenario(make_scenario(task, seed)).table
        for seed in range(count)
        for task in ("easy", "hard", "multiagent")
    ][:count]
    tables.append(tables[0])  # a table twice
    stacked = batch_scoring._concatenate(tables)
    expected = JobTable.concatenate(tables)
    for name in JobTable.__dataclass_fields__:
        assert_same_array(getattr(stacked, name), getattr(expected, name), name)
        assert getattr(stacked, name).flags.c_contiguous, name


def test_encode_plan_matches_the_original_on_every_plan_form():
    solved = solve_scenario(make_scenario("hard", 3))
    optimal = solved.optimal_plan
    first, second = optimal["jobs"][0], optimal["jobs"][1]
    plans = [
        optimal,
        json.dumps(optimal),
        parse_plan(json.dumps(optimal)).plan,
        {"jobs": [second, first]},  # another order
        {"jobs": [first]},  # jobs omitted
        {"jobs": [first, first]},  # duplicated
        {"jobs": [first, {**second, "id": "ghost"}]},  # invented
        {"jobs": [{**first, "gpus": 3, "tensor_parallel": 2}]},  # TP does not divide
        {"jobs": [{**job, "gpus": 8} for job in optimal["jobs"]]},  # over-allocated
        {"jobs": [{**first, "kv_cache": "int4"}]},
        {"jobs": "nope"},
        None,
        "{",
        b'{"jobs": []}',
        bytearray(b'{"jobs": []}'),
        # a hand-built Plan is not validated: values past a byte take RowBuffer's other path
        Plan(
            [
                JobPlan(
                    first["id"], 300, 4, PrecisionMap(*["bf16"] * len(MODULE_GROUPS)), micro_batch_size=1024
                )
            ]
        ),
    ]
    for plan in plans:
        buffer, columns = RowBuffer(), {name: [] for name in PlanRows.__dataclass_fields__}
        args = (solved.job_index, 5, solved.gpu_count, solved.default_kv)
        reasons = encode_plan(plan, *args, buffer)
        assert list(map(str, reasons)) == reference_encode(plan, *args, columns), plan
        assert encode_plans([plan], [solved], [5], RowBuffer()) == [reasons]
        rows, expected = buffer.to_rows(), reference_rows(columns)
        for name in PlanRows.__dataclass_fields__:
            assert_same_array(getattr(rows, name), getattr(expected, name), name)
    empty = RowBuffer().to_rows()
    assert empty.num_rows == 0 and empty.precision.shape == (0, len(MODULE_GROUPS))
