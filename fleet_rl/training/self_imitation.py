"""Self-imitation: keep the best plan GRPO found for a prompt and train on it again at later steps.

GRPO uses each sampled answer once: a group's best plan moves the policy by its advantage in the step that
sampled it, and then it is gone. On our scenarios that is not enough to leave a template (issue 43: every
seed settles on bf16 everywhere and tensor parallelism 1 within ~20 steps, while a plan that runs every job,
which takes several coordinated choices, turns up in a few groups and is never seen again). Self-imitation
(Oh et al. 2018, "Self-Imitation Learning"; in the spirit of expert iteration, Anthony et al. 2017, and ReST,
Gulcehre et al. 2023, with the kernel as the judge of N samples) keeps such finds:

- After each training generation, for every group (the ``num_generations`` answers to one prompt) the best
  answer is stored when its reward is at least ``self_imitation_min_reward`` (default 0.3: ``fleet_reward``'s
  level for a plan under which every job runs, ``rewards/fleet_reward.py``) and beats the group's mean by at
  least ``FLAT_SPAN`` (better than what the policy usually answers there, not the template every sample
  gives). One entry per prompt (a better answer replaces it); at most ``self_imitation_buffer_size``
  entries, the lowest reward leaving first.
- Each optimizer step adds ``self_imitation_coef`` × the mean negative log-likelihood of
  ``self_imitation_batch_size`` stored answers (drawn with a generator seeded by (seed, step), so a resume
  draws the same) to the first micro-batch's GRPO loss: a stored plan is trained again as if its advantage
  were ``self_imitation_coef``. Only the policy's own tokens carry the loss (a revision episode's verdicts
  are masked as in GRPO), and with ``sample_every_job_train_opening`` the job openings the every-job
  processor wrote into the stored answer (``fleet_rl/training/every_job_sampling.py``): the best answer of
  its group is one where naming those jobs helped.
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

from fleet_rl.training.flat_group_resampling import FlatGroupResamplingTrainer
from fleet_rl.training.flat_span import FLAT_SPAN
from fleet_rl.training.precomputed_gradient import sum_one_at_a_time

__all__ = [
    "BUFFER_FILE",
    "ImitationBuffer",
    "SelfImitationTrainer",
    "StoredAnswer",
    "best_of_groups",
]

BUFFER_FILE = "self_imitation_buffer"  # + "-<rank>" with several processes, + ".json"


@dataclass
class StoredAnswer:
    """One prompt's best answer so far: its tokens, which of them carry the loss, and its reward."""

    prompt_ids: list[int]
    completion_ids: list[int]
    loss_mask: list[int]  # 1 on the policy's own tokens, 0 on a verdict's (revision episodes)
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


class SelfImitationTrainer(FlatGroupResamplingTrainer):
    """``GRPOTrainer`` (with flat-group resampling and the shared prompt, see their modules) plus
    self-imitation (module docstring).
    ``self_imitation_coef`` 0 stores nothing and adds nothing: the parent trainer exactly."""

    def __init__(
        self,
        *args,
        self_imitation_coef: float = 0.0,
        self_imitation_min_reward: float = 0.3,
        self_imitation_buffer_size: int = 64,
        self_imitation_batch_size: int = 2,
        **kwargs,
    ) -> None:
        if self_imitation_coef < 0:
            raise ValueError(f"self_imitation_coef must be >= 0, got {self_imitation_coef}")
        if self_imitation_batch_size < 1:
            raise ValueError(f"self_imitation_batch_size must be >= 1, got {self_imitation_batch_size}")
        super().__init__(*args, **kwargs)
        self.self_imitation_coef = self_imitation_coef
        self.self_imitation_min_reward = self_imitation_min_reward
        self.self_imitation_batch_size = self_imitation_batch_size
        self.imitation_buffer = ImitationBuffer(self_imitation_buffer_size)

    # --- storing -------------------------------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.model.training and self.self_imitation_coef > 0:
            stored = self._store_best(output, len(inputs))
            metrics = self._metrics["train"]
            metrics["self_imitation/stored"].append(float(stored))
            metrics["self_imitation/buffer_size"].append(float(len(self.imitation_buffer)))
        return output

    def _store_best(self, output: dict, local_rows: int) -> int:
        """Offer each group's best answer (``best_of_groups`` over every process's rewards) that lies in this
        process's rows to the buffer; returns how many were stored."""
        rewards = self._last_rewards()
        first_row = self.accelerator.process_index * local_rows
        loss_mask = output["completion_mask"]
        if "tool_mask" in output:
            loss_mask = loss_mask * output["tool_mask"]
        if "every_job_written" in output:  # sample_every_job_train_opening: the best answer's openings helped
            loss_mask = torch.maximum(loss_mask, output["every_job_written"])
        stored = 0
        for index in best_of_groups(rewards.cpu(), self.num_generations, self.self_imitation_min_reward):
            row = index - first_row
            if not 0 <= row < local_rows:
                continue
            mask = loss_mask[row].tolist()
            if not any(mask):  # truncated, or nothing of the policy's: nothing to imitate
                continue
            length = len(mask) - mask[::-1].index(1)  # through the last token that carries the loss
            answer = StoredAnswer(
                prompt_ids=output["prompt_ids"][row][output["prompt_mask"][row].bool()].tolist(),
                completion_ids=output["completion_ids"][row][:length].tolist(),
                loss_mask=mask[:length],
                reward=float(rewards[index]),
                step=self.state.global_step,
            )
            stored += self.imitation_buffer.offer(answer)
        return stored

    # --- training on the stored answers ---------------------------------------------------------------------
    def _compute_loss(self, model, inputs):
        loss = super()._compute_loss(model, inputs)
        first_micro_batch = self._step % self.current_gradient_accumulation_steps == 0
        if (
            self.model.training
            and self.self_imitation_coef > 0
            and len(self.imitation_buffer)
            and first_micro_batch
        ):
            nll = self._imitation_nll(model)
            self._metrics["train"]["self_imitation/nll"].append(
                self.accelerator.gather(nll.detach()).mean().item()
            )
            loss = loss + self.self_imitation_coef * nll
        return loss

    def _imitation_nll(self, model) -> torch.Tensor:
        """Mean negative log-likelihood per loss-carrying token of a draw of stored answers, under ``model``
        (the same temperature-scaled log-probabilities as GRPO's loss). In one process, without reentrant
        gradient checkpointing, each answer runs alone, unpadded, its forward and backward pass done before
        the next's (``fleet_rl/training/precomputed_gradient.py``): the step holds one answer's activations,
        not the draw's until the trainer's backward pass."""
        rng = random.Random(f"{self.args.seed}-{self.state.global_step}-{self.accelerator.process_index}")
        answers = self.imitation_buffer.draw(self.self_imitation_batch_size, rng)
        reentrant = self.args.gradient_checkpointing and (self.args.gradient_checkpointing_kwargs or {}).get(
            "use_reentrant", False
        )  # transformers 5 checkpoints without reentry unless told to
        if self.accelerator.unwrap_model(model) is not model or reentrant:
            return self._answers_nll(model, answers)  # hooks, reentrant checkpointing: the trainer's backward
        return self._answers_nll_one_at_a_time(model, answers)

    def _answers_nll_one_at_a_time(self, model, answers: list[StoredAnswer]) -> torch.Tensor:
        """``_answers_nll`` of ``answers`` (the batch's mean per loss-carrying token), each answer run alone
        and unpadded, its gradient taken before the next runs (``sum_one_at_a_time``): the batch's value and
        gradient up to float rounding, one answer's activations held at a time. Where a left-padded batch
        shifts a shorter prompt's positions, each answer's start at 0, as when it was sampled."""
        tokens = max(sum(sum(answer.loss_mask) for answer in answers), 1)
        parts = [
            functools.partial(self._weighted_answer_nll, model, answer, sum(answer.loss_mask) / tokens)
            for answer in answers
        ]
        return sum_one_at_a_time(parts, list(model.parameters()))

    def _weighted_answer_nll(self, model, answer: StoredAnswer, share: float) -> torch.Tensor:
        """One answer's mean negative log-likelihood per loss-carrying token times ``share``, its tokens'
        part of the draw's: the parts of the draw's mean, one unpadded answer each."""
        return self._answers_nll(model, [answer]) * share

    def _answers_nll(self, model, answers: list[StoredAnswer]) -> torch.Tensor:
        """Mean negative log-likelihood per loss-carrying token of ``answers`` under ``model``, one batch."""
        device = self.accelerator.device
        prompt_width = max(len(a.prompt_ids) for a in answers)
        completion_width = max(len(a.completion_ids) for a in answers)
        pad = self._tokenizer.pad_token_id
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
        per_token_logps, _, _ = self._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, completion_width
        )
        loss_mask = loss_mask.to(per_token_logps.device)
        return -(per_token_logps * loss_mask).sum() / loss_mask.sum().clamp(min=1.0)

    # --- checkpoints ---------------------------------------------------------------------------------------
    def _buffer_path(self, checkpoint: str) -> Path:
        suffix = f"-{self.args.process_index}" if self.args.world_size > 1 else ""
        return Path(checkpoint, f"{BUFFER_FILE}{suffix}.json")

    def _save_rng_state(self, output_dir):
        """Beside each process's RNG state, before the trainer state: a complete checkpoint has the buffer."""
        super()._save_rng_state(output_dir)
        if self.self_imitation_coef > 0:
            Path(output_dir).mkdir(parents=True, exist_ok=True)
            self.imitation_buffer.save(self._buffer_path(output_dir))

    def _load_optimizer_and_scheduler(self, checkpoint):
        """On every resume, with the optimizer: the buffer as the checkpoint saved it."""
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None or self.self_imitation_coef <= 0:
            return
        path = self._buffer_path(checkpoint)
        if path.is_file():
            self.imitation_buffer.load(path)
        else:  # a checkpoint of a run without self-imitation: start the buffer empty, and say so
            print(f"self-imitation: {path} is missing; the buffer starts empty", flush=True)
