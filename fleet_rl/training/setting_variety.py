"""How many distinct settings a policy's answers use per job kind: does it plan by the scenario?

A policy that has collapsed onto a template writes the same tensor parallelism and formats for every job
of a kind, whatever the GPU, the model or the memory; one that plans by the scenario varies them. So over a
set of answers (e.g. greedy answers to the 96 held-out scenarios), ``distinct_settings_per_kind`` counts,
per job kind (``train``, ``lora``, ``serve``), the distinct **settings** the answers give the jobs they
place (``gpus > 0``). A setting is ``(tensor_parallel, precision per module group, kv_cache)``; GPU counts
are left out, since an even split varies them with the cluster's size and says nothing of the policy.
``kv_cache`` counts for serve jobs only (the kernel ignores it elsewhere), and an omitted one reads as the
default it stands for (``None``). Answers without a plan, and entries naming no job of the scenario, add
nothing. Every kind of the scenarios appears in the result, with 0 where no answer placed such a job.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleet_rl.scenario import Scenario
from rewards.parsing import parse_plan

__all__ = ["Setting", "distinct_settings_per_kind", "job_setting"]

Setting = tuple[int, tuple[str, ...], str | None]  # (tensor_parallel, formats per module group, kv_cache)


def job_setting(job_plan, kind: str) -> Setting:
    """The setting of one job's part (a ``fleet_rl.plan_schema.JobPlan``) for a job of ``kind``."""
    precision = job_plan.precision
    formats = (precision.embedding, precision.attention, precision.mlp, precision.norm, precision.lm_head)
    return (job_plan.tensor_parallel, formats, job_plan.kv_cache if kind == "serve" else None)


def distinct_settings_per_kind(scenarios: Sequence[Scenario | str], completions: Sequence) -> dict[str, int]:
    """Per job kind, the number of distinct settings the completions give the jobs they place (see the
    module docstring). ``scenarios`` are ``Scenario`` objects or their JSON (the dataset column)."""
    if len(scenarios) != len(completions):
        raise ValueError(f"{len(scenarios)} scenarios but {len(completions)} completions")
    seen: dict[str, set[Setting]] = {}
    for scenario, completion in zip(scenarios, completions, strict=True):
        if not isinstance(scenario, Scenario):
            scenario = Scenario.from_json(scenario)
        kinds = {job.id: job.kind for job in scenario.jobs}
        for kind in kinds.values():
            seen.setdefault(kind, set())
        plan = parse_plan(completion).plan
        if plan is None:
            continue
        for job_plan in plan.jobs:
            kind = kinds.get(job_plan.id)
            if kind is not None and job_plan.gpus > 0:
                seen[kind].add(job_setting(job_plan, kind))
    return {kind: len(settings) for kind, settings in sorted(seen.items())}
