"""The Space image builds, serves the environment and answers the host's probe (scripts/check_space_image.sh).

Needs root, buildah and debootstrap (the script apt-gets them), network to Debian's mirror and PyPI, and
about 3 minutes, so it is marked ``container`` and runs only when asked:

    FLEET_CONTAINER_TEST=1 python -m pytest -q -m container tests/test_space_image.py
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.container,
    pytest.mark.skipif(
        os.environ.get("FLEET_CONTAINER_TEST") != "1", reason="set FLEET_CONTAINER_TEST=1 to build the image"
    ),
]


def test_the_image_builds_serves_and_passes_the_probe():
    run = subprocess.run(
        ["bash", str(REPO / "scripts" / "check_space_image.sh")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert re.search(r"=== check_space_image passed in \d+s: \S+ is [\d.]+ [MG]B", run.stdout)
    for check in ("health", "tasks", "websocket_episode", "grader", "bad_input"):
        assert f'"check": "{check}", "ok": true' in run.stdout
    assert '"non_json": 422, "unknown_job": 200, "oversized": 413' in run.stdout
