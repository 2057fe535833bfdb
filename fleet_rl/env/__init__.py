"""The fleet planning task as an OpenEnv environment.

    from fleet_rl.env import FleetAction, FleetEnvironment
    env = FleetEnvironment()
    observation = env.reset(task="medium", seed=1, mode="refine")
    observation = env.step(FleetAction(plan=completion_text))   # .reward, .done, .jobs, .feedback

The server (``python -m fleet_rl.server``) serves it over HTTP and WebSocket; ``fleet_rl.client.FleetEnv``
connects to it.
"""

from fleet_rl.env.environment import EpisodeError, FleetEnvironment, episode_reward
from fleet_rl.env.models import MODES, FleetAction, FleetObservation, FleetState, JobFeedback

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
