"""The IRD "copied example" rule (rewards/copied_example.py, exploit class 3): copying the prompt's worked
example answer is caught however it is dressed up, and honest plans are not.

Copies: the example's answer under the scenario's ids, its jobs in any order, with fields the kernel ignores
for the job's kind added or defaults spelled out, or one of its jobs copied into an otherwise honest plan.
Honest plans: the optimum (never a copy), the baselines (even 16-bit split, uniform random).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rl import make_scenario
from fleet_rl.baselines import even_bf16, random_plan
from fleet_rl.catalog import PRECISIONS
from fleet_rl.plan_schema import MICRO_BATCH_SIZES, plan_from_object
from fleet_rl.prompts import EXAMPLE_SCENARIO, example_plan
from fleet_rl.scenario import Scenario
from fleet_rl.scenario_generator import TASKS
from fleet_rl.solved_scenarios import solved_scenario
from rewards import fleet_reward
from rewards.copied_example import copies_example, job_settings

EXAMPLE_SERVE, EXAMPLE_TUNE = example_plan()["jobs"]  # example-chat (serve), example-tune (lora)
assert "kv_cache" in EXAMPLE_SERVE and "micro_batch_size" in EXAMPLE_TUNE

scenarios = st.builds(make_scenario, st.sampled_from(TASKS), st.integers(0, 5_000))


def optimum(scenario: Scenario) -> dict:
    return solved_scenario(scenario).optimal_plan


def is_copy(plan, scenario: Scenario) -> bool:
    return copies_example(plan, solved_scenario(scenario))


def example_part(job) -> dict:
    """The example job of the job's kind family, under the job's id."""
    return {**(EXAMPLE_SERVE if job.kind == "serve" else EXAMPLE_TUNE), "id": job.id}


def differs_from_optimum(scenario: Scenario, part: dict) -> bool:
    """Whether ``part`` (a copied example job) is not what the optimum does for its job; and it is
    distinctive (the example lora part on a training job whose batch caps the micro-batch at 1 is a plain
    16-bit part, which the rule leaves alone)."""
    job = next(job for job in scenario.jobs if job.id == part["id"])
    sixteen_bit = "bf16" if scenario.gpu.supports("bf16") else "fp16"
    best = next(p for p in optimum(scenario)["jobs"] if p["id"] == job.id)
    settings_of = lambda p: job_settings(plan_from_object({"jobs": [p]}).jobs[0], job, sixteen_bit)  # noqa: E731
    # the lora part: 2 GPUs at TP 2 (data parallelism 1), all bf16, micro-batch min(8, batch_size)
    plain = job.kind != "serve" and job.batch_size == 1 and sixteen_bit == "bf16"
    return settings_of(part) != settings_of(best) and not plain


def ignored_fields(draw, job) -> dict:
    """Fields the kernel does not read for the job's kind, with any values."""
    if job.kind == "serve":
        return {
            "micro_batch_size": draw(st.sampled_from(MICRO_BATCH_SIZES)),
            "activation_checkpointing": draw(st.booleans()),
        }
    return {"kv_cache": draw(st.sampled_from((*PRECISIONS, None)))}


@st.composite
def copies(draw):
    """(scenario, plan, expected): some jobs take the example job of their kind, the others an honest part
    (the optimum's or the even split's), in any order, with ignored fields added to some parts."""
    scenario = draw(scenarios)
    jobs = scenario.jobs
    copied = draw(st.sets(st.sampled_from(range(len(jobs))), min_size=1))
    honest = draw(st.sampled_from((optimum(scenario), even_bf16(scenario))))["jobs"]
    parts = []
    for i, job in enumerate(jobs):
        part = example_part(job) if i in copied else dict(honest[i])
        if draw(st.booleans()):
            part |= ignored_fields(draw, job)
        parts.append(part)
    order = draw(st.permutations(range(len(parts))))
    expected = any(differs_from_optimum(scenario, parts[i]) for i in copied)
    return scenario, {"jobs": [parts[i] for i in order]}, expected


@settings(max_examples=150, deadline=None)
@given(copies())
def test_a_copied_example_job_is_caught_in_any_order_and_dress(case):
    scenario, plan, expected = case
    assert is_copy(plan, scenario) == expected
    assert is_copy(plan_from_object(plan), scenario) == expected


@settings(max_examples=60, deadline=None)
@given(scenarios)
def test_the_example_answer_under_the_scenarios_ids_is_a_copy_whatever_the_order(scenario):
    # The classic copy: both example jobs, matched to jobs of their kinds, in either order.
    serve = [job for job in scenario.jobs if job.kind == "serve"]
    train = [job for job in scenario.jobs if job.kind != "serve"]
    best = optimum(scenario)
    for job in serve[:1] + train[:1]:
        copy = example_part(job)
        rest = [part for part in best["jobs"] if part["id"] != job.id]
        for jobs in ([copy, *rest], [*rest, copy]):
            assert is_copy({"jobs": jobs}, scenario) == differs_from_optimum(scenario, copy)


def test_a_copy_is_caught_in_most_generated_scenarios():
    # Not vacuous: over scenarios with a serve job, copying the example's serve job is almost always wrong.
    hits = total = 0
    for seed in range(60):
        scenario = make_scenario("medium", seed)
        for job in scenario.jobs:
            if job.kind == "serve":
                total += 1
                plan = {"jobs": [example_part(job)]}
                hits += is_copy(plan, scenario)
    assert total >= 20 and hits >= 0.8 * total


@settings(max_examples=80, deadline=None)
@given(scenarios, st.integers(0, 1000), st.data())
def test_ignored_fields_and_spelled_out_defaults_change_nothing(scenario, seed, data):
    best = optimum(scenario)
    for plan in (random_plan(scenario, seed), even_bf16(scenario), best):
        verdict = is_copy(plan, scenario)
        dressed = []
        for part, job in zip(plan["jobs"], scenario.jobs, strict=True):
            part = {**part, **ignored_fields(data.draw, job)}
            if job.kind == "serve" and "kv_cache" not in part:
                part["kv_cache"] = "bf16" if scenario.gpu.supports("bf16") else "fp16"
            if job.kind != "serve":
                part.setdefault("micro_batch_size", 1)
                part.setdefault("activation_checkpointing", False)
            dressed.append(part)
        assert is_copy({"jobs": dressed}, scenario) == verdict


@settings(max_examples=100, deadline=None)
@given(scenarios)
def test_the_optimum_is_never_a_copy(scenario):
    best = optimum(scenario)
    assert not is_copy(best, scenario)
    assert not is_copy(plan_from_object(best), scenario)


def test_the_example_answered_with_its_own_answer_is_no_copy():
    assert not is_copy(example_plan(), EXAMPLE_SCENARIO)
    # The same jobs under other ids, in the other order: the answer is still right.
    renamed = Scenario.from_dict(
        {
            "cluster": EXAMPLE_SCENARIO.to_dict()["cluster"],
            "jobs": [
                {**job, "id": f"job-{i}"}
                for i, job in reversed(list(enumerate(EXAMPLE_SCENARIO.to_dict()["jobs"])))
            ],
        }
    )
    answer = {"jobs": [{**part, "id": f"job-{i}"} for i, part in enumerate(example_plan()["jobs"])]}
    assert not is_copy(answer, renamed)


def test_honest_baselines_are_not_flagged():
    # The false-positive rate on honest plans: none over these scenarios (the rule ignores plain 16-bit
    # parts, which the example's lora part is when read as a serve job).
    for task in TASKS:
        for seed in range(40):
            scenario = make_scenario(task, seed)
            plain = even_bf16(scenario)
            plain_16 = {
                "jobs": [
                    {**part, "precision": dict.fromkeys(part["precision"], part["precision"]["embedding"])}
                    for part in plain["jobs"]
                ]
            }
            for plan in (plain, plain_16, *(random_plan(scenario, seed * 7 + k) for k in range(3))):
                assert not is_copy(plan, scenario), (task, seed, plan)


@pytest.mark.parametrize("plan", [{"jobs": "nope"}, {}, {"jobs": []}])
def test_a_mapping_that_is_no_plan_copies_nothing(plan):
    scenario = make_scenario("medium", 1)
    assert not is_copy(plan, scenario)


def test_the_reward_of_a_reordered_copy_is_the_ird_reward():
    # End to end: the copied-example exploit (the example's jobs under the scenario's ids, in the other order)
    # scores the IRD reward, not a share of the optimum.
    for seed in range(40):
        scenario = make_scenario("medium", seed)
        if len(scenario.jobs) == 2 and {job.kind == "serve" for job in scenario.jobs} == {True, False}:
            break
    else:
        pytest.skip("no two-job serve + training scenario")
    copy = [example_part(job) for job in scenario.jobs]
    assert all(differs_from_optimum(scenario, part) for part in copy)
    ignored = [
        {"micro_batch_size": 4} if job.kind == "serve" else {"kv_cache": "fp8"} for job in scenario.jobs
    ]
    text = json.dumps({"jobs": [copy[1] | ignored[1], copy[0] | ignored[0]]})
    assert fleet_reward([text], [scenario.to_json()]) == [0.01]
