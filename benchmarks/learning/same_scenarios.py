"""Do two results hold the same held-out scenarios, scored the same way, though their prompts differ?

The scenario fingerprint hashes the prompts, so a change of prompt style (issue #68) changes it while the
scenarios, their optima and their scoring stay put. Two results may then still be paired per scenario when
they were evaluated with the same settings but the prompt style (tiers, count, generator seed, split,
token budget, decoding) and every baseline, which reads no prompt, scores the same on both (the optima,
the physics and the reward did not move). Used by ``compare`` (two learning results) and
``sft_curve_compare`` (two SFT curves).
"""

from __future__ import annotations

import math

__all__ = ["asked_settings", "same_scoring"]


def asked_settings(result: dict) -> dict:
    """The evaluation settings that pick and answer the held-out scenarios, all but the prompt style."""
    return {key: value for key, value in result["eval"].items() if key != "prompt_style"}


def same_scoring(baseline: dict, candidate: dict) -> bool:
    """Every baseline's mean % of optimum agrees: the same optima, physics and reward."""
    names = baseline["baselines"].keys()
    if names != candidate["baselines"].keys():
        return False
    return all(
        math.isclose(
            baseline["baselines"][name]["mean_percent_of_optimum"],
            candidate["baselines"][name]["mean_percent_of_optimum"],
            rel_tol=1e-9,
            abs_tol=1e-9,
        )
        for name in names
    )
