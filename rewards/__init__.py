"""Rewards for GRPO: parse the LLM's plan strictly, then score it (DESIGN.md §5).

TRL reward functions (``def name(completions, scenario, **kwargs) -> list[float]``) are registered by name in
``REWARD_FUNCS``: ``fleet_reward`` (parse → batched kernel → breadcrumbs → IRD, in [0, 1]) so far; the
component rewards and multi-agent difference rewards are still to come. The parsing layer:

    from rewards import parse_plan, check_against_scenario
    plan, error, num_candidates = parse_plan(completion)    # error is None or one of PARSE_ERRORS
    check_against_scenario(plan, scenario)                   # [] or codes from SCENARIO_ERRORS
"""

from fleet_rl.plan_schema import PLAN_JSON_SCHEMA
from rewards.fleet_reward import REWARD_FUNCS, fleet_reward
from rewards.ird import IRD_REWARD, degenerate_plans
from rewards.parsing import (
    BAD_JSON,
    DUPLICATE_JOB,
    MAX_COMPLETION_CHARS,
    MAX_NESTING,
    MISSING_JOB,
    NO_JSON,
    NOT_TEXT,
    PARSE_ERRORS,
    SCENARIO_ERRORS,
    SCHEMA,
    SEVERAL_PLANS,
    TOO_DEEP,
    TOO_LARGE,
    UNKNOWN_JOB,
    ParseResult,
    check_against_scenario,
    completion_text,
    parse_plan,
)

__all__ = [
    "IRD_REWARD",
    "REWARD_FUNCS",
    "degenerate_plans",
    "fleet_reward",
    "BAD_JSON",
    "DUPLICATE_JOB",
    "MAX_COMPLETION_CHARS",
    "MAX_NESTING",
    "MISSING_JOB",
    "NOT_TEXT",
    "NO_JSON",
    "PARSE_ERRORS",
    "PLAN_JSON_SCHEMA",
    "SCENARIO_ERRORS",
    "SCHEMA",
    "SEVERAL_PLANS",
    "TOO_DEEP",
    "TOO_LARGE",
    "UNKNOWN_JOB",
    "ParseResult",
    "check_against_scenario",
    "completion_text",
    "parse_plan",
]
