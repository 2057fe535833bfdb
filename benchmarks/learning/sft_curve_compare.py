"""Two SFT curves side by side: does curve B's checkpoint score above curve A's at the same step, paired on
the same held-out scenarios? (``python -m benchmarks.learning.sft_curve --compare A_JSON B_JSON``)

Made for a change of prompt (issue #68): both curves distil the same target with the same schedule, and only
the prompt differs, so their scenario fingerprints differ (the fingerprint hashes the prompts) while the
scenarios and their scoring are the same. The comparison is refused unless both curves answered the same
held-out scenarios (the same evaluation settings but the prompt style: tiers, count, generator seed, split,
token budget) scored
the same way (every baseline's mean % of optimum equal: the optima, the physics and the reward did not
move). Per step both curves have: B's % of optimum minus A's per scenario, its mean and the percentile
bootstrap over scenarios of ``statistics.paired_difference``. ``same_prompts`` says whether the fingerprints
agree (then nothing but the model differs). ``steps=(a, b)`` pairs A's step a with B's step b instead: two
runs of different lengths (more examples, more steps), each at its last checkpoint.

Each side may be a list of curves, one recipe's SFT seeds (``--compare A0.json,A1.json B0.json,B1.json``):
seed i's pair is A's i-th curve and B's i-th; each scenario's difference is averaged over the pairs, so the
interval is of the recipes' mean, as the learning benchmark pools its GRPO seeds (issue #68: one SFT seed
moves a start by about five points, and the adoption rules ask for two seeds a recipe).
"""

from __future__ import annotations

import numpy as np

from benchmarks.learning.same_scenarios import asked_settings, same_scoring
from benchmarks.learning.statistics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, paired_difference

__all__ = ["compare_curves"]


def compare_curves(
    baseline: dict | list[dict],
    candidate: dict | list[dict],
    *,
    steps: tuple[int, int] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict:
    """Per step both curves hold (or for the pair ``steps``: baseline's step, candidate's step), the paired
    difference candidate − baseline of % of optimum.

    A side given as a list is a recipe's curves from several SFT seeds, paired by position with the other
    side's (the same number on each side): each scenario's difference is averaged over the pairs before the
    bootstrap resamples scenarios, and ``per_seed`` holds each pair's mean difference.

    Raises ``ValueError`` when the curves did not answer the same held-out scenarios scored the same way,
    share no step, lack a step of ``steps``, or the sides hold different numbers of curves."""
    baselines = baseline if isinstance(baseline, list) else [baseline]
    candidates = candidate if isinstance(candidate, list) else [candidate]
    if not baselines or len(baselines) != len(candidates):
        raise ValueError(
            f"{len(baselines)} baseline curve(s) against {len(candidates)} candidate curve(s): pooling pairs "
            "the seeds by position, so give as many on each side"
        )
    first = baselines[0]
    for other in [*baselines[1:], *candidates]:
        if asked_settings(first) != asked_settings(other):
            raise ValueError(
                f"the curves were evaluated differently ({first['eval']} against {other['eval']}): "
                "no paired comparison"
            )
        if not same_scoring(first, other):
            raise ValueError(
                "the baselines score differently on the two curves' scenarios (the optima, physics or "
                "reward moved): no paired comparison"
            )
    points_a = [{point["step"]: point for point in curve["checkpoints"]} for curve in baselines]
    points_b = [{point["step"]: point for point in curve["checkpoints"]} for curve in candidates]
    steps_a = set.intersection(*(set(points) for points in points_a))
    steps_b = set.intersection(*(set(points) for points in points_b))
    if steps is None:
        pairs = [(step, step) for step in sorted(steps_a & steps_b)]
        if not pairs:
            raise ValueError(f"no common step: {sorted(steps_a)} against {sorted(steps_b)} (--compare_steps)")
    elif steps[0] in steps_a and steps[1] in steps_b:
        pairs = [tuple(steps)]
    else:
        raise ValueError(f"no such steps {list(steps)}: {sorted(steps_a)} against {sorted(steps_b)}")
    per_step = []
    for step_a, step_b in pairs:
        a = np.asarray([points[step_a]["percent_of_optimum"] for points in points_a], float)
        b = np.asarray([points[step_b]["percent_of_optimum"] for points in points_b], float)
        difference = paired_difference(a, b, resamples=resamples, seed=seed)
        per_step.append(
            {
                "step": step_a if step_a == step_b else [step_a, step_b],
                "baseline_percent_of_optimum": float(a.mean()),
                "candidate_percent_of_optimum": float(b.mean()),
                "difference_percent_points": difference["mean"],
                "difference_ci95": difference["ci95"],
                **({"per_seed": difference["per_seed"]} if len(baselines) > 1 else {}),
            }
        )
    fingerprints = [[curve["scenario_fingerprint"] for curve in side] for side in (baselines, candidates)]
    return {
        "question": "% of optimum of each common SFT step, candidate minus baseline, on the same held-out "
        "scenarios",
        **{
            side: {
                "sft_target": curves[0]["sft_target"],
                "scenario_fingerprint": curves[0]["scenario_fingerprint"],
            }
            for side, curves in (("baseline", baselines), ("candidate", candidates))
        },
        "seeds_pooled": len(baselines),
        "same_prompts": len({*fingerprints[0], *fingerprints[1]}) == 1,
        "prompt_styles": [first["eval"].get("prompt_style"), candidates[0]["eval"].get("prompt_style")],
        "scenarios": a.shape[1],
        "steps": per_step,
        "bootstrap": {
            "resamples": resamples,
            "rng": f"numpy.random.default_rng({seed})",
            "unit": "scenario",
            "interval": "percentile, 2.5 and 97.5",
        },
    }
