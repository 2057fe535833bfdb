"""A repair of an answer's failing jobs, read from the kernel's verdict and the prompt's ``Fits`` line.

On the ``sized`` prompt, with per-job and list-end credit, the SmolLM2 policy writes answers that parse,
name every job and invent none, and still crash: its jobs keep the template's sizing (16-bit everywhere,
tensor parallelism 1, the later jobs on one GPU each), and out of memory stays at ~0.5 of the held-out
answers (issue #43). Random edits (``fleet_rl/training/plan_edits.py``) seldom hit the job that failed with
a setting that holds it. ``repair_answer`` makes the local step a reviser makes: for each job the kernel's
verdict on the answer marks out of memory, unsupported, unstable or invalid, it writes one of the job's
``Fits`` entries (the prompt's own line, ``fleet_rl.replica_fit``: a format and the smallest tensor
parallelism that holds one replica of it, training jobs at micro-batch 1 with activation checkpointing),
drawn at random among the formats that fit. The job keeps as many whole replicas of its GPUs as it had (at
least one); GPUs it needs beyond the cluster's free ones come from the other jobs, largest first, each
keeping a whole replica; a repair that still does not fit tries the job's next format, then each format on
one replica, and a job none fits is left as it was. Sampled answers often ask for more GPUs than the
cluster has, and then every job fails: in a first run's first 15 steps (120 answers of seeds 0 and 1), 27
of the 70 answers with a failing job did; taking GPUs only from jobs that ran, and keeping each repaired
job's count, repaired 6 of those 27 (47 of the 70 in all); as here, 27 of 27 (68 of 70).

With ``place_omitted`` (expert iteration's repairs, ``fleet_rl/training/expert_iteration.py``) a job the
answer leaves out is placed too: on medium scenarios most of the policy's answers name the first job alone,
and an idle job fails the plan as a crash does. It takes one replica at one of its ``Fits`` settings, on free
GPUs or GPUs the placed jobs give in whole replicas; a job no setting finds GPUs for stays out.

With ``too_slow`` a job the verdict marks under its throughput floor is repaired too, on its own GPUs in
whole replicas, to one of its ``Fits`` formats at any tensor parallelism from the smallest that holds it up
to its GPUs: a smaller format runs each replica faster, a smaller tensor parallelism runs more replicas (a
training job's data parallelism), a larger one splits a serving replica's batch over more GPUs' bandwidth.
Which helps depends on the job, and the kernel's reward says which did. On the answers today's SmolLM2
preset gives the 96 held-out scenarios (``benchmarks/repair_ceiling.py``) about 0.3 of them miss a floor
once their crashes are repaired.

``best_repair`` draws several repairs of one answer and keeps the one the kernel's reward ranks first: the
repair is a random draw among the settings that fit, and the best of a few is the one worth imitating.

Nothing is read from the optimum or from the kernel's throughput: the verdict names which jobs failed, the
``Fits`` line (what the prompt states) says what holds them, and the kernel's reward alone says whether the
repaired plan is better. Only the repaired jobs' (and donors') ``{...}`` are rewritten, as compact JSON; the
rest of the text stays as sampled. ``None`` when the answer has no plan or no failing job it places, or no
repair applies.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from fleet_rl.kernel import evaluate
from fleet_rl.replica_fit import ReplicaFit, fit_part, replica_fits, tensor_parallel_sizes
from fleet_rl.scenario import Job, Scenario
from fleet_rl.solved_scenarios import solved_scenario
from fleet_rl.training.plan_edits import PlacedAnswer
from rewards.parsing import parse_plan

__all__ = ["REPAIRED_STATUSES", "best_repair", "repair_answer"]

REPAIRED_STATUSES = ("oom", "unsupported", "unstable", "invalid")
SLOW_STATUS = "too_slow"  # repaired with ``too_slow``: placed and running, under its min_tokens_per_s


def _take_gpus(parts: dict[str, dict], donors: list[str], needed: int) -> dict[str, dict] | None:
    """``needed`` GPUs taken from ``donors`` (most GPUs first), each rounded down to whole replicas and
    keeping one: the donors' new parts, or ``None`` when they cannot give that many."""
    taken: dict[str, dict] = {}
    for donor_id in sorted(donors, key=lambda job_id: (-parts[job_id]["gpus"], job_id)):
        if needed <= 0:
            break
        donor = parts[donor_id]
        size = donor.get("tensor_parallel", 1) if isinstance(donor.get("tensor_parallel"), int) else 1
        size = max(1, size)
        kept = max(size, (donor["gpus"] - needed) // size * size)
        if kept < donor["gpus"]:
            needed -= donor["gpus"] - kept
            taken[donor_id] = donor | {"gpus": kept}
    return taken if needed <= 0 else None


def _candidates(options: list, gpus: int):
    """Each fit with the GPUs to try it on: whole replicas of the job's ``gpus`` (at least one), then, where
    that is more, one replica (an answer over the cluster's count has no GPUs to keep)."""
    for fit in options:
        size = fit.tensor_parallel
        yield fit, max(size, gpus // size * size)
    for fit in options:
        if gpus // fit.tensor_parallel > 1:
            yield fit, fit.tensor_parallel


def _faster(options: list[ReplicaFit], job: Job, gpus: int) -> list[ReplicaFit]:
    """A slow job's settings: each format of ``options`` at each tensor parallelism from its smallest that
    holds a replica up to ``gpus``."""
    sizes = tensor_parallel_sizes(job, gpus)
    return [ReplicaFit(fit.fmt, size) for fit in options for size in sizes if size >= fit.tensor_parallel]


def _place(
    answer: PlacedAnswer, parts: dict[str, dict], job_id: str, options: list, rng: random.Random
) -> dict[str, dict] | None:
    """One replica of a job the answer leaves out, at one of its ``Fits`` settings (``options``, tried in a
    random order) on free GPUs or GPUs taken from the placed jobs in whole replicas; the donors' new parts
    and the job's, or ``None`` when no setting finds the GPUs."""
    options = list(options)
    rng.shuffle(options)
    for fit in options:
        part = fit_part(answer.jobs[job_id], fit, answer.scenario.gpu)
        short = sum(p["gpus"] for p in parts.values()) + part["gpus"] - answer.scenario.cluster.count
        taken = _take_gpus(parts, list(parts), short) if short > 0 else {}
        if taken is not None:
            return taken | {part["id"]: part}
    return None


def repair_answer(
    text: str,
    scenario: Scenario | str,
    rng: random.Random,
    *,
    place_omitted: bool = False,
    too_slow: bool = False,
) -> tuple[str, str] | None:
    """``(repaired text, "repair")`` (module docstring), or ``None``. The repaired text always parses to a
    plan. With ``place_omitted`` each job the answer leaves out (or gives no GPUs) is also placed, after
    the failing jobs are repaired: one replica at one of its ``Fits`` settings, on free GPUs or GPUs the
    placed jobs give in whole replicas (a job left idle fails the plan as a crash does). With ``too_slow``
    the jobs under their throughput floor count as failing."""
    read = PlacedAnswer.read(text, scenario)
    if read is None:
        return None
    answer, scenario, plan = read
    solved = solved_scenario(scenario)
    statuses = {job.id: job.status for job in evaluate(solved, plan).jobs}
    repaired_statuses = (*REPAIRED_STATUSES, SLOW_STATUS) if too_slow else REPAIRED_STATUSES
    failing = [
        job_id
        for job_id in answer.jobs
        if job_id in answer.parts and statuses.get(job_id) in repaired_statuses
    ]
    omitted = [job_id for job_id in answer.jobs if job_id not in answer.parts] if place_omitted else []
    if not failing and not omitted:
        return None
    fits = replica_fits(solved)
    parts = dict(answer.parts)
    changed: dict[str, dict] = {}
    for job_id in failing:
        options = [fit for fit in fits[job_id] if fit.tensor_parallel is not None]
        if statuses[job_id] == SLOW_STATUS:
            options = _faster(
                options, answer.jobs[job_id], min(parts[job_id]["gpus"], scenario.cluster.count)
            )
        rng.shuffle(options)
        for fit, gpus in _candidates(options, parts[job_id]["gpus"]):
            repaired = parts[job_id] | fit_part(answer.jobs[job_id], fit, scenario.gpu) | {"gpus": gpus}
            short = sum(part["gpus"] for part in parts.values()) - parts[job_id]["gpus"] + gpus
            short -= scenario.cluster.count
            donors = [other for other in parts if other != job_id]  # each keeps a whole replica
            taken = _take_gpus(parts, donors, short) if short > 0 else {}
            if taken is None:
                continue
            for other, part in [*taken.items(), (job_id, repaired)]:
                parts[other] = changed[other] = part
            break
    added: list[dict] = []
    for job_id in omitted:
        options = [fit for fit in fits[job_id] if fit.tensor_parallel is not None]
        placed = _place(answer, parts, job_id, options, rng)
        if placed is None:
            continue
        for other, part in placed.items():
            parts[other] = part
            if other in answer.spans:  # a placed job that gave GPUs, or the job's own object without GPUs
                changed[other] = part
            else:
                added.append(part)
    if not changed and not added:
        return None
    repaired_text = answer.rewritten(changed, added)
    return (repaired_text, "repair") if parse_plan(repaired_text).plan is not None else None


def best_repair(
    text: str,
    scenario: Scenario | str,
    rng: random.Random,
    score: Callable[[list[str], list], list[float]],
    *,
    draws: int = 1,
    **options,
) -> tuple[str, str] | None:
    """The best of ``draws`` repairs of ``text`` (``repair_answer`` with ``options``, each drawn from
    ``rng`` in turn) by ``score(texts, scenarios)`` (``rewards.fleet_reward``), the first drawn on a tie;
    ``None`` when no draw repairs anything. One draw is ``repair_answer`` itself, ``score`` unused."""
    if draws < 1:
        raise ValueError(f"draws is how many repairs to draw, at least 1: got {draws}")
    repairs = [repair_answer(text, scenario, rng, **options) for _ in range(draws)]
    repairs = [repair for repair in repairs if repair is not None]
    if len(repairs) <= 1:
        return repairs[0] if repairs else None
    scores = score([repair[0] for repair in repairs], [scenario] * len(repairs))
    return repairs[max(range(len(repairs)), key=lambda index: (scores[index], -index))]
