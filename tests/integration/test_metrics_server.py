"""The /metrics responder of a role process (`MetricsServer`), spoken to over real sockets.

GET /metrics answers the scrape; another path is 404, another method 405, a
malformed or oversized request 400. A store that cannot be read answers 503,
logged once per outage, and the server answers again once the store can be
read. The responder is the same whatever the store: these tests run on SQLite
(the scrape's store gauges on both backends are in test_metrics_text.py).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from shepherd import App, ConfigError
from shepherd.exposition import CONTENT_TYPE, MetricsServer
from shepherd.exposition.server import MAX_REQUEST_BYTES
from support.backends import sqlite_only

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


#: The server's request timeout here: a client that never finishes its request is
#: cut off after it (the default, 10 s, is longer than a test should wait).
REQUEST_TIMEOUT = 1.0
#: The request timeout while the test waits for a stalled client to be cut off.
CUT_OFF = 0.05


@pytest.fixture
async def server(app: App) -> AsyncIterator[MetricsServer]:
    started = MetricsServer(app, port=0, request_timeout=REQUEST_TIMEOUT)
    await started.start()
    try:
        yield started
    finally:
        await started.close()


async def raw(server: MetricsServer, request: bytes) -> bytes:
    """Send `request` as is; the whole answer (the server closes the connection)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(request)
        await writer.drain()
        return await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()


@sqlite_only()
async def test_get_metrics_answers_a_scrape_in_the_text_format(server: MetricsServer) -> None:
    async with httpx.AsyncClient() as client:
        answer = await client.get(server.url)
        head = await client.head(server.url + "?name=x")

    assert answer.status_code == 200
    assert answer.headers["content-type"] == CONTENT_TYPE
    names = {family.name for family in text_string_to_metric_families(answer.text)}
    assert {"shepherd_tasks", "shepherd_agent_calls", "shepherd_step_duration_seconds"} <= names
    assert head.status_code == 200
    assert head.content == b""
    assert server.scrapes == 2


@sqlite_only()
async def test_other_paths_methods_and_malformed_requests_are_refused(
    server: MetricsServer,
) -> None:
    async with httpx.AsyncClient() as client:
        other = await client.get(server.url.replace("/metrics", "/metricsx"))
        posted = await client.post(server.url, content=b"x")

    assert other.status_code == 404
    assert posted.status_code == 405
    assert posted.headers["allow"] == "GET, HEAD"
    assert (await raw(server, b"nonsense\r\n\r\n")).startswith(b"HTTP/1.1 400 ")
    oversized = b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * MAX_REQUEST_BYTES + b"\r\n\r\n"
    assert (await raw(server, oversized)).startswith(b"HTTP/1.1 400 ")
    # A client that stops mid-request is cut off unanswered once the request
    # timeout passes (a short one, for this connection); the next scrape is answered.
    server.request_timeout = CUT_OFF
    assert await raw(server, b"GET /metr") == b""
    server.request_timeout = REQUEST_TIMEOUT
    async with httpx.AsyncClient() as client:
        assert (await client.get(server.url)).status_code == 200


async def test_a_store_that_cannot_be_read_answers_503_logged_once_until_it_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    later = tmp_path / "later"
    app = App(f"sqlite:///{later}/s.db", alerts=())
    server = MetricsServer(app, port=0)
    await server.start()
    caplog.set_level(logging.INFO, logger="shepherd.metrics")
    try:
        async with httpx.AsyncClient() as client:
            first = await client.get(server.url)
            second = await client.get(server.url)
            later.mkdir()
            back = await client.get(server.url)
    finally:
        await server.close()
        await app.close()

    assert (first.status_code, second.status_code, back.status_code) == (503, 503, 200)
    assert first.text.startswith("store unavailable: cannot open SQLite store")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "scrapes answer 503" in warnings[0].getMessage()
    assert any("can be read again" in r.getMessage() for r in caplog.records)


@sqlite_only()
async def test_a_port_in_use_is_a_config_error_naming_the_address(app: App) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = MetricsServer(app, port=port)

        with pytest.raises(ConfigError, match=f"cannot serve metrics on 127.0.0.1:{port}: "):
            await server.start()
