"""benchmarks/kernel/calibration.py prints the table the README carries, and its JSON."""

from __future__ import annotations

import json

from benchmarks.kernel import calibration
from fleet_rl.calibration import FIGURES


def test_json_has_every_figure_and_a_summary(capsys):
    calibration.main([])
    report = json.loads(capsys.readouterr().out)
    assert [f["id"] for f in report["figures"]] == [f.id for f in FIGURES]
    summary = report["summary"]
    assert summary["figures"] == len(FIGURES) == summary["fit"] + summary["check"]
    assert all(f["url"].startswith("https://") and f["quote"] for f in report["figures"])


def test_markdown_has_one_row_per_figure_and_the_summary_line(capsys):
    calibration.main(["--markdown"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| figure")]
    assert len(rows) == len(FIGURES)
    within, of, total = lines[-1].split()[:3]
    assert of == "of" and int(total) == len(FIGURES) and 0 <= int(within) <= len(FIGURES)
    assert "within 25 %" in lines[-1]
