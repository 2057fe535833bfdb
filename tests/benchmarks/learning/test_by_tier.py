"""benchmarks/learning/by_tier.py: a learning result's paired after − start difference, tier by tier."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.learning import by_tier as module
from benchmarks.learning.statistics import paired_difference

TASKS = ["easy", "medium", "easy", "medium", "easy", "medium"]
START = [[50.0, 40.0, 60.0, 30.0, 70.0, 20.0], [50.0, 40.0, 60.0, 30.0, 70.0, 20.0]]
AFTER = [[60.0, 30.0, 65.0, 30.0, 80.0, 10.0], [55.0, 35.0, 70.0, 20.0, 70.0, 20.0]]


def result(start=START, after=AFTER, tasks=TASKS, eval_tasks=("easy", "medium", "hard")) -> dict:
    return {
        "seeds": [0, 1],
        "eval": {"eval_tasks": list(eval_tasks)},
        "per_scenario": {"task": tasks, "start_percent_of_optimum": start, "after_percent_of_optimum": after},
    }


def test_each_tier_is_paired_on_its_own_scenarios_and_the_tiers_add_up_to_the_whole(tmp_path, capsys):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result()))
    printed = module.main([str(path)])
    assert json.loads(capsys.readouterr().out) == printed
    tiers = printed["by_tier"]
    assert set(tiers) == {"easy", "medium"}  # a tier without held-out scenarios is left out
    easy = tiers["easy"]
    assert easy["scenarios"] == 3
    assert easy["start"] == [60.0, 60.0] and easy["after"] == [68.3, 65.0]
    expected = paired_difference(np.array(START)[:, ::2], np.array(AFTER)[:, ::2])
    assert easy["after_minus_start"]["mean"] == round(expected["mean"], 1) == 6.7
    assert easy["after_minus_start"]["ci95"] == [round(value, 1) for value in expected["ci95"]]
    assert easy["after_minus_start"]["per_seed"] == [8.3, 5.0]
    assert tiers["medium"]["after_minus_start"]["per_seed"] == [-6.7, -5.0]
    whole = paired_difference(START, AFTER)["mean"]
    weighted = sum(tier["scenarios"] * tier["after_minus_start"]["mean"] for tier in tiers.values()) / 6
    assert weighted == pytest.approx(whole, abs=0.1)
    low, high = easy["after_minus_start"]["ci95"]
    assert low <= easy["after_minus_start"]["mean"] <= high


def test_one_start_evaluation_serves_every_seed():
    shared = module.by_tier(result(start=START[:1]))
    assert shared == module.by_tier(result())


@pytest.mark.parametrize(
    "broken",
    [result(tasks=TASKS[:4]), result(start=[[1.0, 2.0]]), {"seeds": [0]}, result(after=[])],
    ids=["fewer tasks than scores", "start of other scenarios", "not a learning result", "no after scores"],
)
def test_a_file_that_is_not_a_pairable_result_ends_in_one_line(tmp_path, broken):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(SystemExit, match=r"by_tier: error: .*result\.json: "):
        module.main([str(path)])
