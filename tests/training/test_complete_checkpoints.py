"""Resume from the newest complete checkpoint: a checkpoint a kill left half-written is named and skipped."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import train_grpo
from fleet_rl.training.complete_checkpoints import checkpoint_problem, newest_complete_checkpoint

REPO = Path(__file__).resolve().parents[2]


def _complete(path: Path, step: int) -> Path:
    """A checkpoint with what transformers' Trainer writes for a LoRA run (small tensors)."""
    path.mkdir(parents=True)
    save_file(
        {"lora_A": torch.zeros(4, 8), "lora_B": torch.ones(8, 4)}, str(path / "adapter_model.safetensors")
    )
    torch.save({"state": {0: torch.zeros(16)}}, path / "optimizer.pt")
    torch.save({"last_epoch": step}, path / "scheduler.pt")
    torch.save({"python": [1, 2, 3]}, path / "rng_state.pth")
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    return path


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def test_a_checkpoint_with_everything_whole_is_complete(tmp_path):
    assert checkpoint_problem(_complete(tmp_path / "checkpoint-2", 2)) is None


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda c: (c / "trainer_state.json").unlink(), "trainer_state.json is missing"),
        (
            lambda c: (c / "trainer_state.json").write_text("{'global"),
            "trainer_state.json does not read as JSON",
        ),
        (lambda c: (c / "trainer_state.json").write_text("[]"), "trainer_state.json has no global_step"),
        (lambda c: _truncate(c / "optimizer.pt"), "optimizer.pt is not a whole torch.save archive"),
        (lambda c: (c / "scheduler.pt").unlink(), "scheduler.pt is missing"),
        (lambda c: (c / "rng_state.pth").unlink(), "the RNG state (rng_state*.pth) is missing"),
        (lambda c: _truncate(c / "adapter_model.safetensors", 0.9), "adapter_model.safetensors is"),
        (lambda c: (c / "adapter_model.safetensors").write_bytes(b"\x00"), "has no readable header"),
        (lambda c: (c / "adapter_model.safetensors").unlink(), "no weights"),
    ],
)
def test_each_kind_of_damage_is_named(tmp_path, damage, problem):
    checkpoint = _complete(tmp_path / "checkpoint-3", 3)
    damage(checkpoint)
    assert problem in checkpoint_problem(checkpoint)


def test_a_model_only_checkpoint_needs_no_optimizer(tmp_path):
    checkpoint = _complete(tmp_path / "checkpoint-1", 1)
    (checkpoint / "optimizer.pt").unlink()
    assert checkpoint_problem(checkpoint) == "optimizer.pt is missing"
    assert checkpoint_problem(checkpoint, save_only_model=True) is None


def test_the_newest_complete_checkpoint_is_found_past_damaged_newer_ones(tmp_path):
    for step in (1, 2, 3, 10):
        _complete(tmp_path / f"checkpoint-{step}", step)
    (tmp_path / "checkpoint-10" / "trainer_state.json").unlink()
    _truncate(tmp_path / "checkpoint-3" / "optimizer.pt")
    (tmp_path / "checkpoint-junk").mkdir()
    checkpoint, damaged = newest_complete_checkpoint(tmp_path)
    assert checkpoint == str(tmp_path / "checkpoint-2")  # numbered, not sorted as text
    assert [Path(path).name for path, _ in damaged] == ["checkpoint-10", "checkpoint-3"]
    assert newest_complete_checkpoint(tmp_path / "absent") == (None, [])


def _parse_resume(tmp_path: Path, resume: str):
    return train_grpo.parse_args(
        ["--config", "configs/tiny_cpu.yaml", "--output_dir", str(tmp_path), "--report_to", "none",
         "--resume_from_checkpoint", resume]
    )  # fmt: skip


def test_resume_last_takes_the_newest_complete_one_and_names_the_damaged(tmp_path, capsys):
    _complete(tmp_path / "checkpoint-2", 2)
    damaged = _complete(tmp_path / "checkpoint-3", 3)
    (damaged / "trainer_state.json").unlink()
    _truncate(damaged / "optimizer.pt")
    _, training_args, _ = _parse_resume(tmp_path, "last")
    assert training_args.resume_from_checkpoint == str(tmp_path / "checkpoint-2")
    err = capsys.readouterr().err
    assert f"skipping the incomplete {damaged} (trainer_state.json is missing); left in place" in err
    assert damaged.is_dir()  # never deleted


def test_resume_last_without_a_complete_checkpoint_trains_from_the_start(tmp_path, capsys):
    (_complete(tmp_path / "checkpoint-1", 1) / "scheduler.pt").unlink()
    _, training_args, _ = _parse_resume(tmp_path, "true")
    assert training_args.resume_from_checkpoint is None
    assert "no complete checkpoint in" in capsys.readouterr().err


def test_an_explicit_damaged_checkpoint_is_one_line_and_exit_2(tmp_path, capsys):
    damaged = _complete(tmp_path / "checkpoint-3", 3)
    (damaged / "trainer_state.json").write_text("not json")
    with pytest.raises(SystemExit) as excinfo:
        _parse_resume(tmp_path, str(damaged))
    assert excinfo.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"train_grpo.py: error: checkpoint {damaged} is incomplete: trainer_state.json does not read as JSON "
        "(JSONDecodeError); resume from another with --resume_from_checkpoint last (the newest complete one)"
    ]


@pytest.mark.slow
def test_a_run_killed_while_saving_resumes(tmp_path):
    """The issue's case: two steps saved each step, then what a kill during the third save leaves (the
    adapter and a truncated optimizer.pt, no trainer_state.json); ``last`` resumes from checkpoint-2."""
    env = {**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "2", "HF_HUB_OFFLINE": "1"}
    run = tmp_path / "run"
    base = [
        sys.executable, "train_grpo.py", "--config", "configs/tiny_cpu.yaml",
        "--model_name_or_path", str(tmp_path / "tiny"), "--output_dir", str(run), "--sft_steps", "0",
        "--num_prompts", "16", "--max_completion_length", "16", "--save_steps", "1", "--eval_scenarios", "0",
        "--disable_tqdm", "true", "--log_completions", "false", "--report_to", "none",
    ]  # fmt: skip
    done = subprocess.run([*base, "--max_steps", "2"], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    killed = run / "checkpoint-3"
    killed.mkdir()
    shutil.copy(run / "checkpoint-2" / "adapter_model.safetensors", killed)
    shutil.copy(run / "checkpoint-2" / "optimizer.pt", killed)
    _truncate(killed / "optimizer.pt")
    resume = [*base, "--max_steps", "4", "--resume_from_checkpoint", "last"]
    done = subprocess.run(resume, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"skipping the incomplete {killed}" in done.stderr
    state = json.loads((run / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    assert [entry["step"] for entry in state["log_history"] if "loss" in entry] == [1, 2, 3, 4]
