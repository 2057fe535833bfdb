"""benchmarks/server_load.py runs against a real server and reports the fields the README quotes."""

from __future__ import annotations

import json

from benchmarks import server_load


def test_quick_run_prints_one_json_object(capsys):
    server_load.main(["--quick"])
    report = json.loads(capsys.readouterr().out)
    assert report["machine"]["cores"] >= 1 and report["machine"]["cpu"]
    assert [level["sessions"] for level in report["levels"]] == [1, 16]
    for level in report["levels"]:
        assert level["steps"] == (40 if level["sessions"] == 1 else 80)
        assert level["steps_per_s"] > 0 and 0 < level["step_p50_ms"] <= level["step_p99_ms"]
        assert level["reset_p50_ms"] > 0
