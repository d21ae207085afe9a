"""A small HTTP responder inside a role process: GET /metrics, and nothing else.

`shepherd run --metrics-port PORT` and `shepherd worker --metrics-port PORT`
start one next to the roles, on the same event loop, because the store's
gauges are async reads of the App's own store (prometheus-client's server
runs in a thread and calls collectors synchronously). It answers one request
per connection: `GET /metrics` (or `HEAD`) with `metrics_text`, 404 for any
other path, 405 for another method, 400 for a malformed or oversized request.
It never takes the roles down: a store that cannot be read answers 503 with a
short message (logged once per outage, not once per scrape), and any other
failure answers 500 and is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import TYPE_CHECKING, final

from shepherd.errors import ConfigError, ShepherdError
from shepherd.exposition.text import CONTENT_TYPE, metrics_text

if TYPE_CHECKING:
    from shepherd.app import App

__all__ = ["MAX_REQUEST_BYTES", "MetricsServer"]

log = logging.getLogger("shepherd.metrics")

#: The most bytes a request's line and headers may take together.
MAX_REQUEST_BYTES = 8192
#: Seconds a client has to send its request before the connection is closed.
REQUEST_TIMEOUT = 10.0

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_TEXT = "text/plain; charset=utf-8"


@final
class MetricsServer:
    """Serves `metrics_text(app)` at `http://host:port/metrics` while it is started.

    Args:
        app: The App whose metrics are served (its store is read at each scrape).
        host: The address to listen on (loopback by default).
        port: The TCP port; 0 lets the system choose one (see `port`).
        request_timeout: Seconds a client has to send its request before the
            connection is closed unanswered.
    """

    def __init__(
        self,
        app: App,
        *,
        host: str = "127.0.0.1",
        port: int,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.app = app
        self.host = host
        self.requested_port = port
        self.request_timeout = request_timeout
        self.scrapes = 0
        self._server: asyncio.Server | None = None
        self._failing = False

    @property
    def port(self) -> int:
        """The port it listens on (the one the system chose for port 0)."""
        if self._server is None or not self._server.sockets:
            return self.requested_port
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    async def start(self) -> None:
        """Listen; from now on scrapes are answered on the running loop.

        Raises:
            ConfigError: The address cannot be listened on (the port is in use,
                the host is not an address of this machine, ...).
        """
        try:
            self._server = await asyncio.start_server(
                self._serve, self.host, self.requested_port, limit=MAX_REQUEST_BYTES
            )
        except OSError as exc:
            # asyncio words its own message around the system's: keep the system's.
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            raise ConfigError(
                "metrics_port",
                f"cannot serve metrics on {self.host}:{self.requested_port}: {why}",
            ) from None

    async def close(self) -> None:
        """Stop listening and close the connections being answered."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                async with asyncio.timeout(self.request_timeout):
                    method, path = await _read_request(reader)
            except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                await _send(writer, 400, _TEXT, b"bad request\n")
                return
            if path.split("?", 1)[0] != "/metrics":
                await _send(writer, 404, _TEXT, b"not found: try /metrics\n")
            elif method not in ("GET", "HEAD"):
                await _send(writer, 405, _TEXT, b"only GET /metrics\n", allow="GET, HEAD")
            else:
                status, content_type, body = await self._scrape()
                await _send(writer, status, content_type, body, head=method == "HEAD")
        except (ConnectionError, TimeoutError):
            pass  # the client went away, or never finished its request
        except Exception:
            log.exception("metrics: answering a request failed")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _scrape(self) -> tuple[int, str, bytes]:
        try:
            body = await metrics_text(self.app)
        except ShepherdError as exc:
            if not self._failing:
                log.warning("metrics: cannot read the store, scrapes answer 503: %s", exc)
            self._failing = True
            return 503, _TEXT, f"store unavailable: {exc}\n".encode()
        except Exception:
            log.exception("metrics: a scrape failed")
            return 500, _TEXT, b"internal error (see the process's log)\n"
        if self._failing:
            log.info("metrics: the store can be read again")
            self._failing = False
        self.scrapes += 1
        return 200, CONTENT_TYPE, body


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str]:
    """The request's method and target; its headers are read and dropped (bounded).

    Raises:
        ValueError: A malformed request line, or line and headers over the limit.
    """
    line = await reader.readuntil(b"\n")
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise ValueError("malformed request line")
    size = len(line)
    while True:
        header = await reader.readuntil(b"\n")
        size += len(header)
        if size > MAX_REQUEST_BYTES:
            raise ValueError("request too large")
        if header in (b"\r\n", b"\n"):
            return parts[0], parts[1]


async def _send(
    writer: asyncio.StreamWriter,
    status: int,
    content_type: str,
    body: bytes,
    *,
    head: bool = False,
    allow: str | None = None,
) -> None:
    lines = [
        f"HTTP/1.1 {status} {_REASONS[status]}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    if allow is not None:
        lines.append(f"Allow: {allow}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    if not head:
        writer.write(body)
    await writer.drain()
