"""The fleet planning task as an OpenEnv environment.

    from fleet_rl.env import FleetAction, FleetEnvironment
    env = FleetEnvironment()
    observation = env.reset(task="medium", seed=1, mode="refine")
    observation = env.step(FleetAction(plan=completion_text))   # .reward, .done, .jobs, .feedback

The server (``python -m fleet_rl.server``) serves it over HTTP and WebSocket; ``fleet_rl.env.client.FleetEnv``
connects to it.

The names below load on first use (PEP 562): ``import openenv.core`` alone loads OpenEnv's server stack
(gradio, MCP, FastAPI, uvicorn; ~2.6 s), which training and evaluation need only when episodes run through
the environment (``episode_mode: refine``). So ``fleet_rl.env.server_pool`` and ``fleet_rl.env.feedback``,
which import no OpenEnv, can be imported without it (``tests/test_entry_point_imports.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fleet_rl.env.environment import EpisodeError, FleetEnvironment, episode_reward
    from fleet_rl.env.models import MODES, FleetAction, FleetObservation, FleetState, JobFeedback

_HOMES = {
    "EpisodeError": "fleet_rl.env.environment",
    "FleetEnvironment": "fleet_rl.env.environment",
    "episode_reward": "fleet_rl.env.environment",
    "MODES": "fleet_rl.env.models",
    "FleetAction": "fleet_rl.env.models",
    "FleetObservation": "fleet_rl.env.models",
    "FleetState": "fleet_rl.env.models",
    "JobFeedback": "fleet_rl.env.models",
}

__all__ = [
    "MODES",
    "EpisodeError",
    "FleetAction",
    "FleetEnvironment",
    "FleetObservation",
    "FleetState",
    "JobFeedback",
    "episode_reward",
]
assert sorted(__all__) == sorted(_HOMES)


def __getattr__(name: str):
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
        globals()[name] = value  # once loaded, an ordinary attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
