"""fleet_reward: literal completions, one comment per case, and the ordering DESIGN.md §5 requires."""

from __future__ import annotations

import json

import pytest

from fleet_rl.kernel import evaluate, solve
from fleet_rl.prompts import example_plan, format_answer
from fleet_rl.solved_scenarios import solved_scenario
from rewards import IRD_REWARD, REWARD_FUNCS, fleet_reward
from tests.design_example import SCENARIO, SCENARIO_JSON

OPTIMAL = solve(solved_scenario(SCENARIO)).plan
BF16 = {"embedding": "bf16", "attention": "bf16", "mlp": "bf16", "norm": "bf16", "lm_head": "bf16"}
# a feasible but sub-optimal plan: everything bf16, an even split
CONSERVATIVE = {
    "jobs": [
        {"id": "chat", "gpus": 4, "tensor_parallel": 4, "precision": BF16},
        {"id": "tune", "gpus": 4, "tensor_parallel": 1, "precision": BF16, "micro_batch_size": 1},
    ]
}
# every job placed, but the LoRA job on one GPU with 64 × 2048-token micro-batches runs out of memory
CRASHING = {
    "jobs": [
        {"id": "chat", "gpus": 4, "tensor_parallel": 4, "precision": BF16},
        {"id": "tune", "gpus": 1, "tensor_parallel": 1, "precision": BF16, "micro_batch_size": 64},
    ]
}
EXAMPLE_JOBS = example_plan()["jobs"]  # the prompt's worked example answer (2 jobs: serve, lora)
LOWEST = {"embedding": "int4", "attention": "int4", "mlp": "int4", "norm": "fp8", "lm_head": "int4"}


def reward(*completions: str, **kwargs) -> list[float]:
    return fleet_reward(list(completions), [SCENARIO_JSON] * len(completions), **kwargs)


def test_the_crashing_fixture_really_crashes():
    result = evaluate(solved_scenario(SCENARIO), CRASHING)
    assert result.statuses == {"chat": "ok", "tune": "oom"}


def test_ordering_malformed_below_degenerate_below_crashing_below_feasible():
    malformed, degenerate, crashing, conservative, optimal = reward(
        "I would give the chat job most GPUs.",  # prose, no JSON
        json.dumps({"jobs": [{**job, "precision": LOWEST} for job in CONSERVATIVE["jobs"]]}),  # IRD
        json.dumps(CRASHING),  # valid, one job OOMs
        json.dumps(CONSERVATIVE),  # feasible, sub-optimal
        json.dumps(OPTIMAL),  # the optimum
    )
    assert malformed < degenerate == IRD_REWARD <= crashing < conservative < optimal
    assert optimal == pytest.approx(1.0)


def test_optimal_plan_in_a_fence_amid_prose_and_thinking_scores_at_least_0_9():
    completion = (
        "<think>The chat job is memory-bound, {so int8 weights help}.</think>\n"
        f"Here is my plan:\n```json\n{json.dumps(OPTIMAL, indent=2)}\n```\nIt balances the two jobs."
    )
    assert reward(completion)[0] >= 0.9


def test_conversational_completion_is_read_from_the_last_assistant_message():
    completion = [{"role": "assistant", "content": json.dumps(OPTIMAL)}]
    assert fleet_reward([completion], [SCENARIO_JSON])[0] == pytest.approx(1.0)


def test_reward_rises_with_the_kernel_score_among_feasible_plans():
    plans = [CONSERVATIVE, OPTIMAL]
    plans.append(
        {"jobs": [{**CONSERVATIVE["jobs"][0], "gpus": 2, "tensor_parallel": 2}, CONSERVATIVE["jobs"][1]]}
    )  # chat on fewer GPUs
    scores = [evaluate(solved_scenario(SCENARIO), plan).score for plan in plans]
    rewards = reward(*(json.dumps(plan) for plan in plans))
    assert sorted(range(3), key=scores.__getitem__) == sorted(range(3), key=rewards.__getitem__)


@pytest.mark.parametrize(
    ("completion", "rule", "why"),
    [
        (
            json.dumps(OPTIMAL) + "\n" + json.dumps(CONSERVATIVE),
            "several_plans",
            "two plans in one answer: hedging",
        ),
        (
            json.dumps({"jobs": [*OPTIMAL["jobs"], {**OPTIMAL["jobs"][0], "id": "ghost"}]}),
            "invented_or_duplicate_id",
            "invented job id",
        ),
        (
            json.dumps({"jobs": [OPTIMAL["jobs"][0], OPTIMAL["jobs"][0]]}),
            "invented_or_duplicate_id",
            "duplicated job id",
        ),
        (
            json.dumps({"jobs": [{**job, "precision": LOWEST} for job in OPTIMAL["jobs"]]}),
            "lowest_precision_everywhere",
            "all lowest formats",
        ),
        (
            format_answer(example_plan()),
            "invented_or_duplicate_id",
            "the prompt's worked example copied verbatim (its ids are invented here)",
        ),
        (
            json.dumps(
                {"jobs": [{**part, "id": i} for part, i in zip(EXAMPLE_JOBS, ("chat", "tune"), strict=True)]}
            ),
            "copied_example",
            "the worked example's answer under this scenario's ids",
        ),
    ],
)
def test_degenerate_strategies_get_exactly_the_ird_reward(completion, rule, why):
    columns = {}
    assert reward(completion, log_extra=columns.__setitem__) == [IRD_REWARD], why
    assert columns["ird"] == [rule], why


def test_a_job_the_optimum_runs_ranks_categorical_fault_below_idle_below_near_miss_below_feasible():
    """Breadcrumbs changed this on purpose: a job over memory (a near miss) now ranks above idling it, a job
    with a setting that cannot run (an fp8 norm) still below; both once ranked at most as idle."""
    starved = {"jobs": [{**CONSERVATIVE["jobs"][0], "gpus": 8, "tensor_parallel": 8}]}  # others take its GPUs
    idle = {"jobs": [CRASHING["jobs"][0], {**CRASHING["jobs"][1], "gpus": 0}]}
    unstable = {
        "jobs": [CRASHING["jobs"][0], {**CONSERVATIVE["jobs"][1], "precision": {**BF16, "norm": "fp8"}}]
    }
    crashing, idled, starving, unstable_reward, conservative = reward(
        *(json.dumps(plan) for plan in (CRASHING, idle, starved, unstable, CONSERVATIVE))
    )
    both = {"jobs": [CRASHING["jobs"][0], {**CRASHING["jobs"][1], "precision": {**BF16, "norm": "fp8"}}]}
    (two_faults,) = reward(json.dumps(both))  # out of memory and unstable
    assert evaluate(solved_scenario(SCENARIO), unstable).statuses["tune"] == "unstable"
    assert IRD_REWARD < two_faults < unstable_reward < idled < crashing < conservative
    assert starving < conservative


def test_giving_up_is_degenerate_and_honest_attempts_that_fail_rank_above_it():
    """Breadcrumbs changed this on purpose: a plan whose only placed job crashes was degenerate (0.01), and an
    over-allocated whole plan ranked below giving up (0.0075); both now rank above giving up, graded."""
    empty, idle, crashed, over_allocated, half = reward(
        '{"jobs": []}',
        json.dumps({"jobs": [{**job, "gpus": 0} for job in OPTIMAL["jobs"]]}),
        json.dumps({"jobs": [{**job, "micro_batch_size": 64} for job in CRASHING["jobs"][1:]]}),  # tune OOMs
        json.dumps({"jobs": [{**job, "gpus": 8, "tensor_parallel": 8} for job in CONSERVATIVE["jobs"]]}),
        json.dumps({"jobs": [CONSERVATIVE["jobs"][0]]}),  # chat runs, tune idle
    )
    assert empty == idle == IRD_REWARD  # places nothing: giving up is no answer
    assert IRD_REWARD < over_allocated < crashed < half < 0.3
    # the crashed plan: nothing runs, so it stays in the lower half of the not-feasible band
    assert crashed < (0.02 + 0.25) / 2


def test_several_plans_never_beat_the_best_one_alone():
    alone, hedged = reward(
        json.dumps(OPTIMAL), f"```json\n{json.dumps(OPTIMAL)}\n```\n```json\n{json.dumps(CONSERVATIVE)}\n```"
    )
    assert hedged < alone


@pytest.mark.parametrize(
    "completion",
    ["", "{", '{"jobs": [', '{"jobs": [{"id": "chat", "gpus": "two"}]}', None, 42, "{}" * 50_000],
)
def test_malformed_output_scores_below_the_ird_reward(completion):
    assert 0.0 <= reward(completion)[0] < IRD_REWARD


def test_log_metric_receives_kernel_rates():
    logged = {}
    reward(json.dumps(OPTIMAL), json.dumps(CRASHING), "nonsense", log_metric=logged.__setitem__)
    assert logged["kernel/valid_json_rate"] == pytest.approx(2 / 3)
    assert logged["kernel/oom_rate"] == pytest.approx(1 / 4)  # one OOM among 4 job rows of 2 valid plans
    assert 0 < logged["kernel/percent_of_optimum"] < 100
    assert logged["kernel/ird_rate"] == 0.0


def test_log_extra_adds_columns_to_the_completions_table():
    columns = {}
    reward(json.dumps(OPTIMAL), "nonsense", log_extra=columns.__setitem__)
    assert columns["parse_error"] == ["", "no_json"]
    assert columns["ird"] == ["", ""]
    assert columns["percent_of_optimum"] == [100.0, 0.0]
    reward(json.dumps({"jobs": [OPTIMAL["jobs"][0]] * 2}), '{"jobs": []}', log_extra=columns.__setitem__)
    assert columns["ird"] == ["invented_or_duplicate_id", "places_nothing"]  # the rule that fired


def test_registry_and_trl_kwargs():
    assert REWARD_FUNCS["fleet_reward"] is fleet_reward
    out = fleet_reward(
        [json.dumps(OPTIMAL)],
        [SCENARIO_JSON],
        prompts=["p"],
        completion_ids=[[1, 2]],
        trainer_state=None,
        log_extra=None,
    )
    assert out == [pytest.approx(1.0)]


def test_sharding_a_serving_job_scores_low_with_the_kernels_reason_and_never_raises():
    """Bad input: the new plan field used where it means nothing. The serve job does not run (the
    kernel's reason says why), so the plan earns a not-feasible reward, below the same plan without it."""
    sharded = {
        "jobs": [{**job, "sharding": "full"} if job["id"] == "chat" else job for job in CONSERVATIVE["jobs"]]
    }
    reasons = evaluate(solved_scenario(SCENARIO), sharded).reasons
    assert any("sharding 'full' is a training setting" in reason for reason in reasons)
    wrong, right = reward(json.dumps(sharded), json.dumps(CONSERVATIVE))
    assert wrong < 0.3 <= right
    # a sharding the schema does not know is a malformed plan, not an exception
    (unknown,) = reward(json.dumps({"jobs": [{**CONSERVATIVE["jobs"][1], "sharding": "zero3"}]}))
    assert unknown < 0.01
