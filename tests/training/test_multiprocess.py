"""Two-process data-parallel GRPO on CPU (gloo): the tiny preset through ``accelerate launch``, 2 steps.

What it proves: the entry point runs under torch.distributed (the tiny model built once for both ranks,
SFT warm start with DDP, GRPO with completions gathered across ranks, checkpointing with one RNG state per
rank).
About 30 s on 2 cores. Run it alone with ``python -m pytest -m slow tests/training/test_multiprocess.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 2
PER_DEVICE_BATCH = 4
NUM_GENERATIONS = 4
NUM_PROMPTS = 16
STEPS = 2
TIMEOUT_S = 180


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_process_cpu_grpo(tmp_path):
    output_dir = tmp_path / "run"
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(REPO_ROOT / "configs/accelerate/cpu_2proc.yaml"),
        "--main_process_port", "0",  # a free port: parallel test runs do not collide
        str(REPO_ROOT / "train_grpo.py"),
        "--config", str(REPO_ROOT / "configs/tiny_cpu.yaml"),
        "--model_name_or_path", str(tmp_path / "tiny"),  # local_model: tiny builds it here
        "--max_steps", str(STEPS),
        "--sft_steps", "3",
        "--num_prompts", str(NUM_PROMPTS),
        "--eval_scenarios", "0",
        "--report_to", "none",
        "--output_dir", str(output_dir),
        "--per_device_train_batch_size", str(PER_DEVICE_BATCH),
        "--num_generations", str(NUM_GENERATIONS),
        "--max_completion_length", "64",
        "--save_steps", "2",
        "--disable_tqdm", "true",
    ]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", WANDB_MODE="offline", HF_HUB_OFFLINE="1")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    start = time.perf_counter()
    # a session of its own, so a hung run can be stopped with its torchrun workers (they are not our children)
    launcher = subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = launcher.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(launcher.pid, signal.SIGTERM)
        stdout, stderr = launcher.communicate()
        pytest.fail(f"no exit after {TIMEOUT_S} s (a run takes ~30 s): a rank hung\n{stderr[-6000:]}")
    elapsed_s = time.perf_counter() - start
    print(f"2-process CPU GRPO run: {elapsed_s:.1f} s")
    assert launcher.returncode == 0, f"exit code {launcher.returncode}\n{stdout[-3000:]}\n{stderr[-6000:]}"

    checkpoint = output_dir / f"checkpoint-{STEPS}"
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    assert state["global_step"] == STEPS
    # both ranks took part: one RNG state per process in the checkpoint ...
    assert sorted(path.name for path in checkpoint.glob("rng_state_*.pth")) == [
        f"rng_state_{rank}.pth" for rank in range(PROCESSES)
    ]
    # ... and each step consumed PROCESSES x PER_DEVICE_BATCH completions = 2 prompts of 4 generations, so 2
    # steps read 4 of the 16 prompts: a quarter epoch (one process alone would read an eighth)
    prompts_per_step = PROCESSES * PER_DEVICE_BATCH // NUM_GENERATIONS
    assert state["epoch"] == pytest.approx(STEPS * prompts_per_step / NUM_PROMPTS)
    assert (output_dir / "adapter_model.safetensors").exists()  # the final adapter, saved after training
    assert (output_dir / "warm-start" / "warm_start.json").exists()
