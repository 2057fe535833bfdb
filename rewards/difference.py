"""Difference rewards for the multi-agent tier: credit each agent with its own marginal effect.

For agent i with answer zᵢ and given parts z₋ᵢ (``fleet_rl/multiagent.py``), Wolpert & Tumer's difference
reward is

    Dᵢ = G(z) − G(z₋ᵢ ∪ cᵢ)

where G is the kernel's cluster objective (for a plan the kernel rejects, that of running nothing: 0,
minus the missed floors of jobs with a ``min_tokens_per_s``) and cᵢ is the default
counterfactual: **agent i's job left unallocated** (0 GPUs, the "null action"). Since jobs own disjoint GPUs
and the objective is a sum over jobs, Dᵢ is job i's own value over its idle value (0, or − its priority
for a job with a ``min_tokens_per_s``: idling it misses its floor) when the joint plan is valid, and
−G(z₋ᵢ ∪ cᵢ) when the answer breaks the joint plan (taking GPUs the others hold, rewriting their parts).

Normalisation: Dᵢ ÷ Dᵢ*, where Dᵢ* = max over the agent's GPU counts that fit beside the given parts of the
job's best value (``SolvedScenario.optimal_value_by_gpus``) over its idle value: the best response's
difference reward. The
result is clipped to [−1, 1]: 1 is a best response, 0 contributes nothing, −1 destroys at least as much as
the best response could add. Malformed answers and IRD-flagged ones get −1, so not answering never beats a
contribution. Rows without an agent (not multi-agent) get ``None``, which TRL skips when it combines
reward functions.
"""

from __future__ import annotations

import msgspec
import numpy as np

from fleet_rl.kernel.batch_scoring import score_batch
from fleet_rl.kernel.solver import SolvedScenario
from fleet_rl.plan_schema import Plan
from rewards.scoring import best_response_value, given_plan_from, score_completions

__all__ = ["FLOOR", "counterfactuals", "difference_reward"]

FLOOR = -1.0


def counterfactuals(rows: list[tuple[SolvedScenario, str, object]]) -> tuple[np.ndarray, np.ndarray]:
    """(G(z₋ᵢ ∪ cᵢ), Dᵢ*) per (solved scenario, agent, given parts) row; the given parts are the
    ``given_plan`` column value (JSON text, a dict or a ``Plan``). Each distinct row is scored once, all of
    them in one kernel call."""
    distinct: dict[tuple[int, str, bytes], int] = {}  # (id(solved), agent, given JSON) -> index in unique
    unique: list[tuple[SolvedScenario, str, Plan]] = []
    index = []
    for solved, agent, given in rows:
        plan = given_plan_from(given)
        key = (id(solved), agent, msgspec.json.encode(plan))
        if key not in distinct:
            distinct[key] = len(unique)
            unique.append((solved, agent, plan))
        index.append(distinct[key])
    base = score_batch([solved for solved, _, _ in unique], [given for _, _, given in unique]).objective
    best = np.zeros(len(unique))
    for k, (solved, agent, given) in enumerate(unique):
        j = solved.job_index.get(agent)
        if j is not None:
            taken = sum(job.gpus for job in given.jobs if job.id != agent)
            idle = solved.optimal_value_by_gpus[j, 0]  # the null action's value: 0, or a missed floor's cost
            best[k] = max(best_response_value(solved, j, taken) - idle, 0.0)
    return base[index], best[index]


def difference_reward(completions, scenario, **kwargs) -> list[float | None]:
    """Normalised difference reward in [−1, 1] per multi-agent row; ``None`` for other rows."""
    scores = score_completions(completions, scenario, **kwargs)
    size = len(completions)
    agents = kwargs.get("agent") or [None] * size
    given = kwargs.get("given_plan") or [None] * size
    rewards: list[float | None] = [None] * size
    rows = [i for i, agent in enumerate(agents) if agent]
    if not rows:
        return rewards
    base, best = counterfactuals([(scores.solved[i], agents[i], given[i]) for i in rows])
    difference = scores.objective[rows] - base
    normalised = np.clip(difference / np.where(best > 0.0, best, 1.0), FLOOR, 1.0)
    no_gain = np.where(difference >= 0.0, 0.0, FLOOR)  # nothing to gain: any harm is the floor
    value = np.where(best > 0.0, normalised, no_gain)
    value = np.where(scores.has_plan[rows] & ~scores.ird[rows], value, FLOOR)
    for i, reward in zip(rows, value.tolist(), strict=True):
        rewards[i] = reward
    return rewards
