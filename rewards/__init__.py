"""Rewards for GRPO: parse the LLM's plan strictly, then score it (DESIGN.md §5).

TRL reward functions (``def name(completions, scenario, **kwargs) -> list[float]``) are registered by name in
``REWARD_FUNCS``:

- ``fleet_reward``: the default, parse → batched kernel → breadcrumbs → IRD, in [0, 1];
- ``format_reward``, ``feasibility_reward``, ``efficiency_reward``, ``ird_reward``: its components, in [0, 1],
  for ``reward_weights`` (TRL logs each as ``rewards/<name>/mean``);
- ``difference_reward``: the multi-agent credit Dᵢ = G(z) − G(z₋ᵢ ∪ cᵢ), normalised to [−1, 1] (None on
  rows that are not multi-agent).

Each runs the same scoring pass over its batch (``rewards/scoring.py``), which solves each scenario once per
run through ``fleet_rl/solved_scenarios.py``. The parsing layer:

    from rewards import parse_plan
    plan, error, num_candidates = parse_plan(completion)    # error is None or one of PARSE_ERRORS

Whether a plan's job ids fit the scenario is the kernel's word alone (``fleet_rl/kernel/encode.py``: the
``unknown_job`` and ``duplicate_job`` reason codes; a job left out is ``unallocated``).
"""

from fleet_rl.plan_schema import PLAN_JSON_SCHEMA
from rewards.components import efficiency_reward, feasibility_reward, format_reward, ird_reward
from rewards.difference import difference_reward
from rewards.fleet_reward import fleet_reward
from rewards.ird import IRD_REWARD, degenerate_plans
from rewards.parsing import (
    BAD_JSON,
    MAX_COMPLETION_CHARS,
    MAX_NESTING,
    NO_JSON,
    NOT_TEXT,
    PARSE_ERRORS,
    SCHEMA,
    SEVERAL_PLANS,
    TOO_DEEP,
    TOO_LARGE,
    ParseResult,
    completion_text,
    parse_plan,
)
from rewards.scoring import score_completions

REWARD_FUNCS = {
    "fleet_reward": fleet_reward,
    "format_reward": format_reward,
    "feasibility_reward": feasibility_reward,
    "efficiency_reward": efficiency_reward,
    "ird_reward": ird_reward,
    "difference_reward": difference_reward,
}
"""Reward functions by name, for configs (``reward_funcs: [fleet_reward]``)."""

__all__ = [
    "IRD_REWARD",
    "REWARD_FUNCS",
    "degenerate_plans",
    "difference_reward",
    "efficiency_reward",
    "feasibility_reward",
    "fleet_reward",
    "format_reward",
    "ird_reward",
    "score_completions",
    "BAD_JSON",
    "MAX_COMPLETION_CHARS",
    "MAX_NESTING",
    "NOT_TEXT",
    "NO_JSON",
    "PARSE_ERRORS",
    "PLAN_JSON_SCHEMA",
    "SCHEMA",
    "SEVERAL_PLANS",
    "TOO_DEEP",
    "TOO_LARGE",
    "ParseResult",
    "completion_text",
    "parse_plan",
]
