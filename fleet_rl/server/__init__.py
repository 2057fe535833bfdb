"""The fleet environment's OpenEnv server: ``python -m fleet_rl.server --host 127.0.0.1 --port 8000``."""

from fleet_rl.server.app import create_fleet_app

__all__ = ["create_fleet_app"]
