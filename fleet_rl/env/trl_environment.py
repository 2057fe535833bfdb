"""Refinement episodes inside TRL's GRPOTrainer: an ``environment_factory`` and the reward that reads it.

``GRPOTrainer(environment_factory=FleetToolEnvironment, reward_funcs=[refinement_reward], ...)`` (what
``train_grpo.py`` builds with ``episode_mode: refine``) runs one episode per rollout, in process:

1. TRL calls ``reset(**row)`` with the dataset row (``scenario``, ``task``, ``seed``, ``agent``,
   ``given_plan``, as ``fleet_rl.training.dataset`` builds it); the episode is that row's request, and the
   returned text, appended to the user message, tells the model about the tool and its cost.
2. During generation the model may call the tool ``check_plan(plan)`` to have a draft scored: it gets the
   kernel's verdict (reward, % of optimum, each job's status and memory, the reasons), the breadcrumbs to
   revise from. At most ``max_turns - 1`` checks; the last turn is the answer.
3. Its final message is the answer. ``refinement_reward`` submits it as the episode's final plan: the
   reward is the final plan's training reward minus ``turn_cost`` per check before it
   (``FleetEnvironment``'s episode reward), so checking pays only when the revision gains more than it costs,
   and a model that answers well at once keeps the whole reward.

The tool needs a chat template that renders tool calls and a response parser for them
(``trl.chat_template_utils.add_response_schema``: Llama 3.1, Qwen 2.5/3 and a few more);
``tool_chat_template`` gives local models one (``train_grpo.py`` applies it).

Scale-out: with a ``pool`` (``fleet_rl.env.server_pool.ServerPool``; ``train_grpo.py`` makes one from
``env_base_urls`` and shares it between every instance) the episodes run on environment servers
(``python -m fleet_rl.server`` on machines without a GPU) while the trainer generates, e.g. with vLLM in
server mode: each instance holds one WebSocket session on a server the pool picks (the least loaded), and
when that server fails the episode is re-created on another and its drafts replayed
(``fleet_rl/env/remote_episode.py``), so the rewards are exactly the in-process ones (the server scores with
the same code; ``tests/server``, ``tests/env/test_failover.py``). ``base_urls`` alone gives the instance a
pool of its own (its first server drawn at random, so that many such instances spread). docs/scale-out.md
says what happens on each fault.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from fleet_rl.env.environment import DEFAULT_MAX_TURNS, DEFAULT_TURN_COST, FleetEnvironment
from fleet_rl.env.models import FleetAction
from fleet_rl.env.remote_episode import RemoteEpisode
from fleet_rl.env.server_pool import ServerPool
from rewards.parsing import MAX_COMPLETION_CHARS, completion_text

__all__ = ["FleetToolEnvironment", "refinement_reward", "tool_chat_template"]


class FleetToolEnvironment:
    """One refinement episode per rollout for TRL's ``environment_factory`` (see the module docstring).
    TRL offers the model every public method but ``reset`` as a tool, so the rest is private."""

    def __init__(
        self,
        max_turns: int = DEFAULT_MAX_TURNS,
        turn_cost: float = DEFAULT_TURN_COST,
        base_urls: Sequence[str] = (),
        pool: ServerPool | None = None,
    ) -> None:
        if max_turns < 2:
            raise ValueError(
                f"a refinement episode needs max_turns >= 2 (a check and an answer), got {max_turns}"
            )
        self._max_turns = max_turns
        self._turn_cost = turn_cost
        if base_urls and pool is not None:
            raise ValueError("give FleetToolEnvironment base_urls or a pool, not both")
        if base_urls:  # a pool of its own, starting at a random server so that many instances spread
            pool = ServerPool(base_urls, first=random.Random().randrange(len(base_urls)))
        self._env = RemoteEpisode(pool) if pool is not None else FleetEnvironment()

    def reset(self, **row) -> str:
        """Start the episode of dataset row ``row``; return the tool instructions for the prompt."""
        self._env.reset(
            task=row["task"],
            seed=int(row["seed"]),
            scenario=row["scenario"],
            agent=row.get("agent") or None,
            mode="refine",
            max_turns=self._max_turns,
            turn_cost=self._turn_cost,
        )
        return (
            f"\nBefore answering you may check up to {self._max_turns - 1} draft plan(s) with the check_plan "
            f"tool; each check costs {self._turn_cost:g} of the reward. Then answer with your final plan."
        )

    def check_plan(self, plan: str) -> str:
        """Score a draft plan in the cluster simulator and return its verdict, without ending the episode.

        Args:
            plan: The draft plan as JSON text, {"jobs": [...]}, exactly as the final answer would give it.

        Returns:
            The verdict: reward, percent of the optimum, each job's status, GPUs and memory per GPU, and the
            reasons a job does not run.
        """
        state = self._env.state
        if state.done:
            return "The episode is over."
        if len(state.plan_rewards) >= self._max_turns - 1:
            return "No checks left: answer with your final plan."
        text = plan if isinstance(plan, str) else json.dumps(plan)
        return self._env.step(FleetAction(plan=text[:MAX_COMPLETION_CHARS])).feedback

    def _finish(self, completion) -> float:
        """Submit the rollout's final answer as the episode's final plan; the episode reward (idempotent:
        several reward functions may ask). For ``refinement_reward``; not a tool."""
        state = self._env.state
        if not state.done:
            text = completion_text(completion) or ""
            self._env.step(FleetAction(plan=text[:MAX_COMPLETION_CHARS], final=True))
        return float(self._env.state.episode_reward)

    @property
    def checks(self) -> int:
        """Drafts checked so far (the final answer not counted)."""
        return len(self._env.state.plan_rewards) - int(self._env.state.done)


def refinement_reward(completions, environments=None, **kwargs) -> list[float]:
    """TRL reward: each rollout's episode reward (final answer's training reward minus the check costs).
    Needs ``environments`` from ``GRPOTrainer(environment_factory=FleetToolEnvironment)``."""
    if environments is None:
        raise ValueError("refinement_reward needs GRPOTrainer(environment_factory=FleetToolEnvironment, ...)")
    rewards = [env._finish(completion) for completion, env in zip(completions, environments, strict=True)]
    log_metric = kwargs.get("log_metric")
    if callable(log_metric) and environments:
        log_metric("refine/checks_per_episode", sum(env.checks for env in environments) / len(environments))
    return rewards


def tool_chat_template(tokenizer) -> None:
    """Give ``tokenizer`` a chat template TRL can run tools with, if it lacks one: the Llama 3.1 template
    for Llama-3-layout tokens (the tiny CPU model), Qwen 2.5's for ChatML tokens (SmolLM2). Raises
    ``ValueError`` when neither fits."""
    from trl.chat_template_utils import llama3_1_chat_template, qwen2_5_chat_template, supports_tool_calling

    if supports_tool_calling(tokenizer):
        return
    vocabulary = tokenizer.get_vocab()
    if "<|start_header_id|>" in vocabulary and "<|eot_id|>" in vocabulary:
        tokenizer.chat_template = llama3_1_chat_template
    elif "<|im_start|>" in vocabulary and "<|im_end|>" in vocabulary:
        tokenizer.chat_template = qwen2_5_chat_template
    else:
        raise ValueError(
            "episode_mode 'refine' needs a chat template with tool calls (Llama 3.1, Qwen 2.5/3, ...); "
            "this tokenizer has neither Llama 3 nor ChatML special tokens"
        )
