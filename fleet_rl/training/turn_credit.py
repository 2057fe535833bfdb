"""Per-turn credit in revision episodes: each plan's tokens get their own advantage (``turn_credit: true``).

In a revision episode (``episode_mode: revise``, ``fleet_rl.training.revision_rollout``) GRPO gives every
token one advantage, the episode's reward against its group's: a first plan that crashed and was then
fixed earns what a first plan that ran at once earns, and a revision that fixed the named fault shares its
credit with the plan that broke. The policy cannot tell which of its turns did the work.

``TurnCreditTrainer`` gives each plan of an episode its own advantage, a (B, T) tensor that TRL's loss takes
as it is (``GRPOTrainer._compute_loss`` unsqueezes only a (B,) one):

- the first plan: its reward minus the mean of its group's first plans: GRPO on the first plans alone, so
  the first plan is trained to run by itself, not to lean on a revision;
- revision k (k >= 2): its reward minus the reward of the plan it revised, minus ``refine_turn_cost``: what
  the kernel's verdict let it fix. A revision that repeats the plan gains nothing; one that fixes the job
  out of memory gains what running is worth, whatever the rest of its group did. A fix to one named fault
  is a local step, and this credits it locally.

The verdict tokens carry no loss (``env_mask``) and get 0. Each plan's reward and each token's plan come
from the rollout (``plan_rewards``, ``plan_of_token``), which TRL merges into the batch's rows before the
rewards are computed. Rewards are not scaled (the SmolLM2 preset's ``scale_rewards: none``): an advantage is
a difference of ``fleet_reward`` values. TRL's own logs (``advantages`` in the completions table) keep the
episode advantages; ``revise/revision_gain`` logs the revisions' mean improvement.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from fleet_rl.training.shared_prompt import SharedPromptTrainer

__all__ = ["TurnCreditTrainer", "group_means", "turn_advantages"]


def group_means(values: torch.Tensor, group_size: int) -> torch.Tensor:
    """Each value's group mean, for consecutive groups of ``group_size`` (GRPO's grouping of a batch)."""
    if values.numel() % group_size:
        raise ValueError(f"{values.numel()} values do not split into groups of {group_size}")
    return values.view(-1, group_size).mean(dim=1).repeat_interleave(group_size)


def turn_advantages(
    plan_rewards: Sequence[Sequence[float]],
    plan_of_token: Sequence[Sequence[int]],
    first_plan_baselines: Sequence[float],
    turn_cost: float,
    length: int,
) -> torch.Tensor:
    """The (rows, ``length``) advantages of revision episodes (module docstring): on plan 1's tokens its
    reward minus ``first_plan_baselines[row]``, on plan k's its reward minus plan k-1's minus ``turn_cost``,
    0 on verdict tokens (plan 0) and on padding past an episode's tokens."""
    if not len(plan_rewards) == len(plan_of_token) == len(first_plan_baselines):
        raise ValueError(
            f"{len(plan_rewards)} episodes' rewards, {len(plan_of_token)} token maps and "
            f"{len(first_plan_baselines)} baselines"
        )
    advantages = torch.zeros(len(plan_rewards), length)
    for row, (rewards, plans) in enumerate(zip(plan_rewards, plan_of_token, strict=True)):
        if not rewards:
            raise ValueError(f"episode {row} has no plan reward")
        per_plan = [0.0, rewards[0] - first_plan_baselines[row]]  # index 0: the verdicts
        per_plan += [rewards[k] - rewards[k - 1] - turn_cost for k in range(1, len(rewards))]
        index = torch.tensor(list(plans[:length]), dtype=torch.long)
        if index.numel() and int(index.max()) >= len(per_plan):
            last = int(index.max())
            raise ValueError(f"episode {row} has tokens of plan {last} but {len(rewards)} rewards")
        advantages[row, : index.numel()] = torch.tensor(per_plan)[index]
    return advantages


class TurnCreditTrainer(SharedPromptTrainer):
    """``SharedPromptTrainer`` that, with ``turn_credit=True``, replaces the episode advantages of revision
    episodes by per-plan ones (module docstring); ``turn_credit=False`` is its parent."""

    def __init__(self, *args, turn_credit: bool = False, turn_cost: float = 0.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.turn_credit = turn_credit
        self.turn_cost = turn_cost

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if not self.turn_credit:
            return output
        missing = [key for key in ("plan_rewards", "plan_of_token") if any(key not in row for row in inputs)]
        if missing:
            raise ValueError(
                f"turn_credit needs each plan's reward and tokens ({', '.join(missing)} missing): it trains "
                "revision episodes (episode_mode 'revise', fleet_rl/training/revision_rollout.py)"
            )
        device = output["advantages"].device
        rewards = [row["plan_rewards"] for row in inputs]
        # the first plans' group means over every process's rows, as TRL groups the rewards
        first = self.accelerator.gather(torch.tensor([plan[0] for plan in rewards], device=device))
        group_size = self.num_generations if self.model.training else self.num_generations_eval
        start = self.accelerator.process_index * len(inputs)
        baselines = group_means(first.float().cpu(), group_size)[start : start + len(inputs)]
        output["advantages"] = turn_advantages(
            rewards,
            [row["plan_of_token"] for row in inputs],
            baselines.tolist(),
            self.turn_cost,
            output["completion_ids"].size(1),
        ).to(device)
        gains = [plan[k] - plan[k - 1] for plan in rewards for k in range(1, len(plan))]
        if gains:
            mode = "train" if self.model.training else "eval"
            self._metrics[mode]["revise/revision_gain"].append(sum(gains) / len(gains))
        return output
