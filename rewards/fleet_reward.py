"""The default training reward: parse → batched kernel → breadcrumbs → IRD override, in [0, 1].

TRL signature: ``fleet_reward(completions, scenario, **kwargs) -> list[float]``; ``scenario`` is the dataset
column of scenario JSON strings (one per completion); multi-agent rows also carry ``agent`` and
``given_plan`` columns (``rewards/scoring.py``), and their answer is scored merged with the given parts.
``log_metric`` (if TRL passes it) receives rates under ``kernel/``; ``log_extra`` adds each completion's
parse error, IRD flag and % of optimum to TRL's completions table.

Reward levels, in the order an engineer ranks answers (DESIGN.md §5, issue #9;
tests/rewards/test_fleet_reward.py and test_reward_properties.py check them):
- malformed: 0.0 (no JSON / not text / too large / too deep), 0.002 (JSON that does not decode),
  0.005 (decodes but is not a valid plan);
- schema-valid plan inconsistent with the cluster (over-allocated, TP not dividing GPUs): 0.0075, below the
  degenerate level (a plan the cluster cannot even take is closer to malformed output); for a multi-agent
  answer this is also breaking the joint plan (taking GPUs that were given to others);
- degenerate (IRD, ``rewards/ird.py``: invented ids, several plans, lowest precision everywhere, nothing
  runs, the copied example): exactly 0.01;
- not feasible (some job the author placed cannot run, or a job the optimum runs is left idle):
  0.02 + 0.23 × progress ≤ 0.25, where progress averages over the author's jobs 1 for a job that runs,
  1/2 − k/6 for one that cannot run with k faults (unsupported format, over memory, unstable numerics,
  under its ``min_tokens_per_s``; k ≤ 3; counted from the physics, so a second fault never hides the
  first) and 1/3 for an idle one (as much as a near miss); hence crashing a job never beats idling it,
  each further fault costs, and trying costs nothing against giving up (a whole plan under which nothing
  runs is degenerate);
- feasible: 0.3 + 0.7 × score, where score is the kernel's (objective / optimum) for a whole plan and the
  agent's own contribution (its job's value / the best it could add beside the given parts) for a
  multi-agent answer, so the optimum (or a best response) gets 1.0 and the reward rises with the score.
"""

from __future__ import annotations

import operator
from itertools import repeat

import numpy as np

from fleet_rl.kernel.constants import OOM, TOO_SLOW, UNSTABLE, UNSUPPORTED
from rewards.ird import IRD_REWARD, IRD_RULES
from rewards.parsing import BAD_JSON, SCHEMA
from rewards.scoring import GroupScores, score_completions

__all__ = ["FEASIBLE_BASE", "INCONSISTENT_REWARD", "MALFORMED_REWARD", "fleet_reward", "log_kernel_rates"]

MALFORMED_REWARD = {BAD_JSON: 0.002, SCHEMA: 0.005}  # every other parse error: 0.0
INCONSISTENT_REWARD = 0.0075
INFEASIBLE_BASE, PROGRESS_CREDIT = 0.02, 0.23
FEASIBLE_BASE = 0.3
_error = operator.attrgetter("error")


def fleet_reward(completions, scenario, **kwargs) -> list[float]:
    """Composite reward in [0, 1] for each completion (see the module docstring)."""
    scores = score_completions(completions, scenario, **kwargs)
    errors = list(map(_error, scores.parsed))
    malformed = np.fromiter(map(MALFORMED_REWARD.get, errors, repeat(0.0)), dtype=float, count=len(errors))
    infeasible = INFEASIBLE_BASE + PROGRESS_CREDIT * scores.progress
    rewards = np.where(scores.feasible, FEASIBLE_BASE + (1.0 - FEASIBLE_BASE) * scores.score, infeasible)
    rewards = np.where(scores.valid, rewards, INCONSISTENT_REWARD)
    rewards = np.where(scores.has_plan, rewards, malformed)
    rewards[scores.ird] = IRD_REWARD
    log_kernel_rates(scores, kwargs.get("log_metric"))
    log_extra = kwargs.get("log_extra")
    if callable(log_extra):  # extra columns of TRL's completions table (log_completions)
        log_extra("parse_error", [error or "" for error in errors])
        log_extra("ird", [IRD_RULES[rule] if rule >= 0 else "" for rule in scores.ird_rule.tolist()])
        log_extra("percent_of_optimum", (100.0 * scores.score).round(1).tolist())
    return rewards.tolist()


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
