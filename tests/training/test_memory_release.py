"""fleet_rl/training/memory_release.py: freed heap pages go back to the kernel; the callback releases at a
step's end and after an evaluation."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from benchmarks.process_memory import rss_mb
from fleet_rl.training import memory_release
from fleet_rl.training.memory_release import ReleaseFreedMemory, release_freed_memory

glibc_only = pytest.mark.skipif(
    memory_release._malloc_trim() is None, reason="glibc's malloc_trim (Linux) is not here"
)


@glibc_only
def test_freed_small_blocks_leave_the_process_once_released():
    # 64 KiB blocks sit below glibc's mmap threshold: freed, the heap keeps their pages until a trim
    held = [np.ones(8000) for _ in range(8000)]  # ~500 MiB
    kept = held[::100]  # a few live blocks spread over the heap: the freed pages are not all at its top
    del held
    before = rss_mb(os.getpid())
    assert release_freed_memory() is True
    after = rss_mb(os.getpid())
    assert before - after > 300, (before, after)
    assert all(block.sum() == 8000 for block in kept)  # live memory is left as it was


def test_elsewhere_nothing_is_released(monkeypatch):
    memory_release._malloc_trim.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert release_freed_memory() is False
    finally:
        memory_release._malloc_trim.cache_clear()


def test_the_callback_releases_at_step_end_and_after_evaluation(monkeypatch):
    calls = []
    monkeypatch.setattr(memory_release, "release_freed_memory", lambda: calls.append(1) or True)
    callback = ReleaseFreedMemory()
    callback.on_step_begin(None, None, None)
    assert calls == []
    callback.on_step_end(None, None, None)
    callback.on_evaluate(None, None, None)
    assert len(calls) == 2
