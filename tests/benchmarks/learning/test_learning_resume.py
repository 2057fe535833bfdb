"""python -m benchmarks.learning --reuse: a seed whose training was interrupted resumes from its last
checkpoint (same settings and scenarios only), and its GRPO time counts the steps it kept."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.learning import run as learning_run
from benchmarks.learning.benchmark import parse
from benchmarks.learning.train import (
    TIMINGS_FILE,
    TimingsIntoCheckpoints,
    checkpoint_timings,
    trl_profiling_totals,
    without_resume,
)
from fleet_rl.training.complete_checkpoints import newest_complete_checkpoint
from tests.benchmarks.learning.test_learning_start_cache import _evaluation, _fake_train_seed, _model
from tests.training.test_complete_checkpoints import _complete


def _args(tmp_path: Path, model: Path, *flags: str, reuse: bool = True):
    return parse(
        ["--config", "configs/tiny_cpu.yaml", "--seeds", "0", "--eval_scenarios", "3",
         "--output", str(tmp_path / "out.json"), "--work_dir", str(tmp_path / "work"),
         "--sft_steps", "0", "--model_name_or_path", str(model), "--max_steps", "3",
         *(["--reuse"] if reuse else []), *flags]
    )  # fmt: skip


def _interrupted_after_one_step(seed, config, flags, output_dir):
    """A training run killed after its first checkpoint (as a session's end or a crash would), and during
    its second save (a half-written checkpoint-2, which a resume skips)."""
    _complete(output_dir / "checkpoint-1", 1)
    (output_dir / "checkpoint-2").mkdir()
    (output_dir / "checkpoint-2" / "optimizer.pt").write_bytes(b"PK\x03\x04 truncated")
    raise KeyboardInterrupt


def _run_interrupted(tmp_path: Path, model: Path, monkeypatch) -> None:
    monkeypatch.setattr(learning_run, "train_seed", _interrupted_after_one_step)
    args, train_flags = _args(tmp_path, model)
    with pytest.raises(KeyboardInterrupt):
        learning_run.run(args, train_flags, ["python", "-m", "benchmarks.learning"])


def _run_recording_checkpoints(tmp_path: Path, model: Path, monkeypatch, *flags: str, reuse: bool = True):
    """Run again; return (the checkpoints the seed's training found in place, the result)."""
    found = []
    finish = _fake_train_seed(model)

    def train_seed(seed, config, train_flags, output_dir):
        found.extend(sorted(path.name for path in output_dir.glob("checkpoint-*")))
        resumed, _ = newest_complete_checkpoint(output_dir)  # as learning_train.train_seed picks it
        argv, trained = finish(seed, config, train_flags, output_dir)
        return argv, trained | {"resumed_from": Path(resumed).name if resumed else None}

    monkeypatch.setattr(learning_run, "train_seed", train_seed)
    monkeypatch.setattr(learning_run, "evaluate", lambda *arguments: _evaluation(10.0))
    args, train_flags = _args(tmp_path, model, *flags, reuse=reuse)
    return found, learning_run.run(args, train_flags, ["python", "-m", "benchmarks.learning"])


def test_an_interrupted_seed_resumes_from_its_checkpoint(tmp_path, monkeypatch, capsys):
    model = _model(tmp_path / "base")
    _run_interrupted(tmp_path, model, monkeypatch)
    found, result = _run_recording_checkpoints(tmp_path, model, monkeypatch)
    assert found == ["checkpoint-1", "checkpoint-2"]  # both kept in place; the trainer resumes from 1
    assert "seed 0: resuming the interrupted run" in capsys.readouterr().err
    assert result["resumed_from"] == ["checkpoint-1"]


@pytest.mark.parametrize(
    ("flags", "reuse"),
    [(("--learning_rate", "1e-3"), True), ((), False)],
    ids=["other training flags", "without --reuse"],
)
def test_an_interrupted_seed_starts_afresh_under_other_settings_or_without_reuse(
    tmp_path, monkeypatch, capsys, flags, reuse
):
    model = _model(tmp_path / "base")
    _run_interrupted(tmp_path, model, monkeypatch)
    found, result = _run_recording_checkpoints(tmp_path, model, monkeypatch, *flags, reuse=reuse)
    assert found == [] and result["resumed_from"] == [None]
    assert "seed 0: training in" in capsys.readouterr().err


def test_checkpoints_carry_the_grpo_time_and_profiled_totals_so_far(tmp_path):
    checkpoint = tmp_path / "checkpoint-2"
    checkpoint.mkdir()
    with trl_profiling_totals({"GRPOTrainer.transformers.generate": 4.0}) as profiled:
        callback = TimingsIntoCheckpoints(profiled, earlier_grpo_s=10.0)
        callback.on_train_begin(None, None, None)
        profiled["GRPOTrainer.transformers.generate"] += 1.5  # what this process's steps add
        args, state = SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=2)
        state.is_world_process_zero = True
        callback.on_save(args, state, None)
    saved = json.loads((checkpoint / TIMINGS_FILE).read_text())
    assert saved["profiled_s"] == {"GRPOTrainer.transformers.generate": 5.5}
    assert 10.0 <= saved["grpo_s"] < 70.0
    assert checkpoint_timings(str(checkpoint)) == saved
    assert checkpoint_timings(None) == {"grpo_s": 0.0, "profiled_s": {}}  # a fresh run
    (checkpoint / TIMINGS_FILE).unlink()
    assert checkpoint_timings(str(checkpoint)) == {"grpo_s": 0.0, "profiled_s": {}}  # saved before timings


def test_a_resumed_seed_is_read_back_after_its_resume_checkpoint_was_rotated_away(tmp_path, monkeypatch):
    """A seed resumed from checkpoint-10 and trained to 30 with ``save_total_limit`` 2 no longer has
    checkpoint-10: its settings are read back without the resume flag (once, the run failed there)."""
    model = _model(tmp_path / "base")
    finish = _fake_train_seed(model)

    def resumed_from_a_rotated_checkpoint(seed, config, train_flags, output_dir):
        argv, trained = finish(seed, config, train_flags, output_dir)
        return [*argv, "--resume_from_checkpoint", str(output_dir / "checkpoint-10")], trained

    monkeypatch.setattr(learning_run, "train_seed", resumed_from_a_rotated_checkpoint)
    monkeypatch.setattr(learning_run, "evaluate", lambda *arguments: _evaluation(10.0))
    args, train_flags = _args(tmp_path, model)
    result = learning_run.run(args, train_flags, ["python", "-m", "benchmarks.learning"])
    assert result["after"]["per_seed"] and not (tmp_path / "work" / "seed-0" / "checkpoint-10").exists()
    assert without_resume(["--a", "1", "--resume_from_checkpoint", "x", "--b"]) == ["--a", "1", "--b"]
    assert without_resume(["--a", "--resume_from_checkpoint"]) == ["--a", "--resume_from_checkpoint"]
