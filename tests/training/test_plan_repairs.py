"""fleet_rl.training.plan_repairs: the jobs the kernel's verdict marks failing take a Fits setting."""

from __future__ import annotations

import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet_rl import make_scenario
from fleet_rl.baselines import random_split
from fleet_rl.kernel import evaluate
from fleet_rl.replica_fit import replica_fits
from fleet_rl.scenario import Scenario
from fleet_rl.training.plan_repairs import REPAIRED_STATUSES, repair_answer
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
        text = repair_answer(TEMPLATE, SCENARIO, random.Random(seed))
        assert text.startswith("Here is the plan.\n```json\n") and text.endswith("]}\n```")
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
        repaired = repair_answer(text, SEVEN_GPUS, random.Random(seed))
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
        repaired = repair_answer(text, SCENARIO, random.Random(seed))
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
        repaired = repair_answer(text, THREE_GPUS, random.Random(seed))
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
        repaired = repair_answer(text, SCENARIO, random.Random(seed))
        jobs = {job.id: job for job in parse_plan(repaired).plan.jobs}
        assert sum(job.gpus for job in jobs.values()) <= 8
        assert all(job.gpus % job.tensor_parallel == 0 for job in jobs.values())
        assert _statuses(repaired) == {"chat": "ok", "tune": "ok"}


def test_a_split_note_before_the_plan_is_rewritten_to_the_repaired_split():
    tune = {"id": "tune", "gpus": 6, "tensor_parallel": 2, "precision": BF16, "micro_batch_size": 1,
            "activation_checkpointing": True}  # fmt: skip
    chat = {"id": "chat", "gpus": 1, "tensor_parallel": 1, "precision": BF16, "kv_cache": "bf16"}
    text = "GPUs 7: chat 1 (6 left), tune 6 (0 left).\n" + _plan_text(chat, tune)
    notes = set()
    for seed in range(20):
        repaired = repair_answer(text, SEVEN_GPUS, random.Random(seed))
        note, rest = repaired.split("\n", 1)
        jobs = {job.id: job for job in parse_plan(repaired).plan.jobs}
        chat_gpus, tune_gpus = jobs["chat"].gpus, jobs["tune"].gpus
        left = 7 - chat_gpus
        assert note == f"GPUs 7: chat {chat_gpus} ({left} left), tune {tune_gpus} ({left - tune_gpus} left)."
        assert rest.startswith("```json\n")
        notes.add(note)
    assert notes == {"GPUs 7: chat 1 (6 left), tune 6 (0 left).", "GPUs 7: chat 2 (5 left), tune 4 (1 left)."}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), tier=st.sampled_from(["easy", "medium", "hard"]))
def test_a_repair_of_a_random_plan_parses_fits_the_cluster_and_repairs_only_failing_jobs(seed, tier):
    scenario = make_scenario(tier, seed=seed)
    text = "```json\n" + json.dumps(random_split(scenario, seed)) + "\n```"
    repaired = repair_answer(text, scenario, random.Random(seed))
    if repaired is None:
        return
    before = {job.id: job for job in parse_plan(text).plan.jobs}
    after = {job.id: job for job in parse_plan(repaired).plan.jobs}
    assert sum(job.gpus for job in after.values()) <= scenario.cluster.count
    statuses = {job.id: job.status for job in evaluate(scenario, parse_plan(text).plan).jobs}
    for job_id, job in after.items():
        if job.tensor_parallel != before[job_id].tensor_parallel or job.precision != before[job_id].precision:
            assert statuses[job_id] in REPAIRED_STATUSES  # only a failing job takes another setting
