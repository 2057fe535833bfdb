"""Learning benchmark, the run: every seed trained and evaluated (or kept from an earlier run with
``--reuse``), the start's evaluation shared between seeds and runs, then aggregated with provenance (command,
CPU, versions, git commit) into the result ``python -m benchmarks.learning`` writes."""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shlex
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.learning.checkpoints import aggregate_checkpoints, evaluate_checkpoints
from benchmarks.learning.evaluate import (
    baseline_summaries,
    eval_rows,
    eval_settings,
    evaluate,
    today_scenario_fingerprint,
)
from benchmarks.learning.render import UNFAIR_START_TARGETS, plural
from benchmarks.learning.start_cache import START_EVALUATIONS, cached_evaluation, start_evaluation_key
from benchmarks.learning.statistics import BOOTSTRAP_SEED, METRICS, paired_difference
from benchmarks.learning.train import start_model_path, train_seed, without_resume
from benchmarks.machine import git_state

__all__ = ["SEED_RESULT", "default_work_dir", "evaluate_shared_start", "run"]

OUTPUTS = "outputs"  # what runs write; openenv validate's digest skips it
SEED_RESULT = "learning_seed.json"
SEED_SETTINGS = "learning_seed_settings.json"  # what a seed's training began with; a resume must match it


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("torch", "transformers", "trl", "peft", "bitsandbytes", "accelerate", "datasets", "numpy"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def _cpu() -> dict:
    import torch

    from benchmarks.machine import cpu_model

    return {"model": cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads()}


def _aggregate(evaluations: list[dict], description: str) -> dict:
    """Means over seeds and scenarios of each metric, plus each seed's held-out summary."""
    table = {
        key: float(np.mean([evaluation["per_scenario"][name] for evaluation in evaluations]))
        for name, (key, _, _) in METRICS.items()
    }
    return {
        "policy": description,
        **table,
        "per_seed": [evaluation["summary"] for evaluation in evaluations],
        "samples": evaluations[0]["samples"],
    }


def _earlier_warm_start(model_args) -> dict:
    """The ``warm_start.json`` of a model directory that an earlier run's SFT warm start wrote, or {}."""
    marker = Path(model_args.model_name_or_path or "") / "warm_start.json"
    return json.loads(marker.read_text()) if marker.is_file() else {}


def _start_target(script_args, model_args) -> str | None:
    """The planner the start imitated (an earlier warm start's, then this run's), or None (zero-shot); an
    unfair one wins, so a fair warm start on top of an oracle one is still flagged."""
    this_run = script_args.sft_target if script_args.sft_steps > 0 else None
    targets = [target for target in (_earlier_warm_start(model_args).get("target"), this_run) if target]
    unfair = [target for target in targets if target in UNFAIR_START_TARGETS]
    return (unfair or targets)[-1] if targets else None


def _start_description(script_args, model_args) -> str:
    base = " (NF4 base)" if model_args.load_in_4bit else ""
    if script_args.sft_steps > 0:
        return f"{script_args.sft_steps}-step SFT warm start on {script_args.sft_target} plans{base}"
    earlier = _earlier_warm_start(model_args)
    if earlier:
        return (
            f"an earlier {earlier.get('steps')}-step SFT warm start on {earlier.get('target')} plans "
            f"({model_args.model_name_or_path}){base}"
        )
    return f"base model, zero-shot{base}"


def _interrupted_run(output_dir: Path, seed_settings: dict) -> str | None:
    """The newest complete checkpoint of a seed's unfinished run with today's settings and scenarios, else
    None (a checkpoint a kill left half-written does not count: fleet_rl/training/complete_checkpoints.py)."""
    from fleet_rl.training.complete_checkpoints import newest_complete_checkpoint

    marker = output_dir / SEED_SETTINGS
    if not marker.exists() or json.loads(marker.read_text()) != json.loads(json.dumps(seed_settings)):
        return None
    checkpoint, _ = newest_complete_checkpoint(output_dir)
    return Path(checkpoint).name if checkpoint else None


def default_work_dir(config: str) -> Path:
    """Where the seeds train without ``--work_dir``: ``outputs/learning/<config stem>``."""
    return Path(OUTPUTS, "learning", Path(config).stem)


def _work_dir(args: argparse.Namespace) -> Path:
    return Path(args.work_dir) if args.work_dir else default_work_dir(args.config)


def _start_evaluation(work_dir: Path, key: dict | None, start_path: str, settings: dict, parsed):
    """(the start's evaluation, the file it was reused from or None), through ``<work_dir>``'s cache."""
    return cached_evaluation(
        work_dir / START_EVALUATIONS, key, functools.partial(evaluate, start_path, None, settings, parsed)
    )


def evaluate_shared_start(args: argparse.Namespace, train_flags: list[str]) -> tuple[dict, str | None]:
    """Evaluate the start every seed shares (no warm start: the given model) into ``<work_dir>``'s cache.

    Seeds run side by side as one process each would otherwise both spend the start's evaluation (~10-20
    minutes on 2 cores) on the same model; run this once first, and each seed's run reuses it (the same key
    as ``run`` computes). Returns (the evaluation, the file it was reused from or None)."""
    import train_grpo

    parsed = train_grpo.parse_args(["--config", args.config, *train_flags, "--report_to", "none"])
    script_args, training_args, model_args = parsed
    if script_args.sft_steps > 0:
        raise ValueError(
            "--start_only needs a start every seed shares: with a warm start (sft_steps > 0) each seed "
            "trains its own; build it once and pass it with --model_name_or_path DIR --sft_steps 0"
        )
    settings = eval_settings(args, script_args, training_args)
    scenario_fingerprint = today_scenario_fingerprint(settings, eval_rows(settings))
    start_path = model_args.model_name_or_path
    key = start_evaluation_key(start_path, settings, scenario_fingerprint, model_args)
    if key is None:
        raise ValueError(f"--start_only: {start_path} is not a local model directory with weights to key on")
    return _start_evaluation(_work_dir(args), key, start_path, settings, parsed)


def run(args: argparse.Namespace, train_flags: list[str], command: list[str]) -> dict:
    """Train and evaluate every seed; return the benchmark's result (see the module docstring)."""
    import train_grpo

    started = time.perf_counter()
    git = git_state()  # the code that runs, before anything else can commit
    work_dir = _work_dir(args)
    parsed0 = train_grpo.parse_args(["--config", args.config, *train_flags, "--report_to", "none"])
    script_args, training_args, model_args = parsed0
    settings = eval_settings(args, script_args, training_args)
    rows = eval_rows(settings)
    scenario_fingerprint = today_scenario_fingerprint(settings, rows)
    baselines, baseline_percents = baseline_summaries(rows)  # no model: cheap, once
    start_target = _start_target(script_args, model_args)
    fair_start = start_target not in UNFAIR_START_TARGETS
    if not fair_start:
        print(
            f"learning benchmark: the start imitates {UNFAIR_START_TARGETS[start_target]} (sft_target "
            f"{start_target}): what this run claims for GRPO is its gain over that start, not the policy's "
            "score (for what GRPO finds alone: --sft_target random, random_split or random_feasible, or "
            "--sft_steps 0)",
            file=sys.stderr,
        )
    fingerprint = {"config": args.config, "train_flags": train_flags, "settings": settings}
    start_cache: dict[str, dict] = {}  # a start shared by seeds (no warm start) is evaluated once
    seeds = []
    for seed in args.seeds:
        output_dir = work_dir / f"seed-{seed}"
        saved = output_dir / SEED_RESULT
        earlier = json.loads(saved.read_text()) if args.reuse and saved.exists() else {}
        if earlier.get("fingerprint") == fingerprint:
            if earlier.get("scenario_fingerprint") == scenario_fingerprint:
                print(f"learning benchmark: reusing seed {seed} from {saved}", file=sys.stderr)
                if args.eval_checkpoints:
                    parsed = train_grpo.parse_args(without_resume(earlier["train_argv"]))
                    evaluate_checkpoints(earlier, output_dir, args.eval_checkpoints, settings, parsed, saved)
                seeds.append(earlier)
                start_cache.setdefault(os.path.realpath(earlier["start_model"]), earlier["start"])
                continue
            print(
                f"learning benchmark: seed {seed}: not reusing {saved}: it was evaluated on held-out "
                f"scenarios with scenario fingerprint {earlier.get('scenario_fingerprint')}, today's is "
                f"{scenario_fingerprint} (prompts, optima or rewards changed); training it afresh",
                file=sys.stderr,
            )
        seed_settings = {"fingerprint": fingerprint, "scenario_fingerprint": scenario_fingerprint}
        checkpoint = _interrupted_run(output_dir, seed_settings) if args.reuse else None
        if checkpoint:  # train_seed resumes from it
            print(
                f"learning benchmark: seed {seed}: resuming the interrupted run in {output_dir} "
                f"from {checkpoint}",
                file=sys.stderr,
                flush=True,
            )
        else:
            shutil.rmtree(output_dir, ignore_errors=True)
            output_dir.mkdir(parents=True)
            (output_dir / SEED_SETTINGS).write_text(json.dumps(seed_settings, indent=1))
            print(f"learning benchmark: seed {seed}: training in {output_dir}", file=sys.stderr, flush=True)
        argv, trained = train_seed(seed, args.config, train_flags, output_dir)
        parsed = train_grpo.parse_args(without_resume(argv))  # its resume checkpoint may be gone by now
        start_path = start_model_path(output_dir, parsed[0], parsed[2])
        adapter = str(output_dir) if (output_dir / "adapter_config.json").exists() else None
        print(f"learning benchmark: seed {seed}: evaluating {start_path} and the result", file=sys.stderr)
        key = os.path.realpath(start_path)
        shared = key in start_cache
        reused_from = None  # a stored evaluation of the same start, by an earlier process or run
        if not shared:
            start_key = start_evaluation_key(start_path, settings, scenario_fingerprint, parsed[2])
            start_cache[key], reused_from = _start_evaluation(
                work_dir, start_key, start_path, settings, parsed
            )
            if reused_from:
                print(
                    f"learning benchmark: seed {seed}: start evaluation reused from {reused_from}",
                    file=sys.stderr,
                )
        after = evaluate(start_path if adapter else str(output_dir), adapter, settings, parsed)
        result = {
            "seed": seed,
            "fingerprint": fingerprint,
            "scenario_fingerprint": scenario_fingerprint,
            "train_argv": argv,
            "start_model": start_path,
            "start_evaluated_for_an_earlier_seed": shared,
            "start_evaluation_reused_from": reused_from,
            **trained,
            "start": start_cache[key],
            "after": after,
        }
        result["wall_s"] |= {
            "eval_start": 0.0 if shared or reused_from else start_cache[key]["wall_s"],
            "eval_after": after["wall_s"],
        }
        result["memory_gb_after_seed"] = _memory_gb()  # one process trains every seed: watch it grow
        saved.write_text(json.dumps(result, indent=1))
        if args.eval_checkpoints:
            evaluate_checkpoints(result, output_dir, args.eval_checkpoints, settings, parsed, saved)
        seeds.append(result)

    starts = [seed["start"] for seed in seeds]
    afters = [seed["after"] for seed in seeds]
    paired = {
        name: paired_difference(
            np.array([evaluation["per_scenario"][name] for evaluation in starts]),
            np.array([evaluation["per_scenario"][name] for evaluation in afters]),
            resamples=args.bootstrap_resamples,
        )
        for name in METRICS
    }
    wall_keys = (
        "warm_start",
        "grpo",
        "generation",
        "reward",
        "backward",
        "setup",
        "eval_start",
        "eval_after",
    )
    wall = {key: _sum_or_none([seed["wall_s"].get(key) for seed in seeds]) for key in wall_keys}
    steps = [seed["global_step"] for seed in seeds]
    return {
        "benchmark": "learning",
        "config": args.config,
        "train_flags": train_flags,
        "seeds": [seed["seed"] for seed in seeds],
        "eval_scenarios": args.eval_scenarios,
        "eval": settings | {"split": "eval", "decoding": "greedy"},
        "scenario_fingerprint": scenario_fingerprint,
        "grpo_steps": steps[0] if len(set(steps)) == 1 else steps,
        "fair_start": fair_start,
        "start_target": start_target,
        "start": _aggregate(starts, _start_description(script_args, model_args)),
        "after": _aggregate(afters, f"the start + {plural(steps[0], 'GRPO step')} (LoRA)"),
        "baselines": baselines,
        # the first plans of revision episodes (retired in issue #69; results before it may hold them)
        "first_plan": None,
        # --eval_checkpoints: the same held-out answers from earlier checkpoints of every seed, else None
        "checkpoints": aggregate_checkpoints(seeds, args.bootstrap_resamples),
        "delta_percent_points": paired["percent_of_optimum"]["mean"],
        "delta_ci95": paired["percent_of_optimum"]["ci95"],
        "delta_per_seed": paired["percent_of_optimum"]["per_seed"],
        "paired": paired,
        "bootstrap": {
            "resamples": args.bootstrap_resamples,
            "rng": f"numpy.random.default_rng({BOOTSTRAP_SEED})",
            "unit": "scenario; each scenario's after - start difference averaged over seeds",
            "interval": "percentile, 2.5 and 97.5",
        },
        "reward_curve": {str(seed["seed"]): seed["reward_curve"] for seed in seeds},
        "per_scenario": {
            "task": [row["task"] for row in rows],
            "generator_seed": [row["seed"] for row in rows],
            "start_percent_of_optimum": [e["per_scenario"]["percent_of_optimum"] for e in starts],
            "after_percent_of_optimum": [e["per_scenario"]["percent_of_optimum"] for e in afters],
            "baseline_percent_of_optimum": baseline_percents,
        },
        "warm_start": [seed["warm_start"] for seed in seeds],
        # per seed: the stored start evaluation used instead of evaluating it again, or None
        "start_evaluation_reused_from": [seed.get("start_evaluation_reused_from") for seed in seeds],
        # per seed: the checkpoint an interrupted training run resumed from, or None
        "resumed_from": [seed.get("resumed_from") for seed in seeds],
        "memory_gb_after_seed": [seed.get("memory_gb_after_seed") for seed in seeds],
        "wall_s": {"total": time.perf_counter() - started, **wall, "per_seed": [s["wall_s"] for s in seeds]},
        "command": shlex.join(command),
        "cpu": _cpu(),
        "versions": _versions(),
        "git": git,
    }


def _memory_gb() -> dict[str, float]:
    """This process's resident memory now and at its peak so far (Linux), in GB."""
    import resource

    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        now = pages * os.sysconf("SC_PAGE_SIZE") / 1e9
    except (OSError, ValueError, IndexError):
        now = float("nan")
    return {"rss_now": now, "rss_peak": peak_kb * 1024 / 1e9}


def _sum_or_none(values: list) -> float | None:
    return None if any(value is None for value in values) else float(sum(values))
