"""``FleetGRPOTrainer``: TRL's ``GRPOTrainer`` with this project's hooks, each switched by its option.

A step meets them in this order, top to bottom:

1. **Shared prompt** (``share_prompt``, on by default): where a batch's rows come in groups that share a
   prompt (one prompt per step, the SmolLM2 preset, or several), generation prefills each prompt once and
   the loss's forward and backward pass run it once; the same numbers as TRL's path
   (``fleet_rl/training/shared_prompt.py``).
2. **Repairs from the kernel's verdict** (``explore_repair_rate``): a share of the sampled training answers
   get their failing jobs rewritten to settings the prompt's ``Fits`` line says hold them, before scoring
   (``fleet_rl/training/plan_repairs.py``).
3. **Per-job credit** (``job_credit``, ``omitted_job_credit``): each job's tokens also get that job's own
   advantage, so the job that broke a plan is told apart from the one that ran
   (``fleet_rl/training/job_credit.py``).
4. **Self-imitation** (``self_imitation_coef``): each group's best answer is kept and replayed as an NLL
   term at later steps; the buffer is part of every checkpoint (``fleet_rl/training/self_imitation.py``).

And one fix that always applies: a resumed QLoRA run's adapters go back to bf16, as a fresh run's. With an
option off its hook returns TRL's own method at its first line: the tiny preset (every option off,
``share_prompt: false`` included) runs TRL's code.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer

from fleet_rl.training.job_credit import job_credit_advantages
from fleet_rl.training.plan_repairs import repair_completions
from fleet_rl.training.self_imitation import ImitationBuffer, buffer_path, imitation_nll, stored_answers
from fleet_rl.training.shared_prompt import (
    can_share_generation,
    can_share_logps,
    shared_prompt_generate,
    shared_prompt_logps,
)

__all__ = ["FleetGRPOTrainer", "is_quantized", "trainable_to_bf16"]


class FleetGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` plus the hooks of the module docstring; each keyword defaults to off (the shared
    prompt to on), as ``FleetScriptArguments`` does."""

    def __init__(
        self,
        *args,
        share_prompt: bool = True,
        explore_repair_rate: float = 0.0,
        job_credit: float = 0.0,
        omitted_job_credit: float | None = None,
        self_imitation_coef: float = 0.0,
        self_imitation_min_reward: float = 0.3,
        self_imitation_buffer_size: int = 64,
        self_imitation_batch_size: int = 2,
        **kwargs,
    ) -> None:
        shares_ok = (
            0 <= explore_repair_rate < 1 and 0 <= job_credit <= 1 and 0 <= (omitted_job_credit or 0) <= 1
        )
        if not (shares_ok and self_imitation_coef >= 0 and self_imitation_batch_size >= 1):
            raise ValueError(  # as fleet_rl/training/checks.py says it to train_grpo.py's users
                "explore_repair_rate must be in [0, 1), job_credit and omitted_job_credit in [0, 1], "
                "self_imitation_coef >= 0 and self_imitation_batch_size >= 1"
            )
        super().__init__(*args, **kwargs)
        self.share_prompt = share_prompt
        self.explore_repair_rate = explore_repair_rate
        self.job_credit, self.omitted_job_credit = job_credit, omitted_job_credit
        self.self_imitation_coef = self_imitation_coef
        self.self_imitation_min_reward = self_imitation_min_reward
        self.self_imitation_batch_size = self_imitation_batch_size
        self.imitation_buffer = ImitationBuffer(self_imitation_buffer_size)
        self._repair_inputs: list[dict] | None = None  # the rows of the generation under way, for repairs
        self._repaired_rows: list[int] = []
        self._draw = (-1, 0)  # (global step, generations drawn in it)
        self._rewards_per_func: torch.Tensor | None = None  # the last scoring's, for self-imitation

    # --- 1. the shared prompt ------------------------------------------------------------------------------
    def _generate_single_turn(
        self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False
    ):
        if not (
            self.share_prompt
            and can_share_generation(self, prompt_ids, images, multimodal_fields, has_tool_images)
        ):
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        return shared_prompt_generate(self, prompt_ids)

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **multimodal,
    ):
        if not (
            self.share_prompt
            and can_share_logps(
                self, model, input_ids, attention_mask, logits_to_keep, compute_aux_loss, multimodal
            )
        ):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size,
                compute_entropy, compute_aux_loss, **multimodal,
            )  # fmt: skip
        return shared_prompt_logps(
            self, model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy
        )

    # --- 2. repairs, 3. per-job credit, 4. self-imitation's store ------------------------------------------
    def _generate_and_score_completions(self, inputs):
        training = self.model.training
        repairing = training and self.explore_repair_rate > 0
        if repairing:
            self._repair_inputs, self._repaired_rows = inputs, []
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._repair_inputs = None
        if repairing:
            self._log_repairs(output, len(inputs))
        if self.job_credit:
            output["advantages"], metrics = job_credit_advantages(
                output,
                inputs,
                decode=lambda ids: self._tokenizer.decode(ids, skip_special_tokens=True),
                weight=self.job_credit,
                omitted_credit=self.omitted_job_credit,
                gather=self._gather,
                group_size=self.num_generations if training else self.num_generations_eval,
                first_row=self.accelerator.process_index * len(inputs),
            )
            for name, value in metrics.items():
                self._metrics["train" if training else "eval"][name].append(value)
        if training and self.self_imitation_coef > 0:
            self._store_best(output, len(inputs))
        return output

    def _generate(self, prompts: list):
        """TRL's sampling; then, in training with ``explore_repair_rate``, that share of answers repaired."""
        output = super()._generate(prompts)
        rows = self._repair_inputs
        if rows is None or len(rows) != len(prompts):
            return output
        prompt_ids, completion_ids, tool_mask, completions, logprobs, extra, images, tool_images = output
        if tool_mask is not None or logprobs is not None or len(completion_ids) != len(rows):
            return output  # tools or vLLM: tokens a repair would not match (checks.py refuses them)
        step = self.state.global_step
        self._draw = (step, self._draw[1] + 1 if self._draw[0] == step else 0)
        self._repaired_rows = repair_completions(
            completion_ids,
            completions,
            rows,
            rate=self.explore_repair_rate,
            # the key of the run that measured the preset (then edit_exploration.py): the same draws
            rng_key=f"fleet_rl/edit_exploration/{self.args.seed}/{step}/{self._draw[1]}/"
            f"{self.accelerator.process_index}",
            tokenizer=self._tokenizer,
            eos_token_ids=self.eos_token_ids,
            max_length=self.max_completion_length,
        )
        return prompt_ids, completion_ids, tool_mask, completions, logprobs, extra, images, tool_images

    def _log_repairs(self, output: dict, rows: int) -> None:
        """``repairs/share``: the share of answers repaired; ``repairs/advantage``: their mean advantage
        (above 0: repairs beat the policy's own answers)."""
        advantages = output["advantages"].reshape(rows, -1)[:, 0]
        metrics = self._metrics["train"]
        metrics["repairs/share"].append(len(self._repaired_rows) / max(1, rows))
        if self._repaired_rows:
            values = [float(advantages[row]) for row in self._repaired_rows]
            metrics["repairs/advantage"].append(sum(values) / len(values))

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's rewards (every process's answers, a column per function), kept for self-imitation."""
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self.self_imitation_coef > 0:
            self._rewards_per_func = rewards_per_func
        return rewards_per_func

    def _store_best(self, output: dict, local_rows: int) -> None:
        """Offer each group's best answer on this process's rows to the buffer; log what it holds."""
        weights = self.reward_weights.to(self._rewards_per_func.device)
        rewards = (self._rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[torch.isnan(self._rewards_per_func).all(dim=1)] = torch.nan  # as TRL: unscored, not 0
        answers = stored_answers(
            output,
            rewards,
            group_size=self.num_generations,
            min_reward=self.self_imitation_min_reward,
            first_row=self.accelerator.process_index * local_rows,
            step=self.state.global_step,
        )
        stored = sum(self.imitation_buffer.offer(answer) for answer in answers)
        metrics = self._metrics["train"]
        metrics["self_imitation/stored"].append(float(stored))
        metrics["self_imitation/buffer_size"].append(float(len(self.imitation_buffer)))

    def _gather(self, rows: list) -> list:
        """Every process's rows, in process order (GRPO's groups may span processes)."""
        return rows if self.accelerator.num_processes == 1 else gather_object(rows)

    # --- 4. self-imitation's replay ------------------------------------------------------------------------
    def _compute_loss(self, model, inputs):
        loss = super()._compute_loss(model, inputs)
        if not (self.model.training and self.self_imitation_coef > 0 and len(self.imitation_buffer)):
            return loss
        if self._step % self.current_gradient_accumulation_steps:  # the first micro-batch of a step only
            return loss
        rng = random.Random(f"{self.args.seed}-{self.state.global_step}-{self.accelerator.process_index}")
        nll = imitation_nll(self, model, self.imitation_buffer.draw(self.self_imitation_batch_size, rng))
        self._metrics["train"]["self_imitation/nll"].append(
            self.accelerator.gather(nll.detach()).mean().item()
        )
        return loss + self.self_imitation_coef * nll

    # --- checkpoints: the buffer, and resumed QLoRA adapters in bf16 ---------------------------------------
    def _save_rng_state(self, output_dir):
        """Beside each process's RNG state, before the trainer state: a complete checkpoint has the buffer."""
        super()._save_rng_state(output_dir)
        if self.self_imitation_coef > 0:
            Path(output_dir).mkdir(parents=True, exist_ok=True)
            self.imitation_buffer.save(buffer_path(output_dir, self.args.process_index, self.args.world_size))

    def _load_optimizer_and_scheduler(self, checkpoint):
        """On every resume, with the optimizer: the buffer as the checkpoint saved it."""
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None or self.self_imitation_coef <= 0:
            return
        path = buffer_path(checkpoint, self.args.process_index, self.args.world_size)
        if path.is_file():
            self.imitation_buffer.load(path)
        else:  # a checkpoint of a run without self-imitation: start the buffer empty, and say so
            print(f"self-imitation: {path} is missing; the buffer starts empty", flush=True)

    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        """On a 4- or 8-bit base TRL casts the LoRA weights to bf16 (QLoRA's recipe), but a resume goes
        through PEFT's ``load_adapter``, which upcasts them to fp32 (``autocast_adapter_dtype``): a resumed
        run trained fp32 adapters where the run it resumed trained bf16 ones (``kill_resume``: gradient norms
        differed from the first resume on). Cast them back, before the optimizer and its state are built."""
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        loaded = self.model if model is None else model
        if is_quantized(loaded):
            trainable_to_bf16(loaded)


def is_quantized(model) -> bool:
    """True for a model loaded in 4 or 8 bits (through a PEFT wrapper too), as TRL tests it."""
    return bool(getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_loaded_in_8bit", False))


def trainable_to_bf16(model) -> list[str]:
    """Cast the trainable weights to bf16 as TRL does for QLoRA (a DoRA magnitude vector stays: its updates
    can be smaller than bf16 resolves); the names of those that were cast."""
    cast = []
    for name, parameter in model.named_parameters():
        if (
            parameter.requires_grad
            and "lora_magnitude_vector" not in name
            and parameter.dtype != torch.bfloat16
        ):
            parameter.data = parameter.data.to(torch.bfloat16)
            cast.append(name)
    return cast
