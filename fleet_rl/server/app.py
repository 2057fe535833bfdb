"""The server's app: openenv's app factory for the environment, plus the fleet routes and limits.

``create_fleet_app()`` builds it with openenv (``create_web_interface_app``, which is ``create_app`` with the
web UI; ``create_fastapi_app`` without): ``/reset``, ``/step``, ``/state``, ``/schema``, ``/metadata``,
``/health``, WebSocket sessions at ``/ws`` (one ``FleetEnvironment`` each, up to ``max_sessions``, idle ones
reaped after ``session_timeout_s``) and the Gradio UI at ``/web``. It adds ``/tasks``, ``/grader`` and
``/baseline`` (``fleet_rl/server/routes.py``), a request-body limit (``fleet_rl/server/limits.py``), a
guard that refuses malformed JSON in bodies and WebSocket frames (``fleet_rl/server/input_guard.py``: not
UTF-8, non-finite numbers, lone surrogates), and exception handlers that turn the caller's mistakes into 4xx
answers that can always be written (``fleet_rl/server/error_responses.py``): validation errors 422,
``EpisodeError`` 400 for a bad parameter and 409 for a step before reset or after done. While every session
slot is taken, a newcomer gets the slot of a session silent for ``evict_silent_after_s`` or more, whose
socket is closed with code 4408 (``fleet_rl/server/eviction.py``; 0 or less turns that off).

HTTP ``/reset`` and ``/step`` are stateless in openenv (each builds a fresh environment), so an episode runs
over ``/ws``: ``fleet_rl.env.client.FleetEnv`` does that.
"""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import FastAPI
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.types import ConcurrencyConfig

from fleet_rl.env import FleetAction, FleetEnvironment, FleetObservation, FleetState
from fleet_rl.server.error_responses import install_error_handlers
from fleet_rl.server.eviction import DEFAULT_EVICT_SILENT_AFTER_S, install_eviction
from fleet_rl.server.input_guard import StrictJSONInput
from fleet_rl.server.limits import BodySizeLimit
from fleet_rl.server.routes import router

__all__ = [
    "DEFAULT_EVICT_SILENT_AFTER_S",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_SESSION_TIMEOUT_S",
    "create_fleet_app",
]

DEFAULT_MAX_SESSIONS = 64
WEB_README_PATH = Path(__file__).with_name("web_readme.md")  # the /web page's subtitle and README panel
DEFAULT_SESSION_TIMEOUT_S = 600.0
DEFAULT_MAX_BODY_BYTES = 256 * 1024  # a plan is at most 20,000 characters; a grader log at most 16 plans


def create_fleet_app(
    *,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    evict_silent_after_s: float = DEFAULT_EVICT_SILENT_AFTER_S,
    web: bool = True,
) -> FastAPI:
    """The fleet environment server's ASGI app (see the module docstring)."""
    concurrency = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=session_timeout_s)
    kwargs = dict(env_name="libratio_fleet", concurrency_config=concurrency, state_cls=FleetState)
    if web:
        from openenv.core.env_server.web_interface import create_web_interface_app  # imports gradio

        # openenv reads the page's description and README from the file ENV_README_PATH names; without
        # one the page's subtitle says "FleetEnvironment environment". A path set by the caller wins.
        os.environ.setdefault("ENV_README_PATH", str(WEB_README_PATH))
        app = create_web_interface_app(FleetEnvironment, FleetAction, FleetObservation, **kwargs)
    else:
        app = create_fastapi_app(FleetEnvironment, FleetAction, FleetObservation, **kwargs)
    app.include_router(router)
    install_error_handlers(app)
    app.add_middleware(StrictJSONInput)  # added first, so it runs after BodySizeLimit has bounded the body
    app.add_middleware(BodySizeLimit, max_body_bytes=max_body_bytes)
    if evict_silent_after_s > 0:
        install_eviction(app, evict_silent_after_s)  # added last: its middleware sees every frame first
    return app
