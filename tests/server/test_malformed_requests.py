"""Fuzz a live server (a child process on 127.0.0.1) with malformed input: no answer is a 5xx, no socket
closes with 1011 (internal error), and the server still answers ``/health`` afterwards.

The corpus holds the three kinds of input that used to get 500 (JSON numbers that are not finite, strings
with lone surrogates, bodies that are not UTF-8) beside JSON that is not JSON at all, nests too deeply or
has the wrong shape. Every body goes to every POST route under every content type; the GET routes get the
same bodies (which they ignore) and bad query strings; the WebSocket gets the same kinds of frame.
"""

from __future__ import annotations

import asyncio
import http.client
import json
from urllib.parse import urlsplit

import pytest
import websockets

from fleet_rl.server.subprocess_server import server_process

MALFORMED_BODIES = {
    "nan": b'{"task": "easy", "seed": NaN}',
    "infinity": b'{"task": "easy", "seed": 1, "mode": "refine", "turn_cost": Infinity, "plans": ["{}"]}',
    "minus_infinity": b'{"seed": -Infinity, "action": {"plan": "{}"}}',
    "overflowing_number": b'{"seed": 1e999, "plans": ["{}"]}',
    "nan_deep_inside": b'{"action": {"plan": "{}", "metadata": {"x": [NaN]}}, "seed": 1, "plans": ["{}"]}',
    "lone_high_surrogate": b'{"task": "\\ud800", "seed": 1, "plans": ["{}"], "action": {"plan": "{}"}}',
    "lone_low_surrogate_in_a_plan": b'{"seed": 1, "plans": ["\\udfff"], "action": {"plan": "\\udfff"}}',
    "lone_surrogate_in_a_key": b'{"\\ud800": 1}',
    "surrogate_coded_as_utf8": b'{"task": "\xed\xa0\x80", "seed": 1, "action": {"plan": "\xed\xa0\x80"}}',
    "latin1_not_utf8": b'{"task": "caf\xe9", "seed": 1, "action": {"plan": "caf\xe9"}}',
    "binary": b"\xff\xfe\x00\x01garbage",
    "utf16": '{"seed": 1, "plans": ["{}"], "action": {"plan": "{}"}}'.encode("utf-16"),
    "not_json": b"hello, server",
    "truncated": b'{"seed": 1, "plans": ["{}"',
    "array": b'[{"seed": 1}]',
    "string": b'"easy"',
    "null": b"null",
    "too_many_digits": b'{"seed": ' + b"9" * 5000 + b"}",
    "nested_too_deeply": b"[" * 50_000 + b"]" * 50_000,
    "wrong_types": b'{"seed": "seven", "plans": "x", "action": {"plan": 5, "final": "yes"}}',
}
CONTENT_TYPES = ("application/json", None, "text/plain", "application/octet-stream")
POST_ROUTES = ("/reset", "/step", "/grader")  # a malformed body is always a 4xx here
OTHER_POST_ROUTES = ("/mcp", "/libratio_fleet/tasks")  # JSON-RPC may answer 200 with an error: never 5xx
GET_ROUTES = ("/health", "/state", "/schema", "/metadata", "/tasks")
BAD_QUERIES = (
    "/baseline?task=easy&seed=NaN",
    "/baseline?task=easy&seed=1e999",
    "/baseline?task=easy&seed=%FF",
    "/baseline?task=%ED%A0%80&seed=1",
    "/baseline?task=%FF&seed=1",
    "/baseline?task=easy&seed=" + "9" * 5000,
    "/baseline?task=easy&seed=1&agent=%ED%A0%80",
    "/state?x=%FF",
)

MALFORMED_FRAMES = {
    **{name: body for name, body in MALFORMED_BODIES.items() if name != "utf16"},  # bytes: binary frames
    "nan_text": '{"type": "reset", "data": {"task": "easy", "seed": NaN}}',
    "overflow_text": '{"type": "reset", "data": {"task": "easy", "seed": 1e999}}',
    "surrogate_text": '{"type": "step", "data": {"plan": "\\ud800"}}',
    "surrogate_type": '{"type": "\\udc00"}',
    "not_json_text": "step please",
    "array_text": "[1, 2]",
    "number_text": "42",
    "no_data": '{"type": "step"}',
    "data_not_an_object": '{"type": "step", "data": [1]}',
    "unknown_type": '{"type": "launch", "data": {}}',
    "wrong_types": '{"type": "step", "data": {"plan": 5, "final": "yes"}}',
    "unknown_reset_parameter": '{"type": "reset", "data": {"colour": "red"}}',
}


@pytest.fixture(scope="module")
def base_url():
    with server_process(extra_args=("--max-sessions", "8")) as url:
        yield url


def _request(base_url: str, method: str, path: str, body: bytes | None = None, content_type=None):
    """(status, body) of one request on a connection of its own."""
    address = urlsplit(base_url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    try:
        headers = {"content-type": content_type} if content_type else {}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _assert_healthy(base_url: str) -> None:
    status, body = _request(base_url, "GET", "/health")
    assert status == 200 and json.loads(body) == {"status": "healthy"}


@pytest.mark.timeout(120)
def test_malformed_bodies_get_a_4xx_with_a_detail_on_every_route(base_url):
    failures = []
    for name, body in MALFORMED_BODIES.items():
        for content_type in CONTENT_TYPES:
            for path in POST_ROUTES:
                status, answer = _request(base_url, "POST", path, body, content_type)
                if not 400 <= status < 500 or "detail" not in json.loads(answer):
                    failures.append((path, name, content_type, status, answer[:200]))
            for path in OTHER_POST_ROUTES:
                status, answer = _request(base_url, "POST", path, body, content_type)
                if status >= 500:
                    failures.append((path, name, content_type, status, answer[:200]))
            for path in GET_ROUTES if content_type == "application/json" else ():
                status, answer = _request(base_url, "GET", path, body, content_type)
                if status != 200:  # the body of a GET is ignored
                    failures.append((path, name, content_type, status, answer[:200]))
    assert failures == []
    _assert_healthy(base_url)


@pytest.mark.timeout(60)
def test_the_refusals_say_what_was_wrong(base_url):
    cases = {
        "nan": "NaN is not a JSON number",
        "overflowing_number": "the number 1e999 is out of range",
        "lone_high_surrogate": "lone surrogate \\ud800",
        "surrogate_coded_as_utf8": "not UTF-8: byte 0xed",
        "utf16": "not UTF-8",
        "too_many_digits": "too many digits",
        "nested_too_deeply": "nested too deeply",
    }
    for name, message in cases.items():
        status, answer = _request(base_url, "POST", "/grader", MALFORMED_BODIES[name], "application/json")
        assert status == 400 and message in json.loads(answer)["detail"], (name, answer)
    status, answer = _request(base_url, "POST", "/step", MALFORMED_BODIES["binary"], "text/plain")
    assert status == 422 and json.loads(answer)["detail"][0]["input"].startswith("\\xff\\xfe")


@pytest.mark.timeout(60)
def test_bad_query_strings_get_a_4xx(base_url):
    for path in BAD_QUERIES:
        status, answer = _request(base_url, "GET", path)
        expected_ok = path.startswith("/state")  # /state takes no parameters and ignores them
        assert (status == 200) if expected_ok else (400 <= status < 500), (path, status, answer[:200])
    _assert_healthy(base_url)


@pytest.mark.timeout(60)
def test_malformed_frames_get_an_error_frame_and_the_session_goes_on(base_url):
    ws_url = base_url.replace("http://", "ws://") + "/ws"

    async def probe() -> dict[str, dict]:
        answers = {}
        async with websockets.connect(ws_url, max_size=None) as ws:
            for name, frame in MALFORMED_FRAMES.items():
                await ws.send(frame)
                answers[name] = json.loads(await asyncio.wait_for(ws.recv(), 30))
            await ws.send(json.dumps({"type": "reset", "data": {"task": "easy", "seed": 3}}))
            answers["reset_afterwards"] = json.loads(await asyncio.wait_for(ws.recv(), 30))
        return answers

    answers = asyncio.run(probe())
    assert answers.pop("reset_afterwards")["data"]["observation"]["seed"] == 3
    for name, answer in answers.items():
        assert answer["type"] == "error" and answer["data"]["message"], (name, answer)
        assert answer["data"]["code"] != "SESSION_ERROR", (name, answer)
    assert answers["binary"]["data"]["code"] == "INVALID_JSON"
    assert "not UTF-8" in answers["binary"]["data"]["message"]
    assert "NaN is not a JSON number" in answers["nan_text"]["data"]["message"]
    assert "lone surrogate \\ud800" in answers["surrogate_text"]["data"]["message"]
    assert answers["array_text"]["data"]["code"] == "VALIDATION_ERROR"
    _assert_healthy(base_url)


@pytest.mark.timeout(60)
def test_a_text_frame_that_is_not_utf8_closes_only_its_socket_and_not_with_1011(base_url):
    ws_url = base_url.replace("http://", "ws://") + "/ws"

    async def probe() -> int:
        async with websockets.connect(ws_url) as ws:
            await ws.send(b'{"type": "state", "x": "\xff"}', text=True)  # a text frame must be UTF-8
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
            return closed.value.rcvd.code

    assert asyncio.run(probe()) == 1007  # invalid frame payload data, from the protocol layer
    _assert_healthy(base_url)


@pytest.mark.timeout(60)
def test_a_valid_binary_frame_is_read_as_text(base_url):
    ws_url = base_url.replace("http://", "ws://") + "/ws"

    async def probe() -> dict:
        async with websockets.connect(ws_url) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"task": "easy", "seed": 5}}).encode())
            return json.loads(await asyncio.wait_for(ws.recv(), 30))

    assert asyncio.run(probe())["data"]["observation"]["seed"] == 5
