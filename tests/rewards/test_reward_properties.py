"""The reward ranks plans the way an engineer would: invariants over generated scenarios and plans.

Each property is checked on scenarios from the generator and on plans of three kinds (the exact optimum,
the even 16-bit split, a uniformly random schema-valid plan), with hypothesis choosing the seeds:

- making a job that runs unrunnable (0 GPUs, unstable, unsupported) never raises the reward, and breaking a
  job on purpose never beats leaving it idle where another job is placed (breadcrumbs changed this
  deliberately: where no other job is placed, idling it gives up, and an honest attempt ranks above that);
- adding a fault to a job (running or already failing) never raises the reward: a second fault never
  hides the first;
- the reward does not depend on the order of the jobs or on fields the kernel ignores for a job's kind;
- each component reward gives a plan under which nothing runs less than the optimum, where everything the
  cluster can run runs;
- the optimum scores 1.0 and nothing beats it;
- a multi-agent agent's reward rises with its own contribution, and breaking the joint plan ranks below
  abstaining.
"""

from __future__ import annotations

import json
import os
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fleet_rl import make_scenario
from fleet_rl.baselines import even_bf16, random_plan
from fleet_rl.catalog import GPUS
from fleet_rl.kernel import evaluate, solve
from fleet_rl.multiagent import agent_request
from fleet_rl.solved_scenarios import solved_scenario
from rewards import (
    IRD_REWARD,
    difference_reward,
    efficiency_reward,
    feasibility_reward,
    fleet_reward,
    format_reward,
    ird_reward,
)

WHOLE_PLAN_TASKS = ("easy", "medium", "hard")
PROPERTY_SETTINGS = settings(max_examples=int(os.environ.get("FLEET_PROPERTY_EXAMPLES", "60")), deadline=None)


def evaluated(scenario, plan: dict):
    """The kernel's evaluation of ``plan``, against the scenario solved once (the process cache)."""
    return evaluate(solved_scenario(scenario), plan)


def reward(scenario, plan: dict, fn=fleet_reward, **columns) -> float:
    return fn([json.dumps(plan)], [scenario.to_json()], **{k: [v] for k, v in columns.items()})[0]


def ird_rule(scenario, plan: dict) -> str:
    """The IRD rule ``fleet_reward`` reports for ``plan`` ("" for none)."""
    columns = {}
    fleet_reward([json.dumps(plan)], [scenario.to_json()], log_extra=columns.__setitem__)
    return columns["ird"][0]


def base_plan(scenario, kind: str, seed: int) -> dict:
    if kind == "optimal":
        return solve(solved_scenario(scenario)).plan
    if kind == "even_bf16":
        return even_bf16(scenario, seed)
    return random_plan(scenario, seed)


def with_job(plan: dict, job_id: str, **changes) -> dict:
    return {"jobs": [{**job, **changes} if job["id"] == job_id else job for job in plan["jobs"]]}


def faults(scenario, job: dict) -> list[dict]:
    """Changes that give a placed job a fault it surely has afterwards (not only the one its status shows)."""
    kind = _kind(scenario, job["id"])
    out = [{"precision": {**job["precision"], "norm": "fp8"}}]  # unstable in every kind
    if kind == "train":
        out.append({"precision": {**job["precision"], "mlp": "int4"}})  # trained weights in int4
    if "fp8" not in GPUS[scenario.cluster.gpu].dense_tflops:
        out.append({"precision": {**job["precision"], "attention": "fp8"}})  # a format the GPU lacks
    return out


def _kind(scenario, job_id: str) -> str:
    return next(job.kind for job in scenario.jobs if job.id == job_id)


plans = st.tuples(
    st.sampled_from(WHOLE_PLAN_TASKS),
    st.integers(0, 10_000),
    st.sampled_from(("optimal", "even_bf16", "random")),
    st.integers(0, 10_000),
)


@PROPERTY_SETTINGS
@given(plans)
@example(("medium", 102, "random", 1337))  # idling 'instruct-tune' leaves one unstable int8/int4 job: IRD
def test_making_a_running_job_unrunnable_never_raises_the_reward(case):
    task, seed, kind, plan_seed = case
    scenario = make_scenario(task, seed)
    plan = base_plan(scenario, kind, plan_seed)
    before = reward(scenario, plan)
    result = evaluated(scenario, plan)
    for job in plan["jobs"]:
        job_result = next(r for r in result.jobs if r.id == job["id"])
        if job_result.status != "ok":
            continue
        idle = with_job(plan, job["id"], gpus=0)
        if job_result.value >= 0:  # idling a job worth less than its power is what the optimum does
            assert reward(scenario, idle) <= before
        others_run = any(other.status == "ok" for other in result.jobs if other.id != job["id"])
        idle_is_degenerate = ird_rule(scenario, idle) != ""
        for change in faults(scenario, job):
            crashed = with_job(plan, job["id"], **change)
            assert evaluated(scenario, crashed).statuses[job["id"]] != "ok"
            crashed_reward = reward(scenario, crashed)
            assert crashed_reward <= before
            if not idle_is_degenerate:  # breaking a job on purpose never beats idling it
                assert crashed_reward <= reward(scenario, idle)
            else:  # idling it gives up, or leaves only failing lowest-precision jobs (IRD): never beside
                assert not others_run  # running jobs; a failing attempt ranks above it, unless degenerate
                assert crashed_reward > IRD_REWARD or ird_rule(scenario, crashed) != ""


def added_faults(scenario, job: dict) -> list[dict]:
    """Changes that can only add faults to a job, never remove one: more memory (a bigger micro-batch
    without recomputation; a 32-bit KV cache in place of a 16-bit one the GPU has: on a T4 a bf16 KV cache
    is itself a fault, which fp32 removes), and an fp8 norm (unstable in any kind) in place of a norm format
    that had no fault of its own. For a job with a throughput floor only the slower KV cache: a bigger
    micro-batch or a narrower norm can make it faster and clear a too_slow fault."""
    gpu = GPUS[scenario.cluster.gpu]
    out = []
    if _kind(scenario, job["id"]) == "serve":
        kv_cache = job.get("kv_cache", "bf16")
        if kv_cache in ("bf16", "fp16") and gpu.supports(kv_cache):
            out.append({"kv_cache": "fp32"})
    if next(j for j in scenario.jobs if j.id == job["id"]).min_tokens_per_s is not None:
        return out
    if _kind(scenario, job["id"]) != "serve":
        out.append({"micro_batch_size": 64, "activation_checkpointing": False})
    if job["precision"]["norm"] in gpu.dense_tflops:  # a compute format this GPU has: no fault of its own
        out.append({"precision": {**job["precision"], "norm": "fp8"}})
    return out


@PROPERTY_SETTINGS
@given(plans)
@example(("easy", 1310, "random", 1310))  # a T4 serve job with a bf16 KV cache (T4s have no bf16)
def test_adding_a_fault_to_a_job_never_raises_the_reward(case):
    task, seed, kind, plan_seed = case
    scenario = make_scenario(task, seed)
    plan = base_plan(scenario, kind, plan_seed)
    before = reward(scenario, plan)
    for job in plan["jobs"]:
        if job["gpus"] == 0:
            continue
        for change in added_faults(scenario, job):
            after = with_job(plan, job["id"], **change)
            if evaluated(scenario, after).statuses[job["id"]] != "ok":  # a job that still runs may run faster
                assert reward(scenario, after) <= before, change


@PROPERTY_SETTINGS
@given(plans, st.randoms(use_true_random=False))
def test_reward_ignores_job_order_and_fields_the_kernel_does_not_read(case, rng):
    task, seed, kind, plan_seed = case
    scenario = make_scenario(task, seed)
    plan = base_plan(scenario, kind, plan_seed)
    shuffled = list(plan["jobs"])
    rng.shuffle(shuffled)
    padded = []
    for job in shuffled:
        if _kind(scenario, job["id"]) == "serve":  # decode has no micro-batches or recomputation
            job = {**job, "micro_batch_size": rng.choice([1, 8, 64]), "activation_checkpointing": True}
        else:  # training keeps no KV cache
            job = {**job, "kv_cache": rng.choice(["int4", "fp8", "bf16"])}
        padded.append(job)
    expected = reward(scenario, plan)
    assert reward(scenario, {"jobs": shuffled}) == expected
    assert reward(scenario, {"jobs": padded}) == expected


@PROPERTY_SETTINGS
@given(st.sampled_from(WHOLE_PLAN_TASKS), st.integers(0, 10_000))
def test_every_component_pays_less_when_nothing_runs_than_for_the_optimum(task, seed):
    scenario = make_scenario(task, seed)
    optimal = solve(solved_scenario(scenario)).plan
    nothing_runs = [
        {"jobs": []},
        {"jobs": [{**job, "gpus": 0} for job in optimal["jobs"]]},
        {"jobs": [{**job, "precision": {**job["precision"], "norm": "fp8"}} for job in optimal["jobs"]]},
    ]
    components = (format_reward, feasibility_reward, efficiency_reward, ird_reward, fleet_reward)
    for fn in components:
        best = reward(scenario, optimal, fn)
        for plan in nothing_runs:
            assert reward(scenario, plan, fn) < best, fn.__name__
    total_best = sum(reward(scenario, optimal, fn) for fn in components)
    assert all(sum(reward(scenario, plan, fn) for fn in components) < total_best for plan in nothing_runs)


@PROPERTY_SETTINGS
@given(plans)
def test_the_optimum_scores_1_and_is_never_beaten(case):
    task, seed, kind, plan_seed = case
    scenario = make_scenario(task, seed)
    assert reward(scenario, solve(solved_scenario(scenario)).plan) == pytest.approx(1.0)
    assert reward(scenario, base_plan(scenario, kind, plan_seed)) <= 1.0 + 1e-9


def agent_parts(scenario, agent: str, seed: int) -> list[dict]:
    """The agent's best part and random variations of it (GPU counts within what is left free)."""
    best = next(job for job in solve(solved_scenario(scenario)).plan["jobs"] if job["id"] == agent)
    rng = random.Random(seed)
    parts = [best]
    for plan_seed in range(6):
        job = next(job for job in random_plan(scenario, seed * 10 + plan_seed)["jobs"] if job["id"] == agent)
        gpus = rng.choice([g for g in (1, 2, 4, 8) if g <= best["gpus"]] or [best["gpus"]])
        tp = max(t for t in (1, 2, 4, 8) if gpus % t == 0 and t <= job["tensor_parallel"] or t == 1)
        parts.append({**job, "gpus": gpus, "tensor_parallel": tp})
    return parts


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_an_agent_is_paid_for_its_own_contribution_and_sabotage_ranks_below_abstaining(seed):
    scenario = make_scenario("multiagent", seed)
    agent, given_parts = agent_request(scenario, seed)
    columns = {"agent": agent, "given_plan": json.dumps(given_parts)}
    scored = []
    for part in agent_parts(scenario, agent, seed):
        fleet = reward(scenario, {"jobs": [part]}, **columns)
        difference = reward(scenario, {"jobs": [part]}, difference_reward, **columns)
        scored.append((difference, fleet))
    feasible = sorted((d, f) for d, f in scored if f >= 0.3)  # the agent's job runs to some use
    assert [f for _, f in feasible] == sorted(f for _, f in feasible)  # reward rises with the contribution
    best = next(job for job in solve(solved_scenario(scenario)).plan["jobs"] if job["id"] == agent)
    abstain = {"jobs": [{**best, "gpus": 0}]}
    abstained = reward(scenario, abstain, **columns)
    assert abstained < 0.3
    if not any(part["gpus"] for part in given_parts["jobs"]):
        return  # the others hold no GPUs (the agent's job is the optimum's only one): nothing to sabotage
    sabotage = {"jobs": [{**best, "gpus": scenario.cluster.count, "tensor_parallel": 1}]}  # takes every GPU
    joint = {"jobs": [*given_parts["jobs"], sabotage["jobs"][0]]}
    assert not evaluate(solved_scenario(scenario), joint).valid  # over-allocated: the joint plan breaks
    assert reward(scenario, sabotage, **columns) < abstained
    sabotaged = reward(scenario, sabotage, difference_reward, **columns)
    assert sabotaged < reward(scenario, abstain, difference_reward, **columns)
