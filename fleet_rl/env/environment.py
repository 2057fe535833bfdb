"""``FleetEnvironment``: the kernel as an OpenEnv environment, scored by the training reward.

An episode is one request (``reset``) and one or more plans (``step``):

- ``reset(seed=None, task="medium", split="train", mode="single", max_turns=4, turn_cost=0.01,
  agent=None, scenario=None)`` draws scenario ``seed`` of ``task`` (``make_scenario(task, seed, split)``;
  a random seed when None, reported back so the episode can be replayed) or takes the given ``scenario``
  JSON, and returns the request: the chat messages the training prompts use, the scenario, and for the
  ``multiagent`` task the agent's job and the other jobs' given parts (``fleet_rl.multiagent``; ``agent``
  picks which job's agent, default the one the dataset would draw).
- ``step(FleetAction(plan=<completion>))`` scores the completion through ``rewards.fleet_reward`` (exactly
  the training reward path) and returns the kernel's feedback (``fleet_rl/env/feedback.py``).

Modes:

- ``single``: one plan, then done; the step reward is the plan's training reward.
- ``refine``: up to ``max_turns`` plans, each revised from the previous verdict. The episode ends when the
  agent marks a plan ``final``, when the turns run out, or when a plan reaches the optimum (reward 1.0,
  nothing left to gain). The *episode reward* is the final plan's reward minus ``turn_cost`` per extra turn:
  ``R_T - turn_cost * (T - 1)``. Each step pays out its increment, ``r_1 = R_1`` and
  ``r_t = R_t - R_{t-1} - turn_cost``, so the step rewards sum to the episode reward whatever happens in
  between. Stalling cannot pay: resubmitting a plan, or a worse plan to probe the kernel before the good
  one, only adds turn costs, and the best return is the best plan submitted first and marked final.

A multi-agent request is the ``multiagent`` task in either mode: the answer is the agent's own part, merged
with the given parts and scored by its contribution (the training reward's multi-agent path). Run one
session per job (``agent=<job id>``) for every agent of a scenario.

Sessions share nothing but the process's cache of solved scenarios (thread-safe), so the server runs many
at once (``SUPPORTS_CONCURRENT_SESSIONS``). Misuse raises ``EpisodeError`` with a precise message (the server
answers it with a 4xx): an unknown task or mode, a step before ``reset`` or after the episode is done.
"""

from __future__ import annotations

import math
import random
import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from fleet_rl.env.feedback import EpisodeRequest, given_plan_json, verdict
from fleet_rl.env.models import MODES, FleetAction, FleetObservation, FleetState
from fleet_rl.multiagent import agent_request
from fleet_rl.prompts import build_messages
from fleet_rl.scenario import Scenario
from fleet_rl.scenario_generator import SPLITS, TASKS, make_scenario
from fleet_rl.solved_scenarios import solved_scenario

__all__ = [
    "DEFAULT_MAX_TURNS",
    "DEFAULT_TURN_COST",
    "MAX_SEED",
    "MAX_TURNS",
    "MAX_TURN_COST",
    "EpisodeError",
    "FleetEnvironment",
]

DEFAULT_MAX_TURNS = 4
DEFAULT_TURN_COST = 0.01  # a tenth of what a 14 %-of-optimum improvement earns (0.7 × 0.14)
MAX_TURNS = 16  # an episode longer than this is refused (bounds a session's work and memory)
MAX_TURN_COST = 0.1
MAX_SEED = 2**31 - 1
_OPTIMAL_REWARD = 1.0 - 1e-9


class EpisodeError(ValueError):
    """A request the episode cannot take; ``status_code`` is the HTTP status the server answers with
    (400: a bad parameter, 409: a step out of turn)."""

    def __init__(self, message: str, status_code: int = 400) -> None:
        super().__init__(message)
        self.status_code = status_code


class FleetEnvironment(Environment[FleetAction, FleetObservation, FleetState]):
    """The fleet planning environment (see the module docstring)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = FleetState()
        self._request: EpisodeRequest | None = None
        self._base: dict[str, Any] = {}  # the request fields every observation of the episode repeats

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task: str = "medium",
        split: str = "train",
        mode: str = "single",
        max_turns: int = DEFAULT_MAX_TURNS,
        turn_cost: float = DEFAULT_TURN_COST,
        agent: str | None = None,
        scenario: str | None = None,
        **unknown: Any,
    ) -> FleetObservation:
        """Start an episode (see the module docstring); ``EpisodeError`` names any bad parameter."""
        if unknown:
            raise EpisodeError(
                f"unknown reset parameter(s) {sorted(unknown)}; valid: {', '.join(_RESET_PARAMS)}"
            )
        seed = _check_request(task, split, mode, seed)
        max_turns, turn_cost = _check_turns(mode, max_turns, turn_cost)
        if scenario is not None:
            the_scenario = _scenario_from(scenario)
        else:
            try:
                the_scenario = make_scenario(task, seed, split)
            except RuntimeError as error:  # a seed whose draws all fail the tier's constraints
                raise EpisodeError(str(error)) from error
        solved = solved_scenario(the_scenario)
        given_dict = None
        if task == "multiagent":  # the others' parts are their optimal parts, as in the training dataset
            agent = _check_agent(agent, the_scenario, agent_request(the_scenario, seed)[0])
            given_dict = {"jobs": [job for job in solved.optimal_plan["jobs"] if job["id"] != agent]}
        elif agent:
            raise EpisodeError("agent is only for the 'multiagent' task")
        given = given_plan_json(given_dict)
        self._request = EpisodeRequest(the_scenario, solved, agent or "", given)
        messages = build_messages(the_scenario, agent=agent or None, given_plan=given_dict)
        self._state = FleetState(
            episode_id=episode_id or str(uuid.uuid4()),
            step_count=0,
            task=task,
            seed=seed,
            split=split,
            mode=mode,
            max_turns=max_turns,
            turn_cost=turn_cost,
            agent=agent or "",
        )
        self._base = {
            "task": task,
            "seed": seed,
            "split": split,
            "mode": mode,
            "max_turns": max_turns,
            "messages": messages,
            "prompt": messages[-1]["content"],
            "scenario": the_scenario.to_json(),
            "agent": agent or "",
            "given_plan": given,
        }
        return FleetObservation(**self._base, turn=0, done=False, reward=None)

    def step(self, action: FleetAction, timeout_s: float | None = None, **kwargs: Any) -> FleetObservation:
        """Score one plan and return the verdict (see the module docstring)."""
        if self._request is None:
            raise EpisodeError(
                "no episode: call reset first (HTTP /reset and /step are stateless; episodes run over the "
                "WebSocket at /ws, e.g. with fleet_rl.env.client.FleetEnv)",
                status_code=409,
            )
        state = self._state
        if state.done:
            raise EpisodeError("the episode is done: call reset to start another", status_code=409)
        if not isinstance(action, FleetAction):
            raise EpisodeError(f"expected a FleetAction, got {type(action).__name__}")
        result = verdict(self._request, action.plan)
        previous = state.plan_rewards[-1] if state.plan_rewards else None
        turn = len(state.plan_rewards) + 1
        step_reward = result.reward if previous is None else result.reward - previous - state.turn_cost
        done = (
            state.mode == "single"
            or action.final
            or turn >= state.max_turns
            or result.reward >= _OPTIMAL_REWARD
        )
        state.plan_rewards = [*state.plan_rewards, result.reward]
        state.step_count = turn
        if done:
            state.done = True
            state.episode_reward = episode_reward(state.plan_rewards, state.turn_cost)
        return FleetObservation(
            **self._base,
            turn=turn,
            done=done,
            reward=step_reward,
            plan_reward=result.reward,
            percent_of_optimum=result.percent_of_optimum,
            parse_error=result.parse_error,
            degenerate=result.degenerate,
            valid=result.valid,
            jobs=result.jobs,
            reasons=result.reasons,
            feedback=result.text(turn, state.max_turns),
        )

    async def step_async(
        self, action: FleetAction, timeout_s: float | None = None, **kwargs: Any
    ) -> FleetObservation:
        """``step``, run by the server on its event loop rather than in the session's worker thread.

        openenv awaits ``step_async`` when an environment overrides it. A step is bounded CPU work (one plan
        of at most 20,000 characters against an already solved scenario, ~1-2 ms) that holds the GIL
        throughout, so a worker thread adds only its hand-off, which cost the server more CPU than the step
        itself (``server_cpu_ms_per_episode`` of ``benchmarks/server/load.py``, docs/server.md). ``reset``
        stays in the worker thread, since the first reset of a scenario draws and solves it (~10-30 ms) and
        the loop serves the other sessions meanwhile."""
        return self.step(action, timeout_s=timeout_s, **kwargs)

    @property
    def state(self) -> FleetState:
        return self._state

    @property
    def request(self) -> EpisodeRequest | None:
        """The episode's request (scenario, solved scenario, agent, given parts); None before reset."""
        return self._request

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="libratio_fleet",
            description=(
                "Plan a GPU cluster (GPUs, tensor parallelism, per-module precision, micro-batch, "
                "checkpointing, sharding, KV cache) for its jobs; scored by the Agentic Kernel simulator "
                "against the exact optimum."
            ),
            version="0.1.0",
        )


def episode_reward(plan_rewards: list[float], turn_cost: float) -> float:
    """The final plan's reward minus ``turn_cost`` per turn after the first (the step rewards' sum)."""
    return plan_rewards[-1] - turn_cost * (len(plan_rewards) - 1)


_RESET_PARAMS = ("seed", "episode_id", "task", "split", "mode", "max_turns", "turn_cost", "agent", "scenario")


def _check_request(task: object, split: object, mode: object, seed: object) -> int:
    if task not in TASKS:
        raise EpisodeError(f"unknown task {task!r}; valid tasks: {', '.join(TASKS)}")
    if split not in SPLITS:
        raise EpisodeError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    if mode not in MODES:
        raise EpisodeError(f"unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
    if seed is None:
        return random.SystemRandom().randrange(MAX_SEED + 1)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise EpisodeError(f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}")
    return seed


def _check_turns(mode: str, max_turns: object, turn_cost: object) -> tuple[int, float]:
    if mode == "single":
        return 1, 0.0
    if isinstance(max_turns, bool) or not isinstance(max_turns, int) or not 1 <= max_turns <= MAX_TURNS:
        raise EpisodeError(f"max_turns must be an integer in [1, {MAX_TURNS}], got {max_turns!r}")
    if (
        isinstance(turn_cost, bool)
        or not isinstance(turn_cost, int | float)
        or not math.isfinite(turn_cost)
        or not 0 <= turn_cost <= MAX_TURN_COST
    ):
        raise EpisodeError(f"turn_cost must be a number in [0, {MAX_TURN_COST}], got {turn_cost!r}")
    return max_turns, float(turn_cost)


def _check_agent(agent: object, scenario: Scenario, default: str) -> str:
    if agent is None or agent == "":
        return default
    if agent not in scenario.job_ids:
        raise EpisodeError(
            f"agent {agent!r} is not a job of the scenario; jobs: {', '.join(scenario.job_ids)}"
        )
    return str(agent)


def _scenario_from(text: object) -> Scenario:
    if not isinstance(text, str):
        raise EpisodeError("scenario must be the scenario's JSON text")
    try:
        return Scenario.from_json(text)
    except (ValueError, TypeError) as error:
        raise EpisodeError(f"scenario is not valid: {error}") from error
