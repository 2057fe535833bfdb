"""fleet_rl.revision: plan, verdict, revised plan, as one token sequence, the policy's tokens masked in."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest

from fleet_rl import make_scenario
from fleet_rl.env.feedback import verdict as verdict_of
from fleet_rl.kernel import solve
from fleet_rl.prompts import build_messages, format_answer
from fleet_rl.revision import (
    REVISE_REQUEST,
    RevisionEpisode,
    feedback_suffix_ids,
    run_revisions,
    verdict_message,
)
from fleet_rl.tiny_model import build_tokenizer
from fleet_rl.training.revision_rollout import (
    RevisionRepairs,
    RowsByPrompt,
    episode_request,
    revision_reward,
    revision_rollout,
)
from rewards.parsing import parse_plan

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


def _broken_answer(request) -> str:
    """The optimum with every job in fp32 on one GPU: out of memory or too slow wherever it matters."""
    broken = json.loads(json.dumps(request.solved.optimal_plan))
    for job in broken["jobs"]:
        job["precision"] = {group: "fp32" for group in job["precision"]}
        job["gpus"], job["tensor_parallel"] = 1, 1
    return format_answer(broken)


def _oom_rows(count: int) -> list[dict]:
    """Easy held-out rows whose broken answer has a job out of memory (what a repair fixes)."""
    rows = []
    for seed in range(200):
        row = _row("easy", seed)
        verdict_ = verdict_of(episode_request(row), _broken_answer(episode_request(row)))
        if any(job["status"] == "oom" for job in verdict_.jobs):
            rows.append(row)
        if len(rows) == count:
            return rows
    raise AssertionError("too few easy scenarios with a job out of memory")


def test_written_revisions_replace_generation_and_are_trained_on(tokenizer):
    rows = _oom_rows(3)
    requests = [episode_request(row) for row in rows]
    fixes = [format_answer(request.solved.optimal_plan) for request in requests]
    calls: list = []
    answers = {1: [_broken_answer(request) for request in requests], 2: ["a plan of its own"]}
    seen = []

    def written(index, episode, turn):
        seen.append((index, turn, episode.turns))
        return None if index == 1 else _ids(tokenizer, fixes[index]) + [tokenizer.eos_token_id]

    prompts = [_ids(tokenizer, tokenizer.apply_chat_template(row["prompt"], tokenize=False)) for row in rows]
    episodes = run_revisions(prompts, requests, _scripted(tokenizer, answers, calls), tokenizer, max_turns=2,
                             eos_token_ids=[tokenizer.eos_token_id], written=written)  # fmt: skip
    assert calls == [(1, 3), (2, 1)]  # only episode 1's revision is generated
    assert seen == [(0, 2, 1), (1, 2, 1), (2, 2, 1)]  # asked once per revision, after the verdict
    assert [episode.written_turns for episode in episodes] == [[2], [], [2]]
    for index in (0, 2):
        episode = episodes[index]
        assert episode.final_answer == fixes[index] and episode.done
        assert episode.verdicts[1].reward > episode.verdicts[0].reward  # scored like any plan
        revision = [k for k, plan in enumerate(episode.plan_of_token) if plan == 2]
        assert revision and all(episode.env_mask[k] == 1 for k in revision)  # trained on
        assert (
            tokenizer.decode([episode.completion_ids[k] for k in revision], skip_special_tokens=True)
            == (fixes[index])
        )
    assert episodes[1].final_answer == "a plan of its own"


def _fake_trainer(tokenizer, generated: dict[int, list[str]], training: bool = True, step: int = 3):
    """What ``revision_rollout`` reads of a GRPOTrainer, generating ``generated[turn]`` in order."""
    from types import SimpleNamespace

    eos = tokenizer.eos_token_id

    def tokenize(prompts):
        texts = [
            tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts
        ]
        return ([_ids(tokenizer, text) for text in texts],)

    turns = iter(sorted(generated))

    def generate(contexts, images, kwargs, count):
        answers = generated[next(turns)]
        return ([_ids(tokenizer, answers[k % len(answers)]) + [eos] for k in range(len(contexts))],)

    return SimpleNamespace(
        processing_class=tokenizer, _tokenize_prompts=tokenize, _generate_single_turn=generate,
        num_generations=2, num_generations_eval=2, model=SimpleNamespace(training=training),
        eos_token_ids=[eos], state=SimpleNamespace(global_step=step), args=SimpleNamespace(seed=0),
        accelerator=SimpleNamespace(process_index=0), max_completion_length=256,
    )  # fmt: skip


def test_training_rollouts_write_repaired_revisions_that_beat_the_plans_they_repair(tokenizer):
    rows = _oom_rows(2)
    broken = [_broken_answer(episode_request(row)) for row in rows]
    rollout = revision_rollout(rows, max_turns=2, turn_cost=0.01, repairs=RevisionRepairs(1.0, draws=4))
    prompts = [row["prompt"] for row in rows]
    out = rollout(prompts, _fake_trainer(tokenizer, {1: broken}))  # no turn-2 generation: all written
    again = rollout(prompts, _fake_trainer(tokenizer, {1: broken}))
    assert out["completion_ids"] == again["completion_ids"]  # drawn from (seed, step, episode, turn)
    assert [len(gains) for gains in out["repair_gains"]] == [1, 1]
    assert all(gains[0] > 0 for gains in out["repair_gains"])  # each repair ran the job that crashed
    for k, (first, plans) in enumerate(zip(out["first_reward"], out["plan_rewards"], strict=True)):
        assert plans[1] == pytest.approx(first + out["repair_gains"][k][0])
        assert out["episode_reward"][k] == pytest.approx(plans[1] - 0.01)
    logged = {}
    revision_reward(["a", "b"], **{key: out[key] for key in ("episode_reward", "first_reward", "turns")},
                    repair_gains=out["repair_gains"], log_metric=logged.__setitem__)  # fmt: skip
    assert logged["revise/repaired_share"] == 1.0
    gains = [gains[0] for gains in out["repair_gains"]]
    assert logged["revise/repair_gain"] == pytest.approx(sum(gains) / 2)
    # evaluation plays the policy's own revisions; a rollout without repairs logs none
    held_out = rollout(prompts, _fake_trainer(tokenizer, {1: broken, 2: ["mine"]}, training=False))
    for ids, plans in zip(held_out["completion_ids"], held_out["plan_of_token"], strict=True):
        revision = [token for token, plan in zip(ids, plans, strict=True) if plan == 2]
        assert tokenizer.decode(revision, skip_special_tokens=True) == "mine"
    assert held_out["repair_gains"] == [[], []]
    plain = revision_rollout(rows, max_turns=2, turn_cost=0.01)(
        prompts, _fake_trainer(tokenizer, {1: broken, 2: ["x"]})
    )
    assert "repair_gains" not in plain


def test_revision_repairs_refuse_bad_settings_and_leave_agents_rows_alone(tokenizer):
    import random

    with pytest.raises(ValueError, match="a share of revisions in \\(0, 1\\], got 0"):
        RevisionRepairs(0.0)
    with pytest.raises(ValueError, match="at least 1: got 0"):
        RevisionRepairs(0.5, draws=0)
    row = _oom_rows(1)[0]
    request = episode_request(row)
    episode = RevisionEpisode(request, answers=[_broken_answer(request)])
    encode = functools.partial(_ids, tokenizer)
    repairs = RevisionRepairs(1.0)
    ids = repairs.written(episode, random.Random(0), encode, 7, 256)
    assert ids[-1] == 7 and parse_plan(tokenizer.decode(ids[:-1])).plan is not None
    assert repairs.written(episode, random.Random(0), encode, 7, len(ids) - 1) is None  # too long
    agent = RevisionEpisode(dataclasses.replace(request, agent="j1"), answers=episode.answers)
    assert repairs.written(agent, random.Random(0), encode, 7, 256) is None
    fine = RevisionEpisode(request, answers=[format_answer(request.solved.optimal_plan)])
    assert repairs.written(fine, random.Random(0), encode, 7, 256) is None  # nothing to repair
