"""openenv.yaml passes openenv's static validation (no Docker), and names an app that builds."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import yaml
from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[2]


def test_openenv_validate_static_passes():
    cli = Path(sys.executable).with_name("openenv")
    result = subprocess.run(
        [str(cli), "validate", ".", "--level", "static", "--skip-build"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Verdict: PASS" in result.stdout


def test_the_manifest_app_is_the_server_factory():
    manifest = yaml.safe_load((ROOT / "openenv.yaml").read_text())
    module, name = manifest["app"].split(":")
    factory = getattr(importlib.import_module(module), name)
    with TestClient(factory(web=False)) as client:
        assert client.get("/health").json() == {"status": "healthy"}
        assert set(client.get("/tasks").json()["tasks"]) == {"easy", "medium", "hard", "multiagent"}
