"""Learning benchmark, statistics: the paired after − start difference per metric, with a percentile
bootstrap interval that resamples scenarios (``benchmarks/learning/benchmark.py`` explains the design)."""

from __future__ import annotations

import numpy as np

__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "METRICS", "paired_difference"]

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
# metric -> (heldout summary key, label in the table, digits)
METRICS: dict[str, tuple[str, str, int]] = {
    "percent_of_optimum": ("mean_percent_of_optimum", "mean % of optimum", 1),
    "valid_plan_rate": ("valid_plan_rate", "valid plan", 2),
    "feasible_rate": ("feasible_rate", "feasible", 2),
    "ird_rate": ("ird_rate", "IRD", 2),
    "fleet_reward": ("mean_fleet_reward", "mean fleet_reward", 3),
}


def paired_difference(
    start: np.ndarray,
    after: np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = 0.95,
) -> dict:
    """Mean paired difference ``after - start`` with a percentile bootstrap interval over scenarios.

    ``start`` and ``after`` are (seeds, scenarios) arrays of one metric on the same scenarios. Each
    scenario's difference is averaged over seeds; the bootstrap resamples scenarios with replacement
    ``resamples`` times (``numpy.random.default_rng(seed)``). Returns ``mean``, ``ci95`` ([low, high]) and
    ``per_seed`` (each seed's mean difference)."""
    start, after = np.atleast_2d(np.asarray(start, float)), np.atleast_2d(np.asarray(after, float))
    if start.shape != after.shape or start.shape[1] == 0:
        raise ValueError(f"paired arrays must have one equal (seeds, scenarios) shape, got {start.shape}")
    differences = after - start  # (seeds, scenarios)
    per_scenario = differences.mean(axis=0)  # (scenarios,)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for first in range(0, resamples, 1000):  # chunks bound the index array at 1000 x scenarios
        count = min(1000, resamples - first)
        picks = rng.integers(0, per_scenario.size, size=(count, per_scenario.size))
        means[first : first + count] = per_scenario[picks].mean(axis=1)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return {
        "mean": float(per_scenario.mean()),
        "ci95": [float(low), float(high)],
        "per_seed": [float(value) for value in differences.mean(axis=1)],
    }
