"""One scoring pass over a group of completions: what every reward function reads.

``score_completions`` parses the completions, merges multi-agent answers with their given parts, scores all
plans in one batched kernel call and applies the IRD rules. Each TRL reward function calls it with the same
inputs, so a step with five reward functions scores its completions five times: the reward costs
microseconds per completion next to the seconds of generating it, and nothing is kept between calls here.

Per-row inputs (TRL passes dataset columns as lists, one item per completion):
- ``scenario``: scenario JSON, a ``Scenario``, or its ``SolvedScenario`` (then nothing is solved);
- ``agent`` (optional column): the job id a multi-agent prompt asked for, ``""``/None for whole plans;
- ``given_plan`` (optional column): the other jobs' parts as plan JSON (or a dict), for multi-agent rows.

Each distinct scenario of a call is solved once, through the one cache of solved scenarios
(``fleet_rl/solved_scenarios.py``, keyed by the JSON text): a cold solve costs milliseconds, a hit one dict
lookup. Cost per completion (``python -m benchmarks.kernel.speed`` reports it as the ``reward`` section): the
parse (``rewards/parsing.py``, usually one typed msgspec decode) and one row per scenario job in the kernel's
encoder; per call, a fixed number of numpy passes over all rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import msgspec
import numpy as np

from fleet_rl.kernel.batch_scoring import ScoredBatch, score_batch
from fleet_rl.kernel.constants import OK, OOM, STATUSES, TOO_SLOW, UNSTABLE, UNSUPPORTED
from fleet_rl.kernel.distances import row_distances
from fleet_rl.kernel.reasons import ReasonCode
from fleet_rl.kernel.solver import SolvedScenario
from fleet_rl.multiagent import merge_answer
from fleet_rl.plan_schema import Plan, plan_from_json, plan_from_object
from fleet_rl.scenario import Scenario
from fleet_rl.solved_scenarios import solved_scenario
from rewards.breadcrumbs import job_credit
from rewards.copied_example import copies_example
from rewards.ird import NOT_DEGENERATE, answer_rules, degenerate_plans
from rewards.parsing import ParseResult, parse_plan

__all__ = ["CRASHES", "GroupScores", "best_response_value", "given_plan_from", "score_completions"]

# kernel statuses of a placed job that fails (too_slow: runs, but under its min_tokens_per_s)
CRASHES: tuple[str, ...] = ("oom", "unsupported", "unstable", "too_slow")
_CRASH_CODES = (OOM, UNSUPPORTED, UNSTABLE, TOO_SLOW)
assert tuple(STATUSES[code] for code in _CRASH_CODES) == CRASHES


@dataclass(frozen=True)
class GroupScores:
    """Arrays over the N completions of one reward call.

    The *author's jobs* of a completion are every job of the scenario for a whole plan, and the agent's own
    job for a multi-agent answer (the given parts are not the agent's doing, so they earn it nothing)."""

    parsed: list[ParseResult]
    scenarios: list[Scenario]
    solved: list[SolvedScenario]
    is_agent: np.ndarray  # (N,) bool: a multi-agent row (its plan is merged with the given parts)
    has_plan: np.ndarray  # (N,) bool: a schema-valid plan was parsed
    valid: np.ndarray  # (N,) bool: ... and it is consistent with the scenario (kernel-valid)
    runs_share: np.ndarray  # (N,) share of the author's jobs that run (status ok)
    # (N,) in [0, 1]: mean over the author's jobs of their breadcrumb credit (``rewards/breadcrumbs.py``:
    # 1 runs, a near miss graded by its distance in (1/3, 1/2), 1/3 idle, at most 1/6 for a categorical
    # fault); for valid plans and for whole plans rejected only for asking more GPUs than the cluster has
    # (their jobs' physics is still simulated), 0 otherwise
    progress: np.ndarray
    # (N,) in (0, 1) for a plan rejected only for over-allocation: the cluster's GPUs ÷ the GPUs it asks
    # for (one GPU over on 8 is 8/9, twenty over 8/28); 0 for every other plan
    cluster_fit: np.ndarray
    # (N,) bool: valid, none of the author's placed jobs fails, every one the optimum runs runs (for an agent:
    # its job runs when it can add value), and the contribution is positive
    feasible: np.ndarray
    # (N,) in [0, 1]: a whole plan's kernel score (objective / optimum); an agent's own contribution
    # (its job's value in the joint plan) / the best it could contribute beside the given parts
    score: np.ndarray
    objective: np.ndarray  # (N,) kernel objective of the (joint) plan (0 when not valid)
    ird_rule: np.ndarray  # (N,) int: index into rewards.ird.IRD_RULES, or NOT_DEGENERATE
    status_counts: np.ndarray  # (len(STATUSES),) job statuses over all scored rows
    # (N, len(CRASHES)) bool: some job of the author's, placed on GPUs, crashes with that status
    crashes: np.ndarray
    # the kernel's arrays for the completions that parsed to a plan, in completion order (merged with the
    # given parts for an agent); None when none did. ``evaluations_from`` (fleet_rl/kernel/batch_scoring.py)
    # turns them into per-job results without simulating again (the environment's step does).
    scored: ScoredBatch | None = None

    @property
    def ird(self) -> np.ndarray:
        """(N,) bool: an IRD rule fired (rewards/ird.py)."""
        return self.ird_rule != NOT_DEGENERATE


def given_plan_from(value: object) -> Plan:
    """A multi-agent row's given parts as a ``Plan``; raises ``ValueError`` on a malformed column value."""
    try:
        if isinstance(value, Plan):
            return value
        if isinstance(value, str | bytes):
            return plan_from_json(value)
        return plan_from_object(value)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise ValueError(f"given_plan is not a valid plan: {error}") from error


def _column(kwargs: dict, name: str, size: int) -> list:
    values = kwargs.get(name)
    if values is None:
        return [None] * size
    if len(values) != size:
        raise ValueError(f"column {name!r} has {len(values)} items for {size} completions")
    return list(values)


_NOTHING = object()  # equal to no column value


def score_completions(completions: Sequence, scenario: Sequence, **kwargs) -> GroupScores:
    """Parse, merge, score and IRD-check every completion (see the module docstring)."""
    size = len(completions)
    if len(scenario) != size:
        raise ValueError(f"{size} completions but {len(scenario)} scenarios")
    agents = _column(kwargs, "agent", size)
    given = _column(kwargs, "given_plan", size)
    solved = _solved_scenarios(scenario)
    parsed = [parse_plan(completion) for completion in completions]
    return _score(parsed, solved, agents, given)


def _solved_scenarios(column: Sequence) -> list[SolvedScenario]:
    """Each row's solved scenario, looked up once per run of equal values (a GRPO group repeats one
    scenario over its adjacent completions)."""
    solved = []
    previous, solved_k = _NOTHING, None
    for value in column:
        if value is not previous and value != previous:  # compare neighbours; only a change is looked up
            solved_k = value if isinstance(value, SolvedScenario) else solved_scenario(value)
            previous = value
        solved.append(solved_k)
    return solved


def _score(parsed: list[ParseResult], solved: list[SolvedScenario], agents: list, given: list) -> GroupScores:
    size = len(parsed)
    index = [i for i, result in enumerate(parsed) if result.plan is not None]
    is_agent = np.fromiter(map(bool, agents), dtype=bool, count=size)
    has_plan = np.zeros(size, dtype=bool)
    plan_rules = np.empty(0, dtype=np.int64)  # the IRD rule of each parsed plan (rewards/ird.py)
    zeros = np.zeros(size)
    valid, feasible = np.zeros(size, dtype=bool), np.zeros(size, dtype=bool)
    runs_share, progress, score, objective = zeros.copy(), zeros.copy(), zeros.copy(), zeros.copy()
    cluster_fit = zeros.copy()
    scored = None
    status_counts = np.zeros(len(STATUSES))
    crashes = np.zeros((size, len(CRASHES)), dtype=bool)
    if index:
        with_plan = np.array(index)
        has_plan[with_plan] = True
        plans = []
        add_plan = plans.append
        copied = np.zeros(len(index), dtype=bool)
        previous, given_plan = _NOTHING, None
        for k, i in enumerate(index):
            plan = parsed[i].plan
            copied[k] = copies_example(plan, solved[i])
            if agents[i]:
                if given[i] is not previous and given[i] != previous:  # adjacent rows share their parts
                    previous, given_plan = given[i], given_plan_from(given[i])
                plan = merge_answer(given_plan, plan)
            add_plan(plan)
        scored = score_batch([solved[i] for i in index], plans)
        judged = _judge(scored, [solved[i] for i in index], [agents[i] for i in index])
        status_counts = np.bincount(scored.results.status, minlength=len(STATUSES)).astype(float)
        valid[with_plan] = scored.valid
        objective[with_plan] = scored.objective
        runs_share[with_plan], progress[with_plan] = judged.runs_share, judged.progress
        cluster_fit[with_plan] = judged.cluster_fit
        feasible[with_plan], score[with_plan] = judged.feasible, judged.score
        crashes[with_plan] = judged.crashes
        plan_rules = degenerate_plans(scored, judged.own_row, is_agent[with_plan], copied)
    return GroupScores(
        parsed=parsed,
        scenarios=[row.scenario for row in solved],
        solved=solved,
        is_agent=is_agent,
        has_plan=has_plan,
        valid=valid,
        runs_share=runs_share,
        progress=progress,
        cluster_fit=cluster_fit,
        feasible=feasible,
        score=score,
        objective=objective,
        ird_rule=answer_rules(parsed, plan_rules),
        status_counts=status_counts,
        crashes=crashes,
        scored=scored,
    )


class _Judged(NamedTuple):
    """Per scored plan (P,) unless noted; see ``GroupScores`` for the meaning of each."""

    runs_share: np.ndarray
    progress: np.ndarray
    cluster_fit: np.ndarray
    feasible: np.ndarray
    score: np.ndarray
    own_row: np.ndarray  # (R,) bool: the rows of the author's jobs
    crashes: np.ndarray  # (P, len(CRASHES)) bool


def _judge(scored: ScoredBatch, solved: list[SolvedScenario], agents: list) -> _Judged:
    """What the author of each plan achieved, from the kernel's rows: which of its jobs run, idle or fail
    (and how close they came, ``rewards/breadcrumbs.py``), how far over the cluster a plan rejected only for
    over-allocation asks, whether it is feasible, and its score or, for an agent, its contribution."""
    rows, results, plan_of_row = scored.rows, scored.results, scored.plan_of_row
    sizes = scored.plan_sizes
    num_plans = len(sizes)
    first_row = np.cumsum(sizes) - sizes
    job_of_row = np.arange(len(plan_of_row)) - first_row[plan_of_row]  # the row's job in its scenario
    # each plan's agent job (-1: a whole plan, every row is the author's)
    agent_job = np.array(
        [solved[p].job_index.get(agent, -1) if agent else -1 for p, agent in enumerate(agents)]
    )
    is_agent = agent_job >= 0
    own_row = ~is_agent[plan_of_row] | (job_of_row == agent_job[plan_of_row])
    runs = results.status == OK
    crashed = results.faults > 0
    credit = job_credit(runs, rows.gpus > 0, row_distances(scored.table, rows, results))

    def own_sum(values: np.ndarray) -> np.ndarray:
        return np.bincount(plan_of_row, weights=np.where(own_row, values, 0.0), minlength=num_plans)

    own_count = np.maximum(own_sum(np.ones(len(plan_of_row))), 1.0)
    runs_share = np.where(scored.valid, own_sum(runs) / own_count, 0.0)
    # a plan rejected only for asking too many GPUs: its rows were simulated all the same
    over_allocated = np.array(
        [
            bool(reasons) and all(r.code == ReasonCode.OVER_ALLOCATED for r in reasons)
            for reasons in scored.plan_reasons
        ],
        dtype=bool,
    )
    progress = np.where(scored.valid | over_allocated, own_sum(credit) / own_count, 0.0)
    asked = np.bincount(plan_of_row, weights=rows.gpus, minlength=num_plans)
    cluster_gpus = np.array([solved_k.gpu_count for solved_k in solved], dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        cluster_fit = np.where(over_allocated, cluster_gpus / asked, 0.0)
    # whole plans: every job the optimum runs must run
    optimal_gpus = np.concatenate([distinct.optimal_gpus for distinct in scored.solved]).take(rows.job)
    dropped = own_row & (optimal_gpus > 0) & ~runs
    failing = own_sum(crashed) > 0
    feasible = scored.valid & ~failing & (own_sum(dropped) == 0) & (scored.objective > 0)
    score = scored.score.copy()
    if is_agent.any():  # an agent: its job's value in the joint plan over the best it could add there
        agent_plans = np.flatnonzero(is_agent)
        agent_rows = first_row[agent_plans] + agent_job[agent_plans]
        taken = np.bincount(plan_of_row, weights=np.where(own_row, 0, rows.gpus), minlength=num_plans)
        # values over the job's idle value (0, or a floor job's missed-SLO cost): what answering adds
        idle = np.array([solved[p].optimal_value_by_gpus[agent_job[p], 0] for p in agent_plans.tolist()])
        best = np.array(
            [best_response_value(solved[p], agent_job[p], int(taken[p])) for p in agent_plans.tolist()]
        )
        best = np.maximum(best - idle, 0.0)
        value = scored.values[agent_rows] - idle
        agent_runs = runs[agent_rows]
        with np.errstate(divide="ignore", invalid="ignore"):
            contribution = np.where(best > 0, np.clip(value / best, 0.0, 1.0), 1.0)
        score[agent_plans] = np.where(scored.valid[agent_plans], contribution, 0.0)
        helps = np.where(agent_runs, value > 0, best <= 0)  # runs to some use, or rightly stays idle
        feasible[agent_plans] = scored.valid[agent_plans] & ~failing[agent_plans] & helps
    crashes = np.stack(
        [scored.valid & (own_sum(results.status == code) > 0) for code in _CRASH_CODES], axis=1
    )
    return _Judged(runs_share, progress, cluster_fit, feasible, score, own_row, crashes)


def best_response_value(solved: SolvedScenario, job: int, gpus_taken: int) -> float:
    """The best value job ``job`` can reach with the GPUs the other jobs leave free (its best response)."""
    return float(solved.best_value_within_gpus[job, max(solved.gpu_count - gpus_taken, 0)])
