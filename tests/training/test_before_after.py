"""The main job's closing table (``fleet_rl/training/before_after.py``): the baselines answer the held-out
rows the policy answered, and the table fits an 80-column terminal with its rows in the order given."""

from __future__ import annotations

from fleet_rl.training.before_after import (
    TABLE_BASELINES,
    TINY_MODEL_NOTE,
    baseline_summaries,
    before_after_table,
)


def test_baselines_are_scored_on_the_policys_rows():
    summaries = baseline_summaries(["easy", "medium"], 12)
    assert list(summaries) == list(TABLE_BASELINES)
    for summary in summaries.values():
        assert summary["num_scenarios"] == 12 and set(summary["per_task"]) <= {"easy", "medium"}
    assert (
        summaries["heuristic"]["mean_percent_of_optimum"] > summaries["even_bf16"]["mean_percent_of_optimum"]
    )


def test_the_table_fits_80_columns_in_the_given_order():
    baseline = baseline_summaries(["hard"], 4)["even_bf16"]
    rows = {"start (before GRPO)": baseline, "after GRPO": baseline, "a baseline with a long name": baseline}
    lines = before_after_table(rows, num_scenarios=4, tasks=["hard"]).splitlines()
    assert lines[0] == "Held-out: 4 scenarios (hard), greedy"
    assert [line[: len(name)] for line, name in zip(lines[2:], rows, strict=True)] == list(rows)
    assert max(map(len, lines)) <= 80
    assert lines[2].split()[-4:] == [
        f"{baseline['mean_percent_of_optimum']:.1f}",
        f"{baseline['valid_plan_rate']:.2f}",
        f"{baseline['feasible_rate']:.2f}",
        f"{baseline['ird_rate']:.2f}",
    ]


def test_the_tiny_models_table_ends_with_what_to_read_from_it():
    baseline = baseline_summaries(["easy"], 2)["even_bf16"]
    rows = {"start (before GRPO)": baseline, "after GRPO": baseline}
    lines = before_after_table(rows, num_scenarios=2, tasks=["easy"], note=TINY_MODEL_NOTE).splitlines()
    assert lines[-1] == TINY_MODEL_NOTE and len(lines) == 2 + len(rows) + 1
    assert "pipeline runs" in TINY_MODEL_NOTE and "SmolLM2" in TINY_MODEL_NOTE
    assert "python -m benchmarks.learning" in TINY_MODEL_NOTE and len(TINY_MODEL_NOTE) <= 80
    assert before_after_table(rows, num_scenarios=2, tasks=["easy"]).splitlines()[-1].startswith("after GRPO")
