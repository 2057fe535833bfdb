"""evaluate / evaluate_batch: never raises, batch == scalar, determinism and invariants."""

from __future__ import annotations

import json
import random

import pytest
from conftest import ALL_BF16, job_plan, one_job

from fleet_rl import Scenario, make_scenario
from fleet_rl.catalog import GPUS, MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel import batch_scoring, evaluate, evaluate_batch, solve, solve_scenario
from fleet_rl.kernel.reasons import ReasonCode
from fleet_rl.plan_schema import MICRO_BATCH_SIZES, TENSOR_PARALLEL_SIZES

GARBAGE = [
    None,
    0,
    1.5,
    "",
    "{",
    "not json",
    "[]",
    b"\xff\xfe",
    [],
    {},
    {"jobs": None},
    {"jobs": "chat"},
    {"jobs": [None]},
    {"jobs": [{"id": "chat"}]},
    {"jobs": [{"id": 3, "gpus": 1}]},
    {"jobs": [{"id": "chat", "gpus": True, "tensor_parallel": 1, "precision": ALL_BF16}]},  # bool is not int
    {"jobs": [{"id": "chat", "gpus": 1.0, "tensor_parallel": 1, "precision": ALL_BF16}]},  # float is not int
    {"jobs": [{"id": "chat", "gpus": 10**30, "tensor_parallel": 1, "precision": ALL_BF16}]},
    {"jobs": [{"id": "chat", "gpus": -1, "tensor_parallel": 1, "precision": ALL_BF16}]},
    {"jobs": [{"id": "chat", "gpus": 2, "tensor_parallel": 3, "precision": ALL_BF16}]},
    {"jobs": [{"id": "chat", "gpus": 2, "tensor_parallel": 2, "precision": dict(ALL_BF16, mlp="BF16")}]},
    {
        "jobs": [
            {"id": "chat", "gpus": 2, "tensor_parallel": 2, "precision": dict(ALL_BF16, mlp=float("nan"))}
        ]
    },
    {"jobs": [{"id": "chat", "gpus": 2, "tensor_parallel": 2, "precision": ALL_BF16, "extra": 1}]},
    {"jobs": [{"id": "chat", "gpus": 2, "tensor_parallel": 2, "precision": ALL_BF16, "micro_batch_size": 3}]},
    {"jobs": [[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]},
    {"jobs": [{"id": "ghost", "gpus": 1, "tensor_parallel": 1, "precision": ALL_BF16}]},
    {"jobs": [{"id": "chat", "gpus": 1, "tensor_parallel": 1, "precision": ALL_BF16}] * 2},
    {
        "jobs": [
            {"id": "chat", "gpus": 8, "tensor_parallel": 8, "precision": ALL_BF16},
            {"id": "tune", "gpus": 8, "tensor_parallel": 8, "precision": ALL_BF16},
        ]
    },
    {"jobs": [{"id": "chat", "gpus": 3, "tensor_parallel": 2, "precision": ALL_BF16}]},
    object(),
    {1: 2},
    float("inf"),
]


def random_plan(scenario: Scenario, rng: random.Random) -> dict:
    """A schema-valid plan with random choices (it may over-allocate, OOM, be unstable…)."""
    jobs = []
    for job in scenario.jobs:
        if rng.random() < 0.1:
            continue
        tp = rng.choice(TENSOR_PARALLEL_SIZES)
        gpus = tp * rng.randint(0, max(1, scenario.cluster.count // tp))
        jobs.append(
            {
                "id": job.id,
                "gpus": gpus,
                "tensor_parallel": tp,
                "precision": {g: rng.choice(PRECISIONS) for g in MODULE_GROUPS},
                "micro_batch_size": rng.choice(MICRO_BATCH_SIZES),
                "activation_checkpointing": rng.random() < 0.5,
                "kv_cache": rng.choice(PRECISIONS),
            }
        )
    return {"jobs": jobs}


@pytest.mark.parametrize("plan", GARBAGE, ids=[repr(g)[:40] for g in GARBAGE])
def test_evaluate_never_raises_and_rejects_garbage(two_job_scenario, plan):
    result = evaluate(two_job_scenario, plan)
    assert result.valid is False
    assert result.score == 0.0 and result.objective == 0.0
    assert result.reasons and all(":" in reason for reason in result.reasons)
    assert [job.id for job in result.jobs] == ["chat", "tune"]


def test_reason_codes_are_precise(two_job_scenario):
    codes = {
        "not_an_object": None,
        "schema": {"jobs": 5},
        "unknown_job": {"jobs": [{"id": "ghost", "gpus": 1, "tensor_parallel": 1, "precision": ALL_BF16}]},
        "duplicate_job": {
            "jobs": [{"id": "chat", "gpus": 1, "tensor_parallel": 1, "precision": ALL_BF16}] * 2
        },
        "tp_mismatch": {"jobs": [{"id": "chat", "gpus": 3, "tensor_parallel": 2, "precision": ALL_BF16}]},
        "over_allocated": {
            "jobs": [
                {"id": "chat", "gpus": 8, "tensor_parallel": 8, "precision": ALL_BF16},
                {"id": "tune", "gpus": 1, "tensor_parallel": 1, "precision": ALL_BF16},
            ]
        },
    }
    for code, plan in codes.items():
        result = evaluate(two_job_scenario, plan)
        assert result.reasons[0].startswith(code + ":"), code
        assert result.reason_codes[0] is ReasonCode(code), code


@pytest.mark.parametrize(
    ("job_ids", "codes", "unallocated"),
    [
        (("chat", "tune"), [], []),  # consistent
        (("tune", "chat"), [], []),  # order does not matter
        (("chat",), [], ["tune"]),  # a job left out: valid, unallocated
        (("chat", "tune", "ghost"), ["unknown_job"], []),  # an invented job
        (("chat", "chat", "tune"), ["duplicate_job"], []),  # planned twice
        (("chat", "chat"), ["duplicate_job"], []),
        (("ghost", "ghost"), ["unknown_job", "unknown_job"], []),  # an invented id is unknown each time
        ((), [], ["chat", "tune"]),  # an empty plan
    ],
)
def test_job_ids_are_checked_against_the_scenario(two_job_scenario, job_ids, codes, unallocated):
    part = {"gpus": 1, "tensor_parallel": 1, "precision": ALL_BF16}
    result = evaluate(two_job_scenario, {"jobs": [{**part, "id": job_id} for job_id in job_ids]})
    id_codes = {ReasonCode.UNKNOWN_JOB, ReasonCode.DUPLICATE_JOB}
    assert [str(code) for code in result.reason_codes if code in id_codes] == codes
    assert result.valid == (not codes)
    if result.valid:
        assert [job.id for job in result.jobs if job.status == "unallocated"] == unallocated


def test_every_reason_text_starts_with_its_code():
    rng = random.Random(3)
    seen = set()
    for task in ("easy", "medium", "hard", "multiagent"):
        for seed in range(3):
            scenario = make_scenario(task, seed)
            plans = [random_plan(scenario, rng) for _ in range(30)] + GARBAGE
            for result in evaluate_batch(scenario, plans):
                assert len(result.reason_codes) == len(result.reasons)
                for code, reason in zip(result.reason_codes, result.reasons, strict=True):
                    assert isinstance(code, ReasonCode) and reason.startswith(f"{code}: "), reason
                    seen.add(code)
    # plan-level codes from the garbage, job-level ones (a job's status) from the random plans
    assert {ReasonCode.SCHEMA, ReasonCode.NOT_AN_OBJECT, ReasonCode.OOM, ReasonCode.UNALLOCATED} <= seen


def test_job_reason_codes_name_the_job_status():
    scenario = one_job("l4", "llama-3.1-70b", "serve", count=8, seq_len=2048, batch_size=4)
    result = evaluate(scenario, job_plan(gpus=1, tp=1))
    assert result.reason_codes == [ReasonCode.OOM] and result.jobs[0].status == ReasonCode.OOM
    assert json.loads(json.dumps(result.to_dict()))["reason_codes"] == ["oom"]


def test_json_text_and_dict_give_the_same_result(two_job_scenario):
    plan = solve(two_job_scenario).plan
    assert evaluate(two_job_scenario, json.dumps(plan)) == evaluate(two_job_scenario, plan)


def test_omitted_job_is_unallocated_and_the_plan_stays_valid(two_job_scenario):
    plan = {"jobs": [{"id": "chat", "gpus": 2, "tensor_parallel": 2, "precision": ALL_BF16}]}
    result = evaluate(two_job_scenario, plan)
    assert result.valid
    assert result.statuses == {"chat": "ok", "tune": "unallocated"}
    assert 0.0 < result.score < 1.0


def test_batch_equals_scalar_item_by_item():
    rng = random.Random(0)
    scenarios = [
        make_scenario(task, seed) for task in ("easy", "medium", "hard", "multiagent") for seed in range(3)
    ]
    pairs = []
    for scenario in scenarios:
        pairs += [(scenario, random_plan(scenario, rng)) for _ in range(20)]
        pairs += [(scenario, solve(scenario).plan), (scenario, GARBAGE[rng.randrange(len(GARBAGE))])]
    rng.shuffle(pairs)
    batch = evaluate_batch([s for s, _ in pairs], [p for _, p in pairs])
    solved = {scenario: solve_scenario(scenario) for scenario in scenarios}
    assert batch == [evaluate(solved[s], p) for s, p in pairs]  # exact equality, floats included
    one = pairs[0][0]
    same_scenario = [p for s, p in pairs if s is one]
    assert evaluate_batch(one, same_scenario) == [evaluate(one, p) for p in same_scenario]


def test_a_solved_scenario_scores_like_its_scenario_and_each_scenario_is_solved_once(monkeypatch):
    scenarios = [make_scenario("medium", 1), make_scenario("hard", 2)]
    plans = [random_plan(scenario, random.Random(k)) for k, scenario in enumerate(scenarios)]
    solved = [solve_scenario(scenario) for scenario in scenarios]
    for k, plan in enumerate(plans):
        assert evaluate(solved[k], plan) == evaluate(scenarios[k], plan)
    assert solve(solved[1]) == solve(scenarios[1])
    calls = []

    def counted(scenario):
        calls.append(scenario)
        return solve_scenario(scenario)

    monkeypatch.setattr(batch_scoring, "solve_scenario", counted)
    equal_copy = Scenario.from_json(scenarios[0].to_json())  # equal, not the same object
    evaluate_batch([scenarios[0], scenarios[1], equal_copy, scenarios[1]], plans * 2)
    assert calls == scenarios  # one solve per distinct scenario of the call
    calls.clear()
    evaluate_batch(solved, plans)  # already solved: nothing to solve
    assert calls == []


def test_batch_rejects_mismatched_lengths(two_job_scenario):
    with pytest.raises(ValueError, match="one per plan"):
        evaluate_batch([two_job_scenario], [{}, {}])
    assert evaluate_batch(two_job_scenario, []) == []


def test_scores_are_bounded_and_the_optimum_scores_one():
    rng = random.Random(1)
    for task in ("easy", "medium", "hard", "multiagent"):
        for seed in range(4):
            scenario = make_scenario(task, seed)
            best = solve(scenario)
            assert best.valid and best.score == 1.0 and best.objective == best.optimal_objective
            for result in evaluate_batch(scenario, [random_plan(scenario, rng) for _ in range(50)]):
                assert 0.0 <= result.score <= 1.0
                assert result.objective <= best.objective + 1e-9
                for job in result.jobs:
                    gpu = GPUS[scenario.cluster.gpu]
                    assert 0.0 <= job.power_w <= job.gpus * gpu.tdp_w + 1e-9  # never above TDP
                    if job.status == "ok":
                        assert job.power_w >= job.gpus * gpu.idle_w
                        assert job.memory_per_gpu_gb <= job.memory_capacity_gb
                        assert job.tokens_per_s > 0
                    else:  # nothing, or a missed floor's cost: the job's priority
                        spec = next(j for j in scenario.jobs if j.id == job.id)
                        missed = -spec.priority if spec.min_tokens_per_s is not None else 0.0
                        assert job.value == missed
                        assert job.tokens_per_s == 0.0 or job.status == "too_slow"  # kept for its reason


@pytest.mark.parametrize(("small", "large"), [("a100-40gb", "a100-80gb"), ("h100-sxm", "h200")])
def test_more_memory_never_causes_oom(small, large):
    rng = random.Random(2)
    checked = 0
    for seed in range(6):
        base = make_scenario("hard", seed).to_dict()
        small_scenario = Scenario.from_dict({**base, "cluster": {"gpu": small, "count": 8}})
        large_scenario = Scenario.from_dict({**base, "cluster": {"gpu": large, "count": 8}})
        plans = [random_plan(small_scenario, rng) for _ in range(40)]
        for a, b in zip(
            evaluate_batch(small_scenario, plans), evaluate_batch(large_scenario, plans), strict=True
        ):
            for job_small, job_large in zip(a.jobs, b.jobs, strict=True):
                assert job_small.memory_per_gpu_gb == job_large.memory_per_gpu_gb
                if job_small.status != "oom":
                    assert job_large.status != "oom"
                    checked += 1
    assert checked > 100


def test_evaluation_is_deterministic():
    scenario = make_scenario("hard", 11)
    plan = random_plan(scenario, random.Random(5))
    assert evaluate(scenario, plan) == evaluate(scenario, plan)
    assert (
        evaluate(scenario, plan).to_dict() == evaluate(Scenario.from_json(scenario.to_json()), plan).to_dict()
    )


def test_fewer_gpus_than_needed_is_oom_not_a_crash():
    scenario = one_job("l4", "llama-3.1-70b", "serve", count=8, seq_len=2048, batch_size=4)
    result = evaluate(scenario, job_plan(gpus=1, tp=1))
    assert result.valid and result.jobs[0].status == "oom" and result.score == 0.0
