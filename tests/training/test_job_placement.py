"""fleet_rl.training.job_placement: the share of the jobs asked for that an answer places."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rl.baselines import optimal
from fleet_rl.scenario import Scenario
from fleet_rl.training.dataset import scenario_rows
from fleet_rl.training.heldout import summarise
from fleet_rl.training.job_placement import placed_job_shares
from tests.training.two_jobs import BF16, SCENARIO


def _answer(*parts: tuple[str, int]) -> str:
    jobs = [{"id": job_id, "gpus": gpus, "tensor_parallel": 1, "precision": BF16} for job_id, gpus in parts]
    return "```json\n" + json.dumps({"jobs": jobs}) + "\n```"


def test_an_answer_that_leaves_a_job_out_or_gives_it_no_gpus_places_half():
    answers = [
        _answer(("chat", 4), ("tune", 4)),
        _answer(("chat", 8)),  # the template: the first job, every GPU
        _answer(("chat", 4), ("tune", 0)),
        _answer(("tune", 2), ("tune", 2), ("ghost", 4)),  # a repeat and an invented id add nothing
        "I would give every job four GPUs.",
        '{"jobs": [{"id": "chat", "gpus": 4',  # truncated
    ]
    assert placed_job_shares([SCENARIO] * len(answers), answers) == [1.0, 0.5, 0.5, 0.5, 0.0, 0.0]


def test_a_multi_agent_row_is_asked_for_its_own_job_only():
    scenarios = [SCENARIO.to_json()] * 3  # the dataset column's JSON
    answers = [_answer(("tune", 2)), _answer(("chat", 2)), _answer(("chat", 2), ("tune", 2))]
    assert placed_job_shares(scenarios, answers, ["tune", "tune", ""]) == [1.0, 0.0, 1.0]


def test_lengths_must_match():
    with pytest.raises(ValueError, match="2 scenarios but 1 completions"):
        placed_job_shares([SCENARIO, SCENARIO], [_answer(("chat", 1))])
    with pytest.raises(ValueError, match="1 agents but 2 completions"):
        placed_job_shares([SCENARIO, SCENARIO], [_answer(("chat", 1))] * 2, ["chat"])


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300) | st.binary(max_size=100).map(lambda b: b.decode("latin-1")))
def test_any_text_is_a_share_between_0_and_1_and_never_raises(text):
    (share,) = placed_job_shares([SCENARIO], [text])
    assert 0.0 <= share <= 1.0


def test_held_out_summaries_report_the_share_overall_and_per_task():
    rows = scenario_rows(["easy", "medium"], 4, dataset_seed=7, split="eval", prompt_style="compact")
    first_job_only = []
    for row in rows:
        plan = copy.deepcopy(optimal(Scenario.from_json(row["scenario"])))
        placed = [job for job in plan["jobs"] if job["gpus"] > 0]
        first_job_only.append("```json\n" + json.dumps({"jobs": placed[:1]}) + "\n```")
    expected = placed_job_shares([row["scenario"] for row in rows], first_job_only)
    assert min(expected) < 1.0  # some scenario has more than one job to place
    summary = summarise(rows, first_job_only)
    assert summary["placed_job_share"] == pytest.approx(sum(expected) / len(expected))
    for task, stats in summary["per_task"].items():
        shares = [share for share, row in zip(expected, rows, strict=True) if row["task"] == task]
        assert stats["placed_job_share"] == pytest.approx(sum(shares) / len(shares))
