"""SFT warm start: teach a model the answer format before GRPO (TRL ``SFTTrainer``).

A randomly initialised tiny model never writes a parseable plan, so every GRPO reward would be ~0 and the
group advantages would be all zero: nothing to learn from. A short supervised pass on target answers
(``fleet_rl.training.dataset.sft_dataset``, loss on the answers only) gives it the format; GRPO then has to
improve the plans themselves. ``sft_target`` picks the answers: ``random`` (random schema-valid plans),
``random_split`` (every job placed at random) or ``random_feasible`` (a random placement under which every
job runs) teach the format while leaving GRPO something to find; ``even_split`` (the even-split bf16
baseline) hands it the template of the baseline a trained policy must beat; ``heuristic`` (the heuristic
baseline's rules, the SmolLM2 preset) and ``optimal`` (the exact optimum) distil a planner, and the claim
for GRPO is then its gain over that start. The instruction-tuned 8B recipes skip the warm start
(``sft_steps: 0``).

The warm start fine-tunes the full-precision base model and saves it, with its tokenizer, to
``<output_dir>/warm-start``; GRPO then loads that directory (4-bit + LoRA as configured). A finished warm
start leaves ``warm_start.json`` (its settings, loss and wall time), so a resumed run with the same settings
(steps, target, split note, learning rate, batch size, examples, seed) reuses it instead of training it
again.

The marker records what the warm start was trained from and on, too: the base model, the prompt style, the
tasks and their weights, the dataset seed and the length cap, so a run that changes any of them trains a
new warm start instead of reusing one made for other prompts or another model (a marker from before a key
existed is not compared on it).

``sft_save_steps`` N makes the warm start itself resumable: transformers' Trainer saves a checkpoint (model,
optimizer, scheduler, RNG, step) every N steps to ``<output_dir>/warm-start-run``, keeping the newest, with
the settings beside it (``warm_start_run.json``). Started again with the same settings, a warm start that
was stopped resumes from the newest complete checkpoint (``newest_complete_checkpoint``: one a kill left
half-written is skipped) and ends where an uninterrupted run ends; checkpoints of a run with other settings
are removed first (kept, the Trainer's rotation would keep them as the newest). A finished warm start
removes its checkpoints: the model it saved is what GRPO loads. The SmolLM2 preset saves every 20 of its
180 steps (~80-95 minutes on 2 cores), so a stop costs minutes, not the warm start.

``checkpoint_steps`` (the SFT curve, ``benchmarks/learning/sft_curve.py``) also saves the model at those steps
to ``<output_dir>/warm-start-checkpoints/step-<N>``, each a directory GRPO can start from, with its tokenizer
and a ``warm_start.json`` naming its steps and target (so the learning benchmark's ``fair_start`` reads
what it imitated). They are points along one run: its cosine schedule spans all ``sft_steps``. A run that
resumes from checkpoint-R needs the saves of the steps up to R that the stopped run made (``resume_point``
says R before anything is trained, so a caller that clears old saves keeps those): when one of them is
gone, the warm start stops with an error before training, since only a run from step 0 could save it again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import SFTConfig, SFTTrainer

from fleet_rl.training.arguments import FleetScriptArguments
from fleet_rl.training.complete_checkpoints import CHECKPOINT_NAME, newest_complete_checkpoint
from fleet_rl.training.dataset import sft_dataset

__all__ = [
    "WARM_START_CHECKPOINTS_DIR",
    "WARM_START_DIR",
    "WARM_START_MARKER",
    "checkpoint_dir",
    "resume_point",
    "same_warm_start",
    "warm_start",
]

logger = logging.getLogger(__name__)

WARM_START_DIR = "warm-start"
WARM_START_MARKER = "warm_start.json"
WARM_START_CHECKPOINTS_DIR = "warm-start-checkpoints"
WARM_START_RUN_DIR = "warm-start-run"  # the SFT Trainer's output_dir: its resumable checkpoints
WARM_START_RUN_SETTINGS = "warm_start_run.json"  # what the checkpoints there were trained with


def checkpoint_dir(training_args, step: int) -> Path:
    """Where ``warm_start(..., checkpoint_steps)`` saves the model at ``step``."""
    return Path(training_args.output_dir) / WARM_START_CHECKPOINTS_DIR / f"step-{step}"


class _SaveAtSteps(TrainerCallback):
    """Saves the model, its tokenizer and a ``warm_start.json`` at each of ``steps`` (process zero only)."""

    def __init__(self, training_args, steps: Sequence[int], tokenizer, describe) -> None:
        self.training_args, self.steps = training_args, set(steps)
        self.tokenizer, self.describe = tokenizer, describe

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step in self.steps and state.is_world_process_zero:
            target = checkpoint_dir(self.training_args, state.global_step)
            model.save_pretrained(str(target))
            self.tokenizer.save_pretrained(str(target))
            losses = [entry["loss"] for entry in state.log_history if "loss" in entry]
            marker = self.describe(state.global_step) | {"train_loss_logged": losses[-1] if losses else None}
            (target / WARM_START_MARKER).write_text(json.dumps(marker, indent=2))
        return control


def warm_start_settings(script_args: FleetScriptArguments) -> dict:
    """What a warm start was trained with, as its marker records it, beside its steps, seed and base model:
    its target and optimisation, and the prompts its examples were drawn as."""
    weights = script_args.task_weights
    return {
        "target": script_args.sft_target,
        "split_note": script_args.sft_split_note,
        "learning_rate": script_args.sft_learning_rate,
        "batch_size": script_args.sft_batch_size,
        "examples": script_args.sft_num_examples,
        "prompt_style": script_args.prompt_style,
        "tasks": list(script_args.tasks),
        "task_weights": None if weights is None else list(weights),
        "dataset_seed": script_args.dataset_seed,
        "max_length": script_args.max_seq_length,
    }


# What a marker from before a key existed was trained with; the keys not here it is not compared on.
_MARKER_DEFAULTS = {"target": "optimal", "split_note": False}


def _asked(script_args: FleetScriptArguments, seed: int | None, base_model: str | None) -> dict:
    """The settings a warm start is asked for: its steps, ``warm_start_settings``, and the seed and base
    model where given."""
    given = {"seed": seed, "base_model": base_model}
    asked = {"steps": script_args.sft_steps} | warm_start_settings(script_args)
    return asked | {key: value for key, value in given.items() if value is not None}


def same_warm_start(
    done: dict, script_args: FleetScriptArguments, seed: int | None = None, base_model: str | None = None
) -> bool:
    """Whether a finished warm start's marker (``warm_start.json``) was trained with the settings asked: its
    steps, ``warm_start_settings``, seed and base model. A marker from before a key existed counts as target
    optimal and no split note, and is not compared on the other keys it never wrote; ``seed`` or
    ``base_model`` None: any."""
    asked = _asked(script_args, seed, base_model)
    return all(done.get(key, _MARKER_DEFAULTS.get(key, value)) == value for key, value in asked.items())


def _trained_with(run_dir: Path, asked: dict) -> bool:
    """Whether the checkpoints in ``run_dir`` were trained with ``asked`` (its ``warm_start_run.json``)."""
    try:
        return json.loads((run_dir / WARM_START_RUN_SETTINGS).read_text()) == asked
    except (OSError, ValueError):
        return False


def _checkpoint_step(checkpoint: str) -> int:
    """N of a ``checkpoint-N`` path."""
    return int(CHECKPOINT_NAME.match(Path(checkpoint).name).group(1))


def _resumable_checkpoint(run_dir: Path, asked: dict) -> str | None:
    """The newest complete checkpoint of a stopped warm start trained with ``asked`` (its
    ``warm_start_run.json``), or None: no checkpoint, or one of other settings, which is removed (the
    Trainer's rotation keeps the highest-numbered, so a stale one would outlive the run's own)."""
    if _trained_with(run_dir, asked):
        checkpoint, damaged = newest_complete_checkpoint(run_dir)
        for path, problem in damaged:
            logger.warning("skipping the incomplete SFT checkpoint %s (%s)", path, problem)
        return checkpoint
    stale = [path for path in run_dir.glob("checkpoint-*") if CHECKPOINT_NAME.match(path.name)]
    if stale:
        logger.warning(
            "removing %d SFT checkpoint(s) in %s: trained with other settings", len(stale), run_dir
        )
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return None


def resume_point(model_name_or_path: str, script_args: FleetScriptArguments, training_args) -> int:
    """The step of the checkpoint a warm start asked for with these settings would resume from (0: it
    would start afresh), found without removing or writing anything."""
    if not script_args.sft_save_steps:
        return 0
    run_dir = Path(training_args.output_dir) / WARM_START_RUN_DIR
    if not _trained_with(run_dir, _asked(script_args, training_args.seed, model_name_or_path)):
        return 0
    checkpoint, _ = newest_complete_checkpoint(run_dir)
    return _checkpoint_step(checkpoint) if checkpoint else 0


def _check_saves_before(resume: str, checkpoint_steps: Sequence[int], training_args) -> None:
    """Raise before training when the run resumes from ``resume`` past a step of ``checkpoint_steps`` whose
    save (``checkpoint_dir``) is gone: resuming cannot save it again."""
    resumed_step = _checkpoint_step(resume)
    lost = [step for step in checkpoint_steps if step <= resumed_step]
    lost = [step for step in lost if not checkpoint_dir(training_args, step).is_dir()]
    if lost:
        raise FileNotFoundError(
            f"the SFT warm start would resume from {resume}, past step(s) {lost} whose saved model "
            f"({checkpoint_dir(training_args, lost[0])}) is gone; a resumed run cannot save it again. Ask "
            f"only for steps after {resumed_step}, or remove {Path(resume).parent} to train from step 0"
        )


def warm_start(
    model_name_or_path: str,
    script_args: FleetScriptArguments,
    training_args,
    checkpoint_steps: Sequence[int] = (),
) -> str:
    """Run (or reuse) the SFT warm start; return the directory GRPO should load the policy from. With
    ``checkpoint_steps``, also save the model at those steps (see the module docstring)."""
    if any(not 0 < step <= script_args.sft_steps for step in checkpoint_steps):
        raise ValueError(f"checkpoint_steps {list(checkpoint_steps)} must lie in 1..{script_args.sft_steps}")
    target = Path(training_args.output_dir) / WARM_START_DIR
    marker = target / WARM_START_MARKER
    if marker.exists():
        done = json.loads(marker.read_text())
        saved = all(checkpoint_dir(training_args, step).is_dir() for step in checkpoint_steps)
        if same_warm_start(done, script_args, training_args.seed, model_name_or_path) and saved:
            logger.info("reusing the SFT warm start in %s", target)
            return str(target)
        logger.warning("the warm start in %s has other settings (%s); training it again", target, done)
    run_dir = Path(training_args.output_dir) / WARM_START_RUN_DIR
    asked = _asked(script_args, training_args.seed, model_name_or_path)
    resume = None
    if script_args.sft_save_steps:
        # Process zero decides and clears first; the others then find what it left (its checkpoint, or none).
        first = getattr(training_args, "main_process_first", None)
        with first(desc="find the SFT checkpoint to resume") if first else contextlib.nullcontext():
            resume = _resumable_checkpoint(run_dir, asked)
            if getattr(training_args, "process_index", 0) == 0:
                run_dir.mkdir(parents=True, exist_ok=True)
                (run_dir / WARM_START_RUN_SETTINGS).write_text(json.dumps(asked, indent=2))
    if resume:
        _check_saves_before(resume, checkpoint_steps, training_args)
        logger.info("resuming the SFT warm start from %s", resume)
    started = time.perf_counter()
    dataset = sft_dataset(
        script_args.tasks,
        script_args.sft_num_examples,
        target=script_args.sft_target,
        split_note=script_args.sft_split_note,
        dataset_seed=script_args.dataset_seed + 1,  # not the GRPO prompts: the warm start must not leak them
        task_weights=script_args.task_weights,
        prompt_style=script_args.prompt_style,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_name_or_path)
    model = AutoModelForCausalLM.from_pretrained(model_name_or_path, dtype=torch.float32)
    config = SFTConfig(
        output_dir=str(run_dir),
        max_steps=script_args.sft_steps,
        per_device_train_batch_size=script_args.sft_batch_size,
        learning_rate=script_args.sft_learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=max(script_args.sft_steps // 20, 1),
        weight_decay=0.0,
        logging_steps=max(script_args.sft_steps // 10, 1),
        save_strategy="steps" if script_args.sft_save_steps else "no",
        save_steps=script_args.sft_save_steps or 500,  # 500: the Trainer's default, unused without saving
        save_total_limit=1,
        report_to="none",
        seed=training_args.seed,
        use_cpu=training_args.use_cpu,
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        max_length=script_args.max_seq_length,
        dataset_num_proc=None,
    )

    def describe(steps: int) -> dict:
        return {
            "steps": steps,
            **warm_start_settings(script_args),
            "seed": training_args.seed,
            "base_model": model_name_or_path,
            "examples": len(dataset),  # sft_num_examples: one example per scenario drawn
            "schedule_steps": script_args.sft_steps,  # the run's cosine schedule, when steps is a checkpoint
        }

    saver = _SaveAtSteps(training_args, checkpoint_steps, tokenizer, describe)
    callbacks = [saver] if checkpoint_steps else []
    trainer = SFTTrainer(
        model=model, args=config, train_dataset=dataset, processing_class=tokenizer, callbacks=callbacks
    )
    result = trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(str(target))
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(target))
        summary = describe(script_args.sft_steps) | {
            "train_loss": result.training_loss,  # over the steps this process trained, when it resumed
            "wall_s": time.perf_counter() - started,  # dataset, model load, training and saving: this process
            "resumed_from": resume,
        }
        marker.write_text(json.dumps(summary, indent=2))
        for path in run_dir.glob("checkpoint-*"):  # the finished model is saved: its checkpoints are spent
            shutil.rmtree(path, ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    return str(target)
