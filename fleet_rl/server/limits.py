"""Request-size limit for the server: an HTTP body over ``max_body_bytes`` gets 413 before any route reads it.

A pure ASGI middleware (so it sees the body before FastAPI parses it): a declared ``Content-Length`` over
the limit is answered at once; a body without one (chunked) is read up to the limit and replayed to the
app, or answered 413 once it passes the limit. WebSocket frames are bounded by uvicorn's ``ws_max_size``
(``fleet_rl/server/__main__.py`` sets it to the same limit), and a plan by ``FleetAction``'s own length
limit.
"""

from __future__ import annotations

import json

__all__ = ["BodySizeLimit"]


class BodySizeLimit:
    """ASGI middleware: HTTP request bodies larger than ``max_body_bytes`` get ``413`` with a JSON detail."""

    def __init__(self, app, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._refuse(send)
            return
        if declared is not None:
            await self.app(scope, receive, send)
            return
        messages, size = [], 0
        while True:  # no Content-Length: read (and count) the body before the app does
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send) -> None:
        body = json.dumps({"detail": f"request body larger than {self.max_body_bytes} bytes"}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
