"""benchmarks/reward/signal.py: how often the reward scores a group of weak answers alike."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from benchmarks.reward.signal import FLAT_SPAN, WEAK_PLANNERS, group_statistics, main
from fleet_rl.scenario_generator import TASKS
from rewards.ird import IRD_REWARD

STAT_KEYS = {"groups", "answers", "mean_reward", "flat_group_share", "ird_level_share", "mean_group_std"}


def test_group_statistics_by_hand():
    groups = [
        [IRD_REWARD, IRD_REWARD, IRD_REWARD, IRD_REWARD],  # flat, all at the IRD level, std 0
        [0.1, 0.1 + FLAT_SPAN / 2, 0.1, 0.1 + FLAT_SPAN / 2],  # spans 0.005: flat (noise), std 0.0025
        [0.0, 0.2, IRD_REWARD, 0.6],  # spans 0.6: signal; one answer at the IRD level
    ]
    stats = group_statistics(groups)
    assert stats["groups"] == 3 and stats["answers"] == 12
    assert stats["flat_group_share"] == pytest.approx(2 / 3, abs=1e-4)
    assert stats["ird_level_share"] == pytest.approx(5 / 12, abs=1e-4)
    # population std of [0, 0.2, 0.01, 0.6]: mean 0.2025, variance (0.2025² + 0.0025² + 0.1925² + 0.3975²) / 4
    third = ((0.2025**2 + 0.0025**2 + 0.1925**2 + 0.3975**2) / 4) ** 0.5
    assert stats["mean_group_std"] == pytest.approx((0 + 0.0025 + third) / 3, abs=1e-4)
    total = 4 * IRD_REWARD + 0.4 + 2 * FLAT_SPAN / 2 + 0.8 + IRD_REWARD
    assert stats["mean_reward"] == pytest.approx(total / 12, abs=1e-4)


def test_a_span_of_flat_span_is_signal_and_a_near_ird_reward_is_not_the_ird_level():
    stats = group_statistics([[0.2, 0.2 + FLAT_SPAN + 1e-9], [IRD_REWARD + 1e-9, 0.5]])
    assert stats["flat_group_share"] == 0.0 and stats["ird_level_share"] == 0.0


def test_groups_may_differ_in_size_but_none_may_be_empty():
    assert group_statistics([[0.3], [0.3, 0.5, 0.7]])["flat_group_share"] == 0.5
    with pytest.raises(ValueError, match="empty"):
        group_statistics([[0.3], []])
    with pytest.raises(ValueError):
        group_statistics([])


def test_a_small_run_reports_every_tier_and_planner(capsys):
    report = main(["--groups", "2", "--group_size", "3"])
    assert report == json.loads(capsys.readouterr().out)
    assert list(report["tiers"]) == list(TASKS)
    for planners in report["tiers"].values():
        assert list(planners) == list(WEAK_PLANNERS)
        for stats in planners.values():
            assert set(stats) == STAT_KEYS and stats["groups"] == 2 and stats["answers"] == 6
            assert 0.0 <= stats["flat_group_share"] <= 1.0 and 0.0 <= stats["ird_level_share"] <= 1.0
            assert 0.0 <= stats["mean_reward"] <= 1.0 and stats["mean_group_std"] >= 0.0
    goal = report["goal"]
    assert goal["planner"] == "random_split" and goal["tiers"] == list(TASKS)
    assert isinstance(goal["met"], bool)  # whether it is met depends on today's reward, not on this code


def test_same_seed_same_report_and_the_goal_is_null_without_random_split(capsys):
    argv = ["--groups", "2", "--tasks", "easy", "--planners", "random"]
    first, second = main(argv), main(argv)
    assert first["tiers"] == second["tiers"]
    assert first["goal"]["met"] is None and first["goal"]["tiers"] == []


def _completions_run(run_dir) -> None:
    """A made-up run: two steps, two prompts each, three completions per group, in two tables."""
    (run_dir / "completions").mkdir(parents=True)
    rows = []
    for step, prompt, rewards in [
        (1, "a", [IRD_REWARD, IRD_REWARD, IRD_REWARD]),  # flat
        (1, "b", [0.1, 0.5, 0.9]),
        (2, "a", [0.3, 0.3, 0.305]),  # flat: spans 0.005
        (2, "b", [IRD_REWARD, 0.02, 0.5]),
    ]:
        for reward in rewards:
            prompt_messages = [{"role": "user", "content": prompt}]
            rows.append({"step": step, "prompt": prompt_messages, "fleet_reward": reward, "ird": ""})
    frame = pd.DataFrame(rows)
    frame[frame["step"] == 1].to_parquet(run_dir / "completions" / "completions_00001.parquet")
    frame[frame["step"] == 2].to_parquet(run_dir / "completions" / "completions_00002.parquet")


def test_the_completions_path_groups_rows_by_step_and_prompt(tmp_path, capsys):
    _completions_run(tmp_path)
    report = main(["--completions", str(tmp_path), "--window", "1"])
    run = report["runs"][str(tmp_path)]
    assert run["overall"]["groups"] == 4 and run["overall"]["answers"] == 12
    assert run["overall"]["flat_group_share"] == 0.5
    assert run["overall"]["ird_level_share"] == pytest.approx(4 / 12, abs=1e-4)
    assert list(run["by_steps"]) == ["steps 1-1", "steps 2-2"]
    assert run["by_steps"]["steps 1-1"]["flat_group_share"] == 0.5
    assert run["by_steps"]["steps 1-1"]["ird_level_share"] == 0.5
    assert run["by_steps"]["steps 2-2"]["ird_level_share"] == pytest.approx(1 / 6, abs=1e-4)
    assert "tiers" not in report and "goal" not in report


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--groups", "0"], "--groups must be at least 1"),
        (["--group_size", "1"], "--group_size must be at least 2"),
        (["--tasks", "impossible"], "invalid choice"),
        (["--planners", "oracle"], "invalid choice"),
        (["--completions", ".", "--window", "0"], "--window must be at least 1"),
    ],
)
def test_a_bad_argument_is_a_clear_error(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_a_run_without_completions_tables_is_a_clear_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.reward.signal", "--completions", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "log_completions: true" in done.stderr and "Traceback" not in done.stderr
