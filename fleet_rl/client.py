"""Moved: the client is ``fleet_rl.env.client`` (beside the environment it connects to). This name stays so
that ``from fleet_rl.client import FleetEnv`` keeps working; new code imports ``fleet_rl.env.client``."""

from fleet_rl.env.client import (
    FleetAction,
    FleetEnv,
    FleetObservation,
    FleetState,
    ServerFull,
    SessionEvicted,
)

__all__ = ["FleetAction", "FleetEnv", "FleetObservation", "FleetState", "ServerFull", "SessionEvicted"]
