"""Inverse Reward Design: degenerate strategies that game the throughput proxy (DESIGN.md §5).

A completion caught here gets exactly ``IRD_REWARD`` (0.01), whatever the kernel would say: above
malformed output, never above a crashing plan. Rules (each returns a code or None):

- ``several_plans``: hedging with several plans in one answer (flagged by the parser).
- ``invented_or_duplicated_jobs``: a plan entry whose id is not a job of the scenario, or a job planned twice.
- ``lowest_precision_everywhere``: every module group of every planned job in a sub-16-bit format
  (fp8/int8/int4), norms included, where that is known to break.
- ``starved_job``: a job the optimum runs is omitted or given 0 GPUs (whether or not GPUs sit idle).

Not yet covered: copying the prompt's worked example (the prompts arrive with issue #3's prompt part).
A merely conservative plan (say all bf16) is not degenerate: the kernel already scores it lower.
"""

from __future__ import annotations

from fleet_rl.kernel.solver import SolvedScenario
from fleet_rl.plan_schema import Plan
from rewards.parsing import DUPLICATE_JOB, SEVERAL_PLANS, UNKNOWN_JOB, check_against_scenario

IRD_REWARD = 0.01
SUB_16_BIT = frozenset({"fp8", "int8", "int4"})


def degenerate_strategy(
    plan: Plan | None, parse_error: str | None, scenario, solved: SolvedScenario
) -> str | None:
    """The first IRD rule the answer breaks, or None."""
    if parse_error == SEVERAL_PLANS:
        return "several_plans"
    if plan is None:
        return None
    if {UNKNOWN_JOB, DUPLICATE_JOB} & set(check_against_scenario(plan, scenario)):
        return "invented_or_duplicated_jobs"
    placed = [job for job in plan.jobs if job.gpus > 0]
    formats = {getattr(job.precision, group) for job in placed for group in job.precision.__struct_fields__}
    if placed and formats <= SUB_16_BIT:
        return "lowest_precision_everywhere"
    gpus_by_id = {job.id: job.gpus for job in plan.jobs}
    for job in solved.optimal_plan["jobs"]:
        if job["gpus"] > 0 and gpus_by_id.get(job["id"], 0) == 0:
            return "starved_job"
    return None
