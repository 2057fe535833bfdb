"""Inverse Reward Design: degenerate strategies that game the throughput proxy (DESIGN.md §5).

A completion caught here gets exactly ``IRD_REWARD`` (0.01), whatever the kernel would say: above
malformed output, never above a crashing plan. The rules, by name (``IRD_RULES``; the first that fires is
reported, in this order):

- ``several_plans``: hedging with several plans in one answer (flagged by the parser).
- ``invented_or_duplicate_id``: the encoder's ``unknown_job``/``duplicate_job`` reasons; for a multi-agent
  answer this includes rewriting a job whose part was given.
- ``lowest_precision_everywhere``: every module group of every job the answer places in a sub-16-bit format
  (fp8/int8/int4), norms included, where that is known to break.
- ``copied_example``: the prompt's worked example answer, or one of its jobs, reused for this scenario
  (``rewards/copied_example.py``, checked in ``rewards/scoring.py`` where the plan is at hand).

Leaving a job idle that the optimum runs is not an override any more: such a plan is not feasible, so it
ranks in ``fleet_reward``'s partial-credit band below every plan that runs all the jobs the cluster can run,
and above the same plan with that job crashing (issue #9: a crash must never beat idling). A plan under
which nothing runs sits at the bottom of that band (every job idle, or worse, failing), which keeps a
gradient between the failing plans of a weak policy; the component rewards pay it nothing
(``rewards/components.py``). A merely conservative plan (say all bf16) is not degenerate either: the kernel
already scores it lower.
"""

from __future__ import annotations

import numpy as np

from fleet_rl.kernel.constants import FP8
from fleet_rl.kernel.evaluate import ScoredBatch

__all__ = ["IRD_REWARD", "IRD_RULES", "NOT_DEGENERATE", "degenerate_plans"]

IRD_REWARD = 0.01
IRD_RULES: tuple[str, ...] = (
    "several_plans",
    "invented_or_duplicate_id",
    "lowest_precision_everywhere",
    "copied_example",
)
SEVERAL_PLANS, INVENTED_OR_DUPLICATE_ID, LOWEST_PRECISION_EVERYWHERE, COPIED_EXAMPLE = range(len(IRD_RULES))
NOT_DEGENERATE = -1
_ID_REASONS = ("unknown_job:", "duplicate_job:")


def degenerate_plans(scored: ScoredBatch, own_row: np.ndarray) -> np.ndarray:
    """(P,) int: the first IRD rule each scored plan breaks (an index into ``IRD_RULES``), or
    ``NOT_DEGENERATE``. ``several_plans`` and ``copied_example`` are the caller's (they need the text or
    the plan).

    ``own_row`` (R,) bool marks the rows the answer's author wrote: every row of a whole plan, the agent's
    own job of a multi-agent answer (the given parts are not the agent's doing)."""
    num_plans = len(scored.plan_reasons)
    rows, plan_of_row = scored.rows, scored.plan_of_row

    def any_row(mask: np.ndarray) -> np.ndarray:
        return np.bincount(plan_of_row, weights=mask.astype(float), minlength=num_plans) > 0

    placed = own_row & (rows.gpus > 0)
    # a placed row with some group in a 16-bit or wider format (codes below FP8)
    wide = placed & (rows.precision.min(axis=1) < FP8)
    lowest_everywhere = any_row(placed) & ~any_row(wide)
    names_ids = np.array([_names_ids(reasons) for reasons in scored.plan_reasons], dtype=bool)
    rule = np.full(num_plans, NOT_DEGENERATE, dtype=np.int64)
    for code, fired in (
        (LOWEST_PRECISION_EVERYWHERE, lowest_everywhere),
        (INVENTED_OR_DUPLICATE_ID, names_ids),
    ):  # the last assignment wins: the order of IRD_RULES
        rule[fired] = code
    return rule


def _names_ids(reasons: list[str]) -> bool:
    """Whether some reason is an invented or duplicated job id."""
    return any(reason.startswith(_ID_REASONS) for reason in reasons)
