"""benchmarks/templates.py: the split rules, and the search's sum agrees with scoring the plans for real."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks import templates
from fleet_rl import make_scenario
from fleet_rl.kernel import evaluate_batch


@given(count=st.integers(1, 16), priorities=st.lists(st.integers(1, 5), min_size=1, max_size=6))
def test_every_rule_hands_out_exactly_the_cluster(count, priorities):
    for rule, split in templates.SPLIT_RULES.items():
        shares = split(count, [float(p) for p in priorities])
        assert sum(shares) == count and min(shares) >= 0, rule


def test_priority_rule_gives_every_job_a_gpu_while_they_last():
    assert templates.split_priority(8, [3.0, 1.0]) == [6, 2]
    assert templates.split_priority(2, [1.0, 1.0, 5.0]) == [1, 1, 0]
    assert templates.split_top(8, [1.0, 3.0, 2.0]) == [0, 8, 0]


@pytest.mark.parametrize("task", ["easy", "medium"])
def test_search_prediction_equals_the_real_score_of_its_plans(task):
    """The vectorised (job, setting) pass and the public ``evaluate_batch`` of the winning template's plans
    agree: the search ranks templates by what they really score."""
    scenarios = [make_scenario(task, seed, "eval") for seed in range(4)]
    settings, predicted = templates.best_settings(scenarios, "even")
    plans = [templates.template_plan(s, "even", settings) for s in scenarios]
    evaluations = evaluate_batch(scenarios, plans)
    assert all(e.valid for e in evaluations)
    assert sum(e.score for e in evaluations) / len(scenarios) == pytest.approx(predicted, abs=1e-9)


def test_the_best_template_is_no_worse_than_any_other_grid_setting_on_a_scenario():
    scenario = make_scenario("easy", 3, "eval")
    settings, predicted = templates.best_settings([scenario], "even")
    kind = next(iter({templates.KINDS.index(job.kind) for job in scenario.jobs}))
    grid = templates.settings_grid(kind)
    others = [grid[i] for i in range(0, len(grid), len(grid) // 50)]
    plans = [templates.template_plan(scenario, "even", {**settings, kind: other}) for other in others]
    assert max(e.score for e in evaluate_batch(scenario, plans)) <= predicted + 1e-12


def test_the_command_prints_a_report_per_task(capsys):
    templates.main(["--tasks", "easy", "--scenarios", "3"])
    report = json.loads(capsys.readouterr().out)["tasks"]["easy"]
    assert set(report["rules"]) == set(templates.SPLIT_RULES)
    assert report["best_template_percent"] == max(r["percent_of_optimum"] for r in report["rules"].values())
    assert 0.0 < report["even_bf16_percent"] <= 100.0
    assert 1 <= report["distinct_optimal_plans_of_first_60"] <= 60


def test_floor_what_if_draws_floors_from_a_copy_of_the_tier_and_leaves_the_committed_one():
    committed = make_scenario("easy", 0, "eval")
    assert all(job.min_tokens_per_s is None for job in committed.jobs)
    assert templates.tier_for_run("easy", None, (0.5,)) is templates.scenario_generator.TIERS["easy"]
    floored = templates.draw_scenario(templates.tier_for_run("easy", 1.0, (0.5,)), "easy", 0, "eval")
    assert all(job.min_tokens_per_s is not None for job in floored.jobs)
    assert make_scenario("easy", 0, "eval") == committed
    # the same cluster and jobs, floors added (a what-if on the committed scenarios, not other ones)
    assert floored.cluster == committed.cluster
    assert [job.id for job in floored.jobs] == [job.id for job in committed.jobs]


def test_floor_flags_are_recorded_and_checked(capsys):
    flags = ["--floor_prob", "1", "--floor_fractions", "0.9"]
    report = templates.main(["--tasks", "easy", "--scenarios", "2", *flags])
    capsys.readouterr()
    assert report["floors"] == {"floor_prob": 1.0, "floor_fractions": [0.9]}
    with pytest.raises(SystemExit):
        templates.main(["--floor_prob", "1.5"])
    assert templates.scenario_generator.TIERS["easy"].floor_prob == 0.0
