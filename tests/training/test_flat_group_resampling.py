"""Fresh prompts when a step's every group is flat: a real GRPOTrainer on the tiny Llama, a reward that pays
every answer to a "flat" prompt alike and answers to a "signal" prompt differently."""

from __future__ import annotations

import math

import pytest
import torch
from datasets import Dataset
from transformers import AutoTokenizer
from trl import GRPOConfig

from fleet_rl.tiny_model import ensure_tiny_model
from fleet_rl.training.flat_group_resampling import (
    RESAMPLED_KEY,
    FlatGroupResamplingTrainer,
    every_group_flat,
)

GROUP = 4


def by_prompt(prompts, completions, **kwargs) -> list[float]:
    """0.5 for every answer to a "flat" prompt; 0.0, 0.1, 0.2, ... down a "signal" prompt's group."""
    return [0.5 if prompt.startswith("flat") else 0.1 * (i % GROUP) for i, prompt in enumerate(prompts)]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return ensure_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def trainer_on(tiny_dir, tmp_path, prompts: list[str], resample: int) -> FlatGroupResamplingTrainer:
    config = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        per_device_train_batch_size=GROUP,
        num_generations=GROUP,
        max_completion_length=4,
        max_steps=1,
        report_to=[],
        save_strategy="no",
        seed=0,
        disable_tqdm=True,
    )
    return FlatGroupResamplingTrainer(
        model=str(tiny_dir),
        reward_funcs=by_prompt,
        args=config,
        train_dataset=Dataset.from_list([{"prompt": text} for text in prompts]),
        processing_class=AutoTokenizer.from_pretrained(tiny_dir),
        resample_flat_groups=resample,
    )


def generate(trainer, prompt: str) -> dict:
    trainer.model.train()
    return trainer._generate_and_score_completions([{"prompt": prompt} for _ in range(GROUP)])


def test_a_flat_step_is_drawn_again_and_logs_only_the_batch_it_trains_on(tiny_dir, tmp_path):
    trainer = trainer_on(tiny_dir, tmp_path, ["signal a", "signal b"], resample=3)
    output = generate(trainer, "flat 0")
    metrics = trainer._metrics["train"]
    assert metrics[RESAMPLED_KEY] == [1.0]  # one flat draw dropped, the fresh prompt had signal
    assert len(metrics["reward"]) == 1 and metrics["frac_reward_zero_std"] == [0.0]
    assert set(trainer._logs["prompt"]) <= {"signal a", "signal b"}  # the completions table: the kept draw
    assert torch.count_nonzero(output["advantages"]) > 0


def test_the_last_draw_is_trained_on_when_every_draw_is_flat(tiny_dir, tmp_path):
    trainer = trainer_on(tiny_dir, tmp_path, ["flat a", "flat b"], resample=2)
    output = generate(trainer, "flat 0")
    assert trainer._metrics["train"][RESAMPLED_KEY] == [2.0]
    assert trainer._metrics["train"]["frac_reward_zero_std"] == [1.0]
    assert torch.count_nonzero(output["advantages"]) == 0


def test_a_step_with_signal_is_kept_and_zero_is_plain_grpo(tiny_dir, tmp_path):
    trainer = trainer_on(tiny_dir, tmp_path, ["flat a"], resample=2)
    generate(trainer, "signal 0")
    assert trainer._metrics["train"][RESAMPLED_KEY] == [0.0]
    plain = trainer_on(tiny_dir, tmp_path, ["signal a"], resample=0)
    generate(plain, "flat 0")
    assert RESAMPLED_KEY not in plain._metrics["train"]
    assert plain._metrics["train"]["frac_reward_zero_std"] == [1.0]


def test_fresh_prompts_are_whole_groups_and_the_same_after_a_resume(tiny_dir, tmp_path):
    trainer = trainer_on(tiny_dir, tmp_path, [f"signal {i}" for i in range(50)], resample=1)
    batch = trainer._fresh_prompts(2 * GROUP, draw=0)
    assert [row["prompt"] for row in batch[:GROUP]] == [batch[0]["prompt"]] * GROUP
    assert [row["prompt"] for row in batch[GROUP:]] == [batch[GROUP]["prompt"]] * GROUP
    again = trainer_on(tiny_dir, tmp_path, [f"signal {i}" for i in range(50)], resample=1)
    assert again._fresh_prompts(2 * GROUP, draw=0) == batch  # seeded by (seed, global step, draw)
    assert trainer._fresh_prompts(2 * GROUP, draw=1) != batch


@pytest.mark.parametrize(
    ("rewards", "flat"),
    [
        ([0.3, 0.3, 0.305, 0.3], True),  # spans 0.005: noise
        ([0.3, 0.3, 0.32, 0.3], False),
        ([math.nan, 0.3, 0.3, 0.3], True),  # an unscored answer is left out
        ([math.nan] * 4, True),
        ([0.3] * 4 + [0.0, 0.0, 0.0, 0.9], False),  # one group with signal is enough
    ],
)
def test_every_group_flat(rewards, flat):
    assert every_group_flat(torch.tensor(rewards), GROUP) is flat
