"""Each job's own breadcrumb credit in a whole plan: which of an answer's choices ran and which broke.

``fleet_reward`` scores a whole plan: its ``progress`` is the mean breadcrumb credit over the plan's jobs
(``rewards/breadcrumbs.py``: 1 runs, a near miss in (1/3, 1/2) graded by its distance, 1/3 idle, at most 1/6
for a categorical fault). ``job_credits`` returns those per-job credits before they are averaged, keyed by
job id, so a trainer can credit each job's tokens with what that job did (``fleet_rl/training/job_credit.py``)
instead of handing every token the plan's one reward.

A completion gets ``None`` (no per-job credit) where the plan's reward does not come from its jobs' credits:
no plan parsed, a plan the kernel rejects for anything but asking more GPUs than the cluster has (its jobs
were not simulated), a degenerate plan (IRD: its reward is overridden), and a multi-agent answer (one job
is the author's: the plan's own reward already credits it alone).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fleet_rl.kernel.constants import OK
from fleet_rl.kernel.distances import row_distances
from rewards.breadcrumbs import job_credit
from rewards.scoring import score_completions

__all__ = ["job_credits"]


def job_credits(completions: Sequence, scenario: Sequence, **kwargs) -> list[dict[str, float] | None]:
    """Per completion, ``{job id: breadcrumb credit}`` over every job of its scenario (in scenario order), or
    ``None`` (module docstring). Same inputs as a reward function; never raises on a malformed completion."""
    scores = score_completions(completions, scenario, **kwargs)
    credits: list[dict[str, float] | None] = [None] * len(completions)
    scored = scores.scored
    if scored is None:
        return credits
    runs = scored.results.status == OK
    credit = job_credit(runs, scored.rows.gpus > 0, row_distances(scored.table, scored.rows, scored.results))
    first_row = np.cumsum(scored.plan_sizes) - scored.plan_sizes
    for plan, completion in enumerate(np.flatnonzero(scores.has_plan).tolist()):
        # progress > 0 exactly where the jobs were simulated: valid, or rejected only for over-allocation
        if scores.is_agent[completion] or scores.ird[completion] or scores.progress[completion] <= 0.0:
            continue
        start = first_row[plan]
        job_ids = scores.solved[completion].job_ids
        credits[completion] = dict(zip(job_ids, credit[start : start + len(job_ids)].tolist(), strict=True))
    return credits
