"""``FleetEnv``: the openenv client of the fleet environment server (``python -m fleet_rl.server``).

Each client holds one WebSocket session (its own ``FleetEnvironment`` on the server):

    from fleet_rl.env.client import FleetAction, FleetEnv

    with FleetEnv(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(task="medium", seed=1, mode="refine", max_turns=3)
        messages = result.observation.messages          # the chat prompt, as in training
        result = env.step(FleetAction(plan=completion))  # .reward, .done, .observation.feedback
        env.state()                                      # FleetState: every plan's reward so far

    async with FleetEnv(base_url=url) as env:            # async: the same calls, awaited
        result = await env.reset(task="hard", seed=7)

``reset`` takes the ``FleetEnvironment.reset`` parameters (task, seed, split, mode, max_turns, turn_cost,
agent, scenario). A server-side refusal (unknown task, a step after done) raises ``RuntimeError`` with the
server's message, as openenv's clients do. Two refusals about room on the server have names of their own:

- ``ServerFull`` (a ``RuntimeError``): the server refused a new session, every one of its
  ``--max-sessions`` slots being in use (``CAPACITY_REACHED``, then close code 1013). Try again later, or
  another server.
- ``SessionEvicted`` (a ``ConnectionError``): the server closed this client's session (close code 4408)
  to give its slot to a newcomer while it was full, this session having been silent for its
  ``--evict-silent-after-s`` (``fleet_rl/server/eviction.py``). The episode is gone; the call that finds
  out raises it once, and the next call opens a new session (``reset`` first).
"""

from __future__ import annotations

from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from websockets.exceptions import ConnectionClosed
from websockets.frames import Close

from fleet_rl.env.models import FleetAction, FleetObservation, FleetState
from fleet_rl.server.eviction import EVICTED_CLOSE_CODE, SERVER_FULL_CLOSE_CODE

__all__ = ["FleetAction", "FleetEnv", "FleetObservation", "FleetState", "ServerFull", "SessionEvicted"]


class ServerFull(RuntimeError):
    """The server refused a new session: all of its ``--max-sessions`` slots are in use, and none has been
    silent long enough to make way."""


class SessionEvicted(ConnectionError):
    """The server closed this session to give its slot to a newcomer while it was full: the session had been
    silent for the server's ``--evict-silent-after-s``. Its episode is gone."""


class FleetEnv(EnvClient[FleetAction, FleetObservation, FleetState]):
    """Client for the fleet environment (see the module docstring)."""

    async def _connect_async(self):
        self._raise_if_evicted()
        return await super()._connect_async()

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            return await super()._send_and_receive(message)
        except ConnectionClosed as closed:  # the close came instead of the answer
            error = self._closed_error(closed.rcvd)
            if error is None:
                raise
            self._ws, self._ws_loop = None, None  # told once: the next call opens a new session
            raise error from closed
        except RuntimeError as error:
            if str(error).endswith("(code: CAPACITY_REACHED)"):  # openenv's text for the error frame
                raise ServerFull(str(error)) from error
            raise

    def _raise_if_evicted(self) -> None:
        """Raise ``SessionEvicted`` if the server has closed this client's socket to evict it (once: the
        socket is dropped, so the next call opens a new session)."""
        ws = self._ws
        received = ws.protocol.close_rcvd if ws is not None else None
        if received is not None and received.code == EVICTED_CLOSE_CODE:
            self._ws, self._ws_loop = None, None
            raise self._closed_error(received)

    def _closed_error(self, received: Close | None) -> ServerFull | SessionEvicted | None:
        """The error for a close the server sent about room on it, or None for any other close."""
        if received is None:
            return None
        if received.code == EVICTED_CLOSE_CODE:
            return SessionEvicted(
                f"the server at {self._base_url} closed this session ({received.reason}; close code "
                f"{received.code}): its episode is gone; reset to start a new session"
            )
        if received.code == SERVER_FULL_CLOSE_CODE:
            return ServerFull(f"the server at {self._base_url} is full ({received.reason}; close code 1013)")
        return None

    def _step_payload(self, action: FleetAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[FleetObservation]:
        observation = FleetObservation.model_validate(
            {
                **payload.get("observation", {}),
                "reward": payload.get("reward"),
                "done": payload.get("done", False),
            }
        )
        return StepResult(
            observation=observation, reward=payload.get("reward"), done=payload.get("done", False)
        )

    def _parse_state(self, payload: dict[str, Any]) -> FleetState:
        return FleetState.model_validate(payload)
