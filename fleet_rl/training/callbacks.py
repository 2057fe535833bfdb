"""Trainer callbacks of ``train_grpo.py``."""

from __future__ import annotations

from dataclasses import asdict

from transformers import TrainerCallback

__all__ = ["ScriptArgumentsToWandb", "ServerPoolMetrics"]


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


class ServerPoolMetrics(TrainerCallback):
    """Add the environment servers' health to every training log: ``env/failovers`` (episodes moved to
    another server so far) and ``env/healthy_servers`` (servers taking sessions now), from the run's
    ``ServerPool`` (fleet_rl/env/server_pool.py).

    ``Trainer.log`` copies the logs into ``state.log_history`` and then calls each callback's ``on_log`` in
    order, the reporters (wandb, ...) first; so this writes into both, and ``train_grpo.py`` puts it ahead
    of the reporters (``first_in_line``)."""

    def __init__(self, pool) -> None:
        self.pool = pool

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None:
            return
        health = {"env/failovers": self.pool.failovers, "env/healthy_servers": self.pool.healthy_servers}
        logs.update(health)
        if state.log_history:
            state.log_history[-1].update(health)

    def first_in_line(self, trainer) -> None:
        """Register with ``trainer`` ahead of every other callback, so the reporters see the values."""
        trainer.callback_handler.callbacks.insert(0, self)
