"""A TCP proxy between one worker and its database that a test can stall and cut.

It runs an asyncio server in a thread of its own (the test's event loop stays
free) and forwards bytes both ways. `stall()` stops forwarding in both
directions but keeps every socket open, like a middlebox that stopped passing
packets: the peers see no error, only silence (a connection opened meanwhile is
accepted and hangs too). `cut()` closes every connection (both sides get a
reset). `resume()` forwards again; connections made from then on work.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar, final

__all__ = ["TcpProxy"]

T = TypeVar("T")


@dataclass(eq=False)
class _Link:
    """One proxied connection: the client's side and the server's, once connected."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    pumps: list[asyncio.Task[None]] = field(default_factory=list)

    def abort(self) -> None:
        for writer in (self.client, self.server):
            if writer is None or writer.transport.is_closing():
                continue
            sock = writer.get_extra_info("socket")
            if sock is not None:  # linger 0: the close is a reset, not a FIN
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()


@final
class TcpProxy:
    """Forwards 127.0.0.1:<port> to `upstream`; `port` is chosen by the system.

    Args:
        upstream_host: Where connections go.
        upstream_port: The port there.
    """

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = 0
        #: Connections accepted so far (a client that reconnects shows up here).
        self.accepted = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="tcp-proxy", daemon=True
        )
        self._links: set[_Link] = set()
        self._flowing: asyncio.Event | None = None
        self._server: asyncio.Server | None = None

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _start(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    # -- control (from the test's thread) ---------------------------------------------
    def stall(self) -> None:
        """Stop forwarding both ways; every socket stays open."""
        self._call(self._set_flowing(False))

    def resume(self) -> None:
        """Forward again."""
        self._call(self._set_flowing(True))

    def cut(self) -> int:
        """Close every connection (a reset to both sides); return how many there were."""
        return self._call(self._cut())

    def open_connections(self) -> int:
        return self._call(self._count())

    def close(self) -> None:
        """Stop listening, close every connection, stop the thread."""
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    # -- inside the proxy's loop ---------------------------------------------------------
    async def _set_flowing(self, flowing: bool) -> None:
        assert self._flowing is not None
        if flowing:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _count(self) -> int:
        return len(self._links)

    async def _cut(self) -> int:
        links = list(self._links)
        for link in links:
            link.abort()
        return len(links)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()
        tasks = [pump for link in self._links for pump in link.pumps]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        self.accepted += 1
        link = _Link(client=writer)
        self._links.add(link)
        try:
            await self._flowing.wait()  # a stalled proxy passes nothing, not even a connect
            if writer.transport.is_closing():
                return
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            link.server = up_writer
            if writer.transport.is_closing():  # cut while connecting
                return
            link.pumps = [
                asyncio.create_task(self._pump(reader, up_writer)),
                asyncio.create_task(self._pump(up_reader, writer)),
            ]
            await asyncio.wait(link.pumps, return_when=asyncio.FIRST_COMPLETED)
        except OSError:
            pass
        finally:
            link.abort()
            for pump in link.pumps:
                pump.cancel()
            await asyncio.gather(*link.pumps, return_exceptions=True)
            self._links.discard(link)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        with contextlib.suppress(OSError):
            while True:
                await self._flowing.wait()
                data = await reader.read(65536)
                if not data:
                    return
                await self._flowing.wait()  # read before a stall: held until it ends
                writer.write(data)
                await writer.drain()
