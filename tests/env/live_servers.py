"""Environment server processes a fault test can kill, stop and start again, and a server that never answers.

``fleet_rl.server.subprocess_server.server_process`` runs a server for a ``with`` block; a fault test needs
the process itself: ``LiveServer`` starts ``python -m fleet_rl.server`` on a fixed port of 127.0.0.1 and can
``kill`` it (SIGKILL: no goodbye to its clients) and ``start`` it again on the same port. ``start_all``
starts several at once (a server takes seconds to import on a busy machine). ``SilentServer`` accepts
connections and never answers a byte: a hung server.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterable

from fleet_rl.server.subprocess_server import free_port

__all__ = ["LiveServer", "SilentServer", "start_all"]


class LiveServer:
    """A fleet environment server on ``127.0.0.1:port`` in a child process."""

    def __init__(self, port: int | None = None, max_sessions: int = 64) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.max_sessions = max_sessions
        self.process: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile(mode="w+")

    def start(self) -> LiveServer:
        args = [
            sys.executable, "-m", "fleet_rl.server", "--host", "127.0.0.1", "--port", str(self.port),
            "--no-web", "--log-level", "warning", "--max-sessions", str(self.max_sessions),
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        return self

    def wait_healthy(self, timeout_s: float = 300.0) -> LiveServer:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server {self.url} exited with {self.process.returncode}:\n{self.tail()}")
            if answers_health(self.url):
                return self
            time.sleep(0.1)
        raise RuntimeError(f"server {self.url} not healthy within {timeout_s:.0f} s:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL: the process dies without closing its sockets politely."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, chars: int = 3000) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-chars:]


def answers_health(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


def start_all(servers: Iterable[LiveServer]) -> list[LiveServer]:
    """Start every server at once and wait for each; if one does not come up, stop them all."""
    servers = [server.start() for server in servers]
    try:
        return [server.wait_healthy() for server in servers]
    except BaseException:
        for server in servers:
            server.kill()
        raise


class SilentServer:
    """Listens on ``127.0.0.1:port``, accepts every connection, holds it open and never answers."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self._listener.close()
        for connection in self.accepted:
            connection.close()
