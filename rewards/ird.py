"""Inverse Reward Design: degenerate strategies that game the throughput proxy (DESIGN.md §5).

A completion caught here gets exactly ``IRD_REWARD`` (0.01), whatever the kernel would say: above
malformed output, never above a crashing plan. The rules read the kernel's batch arrays (one pass over the
rows, no per-completion Python beyond a look at each plan's reason codes):

- ``several_plans``: hedging with several plans in one answer (flagged by the parser).
- invented or duplicated job ids: the encoder's ``unknown_job``/``duplicate_job`` reasons.
- lowest precision everywhere: every module group of every placed job in a sub-16-bit format
  (fp8/int8/int4), norms included, where that is known to break.
- starved job: a job the optimum runs is omitted or given 0 GPUs (whether or not GPUs sit idle).

- copied example: the plan is the prompt's worked example answer with the ids swapped
  (``fleet_rl.prompts.copies_example``, checked in ``rewards/scoring.py`` where the plan is at hand); copying
  it verbatim names the example's job ids, which the invented-id rule catches.

A merely conservative plan (say all bf16) is not degenerate: the kernel already scores it lower.
"""

from __future__ import annotations

import numpy as np

from fleet_rl.kernel.constants import FP8
from fleet_rl.kernel.evaluate import ScoredBatch

IRD_REWARD = 0.01
_ID_REASONS = ("unknown_job:", "duplicate_job:")


def degenerate_plans(scored: ScoredBatch, optimal_gpus: np.ndarray, plan_of_row: np.ndarray) -> np.ndarray:
    """(P,) bool: which scored plans break an IRD rule (``several_plans`` is the caller's: it has no plan).

    ``optimal_gpus`` (R,) is the optimum's GPU count for each row's job; ``plan_of_row`` (R,) its plan."""
    num_plans = len(scored.plan_reasons)
    rows = scored.rows

    def any_row(mask: np.ndarray) -> np.ndarray:
        return np.bincount(plan_of_row, weights=mask.astype(float), minlength=num_plans) > 0

    placed = rows.gpus > 0
    # a placed row with some group in a 16-bit or wider format (codes below FP8)
    wide = placed & (rows.precision.min(axis=1) < FP8)
    lowest_everywhere = any_row(placed) & ~any_row(wide)
    starved = any_row((optimal_gpus > 0) & ~placed)
    invented = np.zeros(num_plans, dtype=bool)
    invented[[p for p, reasons in enumerate(scored.plan_reasons) if reasons and _names_ids(reasons)]] = True
    return lowest_everywhere | starved | invented


def _names_ids(reasons: list[str]) -> bool:
    """Whether some reason is an invented or duplicated job id."""
    for reason in reasons:
        if reason.startswith(_ID_REASONS):
            return True
    return False
