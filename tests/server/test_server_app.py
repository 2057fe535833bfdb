"""The server app in-process (FastAPI's TestClient): fleet routes, WebSocket episodes, and 4xx for every
kind of bad request, after which the server keeps serving."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from fleet_rl import Scenario
from fleet_rl.baselines import heuristic
from fleet_rl.env import FleetAction, FleetEnvironment
from fleet_rl.scenario_generator import TASKS
from fleet_rl.server import create_fleet_app
from fleet_rl.server.app import WEB_README_PATH

BASELINE_NAMES = ("even_bf16", "heuristic", "random", "random_split", "random_feasible", "optimal")


@pytest.fixture(scope="module")
def client():
    with TestClient(create_fleet_app(web=False, max_sessions=4, max_body_bytes=64 * 1024)) as client:
        yield client


def _healthy(client) -> None:
    assert client.get("/health").json() == {"status": "healthy"}


def test_tasks_lists_tiers_modes_and_limits(client):
    body = client.get("/tasks").json()
    assert list(body["tasks"]) == list(TASKS)
    assert body["tasks"]["hard"]["job_count"] == [4, 5]
    assert body["modes"] == ["single", "refine"]
    assert body["limits"]["max_turns"] == 16


@pytest.mark.parametrize("task", TASKS)
def test_baseline_scores_each_planner_and_the_optimum_earns_one(task, client):
    body = client.get("/baseline", params={"task": task, "seed": 5}).json()
    assert body["baselines"]["optimal"]["reward"] == pytest.approx(1.0)
    assert body["baselines"]["optimal"]["percent_of_optimum"] == pytest.approx(100.0)
    assert set(body["baselines"]) == set(BASELINE_NAMES)
    assert all(0.0 <= score["reward"] <= 1.0 for score in body["baselines"].values())
    assert (body["agent"] != "") == (task == "multiagent")


def test_grader_replays_an_episode_exactly(client):
    env = FleetEnvironment()
    observation = env.reset(task="hard", seed=9, mode="refine", max_turns=3)
    plans = ["{}", json.dumps(heuristic(Scenario.from_json(observation.scenario)))]
    rewards = [env.step(FleetAction(plan=plan, final=i == 1)).reward for i, plan in enumerate(plans)]
    log = {"task": "hard", "seed": 9, "mode": "refine", "max_turns": 3, "plans": plans}
    first, second = client.post("/grader", json=log).json(), client.post("/grader", json=log).json()
    assert first == second
    assert first["step_rewards"] == pytest.approx(rewards)
    assert first["episode_reward"] == pytest.approx(env.state.episode_reward)
    assert first["turns"] == 2


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "detail"),
    [
        (
            "post",
            "/step",
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
            422,
            "JSON",
        ),
        ("post", "/step", {"json": {"action": {"plan": 5}}}, 422, "string"),
        ("post", "/step", {"json": {"action": {"plan": "{}", "colour": "red"}}}, 422, "Extra inputs"),
        ("post", "/step", {"json": {"action": {"plan": "{}"}}}, 409, "call reset first"),
        ("post", "/reset", {"json": {"task": "impossible"}}, 400, "unknown task 'impossible'"),
        ("post", "/reset", {"json": {"seed": "seven"}}, 422, "integer"),
        ("post", "/reset", {"json": {"seed": 1, "mode": "refine", "max_turns": 99}}, 400, "max_turns"),
        ("post", "/step", {"json": {"action": {"plan": "x" * 70_000}}}, 413, "larger than 65536 bytes"),
        ("post", "/step", {"json": {"action": {"plan": "x" * 30_000}}}, 422, "at most 20000 characters"),
        ("post", "/grader", {"json": {"task": "easy", "plans": ["{}"]}}, 422, "seed"),
        ("post", "/grader", {"json": {"task": "easy", "seed": 1, "plans": []}}, 422, "at least 1"),
        ("post", "/grader", {"json": {"task": "easy", "seed": 1, "plans": ["{}"] * 17}}, 422, "at most 16"),
        (
            "post",
            "/grader",
            {"json": {"task": "easy", "seed": 1, "plans": ["{}", "{}"]}},
            400,
            "ended at turn 1",
        ),
        ("post", "/grader", {"json": {"task": "nope", "seed": 1, "plans": ["{}"]}}, 400, "unknown task"),
        ("get", "/baseline", {"params": {"task": "easy"}}, 422, "seed"),
        ("get", "/baseline", {"params": {"task": "easy", "seed": -3}}, 422, "greater than or equal"),
        ("get", "/baseline", {"params": {"task": "medium", "seed": 1, "agent": "x"}}, 400, "only for"),
    ],
)
def test_bad_http_requests_get_a_4xx_with_a_clear_message(client, method, path, kwargs, status, detail):
    response = getattr(client, method)(path, **kwargs)
    assert response.status_code == status, response.text
    assert detail in response.text
    _healthy(client)


def test_a_chunked_body_over_the_limit_is_refused(client):
    def chunks():
        for _ in range(100):
            yield b"x" * 1024

    response = client.post("/grader", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    _healthy(client)


def test_a_websocket_episode_and_its_errors(client):
    with client.websocket_connect("/ws") as ws:
        ws.send_text(json.dumps({"type": "step", "data": {"plan": "{}"}}))
        assert "call reset first" in ws.receive_json()["data"]["message"]
        ws.send_text("{not json")
        assert ws.receive_json()["data"]["code"] == "INVALID_JSON"
        ws.send_text(json.dumps({"type": "reset", "data": {"task": "nope"}}))
        assert "unknown task 'nope'" in ws.receive_json()["data"]["message"]
        ws.send_text(json.dumps({"type": "reset", "data": {"task": "medium", "seed": 3, "mode": "refine"}}))
        reset = ws.receive_json()["data"]
        assert reset["observation"]["seed"] == 3 and reset["done"] is False
        ws.send_text(json.dumps({"type": "step", "data": {"plan": 12}}))
        assert ws.receive_json()["data"]["code"] == "VALIDATION_ERROR"
        ws.send_text(json.dumps({"type": "step", "data": {"plan": "{}", "final": True}}))
        step = ws.receive_json()["data"]
        assert step["done"] is True and step["reward"] == pytest.approx(0.005)
        ws.send_text(json.dumps({"type": "step", "data": {"plan": "{}"}}))
        assert "episode is done" in ws.receive_json()["data"]["message"]
        ws.send_text(json.dumps({"type": "state"}))
        state = ws.receive_json()["data"]
        assert state["plan_rewards"] == [pytest.approx(0.005)] and state["done"] is True
    _healthy(client)


def test_sessions_beyond_the_limit_are_refused_and_the_others_go_on(client):
    sockets = [client.websocket_connect("/ws") for _ in range(4)]
    opened = [socket.__enter__() for socket in sockets]
    try:
        for ws in opened:  # a session exists once its first message is answered
            ws.send_text(json.dumps({"type": "reset", "data": {"task": "easy", "seed": 1}}))
            assert ws.receive_json()["type"] == "observation"
        with client.websocket_connect("/ws") as extra:
            assert extra.receive_json()["data"]["code"] == "CAPACITY_REACHED"
        opened[0].send_text(json.dumps({"type": "step", "data": {"plan": "{}"}}))
        assert opened[0].receive_json()["data"]["done"] is True
    finally:
        for socket in sockets:
            socket.__exit__(None, None, None)
    _healthy(client)


def test_the_web_ui_is_served_at_web():
    with TestClient(create_fleet_app(web=True)) as client:
        assert client.get("/web/").status_code == 200
        assert client.post("/web/step", json={"action": {"plan": "{}"}}).status_code == 409
        assert client.post("/web/reset", json={}).status_code == 200
        assert client.post("/web/step", json={"action": {"plam": "{}"}}).status_code == 422
        response = client.post("/web/step", json={"action": {"plan": "{}"}})
        assert response.status_code == 200 and response.json()["done"] is True


def test_the_web_page_describes_the_environment_from_its_readme():
    """openenv titles the page from the metadata; without a README it says "FleetEnvironment environment"."""
    with TestClient(create_fleet_app(web=True)) as client:
        metadata = client.get("/web/metadata").json()
    assert metadata["readme_content"] == WEB_README_PATH.read_text()
    assert "press Reset" in metadata["readme_content"].split("\n\n")[1]
