"""A job's ``min_tokens_per_s`` (a serving SLO or a training deadline): a part under it is ``too_slow`` and
gets a precise reason; missing the floor (too slow, crashed or idle) costs the job's priority; the optimum
meets every floor it can, idles the jobs whose floor no plan reaches, and stays exact."""

from __future__ import annotations

import msgspec
import pytest

from fleet_rl import Scenario
from fleet_rl.kernel import evaluate, evaluate_batch, solve
from fleet_rl.kernel.constants import FLOOR_MISS_PENALTY
from fleet_rl.solved_scenarios import solved_scenario
from rewards import fleet_reward
from tests.kernel.conftest import job_plan, one_job
from tests.kernel.test_solver import SMALL, brute_force_best_value


def with_floor(scenario: Scenario, job_index: int, floor: float) -> Scenario:
    jobs = list(scenario.jobs)
    jobs[job_index] = msgspec.structs.replace(jobs[job_index], min_tokens_per_s=floor)
    return Scenario(cluster=scenario.cluster, jobs=tuple(jobs))


def test_a_part_under_its_floor_is_too_slow_with_a_reason_and_a_low_reward():
    free = one_job("h100-sxm", "llama-3.1-8b", "serve", count=4, seq_len=2048, batch_size=64)
    plan = job_plan(gpus=1, kv_cache="bf16")
    alone = evaluate(free, plan).jobs[0]
    assert alone.status == "ok"
    floored = with_floor(free, 0, 2.0 * alone.tokens_per_s)  # the whole cluster can make it, one GPU cannot
    result = evaluate(floored, plan)
    job = result.jobs[0]
    assert job.status == "too_slow"
    assert job.tokens_per_s == pytest.approx(alone.tokens_per_s)  # what it would make, for the reason
    assert job.value == -FLOOR_MISS_PENALTY * 1.0 and job.power_w == 0.0  # a missed SLO costs its priority
    [reason] = result.reasons
    assert reason.startswith("too_slow: job 'job' makes ")
    assert f"under its min_tokens_per_s {2.0 * alone.tokens_per_s:,.0f}" in reason
    completion = f"```json\n{msgspec.json.encode(plan).decode()}\n```"
    [reward] = fleet_reward([completion], [floored.to_json()])
    assert 0.0 < reward <= 0.25  # a not-feasible plan: partial credit only, never an exception


def test_the_optimum_meets_every_floor_it_can_and_idles_a_job_whose_floor_is_out_of_reach():
    base = Scenario.from_dict(SMALL[0])
    free = solve(base).jobs
    assert free[0].gpus == 1 and free[1].gpus == 1  # without a floor the chat job shares with the gpt2 job
    best_alone = float(solved_scenario(base).reference_tokens_per_s[0])  # chat's best on the whole cluster
    floor = 0.9 * best_alone
    assert free[0].tokens_per_s < floor  # the floor binds
    met = solve(with_floor(base, 0, floor)).jobs
    assert met[0].status == "ok" and met[0].tokens_per_s >= floor and met[0].gpus == 2
    assert met[1].gpus == 0  # meeting it takes the whole cluster; the lower-priority gpt2 job waits
    out_of_reach = solve(with_floor(base, 0, 1.01 * best_alone))  # no plan reaches it
    idle = out_of_reach.jobs
    assert idle[0].gpus == 0 and idle[1].status == "ok" and idle[1].gpus == 2
    # every plan pays chat's missed floor (priority 2), so the optimum is the gpt2 job's value minus 2
    assert out_of_reach.objective == pytest.approx(idle[1].value - 2.0 * FLOOR_MISS_PENALTY)
    assert idle[0].value == -2.0 * FLOOR_MISS_PENALTY


def test_idling_or_crashing_a_floor_job_costs_its_priority_so_starving_it_loses_to_sharing():
    base = Scenario.from_dict(SMALL[0])  # chat (serve, priority 2) and tune (gpt2 train, priority 1), 2 GPUs
    free = solve(base)
    tune_alone = float(solved_scenario(base).reference_tokens_per_s[1])
    floored = with_floor(base, 1, 0.5 * tune_alone)  # the lower-priority job now has an SLO
    shared = solve(floored)
    assert [job.gpus for job in shared.jobs] == [1, 1] and shared.jobs[1].status == "ok"
    parts = {part["id"]: part for part in free.plan["jobs"]}
    starve = {"jobs": [parts["chat"] | {"gpus": 2, "tensor_parallel": 2}]}  # tune omitted: idle
    crash = {
        "jobs": [parts["chat"], parts["tune"] | {"precision": {**parts["tune"]["precision"], "norm": "fp8"}}]
    }
    starved, crashed = evaluate_batch(floored, [starve, crash])
    assert starved.jobs[1].status == "unallocated" and crashed.jobs[1].status == "unstable"
    for result in (starved, crashed):
        assert result.jobs[1].value == -FLOOR_MISS_PENALTY * 1.0
        assert result.objective == pytest.approx(result.jobs[0].value - 1.0)
        assert result.score < shared.score == 1.0
    # without the floor the same starving plan only forgoes tune's value
    assert evaluate(base, starve).objective == pytest.approx(evaluate(base, starve).jobs[0].value)


def test_a_scenario_whose_floors_no_plan_meets_scores_its_optimum_1_and_worse_plans_0():
    base = Scenario.from_dict(SMALL[0])
    references = solved_scenario(base).reference_tokens_per_s
    hopeless = with_floor(with_floor(base, 0, 2.0 * float(references[0])), 1, 2.0 * float(references[1]))
    best = solve(hopeless)
    assert best.objective == pytest.approx(-3.0 * FLOOR_MISS_PENALTY) and best.score == 1.0
    assert evaluate(hopeless, best.plan).score == 1.0
    assert evaluate(hopeless, {"jobs": []}).score == 1.0  # as good as the optimum: every plan misses both


@pytest.mark.slow
@pytest.mark.parametrize("fractions", [(0.9, None), (None, 0.5), (0.4, 0.6)], ids=["chat", "tune", "both"])
def test_the_solver_is_still_exact_with_floors(fractions):
    base = Scenario.from_dict(SMALL[0])
    references = solved_scenario(base).reference_tokens_per_s
    floored = base
    for j, fraction in enumerate(fractions):
        if fraction is not None:
            floored = with_floor(floored, j, fraction * float(references[j]))
    assert solve(floored).objective == pytest.approx(brute_force_best_value(floored), rel=1e-12, abs=1e-12)
