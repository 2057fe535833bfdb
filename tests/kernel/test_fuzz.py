"""Property tests: evaluate never raises and always returns a bounded, well-formed Evaluation."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet_rl import make_scenario
from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel import evaluate, evaluate_batch, solve, solve_scenario

SCENARIO = make_scenario("hard", 4)
SOLVED = solve_scenario(SCENARIO)  # solved once: every evaluate below scores against it
OPTIMAL = solve(SOLVED).plan


# Integers within int64: JSON parsers (msgspec included) read larger ones as floats, so a dict and its JSON
# text would legitimately differ there (RFC 8259 §6: such numbers are not interoperable).
def _json_values(floats: st.SearchStrategy) -> st.SearchStrategy:
    return st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | floats | st.text(max_size=20),
        lambda children: (
            st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5)
        ),
        max_leaves=30,
    )


json_values = _json_values(st.floats())
# What mutated plans hold, compared with their JSON text: finite floats only, as ``json.dumps`` writes inf and
# nan as ``Infinity``/``NaN``, which are not JSON (the text fails to decode where the dict fails the schema).
json_text_values = _json_values(st.floats(allow_nan=False, allow_infinity=False))
field_values = {
    "id": st.sampled_from([job.id for job in SCENARIO.jobs] + ["ghost", ""]),
    "gpus": st.integers(-2, 20),
    "tensor_parallel": st.sampled_from([0, 1, 2, 3, 4, 8, 16]),
    "micro_batch_size": st.sampled_from([0, 1, 2, 3, 4, 64, 128]),
    "activation_checkpointing": st.booleans() | st.integers(0, 1),
    "kv_cache": st.sampled_from([*PRECISIONS, "FP8", None]),
}


@st.composite
def mutated_plans(draw):
    """The optimal plan with random fields replaced, dropped, or set to arbitrary JSON."""
    plan = json.loads(json.dumps(OPTIMAL))
    for job in plan["jobs"]:
        for key, strategy in field_values.items():
            choice = draw(st.integers(0, 5))
            if choice == 0:
                job[key] = draw(strategy)
            elif choice == 1:
                job.pop(key, None)
            elif choice == 2 and draw(st.booleans()):
                job[key] = draw(json_text_values)
        group = draw(st.sampled_from(MODULE_GROUPS))
        job["precision"][group] = draw(st.sampled_from([*PRECISIONS, "BF16", 8, None]))
    if draw(st.booleans()):
        plan["jobs"] = draw(st.permutations(plan["jobs"]))
    return plan


def _check(result) -> None:
    assert 0.0 <= result.score <= 1.0
    assert len(result.jobs) == len(SCENARIO.jobs)
    assert result.valid or (result.score == 0.0 and result.reasons)
    for job in result.jobs:
        assert job.status in {"ok", "oom", "unsupported", "unstable", "invalid", "unallocated"}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_plans())
def test_mutated_plans_never_raise(plan):
    result = evaluate(SOLVED, plan)
    _check(result)
    assert evaluate(SOLVED, json.dumps(plan)) == result  # text and dict agree


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_arbitrary_json_never_raises(value):
    _check(evaluate(SOLVED, value))
    _check(evaluate(SOLVED, {"jobs": value}))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_arbitrary_text_never_raises(text):
    _check(evaluate(SOLVED, text))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutated_plans(), min_size=1, max_size=8))
def test_batch_of_mutated_plans_equals_scalar(plans):
    assert evaluate_batch(SOLVED, plans) == [evaluate(SOLVED, plan) for plan in plans]
