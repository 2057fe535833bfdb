"""Reward names from configs: the registry, dotted paths, and clear errors."""

from __future__ import annotations

import pytest

from fleet_rl.training.reward_resolution import resolve_reward_funcs
from rewards import REWARD_FUNCS, fleet_reward, format_reward


def test_registry_names_and_dotted_paths():
    assert resolve_reward_funcs(["fleet_reward", "rewards.components.format_reward"]) == [
        fleet_reward,
        format_reward,
    ]


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            ["fleet_rewards"],
            "unknown reward function 'fleet_rewards'; valid names: " + ", ".join(REWARD_FUNCS),
        ),
        (["no_such_module.fn"], "cannot import module 'no_such_module'"),
        (["rewards.components.nothing"], "has no callable 'nothing'"),
        ([], "no reward functions given"),
    ],
)
def test_unknown_names_list_the_valid_ones(names, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_reward_funcs(names)
