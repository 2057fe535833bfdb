"""benchmarks/reward/completions.py: the reward's view of a run, read from TRL's completions tables."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from benchmarks.reward.completions import load_completions, main, prompt_jobs, summarize
from fleet_rl.prompts import PROMPT_STYLES, build_messages
from fleet_rl.scenario_generator import make_scenario
from rewards.fleet_reward import FEASIBLE_BASE, INCONSISTENT_REWARD
from rewards.ird import IRD_REWARD


def _messages(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]  # TRL logs a chat prompt as its list of messages


def _write_run(run_dir, rows: list[dict], tables: int = 2) -> None:
    """Split the rows over several completions_*.parquet files, as TRL writes one per logging step."""
    (run_dir / "completions").mkdir(parents=True)
    frame = pd.DataFrame(rows)
    for index, part in enumerate(frame.groupby(frame.index % tables)):
        part[1].to_parquet(run_dir / "completions" / f"completions_{index + 1:05d}.parquet")


def _row(step: int, prompt: str, reward: float, ird: str = "") -> dict:
    return {"step": step, "prompt": _messages(prompt), "fleet_reward": reward, "ird": ird}


RUN = [
    # step 1, prompt a: every completion degenerate -> one flat group
    _row(1, "a", IRD_REWARD, "nothing_runs"),
    _row(1, "a", IRD_REWARD, "nothing_runs"),
    # step 1, prompt b: a feasible plan and one that over-allocates the cluster
    _row(1, "b", FEASIBLE_BASE + 0.35),
    _row(1, "b", INCONSISTENT_REWARD),
    # step 2, prompt a: degenerate and infeasible-but-honest
    _row(2, "a", IRD_REWARD, "invented_or_duplicate_id"),
    _row(2, "a", 0.1),
    # step 3, prompt b: all degenerate
    _row(3, "b", IRD_REWARD, "nothing_runs"),
    _row(3, "b", IRD_REWARD, "nothing_runs"),
]


def test_summary_counts_what_the_reward_offered(tmp_path):
    _write_run(tmp_path, RUN)
    summary = summarize(load_completions(tmp_path), window_steps=1)
    assert summary["completions"] == 8 and summary["steps"] == 3
    assert summary["degenerate_share"] == pytest.approx(5 / 8)
    assert summary["feasible_share"] == pytest.approx(1 / 8)
    assert summary["below_degenerate"] == {"count": 1, "of": 3}  # the over-allocated plan
    assert summary["flat_groups"] == {"count": 2, "of": 4}  # (1, a) and (3, b)
    assert summary["degenerate_share_by_step"] == {"steps 1-1": 0.5, "steps 3-3": 1.0}
    assert summary["by_jobs"] == {}  # prompts without the request line are left out of it


@pytest.mark.parametrize("style", PROMPT_STYLES)
def test_the_job_count_is_read_from_every_prompt_styles_request_line(style):
    for task, seed in (("easy", 0), ("medium", 0), ("medium", 1)):
        scenario = make_scenario(task, seed)
        logged = str(build_messages(scenario, style=style))  # as the summary reads a logged chat prompt
        assert prompt_jobs(logged) == len(scenario.jobs)
    assert prompt_jobs("no request here") is None


def test_completions_are_summarised_by_the_job_count_their_prompt_asks_for(tmp_path):
    one, three = (
        str(build_messages(make_scenario(task, seed))) for task, seed in (("easy", 0), ("medium", 1))
    )
    rows = [
        {**_row(1, one, FEASIBLE_BASE + 0.5), "percent_of_optimum": 70.0},
        {**_row(1, one, 0.1), "percent_of_optimum": 0.0},
        {**_row(2, three, FEASIBLE_BASE), "percent_of_optimum": 10.0},
        {**_row(2, "no request line", 0.2), "percent_of_optimum": 0.0},
    ]
    _write_run(tmp_path, rows)
    by_jobs = summarize(load_completions(tmp_path))["by_jobs"]
    assert set(by_jobs) == {"1", "3"}
    assert by_jobs["1"] == pytest.approx(
        {"completions": 2, "mean_fleet_reward": (FEASIBLE_BASE + 0.6) / 2, "feasible_share": 0.5,
         "mean_percent_of_optimum": 35.0}
    )  # fmt: skip
    assert by_jobs["3"] == pytest.approx(
        {
            "completions": 1,
            "mean_fleet_reward": FEASIBLE_BASE,
            "feasible_share": 1.0,
            "mean_percent_of_optimum": 10.0,
        }
    )


def test_the_command_prints_json_per_run(tmp_path, capsys):
    _write_run(tmp_path / "seed-0", RUN)
    assert main([str(tmp_path / "seed-0"), "--window", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    drift = report[str(tmp_path / "seed-0")]["degenerate_share_by_step"]
    assert drift == {"steps 1-2": 0.5, "steps 2-3": 0.75}


def test_a_run_without_completions_tables_is_a_clear_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.reward.completions", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "log_completions: true" in done.stderr and "Traceback" not in done.stderr


def test_tables_without_the_ird_column_are_a_clear_error(tmp_path):
    without_ird = [{key: value for key, value in row.items() if key != "ird"} for row in RUN]
    _write_run(tmp_path, without_ird, tables=1)
    with pytest.raises(ValueError, match="ird"):
        load_completions(tmp_path)


def test_empty_tables_are_a_clear_error(tmp_path):
    (tmp_path / "completions").mkdir()
    empty = pd.DataFrame(columns=["step", "prompt", "fleet_reward", "ird"])
    empty.to_parquet(tmp_path / "completions" / "completions_00001.parquet")
    with pytest.raises(ValueError, match="no completions"):
        load_completions(tmp_path)


def test_a_window_below_one_step_is_refused(tmp_path, capsys):
    _write_run(tmp_path, RUN)
    with pytest.raises(SystemExit) as exit_info:
        main([str(tmp_path), "--window", "0"])
    assert exit_info.value.code == 2 and "--window" in capsys.readouterr().err
