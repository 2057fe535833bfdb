"""benchmarks/learning/start_cache.py: a start model's evaluation is reused across processes and runs only
for the same model files, settings and scenarios."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.learning import run as learning_run
from benchmarks.learning.benchmark import parse
from benchmarks.learning.start_cache import (
    START_EVALUATIONS,
    cached_evaluation,
    model_files_sha256,
    start_evaluation_key,
)
from benchmarks.learning.statistics import METRICS


def _model(directory: Path, weights: bytes = b"weights") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "model.safetensors").write_bytes(weights)
    (directory / "config.json").write_text('{"hidden_size": 64}')
    return directory


def test_the_model_hash_follows_the_files_and_needs_weights(tmp_path):
    model = _model(tmp_path / "model")
    first = model_files_sha256(model)
    assert first == model_files_sha256(model) and len(first) == 64
    (model / "warm_start.json").write_text('{"wall_s": 3.0}')  # not a model file: same model
    assert model_files_sha256(model) == first
    (model / "model.safetensors").write_bytes(b"other weights")
    assert model_files_sha256(model) != first
    assert model_files_sha256(tmp_path / "missing") is None  # a hub name: nothing to hash
    (tmp_path / "config_only").mkdir()
    (tmp_path / "config_only" / "config.json").write_text("{}")
    assert model_files_sha256(tmp_path / "config_only") is None  # no weights in it


def test_an_evaluation_is_reused_only_under_the_same_key(tmp_path):
    calls = []

    def evaluate():
        calls.append(1)
        return {"wall_s": 5.0, "per_scenario": {"percent_of_optimum": [len(calls)]}}

    key = {"start_model_files_sha256": "a" * 64, "settings": {"eval_scenarios": 3}}
    first, reused = cached_evaluation(tmp_path, key, evaluate)
    assert reused is None and len(calls) == 1
    again, reused = cached_evaluation(tmp_path, json.loads(json.dumps(key)), evaluate)
    assert again == first and len(calls) == 1 and Path(reused).parent == tmp_path
    other, reused = cached_evaluation(tmp_path, key | {"settings": {"eval_scenarios": 4}}, evaluate)
    assert reused is None and len(calls) == 2 and other != first
    _, reused = cached_evaluation(tmp_path, None, evaluate)  # nothing to key on: always evaluated
    assert reused is None and len(calls) == 3
    assert not list(tmp_path.glob("*.partial"))


def test_the_key_holds_the_model_settings_scenarios_and_loading(tmp_path):
    from types import SimpleNamespace

    model = _model(tmp_path / "model")
    model_args = SimpleNamespace(load_in_4bit=True, dtype="float32")
    key = start_evaluation_key(str(model), {"eval_scenarios": 3}, "f" * 16, model_args)
    assert key["start_model_files_sha256"] == model_files_sha256(model)
    assert key["scenario_fingerprint"] == "f" * 16 and key["settings"] == {"eval_scenarios": 3}
    assert key["loading"]["load_in_4bit"] == "True" and key["versions"]["torch"]
    assert start_evaluation_key(str(tmp_path / "hub/name"), {}, "f" * 16, model_args) is None


def _evaluation(value: float) -> dict:
    metrics = {name: [0.5] * 3 for name in METRICS} | {"percent_of_optimum": [value] * 3}
    return {"summary": {"num_scenarios": 3}, "per_scenario": metrics, "samples": [], "wall_s": 7.0}


def _fake_train_seed(model: Path):
    """A stand-in for ``learning_run.train_seed``: an adapter on ``model``, no training."""

    def train_seed(seed, config, flags, output_dir):
        output_dir.mkdir(parents=True, exist_ok=True)
        (output_dir / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(model)}))
        argv = ["--config", config, *flags, "--seed", str(seed), "--output_dir", str(output_dir),
                "--eval_scenarios", "0", "--report_to", "none"]  # fmt: skip
        wall = {
            "warm_start": 0.0,
            "grpo": 10.0,
            "generation": 6.0,
            "reward": 1.0,
            "backward": 3.0,
            "setup": 1.0,
        }
        return argv, {"global_step": 3, "warm_start": None, "reward_curve": {"reward": [0.1]}, "wall_s": wall}

    return train_seed


def test_a_second_process_reuses_the_first_ones_start_evaluation(tmp_path, monkeypatch):
    """Seeds 0 and 1 as two runs (as two processes would be) in one work dir, no warm start: the base
    model's evaluation is made once; seed 1's result says it was reused, and from where."""
    model = _model(tmp_path / "base")
    evaluated = []

    def fake_evaluate(base, adapter, settings, parsed):
        evaluated.append((base, adapter))
        return _evaluation(10.0 if adapter is None else 20.0)

    monkeypatch.setattr(learning_run, "train_seed", _fake_train_seed(model))
    monkeypatch.setattr(learning_run, "evaluate", fake_evaluate)
    results = []
    for seed in (0, 1):
        args, train_flags = parse(
            ["--config", "configs/tiny_cpu.yaml", "--seeds", str(seed), "--eval_scenarios", "3",
             "--output", str(tmp_path / f"seed{seed}.json"), "--work_dir", str(tmp_path / "work"),
             "--sft_steps", "0", "--model_name_or_path", str(model), "--max_steps", "3"]
        )  # fmt: skip
        results.append(learning_run.run(args, train_flags, ["python", "-m", "benchmarks.learning"]))
    starts = [call for call in evaluated if call[1] is None]
    assert starts == [(str(model), None)]  # the start once, for seed 0
    stored = list((tmp_path / "work" / START_EVALUATIONS).glob("*.json"))
    assert len(stored) == 1
    assert results[0]["start_evaluation_reused_from"] == [None]
    assert results[1]["start_evaluation_reused_from"] == [str(stored[0])]
    seed_1 = json.loads((tmp_path / "work" / "seed-1" / "learning_seed.json").read_text())
    assert seed_1["start_evaluation_reused_from"] == str(stored[0])
    assert seed_1["start_evaluated_for_an_earlier_seed"] is False
    assert seed_1["wall_s"]["eval_start"] == 0.0 and results[0]["wall_s"]["eval_start"] == 7.0
    assert results[1]["start"]["mean_percent_of_optimum"] == pytest.approx(10.0)

    (model / "model.safetensors").write_bytes(b"retrained")  # other weights: evaluated afresh
    args, train_flags = parse(
        ["--config", "configs/tiny_cpu.yaml", "--seeds", "2", "--eval_scenarios", "3",
         "--output", str(tmp_path / "seed2.json"), "--work_dir", str(tmp_path / "work"),
         "--sft_steps", "0", "--model_name_or_path", str(model), "--max_steps", "3"]
    )  # fmt: skip
    result = learning_run.run(args, train_flags, ["python", "-m", "benchmarks.learning"])
    assert result["start_evaluation_reused_from"] == [None]
    assert len([call for call in evaluated if call[1] is None]) == 2


def test_start_only_evaluates_the_shared_start_once_for_the_seeds_that_follow(tmp_path, monkeypatch, capsys):
    """``--start_only`` stores the start's evaluation under the key a seed's run looks up, so two seeds
    started next to each other afterwards both reuse it; with a warm start (one per seed) it refuses."""
    from benchmarks.learning import benchmark as learning

    model = _model(tmp_path / "base")
    evaluated = []

    def fake_evaluate(base, adapter, settings, parsed):
        evaluated.append((base, adapter))
        return _evaluation(10.0 if adapter is None else 20.0)

    monkeypatch.setattr(learning_run, "evaluate", fake_evaluate)
    monkeypatch.setattr(learning_run, "train_seed", _fake_train_seed(model))
    preset = ["--config", "configs/tiny_cpu.yaml", "--eval_scenarios", "3", "--work_dir",
              str(tmp_path / "work"), "--model_name_or_path", str(model), "--max_steps", "3"]  # fmt: skip
    common = [*preset, "--sft_steps", "0"]
    learning.main(["--start_only", *common])
    printed = json.loads(capsys.readouterr().out)
    assert printed["reused_from"] is None and printed["summary"] == {"num_scenarios": 3}
    assert evaluated == [(str(model), None)]
    learning.main(["--start_only", *common])  # a second time: found, not evaluated again
    assert json.loads(capsys.readouterr().out)["reused_from"] and len(evaluated) == 1

    args, train_flags = parse(["--seeds", "1", "--output", str(tmp_path / "seed1.json"), *common])
    result = learning_run.run(args, train_flags, ["python", "-m", "benchmarks.learning"])
    assert result["start_evaluation_reused_from"] == [
        str(next((tmp_path / "work" / START_EVALUATIONS).glob("*.json")))
    ]
    assert [call for call in evaluated if call[1] is None] == [(str(model), None)]

    with pytest.raises(SystemExit) as refused:
        learning.main(["--start_only", *preset, "--sft_steps", "4"])
    assert refused.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("python -m benchmarks.learning: --start_only needs a start every seed shares")
