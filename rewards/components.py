"""Component rewards: the parts of ``fleet_reward``, one function each, for ``reward_weights``.

Each has TRL's signature and returns floats in [0, 1], so with ``reward_funcs: [format_reward,
feasibility_reward, efficiency_reward, ird_reward]`` TRL logs each as ``rewards/<name>/mean`` and combines
them with ``reward_weights``. Each reads the scoring pass (``rewards/scoring.py``) of its batch.

- ``format_reward``: 1 for a usable plan (consistent with the scenario, no IRD rule broken, some job of the
  author's runs), 0.75 for a schema-valid plan that is not usable (invented ids, over-allocated,
  ``{"jobs": []}``, nothing runs...),
  0.5 for JSON that decodes but is not a plan, 0.25 for a brace that never decodes, 0 otherwise (no JSON,
  not text, too large, too deep, several plans).
- ``feasibility_reward``: share of the author's jobs that run (status ok; a multi-agent answer: its own
  job); 0 for an inconsistent plan or an IRD-flagged one.
- ``efficiency_reward``: the score (a whole plan: objective ÷ the exact optimum; an agent: its contribution
  ÷ its best response's); 0 when IRD-flagged.
- ``ird_reward``: 1 for a parsed plan that breaks no IRD rule and runs some job of the author's, 0
  otherwise (degenerate, doing nothing, or no plan).

None of them pays for a useless plan: each gives a plan under which nothing runs (all idle, or all failing)
less than a plan under which everything runs, and so does their sum (what TRL computes when
``reward_weights`` is omitted). The explicit check on the runs share does it: the IRD rule
``places_nothing`` only catches a whole plan that places no job, not one whose placed jobs all fail, nor a
multi-agent answer that abstains (the others' jobs run).
"""

from __future__ import annotations

import numpy as np

from rewards.parsing import BAD_JSON, SCHEMA
from rewards.scoring import score_completions

__all__ = ["efficiency_reward", "feasibility_reward", "format_reward", "ird_reward"]

_FORMAT_PARTIAL = {SCHEMA: 0.5, BAD_JSON: 0.25}
UNUSABLE_PLAN_FORMAT = 0.75


def format_reward(completions, scenario, **kwargs) -> list[float]:
    """1 / 0.75 / 0.5 / 0.25 / 0: usable plan, unusable plan, JSON that is not a plan, undecodable JSON,
    anything else."""
    scores = score_completions(completions, scenario, **kwargs)
    usable = scores.valid & ~scores.ird & (scores.runs_share > 0)
    return [
        (1.0 if usable[i] else UNUSABLE_PLAN_FORMAT)
        if result.plan is not None
        else _FORMAT_PARTIAL.get(result.error, 0.0)
        for i, result in enumerate(scores.parsed)
    ]


def feasibility_reward(completions, scenario, **kwargs) -> list[float]:
    """Share of the author's jobs that run; 0 when IRD-flagged."""
    scores = score_completions(completions, scenario, **kwargs)
    return np.where(scores.ird, 0.0, scores.runs_share).tolist()


def efficiency_reward(completions, scenario, **kwargs) -> list[float]:
    """Score in [0, 1] (objective ÷ optimum, or an agent's contribution ÷ its best); 0 when IRD-flagged."""
    scores = score_completions(completions, scenario, **kwargs)
    return np.where(scores.ird, 0.0, scores.score).tolist()


def ird_reward(completions, scenario, **kwargs) -> list[float]:
    """1 for a parsed plan no IRD rule flags and under which some job of the author's runs, else 0."""
    scores = score_completions(completions, scenario, **kwargs)
    return (scores.has_plan & ~scores.ird & (scores.runs_share > 0)).astype(float).tolist()
