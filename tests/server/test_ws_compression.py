"""WebSocket compression is off by default (deflating ~7 KB observations on both ends cost as much CPU as the
environment's step) and negotiated with ``--ws-compression``, for slow links."""

from __future__ import annotations

import asyncio

import pytest
from websockets.asyncio.client import connect

from fleet_rl.server.subprocess_server import server_process


async def _negotiated_extensions(base_url: str) -> str | None:
    """The ``Sec-WebSocket-Extensions`` the server answers a client that offers permessage-deflate with."""
    async with connect(base_url.replace("http://", "ws://") + "/ws", compression="deflate") as connection:
        return connection.response.headers.get("Sec-WebSocket-Extensions")


@pytest.mark.parametrize(
    ("extra_args", "deflate_expected"), [((), False), (("--ws-compression",), True)], ids=["default", "on"]
)
def test_websocket_compression_is_negotiated_only_when_asked(extra_args, deflate_expected):
    with server_process(extra_args=extra_args) as base_url:
        extensions = asyncio.run(_negotiated_extensions(base_url))
    assert ("permessage-deflate" in (extensions or "")) is deflate_expected, extensions
