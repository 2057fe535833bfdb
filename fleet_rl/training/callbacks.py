"""Trainer callbacks of ``train_grpo.py``."""

from __future__ import annotations

from dataclasses import asdict

from transformers import TrainerCallback

__all__ = ["ScriptArgumentsToWandb"]


class ScriptArgumentsToWandb(TrainerCallback):
    """Add our own arguments (tasks, rewards, backend, warm start...) to the wandb run's config.

    transformers' ``WandbCallback`` logs ``GRPOConfig`` and the model config; this adds
    ``FleetScriptArguments`` under ``fleet/`` once the run exists (after ``WandbCallback.on_train_begin``)."""

    def __init__(self, script_args) -> None:
        self.values = {f"fleet/{key}": value for key, value in asdict(script_args).items()}

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        import wandb

        if wandb.run is not None:
            wandb.config.update(self.values, allow_val_change=True)
