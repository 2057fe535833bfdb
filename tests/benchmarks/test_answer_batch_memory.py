"""benchmarks/answer_batch_memory.py on the tiny model: every way runs, each try reports its peak and time."""

from __future__ import annotations

import json

import pytest

from benchmarks import answer_batch_memory
from fleet_rl.tiny_model import ensure_tiny_model


def test_every_way_reports_a_peak_and_a_time(tmp_path, capsys):
    tiny = ensure_tiny_model(tmp_path / "tiny")
    result = answer_batch_memory.main(["--model", str(tiny), "--lengths", "300", "280", "--repeats", "1"])
    assert json.loads(capsys.readouterr().out) == result
    assert list(result["tries"]) == ["padded_batch", "one_at_a_time", "precomputed"]
    for name in result["tries"]:
        (only,) = result["tries"][name]
        assert only["peak_rss_gib"] > 0.05 and only["s"] >= 0


def test_answers_shorter_than_the_kept_logits_are_refused():
    with pytest.raises(SystemExit):
        answer_batch_memory.main(["--lengths", "100"])
