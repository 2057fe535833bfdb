"""benchmarks/learning/compare.py: two results on the same held-out scenarios, paired (``--compare``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.learning.benchmark import main
from benchmarks.learning.compare import compare

REPO = Path(__file__).resolve().parents[3]
RESULT = REPO / "benchmarks/results/learning_smollm2_cpu.json"


def _result(after: list[list[float]], start: list[list[float]] | None = None, **changes) -> dict:
    """A learning result with only what a comparison reads: per-scenario scores per seed, and its summary."""
    start = start or [[0.0] * len(after[0])] * len(after)
    delta = float((np.asarray(after) - np.asarray(start)).mean())
    return {
        "seeds": list(range(len(after))),
        "scenario_fingerprint": "0123456789abcdef",
        "delta_percent_points": delta,
        "delta_ci95": [delta - 1.0, delta + 1.0],
        "per_scenario": {
            "task": ["easy", "medium", "easy"][: len(after[0])],
            "generator_seed": [11, 12, 13][: len(after[0])],
            "start_percent_of_optimum": start,
            "after_percent_of_optimum": after,
        },
    } | changes


def test_the_difference_averages_each_result_over_its_own_seeds_then_pairs_scenarios():
    baseline = _result([[10.0, 0.0, 20.0], [30.0, 0.0, 40.0]])  # per scenario 20, 0, 30
    candidate = _result([[25.0, 5.0, 30.0]])  # one seed: 25, 5, 30
    comparison = compare(baseline, candidate)
    assert comparison["difference_percent_points"] == pytest.approx((5.0 + 5.0 + 0.0) / 3)
    low, high = comparison["difference_ci95"]
    assert 0.0 <= low <= comparison["difference_percent_points"] <= high <= 5.0  # resampled from 5, 5, 0
    assert comparison["baseline"]["after_percent_of_optimum"] == pytest.approx(50.0 / 3)
    assert comparison["candidate"]["seeds"] == [0]
    assert comparison["same_start"] is True and comparison["scenarios"] == 3


def test_a_constant_gain_has_a_zero_width_interval_and_the_order_sets_the_sign():
    baseline, candidate = _result([[10.0, 20.0, 30.0]]), _result([[13.0, 23.0, 33.0]])
    assert compare(baseline, candidate)["difference_ci95"] == pytest.approx([3.0, 3.0])
    assert compare(candidate, baseline)["difference_percent_points"] == pytest.approx(-3.0)


def test_a_different_start_is_reported():
    baseline = _result([[10.0, 20.0, 30.0]])
    candidate = _result([[10.0, 20.0, 30.0]], start=[[5.0, 5.0, 5.0]])
    assert compare(baseline, candidate)["same_start"] is False


@pytest.mark.parametrize(
    "change",
    [
        {"scenario_fingerprint": "fedcba9876543210"},
        {"per_scenario_key": ("generator_seed", [11, 12, 99])},
        {"per_scenario_key": ("task", ["easy", "easy", "easy"])},
    ],
)
def test_results_on_different_scenarios_are_refused(change):
    baseline, candidate = _result([[10.0, 20.0, 30.0]]), _result([[10.0, 20.0, 30.0]])
    if "per_scenario_key" in change:
        key, value = change["per_scenario_key"]
        candidate["per_scenario"][key] = value
    else:
        candidate |= change
    with pytest.raises(ValueError, match="different held-out scenarios"):
        compare(baseline, candidate)


def test_the_command_line_prints_the_comparison_as_json(tmp_path, capsys):
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    paths[0].write_text(json.dumps(_result([[10.0, 20.0, 30.0]])))
    paths[1].write_text(json.dumps(_result([[12.0, 22.0, 32.0]])))
    main(["--compare", str(paths[0]), str(paths[1])])
    printed = json.loads(capsys.readouterr().out)
    assert printed["baseline_file"] == str(paths[0]) and printed["candidate_file"] == str(paths[1])
    assert printed["difference_percent_points"] == pytest.approx(2.0)


@pytest.mark.parametrize("problem", ["missing", "not json", "not a result", "other scenarios"])
def test_a_bad_comparison_gives_one_line_and_exit_code_2(tmp_path, capsys, problem):
    good, other = tmp_path / "good.json", tmp_path / "other.json"
    good.write_text(json.dumps(_result([[10.0, 20.0, 30.0]])))
    other.write_text(
        {
            "missing": "",
            "not json": "{not json",
            "not a result": json.dumps({"seeds": [0]}),
            "other scenarios": json.dumps(_result([[1.0, 2.0, 3.0]], scenario_fingerprint="f" * 16)),
        }[problem]
    )
    if problem == "missing":
        other.unlink()
    with pytest.raises(SystemExit) as exited:
        main(["--compare", str(good), str(other)])
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("python -m benchmarks.learning: --compare: ")
    assert len(captured.err.strip().splitlines()) == 1


def test_reading_results_imports_no_model_stack(tmp_path):
    """--render and --compare only read JSON: they must not import torch or transformers (seconds each)."""
    path = tmp_path / "result.json"
    path.write_text(json.dumps(_result([[25.0, 5.0, 30.0]])))
    probe = (
        "import runpy, sys\n"
        f"for argv in (['--compare', {str(path)!r}, {str(path)!r}], ['--render', {str(RESULT)!r}]):\n"
        "    sys.argv = ['benchmarks/learning', *argv]\n"
        "    runpy.run_module('benchmarks.learning', run_name='__main__', alter_sys=True)\n"
        "print(sorted({'torch', 'transformers', 'trl'} & set(sys.modules)))\n"
    )
    printed = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert printed.splitlines()[-1] == "[]"


def test_revision_episodes_add_the_first_plans_difference():
    """A revise result's final plans had verdicts to work from: the first plans are compared too, a
    single-plan result's only plan standing for its first."""
    baseline = _result([[10.0, 20.0, 30.0]])  # single plans
    candidate = _result(
        [[20.0, 30.0, 40.0]],
        first_plan={"after_per_scenario": [[8.0, 18.0, 28.0]], "start_per_scenario": [[0.0, 0.0, 0.0]]},
    )
    comparison = compare(baseline, candidate)
    assert comparison["difference_percent_points"] == pytest.approx(10.0)
    first = comparison["first_plan"]
    assert first["difference_percent_points"] == pytest.approx(-2.0)
    assert first["difference_ci95"] == pytest.approx([-2.0, -2.0])
    assert first["baseline_after_percent_of_optimum"] == pytest.approx(20.0)
    assert first["candidate_after_percent_of_optimum"] == pytest.approx(18.0)


def test_single_plan_results_have_no_first_plans_entry():
    assert "first_plan" not in compare(_result([[10.0, 20.0, 30.0]]), _result([[11.0, 21.0, 31.0]]))


def test_the_same_start_in_revision_episodes_is_told_by_its_first_plans():
    """A revise result's start scores its final plans (after verdicts); its first plans are the single answers
    a single-plan result of the same start gave, so the two started from the same policy."""
    baseline = _result([[10.0, 20.0, 30.0]], start=[[5.0, 6.0, 7.0]])
    candidate = _result(
        [[12.0, 22.0, 32.0]],
        start=[[9.0, 9.0, 9.0]],  # the start's final plans, revised
        first_plan={"after_per_scenario": [[10.0, 20.0, 30.0]], "start_per_scenario": [[5.0, 6.0, 7.0]]},
    )
    assert compare(baseline, candidate)["same_start"] is True


_EVAL = {
    "eval_scenarios": 3,
    "eval_tasks": ["easy", "medium"],
    "prompt_style": "sized",
    "eval_dataset_seed": 7,
}
_BASELINES = {"heuristic": {"mean_percent_of_optimum": 85.5}, "even_bf16": {"mean_percent_of_optimum": 20.1}}


def _on_prompt(style: str, after: list[list[float]], fingerprint: str, **changes) -> dict:
    """A result whose evaluation settings and baselines a cross-prompt comparison checks."""
    evaluated = _EVAL | {"prompt_style": style}
    return _result(after, scenario_fingerprint=fingerprint, eval=evaluated, baselines=_BASELINES) | changes


def test_results_on_different_prompt_styles_pair_when_the_scenarios_and_scoring_agree():
    """A change of prompt changes the fingerprint, not the scenarios (issue #68): the recipes still pair."""
    baseline = _on_prompt("sized", [[10.0, 20.0, 30.0]], "a" * 16)
    candidate = _on_prompt("sized_batching", [[14.0, 24.0, 34.0]], "b" * 16)
    comparison = compare(baseline, candidate)
    assert comparison["difference_percent_points"] == pytest.approx(4.0)
    assert comparison["same_prompts"] is False
    assert comparison["prompt_styles"] == ["sized", "sized_batching"]
    assert comparison["candidate_scenario_fingerprint"] == "b" * 16
    assert compare(baseline, baseline)["same_prompts"] is True


@pytest.mark.parametrize(
    "change",
    [
        {"eval": _EVAL | {"eval_dataset_seed": 8}},  # other scenarios drawn
        {"eval": _EVAL | {"prompt_style": "sized_batching", "eval_scenarios": 4}},
        {
            "baselines": _BASELINES | {"heuristic": {"mean_percent_of_optimum": 80.0}}
        },  # optima or reward moved
    ],
)
def test_results_on_different_prompts_are_refused_when_more_than_the_prompt_differs(change):
    baseline = _on_prompt("sized", [[10.0, 20.0, 30.0]], "a" * 16)
    candidate = _on_prompt("sized_batching", [[14.0, 24.0, 34.0]], "b" * 16) | change
    with pytest.raises(ValueError, match="different held-out scenarios"):
        compare(baseline, candidate)


def test_the_distilled_heuristic_recipe_pairs_with_the_previous_preset_across_prompts():
    """The committed results on the sized and sized_batching prompts answered the same 96 scenarios."""
    results = REPO / "benchmarks/results"
    preset = json.loads((results / "history/learning_smollm2_cpu_sized_optimal.json").read_text())
    heuristic = json.loads((results / "learning_smollm2_cpu_heuristic_batching.json").read_text())
    comparison = compare(preset, heuristic)
    assert comparison["scenarios"] == 96 and comparison["same_prompts"] is False
    assert comparison["candidate"]["after_percent_of_optimum"] == pytest.approx(
        np.mean(heuristic["per_scenario"]["after_percent_of_optimum"])
    )
