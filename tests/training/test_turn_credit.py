"""Per-turn credit (fleet_rl/training/turn_credit.py): each plan of a revision episode, its own advantage."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from fleet_rl.training.shared_prompt import SharedPromptTrainer
from fleet_rl.training.turn_credit import TurnCreditTrainer, group_means, turn_advantages


def test_each_plan_gets_its_reward_against_its_own_baseline():
    # episode 0: a first plan that ran at once; episode 1: crashed (0.1), then fixed (0.6) after a verdict
    plan_rewards = [[0.5], [0.1, 0.6]]
    plan_of_token = [[1, 1, 1], [1, 1, 0, 0, 2, 2]]
    advantages = turn_advantages(plan_rewards, plan_of_token, [0.3, 0.3], turn_cost=0.01, length=7)
    expected = torch.tensor(
        [
            [0.2, 0.2, 0.2, 0.0, 0.0, 0.0, 0.0],  # 0.5 - 0.3, then padding
            [-0.2, -0.2, 0.0, 0.0, 0.49, 0.49, 0.0],  # 0.1 - 0.3; verdict 0; 0.6 - 0.1 - 0.01
        ]
    )
    assert torch.allclose(advantages, expected)


def test_a_revision_that_changes_nothing_pays_only_the_turn_cost_and_a_worse_one_loses():
    advantages = turn_advantages([[0.2, 0.2, 0.05]], [[1, 0, 2, 0, 3]], [0.2], turn_cost=0.0, length=5)
    assert advantages.tolist()[0] == pytest.approx([0.0, 0.0, 0.0, 0.0, -0.15])


def test_group_means_follow_grpo_grouping():
    means = group_means(torch.tensor([0.0, 1.0, 2.0, 4.0]), 2)
    assert means.tolist() == [0.5, 0.5, 3.0, 3.0]
    with pytest.raises(ValueError, match="do not split into groups of 3"):
        group_means(torch.zeros(4), 3)


def test_inconsistent_episodes_raise_clear_errors():
    with pytest.raises(ValueError, match="2 episodes' rewards, 1 token maps and 2 baselines"):
        turn_advantages([[0.1], [0.2]], [[1]], [0.0, 0.0], 0.0, 1)
    with pytest.raises(ValueError, match="tokens of plan 2 but 1 rewards"):
        turn_advantages([[0.1]], [[1, 0, 2]], [0.0], 0.0, 3)
    with pytest.raises(ValueError, match="episode 0 has no plan reward"):
        turn_advantages([[]], [[]], [0.0], 0.0, 1)


def _bare_trainer(turn_credit: bool, process_index: int = 0, other_first_rewards=()) -> TurnCreditTrainer:
    """A TurnCreditTrainer without a model: enough for its advantage step (its parent's is patched)."""
    trainer = object.__new__(TurnCreditTrainer)
    trainer.turn_credit, trainer.turn_cost = turn_credit, 0.0
    trainer.num_generations = trainer.num_generations_eval = 2
    trainer.model = SimpleNamespace(training=True)
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}

    def gather(local: torch.Tensor) -> torch.Tensor:  # every process's rows, in process order
        other = torch.tensor(other_first_rewards, dtype=local.dtype)
        return torch.cat([other, local] if process_index else [local, other])

    trainer.accelerator = SimpleNamespace(gather=gather, process_index=process_index)
    return trainer


def _rollout_rows() -> list[dict]:
    return [
        {"plan_rewards": [0.4], "plan_of_token": [1, 1]},
        {"plan_rewards": [0.0, 0.3], "plan_of_token": [1, 0, 2]},
    ]


@pytest.fixture
def parent_output(monkeypatch):
    """The parent's output for ``_rollout_rows`` (what TRL's step returns, episode advantages (B,))."""

    def generate_and_score(self, inputs):
        return {"completion_ids": torch.zeros(len(inputs), 4, dtype=torch.long), "advantages": torch.ones(2)}

    monkeypatch.setattr(SharedPromptTrainer, "_generate_and_score_completions", generate_and_score)


def test_the_trainer_replaces_episode_advantages_with_per_plan_ones(parent_output):
    trainer = _bare_trainer(turn_credit=True)
    output = trainer._generate_and_score_completions(_rollout_rows())
    # the group's first plans average 0.2: +0.2 and -0.2; the revision gained 0.3
    expected = torch.tensor([[0.2, 0.2, 0.0, 0.0], [-0.2, 0.0, 0.3, 0.0]])
    assert torch.allclose(output["advantages"], expected)
    assert trainer._metrics["train"]["revise/revision_gain"] == [pytest.approx(0.3)]


def test_the_first_plans_baseline_is_the_group_across_processes(parent_output):
    # process 1 of 2: the gathered first plans are (0.9, 0.9 | 0.4, 0.0); its rows are the second group
    trainer = _bare_trainer(turn_credit=True, process_index=1, other_first_rewards=(0.9, 0.9))
    output = trainer._generate_and_score_completions(_rollout_rows())
    assert output["advantages"][:, 0].tolist() == pytest.approx([0.2, -0.2])


def test_without_turn_credit_the_episode_advantages_stay(parent_output):
    output = _bare_trainer(turn_credit=False)._generate_and_score_completions(_rollout_rows())
    assert output["advantages"].tolist() == [1.0, 1.0]


def test_turn_credit_without_revision_episodes_is_a_clear_error(parent_output):
    with pytest.raises(ValueError, match="plan_rewards, plan_of_token missing"):
        _bare_trainer(turn_credit=True)._generate_and_score_completions([{}, {}])
