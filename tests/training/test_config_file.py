"""A bad --config (missing, unreadable, not YAML, not a mapping) ends train_grpo.py, eval.py and
``python -m benchmarks.learning`` with one line naming the file and the problem, and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_rl.training.config_file import config_path, config_problem

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = {  # the command after python -> what its error lines start with
    "train_grpo.py": "train_grpo.py",
    "eval.py": "eval.py",
    "-m benchmarks.learning": "python -m benchmarks.learning",
}


def _bad_configs(directory: Path) -> dict[str, tuple[Path, str]]:
    """case -> (config path, the words the message must hold)"""
    (directory / "a_directory.yaml").mkdir()
    (directory / "latin1.yaml").write_bytes("max_steps: 4  # \xe9t\xe9\n".encode("latin-1"))
    (directory / "broken.yaml").write_text("max_steps: [4\nlearning_rate: 1e-5\n")
    (directory / "a_list.yaml").write_text("- max_steps\n- 4\n")
    (directory / "empty.yaml").write_text("# nothing but a comment\n")
    return {
        "missing": (directory / "missing.yaml", "no such file"),
        "unreadable: a directory": (directory / "a_directory.yaml", "is a directory"),
        "unreadable: not UTF-8": (directory / "latin1.yaml", "cannot be read as UTF-8"),
        "not YAML": (directory / "broken.yaml", "not valid YAML at line"),
        "not a mapping": (directory / "a_list.yaml", "holds a list, not a mapping"),
        "empty": (directory / "empty.yaml", "holds nothing, not a mapping"),
    }


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bad_config_gives_one_line_and_exit_code_2(script, tmp_path):
    program = SCRIPTS[script]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled"}
    for case, (path, words) in _bad_configs(tmp_path).items():
        done = subprocess.run(
            [sys.executable, *script.split(), "--config", str(path)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, (case, done.stderr[-2000:])
        assert len(lines) == 1 and done.stdout == "", (case, done.stderr[-2000:])
        assert f"--config {path}: " in lines[0] and words in lines[0], (case, lines[0])
        assert lines[0].startswith(f"{program}: error:"), (case, lines[0])


def test_the_config_path_is_found_in_either_flag_form():
    assert config_path(["--max_steps", "4"]) is None
    assert config_path(["--config", "a.yaml", "--max_steps", "4"]) == "a.yaml"
    assert config_path(["--config=b.yaml"]) == "b.yaml"
    assert config_path(["--config"]) is None  # argparse reports the missing value itself


def test_a_good_config_has_no_problem():
    assert config_problem(str(REPO / "configs" / "tiny_cpu.yaml")) is None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file without read permission")
def test_a_file_without_read_permission_is_named(tmp_path):
    path = tmp_path / "secret.yaml"
    path.write_text("max_steps: 4\n")
    path.chmod(0)
    assert config_problem(str(path)) == "cannot be read (permission denied)"
