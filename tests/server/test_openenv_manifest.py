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


def test_the_image_serves_on_the_manifests_port_as_a_non_root_user():
    """The Dockerfile (where Spaces and `openenv push` look) agrees with openenv.yaml's port everywhere."""
    port = yaml.safe_load((ROOT / "openenv.yaml").read_text())["port"]
    dockerfile = (ROOT / "Dockerfile").read_text()
    instructions = [line.split(maxsplit=1) for line in dockerfile.splitlines() if line[:1].isupper()]
    keywords = [keyword for keyword, *_ in instructions]
    assert port == 7860  # what a Hugging Face Docker Space expects without app_port
    assert f"EXPOSE {port}" in dockerfile and f'"--port", "{port}"' in dockerfile
    assert f"127.0.0.1:{port}/health" in dockerfile  # the HEALTHCHECK
    assert keywords[0] == "FROM" and "python:3.11-slim" in instructions[0][1]
    last_run = max(i for i, keyword in enumerate(keywords) if keyword == "RUN")
    assert "USER" in keywords and keywords.index("USER") > last_run  # nothing runs as root after USER
    assert "constraints/env.txt" in dockerfile  # the lean lock, pinned
