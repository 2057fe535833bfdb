"""fleet_rl/training/split_note.py: the GPU split an imitator writes before the plan, with a running count."""

from __future__ import annotations

import json

from fleet_rl.training.dataset import scenario_rows, sft_dataset, sft_target_plan
from fleet_rl.training.split_note import free_gpus, renoted, split_note, with_split_note
from rewards import parse_plan


def test_the_note_words_each_jobs_gpus_with_the_gpus_left_after_it():
    plan = {"jobs": [{"id": "tune", "gpus": 2}, {"id": "rag", "gpus": 3}, {"id": "support-bot", "gpus": 2}]}
    assert split_note(plan, 7) == "GPUs 7: tune 2 (5 left), rag 3 (2 left), support-bot 2 (0 left)."
    assert split_note({"jobs": [{"id": "a", "gpus": 0}]}, 4) == "GPUs 4: a 0 (4 left)."


def test_renoted_rewrites_only_the_note_before_the_fence():
    plan = {"jobs": [{"id": "tune", "gpus": 3}, {"id": "rag", "gpus": 4}]}
    fence = '```json\n{"jobs": []}\n```'
    assert (
        renoted(f"GPUs 8: tune 9 (-1 left).\n{fence}", plan, 8)
        == f"GPUs 8: tune 3 (5 left), rag 4 (1 left).\n{fence}"
    )
    assert renoted(f"Plan:\n{fence}", plan, 8) == f"Plan:\n{fence}"  # no note: the text as it was
    later = f"{fence}\nGPUs 8: tune 9 (-1 left)."
    assert renoted(later, plan, 8) == later  # a line after the fence is not the note


def test_a_multi_agent_row_counts_only_the_gpus_the_given_parts_leave():
    (row,) = scenario_rows(["multiagent"], 1, dataset_seed=3)
    count = json.loads(row["scenario"])["cluster"]["count"]
    given = sum(part["gpus"] for part in json.loads(row["given_plan"])["jobs"])
    assert free_gpus(row) == count - given
    (whole,) = scenario_rows(["medium"], 1, dataset_seed=3)
    assert free_gpus(whole) == json.loads(whole["scenario"])["cluster"]["count"]


def test_noted_answers_parse_to_the_same_plan_and_the_heuristics_count_never_goes_below_zero():
    kwargs = {"target": "heuristic", "dataset_seed": 4, "prompt_style": "sized_batching"}
    plain = sft_dataset(["easy", "medium", "multiagent"], 12, **kwargs)
    noted = sft_dataset(["easy", "medium", "multiagent"], 12, split_note=True, **kwargs)
    rows = scenario_rows(["easy", "medium", "multiagent"], 12, dataset_seed=4, prompt_style="sized_batching")
    for before, after, row in zip(plain, noted, rows, strict=True):
        assert before["prompt"] == after["prompt"]
        answer, note = before["completion"][0]["content"], after["completion"][0]["content"]
        plan = sft_target_plan(row, "heuristic")
        assert note == with_split_note(answer, plan, row) and note.endswith(answer)
        assert note.startswith(f"GPUs {free_gpus(row)}: ")
        assert parse_plan(note).plan == parse_plan(answer).plan  # the reward reads the fence only
        assert "(-" not in note.splitlines()[0]  # the heuristic stays within the GPUs it may share out


def test_a_warm_start_is_reused_only_with_the_split_note_it_was_trained_with():
    from fleet_rl.training.arguments import FleetScriptArguments
    from fleet_rl.training.warm_start import same_warm_start

    asked = FleetScriptArguments(sft_steps=90, sft_target="heuristic", sft_split_note=True)
    assert same_warm_start({"steps": 90, "target": "heuristic", "split_note": True}, asked)
    assert not same_warm_start({"steps": 90, "target": "heuristic", "split_note": False}, asked)
    assert not same_warm_start({"steps": 90, "target": "heuristic"}, asked)  # a marker from before the key
    asked.sft_split_note = False
    assert same_warm_start({"steps": 90, "target": "heuristic"}, asked)
