"""Inverse Reward Design: degenerate strategies that game the throughput proxy (DESIGN.md §5).

A completion caught here gets exactly ``IRD_REWARD`` (0.01), whatever the kernel would say: above
malformed output, never above a crashing plan. The rules, by name (``IRD_RULES``; when several fire, the
most specific is reported: copied example, then invented ids, lowest precision, nothing runs):

- ``several_plans``: hedging with several plans in one answer (flagged by the parser).
- ``invented_or_duplicate_id``: the encoder's ``unknown_job``/``duplicate_job`` reasons; for a multi-agent
  answer this includes rewriting a job whose part was given.
- ``lowest_precision_everywhere``: every module group of every job the answer places in a sub-16-bit format
  (fp8/int8/int4), norms included, where that is known to break.
- ``nothing_runs``: a whole plan (not a multi-agent part) under which no job runs, every job idle
  (``{"jobs": []}``, all 0 GPUs) or failing. Doing nothing is the safe answer a weak policy falls back to:
  in a SmolLM2 GRPO pilot that paid an all-idle plan 0.135 (the bottom of the partial band), every one of a
  group's 8 answers gave every job 0 GPUs by step 14.
- ``copied_example``: the prompt's worked example answer, or one of its jobs, reused for this scenario
  (``rewards/copied_example.py``, checked in ``rewards/scoring.py`` where the plan is at hand).

Leaving a job idle that the optimum runs is not an override any more: such a plan is not feasible, so it
ranks in ``fleet_reward``'s partial-credit band below every plan that runs all the jobs the cluster can run,
and no lower than the same plan with that job crashing (issue #9: a crash must never beat idling). A merely
conservative plan (say all bf16) is not degenerate either: the kernel already scores it lower.
"""

from __future__ import annotations

import numpy as np

from fleet_rl.kernel.constants import FP8, OK
from fleet_rl.kernel.evaluate import ScoredBatch

__all__ = ["IRD_REWARD", "IRD_RULES", "NOT_DEGENERATE", "degenerate_plans"]

IRD_REWARD = 0.01
IRD_RULES: tuple[str, ...] = (
    "several_plans",
    "invented_or_duplicate_id",
    "lowest_precision_everywhere",
    "nothing_runs",
    "copied_example",
)
SEVERAL_PLANS, INVENTED_OR_DUPLICATE_ID, LOWEST_PRECISION_EVERYWHERE, NOTHING_RUNS, COPIED_EXAMPLE = range(
    len(IRD_RULES)
)
NOT_DEGENERATE = -1
_ID_REASONS = ("unknown_job:", "duplicate_job:")


def degenerate_plans(scored: ScoredBatch, own_row: np.ndarray, is_agent_plan: np.ndarray) -> np.ndarray:
    """(P,) int: the first IRD rule each scored plan breaks (an index into ``IRD_RULES``), or
    ``NOT_DEGENERATE``. ``several_plans`` and ``copied_example`` are the caller's (they need the text or
    the plan).

    ``own_row`` (R,) bool marks the rows the answer's author wrote: every row of a whole plan, the agent's
    own job of a multi-agent answer (the given parts are not the agent's doing). ``is_agent_plan`` (P,):
    an agent that leaves its own job idle abstains, which is no degenerate strategy (the others' jobs run)."""
    num_plans = len(scored.plan_reasons)
    rows, plan_of_row = scored.rows, scored.plan_of_row

    def any_row(mask: np.ndarray) -> np.ndarray:
        return np.bincount(plan_of_row, weights=mask.astype(float), minlength=num_plans) > 0

    placed = own_row & (rows.gpus > 0)
    # a placed row with some group in a 16-bit or wider format (codes below FP8)
    wide = placed & (rows.precision.min(axis=1) < FP8)
    lowest_everywhere = any_row(placed) & ~any_row(wide)
    nothing_runs = scored.valid & ~is_agent_plan & ~any_row(scored.results.status == OK)
    names_ids = np.array([_names_ids(reasons) for reasons in scored.plan_reasons], dtype=bool)
    rule = np.full(num_plans, NOT_DEGENERATE, dtype=np.int64)
    for code, fired in (
        (NOTHING_RUNS, nothing_runs),
        (LOWEST_PRECISION_EVERYWHERE, lowest_everywhere),
        (INVENTED_OR_DUPLICATE_ID, names_ids),
    ):  # the last assignment wins: the most specific rule is reported
        rule[fired] = code
    return rule


def _names_ids(reasons: list[str]) -> bool:
    """Whether some reason is an invented or duplicated job id."""
    return any(reason.startswith(_ID_REASONS) for reason in reasons)
