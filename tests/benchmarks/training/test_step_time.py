"""The step-time benchmark on the tiny preset: every step's phases are there, non-negative, and add up; the
memory of loading and of each step is read."""

from __future__ import annotations

import json

import pytest

from benchmarks.training import step_time


def test_summary_shares_add_up_for_short_steps():
    # five phases of a 0.3 s step, each near a rounding edge: averaged before rounding, the shares add to 1
    timed = {"generate": 0.104, "rewards": 0.004, "generate_and_score": 0.114, "loss_forward": 0.054,
             "training_step": 0.284}  # fmt: skip
    steps = [{"step": i, "step_s": 0.304, "phases": step_time.phases(0.304, timed)} for i in (1, 2, 3)]
    summary = step_time.summary(steps)
    assert summary["steps_averaged"] == [2, 3]
    assert sum(summary["share"].values()) == pytest.approx(1.0, abs=0.005)


@pytest.mark.slow
def test_phases_of_each_step_add_up_to_the_step(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    result = step_time.main(
        [
            "--config", "configs/tiny_cpu.yaml", "--steps", "2",
            "--model_name_or_path", str(tmp_path / "tiny"), "--num_prompts", "16",
            "--max_completion_length", "24", "--self_imitation_coef", "0.1",
            "--explore_repair_rate", "0.5", "--job_credit", "0.5",
        ]
    )  # fmt: skip
    # stdout is the JSON alone, the trainer's logs go to stderr
    assert json.loads(capsys.readouterr().out) == result
    assert [step["step"] for step in result["steps"]] == [1, 2]
    for step in result["steps"]:
        assert set(step["phases"]) == set(step_time.PHASES)
        assert min(step["phases"].values()) >= 0
        assert sum(step["phases"].values()) == pytest.approx(step["step_s"], abs=0.05)
        for phase in ("generate", "loss_forward", "backward"):
            assert step["phases"][phase] > 0, phase
        assert 0.1 < step["rss_end_gb"] <= step["rss_peak_gb"] + 0.05
    assert result["loading_rss_peak_gb"] > 0.1
    assert result["peak_rss_gb"] >= max(step["rss_peak_gb"] for step in result["steps"]) - 0.05
    assert result["summary"]["steps_averaged"] == [2]
    assert sum(result["summary"]["share"].values()) == pytest.approx(1.0, abs=0.02)
    assert "--max_steps" in result["train_flags"] and "--output_dir" not in result["train_flags"]
    # the trainer classes are themselves again afterwards
    from trl import GRPOTrainer

    assert not hasattr(GRPOTrainer._generate, "__wrapped__")
