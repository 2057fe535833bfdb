"""benchmarks/learning/sft_curve_compare.py: two curves paired per common step, only on the same scenarios
scored the same way."""

from __future__ import annotations

import json

import pytest

from benchmarks.learning import sft_curve
from benchmarks.learning.sft_curve_compare import compare_curves

EVAL = {"eval_scenarios": 3, "eval_tasks": ["easy"], "eval_dataset_seed": 7, "split": "eval"}


def _curve(points: dict[int, list[float]], fingerprint: str = "a" * 16, **overrides) -> dict:
    return {
        "sft_target": "heuristic",
        "eval": EVAL,
        "scenario_fingerprint": fingerprint,
        "baselines": {"even_bf16": {"mean_percent_of_optimum": 20.0}},
        "checkpoints": [{"step": step, "percent_of_optimum": scores} for step, scores in points.items()],
        **overrides,
    }


def test_the_difference_is_per_common_step_candidate_minus_baseline():
    baseline = _curve({45: [10.0, 20.0, 30.0], 90: [0.0, 0.0, 30.0]})
    other_prompt = {"fingerprint": "b" * 16, "eval": EVAL | {"prompt_style": "other"}}  # the same scenarios
    candidate = _curve({90: [30.0, 0.0, 60.0], 120: [1.0, 1.0, 1.0]}, **other_prompt)
    comparison = compare_curves(baseline, candidate, resamples=200)
    (step,) = comparison["steps"]
    assert step["step"] == 90 and step["difference_percent_points"] == pytest.approx(20.0)
    assert (step["baseline_percent_of_optimum"], step["candidate_percent_of_optimum"]) == (10.0, 30.0)
    low, high = step["difference_ci95"]
    assert 0.0 <= low <= 20.0 <= high <= 30.0  # scenario differences 30, 0, 30
    assert comparison["same_prompts"] is False and comparison["scenarios"] == 3
    assert comparison["prompt_styles"] == [None, "other"]


@pytest.mark.parametrize(
    ("changed", "message"),
    [
        ({"eval": EVAL | {"eval_dataset_seed": 8}}, "evaluated differently"),
        ({"baselines": {"even_bf16": {"mean_percent_of_optimum": 21.0}}}, "baselines score differently"),
        ({"checkpoints": [{"step": 30, "percent_of_optimum": [1.0, 2.0, 3.0]}]}, "no common step"),
    ],
)
def test_curves_on_other_scenarios_or_scoring_or_steps_are_refused(changed, message):
    with pytest.raises(ValueError, match=message):
        compare_curves(_curve({90: [1.0, 2.0, 3.0]}), _curve({90: [1.0, 2.0, 3.0]}, **changed))


def test_the_command_prints_the_comparison_and_refusals_are_one_line(tmp_path, capsys):
    a, b, other = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "other.json"
    a.write_text(json.dumps(_curve({90: [1.0, 2.0, 3.0]})))
    b.write_text(json.dumps(_curve({90: [2.0, 3.0, 4.0]})))
    other.write_text(json.dumps(_curve({90: [2.0, 3.0, 4.0]}, eval=EVAL | {"eval_scenarios": 4})))
    comparison = sft_curve.main(["--compare", str(a), str(b)])
    assert json.loads(capsys.readouterr().out) == comparison
    assert comparison["steps"][0]["difference_percent_points"] == pytest.approx(1.0)
    assert comparison["same_prompts"] is True
    with pytest.raises(SystemExit, match="sft_curve.py: error: the curves were evaluated differently"):
        sft_curve.main(["--compare", str(a), str(other)])


def test_compare_steps_pairs_two_runs_of_different_lengths_at_the_steps_named(tmp_path):
    shorter = _curve({45: [0.0, 0.0, 0.0], 90: [10.0, 20.0, 30.0]})
    longer = _curve({180: [20.0, 20.0, 50.0]})
    (pair,) = compare_curves(shorter, longer, steps=(90, 180), resamples=200)["steps"]
    assert pair["step"] == [90, 180] and pair["difference_percent_points"] == pytest.approx(10.0)
    with pytest.raises(ValueError, match="no such steps"):
        compare_curves(shorter, longer, steps=(90, 90))
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(shorter))
    b.write_text(json.dumps(longer))
    with pytest.raises(SystemExit, match="no common step"):
        sft_curve.main(["--compare", str(a), str(b)])
    printed = sft_curve.main(["--compare", str(a), str(b), "--compare_steps", "90", "180"])
    assert printed["steps"][0]["candidate_percent_of_optimum"] == pytest.approx(30.0)
    with pytest.raises(SystemExit):
        sft_curve.parse(["--render", str(a), "--compare_steps", "90", "180"])


def test_seeds_on_each_side_are_paired_by_position_and_pooled_per_scenario(tmp_path):
    baselines = [_curve({180: [10.0, 20.0, 30.0]}), _curve({180: [30.0, 20.0, 10.0]})]
    candidates = [_curve({180: [20.0, 20.0, 30.0]}), _curve({180: [30.0, 50.0, 10.0]})]
    comparison = compare_curves(baselines, candidates, resamples=200)
    (step,) = comparison["steps"]
    # per scenario, averaged over the pairs: (10 + 0) / 2, (0 + 30) / 2, (0 + 0) / 2
    assert step["difference_percent_points"] == pytest.approx((5.0 + 15.0 + 0.0) / 3)
    assert step["per_seed"] == pytest.approx([10.0 / 3, 10.0])
    assert step["baseline_percent_of_optimum"] == pytest.approx(20.0)
    assert comparison["seeds_pooled"] == 2 and comparison["scenarios"] == 3
    low, high = step["difference_ci95"]
    assert 0.0 <= low <= step["difference_percent_points"] <= high <= 15.0
    with pytest.raises(ValueError, match="give as many on each side"):
        compare_curves(baselines, candidates[:1])
    with pytest.raises(ValueError, match="evaluated differently"):
        compare_curves(baselines, [candidates[0], _curve({180: [1.0] * 3}, eval=EVAL | {"split": "train"})])
    paths = []
    for name, curve in zip(("a0", "a1", "b0", "b1"), [*baselines, *candidates], strict=True):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(curve))
    printed = sft_curve.main(["--compare", f"{paths[0]},{paths[1]}", f"{paths[2]},{paths[3]}"])
    assert printed["steps"][0]["per_seed"] == pytest.approx(step["per_seed"])
    with pytest.raises(SystemExit, match="give as many on each side"):
        sft_curve.main(["--compare", f"{paths[0]},{paths[1]}", str(paths[2])])


def test_a_pooled_step_must_be_on_every_curve_of_its_side():
    baselines = [_curve({90: [1.0] * 3, 180: [1.0] * 3}), _curve({180: [2.0] * 3})]
    candidates = [_curve({90: [3.0] * 3, 180: [3.0] * 3}), _curve({90: [3.0] * 3, 180: [3.0] * 3})]
    assert [step["step"] for step in compare_curves(baselines, candidates, resamples=50)["steps"]] == [180]
    with pytest.raises(ValueError, match="no such steps"):
        compare_curves(baselines, candidates, steps=(90, 90))


@pytest.mark.parametrize("side", ["{a},", "{a},missing.json", "{bad}"])
def test_a_missing_or_unreadable_curve_file_is_a_one_line_error(tmp_path, side):
    a, bad = tmp_path / "a.json", tmp_path / "bad.json"
    a.write_text(json.dumps(_curve({90: [1.0, 2.0, 3.0]})))
    bad.write_text("{not json")
    with pytest.raises(SystemExit, match="sft_curve.py: error: "):
        sft_curve.main(["--compare", str(a), side.format(a=a, bad=bad)])
