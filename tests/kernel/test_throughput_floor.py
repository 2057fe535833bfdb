"""A job's ``min_tokens_per_s`` (a serving SLO or a training deadline): a part under it is ``too_slow``,
earns nothing and gets a precise reason; the optimum meets every floor it can, idles the jobs whose floor
no plan reaches, and stays exact."""

from __future__ import annotations

import msgspec
import pytest

from fleet_rl import Scenario
from fleet_rl.kernel import evaluate, solve
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
    assert job.value == 0.0 and job.power_w == 0.0
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
    idle = solve(with_floor(base, 0, 1.01 * best_alone)).jobs  # no plan reaches it
    assert idle[0].gpus == 0 and idle[1].status == "ok" and idle[1].gpus == 2


@pytest.mark.slow
def test_the_solver_is_still_exact_with_a_floor():
    base = Scenario.from_dict(SMALL[0])
    floored = with_floor(base, 0, 0.9 * float(solved_scenario(base).reference_tokens_per_s[0]))
    assert solve(floored).objective == pytest.approx(brute_force_best_value(floored), rel=1e-12, abs=1e-12)
