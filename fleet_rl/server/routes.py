"""The routes the server adds to openenv's app: ``/tasks``, ``/grader`` and ``/baseline``.

- ``GET /tasks``: the task tiers with their generator parameters, the modes, splits, defaults and limits.
- ``POST /grader``: replay an episode log (its request and the plans, in order) in a fresh environment and
  return every plan's training reward, the step rewards and the episode reward. Deterministic: the scenario
  is a pure function of (task, seed, split), the reward of (scenario, completion).
- ``GET /baseline?task=&seed=``: each baseline planner's answer to that request (``fleet_rl.baselines``,
  answered as ``eval.py`` does) scored by the same reward, and the optimum's objective.

Bad requests are the caller's fault and get 4xx: pydantic validation (422) for wrong types and unknown
fields, ``EpisodeError`` (400/409) for what only the environment can judge.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from fleet_rl.baselines import BASELINES
from fleet_rl.env.environment import (
    DEFAULT_MAX_TURNS,
    DEFAULT_TURN_COST,
    MAX_SEED,
    MAX_TURN_COST,
    MAX_TURNS,
    EpisodeError,
    FleetEnvironment,
)
from fleet_rl.env.feedback import verdict
from fleet_rl.env.models import MODES, FleetAction
from fleet_rl.scenario_generator import SPLITS, TIERS
from rewards.parsing import MAX_COMPLETION_CHARS

__all__ = ["GraderRequest", "router"]

router = APIRouter(tags=["Fleet"])


class GraderRequest(BaseModel):
    """An episode log: the ``reset`` parameters and the completions submitted, in order. The last plan is
    final (a log of a finished episode); a plan after the episode ended is an error."""

    model_config = ConfigDict(extra="forbid")

    task: str = "medium"
    seed: int = Field(ge=0, le=MAX_SEED)
    split: str = "train"
    mode: str = "single"
    max_turns: int = Field(default=DEFAULT_MAX_TURNS, ge=1, le=MAX_TURNS)
    turn_cost: float = Field(default=DEFAULT_TURN_COST, ge=0.0, le=MAX_TURN_COST)
    agent: str | None = None
    scenario: str | None = None
    plans: list[str] = Field(min_length=1, max_length=MAX_TURNS)


@router.get("/tasks")
def tasks() -> dict[str, Any]:
    """The task tiers and their generator parameters, the episode modes, and the server's limits."""
    return {
        "tasks": {name: dataclasses.asdict(spec) for name, spec in TIERS.items()},
        "modes": list(MODES),
        "splits": list(SPLITS),
        "baselines": list(BASELINES),
        "defaults": {
            "task": "medium",
            "split": "train",
            "mode": "single",
            "max_turns": DEFAULT_MAX_TURNS,
            "turn_cost": DEFAULT_TURN_COST,
        },
        "limits": {
            "max_turns": MAX_TURNS,
            "max_turn_cost": MAX_TURN_COST,
            "max_seed": MAX_SEED,
            "max_plan_chars": MAX_COMPLETION_CHARS,
        },
    }


@router.post("/grader")
def grader(log: GraderRequest) -> dict[str, Any]:
    """Replay ``log`` in a fresh environment; the rewards every plan earned and the episode's."""
    for plan in log.plans:
        if len(plan) > MAX_COMPLETION_CHARS:
            raise EpisodeError(f"a plan is longer than {MAX_COMPLETION_CHARS} characters")
    env = FleetEnvironment()
    request = log.model_dump(exclude={"plans"})
    env.reset(**request)
    observations = []
    for turn, plan in enumerate(log.plans, start=1):
        if env.state.done:
            raise EpisodeError(f"the episode ended at turn {turn - 1}; the log has {len(log.plans)} plans")
        observations.append(env.step(FleetAction(plan=plan, final=turn == len(log.plans))))
    return {
        "request": request,
        "plan_rewards": [obs.plan_reward for obs in observations],
        "step_rewards": [obs.reward for obs in observations],
        "percent_of_optimum": [obs.percent_of_optimum for obs in observations],
        "episode_reward": env.state.episode_reward,
        "turns": len(observations),
    }


@router.get("/baseline")
def baseline(
    task: str = Query("medium"),
    seed: int = Query(..., ge=0, le=MAX_SEED),
    split: str = Query("train"),
    agent: str | None = Query(None),
) -> dict[str, Any]:
    """Each baseline's answer to request (task, seed, split[, agent]) scored by the training reward."""
    from fleet_rl.training.dataset import planner_answer  # imports datasets: only when asked

    env = FleetEnvironment()
    observation = env.reset(task=task, seed=seed, split=split, agent=agent)
    row = {
        "scenario": observation.scenario,
        "seed": seed,
        "agent": observation.agent,
        "given_plan": observation.given_plan,
    }
    request = env.request
    scores = {}
    for name, planner in BASELINES.items():
        result = verdict(request, json.dumps(planner_answer(planner, row)))
        scores[name] = {"reward": result.reward, "percent_of_optimum": result.percent_of_optimum}
    return {
        "task": task,
        "seed": seed,
        "split": split,
        "agent": observation.agent,
        "baselines": scores,
        "optimal_objective": request.solved.optimal_objective,
    }
