"""Difference rewards for the multi-agent tier: credit each agent with its own marginal effect.

For agent i with answer zᵢ and given parts z₋ᵢ (``fleet_rl/multiagent.py``), Wolpert & Tumer's difference
reward is

    Dᵢ = G(z) − G(z₋ᵢ ∪ cᵢ)

where G is the kernel's cluster objective (0 for a plan the kernel rejects) and cᵢ is the default
counterfactual: **agent i's job left unallocated** (0 GPUs, the "null action"). Since jobs own disjoint GPUs
and the objective is a sum over jobs, Dᵢ is job i's own value when the joint plan is valid, and
−G(z₋ᵢ ∪ cᵢ) when the answer breaks the joint plan (taking GPUs the others hold, rewriting their parts).

Normalisation: Dᵢ ÷ Dᵢ*, where Dᵢ* = max over the agent's GPU counts that fit beside the given parts of the
job's best value (``SolvedScenario.optimal_value_by_gpus``): the best response's difference reward. The
result is clipped to [−1, 1]: 1 is a best response, 0 contributes nothing, −1 destroys at least as much as
the best response could add. Malformed answers and IRD-flagged ones get −1, so not answering never beats a
contribution. Rows without an agent (not multi-agent) get ``None``, which TRL skips when it combines
reward functions.
"""

from __future__ import annotations

import functools

import msgspec
import numpy as np

from fleet_rl.kernel.evaluate import score_batch
from fleet_rl.kernel.solver import solve_scenario
from fleet_rl.plan_schema import Plan, plan_from_json
from fleet_rl.scenario import Scenario
from rewards.scoring import given_plan_from, score_completions

__all__ = ["FLOOR", "counterfactual", "difference_reward"]

FLOOR = -1.0


def counterfactual(scenario: Scenario, agent: str, given: Plan) -> tuple[float, float]:
    """(G(z₋ᵢ ∪ cᵢ), Dᵢ*) for an agent and its given parts; cached per (scenario, agent, given parts)."""
    return _counterfactual(scenario, agent, msgspec.json.encode(given))


@functools.lru_cache(maxsize=4096)
def _counterfactual(scenario: Scenario, agent: str, given_json: bytes) -> tuple[float, float]:
    solved = solve_scenario(scenario)
    given = plan_from_json(given_json)
    base = score_batch([solved], [given]).objective[0]
    taken = sum(job.gpus for job in given.jobs if job.id != agent)
    free = max(solved.gpu_count - taken, 0)
    j = solved.job_index.get(agent)
    best = 0.0 if j is None else float(np.max(solved.optimal_value_by_gpus[j, : free + 1]))
    return float(base), max(best, 0.0)


def difference_reward(completions, scenario, **kwargs) -> list[float | None]:
    """Normalised difference reward in [−1, 1] per multi-agent row; ``None`` for other rows."""
    scores = score_completions(completions, scenario, **kwargs)
    agents = kwargs.get("agent") or [None] * len(completions)
    given = kwargs.get("given_plan") or [None] * len(completions)
    rewards: list[float | None] = []
    for i, agent in enumerate(agents):
        if not agent:
            rewards.append(None)
            continue
        base, best = counterfactual(scores.scenarios[i], agent, given_plan_from(given[i]))
        if not scores.has_plan[i] or scores.ird[i]:
            rewards.append(FLOOR)
            continue
        difference = scores.objective[i] - base
        if best <= 0.0:  # nothing to gain: any harm is the floor, no harm is neutral
            rewards.append(0.0 if difference >= 0.0 else FLOOR)
            continue
        rewards.append(float(np.clip(difference / best, FLOOR, 1.0)))
    return rewards
