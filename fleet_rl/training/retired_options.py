"""Options retired in issue #69: each gives one line saying what replaced it, or that it was retired and the
commit that last had it, and exit code 2 (never a traceback, never a silent ignore).

Their experiments are closed; what they measured reproduces at ``LAST_COMMIT``; each result is in
``docs/learning-benchmark.md`` ("Tried, not adopted") and ``docs/experiment-log.md``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["LAST_COMMIT", "RETIRED", "retired_option_problem"]

LAST_COMMIT = "2a054bb"

_EXPERIMENTS = {  # option -> the experiment it switched, as the log names it
    "turn_credit": "per-turn credit in revision episodes",
    "extra_job_credit": "list-end credit",
    "explore_edit_rate": "exploration by random edits",
    "explore_repair_place_omitted": "repairs that also place left-out jobs",
    "explore_repair_too_slow": "repairs of jobs under their floors",
    "explore_repair_draws": "the best of several repairs",
    "sample_every_job": "every-job sampling",
    "sample_every_job_share": "every-job sampling",
    "sample_every_job_train_opening": "every-job sampling",
    "resample_flat_groups": "fresh prompts for flat steps (DAPO dynamic sampling)",
    "floors_off_prompts": "prompts without throughput floors first",
    "eval_max_turns": "held-out revision episodes",
}
_EXPERT_ITERATION = (
    "every prompts samples repairs min_reward epochs batch_size generation_batch_size learning_rate"
)
_EXPERIMENTS |= {f"expert_iteration_{name}": "expert iteration" for name in _EXPERT_ITERATION.split()}
RETIRED: dict[str, str] = {
    name: f"{name} ({experiment}) was retired in issue #69; the last commit that had it is {LAST_COMMIT}"
    for name, experiment in _EXPERIMENTS.items()
} | {"build_tiny_model": "build_tiny_model was replaced by local_model: tiny"}


def retired_option_problem(config: dict | None, argv: Iterable[str]) -> str | None:
    """The line for the first retired option set in ``config`` (a YAML mapping) or given as a flag in
    ``argv`` (``--name`` or ``--name=value``), or None."""
    names = list(config or {})
    names += [argument[2:].split("=", 1)[0] for argument in argv if argument.startswith("--")]
    for name in names:
        if name in RETIRED:
            return RETIRED[name]
    return None
