"""One scoring pass over a group of completions, shared by every reward function.

TRL calls each reward function in turn with the same completions; ``score_completions`` parses them, merges
multi-agent answers with their given parts, scores all plans in one batched kernel call, applies the IRD
rules and keeps the result for the next call with the same inputs (a one-entry cache), so ``fleet_reward``,
the component rewards and ``difference_reward`` together cost one pass.

Per-row inputs (TRL passes dataset columns as lists, one item per completion):
- ``scenario``: scenario JSON (or a ``Scenario``);
- ``agent`` (optional column): the job id a multi-agent prompt asked for, ``""``/None for whole plans;
- ``given_plan`` (optional column): the other jobs' parts as plan JSON (or a dict), for multi-agent rows.

Cost (``python -m fleet_rl.bench`` reports it as the ``reward`` section): per completion, the parse
(``rewards/parsing.py``, usually one typed msgspec decode) and one row per scenario job in the kernel's
encoder; per call, a fixed number of numpy passes over all rows (against the kernel's arena of job tables:
none is stacked per call). Each distinct scenario of a call is decoded and solved once, looked up by its
JSON text (cached across calls: a cold solve costs milliseconds, so scenarios should be solved before
training, or the first epoch pays for it); ``copies_example`` compares GPU counts before anything else;
the cache key compares the completion texts without hashing them.
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
_NOTHING = object()  # equal to no column value


_IMMUTABLE = frozenset({str, bytes, type(None), Scenario})  # column value types that are hashable


def _cache_key(texts: list, scenarios: Sequence, agents: list, given: list) -> tuple | None:
    """A hashable key of the inputs, or None when some input is not hashable (then nothing is cached).

    Only equality is ever asked of a key, so nothing is hashed that need not be: the texts are strings, and
    a column is hashed only when it holds a value of another type than ``_IMMUTABLE``'s (hashing every
    completion and scenario JSON would cost more than the cache saves)."""
    if None in texts:
        return None
    columns = (tuple(scenarios), tuple(agents), tuple(given))
    for column in columns:
        if not _IMMUTABLE.issuperset(map(type, column)):
            try:
                hash(column)
            except TypeError:
                return None
    return (tuple(texts), *columns)


def score_completions(completions: Sequence, scenario: Sequence, **kwargs) -> GroupScores:
    """Parse, merge, score and IRD-check every completion (see the module docstring); cached once."""
    global _last
    size = len(completions)
    if len(scenario) != size:
        raise ValueError(f"{size} completions but {len(scenario)} scenarios")
    agents = _column(kwargs, "agent", size)
    given = _column(kwargs, "given_plan", size)
    texts = [
        completion if type(completion) is str else completion_text(completion) for completion in completions
    ]
    key = _cache_key(texts, scenario, agents, given)
    if key is not None and _last is not None and _last[0] == key:
        return _last[1]
    scores = _score(completions, texts, scenario, agents, given)
    if key is not None:
        _last = (key, scores)
    return scores


@functools.lru_cache(maxsize=4096)
def _solved_from_json(text: str) -> tuple[Scenario, SolvedScenario]:
    """A scenario JSON's scenario and solution, looked up by the text alone (hashing the ``Scenario`` for
    ``solve_scenario``'s cache costs more than hashing its text, whose hash the string keeps). It holds the
    same solutions as ``solve_scenario``'s cache, of the same size, used in the same order."""
    scenario = scenario_from_json(text)
    return scenario, solve_scenario(scenario)


def _solved_pair(value: object) -> tuple[Scenario, SolvedScenario]:
    if isinstance(value, str):
        return _solved_from_json(value)
    scenario = _as_scenario(value)
    return scenario, solve_scenario(scenario)


def _solved_scenarios(column: Sequence) -> tuple[list[Scenario], list[SolvedScenario]]:
    """Each row's scenario and its solution, decoded and looked up once per distinct value (a GRPO group
    repeats one scenario over its completions)."""
    scenarios, solved = [], []
    add_scenario, add_solved = scenarios.append, solved.append
    seen: dict = {}
    previous, scenario_k, solved_k = _NOTHING, None, None
    for value in column:
        if value is not previous and value != previous:  # a group's rows are adjacent: compare, not hash
            pair = seen.get(value)
            if pair is None:
                pair = seen[value] = _solved_pair(value)
            scenario_k, solved_k = pair
            previous = value
        add_scenario(scenario_k)
        add_solved(solved_k)
    return scenarios, solved


def _score(completions: Sequence, texts: list, scenario: Sequence, agents: list, given: list) -> GroupScores:
    size = len(completions)
    scenarios, solved = _solved_scenarios(scenario)
    if None in texts:
        parsed = [
            parse_plan(completion if text is None else text)
            for completion, text in zip(completions, texts, strict=True)
        ]
    else:
        parsed = list(map(parse_plan, texts))
    index, several = [], []
    for i, result in enumerate(parsed):
        if result.plan is not None:
            index.append(i)
        elif result.error == SEVERAL_PLANS:
            several.append(i)
    is_agent = np.fromiter(map(bool, agents), dtype=bool, count=size)
    has_plan = np.zeros(size, dtype=bool)
    ird = np.zeros(size, dtype=bool)
    ird[several] = True
    zeros = np.zeros(size)
    valid, feasible = np.zeros(size, dtype=bool), np.zeros(size, dtype=bool)
    placed_share, fits_share, runs_share = zeros.copy(), zeros.copy(), zeros.copy()
    score, objective = zeros.copy(), zeros.copy()
    status_counts = np.zeros(len(STATUSES))
    if index:
        with_plan = np.array(index)
        has_plan[with_plan] = True
        plans, copied = [], []
        add_plan = plans.append
        previous, given_plan = _NOTHING, None
        for k, i in enumerate(index):
            plan = parsed[i].plan
            if copies_example(plan, scenarios[i]):
                copied.append(k)
            if agents[i]:
                if given[i] is not previous and given[i] != previous:  # adjacent rows share their parts
                    previous, given_plan = given[i], given_plan_from(given[i])
                plan = merge_answer(given_plan, plan)
            add_plan(plan)
        scored = score_batch([solved[i] for i in index], plans)
        sizes = scored.plan_sizes
        # job statuses per plan, one bincount: counts[p, s] = rows of plan p with status s
        counts = np.bincount(
            scored.plan_of_row * len(STATUSES) + scored.results.status, minlength=len(index) * len(STATUSES)
        ).reshape(len(index), len(STATUSES))
        status_counts = counts.sum(axis=0).astype(float)
        placed_count = (sizes - counts[:, UNALLOCATED] - counts[:, INVALID]).astype(float)
        runs = counts[:, OK].astype(float)
        valid[with_plan] = scored.valid
        runs_all = placed_count == runs
        feasible[with_plan] = scored.valid & runs_all & (placed_count > 0) & (scored.objective > 0)
        placed_share[with_plan] = np.where(scored.valid, placed_count / sizes, 0.0)
        fits_share[with_plan] = np.where(
            scored.valid, (placed_count - counts[:, OOM]) / np.maximum(placed_count, 1), 0.0
        )
        runs_share[with_plan] = np.where(scored.valid, runs / sizes, 0.0)
        score[with_plan] = scored.score
        objective[with_plan] = scored.objective
        # the optimum's GPUs for each row's job: the distinct scenarios' in job-table order, by row
        optimal_gpus = np.concatenate([distinct.optimal_gpus for distinct in scored.solved])
        flags = degenerate_plans(scored, optimal_gpus.take(scored.rows.job), scored.plan_of_row)
        flags[copied] = True
        ird[with_plan] = flags
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
