"""Learning benchmark, evaluation: a policy's greedy answers on the held-out rows, scored per scenario by
the training rewards; the baselines on the same rows; the settings and fingerprint of that held-out set."""

from __future__ import annotations

import argparse
import copy
import gc
import time
from collections.abc import Sequence

import numpy as np

__all__ = [
    "BASELINE_NAMES",
    "baseline_summaries",
    "eval_rows",
    "eval_settings",
    "evaluate",
    "load_for_eval",
    "per_scenario_metrics",
    "today_scenario_fingerprint",
]

BASELINE_NAMES = ("even_bf16", "heuristic", "random_feasible")  # planners scored beside the policies


def per_scenario_metrics(rows: Sequence[dict], completions: Sequence[str]) -> dict[str, list[float]]:
    """Each metric of ``METRICS`` per scenario, scored like ``fleet_rl.training.heldout.summarise``."""
    from rewards import fleet_reward, score_completions

    columns = {"agent": [row["agent"] for row in rows], "given_plan": [row["given_plan"] for row in rows]}
    scenarios = [row["scenario"] for row in rows]
    scores = score_completions(list(completions), scenarios, **columns)
    rewards = np.asarray(fleet_reward(list(completions), scenarios, **columns), dtype=float)
    return {
        "percent_of_optimum": (100.0 * np.where(scores.ird, 0.0, scores.score)).tolist(),
        "valid_plan_rate": scores.has_plan.astype(float).tolist(),
        "feasible_rate": scores.feasible.astype(float).tolist(),
        "ird_rate": scores.ird.astype(float).tolist(),
        "fleet_reward": rewards.tolist(),
    }


def load_for_eval(base: str, adapter: str | None, script_args, training_args, model_args):
    """(model, tokenizer) loaded as GRPO loaded its policy (transformers backend: same dtype, same
    quantisation), with the trained LoRA ``adapter`` on top, or none (the start: LoRA at zero)."""
    from trl.trainer.utils import create_model_from_path

    from fleet_rl.training.backends import load_policy

    script_args, training_args = copy.copy(script_args), copy.copy(training_args)
    script_args.backend = "transformers"  # Unsloth's 4-bit base is bitsandbytes NF4 as well
    training_args.model_init_kwargs = None  # load_policy fills it in
    policy = load_policy(base, script_args, training_args, model_args)
    kwargs = dict(training_args.model_init_kwargs)
    if policy["quantization_config"] is not None:
        kwargs["quantization_config"] = policy["quantization_config"]
    model = create_model_from_path(base, **kwargs)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    return model, policy["processing_class"]


def evaluate(base: str, adapter: str | None, settings: dict, parsed) -> dict:
    """Greedy answers of one policy on the held-out rows; per-scenario metrics, summary, wall time."""
    from fleet_rl.training.heldout import evaluate_policy
    from fleet_rl.training.memory_release import release_freed_memory

    started = time.perf_counter()
    model, tokenizer = load_for_eval(base, adapter, *parsed)
    report = evaluate_policy(
        model,
        tokenizer,
        num_scenarios=settings["eval_scenarios"],
        tasks=settings["eval_tasks"],
        prompt_style=settings["prompt_style"],
        max_new_tokens=settings["max_new_tokens"],
        batch_size=settings["eval_batch_size"],
        dataset_seed=settings["eval_dataset_seed"],
        num_samples=settings["eval_scenarios"],  # every answer, to score it per scenario
    )
    del model
    gc.collect()
    if parsed[0].release_freed_memory:  # the next seed's training starts from what this process uses
        release_freed_memory()
    samples = report.pop("samples")
    rows = eval_rows(settings)
    if [(row["task"], row["seed"]) for row in rows] != [
        (sample["task"], sample["seed"]) for sample in samples
    ]:
        raise RuntimeError("the held-out answers do not line up with the held-out rows")
    completions = [sample["completion"] for sample in samples]
    per_scenario = per_scenario_metrics(rows, completions)
    # every answer, in the rows' order, to read later without answering again: kept with the seed (its
    # learning_seed.json, the start cache), not in the result
    answers = {"completions": completions}
    return {
        "summary": report,
        "per_scenario": per_scenario,
        "samples": completions[:3],
        **answers,
        "wall_s": time.perf_counter() - started,
    }


def eval_rows(settings: dict) -> list[dict]:
    from fleet_rl.training.dataset import scenario_rows

    return scenario_rows(
        settings["eval_tasks"],
        settings["eval_scenarios"],
        dataset_seed=settings["eval_dataset_seed"],
        split="eval",
        prompt_style=settings["prompt_style"],
    )


def eval_settings(args: argparse.Namespace, script_args, training_args) -> dict:
    """What the held-out evaluation depends on: the benchmark's flags over the preset's (with its flags).
    ``eval_max_turns`` is 1, one plan per held-out answer: results of revision episodes (retired in issue
    #69, last at 2a054bb) answered with up to 3; kept so that today's settings match theirs key for key."""
    return {
        "eval_scenarios": args.eval_scenarios,
        "eval_tasks": args.eval_tasks or list(script_args.tasks),
        "prompt_style": script_args.prompt_style,
        "max_new_tokens": args.max_new_tokens or training_args.max_completion_length,
        "eval_batch_size": args.eval_batch_size,
        "eval_dataset_seed": args.eval_dataset_seed,
        "eval_max_turns": 1,
    }


def today_scenario_fingerprint(settings: dict, rows: Sequence[dict] | None = None) -> str:
    """``benchmarks.learning.scenario_fingerprint`` of the held-out rows of these settings (``rows``, if
    already drawn), with today's code."""
    from benchmarks.learning.scenario_fingerprint import scenario_fingerprint

    return scenario_fingerprint(eval_rows(settings) if rows is None else rows)


def baseline_summaries(rows: Sequence[dict]) -> tuple[dict[str, dict], dict[str, list[float]]]:
    """Each of ``BASELINE_NAMES`` on the held-out rows, scored by the policies' code: its summary
    (``fleet_rl.training.heldout.summarise``: the ``METRICS`` keys, crash rates, per task) and its
    per-scenario % of optimum (``per_scenario_metrics``)."""
    from fleet_rl.baselines import BASELINES
    from fleet_rl.prompts import format_answer
    from fleet_rl.training.dataset import planner_answer
    from fleet_rl.training.heldout import summarise

    summaries, percents = {}, {}
    for name in BASELINE_NAMES:
        completions = [format_answer(planner_answer(BASELINES[name], row)) for row in rows]
        summaries[name] = {"policy": f"baseline {name}", **summarise(rows, completions)}
        percents[name] = per_scenario_metrics(rows, completions)["percent_of_optimum"]
    return summaries, percents
