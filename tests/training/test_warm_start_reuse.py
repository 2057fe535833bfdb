"""fleet_rl/training/warm_start.py: a finished warm start is reused only with the settings it was trained
with, and its marker records them."""

from __future__ import annotations

import json
from types import SimpleNamespace

from fleet_rl.tiny_model import ensure_tiny_model
from fleet_rl.training.arguments import FleetScriptArguments
from fleet_rl.training.warm_start import WARM_START_MARKER, checkpoint_dir, same_warm_start, warm_start

ASKED = {"sft_steps": 90, "sft_target": "heuristic", "sft_learning_rate": 1e-4, "sft_batch_size": 4,
         "sft_num_examples": 360}  # fmt: skip
MARKER = {"steps": 90, "target": "heuristic", "split_note": False, "learning_rate": 1e-4, "batch_size": 4,
          "examples": 360, "seed": 0}  # fmt: skip


def test_a_warm_start_is_reused_only_with_every_setting_it_was_trained_with():
    asked = FleetScriptArguments(**ASKED)
    assert same_warm_start(MARKER, asked, seed=0)
    for key, other in [("learning_rate", 3e-4), ("batch_size", 8), ("examples", 720), ("seed", 1),
                       ("steps", 180), ("split_note", True), ("target", "optimal")]:  # fmt: skip
        assert not same_warm_start(MARKER | {key: other}, asked, seed=0), key
    assert same_warm_start(MARKER | {"seed": 1}, asked)  # no seed asked: any seed


def test_a_marker_from_before_the_new_keys_is_not_compared_on_what_it_never_wrote():
    old = {"steps": 90, "target": "heuristic", "split_note": False, "examples": 360}
    assert same_warm_start(old, FleetScriptArguments(**ASKED), seed=3)
    assert not same_warm_start(old, FleetScriptArguments(**ASKED | {"sft_num_examples": 720}), seed=3)


def test_a_finished_warm_start_records_its_settings_and_is_reused_only_with_them(tmp_path):
    model = str(ensure_tiny_model(tmp_path / "tiny"))
    script_args = FleetScriptArguments(tasks=["easy"], sft_steps=2, sft_batch_size=2, sft_num_examples=4)
    training_args = SimpleNamespace(output_dir=str(tmp_path / "out"), seed=0, use_cpu=True)
    target = warm_start(model, script_args, training_args, checkpoint_steps=[1])
    marker_path = tmp_path / "out" / "warm-start" / WARM_START_MARKER
    marker = json.loads(marker_path.read_text())
    assert (marker["steps"], marker["examples"], marker["seed"], marker["batch_size"]) == (2, 4, 0, 2)
    assert json.loads((checkpoint_dir(training_args, 1) / WARM_START_MARKER).read_text())["steps"] == 1
    assert warm_start(model, script_args, training_args, checkpoint_steps=[1]) == target  # reused as is
    assert json.loads(marker_path.read_text()) == marker
    training_args.seed = 1  # another seed: trained again
    warm_start(model, script_args, training_args, checkpoint_steps=[1])
    assert json.loads(marker_path.read_text())["seed"] == 1


def test_a_warm_start_made_from_another_model_or_for_other_prompts_is_not_reused():
    asked = FleetScriptArguments(**ASKED, prompt_style="sized_batching", tasks=["easy", "medium"])
    marker = MARKER | {"base_model": "models/a", "prompt_style": "sized_batching",
                       "tasks": ["easy", "medium"], "task_weights": None, "dataset_seed": 0,
                       "max_length": 4096}  # fmt: skip
    assert same_warm_start(marker, asked, seed=0, base_model="models/a")
    assert not same_warm_start(marker, asked, seed=0, base_model="models/b")
    for key, other in [("prompt_style", "sized_batching_brief"), ("tasks", ["easy"]), ("dataset_seed", 100),
                       ("task_weights", [1.0, 2.0]), ("max_length", 2048)]:  # fmt: skip
        assert not same_warm_start(marker | {key: other}, asked, seed=0, base_model="models/a"), key
    # a marker from before these keys is not compared on them
    assert same_warm_start(MARKER, asked, seed=0, base_model="models/b")
