"""FleetToolEnvironment + refinement_reward: TRL's environment_factory contract, checks that cost, the
final answer scored by the training reward, and the same episodes on an environment server (base_urls)."""

from __future__ import annotations

import json

import pytest
from transformers.utils import get_json_schema

from fleet_rl.baselines import even_bf16, heuristic
from fleet_rl.env.server_pool import AllServersDown, ServerPool
from fleet_rl.env.trl_environment import FleetToolEnvironment, refinement_reward, tool_chat_template
from fleet_rl.prompts import format_answer
from fleet_rl.server.subprocess_server import server_process
from fleet_rl.tiny_model import build_tokenizer
from fleet_rl.training.dataset import planner_answer, scenario_rows
from rewards import fleet_reward

ROWS = scenario_rows(["easy", "medium", "hard", "multiagent"], 8, dataset_seed=5)


def _answer(planner, row) -> str:
    return format_answer(planner_answer(planner, row))


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"{row['task']}-{row['seed']}")
def test_an_answer_without_checks_earns_exactly_the_training_reward(row):
    env = FleetToolEnvironment(max_turns=3, turn_cost=0.05)
    assert "check_plan" in env.reset(**row)
    answer = [{"role": "assistant", "content": _answer(heuristic, row)}]  # TRL's conversational completion
    expected = fleet_reward([answer], [row["scenario"]], agent=[row["agent"]], given_plan=[row["given_plan"]])
    assert refinement_reward([answer], environments=[env]) == pytest.approx(expected, abs=1e-12)


def test_checks_return_the_verdict_and_cost_the_turn_cost():
    row = ROWS[1]
    env = FleetToolEnvironment(max_turns=3, turn_cost=0.05)
    env.reset(**row)
    verdict = env.check_plan(_answer(even_bf16, row))
    assert verdict.startswith("Turn 1 of 3: reward") and "% of optimum" in verdict
    assert env.check_plan(
        json.loads(_answer(even_bf16, row).split("```json\n")[1].split("```")[0])
    ).startswith("Turn 2 of 3")  # a plan passed as an object (a model that skips the string) is scored too
    assert env.check_plan("{}") == "No checks left: answer with your final plan."
    final = _answer(heuristic, row)
    logged = {}
    rewards = refinement_reward([final], environments=[env], log_metric=logged.__setitem__)
    expected = fleet_reward([final], [row["scenario"]], agent=[row["agent"]], given_plan=[row["given_plan"]])[
        0
    ]
    assert rewards == [pytest.approx(expected - 2 * 0.05)]
    assert logged == {"refine/checks_per_episode": 2.0}
    assert refinement_reward([final], environments=[env]) == rewards  # idempotent across reward functions
    assert env.check_plan("{}") == "The episode is over."


def test_reset_starts_a_new_episode_for_a_pooled_instance():
    env = FleetToolEnvironment(max_turns=2)
    env.reset(**ROWS[0])
    env.check_plan("{}")
    refinement_reward(["{}"], environments=[env])
    env.reset(**ROWS[2])
    assert env.checks == 0 and env.check_plan("{}").startswith("Turn 1 of 2")


def _episode(env, row) -> tuple[list[str], float, int]:
    env.reset(**row)
    feedback = [env.check_plan(_answer(even_bf16, row)), env.check_plan("{not a plan")]
    (reward,) = refinement_reward([_answer(heuristic, row)], environments=[env])
    return feedback, reward, env.checks


def test_base_urls_run_the_episodes_on_the_server_with_the_in_process_feedback_and_reward():
    rows = [next(row for row in ROWS if row["task"] == task) for task in ("medium", "multiagent")]
    with server_process() as url:
        for row in rows:
            local = _episode(FleetToolEnvironment(max_turns=3, turn_cost=0.05), row)
            remote = _episode(FleetToolEnvironment(max_turns=3, turn_cost=0.05, base_urls=[url]), row)
            assert remote[0] == local[0] and remote[2] == local[2] == 2
            assert local[0][0].startswith("Turn 1 of 3") and local[0][1].startswith("Turn 2 of 3")
            assert remote[1] == pytest.approx(local[1], abs=1e-12)
    pool = ServerPool([url], connect_timeout_s=1, all_down_timeout_s=1, retry_initial_s=0.2)
    with pytest.raises(
        AllServersDown, match=f"all 1 environment server.s. down for more than 1 s \\({url}\\)"
    ):
        FleetToolEnvironment(max_turns=3, pool=pool).reset(**rows[0])  # the server gone: a clear error


def test_the_tool_schema_is_what_trl_renders():
    schema = get_json_schema(FleetToolEnvironment(max_turns=2).check_plan)
    assert schema["function"]["name"] == "check_plan"
    assert schema["function"]["parameters"]["required"] == ["plan"]
    assert schema["function"]["parameters"]["properties"]["plan"]["type"] == "string"


def test_misuse_is_a_clear_error():
    with pytest.raises(ValueError, match="max_turns >= 2"):
        FleetToolEnvironment(max_turns=1)
    with pytest.raises(ValueError, match="base_urls or a pool, not both"):
        FleetToolEnvironment(base_urls=["http://a:8000"], pool=ServerPool(["http://a:8000"]))
    with pytest.raises(ValueError, match="environment_factory=FleetToolEnvironment"):
        refinement_reward(["{}"])


def test_tool_chat_template_gives_the_tiny_tokenizer_tool_calls():
    from trl.chat_template_utils import add_response_schema, parse_response, supports_tool_calling

    tokenizer = build_tokenizer(["a small corpus for a byte-level tokenizer"] * 4, vocab_size=300)
    assert not supports_tool_calling(tokenizer)
    tool_chat_template(tokenizer)
    assert supports_tool_calling(tokenizer)
    add_response_schema(tokenizer)  # TRL parses the model's tool calls with it
    tools = [FleetToolEnvironment(max_turns=2).check_plan]
    prompt = [{"role": "user", "content": "Write the plan."}]
    prefix = tokenizer.apply_chat_template(prompt, tools=tools, add_generation_prompt=True, tokenize=True)
    call = '{"name": "check_plan", "parameters": {"plan": "{}"}}<|eot_id|>'
    ids = tokenizer(call, add_special_tokens=False)["input_ids"]
    parsed = parse_response(tokenizer, ids, prefix=prefix["input_ids"], tools=tools)
    assert parsed["tool_calls"][0]["function"] == {"name": "check_plan", "arguments": {"plan": "{}"}}
