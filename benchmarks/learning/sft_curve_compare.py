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
"""

from __future__ import annotations

import numpy as np

from benchmarks.learning.same_scenarios import asked_settings, same_scoring
from benchmarks.learning.statistics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, paired_difference

__all__ = ["compare_curves"]


def compare_curves(
    baseline: dict,
    candidate: dict,
    *,
    steps: tuple[int, int] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict:
    """Per step both curves hold (or for the pair ``steps``: baseline's step, candidate's step), the paired
    difference candidate − baseline of % of optimum.

    Raises ``ValueError`` when the curves did not answer the same held-out scenarios scored the same way,
    share no step, or lack a step of ``steps``."""
    if asked_settings(baseline) != asked_settings(candidate):
        raise ValueError(
            f"the curves were evaluated differently ({baseline['eval']} against {candidate['eval']}): "
            "no paired comparison"
        )
    if not same_scoring(baseline, candidate):
        raise ValueError(
            "the baselines score differently on the two curves' scenarios (the optima, physics or reward "
            "moved): no paired comparison"
        )
    points_a = {point["step"]: point for point in baseline["checkpoints"]}
    points_b = {point["step"]: point for point in candidate["checkpoints"]}
    if steps is None:
        pairs = [(step, step) for step in sorted(points_a.keys() & points_b.keys())]
        if not pairs:
            raise ValueError(
                f"no common step: {sorted(points_a)} against {sorted(points_b)} (--compare_steps)"
            )
    elif steps[0] in points_a and steps[1] in points_b:
        pairs = [tuple(steps)]
    else:
        raise ValueError(f"no such steps {list(steps)}: {sorted(points_a)} against {sorted(points_b)}")
    per_step = []
    for step_a, step_b in pairs:
        a = np.asarray(points_a[step_a]["percent_of_optimum"], float)
        b = np.asarray(points_b[step_b]["percent_of_optimum"], float)
        difference = paired_difference(a[None, :], b[None, :], resamples=resamples, seed=seed)
        per_step.append(
            {
                "step": step_a if step_a == step_b else [step_a, step_b],
                "baseline_percent_of_optimum": float(a.mean()),
                "candidate_percent_of_optimum": float(b.mean()),
                "difference_percent_points": difference["mean"],
                "difference_ci95": difference["ci95"],
            }
        )
    return {
        "question": "% of optimum of each common SFT step, candidate minus baseline, on the same held-out "
        "scenarios",
        **{
            side: {"sft_target": result["sft_target"], "scenario_fingerprint": result["scenario_fingerprint"]}
            for side, result in (("baseline", baseline), ("candidate", candidate))
        },
        "same_prompts": baseline["scenario_fingerprint"] == candidate["scenario_fingerprint"],
        "prompt_styles": [baseline["eval"].get("prompt_style"), candidate["eval"].get("prompt_style")],
        "scenarios": len(points_a[pairs[0][0]]["percent_of_optimum"]),
        "steps": per_step,
        "bootstrap": {
            "resamples": resamples,
            "rng": f"numpy.random.default_rng({seed})",
            "unit": "scenario",
            "interval": "percentile, 2.5 and 97.5",
        },
    }
