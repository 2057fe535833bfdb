"""benchmarks/process_memory.py: this process's RSS, and a child found by its command line."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

from benchmarks.process_memory import PeakRss, child_pid_with, rss_mb


def test_rss_grows_with_memory_held():
    before = rss_mb(os.getpid())
    held = np.ones(64 * 1024 * 1024 // 8)  # 64 MiB, touched
    after = rss_mb(os.getpid())
    assert before is not None and after - before > 50
    del held


def test_a_missing_process_has_no_rss():
    assert rss_mb(2**22 + 12345) is None


def test_the_child_is_found_by_its_arguments():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "marker-3141"])
    try:
        assert child_pid_with("-c", "marker-3141") == child.pid
        assert child_pid_with("-c", "marker-2718") is None
    finally:
        child.kill()
        child.wait()


def test_peak_rss_sees_memory_freed_before_the_span_ends():
    with PeakRss(interval_s=0.005) as peak:
        peak.take()
        held = np.ones(256 * 1024 * 1024 // 8)  # 256 MiB, touched, then freed inside the span
        time.sleep(0.05)
        del held
        during = peak.take()
        time.sleep(0.05)
        after = peak.take()
    now = rss_mb(os.getpid()) / 1024
    assert during - now > 0.2  # the span saw the array the RSS no longer holds
    assert after < during - 0.2  # a new span starts from today's RSS
