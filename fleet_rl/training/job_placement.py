"""How much of the scenario an answer plans: the share of its jobs that the answer places.

A plan may leave a job out (or give it 0 GPUs): the kernel then scores it idle, which earns less than a
job that runs but more than one that crashes (DESIGN.md §5). A policy can therefore settle on answers that
place one job and leave the rest out, and the fault shares (``oom_rate`` and the others: answers in which
some *placed* job crashes) do not show it. ``placed_job_shares`` does: per answer, the share of the jobs it
was asked to plan (every job of the scenario; a multi-agent row's own job) that it places with
``gpus > 0``. Answers without a plan place nothing (0.0); entries naming no job asked for, and repeats of
one job, add nothing. The exact optimum may itself leave a job idle, so 1.0 is a description, not a target.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleet_rl.scenario import Scenario
from rewards.parsing import parse_plan

__all__ = ["placed_job_shares"]


def placed_job_shares(
    scenarios: Sequence[Scenario | str], completions: Sequence, agents: Sequence[str | None] | None = None
) -> list[float]:
    """Per completion, the share of the jobs asked for that it places (see the module docstring).
    ``scenarios`` are ``Scenario`` objects or their JSON (the dataset column); ``agents`` the rows' agent job
    ids (``None`` or ``""`` for whole-plan rows)."""
    if len(scenarios) != len(completions):
        raise ValueError(f"{len(scenarios)} scenarios but {len(completions)} completions")
    if agents is not None and len(agents) != len(completions):
        raise ValueError(f"{len(agents)} agents but {len(completions)} completions")
    shares = []
    for k, (scenario, completion) in enumerate(zip(scenarios, completions, strict=True)):
        if not isinstance(scenario, Scenario):
            scenario = Scenario.from_json(scenario)
        agent = agents[k] if agents is not None else None
        asked = {agent} if agent else set(scenario.job_ids)
        plan = parse_plan(completion).plan
        placed = set() if plan is None else {job.id for job in plan.jobs if job.id in asked and job.gpus > 0}
        shares.append(len(placed) / len(asked) if asked else 0.0)
    return shares
