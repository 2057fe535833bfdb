"""The benchmark command runs and reports every field the README quotes."""

from __future__ import annotations

import json

from fleet_rl import bench


def test_bench_quick_prints_one_json_object(capsys):
    bench.main(["--json", "--quick", "--plans", "2000"])
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
