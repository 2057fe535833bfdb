"""difference_reward: Dᵢ = G(z) − G(z₋ᵢ ∪ cᵢ) with cᵢ = the agent's job unallocated, normalised to [−1, 1]."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rl import make_scenario
from fleet_rl.kernel import evaluate, solve
from fleet_rl.multiagent import agent_request
from fleet_rl.solved_scenarios import solved_scenario
from rewards import difference_reward, fleet_reward
from rewards.difference import FLOOR, counterfactuals
from rewards.scoring import best_response_value, given_plan_from


def _fixture_seed() -> int:
    """The first multiagent request whose agent runs a lora job at a micro-batch above 1 in the optimum,
    on some of the GPUs while the other jobs hold the rest. The tests below need a weaker part
    (micro-batch 1) and a crash (int8 norms: unstable, one fault, on any GPU)."""
    for seed in range(200):
        scenario = make_scenario("multiagent", seed)
        agent, _ = agent_request(scenario, seed)
        part = next(job for job in solve(scenario).plan["jobs"] if job["id"] == agent)
        kind = next(job.kind for job in scenario.jobs if job.id == agent)
        others_hold_gpus = 0 < part["gpus"] < scenario.cluster.count
        if kind == "lora" and others_hold_gpus and part.get("micro_batch_size", 1) > 1:
            return seed
    raise AssertionError("no multiagent seed fits the fixture")


SEED = _fixture_seed()
SCENARIO = make_scenario("multiagent", SEED)
SOLVED = solved_scenario(SCENARIO)
AGENT, GIVEN = agent_request(SCENARIO, SEED)
GIVEN_JSON = json.dumps(GIVEN)
BEST_PART = next(job for job in solve(SOLVED).plan["jobs"] if job["id"] == AGENT)
FREE_GPUS = SCENARIO.cluster.count - sum(job["gpus"] for job in GIVEN["jobs"])


def answer(**changes) -> str:
    return json.dumps({"jobs": [{**BEST_PART, **changes}]})


def crash() -> str:
    """The best part with int8 norms: unstable in any kind of job (one fault)."""
    return answer(precision={**BEST_PART["precision"], "norm": "int8"})


def rewards(*completions, fn=difference_reward):
    n = len(completions)
    return fn(list(completions), [SCENARIO.to_json()] * n, agent=[AGENT] * n, given_plan=[GIVEN_JSON] * n)


def test_the_fixture_leaves_the_agent_gpus_to_use():
    assert BEST_PART["gpus"] == FREE_GPUS > 0


def test_best_response_gets_1_a_crash_and_abstaining_get_0():
    crashed_part = json.loads(crash())["jobs"][0]
    evaluation = evaluate(solved_scenario(SCENARIO), {"jobs": [*GIVEN["jobs"], crashed_part]})
    assert evaluation.statuses[AGENT] == "unstable"
    best, crashed, idle = rewards(answer(), crash(), answer(gpus=0))
    assert best == pytest.approx(1.0)
    assert crashed == pytest.approx(0.0)  # placed but contributes nothing: Dᵢ = 0
    assert idle == 0.0  # abstaining: Dᵢ = 0, the counterfactual itself


def test_the_difference_is_the_joint_objective_minus_the_counterfactual():
    # a weaker but valid part: the agent's lora job at micro-batch 1 (the optimum runs 2)
    assert "kv_cache" not in BEST_PART and BEST_PART["micro_batch_size"] > 1
    part = answer(micro_batch_size=1, activation_checkpointing=True)
    (value,) = rewards(part)
    merged = {"jobs": [*GIVEN["jobs"], json.loads(part)["jobs"][0]]}
    (base,), (best,) = counterfactuals([(SOLVED, AGENT, given_plan_from(GIVEN_JSON))])
    assert base == pytest.approx(evaluate(SOLVED, GIVEN).objective)  # cᵢ: the agent's job unallocated
    expected = (evaluate(SOLVED, merged).objective - base) / best
    assert value == pytest.approx(expected)
    assert 0.0 < value < 1.0


def test_taking_gpus_the_others_hold_is_harmful():
    # over-allocating makes the joint plan invalid: G(z) = 0 < G(z₋ᵢ ∪ cᵢ)
    tp = BEST_PART["tensor_parallel"]
    (value,) = rewards(answer(gpus=FREE_GPUS + 8 // tp * tp if FREE_GPUS + 8 <= 64 else 64))
    assert value < 0.0


@pytest.mark.parametrize(
    ("completion", "why"),
    [
        ("I will take whatever is left.", "no plan at all"),
        (
            json.dumps({"jobs": [{**GIVEN["jobs"][0], "gpus": 0}]}),
            "rewrites another agent's part (duplicate id)",
        ),
        (answer() + "\n" + answer(gpus=0), "two answers: hedging"),
    ],
)
def test_malformed_and_degenerate_answers_get_the_floor(completion, why):
    assert rewards(completion) == [FLOOR], why


def test_rows_without_an_agent_get_none_so_trl_skips_them():
    scenario = make_scenario("medium", 0)
    out = difference_reward(
        [json.dumps(solve(solved_scenario(scenario)).plan), answer()],
        [scenario.to_json(), SCENARIO.to_json()],
        agent=["", AGENT],
        given_plan=["", GIVEN_JSON],
    )
    assert out[0] is None and out[1] == pytest.approx(1.0)


def test_fleet_reward_pays_an_agent_for_its_own_contribution_only():
    weak = answer(micro_batch_size=1, activation_checkpointing=True)
    best, weaker, nothing, crashed, broken = rewards(
        answer(), weak, answer(gpus=0), crash(), answer(gpus=SCENARIO.cluster.count), fn=fleet_reward
    )
    assert best == pytest.approx(1.0)
    (contribution,) = rewards(weak)  # the normalised difference reward of the weaker part
    assert weaker == pytest.approx(0.3 + 0.7 * contribution)  # not the joint plan's score
    # abstaining earns no feasible credit, crashing (one fault: unstable norms) no more than abstaining, and
    # breaking the joint plan less than either
    assert broken < crashed <= nothing < 0.3 < weaker < best


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_stays_in_bounds(text):
    (value,) = rewards(text)
    assert FLOOR <= value <= 1.0


@pytest.mark.parametrize("seed", range(6))
def test_the_best_response_is_the_best_value_within_the_gpus_left(seed):
    """``best_response_value`` reads a running maximum: it must equal the maximum over every GPU count
    the other jobs leave free (0 included: the job idle), for every job and every share they take."""
    solved = solved_scenario(make_scenario("multiagent", seed))
    values = solved.optimal_value_by_gpus
    for job in range(len(solved.job_ids)):
        for taken in range(solved.gpu_count + 3):  # more than the cluster: nothing left
            free = max(solved.gpu_count - taken, 0)
            assert best_response_value(solved, job, taken) == max(values[job, : free + 1])
    assert solved.idle_objective == pytest.approx(float(values[:, 0].sum()))
