"""Exploration by edits: a share of the training answers get one random edit before they are scored."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from fleet_rl.scenario import Scenario
from fleet_rl.training.edit_exploration import EditExplorationTrainer
from fleet_rl.training.plan_repairs import repair_answer
from fleet_rl.training.shared_prompt import SharedPromptTrainer
from rewards import fleet_reward
from rewards.parsing import parse_plan
from tests.training.two_jobs import SCENARIO, TEMPLATE_PLAN

EOS = 3  # a character-level tokenizer: token i is chr(i); 3 is the end of an answer
SCENARIO_JSON = SCENARIO.to_json()
TEMPLATE = TEMPLATE_PLAN
CHAT_ALONE = Scenario.from_dict(json.loads(SCENARIO_JSON) | {"jobs": json.loads(SCENARIO_JSON)["jobs"][:1]})


class _Characters:
    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if not (skip_special_tokens and i == EOS))

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]


def _bare_trainer(
    rate: float,
    seed: int = 0,
    step: int = 4,
    repair: float = 0.0,
    place_omitted: bool = False,
    draws: int = 1,
) -> EditExplorationTrainer:
    """An EditExplorationTrainer without a model (its parents' generation and scoring are patched)."""
    trainer = object.__new__(EditExplorationTrainer)
    trainer.explore_edit_rate, trainer.explore_repair_rate, trainer.turn_credit = rate, repair, False
    trainer.explore_repair_place_omitted = place_omitted
    trainer.explore_repair_too_slow, trainer.explore_repair_draws = False, draws
    trainer._edit_inputs, trainer._edited_rows, trainer._repaired_rows, trainer._draw = None, [], [], (-1, 0)
    trainer.model = SimpleNamespace(training=True)
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    trainer.processing_class = _Characters()
    trainer.accelerator = SimpleNamespace(num_processes=1, process_index=0)
    trainer.args = SimpleNamespace(seed=seed)
    trainer.state = SimpleNamespace(global_step=step)
    trainer.eos_token_ids, trainer.max_completion_length = [EOS], 1024
    return trainer


ROWS = 16
SAMPLED = [[ord(c) for c in TEMPLATE] + [EOS]] * (ROWS - 2) + [
    [ord(c) for c in TEMPLATE],  # cut off by the length budget: no EOS, never edited
    [ord(c) for c in "no plan here"] + [EOS],
]


@pytest.fixture
def parents(monkeypatch):
    """TRL's ``_generate`` returns ``SAMPLED``; its scoring returns the (edited) ids and advantage 1 on the
    edited rows (whatever they are), 0 elsewhere, so the trainer's own bookkeeping shows."""

    def generate(self, prompts):
        ids = [list(row) for row in SAMPLED]
        completions = [[{"role": "assistant", "content": _Characters().decode(row)}] for row in ids]
        return [[1]] * len(ids), ids, None, completions, None, {}, None, []

    def generate_and_score(self, inputs):
        _, ids, _, completions, *_ = self._generate([row["prompt"] for row in inputs])
        advantages = torch.tensor([float(row in self._edited_rows) for row in range(len(ids))])
        return {"ids": ids, "completions": completions, "advantages": advantages}

    monkeypatch.setattr(SharedPromptTrainer, "_generate", generate, raising=False)
    monkeypatch.setattr(SharedPromptTrainer, "_generate_and_score_completions", generate_and_score)


def _inputs(agent: str = "", scenario: str = SCENARIO_JSON) -> list[dict]:
    return [{"prompt": "p", "scenario": scenario, "agent": agent}] * ROWS


def test_a_share_of_the_answers_is_edited_and_each_edit_is_a_plan_of_its_own_text(parents):
    trainer = _bare_trainer(0.5)
    output = trainer._generate_and_score_completions(_inputs())
    edited = trainer._edited_rows
    assert 0 < len(edited) < ROWS - 2 and max(edited) < ROWS - 2  # neither the cut-off nor the plan-less row
    for row, ids in enumerate(output["ids"]):
        text = output["completions"][row][0]["content"]
        assert _Characters().decode(ids) == text  # ids and text agree, edited or not
        if row in edited:
            assert ids[-1] == EOS and text != TEMPLATE and parse_plan(text).plan is not None
        else:
            assert ids == SAMPLED[row]
    metrics = trainer._metrics["train"]
    assert metrics["edits/share"] == [len(edited) / ROWS]
    assert metrics["edits/advantage"] == [1.0]  # the mean advantage of the edited rows


def test_the_draw_follows_the_seed_and_the_step(parents):
    def edited(seed: int, step: int) -> tuple[list[int], list]:
        trainer = _bare_trainer(0.5, seed=seed, step=step)
        output = trainer._generate_and_score_completions(_inputs())
        return trainer._edited_rows, output["ids"]

    assert edited(0, 4) == edited(0, 4)  # a resumed run draws what the first one drew at that step
    assert edited(0, 4) != edited(0, 5) and edited(0, 4) != edited(1, 4)


def test_off_in_evaluation_on_multi_agent_rows_and_at_rate_zero(parents):
    for trainer, inputs in (
        (_bare_trainer(0.0), _inputs()),
        (_bare_trainer(0.9), _inputs(agent="chat")),  # a one-job request: nothing to add or move
    ):
        output = trainer._generate_and_score_completions(inputs)
        assert output["ids"] == SAMPLED and not trainer._edited_rows
    evaluating = _bare_trainer(0.9)
    evaluating.model.training = False
    assert evaluating._generate_and_score_completions(_inputs())["ids"] == SAMPLED
    assert "edits/share" not in evaluating._metrics["train"]


def test_an_edit_over_the_length_budget_is_dropped(parents):
    trainer = _bare_trainer(0.9)
    trainer.max_completion_length = len(SAMPLED[0])  # every edit of the template is longer or equal
    output = trainer._generate_and_score_completions(_inputs())
    for row in trainer._edited_rows:
        assert len(output["ids"][row]) <= len(SAMPLED[0])


def test_a_repaired_share_gets_a_fits_setting_and_its_own_metrics(parents):
    trainer = _bare_trainer(0.0, repair=0.5)
    output = trainer._generate_and_score_completions(_inputs())
    repaired = trainer._repaired_rows
    assert 0 < len(repaired) < ROWS - 2 and max(repaired) < ROWS - 2 and trainer._edited_rows == repaired
    for row in repaired:
        (chat,) = parse_plan(output["completions"][row][0]["content"]).plan.jobs
        assert (chat.tensor_parallel, chat.precision.attention) in {(2, "bf16"), (1, "fp8"), (1, "int4")}
    metrics = trainer._metrics["train"]
    assert metrics["repairs/share"] == [len(repaired) / ROWS] and metrics["repairs/advantage"] == [1.0]
    assert "edits/share" not in metrics  # edits are off


def test_repairs_that_place_omitted_jobs_name_every_job(parents):
    """The template names chat alone; repairs with place_omitted also give tune one replica at a Fits
    setting, on the same rows the draw picks without it (the option changes the repair, not the draw)."""
    plain = _bare_trainer(0.0, repair=0.5)
    plain._generate_and_score_completions(_inputs())
    placing = _bare_trainer(0.0, repair=0.5, place_omitted=True)
    output = placing._generate_and_score_completions(_inputs())
    assert placing._repaired_rows and placing._repaired_rows == plain._repaired_rows
    for row in placing._repaired_rows:
        plan = parse_plan(output["completions"][row][0]["content"]).plan
        assert {job.id for job in plan.jobs} == {"chat", "tune"}
        assert sum(job.gpus for job in plan.jobs) <= SCENARIO.cluster.count
        assert _Characters().decode(output["ids"][row]) == output["completions"][row][0]["content"]


def test_the_best_of_several_repairs_by_fleet_reward_is_the_one_trained_on(parents):
    """Chat alone: the template crashes and its three Fits settings score differently. With 12 draws a
    repaired row is the best of them by fleet_reward on every row, on the rows one draw repairs."""
    scenario = CHAT_ALONE.to_json()
    by_setting = {}
    for seed in range(30):
        text, _ = repair_answer(TEMPLATE, scenario, random.Random(seed))
        (chat,) = parse_plan(text).plan.jobs
        by_setting[(chat.tensor_parallel, chat.precision.attention)] = fleet_reward([text], [scenario])[0]
    assert len(by_setting) == 3 and len(set(by_setting.values())) == 3
    one = _bare_trainer(0.0, repair=0.5)
    one._generate_and_score_completions(_inputs(scenario=scenario))
    best = _bare_trainer(0.0, repair=0.5, draws=12)
    output = best._generate_and_score_completions(_inputs(scenario=scenario))
    assert best._repaired_rows and best._repaired_rows == one._repaired_rows
    for row in best._repaired_rows:
        (chat,) = parse_plan(output["completions"][row][0]["content"]).plan.jobs
        assert by_setting[(chat.tensor_parallel, chat.precision.attention)] == max(by_setting.values())


def test_repairs_and_edits_share_one_draw_per_row(parents):
    both = _bare_trainer(0.45, repair=0.45)
    both._generate_and_score_completions(_inputs())
    repaired = set(both._repaired_rows)
    edited = set(both._edited_rows) - repaired
    assert repaired and edited and len(both._edited_rows) == len(set(both._edited_rows))
    metrics = both._metrics["train"]
    assert metrics["edits/share"] == [len(edited) / ROWS] and metrics["repairs/share"] == [
        len(repaired) / ROWS
    ]
    edits_only = _bare_trainer(0.45)  # repairs off: each row's draw is the one it had before repairs existed
    edits_only._generate_and_score_completions(_inputs())
    assert edits_only._repaired_rows == [] and edits_only._edited_rows
