"""``RemoteEpisode``: an episode on an environment server of a ``ServerPool``, moved when its server fails.

    episode = RemoteEpisode(pool)
    episode.reset(task="easy", seed=3, scenario=..., mode="refine", max_turns=3, turn_cost=0.01)
    episode.step(FleetAction(plan=draft)).feedback      # a check
    episode.step(FleetAction(plan=answer, final=True))  # the answer
    episode.state.episode_reward

It makes the ``FleetEnvironment`` calls ``FleetToolEnvironment`` makes, over one WebSocket session
(``fleet_rl.env.client.FleetEnv``, with the pool's connect and call timeouts) on a server the pool picks.

Failover with replay: an episode is determined by its request (the ``reset`` parameters: the row's
scenario, task, seed and agent, the turns and their cost) and the drafts checked so far, and every server
scores with the same code. So when a call fails for a reason of the server's (``server_fault``: refused,
reset, timed out, session lost, at capacity, evicted), the episode marks that server down in the pool, opens a
session on the next healthy server, resets it with the same request, checks the same drafts again (their
rewards must come out equal, else ``ReplayMismatch``), and retries the call: its answer, and the episode
reward, are exactly what the lost session would have given. This repeats (after the first move with a
growing pause, ``retry_pause_s``) until a server takes the call, or ``AllServersDown`` is raised: by the
pool when every server has been down for ``all_down_timeout_s``, or by the episode when its call has been
failing over that long (every server full, say, while their other sessions work). A request's own fault
(an error frame about the request) is raised as it is, with no failover.

A closed socket is a lost session: openenv's client would reconnect on the next call, to a new session
without the episode in it (``_EpisodeSession`` refuses to, and the episode is replayed instead). A socket
the server closed to evict the session (it was full, and the session silent while the model wrote its next
turn) raises ``SessionEvicted`` and is replayed the same way.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.protocol import State

from fleet_rl.env.client import FleetEnv
from fleet_rl.env.models import FleetAction, FleetObservation, FleetState
from fleet_rl.env.server_faults import SessionLost, server_fault
from fleet_rl.env.server_pool import ServerPool

__all__ = ["RemoteEpisode", "ReplayMismatch", "retry_pause_s"]

logger = logging.getLogger(__name__)


class ReplayMismatch(RuntimeError):
    """An episode replayed on another server scored its drafts differently: the servers run different code."""


class RemoteEpisode:
    """One episode at a time on a server of ``pool``, failing over with replay (see the module docstring).
    Connects on first use (TRL builds instances before it runs them)."""

    def __init__(self, pool: ServerPool) -> None:
        self._pool = pool
        self._url: str | None = None
        self._client = None  # the sync client of the open session
        self._request: dict[str, Any] | None = None  # the current episode's reset parameters
        self._drafts: list[FleetAction] = []  # its checks that the server took, in order
        self._state = FleetState()

    @property
    def base_url(self) -> str | None:
        """The server the episode's session is on (None before the first call)."""
        return self._url

    @property
    def state(self) -> FleetState:
        return self._state

    def reset(self, **request) -> FleetObservation:
        """Start a new episode (``FleetEnvironment.reset`` parameters); a new episode is also the moment to
        move to a less loaded server."""
        if self._url is not None and self._pool.should_move(self._url):
            self._leave(_close_in_background)  # its server may be down, and take its close timeout to answer
        self._request, self._drafts = None, []
        observation = self._call(lambda client: client.reset(**request).observation)
        self._request = dict(request)
        return observation

    def step(self, action: FleetAction) -> FleetObservation:
        """Score a plan (a draft, or the answer with ``final``)."""
        observation = self._call(lambda client: client.step(action).observation)
        if not action.final:
            self._drafts.append(action)
        return observation

    def close(self) -> None:
        if self._url is not None:
            self._leave(self._close)

    def _call(self, operation: Callable[[Any], FleetObservation]) -> FleetObservation:
        """``operation`` on the session, then its state; on a server fault, fail over and try again: at once
        the first time, then after a growing pause (``retry_pause_s``), and not for longer than the pool's
        ``all_down_timeout_s``."""
        failing_since, failovers = None, 0
        while True:
            try:
                client = self._session()
                observation = operation(client)
                state = client.state()
            except Exception as error:
                reason = server_fault(error)
                if reason is None:  # the request's own fault (or AllServersDown, ReplayMismatch): no failover
                    raise
                self._fail_over(reason, error)
                failovers += 1
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > self._pool.all_down_timeout_s:
                    raise self._pool.all_down_error() from error
                time.sleep(retry_pause_s(failovers))
                continue
            self._pool.mark_ok(self._url)
            self._state = state
            return observation

    def _session(self):
        """The open session, or a new one on a server the pool picks, with the episode replayed on it."""
        if self._client is not None:
            return self._client
        self._url = self._pool.acquire()
        self._client = _EpisodeSession(
            base_url=self._url,
            connect_timeout_s=self._pool.connect_timeout_s,
            message_timeout_s=self._pool.call_timeout_s,
        ).sync()
        self._client.connect()
        if self._request is not None:
            self._replay(self._client)
        return self._client

    def _replay(self, client) -> None:
        client.reset(**self._request)
        for draft in self._drafts:
            client.step(draft)
        replayed, lost = client.state().plan_rewards, self._state.plan_rewards[: len(self._drafts)]
        if replayed != lost:
            raise ReplayMismatch(
                f"the episode replayed on {self._url} scored its drafts {replayed}, not {lost} as before: "
                "do all environment servers run the same version of fleet_rl?"
            )

    def _fail_over(self, reason: str, error: BaseException) -> None:
        url = self._url
        self._pool.mark_down(url, reason, error)
        self._pool.record_failover()
        logger.info(
            "episode on %s failed (%s); re-created on the next healthy server, %d draft(s) replayed",
            url,
            reason,
            len(self._drafts) if self._request is not None else 0,
        )
        self._leave(_close_in_background)  # a failed server may take its close timeout to answer

    def _leave(self, close: Callable[[Any], None]) -> None:
        client, url = self._client, self._url
        self._client, self._url = None, None
        if url is not None:
            self._pool.release(url)
        if client is not None:
            close(client)

    @staticmethod
    def _close(client) -> None:
        with contextlib.suppress(Exception):
            client.close()


def retry_pause_s(failovers: int) -> float:
    """The pause before an episode's next try after ``failovers`` failed tries of one call: none after the
    first (move to the next server at once), then 0.25 s doubling up to 5 s, so an episode that every
    server refuses (all full) backs off instead of hammering them."""
    return 0.0 if failovers <= 1 else min(5.0, 0.25 * 2 ** (failovers - 2))


def _close_in_background(client) -> None:
    threading.Thread(target=RemoteEpisode._close, args=(client,), name="close-session", daemon=True).start()


class _EpisodeSession(FleetEnv):
    """``FleetEnv`` that never reconnects by itself once its session is open: a closed socket means the
    server-side episode is gone, which the episode handles by replaying it (``SessionLost``, or
    ``SessionEvicted`` when the server closed it to make room)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._opened = False

    async def _connect_async(self):
        ws = self._ws
        if self._opened and (ws is None or ws.state in (State.CLOSING, State.CLOSED)):
            self._raise_if_evicted()
            raise SessionLost(f"the session on {self._base_url} closed: its episode is gone")
        await super()._connect_async()
        self._opened = True
        return self
