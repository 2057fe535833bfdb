"""The multi-agent task: one job's agent plans its own part while the other jobs' parts are given.

A ``multiagent`` scenario is an ordinary scenario (``make_scenario("multiagent", seed)``); what makes it
multi-agent is the request. ``agent_request(scenario, seed)`` picks the agent and the given parts:

- the agent is drawn from ``Random("fleet_rl/multiagent-agent/<seed>")`` among the jobs the exact optimum
  runs (a job the optimum leaves idle has nothing to contribute, so its best answer would be "0 GPUs");
- the given parts are the optimum's parts for every other job, so the agent's best response is exactly
  its part of the optimum and the merged plan can reach a score of 1.0.

The agent answers ``{"jobs": [<its part>]}`` (``own_part`` cuts it from a whole plan, for the planners that
answer multi-agent rows: baselines, warm-start targets); ``merge_answer`` appends that to the given parts,
and the merged plan is scored like any plan. An answer that also plans another job repeats a given id,
which the kernel flags as ``duplicate_job`` (an IRD rule: agents must not rewrite the others' parts).
"""

from __future__ import annotations

import random

from fleet_rl.plan_schema import Plan
from fleet_rl.scenario import Scenario

__all__ = ["agent_request", "merge_answer", "own_part"]


def agent_request(scenario: Scenario, seed: int) -> tuple[str, dict]:
    """(agent job id, given plan dict of the other jobs' optimal parts) for item ``seed``; deterministic."""
    from fleet_rl.solved_scenarios import solved_scenario  # the kernel does not import this module

    solved = solved_scenario(scenario)
    running = [job_id for job_id, gpus in zip(solved.job_ids, solved.optimal_gpus, strict=True) if gpus > 0]
    agent = random.Random(f"fleet_rl/multiagent-agent/{seed}").choice(running or list(solved.job_ids))
    given = [job for job in solved.optimal_plan["jobs"] if job["id"] != agent]
    return agent, {"jobs": given}


def merge_answer(given_plan: Plan, answer: Plan) -> Plan:
    """The joint plan: the given parts, then every part of the agent's answer (repeats are kept, so the
    kernel sees and rejects an answer that rewrites another job)."""
    return Plan(jobs=[*given_plan.jobs, *answer.jobs])


def own_part(plan: dict, agent: str | None) -> dict:
    """What a request answers with, given a whole plan dict: the agent's own part (``{"jobs": [its job's
    entry]}``), or the whole plan when there is no agent (``""`` or None: a whole-plan request)."""
    if not agent:
        return plan
    return {"jobs": [job for job in plan["jobs"] if job["id"] == agent]}
