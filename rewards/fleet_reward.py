"""The default training reward: parse → batched kernel → breadcrumbs → IRD override, in [0, 1].

TRL signature: ``fleet_reward(completions, scenario, **kwargs) -> list[float]``; ``scenario`` is the dataset
column of scenario JSON strings (one per completion); multi-agent rows also carry ``agent`` and
``given_plan`` columns (``rewards/scoring.py``), and their answer is scored merged with the given parts.
``log_metric`` (if TRL passes it) receives rates under ``kernel/``; ``log_extra`` adds each completion's
parse error, IRD flag and % of optimum to TRL's completions table.

Reward levels, in the order an engineer ranks answers (DESIGN.md §5, reward integrity and breadcrumbs;
tests/rewards/test_fleet_reward.py and test_reward_properties.py check them):

=========================================================  ==========================================
answer                                                     reward
=========================================================  ==========================================
malformed: no JSON, not text, too large or deep            0.0
JSON that does not decode / decodes but is not a plan      0.002 / 0.005
inconsistent with the cluster: a tensor_parallel that      0.0075
does not divide its GPUs; a multi-agent part that takes
GPUs given to others (breaking the joint plan)
degenerate (IRD, ``rewards/ird.py``): places nothing       0.01 exactly
(giving up), invented or duplicated ids, several plans,
lowest precision everywhere, the copied example
a whole plan that asks more GPUs than the cluster has      0.01 + 0.01 × fit × (1 + progress) / 2,
                                                           in (0.01, 0.02); fit = cluster GPUs ÷ GPUs
                                                           asked (one over on 8: 8/9; twenty over: 8/28)
not feasible: some job the author placed does not run,     0.02 + 0.23 × progress, in [0.02, 0.25)
or a job the optimum runs is left idle                     (nothing runs: progress < 1/2, so < 0.135)
feasible                                                   0.3 + 0.7 × score, in [0.3, 1]
=========================================================  ==========================================

``progress`` is the mean breadcrumb credit over the author's jobs (``rewards/breadcrumbs.py``): 1 for a job
that runs; for a near miss (over memory, under its ``min_tokens_per_s``) between 1/3 and 1/2, higher the
closer the kernel says it came; 1/3 for an idle job; at most 1/6 for a job with a setting that cannot run at
all (a format the GPU lacks, unstable numerics), less for each further one. So an honest attempt that fails
is graded by its distance and always ranks above giving up; breaking a job on purpose never beats idling
it; making a job run never lowers the reward; and any feasible plan beats any infeasible one.

``score`` is the kernel's (objective / optimum) for a whole plan and the agent's own contribution (its job's
value / the best it could add beside the given parts) for a multi-agent answer, so the optimum (or a best
response) gets 1.0 and the reward rises with the score. A multi-agent part keeps the reward-integrity rules:
one that breaks the joint plan (over-allocates it) gets the inconsistent level, below abstaining.
"""

from __future__ import annotations

import operator
from itertools import repeat

import numpy as np

from fleet_rl.kernel.constants import OOM, TOO_SLOW, UNSTABLE, UNSUPPORTED
from rewards.ird import IRD_REWARD, IRD_RULES
from rewards.parsing import BAD_JSON, SCHEMA
from rewards.scoring import GroupScores, score_completions

__all__ = [
    "FEASIBLE_BASE",
    "INCONSISTENT_REWARD",
    "INFEASIBLE_BASE",
    "MALFORMED_REWARD",
    "OVER_ALLOCATED_BAND",
    "completion_columns",
    "fleet_reward",
    "log_kernel_rates",
    "rewards_from_scores",
]

MALFORMED_REWARD = {BAD_JSON: 0.002, SCHEMA: 0.005}  # every other parse error: 0.0
INCONSISTENT_REWARD = 0.0075
INFEASIBLE_BASE, PROGRESS_CREDIT = 0.02, 0.23
OVER_ALLOCATED_BAND = (IRD_REWARD, INFEASIBLE_BASE)  # above giving up, below every plan the cluster takes
FEASIBLE_BASE = 0.3
_error = operator.attrgetter("error")


def fleet_reward(completions, scenario, **kwargs) -> list[float]:
    """Composite reward in [0, 1] for each completion (see the module docstring)."""
    scores = score_completions(completions, scenario, **kwargs)
    log_kernel_rates(scores, kwargs.get("log_metric"))
    log_extra = kwargs.get("log_extra")
    if callable(log_extra):  # extra columns of TRL's completions table (log_completions)
        for name, values in completion_columns(scores).items():
            log_extra(name, values)
    return rewards_from_scores(scores).tolist()


def rewards_from_scores(scores: GroupScores) -> np.ndarray:
    """The levels of the module docstring's table, from one scoring pass: what ``fleet_reward`` returns (the
    environment's step reads the kernel's per-job results from the same pass)."""
    errors = list(map(_error, scores.parsed))
    malformed = np.fromiter(map(MALFORMED_REWARD.get, errors, repeat(0.0)), dtype=float, count=len(errors))
    infeasible = INFEASIBLE_BASE + PROGRESS_CREDIT * scores.progress
    rewards = np.where(scores.feasible, FEASIBLE_BASE + (1.0 - FEASIBLE_BASE) * scores.score, infeasible)
    low, high = OVER_ALLOCATED_BAND
    over_allocated = low + (high - low) * scores.cluster_fit * (1.0 + scores.progress) / 2.0
    inconsistent = np.where((scores.cluster_fit > 0) & ~scores.is_agent, over_allocated, INCONSISTENT_REWARD)
    rewards = np.where(scores.valid, rewards, inconsistent)
    rewards = np.where(scores.has_plan, rewards, malformed)
    rewards[scores.ird] = IRD_REWARD
    return rewards


def completion_columns(scores: GroupScores) -> dict[str, list]:
    """Per completion: its parse error, the IRD rule that fired and its % of optimum ("" for none), the
    columns ``fleet_reward`` adds to TRL's completions table through ``log_extra``."""
    return {
        "parse_error": [result.error or "" for result in scores.parsed],
        "ird": [IRD_RULES[rule] if rule >= 0 else "" for rule in scores.ird_rule.tolist()],
        "percent_of_optimum": (100.0 * scores.score).round(1).tolist(),
    }


def log_kernel_rates(scores: GroupScores, log_metric) -> None:
    """Log the group's rates through TRL's ``log_metric`` (averaged over the logging interval by TRL)."""
    if not callable(log_metric) or not len(scores.parsed):
        return
    rows = max(float(scores.status_counts.sum()), 1.0)
    log_metric("kernel/valid_json_rate", float(scores.has_plan.mean()))
    log_metric("kernel/feasible_rate", float(scores.feasible.mean()))
    log_metric("kernel/oom_rate", float(scores.status_counts[OOM] / rows))
    log_metric("kernel/unstable_rate", float(scores.status_counts[UNSTABLE] / rows))
    log_metric("kernel/unsupported_rate", float(scores.status_counts[UNSUPPORTED] / rows))
    log_metric("kernel/too_slow_rate", float(scores.status_counts[TOO_SLOW] / rows))
    log_metric("kernel/ird_rate", float(scores.ird.mean()))
    log_metric("kernel/runs_rate", float(scores.runs_share.mean()))
    log_metric("kernel/percent_of_optimum", float(100.0 * scores.score.mean()))
