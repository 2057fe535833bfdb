"""Every command-line entry point answers ``--help`` with its usage (argparse formats each help string with
``%``: a bare ``%`` in one made ``python -m benchmarks.learning.sft_curve --help`` raise a TypeError)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TAKES_FLAGS = (  # run as python -m MODULE (a top-level script by its module name)
    "train_grpo",
    "eval",
    "benchmarks.kernel.calibration",
    "benchmarks.kernel.speed",
    "benchmarks.learning",
    "benchmarks.learning.by_tier",
    "benchmarks.learning.fault_causes",
    "benchmarks.learning.list_continuation",
    "benchmarks.learning.sft_curve",
    "benchmarks.learning.what_if",
    "benchmarks.reward.completions",
    "benchmarks.reward.signal",
    "benchmarks.reward.templates",
    "benchmarks.server.load",
    "benchmarks.training.kill_resume",
    "benchmarks.training.prompt_tokens",
    "benchmarks.training.step_time",
    "fleet_rl.server",
    "fleet_rl.smollm2",
    "fleet_rl.tiny_model",
    "scripts.probe_server",
    "scripts.screenshot_web",
)
NO_FLAGS = (  # entry points that read no options: each runs as it is
    "benchmarks.reward.exploits",
    "fleet_rl.catalog",
    "fleet_rl.prompts",  # positional task and seed only
)


def entry_points() -> set[str]:
    """The modules with a ``__main__`` guard or a ``__main__.py``, by the name ``python -m`` runs them as."""
    found = set()
    for path in [*REPO.glob("*.py"), *(p for top in ("benchmarks", "fleet_rl", "rewards", "scripts")
                                       for p in (REPO / top).rglob("*.py"))]:  # fmt: skip
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        if path.name == "__main__.py":
            found.add(module.removesuffix(".__main__"))
        elif re.search(r"^if __name__ == .__main__.:", path.read_text(), re.MULTILINE):
            found.add(module)
    return found


def test_every_entry_point_is_listed_as_taking_flags_or_not():
    assert entry_points() == set(TAKES_FLAGS) | set(NO_FLAGS)


@pytest.mark.parametrize("module", TAKES_FLAGS)
def test_help_prints_the_usage_and_exits_zero(module):
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout.lower()
