"""fleet_rl.training.unseen_split: which part of a held-out scenario training never showed."""

from __future__ import annotations

import msgspec

from fleet_rl.scenario_generator import make_scenario
from fleet_rl.training.dataset import scenario_rows
from fleet_rl.training.heldout import summarise
from fleet_rl.training.unseen_split import unseen_kind


def _with(scenario, gpu=None, model=None):
    cluster = msgspec.structs.replace(scenario.cluster, gpu=gpu or scenario.cluster.gpu)
    jobs = tuple(msgspec.structs.replace(job, model=model or job.model) for job in scenario.jobs)
    return msgspec.structs.replace(scenario, cluster=cluster, jobs=jobs)


def test_hand_built_scenarios_are_labelled_by_their_gpu_and_models():
    base = _with(make_scenario("easy", 0), gpu="h100-sxm", model="llama-3.1-8b")
    assert unseen_kind(base) == "none"
    assert unseen_kind(_with(base, gpu="h200")) == "gpu"
    assert unseen_kind(_with(base, model="qwen2.5-7b")) == "model"
    assert unseen_kind(_with(base, gpu="l40s", model="qwen2.5-7b").to_json()) == "both"  # JSON works too


def test_training_rows_show_nothing_unseen_and_every_held_out_row_something():
    train = scenario_rows(["easy", "medium"], 40, split="train", prompt_style="compact")
    held_out = scenario_rows(["easy", "medium"], 40, dataset_seed=7, split="eval", prompt_style="compact")
    assert {unseen_kind(row["scenario"]) for row in train} == {"none"}
    assert {unseen_kind(row["scenario"]) for row in held_out} <= {"gpu", "model", "both"}


def test_the_held_out_summary_splits_its_scenarios_by_what_is_unseen():
    rows = scenario_rows(["easy", "medium"], 24, dataset_seed=7, split="eval", prompt_style="compact")
    summary = summarise(rows, ['{"jobs": []}'] * len(rows))
    counts = {kind: stats["num_scenarios"] for kind, stats in summary["per_unseen"].items()}
    expected = {}
    for row in rows:
        expected[unseen_kind(row["scenario"])] = expected.get(unseen_kind(row["scenario"]), 0) + 1
    assert counts == expected and sum(counts.values()) == len(rows)
