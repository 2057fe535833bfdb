"""eval.py with baselines (no model needed) and its usage errors."""

from __future__ import annotations

import json

import pytest

import eval as eval_script


def test_baseline_report_is_json_with_rates_and_per_task_numbers(tmp_path, capsys):
    output = tmp_path / "report.json"
    report = eval_script.main(
        [
            "--baseline",
            "optimal",
            "--num_scenarios",
            "8",
            "--tasks",
            "easy",
            "multiagent",
            "--output",
            str(output),
        ]
    )
    assert report["evaluated"] == "baseline:optimal"
    assert report["mean_percent_of_optimum"] == pytest.approx(100.0)
    assert set(report["per_task"]) <= {"easy", "multiagent"}
    assert json.loads(output.read_text()) == json.loads(capsys.readouterr().out)


def test_even_split_scores_below_the_optimum():
    report = eval_script.main(["--baseline", "even_bf16", "--num_scenarios", "16", "--tasks", "medium"])
    assert 0.0 < report["mean_percent_of_optimum"] < 100.0
    assert report["valid_plan_rate"] == 1.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give exactly one of --model or --baseline"),
        (["--baseline", "greedy"], "unknown baseline 'greedy'; valid baselines: even_bf16, random, optimal"),
        (["--baseline", "random", "--tasks", "expert"], "unknown tasks ['expert']"),
        (["--model", "/no/such/dir"], "is not a directory"),
    ],
)
def test_usage_errors_exit_2_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        eval_script.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
