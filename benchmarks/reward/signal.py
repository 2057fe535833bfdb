"""Does the reward tell a weak policy's answers apart? Groups of weak planners' answers scored by
``fleet_reward``, or a training run's own groups, as JSON.

    python -m benchmarks.reward.signal                      # 200 groups of 8 per tier and planner
    python -m benchmarks.reward.signal --groups 50 --tasks easy medium --planners random_split
    python -m benchmarks.reward.signal --completions outputs/learning/smollm2_floors/seed-0 --window 10

GRPO learns from the differences between the answers of one group: an answer's advantage is its reward
minus its group's mean. A group whose answers all score alike teaches nothing, however many there are. This
asks how often that happens to answers a beginner could write.

A group is ``--group_size`` answers of one planner (``random_split``, ``random_feasible``, ``random`` from
``fleet_rl/baselines.py``; any of ``BASELINES``) to one train scenario, from as many planner seeds. Group g of
a tier is row g of the training dataset a one-tier run with ``dataset_seed = --seed`` would build
(``fleet_rl.training.dataset.scenario_rows``), so multiagent rows ask one agent for its part with the
others' parts given. The planners plan the whole scenario and a multiagent answer is their plan's part for
the agent (``planner_answer``, as ``eval.py``'s baselines and the warm-start targets answer). Answers are
written as the model is taught to write them (a ```json fence, ``format_answer``) and each group is scored
by one ``fleet_reward`` call with the columns TRL passes (``scenario``; ``agent`` and ``given_plan``).

Reported per tier and planner (``group_statistics``):

- ``flat_group_share``: groups whose rewards span less than ``FLAT_SPAN`` (0.01). A spread that small is
  noise, not signal, even though TRL's per-group std normalisation would blow it up;
- ``ird_level_share``: answers scored exactly ``IRD_REWARD`` (the degenerate level, ``rewards/ird.py``);
- ``mean_group_std``: the mean over groups of the population std of the group's rewards;
- ``groups``, ``answers`` and ``mean_reward``.

``goal``: the bar a usable reward signal must clear, ``random_split`` groups at most 10 % flat and at most
25 % of its answers at the IRD level, on every tier run (``met`` is null when ``random_split`` was not run).

``--completions RUN_DIR...`` reads instead a run's completions tables (``log_completions: true``; see
``benchmarks/reward/completions.py``), groups rows by (step, prompt), and reports the same measures overall
and per window of ``--window`` steps.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.machine import cpu_model
from benchmarks.reward.completions import load_completions
from fleet_rl.baselines import BASELINES
from fleet_rl.prompts import format_answer
from fleet_rl.scenario_generator import TASKS
from fleet_rl.training.dataset import planner_answer, scenario_rows
from fleet_rl.training.flat_span import FLAT_SPAN
from rewards.fleet_reward import fleet_reward
from rewards.ird import IRD_REWARD

IRD_TOLERANCE = 1e-12
WEAK_PLANNERS = ("random_split", "random_feasible", "random")
GOAL_PLANNER = "random_split"
GOAL_FLAT_GROUP_SHARE = 0.10  # at most, on every tier
GOAL_IRD_LEVEL_SHARE = 0.25  # at most, on every tier


def group_statistics(groups: Sequence[Sequence[float]]) -> dict:
    """The reward signal in some groups of rewards (see the module docstring); groups may differ in size."""
    if not groups or not all(len(group) for group in groups):
        raise ValueError("group_statistics needs at least one group and no empty group")
    rewards = [np.asarray(group, dtype=float) for group in groups]
    answers = np.concatenate(rewards)
    return {
        "groups": len(rewards),
        "answers": int(answers.size),
        "mean_reward": round(float(answers.mean()), 4),
        "flat_group_share": round(float(np.mean([np.ptp(group) < FLAT_SPAN for group in rewards])), 4),
        "ird_level_share": round(float(np.mean(np.abs(answers - IRD_REWARD) <= IRD_TOLERANCE)), 4),
        "mean_group_std": round(float(np.mean([group.std() for group in rewards])), 4),
    }


def planner_groups(planner: str, task: str, groups: int, group_size: int, seed: int) -> list[list[float]]:
    """The rewards of ``groups`` groups of ``planner``'s answers on ``task``'s train rows."""
    rewards = []
    for row in scenario_rows([task], groups, dataset_seed=seed):
        planner_seeds = range(row["seed"] * group_size, (row["seed"] + 1) * group_size)
        completions = [
            format_answer(planner_answer(BASELINES[planner], row | {"seed": planner_seed}))
            for planner_seed in planner_seeds
        ]
        columns = {key: [row[key]] * group_size for key in ("scenario", "agent", "given_plan")}
        rewards.append(fleet_reward(completions, **columns))
    return rewards


def goal(tiers: dict[str, dict[str, dict]]) -> dict:
    """The bar (``goal`` in the module docstring) for ``GOAL_PLANNER`` on every tier run."""
    results = {task: planners[GOAL_PLANNER] for task, planners in tiers.items() if GOAL_PLANNER in planners}
    met = [
        result["flat_group_share"] <= GOAL_FLAT_GROUP_SHARE
        and result["ird_level_share"] <= GOAL_IRD_LEVEL_SHARE
        for result in results.values()
    ]
    return {
        "planner": GOAL_PLANNER,
        "max_flat_group_share": GOAL_FLAT_GROUP_SHARE,
        "max_ird_level_share": GOAL_IRD_LEVEL_SHARE,
        "tiers": list(results),
        "met": all(met) if met else None,
    }


def run_planners(args: argparse.Namespace) -> dict:
    tiers = {
        task: {
            planner: group_statistics(planner_groups(planner, task, args.groups, args.group_size, args.seed))
            for planner in args.planners
        }
        for task in args.tasks
    }
    return {"groups_per_tier": args.groups, "group_size": args.group_size, "seed": args.seed, "tiers": tiers}


def run_completions(run_dir: Path, window_steps: int) -> dict:
    """The same measures for a training run's groups (one prompt's completions at one step)."""
    frame = load_completions(run_dir)
    prompt = frame["prompt"].astype(str)  # a chat prompt is a list of messages: compare it as text
    by_group = frame.groupby([frame["step"], prompt], sort=True)["fleet_reward"]
    groups = [(step, rewards.tolist()) for (step, _), rewards in by_group]
    steps = sorted({step for step, _ in groups})
    windows = {}
    for start in range(0, len(steps), window_steps):
        window = set(steps[start : start + window_steps])
        label = f"steps {min(window)}-{max(window)}"
        windows[label] = group_statistics([rewards for step, rewards in groups if step in window])
    return {"overall": group_statistics([rewards for _, rewards in groups]), "by_steps": windows}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=200, help="groups per tier and planner")
    parser.add_argument(
        "--group_size", type=int, default=8, help="answers per group (GRPO's num_generations)"
    )
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--planners", nargs="+", default=list(WEAK_PLANNERS), choices=list(BASELINES))
    parser.add_argument("--seed", type=int, default=0, help="dataset_seed of the train rows")
    parser.add_argument("--completions", nargs="+", type=Path, metavar="RUN_DIR", help="score runs instead")
    parser.add_argument("--window", type=int, default=10, help="--completions: steps per window")
    args = parser.parse_args(argv)
    if args.groups < 1:
        parser.error(f"--groups must be at least 1, got {args.groups}")
    if args.group_size < 2:
        parser.error(
            f"--group_size must be at least 2 (one answer alone is always flat), got {args.group_size}"
        )
    if args.window < 1:
        parser.error(f"--window must be at least 1 step, got {args.window}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")

    started = time.perf_counter()
    report: dict = {"machine": cpu_model(), "flat_span": FLAT_SPAN, "ird_reward": IRD_REWARD}
    if args.completions:
        try:
            report["runs"] = {str(run): run_completions(run, args.window) for run in args.completions}
        except (FileNotFoundError, ValueError) as error:
            parser.error(str(error))
    else:
        report |= run_planners(args)
        report["goal"] = goal(report["tiers"])
    report["wall_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
