"""Run the environment server: ``python -m fleet_rl.server [--host H] [--port P] [--no-web]``.

One process (the environment is CPU-light: a step costs well under a millisecond of kernel time, so one
event loop with openenv's per-session threads serves many sessions; ``benchmarks/server/load.py``
measures it). WebSocket frames are capped at the request-body limit (``ws_max_size``; a larger frame closes
that connection with code 1009 and the server goes on serving). WebSocket compression (permessage-deflate)
is off unless ``--ws-compression``: an observation is ~7 KB of JSON, and deflating it on both ends cost as
much CPU as the environment's step itself (a py-spy profile of the server at one session), which a server
and its trainer on one network do not need; turn it on for a slow link. While all ``--max-sessions`` slots
are taken, a newcomer gets the slot of the session silent longest, if for ``--evict-silent-after-s`` (30 s)
or more; that session's socket is closed with code 4408 (``fleet_rl/server/eviction.py``).
"""

from __future__ import annotations

import argparse

from fleet_rl.server.app import (
    DEFAULT_EVICT_SILENT_AFTER_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_TIMEOUT_S,
    create_fleet_app,
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fleet_rl.server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (0.0.0.0 for every one)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS, help="concurrent /ws sessions"
    )
    parser.add_argument(
        "--session-timeout-s",
        type=float,
        default=DEFAULT_SESSION_TIMEOUT_S,
        help="idle sessions are closed after this many seconds",
    )
    parser.add_argument(
        "--evict-silent-after-s",
        type=float,
        default=DEFAULT_EVICT_SILENT_AFTER_S,
        help="while every session slot is taken, a newcomer gets the slot of the session silent longest, "
        "if for this many seconds or more (its socket closes with code 4408); 0 turns eviction off",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="largest HTTP body or WebSocket frame accepted",
    )
    parser.add_argument(
        "--ws-compression",
        action="store_true",
        help="negotiate WebSocket permessage-deflate (off: it costs CPU per message; for slow links)",
    )
    parser.add_argument("--no-web", action="store_true", help="leave out the Gradio UI at /web")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    if args.max_sessions < 1 or args.max_body_bytes < 1024:
        parser.error("--max-sessions must be >= 1 and --max-body-bytes >= 1024")

    import uvicorn

    app = create_fleet_app(
        max_sessions=args.max_sessions,
        session_timeout_s=args.session_timeout_s,
        max_body_bytes=args.max_body_bytes,
        evict_silent_after_s=args.evict_silent_after_s,
        web=not args.no_web,
    )
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        ws_max_size=args.max_body_bytes,
        ws_per_message_deflate=args.ws_compression,
        log_level=args.log_level,
    )


if __name__ == "__main__":
    main()
