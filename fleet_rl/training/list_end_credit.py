"""The jobs list's end credited like a job (``extra_job_credit: x``, with ``omitted_job_credit: c``).

Each answer takes one choice that no job owns: where to end its jobs list. SmolLM2 takes it on the token
after a job's last value, ``"}`` (the list ends: ``]}`` follows) against ``"},`` (another job follows).
``omitted_job_credit`` tells an answer that ended the list early that it did (``closing_tokens`` in
``fleet_rl/training/job_credit.py``), and nothing tells one that ended it right: measured on SmolLM2 with
that credit on the ``"}`` (issue #43, ``docs/learning-benchmark.md``), the trained policy placed every job
and kept the format, and then went on past the scenario's last job, writing invented or repeated ids: the
IRD rule ``invented_or_duplicate_id`` fired on 0.52 and 0.74 of its held-out answers. Such an answer
scores ``IRD_REWARD``; its plan advantage goes to every token alike, the jobs it placed well included.

With ``extra_job_credit: x`` the list's end gets a credit per answer, as a job does:

- 1 where the answer wrote an object for every job of its scenario, none twice and no other, and closed
  the list; the tokens that closed it (``closing_tokens``) carry the term;
- ``c`` (``omitted_job_credit``) where it closed the list with a job left out, on the same tokens;
- ``x`` where it wrote a job object beyond its scenario's (``extra_objects``: an id the scenario lacks, or
  one written again), on that object's tokens and the token that closed the object before it, where the
  choice to go on was taken (``overshoot_tokens``);
- none for an answer with no plan, a plan the kernel rejects, another IRD rule, or a multi-agent row.

Against its group's mean end credit (``group_job_means`` with the key ``LIST_END``), ``job_credit × (credit
− mean)`` is added to those tokens. A group whose answers all ended alike adds nothing. The rewards and the
logged reward stay the tiers'. ``job_credit/extra`` logs the share of end-credited answers that went on.

Measured on SmolLM2 (issue #43, with ``job_credit 1.0``, ``omitted_job_credit 0``, half of each group
steered by ``sample_every_job``, ``x = 0``): the overshoot went (held-out IRD 0.01 and 0.00, every greedy
answer parsed, jobs placed 1.00 and 0.97), and the gain was +1.1 points [−2.4, +4.5]: the jobs still get
the template's settings, and on medium scenarios some job crashes.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["LIST_END", "add_list_end_credit", "extra_objects", "list_end_credit", "overshoot_tokens"]

LIST_END = "]"  # the list's end among a group's per-job credits: no job id is "]"


def extra_objects(objects: Sequence[tuple[str, tuple[int, int]]], job_ids: Sequence[str]) -> list[int]:
    """The indices in ``objects`` (``id_objects``: each object with an ``"id"``, in text order) of those that
    name no job of ``job_ids`` or one an earlier object already named."""
    wanted, seen, extra = set(job_ids), set(), []
    for index, (job_id, _) in enumerate(objects):
        if job_id not in wanted or job_id in seen:
            extra.append(index)
        seen.add(job_id)
    return extra


def _token_holding(char_ends: Sequence[int], position: int) -> int | None:
    """The token whose text holds character ``position``, or None past the tokens."""
    return next((token for token, end in enumerate(char_ends) if end > position), None)


def overshoot_tokens(
    objects: Sequence[tuple[str, tuple[int, int]]], extra: Sequence[int], char_ends: Sequence[int]
) -> tuple[int, ...]:
    """The tokens that took and wrote each extra object, in order, once each: from the one holding the
    previous object's closing ``}`` (the answer's first object: its own first character) through the one
    holding the extra object's ``}``; characters past the tokens are left out."""
    tokens: set[int] = set()
    for index in extra:
        start, end = objects[index][1]
        first = _token_holding(char_ends, objects[index - 1][1][1] - 1 if index else start)
        last = _token_holding(char_ends, end - 1)
        last = len(char_ends) - 1 if last is None else last
        if first is not None:
            tokens.update(range(first, last + 1))
    return tuple(sorted(tokens))


def list_end_credit(
    placed: bool, omitted: Sequence[str], extra: Sequence[int], omitted_value: float, extra_value: float
) -> float | None:
    """An answer's end credit (module docstring): ``extra_value`` where it wrote an extra object, else for
    an answer whose jobs were credited (``placed``) 1 or, with a job left out, ``omitted_value``; None for
    the rest."""
    if extra:
        return extra_value
    if not placed:
        return None
    return omitted_value if omitted else 1.0


def add_list_end_credit(
    advantages: torch.Tensor,
    tokens: Sequence[Sequence[int]],
    credits: Sequence[float | None],
    group_means: Sequence[dict[str, float]],
    weight: float,
) -> None:
    """Adds, in place, ``weight × (credit − group mean)`` to each row's end tokens within the answer; rows
    without an end credit, or whose group has no mean (one row credited), get nothing."""
    for row, (row_tokens, credit, means) in enumerate(zip(tokens, credits, group_means, strict=True)):
        if credit is None or LIST_END not in means:
            continue
        term = weight * (credit - means[LIST_END])
        for token in row_tokens:
            if token < advantages.size(1):
                advantages[row, token] += term
