"""fleet_rl.revision: plan, verdict, revised plan, as one token sequence, the policy's tokens masked in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet_rl import make_scenario
from fleet_rl.kernel import solve
from fleet_rl.prompts import build_messages, format_answer
from fleet_rl.revision import REVISE_REQUEST, feedback_suffix_ids, run_revisions, verdict_message
from fleet_rl.tiny_model import build_tokenizer
from fleet_rl.training.revision_rollout import RowsByPrompt, episode_request, revision_reward

SMOLLM2_DIR = Path(__file__).resolve().parents[1] / "outputs" / "models" / "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def tokenizer():
    corpus = [json.dumps(solve(make_scenario("easy", seed)).plan) for seed in range(20)]
    return build_tokenizer(corpus * 4, vocab_size=600)


def _tokenizers(tiny):
    """The tiny Llama-3-layout tokenizer, and SmolLM2's ChatML one where it is converted."""
    yield tiny
    if (SMOLLM2_DIR / "tokenizer_config.json").exists():
        from transformers import AutoTokenizer

        yield AutoTokenizer.from_pretrained(SMOLLM2_DIR)


def _row(task: str, seed: int) -> dict:
    scenario = make_scenario(task, seed, "eval")
    return {"prompt": build_messages(scenario, style="facts"), "scenario": scenario.to_json(), "task": task,
            "seed": seed, "agent": "", "given_plan": ""}  # fmt: skip


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_prompt_answer_and_suffix_are_exactly_the_chat_template_of_the_whole_conversation(tokenizer):
    prompt = build_messages(make_scenario("easy", 1), style="facts")
    answer = '```json\n{"jobs": []}\n```'
    message = "Turn 1 of 3: reward 0.010.\nRevise."
    for tok in _tokenizers(tokenizer):
        eos = [tok.eos_token_id]
        prompt_text = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        answer_ids = _ids(tok, answer) + eos  # an answer that ended with its end-of-turn token
        suffix = feedback_suffix_ids(tok, message, answer_ended=True, eos_token_ids=eos)
        whole = prompt + [{"role": "assistant", "content": answer}, {"role": "user", "content": message}]
        expected = tok.apply_chat_template(whole, tokenize=False, add_generation_prompt=True)
        assert tok.decode(_ids(tok, prompt_text) + answer_ids + suffix) == expected
        # an answer cut off before its end token gets the end token from the suffix
        cut = feedback_suffix_ids(tok, message, answer_ended=False, eos_token_ids=eos)
        assert cut == eos + suffix


def _scripted(tokenizer, answers_by_turn: dict[int, list[str]], calls: list):
    """A ``generate`` that answers turn t with ``answers_by_turn[t]`` (one per still-active episode)."""

    def generate(contexts, turn):
        calls.append((turn, len(contexts)))
        return [
            _ids(tokenizer, text) + [tokenizer.eos_token_id]
            for text in answers_by_turn[turn][: len(contexts)]
        ]

    return generate


def test_episodes_stop_once_a_plan_runs_every_job_and_mask_only_the_verdicts(tokenizer):
    rows = [_row("easy", 3), _row("easy", 4), _row("easy", 5)]
    requests = [episode_request(row) for row in rows]
    optimal = [format_answer(request.solved.optimal_plan) for request in requests]
    broken = json.loads(json.dumps(requests[1].solved.optimal_plan))
    for job in broken["jobs"]:
        job["precision"] = {group: "fp32" for group in job["precision"]}
        job["gpus"], job["tensor_parallel"] = 1, 1
    answers = {
        1: [optimal[0], format_answer(broken), "no plan here"],  # runs at once / fails / unreadable
        2: [optimal[1], "still no plan"],
        3: ["nothing again"],
    }
    calls: list = []
    texts = [
        tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        for row in rows
    ]
    generate = _scripted(tokenizer, answers, calls)
    episodes = run_revisions(
        [_ids(tokenizer, text) for text in texts], requests, generate, tokenizer, max_turns=3,
        eos_token_ids=[tokenizer.eos_token_id],
    )  # fmt: skip
    assert calls == [(1, 3), (2, 2), (3, 1)]  # finished episodes leave the batch
    assert [episode.turns for episode in episodes] == [1, 2, 3]
    assert episodes[0].done and episodes[0].verdicts[0].percent_of_optimum == pytest.approx(100.0)
    assert episodes[0].env_mask == [1] * len(episodes[0].completion_ids)  # nothing to revise: no verdict
    fixed = episodes[1]
    assert fixed.final_answer == optimal[1] and fixed.done
    assert fixed.verdicts[0].reward < fixed.verdicts[1].reward
    # the verdict's tokens are masked out and decode to the verdict message between the two answers
    first_len = len(_ids(tokenizer, format_answer(broken))) + 1
    zeros = [k for k, bit in enumerate(fixed.env_mask) if bit == 0]
    assert zeros == list(range(first_len, first_len + len(zeros)))
    between = tokenizer.decode([fixed.completion_ids[k] for k in zeros])
    assert verdict_message(fixed.verdicts[0], 1, 3) in between and REVISE_REQUEST in between
    assert "oom" in between or "unsupported" in between or "too_slow" in between
    # each token names its plan: the first plan 1, the verdict 0, the revision 2
    plans = fixed.plan_of_token
    assert len(plans) == len(fixed.completion_ids)
    assert [plan for plan, bit in zip(plans, fixed.env_mask, strict=True) if bit == 0] == [0] * len(zeros)
    revision = plans[zeros[-1] + 1 :]
    assert plans[:first_len] == [1] * first_len and revision == [2] * len(revision) and revision
    assert set(episodes[2].plan_of_token) == {0, 1, 2, 3}
    assert not episodes[2].done and episodes[2].final_answer == "nothing again"
    assert "No plan could be read" in episodes[2].verdicts[0].text(1, 3)


def test_bad_arguments_raise_clear_errors(tokenizer):
    row = _row("easy", 0)
    with pytest.raises(ValueError, match="max_turns must be at least 1"):
        run_revisions([[1]], [episode_request(row)], lambda c, t: [[1]], tokenizer, max_turns=0,
                      eos_token_ids=[0])  # fmt: skip
    with pytest.raises(ValueError, match="1 prompts but 2 requests"):
        run_revisions([[1]], [episode_request(row)] * 2, lambda c, t: [[1]], tokenizer, max_turns=2,
                      eos_token_ids=[0])  # fmt: skip


def test_rows_are_found_by_their_prompt_and_the_reward_is_the_episodes():
    rows = [_row("easy", 1), _row("medium", 2)]
    lookup = RowsByPrompt(rows)
    request = lookup.request(json.loads(json.dumps(rows[1]["prompt"])))  # a copy, as TRL hands it over
    assert request.scenario.to_json() == rows[1]["scenario"] and request.agent == ""
    with pytest.raises(KeyError, match="not in its training dataset"):
        lookup.request(_row("easy", 9)["prompt"])
    logged = {}
    rewards = revision_reward(["a", "b"], episode_reward=[0.5, 0.25], first_reward=[0.1, 0.25], turns=[2, 1],
                              log_metric=logged.__setitem__)  # fmt: skip
    assert rewards == [0.5, 0.25]
    assert logged == {"revise/first_reward": pytest.approx(0.175), "revise/turns_per_episode": 1.5,
                      "revise/revised_share": 0.5}  # fmt: skip
    with pytest.raises(ValueError, match="rollout_func=revision_rollout"):
        revision_reward(["a"])
