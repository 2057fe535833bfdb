"""ServerPool without a network: choice of server, health, backoff, re-admission, the all-down error; and
which errors are the server's fault (server_faults)."""

from __future__ import annotations

import threading
import time

import pytest
from websockets.exceptions import ConnectionClosed

from fleet_rl.env.client import ServerFull, SessionEvicted
from fleet_rl.env.remote_episode import RemoteEpisode, retry_pause_s
from fleet_rl.env.server_faults import SessionLost, server_fault
from fleet_rl.env.server_pool import AllServersDown, ServerPool
from fleet_rl.server.subprocess_server import free_port

A, B, C = "http://a:8000", "http://b:8000", "http://c:8000"


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


class FakeHealth:
    """``/health`` answers: a URL in ``down`` does not answer; records every probe."""

    def __init__(self, *down: str) -> None:
        self.down = set(down)
        self.probed: list[str] = []

    def __call__(self, url: str, timeout_s: float) -> str | None:
        self.probed.append(url)
        return "/health: refused" if url in self.down else None


def _wait_until(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


def test_the_least_loaded_server_in_turn():
    pool = ServerPool([A, B, C], health_check=FakeHealth())
    assert [pool.acquire() for _ in range(6)] == [A, B, C, A, B, C]
    pool.release(B)
    assert pool.acquire() == B  # the only one with fewer sessions
    assert pool.sessions() == {A: 2, B: 2, C: 2}
    assert ServerPool([A, B, C], first=2, health_check=FakeHealth()).acquire() == C


def test_a_server_marked_down_gets_no_sessions_until_health_says_so_with_backoff():
    clock, health = FakeClock(), FakeHealth(A)
    pool = ServerPool([A, B], clock=clock, health_check=health, retry_initial_s=1.0, retry_max_s=4.0)
    pool.mark_down(A, "connection refused", ConnectionRefusedError("[Errno 111]"))
    assert pool.healthy_servers == 1
    assert [pool.acquire() for _ in range(3)] == [B, B, B] and health.probed == []  # not due yet
    for delay_s in (1.0, 2.0, 4.0, 4.0):  # doubling up to retry_max_s
        probes = health.probed.count(A)
        clock.now_s += delay_s - 0.01
        assert pool.acquire() == B
        time.sleep(0.05)
        assert health.probed.count(A) == probes  # not due yet
        clock.now_s += 0.01
        assert pool.acquire() == B  # due: probed in the background, still refused
        _wait_until(
            lambda probes=probes: health.probed.count(A) == probes + 1 and not pool._servers[0].probing
        )
    health.down.clear()
    clock.now_s += 4.0
    pool.acquire()
    _wait_until(lambda: pool.healthy_servers == 2)
    assert pool.acquire() == A  # re-admitted, and the least loaded
    pool.mark_ok(A)
    pool.mark_down(A, "call timed out")  # a new streak starts from the first delay again
    assert pool._servers[0].retry_at == clock.now_s + 1.0


def test_every_server_down_raises_one_line_naming_them_and_the_last_error_once_the_limit_passes():
    health = FakeHealth(A, B)
    pool = ServerPool(
        [A, B], all_down_timeout_s=0.3, retry_initial_s=0.05, retry_max_s=0.1, health_check=health
    )
    pool.mark_down(A, "connection refused", ConnectionRefusedError("[Errno 111] Connection refused"))
    pool.mark_down(B, "call timed out", TimeoutError())
    started = time.monotonic()
    with pytest.raises(AllServersDown) as raised:
        pool.acquire()
    assert 0.3 <= time.monotonic() - started < 2.0
    message = str(raised.value)
    assert message.startswith(
        f"all 2 environment server(s) down for more than 0.3 s ({A}, {B}); last error: "
    )
    assert message.endswith("/health: refused") and "\n" not in message
    assert health.probed  # it kept trying them while it waited


def test_a_server_that_comes_back_while_every_server_is_down_ends_the_wait():
    health = FakeHealth(A)
    pool = ServerPool([A], all_down_timeout_s=30, retry_initial_s=0.05, health_check=health)
    pool.mark_down(A, "session lost")
    threading.Timer(0.3, health.down.clear).start()
    started = time.monotonic()
    assert pool.acquire() == A
    assert time.monotonic() - started < 2.0 and pool.healthy_servers == 1


def test_a_server_that_answers_health_but_fails_every_session_does_not_reset_the_all_down_clock():
    pool = ServerPool([A], all_down_timeout_s=0.3, retry_initial_s=0.05, health_check=FakeHealth())
    started = time.monotonic()
    with pytest.raises(AllServersDown, match="at capacity"):
        while time.monotonic() - started < 5:  # an episode retrying a server at capacity
            url = pool.acquire()
            pool.mark_down(url, "at capacity")
            pool.release(url)
    assert time.monotonic() - started < 2.0


def test_new_episodes_move_to_a_server_with_two_sessions_fewer():
    pool = ServerPool([A, B], health_check=FakeHealth())
    for _ in range(4):
        pool.acquire()
    assert not pool.should_move(A)
    pool.release(B)
    assert not pool.should_move(A)  # one fewer: not worth a move
    pool.release(B)
    assert pool.should_move(A) and not pool.should_move(B)
    pool.mark_down(B, "connection reset")
    assert pool.should_move(B) and not pool.should_move(A)


def test_counters_and_threads():
    pool = ServerPool([A, B, C], health_check=FakeHealth())

    def churn():
        for _ in range(500):
            url = pool.acquire()
            pool.record_failover()
            pool.release(url)

    threads = [threading.Thread(target=churn) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert pool.sessions() == {A: 0, B: 0, C: 0} and pool.failovers == 4000 and pool.healthy_servers == 3


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="at least one base URL"):
        ServerPool([])
    with pytest.raises(ValueError, match="must differ"):
        ServerPool([A, A + "/"])
    with pytest.raises(ValueError, match="call_timeout_s must be > 0"):
        ServerPool([A], call_timeout_s=0)
    with pytest.raises(ValueError, match="retry_max_s"):
        ServerPool([A], retry_initial_s=5, retry_max_s=1)
    with pytest.raises(KeyError, match="not in the pool"):
        ServerPool([A]).release(B)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (RuntimeError("Server error: Server at capacity: 1/1 (code: CAPACITY_REACHED)"), "at capacity"),
        (RuntimeError("Server error: boom (code: FACTORY_ERROR)"), "could not create a session"),
        (RuntimeError("Server error: gone (code: SESSION_ERROR)"), "session error"),
        (RuntimeError("Server error: the episode is done (code: EXECUTION_ERROR)"), None),
        (RuntimeError("Server error: Invalid message (code: VALIDATION_ERROR)"), None),
        (RuntimeError("Server error: Invalid JSON (code: INVALID_JSON)"), None),
        (RuntimeError("something of ours"), None),
        (AllServersDown("all 2 environment server(s) down"), None),
        (ValueError("a bug"), None),
        (ConnectionRefusedError(111, "Connection refused"), "connection refused"),
        (ConnectionResetError(104, "Connection reset by peer"), "connection reset"),
        (ConnectionClosed(None, None), "connection reset"),
        (SessionLost("the session closed"), "session lost"),
        (ServerFull("the server at http://a:8000 is full (close code 1013)"), "at capacity"),
        (
            SessionEvicted("evicted: silent for 31.0 s (close code 4408)"),
            "session evicted (silent while the server was full)",
        ),
        (TimeoutError(), "call timed out"),
        (OSError(113, "No route to host"), "network error"),
    ],
)
def test_which_errors_are_the_servers_fault(error, reason):
    assert server_fault(error) == reason


def test_openenv_connect_errors_are_classified_by_their_cause():
    def wrapped(cause: BaseException) -> ConnectionError:
        try:
            raise ConnectionError(f"Failed to connect to ws://a:8000/ws: {cause}") from cause
        except ConnectionError as error:
            return error

    assert server_fault(wrapped(ConnectionRefusedError(111, "refused"))) == "connection refused"
    assert server_fault(wrapped(TimeoutError("timed out during opening handshake"))) == "connect timed out"
    assert server_fault(wrapped(ValueError("odd"))) == "connection failed"


def test_an_episode_every_server_refuses_stops_within_the_limit_though_health_looks_fine():
    refused = (
        f"http://127.0.0.1:{free_port()}"  # nothing listens; its /health "answers" (a full server's does)
    )
    pool = ServerPool([refused], connect_timeout_s=1, all_down_timeout_s=1, retry_initial_s=0.05,
                      health_check=FakeHealth())  # fmt: skip
    started = time.monotonic()
    with pytest.raises(AllServersDown, match="connection refused"):
        RemoteEpisode(pool).reset(task="easy", seed=1, mode="refine")
    assert time.monotonic() - started < 8
    assert pool.failovers >= 2


def test_retries_of_one_call_pause_longer_and_longer_up_to_5_s():
    assert [retry_pause_s(n) for n in range(1, 8)] == [0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 5.0]
