"""The server's error answers, written so that writing them can never fail: every bad request gets its 4xx.

FastAPI's default handlers echo the offending input back (pydantic's ``input``, an ``HTTPException``'s
``detail``) through ``JSONResponse``, which refuses non-finite floats and strings with lone surrogates and
whose encoder decodes ``bytes`` as UTF-8. So a request holding ``NaN``, ``"\\ud800"`` or a non-UTF-8 body
under a non-JSON content type failed while its 4xx was being written, and got a 500 instead.
``install_error_handlers`` registers handlers that pass the content through ``json_safe`` first:

- ``RequestValidationError`` (a body, query or path parameter of the wrong type or shape): 422, FastAPI's
  ``{"detail": [errors]}``;
- ``HTTPException`` (openenv's own 422 for a bad action, 404, 405, ...): its status, detail and headers;
- pydantic's ``ValidationError`` where openenv's routes let it through (the web UI's step): 422;
- ``EpisodeError`` (what only the environment can judge): 400 for a bad parameter, 409 for a step before
  reset or after done.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.utils import is_body_allowed_for_status_code
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from fleet_rl.env import EpisodeError

__all__ = ["install_error_handlers", "json_safe"]


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers listed in the module docstring on ``app``."""
    app.add_exception_handler(RequestValidationError, _request_validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(ValidationError, _validation_error)
    app.add_exception_handler(EpisodeError, _episode_error)


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON that ``JSONResponse`` can always write.

    A non-finite float becomes its name (``"nan"``, ``"inf"``, ``"-inf"``), a lone surrogate in a string its
    escape (``"\\\\ud800"``), bytes their UTF-8 text with the undecodable bytes escaped (``"\\\\xff"``);
    other objects go through FastAPI's ``jsonable_encoder`` first.
    """
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "backslashreplace")
    if isinstance(value, dict):
        return {str(json_safe(key)): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(item) for item in value]
    try:
        encoded = jsonable_encoder(value)
    except ValueError:
        encoded = str(value)
    return json_safe(encoded) if encoded is not value else str(value)


def _safe_json_response(status_code: int, content: Any, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(status_code=status_code, content=json_safe(content), headers=headers)


async def _request_validation_error(request: Request, error: RequestValidationError) -> Response:
    return _safe_json_response(422, {"detail": error.errors()})


async def _http_error(request: Request, error: HTTPException) -> Response:
    headers = getattr(error, "headers", None)
    if not is_body_allowed_for_status_code(error.status_code):
        return Response(status_code=error.status_code, headers=headers)
    return _safe_json_response(error.status_code, {"detail": error.detail}, headers)


async def _validation_error(request: Request, error: ValidationError) -> Response:
    errors = error.errors(include_url=False, include_context=False, include_input=False)
    return _safe_json_response(422, {"detail": errors})


async def _episode_error(request: Request, error: EpisodeError) -> Response:
    return _safe_json_response(error.status_code, {"detail": str(error)})
