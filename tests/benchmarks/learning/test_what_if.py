"""benchmarks/learning/what_if.py: a policy's held-out answers re-scored with the reference planner's value of
each set of fields put in."""

from __future__ import annotations

import json

import pytest

from benchmarks.learning import what_if as module
from benchmarks.learning.evaluate import eval_rows, per_scenario_metrics
from fleet_rl.baselines import even_bf16, heuristic
from fleet_rl.prompts import format_answer
from fleet_rl.scenario import Scenario

SETTINGS = {"eval_scenarios": 8, "eval_tasks": ["easy", "medium"], "eval_dataset_seed": 7,
            "prompt_style": "sized_batching"}  # fmt: skip
BF16 = dict.fromkeys(("embedding", "attention", "mlp", "norm", "lm_head"), "bf16")


def test_swapped_fields_take_the_references_values_and_drop_keys_it_leaves_out():
    plan = {"jobs": [
        {"id": "a", "gpus": 3, "tensor_parallel": 1, "precision": BF16, "kv_cache": "bf16",
         "micro_batch_size": 2},
        {"id": "extra", "gpus": 1, "tensor_parallel": 1, "precision": BF16},
    ]}  # fmt: skip
    reference = {"jobs": [{"id": "a", "gpus": 2, "tensor_parallel": 2, "precision": BF16 | {"mlp": "fp8"},
                           "micro_batch_size": 4, "activation_checkpointing": False}]}  # fmt: skip
    swapped = module.swap_fields(plan, reference, ("gpus", "kind_keys"))
    assert swapped["jobs"][0] == {"id": "a", "gpus": 2, "tensor_parallel": 1, "precision": BF16,
                                  "micro_batch_size": 4, "activation_checkpointing": False}  # fmt: skip
    assert swapped["jobs"][1] == plan["jobs"][1]  # a job the reference does not list is kept as written
    assert module.swap_fields(plan, reference, ("precision",))["jobs"][0]["precision"]["mlp"] == "fp8"
    assert plan["jobs"][0]["gpus"] == 3  # the plan itself is not changed


def test_every_set_of_fields_is_scored_and_all_of_them_give_the_references_score(tmp_path, capsys):
    rows = eval_rows(SETTINGS)
    answers = [format_answer(even_bf16(Scenario.from_json(row["scenario"]))) for row in rows]
    answers[0] = "no plan here"
    path = tmp_path / "evaluation.json"
    path.write_text(json.dumps({"key": {"settings": SETTINGS}, "evaluation": {"completions": answers}}))
    result = module.main([str(path)])
    assert json.loads(capsys.readouterr().out) == result
    assert (result["answers"], result["unparsed_answers"], result["reference"]) == (8, 1, "heuristic")
    percents = result["percent_of_optimum"]
    assert len(percents) == 2 + 15  # as written, the reference, every non-empty set of the four fields
    written = per_scenario_metrics(rows, answers)["percent_of_optimum"]
    assert percents["as_written"]["all"] == pytest.approx(sum(written) / len(written), abs=0.05)
    heuristic_answers = [format_answer(heuristic(Scenario.from_json(row["scenario"]))) for row in rows]
    scored = per_scenario_metrics(rows, ["no plan here", *heuristic_answers[1:]])["percent_of_optimum"]
    every_field = percents["gpus+tensor_parallel+precision+kind_keys"]
    assert every_field["all"] == pytest.approx(sum(scored) / len(scored), abs=0.05)  # unparsed stays 0
    assert set(every_field) == {"all", "easy", "medium"}
    assert percents["heuristic"]["all"] > percents["as_written"]["all"]


def test_an_evaluation_of_other_rows_is_refused_in_one_line(tmp_path):
    path = tmp_path / "evaluation.json"
    path.write_text(json.dumps({"key": {"settings": SETTINGS}, "evaluation": {"completions": ["{}"]}}))
    with pytest.raises(SystemExit, match="what_if: error: .*1 answers for 8 held-out rows"):
        module.main([str(path)])
