"""After the main job has run in the checkout, ``openenv validate . --level static --skip-build`` passes:
what a run writes (checkpoints, the built model, wandb's files with their ``latest-run`` symlink, reports)
goes under ``outputs/``, which openenv's source digest skips; a symlink or a file changing anywhere else
fails it ("package source could not be verified").

The checkout is a copy of the git tree (tracked and untracked-but-not-ignored files) in a scratch directory,
so the test neither needs nor touches the repository's own outputs/. The run is the main job,
``python train_grpo.py --config configs/tiny_cpu.yaml``, cut to one GRPO step, with wandb on (offline) and no
``WANDB_DIR``: the default locations are what is tested.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def copy_of_the_checkout(target: Path) -> Path:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        timeout=60,
    )
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout, nothing to copy: {listed.stderr.decode()[-300:]}")
    for name in listed.stdout.decode().split("\0"):
        source = REPO / name
        if name and source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def validate(checkout: Path) -> subprocess.CompletedProcess:
    openenv = Path(sys.executable).with_name("openenv")
    command = [str(openenv) if openenv.exists() else "openenv", "validate", ".", "--level", "static"]
    return subprocess.run(
        [*command, "--skip-build"], cwd=checkout, capture_output=True, text=True, timeout=300
    )


@pytest.mark.timeout(1800)  # ~2 min on 2 idle cores; much longer on a contended machine
def test_openenv_validate_passes_after_the_main_job(tmp_path):
    checkout = copy_of_the_checkout(tmp_path / "checkout")
    env = {key: value for key, value in os.environ.items() if key != "WANDB_DIR"}
    env |= {
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(checkout),
    }
    done = subprocess.run(
        [sys.executable, "train_grpo.py", "--config", "configs/tiny_cpu.yaml",
         "--sft_steps", "2", "--sft_num_examples", "8", "--num_prompts", "8", "--max_steps", "1",
         "--max_completion_length", "16", "--eval_scenarios", "1",
         "--disable_tqdm", "true", "--log_completions", "false"],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]

    outputs = checkout / "outputs"
    assert (outputs / "models" / "tiny-fleet-llama" / "config.json").is_file()
    assert (outputs / "tiny_cpu" / "eval_report.json").is_file()
    assert (outputs / "wandb" / "latest-run").is_symlink()  # the link that broke validate, now under outputs/
    written_elsewhere = [
        path.relative_to(checkout)
        for path in checkout.rglob("*")
        if "outputs" not in path.relative_to(checkout).parts
        and "__pycache__" not in path.parts
        and (path.is_symlink() or not (REPO / path.relative_to(checkout)).exists())
    ]
    assert written_elsewhere == [], "a run wrote outside outputs/"

    validated = validate(checkout)
    assert validated.returncode == 0 and "Verdict: PASS" in validated.stdout, (
        validated.stdout + validated.stderr
    )
