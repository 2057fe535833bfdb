"""``finished_checkpoint``: which resumes find a run already done (so no extra step is trained)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from fleet_rl.training.finished_run import finished_checkpoint


def checkpoint(tmp_path, step: int, max_steps: int = 30):
    path = tmp_path / f"checkpoint-{step}"
    path.mkdir()
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step, "max_steps": max_steps}))
    return path


def args(tmp_path, resume, max_steps=30):
    return SimpleNamespace(resume_from_checkpoint=resume, output_dir=str(tmp_path), max_steps=max_steps)


def test_a_checkpoint_at_max_steps_is_finished(tmp_path):
    last = checkpoint(tmp_path, 30)
    assert finished_checkpoint(args(tmp_path, str(last))) == str(last)
    assert finished_checkpoint(args(tmp_path, True)) == str(last)  # "last": the newest in output_dir


def test_a_checkpoint_short_of_max_steps_or_a_raised_max_steps_trains_on(tmp_path):
    checkpoint(tmp_path, 30)
    assert finished_checkpoint(args(tmp_path, str(checkpoint(tmp_path, 25)))) is None
    assert finished_checkpoint(args(tmp_path, True, max_steps=40)) is None  # continue a finished run further


def test_an_epoch_based_run_compares_against_the_total_it_recorded(tmp_path):
    last = checkpoint(tmp_path, 64, max_steps=64)
    assert finished_checkpoint(args(tmp_path, True, max_steps=-1)) == str(last)


def test_no_resume_or_no_checkpoint_is_not_finished(tmp_path):
    assert finished_checkpoint(args(tmp_path, None)) is None
    assert finished_checkpoint(args(tmp_path, True)) is None  # nothing in output_dir: the Trainer says so
    assert finished_checkpoint(args(tmp_path, str(tmp_path / "checkpoint-9"))) is None
