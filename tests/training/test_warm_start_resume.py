"""fleet_rl/training/warm_start.py with ``sft_save_steps``: a warm start stopped after a checkpoint resumes
from it and ends on an uninterrupted run's weights; checkpoints of other settings are not resumed."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file
from trl import SFTTrainer

from fleet_rl.tiny_model import ensure_tiny_model
from fleet_rl.training.arguments import FleetScriptArguments
from fleet_rl.training.warm_start import (
    WARM_START_MARKER,
    WARM_START_RUN_DIR,
    WARM_START_RUN_SETTINGS,
    checkpoint_dir,
    resume_point,
    warm_start,
)

STEPS = 4


class Killed(Exception):
    """Stands for the process dying right after a checkpoint was written."""


def settings(**changes) -> FleetScriptArguments:
    return FleetScriptArguments(
        tasks=["easy"],
        sft_steps=STEPS,
        sft_batch_size=2,
        sft_num_examples=2 * STEPS,
        sft_save_steps=2,
        **changes,
    )


def weights(run_dir) -> dict:
    return load_file(str(run_dir / "warm-start" / "model.safetensors"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(ensure_tiny_model(tmp_path_factory.mktemp("tiny") / "model"))


@pytest.fixture(scope="module")
def tiny_tied(tiny, tmp_path_factory):
    """The tiny model with its output layer tied to its embeddings, as SmolLM2's is: a checkpoint then holds
    one of the two, and the resume must still restore both."""
    tied = tmp_path_factory.mktemp("tied") / "model"
    shutil.copytree(tiny, tied)
    config = json.loads((tied / "config.json").read_text())
    (tied / "config.json").write_text(json.dumps(config | {"tie_word_embeddings": True}))
    return str(tied)


def uninterrupted_run(model: str, out) -> dict:
    warm_start(model, settings(), SimpleNamespace(output_dir=str(out), seed=0, use_cpu=True))
    assert json.loads((out / "warm-start" / WARM_START_MARKER).read_text())["resumed_from"] is None
    return weights(out)


def stopped_after_first_checkpoint(
    model: str, out, monkeypatch, script_args=None, checkpoint_steps=()
) -> SimpleNamespace:
    """Run a warm start into ``out`` that dies right after writing its first checkpoint; its training args."""
    training_args = SimpleNamespace(output_dir=str(out), seed=0, use_cpu=True)
    save = SFTTrainer._save_checkpoint

    def save_then_die(self, *args, **kwargs):
        save(self, *args, **kwargs)
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(SFTTrainer, "_save_checkpoint", save_then_die)
        with pytest.raises(Killed):
            warm_start(model, script_args or settings(), training_args, checkpoint_steps)
    return training_args


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied_embeddings"])
def test_a_stopped_warm_start_resumes_from_its_checkpoint_and_ends_where_an_uninterrupted_one_ends(
    tied, tiny, tiny_tied, tmp_path, monkeypatch
):
    model = tiny_tied if tied else tiny
    whole = uninterrupted_run(model, tmp_path / "whole")
    out = tmp_path / "stopped"
    training_args = stopped_after_first_checkpoint(model, out, monkeypatch)
    run_dir = out / WARM_START_RUN_DIR
    assert sorted(path.name for path in run_dir.glob("checkpoint-*")) == ["checkpoint-2"]
    assert not (out / "warm-start" / WARM_START_MARKER).exists()

    warm_start(model, settings(), training_args)
    marker = json.loads((out / "warm-start" / WARM_START_MARKER).read_text())
    assert marker["resumed_from"] == str(run_dir / "checkpoint-2")
    resumed = weights(out)
    assert resumed.keys() == whole.keys()
    for name, tensor in whole.items():
        torch.testing.assert_close(resumed[name], tensor, rtol=0, atol=1e-6, msg=name)
    assert not list(run_dir.glob("checkpoint-*"))  # finished: the saved model replaces its checkpoints


def test_checkpoints_of_a_warm_start_with_other_settings_are_removed_not_resumed(tiny, tmp_path, monkeypatch):
    other = settings(sft_learning_rate=1e-3)
    training_args = stopped_after_first_checkpoint(tiny, tmp_path, monkeypatch, other)
    run_dir = tmp_path / WARM_START_RUN_DIR
    assert json.loads((run_dir / WARM_START_RUN_SETTINGS).read_text())["learning_rate"] == 1e-3

    warm_start(tiny, settings(), training_args)  # the default learning rate: a new warm start
    marker = json.loads((tmp_path / "warm-start" / WARM_START_MARKER).read_text())
    assert marker["resumed_from"] is None
    assert (
        json.loads((run_dir / WARM_START_RUN_SETTINGS).read_text())["learning_rate"]
        == marker["learning_rate"]
    )


def test_a_damaged_newest_checkpoint_is_skipped(tiny, tmp_path, monkeypatch):
    training_args = stopped_after_first_checkpoint(tiny, tmp_path, monkeypatch)
    run_dir = tmp_path / WARM_START_RUN_DIR
    (run_dir / "checkpoint-2" / "optimizer.pt").write_bytes(b"cut off")  # a kill while saving

    warm_start(tiny, settings(), training_args)
    assert json.loads((tmp_path / "warm-start" / WARM_START_MARKER).read_text())["resumed_from"] is None


def test_a_resumed_run_keeps_the_step_saves_it_made_before_its_checkpoint(tiny, tmp_path, monkeypatch):
    """The SFT curve's step saves of a stopped run survive the curve's clearing and the resume: the run
    that resumes from checkpoint-2 saved step 1 before it and cannot save it again."""
    from benchmarks.learning.sft_curve import clear_for_training

    training_args = stopped_after_first_checkpoint(tiny, tmp_path, monkeypatch, checkpoint_steps=[1, STEPS])
    assert resume_point(tiny, settings(), training_args) == 2
    assert resume_point(tiny, settings(sft_learning_rate=1e-3), training_args) == 0  # other settings: afresh

    clear_for_training(tiny, settings(), training_args, [1, STEPS])
    assert checkpoint_dir(training_args, 1).is_dir()
    warm_start(tiny, settings(), training_args, checkpoint_steps=[1, STEPS])
    assert checkpoint_dir(training_args, 1).is_dir() and checkpoint_dir(training_args, STEPS).is_dir()
    assert json.loads((checkpoint_dir(training_args, 1) / WARM_START_MARKER).read_text())["steps"] == 1


def test_a_resume_past_a_lost_step_save_stops_before_training(tiny, tmp_path, monkeypatch):
    training_args = stopped_after_first_checkpoint(tiny, tmp_path, monkeypatch, checkpoint_steps=[1, STEPS])
    shutil.rmtree(checkpoint_dir(training_args, 1))

    with pytest.raises(FileNotFoundError, match=r"past step\(s\) \[1\].*Ask only for steps after 2"):
        warm_start(tiny, settings(), training_args, checkpoint_steps=[1, STEPS])
    assert (tmp_path / WARM_START_RUN_DIR / "checkpoint-2").is_dir()  # nothing lost: the run can go on
    warm_start(tiny, settings(), training_args, checkpoint_steps=[STEPS])  # the later steps only
    assert checkpoint_dir(training_args, STEPS).is_dir()
