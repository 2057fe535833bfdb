"""A built wheel carries the data the package reads at run time (the calibration figures' YAML, the /web
page's README)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from fleet_rl.calibration import FIGURES_FILE
from fleet_rl.server.app import WEB_README_PATH

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_carries_the_calibration_figures_and_the_web_readme(tmp_path):
    """Build from a copy of the sources (a build writes build/ and *.egg-info beside them), offline."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    for package in ("fleet_rl", "rewards"):
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["--wheel-dir", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("libratio_fleet-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        packed = archive.read(f"fleet_rl/{FIGURES_FILE}")
        readme = archive.read("fleet_rl/server/web_readme.md")
    assert packed == (REPO / "fleet_rl" / FIGURES_FILE).read_bytes()
    assert readme == WEB_README_PATH.read_bytes()
