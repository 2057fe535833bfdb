"""A real server process on 127.0.0.1: 16 concurrent client sessions × 5 episodes, each on the scenario the
generator draws for its task and seed and each reward equal to the in-process training reward, no session
seeing another's state; bad frames and refused requests get a clear error and leave the server serving."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest
import websockets

from fleet_rl.baselines import even_bf16, heuristic, random_split
from fleet_rl.env.client import FleetAction, FleetEnv
from fleet_rl.prompts import format_answer
from fleet_rl.scenario_generator import make_scenario
from fleet_rl.server.subprocess_server import server_process
from fleet_rl.training.dataset import planner_answer
from rewards import fleet_reward

SESSIONS, EPISODES = 16, 5
TASKS = ("easy", "medium", "hard", "multiagent")


@pytest.fixture(scope="module")
def base_url():
    with server_process(extra_args=("--max-sessions", "32", "--max-body-bytes", "65536")) as url:
        yield url


def _answers(observation, episode: int) -> list[str]:
    row = {
        "scenario": observation.scenario,
        "seed": observation.seed,
        "agent": observation.agent,
        "given_plan": observation.given_plan,
    }
    planners = (heuristic, even_bf16, random_split)
    good = format_answer(planner_answer(planners[episode % 3], row))
    return ["garbage {", good] if episode % 2 else [good]


async def _session(base_url: str, session: int) -> list[tuple[float, float]]:
    """Run EPISODES episodes; return (server reward, in-process reward) for every step."""
    pairs = []
    async with FleetEnv(base_url=base_url) as env:
        for episode in range(EPISODES):
            task, seed = TASKS[(session + episode) % 4], 1000 * session + episode
            mode = "refine" if episode % 2 else "single"
            reset = await env.reset(task=task, seed=seed, mode=mode, max_turns=3)
            observation = reset.observation
            assert observation.scenario == make_scenario(task, seed, "train").to_json()
            previous, plan_rewards = None, []
            for turn, answer in enumerate(_answers(observation, episode), start=1):
                result = await env.step(FleetAction(plan=answer, final=turn == 2))
                expected = fleet_reward(
                    [answer],
                    [observation.scenario],
                    agent=[observation.agent],
                    given_plan=[observation.given_plan],
                )[0]
                step_expected = expected if previous is None else expected - previous - 0.01
                pairs.append((result.reward, step_expected))
                previous = expected
                plan_rewards.append(expected)
                state = await env.state()  # only this session's episode, never another's
                assert (state.task, state.seed, state.mode) == (task, seed, mode)
                assert state.plan_rewards == pytest.approx(plan_rewards, abs=1e-12)
            assert result.done and state.done
    return pairs


def test_sixteen_concurrent_sessions_get_the_in_process_rewards(base_url):
    async def run_all():
        return await asyncio.gather(*(_session(base_url, session) for session in range(SESSIONS)))

    results = asyncio.run(run_all())
    steps = [pair for pairs in results for pair in pairs]
    assert len(steps) == SESSIONS * (EPISODES + EPISODES // 2)
    for server_reward, in_process in steps:
        assert server_reward == pytest.approx(in_process, abs=1e-12)


async def _error_message(ws) -> str:
    frame = json.loads(await ws.recv())
    assert frame["type"] == "error", frame
    return frame["data"]["message"]


def test_bad_frames_and_requests_leave_the_server_serving(base_url):
    ws_url = base_url.replace("http://", "ws://") + "/ws"

    async def probe():
        async with websockets.connect(ws_url) as ws:  # a frame over the limit closes this connection only
            await ws.send(json.dumps({"type": "step", "data": {"plan": "x" * 100_000}}))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        async with websockets.connect(ws_url) as ws:
            await ws.send("not json at all")
            assert json.loads(await ws.recv())["data"]["code"] == "INVALID_JSON"
            await ws.send(json.dumps({"type": "launch"}))
            assert json.loads(await ws.recv())["data"]["code"] == "UNKNOWN_TYPE"
        async with websockets.connect(ws_url) as ws:  # refused requests: an error frame, the session goes on
            await ws.send(json.dumps({"type": "step", "data": {"plan": "{}"}}))
            assert "call reset first" in await _error_message(ws)
            await ws.send(json.dumps({"type": "reset", "data": {"task": "nope", "seed": 1}}))
            assert "unknown task 'nope'" in await _error_message(ws)
            await ws.send(json.dumps({"type": "reset", "data": {"task": "easy", "seed": 2}}))
            reset = json.loads(await ws.recv())
            assert reset["type"] == "observation" and reset["data"]["observation"]["seed"] == 2
            await ws.send(json.dumps({"type": "step", "data": {"plan": "{}", "final": True}}))
            assert json.loads(await ws.recv())["data"]["done"] is True
            await ws.send(json.dumps({"type": "step", "data": {"plan": "{}"}}))
            assert "episode is done" in await _error_message(ws)
            await ws.send(json.dumps({"type": "state"}))
            state = json.loads(await ws.recv())["data"]
            assert state["seed"] == 2 and state["done"] is True and len(state["plan_rewards"]) == 1

    asyncio.run(probe())
    request = urllib.request.Request(
        f"{base_url}/reset", data=b'{"task": 7}', method="POST", headers={"content-type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=10)
    assert error.value.code == 400
    with FleetEnv(base_url=base_url).sync() as env:  # the client raises the server's message, and goes on
        with pytest.raises(RuntimeError, match="call reset first"):
            env.step(FleetAction(plan="{}"))
        with pytest.raises(RuntimeError, match="unknown task 'impossible'"):
            env.reset(task="impossible", seed=1)
        assert env.reset(task="easy", seed=1).observation.task == "easy"
        assert env.step(FleetAction(plan="{}")).done
        with pytest.raises(RuntimeError, match="episode is done"):
            env.step(FleetAction(plan="{}"))
        assert env.reset(task="medium", seed=4).observation.seed == 4
