"""benchmarks/kernel/speed.py runs and reports every field the README quotes."""

from __future__ import annotations

import json

import pytest

from benchmarks.kernel import speed


def test_quick_run_prints_one_json_object(capsys):
    speed.main(["--json", "--quick", "--plans", "2000"])
    result = json.loads(capsys.readouterr().out)
    for key in (
        "json_loads_plans_per_s",
        "kernel_plans_per_s",
        "kernel_vs_json_loads",
        "evaluate_p50_us",
        "evaluate_p99_us",
        "cpu_model",
        "cpu_count",
        "distinct_optimal_plans",
    ):
        assert key in result
    assert set(result["solve_ms"]) == {"easy", "medium", "hard", "multiagent"}
    assert result["plans"] == 2000 and result["kernel_plans_per_s"] > 0
    assert result["distinct_optimal_plans"] >= 15
    # fleet_reward end to end vs json.loads of the completions' JSON payloads (keys only, no timing asserts)
    reward = result["reward"]
    for key in (
        "reward_completions_per_s",
        "reward_us_per_completion",
        "json_loads_per_s",
        "json_loads_of",
        "reward_vs_json_loads",
    ):
        assert key in reward
    assert reward["completions"] == 20 * reward["completions_per_call"] == 20 * 128
    assert reward["reward_completions_per_s"] > 0 and reward["json_loads_per_s"] > 0


def test_the_reward_benchmark_needs_a_call(capsys):
    with pytest.raises(SystemExit) as exit_info:
        speed.main(["--quick", "--reward-calls", "0"])
    assert exit_info.value.code == 2 and "at least 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="at least 1 call"):
        speed.reward_run(0)
