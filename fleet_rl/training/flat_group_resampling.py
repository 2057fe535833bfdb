"""Draw fresh prompts when every group of a step is flat: DAPO's dynamic sampling, in its smallest form.

A flat group (its answers' rewards span less than ``FLAT_SPAN``, 0.01: ``fleet_rl/training/flat_span.py``)
teaches GRPO next to nothing, yet its step still costs a forward and backward pass, and Adam still moves the
weights on its momentum. With ``resample_flat_groups: N`` (``FleetScriptArguments``), when every group of a
training generation batch is flat, ``FlatGroupResamplingTrainer`` draws as many fresh prompts from the train
set and generates again, up to N times; the last draw is trained on whatever it holds. DAPO (Yu et al. 2025,
§3.2 "dynamic sampling") over-samples and drops groups whose answers are all right or all wrong; TRL 1.16 has
no such option (later TRL ships an experimental replay-buffer trainer that swaps zero-std groups for stored
ones instead).

What a dropped draw leaves behind: its tokens count in ``num_tokens`` (they were generated); the metrics it
appended are taken back, so a step's logs (``reward``, ``frac_reward_zero_std``, the completions table)
describe the batch that was trained on; ``flat_groups/resampled`` logs how many draws the step dropped. The
fresh prompts of a step are the same on every process and after a resume: they are drawn with a generator
seeded by (``seed``, global step, draw).
"""

from __future__ import annotations

import random

import torch

from fleet_rl.training.flat_span import FLAT_SPAN
from fleet_rl.training.job_credit import JobCreditTrainer

__all__ = ["RESAMPLED_KEY", "FlatGroupResamplingTrainer", "every_group_flat"]

RESAMPLED_KEY = "flat_groups/resampled"


def every_group_flat(rewards: torch.Tensor, group_size: int, flat_span: float = FLAT_SPAN) -> bool:
    """True when each consecutive ``group_size`` of ``rewards`` spans less than ``flat_span``. NaN rewards
    (an answer no reward function scored) are left out; a group with none scored is flat."""
    grouped = rewards.view(-1, group_size)
    unscored = torch.isnan(grouped)
    highest = torch.where(unscored, float("-inf"), grouped).max(dim=1).values
    lowest = torch.where(unscored, float("inf"), grouped).min(dim=1).values
    return bool(((highest - lowest) < flat_span).all())  # no answer scored: -inf, flat


class FlatGroupResamplingTrainer(JobCreditTrainer):
    """``JobCreditTrainer`` that generates again from fresh prompts, up to ``resample_flat_groups`` times,
    when every group of a training generation batch is flat (see the module docstring). 0 is its parent."""

    def __init__(self, *args, resample_flat_groups: int = 0, **kwargs) -> None:
        if resample_flat_groups < 0:
            raise ValueError(f"resample_flat_groups must be >= 0, got {resample_flat_groups}")
        super().__init__(*args, **kwargs)
        self.resample_flat_groups = resample_flat_groups
        self._last_rewards_per_func: torch.Tensor | None = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        """TRL's rewards (every process's answers, a column per reward function), kept for the flat check."""
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._last_rewards_per_func = rewards_per_func
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        if not self.model.training or not self.resample_flat_groups:
            return super()._generate_and_score_completions(inputs)
        metrics = self._metrics["train"]
        for draw in range(self.resample_flat_groups + 1):
            lengths_before = {name: len(values) for name, values in metrics.items()}
            output = super()._generate_and_score_completions(inputs)
            if draw == self.resample_flat_groups or not self._last_draw_flat():
                break
            for name in list(metrics):  # take back what the dropped draw logged; num_tokens stays
                if name != "num_tokens":
                    del metrics[name][lengths_before.get(name, 0) :]
                    if not metrics[name]:
                        del metrics[name]
            inputs = self._fresh_prompts(len(inputs), draw)
        metrics[RESAMPLED_KEY].append(float(draw))
        return output

    def _last_rewards(self) -> torch.Tensor:
        """The last draw's total reward per answer (every process's), weighted as TRL weighs it; NaN for an
        answer no reward function scored."""
        weights = self.reward_weights.to(self._last_rewards_per_func.device)
        rewards = (self._last_rewards_per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[torch.isnan(self._last_rewards_per_func).all(dim=1)] = torch.nan  # as TRL: unscored, not 0
        return rewards

    def _last_draw_flat(self) -> bool:
        return every_group_flat(self._last_rewards(), self.num_generations)

    def _fresh_prompts(self, local_rows: int, draw: int) -> list[dict]:
        """This process's share of a new generation batch: fresh train prompts, each ``num_generations`` times
        in a row as TRL's sampler lays them out; the same draw on every process and after a resume."""
        draws = random.Random(f"{self.args.seed}-{self.state.global_step}-{draw}")
        all_rows = local_rows * self.accelerator.num_processes
        rows = [draws.randrange(len(self.train_dataset)) for _ in range(all_rows // self.num_generations)]
        prompts = [self.train_dataset[row] for row in rows]
        batch = [dict(prompt) for prompt in prompts for _ in range(self.num_generations)]
        start = self.accelerator.process_index * local_rows
        return batch[start : start + local_rows]
