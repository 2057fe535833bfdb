"""The server stays open to working clients (fleet_rl/server/eviction.py): while every session slot is taken,
a newcomer gets the slot of the session silent longest, if for the threshold or more; a session in use is
never closed for it, and with slots free silence closes nothing. In process (FastAPI's TestClient, one event
loop for every socket) with thresholds of a fraction of a second; then the client's errors against a live
server. The pool's replay of an evicted episode is in tests/env/test_failover.py."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from fleet_rl.env import FleetEnvironment
from fleet_rl.env.client import FleetAction, FleetEnv, ServerFull, SessionEvicted
from fleet_rl.server import create_fleet_app
from fleet_rl.server.eviction import EVICTED_CLOSE_CODE, SERVER_FULL_CLOSE_CODE
from fleet_rl.server.subprocess_server import server_process

pytestmark = pytest.mark.timeout(120)

RESET = {"type": "reset", "data": {"task": "easy", "seed": 3}}
STEP = {"type": "step", "data": {"plan": "{}"}}


def _app_client(max_sessions: int, evict_silent_after_s: float) -> TestClient:
    app = create_fleet_app(web=False, max_sessions=max_sessions, evict_silent_after_s=evict_silent_after_s)
    return TestClient(app)


def _reset(ws) -> dict:
    ws.send_json(RESET)
    answer = ws.receive_json()
    assert answer["type"] == "observation", answer
    return answer


def _refused(ws) -> str:
    """The error frame and close a refused newcomer gets; returns the error's message."""
    frame = ws.receive_json()
    assert frame["type"] == "error" and frame["data"]["code"] == "CAPACITY_REACHED", frame
    with pytest.raises(WebSocketDisconnect) as closed:
        ws.receive_json()
    assert closed.value.code == SERVER_FULL_CLOSE_CODE
    assert closed.value.reason.startswith("server full: ")
    return frame["data"]["message"]


def test_a_newcomer_takes_the_slot_of_the_longest_silent_session():
    with _app_client(max_sessions=2, evict_silent_after_s=0.3) as client:
        with client.websocket_connect("/ws") as oldest, client.websocket_connect("/ws") as younger:
            _reset(oldest)
            time.sleep(0.2)
            _reset(younger)
            time.sleep(0.4)  # both silent for 0.3 s or more; `oldest` the longest
            with client.websocket_connect("/ws") as newcomer:
                assert _reset(newcomer)["data"]["observation"]["seed"] == 3  # served at once
                with pytest.raises(WebSocketDisconnect) as closed:
                    oldest.receive_json()
                assert closed.value.code == EVICTED_CLOSE_CODE == 4408
                assert closed.value.reason.startswith("evicted: silent for 0.")
                assert closed.value.reason.endswith(" s while the server was full (2/2 sessions)")
                younger.send_json(STEP)  # the other silent session was left alone
                assert younger.receive_json()["data"]["done"] is True
                newcomer.send_json(STEP)
                assert newcomer.receive_json()["type"] == "observation"


def test_sessions_in_use_are_never_closed_and_the_newcomer_is_refused_as_before():
    with _app_client(max_sessions=2, evict_silent_after_s=5.0) as client:
        with client.websocket_connect("/ws") as first, client.websocket_connect("/ws") as second:
            _reset(first)
            _reset(second)  # both active within the threshold
            with client.websocket_connect("/ws") as newcomer:
                message = _refused(newcomer)
            assert message.startswith("Server at capacity: 2/2 sessions in use, none silent for 5 s or more")
            for ws in (first, second):  # both still serve their episodes
                ws.send_json(STEP)
                assert ws.receive_json()["data"]["done"] is True


def test_a_request_in_flight_is_in_use_however_long_it_takes(monkeypatch):
    started = threading.Event()
    original_reset = FleetEnvironment.reset

    def slow_reset(self, *args, **kwargs):  # runs in the session's worker thread
        started.set()
        time.sleep(0.8)
        return original_reset(self, *args, **kwargs)

    with _app_client(max_sessions=1, evict_silent_after_s=0.3) as client:
        with client.websocket_connect("/ws") as working:
            monkeypatch.setattr(FleetEnvironment, "reset", slow_reset)
            working.send_json(RESET)
            assert started.wait(10)
            time.sleep(0.4)  # its last frame is older than the threshold, but its answer is not sent yet
            with client.websocket_connect("/ws") as newcomer:
                _refused(newcomer)
            assert working.receive_json()["type"] == "observation"  # served, not evicted
            monkeypatch.setattr(FleetEnvironment, "reset", original_reset)
            time.sleep(0.4)  # now silent since its answer
            with client.websocket_connect("/ws") as newcomer:
                _reset(newcomer)
                with pytest.raises(WebSocketDisconnect) as closed:
                    working.receive_json()
                assert closed.value.code == EVICTED_CLOSE_CODE


def test_with_slots_free_silence_closes_nothing():
    with _app_client(max_sessions=3, evict_silent_after_s=0.2) as client:
        with client.websocket_connect("/ws") as silent:
            _reset(silent)
            time.sleep(0.4)
            with client.websocket_connect("/ws") as second, client.websocket_connect("/ws") as third:
                _reset(second)
                _reset(third)  # the last free slot: nobody had to make way
                silent.send_json(STEP)
                assert silent.receive_json()["data"]["done"] is True


def test_a_threshold_of_zero_turns_eviction_off():
    with _app_client(max_sessions=1, evict_silent_after_s=0) as client:
        with client.websocket_connect("/ws") as silent:
            _reset(silent)
            time.sleep(0.1)
            with client.websocket_connect("/ws") as newcomer:
                frame = newcomer.receive_json()
                assert frame["data"]["code"] == "CAPACITY_REACHED"
                with pytest.raises(WebSocketDisconnect) as closed:  # openenv's own refusal, unchanged
                    newcomer.receive_json()
                assert closed.value.code == 1000
            silent.send_json(STEP)
            assert silent.receive_json()["data"]["done"] is True


def test_the_client_says_when_the_server_is_full_and_when_its_session_was_evicted():
    with server_process(extra_args=("--max-sessions", "2", "--evict-silent-after-s", "1")) as base_url:
        first, second = FleetEnv(base_url=base_url).sync(), FleetEnv(base_url=base_url).sync()
        with first, second:
            first.reset(task="easy", seed=1)
            second.reset(task="easy", seed=2)
            with FleetEnv(base_url=base_url).sync() as newcomer:
                with pytest.raises(ServerFull, match="2/2 sessions in use, none silent for 1 s or more"):
                    newcomer.reset(task="easy", seed=3)  # both sessions active within the threshold
            time.sleep(1.3)
            with FleetEnv(base_url=base_url).sync() as newcomer:
                assert newcomer.reset(task="easy", seed=3).observation.seed == 3  # `first` made way
                evicted = (
                    r"evicted: silent for 1\.\d s while the server was full \(2/2 sessions\); close code 4408"
                )
                with pytest.raises(SessionEvicted, match=evicted):
                    first.step(FleetAction(plan="{}"))
                # told once: its next call opens a new session, for which `second` (silent longest) makes way
                assert first.reset(task="medium", seed=4).observation.seed == 4
                with pytest.raises(SessionEvicted, match="its episode is gone; reset to start a new session"):
                    second.state()
                assert newcomer.step(FleetAction(plan="{}")).done and first.step(FleetAction(plan="{}")).done
