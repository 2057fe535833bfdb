"""An honest plan is found whatever stray brackets the prose around it holds (exploit class 6).

The scanner of rewards/parsing.py tries every "{" as the start of an object and passes over the ones that
never close, nest too deep or open a span that does not decode, so a stray brace in prose cannot swallow
the plan after it; and it stays linear on pathological input. Hedging with two plans is still caught.
"""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rl import make_scenario
from fleet_rl.plan_schema import plan_from_object
from fleet_rl.scenario_generator import TASKS
from fleet_rl.solved_scenarios import solved_scenario
from rewards import MAX_COMPLETION_CHARS, PARSE_ERRORS, SEVERAL_PLANS, TOO_LARGE, fleet_reward, parse_plan

WORDS = ["Let", "me", "think.", "use", "fp8", "for", "the", "mlp", "x", "1", "step", "->", "if", "(a)", "\n"]
STRAY = ["{", "[", "}", "]", "{ ", "[[", "{{", "use {fp8} here", "{x}", "{mlp: fp8}", "f(x) { return x[0]; }"]
QUOTED = ['"fast"', '"{"', "'{'", '"jobs" key']  # balanced quotes; a quoted brace; the key in prose

prose = st.lists(st.sampled_from(WORDS + STRAY), max_size=60).map(" ".join)
prose_with_quotes = st.lists(st.sampled_from(WORDS + STRAY + QUOTED), max_size=60).map(" ".join)
scenarios = st.builds(make_scenario, st.sampled_from(TASKS), st.integers(0, 2_000))


def optimum(scenario) -> dict:
    return solved_scenario(scenario).optimal_plan


def assert_parses_to(text: str, plan: dict) -> None:
    result = parse_plan(text)
    assert result.error is None, (result.error, result.detail, text)
    assert result.plan == plan_from_object(plan) and result.num_candidates == 1


@settings(max_examples=300, deadline=None)
@given(scenarios, prose, prose, st.booleans())
def test_a_plan_after_prose_with_stray_brackets_is_found(scenario, before, after, indent):
    plan = optimum(scenario)
    body = json.dumps(plan, indent=2 if indent else None)
    assert_parses_to(f"{before}\n{body}\n{after}", plan)
    assert_parses_to(f"{before}\n{body}", plan)
    # in a ```json fence after such prose (and prose after it)
    assert_parses_to(f"{before}\n```json\n{body}\n```\n{after}", plan)
    assert_parses_to(f"<think>{after}</think>{before}\n```json\n{body}\n```", plan)


@settings(max_examples=200, deadline=None)
@given(scenarios, prose_with_quotes, prose_with_quotes)
def test_a_plan_after_prose_with_quotes_and_stray_brackets_is_found(scenario, before, after):
    # Quotes in prose shift what a scan from a stray brace takes for strings; the braces it misread are
    # scanned again (a bounded number of times).
    plan = optimum(scenario)
    assert_parses_to(f"{before}\n{json.dumps(plan)}\n{after}", plan)


@settings(max_examples=100, deadline=None)
@given(scenarios, prose)
def test_two_plans_amid_stray_brackets_are_still_several_plans(scenario, before):
    plan = optimum(scenario)
    other = {"jobs": plan["jobs"][::-1]}
    text = f"{before} {json.dumps(plan)} {before} {json.dumps(other)} }}"
    assert parse_plan(text).error == SEVERAL_PLANS
    assert parse_plan("{ " + text).error == SEVERAL_PLANS


@pytest.mark.parametrize(
    "before",
    [
        "Options: " + "{ " * 10,  # more unclosed braces than the old scanner retried
        "Consider { the trade-off:",  # ... closed after the plan: "{ prose {plan} prose }"
        "{" * 40,  # deeper than MAX_NESTING
        "[" * 40 + " {",
        "use {fp8} here, {int8} there; f(x) { return x[0]; } {",
        'Mind the { brace and the " quote.',
        'the "{" character ' * 12,  # more quoted braces than rescans
    ],
)
def test_known_stray_brace_shapes(before):
    scenario = make_scenario("medium", 3)
    plan = optimum(scenario)
    text = f"{before}\n{json.dumps(plan)}\nThat's it }}"
    assert_parses_to(text, plan)
    assert fleet_reward([text], [scenario.to_json()]) == [1.0]


N = MAX_COMPLETION_CHARS
PLAN = json.dumps(optimum(make_scenario("medium", 3)))


@pytest.mark.parametrize(
    "text",
    [
        "{" * 200_000,  # over the size bound: refused before any scan
        "{" * (N - 1),
        "{ " * (N // 2 - 1),
        "{a}" * (N // 3 - 1),
        "{}" * (N // 2 - 1),
        '{"' * (N // 2 - 1),
        '{"\\"{' * (N // 5 - 1),
        "{" * (N - len(PLAN) - 1) + PLAN,  # every brace a failed start, each answered from the first pass
        "{a}" * ((N - len(PLAN)) // 3 - 1) + PLAN,  # every span decoded once and passed over
        "{a{a" * ((N - len(PLAN)) // 4 - 1) + PLAN,
        '{x "{" } ' * ((N - len(PLAN)) // 9 - 1) + PLAN,  # a quoted brace in every span: bounded rescans
        ('{"a":' * 32 + "1," + "}" * 32 + " ") * ((N - len(PLAN)) // 200) + PLAN,  # deep spans that fail
        "[{" * ((N - len(PLAN)) // 2 - 1) + PLAN,
        '{"a":' * (N // 5 - 1),  # one {"a":{"a":... chain, deeper than MAX_NESTING at once
        '{"a":' * ((N - len(PLAN)) // 5 - 1) + PLAN,
        '"' * (N - 1),  # many quotes, no brace
        '"{' * (N // 2 - 1),  # every brace behind a stray quote
        '{"a": "' * (N // 7 - 1),  # strings that never close
        ('{"a": "x' + "\\" * 3) * ((N - len(PLAN)) // 12 - 1) + PLAN,  # escapes that swallow the quote
        "[" * (N - len(PLAN) - 1) + PLAN,
    ],
)
def test_pathological_inputs_stay_fast(text):
    start = time.process_time()  # the parser's own work, however loaded the machine is
    result = parse_plan(text)
    assert time.process_time() - start < 1.0  # generous: at most ~25 ms each on one core
    assert result.error is None or result.error in PARSE_ERRORS
    if len(text) > N:
        assert result.error == TOO_LARGE
