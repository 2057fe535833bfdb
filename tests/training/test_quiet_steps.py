"""Quiet steps: no warning is printed at every training step under the locked versions.

With ``PYTHONWARNINGS=always`` every warning prints each time it is raised, so one raised per step prints
once more for each step. The tiny preset with gradient checkpointing (the GPU recipes' setting) runs for
one step and for three; a warning message printed more often in the longer run is a per-step warning.
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_rl.tiny_model import ensure_tiny_model

REPO = Path(__file__).resolve().parents[2]
WARNING_LINE = re.compile(r"^\S+:\d+: (\w+Warning: .*)$")
pytestmark = pytest.mark.slow


def warnings_printed(tmp_path: Path, steps: int) -> collections.Counter:
    env = {**os.environ, "PYTHONWARNINGS": "always", "WANDB_MODE": "offline", "OMP_NUM_THREADS": "2"}
    command = [
        sys.executable, "train_grpo.py", "--config", "configs/tiny_cpu.yaml",
        "--model_name_or_path", str(tmp_path / "tiny"), "--output_dir", str(tmp_path / f"run{steps}"),
        "--sft_steps", "0", "--num_prompts", "16", "--max_completion_length", "16", "--save_steps", "100",
        "--eval_scenarios", "0", "--disable_tqdm", "true", "--log_completions", "false",
        "--report_to", "none", "--gradient_checkpointing", "true", "--max_steps", str(steps),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return collections.Counter(
        match.group(1) for line in done.stderr.splitlines() if (match := WARNING_LINE.match(line.strip()))
    )


def test_no_warning_is_printed_at_every_step(tmp_path):
    ensure_tiny_model(tmp_path / "tiny")
    one, three = warnings_printed(tmp_path, 1), warnings_printed(tmp_path, 3)
    per_step = {message: count for message, count in three.items() if count > one.get(message, 0)}
    assert per_step == {}
