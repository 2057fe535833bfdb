"""Sampled completions on the console, readable in an 80-column terminal (``log_completions``).

TRL prints ``num_completions_to_print`` completions per logging step as one rich table: prompt, completion,
one column per reward function and the advantage. With our prompts (a system message of ~1,300 tokens) and
five reward columns, an 80-column terminal leaves each column a few characters wide, one word per line.
``print_completions`` takes TRL's arguments and prints each sampled completion under a one-line header
(step, which completion, each reward, the advantage), its text wrapped to the terminal width and cut after
``MAX_LINES`` lines; the prompt is left out (the dataset row is in the logs and wandb's completions table).
``install`` puts it in the place TRL's GRPOTrainer calls (``trl.trainer.grpo_trainer``'s module-level
``print_prompt_completions_sample``); what TRL logs to wandb is unchanged. It draws its sample from its own
``Random(step)``, so printing does not move the global RNG that TRL's own printer draws from.
"""

from __future__ import annotations

import random
import shutil
import textwrap

from rewards.parsing import completion_text

__all__ = ["MAX_LINES", "install", "print_completions"]

MAX_LINES = 12


def _text(completion: object) -> str:
    text = completion_text(completion)
    return text if text is not None else repr(completion)


def print_completions(
    prompts: list,
    completions: list,
    rewards: dict[str, list[float]],
    advantages: list[float] | None,
    step: int,
    num_samples: int | None = None,
    extra: dict[str, list] | None = None,
) -> None:
    """TRL's ``print_prompt_completions_sample`` signature; see the module docstring."""
    width = max(shutil.get_terminal_size((80, 24)).columns, 40)
    indices = list(range(len(completions)))
    if num_samples is not None:
        if num_samples <= 0:
            return
        if num_samples < len(indices):
            indices = sorted(random.Random(step).sample(indices, num_samples))
    for i in indices:
        fields = [f"{name.removesuffix('_reward')}={values[i]:.2f}" for name, values in rewards.items()]
        if advantages is not None:
            fields.append(f"advantage={advantages[i]:+.2f}")
        extras = (extra or {}).items()
        fields += [f"{name}={values[i]}" for name, values in extras if values[i] not in ("", None)]
        header = f"── step {step} · completion {i + 1}/{len(completions)} · " + " · ".join(fields)
        print(textwrap.fill(header, width=width, subsequent_indent="   "))
        lines = [
            wrapped
            for line in _text(completions[i]).splitlines()
            for wrapped in (textwrap.wrap(line, width=width - 2) or [""])
        ]
        for line in lines[:MAX_LINES]:
            print(f"  {line}")
        if len(lines) > MAX_LINES:
            print(f"  … ({len(lines) - MAX_LINES} more lines)")


def install() -> bool:
    """Make TRL's GRPOTrainer print completions with ``print_completions``; False if this TRL has no such
    hook (then its own table stays)."""
    from trl.trainer import grpo_trainer

    if not hasattr(grpo_trainer, "print_prompt_completions_sample"):
        return False
    grpo_trainer.print_prompt_completions_sample = print_completions
    return True
