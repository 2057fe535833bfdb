"""The lean install: the environment (kernel, rewards, prompts, baselines, env, server, client) in a fresh
venv that holds only the base dependencies, without torch, transformers, trl, peft, bitsandbytes, datasets,
wandb or matplotlib; one episode served from it over WebSocket.

Slow (a venv and a pip install of the locked lean set, about a minute here). Run alone with
``python -m pytest -q tests/test_lean_install.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRAINING_ONLY = ("torch", "transformers", "trl", "peft", "bitsandbytes", "datasets", "wandb", "matplotlib")
# Modules that are training code by design: they need the `train` extra.
TRAINING_MODULES = ("fleet_rl.training", "fleet_rl.tiny_model")

CHECK = textwrap.dedent(
    """
    import importlib, importlib.util, json, pkgutil, sys
    import fleet_rl, rewards
    TRAINING_ONLY, TRAINING_MODULES = {training_only!r}, {training_modules!r}
    present = [name for name in TRAINING_ONLY if importlib.util.find_spec(name) is not None]
    assert not present, f"training packages in the lean venv: {{present}}"
    imported = []
    for package in (fleet_rl, rewards):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if module.name.startswith(TRAINING_MODULES):
                continue
            importlib.import_module(module.name)
            imported.append(module.name)
    from fleet_rl.env.client import FleetAction, FleetEnv
    from fleet_rl.kernel import solve
    from fleet_rl.prompts import format_answer
    from fleet_rl.scenario import Scenario
    from fleet_rl.server.subprocess_server import server_process
    with server_process() as base_url, FleetEnv(base_url=base_url).sync() as env:
        first = env.reset(task="medium", seed=3)
        scenario = Scenario.from_json(first.observation.scenario)
        result = env.step(FleetAction(plan=format_answer(solve(scenario).plan)))
    print(json.dumps({{"imported": imported, "reward": result.reward, "done": result.done}}))
    """
)


@pytest.mark.slow
def test_the_environment_runs_from_the_lean_install_alone(tmp_path):
    env_dir = tmp_path / "lean"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    source = tmp_path / "source"  # a copy: building in place would leave build/ and *.egg-info in the repo
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for name in ("fleet_rl", "rewards"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    lock = REPO / "constraints" / "env.txt"
    install = [str(python), "-m", "pip", "install", "-q", "-c", str(lock), str(source)]
    subprocess.run(install, check=True, env=environment, cwd=tmp_path, timeout=900)
    check = CHECK.format(training_only=TRAINING_ONLY, training_modules=TRAINING_MODULES)
    out = subprocess.run(
        [str(python), "-c", check], env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    expected = {"fleet_rl.server.app", "fleet_rl.env.environment", "fleet_rl.env.client", "fleet_rl.client"}
    assert expected | {"rewards.fleet_reward"} <= set(report["imported"])
    assert report["reward"] == pytest.approx(1.0) and report["done"]
