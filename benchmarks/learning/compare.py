"""Learning benchmark, two recipes side by side: does recipe B's trained policy end above recipe A's on the
same held-out scenarios? (``python -m benchmarks.learning --compare A_JSON B_JSON``)

Each result's interval says how far *its* policy moved from *its* start; two such intervals that overlap do
not say whether one recipe beats the other. Both results answered the same scenarios, so the question has a
paired answer: per scenario, B's after-GRPO % of optimum (averaged over B's seeds) minus A's (averaged over
A's), its mean and the same percentile bootstrap over scenarios as ``statistics``. The comparison is
refused unless both results hold the same scenarios (tiers and generator seeds, and the scenario
fingerprint, or, for results on different prompt styles, ``same_scenarios``: the same evaluation settings
but the style and the same baseline scores; ``same_prompts`` says which): a difference on different
scenarios says nothing. A different start is allowed (a recipe may include its start) and reported, as is
each result's own after − start difference.

When either result answered in revision episodes (a ``first_plan`` entry: plans with the kernel's verdict
between them), its final plans had more tries than a single answer. So the comparison adds the same paired
difference for the **first plans**, written before any verdict (a single-plan result's first plan is its only
one): did training on revision episodes make the plan the policy writes alone better or worse?"""

from __future__ import annotations

import numpy as np

from benchmarks.learning.same_scenarios import asked_settings, same_scoring
from benchmarks.learning.statistics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, paired_difference

__all__ = ["compare"]


def _scenario_means(result: dict, key: str) -> np.ndarray:
    """One result's per-scenario ``key`` (``after_``/``start_percent_of_optimum``) averaged over its seeds."""
    return np.asarray(result["per_scenario"][key], float).mean(axis=0)


def _first_plan_means(result: dict, policy: str = "after") -> np.ndarray:
    """One result's per-scenario first-plan score of its ``policy`` (``start`` or ``after``) averaged over its
    seeds: the plans before any verdict for revision episodes, the only plans otherwise. A start's first plans
    are its single answers, so they also say whether two results started from the same policy."""
    first = result.get("first_plan")
    if not first:
        return _scenario_means(result, f"{policy}_percent_of_optimum")
    return np.asarray(first[f"{policy}_per_scenario"], float).mean(axis=0)


def _summary(result: dict, after: np.ndarray) -> dict:
    """What one side's own result says: its seeds, its after mean and its after − start difference."""
    return {
        "seeds": result["seeds"],
        "after_percent_of_optimum": float(after.mean()),
        "delta_percent_points": result["delta_percent_points"],
        "delta_ci95": result["delta_ci95"],
    }


def _same_scenarios_other_prompts(baseline: dict, candidate: dict) -> bool:
    """Both results answered the same scenarios, scored alike, with prompts of different styles."""
    if "eval" not in baseline or "eval" not in candidate:
        return False
    return asked_settings(baseline) == asked_settings(candidate) and same_scoring(baseline, candidate)


def compare(
    baseline: dict, candidate: dict, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict:
    """The paired difference candidate − baseline of the after-GRPO mean % of optimum, per scenario.

    Raises ``ValueError`` when the two results were not measured on the same held-out scenarios."""
    same_prompts = baseline.get("scenario_fingerprint") == candidate.get("scenario_fingerprint")
    if not same_prompts and not _same_scenarios_other_prompts(baseline, candidate):
        raise ValueError(
            "the results hold different held-out scenarios (scenario fingerprint "
            f"{baseline.get('scenario_fingerprint')} against {candidate.get('scenario_fingerprint')}, and "
            "their evaluation settings or baselines differ by more than the prompt style): "
            "no paired comparison"
        )
    rows_a, rows_b = baseline["per_scenario"], candidate["per_scenario"]
    if rows_a["task"] != rows_b["task"] or rows_a["generator_seed"] != rows_b["generator_seed"]:
        raise ValueError("the results hold different held-out scenarios (tiers or generator seeds differ)")
    after_a = _scenario_means(baseline, "after_percent_of_optimum")
    after_b = _scenario_means(candidate, "after_percent_of_optimum")
    difference = paired_difference(after_a[None, :], after_b[None, :], resamples=resamples, seed=seed)
    starts = [_first_plan_means(result, "start") for result in (baseline, candidate)]
    first_plans = {}
    if baseline.get("first_plan") or candidate.get("first_plan"):
        first_a, first_b = _first_plan_means(baseline), _first_plan_means(candidate)
        first = paired_difference(first_a[None, :], first_b[None, :], resamples=resamples, seed=seed)
        first_plans = {
            "first_plan": {
                "question": "after-GRPO mean % of optimum of the first plans (before any verdict), "
                "candidate minus baseline",
                "baseline_after_percent_of_optimum": float(first_a.mean()),
                "candidate_after_percent_of_optimum": float(first_b.mean()),
                "difference_percent_points": first["mean"],
                "difference_ci95": first["ci95"],
            }
        }
    return {
        "question": "after-GRPO mean % of optimum, candidate minus baseline, on the same held-out scenarios",
        "scenario_fingerprint": baseline["scenario_fingerprint"],
        "candidate_scenario_fingerprint": candidate["scenario_fingerprint"],
        "same_prompts": same_prompts,
        "prompt_styles": [result.get("eval", {}).get("prompt_style") for result in (baseline, candidate)],
        "scenarios": int(after_a.size),
        "baseline": _summary(baseline, after_a),
        "candidate": _summary(candidate, after_b),
        "same_start": bool(np.allclose(*starts)),
        "difference_percent_points": difference["mean"],
        "difference_ci95": difference["ci95"],
        "bootstrap": {
            "resamples": resamples,
            "rng": f"numpy.random.default_rng({seed})",
            "unit": "scenario; each result's after score averaged over its own seeds",
            "interval": "percentile, 2.5 and 97.5",
        },
        **first_plans,
    }
