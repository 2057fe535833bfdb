"""GRPO's gain on each task tier: a learning result's paired after − start difference in % of the optimum,
tier by tier, with the same bootstrap interval as the whole (prints JSON).

    python -m benchmarks.learning.by_tier benchmarks/results/learning_smollm2_cpu.json

The argument is a result the learning benchmark wrote (``--output``). Its ``per_scenario`` table holds each
held-out scenario's tier and its start and after scores per seed; each tier's scenarios are paired as the
whole set is (``benchmarks/learning/statistics.py``: each scenario's difference averaged over the seeds, the
bootstrap resampling that tier's scenarios). No model runs.

Why (issue #68): the table under a result gives each seed's mean per tier, not whether a tier's change is
more than the scenarios' noise. GRPO from the 1,440-plan warm start rose on easy scenarios and fell on medium
ones on both seeds; whether either move is real decides where the recipe should change next.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.learning.kept_answers import print_analysis
from benchmarks.learning.statistics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, paired_difference

__all__ = ["by_tier"]


def by_tier(result: dict) -> dict:
    """Per tier of ``result["eval"]["eval_tasks"]``: its scenario count, each seed's start and after mean %
    of the optimum and the paired after − start difference (mean, 95 % interval, per seed), rounded to 0.1."""
    table = result["per_scenario"]
    tasks = np.asarray(table["task"])
    after = np.atleast_2d(np.asarray(table["after_percent_of_optimum"], dtype=float))
    start = np.atleast_2d(np.asarray(table["start_percent_of_optimum"], dtype=float))
    if start.shape[0] == 1:  # one start evaluation shared by every seed
        start = np.repeat(start, after.shape[0], axis=0)
    if start.shape != after.shape or after.shape[1] != tasks.size:
        raise ValueError(
            f"per_scenario: start {start.shape}, after {after.shape} and {tasks.size} tasks do not pair"
        )
    tiers = {}
    for task in result["eval"]["eval_tasks"]:
        picked = tasks == task
        if not picked.any():
            continue
        difference = paired_difference(start[:, picked], after[:, picked])
        tiers[task] = {
            "scenarios": int(picked.sum()),
            "start": _rounded(start[:, picked].mean(axis=1)),
            "after": _rounded(after[:, picked].mean(axis=1)),
            "after_minus_start": {
                "mean": round(difference["mean"], 1),
                "ci95": _rounded(difference["ci95"]),
                "per_seed": _rounded(difference["per_seed"]),
            },
        }
    return {
        "seeds": result["seeds"],
        "scenarios": int(tasks.size),
        "by_tier": tiers,
        "bootstrap": {"resamples": BOOTSTRAP_RESAMPLES, "rng": f"numpy.random.default_rng({BOOTSTRAP_SEED})",
                      "unit": "scenario of the tier; each scenario's difference averaged over the seeds"},
    }  # fmt: skip


def _rounded(values) -> list[float]:
    return [round(float(value), 1) for value in values]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", help="a learning benchmark result (its --output JSON)")
    args = parser.parse_args(argv)
    return print_analysis("by_tier", args.result, by_tier)


if __name__ == "__main__":
    main()
