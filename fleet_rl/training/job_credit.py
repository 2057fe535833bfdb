"""Per-job credit in whole plans: each job's tokens also get that job's own advantage (``job_credit: w``).

GRPO hands every token of an answer one advantage, the plan's reward against its group's. A plan of three
jobs whose first runs and whose second is out of memory trains the tokens of both alike: the policy cannot
tell which choice broke the plan.

``FleetGRPOTrainer`` (``job_credit_advantages``) keeps the plan's advantage on every token and adds, on the
tokens of job j's object in the answer's JSON, ``w × (c_j − mean c_j)``: job j's breadcrumb credit
(``rewards/job_credits.py``: 1 runs, a near miss in (1/3, 1/2) graded by its distance, 1/3 idle, at most 1/6
for a categorical fault) against the mean credit of job j over the group's answers that have one. An answer
whose job j ran where the group's mostly went out of memory has that job's tokens pushed up even when another
job sinks the plan, and the job that sank it is pushed down on its own tokens. A job that every answer of the
group handled alike adds nothing; the plan's advantage (score, feasibility) still drives the whole answer.

It is a credit assignment, not a reward: the rewards, their order and the logged reward are unchanged; the
(B, T) advantages go to TRL's loss as they are (``GRPOTrainer._compute_loss`` unsqueezes only a (B,) one).
Answers without per-job credit (no plan parsed, a plan the kernel rejects, IRD, multi-agent rows) keep the
plan's advantage alone. Tokens are mapped to jobs by decoding each answer token by token
(``token_char_ends``) and finding each job's ``{...}`` object around its ``"id"`` (``job_spans``).
``job_credit/mean_abs`` logs the mean size of the added term over the tokens it touched.

**A job the answer leaves out** has no tokens of its own: the tiers credit it as idle (1/3), above a
placed job's categorical fault (at most 1/6), and the plan's reward then prefers closing the jobs list
early to placing a job that fails, while % of optimum scores a plan with an idle job 0, as a crash. With
``omitted_job_credit: c`` (off: ``None``) such a job's credit is ``c`` instead, in the group means too, and
the tokens that closed the list early get ``w × Σ (c − mean c_j)`` over the jobs it left out, each: the
choice that left them out is told it did. Those tokens run from the one holding the last job object's
``}`` through the one holding the ``]`` (``closing_tokens``): SmolLM2 writes ``"}`` then ``]}`` to end the
list and ``"},`` to go on to another job, so the choice is taken at the ``"}`` (crediting the ``]`` alone
moved the mass to ``,"``, which does not parse: ``docs/experiment-log.md``). The rewards and the logged
reward stay the tiers'. ``job_credit/omitted`` logs the share of credited answers that left a job out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from fleet_rl.training.job_spans import job_spans
from rewards.job_credits import job_credits

__all__ = [
    "closing_tokens",
    "credit_omitted_jobs",
    "job_advantages",
    "job_credit_advantages",
    "job_of_tokens",
    "job_spans",
    "token_char_ends",
]


def token_char_ends(decode, token_ids: Sequence[int]) -> list[int]:
    """Where each token ends in the decoded text: ``len(decode(token_ids[:k + 1]))``, never decreasing (a
    token that ends inside a multi-byte character ends where the text had got to)."""
    ends, reached = [], 0
    for k in range(len(token_ids)):
        reached = max(reached, len(decode(token_ids[: k + 1])))
        ends.append(reached)
    return ends


def job_of_tokens(char_ends: Sequence[int], spans: dict[str, tuple[int, int]]) -> list[str | None]:
    """Each token's job: the job whose span holds the token's last character, else None."""
    owners, start = [], 0
    for end in char_ends:
        last = end - 1
        owner = None
        if end > start:  # a token that adds no character belongs to no job
            owner = next((job for job, (first, stop) in spans.items() if first <= last < stop), None)
        owners.append(owner)
        start = end
    return owners


def job_advantages(
    plan_advantages: torch.Tensor,
    credits: Sequence[dict[str, float] | None],
    token_jobs: Sequence[Sequence[str | None]],
    group_credits: Sequence[dict[str, float]],
    weight: float,
    length: int,
) -> torch.Tensor:
    """(rows, ``length``) advantages: each row's plan advantage on every token, plus ``weight × (c_j −
    group_credits[row][j])`` on the tokens of job j where the row has a credit for j."""
    rows = plan_advantages.numel()
    if not len(credits) == len(token_jobs) == len(group_credits) == rows:
        raise ValueError(
            f"{rows} plan advantages, {len(credits)} credit rows, {len(token_jobs)} token maps and "
            f"{len(group_credits)} group means"
        )
    advantages = plan_advantages.detach().float().cpu().reshape(rows, 1).repeat(1, length)
    for row, (credit, jobs, means) in enumerate(zip(credits, token_jobs, group_credits, strict=True)):
        if credit is None:
            continue
        for token, job in enumerate(jobs[:length]):
            if job is not None and job in credit and job in means:
                advantages[row, token] += weight * (credit[job] - means[job])
    return advantages


def closing_tokens(text: str, spans: dict[str, tuple[int, int]], char_ends: Sequence[int]) -> tuple[int, ...]:
    """The tokens that closed the jobs list after its last job object, in order: from the one holding that
    object's closing ``}`` through the one holding the first ``]`` after it (module docstring). Empty: no
    job object, no such ``]``, or it lies past the tokens."""
    if not spans:
        return ()
    object_end = max(end for _, end in spans.values())  # one past the last job object's ``}``
    close = text.find("]", object_end)
    if close < 0:
        return ()
    first = next((token for token, end in enumerate(char_ends) if end >= object_end), None)
    last = next((token for token, end in enumerate(char_ends) if end > close), None)
    if first is None or last is None:
        return ()
    return tuple(range(first, last + 1))


def credit_omitted_jobs(
    credit: dict[str, float], spans: dict[str, tuple[int, int]], value: float
) -> tuple[dict[str, float], list[str]]:
    """``credit`` with every job that has no object in the answer (no span) credited ``value``, and those
    jobs' ids in scenario order."""
    omitted = [job for job in credit if job not in spans]
    return {job: value if job in omitted else c for job, c in credit.items()}, omitted


def add_closing_credit(
    advantages: torch.Tensor,
    closing: Sequence[Sequence[int]],
    omitted: Sequence[Sequence[str]],
    credits: Sequence[dict[str, float] | None],
    group_credits: Sequence[dict[str, float]],
    weight: float,
) -> None:
    """Adds, in place, ``weight × Σ (credit[j] − group mean of j)`` over row's omitted jobs j to each of the
    row's closing tokens (``closing_tokens``) within the answer; rows without any, or whose omitted jobs
    have no group mean, get nothing."""
    for row, (tokens, left_out, credit, means) in enumerate(
        zip(closing, omitted, credits, group_credits, strict=True)
    ):
        if credit is None:
            continue
        term = weight * math.fsum(credit[job] - means[job] for job in left_out if job in means)
        for token in tokens:
            if token < advantages.size(1):
                advantages[row, token] += term


def group_job_means(credits: Sequence[dict[str, float] | None], group_size: int) -> list[dict[str, float]]:
    """Per row, ``{job id: mean credit}`` over its group's rows that have a credit for the job (GRPO's
    consecutive groups of ``group_size``); a job only one row of the group credits has no mean."""
    if len(credits) % group_size:
        raise ValueError(f"{len(credits)} rows do not split into groups of {group_size}")
    means = []
    for start in range(0, len(credits), group_size):
        group = [credit for credit in credits[start : start + group_size] if credit is not None]
        values: dict[str, list[float]] = {}
        for credit in group:
            for job, value in credit.items():
                values.setdefault(job, []).append(value)
        mean = {job: math.fsum(v) / len(v) for job, v in values.items() if len(v) > 1}
        means += [mean] * group_size
    return means


def job_credit_advantages(
    output: dict,
    inputs: list[dict],
    *,
    decode: Callable[[Sequence[int]], str],
    weight: float,
    omitted_credit: float | None,
    gather: Callable[[list], list],
    group_size: int,
    first_row: int,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The (rows, tokens) advantages of TRL's scored batch ``output`` with per-job credit added (module
    docstring), and the metrics to log. ``gather`` collects every process's credit rows in process order
    (GRPO's groups may span processes); this process's rows start at ``first_row`` of them."""
    lengths = output["completion_mask"].sum(dim=1).tolist()
    answers = [row[: int(n)].tolist() for row, n in zip(output["completion_ids"], lengths, strict=True)]
    texts = [decode(ids) for ids in answers]
    extra = {name: [row.get(name) for row in inputs] for name in ("agent", "given_plan") if name in inputs[0]}
    credits = job_credits(texts, [row["scenario"] for row in inputs], **extra)
    token_jobs: list[list[str | None]] = []
    closing: list[tuple[int, ...]] = []
    omitted: list[list[str]] = []
    for row, (ids, text, credit) in enumerate(zip(answers, texts, credits, strict=True)):
        jobs, closers, left_out = [], (), []
        if credit is not None:
            spans, char_ends = job_spans(text, list(credit)), token_char_ends(decode, ids)
            jobs = job_of_tokens(char_ends, spans)
            if omitted_credit is not None:
                credits[row], left_out = credit_omitted_jobs(credit, spans, omitted_credit)
                closers = closing_tokens(text, spans, char_ends) if left_out else ()
        token_jobs.append(jobs)
        closing.append(closers)
        omitted.append(left_out)
    means = group_job_means(gather(credits), group_size)[first_row : first_row + len(inputs)]
    plan_advantages = output["advantages"]
    advantages = job_advantages(
        plan_advantages, credits, token_jobs, means, weight, output["completion_ids"].size(1)
    )
    metrics = {}
    if omitted_credit is not None:
        add_closing_credit(advantages, closing, omitted, credits, means, weight)
        credited = [left_out for left_out, c in zip(omitted, credits, strict=True) if c is not None]
        if credited:
            metrics["job_credit/omitted"] = sum(1 for left_out in credited if left_out) / len(credited)
    touched = [
        abs(float(advantages[row, token]) - float(plan_advantages[row]))
        for row, jobs in enumerate(token_jobs)
        for token, job in enumerate(jobs)
        if job is not None and job in means[row]
    ]
    if touched:
        metrics["job_credit/mean_abs"] = sum(touched) / len(touched)
    return advantages.to(plan_advantages.device), metrics
