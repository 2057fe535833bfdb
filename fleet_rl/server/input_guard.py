"""Malformed JSON stops at the server's door: HTTP bodies get 400, WebSocket frames an error frame.

A pure ASGI middleware that checks what clients send with ``strict_json_loads``
(``fleet_rl/server/strict_json.py``) before any route or openenv's WebSocket loop sees it:

- an HTTP ``POST``/``PUT``/``PATCH`` body sent as JSON (content type ``application/json`` or ``*+json``,
  or none: openenv's ``/mcp`` reads any body as JSON) that is not UTF-8, holds a non-finite number
  (``NaN``, ``Infinity``, ``1e999``) or a lone surrogate (``"\\ud800"``), nests too deeply or holds an
  integer over Python's digit limit gets ``400`` with a JSON ``detail`` saying which. A plain syntax error
  goes on to FastAPI, which answers 422 (``json_invalid``) as before.
- a WebSocket frame (on ``/ws`` and every other socket) that is not UTF-8, not JSON, breaks one of the rules
  above or is not a JSON object gets an error frame in openenv's format (``{"type": "error", "data":
  {"message", "code"}}``, code ``INVALID_JSON`` or ``VALIDATION_ERROR``), and the session goes on. A binary
  frame holding UTF-8 JSON is read as the text frame it should have been. (A *text* frame that is not
  UTF-8 never gets here: the WebSocket layer closes that connection with 1007, invalid payload data.)

Without this, such input reached openenv and FastAPI, whose error answers then failed to serialize it
(HTTP 500), and openenv's socket loop answered a binary frame or a JSON array with ``SESSION_ERROR`` and
closed the session.
"""

from __future__ import annotations

import json
import sys

from openenv.core.env_server.types import WSErrorCode, WSErrorResponse

from fleet_rl.server.strict_json import MalformedJSON, strict_json_loads

__all__ = ["StrictJSONInput"]

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_JSON_KINDS = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


class StrictJSONInput:
    """ASGI middleware: refuse malformed JSON in HTTP bodies (400) and WebSocket frames (error frame)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["method"] in _BODY_METHODS and _is_json(scope):
            await self._http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.app(scope, _guarded_frames(receive, send), send)
        else:
            await self.app(scope, receive, send)

    async def _http(self, scope, receive, send) -> None:
        messages, body = [], bytearray()
        while True:  # the body is bounded by BodySizeLimit, which runs before this
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        problem = _json_problem(bytes(body)) if body else None
        if problem is not None:
            await _answer_400(send, f"malformed JSON body: {problem}")
            return

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _is_json(scope) -> bool:
    """Whether the request's body is meant as JSON: a JSON content type, or none at all.

    (FastAPI itself reads a body without a content type as bytes, and answers 422 for a model body.)"""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            media_type = value.split(b";", 1)[0].strip().lower()
            return media_type == b"application/json" or (
                media_type.startswith(b"application/") and media_type.endswith(b"+json")
            )
    return True


def _json_problem(body: bytes) -> str | None:
    """What makes ``body`` malformed beyond a syntax error (FastAPI answers those itself: 422), or None."""
    try:
        strict_json_loads(body)
    except json.JSONDecodeError:
        return None
    except (ValueError, RecursionError) as error:
        return _describe(error)
    return None


def _describe(error: ValueError | RecursionError) -> str:
    """The caller's view of why ``strict_json_loads`` refused its input."""
    if isinstance(error, RecursionError):
        return "nested too deeply"
    if isinstance(error, MalformedJSON | json.JSONDecodeError):
        return str(error)
    return f"a number has too many digits (over {sys.get_int_max_str_digits()})"  # int()'s own limit


async def _answer_400(send, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _guarded_frames(receive, send):
    """``receive`` that answers malformed frames itself with an error frame and hands on only JSON objects."""

    async def receive_checked():
        while True:
            message = await receive()
            if message["type"] != "websocket.receive":
                return message
            raw = message.get("text")
            if raw is None:
                raw = message.get("bytes") or b""
            text, error = _frame_text(raw)
            if error is None:
                return {"type": "websocket.receive", "text": text}
            await send({"type": "websocket.send", "text": error.model_dump_json()})

    return receive_checked


def _frame_text(raw: str | bytes) -> tuple[str, WSErrorResponse | None]:
    """The frame as text if it holds a JSON object, else the error frame to answer it with."""
    try:
        value = strict_json_loads(raw)
    except (ValueError, RecursionError) as error:
        return "", _error_frame(f"Invalid JSON: {_describe(error)}", WSErrorCode.INVALID_JSON)
    if not isinstance(value, dict):
        kind = _JSON_KINDS.get(type(value), "value")
        message = f"Invalid message: expected a JSON object, got a JSON {kind}"
        return "", _error_frame(message, WSErrorCode.VALIDATION_ERROR)
    return raw if isinstance(raw, str) else raw.decode("utf-8"), None


def _error_frame(message: str, code: WSErrorCode) -> WSErrorResponse:
    return WSErrorResponse(data={"message": message, "code": code})
