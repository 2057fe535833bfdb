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

**Repaired revisions** (``explore_repair_rate: q`` in revise mode; ``RevisionRepairs``). A 135M policy's own
revisions mostly resubmit its plan: after the verdict it has never seen what a fix looks like. With
probability ``q`` a revision is written for it instead: ``fleet_rl/training/plan_repairs.py``'s repair of the
plan the verdict judged (each job it marks out of memory, unsupported, unstable or invalid set to one of the
prompt's ``Fits`` settings; with ``place_omitted`` the jobs left out placed, with ``too_slow`` the jobs under
their floors repaired, the best of ``draws`` by ``fleet_reward``). The written plan follows the verdict in
the episode's tokens, is scored like any plan and is trained on (``env_mask`` 1): with ``turn_credit`` its
advantage is its reward minus the plan it repaired's, so the policy is pushed towards the fix where it
helped, conditioned on the verdict that named the fault. This is the single-answer repairs' local step put
where a reviser would take it. Training only (held-out episodes are the policy's own), whole-plan rows only;
which revisions are written is drawn from the run's seed, the step, the episode and the turn, so a resumed
run draws the same. ``revise/repaired_share`` logs the share of episodes with a written revision and
``revise/repair_gain`` the written revisions' mean gain over the plans they repaired.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from fleet_rl.scenario import Scenario
from fleet_rl.solved_scenarios import solved_scenario

__all__ = ["RevisionRepairs", "RowsByPrompt", "episode_request", "revision_reward", "revision_rollout"]


@dataclass(frozen=True)
class RevisionRepairs:
    """Which revisions training writes for the policy (module docstring): with probability ``rate``, the
    repair of the plan the verdict judged, with ``plan_repairs.best_repair``'s options."""

    rate: float
    place_omitted: bool = False
    too_slow: bool = False
    draws: int = 1

    def __post_init__(self) -> None:
        if not 0.0 < self.rate <= 1.0:
            raise ValueError(f"a revision repair rate is a share of revisions in (0, 1], got {self.rate}")
        if self.draws < 1:
            raise ValueError(f"draws is how many repairs to draw, at least 1: got {self.draws}")

    def written(
        self, episode, rng: random.Random, encode: Callable[[str], list[int]], end_id: int, max_length: int
    ) -> list[int] | None:
        """The ids (``encode`` of the text, then ``end_id``) of the repaired last plan of ``episode``, drawn
        from ``rng``; ``None`` when this revision is not drawn, the row is one agent's, no repair applies, or
        it is longer than ``max_length`` tokens."""
        from fleet_rl.training.plan_repairs import best_repair
        from rewards import fleet_reward

        if rng.random() >= self.rate or episode.request.agent:
            return None
        repair = best_repair(
            episode.final_answer,
            episode.request.scenario,
            rng,
            fleet_reward,
            draws=self.draws,
            place_omitted=self.place_omitted,
            too_slow=self.too_slow,
        )
        if repair is None:
            return None
        ids = [*encode(repair[0]), end_id]
        return ids if len(ids) <= max_length else None


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


def _plan_end(episode, eos_token_ids) -> int:
    """The end-of-turn id the episode's last plan ended with (the first of ``eos_token_ids`` where it was cut
    off): what a plan written after it ends with."""
    last = max(index for index, plan in enumerate(episode.plan_of_token) if plan)
    token = episode.completion_ids[last]
    return token if token in eos_token_ids else eos_token_ids[0]


def revision_rollout(
    rows: Iterable[dict], max_turns: int, turn_cost: float, repairs: RevisionRepairs | None = None
):
    """A TRL ``rollout_func`` playing one revision episode per prompt of ``rows``, with ``repairs`` writing a
    share of the revisions in training (module docstring)."""
    from fleet_rl.revision import run_revisions

    if max_turns < 2:
        raise ValueError(f"a revision episode needs max_turns >= 2 (a plan and a revision), got {max_turns}")
    rows_by_prompt = RowsByPrompt(rows)
    calls = {"step": -1, "call": 0}  # rollouts in the current step: a resampled batch draws anew

    def rollout(prompts: list, trainer) -> dict:
        tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
        prompt_ids = trainer._tokenize_prompts(prompts)[0]
        requests = [rows_by_prompt.request(prompt) for prompt in prompts]

        def generate(contexts: list[list[int]], turn: int) -> list[list[int]]:
            # turn 1 as TRL's single-turn path asks; later turns one completion per history, as its tool loop
            first = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
            return trainer._generate_single_turn(contexts, None, {}, first if turn == 1 else 1)[0]

        written = None
        if repairs is not None and trainer.model.training:
            step = trainer.state.global_step
            calls["call"] = calls["call"] + 1 if calls["step"] == step else 0
            calls["step"] = step
            draw = f"fleet_rl/revision_repairs/{trainer.args.seed}/{step}/{calls['call']}"
            draw += f"/{trainer.accelerator.process_index}"

            def encode(text: str) -> list[int]:
                return tokenizer.encode(text, add_special_tokens=False)

            def written(index: int, episode, turn: int) -> list[int] | None:
                end = _plan_end(episode, trainer.eos_token_ids)
                rng = random.Random(f"{draw}/{index}/{turn}")
                return repairs.written(episode, rng, encode, end, trainer.max_completion_length)

        episodes = run_revisions(
            prompt_ids,
            requests,
            generate,
            tokenizer,
            max_turns=max_turns,
            eos_token_ids=trainer.eos_token_ids,
            written=written,
        )
        output = {
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
        if repairs is not None:  # the written revisions' gains over the plans they repaired
            output["repair_gains"] = [
                [
                    episode.verdicts[k - 1].reward - episode.verdicts[k - 2].reward
                    for k in episode.written_turns
                ]
                for episode in episodes
            ]
        return output

    return rollout


def revision_reward(
    completions, episode_reward=None, first_reward=None, turns=None, repair_gains=None, **kwargs
) -> list[float]:
    """TRL reward of ``episode_mode: revise``: each episode's reward (its last plan's ``fleet_reward``
    minus the turn cost per revision), computed by ``revision_rollout``; logs the first plans' reward, the
    turns and the written revisions (repaired share and gain)."""
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
    if callable(log_metric) and repair_gains:
        gains = [gain for episode in repair_gains for gain in episode or []]
        log_metric(
            "revise/repaired_share", sum(bool(episode) for episode in repair_gains) / len(repair_gains)
        )
        if gains:
            log_metric("revise/repair_gain", sum(gains) / len(gains))
    return [float(reward) for reward in episode_reward]
