"""Self-imitation: keep the best plan GRPO found for a prompt and train on it again at later steps.

GRPO uses each sampled answer once: a plan that runs every job, which takes several coordinated choices,
turns up in a few groups and is gone. Self-imitation (``FleetGRPOTrainer`` with ``self_imitation_coef > 0``;
Oh et al. 2018, "Self-Imitation Learning"; ReST, Gulcehre et al. 2023) keeps such finds:

- After each training generation, for every group (the ``num_generations`` answers to one prompt) the best
  answer is stored when its reward is at least ``self_imitation_min_reward`` (default 0.3: ``fleet_reward``'s
  level for a plan under which every job runs, ``rewards/fleet_reward.py``) and beats the group's mean by at
  least ``FLAT_SPAN`` (better than what the policy usually answers there, not the template every sample
  gives). One entry per prompt (a better answer replaces it); at most ``self_imitation_buffer_size``
  entries, the lowest reward leaving first.
- Each optimizer step adds ``self_imitation_coef`` × the mean negative log-likelihood of
  ``self_imitation_batch_size`` stored answers (drawn with a generator seeded by (seed, step), so a resume
  draws the same) to the first micro-batch's GRPO loss: a stored plan is trained again as if its advantage
  were ``self_imitation_coef``. Only the policy's own tokens carry the loss (a tool result's are masked
  as in GRPO).
- The buffer is part of a checkpoint (``self_imitation_buffer[-<rank>].json``, written before the trainer
  state, so a checkpoint that ``complete_checkpoints`` accepts has it) and comes back on resume.

Logged per step: ``self_imitation/stored`` (answers stored this step), ``self_imitation/buffer_size`` and
``self_imitation/nll`` (the replayed answers' mean negative log-likelihood per token).
"""

from __future__ import annotations

import functools
import json
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from fleet_rl.training.flat_span import FLAT_SPAN
from fleet_rl.training.precomputed_gradient import sum_one_at_a_time

__all__ = [
    "BUFFER_FILE",
    "ImitationBuffer",
    "StoredAnswer",
    "best_of_groups",
    "buffer_path",
    "imitation_nll",
    "stored_answers",
]

BUFFER_FILE = "self_imitation_buffer"  # + "-<rank>" with several processes, + ".json"


@dataclass
class StoredAnswer:
    """One prompt's best answer so far: its tokens, which of them carry the loss, and its reward."""

    prompt_ids: list[int]
    completion_ids: list[int]
    loss_mask: list[int]  # 1 on the policy's own tokens, 0 on a tool result's
    reward: float
    step: int  # the global step that sampled it


class ImitationBuffer:
    """Best answers by prompt, at most ``capacity`` of them; the lowest reward leaves first (the older of two
    equal ones)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"self_imitation_buffer_size must be >= 1, got {capacity}")
        self.capacity = capacity
        self._answers: dict[tuple[int, ...], StoredAnswer] = {}

    def __len__(self) -> int:
        return len(self._answers)

    def answers(self) -> list[StoredAnswer]:
        return list(self._answers.values())

    def offer(self, answer: StoredAnswer) -> bool:
        """Store ``answer`` unless its prompt already has one at least as good, or the buffer is full of
        better ones; True when it was stored."""
        key = tuple(answer.prompt_ids)
        held = self._answers.get(key)
        if held is not None and held.reward >= answer.reward:
            return False
        if held is None and len(self._answers) >= self.capacity:
            worst_key, worst = min(self._answers.items(), key=lambda item: (item[1].reward, item[1].step))
            if worst.reward >= answer.reward:
                return False
            del self._answers[worst_key]
        self._answers.pop(key, None)  # a replaced answer moves to the end, as a new one
        self._answers[key] = answer
        return True

    def draw(self, count: int, rng: random.Random) -> list[StoredAnswer]:
        """``count`` answers without replacement (all of them when fewer are stored)."""
        answers = self.answers()
        return rng.sample(answers, min(count, len(answers)))

    def save(self, path: Path) -> None:
        """Write as JSON, whole or not at all (a temporary file renamed into place)."""
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text(
            json.dumps({"capacity": self.capacity, "answers": [asdict(a) for a in self.answers()]})
        )
        os.replace(temporary, path)

    def load(self, path: Path) -> None:
        """Replace the contents with the answers saved at ``path``, in their saved order."""
        data = json.loads(path.read_text())
        self._answers = {}
        for fields in data["answers"]:
            answer = StoredAnswer(**fields)
            self._answers[tuple(answer.prompt_ids)] = answer


def best_of_groups(rewards: torch.Tensor, group_size: int, min_reward: float) -> list[int]:
    """Index (into ``rewards``) of each group's best answer worth keeping: at least ``min_reward`` and at
    least ``FLAT_SPAN`` above its group's mean. NaN rewards (unscored answers) are left out of both."""
    found = []
    for group, values in enumerate(rewards.view(-1, group_size)):
        scored = ~torch.isnan(values)
        if not scored.any():
            continue
        best = int(torch.where(scored, values, float("-inf")).argmax())
        best_reward = float(values[best])
        if best_reward >= min_reward and best_reward - float(values[scored].mean()) >= FLAT_SPAN:
            found.append(group * group_size + best)
    return found


def stored_answers(
    output: dict, rewards: torch.Tensor, *, group_size: int, min_reward: float, first_row: int, step: int
) -> list[StoredAnswer]:
    """Each group's best answer worth keeping (``best_of_groups`` over every process's ``rewards``) that
    lies in this process's rows of TRL's scored batch ``output``, which start at ``first_row``."""
    local_rows = output["completion_ids"].size(0)
    loss_mask = output["completion_mask"]
    if "tool_mask" in output:
        loss_mask = loss_mask * output["tool_mask"]
    answers = []
    for index in best_of_groups(rewards.cpu(), group_size, min_reward):
        row = index - first_row
        if not 0 <= row < local_rows:
            continue
        mask = loss_mask[row].tolist()
        if not any(mask):  # truncated, or nothing of the policy's: nothing to imitate
            continue
        length = len(mask) - mask[::-1].index(1)  # through the last token that carries the loss
        answers.append(
            StoredAnswer(
                prompt_ids=output["prompt_ids"][row][output["prompt_mask"][row].bool()].tolist(),
                completion_ids=output["completion_ids"][row][:length].tolist(),
                loss_mask=mask[:length],
                reward=float(rewards[index]),
                step=step,
            )
        )
    return answers


def imitation_nll(trainer, model, answers: list[StoredAnswer]) -> torch.Tensor:
    """Mean negative log-likelihood per loss-carrying token of ``answers`` under ``model`` (the same
    temperature-scaled log-probabilities as GRPO's loss, through ``trainer``). In one process, without
    reentrant gradient checkpointing, each answer runs alone, unpadded, its forward and backward pass done
    before the next's (``sum_one_at_a_time``): the step holds one answer's activations, not the draw's
    until the trainer's backward pass; the value and gradient are the batch's up to float rounding."""
    args = trainer.args
    reentrant = args.gradient_checkpointing and (args.gradient_checkpointing_kwargs or {}).get(
        "use_reentrant", False
    )  # transformers 5 checkpoints without reentry unless told to
    if trainer.accelerator.unwrap_model(model) is not model or reentrant:
        return _answers_nll(trainer, model, answers)  # hooks, reentrant checkpointing: the trainer's backward
    tokens = max(sum(sum(answer.loss_mask) for answer in answers), 1)
    parts = [
        functools.partial(_weighted_answer_nll, trainer, model, answer, sum(answer.loss_mask) / tokens)
        for answer in answers
    ]
    return sum_one_at_a_time(parts, list(model.parameters()))


def _weighted_answer_nll(trainer, model, answer: StoredAnswer, share: float) -> torch.Tensor:
    """One unpadded answer's mean negative log-likelihood per loss-carrying token times ``share``, its
    tokens' part of the draw's (each answer starts at position 0, as when it was sampled)."""
    return _answers_nll(trainer, model, [answer]) * share


def _answers_nll(trainer, model, answers: list[StoredAnswer]) -> torch.Tensor:
    """Mean negative log-likelihood per loss-carrying token of ``answers`` under ``model``, one batch."""
    device = trainer.accelerator.device
    prompt_width = max(len(a.prompt_ids) for a in answers)
    completion_width = max(len(a.completion_ids) for a in answers)
    pad = trainer._tokenizer.pad_token_id
    prompt_ids = torch.full((len(answers), prompt_width), pad, dtype=torch.long)
    prompt_mask = torch.zeros_like(prompt_ids)
    completion_ids = torch.full((len(answers), completion_width), pad, dtype=torch.long)
    completion_mask = torch.zeros_like(completion_ids)
    loss_mask = torch.zeros(len(answers), completion_width)
    for i, answer in enumerate(answers):  # prompts padded on the left, answers on the right, as GRPO's
        prompt_ids[i, prompt_width - len(answer.prompt_ids) :] = torch.tensor(answer.prompt_ids)
        prompt_mask[i, prompt_width - len(answer.prompt_ids) :] = 1
        completion_ids[i, : len(answer.completion_ids)] = torch.tensor(answer.completion_ids)
        completion_mask[i, : len(answer.completion_ids)] = 1
        loss_mask[i, : len(answer.loss_mask)] = torch.tensor(answer.loss_mask, dtype=torch.float)
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1).to(device)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1).to(device)
    per_token_logps, _, _ = trainer._get_per_token_logps_and_entropies(
        model, input_ids, attention_mask, completion_width
    )
    loss_mask = loss_mask.to(per_token_logps.device)
    return -(per_token_logps * loss_mask).sum() / loss_mask.sum().clamp(min=1.0)


def buffer_path(checkpoint: str, process_index: int, world_size: int) -> Path:
    """Where a checkpoint keeps a process's buffer (beside its RNG state)."""
    suffix = f"-{process_index}" if world_size > 1 else ""
    return Path(checkpoint, f"{BUFFER_FILE}{suffix}.json")
