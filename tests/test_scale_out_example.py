"""examples/scale_out.py: two environment servers run the refinement episodes of a tiny GRPO run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def test_scale_out_example_trains_against_two_servers(tmp_path):
    env = {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"}
    command = [
        sys.executable, "examples/scale_out.py", "--servers", "2", "--",
        "--model_name_or_path", str(tmp_path / "tiny"), "--output_dir", str(tmp_path / "run"),
        "--sft_steps", "4", "--sft_num_examples", "32", "--num_prompts", "16",
        "--max_completion_length", "48", "--max_steps", "2", "--save_steps", "2",
        "--disable_tqdm", "true", "--log_completions", "false",
    ]  # fmt: skip
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    urls = result.stdout.split("environment servers: ", 1)[1].splitlines()[0].split()
    assert len(urls) == 2 and len(set(urls)) == 2
    state = json.loads((tmp_path / "run" / "checkpoint-2" / "trainer_state.json").read_text())
    rewards = [entry["rewards/refinement_reward/mean"] for entry in state["log_history"] if "reward" in entry]
    assert len(rewards) == 2 and all(-1.1 <= reward <= 1.0 for reward in rewards)
