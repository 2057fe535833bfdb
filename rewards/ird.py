"""Inverse Reward Design: degenerate strategies that game the throughput proxy (DESIGN.md §5).

A completion caught here gets exactly ``IRD_REWARD`` (0.01), whatever the kernel would say: above
malformed output, never above a crashing plan. The rules, by name (``IRD_RULES``; when several fire, the
most specific is reported: copied example, then invented ids, lowest precision, places nothing). Each fires
in one place below: ``answer_rules`` for ``several_plans``, ``degenerate_plans`` for the others.

- ``several_plans``: hedging with several plans in one answer (the parser's ``several_plans`` error).
- ``invented_or_duplicate_id``: the kernel's ``ReasonCode.UNKNOWN_JOB``/``DUPLICATE_JOB`` reasons; for a
  multi-agent answer this includes rewriting a job whose part was given.
- ``lowest_precision_everywhere``: every module group of every job the answer places in a sub-16-bit format
  (fp8/int8/int4), norms included, where that is known to break.
- ``places_nothing``: a whole plan (not a multi-agent part) that places no job on any GPU
  (``{"jobs": []}``, all 0 GPUs): giving up. Doing nothing is the safe answer a weak policy falls back to:
  in a SmolLM2 GRPO pilot that paid an all-idle plan 0.135 (the bottom of the partial band), every one of a
  group's 8 answers gave every job 0 GPUs by step 14. A plan that places jobs which then fail is an honest
  attempt, not giving up: ``fleet_reward`` grades it by how close its jobs came (``rewards/breadcrumbs.py``).
  Before breadcrumbs this rule also caught plans whose placed jobs all failed; on tiers with throughput floors
  that made 67-78 % of a weak policy's training answers score exactly 0.01, and GRPO drifted to giving up.
- ``copied_example``: the prompt's worked example answer, or one of its jobs, reused for this scenario
  (``rewards/copied_example.py`` tells; ``rewards/scoring.py`` asks it of each answer's own plan, before
  a multi-agent part is merged with the given parts).

Leaving a job idle that the optimum runs is not an override any more: such a plan is not feasible, so it
ranks in ``fleet_reward``'s partial-credit band below every plan that runs all the jobs the cluster can run,
and no lower than the same plan with that job failing on a setting that cannot run (integrity: breaking a
job on purpose must never beat idling it; a near miss, over memory or under its floor, earns more). A merely
conservative plan (say all bf16) is not degenerate either: the kernel already scores it lower.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fleet_rl.kernel.batch_scoring import ScoredBatch
from fleet_rl.kernel.constants import FP8
from fleet_rl.kernel.reasons import ReasonCode
from rewards.parsing import SEVERAL_PLANS as PARSED_SEVERAL_PLANS
from rewards.parsing import ParseResult

__all__ = ["IRD_REWARD", "IRD_RULES", "NOT_DEGENERATE", "answer_rules", "degenerate_plans"]

IRD_REWARD = 0.01
IRD_RULES: tuple[str, ...] = (
    "several_plans",
    "invented_or_duplicate_id",
    "lowest_precision_everywhere",
    "places_nothing",
    "copied_example",
)
SEVERAL_PLANS, INVENTED_OR_DUPLICATE_ID, LOWEST_PRECISION_EVERYWHERE, PLACES_NOTHING, COPIED_EXAMPLE = range(
    len(IRD_RULES)
)
NOT_DEGENERATE = -1
_JOB_ID_CODES = frozenset({ReasonCode.UNKNOWN_JOB, ReasonCode.DUPLICATE_JOB})


def answer_rules(parsed: Sequence[ParseResult], plan_rules: np.ndarray) -> np.ndarray:
    """(N,) int: the IRD rule each answer breaks, or ``NOT_DEGENERATE``: ``several_plans`` for an answer
    the parser found several plans in (it has no plan), else its plan's rule (``plan_rules``, from
    ``degenerate_plans``, one per answer with a plan, in order)."""
    has_plan = np.array([result.plan is not None for result in parsed], dtype=bool)
    several = np.array([result.error == PARSED_SEVERAL_PLANS for result in parsed], dtype=bool)
    rule = np.full(len(parsed), NOT_DEGENERATE, dtype=np.int64)
    rule[has_plan] = plan_rules
    rule[several] = SEVERAL_PLANS
    return rule


def degenerate_plans(
    scored: ScoredBatch, own_row: np.ndarray, is_agent_plan: np.ndarray, copied: np.ndarray
) -> np.ndarray:
    """(P,) int: the IRD rule each scored plan breaks (an index into ``IRD_RULES``; the most specific when
    several fire), or ``NOT_DEGENERATE``.

    ``own_row`` (R,) bool marks the rows the answer's author wrote: every row of a whole plan, the agent's
    own job of a multi-agent answer (the given parts are not the agent's doing). ``is_agent_plan`` (P,):
    an agent that leaves its own job idle abstains, which is no degenerate strategy (the others' jobs run).
    ``copied`` (P,) bool: the answer's own plan copies the prompt's example (``copies_example``)."""
    num_plans = len(scored.plan_reasons)
    rows, plan_of_row = scored.rows, scored.plan_of_row

    def any_row(mask: np.ndarray) -> np.ndarray:
        return np.bincount(plan_of_row, weights=mask.astype(float), minlength=num_plans) > 0

    placed = own_row & (rows.gpus > 0)
    # a placed row with some group in a 16-bit or wider format (codes below FP8)
    wide = placed & (rows.precision.min(axis=1) < FP8)
    lowest_everywhere = any_row(placed) & ~any_row(wide)
    places_nothing = scored.valid & ~is_agent_plan & ~any_row(placed)
    names_ids = np.array(
        [any(reason.code in _JOB_ID_CODES for reason in reasons) for reasons in scored.plan_reasons],
        dtype=bool,
    )
    rule = np.full(num_plans, NOT_DEGENERATE, dtype=np.int64)
    for code, fired in (
        (PLACES_NOTHING, places_nothing),
        (LOWEST_PRECISION_EVERYWHERE, lowest_everywhere),
        (INVENTED_OR_DUPLICATE_ID, names_ids),
        (COPIED_EXAMPLE, copied),
    ):  # the last assignment wins: the most specific rule is reported
        rule[fired] = code
    return rule
