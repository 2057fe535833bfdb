"""eval.py --policies: several policies on the same held-out scenarios in one report (report.json, report.md,
percent_of_optimum.png), the same report for the same command, a model that writes garbage scored 0, and
clear usage errors (``fleet_rl/evaluation_report.py``)."""

from __future__ import annotations

import json

import pytest

import eval as eval_script
from fleet_rl.evaluation_report import REPORT_FILES, RUN_FILE
from fleet_rl.tiny_model import build_tiny_model

POLICIES = "heuristic,even_bf16,random,optimal"


def run(tmp_path, name: str, *extra: str) -> dict:
    argv = ["--policies", POLICIES, "--num_scenarios", "12", "--tasks", "easy", "hard", "multiagent"]
    return eval_script.main([*argv, "--output_dir", str(tmp_path / name), *extra])


def test_baselines_in_one_report_ordered_as_given_and_reproducible(tmp_path, capsys):
    report = run(tmp_path, "first")
    assert [policy["name"] for policy in report["policies"]] == POLICIES.split(",")
    assert {policy["kind"] for policy in report["policies"]} == {"baseline"}
    assert report["scenarios"] == {
        "split": "eval",
        "tasks": ["easy", "hard", "multiagent"],
        "num_scenarios": 12,
        "dataset_seed": 7,
    }
    by_name = {policy["name"]: policy["summary"] for policy in report["policies"]}
    assert by_name["optimal"]["mean_percent_of_optimum"] == pytest.approx(100.0)
    for summary in by_name.values():
        assert set(summary["per_task"]) <= {"easy", "hard", "multiagent"}
        assert summary["crash_rate"] >= max(summary[f"{s}_rate"] for s in ("oom", "unsupported", "unstable"))
    assert by_name["random"]["crash_rate"] > 0.0 == by_name["optimal"]["crash_rate"]
    assert all(0.0 < summary["placed_job_share"] <= 1.0 for summary in by_name.values())
    directory = tmp_path / "first"
    assert sorted(path.name for path in directory.iterdir()) == sorted(REPORT_FILES)
    assert json.loads((directory / "report.json").read_text()) == report
    table = (directory / "report.md").read_text()
    assert table in capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == POLICIES.split(",")
    assert rows[3].startswith("| `optimal` | 100.0 | 100.0 | 100.0 | 100.0 |")
    assert table.splitlines()[2].endswith("| crash | IRD | jobs placed | tokens |")
    assert (directory / "percent_of_optimum.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert run(tmp_path, "again") == report  # same scenarios and policies, same report
    assert (tmp_path / "again" / "report.md").read_text() == table


def test_a_model_that_writes_garbage_scores_zero_and_reports_its_tokens(tmp_path):
    model_dir = build_tiny_model(tmp_path / "tiny", corpus=["tiny corpus"])  # random init: no plans
    policies = f"{model_dir},even_bf16"
    argv = ["--policies", policies, "--num_scenarios", "2", "--tasks", "easy", "--max_new_tokens", "8"]
    report = eval_script.main([*argv, "--output_dir", str(tmp_path / "report")])
    model = report["policies"][0]
    assert model["kind"] == "model" and model["name"] == str(model_dir)
    assert model["summary"]["mean_percent_of_optimum"] == 0.0 and model["summary"]["valid_plan_rate"] == 0.0
    assert 0 < model["summary"]["mean_completion_tokens"] <= 8
    assert "mean_completion_tokens" not in report["policies"][1]["summary"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--policies", "greedy,even_bf16", "--output_dir", "x"],
            "unknown policy 'greedy': neither a baseline",
        ),
        (["--policies", " , ", "--output_dir", "x"], "--policies is empty"),
        (["--policies", "even_bf16"], "give --output_dir"),
        (["--policies", "even_bf16", "--baseline", "random", "--output_dir", "x"], "--policies replaces"),
        (["--policies", "even_bf16", "--tasks", "expert", "--output_dir", "x"], "unknown tasks ['expert']"),
    ],
)
def test_usage_errors_exit_2_with_a_message(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        eval_script.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # nothing written


def fake_run(directory, steps: int = 3) -> None:
    """A run directory as train_grpo.py leaves it: trainer_state.json in its checkpoints only."""
    history = [
        {"step": step, "reward": 0.1 * step, "rewards/fleet_reward/mean": 0.1 * step, "loss": 0.5}
        for step in range(1, steps + 1)
    ]
    history.append({"step": steps, "heldout/mean_percent_of_optimum": 42.0, "heldout/ird_rate": 0.1})
    for step, kept in ((1, history[:1]), (steps, history)):
        checkpoint = directory / f"checkpoint-{step}"
        checkpoint.mkdir(parents=True)
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": kept}))


def test_a_training_run_adds_its_curves_from_the_latest_checkpoint(tmp_path, capsys):
    fake_run(tmp_path / "run")
    argv = [
        "--policies",
        "optimal",
        "--num_scenarios",
        "2",
        "--tasks",
        "easy",
        "--run",
        str(tmp_path / "run"),
    ]
    report = eval_script.main([*argv, "--output_dir", str(tmp_path / "report")])
    run = report["run"]
    assert run["global_step"] == 3 and run["dir"] == str(tmp_path / "run")
    assert run["curves"]["reward"] == [[1.0, 0.1], [2.0, 0.2], [3.0, pytest.approx(0.3)]]
    assert run["curves"]["heldout/mean_percent_of_optimum"] == [[3.0, 42.0]]
    assert "loss" not in run["curves"]
    assert (tmp_path / "report" / RUN_FILE).read_bytes()[:4] == b"\x89PNG"
    assert "held-out % of optimum at step 3: 42.0" in (tmp_path / "report" / "report.md").read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--policies", "optimal", "--output_dir", "x", "--run", "no_run"], "is not a directory"),
        (["--policies", "optimal", "--output_dir", "x", "--run", "."], "no trainer_state.json in '.'"),
        (["--baseline", "optimal", "--run", "."], "--run and --output_dir go with --policies"),
    ],
)
def test_a_bad_run_is_a_usage_error_before_anything_is_evaluated(
    argv, message, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        eval_script.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_failing_policy_is_reported_and_the_others_are_kept(tmp_path, capsys):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}")  # a directory that is no model
    argv = ["--policies", f"even_bf16,{broken},optimal", "--num_scenarios", "2", "--tasks", "easy"]
    report = eval_script.main([*argv, "--output_dir", str(tmp_path / "report")])
    names = [policy["name"] for policy in report["policies"]]
    assert names == ["even_bf16", str(broken), "optimal"]
    assert "summary" in report["policies"][0] and "summary" in report["policies"][2]
    assert report["policies"][1]["error"].startswith("ValueError")
    assert f"policy {str(broken)!r} failed" in capsys.readouterr().err
    assert "failed: ValueError" in (tmp_path / "report" / "report.md").read_text()


def test_an_interrupted_evaluation_leaves_the_policies_done_so_far(tmp_path, monkeypatch):
    done = []

    def baseline_then_interrupt(args):
        if done:
            raise KeyboardInterrupt
        done.append(args.baseline)
        return original(args)

    original = eval_script.evaluate_baseline
    monkeypatch.setattr(eval_script, "evaluate_baseline", baseline_then_interrupt)
    argv = ["--policies", "optimal,even_bf16", "--num_scenarios", "2", "--tasks", "easy"]
    with pytest.raises(KeyboardInterrupt):
        eval_script.main([*argv, "--output_dir", str(tmp_path / "report")])
    written = json.loads((tmp_path / "report" / "report.json").read_text())
    assert [policy["name"] for policy in written["policies"]] == ["optimal"]
