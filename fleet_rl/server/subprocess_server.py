"""Run the server in a child process for as long as a ``with`` block: tests, benchmarks and examples.

    with server_process(max_sessions=32) as base_url:    # e.g. "http://127.0.0.1:50123"
        with FleetEnv(base_url=base_url).sync() as env: ...

It picks a free port on 127.0.0.1, starts ``python -m fleet_rl.server`` (no web UI unless asked), waits for
``/health`` and stops the process on exit (SIGTERM, then SIGKILL after 10 s). If the server dies or does
not answer within ``startup_timeout_s``, ``RuntimeError`` carries the tail of its log.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

__all__ = ["free_port", "server_process"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def server_process(
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    web: bool = False,
    startup_timeout_s: float = 120.0,
    extra_args: tuple[str, ...] = (),
) -> Iterator[str]:
    """Yield the base URL of a server running in a child process (see the module docstring)."""
    port = port or free_port(host)
    args = [
        sys.executable,
        "-m",
        "fleet_rl.server",
        "--host",
        host,
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    args += [] if web else ["--no-web"]
    args += list(extra_args)
    base_url = f"http://{host}:{port}"
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            _wait_healthy(process, base_url, startup_timeout_s, log)
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_healthy(process: subprocess.Popen, base_url: str, timeout_s: float, log) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode}:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"{base_url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the server did not answer /health within {timeout_s:.0f} s:\n{_tail(log)}")


def _tail(log, chars: int = 4000) -> str:
    log.flush()
    log.seek(0)
    return log.read()[-chars:]
