"""Sampled completions printed for an 80-column terminal (``fleet_rl/training/completions_printer.py``), in
the place TRL's GRPOTrainer calls."""

from __future__ import annotations

import random

from fleet_rl.training import completions_printer
from fleet_rl.training.completions_printer import MAX_LINES, print_completions

REWARDS = {"fleet_reward": [0.31, 0.0, 0.5], "format_reward": [1.0, 0.0, 0.75], "ird_reward": [1.0, 1.0, 0.0]}
COMPLETIONS = [
    "```json\n" + '{"jobs": [{"id": "chat", "gpus": 4, "tensor_parallel": 2}]}' * 4 + "\n```",
    [{"role": "assistant", "content": "no plan, only prose"}],
    "\n".join(f"line {k}" for k in range(40)),
]


def test_every_line_fits_the_terminal_and_the_rewards_are_in_the_header(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    print_completions(["p"] * 3, COMPLETIONS, REWARDS, [0.4, -0.6, 0.2], step=5)
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 80
    headers = [line for line in lines if line.startswith("── step 5")]
    assert len(headers) == 3 and "fleet=0.31" in headers[0]
    second = " ".join(lines[lines.index(headers[1]) : lines.index(headers[1]) + 2])
    assert "advantage=-0.60" in second
    assert "  no plan, only prose" in lines  # a message list shows its text
    assert f"  … ({40 - MAX_LINES} more lines)" in lines  # a long completion is cut


def test_a_sample_is_drawn_without_moving_the_global_rng(capsys):
    state = random.getstate()
    print_completions(["p"] * 3, COMPLETIONS, REWARDS, None, step=9, num_samples=1)
    assert random.getstate() == state
    out = capsys.readouterr().out
    assert out.count("── step 9") == 1 and "advantage" not in out
    print_completions(["p"] * 3, COMPLETIONS, REWARDS, None, step=9, num_samples=0)
    assert capsys.readouterr().out == ""


def test_install_puts_it_where_the_grpo_trainer_calls(monkeypatch):
    from trl.trainer import grpo_trainer

    monkeypatch.setattr(
        grpo_trainer, "print_prompt_completions_sample", grpo_trainer.print_prompt_completions_sample
    )
    assert completions_printer.install()
    assert grpo_trainer.print_prompt_completions_sample is print_completions
