"""``episode_mode``, credit and repair options: checked before any model loads, with the option to change
named."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fleet_rl.training.arguments import FleetScriptArguments
from fleet_rl.training.checks import check_credit_and_exploration, check_episode_mode


def _args(**overrides) -> FleetScriptArguments:
    return FleetScriptArguments(**overrides)


def _check(args: FleetScriptArguments, training_args) -> None:
    check_episode_mode(args, training_args)
    check_credit_and_exploration(args, training_args)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"episode_mode": "loop"}, "unknown episode_mode 'loop'; valid: single, refine"),
        ({"episode_mode": "revise"}, "'revise' \\(revision episodes\\) was retired in issue #69"),
        ({"episode_mode": "refine"}, "episode_mode 'refine' goes with reward_funcs \\[refinement_reward\\]"),
        ({"reward_funcs": ["refinement_reward"]}, "refinement_reward only with episode_mode 'refine'"),
        (
            {"episode_mode": "refine", "reward_funcs": ["refinement_reward"], "refine_max_turns": 1},
            "refine_max_turns must be 2 to 16",
        ),
        (
            {"episode_mode": "refine", "reward_funcs": ["refinement_reward"], "refine_max_turns": 17},
            "refine_max_turns must be 2 to 16",
        ),
        (
            {"episode_mode": "refine", "reward_funcs": ["refinement_reward"], "refine_turn_cost": 0.5},
            "refine_turn_cost must be in \\[0, 0.1\\]",
        ),
        ({"job_credit": 1.5}, "job_credit must be in \\[0, 1\\] \\(0: off\\), got 1.5"),
        (
            {"episode_mode": "refine", "reward_funcs": ["refinement_reward"], "job_credit": 0.5},
            "job_credit works on one whole plan per answer: set episode_mode 'single' or job_credit 0",
        ),
        (
            {"job_credit": 0.5, "omitted_job_credit": 1.5},
            "in \\[0, 1\\] \\(None: the tiers' idle credit\\); got omitted_job_credit 1.5",
        ),
        ({"omitted_job_credit": -0.5}, "got omitted_job_credit -0.5"),  # out of range, even while off
        ({"explore_repair_rate": -0.1}, "explore_repair_rate must be in \\[0, 1\\) \\(0: off; a share"),
        ({"explore_repair_rate": 1.0}, "explore_repair_rate must be in \\[0, 1\\) \\(0: off; a share"),
        (
            {
                "episode_mode": "refine",
                "reward_funcs": ["refinement_reward", "format_reward"],
                "explore_repair_rate": 0.5,
            },
            "explore_repair_rate works on one whole plan per answer: set episode_mode 'single' or "
            "explore_repair_rate 0",
        ),
    ],
)
def test_inconsistent_options_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        _check(_args(**overrides), SimpleNamespace(max_tool_calling_iterations=None))


def test_refine_bounds_the_tool_loop_by_the_checks_it_allows():
    training_args = SimpleNamespace(max_tool_calling_iterations=None)
    args = _args(
        episode_mode="refine", reward_funcs=["refinement_reward", "format_reward"], refine_max_turns=4
    )
    check_episode_mode(args, training_args)
    assert training_args.max_tool_calling_iterations == 3
    training_args = SimpleNamespace(max_tool_calling_iterations=1)  # a user's own bound is kept
    check_episode_mode(args, training_args)
    assert training_args.max_tool_calling_iterations == 1
    training_args = SimpleNamespace(max_tool_calling_iterations=None)  # single: nothing to bound
    check_episode_mode(_args(), training_args)
    assert training_args.max_tool_calling_iterations is None


def test_env_base_urls_need_refine_and_urls():
    with pytest.raises(ValueError, match="set episode_mode 'refine' too"):
        check_episode_mode(_args(env_base_urls=["http://a:8000"]), SimpleNamespace())
    args = _args(episode_mode="refine", reward_funcs=["refinement_reward"], env_base_urls=["a:8000"])
    with pytest.raises(ValueError, match="'a:8000' is not an http"):
        check_episode_mode(args, SimpleNamespace(max_tool_calling_iterations=None))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"env_base_urls": ["http://a:8000", "http://a:8000"]}, "lists a server twice"),
        ({"env_call_timeout_s": 0.0}, "env_call_timeout_s must be > 0 seconds, got 0.0"),
        ({"env_connect_timeout_s": -1.0}, "env_connect_timeout_s must be > 0 seconds"),
        ({"env_all_down_timeout_s": 0.0}, "env_all_down_timeout_s must be > 0 seconds"),
    ],
)
def test_env_server_options_are_checked(overrides, message):
    args = _args(episode_mode="refine", reward_funcs=["refinement_reward"], **overrides)
    with pytest.raises(ValueError, match=message):
        check_episode_mode(args, SimpleNamespace(max_tool_calling_iterations=None))


def test_repairs_refuse_vllm_whose_sampling_log_probabilities_they_would_break():
    with pytest.raises(ValueError, match="explore_repair_rate rewrites sampled tokens"):
        check_credit_and_exploration(_args(explore_repair_rate=0.5), SimpleNamespace(use_vllm=True))
    check_credit_and_exploration(_args(explore_repair_rate=0.5), SimpleNamespace(use_vllm=False))
