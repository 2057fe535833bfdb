"""benchmarks/learning/benchmark.py: paired bootstrap, README table, time split, one tiny run end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.learning import checkpoints as learning_checkpoints
from benchmarks.learning import run as learning_run
from benchmarks.learning import scenario_fingerprint
from benchmarks.learning.benchmark import (
    BASELINE_NAMES,
    METRICS,
    baseline_summaries,
    eval_rows,
    main,
    paired_difference,
    parse,
    render,
    today_scenario_fingerprint,
)
from benchmarks.learning.render import UNFAIR_START_TARGETS
from benchmarks.learning.run import run
from benchmarks.learning.train import TIMINGS_FILE, reward_curve, split_grpo_time
from fleet_rl.baselines import optimal

REPO = Path(__file__).resolve().parents[3]
REQUIRED_KEYS = {"delta_percent_points", "delta_ci95", "eval_scenarios", "seeds", "start", "after", "wall_s"}
REQUIRED_KEYS |= {"command", "cpu", "scenario_fingerprint", "baselines", "delta_per_seed"}
# the held-out settings of the tiny preset (configs/tiny_cpu.yaml) with --eval_scenarios 3
TINY_SETTINGS = {
    "eval_scenarios": 3, "eval_tasks": ["easy"], "prompt_style": "compact", "max_new_tokens": 320,
    "eval_batch_size": 8, "eval_dataset_seed": 7, "eval_max_turns": 1,
}  # fmt: skip


# --- statistics ---------------------------------------------------------------------------------------


def test_constant_differences_give_a_zero_width_interval_at_the_difference():
    start = np.array([[10.0, 40.0, 70.0, 0.0], [20.0, 30.0, 50.0, 5.0]])
    paired = paired_difference(start, start + 2.5)
    assert paired["mean"] == pytest.approx(2.5)
    assert paired["ci95"] == pytest.approx([2.5, 2.5])
    assert paired["per_seed"] == pytest.approx([2.5, 2.5])


def test_hand_computed_means_average_each_scenario_over_seeds():
    start = np.zeros((2, 3))
    after = np.array([[3.0, 0.0, 6.0], [1.0, 2.0, 0.0]])  # per scenario: 2, 1, 3; per seed: 3, 1
    paired = paired_difference(start, after, resamples=2000)
    assert paired["mean"] == pytest.approx(2.0)
    assert paired["per_seed"] == pytest.approx([3.0, 1.0])
    low, high = paired["ci95"]
    assert 1.0 <= low <= 2.0 <= high <= 3.0  # resampled means of {1, 2, 3} stay within their range


def test_interval_is_deterministic_and_covers_the_true_mean():
    rng = np.random.default_rng(123)
    start = rng.uniform(0, 100, size=(2, 96))
    after = start + 4.0 + rng.normal(0.0, 10.0, size=(2, 96))
    first, second = paired_difference(start, after), paired_difference(start, after)
    assert first == second
    low, high = first["ci95"]
    assert low < first["mean"] < high and low < 4.0 < high
    # the interval shrinks like 1/sqrt(n): 4x the scenarios, about half the width
    wide = paired_difference(start[:, :24], after[:, :24])["ci95"]
    assert 0.35 < (high - low) / (wide[1] - wide[0]) < 0.7


def test_coverage_is_near_95_percent():
    rng = np.random.default_rng(7)
    covered = 0
    trials = 200
    for _ in range(trials):
        differences = rng.normal(1.0, 5.0, size=(1, 60))
        low, high = paired_difference(np.zeros_like(differences), differences, resamples=1000)["ci95"]
        covered += low <= 1.0 <= high
    assert 0.88 <= covered / trials <= 0.99


def test_unpaired_shapes_raise():
    with pytest.raises(ValueError, match="equal"):
        paired_difference(np.zeros((2, 4)), np.zeros((2, 5)))


# --- time split, reward curve, command line -----------------------------------------------------------


def test_grpo_time_is_split_into_generation_reward_and_the_rest():
    profiled = {
        "GRPOTrainer.transformers.generate": 30.0,
        "GRPOTrainer._calculate_rewards": 1.5,
        "GRPOTrainer.fleet_reward": 1.0,  # inside _calculate_rewards: not counted twice
        "GRPOTrainer.compute_loss": 5.0,
    }
    assert split_grpo_time(50.0, profiled) == {"generation": 30.0, "reward": 1.5, "backward": 18.5}
    assert split_grpo_time(50.0, {}) == {"generation": None, "reward": None, "backward": None}


def test_reward_curve_keeps_the_reward_and_each_function_per_step():
    history = [
        {"reward": 0.1, "rewards/fleet_reward/mean": 0.1, "rewards/fleet_reward/std": 0.0, "step": 1},
        {"reward": 0.3, "rewards/fleet_reward/mean": 0.3, "kernel/ird_rate": 0.5, "step": 2},
        {"train_runtime": 9.0, "step": 2},
    ]
    curve = reward_curve(history)
    assert curve == {
        "step": [1, 2],
        "reward": [0.1, 0.3],
        "kernel/ird_rate": [None, 0.5],
        "rewards/fleet_reward/mean": [0.1, 0.3],
    }


def test_command_line_passes_other_flags_to_training_and_refuses_its_own():
    args, train_flags = parse(
        ["--config", "c.yaml", "--output", "o.json", "--max_steps", "3", "--seeds", "4"]
    )
    assert (args.seeds, args.eval_scenarios, train_flags) == ([4], 96, ["--max_steps", "3"])
    for flag in ("--seed", "--output_dir"):
        with pytest.raises(SystemExit):
            parse(["--config", "c.yaml", "--output", "o.json", flag, "1"])
    with pytest.raises(SystemExit):
        parse(["--config", "c.yaml"])  # no --output


# --- the README table ---------------------------------------------------------------------------------


def _result(fair_start: bool = True) -> dict:
    side = {"mean_percent_of_optimum": 40.0, "valid_plan_rate": 0.9, "feasible_rate": 0.5, "ird_rate": 0.1}
    paired = {name: {"mean": 0.0, "ci95": [-0.01, 0.02], "per_seed": [0.0, 0.0]} for name in METRICS}
    paired["percent_of_optimum"] = {"mean": 5.25, "ci95": [-1.5, 12.0], "per_seed": [4.0, 6.5]}
    return {
        "seeds": [0, 1],
        "eval_scenarios": 96,
        "eval": {"eval_tasks": ["easy", "medium"]},
        "fair_start": fair_start,
        "start": {"policy": "800-step SFT warm start on even_split plans", **side, "mean_fleet_reward": 0.4},
        "after": {"policy": "the start + 60 GRPO steps (LoRA)", **side, "mean_fleet_reward": 0.45},
        "paired": paired,
        "delta_per_seed": [4.0, 6.5],
        "baselines": {
            "even_bf16": {
                **side,
                "mean_percent_of_optimum": 20.0,
                "mean_fleet_reward": 0.25,
                "per_task": {
                    "easy": {"mean_percent_of_optimum": 25.0},
                    "medium": {"mean_percent_of_optimum": 10.0},
                },
            },
        },
        "scenario_fingerprint": "0123456789abcdef",
        "bootstrap": {"resamples": 10000},
        "reward_curve": {"0": {"reward": [0.1, 0.2, 0.3]}, "1": {"reward": [0.2, 0.2]}},
        "wall_s": {
            "warm_start": 100.0,
            "grpo": 600.0,
            "generation": 400.0,
            "reward": 1.0,
            "backward": 199.0,
            "eval_start": 50.0,
            "eval_after": 60.0,
            "total": 830.0,
            "per_seed": [
                {"setup": 1.0, "warm_start": 40.0, "grpo": 300.0, "eval_start": 20.0, "eval_after": 30.0},
                {"setup": 1.0, "warm_start": 60.0, "grpo": 300.0, "eval_start": 30.0, "eval_after": 30.0},
            ],
        },  # fmt: skip
        "cpu": {"model": "AMD EPYC", "cores": 2},
        "command": "python -m benchmarks.learning --config configs/x.yaml",
        "per_scenario": {
            "task": ["easy", "medium", "easy"],
            "start_percent_of_optimum": [[10.0, 0.0, 20.0], [30.0, 5.0, 50.0]],
            "after_percent_of_optimum": [[50.0, 25.0, 70.0], [40.0, 5.0, 20.0]],
        },
    }


def test_render_gives_the_table_with_the_paired_interval():
    text = render(_result())
    lines = text.splitlines()
    assert lines[0] == "| policy | mean % of optimum | valid plan | feasible | IRD | mean fleet_reward |"
    assert lines[1] == "|---|---|---|---|---|---|"
    assert (
        lines[2]
        == "| start: 800-step SFT warm start on even_split plans | 40.0 | 0.90 | 0.50 | 0.10 | 0.400 |"
    )
    assert lines[3].startswith("| after: the start + 60 GRPO steps (LoRA) | 40.0 |")
    assert lines[4].startswith("| **after − start** [95 % CI] | +5.2 [−1.5, +12.0] | +0.00 [−0.01, +0.02] |")
    assert "96 held-out scenarios (easy, medium)" in text and "seed 0 +4.0, seed 1 +6.5" in text
    assert "seed 0 0.100 → 0.300" in text
    assert "seed 0: easy 15.0 → 60.0, medium 0.0 → 25.0; seed 1: easy 40.0 → 30.0, medium 5.0 → 5.0." in text
    assert "GRPO 600 s (generation 400 s, reward 1.0 s" in text and "evaluation 110 s" in text
    assert "total 812 s;" in text  # the seeds' own records, summed
    assert lines[5] == "| baseline: even_bf16 | 20.0 | 0.90 | 0.50 | 0.10 | 0.250 |"
    assert "mean % of optimum by tier: even_bf16: easy 25.0, medium 10.0." in text
    assert "Scenario fingerprint `0123456789abcdef`" in text
    assert "Not a learning claim" not in text and "Distilled start" not in text
    distilled = render(_result(fair_start=False))  # no start_target recorded: the optimum, as before
    assert "**Distilled start:**" in distilled and "GRPO's claim is after − start" in distilled
    assert "Not a learning claim" not in distilled
    unfair_even = render({**_result(fair_start=False), "start_target": "even_split"})
    assert "the even_bf16 baseline's plans" in unfair_even and "`sft_target: even_split`" in unfair_even
    assert "Not a learning claim" in unfair_even
    heuristic = render({**_result(fair_start=False), "start_target": "heuristic"})
    assert "**Distilled start:** the start imitated the heuristic baseline's plans" in heuristic
    assert "`sft_target: heuristic`" in heuristic and "Not a learning claim" not in heuristic
    assert "by what training never showed" not in text  # results from before the split
    split = _result()
    for side, (gpu, both) in (("start", (10.0, 5.0)), ("after", (30.0, 7.5))):
        unseen = {
            "gpu": {"num_scenarios": 40, "mean_percent_of_optimum": gpu},
            "both": {"num_scenarios": 38, "mean_percent_of_optimum": both},
        }
        split[side] = split[side] | {"per_seed": [{"per_unseen": unseen}, {"per_unseen": unseen}]}
    assert (
        "Mean % of optimum by what training never showed (scenarios), start → after per seed: "
        "unseen gpu (40) 10.0 → 30.0 / 10.0 → 30.0; unseen both (38) 5.0 → 7.5 / 5.0 → 7.5."
    ) in render(split)
    earlier = {
        key: value for key, value in _result().items() if key not in ("baselines", "scenario_fingerprint")
    }
    assert "baseline" not in render(earlier) and "fingerprint" not in render(earlier)  # older results


def test_render_gives_each_seeds_faults_start_to_after_when_the_summaries_have_them():
    def summary(oom: float, unsupported: float) -> dict:
        return {"oom_rate": oom, "unsupported_rate": unsupported, "unstable_rate": 0.0, "too_slow_rate": 0.25}

    result = _result()
    result["start"] = {**result["start"], "per_seed": [summary(0.5, 0.1)]}  # one start shared by both seeds
    result["after"] = {**result["after"], "per_seed": [summary(0.5, 0.0), summary(0.0, 0.3)]}
    lines = render(result).splitlines()
    line = next(line for line in lines if line.startswith("Share of the held-out answers"))
    assert line == (
        "Share of the held-out answers with a job failing for each reason, start → after: "
        "seed 0: out of memory 0.50 → 0.50, an unsupported setting 0.10 → 0.00, "
        "unstable numerics 0.00 → 0.00, under its throughput floor 0.25 → 0.25; "
        "seed 1: out of memory 0.50 → 0.00, an unsupported setting 0.10 → 0.30, "
        "unstable numerics 0.00 → 0.00, under its throughput floor 0.25 → 0.25."
    )
    one_seed_short = {**result, "after": {**result["after"], "per_seed": result["after"]["per_seed"][:1]}}
    assert "Share of the held-out answers" not in render(one_seed_short)
    del result["after"]["per_seed"][1]["too_slow_rate"]  # a result from before a fault was counted
    assert "Share of the held-out answers" not in render(result)
    assert "Share of the held-out answers" not in render(_result())  # no per-seed summaries at all


def test_render_gives_each_seeds_distinct_settings_per_kind_start_to_after():
    result = _result()
    start = {"distinct_settings_per_kind": {"lora": 3, "serve": 2, "train": 3}}
    result["start"] = {**result["start"], "per_seed": [start]}  # one start shared by both seeds
    result["after"] = {
        **result["after"],
        "per_seed": [
            {"distinct_settings_per_kind": {"lora": 1, "serve": 1, "train": 1}},
            {"distinct_settings_per_kind": {"lora": 4, "serve": 6, "train": 2}},
        ],
    }
    line = next(line for line in render(result).splitlines() if line.startswith("Distinct settings"))
    assert line == (
        "Distinct settings (tensor_parallel, formats, kv_cache) the answers give each job kind, "
        "start → after: "
        "seed 0: lora 3 → 1, serve 2 → 1, train 3 → 1; seed 1: lora 3 → 4, serve 2 → 6, train 3 → 2."
    )
    del result["start"]["per_seed"][0]["distinct_settings_per_kind"]  # a result from before the counts
    assert "Distinct settings" not in render(result)
    assert "Distinct settings" not in render(_result())  # no per-seed summaries at all


def test_render_gives_each_seeds_placed_job_share_start_to_after_and_the_baselines():
    result = _result()
    result["start"] = {**result["start"], "per_seed": [{"placed_job_share": 0.62}]}  # shared by both seeds
    result["after"] = {**result["after"], "per_seed": [{"placed_job_share": 0.4}, {"placed_job_share": 1.0}]}
    result["baselines"] = {
        name: {**summary, "placed_job_share": 1.0} for name, summary in result["baselines"].items()
    }
    line = next(line for line in render(result).splitlines() if line.startswith("Share of each scenario"))
    assert line == (
        "Share of each scenario's jobs the answers place (gpus > 0), start → after: "
        "seed 0 0.62 → 0.40; seed 1 0.62 → 1.00; baselines: even_bf16 1.00."
    )
    del result["after"]["per_seed"][0]["placed_job_share"]  # a result from before the share
    assert "Share of each scenario" not in render(result)
    assert "Share of each scenario" not in render(_result())  # no per-seed summaries at all


def test_a_revision_result_of_the_history_still_renders_its_first_plans():
    """Revision episodes are retired (issue #69); their results, in history, keep their first-plan line."""
    path = REPO / "benchmarks/results/history/learning_smollm2_cpu_facts_revise.json"
    history = json.loads(path.read_text())
    line = next(line for line in render(history).splitlines() if line.startswith("Each answer is a revision"))
    assert "up to 3 plans" in line and "after − start" in line
    assert "revision episode" not in render(_result())


def test_render_from_the_command_line(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps(_result()))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.learning", "--render", str(path)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == render(_result())


# --- aggregation from saved seeds (--reuse), no training ----------------------------------------------


def _evaluation(percent: list[float]) -> dict:
    metrics = {name: [0.5] * len(percent) for name in METRICS} | {"percent_of_optimum": percent}
    return {"summary": {"num_scenarios": len(percent)}, "per_scenario": metrics, "samples": [], "wall_s": 2.0}


def _saved_seed(
    seed: int, fingerprint: dict, start: list[float], after: list[float], scenario_fingerprint: str
) -> dict:
    wall = {"warm_start": 5.0, "grpo": 10.0, "generation": 6.0, "reward": 1.0, "backward": 3.0, "setup": 1.0}
    return {
        "seed": seed,
        "fingerprint": fingerprint,
        "scenario_fingerprint": scenario_fingerprint,
        "start_model": f"outputs/x/seed-{seed}/warm-start",
        "global_step": 3,
        "warm_start": {"steps": 4, "target": "random"},
        "reward_curve": {"step": [1, 2, 3], "reward": [0.1, 0.2, 0.3]},
        "wall_s": wall | {"eval_start": 2.0, "eval_after": 2.0},
        "memory_gb_after_seed": {"rss_now": 1.0, "rss_peak": 2.0},
        "start": _evaluation(start),
        "after": _evaluation(after),
    }


def _reuse_args(tmp_path: Path) -> tuple:
    flags = ["--sft_target", "random", "--max_steps", "3"]
    args, train_flags = parse(
        ["--config", "configs/tiny_cpu.yaml", "--seeds", "0", "1", "--eval_scenarios", "3", "--reuse",
         "--output", str(tmp_path / "out.json"), "--work_dir", str(tmp_path), *flags]
    )  # fmt: skip
    fingerprint = {"config": "configs/tiny_cpu.yaml", "train_flags": train_flags, "settings": TINY_SETTINGS}
    return args, train_flags, fingerprint


@pytest.mark.parametrize(
    ("target", "fair"),
    [
        ("random_feasible", True),
        ("random_split", True),
        ("random", True),
        ("even_split", False),
        ("heuristic", False),
        ("optimal", False),
    ],
)
def test_a_start_that_imitates_the_optimum_or_the_even_baseline_is_no_fair_start(tmp_path, target, fair):
    """The issue's fair starts: zero-shot or random planners; never the answer or the baseline to beat."""
    no_model, zero_shot = SimpleNamespace(model_name_or_path=""), SimpleNamespace(sft_steps=0)
    assert learning_run._start_target(SimpleNamespace(sft_steps=40, sft_target=target), no_model) == target
    (tmp_path / "warm_start.json").write_text(json.dumps({"steps": 40, "target": target}))
    earlier = learning_run._start_target(zero_shot, SimpleNamespace(model_name_or_path=tmp_path))
    assert earlier == target and (earlier not in UNFAIR_START_TARGETS) is fair
    assert learning_run._start_target(zero_shot, no_model) is None
    on_top = learning_run._start_target(
        SimpleNamespace(sft_steps=40, sft_target="random"), SimpleNamespace(model_name_or_path=tmp_path)
    )
    assert on_top == ("random" if fair else target)  # a fair warm start on an unfair one is still unfair


def _save_seed(tmp_path: Path, seed: int, saved: dict) -> Path:
    (tmp_path / f"seed-{seed}").mkdir(exist_ok=True)
    path = tmp_path / f"seed-{seed}" / "learning_seed.json"
    path.write_text(json.dumps(saved))
    return path


def test_reuse_aggregates_saved_seeds_without_training(tmp_path, monkeypatch):
    args, train_flags, fingerprint = _reuse_args(tmp_path)
    today = today_scenario_fingerprint(TINY_SETTINGS)
    for seed, start, after in (
        (0, [10.0, 20.0, 30.0], [20.0, 20.0, 40.0]),
        (1, [0.0, 0.0, 0.0], [10.0, 0.0, 5.0]),
    ):
        _save_seed(tmp_path, seed, _saved_seed(seed, fingerprint, start, after, today))
    retrained = lambda *arguments: pytest.fail("a saved seed was retrained")  # noqa: E731
    monkeypatch.setattr(learning_run, "train_seed", retrained)
    result = run(args, train_flags, ["python", "-m", "benchmarks.learning"])
    assert result["seeds"] == [0, 1] and result["grpo_steps"] == 3 and result["fair_start"] is True
    assert result["delta_percent_points"] == pytest.approx((20.0 + 15.0) / 6)  # per scenario: 10, 0, 7.5
    assert result["delta_per_seed"] == pytest.approx([20.0 / 3, 5.0])
    low, high = result["delta_ci95"]
    assert 0.0 <= low <= result["delta_percent_points"] <= high <= 10.0
    assert result["start"]["mean_percent_of_optimum"] == pytest.approx(10.0)
    assert result["after"]["mean_percent_of_optimum"] == pytest.approx(95.0 / 6)
    # the preset (an NF4 base) with the flags
    assert result["start"]["policy"] == "800-step SFT warm start on random plans (NF4 base)"
    assert result["wall_s"]["generation"] == 12.0 and result["wall_s"]["eval_after"] == 4.0
    assert result["reward_curve"]["1"]["reward"] == [0.1, 0.2, 0.3]
    assert result["git"]["commit"] and REQUIRED_KEYS <= set(result)
    assert result["scenario_fingerprint"] == today
    assert list(result["baselines"]) == list(BASELINE_NAMES)
    assert all(
        len(percent) == 3 for percent in result["per_scenario"]["baseline_percent_of_optimum"].values()
    )
    text = render(result)
    assert text.startswith("| policy |") and "| baseline: heuristic |" in text


def test_reuse_retrains_a_seed_evaluated_on_other_scenarios(tmp_path, monkeypatch, capsys):
    args, train_flags, fingerprint = _reuse_args(tmp_path)
    today = today_scenario_fingerprint(TINY_SETTINGS)
    _save_seed(tmp_path, 0, _saved_seed(0, fingerprint, [10.0, 20.0, 30.0], [20.0, 20.0, 40.0], today))
    stale = _save_seed(tmp_path, 1, _saved_seed(1, fingerprint, [0.0] * 3, [90.0] * 3, "0" * 16))
    trained = []

    def fake_train_seed(seed, config, flags, output_dir):
        trained.append(seed)
        output_dir.mkdir(parents=True, exist_ok=True)
        argv = ["--config", config, *flags, "--seed", str(seed), "--output_dir", str(output_dir),
                "--eval_scenarios", "0", "--report_to", "none"]  # fmt: skip
        wall = {"warm_start": 5.0, "grpo": 10.0, "generation": 6.0, "reward": 1.0, "backward": 3.0}
        return argv, {"global_step": 3, "warm_start": None, "reward_curve": {"reward": [0.1]},
                      "wall_s": wall | {"setup": 1.0}}  # fmt: skip

    def fake_evaluate(base, adapter, settings, parsed):
        return _evaluation([0.0, 0.0, 0.0] if adapter is None and base.endswith("warm-start") else [3.0] * 3)

    monkeypatch.setattr(learning_run, "train_seed", fake_train_seed)
    monkeypatch.setattr(learning_run, "evaluate", fake_evaluate)
    result = run(args, train_flags, ["python", "-m", "benchmarks.learning"])
    assert trained == [1]  # seed 0 matches today's scenarios and is kept
    assert f"not reusing {stale}" in capsys.readouterr().err
    assert json.loads(stale.read_text())["scenario_fingerprint"] == today
    assert result["delta_per_seed"] == pytest.approx(
        [20.0 / 3, 3.0]
    )  # the retrained seed's, not the stale +90


# --- scenario fingerprint and baselines ---------------------------------------------------------------


def _settings(scenarios: int = 2, prompt_style: str = "compact") -> dict:
    return TINY_SETTINGS | {"eval_scenarios": scenarios, "prompt_style": prompt_style}


def test_scenario_fingerprint_is_deterministic_and_moves_with_the_panel_rewards(monkeypatch):
    rows = eval_rows(_settings())
    first = scenario_fingerprint.scenario_fingerprint(rows)
    assert first == scenario_fingerprint.scenario_fingerprint(eval_rows(_settings()))
    assert len(first) == 16 and int(first, 16) >= 0
    real = scenario_fingerprint.fleet_reward

    def shifted(by: float):
        def reward(completions, scenarios, **kwargs):
            return [value + by for value in real(completions, scenarios, **kwargs)]

        return reward

    monkeypatch.setattr(scenario_fingerprint, "fleet_reward", shifted(1e-12))  # below the 9 decimals kept
    assert scenario_fingerprint.scenario_fingerprint(rows) == first
    monkeypatch.setattr(scenario_fingerprint, "fleet_reward", shifted(1e-6))
    assert scenario_fingerprint.scenario_fingerprint(rows) != first
    monkeypatch.setattr(scenario_fingerprint, "fleet_reward", real)
    assert scenario_fingerprint.scenario_fingerprint(eval_rows(_settings(prompt_style="full"))) != first
    assert scenario_fingerprint.scenario_fingerprint(eval_rows(_settings(scenarios=3))) != first


def test_the_panel_is_fixed_and_over_allocates_every_job(monkeypatch):
    row = eval_rows(_settings(scenarios=1))[0]
    answers = scenario_fingerprint.panel_answers(row)
    assert list(answers) == ["even_bf16", "heuristic", "random_split", "random_feasible", "random", "optimal",
                             "give_up", "all_gpus"]  # fmt: skip
    assert answers["give_up"] == '```json\n{"jobs":[]}\n```'
    scenario = json.loads(row["scenario"])
    count = len(scenario["jobs"])
    plan = json.loads(answers["all_gpus"].split("\n")[1])
    assert len(plan["jobs"]) == count and all(part["tensor_parallel"] == 1 for part in plan["jobs"])
    assert answers == scenario_fingerprint.panel_answers(row | {"seed": 12345})  # seed 0 whatever the row's


def test_fingerprint_flag_prints_it_alone_on_the_last_line(capsys):
    import yaml

    from fleet_rl.training.dataset import scenario_rows
    from fleet_rl.training.heldout import EVAL_DATASET_SEED

    assert main(["--fingerprint", "--config", "configs/tiny_cpu.yaml", "--eval_scenarios", "2"]) is None
    last = capsys.readouterr().out.strip().splitlines()[-1]
    preset = yaml.safe_load((REPO / "configs" / "tiny_cpu.yaml").read_text())
    rows = scenario_rows(
        preset["tasks"], 2, dataset_seed=EVAL_DATASET_SEED, split="eval", prompt_style=preset["prompt_style"]
    )  # the rows the benchmark evaluates on with these flags
    assert last == scenario_fingerprint.scenario_fingerprint(rows) == today_scenario_fingerprint(_settings())


def test_baselines_are_scored_like_the_policies(monkeypatch):
    from fleet_rl import baselines

    rows = eval_rows(_settings())  # two easy rows

    def first_only(scenario, seed=0):
        return optimal(scenario) if seed == rows[0]["seed"] else {"jobs": []}

    monkeypatch.setitem(baselines.BASELINES, "even_bf16", optimal)  # 100 % on both rows
    monkeypatch.setitem(baselines.BASELINES, "heuristic", first_only)  # 100 % then gives up: 50 %
    monkeypatch.setitem(baselines.BASELINES, "random_feasible", lambda scenario, seed=0: {"jobs": []})
    summaries, percents = baseline_summaries(rows)
    assert list(summaries) == list(percents) == ["even_bf16", "heuristic", "random_feasible"]
    assert percents == {
        "even_bf16": pytest.approx([100.0, 100.0]),
        "heuristic": pytest.approx([100.0, 0.0]),
        "random_feasible": [0.0, 0.0],
    }
    for name, mean in (("even_bf16", 100.0), ("heuristic", 50.0), ("random_feasible", 0.0)):
        summary = summaries[name]
        assert {key for key, _, _ in METRICS.values()} <= set(summary)
        assert summary["policy"] == f"baseline {name}" and summary["num_scenarios"] == 2
        assert summary["mean_percent_of_optimum"] == pytest.approx(mean)
        assert summary["per_task"]["easy"]["mean_percent_of_optimum"] == pytest.approx(mean)
    assert summaries["even_bf16"]["feasible_rate"] == 1.0 and summaries["random_feasible"]["ird_rate"] == 1.0


# --- end to end on the tiny preset --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_tiny_preset_end_to_end(tmp_path):
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "2",
    }
    output = tmp_path / "learning_tiny.json"
    command = [
        sys.executable, "-m", "benchmarks.learning", "--config", "configs/tiny_cpu.yaml",
        "--seeds", "0", "1", "--eval_scenarios", "4", "--eval_batch_size", "4",
        "--output", str(output), "--work_dir", str(tmp_path / "work"),
        "--model_name_or_path", str(tmp_path / "tiny"), "--sft_steps", "4", "--sft_num_examples", "32",
        "--sft_target", "random_feasible", "--num_prompts", "16", "--max_steps", "2",
        "--per_device_train_batch_size", "4", "--max_completion_length", "32",
        "--disable_tqdm", "true", "--log_completions", "false", "--save_steps", "1",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1100)
    assert done.returncode == 0, done.stderr[-4000:]
    first_s = time.perf_counter() - started
    result = json.loads(output.read_text())
    assert REQUIRED_KEYS <= set(result)
    assert result["seeds"] == [0, 1] and result["eval_scenarios"] == 4 and result["fair_start"] is True
    assert result["grpo_steps"] == 2 and result["command"].startswith(
        "python -m benchmarks.learning --config"
    )
    low, high = result["delta_ci95"]
    assert low <= result["delta_percent_points"] <= high
    means = result["after"]["mean_percent_of_optimum"] - result["start"]["mean_percent_of_optimum"]
    assert result["delta_percent_points"] == pytest.approx(means)
    for side in ("start", "after"):
        assert 0.0 <= result[side]["mean_percent_of_optimum"] <= 100.0
        assert all(
            0.0 <= result[side][key] <= 1.0 for key in ("valid_plan_rate", "feasible_rate", "ird_rate")
        )
        assert [summary["num_scenarios"] for summary in result[side]["per_seed"]] == [4, 4]
    assert [len(row) for row in result["per_scenario"]["start_percent_of_optimum"]] == [4, 4]
    for seed in ("0", "1"):
        curve = result["reward_curve"][seed]
        assert curve["step"] == [1, 2] and len(curve["rewards/fleet_reward/mean"]) == 2
    assert [warm["target"] for warm in result["warm_start"]] == ["random_feasible", "random_feasible"]
    wall = result["wall_s"]
    assert wall["generation"] > 0 and wall["reward"] >= 0 and wall["backward"] > 0 and wall["warm_start"] > 0
    assert wall["generation"] + wall["reward"] + wall["backward"] == pytest.approx(wall["grpo"])
    assert wall["eval_start"] > 0 and wall["eval_after"] > 0 and wall["total"] <= first_s
    assert result["cpu"]["cores"] >= 1 and result["versions"]["trl"]
    assert all(memory["rss_peak"] > 0 for memory in result["memory_gb_after_seed"])
    assert done.stdout.splitlines()[0].startswith(
        "| policy |"
    )  # stdout is the table; training logs go to stderr

    seed0 = json.loads((tmp_path / "work" / "seed-0" / "learning_seed.json").read_text())
    assert len(seed0["after"]["completions"]) == 4  # every held-out answer, kept with the seed

    # --reuse keeps both finished seeds: same numbers, no training; it adds checkpoint-1's answers
    again = subprocess.run(
        [*command, "--reuse", "--eval_checkpoints", "1"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-4000:]
    reused = json.loads(output.read_text())
    assert reused["delta_percent_points"] == result["delta_percent_points"]
    assert reused["per_scenario"] == result["per_scenario"]
    assert "reusing seed 0" in again.stderr and "training in" not in again.stderr
    at_step_1 = reused["checkpoints"]["1"]
    assert [summary["num_scenarios"] for summary in at_step_1["per_seed"]] == [4, 4]
    assert 0.0 <= at_step_1["percent_of_optimum"] <= 100.0 and len(at_step_1["minus_start"]["per_seed"]) == 2

    # seed 1 as if killed after its first step: --reuse resumes it from checkpoint-1
    seed1 = tmp_path / "work" / "seed-1"
    kept_s = json.loads((seed1 / "checkpoint-1" / TIMINGS_FILE).read_text())["grpo_s"]
    shutil.rmtree(seed1 / "checkpoint-2")
    for name in ("learning_seed.json", "adapter_config.json", "adapter_model.safetensors"):
        (seed1 / name).unlink()
    resumed = subprocess.run(
        [*command, "--reuse"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "reusing seed 0" in resumed.stderr and "seed 1: resuming the interrupted run" in resumed.stderr
    result = json.loads(output.read_text())
    assert result["resumed_from"] == [None, "checkpoint-1"] and result["grpo_steps"] == 2
    assert result["reward_curve"]["1"]["step"] == [1, 2]  # the kept step's log and the resumed one's
    wall = result["wall_s"]["per_seed"][1]
    assert wall["grpo"] > kept_s > 0
    assert wall["generation"] + wall["reward"] + wall["backward"] == pytest.approx(wall["grpo"])


def test_a_start_from_an_earlier_warm_start_is_named(tmp_path):
    from types import SimpleNamespace

    (tmp_path / "warm_start.json").write_text(json.dumps({"steps": 40, "target": "random_split"}))
    script_args = SimpleNamespace(sft_steps=0, sft_target="random_split")
    model_args = SimpleNamespace(model_name_or_path=str(tmp_path), load_in_4bit=True)
    described = learning_run._start_description(script_args, model_args)
    assert described == f"an earlier 40-step SFT warm start on random_split plans ({tmp_path}) (NF4 base)"
    model_args.model_name_or_path, model_args.load_in_4bit = str(tmp_path / "absent"), False
    assert learning_run._start_description(script_args, model_args) == "base model, zero-shot"


# --- earlier checkpoints (--eval_checkpoints) ----------------------------------------------------------


def test_reuse_adds_the_checkpoints_a_finished_run_lacks_and_renders_them(tmp_path, monkeypatch):
    args, train_flags, fingerprint = _reuse_args(tmp_path)
    args.eval_checkpoints = [2]
    today = today_scenario_fingerprint(TINY_SETTINGS)
    paths = {}
    for seed, start, after in ((0, [10.0, 20.0, 30.0], [20.0, 20.0, 40.0]), (1, [0.0] * 3, [10.0, 0.0, 5.0])):
        saved = _saved_seed(seed, fingerprint, start, after, today)
        saved["train_argv"] = ["--config", "configs/tiny_cpu.yaml", *train_flags, "--seed", str(seed),
                               "--output_dir", str(tmp_path / f"seed-{seed}")]  # fmt: skip
        paths[seed] = _save_seed(tmp_path, seed, saved)
        (tmp_path / f"seed-{seed}" / "checkpoint-2").mkdir()
        (tmp_path / f"seed-{seed}" / "checkpoint-2" / "adapter_config.json").write_text("{}")
    evaluated = []

    def fake_evaluate(base, adapter, settings, parsed):
        evaluated.append((base, adapter))
        return _evaluation([15.0, 20.0, 35.0] if "seed-0" in adapter else [5.0, 0.0, 5.0])

    monkeypatch.setattr(learning_checkpoints, "evaluate", fake_evaluate)
    monkeypatch.setattr(learning_run, "train_seed", lambda *a: pytest.fail("a saved seed was retrained"))
    result = run(args, train_flags, ["python", "-m", "benchmarks.learning"])
    assert evaluated == [  # the LoRA checkpoint on the seed's start
        (f"outputs/x/seed-{seed}/warm-start", str(tmp_path / f"seed-{seed}" / "checkpoint-2"))
        for seed in (0, 1)
    ]
    step = result["checkpoints"]["2"]
    assert step["percent_of_optimum"] == pytest.approx(80.0 / 6)
    assert step["minus_start"]["per_seed"] == pytest.approx([10.0 / 3, 10.0 / 3])
    assert step["final_minus_this"]["mean"] == pytest.approx(95.0 / 6 - 80.0 / 6)
    assert "2" in json.loads(paths[0].read_text())["checkpoints"]  # stored with the seed
    line = next(line for line in render(result).splitlines() if line.startswith("Earlier checkpoints"))
    assert "step 2: 13.3 %, +3.3" in line and "(+3.3, +3.3)" in line and "the final policy +2.5" in line

    evaluated.clear()
    run(args, train_flags, ["python", "-m", "benchmarks.learning"])
    assert evaluated == []  # already there: nothing evaluated again
    args.eval_checkpoints = [1]
    with pytest.raises(SystemExit, match=r"checkpoint-1 is missing \(checkpoints there: \[2\]\)"):
        run(args, train_flags, ["python", "-m", "benchmarks.learning"])
    assert "Earlier checkpoints" not in render(_result())  # results without them render as before
