"""``ServerPool``: the environment servers an episode may run on, and their health, shared between threads.

    pool = ServerPool(["http://10.0.0.5:8000", "http://10.0.0.6:8000"], call_timeout_s=30)
    url = pool.acquire()          # a healthy server, the least loaded (round robin among equals)
    ...                           # open a session there (fleet_rl/env/remote_episode.py does)
    pool.mark_down(url, "connection refused", error)   # the server failed: no new sessions there for now
    pool.release(url)             # the session is gone
    pool.failovers, pool.healthy_servers                 # counters for the training metrics

One pool serves every episode of a training run (``train_grpo.py`` makes it once and hands it to every
``FleetToolEnvironment``). It owns the choice of server, so nothing else keeps a counter:

- ``acquire`` picks the healthy server with the fewest sessions of this pool (ties in turn), and counts the
  session there until ``release``.
- ``mark_down`` takes a server out when a call to it failed (refused, reset, timed out, session lost, at
  capacity, session evicted: ``fleet_rl/env/server_faults.py`` says which errors count). A server that is
  down is retried with backoff (``retry_initial_s`` doubling up to ``retry_max_s``): once its retry is due,
  the next ``acquire`` or ``should_move`` has its ``/health`` asked in the background (within
  ``connect_timeout_s``), and it is re-admitted if it answers 200.
  ``mark_ok`` (a call succeeded) ends its streak of failures and resets the backoff.
- When every server is down, ``acquire`` waits for a retry to bring one back, but not forever: once every
  server has been failing for longer than ``all_down_timeout_s`` (counted from the start of the most recent
  server's streak of failures), it raises ``AllServersDown``, one line naming each server and its last
  error. A server that answers ``/health`` but fails every session (at capacity) does not reset that clock.

The timeouts are the pool's so that every session opened on its servers uses the same ones:
``connect_timeout_s`` for the WebSocket handshake and ``/health``, ``call_timeout_s`` for each answer.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.client import HTTPException

__all__ = [
    "DEFAULT_ALL_DOWN_TIMEOUT_S",
    "DEFAULT_CALL_TIMEOUT_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "AllServersDown",
    "ServerPool",
]

logger = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT_S = 10.0  # a handshake on a live server takes milliseconds, even across a region
DEFAULT_CALL_TIMEOUT_S = 30.0  # a step costs well under a millisecond of kernel time; 30 s is a hung server
DEFAULT_ALL_DOWN_TIMEOUT_S = 300.0  # long enough to restart a server by hand or by a supervisor


class AllServersDown(RuntimeError):
    """Every environment server has been down for longer than the pool's ``all_down_timeout_s``."""


@dataclass
class _Server:
    """One server's health as the pool sees it."""

    url: str
    healthy: bool = True
    sessions: int = 0  # sessions of this pool open on it
    failures: int = 0  # consecutive failures; 0 after a successful call
    failing_since: float = 0.0  # time.monotonic() of the first failure of the current streak
    retry_at: float = 0.0  # when a server that is down may next be asked /health
    probing: bool = False  # a thread is asking its /health now
    last_error: str = ""


class ServerPool:
    """Environment servers and their health, safe to share between threads (see the module docstring)."""

    def __init__(
        self,
        base_urls: Sequence[str],
        *,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
        all_down_timeout_s: float = DEFAULT_ALL_DOWN_TIMEOUT_S,
        retry_initial_s: float = 1.0,
        retry_max_s: float = 30.0,
        first: int = 0,
        clock: Callable[[], float] = time.monotonic,
        health_check: Callable[[str, float], str | None] | None = None,
    ) -> None:
        urls = [url.rstrip("/") for url in base_urls]
        if not urls:
            raise ValueError("a server pool needs at least one base URL")
        if len(set(urls)) != len(urls):
            raise ValueError(f"a server pool's base URLs must differ, got {urls}")
        for name, value in (
            ("connect_timeout_s", connect_timeout_s),
            ("call_timeout_s", call_timeout_s),
            ("all_down_timeout_s", all_down_timeout_s),
            ("retry_initial_s", retry_initial_s),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if retry_max_s < retry_initial_s:
            raise ValueError(f"retry_max_s ({retry_max_s}) must be >= retry_initial_s ({retry_initial_s})")
        self.connect_timeout_s = connect_timeout_s
        self.call_timeout_s = call_timeout_s
        self.all_down_timeout_s = all_down_timeout_s
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s
        self._servers = [_Server(url) for url in urls]
        self._turn = first % len(urls)  # where the round robin among equally loaded servers goes next
        self._failovers = 0
        self._last_error = ""
        self._clock = clock
        self._health_error = health_check or health_error  # (url, timeout_s) -> None or what went wrong
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a server came back or a probe finished

    @property
    def base_urls(self) -> list[str]:
        return [server.url for server in self._servers]

    @property
    def failovers(self) -> int:
        """Episodes moved to another server so far (``record_failover``)."""
        with self._lock:
            return self._failovers

    @property
    def healthy_servers(self) -> int:
        with self._lock:
            return sum(server.healthy for server in self._servers)

    def sessions(self) -> dict[str, int]:
        """Sessions of this pool open on each server."""
        with self._lock:
            return {server.url: server.sessions for server in self._servers}

    def record_failover(self) -> None:
        with self._lock:
            self._failovers += 1

    def acquire(self) -> str:
        """A healthy server for a new session (counted until ``release``); waits while every server is down,
        and raises ``AllServersDown`` once they have been down for longer than ``all_down_timeout_s``."""
        with self._lock:
            while True:
                self._start_due_probes()
                server = self._least_loaded()
                if server is not None:
                    server.sessions += 1
                    return server.url
                self._raise_if_all_down_too_long()
                self._changed.wait(timeout=self._wait_s())

    def release(self, url: str) -> None:
        """The session this pool counted on ``url`` is closed."""
        with self._lock:
            server = self._server(url)
            server.sessions = max(0, server.sessions - 1)

    def should_move(self, url: str) -> bool:
        """Whether a new episode on ``url`` would better start elsewhere: ``url`` is down, or another
        healthy server has at least two sessions fewer (a server re-admitted after a failure fills up again
        as episodes start)."""
        with self._lock:
            self._start_due_probes()
            server = self._server(url)
            if not server.healthy:
                return True
            fewest = min(other.sessions for other in self._servers if other.healthy)
            return server.sessions - fewest >= 2

    def mark_down(self, url: str, reason: str, error: BaseException | None = None) -> None:
        """A call to ``url`` failed for ``reason`` (the server's fault): no new sessions there until a retry
        finds it healthy."""
        detail = f"{reason}: {error}" if error is not None and str(error) else reason
        with self._lock:
            server = self._server(url)
            now = self._clock()
            if server.failures == 0:
                server.failing_since = now
            server.failures += 1
            server.last_error = detail
            self._last_error = f"{url}: {detail}"
            backoff_s = self._retry_delay_s(server)
            server.retry_at = now + backoff_s
            was_healthy, server.healthy = server.healthy, False
        if was_healthy:
            logger.warning("environment server %s is down (%s); retry in %.1f s", url, detail, backoff_s)

    def all_down_error(self) -> AllServersDown:
        """The error to stop with when no server has taken a call for ``all_down_timeout_s``: an episode
        raises it itself when its call keeps failing over that long, although some server looks healthy
        between its failures (full servers whose other sessions work)."""
        with self._lock:
            return self._all_down_error()

    def mark_ok(self, url: str) -> None:
        """A call to ``url`` succeeded: its streak of failures (and backoff) is over."""
        with self._lock:
            server = self._server(url)
            if server.failures:
                server.failures = 0
                server.healthy = True
                self._changed.notify_all()

    def __repr__(self) -> str:
        with self._lock:
            states = ", ".join(
                f"{server.url} {'up' if server.healthy else 'down'} ({server.sessions} sessions)"
                for server in self._servers
            )
        return f"ServerPool({states})"

    # --- under the lock ---

    def _server(self, url: str) -> _Server:
        url = url.rstrip("/")
        for server in self._servers:
            if server.url == url:
                return server
        raise KeyError(f"{url} is not in the pool ({', '.join(self.base_urls)})")

    def _least_loaded(self) -> _Server | None:
        count = len(self._servers)
        in_turn = [self._servers[(self._turn + offset) % count] for offset in range(count)]
        healthy = [server for server in in_turn if server.healthy]
        if not healthy:
            return None
        chosen = min(healthy, key=lambda server: server.sessions)  # the first in turn among the least loaded
        self._turn = (self._servers.index(chosen) + 1) % count
        return chosen

    def _start_due_probes(self) -> None:
        """Ask ``/health`` of each server that is down and due for a retry, in the background."""
        now = self._clock()
        for server in self._servers:
            if not server.healthy and not server.probing and server.retry_at <= now:
                server.probing = True
                threading.Thread(
                    target=self._probe, args=(server,), name=f"health {server.url}", daemon=True
                ).start()

    def _wait_s(self) -> float:
        """How long to sleep before something may have changed: the next retry, the all-down deadline."""
        now = self._clock()
        waiting = [server.retry_at - now for server in self._servers if not server.probing]
        deadline_s = self._all_down_deadline() - now
        return max(0.01, min([*waiting, deadline_s, 1.0]))

    def _all_down_deadline(self) -> float:
        return max(server.failing_since for server in self._servers) + self.all_down_timeout_s

    def _raise_if_all_down_too_long(self) -> None:
        if any(server.healthy or server.probing for server in self._servers):
            return
        if self._clock() < self._all_down_deadline():
            return
        raise self._all_down_error()

    def _all_down_error(self) -> AllServersDown:
        servers = ", ".join(server.url for server in self._servers)
        return AllServersDown(
            f"all {len(self._servers)} environment server(s) down for more than "
            f"{self.all_down_timeout_s:g} s ({servers}); last error: {self._last_error}"
        )

    def _retry_delay_s(self, server: _Server) -> float:
        return min(self.retry_max_s, self.retry_initial_s * 2 ** max(0, server.failures - 1))

    # --- without the lock (network) ---

    def _probe(self, server: _Server) -> None:
        """Ask ``server``'s ``/health``; re-admit it if it answers 200, else back off further."""
        error = "/health: no answer"
        try:
            error = self._health_error(server.url, self.connect_timeout_s)
        finally:
            with self._lock:
                server.probing = False
                if error is None:
                    server.healthy = True  # its failures stay counted until a call succeeds (mark_ok)
                    logger.warning("environment server %s answers /health again: re-admitted", server.url)
                else:
                    server.failures += 1
                    server.last_error = error
                    self._last_error = f"{server.url}: {error}"
                    server.retry_at = self._clock() + self._retry_delay_s(server)
                self._changed.notify_all()


def health_error(url: str, timeout_s: float) -> str | None:
    """``None`` if ``url``'s ``/health`` answers 200 within ``timeout_s``, else what went wrong."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_s) as response:
            return None if response.status == 200 else f"/health answered {response.status}"
    except (OSError, HTTPException) as error:  # refused, reset, timed out, not HTTP
        return f"/health: {getattr(error, 'reason', None) or error}"
