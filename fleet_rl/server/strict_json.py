"""Strict JSON for what clients send: refuse what JSON itself forbids but Python's ``json`` lets through.

Python's ``json.loads`` accepts ``NaN``, ``Infinity`` and ``-Infinity``, turns ``1e999`` into ``inf``,
decodes ``"\\ud800"`` (and, from bytes, the invalid UTF-8 ``ed a0 80``) into a lone surrogate, and reads
UTF-16 and UTF-32 bodies. None of these is JSON (RFC 8259: numbers are finite, strings are Unicode, text
exchanged is UTF-8), and each broke the server further on: a non-finite number or a lone surrogate cannot
be written back into a JSON answer, so the error answer itself failed with a 500.

``strict_json_loads`` parses like ``json.loads`` and raises ``MalformedJSON`` (a ``ValueError``) with a
message for the caller when the input breaks one of those rules. Plain syntax errors still raise
``json.JSONDecodeError``, as ``json.loads`` does, so callers can keep their own answer for those.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["MalformedJSON", "strict_json_loads"]

# A JSON escape that decodes to a UTF-16 surrogate (high D800-DBFF or low DC00-DFFF); only text holding one
# can decode to a lone surrogate, so the slower walk over the parsed value runs only then.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class MalformedJSON(ValueError):
    """Input that is not JSON a client may send: not UTF-8, a non-finite number, or a lone surrogate."""


def strict_json_loads(data: bytes | str) -> Any:
    """``json.loads(data)`` that refuses non-UTF-8 bytes, non-finite numbers and lone surrogates.

    Raises ``MalformedJSON`` for those, ``json.JSONDecodeError`` for a syntax error, and ``ValueError`` or
    ``RecursionError`` where ``json.loads`` does (an integer over Python's digit limit, deep nesting).
    """
    text = _utf8_text(data) if isinstance(data, bytes | bytearray) else data
    value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    if _SURROGATE_ESCAPE.search(text):
        _refuse_lone_surrogates(value)
    return value


def _utf8_text(data: bytes | bytearray) -> str:
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as error:
        raise MalformedJSON(
            f"not UTF-8: byte 0x{data[error.start]:02x} at position {error.start} (JSON text must be UTF-8)"
        ) from None


def _refuse_constant(name: str) -> float:
    raise MalformedJSON(f"{name} is not a JSON number (numbers must be finite)")


def _finite_float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        shown = literal if len(literal) <= 40 else literal[:37] + "..."
        raise MalformedJSON(f"the number {shown} is out of range (numbers must be finite)")
    return number


def _refuse_lone_surrogates(value: Any) -> None:
    """Walk ``value`` (iteratively: JSON may nest deeper than Python's recursion limit allows here)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            _check_string(item)
        elif isinstance(item, dict):
            for key, child in item.items():
                _check_string(key)
                pending.append(child)
        elif isinstance(item, list):
            pending.extend(item)


def _check_string(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        code_point = ord(text[error.start])
        raise MalformedJSON(
            f"a string holds the lone surrogate \\u{code_point:04x} (strings must be valid Unicode)"
        ) from None
