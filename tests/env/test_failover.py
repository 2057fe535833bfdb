"""Episodes outlive their server: real server processes on 127.0.0.1 are killed, restarted, hung or full, or
evict a silent episode's session, and every episode still finishes with the in-process reward for the same
drafts and answer.

The CPU models never call the tool, so these drive the episodes by hand: ``reset(**row)``, ``check_plan``
with drafts, ``refinement_reward`` with the answer, as TRL would. Each test is bounded in time; a server
takes a few seconds to start (more on a busy machine), so each test starts its servers at once.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from fleet_rl.baselines import even_bf16, heuristic
from fleet_rl.env.client import FleetEnv
from fleet_rl.env.models import FleetAction
from fleet_rl.env.remote_episode import RemoteEpisode
from fleet_rl.env.server_pool import AllServersDown, ServerPool
from fleet_rl.env.trl_environment import FleetToolEnvironment, refinement_reward
from fleet_rl.prompts import format_answer
from fleet_rl.server.subprocess_server import free_port, server_process
from fleet_rl.training.dataset import planner_answer, scenario_rows
from tests.env.live_servers import LiveServer, SilentServer, start_all

pytestmark = pytest.mark.timeout(420)  # a server takes 3-60 s to start, on a busy machine more

ROWS = scenario_rows(["easy", "medium", "hard", "multiagent"], 12, dataset_seed=11)
TURNS, COST = 3, 0.05


@pytest.fixture(scope="module")
def steady():
    """The servers, started at once: ``roomy`` (64 sessions) and ``full`` (1 session) no test kills, and
    ``victim`` and ``restartable`` for the one test that kills each."""
    servers = {
        "roomy": LiveServer(),
        "full": LiveServer(max_sessions=1),
        "victim": LiveServer(),
        "restartable": LiveServer(),
    }
    start_all(servers.values())
    yield servers
    for server in servers.values():
        server.stop()


def _drafts(row) -> list[str]:
    return [format_answer(planner_answer(even_bf16, row)), "{not a plan"]


def _answer(row) -> str:
    return format_answer(planner_answer(heuristic, row))


def _in_process(row) -> tuple[list[str], float]:
    """The feedback and reward of the same episode run in process."""
    env = FleetToolEnvironment(max_turns=TURNS, turn_cost=COST)
    env.reset(**row)
    feedback = [env.check_plan(draft) for draft in _drafts(row)]
    return feedback, refinement_reward([_answer(row)], environments=[env])[0]


def _server_of(env: FleetToolEnvironment) -> str:
    return env._env.base_url


def test_killing_the_server_mid_episode_moves_each_episode_and_keeps_its_reward(steady):
    victim, survivor = steady["victim"], steady["roomy"]
    pool = ServerPool([victim.url, survivor.url], connect_timeout_s=2, call_timeout_s=5)
    envs = [FleetToolEnvironment(TURNS, COST, pool=pool) for _ in ROWS]
    feedback = []
    for env, row in zip(envs, ROWS, strict=True):
        env.reset(**row)
        feedback.append([env.check_plan(_drafts(row)[0])])  # one draft checked on the first server
    assert set(pool.sessions().values()) == {len(ROWS) // 2}  # least loaded: half on each
    moved = [env for env in envs if _server_of(env) == victim.url]
    victim.kill()

    for env, row, seen in zip(envs, ROWS, feedback, strict=True):
        seen.append(env.check_plan(_drafts(row)[1]))  # the second draft: on the survivor, after a replay
    rewards = refinement_reward([_answer(row) for row in ROWS], environments=envs)

    for row, seen, reward in zip(ROWS, feedback, rewards, strict=True):
        expected_feedback, expected_reward = _in_process(row)
        assert seen == expected_feedback
        assert reward == expected_reward  # exactly: the same request, the same drafts, the same code
    assert {_server_of(env) for env in envs} == {survivor.url}
    assert pool.failovers == len(moved) == len(ROWS) // 2 and pool.healthy_servers == 1
    assert all(env.checks == 2 for env in envs)


def test_a_server_stopped_and_started_again_on_the_same_port_takes_sessions_again(steady):
    server, other = steady["restartable"], steady["roomy"]
    restarted = LiveServer(port=server.port)
    try:
        pool = ServerPool([server.url], connect_timeout_s=2, call_timeout_s=5, retry_initial_s=0.2)
        env = FleetToolEnvironment(TURNS, COST, pool=pool)
        row = ROWS[1]
        env.reset(**row)
        first = env.check_plan(_drafts(row)[0])
        server.stop()

        def restart_soon():  # the episode's next call finds its only server down and waits for it
            time.sleep(1.0)
            restarted.start()

        threading.Thread(target=restart_soon, daemon=True).start()
        second = env.check_plan(_drafts(row)[1])  # waits (retried with backoff), then replays there
        reward = refinement_reward([_answer(row)], environments=[env])[0]
        assert ([first, second], reward) == _in_process(row)
        assert pool.failovers == 1 and pool.healthy_servers == 1 and _server_of(env) == server.url

        # With two servers: the restarted one is re-admitted, and new episodes move back to it.
        pool = ServerPool([server.url, other.url], connect_timeout_s=2, call_timeout_s=5, retry_initial_s=0.2)
        envs = [FleetToolEnvironment(TURNS, COST, pool=pool) for _ in range(4)]
        for env, row in zip(envs, ROWS, strict=False):
            env.reset(**row)
        restarted.stop()
        for env, row in zip(envs, ROWS, strict=False):
            env.check_plan(_drafts(row)[0])  # the two episodes on the stopped server move to the other
        assert pool.sessions() == {server.url: 0, other.url: 4} and pool.healthy_servers == 1
        restarted.start().wait_healthy()
        time.sleep(0.5)  # its retry is due
        for env, row in zip(envs, ROWS[4:], strict=False):
            env.reset(**row)  # a new episode starts on the less loaded server once /health answers
        deadline = time.monotonic() + 10
        while pool.healthy_servers < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        for env, row in zip(envs, ROWS[8:], strict=False):
            env.reset(**row)
        assert pool.healthy_servers == 2 and pool.sessions() == {server.url: 2, other.url: 2}
        rows = ROWS[8:12]
        for env, row in zip(envs, rows, strict=True):
            assert [env.check_plan(draft) for draft in _drafts(row)] == _in_process(row)[0]
        rewards = refinement_reward([_answer(row) for row in rows], environments=envs)
        assert rewards == [_in_process(row)[1] for row in rows]
    finally:
        restarted.stop()


def test_a_server_that_accepts_and_never_answers_times_out_and_the_episode_fails_over(steady):
    silent, server = SilentServer(), steady["roomy"]
    try:
        pool = ServerPool([silent.url, server.url], connect_timeout_s=1, call_timeout_s=2)  # silent first
        env = FleetToolEnvironment(TURNS, COST, pool=pool)
        row = ROWS[2]
        started = time.monotonic()
        env.reset(**row)
        assert time.monotonic() - started < 10  # the handshake timed out after 1 s, then the live server
        assert silent.accepted  # it did accept the connection
        seen = [env.check_plan(draft) for draft in _drafts(row)]
        reward = refinement_reward([_answer(row)], environments=[env])[0]
        assert (seen, reward) == _in_process(row)
        assert pool.failovers == 1 and pool.healthy_servers == 1 and _server_of(env) == server.url
    finally:
        silent.close()


def test_a_server_at_capacity_sends_the_episode_to_another_server(steady):
    full, roomy = steady["full"], steady["roomy"]
    pool = ServerPool([full.url, roomy.url], connect_timeout_s=2, call_timeout_s=5)
    envs = [FleetToolEnvironment(TURNS, COST, pool=pool) for _ in range(3)]
    rows = ROWS[: len(envs)]
    for env, row in zip(envs, rows, strict=True):
        env.reset(**row)  # the third goes to `full` (its turn, equal load) and is refused there
    for env, row in zip(envs, rows, strict=True):
        assert [env.check_plan(draft) for draft in _drafts(row)] == _in_process(row)[0]
    rewards = refinement_reward([_answer(row) for row in rows], environments=envs)
    assert rewards == [_in_process(row)[1] for row in rows]
    assert [_server_of(env) for env in envs] == [full.url, roomy.url, roomy.url]
    assert pool.failovers == 1
    for env in envs:
        env._env.close()  # free `full`'s one session for the next test


def test_an_episode_evicted_while_silent_on_a_full_server_is_replayed(caplog):
    extra_args = ("--max-sessions", "1", "--evict-silent-after-s", "0.5")
    with server_process(extra_args=extra_args) as url, caplog.at_level(logging.INFO):
        pool = ServerPool([url], connect_timeout_s=2, call_timeout_s=5, retry_initial_s=0.2)
        env = FleetToolEnvironment(TURNS, COST, pool=pool)
        row = ROWS[3]
        env.reset(**row)
        first = env.check_plan(_drafts(row)[0])
        time.sleep(0.8)  # the model writes its next turn, and another client comes
        with FleetEnv(base_url=url).sync() as newcomer:
            newcomer.reset(task="easy", seed=1)  # the server is full: the silent episode makes way
        second = env.check_plan(_drafts(row)[1])  # its socket was closed (4408): replayed, then checked
        reward = refinement_reward([_answer(row)], environments=[env])[0]
        assert ([first, second], reward) == _in_process(row)
        assert pool.failovers == 1 and pool.healthy_servers == 1
        assert "(session evicted (silent while the server was full))" in caplog.text


def test_a_requests_own_fault_is_not_a_server_fault(steady):
    pool = ServerPool([steady["roomy"].url], connect_timeout_s=2, call_timeout_s=5)
    episode = RemoteEpisode(pool)
    with pytest.raises(RuntimeError, match="unknown task"):  # EpisodeError on the server: 400
        episode.reset(task="impossible", seed=1, mode="refine")
    row = ROWS[0]
    env = FleetToolEnvironment(TURNS, COST, pool=pool)
    env.reset(**row)
    refinement_reward([_answer(row)], environments=[env])
    with pytest.raises(RuntimeError, match="episode is done"):  # a step after done: 409
        env._env.step(FleetAction(plan="{}"))
    assert pool.failovers == 0 and pool.healthy_servers == 1


def test_every_server_down_is_one_clear_error_within_the_configured_time():
    silent = SilentServer()
    refused = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    try:
        pool = ServerPool(
            [refused, silent.url], connect_timeout_s=0.5, call_timeout_s=1, all_down_timeout_s=2,
            retry_initial_s=0.2, retry_max_s=0.5,
        )  # fmt: skip
        env = FleetToolEnvironment(TURNS, COST, pool=pool)
        started = time.monotonic()
        with pytest.raises(AllServersDown) as raised:
            env.reset(**ROWS[0])
        elapsed_s = time.monotonic() - started
        assert 2 <= elapsed_s < 6, elapsed_s  # the limit, plus at most a probe's timeout or two
        message = str(raised.value)
        assert "\n" not in message and refused in message and silent.url in message
        assert message.startswith("all 2 environment server(s) down for more than 2 s")
        assert "last error: http://127.0.0.1:" in message
        assert pool.healthy_servers == 0
    finally:
        silent.close()
