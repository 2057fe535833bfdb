"""Repairs from the kernel's verdict: a share of the training answers get their failing jobs rewritten to a
``Fits`` setting before they are scored (``FleetGRPOTrainer`` with ``explore_repair_rate``)."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch
from trl import GRPOTrainer

from fleet_rl.training.trainer import FleetGRPOTrainer
from rewards.parsing import parse_plan
from tests.training.two_jobs import SCENARIO, TEMPLATE_PLAN

EOS = 3  # a character-level tokenizer: token i is chr(i); 3 is the end of an answer
SCENARIO_JSON = SCENARIO.to_json()
TEMPLATE = TEMPLATE_PLAN


class _Characters:
    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if not (skip_special_tokens and i == EOS))

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]


def _bare_trainer(repair: float, seed: int = 0, step: int = 4) -> FleetGRPOTrainer:
    """A FleetGRPOTrainer without a model (TRL's generation and scoring are patched), repairs on alone."""
    trainer = object.__new__(FleetGRPOTrainer)
    trainer.explore_repair_rate, trainer.job_credit, trainer.self_imitation_coef = repair, 0.0, 0.0
    trainer._repair_inputs, trainer._repaired_rows, trainer._draw = None, [], (-1, 0)
    trainer.model = SimpleNamespace(training=True)
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    trainer._tokenizer = _Characters()
    trainer.accelerator = SimpleNamespace(num_processes=1, process_index=0)
    trainer.args = SimpleNamespace(seed=seed)
    trainer.state = SimpleNamespace(global_step=step)
    trainer.eos_token_ids, trainer.max_completion_length = [EOS], 1024
    return trainer


ROWS = 16
SAMPLED = [[ord(c) for c in TEMPLATE] + [EOS]] * (ROWS - 2) + [
    [ord(c) for c in TEMPLATE],  # cut off by the length budget: no EOS, never repaired
    [ord(c) for c in "no plan here"] + [EOS],
]


@pytest.fixture
def parents(monkeypatch):
    """TRL's ``_generate`` returns ``SAMPLED``; its scoring returns the (repaired) ids and advantage 1 on the
    repaired rows (whatever they are), 0 elsewhere, so the trainer's own bookkeeping shows."""

    def generate(self, prompts):
        ids = [list(row) for row in SAMPLED]
        completions = [[{"role": "assistant", "content": _Characters().decode(row)}] for row in ids]
        return [[1]] * len(ids), ids, None, completions, None, {}, None, []

    def generate_and_score(self, inputs):
        _, ids, _, completions, *_ = self._generate([row["prompt"] for row in inputs])
        advantages = torch.tensor([float(row in self._repaired_rows) for row in range(len(ids))])
        return {"ids": ids, "completions": completions, "advantages": advantages}

    monkeypatch.setattr(GRPOTrainer, "_generate", generate, raising=False)
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", generate_and_score)


def _inputs(agent: str = "", scenario: str = SCENARIO_JSON) -> list[dict]:
    return [{"prompt": "p", "scenario": scenario, "agent": agent}] * ROWS


def test_a_repaired_share_gets_a_fits_setting_and_its_own_metrics(parents):
    trainer = _bare_trainer(0.5)
    output = trainer._generate_and_score_completions(_inputs())
    repaired = trainer._repaired_rows
    assert 0 < len(repaired) < ROWS - 2 and max(repaired) < ROWS - 2  # neither the cut-off nor plan-less row
    for row, ids in enumerate(output["ids"]):
        text = output["completions"][row][0]["content"]
        assert _Characters().decode(ids) == text  # ids and text agree, repaired or not
        if row in repaired:
            (chat,) = parse_plan(text).plan.jobs
            assert (chat.tensor_parallel, chat.precision.attention) in {(2, "bf16"), (1, "fp8"), (1, "int4")}
            assert ids[-1] == EOS
        else:
            assert ids == SAMPLED[row]
    metrics = trainer._metrics["train"]
    assert metrics["repairs/share"] == [len(repaired) / ROWS] and metrics["repairs/advantage"] == [1.0]


def test_the_draw_follows_the_seed_and_the_step(parents):
    def repaired(seed: int, step: int) -> tuple[list[int], list]:
        trainer = _bare_trainer(0.5, seed=seed, step=step)
        output = trainer._generate_and_score_completions(_inputs())
        return trainer._repaired_rows, output["ids"]

    assert repaired(0, 4) == repaired(0, 4)  # a resumed run draws what the first one drew at that step
    assert repaired(0, 4) != repaired(0, 5) and repaired(0, 4) != repaired(1, 4)


def test_off_in_evaluation_on_multi_agent_rows_and_at_rate_zero(parents):
    for trainer, inputs in (
        (_bare_trainer(0.0), _inputs()),
        (_bare_trainer(0.9), _inputs(agent="chat")),  # a one-job request: left alone
    ):
        output = trainer._generate_and_score_completions(inputs)
        assert output["ids"] == SAMPLED and not trainer._repaired_rows
    evaluating = _bare_trainer(0.9)
    evaluating.model.training = False
    assert evaluating._generate_and_score_completions(_inputs())["ids"] == SAMPLED
    assert "repairs/share" not in evaluating._metrics["train"]


def test_a_repair_over_the_length_budget_is_dropped(parents):
    trainer = _bare_trainer(0.9)
    trainer.max_completion_length = len(SAMPLED[0])  # every repair of the template is longer or equal
    output = trainer._generate_and_score_completions(_inputs())
    for row in trainer._repaired_rows:
        assert len(output["ids"][row]) <= len(SAMPLED[0])
