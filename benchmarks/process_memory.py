"""A process's resident memory and CPU time, and finding the child process a benchmark started (Linux
``/proc``).

    pid = child_pid_with("fleet_rl.server", "--port", "50123")   # the server this process started
    rss_mb(pid)                                                   # its resident set size in MiB
    cpu_s(pid)                                                    # its CPU time so far (user + system)
    with PeakRss() as peak: ...; peak.take()                     # this process's highest RSS in a span (GiB)

Both read ``/proc`` only (no psutil dependency) and return ``None`` where it is missing, so a benchmark
reports "not measured" rather than failing on another OS.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["PeakRss", "child_pid_with", "cpu_s", "rss_mb"]

_PROC = Path("/proc")


def rss_mb(pid: int) -> float | None:
    """The resident set size (``VmRSS``) of process ``pid`` in MiB, or None if it cannot be read."""
    try:
        with open(_PROC / str(pid) / "status", encoding="utf-8") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024  # the kernel reports kB (KiB)
    except (OSError, ValueError, IndexError):
        return None
    return None


def cpu_s(pid: int) -> float | None:
    """The CPU time (user + system, all threads) process ``pid`` has used so far in seconds, or None."""
    try:
        fields = (_PROC / str(pid) / "stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (14, 15)
    except (OSError, ValueError, IndexError):
        return None


def child_pid_with(*args: str) -> int | None:
    """The pid of a child of this process whose command line holds every one of ``args``, or None."""
    parent = os.getpid()
    try:
        entries = [entry for entry in _PROC.iterdir() if entry.name.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            stat = (entry / "stat").read_text(encoding="utf-8")
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # the process ended while we looked
        parent_pid = int(stat.rsplit(")", 1)[1].split()[1])  # field 4, after the command name in ( )
        words = {word.decode("utf-8", "replace") for word in command}
        if parent_pid == parent and all(arg in words for arg in args):
            return int(entry.name)
    return None


class PeakRss:
    """This process's highest resident memory over a span, in GiB: a daemon thread reads ``VmRSS`` every
    ``interval_s`` while the ``with`` block runs, and ``take()`` returns the highest reading (and the reading
    now, if higher) since the last ``take()``, then starts a new span. ``ru_maxrss`` only ever rises, so it
    cannot say which part of a run reached it; this can. A peak shorter than ``interval_s`` can be missed.
    ``take()`` returns None where ``/proc`` is missing."""

    def __init__(self, interval_s: float = 0.02) -> None:
        self.interval_s = interval_s
        self._peak_mb: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        now = rss_mb(os.getpid())
        if now is None:
            return
        with self._lock:
            self._peak_mb = now if self._peak_mb is None else max(self._peak_mb, now)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> PeakRss:
        self._sample()
        self._thread = threading.Thread(target=self._run, name="peak-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def take(self) -> float | None:
        """The span's highest RSS in GiB (None without ``/proc``); the next span starts at the RSS now."""
        self._sample()
        with self._lock:
            peak, self._peak_mb = self._peak_mb, rss_mb(os.getpid())
        return None if peak is None else peak / 1024
