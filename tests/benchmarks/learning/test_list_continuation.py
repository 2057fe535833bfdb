"""benchmarks/learning/list_continuation.py: where an answer ends its first job, and how likely it goes on
there."""

from __future__ import annotations

import pytest

from benchmarks.learning import list_continuation
from fleet_rl.tiny_model import ensure_tiny_model


def test_the_first_entry_ends_where_the_brace_depth_returns_to_the_list():
    pieces = [
        '```json\n{"',
        'jobs":[{"id":"a","precision":{"mlp":"bf16"',
        "}",
        ',"kv_cache":"fp8"',
        "},",
        '{"id',
    ]
    assert list_continuation.first_entry_end(pieces) == 4
    assert list_continuation.first_entry_end(['{"jobs":[{"id":"a"', "}]}"]) == 1
    assert list_continuation.first_entry_end(["no plan here"]) is None


def test_the_targets_cue_is_read_from_their_plans():
    cues = list_continuation.target_cues(["random_feasible", "optimal"], 20)
    # random_feasible gives every GPU to a lone job and some to each of several: the GPU count alone says
    # when to close the list; the optimum may leave GPUs free, so it does not
    assert cues["random_feasible"] == {"easy": 1.0, "medium": 0.0}
    assert cues["optimal"]["easy"] < 1.0


@pytest.mark.slow
def test_a_model_gets_a_probability_per_scenario_that_closes_an_entry(tmp_path):
    model = str(ensure_tiny_model(tmp_path / "tiny"))
    argv = ["--model", model, "--scenarios", "3", "--prompt_style", "compact", "--targets", "optimal",
            "--target_rows", "4"]  # fmt: skip
    report = list_continuation.main(argv)
    assert len(report["p_go_on"]) == 3
    assert all(p is None or 0.0 <= p <= 1.0 for p in report["p_go_on"])
    assert sum(entry["scenarios"] for entry in report["by_job_count"].values()) <= 3
