"""A repair of an answer's failing jobs, read from the kernel's verdict and the prompt's ``Fits`` line.

``explore_repair_rate: q`` (``FleetGRPOTrainer``) rewrites a share ``q`` of the sampled training answers
before they are scored: for each job the kernel's verdict on the answer marks out of memory, unsupported,
unstable or invalid, ``repair_answer`` writes one of the job's ``Fits`` entries (the prompt's own line,
``fleet_rl.replica_fit``: a format and the smallest tensor parallelism that holds one replica of it,
training jobs at micro-batch 1 with activation checkpointing), drawn at random among the formats that fit.
The job keeps as many whole replicas of its GPUs as it had (at least one); GPUs it needs beyond the
cluster's free ones come from the other jobs, largest first, each keeping a whole replica; a repair that
still does not fit tries the job's next format, then each format on one replica, and a job none fits is
left as it was. The repaired answer is scored and grouped like the others: the kernel's reward says whether
it beat the policy's own answers (off-policy on the rewritten tokens, as an answer from elsewhere).

Nothing is read from the optimum or from the kernel's throughput: the verdict names which jobs failed, the
``Fits`` line (what the prompt states) says what holds them. Only the repaired jobs' (and donors')
``{...}`` are rewritten, as compact JSON, and a split note before the fence (``--sft_split_note``) is
rewritten to the repaired split; the rest of the text stays as sampled. ``None`` when the answer has no plan
or no failing job it places, or no repair applies.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from fleet_rl.kernel import evaluate
from fleet_rl.plan_schema import Plan
from fleet_rl.replica_fit import fit_part, replica_fits
from fleet_rl.scenario import Scenario
from fleet_rl.solved_scenarios import solved_scenario
from fleet_rl.training.job_spans import job_spans
from fleet_rl.training.split_note import renoted
from rewards.parsing import parse_plan

__all__ = ["REPAIRED_STATUSES", "PlacedAnswer", "compact_json", "repair_answer", "repair_completions"]

REPAIRED_STATUSES = ("oom", "unsupported", "unstable", "invalid")


def compact_json(part: dict) -> str:
    """A job object as a repair writes it: JSON without spaces."""
    return json.dumps(part, separators=(",", ":"))


class PlacedAnswer:
    """The answer's text and, per job it places, its span and its decoded ``{...}`` object."""

    def __init__(self, text: str, scenario: Scenario) -> None:
        self.text, self.scenario = text, scenario
        self.jobs = {job.id: job for job in scenario.jobs}
        self.spans = job_spans(text, list(self.jobs))
        self.parts: dict[str, dict] = {}
        for job_id, (start, end) in self.spans.items():
            try:
                part = json.loads(text[start:end])
            except ValueError:
                continue
            if isinstance(part, dict) and isinstance(part.get("gpus"), int) and part["gpus"] > 0:
                self.parts[job_id] = part

    @classmethod
    def read(cls, text: str, scenario: Scenario | str) -> tuple[PlacedAnswer, Scenario, Plan] | None:
        """The answer, its scenario and its plan; ``None`` when no plan parses or it places no job."""
        if not isinstance(scenario, Scenario):
            scenario = Scenario.from_json(scenario)
        plan = parse_plan(text).plan
        if plan is None:
            return None
        answer = cls(text, scenario)
        return (answer, scenario, plan) if answer.parts else None

    def rewritten(self, changed: dict[str, dict]) -> str:
        """The text with each changed job's object replaced, and its split note (if any) rewritten to the
        placed jobs' new GPUs, in the answer's order, of the cluster's GPUs."""
        text = self.text
        pieces = {self.spans[job_id]: compact_json(part) for job_id, part in changed.items()}
        for (start, end), piece in sorted(pieces.items(), reverse=True):  # right to left keeps offsets
            text = text[:start] + piece + text[end:]
        placed = [
            changed.get(job_id, self.parts[job_id]) for job_id in sorted(self.parts, key=self.spans.get)
        ]
        return renoted(text, {"jobs": placed}, self.scenario.cluster.count)


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


def repair_answer(text: str, scenario: Scenario | str, rng: random.Random) -> str | None:
    """The repaired text (module docstring), or ``None``; a repaired text always parses to a plan."""
    read = PlacedAnswer.read(text, scenario)
    if read is None:
        return None
    answer, scenario, plan = read
    solved = solved_scenario(scenario)
    statuses = {job.id: job.status for job in evaluate(solved, plan).jobs}
    failing = [
        job_id
        for job_id in answer.jobs
        if job_id in answer.parts and statuses.get(job_id) in REPAIRED_STATUSES
    ]
    if not failing:
        return None
    fits = replica_fits(solved)
    parts = dict(answer.parts)
    changed: dict[str, dict] = {}
    for job_id in failing:
        options = [fit for fit in fits[job_id] if fit.tensor_parallel is not None]
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
    if not changed:
        return None
    repaired_text = answer.rewritten(changed)
    return repaired_text if parse_plan(repaired_text).plan is not None else None


def repair_completions(
    completion_ids: list[list[int]],
    completions: list,
    rows: Sequence[dict],
    *,
    rate: float,
    rng_key: str,
    tokenizer,
    eos_token_ids: Sequence[int],
    max_length: int,
) -> list[int]:
    """Repair, in place, a share ``rate`` of the sampled answers (token ids and text): each row is drawn
    with ``random.Random(f"{rng_key}/{row}")`` (the trainer's seed, step and process: a resumed run draws
    the same). Only whole answers that ended (EOS), on whole-plan rows (a multi-agent row asks for one
    job), whose repair fits ``max_length`` tokens, are rewritten. Returns the repaired rows."""
    repaired_rows = []
    for row, (ids, values) in enumerate(zip(completion_ids, rows, strict=True)):
        rng = random.Random(f"{rng_key}/{row}")
        if rng.random() >= rate or values.get("agent") or not ids or ids[-1] not in eos_token_ids:
            continue
        repaired = repair_answer(tokenizer.decode(ids, skip_special_tokens=True), values["scenario"], rng)
        if repaired is None:
            continue
        repaired_ids = tokenizer.encode(repaired, add_special_tokens=False) + [ids[-1]]
        if len(repaired_ids) > max_length:
            continue
        completion_ids[row] = repaired_ids
        is_chat = isinstance(completions[row], list)
        completions[row] = [{"role": "assistant", "content": repaired}] if is_chat else repaired
        repaired_rows.append(row)
    return repaired_rows
