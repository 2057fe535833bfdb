"""Expert iteration: which answers a round keeps (the policy's own, its repairs, the kernel's best per
prompt), the SFT pass that trains on them, its schedule between GRPO steps and its checkpoints, on a real
GRPOTrainer with the tiny Llama, the fleet reward and the two-job scenario."""

from __future__ import annotations

import json
import math

import pytest
import torch
from datasets import Dataset
from transformers import AutoTokenizer
from trl import GRPOConfig

import fleet_rl.training.expert_iteration as expert_iteration
from fleet_rl.prompts import build_messages
from fleet_rl.scenario import Scenario
from fleet_rl.tiny_model import ensure_tiny_model
from fleet_rl.training.arguments import FleetScriptArguments
from fleet_rl.training.checks import check_expert_iteration
from fleet_rl.training.expert_iteration import (
    ROUNDS_DIR,
    ExpertCandidate,
    ExpertIterationTrainer,
    best_candidates,
    candidate_answers,
)
from fleet_rl.training.self_imitation import StoredAnswer
from rewards import fleet_reward
from tests.training.two_jobs import BF16, SCENARIO

CHAT = {"id": "chat", "gpus": 4, "tensor_parallel": 1, "precision": BF16, "kv_cache": "bf16"}  # 70B: oom
TUNE = {"id": "tune", "gpus": 4, "tensor_parallel": 1, "precision": BF16, "micro_batch_size": 1,
        "activation_checkpointing": True}  # fmt: skip
CRASHING = "```json\n" + json.dumps({"jobs": [CHAT, TUNE]}, separators=(",", ":")) + "\n```"


def row_for(chat_batch_size: int) -> dict:
    """A dataset row for the two-job scenario with the chat job serving batches of that size."""
    data = json.loads(SCENARIO.to_json())
    data["jobs"][0]["batch_size"] = chat_batch_size
    scenario = Scenario.from_dict(data)
    return {
        "prompt": build_messages(scenario, style="compact"),
        "scenario": scenario.to_json(),
        "task": "easy",
        "seed": chat_batch_size,
        "agent": "",
        "given_plan": "",
    }


ROW = row_for(8)
ROWS = [row_for(size) for size in (8, 4, 2, 1)]  # four prompts; CRASHING crashes on each, repairs run


def test_candidates_are_the_answers_that_ended_and_their_distinct_repairs():
    rows = [ROW, ROW | {"agent": "chat"}]
    texts = [CRASHING, CRASHING, CRASHING, "no plan"]
    candidates = candidate_answers(texts, [True, False, True, True], rows, samples=2, repairs=3, seed="s")
    own = [c for c in candidates if not c.repaired]
    assert [(c.prompt, c.answer) for c in own] == [(0, 0), (1, 2), (1, 3)]  # answer 1 was cut off
    repairs = [c for c in candidates if c.repaired]
    assert repairs and all((c.prompt, c.answer) == (0, 0) for c in repairs)  # a multi-agent row: none
    assert len({c.text for c in repairs}) == len(repairs) <= 3
    assert all(fleet_reward([c.text], [ROW["scenario"]])[0] >= 0.3 for c in repairs)  # every job runs
    again = candidate_answers(texts, [True, False, True, True], rows, samples=2, repairs=3, seed="s")
    assert again == candidates  # seeded


@pytest.mark.parametrize(
    ("rewards", "kept"),
    [
        ([0.2, 0.6, 0.5], {0: 1}),  # the repair beats the answer
        ([0.6, 0.6, 0.5], {0: 0}),  # a tie: the policy's own answer
        ([0.1, 0.2, 0.29], {}),  # nothing under which every job runs
        ([math.nan, 0.4, math.nan], {0: 1}),
    ],
)
def test_the_best_candidate_per_prompt_that_reaches_the_bar(rewards, kept):
    candidates = [
        ExpertCandidate(0, 0, "a", False),
        ExpertCandidate(0, 0, "b", True),
        ExpertCandidate(0, 1, "c", False),
    ]
    best = best_candidates(candidates, rewards, min_reward=0.3)
    assert {prompt: candidates.index(c) for prompt, (c, _) in best.items()} == kept


def test_best_candidates_are_chosen_per_prompt():
    candidates = [ExpertCandidate(0, 0, "a", False), ExpertCandidate(1, 1, "b", False)]
    assert set(best_candidates(candidates, [0.5, 0.4], 0.3)) == {0, 1}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return ensure_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def trainer_on(tiny_dir, tmp_path, **options) -> ExpertIterationTrainer:
    config = {
        "output_dir": str(tmp_path),
        "use_cpu": True,
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 160,
        "max_steps": 1,
        "report_to": [],
        "save_strategy": "no",
        "seed": 0,
        "disable_tqdm": True,
        "learning_rate": 1e-3,
    }
    trainer_options = {"expert_iteration_every": 1, "expert_iteration_prompts": 2}
    for name in list(options):
        if not name.startswith(("expert_iteration_", "self_imitation_")):
            config[name] = options.pop(name)
    return ExpertIterationTrainer(
        model=str(tiny_dir),
        reward_funcs=fleet_reward,
        args=GRPOConfig(**config),
        train_dataset=Dataset.from_list(ROWS),
        processing_class=AutoTokenizer.from_pretrained(tiny_dir),
        **(trainer_options | options),
    )


@pytest.fixture
def crashing_answers(monkeypatch, tiny_dir):
    """Sampling answers CRASHING (and the EOS) to every prompt: what a round then keeps is the repairs'."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    calls = []

    def answer_crashing(model, tokenizer_, prompts, max_new_tokens, batch_size, temperature=0.0):
        calls.append({"prompts": len(prompts), "temperature": temperature, "batch_size": batch_size})
        return [tokenizer.encode(CRASHING, add_special_tokens=False) + [tokenizer.eos_token_id]] * len(
            prompts
        )

    monkeypatch.setattr(expert_iteration, "generate_ids", answer_crashing)
    return calls


def _nll(trainer, answers) -> float:
    with torch.no_grad():
        return float(trainer._answers_nll(trainer.model, answers))


def test_a_round_keeps_each_prompts_best_repair_and_trains_on_it(tiny_dir, tmp_path, crashing_answers):
    trainer = trainer_on(tiny_dir, tmp_path, expert_iteration_samples=3, expert_iteration_epochs=4,
                         expert_iteration_learning_rate=1e-3)  # fmt: skip
    figures = trainer.expert_round()
    assert crashing_answers == [{"prompts": 6, "temperature": trainer.temperature, "batch_size": 16}]
    assert figures["kept"] == figures["kept_repaired"] == 2.0  # both prompts, each by a repair
    crashing = [fleet_reward([CRASHING], [row["scenario"]])[0] for row in ROWS]
    assert max(crashing) < 0.25  # the sampled answers crash on every prompt: what they scored
    assert min(crashing) - 1e-6 <= figures["sampled_reward"] <= max(crashing) + 1e-6  # (float32 sums)
    assert figures["kept_reward"] >= 0.3 and figures["sft_loss"] > 0
    assert {name: len(values) for name, values in trainer._metrics["train"].items() if "expert/" in name} == {
        f"expert/{name}": 1 for name in figures
    }
    written = json.loads((tmp_path / ROUNDS_DIR / "step-0.json").read_text())
    assert written["kept"][0]["repaired"] and written["kept"][0]["reward"] >= 0.3
    rescored = fleet_reward([written["kept"][0]["answer"]], [ROWS[written["kept"][0]["prompt"]]["scenario"]])[
        0
    ]
    assert rescored == pytest.approx(written["kept"][0]["reward"], rel=1e-6)


def test_the_sft_pass_raises_the_kept_answers_likelihood(tiny_dir, tmp_path, crashing_answers):
    trainer = trainer_on(tiny_dir, tmp_path, expert_iteration_epochs=6, expert_iteration_learning_rate=3e-3)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    trainer.expert_round()
    kept = json.loads((tmp_path / ROUNDS_DIR / "step-0.json").read_text())["kept"]
    answers = []
    for entry in kept:  # each kept answer as its prompt's tokens and its own
        prompt = trainer._prompt_token_ids(tokenizer, [ROWS[entry["prompt"]]])[0]
        ids = tokenizer.encode(entry["answer"], add_special_tokens=False) + [tokenizer.eos_token_id]
        answers.append(StoredAnswer(prompt, ids, [1] * len(ids), entry["reward"], 0))
    untrained = trainer_on(tiny_dir, tmp_path / "untrained")
    assert _nll(trainer, answers) < 0.8 * _nll(untrained, answers)


def test_the_sft_batch_gradient_is_accumulated_one_answer_at_a_time(tiny_dir, tmp_path):
    trainer = trainer_on(tiny_dir, tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    prompt = trainer._prompt_token_ids(tokenizer, ROWS[:1])[0]
    # one prompt and answers of one length, with different tokens and loss masks: the batch needs no padding
    # (a left-padded batch shifts a shorter prompt's positions, which each answer on its own does not, and
    # any padding sends sdpa down its masked kernel, which rounds differently: ~0.4 % of the gradient here)
    crashing = tokenizer.encode(CRASHING, add_special_tokens=False)
    answers = [
        StoredAnswer(prompt, crashing[:40], [1] * 40, 0.5, 0),
        StoredAnswer(prompt, crashing[40:80], [1] * 3 + [0] * 35 + [1] * 2, 0.4, 0),
    ]
    parameters = [p for p in trainer.model.parameters() if p.requires_grad]

    trainer.model.zero_grad(set_to_none=True)
    batched = trainer._answers_nll(trainer.model, answers)
    batched.backward()
    expected = [p.grad.clone() for p in parameters]
    trainer.model.zero_grad(set_to_none=True)
    loss = trainer._batch_gradients(answers)
    assert loss == pytest.approx(float(batched), rel=1e-5)
    got = torch.cat([p.grad.flatten() for p in parameters])
    want = torch.cat([g.flatten() for g in expected])
    # each answer weighed by its share of the batch's loss tokens, not equally: the equal mean is farther off
    trainer.model.zero_grad(set_to_none=True)
    sum(trainer._answers_nll(trainer.model, [answer]) / len(answers) for answer in answers).backward()
    equal = torch.cat([p.grad.flatten() for p in parameters])
    assert float((got - want).norm() / want.norm()) < 0.01  # float rounding (the tiny random model: ~0.2 %)
    assert float((equal - want).norm() / want.norm()) > 0.03


def test_nothing_kept_trains_nothing(tiny_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(
        expert_iteration, "generate_ids", lambda model, tok, prompts, *a, **k: [[5, 6]] * len(prompts)
    )  # never ends: no candidate
    trainer = trainer_on(tiny_dir, tmp_path)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    figures = trainer.expert_round()
    assert figures["kept"] == 0 and math.isnan(figures["sft_loss"]) and math.isnan(figures["sampled_reward"])
    assert all(torch.equal(before[name], p) for name, p in trainer.model.named_parameters())


def test_a_round_releases_freed_memory_after_sampling_when_the_run_does(
    tiny_dir, tmp_path, crashing_answers, monkeypatch
):
    from fleet_rl.training.memory_release import ReleaseFreedMemory

    released = []
    monkeypatch.setattr(
        expert_iteration, "release_freed_memory", lambda: released.append(len(crashing_answers))
    )
    trainer = trainer_on(tiny_dir, tmp_path)
    trainer.expert_round()
    assert released == []  # a run without the callback (--release_freed_memory false) releases nothing
    trainer.add_callback(ReleaseFreedMemory())
    trainer.expert_round()
    assert released == [2]  # once, after the round's (second) sampling


def test_the_kept_answers_join_the_self_imitation_buffer(tiny_dir, tmp_path, crashing_answers):
    trainer = trainer_on(tiny_dir, tmp_path, self_imitation_coef=0.1)
    trainer.expert_round()
    assert len(trainer.imitation_buffer) == 2
    assert len(trainer_on(tiny_dir, tmp_path / "off").imitation_buffer) == 0


def test_a_sampled_round_is_seeded_and_leaves_the_trainers_rng_alone(tiny_dir, tmp_path):
    """Real sampling with the tiny model (its answers do not parse: nothing is kept): the same draws from
    the same seed and step, and torch's stream after the round is the one it would have been."""
    runs = []
    for name in ("a", "b"):
        trainer = trainer_on(tiny_dir, tmp_path / name, max_completion_length=12)
        torch.manual_seed(1)
        trainer.expert_round()
        runs.append(torch.rand(3))
    torch.manual_seed(1)
    assert torch.equal(runs[0], torch.rand(3)) and torch.equal(runs[0], runs[1])


def test_rounds_run_between_steps_and_a_resume_does_not_repeat_them(tiny_dir, tmp_path, crashing_answers):
    trainer = trainer_on(tiny_dir, tmp_path, max_steps=3, save_strategy="steps", save_steps=1,
                         expert_iteration_every=2, logging_steps=1)  # fmt: skip
    trainer.train()
    assert sorted(p.name for p in (tmp_path / ROUNDS_DIR).iterdir()) == ["step-2.json"]  # not after step 3
    logged = [entry["step"] for entry in trainer.state.log_history if "expert/kept" in entry]
    assert logged == [2]
    (tmp_path / ROUNDS_DIR / "step-2.json").unlink()
    resumed = trainer_on(tiny_dir, tmp_path, max_steps=5, expert_iteration_every=2)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))
    assert sorted(p.name for p in (tmp_path / ROUNDS_DIR).iterdir()) == ["step-4.json"]


def test_options_are_checked_before_a_model_loads():
    check_expert_iteration(
        FleetScriptArguments(expert_iteration_every=0, episode_mode="refine"),
        GRPOConfig("x", use_cpu=True, bf16=False),
    )
    for options, message in (
        ({"expert_iteration_every": -1}, "expert_iteration_every must be >= 0"),
        (
            {"expert_iteration_every": 2, "expert_iteration_prompts": 0},
            "expert_iteration_prompts must be >= 1",
        ),
        ({"expert_iteration_every": 2, "expert_iteration_repairs": -1}, "expert_iteration_repairs"),
        ({"expert_iteration_every": 2, "expert_iteration_learning_rate": 0.0}, "learning_rate must be > 0"),
        ({"expert_iteration_every": 2, "episode_mode": "revise"}, "episode_mode 'single'"),
    ):
        with pytest.raises(ValueError, match=message):
            check_expert_iteration(FleetScriptArguments(**options), GRPOConfig("x", use_cpu=True, bf16=False))


def test_the_script_picks_the_trainer_with_every_option():
    import train_grpo

    trainer_class, extensions = train_grpo.trainer_extensions(
        FleetScriptArguments(expert_iteration_every=5, expert_iteration_samples=3, self_imitation_coef=0.1)
    )
    assert trainer_class is ExpertIterationTrainer
    assert extensions["expert_iteration_every"] == 5 and extensions["expert_iteration_samples"] == 3
    assert extensions["self_imitation_coef"] == 0.1
    assert train_grpo.trainer_extensions(FleetScriptArguments())[0] is not ExpertIterationTrainer
