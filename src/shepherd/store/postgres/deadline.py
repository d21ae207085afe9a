"""One round trip's deadline: past `store_timeout`, the connection's socket is shut down.

A server or a path that stops answering while the socket stays open (a
middlebox that drops everything, a frozen server, a proxy that stalls) fails
nothing on the client side: the kernel's retransmission and keepalive timers
only fire when nobody acknowledges, and a proxy's kernel acknowledges
everything. So every round trip of the store runs under a `Deadline`: a timer
on the event loop (real time, never the app's clock) that, when it fires,
shuts the connection's socket down. psycopg, waiting on that socket, then
reads its end at once and raises `OperationalError`; the connection is broken
and is never reused, and the caller tells by `Deadline.expired` that this
was the timeout.

Cancelling the awaiting task instead would not do: psycopg answers a
cancellation by asking the server to cancel the query and waiting for that,
on a new connection through the same dead path, for up to 10 s more.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from types import TracebackType

    from shepherd.store.postgres.connection import Connection

__all__ = ["Deadline", "sever", "timed_out"]


def sever(conn: Connection) -> None:
    """Shut `conn`'s socket down both ways (its file descriptor stays open for psycopg)."""
    with contextlib.suppress(Exception):  # already closed: nothing waits on it
        fd = conn.pgconn.socket
        sock = socket.socket(fileno=fd)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            sock.detach()  # the descriptor is psycopg's: do not close it here


def timed_out(what: str, seconds: float) -> str:
    """The words of a timeout, naming the setting: `... within store_timeout (5 s)`."""
    return f"{what} did not answer within store_timeout ({seconds:g} s); its connection was closed"


@final
class Deadline:
    """`with Deadline(conn, seconds) as deadline:` severs `conn` if the block outlasts `seconds`.

    Args:
        conn: The connection the block's round trips use.
        seconds: How long they may take together.
    """

    def __init__(self, conn: Connection, seconds: float) -> None:
        self.conn = conn
        self.seconds = seconds
        #: Whether the deadline passed (and the connection was severed).
        self.expired = False
        self._timer: asyncio.TimerHandle | None = None

    def __enter__(self) -> Deadline:
        self._timer = asyncio.get_running_loop().call_later(self.seconds, self._expire)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self.expired = True
        sever(self.conn)
