"""Which errors of a call to an environment server are the server's fault, and which are the request's own.

An episode that runs on a server (``fleet_rl/env/remote_episode.py``) fails over to another server when the
server fails, and only then: a request the server refused on its merits (a 4xx, an error frame about the
request) would be refused by every server alike, so failing over for it would mark every server dead for
one bad answer. ``server_fault(error)`` says which kind an exception raised by a call through openenv's
client (``fleet_rl.env.client.FleetEnv``) is:

- the server's fault (returns a short reason): the connection was refused, reset or closed (the server
  died, restarted, or closed the session: a reaped session is a closed socket), a call or the handshake
  timed out, the server evicted the session (``SessionEvicted``: it was full and this session had been
  silent for its ``--evict-silent-after-s``), or the server answered with an error frame about itself:
  ``CAPACITY_REACHED`` (``ServerFull``: ``--max-sessions`` sessions are open and in use),
  ``FACTORY_ERROR`` or ``SESSION_ERROR`` (it could not make or keep a session);
- the request's own fault (returns ``None``): every other error frame (``EXECUTION_ERROR``: the episode
  refused the request, e.g. a step after the episode is done; ``VALIDATION_ERROR``, ``INVALID_JSON``,
  ``UNKNOWN_TYPE``) and any other exception (a bug of ours is no reason to mark servers dead).

openenv's client turns an error frame into ``RuntimeError("Server error: <message> (code: <CODE>)")``;
the code is read back from that text (``ERROR_FRAME``).
"""

from __future__ import annotations

import asyncio
import re

from websockets.exceptions import ConnectionClosed, InvalidHandshake

from fleet_rl.env.client import ServerFull, SessionEvicted

__all__ = ["SERVER_ERROR_CODES", "SessionLost", "server_fault"]

ERROR_FRAME = re.compile(r"^Server error: .*\(code: (?P<code>[A-Z_]+)\)$", re.DOTALL)
SERVER_ERROR_CODES = {  # openenv's WSErrorCode values that are about the server, not the request
    "CAPACITY_REACHED": "at capacity",
    "FACTORY_ERROR": "could not create a session",
    "SESSION_ERROR": "session error",
}


class SessionLost(ConnectionResetError):
    """The WebSocket of an episode's session closed between calls: the server-side episode is gone (the
    server died or restarted, or reaped the session). Reconnecting would open a new, empty session."""


def server_fault(error: BaseException) -> str | None:
    """A short reason when ``error`` is the server's fault, ``None`` when it is the request's own (see the
    module docstring)."""
    if isinstance(error, ServerFull):
        return "at capacity"
    if isinstance(error, SessionEvicted):
        return "session evicted (silent while the server was full)"
    if isinstance(error, RuntimeError) and not isinstance(error, ConnectionError):
        match = ERROR_FRAME.match(str(error))
        if match is None:
            return None
        return SERVER_ERROR_CODES.get(match["code"])
    if isinstance(error, SessionLost):
        return "session lost"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, (ConnectionClosed, ConnectionResetError, EOFError)):
        return "connection reset"
    if isinstance(error, ConnectionError):  # openenv's wrapper of a failed connect: the cause says why
        cause = error.__cause__
        if isinstance(cause, (TimeoutError, asyncio.TimeoutError)):
            return "connect timed out"
        return server_fault(cause) if isinstance(cause, OSError) else "connection failed"
    if isinstance(error, InvalidHandshake):
        return "handshake failed"
    if isinstance(error, TimeoutError):
        return "call timed out"
    if isinstance(error, OSError):
        return "network error"
    return None
