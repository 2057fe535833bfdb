"""Component rewards: literal completions with a comment each, bounds under fuzz, one shared scoring pass."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rl.kernel import evaluate, solve
from fleet_rl.solved_scenarios import solved_scenario
from rewards import (
    REWARD_FUNCS,
    efficiency_reward,
    feasibility_reward,
    fleet_reward,
    format_reward,
    ird_reward,
    score_completions,
)
from tests.design_example import SCENARIO, SCENARIO_JSON

OPTIMAL = json.dumps(solve(solved_scenario(SCENARIO)).plan)
BF16 = {"embedding": "bf16", "attention": "bf16", "mlp": "bf16", "norm": "bf16", "lm_head": "bf16"}
HALF = json.dumps({"jobs": [{"id": "chat", "gpus": 4, "tensor_parallel": 4, "precision": BF16}]})
CRASHING = json.dumps(
    {
        "jobs": [
            {"id": "chat", "gpus": 4, "tensor_parallel": 4, "precision": BF16},
            {"id": "tune", "gpus": 1, "tensor_parallel": 1, "precision": BF16, "micro_batch_size": 64},
        ]
    }
)
COMPLETIONS = [
    OPTIMAL,  # the optimum
    CRASHING,  # both placed, the lora job runs out of memory
    HALF,  # tune omitted while the optimum runs it: not feasible, but chat runs
    '{"jobs": [{"id": "chat", "gpus": "two"}]}',  # JSON, but not a plan
    '{"jobs": [',  # a brace that never closes
    "Give chat 4 GPUs.",  # prose only
    OPTIMAL + "\n" + CRASHING,  # two plans: hedging (IRD)
    '{"jobs": []}',  # a plan under which nothing runs: no component pays for it
    OPTIMAL.replace('"tune"', '"tuner"'),  # an invented job id (IRD)
]
COMPONENTS = (format_reward, feasibility_reward, efficiency_reward, ird_reward)


def call(fn, completions=COMPLETIONS, **kwargs):
    return fn(list(completions), [SCENARIO_JSON] * len(completions), **kwargs)


def test_format_reward_levels():
    assert call(format_reward) == [1.0, 1.0, 1.0, 0.5, 0.25, 0.0, 0.0, 0.75, 0.75]


def test_feasibility_reward_is_the_share_of_jobs_that_run():
    # optimum: both run; crashing and half: 1 of 2 runs; the rest have no plan or are IRD
    assert call(feasibility_reward) == [1.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_efficiency_reward_is_the_kernel_score():
    values = call(efficiency_reward)
    assert values[0] == pytest.approx(1.0)
    assert values[1] == pytest.approx(evaluate(solved_scenario(SCENARIO), json.loads(CRASHING)).score)
    assert 0.0 < values[1] < 1.0  # the chat half still earns
    assert values[2] == pytest.approx(evaluate(solved_scenario(SCENARIO), json.loads(HALF)).score)
    assert values[3:] == [0.0] * 6  # IRD or no plan


def test_ird_reward_flags_degenerate_answers_and_missing_plans():
    assert call(ird_reward) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_registry_lists_every_reward_by_its_function_name():
    assert set(REWARD_FUNCS) == {
        "fleet_reward", "format_reward", "feasibility_reward", "efficiency_reward", "ird_reward",
        "difference_reward",
    }  # fmt: skip
    for name, fn in REWARD_FUNCS.items():
        assert fn.__name__ == name  # TRL logs rewards/<__name__>/mean


def test_the_scoring_pass_keeps_nothing_between_calls():
    first = score_completions(list(COMPLETIONS), [SCENARIO_JSON] * len(COMPLETIONS))
    again = score_completions(list(COMPLETIONS), [SCENARIO_JSON] * len(COMPLETIONS))
    assert again is not first  # scored again, not looked up
    assert np.array_equal(again.score, first.score) and np.array_equal(again.ird_rule, first.ird_rule)
    solved = solved_scenario(SCENARIO_JSON)  # a column of solved scenarios is scored without a lookup
    given_solved = score_completions(list(COMPLETIONS), [solved] * len(COMPLETIONS))
    assert np.array_equal(given_solved.score, first.score)


def test_trl_kwargs_are_accepted():
    kwargs = {"prompts": ["p"], "completion_ids": [[1]], "trainer_state": None, "log_metric": lambda *a: None}
    for fn in COMPONENTS:
        assert len(call(fn, [OPTIMAL], **kwargs)) == 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=300), st.none(), st.integers()), min_size=1, max_size=6))
def test_any_input_gives_floats_in_the_unit_interval(completions):
    for fn in (*COMPONENTS, fleet_reward):
        values = call(fn, completions)
        assert len(values) == len(completions)
        assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in values)
