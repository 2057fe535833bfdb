"""Room for working clients: when every session slot is taken, the longest-silent session makes way.

openenv's server keeps at most ``max_sessions`` WebSocket sessions at ``/ws`` and closes an idle one only
after ``session_timeout_s`` (600 s). So 64 connections that each sent one reset and then stayed silent
locked every other client out for ten minutes: a newcomer got ``CAPACITY_REACHED``. ``install_eviction``
changes that one case:

- When a newcomer finds every slot taken, the session that has been silent the longest is closed, if it
  has been silent for at least ``evict_silent_after_s``, and the newcomer takes its slot. Its WebSocket is
  closed with code ``EVICTED_CLOSE_CODE`` (4408: an application code, 4000 + HTTP's 408 Request Timeout)
  and a reason such as "evicted: silent for 42.3 s while the server was full (64/64 sessions)";
  ``fleet_rl.env.client.FleetEnv`` raises ``SessionEvicted`` for it.
- Silent means no frame in either direction for that long (WebSocket pings do not count: they are not
  use). A session with a request in flight (a frame received, its answer not yet sent) is in use however
  long the request takes, and so is one with a frame within the threshold: neither is ever closed for a
  newcomer. When every session is in use, the newcomer is refused as before (``CAPACITY_REACHED``, the
  message saying that none was silent long enough), and its socket closes with ``SERVER_FULL_CLOSE_CODE``
  (1013, RFC 6455's Try Again Later) instead of a normal close.
- While slots are free, silence closes nothing: a trainer's session may wait minutes for the model's next
  turn. (openenv's reaper still frees the slot of a session idle for ``session_timeout_s``.)

How it hooks openenv: ``_ConnectionActivity`` is an ASGI middleware that notes, for each ``/ws``
connection, when a frame last went either way and whether a request is in flight, and keeps the
connection's ASGI ``send`` so that its socket can be closed from another task. openenv's ``/ws`` handler
makes its session with ``HTTPEnvServer._create_session()``; ``SilentSessionEviction`` wraps that method on
the app's server: at capacity it closes the longest-silent session (openenv's own ``_destroy_session``
frees the slot) and tries again. The evicted connection's handler is waiting for the client's next frame:
it gets a disconnect (a frame that still arrives is turned into one) and whatever it sends afterwards goes
nowhere. openenv's own ``SessionInfo.last_activity_at`` is not enough for the rule: it is set when a reset
or step has finished, so it cannot tell a silent session from one in the middle of a long request, and a
``state`` call does not set it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from openenv.core.env_server.exceptions import SessionCapacityError
from openenv.core.env_server.http_server import HTTPEnvServer

__all__ = [
    "DEFAULT_EVICT_SILENT_AFTER_S",
    "EVICTED_CLOSE_CODE",
    "SERVER_FULL_CLOSE_CODE",
    "SilentSessionEviction",
    "install_eviction",
]

logger = logging.getLogger(__name__)

DEFAULT_EVICT_SILENT_AFTER_S = 30.0  # a working client answers within seconds; a training turn may not
EVICTED_CLOSE_CODE = 4408  # application close codes are 4000-4999; 4000 + HTTP 408 Request Timeout
SERVER_FULL_CLOSE_CODE = 1013  # RFC 6455: Try Again Later


def install_eviction(app: FastAPI, evict_silent_after_s: float) -> SilentSessionEviction:
    """Give ``app``'s ``/ws`` sessions the eviction rule (see the module docstring); add it last, so that
    its middleware sees every frame before the other middleware does."""
    eviction = SilentSessionEviction(_env_server(app), evict_silent_after_s)
    app.add_middleware(_ConnectionActivity, eviction=eviction)
    return eviction


@dataclass(eq=False)
class _Connection:
    """One ``/ws`` connection, as the eviction rule sees it."""

    send: Callable[[dict], Awaitable[None]]  # the server's own ASGI send: closes the socket from anywhere
    last_frame_at: float  # time.monotonic() of the last frame either way (or of the connection)
    busy: bool = False  # a request received and not yet answered
    session_id: str | None = None
    evicted: bool = False
    refused: str = ""  # the close reason when the server was full and none could make way


_CURRENT_CONNECTION: contextvars.ContextVar[_Connection | None] = contextvars.ContextVar(
    "fleet_ws_connection", default=None
)


class SilentSessionEviction:
    """The eviction rule on one openenv ``HTTPEnvServer``: wraps its ``_create_session`` (see the module
    docstring)."""

    def __init__(self, server: HTTPEnvServer, evict_silent_after_s: float) -> None:
        if not evict_silent_after_s > 0:
            raise ValueError(f"evict_silent_after_s must be > 0, got {evict_silent_after_s}")
        self.server = server
        self.evict_silent_after_s = evict_silent_after_s
        self.evictions = 0
        self._connections: dict[str, _Connection] = {}  # session id -> the /ws connection that owns it
        self._closing: set[asyncio.Task] = set()  # eviction closes still being sent
        self._openenv_create_session = server._create_session
        server._create_session = self.create_session

    async def create_session(self) -> tuple[str, Any]:
        """openenv's ``_create_session``, with the longest-silent session making way while the server is
        full; raises ``SessionCapacityError`` when every session is in use."""
        connection = _CURRENT_CONNECTION.get()
        while True:
            try:
                session_id, env = await self._openenv_create_session()
                break
            except SessionCapacityError as full:
                if not await self._evict_longest_silent():
                    raise self._refusal(full, connection) from None
        if connection is not None:
            connection.session_id = session_id
            self._connections[session_id] = connection
        return session_id, env

    def forget(self, connection: _Connection) -> None:
        """The connection has ended."""
        if connection.session_id is not None and self._connections.get(connection.session_id) is connection:
            del self._connections[connection.session_id]

    async def _evict_longest_silent(self) -> bool:
        now = time.monotonic()
        silent = [
            connection
            for session_id, connection in self._connections.items()
            if session_id in self.server._sessions  # not reaped by openenv meanwhile
            and not connection.busy
            and now - connection.last_frame_at >= self.evict_silent_after_s
        ]
        if not silent:
            return False
        victim = min(silent, key=lambda connection: connection.last_frame_at)
        victim.evicted = True  # from here on, no frame of it reaches its handler (no await since the check)
        del self._connections[victim.session_id]
        sessions = f"{len(self.server._sessions)}/{self.server._max_concurrent_envs} sessions"
        reason = (
            f"evicted: silent for {now - victim.last_frame_at:.1f} s while the server was full ({sessions})"
        )
        logger.info("session %s %s", victim.session_id, reason)
        self.evictions += 1
        close = asyncio.get_running_loop().create_task(_close(victim.send, EVICTED_CLOSE_CODE, reason))
        self._closing.add(close)  # a task nobody references may be collected before it runs
        close.add_done_callback(self._closing.discard)
        await self.server._destroy_session(victim.session_id)
        return True

    def _refusal(self, full: SessionCapacityError, connection: _Connection | None) -> SessionCapacityError:
        sessions = f"{full.active_sessions}/{full.max_sessions} sessions in use"
        if connection is not None:
            connection.refused = f"server full: {sessions}"
        return SessionCapacityError(
            full.active_sessions,
            full.max_sessions,
            f"Server at capacity: {sessions}, none silent for {self.evict_silent_after_s:g} s or more "
            "(a silent one would have made way). Try again later.",
        )


async def _close(send: Callable[[dict], Awaitable[None]], code: int, reason: str) -> None:
    with contextlib.suppress(OSError, RuntimeError):  # the client left first
        await send({"type": "websocket.close", "code": code, "reason": reason})


class _ConnectionActivity:
    """ASGI middleware: each ``/ws`` connection's frames, for ``SilentSessionEviction``."""

    def __init__(self, app, eviction: SilentSessionEviction) -> None:
        self.app = app
        self.eviction = eviction

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "websocket" or scope["path"] != "/ws":
            await self.app(scope, receive, send)
            return
        connection = _Connection(send=send, last_frame_at=time.monotonic())

        async def receive_frame():
            message = await receive()
            if message["type"] == "websocket.receive":
                if connection.evicted:
                    return {"type": "websocket.disconnect", "code": EVICTED_CLOSE_CODE}
                connection.busy = True
            connection.last_frame_at = time.monotonic()
            return message

        async def send_frame(message) -> None:
            if connection.evicted:
                return  # the eviction has closed the socket
            if message["type"] == "websocket.send":
                connection.busy = False
                connection.last_frame_at = time.monotonic()
            elif message["type"] == "websocket.close" and connection.refused:
                message = {**message, "code": SERVER_FULL_CLOSE_CODE, "reason": connection.refused}
            await send(message)

        token = _CURRENT_CONNECTION.set(connection)  # create_session reads it: same task, same context
        try:
            await self.app(scope, receive_frame, send_frame)
        finally:
            _CURRENT_CONNECTION.reset(token)
            self.eviction.forget(connection)


def _env_server(app: FastAPI) -> HTTPEnvServer:
    """The ``HTTPEnvServer`` behind ``app``'s ``/ws`` route: openenv's app factory keeps no other handle on
    it, and its ``/ws`` handler is a closure over it."""
    for route in app.routes:
        if getattr(route, "path", None) == "/ws":
            for cell in getattr(route.endpoint, "__closure__", None) or ():
                with contextlib.suppress(ValueError):  # an empty cell
                    if isinstance(cell.cell_contents, HTTPEnvServer):
                        return cell.cell_contents
    raise RuntimeError(
        "no openenv HTTPEnvServer behind the app's /ws route: has openenv's app factory changed?"
    )
