"""Say so on the console when GRPO has had no signal for a while: every group's answers scored alike.

GRPO's advantage is an answer's reward minus its group's mean, so a group whose answers all score the same
teaches nothing. TRL's ``GRPOTrainer`` logs ``frac_reward_zero_std`` (the share of groups whose reward std
is 0, averaged over the logging interval) with every training log. ``NoSignalWarning`` reads those logs and,
once ``steps`` training steps in a row had every group flat (the value 1.0), prints once per streak:

    no signal: every answer scored alike for 3 steps (every group's rewards equal; GRPO's advantage is zero)

A log with some group that is not flat ends the streak; a log without the key (no generation since the last
log, or an evaluation log) neither extends nor ends it. ``benchmarks/reward/signal.py`` measures the same
thing offline, on weak planners' answers or on a run's completions tables.
"""

from __future__ import annotations

from transformers import TrainerCallback

__all__ = ["NO_SIGNAL_HINT", "NoSignalWarning"]

FLAT_KEY = "frac_reward_zero_std"  # trl/trainer/grpo_trainer.py: is_std_zero.float().mean() per batch
NO_SIGNAL_HINT = (
    "hint: a group teaches GRPO only when its answers score differently; try a warm start (sft_steps, "
    "sft_target random_feasible), a higher temperature or more num_generations. With log_completions: true, "
    "`python -m benchmarks.reward.signal --completions <output_dir>` shows the groups."
)


class NoSignalWarning(TrainerCallback):
    """Print a warning after ``steps`` consecutive training steps in which every group was flat (see the
    module docstring); ``steps`` 0 disables it."""

    def __init__(self, steps: int) -> None:
        if steps < 0:
            raise ValueError(f"no_signal_steps must be >= 0, got {steps}")
        self.steps = steps
        self.streak_start = 0  # the global step before the current streak of flat logs
        self.said = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.streak_start, self.said = state.global_step, False  # a resumed run starts a new streak

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not self.steps or not logs or logs.get(FLAT_KEY) is None:
            return
        if logs[FLAT_KEY] < 1.0:
            self.streak_start, self.said = state.global_step, False
            return
        flat_steps = state.global_step - self.streak_start
        if flat_steps >= self.steps and not self.said:
            self.said = True
            if state.is_world_process_zero:  # one line per run, not one per process
                steps = f"{flat_steps} step" + "s" * (flat_steps != 1)
                print(
                    f"no signal: every answer scored alike for {steps} (every group's rewards equal; GRPO's "
                    f"advantage is zero)\n{NO_SIGNAL_HINT}",
                    flush=True,
                )
