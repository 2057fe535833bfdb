"""SFT curve: the held-out score of an SFT warm start's checkpoints, to choose how long to distill.

    python -m benchmarks.learning.sft_curve --config configs/smollm2_cpu.yaml --sft_target optimal \\
        --steps 40 80 120 --work_dir runs/sft_curve/optimal --output benchmarks/results/sft_curve_optimal.json
    # without --sft_target the preset's target (configs/smollm2_cpu.yaml: the heuristic's plans)
    python -m benchmarks.learning.sft_curve --render benchmarks/results/sft_curve_optimal.json   # its table
    python -m benchmarks.learning.sft_curve --compare A.json B.json   # B - A per common step, paired (JSON)
    python -m benchmarks.learning.sft_curve --compare A.json B.json --compare_steps 90 180   # A@90, B@180
    python -m benchmarks.learning.sft_curve --compare A0.json,A1.json B0.json,B1.json   # seeds pooled

One SFT warm start (``fleet_rl.training.warm_start``: the preset's learning rate, batch and cosine schedule
over ``max(--steps)`` steps, on ``max(--steps) × sft_batch_size`` examples, each seen once) saves the model
at every step of ``--steps``; each checkpoint then answers the learning benchmark's held-out scenarios
(``benchmarks/learning/evaluate.py``: the same rows, prompt style, token budget and loading as GRPO's policy)
greedily, scored by the training rewards. Each evaluation is kept in ``<work_dir>/start-evaluations/`` under
the learning benchmark's key, so ``python -m benchmarks.learning --work_dir <work_dir> --sft_steps 0
--model_name_or_path <work_dir>/warm-start-checkpoints/step-N`` reuses it as its start's instead of
answering again. The result lists, per checkpoint, the summary (overall, per task, per unseen part:
``fleet_rl.training.unseen_split``) and the per-scenario % of optimum, beside the baselines, with the
command, machine and commit. ``--reuse`` keeps a finished warm start of the same settings; without it the
warm start is trained again, though a stopped run of the same settings (``sft_save_steps``) resumes from its
checkpoint and keeps the step saves it made before it (``clear_for_training``).

A checkpoint of a longer run is not the same model as a run of that many steps: the schedule spans all
the steps. The best checkpoint is chosen on the held-out scenarios themselves, which the result says.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from fleet_rl.training.config_file import exit_on_a_bad_config

if __name__ == "__main__":
    exit_on_a_bad_config(sys.argv[1:], "sft_curve.py")

__all__ = ["clear_for_training", "main", "render"]

COLUMNS = (  # (summary key, header, format)
    ("mean_percent_of_optimum", "% of optimum", "{:.1f}"),
    ("valid_plan_rate", "valid plan", "{:.2f}"),
    ("feasible_rate", "feasible", "{:.2f}"),
    ("placed_job_share", "placed job share", "{:.2f}"),
    ("mean_fleet_reward", "mean fleet_reward", "{:.3f}"),
)


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--config", help="train_grpo.py preset, e.g. configs/smollm2_cpu.yaml")
    parser.add_argument(
        "--sft_target", default=None, help="the planner the warm start imitates (default: the preset's)"
    )
    parser.add_argument("--steps", type=int, nargs="+", default=[40, 80, 120], help="checkpoints to score")
    parser.add_argument("--eval_scenarios", type=int, default=96)
    parser.add_argument("--eval_tasks", nargs="+", default=None, help="default: the preset's tasks")
    parser.add_argument("--eval_batch_size", type=int, default=16)
    parser.add_argument("--eval_dataset_seed", type=int, default=None, help="default: the benchmark's")
    parser.add_argument("--max_new_tokens", type=int, default=None, help="default: max_completion_length")
    parser.add_argument("--work_dir", default="runs/sft_curve")
    parser.add_argument("--output", help="the JSON result")
    parser.add_argument("--reuse", action="store_true", help="keep a finished warm start like it")
    parser.add_argument("--render", metavar="RESULT_JSON", help="print a result's table; no run")
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("A_JSON", "B_JSON"),
        help="B's %% of optimum minus A's per common step, paired on the same scenarios (JSON); no run. "
        "A and B may each be several curves joined by commas (SFT seeds), pooled per scenario",
    )
    parser.add_argument(
        "--compare_steps",
        type=int,
        nargs=2,
        metavar=("A_STEP", "B_STEP"),
        help="with --compare: A's step A_STEP against B's step B_STEP (runs of different lengths)",
    )
    args, train_flags = parser.parse_known_args(argv)
    if not (args.render or args.compare) and not (args.config and args.output):
        parser.error("give --config and --output (or --render RESULT_JSON, or --compare A_JSON B_JSON)")
    if args.compare_steps and not args.compare:
        parser.error("--compare_steps goes with --compare")
    if args.steps and min(args.steps) < 1:
        parser.error("--steps must be positive")
    return args, train_flags


def _row(label: str, summary: dict, tasks: list[str]) -> str:
    """One policy's cells; its placed job shares in the order of ``tasks``, the header's (a summary's
    ``per_task`` lists the tiers in the order the held-out rows first meet them, not that order)."""
    cells = [template.format(summary[key]) for key, _, template in COLUMNS]
    per_task = summary.get("per_task", {})
    shares = [f"{per_task[task]['placed_job_share']:.2f}" if task in per_task else "–" for task in tasks]
    cells.append(" / ".join(shares) if per_task else "–")
    unseen = summary.get("per_unseen", {})
    cells.append(" / ".join(f"{k} {v['mean_percent_of_optimum']:.1f}" for k, v in unseen.items()) or "–")
    return f"| {label} | " + " | ".join(cells) + " |"


def render(result: dict) -> str:
    """The curve as a Markdown table: one row per checkpoint, then the baselines."""
    tasks = result["eval"]["eval_tasks"]
    placed = f"placed ({' / '.join(tasks)})"
    header = [name for _, name, _ in COLUMNS] + [placed, "% of optimum by unseen part"]
    lines = [
        f"SFT on {result['sft_target']} plans, {result['eval_scenarios']} held-out scenarios "
        f"(scenario fingerprint {result['scenario_fingerprint']}):",
        "",
        "| policy | " + " | ".join(header) + " |",
        "|---" * (len(header) + 1) + "|",
    ]
    for point in result["checkpoints"]:
        lines.append(_row(f"SFT step {point['step']}", point["summary"], tasks))
    for name, summary in result["baselines"].items():
        lines.append(_row(f"baseline: {name}", summary, tasks))
    lines += ["", f"Best on these scenarios: step {result['best_step']} (chosen on the held-out set itself)."]
    return "\n".join(lines)


def clear_for_training(model_name_or_path: str, script_args, training_args, steps: list[int]) -> None:
    """Before a run without ``--reuse``: remove the finished warm start and the saves of ``steps`` the run
    will make again. A stopped run of the same settings that it resumes keeps the saves up to its
    checkpoint (``resume_point``): a resumed run cannot make them again."""
    import shutil

    from fleet_rl.training.warm_start import WARM_START_DIR, checkpoint_dir, resume_point

    resumed_step = resume_point(model_name_or_path, script_args, training_args)
    shutil.rmtree(Path(training_args.output_dir) / WARM_START_DIR, ignore_errors=True)
    for step in steps:
        if step > resumed_step:
            shutil.rmtree(checkpoint_dir(training_args, step), ignore_errors=True)


def main(argv: list[str] | None = None) -> dict | None:
    args, train_flags = parse(sys.argv[1:] if argv is None else argv)
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return None
    if args.compare:
        from benchmarks.learning.sft_curve_compare import compare_curves

        try:
            baseline, candidate = (
                [json.loads(Path(path).read_text()) for path in side.split(",")] for side in args.compare
            )
            comparison = compare_curves(baseline, candidate, steps=args.compare_steps)
        except (OSError, ValueError) as error:  # an unreadable or non-JSON file, curves not comparable
            sys.exit(f"sft_curve.py: error: {error}")
        print(json.dumps(comparison, indent=1))
        return comparison
    import train_grpo
    from benchmarks.learning.evaluate import (
        baseline_summaries,
        eval_rows,
        eval_settings,
        evaluate,
        today_scenario_fingerprint,
    )
    from benchmarks.learning.start_cache import START_EVALUATIONS, cached_evaluation, start_evaluation_key
    from benchmarks.machine import cpu_model, git_state
    from fleet_rl.smollm2 import ensure_smollm2
    from fleet_rl.tiny_model import ensure_tiny_model
    from fleet_rl.training.heldout import EVAL_DATASET_SEED
    from fleet_rl.training.warm_start import checkpoint_dir, warm_start

    steps = sorted(set(args.steps))
    work_dir = Path(args.work_dir)
    parsed = train_grpo.parse_args(
        ["--config", args.config, *train_flags]
        + (["--sft_target", args.sft_target] if args.sft_target else [])
        + ["--sft_steps", str(steps[-1]), "--output_dir", str(work_dir), "--report_to", "none"]
        + ["--eval_scenarios", "0"]
    )
    script_args, training_args, model_args = parsed
    args.sft_target = script_args.sft_target  # what the result names: the flag's, else the preset's
    script_args.sft_num_examples = steps[-1] * script_args.sft_batch_size  # each example seen once
    if not args.reuse:
        clear_for_training(model_args.model_name_or_path, script_args, training_args, steps)
    if script_args.local_model:
        {"tiny": ensure_tiny_model, "smollm2": ensure_smollm2}[script_args.local_model](
            model_args.model_name_or_path
        )
    started = time.perf_counter()
    final = warm_start(model_args.model_name_or_path, script_args, training_args, checkpoint_steps=steps)
    sft_s = time.perf_counter() - started
    args.eval_dataset_seed = EVAL_DATASET_SEED if args.eval_dataset_seed is None else args.eval_dataset_seed
    settings = eval_settings(args, script_args, training_args)
    rows = eval_rows(settings)
    fingerprint = today_scenario_fingerprint(settings, rows)
    points = []
    for step in steps:
        path = str(checkpoint_dir(training_args, step))
        key = start_evaluation_key(path, settings, fingerprint, model_args)
        evaluation, reused = cached_evaluation(
            work_dir / START_EVALUATIONS, key, lambda path=path: evaluate(path, None, settings, parsed)
        )
        print(f"sft curve: step {step}: {evaluation['summary']['mean_percent_of_optimum']:.1f} % of optimum")
        points.append(
            {
                "step": step,
                "model": path,
                "summary": {k: v for k, v in evaluation["summary"].items() if k != "samples"},
                "percent_of_optimum": evaluation["per_scenario"]["percent_of_optimum"],
                "evaluation_reused_from": reused,
                "eval_wall_s": evaluation["wall_s"],
            }
        )
    baselines, _ = baseline_summaries(rows)
    best = max(points, key=lambda point: point["summary"]["mean_percent_of_optimum"])
    result = {
        "benchmark": "sft_curve",
        "config": args.config,
        "sft_target": args.sft_target,
        "train_flags": train_flags,
        "warm_start": json.loads((Path(final) / "warm_start.json").read_text()),
        "eval_scenarios": args.eval_scenarios,
        "eval": settings | {"split": "eval", "decoding": "greedy"},
        "scenario_fingerprint": fingerprint,
        "checkpoints": points,
        "best_step": best["step"],
        "baselines": baselines,
        "wall_s": {"sft_and_setup": sft_s},
        "command": "python -m benchmarks.learning.sft_curve "
        + shlex.join(sys.argv[1:] if argv is None else argv),
        "cpu": cpu_model(),
        "git": git_state(),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=1))
    print(render(result))
    return result


if __name__ == "__main__":
    main()
