"""Resuming a run that already reached ``max_steps`` trains nothing more.

transformers' Trainer (5.23), resumed from a checkpoint whose ``global_step`` already equals ``max_steps``,
runs one more optimizer step before it checks ``max_steps``: a 30-step learning-benchmark seed killed
after its last checkpoint but before its evaluation came back as ``checkpoint-31``. A run that is done
should instead come back as it was, so ``train_grpo.py`` asks this module first and, for a finished
checkpoint, loads its weights and state without training.
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers.trainer_callback import TrainerState
from transformers.trainer_utils import get_last_checkpoint

TRAINER_STATE = "trainer_state.json"


def finished_checkpoint(training_args) -> str | None:
    """The checkpoint ``--resume_from_checkpoint`` names (``True``: the last in ``output_dir``) if it has
    already reached the run's ``max_steps`` (or, for an epoch-based run, the total it recorded); else None."""
    resume = training_args.resume_from_checkpoint
    if not resume:
        return None
    if resume is True:  # train_grpo.py has resolved "last" to a path; True comes from other callers
        output_dir = Path(training_args.output_dir)
        checkpoint = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
    else:
        checkpoint = str(resume)
    if checkpoint is None or not Path(checkpoint, TRAINER_STATE).is_file():
        return None  # the Trainer reports a missing or broken checkpoint in its own words
    state = json.loads(Path(checkpoint, TRAINER_STATE).read_text())
    max_steps = training_args.max_steps if training_args.max_steps > 0 else state.get("max_steps", 0)
    return checkpoint if max_steps > 0 and state.get("global_step", 0) >= max_steps else None


def restore_finished(trainer, checkpoint: str) -> None:
    """Load ``checkpoint``'s weights (the LoRA adapter, for a PEFT model) and its trainer state, as
    ``Trainer.train`` would on resuming, without running a step."""
    trainer._load_from_checkpoint(checkpoint)  # the loader Trainer.train uses when it resumes
    trainer.state = TrainerState.load_from_json(str(Path(checkpoint, TRAINER_STATE)))
