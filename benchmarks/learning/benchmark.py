"""Learning benchmark: does GRPO improve the policy it starts from? A paired comparison on held-out scenarios.

    python -m benchmarks.learning --config configs/smollm2_cpu.yaml --seeds 0 1 --eval_scenarios 96 \\
        --output benchmarks/results/learning_smollm2_cpu.json [extra train_grpo.py flags ...]
    python -m benchmarks.learning --render benchmarks/results/learning_smollm2_cpu.json   # the README table
    python -m benchmarks.learning --compare A.json B.json   # does recipe B end above recipe A? (paired)
    python -m benchmarks.learning --fingerprint --config configs/smollm2_cpu.yaml  # its scenario_fingerprint
    python -m benchmarks.learning --start_only --config ... --work_dir DIR --sft_steps 0 \\
        --model_name_or_path START   # evaluate a start shared by seeds once, before one process per seed

For each training seed it runs ``train_grpo.main`` with the preset, the seed and the extra flags (any
``train_grpo.py`` flag: ``--max_steps 60``, ``--sft_target random``...). The **start policy** is what GRPO
starts from: the preset's SFT warm start if it has one (``sft_steps > 0``; trained with the same seed, so it
differs between seeds), else the base model (the same for every seed, so it is evaluated once: within a
process, and across processes and runs through ``<work_dir>/start-evaluations/``, reused only for the same
model files, settings and scenarios; ``benchmarks/learning/start_cache.py``). The
**after policy** is the start plus the trained LoRA adapter. Both are loaded the way GRPO loaded its policy
(``fleet_rl.training.backends.load_policy``: same dtype, same 4-bit NF4 base when the preset quantises) and
answer the same held-out scenarios (``split="eval"``, ``fleet_rl.training.heldout``) greedily, in batches,
with the same token budget (the preset's ``max_completion_length``); the training rewards score them.

Statistics, per metric (mean % of optimum with IRD plans counted as 0, valid-plan, feasible and IRD rates,
mean fleet_reward): per scenario, the after − start difference averaged over seeds; its mean over scenarios
(``delta_percent_points`` for % of optimum) and a 95 % percentile bootstrap interval that resamples
scenarios (10,000 resamples, ``numpy.random.default_rng(0)``); plus each seed's own mean difference. The
interval covers scenario sampling; with few seeds it says little about seed-to-seed variance, which the
per-seed differences show.

Beside the policies, the ``baselines`` (``BASELINE_NAMES`` of ``fleet_rl.baselines``, no model: each answers
a row seeded by its generator seed, as ``eval.py``'s baselines do) are scored on the same held-out rows.

The result's ``scenario_fingerprint`` (``benchmarks/learning/scenario_fingerprint.py``) hashes the held-out
prompts, their optima and the rewards of a fixed panel of plans on them; ``--fingerprint`` prints today's on
its last line and trains nothing, so a stored result can be told stale from current.

Also recorded: the training reward curve of each seed (``reward`` and ``rewards/<name>/mean`` per logged
step, from ``trainer_state.json``), wall time (warm start; GRPO split into generation, reward and the rest
of the step — forward, backward and optimizer, plus checkpoint saves — from the timings TRL's
``profiling_context`` takes around ``transformers.generate`` and ``_calculate_rewards``; evaluation), the
exact command, CPU, package versions and git commit. A start that imitated the exact optimum
(``sft_target: optimal``) or the ``even_bf16`` baseline it is measured against (``even_split``) is flagged
``fair_start: false`` (``start_target`` names it): its policy's score is mostly the start's, and what it
claims for GRPO is the gain over that start on the same scenarios (issue #68's distill-then-reinforce).

``--reuse`` keeps a seed's finished result from an earlier run of the same command in ``--work_dir``, if it
was evaluated on today's held-out scenarios (the same ``scenario_fingerprint``; otherwise it says so and
trains the seed afresh); without it each seed's directory there is cleared and trained afresh. The work
dir defaults to ``outputs/learning/<preset>``. ``--eval_checkpoints 30`` also answers with each seed's
``checkpoint-30`` (``benchmarks/learning/checkpoints.py``): a longer run shows where along it the policy
gained, paired against the start and the final policy; with ``--reuse`` a finished run gains the
checkpoints it lacks, nothing trained again.

The parts, one module each in this package: ``train`` (one seed through ``train_grpo.main``), ``evaluate``
(the held-out answers, scored), ``start_cache``, ``statistics`` (the paired bootstrap), ``checkpoints``
(earlier checkpoints), ``run`` (every seed, aggregated), ``render`` (the README table) and ``compare`` (two
results on the same scenarios, paired: ``--compare``); this module is the command line
(``python -m benchmarks.learning`` runs ``benchmarks/learning/__main__.py``, which checks ``--config`` first).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from benchmarks.learning import PROGRAM
from benchmarks.learning.compare import compare
from benchmarks.learning.evaluate import (
    BASELINE_NAMES,
    baseline_summaries,
    eval_rows,
    eval_settings,
    today_scenario_fingerprint,
)
from benchmarks.learning.render import render
from benchmarks.learning.statistics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    METRICS,
    paired_difference,
)
from fleet_rl.training.config_file import exit_on_a_bad_config

__all__ = [
    "BASELINE_NAMES",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "METRICS",
    "baseline_summaries",
    "compare",
    "eval_rows",
    "eval_settings",
    "main",
    "paired_difference",
    "parse",
    "print_comparison",
    "print_fingerprint",
    "print_start",
    "render",
    "today_scenario_fingerprint",
]

# train_grpo.py flags the benchmark sets itself
OWN_TRAIN_FLAGS = ("--seed", "--output_dir", "--eval_scenarios", "--report_to")


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description=__doc__.splitlines()[0],
        allow_abbrev=False,  # --seed (a train_grpo flag, refused) must not pass for --seeds
        epilog="Any other flag goes to train_grpo.py (e.g. --max_steps 60 --sft_target random_feasible).",
    )
    parser.add_argument("--config", help="train_grpo.py preset, e.g. configs/tiny_cpu.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="training seeds (default 0 1)")
    parser.add_argument("--eval_scenarios", type=int, default=96, help="held-out scenarios (default 96)")
    parser.add_argument("--eval_tasks", nargs="+", help="held-out task tiers (default: the preset's tasks)")
    parser.add_argument("--eval_batch_size", type=int, default=8, help="prompts generated at once")
    parser.add_argument("--eval_dataset_seed", type=int, default=None, help="which held-out scenarios")
    parser.add_argument("--max_new_tokens", type=int, help="default: the preset's max_completion_length")
    parser.add_argument(
        "--eval_checkpoints",
        type=int,
        nargs="+",
        default=[],
        metavar="STEP",
        help="also answer the held-out scenarios with each seed's checkpoint-STEP (e.g. 30 in a 45-step run; "
        "keep them with --save_total_limit); with --reuse, only those a finished seed lacks",
    )
    parser.add_argument("--bootstrap_resamples", type=int, default=BOOTSTRAP_RESAMPLES)
    parser.add_argument("--output", help="the JSON result, e.g. benchmarks/results/learning_<preset>.json")
    parser.add_argument("--work_dir", help="training runs, one per seed (default outputs/learning/<preset>)")
    parser.add_argument("--reuse", action="store_true", help="keep finished seeds of the same command")
    parser.add_argument("--render", metavar="RESULT_JSON", help="print the README table of a result; no run")
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("A_JSON", "B_JSON"),
        help="print, as JSON, B's after-GRPO %% of optimum minus A's on the same scenarios (paired); no run",
    )
    parser.add_argument(
        "--fingerprint",
        action="store_true",
        help="print today's scenario_fingerprint of the held-out set (last line) and exit; no training",
    )
    parser.add_argument(
        "--start_only",
        action="store_true",
        help="evaluate the start every seed shares into --work_dir's cache and exit; no training",
    )
    args, train_flags = parser.parse_known_args(argv)
    if args.render or args.compare:
        return args, train_flags
    if not args.config or not (args.output or args.fingerprint or args.start_only):
        parser.error(
            "--config and --output are required (or --render RESULT_JSON, --compare A_JSON B_JSON, "
            "--fingerprint or --start_only)"
        )
    clashing = [flag for flag in train_flags if flag.split("=")[0] in OWN_TRAIN_FLAGS]
    if clashing:
        parser.error(f"{', '.join(clashing)}: set by the benchmark (use --seeds and --work_dir)")
    if args.eval_scenarios < 1 or not args.seeds or len(set(args.seeds)) != len(args.seeds):
        parser.error("--eval_scenarios must be positive and --seeds distinct")
    if any(step < 1 for step in args.eval_checkpoints):
        parser.error(f"--eval_checkpoints takes positive steps, got {args.eval_checkpoints}")
    if args.eval_dataset_seed is None:
        from fleet_rl.training.heldout import EVAL_DATASET_SEED

        args.eval_dataset_seed = EVAL_DATASET_SEED
    return args, train_flags


def print_fingerprint(args: argparse.Namespace, train_flags: list[str]) -> str:
    """Print what the scenario fingerprint covers, then today's fingerprint alone on the last line."""
    import train_grpo
    from benchmarks.learning.scenario_fingerprint import PANEL

    with contextlib.redirect_stdout(sys.stderr):  # whatever the imports print
        script_args, training_args, _ = train_grpo.parse_args(
            ["--config", args.config, *train_flags, "--report_to", "none"]
        )
        settings = eval_settings(args, script_args, training_args)
        fingerprint = today_scenario_fingerprint(settings)
    print(
        f"scenario fingerprint of {settings['eval_scenarios']} held-out scenarios "
        f"({', '.join(settings['eval_tasks'])}; dataset seed {settings['eval_dataset_seed']}, prompt style "
        f"{settings['prompt_style']}): prompts, optima and the fleet_reward of {', '.join(PANEL)}"
    )
    print(fingerprint)
    return fingerprint


def print_start(args: argparse.Namespace, train_flags: list[str]) -> dict:
    """``--start_only``: evaluate (or find) the shared start's evaluation; print its summary as JSON."""
    from benchmarks.learning.run import evaluate_shared_start

    with contextlib.redirect_stdout(sys.stderr):
        try:
            evaluation, reused_from = evaluate_shared_start(args, train_flags)
        except ValueError as error:
            print(f"{PROGRAM}: {error}", file=sys.stderr)
            sys.exit(2)
    print(json.dumps({"reused_from": reused_from, "summary": evaluation["summary"]}, indent=1))
    return evaluation


def print_comparison(paths: list[str], resamples: int) -> dict:
    """``--compare A_JSON B_JSON``: print B's after-GRPO score minus A's, paired on the same scenarios."""
    try:
        baseline, candidate = (json.loads(Path(path).read_text()) for path in paths)
        comparison = compare(baseline, candidate, resamples=resamples)
    except (OSError, ValueError, KeyError, TypeError) as error:  # JSONDecodeError is a ValueError
        detail = f"no {error} in a result" if isinstance(error, KeyError) else str(error)
        print(f"{PROGRAM}: --compare: {detail}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps({"baseline_file": paths[0], "candidate_file": paths[1], **comparison}, indent=1))
    return comparison


def main(argv: list[str] | None = None) -> dict | None:
    argv = sys.argv[1:] if argv is None else argv
    exit_on_a_bad_config(argv, PROGRAM)  # when called as a function, not through __main__.py
    args, train_flags = parse(argv)
    if args.render:
        print(render(json.loads(Path(args.render).read_text())))
        return None
    if args.compare:
        return print_comparison(args.compare, args.bootstrap_resamples)
    if args.fingerprint:
        print_fingerprint(args, train_flags)
        return None
    if args.start_only:
        return print_start(args, train_flags)
    # imported here, not at the top: it imports transformers, which --render and --compare (JSON only) skip
    from benchmarks.learning.run import run

    with contextlib.redirect_stdout(
        sys.stderr
    ):  # stdout carries only the table; progress and logs go to stderr
        result = run(args, train_flags, ["python", "-m", "benchmarks.learning", *argv])
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=1) + "\n")
    print(render(result))
    return result
