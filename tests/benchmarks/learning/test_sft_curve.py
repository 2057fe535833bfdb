"""benchmarks/learning/sft_curve.py: one tiny warm start with checkpoints, each scored on held-out
scenarios."""

from __future__ import annotations

import json

import pytest

from benchmarks.learning import sft_curve
from benchmarks.learning.start_cache import START_EVALUATIONS
from fleet_rl.tiny_model import ensure_tiny_model


@pytest.mark.slow
def test_each_checkpoint_is_a_scored_warm_start_the_learning_benchmark_can_reuse(tmp_path):
    model = str(ensure_tiny_model(tmp_path / "tiny"))
    output = tmp_path / "curve.json"
    argv = [
        "--config", "configs/tiny_cpu.yaml", "--steps", "4", "2", "--eval_scenarios", "2",
        "--work_dir", str(tmp_path / "work"), "--output", str(output),
        "--model_name_or_path", model, "--local_model", "", "--sft_batch_size", "2",
    ]  # fmt: skip
    result = sft_curve.main(argv)
    assert [point["step"] for point in result["checkpoints"]] == [2, 4]
    for point in result["checkpoints"]:
        marker = json.loads((tmp_path / "work" / "warm-start-checkpoints" / f"step-{point['step']}" /
                             "warm_start.json").read_text())  # fmt: skip
        assert (marker["steps"], marker["target"], marker["schedule_steps"]) == (point["step"], "optimal", 4)
        assert len(point["percent_of_optimum"]) == 2
        assert point["summary"]["num_scenarios"] == 2 and "per_unseen" in point["summary"]
    assert result["best_step"] in (2, 4) and set(result["baselines"]) == {"even_bf16", "heuristic",
                                                                          "random_feasible"}  # fmt: skip
    assert len(list((tmp_path / "work" / START_EVALUATIONS).glob("*.json"))) == 2
    assert json.loads(output.read_text())["scenario_fingerprint"] == result["scenario_fingerprint"]
    table = sft_curve.render(result)
    assert "| SFT step 2 |" in table and "| SFT step 4 |" in table and "baseline: even_bf16" in table

    again = sft_curve.main([*argv, "--reuse"])  # the warm start and both evaluations are kept
    assert all(point["evaluation_reused_from"] for point in again["checkpoints"])
    assert again["checkpoints"][0]["percent_of_optimum"] == result["checkpoints"][0]["percent_of_optimum"]


def test_command_line_needs_a_config_and_an_output_and_positive_steps():
    with pytest.raises(SystemExit):
        sft_curve.parse(["--config", "c.yaml"])
    with pytest.raises(SystemExit):
        sft_curve.parse(["--config", "c.yaml", "--output", "o.json", "--steps", "0"])
    args, flags = sft_curve.parse(["--config", "c.yaml", "--output", "o.json", "--sft_learning_rate", "1e-4"])
    assert (args.steps, flags) == ([40, 80, 120], ["--sft_learning_rate", "1e-4"])
    assert args.sft_target is None  # the run takes the preset's target and names it in the result


def test_the_placed_shares_follow_the_headers_tier_order_not_the_summarys():
    """A summary's per_task lists tiers as the held-out rows first meet them (medium first on today's rows);
    the table's "placed (easy / medium)" cells must follow the header's order."""
    per_task = {"medium": {"placed_job_share": 0.87}, "easy": {"placed_job_share": 0.96}}
    summary = {key: 0.5 for key, _, _ in sft_curve.COLUMNS} | {"per_task": per_task}
    result = {"eval": {"eval_tasks": ["easy", "medium"]}, "sft_target": "heuristic", "eval_scenarios": 2,
              "scenario_fingerprint": "f", "checkpoints": [{"step": 1, "summary": summary}], "baselines": {},
              "best_step": 1}  # fmt: skip
    table = sft_curve.render(result)
    assert "placed (easy / medium)" in table and "| 0.96 / 0.87 |" in table
