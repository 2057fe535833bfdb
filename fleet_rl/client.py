"""``FleetEnv``: the openenv client of the fleet environment server (``python -m fleet_rl.server``).

Each client holds one WebSocket session (its own ``FleetEnvironment`` on the server):

    from fleet_rl.client import FleetAction, FleetEnv

    with FleetEnv(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(task="medium", seed=1, mode="refine", max_turns=3)
        messages = result.observation.messages          # the chat prompt, as in training
        result = env.step(FleetAction(plan=completion))  # .reward, .done, .observation.feedback
        env.state()                                      # FleetState: every plan's reward so far

    async with FleetEnv(base_url=url) as env:            # async: the same calls, awaited
        result = await env.reset(task="hard", seed=7)

``reset`` takes the ``FleetEnvironment.reset`` parameters (task, seed, split, mode, max_turns, turn_cost,
agent, scenario). A server-side refusal (unknown task, a step after done, capacity reached) raises
``RuntimeError`` with the server's message, as openenv's clients do.
"""

from __future__ import annotations

from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult

from fleet_rl.env.models import FleetAction, FleetObservation, FleetState

__all__ = ["FleetAction", "FleetEnv", "FleetObservation", "FleetState"]


class FleetEnv(EnvClient[FleetAction, FleetObservation, FleetState]):
    """Client for the fleet environment (see the module docstring)."""

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
