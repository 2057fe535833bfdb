"""Learning benchmark, earlier checkpoints: the same held-out answers from a seed's saved checkpoints.

One run of N steps answers two questions at the price of one training: what the policy scored after N
steps and, with ``--eval_checkpoints 30``, what it scored after 30 (its ``checkpoint-30``; the learning
rate schedule is constant after warmup in the presets, so that is the policy a 30-step run of the same seed
ends with, up to the machine's rounding). Each checkpoint is evaluated like the final policy (greedy, the
same scenarios and settings), stored in the seed's ``learning_seed.json`` under ``checkpoints`` and
aggregated, with its paired difference against the start and against the final policy, under the result's
``checkpoints``. ``--reuse`` on a finished run evaluates only the checkpoints it lacks. Keep the checkpoints
with ``--save_total_limit`` (the presets keep the last two).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.learning.evaluate import evaluate
from benchmarks.learning.statistics import paired_difference

__all__ = ["aggregate_checkpoints", "evaluate_checkpoints"]


def evaluate_checkpoints(
    seed_result: dict, output_dir: Path, steps: Sequence[int], settings: dict, parsed, saved: Path
) -> None:
    """Evaluate each of ``steps`` that ``seed_result`` lacks from ``output_dir/checkpoint-<step>`` (a LoRA
    adapter on the seed's start, or a whole model), store it under ``seed_result["checkpoints"]`` and
    rewrite ``saved``. A missing checkpoint is an error that names the steps that are there."""
    held = seed_result.setdefault("checkpoints", {})
    for step in steps:
        if str(step) in held:
            continue
        checkpoint = output_dir / f"checkpoint-{step}"
        if not checkpoint.is_dir():
            present = sorted(
                int(path.name.split("-")[1]) for path in output_dir.glob("checkpoint-*") if path.is_dir()
            )
            raise SystemExit(
                f"learning benchmark: seed {seed_result['seed']}: {checkpoint} is missing (checkpoints "
                f"there: {present or 'none'}); keep it with --save_total_limit, or ask for another step"
            )
        adapter = (checkpoint / "adapter_config.json").exists()
        base = seed_result["start_model"] if adapter else str(checkpoint)
        evaluation = evaluate(base, str(checkpoint) if adapter else None, settings, parsed)
        held[str(step)] = evaluation
        saved.write_text(json.dumps(seed_result, indent=1))


def aggregate_checkpoints(seeds: Sequence[dict], resamples: int) -> dict | None:
    """Per checkpoint step every seed has: mean % of optimum, per-seed summaries, and the paired
    differences (over scenarios, seeds averaged) against the start and against the final policy; ``None``
    when no step is shared by every seed."""
    shared = set.intersection(*(set(seed.get("checkpoints", {})) for seed in seeds)) if seeds else set()
    if not shared:
        return None
    start = np.array([seed["start"]["per_scenario"]["percent_of_optimum"] for seed in seeds])
    final = np.array([seed["after"]["per_scenario"]["percent_of_optimum"] for seed in seeds])
    result = {}
    for step in sorted(shared, key=int):
        at_step = np.array(
            [seed["checkpoints"][step]["per_scenario"]["percent_of_optimum"] for seed in seeds]
        )
        result[step] = {
            "percent_of_optimum": float(at_step.mean()),
            "per_seed": [seed["checkpoints"][step]["summary"] for seed in seeds],
            "minus_start": paired_difference(start, at_step, resamples=resamples),
            "final_minus_this": paired_difference(at_step, final, resamples=resamples),
            "per_scenario": at_step.tolist(),
        }
    return result
