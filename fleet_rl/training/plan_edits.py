"""One random change to one job of an answer's plan, made in the answer's own text: exploration by edits.

On the SmolLM2 presets GRPO settles within ~20 steps on answers that place the scenario's first job alone,
on every GPU, at tensor parallelism 1 in bf16 (issue #43): its samples stop differing, so the group has
nothing left to compare. Leaving that template takes choices the policy no longer samples: another tensor
parallelism, another format, a job it leaves out. ``edit_answer`` makes one such choice at random in a
sampled answer, so that the kernel can score it beside the policy's own answers
(``fleet_rl/training/edit_exploration.py`` trains on both):

- ``tensor_parallel``: a placed job's tensor parallelism becomes another size the model's heads and the
  cluster allow (``fleet_rl.replica_fit.tensor_parallel_sizes``); its GPUs are rounded down to a multiple
  of it (at least one replica), when the cluster has them;
- ``format``: a placed job's attention and mlp take another format the GPU supports, weight-only formats
  (int8, int4) only for serve and lora jobs (the rule the prompt states);
- ``add_job``: a job the answer leaves out is added with the tensor parallelism and formats of a placed
  job (1 where the heads do not divide) and one replica's GPUs, taken from free GPUs or else from the
  placed job with most GPUs when that one keeps a replica.

Each edit is drawn at random, never read from the optimum, the ``Fits`` line or any scenario figure beyond
the rules the prompt states (heads divide tensor parallelism, formats the GPU has, GPUs in the cluster): the
kernel's reward alone decides whether it helped. Only the edited job's ``{...}`` (and a donor's) is
rewritten, as compact JSON; the rest of the text stays as sampled. ``None`` when the answer has no plan, no
job to edit, or no edit applies.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from fleet_rl.catalog import PRECISIONS, WEIGHT_ONLY_PRECISIONS
from fleet_rl.plan_schema import Plan
from fleet_rl.replica_fit import tensor_parallel_sizes
from fleet_rl.scenario import Scenario
from fleet_rl.training.job_spans import job_spans
from rewards.parsing import parse_plan

__all__ = ["EDITS", "PlacedAnswer", "compact_json", "edit_answer"]

EDITS = ("tensor_parallel", "format", "add_job")
_TRAIN_FIELDS = ("micro_batch_size", "activation_checkpointing", "sharding")


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

    def gpus_in_use(self) -> int:
        return sum(part["gpus"] for part in self.parts.values())

    def rewritten(self, changed: dict[str, dict], added: Sequence[dict] = ()) -> str:
        """The text with each changed job's object replaced, and the ``added`` objects after the last job
        object, in order."""
        text = self.text
        insert_at = max(end for _, end in self.spans.values())
        pieces = {self.spans[job_id]: compact_json(part) for job_id, part in changed.items()}
        if added:
            pieces[(insert_at, insert_at)] = "".join("," + compact_json(part) for part in added)
        for (start, end), piece in sorted(pieces.items(), reverse=True):  # right to left keeps offsets
            text = text[:start] + piece + text[end:]
        return text


def compact_json(part: dict) -> str:
    """A job object as the edits write it: JSON without spaces."""
    return json.dumps(part, separators=(",", ":"))


def _replica_gpus(gpus: int, tensor_parallel: int) -> int:
    """``gpus`` rounded down to a multiple of ``tensor_parallel``, at least one replica."""
    return max(tensor_parallel, gpus // tensor_parallel * tensor_parallel)


def _edit_tensor_parallel(answer: PlacedAnswer, rng: random.Random) -> str | None:
    job_id = rng.choice(sorted(answer.parts))
    part = answer.parts[job_id]
    sizes = tensor_parallel_sizes(answer.jobs[job_id], answer.scenario.cluster.count)
    sizes = [size for size in sizes if size != part.get("tensor_parallel")]
    if not sizes:
        return None
    size = rng.choice(sizes)
    gpus = _replica_gpus(part["gpus"], size)
    if answer.gpus_in_use() - part["gpus"] + gpus > answer.scenario.cluster.count:
        return None
    return answer.rewritten({job_id: part | {"tensor_parallel": size, "gpus": gpus}})


def _edit_format(answer: PlacedAnswer, rng: random.Random) -> str | None:
    job_id = rng.choice(sorted(answer.parts))
    part = answer.parts[job_id]
    precision = part.get("precision")
    if not isinstance(precision, dict):
        return None
    kind = answer.jobs[job_id].kind
    formats = [
        fmt
        for fmt in PRECISIONS
        if answer.scenario.gpu.supports(fmt)
        and (kind != "train" or fmt not in WEIGHT_ONLY_PRECISIONS)
        and fmt != precision.get("attention")
    ]
    if not formats:
        return None
    fmt = rng.choice(formats)
    return answer.rewritten({job_id: part | {"precision": precision | {"attention": fmt, "mlp": fmt}}})


def _edit_add_job(answer: PlacedAnswer, rng: random.Random) -> str | None:
    missing = [job_id for job_id in answer.jobs if job_id not in answer.spans]
    if not missing or not answer.parts:
        return None
    job = answer.jobs[rng.choice(missing)]
    template = answer.parts[rng.choice(sorted(answer.parts))]
    size = template.get("tensor_parallel", 1)
    if size not in tensor_parallel_sizes(job, answer.scenario.cluster.count):
        size = 1
    added = {"id": job.id, "gpus": size, "tensor_parallel": size}
    if isinstance(template.get("precision"), dict):
        added["precision"] = dict(template["precision"])
        if job.kind == "train" and any(fmt in WEIGHT_ONLY_PRECISIONS for fmt in added["precision"].values()):
            return None  # a weight-only format on a train job is a fault, not a choice
    if job.kind == "serve":
        added |= {"kv_cache": template["kv_cache"]} if "kv_cache" in template else {}
    else:
        added |= {name: template[name] for name in _TRAIN_FIELDS if name in template}
    changed = {}
    short = answer.gpus_in_use() + size - answer.scenario.cluster.count
    if short > 0:  # one replica's GPUs from the placed job with most, if it keeps a replica
        donor_id = max(sorted(answer.parts), key=lambda job_id: answer.parts[job_id]["gpus"])
        donor = answer.parts[donor_id]
        donor_size = donor.get("tensor_parallel", 1)
        gpus = (donor["gpus"] - short) // donor_size * donor_size
        if gpus < donor_size:
            return None
        changed[donor_id] = donor | {"gpus": gpus}
    return answer.rewritten(changed, [added])


_EDITORS = {"tensor_parallel": _edit_tensor_parallel, "format": _edit_format, "add_job": _edit_add_job}


def edit_answer(text: str, scenario: Scenario | str, rng: random.Random) -> tuple[str, str] | None:
    """``(edited text, edit name)``: one edit of ``EDITS``, tried in a random order until one applies
    (module docstring); ``None`` when none does. The edited text always parses to a plan."""
    read = PlacedAnswer.read(text, scenario)
    if read is None:
        return None
    answer = read[0]
    for name in rng.sample(EDITS, len(EDITS)):
        edited = _EDITORS[name](answer, rng)
        if edited is not None and parse_plan(edited).plan is not None:
            return edited, name
    return None
