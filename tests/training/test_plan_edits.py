"""fleet_rl.training.plan_edits: one random edit of one job, in the answer's own text."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rl import make_scenario
from fleet_rl.replica_fit import tensor_parallel_sizes
from fleet_rl.scenario import Scenario
from fleet_rl.training.job_spans import job_spans
from fleet_rl.training.plan_edits import EDITS, edit_answer
from rewards.parsing import parse_plan
from tests.training.two_jobs import BF16, SCENARIO, TEMPLATE_PLAN

TEMPLATE = f"Here is the plan.\n```json\n{TEMPLATE_PLAN}\n```"


def _edits(text: str, scenario: Scenario, draws: int = 60) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {name: [] for name in EDITS}
    for seed in range(draws):
        edit = edit_answer(text, scenario, random.Random(seed))
        if edit is not None:
            found[edit[1]].append(edit[0])
    return found


def _jobs(text: str) -> dict[str, dict]:
    plan = parse_plan(text).plan
    assert plan is not None
    return {job.id: job for job in plan.jobs}


def test_every_edit_applies_to_the_template_and_keeps_the_text_around_the_plan():
    found = _edits(TEMPLATE, SCENARIO)
    assert all(found[name] for name in EDITS)
    for texts in found.values():
        for text in texts:
            assert text.startswith('Here is the plan.\n```json\n{"jobs":[{"id":"chat",')
            assert text.endswith("]}\n```")
            assert sum(job.gpus for job in _jobs(text).values()) <= SCENARIO.cluster.count


def test_a_tensor_parallel_edit_picks_another_allowed_size_and_whole_replicas():
    chat = SCENARIO.jobs[0]
    sizes = set()
    for text in _edits(TEMPLATE, SCENARIO)["tensor_parallel"]:
        (job,) = _jobs(text).values()
        assert job.tensor_parallel != 1 and job.tensor_parallel in tensor_parallel_sizes(chat, 8)
        assert job.gpus % job.tensor_parallel == 0 and job.gpus == 8  # 8 GPUs hold whole replicas of each
        assert job.precision.attention == "bf16"  # nothing else moves
        sizes.add(job.tensor_parallel)
    assert sizes == {2, 4, 8}


def test_a_format_edit_changes_attention_and_mlp_to_a_format_the_gpu_has():
    formats = set()
    for text in _edits(TEMPLATE, SCENARIO, draws=200)["format"]:
        (job,) = _jobs(text).values()
        assert job.precision.attention == job.precision.mlp != "bf16"
        assert SCENARIO.gpu.supports(job.precision.attention)
        assert (job.precision.embedding, job.tensor_parallel, job.gpus) == ("bf16", 1, 8)
        formats.add(job.precision.attention)
    assert formats == {"fp32", "fp16", "fp8", "int8", "int4"}  # every format but the one it had


def test_a_train_job_never_gets_a_weight_only_format():
    tune_only = '{"jobs":[{"id":"tune","gpus":4,"tensor_parallel":1,"precision":' + json.dumps(BF16) + "}]}"
    for text in _edits(tune_only, SCENARIO, draws=80)["format"]:
        assert _jobs(text)["tune"].precision.attention not in ("int8", "int4")


def test_an_added_job_gets_one_replica_taken_from_the_job_with_most_gpus():
    for text in _edits(TEMPLATE, SCENARIO)["add_job"]:
        jobs = _jobs(text)
        assert set(jobs) == {"chat", "tune"}
        tune = jobs["tune"]
        assert tune.gpus == tune.tensor_parallel == 1 and tune.precision.attention == "bf16"
        assert jobs["chat"].gpus == 7  # gave one GPU
        assert tune.kv_cache is None  # a serve job's field stays off a train job
    full = json.loads(TEMPLATE.split("```json\n")[1].split("\n```")[0])
    full["jobs"][0]["tensor_parallel"] = 8  # one replica holds every GPU: nothing to give
    assert _edits(json.dumps(full), SCENARIO)["add_job"] == []


def test_only_the_edited_jobs_object_is_rewritten():
    both = (
        '```json\n{"jobs": [{"id": "chat", "gpus": 4, "tensor_parallel": 4, "precision": '
        + json.dumps(BF16)
        + '}, {"id": "tune", "gpus": 4, "tensor_parallel": 1, "precision": '
        + json.dumps(BF16)
        + "}]}\n```"
    )
    spans = job_spans(both, ["chat", "tune"])
    for texts in _edits(both, SCENARIO).values():
        for text in texts:
            kept = [job for job, (start, end) in spans.items() if both[start:end] in text]
            assert len(kept) == 1  # the other job's object is as sampled, spaces and all


def test_no_plan_or_nothing_placed_gives_no_edit():
    rng = random.Random(0)
    assert edit_answer("I would give each job four GPUs.", SCENARIO, rng) is None
    assert edit_answer('{"jobs": [{"id": "chat", "gpus": 4', SCENARIO, rng) is None  # truncated
    unplaced = '{"jobs":[{"id":"chat","gpus":0,"tensor_parallel":1,"precision":' + json.dumps(BF16) + "}]}"
    assert edit_answer(unplaced, SCENARIO.to_json(), rng) is None


def test_edits_are_drawn_from_the_rng_alone():
    first = edit_answer(TEMPLATE, SCENARIO, random.Random(5))
    assert first is not None and first == edit_answer(TEMPLATE, SCENARIO, random.Random(5))


@pytest.mark.parametrize("tier", ["easy", "medium", "hard"])
def test_every_edit_of_generated_scenarios_parses_and_fits_the_cluster(tier):
    from fleet_rl.baselines import even_bf16

    for seed in range(6):
        scenario = make_scenario(tier, seed)
        answer = "```json\n" + json.dumps(even_bf16(scenario), separators=(",", ":")) + "\n```"
        for texts in _edits(answer, scenario, draws=10).values():
            for text in texts:
                assert sum(job.gpus for job in _jobs(text).values()) <= scenario.cluster.count


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=400), st.integers(0, 10**6))
def test_any_text_gives_an_edit_that_parses_or_none_and_never_raises(text, seed):
    for candidate in (text, TEMPLATE[:-8] + text):
        edit = edit_answer(candidate, SCENARIO, random.Random(seed))
        assert edit is None or parse_plan(edit[0]).plan is not None
