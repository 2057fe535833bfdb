"""``episode_mode: revise``: GRPO on revision episodes (``fleet_rl.revision``) inside TRL's GRPOTrainer.

Each rollout is a conversation: a plan, the kernel's verdict as a user message, a revised plan, up to
``revise_max_turns`` plans, stopping early once a plan runs every job. It needs no tool calls, so a small
model that cannot write them (SmolLM2-135M) still learns from the kernel's feedback, and its own chat
template renders the conversation. ``train_grpo.py`` builds:

    GRPOTrainer(
        reward_funcs=[revision_reward],
        rollout_func=revision_rollout(dataset, max_turns, turn_cost),   # plays the episodes
        ...)

- ``revision_rollout`` gets the prompts alone (TRL's ``rollout_func`` contract), so it finds each prompt's
  row, and so its scenario, in the training dataset by the prompt's messages (``RowsByPrompt``: built once,
  a dict lookup per rollout). It generates each turn with the trainer's own generation
  (``_generate_single_turn``: transformers, paged, or vLLM, with the run's sampling settings; TRL 1.16) and
  returns the episode's tokens after the prompt with ``env_mask`` 0 on the verdicts, so only the policy's
  tokens carry the loss; plus ``episode_reward``, ``first_reward`` and ``turns`` columns for the reward,
  and ``plan_rewards`` and ``plan_of_token`` for per-turn credit (``turn_credit``).
- ``revision_reward`` is the episode reward: the last plan's ``fleet_reward`` minus ``turn_cost`` per
  verdict the policy had to revise after, so a plan that runs at once keeps its whole reward. It logs the
  first plan's reward beside it (``revise/first_reward``), and the turns per episode.

What GRPO compares is whole episodes of one prompt: the first plans differ, and so do the revisions. With
``turn_credit`` (``fleet_rl.training.turn_credit``) each plan gets its own advantage instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from fleet_rl.scenario import Scenario
from fleet_rl.solved_scenarios import solved_scenario

__all__ = ["RowsByPrompt", "episode_request", "revision_reward", "revision_rollout"]


def episode_request(row: dict):
    """The ``EpisodeRequest`` of a dataset row (``fleet_rl.training.dataset.scenario_rows``)."""
    from fleet_rl.env.feedback import EpisodeRequest

    return EpisodeRequest(
        scenario=Scenario.from_json(row["scenario"]),
        solved=solved_scenario(row["scenario"]),
        agent=row.get("agent") or "",
        given_plan=row.get("given_plan") or "",
    )


class RowsByPrompt:
    """Dataset rows by their prompt messages: one prompt is one request (scenario, agent, given parts)."""

    def __init__(self, rows: Iterable[dict]) -> None:
        self._rows = {self.key(row["prompt"]): row for row in rows}

    @staticmethod
    def key(prompt) -> str:
        return json.dumps(prompt, sort_keys=True, separators=(",", ":"))

    def request(self, prompt):
        row = self._rows.get(self.key(prompt))
        if row is None:
            raise KeyError("a revision rollout got a prompt that is not in its training dataset")
        return episode_request(row)


def revision_rollout(rows: Iterable[dict], max_turns: int, turn_cost: float):
    """A TRL ``rollout_func`` playing one revision episode per prompt of ``rows`` (module docstring)."""
    from fleet_rl.revision import run_revisions

    if max_turns < 2:
        raise ValueError(f"a revision episode needs max_turns >= 2 (a plan and a revision), got {max_turns}")
    rows_by_prompt = RowsByPrompt(rows)

    def rollout(prompts: list, trainer) -> dict:
        tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
        prompt_ids = trainer._tokenize_prompts(prompts)[0]
        requests = [rows_by_prompt.request(prompt) for prompt in prompts]

        def generate(contexts: list[list[int]], turn: int) -> list[list[int]]:
            # turn 1 as TRL's single-turn path asks; later turns one completion per history, as its tool loop
            first = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
            return trainer._generate_single_turn(contexts, None, {}, first if turn == 1 else 1)[0]

        episodes = run_revisions(
            prompt_ids,
            requests,
            generate,
            tokenizer,
            max_turns=max_turns,
            eos_token_ids=trainer.eos_token_ids,
        )
        return {
            "prompt_ids": [list(ids) for ids in prompt_ids],
            "completion_ids": [episode.completion_ids for episode in episodes],
            "logprobs": None,
            "env_mask": [episode.env_mask for episode in episodes],
            "episode_reward": [
                episode.verdicts[-1].reward - turn_cost * (episode.turns - 1) for episode in episodes
            ],
            "first_reward": [episode.verdicts[0].reward for episode in episodes],
            "turns": [episode.turns for episode in episodes],
            # per-turn credit (fleet_rl.training.turn_credit) reads each plan's reward and its tokens
            "plan_rewards": [[verdict.reward for verdict in episode.verdicts] for episode in episodes],
            "plan_of_token": [episode.plan_of_token for episode in episodes],
        }

    return rollout


def revision_reward(completions, episode_reward=None, first_reward=None, turns=None, **kwargs) -> list[float]:
    """TRL reward of ``episode_mode: revise``: each episode's reward (its last plan's ``fleet_reward``
    minus the turn cost per revision), computed by ``revision_rollout``; logs the first plans' reward and
    the turns."""
    if episode_reward is None:
        raise ValueError(
            "revision_reward needs GRPOTrainer(rollout_func=revision_rollout(...)): it reads the episode "
            "rewards"
        )
    log_metric = kwargs.get("log_metric")
    if callable(log_metric) and first_reward and turns:
        log_metric("revise/first_reward", sum(first_reward) / len(first_reward))
        log_metric("revise/turns_per_episode", sum(turns) / len(turns))
        log_metric("revise/revised_share", sum(turn > 1 for turn in turns) / len(turns))
    return [float(reward) for reward in episode_reward]
