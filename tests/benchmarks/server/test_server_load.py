"""benchmarks/server/load.py runs against a real server and reports the fields the README quotes."""

from __future__ import annotations

import json

import pytest

from benchmarks.server import load as server_load


def test_quick_run_prints_one_json_object(capsys):
    server_load.main(["--quick"])
    report = json.loads(capsys.readouterr().out)
    assert report["machine"]["cores"] >= 1 and report["machine"]["cpu"]
    assert report["ws_compression"] is False  # the server's default
    assert [level["sessions"] for level in report["levels"]] == [1, 16]
    for level in report["levels"]:
        assert level["steps"] == (40 if level["sessions"] == 1 else 80)
        assert level["steps_per_s"] > 0 and 0 < level["step_p50_ms"] <= level["step_p99_ms"]
        assert level["reset_p50_ms"] > 0
        # the server process worked for every episode; a reset and a step cost well under a second of CPU
        assert 0 < level["server_cpu_ms_per_episode"] < 1000 and 0 < level["client_cpu_ms_per_episode"] < 1000
    assert report["machine"]["git"]["commit"] and isinstance(report["machine"]["git"]["dirty"], bool)


def test_a_short_soak_reports_steps_errors_latency_and_memory(capsys):
    server_load.main(["--soak", "2", "--warmup-s", "1"])
    report = json.loads(capsys.readouterr().out)
    assert report["benchmark"] == "server_soak"
    assert len(report["machine"]["load_average_1_5_15_min_start"]) == 3
    assert len(report["machine"]["git"]["commit"]) == 40  # the code measured
    soak = report["soak"]
    assert soak["sessions"] == 16 and soak["warmup_s"] == 1 and soak["soak_s"] == 2
    assert soak["steps"] > 0 and soak["steps_per_s"] == round(soak["steps"] / 2, 1)
    assert soak["errors"] == 0, soak["error_samples"]
    assert 0 < soak["step_p50_ms"] <= soak["step_p99_ms"] and 0 < soak["reset_p50_ms"] <= soak["reset_p99_ms"]
    assert soak["server_pid_found"] and soak["rss_start_mb"] > 50 and soak["rss_end_mb"] > 50
    assert soak["rss_peak_mb"] >= max(soak["rss_start_mb"], soak["rss_end_mb"])
    growth = 100 * (soak["rss_end_mb"] / soak["rss_start_mb"] - 1)
    assert soak["rss_growth_percent"] == pytest.approx(growth, abs=0.2)  # from the unrounded figures
    times = [t for t, _ in soak["rss_samples_mb"]]
    assert times[0] == pytest.approx(0, abs=0.5) and times[-1] >= 2 and times == sorted(times)
    goal = report["goal"]
    assert goal["checks"]["long_enough"] is False and goal["met"] is False  # the goal is for 10 minutes
    assert goal["checks"]["no_errors"] is True


def test_soak_arguments_are_checked():
    for argv in (["--soak", "0"], ["--soak", "5", "--warmup-s", "-1"]):
        with pytest.raises(SystemExit):
            server_load.main(argv)


def test_a_quick_silent_run_reports_working_sessions_evictions_the_newcomer_and_memory(capsys):
    server_load.main(["--silent", "12", "--max-sessions", "20", "--quick"])  # 4 slots free for 12 silent
    report = json.loads(capsys.readouterr().out)
    assert report["benchmark"] == "server_load_silent"
    assert report["server"] == {"max_sessions": 20, "evict_silent_after_s": 1.0}
    working, silent = report["working"], report["silent"]
    assert working["sessions"] == 16 and working["errors"] == 0, working["error_samples"]
    for phase in ("alone", "during_flood", "after"):
        latency = working[phase]
        assert latency["steps"] > 0 and 0 < latency["step_p50_ms"] <= latency["step_p99_ms"]
    assert silent["connections"] == silent["held_a_session"] == 12 and silent["errors"] == 0
    assert silent["evicted"] >= 12 - 4  # all but the last 4 to get a slot made way for the next
    assert silent["refused_tries"] > 0  # while every silent session was younger than the threshold
    assert silent["close_reason_sample"].startswith("evicted: silent for ")
    assert silent["close_reason_sample"].endswith(" s while the server was full (20/20 sessions)")
    assert 0 < report["newcomer"]["served_after_s"] <= 1.0 + 2.0  # the threshold, and a margin
    assert report["goal"]["checks"]["newcomer_served"]
    assert all(report["server_rss_mb"][key] > 50 for key in ("before", "during_peak", "after"))
    assert set(report["goal"]["checks"]) == {
        "no_working_errors", "step_p99", "newcomer_served", "every_silent_connection_held_a_session",
    }  # fmt: skip


def test_silent_arguments_are_checked():
    for argv in (["--silent", "0"], ["--silent", "5", "--max-sessions", "16"]):  # 16: the working sessions
        with pytest.raises(SystemExit):
            server_load.main(argv)
