"""``episode_mode`` options: checked before any model loads, with the option to change named."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fleet_rl.training.arguments import FleetScriptArguments
from fleet_rl.training.checks import check_episode_mode


def _args(**overrides) -> FleetScriptArguments:
    return FleetScriptArguments(**overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"episode_mode": "loop"}, "unknown episode_mode 'loop'; valid: single, refine, revise"),
        ({"episode_mode": "refine"}, "episode_mode 'refine' goes with reward_funcs \\[refinement_reward\\]"),
        ({"reward_funcs": ["refinement_reward"]}, "refinement_reward only with episode_mode 'refine'"),
        (
            {"episode_mode": "refine", "reward_funcs": ["refinement_reward"], "refine_max_turns": 1},
            "refine_max_turns must be 2 to 16",
        ),
        (
            {"episode_mode": "refine", "reward_funcs": ["refinement_reward"], "refine_turn_cost": 0.5},
            "refine_turn_cost must be in \\[0, 0.1\\]",
        ),
        ({"episode_mode": "revise"}, "episode_mode 'revise' goes with reward_funcs \\[revision_reward\\]"),
        ({"reward_funcs": ["revision_reward"]}, "revision_reward only with episode_mode 'revise'"),
        ({"turn_credit": True}, "turn_credit gives each plan of a revision episode its credit"),
        ({"job_credit": 1.5}, "job_credit must be in \\[0, 1\\] \\(0: off\\), got 1.5"),
        (
            {"episode_mode": "revise", "reward_funcs": ["revision_reward"], "job_credit": 0.5},
            "job_credit credits the jobs of one whole plan per answer: set episode_mode 'single' or "
            "job_credit 0",
        ),
        (
            {"job_credit": 0.5, "omitted_job_credit": 1.5},
            "in \\[0, 1\\] \\(None: the tiers' idle credit\\); got omitted_job_credit 1.5",
        ),
        ({"omitted_job_credit": -0.5}, "got omitted_job_credit -0.5"),  # out of range, even while off
        (
            {"job_credit": 0.5, "extra_job_credit": 0.0},
            "extra_job_credit credits the jobs list's end beside the jobs an answer leaves out",
        ),
        (
            {"job_credit": 0.5, "omitted_job_credit": 0.0, "extra_job_credit": -0.5},
            "it needs omitted_job_credit and a value in \\[0, 1\\]; got extra_job_credit -0.5",
        ),
        ({"sample_every_job_share": 0.5}, "below 1 only with sample_every_job true; got 0.5"),
        (
            {"sample_every_job": True, "sample_every_job_share": 0.0},
            "sample_every_job_share is the share of each group's answers sample_every_job constrains",
        ),
        (
            {"sample_every_job_train_opening": True},
            "sample_every_job_train_opening trains the openings sample_every_job writes",
        ),
        ({"explore_edit_rate": 1.0}, "explore_edit_rate must be in \\[0, 1\\) \\(0: off; a share"),
        ({"explore_repair_rate": -0.1}, "explore_repair_rate must be in \\[0, 1\\) \\(0: off; a share"),
        (
            {"explore_repair_rate": 0.5, "explore_repair_draws": 0},
            "explore_repair_draws is how many repairs to draw per repaired answer, at least 1: got 0",
        ),
        (
            {"explore_edit_rate": 0.5, "explore_repair_rate": 0.75},
            "explore_edit_rate \\+ explore_repair_rate is a share of the answers, at most 1: got 0.5 \\+ 0.7",
        ),
        (
            {
                "episode_mode": "refine",
                "reward_funcs": ["refinement_reward", "format_reward"],
                "explore_repair_rate": 0.5,
            },
            "explore_repair_rate changes one whole plan per answer or writes a revision episode's "
            "revisions: set episode_mode 'single' or 'revise', or explore_repair_rate 0",
        ),
        (
            {"episode_mode": "revise", "reward_funcs": ["revision_reward"], "explore_edit_rate": 0.25},
            "explore_edit_rate changes one whole plan per answer: set episode_mode 'single', or "
            "explore_edit_rate 0",
        ),
        (
            {"episode_mode": "revise", "reward_funcs": ["revision_reward"], "sample_every_job": True},
            "sample_every_job constrains one whole plan per answer: set episode_mode 'single'",
        ),
        (
            {"episode_mode": "revise", "reward_funcs": ["revision_reward", "format_reward"]},
            "reward_funcs must be \\[revision_reward\\] alone",
        ),
        (
            {"episode_mode": "revise", "reward_funcs": ["revision_reward"], "refine_max_turns": 17},
            "refine_max_turns must be 2 to 16",
        ),
    ],
)
def test_inconsistent_options_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        check_episode_mode(_args(**overrides), SimpleNamespace(max_tool_calling_iterations=None))


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
    check_episode_mode(_args(), SimpleNamespace(max_tool_calling_iterations=None))  # single: nothing to do
    training_args = SimpleNamespace(max_tool_calling_iterations=None)  # revise: no tool loop to bound
    check_episode_mode(_args(episode_mode="revise", reward_funcs=["revision_reward"]), training_args)
    assert training_args.max_tool_calling_iterations is None


def test_revise_episodes_take_repaired_revisions():
    args = _args(
        episode_mode="revise", reward_funcs=["revision_reward"], turn_credit=True, explore_repair_rate=0.5
    )
    check_episode_mode(
        args, SimpleNamespace(max_tool_calling_iterations=None)
    )  # no error: the rollout writes them


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


def test_explore_edits_refuse_vllm_whose_sampling_log_probabilities_they_would_break():
    training_args = SimpleNamespace(max_tool_calling_iterations=None, use_vllm=True)
    with pytest.raises(ValueError, match="explore_edit_rate rewrites sampled tokens"):
        check_episode_mode(_args(explore_edit_rate=0.25), training_args)
    check_episode_mode(_args(explore_edit_rate=0.25), SimpleNamespace(use_vllm=False))
    with pytest.raises(ValueError, match="explore_repair_rate rewrites sampled tokens"):
        check_episode_mode(_args(explore_repair_rate=0.5), training_args)
    check_episode_mode(_args(explore_edit_rate=0.5, explore_repair_rate=0.5), SimpleNamespace(use_vllm=False))


def test_every_job_sampling_refuses_vllm_which_runs_no_logits_processor_of_ours():
    training_args = SimpleNamespace(max_tool_calling_iterations=None, use_vllm=True)
    with pytest.raises(ValueError, match="sample_every_job adds a logits processor"):
        check_episode_mode(_args(sample_every_job=True), training_args)
    check_episode_mode(_args(sample_every_job=True), SimpleNamespace(use_vllm=False))
