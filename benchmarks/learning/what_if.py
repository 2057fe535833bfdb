"""What each field costs a policy: its held-out answers re-scored with the reference planner's value of some
fields put in, for every set of fields; prints JSON.

    python -m benchmarks.learning.what_if runs/sft_curve/heuristic_batching/start-evaluations/<key>.json
    python -m benchmarks.learning.what_if <work_dir>/seed-0/learning_seed.json --policy start

The argument is a kept evaluation or a seed's result and its ``--policy``
(``benchmarks/learning/kept_answers.py``). Each answer is parsed as the reward parses it; then, for every non-
empty set of the fields ``gpus``, ``tensor_parallel``, ``precision`` and ``kind_keys`` (kv_cache,
micro_batch_size, activation_checkpointing, sharding), each entry the answer writes for a job takes the
``--reference`` planner's value of those fields (its SFT target: ``heuristic`` by default), and the answers
are scored as the learning benchmark scores them (% of the optimum, 0 for an IRD answer). Entries the answer
leaves out stay out and unparsed answers stay as written, so only the fields it got wrong move the score.

Why (issue #68): the imitator of the heuristic scores 36.6 % of the optimum against the heuristic's 85.6 %
on the 96 held-out scenarios. Which fields make up the gap says where the prompt or the recipe should help
next: a field whose swap gains most is the one the policy has not learnt. Fields interact (a gpus count the
policy's tensor_parallel does not divide is invalid), so every combination is printed, not only each field.
"""

from __future__ import annotations

import itertools
import json

import numpy as np

from benchmarks.learning.fault_causes import TRAINING_KEYS
from benchmarks.learning.kept_answers import analysis_parser, print_analysis, settings_and_answers

__all__ = ["FIELDS", "swap_fields", "what_if"]

FIELDS: dict[str, tuple[str, ...]] = {
    "gpus": ("gpus",),
    "tensor_parallel": ("tensor_parallel",),
    "precision": ("precision",),
    "kind_keys": ("kv_cache", *TRAINING_KEYS),
}


def swap_fields(plan: dict, reference: dict, fields: tuple[str, ...]) -> dict:
    """``plan`` whose entries take ``reference``'s value of each of ``fields`` (names of ``FIELDS``) for the
    same job id: a key the reference leaves out is dropped from the entry, so its default applies as in
    the reference; entries of jobs the reference has no entry for are kept as written."""
    keys = [key for field in fields for key in FIELDS[field]]
    by_id = {part["id"]: part for part in reference["jobs"]}
    swapped = []
    for part in plan["jobs"]:
        ours = by_id.get(part.get("id"))
        if ours is None:
            swapped.append(part)
            continue
        kept = {key: value for key, value in part.items() if key not in keys}
        swapped.append(kept | {key: ours[key] for key in keys if key in ours})
    return {**plan, "jobs": swapped}


def what_if(evaluation_file: dict, policy: str = "after", reference: str = "heuristic") -> dict:
    """Mean % of the optimum of the answers as written, of the reference's plans, and of the answers with
    each set of fields taken from the reference (module docstring), overall and per task."""
    from benchmarks.learning.evaluate import eval_rows, per_scenario_metrics
    from fleet_rl.plan_schema import plan_to_dict
    from fleet_rl.training.dataset import sft_target_plan
    from rewards import parse_plan

    settings, completions = settings_and_answers(evaluation_file, policy)
    rows = eval_rows(settings)
    if len(rows) != len(completions):
        raise ValueError(f"{len(completions)} answers for {len(rows)} held-out rows: not this evaluation")
    references = [sft_target_plan(row, reference) for row in rows]
    plans = []
    for completion in completions:
        parsed = parse_plan(completion).plan
        plans.append(None if parsed is None else plan_to_dict(parsed))
    variants = {"as_written": list(completions), reference: [json.dumps(plan) for plan in references]}
    for size in range(1, len(FIELDS) + 1):
        for fields in itertools.combinations(FIELDS, size):
            variants["+".join(fields)] = [
                completion if plan is None else json.dumps(swap_fields(plan, ours, fields))
                for completion, plan, ours in zip(completions, plans, references, strict=True)
            ]
    tasks = np.asarray([row["task"] for row in rows])
    result = {"answers": len(completions), "unparsed_answers": plans.count(None), "reference": reference,
              "prompt_style": settings["prompt_style"], "percent_of_optimum": {}}  # fmt: skip
    for name, answers in variants.items():
        percents = np.asarray(per_scenario_metrics(rows, answers)["percent_of_optimum"])
        per_task = {task: round(float(percents[tasks == task].mean()), 1) for task in sorted(set(tasks))}
        result["percent_of_optimum"][name] = {"all": round(float(percents.mean()), 1), **per_task}
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = analysis_parser(__doc__.splitlines()[0])
    parser.add_argument("--reference", default="heuristic", help="the planner whose fields are put in")
    args = parser.parse_args(argv)
    return print_analysis("what_if", args.evaluation, lambda file: what_if(file, args.policy, args.reference))


if __name__ == "__main__":
    main()
