"""A training run outlives a dead environment server, and stops cleanly when every server is down.

The tiny CPU preset in ``episode_mode: refine`` with ``env_base_urls``, as a user runs it (``train_grpo.py``
in a subprocess), against real servers on 127.0.0.1 that the test kills once the run has written a
checkpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.env.live_servers import LiveServer, start_all

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """Where the first run builds the tiny Llama; the later runs find it built."""
    return tmp_path_factory.mktemp("model") / "tiny"


def _train(tiny_model: Path, tmp_path: Path, urls: list[str], *flags: str) -> subprocess.Popen:
    """``train_grpo.py`` in a child process; its stderr goes to ``tmp_path / "stderr.txt"``."""
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "2",
        "PYTHONPATH": str(REPO),
    }
    command = [
        sys.executable, "train_grpo.py", "--config", "configs/tiny_cpu.yaml",
        "--model_name_or_path", str(tiny_model), "--output_dir", str(tmp_path / "run"),
        "--sft_steps", "4", "--sft_num_examples", "32", "--num_prompts", "32",
        "--max_completion_length", "48",
        "--episode_mode", "refine", "--reward_funcs", "refinement_reward", "--reward_weights", "1.0",
        "--save_steps", "1", "--eval_scenarios", "0", "--report_to", "none", "--disable_tqdm", "true",
        "--log_completions", "false", "--env_connect_timeout_s", "2", "--env_call_timeout_s", "10",
        "--env_base_urls", *urls, *flags,
    ]  # fmt: skip
    with open(tmp_path / "stderr.txt", "w") as stderr:  # a file: a pipe nobody reads would fill and block
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=stderr)


def _finish(run: subprocess.Popen, tmp_path: Path, timeout_s: float) -> str:
    """Wait for the run to end; its stderr."""
    run.wait(timeout=timeout_s)
    return (tmp_path / "stderr.txt").read_text()


def _wait_for_checkpoint(run: subprocess.Popen, output: Path, step: int, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not (output / f"checkpoint-{step}" / "trainer_state.json").exists():
        if run.poll() is not None:
            raise AssertionError(f"the run ended (code {run.returncode}) before checkpoint-{step}")
        assert time.monotonic() < deadline, f"no checkpoint-{step} within {timeout_s:.0f} s"
        time.sleep(0.2)


def _log_history(checkpoint: Path) -> list[dict]:
    return json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]


@pytest.fixture
def runs():
    """The training processes a test starts; any still running at its end is killed."""
    started: list[subprocess.Popen] = []
    yield started
    for run in started:
        if run.poll() is None:
            run.kill()
            run.wait()


def test_a_run_outlives_one_of_two_servers_killed_mid_run(tiny_model, tmp_path, runs):
    servers = start_all([LiveServer(), LiveServer()])
    try:
        run = _train(tiny_model, tmp_path, [server.url for server in servers], "--max_steps", "3")
        runs.append(run)
        _wait_for_checkpoint(run, tmp_path / "run", 1)
        servers[0].kill()
        stderr = _finish(run, tmp_path, 600)
        assert run.returncode == 0, stderr[-4000:]
        logs = [entry for entry in _log_history(tmp_path / "run" / "checkpoint-3") if "loss" in entry]
        assert [entry["step"] for entry in logs] == [1, 2, 3]
        assert logs[0]["env/failovers"] == 0 and logs[0]["env/healthy_servers"] == 2
        assert logs[-1]["env/failovers"] >= 1 and logs[-1]["env/healthy_servers"] == 1  # its episodes moved
    finally:
        for server in servers:
            server.stop()


def test_every_server_down_stops_the_run_with_one_line_and_its_checkpoints_resume(tiny_model, tmp_path, runs):
    (server,) = start_all([LiveServer()])
    restarted = LiveServer(port=server.port)
    output = tmp_path / "run"
    try:
        run = _train(tiny_model, tmp_path, [server.url], "--max_steps", "6", "--env_all_down_timeout_s", "5")
        runs.append(run)
        _wait_for_checkpoint(run, output, 1)
        server.kill()
        killed_at = time.monotonic()
        stderr = _finish(run, tmp_path, 300)
        assert run.returncode != 0
        assert time.monotonic() - killed_at < 120  # the limit is 5 s; the rest is a step on 2 busy cores
        last_line = stderr.strip().splitlines()[-1]
        assert last_line.startswith("error: all 1 environment server(s) down for more than 5 s"), stderr[
            -3000:
        ]
        assert server.url in last_line and "last error:" in last_line

        saved = max(int(path.name.split("-")[1]) for path in output.glob("checkpoint-*"))
        assert saved < 6 and (output / f"checkpoint-{saved}" / "adapter_model.safetensors").exists()
        restarted.start().wait_healthy()  # a server is back: the run resumes from its last checkpoint
        resumed = _train(
            tiny_model,
            tmp_path,
            [server.url],
            "--max_steps",
            str(saved + 1),
            "--resume_from_checkpoint",
            "last",
        )
        runs.append(resumed)
        stderr = _finish(resumed, tmp_path, 600)
        assert resumed.returncode == 0, stderr[-4000:]
        logs = _log_history(output / f"checkpoint-{saved + 1}")
        assert [entry["step"] for entry in logs if "loss" in entry] == list(range(1, saved + 2))
    finally:
        server.stop()
        restarted.stop()
