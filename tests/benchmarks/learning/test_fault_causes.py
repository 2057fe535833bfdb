"""benchmarks/learning/fault_causes.py: each failing held-out job counted, each out-of-memory one set against
the prompt's Fits line."""

from __future__ import annotations

import copy
import json

import pytest

from benchmarks.learning import fault_causes as module
from benchmarks.learning.evaluate import eval_rows
from fleet_rl.baselines import heuristic
from fleet_rl.kernel import evaluate
from fleet_rl.prompts import format_answer
from fleet_rl.replica_fit import ReplicaFit
from fleet_rl.scenario import Scenario

SETTINGS = {"eval_scenarios": 6, "eval_tasks": ["easy"], "eval_dataset_seed": 7, "prompt_style": "sized"}
FITS = [ReplicaFit("bf16", 2), ReplicaFit("fp8", 1), ReplicaFit("int4", None, "quality")]


def _part(fmt: str, tp: int, checkpointing: bool = False) -> dict:
    precision = {"embedding": "bf16", "attention": fmt, "mlp": fmt, "norm": "bf16", "lm_head": "bf16"}
    return {"id": "j", "gpus": tp, "tensor_parallel": tp, "precision": precision,
            "micro_batch_size": 4, "activation_checkpointing": checkpointing}  # fmt: skip


@pytest.mark.parametrize(
    ("part", "cause"),
    [
        (_part("bf16", 1), "below_stated_tp"),
        (_part("bf16", 2), "at_stated_tp_without_checkpointing"),
        (_part("fp8", 4), "at_stated_tp_without_checkpointing"),
        (_part("bf16", 2, checkpointing=True), "at_stated_tp_with_checkpointing"),
        (_part("int4", 8), "format_without_a_fit"),
        (_part("bf16", 2) | {"precision": _part("bf16", 2)["precision"] | {"mlp": "fp8"}}, "mixed_formats"),
    ],
)
def test_an_out_of_memory_part_is_classed_by_what_its_formats_fits_entry_said(part, cause):
    assert module.oom_cause(part, FITS) == cause


@pytest.mark.parametrize(
    ("extra", "written"),
    [
        ({"kv_cache": "fp8"}, "serve"),
        ({"micro_batch_size": 4}, "training"),
        ({"activation_checkpointing": True}, "training"),
        ({"sharding": "full"}, "training"),
        ({"kv_cache": "fp8", "micro_batch_size": 2}, "both"),
        ({}, "defaults"),
    ],
)
def test_the_keys_a_part_carries_are_named_by_the_kind_they_belong_to(extra, written):
    assert module.keys_written({"id": "j", "gpus": 1, "tensor_parallel": 1} | extra) == written


def test_a_serve_jobs_keys_on_a_training_job_are_counted_against_its_kind(tmp_path):
    """The heuristic writes each placed job's own kind's keys; one training job given a kv_cache instead of
    its batching is counted as a training job with serve keys. Idle jobs (0 GPUs) are not counted."""
    rows = eval_rows(SETTINGS)
    plans = [heuristic(Scenario.from_json(row["scenario"])) for row in rows]
    honest = _write(tmp_path / "honest.json", [format_answer(plan) for plan in plans])
    counts = module.main([str(honest)])["keys_by_kind"]
    assert set(counts["serve"]) <= {"serve", "defaults"}
    assert set(counts["training"]) <= {"training", "defaults"}
    part = next(part for plan in plans for part in plan["jobs"] if "micro_batch_size" in part)
    for key in ("micro_batch_size", "activation_checkpointing"):
        part.pop(key)
    part["kv_cache"] = "bf16"
    confused = _write(tmp_path / "confused.json", [format_answer(plan) for plan in plans])
    after = module.main([str(confused)])["keys_by_kind"]
    assert after["training"].get("serve", 0) == counts["training"].get("serve", 0) + 1
    assert sum(after["training"].values()) == sum(counts["training"].values())


def _write(path, answers: list[str]):
    path.write_text(json.dumps({"key": {"settings": SETTINGS}, "evaluation": {"completions": answers}}))
    return path


def _crashing(rows: list[dict]) -> tuple[int, dict]:
    """A row and the heuristic's plan for it with a training job's micro-batch raised until it crashes."""
    for index, row in enumerate(rows):
        scenario = Scenario.from_json(row["scenario"])
        plan = heuristic(scenario)
        for part in plan["jobs"]:
            if "micro_batch_size" in part and part["gpus"] > 0:
                crashed = copy.deepcopy(plan)
                entry = next(job for job in crashed["jobs"] if job["id"] == part["id"])
                entry |= {"micro_batch_size": 64, "activation_checkpointing": False}
                if any(job.status == "oom" for job in evaluate(scenario, crashed).jobs):
                    return index, crashed
    raise AssertionError("no training job crashes at micro-batch 64 on these rows")


def test_an_evaluation_file_is_counted_per_job_and_the_command_prints_it(tmp_path, capsys):
    rows = eval_rows(SETTINGS)
    answers = [format_answer(heuristic(Scenario.from_json(row["scenario"]))) for row in rows]
    index, crashed = _crashing(rows)
    answers[index] = format_answer(crashed)
    answers[(index + 1) % len(rows)] = "no plan here"
    counts = module.main([str(_write(tmp_path / "evaluation.json", answers))])
    assert json.loads(capsys.readouterr().out) == counts
    assert (counts["answers"], counts["unparsed_answers"], counts["prompt_style"]) == (6, 1, "sized")
    assert counts["job_statuses"]["oom"] == counts["reason_codes"]["oom"] == 1
    assert counts["oom_causes"] == {"at_stated_tp_without_checkpointing": 1}


def test_an_evaluation_of_other_rows_is_refused_in_one_line(tmp_path):
    path = _write(tmp_path / "evaluation.json", ["{}"])
    with pytest.raises(SystemExit, match="fault_causes: error: .*1 answers for 6 held-out rows"):
        module.main([str(path)])


def test_a_seed_result_is_read_for_the_policy_asked(tmp_path):
    """A seed's learning_seed.json holds the start's and the trained policy's answers under its fingerprint's
    settings; --policy picks which are counted (after by default)."""
    rows = eval_rows(SETTINGS)
    answers = [format_answer(heuristic(Scenario.from_json(row["scenario"]))) for row in rows]
    seed_result = {
        "fingerprint": {"settings": SETTINGS},
        "start": {"completions": answers},
        "after": {"completions": ["no plan here"] * len(rows)},
    }
    path = tmp_path / "learning_seed.json"
    path.write_text(json.dumps(seed_result))
    assert module.main([str(path)])["unparsed_answers"] == len(rows)
    start = module.main([str(path), "--policy", "start"])
    assert start["unparsed_answers"] == 0 and start["job_statuses"]
