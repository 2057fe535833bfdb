"""fleet_rl.training.plan_repairs: the jobs the kernel's verdict marks failing take a Fits setting; the
best of several repairs by fleet_reward."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet_rl import make_scenario
from fleet_rl.baselines import random_split
from fleet_rl.kernel import evaluate
from fleet_rl.replica_fit import replica_fits
from fleet_rl.scenario import Scenario
from fleet_rl.training.plan_repairs import REPAIRED_STATUSES, best_repair, repair_answer
from rewards import fleet_reward
from rewards.parsing import parse_plan
from tests.training.two_jobs import BF16, SCENARIO, TEMPLATE_PLAN

TEMPLATE = f"Here is the plan.\n```json\n{TEMPLATE_PLAN}\n```"
SEVEN_GPUS = Scenario.from_dict(json.loads(SCENARIO.to_json()) | {"cluster": {"gpu": "h100-sxm", "count": 7}})
THREE_GPUS = Scenario.from_dict(json.loads(SCENARIO.to_json()) | {"cluster": {"gpu": "h100-sxm", "count": 3}})
FITS = {(fit.tensor_parallel, fit.fmt) for fit in replica_fits(SCENARIO)["chat"]}  # chat: 70B serve


def _plan_text(*parts: dict) -> str:
    return "```json\n" + json.dumps({"jobs": list(parts)}, separators=(",", ":")) + "\n```"


def _statuses(text: str, scenario: Scenario = SCENARIO) -> dict[str, str]:
    plan = parse_plan(text).plan
    assert plan is not None
    return {job.id: job.status for job in evaluate(scenario, plan).jobs}


def test_the_failing_job_takes_one_of_its_fits_settings_and_then_runs():
    assert _statuses(TEMPLATE)["chat"] == "oom"  # the template: a 70B model on one GPU per replica
    seen = set()
    for seed in range(20):
        text, name = repair_answer(TEMPLATE, SCENARIO, random.Random(seed))
        assert (
            name == "repair" and text.startswith("Here is the plan.\n```json\n") and text.endswith("]}\n```")
        )
        (chat,) = parse_plan(text).plan.jobs
        seen.add((chat.tensor_parallel, chat.precision.attention))
        assert chat.gpus == 8 and chat.gpus % chat.tensor_parallel == 0  # whole replicas of its 8 GPUs
        assert _statuses(text)["chat"] == "ok"
    assert seen == FITS  # every format that fits is drawn, nothing else


def test_gpus_for_a_larger_replica_come_from_the_job_that_ran_in_whole_replicas():
    tune = {"id": "tune", "gpus": 6, "tensor_parallel": 2, "precision": BF16, "micro_batch_size": 1,
            "activation_checkpointing": True}  # fmt: skip
    chat = {"id": "chat", "gpus": 1, "tensor_parallel": 1, "precision": BF16, "kv_cache": "bf16"}
    text = _plan_text(chat, tune)  # on seven GPUs: none free
    assert _statuses(text, SEVEN_GPUS) == {"chat": "oom", "tune": "ok"}
    sizes = set()
    for seed in range(20):
        repaired, _ = repair_answer(text, SEVEN_GPUS, random.Random(seed))
        jobs = {job.id: job for job in parse_plan(repaired).plan.jobs}
        assert jobs["chat"].gpus == jobs["chat"].tensor_parallel  # one replica, at the size that holds it
        sizes.add(jobs["chat"].tensor_parallel)
        # tp 2 needs one more GPU: tune gives a whole replica (2 GPUs); tp 1 takes nothing
        assert jobs["tune"].gpus == (4 if jobs["chat"].tensor_parallel == 2 else 6)
        assert jobs["tune"].tensor_parallel == 2
        assert _statuses(repaired, SEVEN_GPUS) == {"chat": "ok", "tune": "ok"}
    assert sizes == {1, 2}


def test_nothing_to_repair_gives_none():
    chat = {"id": "chat", "gpus": 8, "tensor_parallel": 2, "precision": BF16, "kv_cache": "bf16"}
    assert _statuses(_plan_text(chat))["chat"] == "ok"
    for text in (_plan_text(chat), "no plan here", '```json\n{"jobs": []}\n```'):
        assert repair_answer(text, SCENARIO, random.Random(0)) is None


def test_a_failing_job_gives_gpus_to_another_and_is_repaired_on_what_is_left():
    tune = {"id": "tune", "gpus": 7, "tensor_parallel": 1, "precision": BF16, "micro_batch_size": 1,
            "activation_checkpointing": True}  # fmt: skip
    chat = {"id": "chat", "gpus": 1, "tensor_parallel": 1, "precision": BF16, "kv_cache": "bf16"}
    text = _plan_text(chat, tune)  # every GPU taken, and both jobs fail
    assert _statuses(text) == {"chat": "oom", "tune": "oom"}
    settings_seen = set()
    for seed in range(30):
        repaired, _ = repair_answer(text, SCENARIO, random.Random(seed))
        jobs = {job.id: job for job in parse_plan(repaired).plan.jobs}
        assert jobs["chat"].gpus == jobs["chat"].tensor_parallel  # one replica: its one GPU, or tune's
        settings_seen.add((jobs["chat"].tensor_parallel, jobs["chat"].precision.attention))
        assert jobs["tune"].gpus % jobs["tune"].tensor_parallel == 0
        assert jobs["chat"].gpus + jobs["tune"].gpus <= 8
        assert _statuses(repaired) == {"chat": "ok", "tune": "ok"}
    assert settings_seen == FITS  # bf16 at tp 2 took its second GPU from tune


def test_a_format_no_gpus_can_hold_is_skipped_for_one_that_fits():
    tune = {"id": "tune", "gpus": 2, "tensor_parallel": 2, "precision": BF16, "micro_batch_size": 1,
            "activation_checkpointing": True}  # fmt: skip
    chat = {"id": "chat", "gpus": 1, "tensor_parallel": 1, "precision": BF16, "kv_cache": "bf16"}
    text = _plan_text(chat, tune)  # on three GPUs: none free, and tune holds one replica only
    assert _statuses(text, THREE_GPUS) == {"chat": "oom", "tune": "ok"}
    formats = set()
    for seed in range(20):
        repaired, _ = repair_answer(text, THREE_GPUS, random.Random(seed))
        jobs = {job.id: job for job in parse_plan(repaired).plan.jobs}
        assert jobs["tune"].gpus == 2 and jobs["chat"].gpus == 1  # bf16 at tp 2 finds no second GPU
        formats.add(jobs["chat"].precision.attention)
        assert _statuses(repaired, THREE_GPUS) == {"chat": "ok", "tune": "ok"}
    assert formats == {"fp8", "int4"}


def test_an_answer_over_the_clusters_gpus_is_repaired_into_it():
    tune = {"id": "tune", "gpus": 7, "tensor_parallel": 1, "precision": BF16, "micro_batch_size": 1,
            "activation_checkpointing": True}  # fmt: skip
    chat = {"id": "chat", "gpus": 8, "tensor_parallel": 1, "precision": BF16, "kv_cache": "bf16"}
    text = _plan_text(chat, tune)  # 15 GPUs asked of 8: every job fails
    assert set(_statuses(text).values()) <= set(REPAIRED_STATUSES)
    for seed in range(20):
        repaired, _ = repair_answer(text, SCENARIO, random.Random(seed))
        jobs = {job.id: job for job in parse_plan(repaired).plan.jobs}
        assert sum(job.gpus for job in jobs.values()) <= 8
        assert all(job.gpus % job.tensor_parallel == 0 for job in jobs.values())
        assert _statuses(repaired) == {"chat": "ok", "tune": "ok"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), tier=st.sampled_from(["easy", "medium", "hard"]))
def test_a_repair_of_a_random_plan_parses_fits_the_cluster_and_repairs_only_failing_jobs(seed, tier):
    scenario = make_scenario(tier, seed=seed)
    text = "```json\n" + json.dumps(random_split(scenario, seed)) + "\n```"
    repaired = repair_answer(text, scenario, random.Random(seed))
    if repaired is None:
        return
    before = {job.id: job for job in parse_plan(text).plan.jobs}
    after = {job.id: job for job in parse_plan(repaired[0]).plan.jobs}
    assert sum(job.gpus for job in after.values()) <= scenario.cluster.count
    statuses = {job.id: job.status for job in evaluate(scenario, parse_plan(text).plan).jobs}
    for job_id, job in after.items():
        if job.tensor_parallel != before[job_id].tensor_parallel or job.precision != before[job_id].precision:
            assert statuses[job_id] in REPAIRED_STATUSES  # only a failing job takes another setting


def test_place_omitted_places_a_job_the_answer_leaves_out_at_a_fits_setting():
    """The template (chat alone, every GPU) leaves tune out: with ``place_omitted`` tune gets one replica
    at one of its Fits settings, GPUs from chat in whole replicas, and every job runs; without,
    it stays out."""
    tune_fits = {
        (fit.tensor_parallel, fit.fmt) for fit in replica_fits(SCENARIO)["tune"] if fit.tensor_parallel
    }
    seen = set()
    for seed in range(30):
        alone, _ = repair_answer(TEMPLATE, SCENARIO, random.Random(seed))
        assert [job.id for job in parse_plan(alone).plan.jobs] == ["chat"]
        text, _ = repair_answer(TEMPLATE, SCENARIO, random.Random(seed), place_omitted=True)
        jobs = {job.id: job for job in parse_plan(text).plan.jobs}
        assert list(jobs) == ["chat", "tune"] and text.startswith("Here is the plan.\n```json\n")
        assert jobs["tune"].gpus == jobs["tune"].tensor_parallel  # one replica
        seen.add((jobs["tune"].tensor_parallel, jobs["tune"].precision.attention))
        assert (
            jobs["chat"].gpus % jobs["chat"].tensor_parallel == 0
            and jobs["chat"].gpus + jobs["tune"].gpus <= 8
        )
        assert _statuses(text) == {"chat": "ok", "tune": "ok"}
    assert seen == {(tp, fmt) for tp, fmt in tune_fits}


def test_place_omitted_alone_repairs_an_answer_whose_placed_jobs_run():
    chat = {"id": "chat", "gpus": 4, "tensor_parallel": 4, "precision": BF16, "kv_cache": "bf16"}
    text = _plan_text(chat)
    assert _statuses(text) == {"chat": "ok", "tune": "unallocated"}
    assert repair_answer(text, SCENARIO, random.Random(0)) is None  # nothing fails
    repaired, _ = repair_answer(text, SCENARIO, random.Random(0), place_omitted=True)
    jobs = {job.id: job for job in parse_plan(repaired).plan.jobs}
    assert jobs["chat"].gpus == 4 and jobs["tune"].gpus <= 4  # on the four free GPUs: chat gives none
    assert _statuses(repaired) == {"chat": "ok", "tune": "ok"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), tier=st.sampled_from(["easy", "medium", "hard"]))
def test_placing_omitted_jobs_of_a_random_plan_keeps_it_in_the_cluster_and_names_each_job_once(seed, tier):
    scenario = make_scenario(tier, seed=seed)
    plan = random_split(scenario, seed)
    plan["jobs"] = plan["jobs"][:1]  # the rest left out
    text = "```json\n" + json.dumps(plan) + "\n```"
    repaired = repair_answer(text, scenario, random.Random(seed), place_omitted=True)
    if repaired is None:
        return
    jobs = parse_plan(repaired[0]).plan.jobs
    assert len({job.id for job in jobs}) == len(jobs)
    assert {job.id for job in jobs} <= {job.id for job in scenario.jobs}
    assert sum(job.gpus for job in jobs) <= scenario.cluster.count
    assert all(job.gpus % job.tensor_parallel == 0 for job in jobs)


SLOW_CHAT = Scenario.from_dict(
    json.loads(SCENARIO.to_json())
    | {"jobs": [json.loads(SCENARIO.to_json())["jobs"][0] | {"min_tokens_per_s": 700}]}
)  # chat alone, with a floor its bf16 answer at tensor parallelism 8 (~650 tokens/s) misses
SLOW_TEMPLATE = _plan_text(
    {"id": "chat", "gpus": 8, "tensor_parallel": 8, "precision": BF16, "kv_cache": "bf16"}
)


def test_too_slow_repairs_a_job_under_its_floor_on_its_own_gpus_at_a_fits_format():
    """Without ``too_slow`` a job that runs under its floor is left alone; with it, it takes one of its
    Fits formats at a tensor parallelism from the smallest that holds it up to its 8 GPUs, which it keeps,
    and every such setting is drawn over enough seeds."""
    assert _statuses(SLOW_TEMPLATE, SLOW_CHAT) == {"chat": "too_slow"}
    assert repair_answer(SLOW_TEMPLATE, SLOW_CHAT, random.Random(0)) is None
    expected = {(tp, fmt) for tp_min, fmt in FITS for tp in (1, 2, 4, 8) if tp >= tp_min}
    seen = set()
    for seed in range(60):
        text, name = repair_answer(SLOW_TEMPLATE, SLOW_CHAT, random.Random(seed), too_slow=True)
        (chat,) = parse_plan(text).plan.jobs
        assert name == "repair" and chat.gpus == 8 and chat.gpus % chat.tensor_parallel == 0
        seen.add((chat.tensor_parallel, chat.precision.attention))
    assert seen == expected


def test_the_best_repair_is_the_one_fleet_reward_ranks_first_of_its_draws():
    scenario = SLOW_CHAT.to_json()
    rewards = {}
    for seed in range(60):
        text, _ = repair_answer(SLOW_TEMPLATE, SLOW_CHAT, random.Random(seed), too_slow=True)
        rewards[text] = fleet_reward([text], [scenario])[0]
    for seed in range(5):
        rng = random.Random(seed)
        draws = [repair_answer(SLOW_TEMPLATE, SLOW_CHAT, rng, too_slow=True)[0] for _ in range(6)]
        best, name = best_repair(
            SLOW_TEMPLATE, scenario, random.Random(seed), fleet_reward, draws=6, too_slow=True
        )
        assert name == "repair" and best in draws
        assert rewards[best] == max(rewards[text] for text in draws)
    best_of_many, _ = best_repair(
        SLOW_TEMPLATE, scenario, random.Random(0), fleet_reward, draws=200, too_slow=True
    )
    assert rewards[best_of_many] == max(rewards.values())  # 200 draws reach the best of the 11 settings


def test_one_draw_is_a_plain_repair_and_nothing_to_repair_is_none():
    def unused(texts, scenarios):
        raise AssertionError("one draw needs no score")

    assert best_repair(TEMPLATE, SCENARIO, random.Random(3), unused) == repair_answer(
        TEMPLATE, SCENARIO, random.Random(3)
    )
    assert best_repair("no plan here", SCENARIO, random.Random(0), fleet_reward, draws=4) is None
    assert (
        best_repair(SLOW_TEMPLATE, SLOW_CHAT, random.Random(0), fleet_reward, draws=4) is None
    )  # too_slow off
    with pytest.raises(ValueError, match="at least 1"):
        best_repair(TEMPLATE, SCENARIO, random.Random(0), fleet_reward, draws=0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), tier=st.sampled_from(["easy", "medium", "hard"]))
def test_too_slow_repairs_of_a_random_plan_keep_it_in_the_cluster_and_change_only_failing_jobs(seed, tier):
    scenario = make_scenario(tier, seed=seed)
    text = "```json\n" + json.dumps(random_split(scenario, seed)) + "\n```"
    repaired = best_repair(text, scenario, random.Random(seed), fleet_reward, draws=3, too_slow=True)
    if repaired is None:
        return
    before = {job.id: job for job in parse_plan(text).plan.jobs}
    after = {job.id: job for job in parse_plan(repaired[0]).plan.jobs}
    assert sum(job.gpus for job in after.values()) <= scenario.cluster.count
    assert all(job.gpus % job.tensor_parallel == 0 for job in after.values())
    statuses = {job.id: job.status for job in evaluate(scenario, parse_plan(text).plan).jobs}
    for job_id, job in after.items():
        if job.tensor_parallel != before[job_id].tensor_parallel or job.precision != before[job_id].precision:
            assert statuses[job_id] in (*REPAIRED_STATUSES, "too_slow")
