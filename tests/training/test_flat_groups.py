"""fleet_rl/training/flat_groups.py: "no signal" on the console after N training steps of flat groups."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from transformers import TrainerControl, TrainerState

from fleet_rl.training.arguments import FleetScriptArguments
from fleet_rl.training.checks import check_options
from fleet_rl.training.flat_groups import NoSignalWarning

MESSAGE = "no signal: every answer scored alike"


def _drive(callback: NoSignalWarning, fractions: list[float | None], first_step: int = 0) -> list[int]:
    """Feed one training log per step (None: a log without the key); the steps after which it spoke."""
    state, control, args = TrainerState(global_step=first_step), TrainerControl(), None
    callback.on_train_begin(args, state, control)
    spoke = []
    for step, fraction in enumerate(fractions, start=first_step + 1):
        state.global_step = step
        logs = {"loss": 0.0} if fraction is None else {"loss": 0.0, "frac_reward_zero_std": fraction}
        before = callback.said
        callback.on_log(args, state, control, logs=logs)
        if callback.said and not before:
            spoke.append(step)
    return spoke


def test_it_speaks_after_n_flat_steps_and_not_before(capsys):
    assert _drive(NoSignalWarning(3), [1.0, 1.0]) == []
    assert capsys.readouterr().out == ""
    assert _drive(NoSignalWarning(3), [1.0, 1.0, 1.0]) == [3]
    out = capsys.readouterr().out
    assert f"{MESSAGE} for 3 steps (every group's rewards equal; GRPO's advantage is zero)" in out
    assert "hint:" in out and out.count(MESSAGE) == 1


def test_once_per_streak_and_again_after_a_step_with_signal(capsys):
    fractions = [1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0]
    assert _drive(NoSignalWarning(3), fractions) == [3, 9]
    assert capsys.readouterr().out.count(MESSAGE) == 2


def test_a_group_with_signal_ends_the_streak_and_a_log_without_the_key_does_not(capsys):
    assert _drive(NoSignalWarning(2), [1.0, 0.875, 1.0]) == []
    assert _drive(NoSignalWarning(2), [1.0, None, 1.0]) == [3]  # steps 1-3 all flat as far as we know


def test_logging_every_few_steps_counts_steps_not_logs(capsys):
    callback, state, control = NoSignalWarning(4), TrainerState(global_step=0), TrainerControl()
    callback.on_train_begin(None, state, control)
    for step in (2, 4):  # logging_steps 2: each log averages two steps
        state.global_step = step
        callback.on_log(None, state, control, logs={"frac_reward_zero_std": 1.0})
    assert f"{MESSAGE} for 4 steps" in capsys.readouterr().out


def test_a_resumed_run_counts_from_its_first_step(capsys):
    assert _drive(NoSignalWarning(3), [1.0, 1.0], first_step=40) == []
    assert _drive(NoSignalWarning(3), [1.0, 1.0, 1.0], first_step=40) == [43]


def test_zero_disables_and_a_negative_count_is_refused(capsys):
    assert _drive(NoSignalWarning(0), [1.0] * 10) == []
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="no_signal_steps"):
        NoSignalWarning(-1)
    with pytest.raises(ValueError, match="no_signal_steps"):
        check_options(
            FleetScriptArguments(no_signal_steps=-1),
            SimpleNamespace(),  # the counts are checked before any training option is read
            None,
            cuda_available=False,
        )
