"""benchmarks/reward/templates.py: the split rules, and the search's sum agrees with scoring the plans for
real."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.reward import templates
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


@pytest.mark.parametrize("rule", list(templates.SPLIT_RULES))
@pytest.mark.parametrize("task", ["easy", "medium"])
def test_search_prediction_equals_the_real_score_of_its_plans(task, rule):
    """The vectorised (job, setting) pass, clip and idle jobs' missed floors included, and the public
    ``evaluate_batch`` of the winning template's plans agree: the search ranks templates by what they
    really score."""
    scenarios = [make_scenario(task, seed, "eval") for seed in range(6)]
    if task == "medium":
        assert any(job.min_tokens_per_s for s in scenarios for job in s.jobs)  # the penalty is exercised
    settings, predicted = templates.best_settings(scenarios, rule)
    plans = [templates.template_plan(s, rule, settings) for s in scenarios]
    evaluations = evaluate_batch(scenarios, plans)
    assert all(e.valid for e in evaluations)
    assert sum(e.score for e in evaluations) / len(scenarios) == pytest.approx(predicted, abs=1e-9)


def test_no_single_kind_change_beats_the_template_the_search_found():
    """The search ends where no kind's setting alone can raise the clipped mean (sampled over the grid)."""
    scenarios = [make_scenario("medium", seed, "eval") for seed in range(6)]
    settings, predicted = templates.best_settings(scenarios, "even")
    for kind in settings:
        grid = templates.settings_grid(kind)
        for other in grid[:: len(grid) // 20]:
            plans = [templates.template_plan(s, "even", {**settings, kind: other}) for s in scenarios]
            assert (
                sum(e.score for e in evaluate_batch(scenarios, plans)) / len(scenarios) <= predicted + 1e-12
            )


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
    assert 0.0 <= report["even_bf16_percent"] <= 100.0 and 0.0 <= report["heuristic_percent"] <= 100.0
    assert set(report["distinct_optimal_plans_of_first_60"]) == {"train", "eval"}
    assert all(1 <= count <= 60 for count in report["distinct_optimal_plans_of_first_60"].values())


def test_floor_what_if_draws_floors_from_a_copy_of_the_tier_and_leaves_the_committed_one():
    committed = [make_scenario("medium", seed, "eval") for seed in range(4)]
    assert templates.tier_for_run("medium", None, (0.5,)) is templates.scenario_generator.TIERS["medium"]
    everywhere = templates.tier_for_run("medium", 1.0, (0.5,))
    nowhere = templates.tier_for_run("medium", 0.0, (0.5,))
    for seed, scenario in enumerate(committed):
        floored = templates.draw_scenario(everywhere, "medium", seed, "eval")
        bare = templates.draw_scenario(nowhere, "medium", seed, "eval")
        assert all(job.min_tokens_per_s is not None for job in floored.jobs)
        assert all(job.min_tokens_per_s is None for job in bare.jobs)
        # the same cluster and jobs, only the floors differ (a what-if on the committed scenarios)
        for other in (floored, bare):
            assert other.cluster == scenario.cluster
            assert [job.id for job in other.jobs] == [job.id for job in scenario.jobs]
            assert [job.batch_size for job in other.jobs] == [job.batch_size for job in scenario.jobs]
    assert [make_scenario("medium", seed, "eval") for seed in range(4)] == committed


def test_floor_flags_are_recorded_and_checked(capsys):
    flags = ["--floor_prob", "1", "--floor_fractions", "0.9"]
    report = templates.main(["--tasks", "easy", "--scenarios", "2", *flags])
    capsys.readouterr()
    assert report["floors"] == {"floor_prob": 1.0, "floor_fractions": [0.9]}
    with pytest.raises(SystemExit):
        templates.main(["--floor_prob", "1.5"])
    assert templates.scenario_generator.TIERS["easy"].floor_prob == 0.75  # the committed tier is untouched
