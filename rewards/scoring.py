"""One scoring pass over a group of completions, shared by every reward function.

TRL calls each reward function in turn with the same completions; ``score_completions`` parses them, merges
multi-agent answers with their given parts, scores all plans in one batched kernel call, applies the IRD
rules and keeps the result for the next call with the same inputs (a one-entry cache), so ``fleet_reward``,
the component rewards and ``difference_reward`` together cost one pass.

Per-row inputs (TRL passes dataset columns as lists, one item per completion):
- ``scenario``: scenario JSON (or a ``Scenario``);
- ``agent`` (optional column): the job id a multi-agent prompt asked for, ``""``/None for whole plans;
- ``given_plan`` (optional column): the other jobs' parts as plan JSON (or a dict), for multi-agent rows.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
import numpy as np

from fleet_rl.kernel.constants import INVALID, OK, OOM, STATUSES, UNALLOCATED
from fleet_rl.kernel.evaluate import score_batch
from fleet_rl.kernel.solver import SolvedScenario, solve_scenario
from fleet_rl.multiagent import merge_answer
from fleet_rl.plan_schema import Plan, plan_from_json, plan_from_object
from fleet_rl.prompts import copies_example
from fleet_rl.scenario import Scenario
from rewards.ird import degenerate_plans
from rewards.parsing import SEVERAL_PLANS, ParseResult, completion_text, parse_plan

__all__ = ["GroupScores", "given_plan_from", "scenario_from_json", "score_completions"]


@dataclass(frozen=True)
class GroupScores:
    """Arrays over the N completions of one reward call."""

    parsed: list[ParseResult]
    scenarios: list[Scenario]
    solved: list[SolvedScenario]
    is_agent: np.ndarray  # (N,) bool: a multi-agent row (its plan is merged with the given parts)
    has_plan: np.ndarray  # (N,) bool: a schema-valid plan was parsed
    valid: np.ndarray  # (N,) bool: ... and it is consistent with the scenario (kernel-valid)
    placed_share: np.ndarray  # (N,) share of the scenario's jobs given GPUs
    fits_share: np.ndarray  # (N,) share of the placed jobs that fit in memory
    runs_share: np.ndarray  # (N,) share of the scenario's jobs that run (status ok)
    feasible: np.ndarray  # (N,) bool: valid, every placed job runs, objective > 0
    score: np.ndarray  # (N,) kernel score in [0, 1] (objective / optimum; 0 when not valid)
    objective: np.ndarray  # (N,) kernel objective (0 when not valid)
    ird: np.ndarray  # (N,) bool: an IRD rule fired (rewards/ird.py)
    status_counts: np.ndarray  # (len(STATUSES),) job statuses over all scored rows


@functools.lru_cache(maxsize=4096)
def scenario_from_json(text: str) -> Scenario:
    """Decoded scenarios are cached: a GRPO group shares one scenario across its completions."""
    return Scenario.from_json(text)


@functools.lru_cache(maxsize=4096)
def _given_plan_from_json(text: str) -> Plan:
    return plan_from_json(text)


def given_plan_from(value: object) -> Plan:
    """A multi-agent row's given parts as a ``Plan``; raises ``ValueError`` on a malformed column value."""
    try:
        if isinstance(value, Plan):
            return value
        if isinstance(value, str | bytes):
            return _given_plan_from_json(value)
        return plan_from_object(value)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise ValueError(f"given_plan is not a valid plan: {error}") from error


def _as_scenario(value: object) -> Scenario:
    return value if isinstance(value, Scenario) else scenario_from_json(value)


def _column(kwargs: dict, name: str, size: int) -> list:
    values = kwargs.get(name)
    if values is None:
        return [None] * size
    if len(values) != size:
        raise ValueError(f"column {name!r} has {len(values)} items for {size} completions")
    return list(values)


_last: tuple[tuple, GroupScores] | None = None


def _cache_key(completions: Sequence, scenarios: Sequence, agents: list, given: list) -> tuple | None:
    """A hashable key of the inputs, or None when some input is not hashable (then nothing is cached)."""
    texts = tuple(completion_text(completion) for completion in completions)
    if None in texts:
        return None
    key = (texts, tuple(scenarios), tuple(agents), tuple(given))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def score_completions(completions: Sequence, scenario: Sequence, **kwargs) -> GroupScores:
    """Parse, merge, score and IRD-check every completion (see the module docstring); cached once."""
    global _last
    size = len(completions)
    if len(scenario) != size:
        raise ValueError(f"{size} completions but {len(scenario)} scenarios")
    agents = _column(kwargs, "agent", size)
    given = _column(kwargs, "given_plan", size)
    key = _cache_key(completions, scenario, agents, given)
    if key is not None and _last is not None and _last[0] == key:
        return _last[1]
    scores = _score(completions, scenario, agents, given)
    if key is not None:
        _last = (key, scores)
    return scores


def _score(completions: Sequence, scenario: Sequence, agents: list, given: list) -> GroupScores:
    size = len(completions)
    scenarios = [_as_scenario(value) for value in scenario]
    solved = [solve_scenario(s) for s in scenarios]
    parsed = [parse_plan(completion) for completion in completions]
    is_agent = np.array([bool(agent) for agent in agents], dtype=bool)
    has_plan = np.array([result.plan is not None for result in parsed], dtype=bool)
    ird = np.array([result.error == SEVERAL_PLANS for result in parsed], dtype=bool)
    zeros = np.zeros(size)
    valid, feasible = np.zeros(size, dtype=bool), np.zeros(size, dtype=bool)
    placed_share, fits_share, runs_share = zeros.copy(), zeros.copy(), zeros.copy()
    score, objective = zeros.copy(), zeros.copy()
    status_counts = np.zeros(len(STATUSES))
    index = np.flatnonzero(has_plan)
    if len(index):
        plans = []
        for i in index:
            plan = parsed[i].plan
            ird[i] = copies_example(plan, scenarios[i])
            plans.append(merge_answer(given_plan_from(given[i]), plan) if is_agent[i] else plan)
        scored = score_batch([solved[i] for i in index], plans)
        sizes = np.array([solved[i].table.num_jobs for i in index])
        plan_of_row = np.repeat(np.arange(len(index)), sizes)
        status = scored.results.status
        status_counts = np.bincount(status, minlength=len(STATUSES)).astype(float)

        def count(mask: np.ndarray) -> np.ndarray:
            return np.bincount(plan_of_row, weights=mask.astype(float), minlength=len(index))

        placed = (status != UNALLOCATED) & (status != INVALID)
        runs = status == OK
        placed_count = count(placed)
        valid[index] = scored.valid
        feasible[index] = (
            scored.valid & (count(placed & ~runs) == 0) & (placed_count > 0) & (scored.objective > 0)
        )
        placed_share[index] = np.where(scored.valid, placed_count / sizes, 0.0)
        fits_share[index] = np.where(
            scored.valid, count(placed & (status != OOM)) / np.maximum(placed_count, 1), 0.0
        )
        runs_share[index] = np.where(scored.valid, count(runs) / sizes, 0.0)
        score[index] = scored.score
        objective[index] = scored.objective
        optimal_gpus = np.concatenate([solved[i].optimal_gpus for i in index])
        ird[index] |= degenerate_plans(scored, optimal_gpus, plan_of_row)
    return GroupScores(
        parsed=parsed,
        scenarios=scenarios,
        solved=solved,
        is_agent=is_agent,
        has_plan=has_plan,
        valid=valid,
        placed_share=placed_share,
        fits_share=fits_share,
        runs_share=runs_share,
        feasible=feasible,
        score=score,
        objective=objective,
        ird=ird,
        status_counts=status_counts,
    )
