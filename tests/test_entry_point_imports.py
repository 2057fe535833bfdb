"""Training and evaluation load only what they use: importing an entry point loads no web server stack.

``import openenv.core`` loads gradio, MCP, FastAPI and uvicorn (~2.6 s); training and evaluation need
OpenEnv only when episodes run through the environment (``episode_mode: refine``) or on servers. Each
entry point is imported in a fresh interpreter, as a user's ``python train_grpo.py`` would start.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SERVER_STACK = ("gradio", "mcp", "fastapi", "uvicorn", "openenv")


def loaded_after_import(module: str) -> list[str]:
    code = (
        f"import json, sys; sys.argv = ['x']; import {module}; "
        f"print(json.dumps(sorted(name for name in {SERVER_STACK!r} if name in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "module",
    [
        "train_grpo",
        "eval",
        "benchmarks.learning",
        "benchmarks.learning.run",  # what python -m benchmarks.learning imports when it trains
        "fleet_rl.env.server_pool",
    ],
)
def test_importing_an_entry_point_loads_no_server_stack(module):
    assert loaded_after_import(module) == []


def test_the_environment_names_still_import_from_the_package():
    code = (
        "import sys; from fleet_rl.env import FleetAction, FleetEnvironment, MODES; "
        "import fleet_rl.env as env; "
        "assert FleetEnvironment.__name__ == 'FleetEnvironment' and 'refine' in MODES; "
        "assert 'FleetEnvironment' in dir(env) and 'openenv' in sys.modules; "
        "print(sorted(env.__all__))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "FleetEnvironment" in done.stdout
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        import fleet_rl.env

        fleet_rl.env.Nothing  # noqa: B018
