"""Per-job credit: each job's tokens get the plan's advantage plus w × (its credit − the group's mean)."""

from __future__ import annotations

import json
from collections import defaultdict
from types import SimpleNamespace

import msgspec
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fleet_rl import make_scenario
from fleet_rl.baselines import even_bf16, optimal
from fleet_rl.training.job_credit import (
    JobCreditTrainer,
    group_job_means,
    job_advantages,
    job_of_tokens,
    job_spans,
    token_char_ends,
)
from fleet_rl.training.shared_prompt import SharedPromptTrainer
from rewards.job_credits import job_credits


def test_each_job_span_is_its_own_object_amid_prose_and_nesting():
    text = (
        'Plan: ```json\n{"jobs": [{"id": "a", "precision": {"mlp": "fp8"}}, {"gpus": 2, "id": "b {x}"}]}\n```'
    )
    spans = job_spans(text, ["a", "b {x}", "missing"])
    assert text[slice(*spans["a"])] == '{"id": "a", "precision": {"mlp": "fp8"}}'
    assert text[slice(*spans["b {x}"])] == '{"gpus": 2, "id": "b {x}"}'  # braces in strings do not count
    assert "missing" not in spans
    assert job_spans('"id": "a" {', ["a"]) == {}  # not inside an object


@given(st.text(max_size=200), st.lists(st.text(max_size=8), max_size=3))
def test_spans_never_raise_and_lie_in_the_text(text, ids):
    for start, end in job_spans(text, ids).values():
        assert 0 <= start < end <= len(text) and text[start] == "{" and text[end - 1] == "}"


def _decode(ids) -> str:  # a character-level tokenizer: token i is chr(i)
    return "".join(map(chr, ids))


def test_tokens_map_to_the_job_whose_span_holds_their_last_character():
    assert token_char_ends(_decode, [ord(c) for c in "abc"]) == [1, 2, 3]
    assert token_char_ends(lambda ids: "é"[: len(ids) - 1], [1, 2]) == [0, 1]  # a split character waits
    ends = [2, 5, 5, 9]  # tokens "ab", "c{d", "" and "e}f{"
    assert job_of_tokens(ends, {"j": (2, 7)}) == [None, "j", None, None]


def test_job_advantages_add_each_jobs_own_term_on_its_tokens():
    credits = [{"a": 1.0, "b": 0.4}, {"a": 0.5, "b": 1.0}, None]
    means = group_job_means([*credits, None], group_size=4)[:3]
    assert means[0] == {"a": 0.75, "b": 0.7}
    token_jobs = [["a", "a", "b", None], ["b", "a", None, None], []]
    advantages = job_advantages(torch.tensor([0.1, -0.1, 0.0]), credits, token_jobs, means, 0.5, 4)
    expected = torch.tensor(
        [[0.1 + 0.125, 0.1 + 0.125, 0.1 - 0.15, 0.1], [-0.1 + 0.15, -0.1 - 0.125, -0.1, -0.1], [0.0] * 4]
    )
    assert torch.allclose(advantages, expected)


def test_a_job_only_one_answer_credits_has_no_mean_and_groups_stay_apart():
    means = group_job_means([{"a": 1.0}, None, {"a": 0.2}, {"a": 0.4}], group_size=2)
    assert means == [{}, {}, {"a": pytest.approx(0.3)}, {"a": pytest.approx(0.3)}]
    with pytest.raises(ValueError, match="3 rows do not split into groups of 2"):
        group_job_means([None] * 3, 2)
    with pytest.raises(ValueError, match="2 plan advantages, 1 credit rows"):
        job_advantages(torch.zeros(2), [None], [[]], [{}], 1.0, 1)


SCENARIO = make_scenario("medium", 5)
SCENARIO_JSON = msgspec.json.encode(SCENARIO).decode()
ANSWERS = [
    json.dumps(optimal(SCENARIO)),
    json.dumps(even_bf16(SCENARIO)),
    "no plan",
    json.dumps(optimal(SCENARIO)),
]


def _bare_trainer(job_credit: float) -> JobCreditTrainer:
    """A JobCreditTrainer without a model, on a character-level tokenizer (its parent's step is patched)."""
    trainer = object.__new__(JobCreditTrainer)
    trainer.job_credit, trainer.turn_credit, trainer.explore_edit_rate = job_credit, False, 0.0
    trainer.sample_every_job = False
    trainer.num_generations = trainer.num_generations_eval = 4
    trainer.model = SimpleNamespace(training=True)
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    trainer.processing_class = SimpleNamespace(decode=lambda ids, skip_special_tokens: _decode(ids))
    trainer.accelerator = SimpleNamespace(num_processes=1, process_index=0)
    return trainer


@pytest.fixture
def parent_output(monkeypatch):
    """TRL's step output for ``ANSWERS``: character ids, padded with 0 and masked, plan advantages (B,)."""
    length = max(map(len, ANSWERS)) + 3
    ids = torch.zeros(len(ANSWERS), length, dtype=torch.long)
    mask = torch.zeros(len(ANSWERS), length, dtype=torch.long)
    for row, answer in enumerate(ANSWERS):
        ids[row, : len(answer)] = torch.tensor([ord(c) for c in answer])
        mask[row, : len(answer)] = 1

    def generate_and_score(self, inputs):
        advantages = torch.tensor([0.3, -0.1, -0.2, 0.3])
        return {"completion_ids": ids, "completion_mask": mask, "advantages": advantages}

    monkeypatch.setattr(SharedPromptTrainer, "_generate_and_score_completions", generate_and_score)


def test_the_trainer_credits_the_broken_job_below_the_one_that_ran(parent_output):
    trainer = _bare_trainer(0.5)
    output = trainer._generate_and_score_completions([{"scenario": SCENARIO_JSON}] * 4)
    advantages = output["advantages"]
    assert advantages.shape == (4, output["completion_ids"].size(1))
    credits = job_credits(ANSWERS, [SCENARIO_JSON] * 4)  # optimum: every job 1; even split: one job breaks
    mean = {job: (2.0 + value) / 3.0 for job, value in credits[1].items()}  # rows 0, 1, 3 have credits
    for row in (0, 1, 3):
        for job, (start, _) in job_spans(ANSWERS[row], list(mean)).items():
            added = 0.5 * (credits[row][job] - mean[job])
            assert float(advantages[row, start]) == pytest.approx([0.3, -0.1, -0.2, 0.3][row] + added)
    broken = min(credits[1], key=credits[1].get)
    assert advantages[1, job_spans(ANSWERS[1], [broken])[broken][0]] < -0.1 == pytest.approx(advantages[1, 0])
    assert torch.allclose(advantages[2], torch.tensor(-0.2))  # no plan: the plan's advantage alone
    assert trainer._metrics["train"]["job_credit/mean_abs"][0] > 0


def test_without_job_credit_the_plan_advantages_stay(parent_output):
    output = _bare_trainer(0.0)._generate_and_score_completions([{"scenario": SCENARIO_JSON}] * 4)
    assert output["advantages"].tolist() == pytest.approx([0.3, -0.1, -0.2, 0.3])
