"""What the reward told GRPO during a run: a summary of TRL's completions tables, as JSON.

    python -m benchmarks.reward.completions outputs/learning/smollm2_floors/seed-0 \
        outputs/learning/smollm2_floors/seed-1

A run trained with ``log_completions: true`` leaves ``completions/completions_*.parquet`` in its output
directory: one row per sampled completion with its step, prompt, ``fleet_reward`` and the extra columns
``fleet_reward`` logs (``ird``: the degenerate rule's name or ""). This reads them and reports, per run:

- ``degenerate_share``: completions scored as degenerate (IRD, exactly ``IRD_REWARD``);
- ``feasible_share``: completions whose plan was feasible (``fleet_reward >= FEASIBLE_BASE``);
- ``below_degenerate``: of the completions that were not degenerate, how many scored under ``IRD_REWARD``
  (malformed, schema-invalid or inconsistent with the cluster), and how many there were;
- ``flat_groups``: groups (one prompt's completions at one step) whose completions all scored alike, so
  every advantage was 0 and the group taught nothing, out of all groups;
- ``degenerate_share_by_step``: the degenerate share over the first and the last ``--window`` steps, to see
  where training drifted;
- ``by_jobs``: per number of jobs the prompt asks a plan for (its last line, "Write the plan for all 3
  jobs ..."; prompts without that line are left out), the completions' count, mean ``fleet_reward``,
  feasible share and, where the table has it, mean ``percent_of_optimum``: how good the sampled answers to
  larger scenarios were, to set against the greedy held-out score of the same tier.

Why: a learning benchmark says *whether* the held-out score moved; this says what the reward offered the
policy while it trained (no signal, or a safe degenerate answer), from the run's own records.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import pandas as pd

from rewards.fleet_reward import FEASIBLE_BASE
from rewards.ird import IRD_REWARD

REQUIRED_COLUMNS = ("step", "prompt", "fleet_reward", "ird")
# the user message's last line (fleet_rl/prompts.py, _whole_plan_request)
JOBS_REQUEST = re.compile(r"Write the plan for (?:all (\d+) jobs|its one job)")


def prompt_jobs(prompt: str) -> int | None:
    """The number of jobs the prompt's last request line asks for, ``None`` without one."""
    requests = JOBS_REQUEST.findall(prompt)
    if not requests:
        return None
    return int(requests[-1] or 1)


def load_completions(run_dir: Path) -> pd.DataFrame:
    """All completions tables of one run, in step order; a clear error if the run logged none."""
    tables = sorted((run_dir / "completions").glob("completions_*.parquet"))
    if not tables:
        raise FileNotFoundError(
            f"{run_dir}: no completions/completions_*.parquet (train with log_completions: true)"
        )
    frame = pd.concat([pd.read_parquet(table) for table in tables], ignore_index=True)
    if frame.empty:
        raise ValueError(f"{run_dir}: the completions tables hold no completions")
    missing = [column for column in REQUIRED_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"{run_dir}: the completions tables lack {missing} (fleet_reward logs 'ird')")
    return frame.sort_values("step", kind="stable").reset_index(drop=True)


def summarize(frame: pd.DataFrame, window_steps: int = 10) -> dict:
    """The reward's view of one run's completions (see the module docstring)."""
    reward = frame["fleet_reward"].astype(float)
    degenerate = frame["ird"].fillna("").astype(str) != ""
    honest = reward[~degenerate]
    prompt = frame["prompt"].astype(str)  # a chat prompt is a list of messages: compare it as text
    spread = reward.groupby([frame["step"], prompt]).agg(lambda scores: scores.max() - scores.min())
    steps = sorted(frame["step"].unique())
    first, last = steps[:window_steps], steps[-window_steps:]
    return {
        "completions": len(frame),
        "steps": len(steps),
        "degenerate_share": float(degenerate.mean()),
        "feasible_share": float((reward >= FEASIBLE_BASE).mean()),
        "below_degenerate": {"count": int((honest < IRD_REWARD - 1e-9).sum()), "of": len(honest)},
        "flat_groups": {"count": int((spread <= 1e-9).sum()), "of": len(spread)},
        "degenerate_share_by_step": {
            f"steps {first[0]}-{first[-1]}": float(degenerate[frame["step"].isin(first)].mean()),
            f"steps {last[0]}-{last[-1]}": float(degenerate[frame["step"].isin(last)].mean()),
        },
        "by_jobs": _by_jobs(frame, prompt.map(prompt_jobs), reward),
    }


def _by_jobs(frame: pd.DataFrame, jobs: pd.Series, reward: pd.Series) -> dict:
    """``summarize``'s ``by_jobs`` (the module docstring), keyed by the job count as a string."""
    groups = {}
    for count in sorted(jobs.dropna().unique()):
        picked = jobs == count
        group = {
            "completions": int(picked.sum()),
            "mean_fleet_reward": float(reward[picked].mean()),
            "feasible_share": float((reward[picked] >= FEASIBLE_BASE).mean()),
        }
        if "percent_of_optimum" in frame.columns:
            percents = frame.loc[picked, "percent_of_optimum"].astype(float)
            group["mean_percent_of_optimum"] = float(percents.mean())
        groups[str(int(count))] = group
    return groups


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", nargs="+", type=Path, help="training output directories")
    parser.add_argument("--window", type=int, default=10, help="steps at each end for the drift figure")
    args = parser.parse_args(argv)
    if args.window < 1:
        parser.error(f"--window must be at least 1 step, got {args.window}")
    try:
        report = {str(run): summarize(load_completions(run), args.window) for run in args.run_dirs}
    except (FileNotFoundError, ValueError) as error:
        print(f"benchmarks.reward.completions: {error}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
