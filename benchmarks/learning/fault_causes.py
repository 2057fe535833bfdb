"""Why a policy's held-out jobs fail: the kernel's verdict per job, and each out-of-memory job set against the
prompt's ``Fits`` line; prints JSON.

    python -m benchmarks.learning.fault_causes runs/sft_curve/heuristic/start-evaluations/<key>.json
    python -m benchmarks.learning.fault_causes <work_dir>/seed-0/learning_seed.json   # the trained policy's

The argument is a kept evaluation or a seed's result and its ``--policy``
(``benchmarks/learning/kept_answers.py``). Every
answer is parsed and scored by the kernel as the reward does; per job written it counts the verdict
(``ok``, ``oom``, ``too_slow``...) and the reasons' codes. Each ``oom`` job is then put in one class by
what the ``sized`` prompt said of its format (``fleet_rl.replica_fit``: the smallest tensor parallelism
at which one replica fits at micro-batch 1 with activation checkpointing):

- ``below_stated_tp``: a smaller tensor_parallel than the line states for that format;
- ``at_stated_tp_without_checkpointing``: the stated tensor_parallel (or more) with checkpointing off,
  where the line's promise holds only with it;
- ``at_stated_tp_with_checkpointing``: the stated tensor_parallel (or more) with checkpointing on, at a
  micro-batch above 1;
- ``format_without_a_fit``: a format for which the line says none fits;
- ``mixed_formats``: attention and mlp in different formats, a profile the line does not size.

Issue #68: the 90-step heuristic imitator on the ``sized`` prompt had 31 out-of-memory jobs on the 96
held-out scenarios, 23 of them at the stated tensor parallelism or more with checkpointing off.

``keys_by_kind`` counts, per kind of job (``serve``, ``training`` for train and lora), the running part's
kind-specific keys (``serve``: kv_cache; ``training``: micro_batch_size, activation_checkpointing or
sharding; ``both``; ``defaults``: neither, or only their default values, which a parsed plan drops), over
the parts given GPUs: keys of the other kind say the policy did not tell which kind of job it was writing
(issue #68: the imitator on ``sized_batching`` wrote a serve job's keys for 22 of its 111 placed training
jobs).
"""

from __future__ import annotations

import collections

from benchmarks.learning.kept_answers import analysis_parser, print_analysis, settings_and_answers

__all__ = ["TRAINING_KEYS", "fault_causes", "keys_written", "oom_cause"]

TRAINING_KEYS = ("micro_batch_size", "activation_checkpointing", "sharding")  # a train/lora entry's own keys


def keys_written(part: dict) -> str:
    """Which kind's keys a parsed plan entry carries (``plan_to_dict``: defaults dropped): ``serve``
    (kv_cache), ``training`` (micro_batch_size, activation_checkpointing, sharding), ``both`` or
    ``defaults`` (none beyond their default values)."""
    serve, training = "kv_cache" in part, any(key in part for key in TRAINING_KEYS)
    return {(True, False): "serve", (False, True): "training", (True, True): "both"}.get(
        (serve, training), "defaults"
    )


def oom_cause(part: dict, fits: list) -> str:
    """The class of one out-of-memory job's part against its job's ``replica_fits`` (module docstring)."""
    precision = part["precision"]
    if precision["attention"] != precision["mlp"]:
        return "mixed_formats"
    stated = next((fit.tensor_parallel for fit in fits if fit.fmt == precision["mlp"]), None)
    if stated is None:
        return "format_without_a_fit"
    if part["tensor_parallel"] < stated:
        return "below_stated_tp"
    if not part.get("activation_checkpointing", False):
        return "at_stated_tp_without_checkpointing"
    return "at_stated_tp_with_checkpointing"


def fault_causes(evaluation_file: dict, policy: str = "after") -> dict:
    """Verdict, reason and out-of-memory cause counts over one kept evaluation's answers (or, for a seed's
    result, over its ``policy``'s answers: ``after`` or ``start``)."""
    from benchmarks.learning.evaluate import eval_rows
    from fleet_rl.kernel import evaluate
    from fleet_rl.plan_schema import plan_to_dict
    from fleet_rl.replica_fit import replica_fits
    from fleet_rl.scenario import Scenario
    from rewards import parse_plan

    settings, completions = settings_and_answers(evaluation_file, policy)
    rows = eval_rows(settings)
    if len(rows) != len(completions):
        raise ValueError(f"{len(completions)} answers for {len(rows)} held-out rows: not this evaluation")
    statuses, reasons, causes = collections.Counter(), collections.Counter(), collections.Counter()
    keys_by_kind = {"serve": collections.Counter(), "training": collections.Counter()}
    unparsed = 0
    for row, completion in zip(rows, completions, strict=True):
        parsed = parse_plan(completion).plan
        if parsed is None:
            unparsed += 1
            continue
        scenario, plan = Scenario.from_json(row["scenario"]), plan_to_dict(parsed)
        result = evaluate(scenario, plan)
        reasons.update(reason.split(":")[0] for reason in result.reasons)
        by_id = {job.id: job for job in result.jobs}
        kinds = {job.id: job.kind for job in scenario.jobs}
        fits = None
        for part in plan["jobs"]:
            job = by_id.get(part["id"])
            if job is None:
                continue
            statuses[job.status] += 1
            if part["gpus"] > 0:  # by_id holds the scenario's jobs only
                kind = "serve" if kinds[part["id"]] == "serve" else "training"
                keys_by_kind[kind][keys_written(part)] += 1
            if job.status == "oom":
                fits = fits or replica_fits(scenario)
                causes[oom_cause(part, fits[part["id"]])] += 1
    return {
        "answers": len(completions),
        "unparsed_answers": unparsed,
        "prompt_style": settings["prompt_style"],
        "job_statuses": dict(statuses.most_common()),
        "reason_codes": dict(reasons.most_common()),
        "oom_causes": dict(causes.most_common()),
        "keys_by_kind": {kind: dict(counts.most_common()) for kind, counts in keys_by_kind.items()},
    }


def main(argv: list[str] | None = None) -> dict:
    args = analysis_parser(__doc__.splitlines()[0]).parse_args(argv)
    return print_analysis("fault_causes", args.evaluation, lambda file: fault_causes(file, args.policy))


if __name__ == "__main__":
    main()
