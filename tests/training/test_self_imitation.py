"""Self-imitation: the buffer's rules, which answers are kept, the loss it adds and its checkpoints, on a real
FleetGRPOTrainer with the tiny Llama and a reward that ranks the answers of a group by their position."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch
from datasets import Dataset
from transformers import AutoTokenizer
from trl import GRPOConfig

from fleet_rl.tiny_model import ensure_tiny_model
from fleet_rl.training.self_imitation import (
    BUFFER_FILE,
    ImitationBuffer,
    StoredAnswer,
    _answers_nll,
    best_of_groups,
    imitation_nll,
    stored_answers,
)
from fleet_rl.training.trainer import FleetGRPOTrainer

GROUP = 4


def answer(prompt: list[int], reward: float, step: int = 0) -> StoredAnswer:
    return StoredAnswer(prompt_ids=prompt, completion_ids=[7, 8], loss_mask=[1, 1], reward=reward, step=step)


def test_one_answer_per_prompt_the_better_one():
    buffer = ImitationBuffer(capacity=4)
    assert buffer.offer(answer([1], 0.4))
    assert not buffer.offer(answer([1], 0.4))  # not better: kept as it was
    assert not buffer.offer(answer([1], 0.35))
    assert buffer.offer(answer([1], 0.6))
    assert [a.reward for a in buffer.answers()] == [0.6]


def test_a_full_buffer_drops_its_lowest_reward_and_refuses_worse():
    buffer = ImitationBuffer(capacity=2)
    buffer.offer(answer([1], 0.5, step=1))
    buffer.offer(answer([2], 0.4, step=2))
    assert not buffer.offer(answer([3], 0.3))
    assert buffer.offer(answer([3], 0.45))
    assert sorted(a.prompt_ids[0] for a in buffer.answers()) == [1, 3]
    with pytest.raises(ValueError, match="self_imitation_buffer_size"):
        ImitationBuffer(capacity=0)


def test_the_buffer_saves_whole_and_loads_in_order(tmp_path):
    buffer = ImitationBuffer(capacity=8)
    for prompt, reward in ([3], 0.9), ([1], 0.5), ([2], 0.7):
        buffer.offer(answer(prompt, reward))
    path = tmp_path / "buffer.json"
    buffer.save(path)
    assert not list(tmp_path.glob("*.tmp"))
    again = ImitationBuffer(capacity=8)
    again.load(path)
    assert again.answers() == buffer.answers()
    assert again.draw(2, random.Random(0)) == buffer.draw(2, random.Random(0))


@pytest.mark.parametrize(
    ("rewards", "kept"),
    [
        ([0.0, 0.1, 0.2, 0.5], [3]),  # the best, above the bar and the mean
        ([0.0, 0.1, 0.2, 0.25], []),  # best under min_reward (0.3): no plan that runs
        ([0.6, 0.6, 0.6, 0.605], []),  # every answer alike: the template, not a find
        ([math.nan, 0.1, 0.9, 0.1], [2]),  # an unscored answer is left out
        ([math.nan] * 4, []),
        ([0.9, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4], [0, 7]),  # per group
    ],
)
def test_best_of_groups(rewards, kept):
    assert best_of_groups(torch.tensor(rewards), GROUP, min_reward=0.3) == kept


def by_position(prompts, completions, **kwargs) -> list[float]:
    """0.0, 0.1, 0.2, 0.6 down each group: the group's last answer is the find."""
    return [(0.0, 0.1, 0.2, 0.6)[i % GROUP] for i in range(len(prompts))]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return ensure_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def trainer_on(tiny_dir, tmp_path, coef: float, **config) -> FleetGRPOTrainer:
    settings = {
        "output_dir": str(tmp_path),
        "use_cpu": True,
        "per_device_train_batch_size": GROUP,
        "num_generations": GROUP,
        "max_completion_length": 6,
        "max_steps": 1,
        "report_to": [],
        "save_strategy": "no",
        "seed": 0,
        "disable_tqdm": True,
        "learning_rate": 1e-2,
    } | config
    return FleetGRPOTrainer(
        model=str(tiny_dir),
        reward_funcs=by_position,
        args=GRPOConfig(**settings),
        train_dataset=Dataset.from_list([{"prompt": f"prompt {i}"} for i in range(8)]),
        processing_class=AutoTokenizer.from_pretrained(tiny_dir),
        self_imitation_coef=coef,
        self_imitation_batch_size=2,
    )


def test_a_groups_best_answer_is_stored_with_its_own_tokens(tiny_dir, tmp_path):
    trainer = trainer_on(tiny_dir, tmp_path, coef=0.5)
    trainer.model.train()
    output = trainer._generate_and_score_completions([{"prompt": "prompt 0"} for _ in range(GROUP)])
    (stored,) = trainer.imitation_buffer.answers()
    assert stored.reward == pytest.approx(0.6)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    assert stored.prompt_ids == tokenizer("prompt 0")["input_ids"]
    mask = output["completion_mask"][GROUP - 1]
    assert stored.completion_ids == output["completion_ids"][GROUP - 1][: int(mask.sum())].tolist()
    assert stored.loss_mask == [1] * len(stored.completion_ids)
    assert trainer._metrics["train"]["self_imitation/stored"] == [1.0]
    assert trainer._metrics["train"]["self_imitation/buffer_size"] == [1.0]


def test_a_stored_answer_keeps_tool_results_out_of_its_loss():
    """``tool_mask`` zeros (a tool's answer inside a refine episode) stay out of a stored answer's loss,
    which runs through its last own token; only this process's rows are offered."""
    ones = torch.ones(GROUP, 5, dtype=torch.long)
    output = {
        "prompt_ids": ones.clone(),
        "prompt_mask": ones.clone(),
        "completion_ids": torch.arange(5).repeat(GROUP, 1),
        "completion_mask": ones.clone(),
        "tool_mask": torch.tensor([[1, 0, 0, 1, 0]] * GROUP),
    }
    rewards = torch.tensor([0.0, 0.1, 0.2, 0.6])
    (stored,) = stored_answers(output, rewards, group_size=GROUP, min_reward=0.3, first_row=0, step=2)
    assert stored.loss_mask == [1, 0, 0, 1] and stored.completion_ids == [0, 1, 2, 3] and stored.step == 2
    assert stored_answers(output, rewards, group_size=GROUP, min_reward=0.3, first_row=GROUP, step=2) == []


def _replay_nll(trainer, model) -> torch.Tensor:
    """The NLL the trainer adds to a step's loss: its draw of the buffer, as ``_compute_loss`` draws it."""
    rng = random.Random(f"{trainer.args.seed}-{trainer.state.global_step}-0")
    answers = trainer.imitation_buffer.draw(trainer.self_imitation_batch_size, rng)
    return imitation_nll(trainer, model, answers)


def test_off_stores_nothing_and_adds_nothing(tiny_dir, tmp_path):
    trainer = trainer_on(tiny_dir, tmp_path, coef=0.0)
    trainer.model.train()
    trainer._generate_and_score_completions([{"prompt": "prompt 0"} for _ in range(GROUP)])
    assert len(trainer.imitation_buffer) == 0
    assert not any(name.startswith("self_imitation/") for name in trainer._metrics["train"])


def test_the_loss_adds_coef_times_the_stored_answers_nll(tiny_dir, tmp_path):
    trainer = trainer_on(tiny_dir, tmp_path, coef=0.5)
    trainer.model.train()
    inputs = trainer._generate_and_score_completions([{"prompt": "prompt 0"} for _ in range(GROUP)])
    trainer.current_gradient_accumulation_steps = 1
    with torch.no_grad():
        with_imitation = trainer._compute_loss(trainer.model, inputs)
        nll = _replay_nll(trainer, trainer.model)
        trainer.self_imitation_coef = 0.0
        without = trainer._compute_loss(trainer.model, inputs)
    assert nll > 0
    assert float(with_imitation) == pytest.approx(float(without + 0.5 * nll), rel=1e-5)
    assert trainer._metrics["train"]["self_imitation/nll"] == [pytest.approx(float(nll), rel=1e-5)]


def test_training_raises_the_stored_answers_likelihood_and_checkpoints_the_buffer(tiny_dir, tmp_path):
    trainer = trainer_on(tiny_dir, tmp_path, coef=1.0, max_steps=3, save_strategy="steps", save_steps=3)
    trainer.train()
    assert len(trainer.imitation_buffer) >= 1
    nll = trainer._metrics["train"].get("self_imitation/nll") or [
        entry["self_imitation/nll"] for entry in trainer.state.log_history if "self_imitation/nll" in entry
    ]
    assert nll, "no step replayed a stored answer"
    saved = json.loads((tmp_path / "checkpoint-3" / f"{BUFFER_FILE}.json").read_text())
    assert [a["prompt_ids"] for a in saved["answers"]] == [
        a.prompt_ids for a in trainer.imitation_buffer.answers()
    ]

    resumed = trainer_on(tiny_dir, tmp_path / "resumed", coef=1.0, max_steps=4)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-3"))
    assert resumed.state.global_step == 4
    held = resumed.imitation_buffer.answers()
    assert all(stored in held for stored in trainer.imitation_buffer.answers())  # kept across the resume

    model = trainer.model
    answers = trainer.imitation_buffer.answers()
    before = _mean_nll(trainer, model, answers)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
    for _ in range(3):
        optimizer.zero_grad()
        _replay_nll(trainer, model).backward()
        optimizer.step()
    assert _mean_nll(trainer, model, answers) < before


def _mean_nll(trainer, model, answers) -> float:
    trainer.self_imitation_batch_size = len(answers)
    with torch.no_grad():
        return float(_replay_nll(trainer, model))


def test_the_replayed_answers_gradient_is_the_batchs_one_answer_at_a_time(tiny_dir, tmp_path):
    """Each replayed answer's forward and backward pass run alone (precomputed_gradient), and whatever the
    trainer multiplies the loss by still reaches the gradient: the padded batch's, up to rounding."""
    trainer = trainer_on(tiny_dir, tmp_path, coef=0.5)
    prompt = list(range(5, 17))
    # one prompt and answers of one length: the batch needs no padding
    trainer.imitation_buffer.offer(StoredAnswer(prompt, list(range(20, 60)), [1] * 40, 0.5, 0))
    second = StoredAnswer(prompt[::-1], list(range(60, 100)), [1] * 3 + [0] * 37, 0.4, 0)
    trainer.imitation_buffer.offer(second)
    answers = trainer.imitation_buffer.answers()
    parameters = [p for p in trainer.model.parameters() if p.requires_grad]

    trainer.model.zero_grad(set_to_none=True)
    batched = _answers_nll(trainer, trainer.model, answers)
    (4.0 * batched).backward()
    want = torch.cat([p.grad.flatten() for p in parameters])
    trainer.model.zero_grad(set_to_none=True)
    one_at_a_time = _replay_nll(trainer, trainer.model)
    assert type(one_at_a_time.grad_fn).__name__ == "_PrecomputedGradientBackward"
    assert all(p.grad is None for p in parameters)  # nothing lands before the trainer's backward pass
    (4.0 * one_at_a_time).backward()
    got = torch.cat([p.grad.flatten() for p in parameters])
    assert float(one_at_a_time.detach()) == pytest.approx(float(batched.detach()), rel=1e-4)
    assert float((got - want).norm() / want.norm()) < 0.01
    # reentrant checkpointing refuses torch.autograd.grad: the draw is one batch for the trainer's backward
    trainer.args.gradient_checkpointing_kwargs = {"use_reentrant": True}
    assert type(_replay_nll(trainer, trainer.model).grad_fn).__name__ != "_PrecomputedGradientBackward"
