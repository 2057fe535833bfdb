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
from trl import GRPOTrainer

from fleet_rl import make_scenario
from fleet_rl.baselines import even_bf16, optimal
from fleet_rl.training.job_credit import (
    add_closing_credit,
    closing_tokens,
    credit_omitted_jobs,
    group_job_means,
    job_advantages,
    job_of_tokens,
    job_spans,
    token_char_ends,
)
from fleet_rl.training.trainer import FleetGRPOTrainer
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


def test_the_closing_tokens_run_from_the_last_job_objects_brace_to_the_bracket():
    text = '{"jobs": [{"id": "a", "x": [1]}, {"id": "b"}]}'
    spans = job_spans(text, ["a", "b"])
    close = text.rindex("]")
    assert closing_tokens(text, spans, token_char_ends(_decode, [ord(c) for c in text])) == (close - 1, close)
    ends = [10, close - 1, close + 2, len(text)]  # a token "}]}" holds the brace and the bracket
    assert closing_tokens(text, spans, ends) == (2,)
    ends = [10, close - 2, close, close + 1, len(text)]  # SmolLM2's way: '"}' then ']}'
    assert closing_tokens(text, spans, ends) == (2, 3)
    assert closing_tokens(text, {}, ends) == ()  # no job object
    assert closing_tokens(text[:close], spans, ends) == ()  # the list never closed
    assert closing_tokens(text, spans, ends[:3]) == ()  # the bracket lies past the tokens


def test_an_omitted_job_takes_the_given_credit_and_is_named():
    credit = {"a": 1.0, "b": 1 / 3, "c": 0.1}
    spans = {"a": (0, 5), "c": (6, 9)}
    assert credit_omitted_jobs(credit, spans, 0.0) == ({"a": 1.0, "b": 0.0, "c": 0.1}, ["b"])
    assert credit_omitted_jobs(credit, {"a": (0, 1), "b": (1, 2), "c": (2, 3)}, 0.0) == (credit, [])


def test_the_closing_tokens_get_the_omitted_jobs_terms_only():
    advantages = torch.zeros(3, 4)
    credits = [{"a": 1.0, "b": 0.0, "c": 0.0}, {"a": 1.0, "b": 0.1, "c": 0.1}, None]
    means = [{"a": 1.0, "b": 0.05, "c": 0.05}, {"a": 1.0, "b": 0.05, "c": 0.05}, {}]
    add_closing_credit(advantages, [(1, 2), (), (1,)], [["b", "c"], [], []], credits, means, 0.5)
    expected = torch.zeros(3, 4)
    expected[0, 1:3] = 0.5 * (-0.05 - 0.05)  # each closing token, the whole term
    assert torch.allclose(advantages, expected)
    add_closing_credit(advantages, [(9,)], [["b"]], credits[:1], means[:1], 0.5)  # past the answer: nothing
    assert torch.allclose(advantages, expected)


SCENARIO = make_scenario("medium", 5)
SCENARIO_JSON = msgspec.json.encode(SCENARIO).decode()
ANSWERS = [
    json.dumps(optimal(SCENARIO)),
    json.dumps(even_bf16(SCENARIO)),
    "no plan",
    json.dumps(optimal(SCENARIO)),
]


def _bare_trainer(job_credit: float, omitted_job_credit: float | None = None) -> FleetGRPOTrainer:
    """A FleetGRPOTrainer without a model, per-job credit on alone, on a character-level tokenizer (TRL's
    step is patched)."""
    trainer = object.__new__(FleetGRPOTrainer)
    trainer.job_credit, trainer.omitted_job_credit = job_credit, omitted_job_credit
    trainer.explore_repair_rate = trainer.self_imitation_coef = 0.0
    trainer._repair_inputs = None
    trainer.num_generations = trainer.num_generations_eval = 4
    trainer.model = SimpleNamespace(training=True)
    trainer._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    trainer._tokenizer = SimpleNamespace(decode=lambda ids, skip_special_tokens: _decode(ids))
    trainer.accelerator = SimpleNamespace(num_processes=1, process_index=0)
    return trainer


def _patch_parent_step(monkeypatch, answers: list[str], plan_advantages: list[float]) -> None:
    """TRL's step output for ``answers``: character ids, padded with 0 and masked, plan advantages (B,)."""
    length = max(map(len, answers)) + 3
    ids = torch.zeros(len(answers), length, dtype=torch.long)
    mask = torch.zeros(len(answers), length, dtype=torch.long)
    for row, answer in enumerate(answers):
        ids[row, : len(answer)] = torch.tensor([ord(c) for c in answer])
        mask[row, : len(answer)] = 1

    def generate_and_score(self, inputs):
        return {"completion_ids": ids, "completion_mask": mask, "advantages": torch.tensor(plan_advantages)}

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", generate_and_score)


@pytest.fixture
def parent_output(monkeypatch):
    _patch_parent_step(monkeypatch, ANSWERS, [0.3, -0.1, -0.2, 0.3])


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


def _first_job_alone(plan: dict) -> str:
    return json.dumps({"jobs": plan["jobs"][:1]})


def test_omitted_job_credit_puts_the_left_out_jobs_on_the_closing_bracket(monkeypatch):
    """Rows 0 and 1 place every job (row 1 even split: one breaks), row 2 writes the first job alone, row 3
    is no plan: with ``omitted_job_credit`` 0, row 2's two left-out jobs count 0 in the group means and its
    closing ``}`` and ``]`` carry 0.5 x (0 - mean) for each; every other token keeps what per-job credit
    gives."""
    answers = [
        json.dumps(optimal(SCENARIO)),
        json.dumps(even_bf16(SCENARIO)),
        _first_job_alone(optimal(SCENARIO)),
        "no plan",
    ]
    plan_advantages = torch.tensor([0.3, -0.1, 0.05, -0.25])
    _patch_parent_step(monkeypatch, answers, plan_advantages.tolist())
    trainer = _bare_trainer(0.5, omitted_job_credit=0.0)
    advantages = trainer._generate_and_score_completions([{"scenario": SCENARIO_JSON}] * 4)["advantages"]
    tiers = job_credits(answers, [SCENARIO_JSON] * 4)
    first, *left_out = list(tiers[0])
    assert [tiers[2][job] for job in left_out] == pytest.approx([1 / 3, 1 / 3])  # the tiers: idle
    credits = [tiers[0], tiers[1], {first: tiers[2][first]} | dict.fromkeys(left_out, 0.0)]
    mean = {job: sum(c[job] for c in credits) / 3 for job in tiers[0]}
    close = answers[2].rindex("]")
    closing = 0.5 * sum(0.0 - mean[job] for job in left_out)
    assert float(advantages[2, close]) == pytest.approx(0.05 + closing)
    assert float(advantages[2, close + 1]) == pytest.approx(0.05)  # the plan's closing brace: no job's
    start = job_spans(answers[2], [first])[first][0]
    own = 0.5 * (credits[2][first] - mean[first])
    assert float(advantages[2, start]) == pytest.approx(0.05 + own)
    assert float(advantages[2, close - 1]) == pytest.approx(0.05 + own + closing)  # the job object's "}"
    for row in (0, 1):  # the placed rows' jobs against means that count the left-out jobs as 0
        for job, (start, _) in job_spans(answers[row], list(mean)).items():
            added = 0.5 * (credits[row][job] - mean[job])
            assert float(advantages[row, start]) == pytest.approx(float(plan_advantages[row]) + added)
    assert torch.allclose(advantages[3], torch.tensor(-0.25))
    assert trainer._metrics["train"]["job_credit/omitted"] == [pytest.approx(1 / 3)]


def test_without_omitted_job_credit_a_left_out_job_adds_nothing(monkeypatch):
    _patch_parent_step(monkeypatch, [_first_job_alone(optimal(SCENARIO))] * 2, [0.0, 0.0])
    trainer = _bare_trainer(0.5)
    trainer.num_generations = 2
    advantages = trainer._generate_and_score_completions([{"scenario": SCENARIO_JSON}] * 2)["advantages"]
    assert torch.count_nonzero(advantages) == 0  # both rows alike: every term 0, the bracket's too
    assert "job_credit/omitted" not in trainer._metrics["train"]
