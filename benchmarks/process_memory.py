"""A process's resident memory and CPU time, and finding the child process a benchmark started (Linux
``/proc``).

    pid = child_pid_with("fleet_rl.server", "--port", "50123")   # the server this process started
    rss_mb(pid)                                                   # its resident set size in MiB
    cpu_s(pid)                                                    # its CPU time so far (user + system)

Both read ``/proc`` only (no psutil dependency) and return ``None`` where it is missing, so a benchmark
reports "not measured" rather than failing on another OS.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["child_pid_with", "cpu_s", "rss_mb"]

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
